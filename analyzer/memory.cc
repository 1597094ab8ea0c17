#include "analyzer/memory.h"

#include <algorithm>
#include <vector>

#include "analyzer/metrics.h"

namespace rankscope::analyzer {

std::optional<RankMemory> MeasureMemory(const RankActivity& activity, const MemorySeries& series,
                                        const std::set<int64_t>& aggregated_steps) {
  if (series.samples.empty()) return std::nullopt;
  const size_t categories = series.categories.size();
  RankMemory out;
  out.rank = activity.rank;
  out.source = series.source;
  std::vector<int64_t> live(categories, 0), peaks(categories, 0), at_peak(categories, 0);
  // The total after each change, at its time.
  std::vector<int64_t> times, totals;
  int64_t total = 0;
  for (const MemorySample& sample : series.samples) {
    total += sample.bytes - live[sample.category];
    live[sample.category] = sample.bytes;
    peaks[sample.category] = std::max(peaks[sample.category], sample.bytes);
    if (total > out.peak_bytes) {
      out.peak_bytes = total;
      out.peak_at_ns = sample.ts_ns;
      at_peak = live;
    }
    times.push_back(sample.ts_ns);
    totals.push_back(total);
  }
  // Each aggregated step's largest total: the one held when it starts, and every one set
  // inside it.
  std::vector<double> step_peaks;
  for (const StepRange& step : activity.steps) {
    if (aggregated_steps.count(step.number) == 0) continue;
    const auto first_inside = std::upper_bound(times.begin(), times.end(), step.start_ns);
    int64_t peak = first_inside == times.begin() ? 0 : totals[static_cast<size_t>(first_inside - times.begin()) - 1];
    for (auto it = first_inside; it != times.end() && *it < step.end_ns; ++it) {
      peak = std::max(peak, totals[static_cast<size_t>(it - times.begin())]);
    }
    step_peaks.push_back(static_cast<double>(peak));
  }
  for (size_t c = 0; c < categories; ++c) {
    out.at_peak.push_back({series.categories[c], at_peak[c]});
    out.category_peaks.push_back({series.categories[c], peaks[c]});
  }
  if (!step_peaks.empty()) out.step_peak_bytes = ComputeStats(std::move(step_peaks));
  return out;
}

}  // namespace rankscope::analyzer
