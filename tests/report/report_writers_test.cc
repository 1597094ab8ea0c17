// The text, Markdown and HTML writers, and the formatting helpers they share.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "report/report_format.h"
#include "report/report_writers.h"
#include "tests/report/sample_report.h"

namespace rankscope::report {

using analyzer::ActivityClass;
using analyzer::Breakdown;
using analyzer::CrossRank;
using analyzer::DeviceReport;
using analyzer::Report;
using analyzer::StepMetrics;
using analyzer::StepStats;
using analyzer::StepWait;
namespace {

using testing::kMs;

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream stream(text);
  for (std::string line; std::getline(stream, line);) lines.push_back(line);
  return lines;
}

size_t Count(const std::string& text, const std::string& needle) {
  size_t count = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + needle.size())) ++count;
  return count;
}

// The sample with `ranks` ranks: copies of its two ranks, renumbered.
Report SampleWithRanks(int ranks) {
  Report report = testing::SampleReport();
  const std::vector<DeviceReport> originals = report.ranks;
  report.ranks.clear();
  report.run.ranks.clear();
  report.cross_rank.ranks.clear();
  report.cross_rank.waits.clear();
  for (StepWait& step : report.cross_rank.steps) step.wait_ns.clear();
  for (int rank = 0; rank < ranks; ++rank) {
    DeviceReport device = originals[static_cast<size_t>(rank % 2)];
    device.rank = rank;
    report.ranks.push_back(device);
    report.run.ranks.push_back(rank);
    report.cross_rank.ranks.push_back(rank);
    report.cross_rank.waits.push_back({rank, device.wait_ns, device.transfer_ns, 0, 0, 0, rank == 1});
    for (StepWait& step : report.cross_rank.steps) step.wait_ns.push_back(device.steps[0].wait_ns * (rank % 3));
  }
  report.run.world_size = ranks;
  report.summary.ranks = ranks;
  return report;
}

void ExpectWithinColumns(const std::string& text, size_t columns) {
  for (const std::string& line : Lines(text)) {
    EXPECT_LE(format::DisplayWidth(line), columns) << line;
  }
}

// Every opened <svg> is closed, and no coordinate is NaN or infinite.
void ExpectWellFormedSvg(const std::string& html) {
  EXPECT_EQ(Count(html, "<svg"), Count(html, "</svg>"));
  for (const char* bad : {"=\"nan", "=\"-nan", "=\"inf", "=\"-inf", "nan,", "inf,"}) {
    EXPECT_EQ(html.find(bad), std::string::npos) << bad;
  }
}

TEST(ReportFormatTest, DeviceNames) {
  EXPECT_EQ(DeviceName(-1), "cpu");
  EXPECT_EQ(DeviceName(3), "gpu 3");
  EXPECT_EQ(DeviceLabel(2, 0), "rank 2 gpu 0");
}

TEST(ReportTextTest, SummaryRanksStragglersAndWarnings) {
  const std::string text = ReportToText(testing::SampleReport());
  EXPECT_NE(text.find("2 of 2 analyzed"), std::string::npos) << text;
  EXPECT_NE(text.find("3 found, 2 aggregated, from NVTX ranges 'step'"), std::string::npos) << text;
  EXPECT_NE(text.find("51.5 ms"), std::string::npos) << text;
  EXPECT_NE(text.find("1242.7 samples/s"), std::string::npos) << text;
  EXPECT_NE(text.find("64 = 16 x 2 x 2"), std::string::npos) << text;
  // One row per rank: rank, device, then the median step time.
  int rank_rows = 0;
  for (const std::string& line : Lines(text)) {
    std::istringstream fields(line);
    std::string rank, device, step, unit;
    fields >> rank >> device >> step >> unit;
    if ((rank == "0" && device == "cpu" && step == "51.0") || (rank == "1" && device == "cpu" && step == "52.0")) {
      EXPECT_EQ(unit, "ms");
      ++rank_rows;
    }
  }
  EXPECT_EQ(rank_rows, 2) << text;
  EXPECT_NE(text.find("\nstragglers: rank 1 (last in 2 of 2 steps, caused 12.0 ms of wait)"), std::string::npos)
      << text;
  EXPECT_NE(text.find("\nclock: node-a (reference), node-b +1.25 ms (3 collectives)"), std::string::npos) << text;
  EXPECT_NE(text.find("\nwarning: rank 1: 12 events were dropped"), std::string::npos) << text;
  EXPECT_NE(text.find("gemm_kernel"), std::string::npos);
  EXPECT_NE(text.find("allreduce"), std::string::npos);
  EXPECT_EQ(text.find('\x1b'), std::string::npos);  // no colour codes
  ExpectWithinColumns(text, 100);
}

TEST(ReportTextTest, FourRanksFitOneScreenEvenWithLongNames) {
  Report report = SampleWithRanks(4);
  report.run.directory = "/very/long/path/" + std::string(150, 'd');
  report.top_activities[0].name = "void at::native::elementwise_kernel<" + std::string(250, 'x') + ">";
  report.cross_rank.kinds[0].kind = "ncclDevKernel_AllReduce_Sum_f32_RING_LL_" + std::string(80, 'k');
  report.warnings.push_back("a long warning " + std::string(30, 'w') + " with many words to wrap " +
                            std::string(120, 'v'));
  for (int i = 0; i < 10; ++i)
    report.top_activities.push_back({"kernel " + std::to_string(i), ActivityClass::kCompute, 1, kMs});
  const std::string text = ReportToText(report);
  EXPECT_LE(Lines(text).size(), 45u) << text;
  ExpectWithinColumns(text, 100);
  EXPECT_NE(text.find("elementwise_kernel<xxx"), std::string::npos) << text;
  EXPECT_NE(text.find("ddddd"), std::string::npos) << text;  // the end of the long path stays
}

TEST(ReportTextTest, NoStragglerShowsTheSpread) {
  Report report = testing::SampleReport();
  report.cross_rank.stragglers.clear();
  EXPECT_NE(ReportToText(report).find("stragglers: none (max/median step time 1.02, compute time 1.11)"),
            std::string::npos);
}

TEST(ReportTextTest, RankWithoutAggregatedStepsUsesTotals) {
  Report report = testing::SampleReport();
  report.ranks[1].step_stats = StepStats{};
  const std::string text = ReportToText(report);
  EXPECT_NE(text.find("204 ms*"), std::string::npos) << text;  // rank 1's whole window
  EXPECT_NE(text.find("* whole trace"), std::string::npos) << text;
}

TEST(ReportTextTest, EmptyReport) {
  const std::string text = ReportToText(testing::EmptyReport());
  EXPECT_NE(text.find("0 analyzed"), std::string::npos) << text;
  EXPECT_NE(text.find("stragglers: none"), std::string::npos) << text;
  ExpectWithinColumns(text, 100);
}

TEST(ReportMarkdownTest, TablesPerRankAndEscaping) {
  Report report = testing::SampleReport();
  report.top_activities[0].name = "fwd|bwd";
  const std::string markdown = ReportToMarkdown(report);
  EXPECT_EQ(markdown.rfind("## rankscope report: /runs/sample\n", 0), 0u) << markdown;
  EXPECT_NE(markdown.find("| 0 | cpu | node-a | 51.0 ms |"), std::string::npos) << markdown;
  EXPECT_NE(markdown.find("| 1 | cpu | node-b | 52.0 ms |"), std::string::npos) << markdown;
  EXPECT_NE(markdown.find("|---:|---|---|---:|"), std::string::npos) << markdown;
  EXPECT_NE(markdown.find("fwd\\|bwd"), std::string::npos) << markdown;
  EXPECT_EQ(markdown.find("fwd|bwd"), std::string::npos) << markdown;
  EXPECT_NE(markdown.find("stragglers: rank 1 (last in 2 of 2 steps"), std::string::npos) << markdown;
  EXPECT_NE(markdown.find("- rank 1: 12 events were dropped"), std::string::npos) << markdown;
  EXPECT_NE(markdown.find("| allreduce | allreduce | 3 | 4.00 MiB | 1.5 |"), std::string::npos) << markdown;
  // Every table row of the per-rank table has as many cells as its header.
  for (const std::string& line : Lines(markdown)) {
    if (line.rfind("| 0 | cpu", 0) == 0) {
      EXPECT_EQ(Count(line, " |"), 11u) << line;
    }
  }
}

TEST(ReportMarkdownTest, EmptyReport) {
  const std::string markdown = ReportToMarkdown(testing::EmptyReport());
  EXPECT_NE(markdown.find("No rank with device activity."), std::string::npos) << markdown;
}

TEST(ReportHtmlTest, SelfContainedEscapedWithThreeCharts) {
  Report report = testing::SampleReport();
  report.top_activities[0].name = "<script>alert('x')</script>";
  report.warnings.push_back("a \"quoted\" & <b>bold</b> warning");
  const std::string html = ReportToHtml(report);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("<style>"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(html.find("a &quot;quoted&quot; &amp; &lt;b&gt;bold&lt;/b&gt; warning"), std::string::npos);
  for (const char* external : {"src=\"http", "href=\"http", "src='http", "href='http", "url(http", "@import"}) {
    EXPECT_EQ(html.find(external), std::string::npos) << external;
  }
  EXPECT_EQ(html.find("http://"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(Count(html, "<svg"), 3u);
  ExpectWellFormedSvg(html);
  EXPECT_GT(Count(html, "<title>"), 10u);  // tooltips on the shapes
  EXPECT_NE(html.find("rank 1 cpu: comm only"), std::string::npos);
  EXPECT_NE(html.find("rank 0, step 2: waited 5.00 ms"), std::string::npos);
  EXPECT_NE(html.find("rank 1 cpu, step 0: 100 ms (not aggregated)"), std::string::npos);
  EXPECT_NE(html.find("<td class=\"num\">51.0 ms</td>"), std::string::npos);
  EXPECT_NE(html.find("stragglers: rank 1"), std::string::npos);
  EXPECT_EQ(html.substr(html.size() - 8), "</html>\n");
}

TEST(ReportHtmlTest, EmptyReportSaysWhyThereAreNoCharts) {
  const std::string html = ReportToHtml(testing::EmptyReport());
  EXPECT_NE(html.find("No cross-rank steps"), std::string::npos) << html;
  EXPECT_EQ(Count(html, "<svg"), 0u);
  ExpectWellFormedSvg(html);
}

TEST(ReportHtmlTest, OneRankOneStep) {
  Report report = testing::SampleReport();
  report.ranks.resize(1);
  report.ranks[0].steps.resize(1);
  report.cross_rank = CrossRank{};
  report.run.ranks = {0};
  const std::string html = ReportToHtml(report);
  EXPECT_EQ(Count(html, "<svg"), 2u);
  EXPECT_NE(html.find("only one rank was analyzed"), std::string::npos);
  ExpectWellFormedSvg(html);
}

TEST(ReportHtmlTest, SixtyFourRanksAndEmptyWindows) {
  Report report = SampleWithRanks(64);
  report.ranks[5].totals = Breakdown{};  // no activity: no division by a zero window
  for (StepMetrics& step : report.ranks[6].steps) step.breakdown.window_ns = 0;
  report.cross_rank.steps[1].wait_ns.resize(10);  // fewer waits than ranks
  const std::string html = ReportToHtml(report);
  EXPECT_EQ(Count(html, "<svg"), 3u);
  EXPECT_NE(html.find("rank 63 cpu"), std::string::npos);
  EXPECT_NE(html.find("no activity"), std::string::npos);
  ExpectWellFormedSvg(html);
}

TEST(ReportHtmlTest, AllZeroWaitsAndStepTimes) {
  Report report = testing::SampleReport();
  for (StepWait& step : report.cross_rank.steps) std::fill(step.wait_ns.begin(), step.wait_ns.end(), 0);
  for (DeviceReport& device : report.ranks) {
    for (StepMetrics& step : device.steps) step.breakdown.window_ns = 0;
  }
  const std::string html = ReportToHtml(report);
  EXPECT_EQ(Count(html, "<svg"), 3u);
  ExpectWellFormedSvg(html);
}

// Memory counters and a pipeline reach every writer: the memory table (and the HTML chart)
// and the parallelism section.
TEST(ReportWriters, MemoryAndParallelismSectionsAppearInEveryFormat) {
  Report report = testing::SampleReport();
  analyzer::RankMemory memory;
  memory.rank = 0;
  memory.source = "nvtx";
  memory.peak_bytes = 3 << 20;
  memory.at_peak = {{"parameters", 1 << 20}, {"activations", 2 << 20}};
  memory.category_peaks = memory.at_peak;
  report.memory.push_back(memory);
  analyzer::RankMemory device = memory;  // a second source: a table and a chart of its own
  device.source = "cuda";
  device.peak_bytes = 5 << 20;
  device.at_peak = {{"device (gpu 0)", 5 << 20}};
  device.category_peaks = device.at_peak;
  report.memory.push_back(device);
  analyzer::PipelineFigures pipeline;
  pipeline.stages = 2;
  pipeline.micro_batches = 4;
  pipeline.replicas = 1;
  pipeline.ideal_bubble_pct = 20;
  pipeline.bubble_pct = 31.5;
  pipeline.diagnosis = "mostly communication";
  pipeline.stage_rows.push_back({0, 0, 0, 5, 100, 60, 40.0, 20, 10, 10, 1.0});
  report.parallelism.strategy = "pipeline";
  report.parallelism.strategy_source = "workload mark";
  report.parallelism.pipeline = pipeline;

  const std::string text = ReportToText(report);
  EXPECT_NE(text.find("memory: the workload's allocations (NVTX memory marks) (bytes held, by category)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("memory: CUDA allocations (CUPTI memory activity) (bytes held, by category)"), std::string::npos)
      << text;
  EXPECT_NE(text.find("3.00 MiB"), std::string::npos) << text;
  EXPECT_NE(text.find("5.00 MiB"), std::string::npos) << text;
  EXPECT_NE(text.find("pipeline bubble 31.5% (ideal 20.0% for 2 stages, 4 micro-batches): mostly communication"),
            std::string::npos)
      << text;
  const std::string markdown = ReportToMarkdown(report);
  EXPECT_NE(markdown.find("## Memory: the workload's allocations (NVTX memory marks)"), std::string::npos) << markdown;
  EXPECT_NE(markdown.find("## Memory: CUDA allocations (CUPTI memory activity)"), std::string::npos) << markdown;
  EXPECT_NE(markdown.find("## Parallelism"), std::string::npos);
  const std::string html = ReportToHtml(report);
  EXPECT_NE(html.find("<h2>Memory</h2>"), std::string::npos);
  EXPECT_NE(html.find("memory per rank at its peak, by category: the workload"), std::string::npos);
  EXPECT_NE(html.find("memory per rank at its peak, by category: CUDA allocations"), std::string::npos);
  EXPECT_NE(html.find("<h2>Parallelism</h2>"), std::string::npos);
  // The summary lines: one per source, its highest peak and the range over ranks.
  analyzer::RankMemory other = memory;
  other.rank = 1;
  other.peak_bytes = 2 << 20;
  report.memory.insert(report.memory.begin() + 1, other);
  EXPECT_EQ(MemoryLines(report),
            (std::vector<std::string>{"memory · nvtx: peak 3.00 MiB on rank 0 (the workload's allocations (NVTX memory "
                                      "marks)); ranks' peaks 2.00 MiB to 3.00 MiB",
                                      "memory · cuda: peak 5.00 MiB on rank 0 (CUDA allocations (CUPTI memory "
                                      "activity))"}));
}

Report WithCriticalPath() {
  Report report = testing::SampleReport();
  analyzer::CriticalPathSummary path;
  path.steps = 4;
  path.measured_step_ns = 20 * kMs;
  path.path_ns = 20 * kMs;
  path.categories = {{"compute", 0.6}, {"communication transfer", 0.3}, {"host gap", 0.1}};
  path.top = {{"compute", 1, "gemm", 12 * kMs, 0.6}, {"host gap", 1, "gemm", 2 * kMs, 0.1}};
  path.waits = {{0, 1, "allreduce", "gemm", 5 * kMs, 4}};
  path.what_ifs = {{"every rank as fast as the median rank", 15 * kMs, 0.25}};
  report.critical_path = path;
  return report;
}

TEST(ReportCriticalPathTest, EveryWriterShowsThePathItsWaitsAndWhatIfs) {
  const Report report = WithCriticalPath();
  const std::string text = ReportToText(report);
  EXPECT_NE(text.find("critical path: 20.0 ms (median of 4 step(s)"), std::string::npos) << text;
  EXPECT_NE(text.find("compute 60.0%, communication transfer 30.0%, host gap 10.0%"), std::string::npos) << text;
  EXPECT_NE(text.find("before gemm"), std::string::npos) << text;  // a gap is named by what it preceded
  EXPECT_NE(text.find("every rank as fast as the median rank"), std::string::npos) << text;
  const std::string markdown = ReportToMarkdown(report);
  EXPECT_NE(markdown.find("## Critical path"), std::string::npos) << markdown;
  EXPECT_NE(markdown.find("| allreduce |"), std::string::npos) << markdown;
  const std::string html = ReportToHtml(report);
  EXPECT_NE(html.find("<h2>Critical path</h2>"), std::string::npos);
  // Without the option, no section at all.
  EXPECT_EQ(ReportToText(testing::SampleReport()).find("critical path"), std::string::npos);
  EXPECT_EQ(ReportToMarkdown(testing::SampleReport()).find("Critical path"), std::string::npos);
}

}  // namespace
}  // namespace rankscope::report
