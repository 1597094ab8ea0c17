// Paired statistics for A/B runs (`rankscope ab`, docs/metrics.md §8): the Wilcoxon
// signed-rank test on the differences of pairs, and the Hodges–Lehmann estimate of their
// center with its distribution-free confidence interval (the one the test inverts). Drift of
// the machine shifts both sides of a pair alike, so it cancels out of each difference.
#pragma once

#include <cstddef>
#include <optional>
#include <span>

#include "base/status.h"
#include "compare/mann_whitney.h"

namespace rankscope::compare {

struct SignedRankResult {
  size_t n = 0;          // non-zero differences (zeros are dropped, SciPy's zero_method="wilcox")
  double w_plus = 0;     // sum of the ranks of |d| over positive differences
  double w_minus = 0;    // ... over negative ones; w_plus + w_minus = n(n+1)/2
  double p_value = 1;
  // true: the exact null distribution of W+ (n <= 50 and no ties among |d|, SciPy's
  // method="auto"); false: the normal approximation with the tie correction of the
  // variance, without a continuity correction (SciPy's default).
  bool exact = false;
};

// The test of "the differences are symmetric about 0". Errors (InvalidArgument): no
// difference, or one that is NaN or infinite. All differences zero: n = 0, p = 1.
Result<SignedRankResult> WilcoxonSignedRank(std::span<const double> differences,
                                            Alternative alternative = Alternative::kTwoSided);

// The P(W+ <= w) of the exact null distribution for n non-zero, untied differences.
// O(n^3) time, O(n^2) memory.
double SignedRankLowerTail(size_t n, double w);

struct CenterEstimate {
  double estimate = 0;  // the median of the Walsh averages (d_i + d_j)/2, i <= j
  // The interval [W_(k), W_(M+1-k)] of the sorted Walsh averages (M = n(n+1)/2) whose
  // coverage is at least `confidence`, k the largest with 2·P(W+ <= k-1) <= 1 - confidence
  // (exact distribution). nullopt when n is too small for any such interval (n <= 5 at
  // 95%): the data cannot tell the center from anything.
  std::optional<double> lower, upper;
  double coverage = 0;  // 1 - 2·P(W+ <= k-1): the interval's actual confidence
};

// Errors as WilcoxonSignedRank's; `confidence` in (0, 1). O(n^2 log n) time, O(n^2)
// memory: meant for tens or hundreds of pairs.
Result<CenterEstimate> HodgesLehmann(std::span<const double> differences, double confidence = 0.95);

}  // namespace rankscope::compare
