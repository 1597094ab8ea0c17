// compare/compare.h: docs/metrics.md §7 verdicts in every direction and tolerance case, the
// workload check, and the option parsers.
#include "compare/compare.h"

#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace rankscope::compare {
namespace {

// `count` samples spread evenly over value · [1 − spread, 1 + spread].
std::vector<double> Samples(double value, double spread, int count) {
  std::vector<double> out;
  for (int i = 0; i < count; ++i) {
    const double t = count == 1 ? 0.0 : 2.0 * i / (count - 1) - 1.0;
    out.push_back(value * (1 + spread * t));
  }
  return out;
}

ComparableRun MakeRun(int world_size, std::vector<ComparableMetric> metrics) {
  ComparableRun run;
  run.source = "run-n" + std::to_string(world_size);
  run.command = "rankscope-trainer --steps 30";
  run.workload.program = "rankscope-trainer";
  run.workload.backend = "gloo";
  run.workload.world_size = world_size;
  run.workload.batch_per_rank = 32;
  run.workload.accumulation = 1;
  run.workload.global_batch = 32 * world_size;
  run.steps = 30;
  run.metrics = std::move(metrics);
  return run;
}

ComparableSet Set(std::vector<ComparableRun> runs, const std::string& source) {
  ComparableSet set;
  set.source = source;
  set.runs = std::move(runs);
  return set;
}

// One metric on both sides, at one world size: the single row of the comparison.
MetricComparison CompareOne(const std::string& name, const ComparableMetric& base, const ComparableMetric& cur,
                            const std::string& tolerance = "5%") {
  CompareOptions options;
  options.tolerance = *ParseTolerance(tolerance);
  options.metrics.push_back({name, std::nullopt});
  const Result<Comparison> comparison =
      CompareWithBaseline(Set({MakeRun(2, {base})}, "base.json"), Set({MakeRun(2, {cur})}, "current"), options);
  EXPECT_TRUE(comparison.ok()) << comparison.status().message();
  if (!comparison.ok() || comparison->rows.size() != 1) {
    ADD_FAILURE() << "expected exactly one row";
    return {};
  }
  return comparison->rows.front();
}

ComparableMetric Metric(const std::string& name, double value, std::vector<double> samples) {
  return {name, value, std::move(samples)};
}

// ---- direction × tolerance × significance ----------------------------------------------

TEST(Verdict, HigherIsBetterDropBeyondToleranceAndSignificantRegresses) {
  const MetricComparison row = CompareOne("throughput", Metric("throughput", 1000, Samples(1000, 0.02, 30)),
                                          Metric("throughput", 900, Samples(900, 0.02, 30)));
  EXPECT_EQ(row.verdict, Verdict::kRegressed) << row.reason;
  EXPECT_NEAR(row.change, -0.10, 1e-12);
  ASSERT_TRUE(row.p_value.has_value());
  EXPECT_LT(*row.p_value, 0.01);
}

TEST(Verdict, HigherIsBetterRiseBeyondToleranceAndSignificantImproves) {
  const MetricComparison row = CompareOne("throughput", Metric("throughput", 1000, Samples(1000, 0.02, 30)),
                                          Metric("throughput", 1100, Samples(1100, 0.02, 30)));
  EXPECT_EQ(row.verdict, Verdict::kImproved) << row.reason;
}

TEST(Verdict, LowerIsBetterRiseBeyondToleranceAndSignificantRegresses) {
  const MetricComparison row = CompareOne("step_time_ns", Metric("step_time_ns", 50e6, Samples(50e6, 0.02, 30)),
                                          Metric("step_time_ns", 60e6, Samples(60e6, 0.02, 30)));
  EXPECT_EQ(row.verdict, Verdict::kRegressed) << row.reason;
  EXPECT_NEAR(row.change, 0.20, 1e-12);
}

TEST(Verdict, LowerIsBetterDropBeyondToleranceAndSignificantImproves) {
  const MetricComparison row = CompareOne("exposed_comm_ns", Metric("exposed_comm_ns", 10e6, Samples(10e6, 0.02, 30)),
                                          Metric("exposed_comm_ns", 5e6, Samples(5e6, 0.02, 30)));
  EXPECT_EQ(row.verdict, Verdict::kImproved) << row.reason;
}

TEST(Verdict, WithinToleranceIsUnchangedEvenWhenSignificant) {
  // 3% slower with tight samples: real, but inside the 5% the user allows.
  const MetricComparison row = CompareOne("step_time_ns", Metric("step_time_ns", 50e6, Samples(50e6, 0.001, 30)),
                                          Metric("step_time_ns", 51.5e6, Samples(51.5e6, 0.001, 30)));
  EXPECT_EQ(row.verdict, Verdict::kUnchanged) << row.reason;
  EXPECT_FALSE(row.p_value.has_value());
}

TEST(Verdict, ExactlyAtTheToleranceIsUnchanged) {
  const MetricComparison row = CompareOne("step_time_ns", Metric("step_time_ns", 100, Samples(100, 0.001, 30)),
                                          Metric("step_time_ns", 110, Samples(110, 0.001, 30)), "10%");
  EXPECT_EQ(row.verdict, Verdict::kUnchanged) << row.reason;
}

TEST(Verdict, BeyondToleranceButWithinNoiseIsNotARegression) {
  // Medians 10% apart, but the steps scatter ±60%: the U test cannot tell them apart.
  std::vector<double> base = Samples(100, 0.6, 30), cur = Samples(100, 0.6, 30);
  for (double& v : cur) v *= 1.10;
  std::swap(cur[0], cur[29]);  // order does not matter; keep the sets overlapping
  const MetricComparison row =
      CompareOne("step_time_ns", Metric("step_time_ns", 100, base), Metric("step_time_ns", 110, cur));
  EXPECT_EQ(row.verdict, Verdict::kNotSignificant) << row.reason;
  ASSERT_TRUE(row.p_value.has_value());
  EXPECT_GE(*row.p_value, 0.01);
}

// Noise in every direction: a drop or a rise of a higher-is-better metric, and an
// improvement of a lower-is-better one, each beyond the tolerance but inside the scatter.
TEST(Verdict, NoiseIsNotSignificantInEveryDirection) {
  struct Case {
    const char* metric;
    double factor;
  };
  for (const Case& c : {Case{"throughput", 0.90}, Case{"throughput", 1.10}, Case{"step_time_ns", 0.90}}) {
    std::vector<double> base = Samples(100, 0.6, 30), cur = Samples(100, 0.6, 30);
    for (double& v : cur) v *= c.factor;
    const MetricComparison row =
        CompareOne(c.metric, Metric(c.metric, 100, base), Metric(c.metric, 100 * c.factor, cur));
    EXPECT_EQ(row.verdict, Verdict::kNotSignificant) << c.metric << " x" << c.factor << ": " << row.reason;
    ASSERT_TRUE(row.p_value.has_value());
    EXPECT_GE(*row.p_value, 0.01);
    const bool worse = std::string(c.metric) == "throughput" ? c.factor < 1 : c.factor > 1;
    EXPECT_NE(row.reason.find(worse ? "worse" : "better"), std::string::npos) << row.reason;
  }
}

TEST(Verdict, WithoutSamplesTheToleranceDecides) {
  const MetricComparison worse =
      CompareOne("efficiency", Metric("efficiency", 0.9, {}), Metric("efficiency", 0.8, {}));
  EXPECT_EQ(worse.verdict, Verdict::kRegressed);
  EXPECT_NE(worse.reason.find("no per-step samples"), std::string::npos) << worse.reason;
  const MetricComparison same =
      CompareOne("efficiency", Metric("efficiency", 0.9, {}), Metric("efficiency", 0.88, {}));
  EXPECT_EQ(same.verdict, Verdict::kUnchanged);
}

TEST(Verdict, TooFewSamplesForTheTestLetTheToleranceDecide) {
  // 3 against 3 steps: the smallest two-sided p is 0.1, never below 0.01.
  const MetricComparison row = CompareOne("step_time_ns", Metric("step_time_ns", 100, {99, 100, 101}),
                                          Metric("step_time_ns", 150, {149, 150, 151}));
  EXPECT_EQ(row.verdict, Verdict::kRegressed);
  EXPECT_FALSE(row.p_value.has_value());
  EXPECT_NE(row.reason.find("too few"), std::string::npos) << row.reason;
}

TEST(Verdict, ZeroBaselineZeroCurrentIsUnchanged) {
  const MetricComparison row = CompareOne("exposed_comm_ns", Metric("exposed_comm_ns", 0, Samples(0, 0, 30)),
                                          Metric("exposed_comm_ns", 0, Samples(0, 0, 30)));
  EXPECT_EQ(row.verdict, Verdict::kUnchanged);
  EXPECT_EQ(row.change, 0);
}

TEST(Verdict, ZeroBaselineAnyRiseIsInfinite) {
  const MetricComparison row = CompareOne("exposed_comm_ns", Metric("exposed_comm_ns", 0, Samples(0, 0, 30)),
                                          Metric("exposed_comm_ns", 1e6, Samples(1e6, 0.01, 30)));
  EXPECT_TRUE(std::isinf(row.change));
  EXPECT_EQ(row.verdict, Verdict::kRegressed) << row.reason;
}

TEST(Verdict, ZeroToleranceFlagsAnySignificantChange) {
  const MetricComparison row = CompareOne("step_time_ns", Metric("step_time_ns", 100, Samples(100, 0.001, 30)),
                                          Metric("step_time_ns", 101, Samples(101, 0.001, 30)), "0%");
  EXPECT_EQ(row.verdict, Verdict::kRegressed) << row.reason;
}

// ---- changes too small to matter ---------------------------------------------------------

// `name` compared at one world size whose runs also have a 10 ms step time.
MetricComparison CompareBesideTenMsSteps(const std::string& name, double base, double cur) {
  const ComparableMetric step = Metric("step_time_ns", 10e6, Samples(10e6, 0.01, 30));
  CompareOptions options;
  options.metrics.push_back({name, std::nullopt});
  const Result<Comparison> comparison =
      CompareWithBaseline(Set({MakeRun(1, {step, Metric(name, base, Samples(base, 0.02, 30))})}, "b"),
                          Set({MakeRun(1, {step, Metric(name, cur, Samples(cur, 0.02, 30))})}, "c"), options);
  EXPECT_TRUE(comparison.ok()) << comparison.status().message();
  if (!comparison.ok() || comparison->rows.size() != 1) return {};
  return comparison->rows.front();
}

TEST(Verdict, ATimeChangeUnderOnePercentOfTheStepIsUnchanged) {
  // One rank's exposed comm: 2 us to 13 us is +550%, and 0.1% of a 10 ms step.
  const MetricComparison rise = CompareBesideTenMsSteps("exposed_comm_ns", 2e3, 13e3);
  EXPECT_EQ(rise.verdict, Verdict::kUnchanged) << rise.reason;
  EXPECT_GT(rise.change, 5);
  EXPECT_NE(rise.reason.find("below the"), std::string::npos) << rise.reason;
  EXPECT_EQ(CompareBesideTenMsSteps("exposed_comm_ns", 13e3, 2e3).verdict, Verdict::kUnchanged);
  // 1 ms to 1.5 ms is 5% of the step: a real regression.
  EXPECT_EQ(CompareBesideTenMsSteps("exposed_comm_ns", 1e6, 1.5e6).verdict, Verdict::kRegressed);
  EXPECT_EQ(CompareBesideTenMsSteps("wait_ns", 1e6, 1.5e6).verdict, Verdict::kRegressed);
}

TEST(Verdict, RatiosMustMoveByAHundredthAndPercentagesByAPoint) {
  EXPECT_EQ(CompareBesideTenMsSteps("comm_compute_ratio", 0.002, 0.004).verdict, Verdict::kUnchanged);
  EXPECT_EQ(CompareBesideTenMsSteps("comm_compute_ratio", 0.5, 0.6).verdict, Verdict::kRegressed);
  EXPECT_EQ(CompareBesideTenMsSteps("overlap_pct", 0.9, 0.3).verdict, Verdict::kUnchanged);
  EXPECT_EQ(CompareBesideTenMsSteps("overlap_pct", 60, 40).verdict, Verdict::kRegressed);
}

TEST(Verdict, StepTimeAndThroughputHaveNoFloor) {
  EXPECT_EQ(CompareBesideTenMsSteps("throughput", 1.0, 0.5).verdict, Verdict::kRegressed);
}

// ---- which metrics, which tolerance ----------------------------------------------------

TEST(Compare, DefaultChecksTheGatedMetricsBothSidesHave) {
  const std::vector<ComparableMetric> metrics = {
      Metric("throughput", 1000, Samples(1000, 0.01, 30)), Metric("step_time_ns", 50e6, Samples(50e6, 0.01, 30)),
      Metric("overlap_pct", 50, Samples(50, 0.01, 30)), Metric("exposed_comm_ns", 1e6, Samples(1e6, 0.01, 30))};
  const Result<Comparison> comparison =
      CompareWithBaseline(Set({MakeRun(2, metrics)}, "b"), Set({MakeRun(2, metrics)}, "c"), CompareOptions{});
  ASSERT_TRUE(comparison.ok()) << comparison.status().message();
  std::vector<std::string> names;
  for (const MetricComparison& row : comparison->rows) names.push_back(row.metric);
  // overlap_pct is reported but not gated by default; efficiency is on neither side.
  EXPECT_EQ(names, (std::vector<std::string>{"throughput", "step_time_ns", "exposed_comm_ns"}));
  EXPECT_FALSE(comparison->Regressed());
}

TEST(Compare, MetricOptionChoosesMetricsAndTheirTolerances) {
  const std::vector<ComparableMetric> base = {Metric("throughput", 1000, Samples(1000, 0.01, 30)),
                                              Metric("overlap_pct", 50, Samples(50, 0.01, 30))};
  const std::vector<ComparableMetric> cur = {Metric("throughput", 920, Samples(920, 0.01, 30)),
                                             Metric("overlap_pct", 40, Samples(40, 0.01, 30))};
  CompareOptions options;
  options.metrics = {*ParseMetricTolerance("throughput:10%"), *ParseMetricTolerance("overlap_pct")};
  const Result<Comparison> comparison =
      CompareWithBaseline(Set({MakeRun(2, base)}, "b"), Set({MakeRun(2, cur)}, "c"), options);
  ASSERT_TRUE(comparison.ok()) << comparison.status().message();
  ASSERT_EQ(comparison->rows.size(), 2u);
  EXPECT_EQ(comparison->rows[0].metric, "throughput");
  EXPECT_EQ(comparison->rows[0].verdict, Verdict::kUnchanged);  // −8% within 10%
  EXPECT_DOUBLE_EQ(comparison->rows[0].tolerance, 0.10);
  EXPECT_EQ(comparison->rows[1].metric, "overlap_pct");
  EXPECT_EQ(comparison->rows[1].verdict, Verdict::kRegressed);  // −20%, default 5%
  EXPECT_TRUE(comparison->Regressed());
}

TEST(Compare, AMetricNeitherSideHasIsAnError) {
  CompareOptions options;
  options.metrics = {{"efficiency", std::nullopt}};
  const std::vector<ComparableMetric> metrics = {Metric("throughput", 1000, {})};
  const Result<Comparison> comparison =
      CompareWithBaseline(Set({MakeRun(2, metrics)}, "b"), Set({MakeRun(2, metrics)}, "c"), options);
  ASSERT_FALSE(comparison.ok());
  EXPECT_NE(comparison.status().message().find("efficiency"), std::string::npos);
}

// A baseline whose metrics are missing or renamed would check nothing, and a run 2x slower
// would pass: refused, naming the world size and both sides' metrics.
TEST(Compare, ABaselineWithNothingToCompareIsRefused) {
  const std::vector<ComparableMetric> current = {Metric("throughput", 500, Samples(500, 0.01, 30)),
                                                 Metric("step_time_ns", 100e6, Samples(100e6, 0.01, 30))};
  for (const std::vector<ComparableMetric>& baseline :
       {std::vector<ComparableMetric>{}, std::vector<ComparableMetric>{Metric("samples_per_second", 1000, {})}}) {
    const Result<Comparison> comparison =
        CompareWithBaseline(Set({MakeRun(2, baseline)}, "b"), Set({MakeRun(2, current)}, "c"), CompareOptions{});
    ASSERT_FALSE(comparison.ok());
    EXPECT_EQ(comparison.status().code(), StatusCode::kInconsistent);
    const std::string message = comparison.status().message();
    EXPECT_NE(message.find("nothing to compare at 2 ranks"), std::string::npos) << message;
    EXPECT_NE(message.find("this run: throughput, step_time_ns"), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << "one line";
  }
  // One world size of a sweep with nothing in common is enough to refuse the whole comparison.
  const Result<Comparison> sweep = CompareWithBaseline(Set({MakeRun(2, current), MakeRun(4, {})}, "b"),
                                                       Set({MakeRun(2, current), MakeRun(4, current)}, "c"),
                                                       CompareOptions{});
  ASSERT_FALSE(sweep.ok());
  EXPECT_NE(sweep.status().message().find("at 4 ranks"), std::string::npos) << sweep.status().message();
}

TEST(Compare, EveryWorldSizeOfASweepIsChecked) {
  auto sweep = [](double slowdown) {
    std::vector<ComparableRun> runs;
    for (const int n : {1, 2, 4}) {
      const double t = 50e6 * (n == 4 ? slowdown : 1.0);
      runs.push_back(MakeRun(n, {Metric("step_time_ns", t, Samples(t, 0.01, 30))}));
    }
    ComparableSet set = Set(runs, "sweep");
    set.sweep = true;
    return set;
  };
  const Result<Comparison> comparison = CompareWithBaseline(sweep(1.0), sweep(1.3), CompareOptions{});
  ASSERT_TRUE(comparison.ok()) << comparison.status().message();
  ASSERT_EQ(comparison->rows.size(), 3u);
  EXPECT_EQ(comparison->rows[0].world_size, 1);
  EXPECT_EQ(comparison->rows[0].verdict, Verdict::kUnchanged);
  EXPECT_EQ(comparison->rows[2].world_size, 4);
  EXPECT_EQ(comparison->rows[2].verdict, Verdict::kRegressed);
}

// ---- the workload check ----------------------------------------------------------------

TEST(Compare, AnotherWorkloadIsRefusedUnlessForced) {
  const std::vector<ComparableMetric> metrics = {Metric("step_time_ns", 50e6, Samples(50e6, 0.01, 30))};
  ComparableRun other = MakeRun(2, metrics);
  other.workload.batch_per_rank = 64;
  other.workload.global_batch = 128;
  const Result<Comparison> refused =
      CompareWithBaseline(Set({MakeRun(2, metrics)}, "b"), Set({other}, "c"), CompareOptions{});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInconsistent);
  EXPECT_NE(refused.status().message().find("batch per rank 32 vs 64"), std::string::npos)
      << refused.status().message();
  EXPECT_NE(refused.status().message().find("--force"), std::string::npos);

  CompareOptions forced;
  forced.force = true;
  const Result<Comparison> compared = CompareWithBaseline(Set({MakeRun(2, metrics)}, "b"), Set({other}, "c"), forced);
  ASSERT_TRUE(compared.ok()) << compared.status().message();
  ASSERT_FALSE(compared->notes.empty());
  EXPECT_NE(compared->notes.front().find("--force"), std::string::npos);
}

TEST(Compare, AnotherProgramOrBackendIsAnotherWorkload) {
  const std::vector<ComparableMetric> metrics = {Metric("step_time_ns", 50e6, {})};
  ComparableRun program = MakeRun(2, metrics);
  program.workload.program = "python3 train.py";
  ComparableRun backend = MakeRun(2, metrics);
  backend.workload.backend = "nccl";
  for (const ComparableRun& other : {program, backend}) {
    const Result<Comparison> refused =
        CompareWithBaseline(Set({MakeRun(2, metrics)}, "b"), Set({other}, "c"), CompareOptions{});
    EXPECT_FALSE(refused.ok());
  }
}

TEST(Compare, ADifferentCommandLineIsNotedButCompared) {
  // --no-overlap or a planted delay change how the workload runs, not which workload it is.
  const std::vector<ComparableMetric> metrics = {Metric("step_time_ns", 50e6, {})};
  ComparableRun other = MakeRun(2, metrics);
  other.command = "rankscope-trainer --steps 30 --no-overlap";
  const Result<Comparison> comparison =
      CompareWithBaseline(Set({MakeRun(2, metrics)}, "b"), Set({other}, "c"), CompareOptions{});
  ASSERT_TRUE(comparison.ok()) << comparison.status().message();
  ASSERT_EQ(comparison->notes.size(), 1u);
  EXPECT_NE(comparison->notes.front().find("command lines differ"), std::string::npos);
}

TEST(Compare, DifferentWorldSizesAreRefusedAndForcedToTheCommonOnes) {
  const std::vector<ComparableMetric> metrics = {Metric("step_time_ns", 50e6, {})};
  const ComparableSet base = Set({MakeRun(1, metrics), MakeRun(2, metrics)}, "b");
  const ComparableSet cur = Set({MakeRun(2, metrics), MakeRun(4, metrics)}, "c");
  const Result<Comparison> refused = CompareWithBaseline(base, cur, CompareOptions{});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("world sizes 1,2 (baseline) vs 2,4 (current)"), std::string::npos)
      << refused.status().message();
  CompareOptions forced;
  forced.force = true;
  const Result<Comparison> compared = CompareWithBaseline(base, cur, forced);
  ASSERT_TRUE(compared.ok()) << compared.status().message();
  ASSERT_EQ(compared->rows.size(), 1u);
  EXPECT_EQ(compared->rows.front().world_size, 2);
}

TEST(Compare, NoWorldSizeInCommonIsAnErrorEvenForced) {
  const std::vector<ComparableMetric> metrics = {Metric("step_time_ns", 50e6, {})};
  CompareOptions forced;
  forced.force = true;
  const Result<Comparison> comparison =
      CompareWithBaseline(Set({MakeRun(1, metrics)}, "b"), Set({MakeRun(2, metrics)}, "c"), forced);
  ASSERT_FALSE(comparison.ok());
  EXPECT_NE(comparison.status().message().find("no world size in common"), std::string::npos);
}

// ---- parsers and helpers ---------------------------------------------------------------

TEST(ParseTolerance, PercentagesAndFractions) {
  EXPECT_DOUBLE_EQ(*ParseTolerance("5%"), 0.05);
  EXPECT_DOUBLE_EQ(*ParseTolerance("12.5%"), 0.125);
  EXPECT_DOUBLE_EQ(*ParseTolerance("0.05"), 0.05);
  EXPECT_DOUBLE_EQ(*ParseTolerance("0"), 0.0);
  for (const char* bad : {"", "%", "abc", "5%%", "-1%", "5 %", "nan", "inf"}) {
    EXPECT_FALSE(ParseTolerance(bad).ok()) << bad;
  }
}

TEST(ParseMetricTolerance, NamesAndTolerances) {
  const Result<MetricTolerance> plain = ParseMetricTolerance("throughput");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->metric, "throughput");
  EXPECT_FALSE(plain->tolerance.has_value());
  const Result<MetricTolerance> with = ParseMetricTolerance("exposed_comm_ns:20%");
  ASSERT_TRUE(with.ok());
  EXPECT_DOUBLE_EQ(*with->tolerance, 0.20);
  const Result<MetricTolerance> unknown = ParseMetricTolerance("speed");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("known: throughput"), std::string::npos);
  EXPECT_FALSE(ParseMetricTolerance("throughput:x").ok());
}

TEST(SmallestTwoSidedP, CountsTheMostExtremeArrangements) {
  EXPECT_DOUBLE_EQ(SmallestTwoSidedP(3, 3), 2.0 / 20.0);
  EXPECT_DOUBLE_EQ(SmallestTwoSidedP(5, 5), 2.0 / 252.0);
  EXPECT_DOUBLE_EQ(SmallestTwoSidedP(1, 1), 1.0);
  EXPECT_LT(SmallestTwoSidedP(30, 30), 1e-15);
}

TEST(VerdictName, NamesEveryVerdict) {
  EXPECT_STREQ(VerdictName(Verdict::kUnchanged), "unchanged");
  EXPECT_STREQ(VerdictName(Verdict::kNotSignificant), "noise");
  EXPECT_STREQ(VerdictName(Verdict::kImproved), "improved");
  EXPECT_STREQ(VerdictName(Verdict::kRegressed), "REGRESSED");
}

}  // namespace
}  // namespace rankscope::compare
