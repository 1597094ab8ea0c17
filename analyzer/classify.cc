#include "analyzer/classify.h"

#include "analyzer/classify_internal.h"
#include "analyzer/rank_scan.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <string_view>

namespace rankscope::analyzer {
bool ContainsIgnoringCase(std::string_view text, std::string_view pattern) {
  if (pattern.empty()) return false;
  auto lower = [](char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); };
  const auto found = std::search(text.begin(), text.end(), pattern.begin(), pattern.end(),
                                 [&](char a, char b) { return lower(a) == lower(b); });
  return found != text.end();
}

namespace {

bool MatchesAny(std::string_view name, const std::vector<std::string>& patterns) {
  return std::any_of(patterns.begin(), patterns.end(),
                     [&](const std::string& pattern) { return ContainsIgnoringCase(name, pattern); });
}

}  // namespace

std::optional<ActivityClass> UserPatternClass(std::string_view name, const ClassifyOptions& options) {
  if (MatchesAny(name, options.comm_patterns)) return ActivityClass::kComm;
  if (MatchesAny(name, options.compute_patterns)) return ActivityClass::kCompute;
  return std::nullopt;
}

std::optional<ActivityClass> CategoryClassByName(const std::map<std::string, std::string>& meta_entries,
                                                 const std::string& domain, uint32_t category) {
  if (category == 0) return std::nullopt;
  // The default domain's key has an empty domain part: "nvtx.category..<id>".
  const auto found = meta_entries.find("nvtx.category." + domain + "." + std::to_string(category));
  if (found == meta_entries.end()) return std::nullopt;
  if (found->second == "compute") return ActivityClass::kCompute;
  if (found->second == "comm") return ActivityClass::kComm;
  return std::nullopt;
}

std::optional<ActivityClass> RoleClassOf(trace::LaneRole role) {
  switch (role) {
    case trace::LaneRole::kCompute: return ActivityClass::kCompute;
    case trace::LaneRole::kComm: return ActivityClass::kComm;
    case trace::LaneRole::kMemory: return ActivityClass::kMemory;
    case trace::LaneRole::kNone: return std::nullopt;
  }
  return std::nullopt;
}

const char* ActivityClassName(ActivityClass activity_class) {
  switch (activity_class) {
    case ActivityClass::kCompute: return "compute";
    case ActivityClass::kComm: return "comm";
    case ActivityClass::kMemory: return "memory";
  }
  return "?";
}

const char* EventClassName(EventClass event_class) {
  switch (event_class) {
    case EventClass::kCompute: return "compute";
    case EventClass::kComm: return "comm";
    case EventClass::kMemory: return "memory";
    case EventClass::kAnnotation: return "annotation";
    case EventClass::kApiCall: return "API call";
    case EventClass::kSync: return "sync";
    case EventClass::kCollective: return "collective";
    case EventClass::kMark: return "mark";
  }
  return "?";
}

std::optional<ActivityClass> DeviceClassOf(EventClass event_class) {
  if (static_cast<uint8_t>(event_class) <= static_cast<uint8_t>(EventClass::kMemory)) {
    return static_cast<ActivityClass>(event_class);
  }
  return std::nullopt;
}

ActivityClass ClassifyKernelName(const std::string& name, const ClassifyOptions& options) {
  if (std::optional<ActivityClass> user = UserPatternClass(name, options)) return *user;
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
  // The rank scanner is the one implementation of §1.
  RankScanner scanner(ScanOptions{options, {}});
  if (!FeedRankTrace(trace, scanner).ok()) return {};
  Result<RankActivity> activity = scanner.Finish();
  if (!activity.ok()) return {};
  return std::move(activity->devices);
}

}  // namespace rankscope::analyzer
