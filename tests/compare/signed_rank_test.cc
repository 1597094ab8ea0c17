// compare/signed_rank.h against values SciPy's `scipy.stats.wilcoxon` gives (its documented
// example, Darwin's paired heights) and against brute-force counts of the 2^n sign patterns.
#include "compare/signed_rank.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

namespace rankscope::compare {
namespace {

// How many of the 2^n sign patterns of ranks 1..n give W+ <= w: counted one by one.
double BruteForceLowerTail(int n, int w) {
  int64_t count = 0;
  for (uint32_t signs = 0; signs < (1u << n); ++signs) {
    int sum = 0;
    for (int rank = 1; rank <= n; ++rank) sum += (signs >> (rank - 1)) & 1u ? rank : 0;
    count += sum <= w;
  }
  return static_cast<double>(count) / static_cast<double>(1u << n);
}

TEST(SignedRank, TheExactDistributionCountsSignPatterns) {
  for (int n : {1, 2, 5, 10, 15}) {
    for (int w : {0, 1, 3, 8, 24, n * (n + 1) / 2}) {
      EXPECT_DOUBLE_EQ(SignedRankLowerTail(static_cast<size_t>(n), w), BruteForceLowerTail(n, w)) << n << " " << w;
    }
  }
  EXPECT_DOUBLE_EQ(SignedRankLowerTail(10, 8), 25.0 / 1024);  // the 5% two-sided critical value of n = 10
  EXPECT_EQ(SignedRankLowerTail(10, -1), 0.0);
}

// SciPy's example: wilcoxon(d) → statistic 24.0, pvalue 0.041259765625; with
// alternative="greater", 0.0206298828125.
TEST(SignedRank, DarwinsDataAsSciPyComputesIt) {
  const std::vector<double> d = {6, 8, 14, 16, 23, 24, 28, 29, 41, -48, 49, 56, 60, -67, 75};
  const Result<SignedRankResult> two_sided = WilcoxonSignedRank(d);
  ASSERT_TRUE(two_sided.ok()) << two_sided.status().message();
  EXPECT_TRUE(two_sided->exact);
  EXPECT_EQ(two_sided->n, 15u);
  EXPECT_DOUBLE_EQ(two_sided->w_minus, 24);  // ranks 10 (48) and 14 (67)
  EXPECT_DOUBLE_EQ(two_sided->w_plus, 120 - 24);
  EXPECT_DOUBLE_EQ(two_sided->p_value, 0.041259765625);
  EXPECT_DOUBLE_EQ(WilcoxonSignedRank(d, Alternative::kGreater)->p_value, 0.0206298828125);
  EXPECT_DOUBLE_EQ(WilcoxonSignedRank(d, Alternative::kLess)->p_value, 1 - BruteForceLowerTail(15, 23));
}

// wilcoxon([1, 2, 3, 4, 5]) → pvalue 0.0625: five pairs can never reach 5%.
// wilcoxon([1, -2, 3, ..., 10]) → W− = 2, pvalue 6/1024.
TEST(SignedRank, SmallSamplesAndZerosDropped) {
  EXPECT_DOUBLE_EQ(WilcoxonSignedRank(std::vector<double>{1, 2, 3, 4, 5})->p_value, 0.0625);
  EXPECT_DOUBLE_EQ(WilcoxonSignedRank(std::vector<double>{1, -2, 3, 4, 5, 6, 7, 8, 9, 10})->p_value, 6.0 / 1024);
  // Zeros are dropped (zero_method="wilcox"): the same as without them.
  const Result<SignedRankResult> zeros = WilcoxonSignedRank(std::vector<double>{0, 1, 0, 2, 3, 4, 5});
  EXPECT_EQ(zeros->n, 5u);
  EXPECT_DOUBLE_EQ(zeros->p_value, 0.0625);
  const Result<SignedRankResult> none = WilcoxonSignedRank(std::vector<double>{0, 0});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->n, 0u);
  EXPECT_EQ(none->p_value, 1.0);
}

// Ties among |d| switch to the normal approximation with the tie-corrected variance (SciPy:
// method="auto", correction=False). d = [1, 1, 2, 2, 3, −1]: |d| ranks 2, 2, 2 (the three 1s),
// 4.5, 4.5, 6: W+ = 19, W− = 2; variance 6·7·13/24 − (24 + 6)/48 = 22.125;
// z = (19 − 10.5)/√22.125 = 1.80708; p = erfc(z/√2) = 0.0707499.
TEST(SignedRank, TiesUseTheNormalApproximation) {
  const Result<SignedRankResult> tied = WilcoxonSignedRank(std::vector<double>{1, 1, 2, 2, 3, -1});
  ASSERT_TRUE(tied.ok());
  EXPECT_FALSE(tied->exact);
  EXPECT_DOUBLE_EQ(tied->w_plus, 19);
  EXPECT_DOUBLE_EQ(tied->w_minus, 2);
  EXPECT_NEAR(tied->p_value, 0.07074986707637768, 1e-12);
}

TEST(SignedRank, BadInputIsAnError) {
  EXPECT_FALSE(WilcoxonSignedRank(std::vector<double>{}).ok());
  EXPECT_FALSE(WilcoxonSignedRank(std::vector<double>{1, std::nan("")}).ok());
  EXPECT_FALSE(HodgesLehmann(std::vector<double>{1, INFINITY}).ok());
  EXPECT_FALSE(HodgesLehmann(std::vector<double>{1, 2}, 1.0).ok());
}

// d = [1, −2, 3, ..., 10]: 55 Walsh averages, median 5.5; at 95% the critical count is
// P(W+ <= 8) = 25/1024 <= 2.5%, so the interval is the 9th smallest and 9th largest: [2.5, 8].
TEST(HodgesLehmann, EstimateAndIntervalFromTheWalshAverages) {
  const Result<CenterEstimate> center = HodgesLehmann(std::vector<double>{1, -2, 3, 4, 5, 6, 7, 8, 9, 10});
  ASSERT_TRUE(center.ok()) << center.status().message();
  EXPECT_DOUBLE_EQ(center->estimate, 5.5);
  ASSERT_TRUE(center->lower.has_value());
  EXPECT_DOUBLE_EQ(*center->lower, 2.5);
  EXPECT_DOUBLE_EQ(*center->upper, 8.0);
  EXPECT_DOUBLE_EQ(center->coverage, 1 - 2 * 25.0 / 1024);
}

TEST(HodgesLehmann, TooFewPairsGiveNoInterval) {
  // Five pairs: the smallest two-sided tail is 2/32 > 5%.
  const Result<CenterEstimate> five = HodgesLehmann(std::vector<double>{1, 2, 3, 4, 5});
  ASSERT_TRUE(five.ok());
  EXPECT_DOUBLE_EQ(five->estimate, 3);
  EXPECT_FALSE(five->lower.has_value());
  // Six: 2/64 <= 5%, the widest interval, from the smallest to the largest Walsh average.
  const Result<CenterEstimate> six = HodgesLehmann(std::vector<double>{1, 2, 3, 4, 5, 6});
  ASSERT_TRUE(six->lower.has_value());
  EXPECT_DOUBLE_EQ(*six->lower, 1);
  EXPECT_DOUBLE_EQ(*six->upper, 6);
  EXPECT_DOUBLE_EQ(six->coverage, 1 - 2.0 / 64);
}

}  // namespace
}  // namespace rankscope::compare
