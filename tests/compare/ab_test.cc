// compare/ab.h: verdicts of paired A/B runs on hand-made pairs. The machine's drift (every run
// of a pair slower by the same factor) must cancel; a planted 3% slowdown must show under
// noise of ±0.5%; too few or too noisy pairs must say they cannot tell.
#include "compare/ab.h"

#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace rankscope::compare {
namespace {

// `pairs` pairs of step times: A drifts from 100 ms to 300 ms (a machine growing busier),
// B = A · factor · (1 ± noise), the noise's sign alternating and its size cycling.
PairedMetric StepTimes(int pairs, double factor, double noise, const std::string& metric = "step_time_ns") {
  PairedMetric out{2, metric, {}, {}};
  for (int i = 0; i < pairs; ++i) {
    const double a = 100e6 * (1.0 + 2.0 * i / pairs);
    const double wobble = noise * ((i % 2 == 0) ? 1.0 : -1.0) * (0.25 + 0.25 * (i % 4));
    out.a.push_back(a);
    out.b.push_back(a * factor * (1.0 + wobble));
  }
  return out;
}

AbRow JudgeOne(const PairedMetric& paired, double tolerance = 0.02) {
  AbOptions options;
  options.tolerance = tolerance;
  options.metrics = {{paired.metric, std::nullopt}};
  const Result<std::vector<AbRow>> rows = JudgePairs({paired}, options);
  EXPECT_TRUE(rows.ok()) << rows.status().message();
  if (!rows.ok() || rows->size() != 1) {
    ADD_FAILURE() << "expected one row";
    return {};
  }
  return rows->front();
}

TEST(AbVerdicts, DriftCancelsOutOfThePairs) {
  // A tripled over the run; B tracked it within ±0.5%: unchanged at 2%.
  const AbRow row = JudgeOne(StepTimes(12, 1.0, 0.005));
  EXPECT_EQ(row.verdict, AbVerdict::kUnchanged) << row.reason;
  EXPECT_EQ(row.pairs, 12u);
  EXPECT_NEAR(row.ratio, 1.0, 0.005);
  ASSERT_TRUE(row.low && row.high);
  EXPECT_GT(*row.low, 1 / 1.02);
  EXPECT_LT(*row.high, 1.02);
  EXPECT_GE(row.coverage, 0.95);
}

TEST(AbVerdicts, APlantedSlowdownRegressesWhicheverWayTheMetricGoes) {
  const AbRow slower = JudgeOne(StepTimes(12, 1.03, 0.005));
  EXPECT_EQ(slower.verdict, AbVerdict::kRegressed) << slower.reason;
  EXPECT_NEAR(slower.ratio, 1.03, 0.005);
  EXPECT_LT(slower.p_value, 0.01);
  EXPECT_EQ(slower.reason.rfind("B/A +", 0), 0u) << slower.reason;
  EXPECT_NE(slower.reason.find("beyond ±2.0% and not noise"), std::string::npos) << slower.reason;
  // Throughput falls by the same factor: higher is better, so that regresses too.
  const AbRow throughput = JudgeOne(StepTimes(12, 1 / 1.03, 0.005, "throughput"));
  EXPECT_EQ(throughput.verdict, AbVerdict::kRegressed) << throughput.reason;
  // And the other way round both improve.
  EXPECT_EQ(JudgeOne(StepTimes(12, 1 / 1.03, 0.005)).verdict, AbVerdict::kImproved);
  EXPECT_EQ(JudgeOne(StepTimes(12, 1.03, 0.005, "throughput")).verdict, AbVerdict::kImproved);
}

TEST(AbVerdicts, TooFewOrTooNoisyPairsCannotTell) {
  const AbRow five = JudgeOne(StepTimes(5, 1.10, 0.0));
  EXPECT_EQ(five.verdict, AbVerdict::kCannotTell);
  EXPECT_FALSE(five.low.has_value());
  EXPECT_NE(five.reason.find("too few"), std::string::npos) << five.reason;
  // ±10% noise, 8 pairs, no real change: the interval reaches past ±2%.
  const AbRow noisy = JudgeOne(StepTimes(8, 1.0, 0.10));
  EXPECT_EQ(noisy.verdict, AbVerdict::kCannotTell) << noisy.reason;
  EXPECT_NE(noisy.reason.find("more pairs would tell"), std::string::npos) << noisy.reason;
  // A 1% change, real but within the 2% tolerance: unchanged once the interval fits inside.
  EXPECT_EQ(JudgeOne(StepTimes(16, 1.01, 0.002)).verdict, AbVerdict::kUnchanged);
}

TEST(AbVerdicts, PairsWithoutAValueOnBothSidesAreLeftOut) {
  PairedMetric paired = StepTimes(12, 1.0, 0.005);
  paired.a[3] = 0;
  paired.b[7] = NAN;
  EXPECT_EQ(JudgeOne(paired).pairs, 10u);
  const AbRow none = JudgeOne(PairedMetric{2, "step_time_ns", {0, 0}, {1, 1}});
  EXPECT_EQ(none.pairs, 0u);
  EXPECT_EQ(none.verdict, AbVerdict::kCannotTell);
}

TEST(AbVerdicts, DefaultMetricsRowsByWorldSizeAndTheGatesAnswer) {
  PairedMetric at4 = StepTimes(12, 1.03, 0.005);
  at4.world_size = 4;
  const std::vector<PairedMetric> paired = {at4, StepTimes(12, 1.0, 0.005), StepTimes(12, 1.0, 0.005, "overlap_pct")};
  const Result<std::vector<AbRow>> rows = JudgePairs(paired, AbOptions{});
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  ASSERT_EQ(rows->size(), 2u);  // overlap_pct is not gated by default
  EXPECT_EQ((*rows)[0].world_size, 2);
  EXPECT_EQ((*rows)[1].world_size, 4);
  EXPECT_TRUE(AllDecided(*rows));
  EXPECT_TRUE(AnyRegressed(*rows));
  EXPECT_FALSE(AllDecided({AbRow{}}));
}

TEST(AbVerdicts, BadOptionsAndShapesAreErrors) {
  AbOptions unknown;
  unknown.metrics = {{"speed", std::nullopt}};
  EXPECT_FALSE(JudgePairs({}, unknown).ok());
  AbOptions negative;
  negative.tolerance = -0.1;
  EXPECT_FALSE(JudgePairs({}, negative).ok());
  EXPECT_FALSE(JudgePairs({PairedMetric{2, "step_time_ns", {1, 2}, {1}}}, AbOptions{}).ok());
  EXPECT_STREQ(AbVerdictName(AbVerdict::kCannotTell), "can't tell");
}

// 20 pairs at 99% overall. First looks at 8 (8, 12, 18, 20: 1%/4 each) or 9 (9, 13, 19, 20)
// miss their share (2/2^8 and 2/2^9 > 0.25%); at 10 (10, 15, 20: 1%/3 each) 2/2^10 <= 0.33%.
TEST(AbLooks, TheFalseAlarmChanceIsSharedOutOverGrowingLooks) {
  const AbLooks twenty = PlanLooks(0.99, 20);
  EXPECT_EQ(twenty.at, (std::vector<int>{10, 15, 20}));
  EXPECT_DOUBLE_EQ(twenty.per_look_confidence, 1 - 0.01 / 3);
  EXPECT_TRUE(twenty.IsLook(15));
  EXPECT_FALSE(twenty.IsLook(14));
  // 40 pairs: 10, 15, 23, 35, 40 at 1%/5 each.
  EXPECT_EQ(PlanLooks(0.99, 40).at, (std::vector<int>{10, 15, 23, 35, 40}));
  // One look at most: the whole 1% on it, from 8 pairs (2/2^8 <= 1%).
  const AbLooks eight = PlanLooks(0.99, 8);
  EXPECT_EQ(eight.at, std::vector<int>{8});
  EXPECT_DOUBLE_EQ(eight.per_look_confidence, 0.99);
  // Too few pairs for any 99% interval: one look at the end, which will say it cannot tell.
  EXPECT_EQ(PlanLooks(0.99, 5).at, std::vector<int>{5});
}

}  // namespace
}  // namespace rankscope::compare
