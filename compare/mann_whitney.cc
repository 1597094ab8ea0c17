#include "compare/mann_whitney.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace rankscope::compare {
namespace {

// SciPy's `method="auto"` rule: the exact distribution when one sample has at most 8 values
// and nothing ties. The table below has (smaller size + 1) × (n1·n2 + 1) entries; the cap on
// n1·n2 bounds it to about a megabyte.
constexpr size_t kExactSmallSample = 8;
constexpr size_t kExactMaxPairs = 20000;

struct Ranking {
  double rank_sum_first = 0;
  double tie_term = 0;  // Σ (t³ − t) over groups of tied values
};

Ranking RankCombined(std::span<const double> first, std::span<const double> second) {
  struct Item {
    double value;
    bool from_first;
  };
  std::vector<Item> items;
  items.reserve(first.size() + second.size());
  for (double value : first) items.push_back({value, true});
  for (double value : second) items.push_back({value, false});
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.value < b.value; });

  Ranking ranking;
  size_t begin = 0;
  while (begin < items.size()) {
    size_t end = begin + 1;
    while (end < items.size() && items[end].value == items[begin].value) ++end;
    // Ranks are 1-based; a tied group shares the mean of the ranks it spans.
    const double mean_rank = (static_cast<double>(begin + 1) + static_cast<double>(end)) / 2.0;
    for (size_t i = begin; i < end; ++i) {
      if (items[i].from_first) ranking.rank_sum_first += mean_rank;
    }
    const double group = static_cast<double>(end - begin);
    ranking.tie_term += group * group * group - group;
    begin = end;
  }
  return ranking;
}

// P(U ≥ u) under the null for samples of sizes m and n without ties. The distribution is the
// same for (m, n) and (n, m), so callers pass the smaller size as m. The count of
// arrangements with U = k obeys c(i, j, k) = c(i−1, j, k−j) + c(i, j−1, k): the largest
// value either belongs to the first sample (beating all j of the second) or not.
double ExactUpperTail(size_t m, size_t n, double u) {
  const size_t max_u = m * n;
  // counts[i] holds c(i, j, ·) for the current j.
  std::vector<std::vector<double>> counts(m + 1, std::vector<double>(max_u + 1, 0.0));
  for (size_t i = 0; i <= m; ++i) counts[i][0] = 1;  // j = 0: one arrangement, U = 0
  for (size_t j = 1; j <= n; ++j) {
    // counts[0] stays {1, 0, …}; walk i upward so counts[i − 1] already holds column j.
    for (size_t i = 1; i <= m; ++i) {
      std::vector<double>& row = counts[i];  // holds c(i, j−1, ·)
      const std::vector<double>& shorter = counts[i - 1];
      // c(i, j, k) is zero above k = i·j, so the walk starts there.
      for (size_t k = std::min(i * j, max_u) + 1; k-- > j;) row[k] += shorter[k - j];
    }
  }
  const std::vector<double>& distribution = counts[m];
  const double total = std::accumulate(distribution.begin(), distribution.end(), 0.0);
  const auto lowest = static_cast<size_t>(std::max(0.0, std::ceil(u)));
  double tail = 0;
  for (size_t k = lowest; k <= max_u; ++k) tail += distribution[k];
  return tail / total;
}

double NormalUpperTail(double z) { return 0.5 * std::erfc(z / std::sqrt(2.0)); }

}  // namespace

Result<MannWhitneyResult> MannWhitneyU(std::span<const double> first, std::span<const double> second,
                                       Alternative alternative) {
  if (first.empty() || second.empty()) {
    return InvalidArgument("Mann-Whitney U needs at least one value in each sample");
  }
  const auto finite = [](double value) { return std::isfinite(value); };
  if (!std::all_of(first.begin(), first.end(), finite) || !std::all_of(second.begin(), second.end(), finite)) {
    return InvalidArgument("Mann-Whitney U got a value that is NaN or infinite");
  }

  const size_t m = first.size();
  const size_t n = second.size();
  const double dm = static_cast<double>(m);
  const double dn = static_cast<double>(n);
  const Ranking ranking = RankCombined(first, second);

  MannWhitneyResult result;
  result.u_first = ranking.rank_sum_first - dm * (dm + 1) / 2;
  result.u_second = dm * dn - result.u_first;

  // The statistic whose upper tail is the p-value: the larger U for two sides.
  double u = 0;
  switch (alternative) {
    case Alternative::kTwoSided: u = std::max(result.u_first, result.u_second); break;
    case Alternative::kGreater: u = result.u_first; break;
    case Alternative::kLess: u = result.u_second; break;
  }
  const double sides = alternative == Alternative::kTwoSided ? 2.0 : 1.0;

  const bool ties = ranking.tie_term > 0;
  if (!ties && std::min(m, n) <= kExactSmallSample && m * n <= kExactMaxPairs) {
    result.exact = true;
    result.p_value = std::min(1.0, sides * ExactUpperTail(std::min(m, n), std::max(m, n), u));
    return result;
  }

  const double total = dm + dn;
  const double variance = dm * dn / 12.0 * ((total + 1) - ranking.tie_term / (total * (total - 1)));
  if (!(variance > 0)) {
    // Every value ties with every other: the samples carry no evidence of a difference.
    result.p_value = 1;
    return result;
  }
  const double z = (u - dm * dn / 2.0 - 0.5) / std::sqrt(variance);
  result.p_value = std::min(1.0, sides * NormalUpperTail(z));
  return result;
}

}  // namespace rankscope::compare
