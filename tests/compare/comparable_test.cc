// compare/comparable.h: a run's figures and per-step samples, and their JSON round trip
// through the analysis and scaling reports (the baseline format of `rankscope compare`).
#include "compare/comparable.h"

#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "report/report_writers.h"
#include "compare/scaling.h"
#include "report/scaling_report.h"

namespace rankscope::compare {

using analyzer::CollectiveKindSummary;
using analyzer::DeviceReport;
using analyzer::Report;
using analyzer::RunMetric;
using analyzer::StepMetrics;
using report::ReportToJson;
using report::ScalingToJson;
namespace {

constexpr int64_t kMs = 1'000'000;

StepMetrics Step(int64_t number, bool aggregated, int64_t window, int64_t compute, int64_t comm, int64_t exposed,
                 int64_t wait) {
  StepMetrics step;
  step.number = number;
  step.aggregated = aggregated;
  step.start_ns = number * 100 * kMs;
  step.end_ns = step.start_ns + window;
  step.breakdown.window_ns = window;
  step.breakdown.compute_ns = compute;
  step.breakdown.comm_ns = comm;
  step.breakdown.exposed_comm_ns = exposed;
  step.breakdown.overlap_ns = comm - exposed;
  step.breakdown.overlap_pct = comm > 0 ? 100.0 * static_cast<double>(comm - exposed) / static_cast<double>(comm) : 0;
  step.breakdown.comm_compute_ratio = static_cast<double>(comm) / static_cast<double>(compute);
  step.breakdown.utilization_pct = 50;
  step.wait_ns = wait;
  return step;
}

// Two ranks, three steps each; step 0 is warm-up. Rank 1 is slower in step 2.
Report TwoRankReport() {
  Report report;
  report.run.directory = "runs/n2";
  report.run.world_size = 2;
  report.run.ranks = {0, 1};
  report.workload.command = "/build/trainer/rankscope-trainer --steps 3 --batch 32";
  report.workload.backend = "gloo";
  report.workload.world_size = 2;
  report.workload.batch_per_rank = 32;
  report.workload.accumulation = 1;
  report.workload.global_batch = 64;
  report.workload.parameters = 1000;
  report.steps.steps_found = 3;
  report.summary.steps = 2;
  report.summary.step_time_ns = 45.0 * kMs;
  report.summary.throughput = 64 / 0.045;
  for (const char* name : {"step_ns", "compute_ns", "comm_ns", "exposed_comm_ns", "overlap_pct", "comm_compute_ratio",
                           "utilization_pct", "wait_ns"}) {
    RunMetric metric;
    metric.name = name;
    metric.median = std::string(name) == "exposed_comm_ns" ? 7.0 * kMs : 1.0;
    report.summary.metrics.push_back(metric);
  }
  for (int rank = 0; rank < 2; ++rank) {
    DeviceReport device;
    device.rank = rank;
    device.steps = {Step(0, false, 90 * kMs, 30 * kMs, 20 * kMs, 10 * kMs, 0),
                    Step(1, true, 40 * kMs, 30 * kMs, 10 * kMs, 5 * kMs, rank * kMs),
                    Step(2, true, (rank == 0 ? 50 : 60) * kMs, 30 * kMs, 10 * kMs, (rank == 0 ? 8 : 10) * kMs, 0)};
    report.ranks.push_back(device);
  }
  CollectiveKindSummary allreduce;
  allreduce.kind = "allreduce";
  allreduce.op = "allreduce";
  allreduce.count = 6;
  allreduce.total_bytes = 3 * 4'000'000;
  report.cross_rank.kinds.push_back(allreduce);
  return report;
}

const ComparableMetric& Get(const ComparableRun& run, const std::string& name) {
  const ComparableMetric* metric = run.Find(name);
  EXPECT_NE(metric, nullptr) << name;
  static const ComparableMetric kMissing;
  return metric != nullptr ? *metric : kMissing;
}

TEST(MakeComparable, SamplesAreTheMedianOverDevicesOfEachAggregatedStep) {
  const ComparableRun run = MakeComparable(TwoRankReport());
  EXPECT_EQ(run.source, "runs/n2");
  EXPECT_EQ(run.workload.program, "rankscope-trainer");
  EXPECT_EQ(run.workload.world_size, 2);
  EXPECT_EQ(run.workload.batch_per_rank, 32);
  EXPECT_EQ(run.steps, 2);
  // Steps 1 and 2 (step 0 is warm-up): medians over the two ranks.
  EXPECT_EQ(Get(run, "step_time_ns").samples, (std::vector<double>{40.0 * kMs, 55.0 * kMs}));
  EXPECT_DOUBLE_EQ(Get(run, "step_time_ns").value, 45.0 * kMs);
  EXPECT_EQ(Get(run, "exposed_comm_ns").samples, (std::vector<double>{5.0 * kMs, 9.0 * kMs}));
  EXPECT_DOUBLE_EQ(Get(run, "exposed_comm_ns").value, 7.0 * kMs);  // the summary's figure
  EXPECT_EQ(Get(run, "wait_ns").samples, (std::vector<double>{0.5 * kMs, 0.0}));
  // Throughput per step is the global batch over that step's time.
  ASSERT_EQ(Get(run, "throughput").samples.size(), 2u);
  EXPECT_DOUBLE_EQ(Get(run, "throughput").samples[0], 64 / 0.040);
  EXPECT_DOUBLE_EQ(Get(run, "throughput").value, 64 / 0.045);
  // Overlapped comm is not in the summary: the median of its samples.
  EXPECT_DOUBLE_EQ(Get(run, "overlap_ns").value, (5.0 * kMs + 1.0 * kMs) / 2);
  // 12 MB all-reduced over 3 steps.
  ASSERT_TRUE(run.allreduce_bytes_per_step.has_value());
  EXPECT_DOUBLE_EQ(*run.allreduce_bytes_per_step, 4'000'000.0);
}

TEST(MakeComparable, NoThroughputWithoutABatch) {
  Report report = TwoRankReport();
  report.summary.throughput.reset();
  report.workload.global_batch.reset();
  const ComparableRun run = MakeComparable(report);
  EXPECT_EQ(run.Find("throughput"), nullptr);
  EXPECT_NE(run.Find("step_time_ns"), nullptr);
}

TEST(ProgramOf, NamesTheWorkloadNotTheOptions) {
  EXPECT_EQ(ProgramOf("/a/b/rankscope-trainer --steps 3 --no-overlap"), "rankscope-trainer");
  EXPECT_EQ(ProgramOf("python3 -u /work/train.py --lr 0.1"), "python3 train.py");
  EXPECT_EQ(ProgramOf("python -m torch.distributed.run --nproc-per-node 8 x.py"), "python -m torch.distributed.run");
  EXPECT_EQ(ProgramOf("  trainer"), "trainer");
  EXPECT_EQ(ProgramOf(""), "");
}

void ExpectSameRun(const ComparableRun& a, const ComparableRun& b) {
  EXPECT_EQ(a.source, b.source);
  EXPECT_EQ(a.command, b.command);
  EXPECT_EQ(a.workload.program, b.workload.program);
  EXPECT_EQ(a.workload.backend, b.workload.backend);
  EXPECT_EQ(a.workload.world_size, b.workload.world_size);
  EXPECT_EQ(a.workload.batch_per_rank, b.workload.batch_per_rank);
  EXPECT_EQ(a.workload.accumulation, b.workload.accumulation);
  EXPECT_EQ(a.workload.global_batch, b.workload.global_batch);
  EXPECT_EQ(a.workload.parameters, b.workload.parameters);
  EXPECT_EQ(a.steps, b.steps);
  EXPECT_EQ(a.allreduce_bytes_per_step, b.allreduce_bytes_per_step);
  ASSERT_EQ(a.metrics.size(), b.metrics.size());
  for (size_t i = 0; i < a.metrics.size(); ++i) {
    EXPECT_EQ(a.metrics[i].name, b.metrics[i].name);
    EXPECT_DOUBLE_EQ(a.metrics[i].value, b.metrics[i].value) << a.metrics[i].name;
    EXPECT_EQ(a.metrics[i].samples, b.metrics[i].samples) << a.metrics[i].name;
  }
}

TEST(ParseComparableJson, AnAnalysisReportIsABaselineOfOneRun) {
  const Report report = TwoRankReport();
  const Result<ComparableSet> set = ParseComparableJson(ReportToJson(report), "base.json");
  ASSERT_TRUE(set.ok()) << set.status().message();
  EXPECT_FALSE(set->sweep);
  EXPECT_EQ(set->source, "base.json");
  ASSERT_EQ(set->runs.size(), 1u);
  ExpectSameRun(set->runs.front(), MakeComparable(report));
}

// The two-rank report and a one-rank run of it at 40 ms a step, as a scaling study.
Result<ScalingTable> OneAndTwoRanks() {
  Report n1 = TwoRankReport();
  n1.run.directory = "runs/n1";
  n1.run.world_size = 1;
  n1.workload.world_size = 1;
  n1.workload.global_batch = 32;
  n1.summary.throughput = 32 / 0.040;
  n1.summary.step_time_ns = 40.0 * kMs;
  const Report n2 = TwoRankReport();
  return ComputeScaling(std::vector<const Report*>{&n1, &n2});
}

TEST(ParseComparableJson, AScalingReportIsABaselineOfASweep) {
  const Result<ScalingTable> table = OneAndTwoRanks();
  ASSERT_TRUE(table.ok()) << table.status().message();
  const Result<ComparableSet> set = ParseComparableJson(ScalingToJson(*table, "test"), "scale.json");
  ASSERT_TRUE(set.ok()) << set.status().message();
  EXPECT_TRUE(set->sweep);
  ASSERT_EQ(set->runs.size(), 2u);
  for (size_t i = 0; i < 2; ++i) ExpectSameRun(set->runs[i], table->runs[i]);
  // The efficiency figure travels with its per-step samples.
  const ComparableMetric& efficiency = Get(set->runs[1], "efficiency");
  EXPECT_DOUBLE_EQ(efficiency.value, *table->points[1].efficiency);
  EXPECT_EQ(efficiency.samples.size(), 2u);
}

TEST(ParseComparableJson, RunsComeOutByWorldSizeWhateverTheFileOrder) {
  const Result<ScalingTable> table = OneAndTwoRanks();
  ASSERT_TRUE(table.ok()) << table.status().message();
  nlohmann::json edited = nlohmann::json::parse(ScalingToJson(*table, "test"));
  std::reverse(edited["runs"].begin(), edited["runs"].end());
  const Result<ComparableSet> set = ParseComparableJson(edited.dump(), "edited.json");
  ASSERT_TRUE(set.ok()) << set.status().message();
  ASSERT_EQ(set->runs.size(), 2u);
  EXPECT_EQ(set->runs[0].workload.world_size, 1);
  EXPECT_EQ(set->runs[1].workload.world_size, 2);
}

TEST(ParseComparableJson, RefusesWhatIsNotABaseline) {
  nlohmann::json report = nlohmann::json::parse(ReportToJson(TwoRankReport()));
  struct Case {
    std::string name;
    std::string text;
    std::string expected;  // in the message
  };
  std::vector<Case> cases;
  cases.push_back({"not json", "{ nope", "not a JSON file"});
  cases.push_back({"array", "[1, 2]", "not a rankscope JSON report"});
  cases.push_back({"other format", R"({"format": "chrome.trace", "version": 1})", "format 'chrome.trace'"});
  nlohmann::json newer = report;
  newer["version"] = 2;
  cases.push_back({"newer version", newer.dump(), "version 2, but this rankscope reads version 1"});
  nlohmann::json old = report;
  old.erase("comparable");
  cases.push_back({"before compare", old.dump(), "no 'comparable' figures"});
  nlohmann::json wrong_type = report;
  wrong_type["comparable"]["metrics"][0]["value"] = "fast";
  cases.push_back({"wrong type", wrong_type.dump(), "comparable.metrics[0].value is not a number"});
  nlohmann::json no_size = report;
  no_size["comparable"]["workload"].erase("world_size");
  cases.push_back({"no world size", no_size.dump(), "world_size is missing"});
  nlohmann::json bad_sample = report;
  bad_sample["comparable"]["metrics"][1]["samples"][0] = "x";
  cases.push_back({"bad sample", bad_sample.dump(), "samples holds a value that is not a number"});
  for (const Case& c : cases) {
    const Result<ComparableSet> set = ParseComparableJson(c.text, "base.json");
    ASSERT_FALSE(set.ok()) << c.name;
    EXPECT_NE(set.status().message().find("base.json"), std::string::npos) << c.name << ": " << set.status().message();
    EXPECT_NE(set.status().message().find(c.expected), std::string::npos) << c.name << ": " << set.status().message();
  }
}

TEST(ParseComparableJson, IgnoresMetricsItDoesNotKnow) {
  nlohmann::json report = nlohmann::json::parse(ReportToJson(TwoRankReport()));
  report["comparable"]["metrics"].push_back({{"name", "future_metric"}, {"value", 1.0}, {"samples", {1.0}}});
  const Result<ComparableSet> set = ParseComparableJson(report.dump(), "base.json");
  ASSERT_TRUE(set.ok()) << set.status().message();
  EXPECT_EQ(set->runs.front().Find("future_metric"), nullptr);
}

}  // namespace
}  // namespace rankscope::compare
