#include "analyzer/classify.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <string_view>

namespace rankscope::analyzer {
namespace {

bool ContainsIgnoringCase(std::string_view text, std::string_view pattern) {
  if (pattern.empty()) return false;
  auto lower = [](char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); };
  const auto found = std::search(text.begin(), text.end(), pattern.begin(), pattern.end(),
                                 [&](char a, char b) { return lower(a) == lower(b); });
  return found != text.end();
}

bool MatchesAny(std::string_view name, const std::vector<std::string>& patterns) {
  return std::any_of(patterns.begin(), patterns.end(),
                     [&](const std::string& pattern) { return ContainsIgnoringCase(name, pattern); });
}

std::optional<ActivityClass> UserClass(std::string_view name, const ClassifyOptions& options) {
  if (MatchesAny(name, options.comm_patterns)) return ActivityClass::kComm;
  if (MatchesAny(name, options.compute_patterns)) return ActivityClass::kCompute;
  return std::nullopt;
}

struct Collected {
  std::vector<Interval> compute, comm, memory;
  void Add(ActivityClass activity_class, int64_t start, int64_t end) {
    Interval interval{start, end};
    switch (activity_class) {
      case ActivityClass::kCompute: compute.push_back(interval); break;
      case ActivityClass::kComm: comm.push_back(interval); break;
      case ActivityClass::kMemory: memory.push_back(interval); break;
    }
  }
};

// The class an NVTX category gives a range, from the rank's "nvtx.category.<domain>.<id>"
// meta entries; nullopt for other categories.
std::optional<ActivityClass> CategoryClass(const trace::RankTrace& trace, const trace::NvtxRangeEvent& range) {
  if (range.category == 0) return std::nullopt;
  const std::string& domain = trace.str(range.domain);
  // The default domain's key has an empty domain part: "nvtx.category..<id>".
  const std::string key = "nvtx.category." + domain + "." + std::to_string(range.category);
  const auto found = trace.meta.entries.find(key);
  if (found == trace.meta.entries.end()) return std::nullopt;
  if (found->second == "compute") return ActivityClass::kCompute;
  if (found->second == "comm") return ActivityClass::kComm;
  return std::nullopt;
}

std::optional<ActivityClass> RoleClass(const trace::Lane* lane) {
  if (lane == nullptr) return std::nullopt;
  switch (lane->role) {
    case trace::LaneRole::kCompute: return ActivityClass::kCompute;
    case trace::LaneRole::kComm: return ActivityClass::kComm;
    case trace::LaneRole::kMemory: return ActivityClass::kMemory;
    case trace::LaneRole::kNone: return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace

const char* ActivityClassName(ActivityClass activity_class) {
  switch (activity_class) {
    case ActivityClass::kCompute: return "compute";
    case ActivityClass::kComm: return "comm";
    case ActivityClass::kMemory: return "memory";
  }
  return "?";
}

ActivityClass ClassifyKernelName(const std::string& name, const ClassifyOptions& options) {
  if (std::optional<ActivityClass> user = UserClass(name, options)) return *user;
  if (ContainsIgnoringCase(name, "nccl")) return ActivityClass::kComm;
  if (name.find("Memcpy") != std::string::npos || name.find("Memset") != std::string::npos) {
    return ActivityClass::kMemory;
  }
  return ActivityClass::kCompute;
}

IntervalSet DeviceActivity::Busy() const { return Union(Union(compute, comm), memory); }

Interval DeviceActivity::Extent() const {
  std::optional<Interval> extent;
  for (const IntervalSet* set : {&compute, &comm, &memory}) {
    if (set->empty()) continue;
    const Interval span{set->intervals().front().start, set->intervals().back().end};
    extent = extent ? Interval{std::min(extent->start, span.start), std::max(extent->end, span.end)} : span;
  }
  return extent.value_or(Interval{});
}

std::vector<DeviceActivity> ClassifyRank(const trace::RankTrace& trace, const ClassifyOptions& options) {
  std::map<int, Collected> per_device;
  auto device_of = [&](trace::LaneId lane_id) {
    const trace::Lane* lane = trace.lane(lane_id);
    return lane != nullptr ? lane->device : kCpuDevice;
  };
  for (const trace::KernelEvent& kernel : trace.events.kernels) {
    per_device[device_of(kernel.lane)].Add(ClassifyKernelName(trace.str(kernel.name), options), kernel.start_ns,
                                           kernel.end_ns);
  }
  for (const trace::MemcpyEvent& copy : trace.events.memcpys) {
    per_device[device_of(copy.lane)].Add(ActivityClass::kMemory, copy.start_ns, copy.end_ns);
  }
  for (const trace::MemsetEvent& set : trace.events.memsets) {
    per_device[device_of(set.lane)].Add(ActivityClass::kMemory, set.start_ns, set.end_ns);
  }
  for (const trace::NvtxRangeEvent& range : trace.events.nvtx_ranges) {
    std::optional<ActivityClass> activity = CategoryClass(trace, range);
    if (!activity) activity = RoleClass(trace.lane(range.lane));
    if (!activity) continue;  // an annotation
    if (std::optional<ActivityClass> user = UserClass(trace.str(range.name), options)) activity = user;
    per_device[kCpuDevice].Add(*activity, range.start_ns, range.end_ns);
  }

  std::vector<DeviceActivity> devices;
  for (auto& [device, collected] : per_device) {
    DeviceActivity activity;
    activity.device = device;
    activity.compute = IntervalSet::FromUnsorted(std::move(collected.compute));
    activity.comm = IntervalSet::FromUnsorted(std::move(collected.comm));
    activity.memory = IntervalSet::FromUnsorted(std::move(collected.memory));
    if (activity.compute.empty() && activity.comm.empty() && activity.memory.empty()) continue;
    devices.push_back(std::move(activity));
  }
  return devices;
}

}  // namespace rankscope::analyzer
