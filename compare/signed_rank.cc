#include "compare/signed_rank.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace rankscope::compare {
namespace {

constexpr size_t kExactMaxPairs = 50;

Status CheckFinite(std::span<const double> differences) {
  if (differences.empty()) return InvalidArgument("the signed-rank test needs at least one pair");
  for (double d : differences) {
    if (!std::isfinite(d)) return InvalidArgument(fmt::format("a paired difference is not a finite number ({})", d));
  }
  return Status::Ok();
}

// counts[w] = how many subsets of {1..n} sum to w: the arrangements of signs giving W+ = w.
std::vector<double> SubsetSumCounts(size_t n) {
  const size_t most = n * (n + 1) / 2;
  std::vector<double> counts(most + 1, 0.0);
  counts[0] = 1;
  size_t reach = 0;
  for (size_t rank = 1; rank <= n; ++rank) {
    reach += rank;
    for (size_t w = reach; w >= rank; --w) counts[w] += counts[w - rank];
  }
  return counts;
}

double NormalLowerTail(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }

}  // namespace

double SignedRankLowerTail(size_t n, double w) {
  if (w < 0) return 0;
  const std::vector<double> counts = SubsetSumCounts(n);
  const auto highest = static_cast<size_t>(std::min(std::floor(w), static_cast<double>(counts.size() - 1)));
  double tail = 0;
  for (size_t k = 0; k <= highest; ++k) tail += counts[k];
  return std::min(1.0, tail / std::ldexp(1.0, static_cast<int>(n)));
}

Result<SignedRankResult> WilcoxonSignedRank(std::span<const double> differences, Alternative alternative) {
  RS_RETURN_IF_ERROR(CheckFinite(differences));
  std::vector<double> magnitudes;
  std::vector<bool> positive;
  for (double d : differences) {
    if (d == 0) continue;
    magnitudes.push_back(std::abs(d));
    positive.push_back(d > 0);
  }
  SignedRankResult out;
  out.n = magnitudes.size();
  if (out.n == 0) return out;

  // Ranks of |d|, tied magnitudes sharing the mean of the ranks they span.
  std::vector<size_t> order(out.n);
  for (size_t i = 0; i < out.n; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return magnitudes[a] < magnitudes[b]; });
  double tie_term = 0;  // Σ (t³ − t) over groups of tied magnitudes
  for (size_t begin = 0; begin < out.n;) {
    size_t end = begin + 1;
    while (end < out.n && magnitudes[order[end]] == magnitudes[order[begin]]) ++end;
    const double mean_rank = (static_cast<double>(begin + 1) + static_cast<double>(end)) / 2.0;
    for (size_t i = begin; i < end; ++i) (positive[order[i]] ? out.w_plus : out.w_minus) += mean_rank;
    const auto group = static_cast<double>(end - begin);
    tie_term += group * group * group - group;
    begin = end;
  }

  const auto n = static_cast<double>(out.n);
  out.exact = out.n <= kExactMaxPairs && tie_term == 0;
  // P(W+ <= w+) and P(W+ >= w+) = P(W+ <= w−) by the symmetry of the null distribution.
  double lower = 0, upper = 0;
  if (out.exact) {
    lower = SignedRankLowerTail(out.n, out.w_plus);
    upper = SignedRankLowerTail(out.n, out.w_minus);
  } else {
    const double mean = n * (n + 1) / 4;
    const double variance = n * (n + 1) * (2 * n + 1) / 24 - tie_term / 48;
    const double z = variance > 0 ? (out.w_plus - mean) / std::sqrt(variance) : 0.0;
    lower = NormalLowerTail(z);
    upper = NormalLowerTail(-z);
  }
  switch (alternative) {
    case Alternative::kTwoSided: out.p_value = std::min(1.0, 2 * std::min(lower, upper)); break;
    case Alternative::kLess: out.p_value = lower; break;
    case Alternative::kGreater: out.p_value = upper; break;
  }
  return out;
}

Result<CenterEstimate> HodgesLehmann(std::span<const double> differences, double confidence) {
  RS_RETURN_IF_ERROR(CheckFinite(differences));
  if (!(confidence > 0 && confidence < 1)) {
    return InvalidArgument(fmt::format("the confidence must lie between 0 and 1 (got {})", confidence));
  }
  const size_t n = differences.size();
  std::vector<double> walsh;
  walsh.reserve(n * (n + 1) / 2);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = i; j < n; ++j) walsh.push_back((differences[i] + differences[j]) / 2);
  }
  std::sort(walsh.begin(), walsh.end());
  const size_t m = walsh.size();
  CenterEstimate out;
  out.estimate = m % 2 == 1 ? walsh[m / 2] : (walsh[m / 2 - 1] + walsh[m / 2]) / 2;
  // The largest k with 2·P(W+ <= k − 1) <= 1 − confidence: [W_(k), W_(M+1−k)] (1-based).
  const std::vector<double> counts = SubsetSumCounts(n);
  const double total = std::ldexp(1.0, static_cast<int>(n));
  const double alpha = 1 - confidence;
  double below = 0;  // P(W+ <= k − 1)
  size_t k = 0;
  while (k < m && 2 * (below + counts[k] / total) <= alpha) {
    below += counts[k] / total;
    ++k;
  }
  if (k == 0) return out;  // no interval reaches the confidence
  out.lower = walsh[k - 1];
  out.upper = walsh[m - k];
  out.coverage = 1 - 2 * below;
  return out;
}

}  // namespace rankscope::compare
