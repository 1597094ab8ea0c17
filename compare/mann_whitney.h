// The Mann–Whitney U test (Wilcoxon rank-sum), which `rankscope compare` uses to tell a
// real change in per-step samples from noise (docs/metrics.md §7), as Google Benchmark's
// compare.py and asv do.
#pragma once

#include <span>

#include "base/status.h"

namespace rankscope::compare {

enum class Alternative {
  kTwoSided,  // the two samples come from different distributions
  kLess,      // the first sample's values tend to be smaller than the second's
  kGreater,   // the first sample's values tend to be larger than the second's
};

struct MannWhitneyResult {
  // U of the first sample: the pairs (x_i, y_j) with x_i > y_j, plus half the tied pairs.
  // u_first + u_second = n_first · n_second.
  double u_first = 0;
  double u_second = 0;
  double p_value = 1;
  // true: the exact null distribution of U (small samples without ties); false: the normal
  // approximation with the tie correction of the variance and a continuity correction.
  bool exact = false;
};

// Errors (InvalidArgument): an empty sample, or a value that is NaN or infinite.
Result<MannWhitneyResult> MannWhitneyU(std::span<const double> first, std::span<const double> second,
                                       Alternative alternative = Alternative::kTwoSided);

}  // namespace rankscope::compare
