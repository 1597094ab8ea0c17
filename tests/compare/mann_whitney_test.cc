#include "compare/mann_whitney.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace rankscope::compare {
namespace {

// SciPy's documentation example (mannwhitneyu): ages of male and female faculty.
const std::vector<double> kMales = {19, 22, 16, 29, 24};
const std::vector<double> kFemales = {20, 11, 17, 12};

// R's wilcox.test example from Hollander & Wolfe, Table 4.1: permeability of the
// chorioamnion at term (x) and at 12–26 weeks (y).
const std::vector<double> kAtTerm = {0.80, 0.83, 1.89, 1.04, 1.45, 1.38, 1.91, 1.64, 0.73, 1.46};
const std::vector<double> kEarly = {1.15, 0.88, 0.90, 0.74, 1.21};

TEST(MannWhitneyTest, SciPyExampleExact) {
  auto result = MannWhitneyU(kMales, kFemales);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_DOUBLE_EQ(result->u_first, 17);
  EXPECT_DOUBLE_EQ(result->u_second, 3);
  EXPECT_TRUE(result->exact);
  // SciPy: 7 of the C(9, 4) = 126 arrangements are as extreme on each side → 14/126.
  EXPECT_NEAR(result->p_value, 14.0 / 126.0, 1e-12);
  EXPECT_NEAR(result->p_value, 0.1111, 5e-5);
}

TEST(MannWhitneyTest, SciPyExampleAsymptoticWhenTied) {
  // A tie forces the normal approximation, whose variance then carries the tie term.
  std::vector<double> males = kMales;
  males.push_back(16);  // ties with the 16 already there
  auto tied = MannWhitneyU(males, kFemales);
  ASSERT_TRUE(tied.ok());
  EXPECT_FALSE(tied->exact);
  EXPECT_DOUBLE_EQ(tied->u_first, 19);  // the new 16 beats 11 and 12
  // mean 6·4/2 = 12; variance 24/12·(11 − (2³ − 2)/(10·9)); z = (19 − 12 − 0.5)/σ
  const double sigma = std::sqrt(24.0 / 12.0 * (11.0 - 6.0 / 90.0));
  EXPECT_NEAR(tied->p_value, std::erfc((19 - 12 - 0.5) / sigma / std::sqrt(2.0)), 1e-12);
}

TEST(MannWhitneyTest, RExamplesWithTiesUseTheNormalApproximation) {
  // R's wilcox.test (continuity correction, tie-corrected variance), as published on
  // endmemo.com/r/wilcoxon.php: W = 51.5, p = 0.5966 and W = 0, p = 0.001364.
  const std::vector<double> x = {1, 5, 9, 24, 56, 21, 3, 7, 21, 4};
  const std::vector<double> y = {12, 15, 5, 9, 9, 14, 56, 22, 3, 7, 32, 5};
  auto result = MannWhitneyU(x, y);
  ASSERT_TRUE(result.ok());
  EXPECT_FALSE(result->exact);
  EXPECT_DOUBLE_EQ(result->u_first, 51.5);
  EXPECT_NEAR(result->p_value, 0.5966, 5e-5);

  const std::vector<double> far = {1233, 4356, 987, 39999, 1111, 200000};
  auto separated = MannWhitneyU(x, far);
  ASSERT_TRUE(separated.ok());
  EXPECT_FALSE(separated->exact);  // x ties with itself (21, 21)
  EXPECT_DOUBLE_EQ(separated->u_first, 0);
  EXPECT_NEAR(separated->p_value, 0.001364, 5e-7);
}

TEST(MannWhitneyTest, HollanderWolfeOneSidedExact) {
  // R: W = 35, p-value = 0.1272 (alternative "greater"); coin's exact two-sided p is 0.2544.
  auto greater = MannWhitneyU(kAtTerm, kEarly, Alternative::kGreater);
  ASSERT_TRUE(greater.ok());
  EXPECT_TRUE(greater->exact);
  EXPECT_DOUBLE_EQ(greater->u_first, 35);
  EXPECT_NEAR(greater->p_value, 0.1272, 5e-5);

  auto two_sided = MannWhitneyU(kAtTerm, kEarly);
  ASSERT_TRUE(two_sided.ok());
  EXPECT_NEAR(two_sided->p_value, 0.2544, 5e-5);

  // The opposite one-sided alternative is nowhere near significant.
  auto less = MannWhitneyU(kAtTerm, kEarly, Alternative::kLess);
  ASSERT_TRUE(less.ok());
  EXPECT_GT(less->p_value, 0.85);
}

TEST(MannWhitneyTest, SwappingSamplesSwapsU) {
  auto forward = MannWhitneyU(kAtTerm, kEarly);
  auto backward = MannWhitneyU(kEarly, kAtTerm);
  ASSERT_TRUE(forward.ok() && backward.ok());
  EXPECT_DOUBLE_EQ(forward->u_first, backward->u_second);
  EXPECT_DOUBLE_EQ(forward->p_value, backward->p_value);
}

// SciPy's rule: exact when the smaller sample has at most 8 values and nothing ties.
TEST(MannWhitneyTest, EightValuesAgainstManyIsStillExact) {
  std::vector<double> many;
  for (int i = 0; i < 2500; ++i) many.push_back(i);
  const std::vector<double> eight = {-8, -7, -6, -5, -4, -3, -2, -1};
  auto result = MannWhitneyU(many, eight);
  ASSERT_TRUE(result.ok());
  EXPECT_TRUE(result->exact);
  EXPECT_DOUBLE_EQ(result->u_first, 20000);
  // Every one of the C(2508, 8) arrangements but this one is less extreme; p is tiny.
  EXPECT_LT(result->p_value, 1e-20);
}

// A long baseline against one current value: U is uniform on 0..m under the null, so the
// most extreme arrangement has P = 1/(m+1). The exact table is built over the smaller side.
TEST(MannWhitneyTest, LongFirstSampleAgainstOneValue) {
  std::vector<double> baseline;
  for (int i = 0; i < 20000; ++i) baseline.push_back(i);
  const std::vector<double> current = {1e6};
  auto result = MannWhitneyU(baseline, current);
  ASSERT_TRUE(result.ok());
  EXPECT_TRUE(result->exact);
  EXPECT_DOUBLE_EQ(result->u_first, 0);
  EXPECT_NEAR(result->p_value, 2.0 / 20001.0, 1e-15);
}

TEST(MannWhitneyTest, SeparatedSamplesAreSignificant) {
  std::vector<double> fast;
  std::vector<double> slow;
  for (int i = 0; i < 30; ++i) {
    fast.push_back(100 + i * 0.5);
    slow.push_back(120 + i * 0.5);
  }
  auto result = MannWhitneyU(slow, fast, Alternative::kGreater);
  ASSERT_TRUE(result.ok());
  EXPECT_FALSE(result->exact);
  EXPECT_DOUBLE_EQ(result->u_first, 900);
  EXPECT_LT(result->p_value, 1e-9);
}

TEST(MannWhitneyTest, InterleavedSamplesAreNot) {
  std::vector<double> even;
  std::vector<double> odd;
  for (int i = 0; i < 40; ++i) (i % 2 == 0 ? even : odd).push_back(i);
  auto result = MannWhitneyU(even, odd);
  ASSERT_TRUE(result.ok());
  EXPECT_GT(result->p_value, 0.5);
}

TEST(MannWhitneyTest, AllValuesTiedGiveNoEvidence) {
  std::vector<double> same(5, 3.0);
  auto result = MannWhitneyU(same, same);
  ASSERT_TRUE(result.ok());
  EXPECT_DOUBLE_EQ(result->u_first, 12.5);
  EXPECT_DOUBLE_EQ(result->p_value, 1);
}

TEST(MannWhitneyTest, SingleValues) {
  const std::vector<double> one = {1};
  const std::vector<double> two = {2};
  auto result = MannWhitneyU(one, two);
  ASSERT_TRUE(result.ok());
  EXPECT_TRUE(result->exact);
  EXPECT_DOUBLE_EQ(result->u_first, 0);
  EXPECT_DOUBLE_EQ(result->p_value, 1);  // 2 · P(U ≥ 1) = 2 · ½
}

TEST(MannWhitneyTest, RejectsEmptyAndNonFiniteSamples) {
  const std::vector<double> empty;
  const std::vector<double> values = {1, 2, 3};
  EXPECT_EQ(MannWhitneyU(empty, values).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(MannWhitneyU(values, empty).status().code(), StatusCode::kInvalidArgument);
  const std::vector<double> with_nan = {1, std::numeric_limits<double>::quiet_NaN()};
  const std::vector<double> with_inf = {1, std::numeric_limits<double>::infinity()};
  EXPECT_EQ(MannWhitneyU(with_nan, values).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(MannWhitneyU(values, with_inf).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace rankscope::compare
