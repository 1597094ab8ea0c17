// METRICS.md §3 for any window of one device, and the aggregates over steps.
#pragma once

#include <vector>

#include "analyzer/classify.h"
#include "analyzer/intervals.h"
#include "analyzer/report.h"

namespace rankscope::analyzer {

// A device's activity with the derived sets built once (C ∩ M, C \ M, M \ C, ...), so that
// each window costs a binary search and a walk over the intervals inside it.
class DeviceTimeline {
 public:
  explicit DeviceTimeline(const DeviceActivity& activity);

  Breakdown Measure(Interval window) const;
  // The whole-trace window: [first activity start, last activity end).
  Interval Extent() const { return extent_; }

 private:
  IntervalSet compute_, comm_, memory_;
  IntervalSet overlap_;        // C ∩ M
  IntervalSet compute_only_;   // C \ M
  IntervalSet comm_only_;      // M \ C
  IntervalSet busy_;           // C ∪ M ∪ Y
  IntervalSet memory_only_;    // Y \ (C ∪ M)
  Interval extent_;
};

// Fills the ratios of a Breakdown from its times (METRICS.md §3).
void FillRatios(Breakdown& breakdown);

// Median, min, max and p90 (linear interpolation between closest ranks, as numpy's
// default); all zero with count 0 for no samples.
Stats ComputeStats(std::vector<double> samples);

// Aggregates of the steps marked `aggregated`.
StepStats ComputeStepStats(const std::vector<StepMetrics>& steps);

}  // namespace rankscope::analyzer
