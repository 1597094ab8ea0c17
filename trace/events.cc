#include "trace/events.h"

#include <algorithm>
#include <cctype>
#include <string>
#include <iterator>

#include "trace/event_codec.h"

namespace rankscope::trace {

bool Lane::SameIdentity(const Lane& o) const {
  return kind == o.kind && role == o.role && device == o.device && context == o.context &&
         stream == o.stream && pid == o.pid && tid == o.tid && comm_hash == o.comm_hash &&
         (kind != LaneKind::kCounter || name == o.name);
}

std::string MemoryCounterName(std::string_view source, std::string_view category) {
  std::string name(source);
  name += " memory: ";
  name += category;
  return name;
}

std::string CudaMemoryCategory(MemoryKind kind, int32_t device) {
  static constexpr std::string_view kNames[] = {"unknown", "pageable", "pinned",       "device",
                                                "array",   "managed",  "device static", "managed static"};
  const auto index = static_cast<size_t>(kind);
  std::string category(index < std::size(kNames) ? kNames[index] : kNames[0]);
  if (device >= 0) category += " (gpu " + std::to_string(device) + ")";
  return category;
}

std::optional<MemoryCounter> ParseMemoryCounterName(std::string_view name) {
  constexpr std::string_view kSeparator = " memory: ";
  const size_t at = name.find(kSeparator);
  if (at == std::string_view::npos || at == 0 || at + kSeparator.size() == name.size()) return std::nullopt;
  return MemoryCounter{name.substr(0, at), name.substr(at + kSeparator.size())};
}

size_t EventTables::size() const {
  size_t total = 0;
  codec::ForEachTable(*this, [&](std::string_view, const auto& table) { total += table.size(); });
  return total;
}

void EventTables::clear() {
  codec::ForEachTable(*this, [](std::string_view, auto& table) { table.clear(); });
}

void EventTables::reserve_each(size_t n) {
  codec::ForEachTable(*this, [n](std::string_view, auto& table) { table.reserve(n); });
}

std::string_view DefaultName(CopyKind kind) {
  static constexpr std::string_view kNames[] = {"Memcpy",      "Memcpy HtoD", "Memcpy DtoH", "Memcpy HtoA",
                                                "Memcpy AtoH", "Memcpy AtoA", "Memcpy AtoD", "Memcpy DtoA",
                                                "Memcpy DtoD", "Memcpy HtoH", "Memcpy PtoP"};
  const auto index = static_cast<size_t>(kind);
  return index < std::size(kNames) ? kNames[index] : kNames[0];
}

std::string_view DefaultName(SyncKind kind) {
  switch (kind) {
    case SyncKind::kEventSynchronize: return "Event synchronize";
    case SyncKind::kStreamWaitEvent: return "Stream wait event";
    case SyncKind::kStreamSynchronize: return "Stream synchronize";
    case SyncKind::kContextSynchronize: return "Context synchronize";
    case SyncKind::kUnknown: break;
  }
  return "Synchronize";
}

std::string_view DefaultName(OverheadKind kind) {
  static constexpr std::string_view kNames[] = {
      "Profiler overhead",       "Driver compiler",        "CUPTI buffer flush",    "CUPTI instrumentation",
      "CUPTI resource",          "Runtime module loading", "Lazy function loading", "Command buffer full",
      "Activity buffer request", "UVM activity init"};
  const auto index = static_cast<size_t>(kind);
  return index < std::size(kNames) ? kNames[index] : kNames[0];
}

std::string_view WithoutApiVersion(std::string_view name) {
  const size_t marker = name.rfind("_v");
  if (marker == std::string_view::npos || marker + 2 == name.size()) return name;
  for (size_t i = marker + 2; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return name;
  }
  return name.substr(0, marker);
}

namespace {

// Rows arrive in time order per lane but interleaved across lanes. A stable bucket pass by
// lane (linear) followed by a per-lane check is much cheaper than a comparison sort.
template <typename Record>
void SortTable(std::vector<Record>& table) {
  auto before = [](const Record& a, const Record& b) {
    const LaneId la = codec::LaneOf(a), lb = codec::LaneOf(b);
    return la != lb ? la < lb : codec::StartOf(a) < codec::StartOf(b);
  };
  if (std::is_sorted(table.begin(), table.end(), before)) return;
  LaneId max_lane = 0;
  for (const Record& r : table) max_lane = std::max(max_lane, codec::LaneOf(r));
  constexpr LaneId kMaxBuckets = LaneId{1} << 20;  // absurd lane ids: fall back
  if (max_lane >= kMaxBuckets) {
    std::stable_sort(table.begin(), table.end(), before);
    return;
  }
  std::vector<size_t> offset(max_lane + 2, 0);
  for (const Record& r : table) ++offset[codec::LaneOf(r) + 1];
  for (size_t i = 1; i < offset.size(); ++i) offset[i] += offset[i - 1];
  std::vector<Record> sorted(table.size());
  std::vector<size_t> cursor(offset.begin(), offset.end() - 1);
  for (const Record& r : table) sorted[cursor[codec::LaneOf(r)]++] = r;
  auto by_start = [](const Record& a, const Record& b) { return codec::StartOf(a) < codec::StartOf(b); };
  for (LaneId lane = 0; lane <= max_lane; ++lane) {
    auto first = sorted.begin() + static_cast<ptrdiff_t>(offset[lane]);
    auto last = sorted.begin() + static_cast<ptrdiff_t>(offset[lane + 1]);
    if (!std::is_sorted(first, last, by_start)) std::stable_sort(first, last, by_start);
  }
  table.swap(sorted);
}

}  // namespace

void EventTables::SortByLaneAndTime() {
  codec::ForEachTable(*this, [](std::string_view, auto& table) { SortTable(table); });
}

CollectiveOp CollectiveOpFromName(std::string_view name) {
  std::string lower;
  lower.reserve(name.size());
  for (char c : name) {
    if (c == '_' || c == '-' || c == ' ') continue;
    lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  // Longer names first: "reducescatter" contains "reduce", "allgather" contains "gather".
  static constexpr std::pair<const char*, CollectiveOp> kNames[] = {
      {"reducescatter", CollectiveOp::kReduceScatter}, {"allreduce", CollectiveOp::kAllReduce},
      {"allgather", CollectiveOp::kAllGather},         {"alltoall", CollectiveOp::kAllToAll},
      {"broadcast", CollectiveOp::kBroadcast},         {"sendrecv", CollectiveOp::kUnknown},
      {"reduce", CollectiveOp::kReduce},               {"gather", CollectiveOp::kGather},
      {"scatter", CollectiveOp::kScatter},             {"barrier", CollectiveOp::kBarrier},
      {"send", CollectiveOp::kSend},                   {"recv", CollectiveOp::kRecv},
  };
  for (const auto& [text, op] : kNames) {
    if (lower.find(text) != std::string::npos) return op;
  }
  return CollectiveOp::kUnknown;
}

}  // namespace rankscope::trace
