// docs/metrics.md §3 for any window of one device, and the aggregates over steps.
#pragma once

#include <vector>

#include "analyzer/classify.h"
#include "analyzer/intervals.h"
#include "analyzer/report.h"

namespace rankscope::analyzer {

// One device's activity, measured window by window. Each window costs a binary search per
// class and one sweep over the intervals inside it, which splits the window into the time
// spent in each combination of compute, comm and memory: every §3 quantity is a sum of
// those parts (|C ∩ M| is "compute and comm", |M \ C| "comm, not compute", and so on), so
// no derived set is ever built.
class DeviceTimeline {
 public:
  explicit DeviceTimeline(DeviceActivity activity);

  Breakdown Measure(Interval window) const;
  // The whole-trace window: [first activity start, last activity end).
  Interval Extent() const { return extent_; }

 private:
  DeviceActivity activity_;
  Interval extent_;
};

// Fills the ratios of a Breakdown from its times (docs/metrics.md §3).
void FillRatios(Breakdown& breakdown);

// The breakdown of `window` from the step breakdowns inside it, measuring only what the
// steps do not cover. `steps` must be sorted and must not overlap; each step's breakdown
// is over [start_ns, end_ns).
Breakdown MeasureCovering(const DeviceTimeline& timeline, Interval window, const std::vector<StepMetrics>& steps);

// Median, min, max and p90 (linear interpolation between closest ranks, as numpy's
// default); all zero with count 0 for no samples.
Stats ComputeStats(std::vector<double> samples);

// Aggregates of the steps marked `aggregated`.
StepStats ComputeStepStats(const std::vector<StepMetrics>& steps);
// Only StepStats::wait_ns: the part that needs every rank's collectives first.
Stats ComputeWaitStats(const std::vector<StepMetrics>& steps);

}  // namespace rankscope::analyzer
