#include "analyzer/metrics.h"

#include <algorithm>
#include <cmath>

namespace rankscope::analyzer {

DeviceTimeline::DeviceTimeline(const DeviceActivity& activity)
    : compute_(activity.compute), comm_(activity.comm), memory_(activity.memory), extent_(activity.Extent()) {
  overlap_ = Intersection(compute_, comm_);
  compute_only_ = Difference(compute_, comm_);
  comm_only_ = Difference(comm_, compute_);
  const IntervalSet compute_or_comm = Union(compute_, comm_);
  busy_ = Union(compute_or_comm, memory_);
  memory_only_ = Difference(memory_, compute_or_comm);
}

void FillRatios(Breakdown& b) {
  b.overlap_pct = b.comm_ns > 0 ? 100.0 * static_cast<double>(b.overlap_ns) / static_cast<double>(b.comm_ns) : 0.0;
  if (b.compute_ns > 0) {
    b.comm_compute_ratio = static_cast<double>(b.comm_ns) / static_cast<double>(b.compute_ns);
  } else {
    b.comm_compute_ratio = b.comm_ns > 0 ? std::nullopt : std::optional<double>(0.0);
  }
  b.utilization_pct =
      b.window_ns > 0 ? 100.0 * static_cast<double>(b.busy_ns) / static_cast<double>(b.window_ns) : 0.0;
}

Breakdown DeviceTimeline::Measure(Interval window) const {
  Breakdown b;
  b.window_ns = window.length();
  b.compute_ns = compute_.LengthWithin(window);
  b.comm_ns = comm_.LengthWithin(window);
  b.memory_ns = memory_.LengthWithin(window);
  b.overlap_ns = overlap_.LengthWithin(window);
  b.compute_only_ns = compute_only_.LengthWithin(window);
  b.comm_only_ns = comm_only_.LengthWithin(window);
  b.exposed_comm_ns = b.comm_only_ns;
  b.busy_ns = busy_.LengthWithin(window);
  b.memory_only_ns = memory_only_.LengthWithin(window);
  b.idle_ns = b.window_ns - b.busy_ns;
  FillRatios(b);
  return b;
}

Stats ComputeStats(std::vector<double> samples) {
  Stats stats;
  stats.count = static_cast<int64_t>(samples.size());
  if (samples.empty()) return stats;
  std::sort(samples.begin(), samples.end());
  auto quantile = [&](double q) {
    const double position = q * static_cast<double>(samples.size() - 1);
    const auto below = static_cast<size_t>(std::floor(position));
    const size_t above = std::min(below + 1, samples.size() - 1);
    const double fraction = position - static_cast<double>(below);
    return samples[below] + (samples[above] - samples[below]) * fraction;
  };
  stats.min = samples.front();
  stats.max = samples.back();
  stats.median = quantile(0.5);
  stats.p90 = quantile(0.9);
  return stats;
}

StepStats ComputeStepStats(const std::vector<StepMetrics>& steps) {
  StepStats out;
  auto stats_of = [&](auto value_of) {
    std::vector<double> samples;
    for (const StepMetrics& step : steps) {
      if (!step.aggregated) continue;
      if (std::optional<double> value = value_of(step)) samples.push_back(*value);
    }
    return ComputeStats(std::move(samples));
  };
  auto time = [&](int64_t Breakdown::*field) {
    return stats_of([field](const StepMetrics& s) { return std::optional<double>(static_cast<double>(s.breakdown.*field)); });
  };
  out.step_ns = time(&Breakdown::window_ns);
  out.compute_ns = time(&Breakdown::compute_ns);
  out.comm_ns = time(&Breakdown::comm_ns);
  out.memory_ns = time(&Breakdown::memory_ns);
  out.overlap_ns = time(&Breakdown::overlap_ns);
  out.exposed_comm_ns = time(&Breakdown::exposed_comm_ns);
  out.busy_ns = time(&Breakdown::busy_ns);
  out.idle_ns = time(&Breakdown::idle_ns);
  out.overlap_pct = stats_of([](const StepMetrics& s) { return std::optional<double>(s.breakdown.overlap_pct); });
  out.comm_compute_ratio = stats_of([](const StepMetrics& s) { return s.breakdown.comm_compute_ratio; });
  out.utilization_pct =
      stats_of([](const StepMetrics& s) { return std::optional<double>(s.breakdown.utilization_pct); });
  out.wait_ns = stats_of([](const StepMetrics& s) { return std::optional<double>(static_cast<double>(s.wait_ns)); });
  return out;
}

}  // namespace rankscope::analyzer
