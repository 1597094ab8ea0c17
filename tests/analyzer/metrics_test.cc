// DeviceTimeline's sweep and MeasureCovering against set algebra on random activity;
// ComputeStats against quantiles read from the fully sorted samples.
#include "analyzer/metrics.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

namespace rankscope::analyzer {
namespace {

IntervalSet RandomSet(std::mt19937_64& random, int count, int64_t span) {
  std::uniform_int_distribution<int64_t> start(0, span), length(1, span / 20);
  std::vector<Interval> intervals;
  for (int i = 0; i < count; ++i) {
    const int64_t s = start(random);
    intervals.push_back({s, s + length(random)});
  }
  return IntervalSet::FromUnsorted(std::move(intervals));
}

// The same quantities, the slow way: set algebra of docs/metrics.md §3, clipped to the window.
Breakdown ByAlgebra(const DeviceActivity& a, Interval window) {
  const IntervalSet c = a.compute.Clip(window), m = a.comm.Clip(window), y = a.memory.Clip(window);
  Breakdown b;
  b.window_ns = window.length();
  b.compute_ns = c.Length();
  b.comm_ns = m.Length();
  b.memory_ns = y.Length();
  b.overlap_ns = Intersection(c, m).Length();
  b.exposed_comm_ns = Difference(m, c).Length();
  b.comm_only_ns = b.exposed_comm_ns;
  b.compute_only_ns = Difference(c, m).Length();
  b.busy_ns = Union(Union(c, m), y).Length();
  b.memory_only_ns = Difference(y, Union(c, m)).Length();
  b.idle_ns = b.window_ns - b.busy_ns;
  FillRatios(b);
  return b;
}

void ExpectSameTimes(const Breakdown& a, const Breakdown& b) {
  EXPECT_EQ(a.window_ns, b.window_ns);
  EXPECT_EQ(a.compute_ns, b.compute_ns);
  EXPECT_EQ(a.comm_ns, b.comm_ns);
  EXPECT_EQ(a.memory_ns, b.memory_ns);
  EXPECT_EQ(a.overlap_ns, b.overlap_ns);
  EXPECT_EQ(a.exposed_comm_ns, b.exposed_comm_ns);
  EXPECT_EQ(a.compute_only_ns, b.compute_only_ns);
  EXPECT_EQ(a.memory_only_ns, b.memory_only_ns);
  EXPECT_EQ(a.busy_ns, b.busy_ns);
  EXPECT_EQ(a.idle_ns, b.idle_ns);
  EXPECT_DOUBLE_EQ(a.overlap_pct, b.overlap_pct);
  EXPECT_DOUBLE_EQ(a.utilization_pct, b.utilization_pct);
}

TEST(DeviceTimeline, SweepAgreesWithSetAlgebraOnRandomActivity) {
  std::mt19937_64 random(7);
  for (int trial = 0; trial < 200; ++trial) {
    DeviceActivity activity;
    activity.compute = RandomSet(random, 40, 10'000);
    activity.comm = RandomSet(random, 10, 10'000);
    activity.memory = RandomSet(random, trial % 3 == 0 ? 0 : 5, 10'000);
    const DeviceTimeline timeline(activity);
    std::uniform_int_distribution<int64_t> point(-500, 10'500);
    int64_t a = point(random), b = point(random);
    if (a > b) std::swap(a, b);
    ExpectSameTimes(timeline.Measure({a, b}), ByAlgebra(activity, {a, b}));
    ExpectSameTimes(timeline.Measure(timeline.Extent()), ByAlgebra(activity, activity.Extent()));
  }
}

TEST(MeasureCovering, EqualsMeasuringTheWholeWindow) {
  std::mt19937_64 random(11);
  for (int trial = 0; trial < 200; ++trial) {
    DeviceActivity activity;
    activity.compute = RandomSet(random, 40, 10'000);
    activity.comm = RandomSet(random, 10, 10'000);
    activity.memory = RandomSet(random, 5, 10'000);
    const DeviceTimeline timeline(activity);
    // Disjoint steps with gaps, some reaching outside the window.
    std::vector<StepMetrics> steps;
    std::uniform_int_distribution<int64_t> gap(0, 800), length(1, 1'500);
    for (int64_t t = -1'000 + gap(random); t < 11'000;) {
      StepMetrics step;
      step.start_ns = t;
      step.end_ns = t + length(random);
      step.breakdown = timeline.Measure({step.start_ns, step.end_ns});
      steps.push_back(step);
      t = step.end_ns + gap(random);
    }
    const Interval window = timeline.Extent();
    ExpectSameTimes(MeasureCovering(timeline, window, steps), timeline.Measure(window));
  }
}

// numpy's default quantile (linear between closest ranks), from sorted samples.
double SortedQuantile(const std::vector<double>& sorted, double q) {
  const double position = q * static_cast<double>(sorted.size() - 1);
  const auto below = static_cast<size_t>(std::floor(position));
  const size_t above = std::min(below + 1, sorted.size() - 1);
  return sorted[below] + (sorted[above] - sorted[below]) * (position - static_cast<double>(below));
}

TEST(ComputeStats, EqualsQuantilesOfTheSortedSamples) {
  std::mt19937_64 random(5);
  for (size_t size = 1; size <= 64; ++size) {
    for (int trial = 0; trial < 4; ++trial) {
      // Few distinct values on odd trials, so ties are common.
      std::uniform_int_distribution<int> value(-50, trial % 2 == 0 ? 1'000'000 : 3);
      std::vector<double> samples;
      for (size_t i = 0; i < size; ++i) samples.push_back(value(random) * 0.25);
      std::vector<double> sorted = samples;
      std::sort(sorted.begin(), sorted.end());
      const Stats stats = ComputeStats(samples);
      ASSERT_EQ(stats.count, static_cast<int64_t>(size));
      // Exactly equal: the same ranks, the same arithmetic.
      EXPECT_EQ(stats.min, sorted.front()) << size;
      EXPECT_EQ(stats.max, sorted.back()) << size;
      EXPECT_EQ(stats.median, SortedQuantile(sorted, 0.5)) << size;
      EXPECT_EQ(stats.p90, SortedQuantile(sorted, 0.9)) << size;
    }
  }
  const Stats none = ComputeStats({});
  EXPECT_EQ(none.count, 0);
  EXPECT_EQ(none.median, 0.0);
}

}  // namespace
}  // namespace rankscope::analyzer
