// A rank's memory counters as series, one per source (docs/metrics.md §5 "Memory"): the
// trainer's NVTX marks "memory: <category>" with an integer `bytes` (source "nvtx"), and
// counter lanes "<source> memory: <category>" (CUPTI's memory activity, Kineto's [memory]
// events, Nsight Systems' CUDA memory usage; trace/events.h). The categories of one series
// add up to what its source holds; different sources overlap and are kept apart.
// Shared by the metrics (rank_scan.h) and the viewer's stream (run_events.h).
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "trace/events.h"

namespace rankscope::analyzer {

inline constexpr std::string_view kNvtxMemorySource = "nvtx";

// What a source's counters measure: "the workload's allocations (NVTX memory marks)".
std::string MemorySourceTitle(std::string_view source);

// A category's new value.
struct MemorySample {
  uint32_t category = 0;  // index into MemorySeries::categories
  int64_t ts_ns = 0;      // the rank's clock
  int64_t bytes = 0;
};

struct MemorySeries {
  std::string source;
  std::vector<std::string> categories;  // in first-seen order
  std::vector<MemorySample> samples;    // sorted by time (stable: equal times keep their order)
};

// Gathers one rank's memory samples. Linear in what it is given, plus a sort per series.
class MemorySeriesBuilder {
 public:
  // True when `name` is a memory mark ("memory: <category>"), taken when its `bytes` (in
  // the JSON object `args`) is a non-negative integer.
  bool AddMark(std::string_view name, const std::string& args, int64_t ts_ns);
  // Samples of the memory counters among `lanes` (lanes[i].id == i + 1); others are ignored,
  // as are samples naming no lane and negative or non-finite values.
  void AddCounters(std::span<const trace::Lane> lanes, std::span<const trace::CounterSample> samples);
  // The series by source: "nvtx" first, then by name. Leaves the builder empty.
  std::vector<MemorySeries> Finish();

 private:
  MemorySeries& Series(std::string_view source);
  static void Add(MemorySeries& series, std::string_view category, int64_t ts_ns, int64_t bytes);
  std::map<std::string, MemorySeries, std::less<>> series_;
};

}  // namespace rankscope::analyzer
