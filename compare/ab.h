// docs/metrics.md §8: judging interleaved A/B runs (`rankscope ab`). Each pair is one run of A
// and one of B at a world size, made back to back, so whatever slowed the machine during the
// pair slowed both. Per metric and world size the verdict comes from the pairs' log ratios
// ln(B/A): their Hodges–Lehmann center is the typical ratio, the signed-rank interval around
// it says how sure, and the tolerance says how much matters.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "compare/compare.h"

namespace rankscope::compare {

// One metric at one world size: its value in each pair's run of A and of B (same index).
struct PairedMetric {
  int world_size = 0;
  std::string metric;  // MetricInfo::name
  std::vector<double> a, b;
};

enum class AbVerdict {
  kUnchanged,   // the interval lies within the tolerance on both sides
  kImproved,    // the interval excludes "no change" and the center is beyond the tolerance, the good way
  kRegressed,   // ... the bad way
  kCannotTell,  // none of these yet: more pairs would tell
};
const char* AbVerdictName(AbVerdict verdict);

struct AbRow {
  int world_size = 0;
  std::string metric;
  size_t pairs = 0;            // pairs with a positive value on both sides
  double ratio = 1;            // B / A: exp of the Hodges–Lehmann center of ln(B/A)
  std::optional<double> low, high;  // the ratio's interval; none with too few pairs
  double coverage = 0;         // the interval's actual confidence
  double p_value = 1;          // Wilcoxon signed-rank, two-sided, on ln(B/A)
  double tolerance = 0;        // relative: 0.02 = 2%
  AbVerdict verdict = AbVerdict::kCannotTell;
  std::string reason;          // one line
};

struct AbOptions {
  double tolerance = 0.02;
  // Of each interval; `rankscope ab` sets it per look (PlanLooks), from an overall 99%.
  double confidence = 0.99;
  // When given, exactly these metrics with their tolerances; else MetricInfo::gated_by_default.
  std::vector<MetricTolerance> metrics;
};

// The metrics `options` checks, with their tolerances. Errors: an unknown metric name or a
// negative tolerance.
Result<std::vector<MetricTolerance>> AbMetrics(const AbOptions& options);

// One row per PairedMetric whose metric is checked. Values that are not positive and finite
// leave their pair out (a ratio needs both). Errors: a and b of different lengths.
Result<std::vector<AbRow>> JudgePairs(const std::vector<PairedMetric>& paired, const AbOptions& options);

// A run that may stop early looks at its pairs more than once, and each look is a chance of a
// false alarm. Looks come at pair counts growing by half each time (f, then ⌈1.5·previous⌉) up
// to `max_pairs`, which is always one; each look's intervals get confidence
// 1 − (1 − confidence)/looks (Bonferroni), so that over every look the chance of calling an
// unchanged metric regressed stays at most 1 − confidence. The first look `f` is the fewest
// pairs with which such an interval exists (2/2^f <= the look's 1 − confidence), so no look
// is wasted; with too few pairs for any, the last pair is the one look.
struct AbLooks {
  std::vector<int> at;  // pair counts, ascending, the last = max_pairs
  double per_look_confidence = 0.99;
  bool IsLook(int pairs) const;
};
AbLooks PlanLooks(double confidence, int max_pairs);

// True when no row is kCannotTell: more pairs would not change the gate's answer.
bool AllDecided(const std::vector<AbRow>& rows);
bool AnyRegressed(const std::vector<AbRow>& rows);

}  // namespace rankscope::compare
