#include "analyzer/memory_series.h"

#include <algorithm>
#include <cmath>

#include "analyzer/args_internal.h"

namespace rankscope::analyzer {

std::string MemorySourceTitle(std::string_view source) {
  if (source == kNvtxMemorySource) return "the workload's allocations (NVTX memory marks)";
  if (source == trace::kCudaMemorySource) return "CUDA allocations (CUPTI memory activity)";
  if (source == trace::kPytorchAllocatedSource) return "PyTorch's allocator: allocated";
  if (source == trace::kPytorchReservedSource) return "PyTorch's allocator: reserved";
  return std::string(source) + " memory counters";
}

bool MemorySeriesBuilder::AddMark(std::string_view name, const std::string& args, int64_t ts_ns) {
  constexpr std::string_view kPrefix = "memory: ";
  if (!name.starts_with(kPrefix) || name.size() == kPrefix.size()) return false;
  const std::optional<int64_t> bytes = IntField(ParseObject(args), "bytes");
  if (bytes && *bytes >= 0) Add(Series(kNvtxMemorySource), name.substr(kPrefix.size()), ts_ns, *bytes);
  return true;
}

void MemorySeriesBuilder::AddCounters(std::span<const trace::Lane> lanes, std::span<const trace::CounterSample> samples) {
  // Per lane id: its series and category, or none.
  struct Target {
    MemorySeries* series = nullptr;
    std::string_view category;
  };
  std::vector<Target> targets(lanes.size() + 1);
  bool any = false;
  for (size_t i = 0; i < lanes.size(); ++i) {
    if (lanes[i].kind != trace::LaneKind::kCounter) continue;
    const std::optional<trace::MemoryCounter> counter = trace::ParseMemoryCounterName(lanes[i].name);
    if (!counter) continue;
    targets[i + 1] = {&Series(counter->source), counter->category};
    any = true;
  }
  if (!any) return;
  for (const trace::CounterSample& sample : samples) {
    if (sample.lane == trace::kNoLane || sample.lane >= targets.size()) continue;
    const Target& target = targets[sample.lane];
    if (target.series == nullptr || !std::isfinite(sample.value) || sample.value < 0 || sample.value > 9.0e18) continue;
    Add(*target.series, target.category, sample.ts_ns, std::llround(sample.value));
  }
}

std::vector<MemorySeries> MemorySeriesBuilder::Finish() {
  std::vector<MemorySeries> out;
  if (auto nvtx = series_.find(kNvtxMemorySource); nvtx != series_.end()) {
    out.push_back(std::move(nvtx->second));
    series_.erase(nvtx);
  }
  for (auto& [source, series] : series_) out.push_back(std::move(series));
  series_.clear();
  for (MemorySeries& series : out) {
    std::stable_sort(series.samples.begin(), series.samples.end(),
                     [](const MemorySample& a, const MemorySample& b) { return a.ts_ns < b.ts_ns; });
  }
  return out;
}

MemorySeries& MemorySeriesBuilder::Series(std::string_view source) {
  auto it = series_.find(source);
  if (it == series_.end()) {
    it = series_.emplace(std::string(source), MemorySeries{}).first;
    it->second.source = std::string(source);
  }
  return it->second;
}

void MemorySeriesBuilder::Add(MemorySeries& series, std::string_view category, int64_t ts_ns, int64_t bytes) {
  auto found = std::find(series.categories.begin(), series.categories.end(), category);
  if (found == series.categories.end()) found = series.categories.insert(found, std::string(category));
  series.samples.push_back({static_cast<uint32_t>(found - series.categories.begin()), ts_ns, bytes});
}

}  // namespace rankscope::analyzer
