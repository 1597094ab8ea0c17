// report/scaling_report.h: the scaling study and the comparison in every format. The
// scaling JSON is a golden file (RANKSCOPE_UPDATE_GOLDEN=1 rewrites it) and reads back as
// the same runs, which is what makes it a `rankscope compare` baseline.
#include "report/scaling_report.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/comparable_run_builder.h"
#include "tests/golden.h"

namespace rankscope::report {

using compare::ComparableRun;
using compare::ComparableSet;
using compare::Comparison;
using compare::ComputeScalingOfRuns;
using compare::MetricComparison;
using compare::ParseComparableJson;
using compare::ScalingTable;
using compare::Verdict;
namespace {

constexpr double kMs = 1e6;

// A weak-scaling run of 32 samples per rank over 6 steps of step_ms, + 0.1 and + 0.2 ms.
ComparableRun WeakRun(int world_size, double step_ms) {
  std::vector<double> steps;
  for (int i = 0; i < 6; ++i) steps.push_back(step_ms + 0.1 * (i % 3));
  return rankscope::testing::MakeWeakRun({.world_size = world_size,
                                          .step_ms = steps,
                                          .program = "rankscope-trainer",
                                          .command = "rankscope-trainer --batch 32",
                                          .backend = "gloo",
                                          .exposed_ms_per_extra_rank = 2,
                                          .comm_compute_per_extra_rank = 0.1});
}

ScalingTable WeakTable() {
  Result<ScalingTable> table = ComputeScalingOfRuns({WeakRun(1, 10), WeakRun(2, 11), WeakRun(4, 12.5)});
  EXPECT_TRUE(table.ok()) << table.status().message();
  return table.ok() ? *table : ScalingTable{};
}

TEST(ScalingToJson, MatchesTheGoldenFile) {
  rankscope::testing::ExpectMatchesGolden(rankscope::testing::GoldenPath("tests/report/golden/scaling_weak.json"),
                                          ScalingToJson(WeakTable(), "test"));
}

TEST(ScalingToJson, ReadsBackAsTheSameRunsForCompare) {
  const ScalingTable table = WeakTable();
  const Result<ComparableSet> set = ParseComparableJson(ScalingToJson(table, "test"), "scaling.json");
  ASSERT_TRUE(set.ok()) << set.status().message();
  ASSERT_EQ(set->runs.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    const ComparableRun& read = set->runs[i];
    const ComparableRun& written = table.runs[i];
    EXPECT_EQ(read.workload.world_size, written.workload.world_size);
    EXPECT_EQ(read.workload.program, written.workload.program);
    EXPECT_EQ(read.workload.global_batch, written.workload.global_batch);
    EXPECT_EQ(read.allreduce_bytes_per_step, written.allreduce_bytes_per_step);
    ASSERT_EQ(read.metrics.size(), written.metrics.size());
    for (size_t m = 0; m < read.metrics.size(); ++m) {
      EXPECT_EQ(read.metrics[m].name, written.metrics[m].name);
      EXPECT_DOUBLE_EQ(read.metrics[m].value, written.metrics[m].value);
      EXPECT_EQ(read.metrics[m].samples, written.metrics[m].samples);
    }
  }
  // The scaling efficiency of each run travels too: compare can gate on it.
  EXPECT_NE(set->runs[2].Find("efficiency"), nullptr);
}

TEST(ScalingToText, PublishedTableProjectionAndModel) {
  const std::string text = ScalingToText(WeakTable(), "test");
  EXPECT_NE(text.find("| GPUs | Batch Size | Samples/sec | Scaling Efficiency |"), std::string::npos) << text;
  EXPECT_NE(text.find("|    4 |        128 |"), std::string::npos) << text;
  EXPECT_NE(text.find("weak scaling: every run has 32 samples per rank per step"), std::string::npos) << text;
  EXPECT_NE(text.find("projection"), std::string::npos) << text;
  EXPECT_NE(text.find("\n    8 "), std::string::npos) << text;
  EXPECT_NE(text.find("\n   16 "), std::string::npos) << text;
  EXPECT_NE(text.find("error on the measured points"), std::string::npos) << text;
}

// "GPUs" counts ranks on a CPU backend, and the table says so only when every run was one.
TEST(ScalingToText, TheCpuNoteOnlyWhenEveryRunIsOnTheCpu) {
  const char* kNote = "(CPU backend: GPUs counts ranks)";
  auto text_with_backends = [](const std::vector<std::string>& backends) {
    std::vector<ComparableRun> runs;
    for (size_t i = 0; i < backends.size(); ++i) {
      runs.push_back(WeakRun(1 << i, 10.0 + static_cast<double>(i)));
      runs.back().workload.backend = backends[i];
    }
    Result<ScalingTable> table = ComputeScalingOfRuns(std::move(runs));
    EXPECT_TRUE(table.ok()) << table.status().message();
    return table.ok() ? ScalingToText(*table, "test") : std::string();
  };
  EXPECT_NE(text_with_backends({"cpu", "gloo"}).find(kNote), std::string::npos);
  EXPECT_EQ(text_with_backends({"nccl", "nccl"}).find(kNote), std::string::npos);
  EXPECT_EQ(text_with_backends({"", ""}).find(kNote), std::string::npos);  // unknown: maybe GPUs
  EXPECT_EQ(text_with_backends({"cpu", ""}).find(kNote), std::string::npos);
}

TEST(ScalingToMarkdownAndHtml, TableAndCharts) {
  const ScalingTable table = WeakTable();
  const std::string markdown = ScalingToMarkdown(table);
  EXPECT_NE(markdown.find("| GPUs | Batch Size | Samples/sec | Scaling Efficiency |"), std::string::npos) << markdown;
  const std::string html = ScalingToHtml(table, "test");
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("</html>"), std::string::npos);
}

// ---- the comparison ----------------------------------------------------------------------

MetricComparison Row(int ranks, const std::string& metric, double base, double cur, Verdict verdict,
                     const std::string& reason) {
  MetricComparison row;
  row.world_size = ranks;
  row.metric = metric;
  row.baseline = base;
  row.current = cur;
  row.change = (cur - base) / base;
  row.tolerance = 0.05;
  row.verdict = verdict;
  row.reason = reason;
  return row;
}

Comparison MixedComparison() {
  Comparison comparison;
  comparison.baseline_source = "base <1>.json";
  comparison.current_source = "sweep";
  comparison.rows = {
      Row(2, "step_time_ns", 10 * kMs, 10.1 * kMs, Verdict::kUnchanged, "plain unchanged"),
      Row(2, "exposed_comm_ns", 2e3, 13e3, Verdict::kUnchanged, "below the floor"),
      Row(2, "throughput", 1000, 900, Verdict::kNotSignificant, "within the noise"),
      Row(4, "step_time_ns", 10 * kMs, 13 * kMs, Verdict::kRegressed, "really slower & worse"),
  };
  comparison.notes = {"the command lines differ"};
  return comparison;
}

TEST(ComparisonWriters, TextExplainsEveryRowTheTableDoesNot) {
  const std::string text = ComparisonToText(MixedComparison());
  EXPECT_EQ(text.find("plain unchanged"), std::string::npos) << text;
  for (const char* reason : {"below the floor", "within the noise", "really slower & worse", "note: the command"}) {
    EXPECT_NE(text.find(reason), std::string::npos) << reason << "\n" << text;
  }
  EXPECT_NE(text.find("REGRESSION: 1 of 4 checks regressed"), std::string::npos) << text;
}

TEST(ComparisonWriters, MarkdownHasTheVerdictAndNoDoubleBlankLines) {
  const std::string markdown = ComparisonToMarkdown(MixedComparison());
  EXPECT_EQ(markdown.rfind("## rankscope compare: regression\n", 0), 0u) << markdown;
  EXPECT_NE(markdown.find("| 4 | step\\_time\\_ns |"), std::string::npos) << markdown;
  EXPECT_NE(markdown.find("- **4 ranks, step\\_time\\_ns**: really slower"), std::string::npos) << markdown;
  EXPECT_EQ(markdown.find("\n\n\n"), std::string::npos) << markdown;
  Comparison clean = MixedComparison();
  clean.rows.resize(1);
  clean.notes.clear();
  const std::string quiet = ComparisonToMarkdown(clean);
  EXPECT_NE(quiet.find("## rankscope compare: no regression"), std::string::npos);
  EXPECT_EQ(quiet.find("\n\n\n"), std::string::npos) << quiet;
}

TEST(ComparisonWriters, JUnitHasOneCasePerRowAndEscapes) {
  const std::string xml = ComparisonToJUnit(MixedComparison());
  EXPECT_EQ(xml.rfind("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", 0), 0u);
  EXPECT_NE(xml.find("tests=\"4\" failures=\"1\""), std::string::npos) << xml;
  size_t cases = 0;
  for (size_t at = xml.find("<testcase "); at != std::string::npos; at = xml.find("<testcase ", at + 1)) ++cases;
  EXPECT_EQ(cases, 4u);
  EXPECT_NE(xml.find("classname=\"rankscope.compare.n4\" name=\"step_time_ns\""), std::string::npos) << xml;
  EXPECT_NE(xml.find("really slower &amp; worse"), std::string::npos) << xml;
  EXPECT_EQ(xml.find("slower & worse"), std::string::npos) << xml;
}

}  // namespace
}  // namespace rankscope::report
