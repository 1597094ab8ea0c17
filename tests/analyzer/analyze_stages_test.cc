// The stages of building a Report from measured ranks (analyzer/analyze_stages.h).
#include "analyzer/analyze_stages.h"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace rankscope::analyzer {
namespace {

// A step measured on one device; `aggregated` as the rank's selection left it.
StepMetrics Step(int64_t number, int64_t start_ns, int64_t end_ns, bool aggregated = true) {
  StepMetrics step;
  step.number = number;
  step.start_ns = start_ns;
  step.end_ns = end_ns;
  step.aggregated = aggregated;
  return step;
}

DeviceReport Device(int rank, int device, std::vector<StepMetrics> steps = {}) {
  DeviceReport report;
  report.rank = rank;
  report.device = device;
  report.steps = std::move(steps);
  return report;
}

RankResult Rank(int rank, std::vector<DeviceReport> devices = {}) {
  RankResult result;
  result.activity.rank = rank;
  result.devices = std::move(devices);
  return result;
}

DeviceReport WithMedian(int rank, Stats StepStats::*field, double median) {
  DeviceReport device = Device(rank, 0);
  Stats& stats = device.step_stats.*field;
  stats.count = 1;
  stats.median = stats.min = stats.max = stats.p90 = median;
  return device;
}

// ---- run info and activity ----

TEST(AnalyzeStages, CountsEventsAndWarnsAboutRanksWithoutActivity) {
  std::vector<RankResult> ranks;
  ranks.push_back(Rank(0, {Device(0, 0)}));
  ranks.back().activity.events = 100;
  ranks.back().activity.invalid_events = 1;
  ranks.push_back(Rank(1));
  ranks.back().activity.events = 20;
  ranks.back().activity.dropped_events = 3;
  ranks.back().activity.meta.entries["cupti.status"] = "off: another CUPTI client (nsys) is attached";
  ranks.push_back(Rank(2));
  ranks.back().activity.meta.entries["cupti.status"] = "off: not selected (--trace)";  // the user's choice

  RunInfo run;
  CountRankEvents(ranks, run);
  EXPECT_EQ(run.ranks, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(run.events, 120);
  EXPECT_EQ(run.invalid_events, 1);
  EXPECT_EQ(run.dropped_events, 3);
  EXPECT_EQ(run.ranks_without_activity, (std::vector<int>{1, 2}));

  std::vector<std::string> warnings = {"earlier"};
  ASSERT_TRUE(CheckDeviceActivity(ranks, run, warnings).ok());
  EXPECT_EQ(warnings, (std::vector<std::string>{
                          "earlier",
                          "rank(s) 1, 2 recorded no device activity and are left out of the metrics; CUDA activity "
                          "was not recorded: another CUPTI client (nsys) is attached (rank(s) 1)",
                          "1 damaged event(s) (ending before they start, or naming a string or lane the file does "
                          "not hold) were skipped",
                          "3 event(s) were lost while recording (see the files' drops tables); times may be "
                          "understated",
                      }));
}

TEST(AnalyzeStages, NoRankWithActivityIsAnErrorThatSaysWhy) {
  std::vector<RankResult> ranks;
  ranks.push_back(Rank(0));
  RunInfo run;
  CountRankEvents(ranks, run);
  std::vector<std::string> warnings;
  Status plain = CheckDeviceActivity(ranks, run, warnings);
  ASSERT_FALSE(plain.ok());
  EXPECT_NE(plain.message().find("was the program annotated"), std::string::npos) << plain.message();

  ranks[0].activity.meta.entries["cupti.status"] = "off: no GPU";
  Status cupti = CheckDeviceActivity(ranks, run, warnings);
  ASSERT_FALSE(cupti.ok());
  EXPECT_NE(cupti.message().find("CUDA activity was not recorded: no GPU (rank(s) 0)"), std::string::npos)
      << cupti.message();
  EXPECT_TRUE(warnings.empty());
}

// ---- steps ----

TEST(AnalyzeStages, StepSelectionTakesTheFewestAggregatedAndMedianDurations) {
  std::vector<RankResult> ranks;
  ranks.push_back(Rank(0, {Device(0, 0, {Step(1, 0, 100, false), Step(2, 100, 300), Step(3, 300, 400)})}));
  ranks.back().activity.step_source = "NVTX ranges 'step'";
  ranks.push_back(Rank(1));  // no activity: not counted
  ranks.push_back(Rank(2, {Device(2, 0, {Step(1, 0, 300, false), Step(2, 300, 700)})}));
  ranks.back().activity.step_source = "NVTX ranges 'train_step'";
  AnalyzeOptions options;
  options.skip_steps = 1;
  std::vector<std::string> warnings;
  Result<StepsAcrossRanks> steps = SelectSteps(ranks, options, warnings);
  ASSERT_TRUE(steps.ok()) << steps.status().message();
  EXPECT_EQ(steps->selection.source, "NVTX ranges 'step'");  // the first rank's
  EXPECT_EQ(steps->selection.skip_steps, 1);
  EXPECT_EQ(steps->selection.steps_found, 3);
  EXPECT_EQ(steps->selection.steps_aggregated, 1);
  EXPECT_EQ(steps->aggregated_numbers, (std::set<int64_t>{2, 3}));
  EXPECT_EQ(steps->median_step_ns, (std::map<int64_t, double>{{1, 200}, {2, 300}, {3, 100}}));
  EXPECT_TRUE(warnings.empty());
}

TEST(AnalyzeStages, StepSelectionWithoutStepRanges) {
  std::vector<RankResult> ranks;
  ranks.push_back(Rank(0, {Device(0, 0, {Step(0, 0, 1'000)})}));
  AnalyzeOptions options;
  std::vector<std::string> warnings;
  Result<StepsAcrossRanks> steps = SelectSteps(ranks, options, warnings);
  ASSERT_TRUE(steps.ok());
  EXPECT_EQ(steps->selection.source, "whole trace (no step ranges)");

  options.first_step = 3;
  Result<StepsAcrossRanks> refused = SelectSteps(ranks, options, warnings);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("--steps: the run has no step ranges"), std::string::npos);
}

TEST(AnalyzeStages, StepRangeSelectingNothingNamesTheRunsSteps) {
  std::vector<RankResult> ranks;
  ranks.push_back(Rank(0, {Device(0, 0, {Step(1, 0, 10, false), Step(2, 10, 20, false), Step(3, 20, 30, false)})}));
  ranks.back().activity.step_source = "NVTX ranges 'step'";
  AnalyzeOptions options;
  options.first_step = 9;
  std::vector<std::string> warnings;
  Result<StepsAcrossRanks> steps = SelectSteps(ranks, options, warnings);
  ASSERT_FALSE(steps.ok());
  EXPECT_EQ(steps.status().message(), "--steps 9.. selects no step after --skip-steps 1; the run has steps 1..3");
}

TEST(AnalyzeStages, RankWithoutASelectedStepIsWarnedAbout) {
  std::vector<RankResult> ranks;
  ranks.push_back(Rank(0, {Device(0, 0, {Step(1, 0, 10), Step(2, 10, 20)})}));
  ranks.push_back(Rank(1, {Device(1, 0, {Step(1, 0, 10, false)})}));
  ranks[0].activity.step_source = ranks[1].activity.step_source = "NVTX ranges 'step'";
  std::vector<std::string> warnings;
  Result<StepsAcrossRanks> steps = SelectSteps(ranks, AnalyzeOptions{}, warnings);
  ASSERT_TRUE(steps.ok());
  EXPECT_EQ(steps->selection.steps_aggregated, 0);
  EXPECT_EQ(warnings, (std::vector<std::string>{"some ranks have no step in the selection; their aggregates are empty"}));
}

// ---- device rows ----

TEST(AnalyzeStages, DeviceRowsTakeTheirRanksWaitsAndAreSortedByRankAndDevice) {
  std::vector<RankResult> ranks;
  ranks.push_back(Rank(0, {Device(0, 3, {Step(1, 0, 10), Step(2, 10, 20)}), Device(0, 1, {Step(1, 0, 10), Step(2, 10, 20)})}));
  ranks.push_back(Rank(1));  // no activity: not an input of the cross-rank stage
  ranks.push_back(Rank(2, {Device(2, 0, {Step(1, 0, 10), Step(2, 10, 20)})}));
  CrossRankResult cross;
  cross.step_wait_ns = {{5, 7}, {0, 40}};
  cross.cross_rank.waits = {RankWait{0, 12, 100}, RankWait{2, 40, 200}};
  const std::vector<DeviceReport> rows = DeviceReportsWithWaits(ranks, cross);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].rank, 0);
  EXPECT_EQ(rows[0].device, 1);
  EXPECT_EQ(rows[1].rank, 0);
  EXPECT_EQ(rows[1].device, 3);
  EXPECT_EQ(rows[2].rank, 2);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(rows[i].steps[0].wait_ns, 5);
    EXPECT_EQ(rows[i].steps[1].wait_ns, 7);
    EXPECT_EQ(rows[i].wait_ns, 12);
    EXPECT_EQ(rows[i].transfer_ns, 100);
    EXPECT_EQ(rows[i].step_stats.wait_ns.count, 2);
    EXPECT_DOUBLE_EQ(rows[i].step_stats.wait_ns.median, 6);
  }
  EXPECT_EQ(rows[2].steps[1].wait_ns, 40);
  EXPECT_EQ(rows[2].wait_ns, 40);
  EXPECT_EQ(rows[2].transfer_ns, 200);
}

TEST(AnalyzeStages, SpreadIsMaxOverMedianOfTheDevicesMedians) {
  std::vector<DeviceReport> devices = {WithMedian(0, &StepStats::step_ns, 100), WithMedian(1, &StepStats::step_ns, 300),
                                       WithMedian(2, &StepStats::step_ns, 200), Device(3, 0)};  // no steps: skipped
  const std::optional<double> spread = SpreadAcrossDevices(devices, &StepStats::step_ns);
  ASSERT_TRUE(spread.has_value());
  EXPECT_DOUBLE_EQ(*spread, 1.5);
  EXPECT_FALSE(SpreadAcrossDevices(devices, &StepStats::compute_ns).has_value());  // none has one
  EXPECT_FALSE(SpreadAcrossDevices({devices[0]}, &StepStats::step_ns).has_value());
  EXPECT_FALSE(SpreadAcrossDevices({WithMedian(0, &StepStats::step_ns, 0), WithMedian(1, &StepStats::step_ns, 0)},
                                   &StepStats::step_ns)
                   .has_value());
}

// ---- per run ----

TEST(AnalyzeStages, WorkloadFromTheMarkElseTheStepPayload) {
  std::vector<RankResult> ranks;
  ranks.push_back(Rank(0, {Device(0, kCpuDevice)}));
  ranks[0].activity.meta.command_line = "trainer --steps 5";
  ranks[0].activity.steps = {{1, 0, 10, 16}, {2, 10, 20, 16}, {3, 20, 30, 32}};
  ranks.push_back(Rank(1, {Device(1, kCpuDevice)}));

  Workload from_payload = MakeWorkload(ranks, 2);
  EXPECT_EQ(from_payload.command, "trainer --steps 5");
  EXPECT_EQ(from_payload.backend, "cpu");  // inferred: every device is the CPU backend's
  EXPECT_EQ(from_payload.global_batch, 32);  // median samples 16 x 2 ranks
  EXPECT_EQ(from_payload.source, "step payload");
  EXPECT_FALSE(MakeWorkload(ranks, std::nullopt).global_batch.has_value());

  ranks[1].activity.workload = WorkloadMark{.world_size = 4, .batch = 8, .accum = 2, .steps = 5, .parameters = 1000,
                                            .parallel = {}, .stages = {}, .micro_batches = {}};
  Workload from_mark = MakeWorkload(ranks, 2);
  EXPECT_EQ(from_mark.world_size, 4);
  EXPECT_EQ(from_mark.global_batch, 8 * 4 * 2);
  EXPECT_EQ(from_mark.steps, 5);
  EXPECT_EQ(from_mark.source, "workload mark");

  ranks[0].activity.collective_source = CollectiveSource::kKernels;
  EXPECT_EQ(MakeWorkload(ranks, 2).backend, "nccl");
  ranks[0].activity.meta.backend = "gloo";
  EXPECT_EQ(MakeWorkload(ranks, 2).backend, "gloo");  // the file's word wins
}

TEST(AnalyzeStages, RunMetricFindsTheWorstDeviceInTheRightDirection) {
  const std::vector<DeviceReport> devices = {WithMedian(0, &StepStats::overlap_pct, 80),
                                             WithMedian(1, &StepStats::overlap_pct, 20),
                                             WithMedian(2, &StepStats::overlap_pct, 50)};
  const RunMetric higher = MakeRunMetric(devices, "overlap_pct", true, &StepStats::overlap_pct);
  EXPECT_EQ(higher.name, "overlap_pct");
  EXPECT_DOUBLE_EQ(higher.median, 50);
  EXPECT_DOUBLE_EQ(higher.worst, 20);
  EXPECT_EQ(higher.worst_rank, 1);
  const RunMetric lower = MakeRunMetric(devices, "overlap_pct", false, &StepStats::overlap_pct);
  EXPECT_DOUBLE_EQ(lower.worst, 80);
  EXPECT_EQ(lower.worst_rank, 0);
}

TEST(AnalyzeStages, RunSummaryGivesThroughputOrSaysWhyNot) {
  const std::vector<DeviceReport> devices = {WithMedian(0, &StepStats::step_ns, 2e8),
                                             WithMedian(1, &StepStats::step_ns, 3e8),
                                             WithMedian(2, &StepStats::step_ns, 2.5e8)};
  RunInfo run;
  run.ranks = {0, 1, 2, 3};
  run.ranks_without_activity = {3};
  Workload workload;
  workload.global_batch = 100;
  std::vector<std::string> warnings;
  const RunSummary summary = SummarizeRun(devices, run, 7, workload, warnings);
  EXPECT_EQ(summary.ranks, 3);
  EXPECT_EQ(summary.steps, 7);
  ASSERT_TRUE(summary.step_time_ns.has_value());
  EXPECT_DOUBLE_EQ(*summary.step_time_ns, 2.5e8);
  ASSERT_TRUE(summary.throughput.has_value());
  EXPECT_DOUBLE_EQ(*summary.throughput, 400);  // 100 samples per 0.25 s
  ASSERT_EQ(summary.metrics.size(), 8u);
  EXPECT_EQ(summary.metrics[0].name, "step_ns");
  EXPECT_EQ(summary.metrics[7].name, "wait_ns");
  EXPECT_TRUE(warnings.empty());

  const RunSummary unknown = SummarizeRun(devices, run, 7, Workload{}, warnings);
  EXPECT_FALSE(unknown.throughput.has_value());
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("throughput unknown"), std::string::npos);
}

TEST(AnalyzeStages, TopActivitiesAreSummedByNameAndClassLongestFirst) {
  std::vector<RankResult> ranks;
  ranks.push_back(Rank(0));
  ranks[0].activity.activities = {{"gemm", ActivityClass::kCompute, 10, 1'000},
                                  {"allreduce", ActivityClass::kComm, 5, 900},
                                  {"copy", ActivityClass::kMemory, 1, 10}};
  ranks.push_back(Rank(1));
  ranks[1].activity.activities = {{"gemm", ActivityClass::kCompute, 10, 1'200},
                                  {"gemm", ActivityClass::kComm, 1, 50},  // another class: its own entry
                                  {"bias", ActivityClass::kCompute, 2, 900}};
  const std::vector<ActivitySummary> top = SumTopActivities(ranks, 3);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].name, "gemm");
  EXPECT_EQ(top[0].activity_class, ActivityClass::kCompute);
  EXPECT_EQ(top[0].count, 20);
  EXPECT_EQ(top[0].total_ns, 2'200);
  EXPECT_EQ(top[1].name, "allreduce");  // ties by name
  EXPECT_EQ(top[2].name, "bias");
  EXPECT_EQ(SumTopActivities(ranks, 10).size(), 5u);
}

}  // namespace
}  // namespace rankscope::analyzer
