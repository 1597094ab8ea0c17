// docs/metrics.md §7: a run (or a sweep of runs) against a saved baseline. Each metric has a
// direction and a tolerance; a change counts as a regression only when it is beyond the
// tolerance in the bad direction and, where both sides have per-step samples enough for
// it, a Mann–Whitney U test rejects "no change" at p < alpha. Changes too small to matter
// in absolute terms (under 1% of the step time for times within a step, 0.01 for the
// comm/compute ratio, one point for percentages) are unchanged whatever their percentage.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "compare/comparable.h"
#include "base/status.h"

namespace rankscope::compare {

struct MetricTolerance {
  std::string metric;
  std::optional<double> tolerance;  // relative (0.05 = 5%); empty: CompareOptions::tolerance
};

struct CompareOptions {
  double tolerance = 0.05;
  // --metric: when given, exactly these metrics are checked; else the default set
  // (MetricInfo::gated_by_default) that both sides have.
  std::vector<MetricTolerance> metrics;
  double alpha = 0.01;
  bool force = false;  // compare even when the workloads differ
};

enum class Verdict {
  kUnchanged,       // within the tolerance
  kNotSignificant,  // beyond the tolerance, but the U test cannot tell it from noise
  kImproved,
  kRegressed,
};
const char* VerdictName(Verdict verdict);

struct MetricComparison {
  int world_size = 0;
  std::string metric;     // MetricInfo::name
  double baseline = 0;
  double current = 0;
  // (current − baseline) / |baseline|; ±infinity when the baseline is 0 and current is not.
  double change = 0;
  double tolerance = 0;
  std::optional<double> p_value;  // two-sided U test, when it ran
  size_t baseline_samples = 0, current_samples = 0;
  Verdict verdict = Verdict::kUnchanged;
  std::string reason;     // one line: why this verdict
};

struct Comparison {
  std::string baseline_source, current_source;
  double alpha = 0.01;
  std::vector<MetricComparison> rows;  // by world size, then in ComparableMetrics() order
  std::vector<std::string> notes;      // command lines that differ, forced mismatches, skipped metrics
  bool Regressed() const;
};

// The smallest two-sided p-value a U test can reach with these sample sizes (no ties).
double SmallestTwoSidedP(size_t first_count, size_t second_count);

// Errors: InvalidArgument for an unknown --metric name, a negative tolerance, or a metric
// asked for that neither side has; Inconsistent for different workloads (program, backend,
// batch, accumulation, model size, world sizes) unless `force`, and for no world size in
// common even with it.
Result<Comparison> CompareWithBaseline(const ComparableSet& baseline, const ComparableSet& current,
                                       const CompareOptions& options);

// "5%", "0.05", "12.5%" → 0.05, 0.05, 0.125; errors name the text.
Result<double> ParseTolerance(std::string_view text);
// "throughput", "step_time_ns:10%" → the metric and its tolerance.
Result<MetricTolerance> ParseMetricTolerance(std::string_view text);

}  // namespace rankscope::compare
