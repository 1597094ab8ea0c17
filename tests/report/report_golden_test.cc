// Golden reports: a small trace (or scaling study, or comparison) in, every output format out,
// compared byte for byte with tests/report/golden/. RANKSCOPE_UPDATE_GOLDEN=1 rewrites the
// files (tests/golden.h); each input below carries the figures computed by hand that its
// goldens must show, and a few exact checks of those figures run in both modes, so a
// regeneration that changes them fails.
//
// Nothing in these outputs varies between runs once the inputs fix it: the tool version is
// "golden", the run directory and the report sources are fixed strings, and no writer prints
// a date. So no output is normalized before it is compared. The PNG chart has no golden: its
// pixels depend on the fonts and the cairo and FreeType builds installed, not on rankscope
// (scaling_plot_test.cc checks its size and where its series are drawn).
#include <array>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "analyzer/analyze.h"
#include "compare/compare.h"
#include "compare/scaling.h"
#include "report/report_writers.h"
#include "report/scaling_report.h"
#include "tests/comparable_run_builder.h"
#include "tests/golden.h"
#include "tests/trace_builder.h"

namespace rankscope::report {
namespace {

using analyzer::AnalyzeOptions;
using analyzer::AnalyzeTraces;
using analyzer::DeviceReport;
using analyzer::Report;
using analyzer::testing::TraceBuilder;
using rankscope::testing::ExpectMatchesGolden;
using rankscope::testing::GoldenPath;

constexpr const char* kToolVersion = "golden";
constexpr int64_t kMs = 1'000'000;

std::string Golden(const std::string& name) { return "tests/report/golden/" + name; }

// `line` is one whole line of `text`: how a figure is checked where it is printed.
void ExpectLine(const std::string& text, const std::string& line) {
  std::istringstream lines(text);
  for (std::string candidate; std::getline(lines, candidate);) {
    if (candidate == line) return;
  }
  ADD_FAILURE() << "no line\n  " << line << "\nin\n" << text;
}

// ---- The diff a failing golden test prints (tests/golden.h) ----------------------------------

TEST(GoldenDiff, ShowsTheChangedLinesWithTheirContext) {
  using rankscope::testing::GoldenDiff;
  EXPECT_EQ(GoldenDiff("same\n", "same\n"), "");
  // One line changed in the middle, one added near the end: one hunk each.
  const std::string expected = "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n14\n15\n16\n";
  const std::string actual = "1\n2\n3\n4\nfive\n6\n7\n8\n9\n10\n11\n12\n13\n14\n14.5\n15\n16\n";
  EXPECT_EQ(GoldenDiff(expected, actual),
            "--- expected (golden)\n+++ actual\n"
            "@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n"
            "@@ -12,5 +12,6 @@\n 12\n 13\n 14\n+14.5\n 15\n 16\n");
  // Only the last line's newline differs; a stray carriage return is shown.
  EXPECT_EQ(GoldenDiff("a\nb\n", "a\nb"), "(the golden file ends in a newline, the output does not)\n");
  EXPECT_EQ(GoldenDiff("a\n", "a\r\n"), "--- expected (golden)\n+++ actual\n@@ -1,1 +1,1 @@\n-a\n+a\\x0d\n");
  // Past `max_lines`, the rest is counted.
  EXPECT_EQ(GoldenDiff("a\nb\nc\n", "x\ny\nz\n", 2),
            "--- expected (golden)\n+++ actual\n@@ -1,3 +1,3 @@\n-a\n-b\n... and 4 more differing line(s)\n");
}

// ---- One run: three ranks, rank 2 the straggler ------------------------------------------------
//
// Ranks 0 and 1 on host "node-a", rank 2 on "node-b" (same clock). Steps k = 0, 1, 2 are the
// NVTX ranges [t, t + 40 ms), t = 40k ms; step 0 is warm-up (skip_steps 1). In each step rank r
// runs on its compute stream gemm [t, t + c_r) and bias_grad [t + c_r, t + c_r + 4 ms), with
// c = (20, 20, 30) ms, and on its comm stream the NCCL all-reduce kernel [t + c_r, t + 34 ms),
// recorded by the NCCL plugin too (8 MB, communicator of 3, sequence k). Rank 0 also copies
// [t + 35, t + 37) ms, and records a broadcast no other rank has; rank 1 lost 5 events (a
// drops row). The workload mark says 16 samples per rank, 3 ranks, 1 accumulation step.
//
// Per aggregated step (steps 1 and 2), compute C, comm M, memory Y:
//   rank 0: C = [0, 24), M = [20, 34), Y = [35, 37): compute 24, comm 14, overlap 4 ms,
//           exposed 10 ms; busy 36 of 40 ms: utilization 90.0%; overlap 4/14 = 28.6%;
//           comm/compute 14/24 = 0.58
//   rank 1: the same without the copy: busy 34 of 40 ms: utilization 85.0%
//   rank 2: C = [0, 34), M = [30, 34): compute 34, comm 4, overlap 4 ms: 100%, exposed 0;
//           utilization 85.0%; comm/compute 4/34 = 0.12
// Collectives: rank 2 arrives last at t + 30 ms, so ranks 0 and 1 wait 10 ms per all-reduce,
// 30 ms over the 3 (warm-up included); everyone transfers 34 - 30 = 4 ms, 12 ms in all.
// Rank 2 was last 3 times and caused 3 × 20 = 60 ms of wait; in each aggregated step the others
// waited 10 ms on average, over 5% of 40 ms, so rank 2 caused the most wait in 2 of 2 steps:
// the straggler. Bus bandwidth: 8 MB / 4 ms = 2 GB/s algbw, × 2(3-1)/3 = 2.67 GB/s.
// Throughput: 48 samples (16 × 3) per 40 ms step = 1200 samples/s. Compute-time spread:
// medians 24, 24, 34 ms: max / median = 34 / 24 = 1.42.
// Warnings: the 5 lost events, and the broadcast seen on rank 0 only.

constexpr uint64_t kWorldComm = 0xC0FFEE;
constexpr std::array<int64_t, 3> kComputeMs = {20, 20, 30};

std::vector<trace::RankTrace> StragglerTraces() {
  std::vector<trace::RankTrace> traces;
  for (int rank = 0; rank < 3; ++rank) {
    TraceBuilder b(rank, 3);
    b.Host(rank < 2 ? "node-a" : "node-b");
    b.RunId("golden-run");
    b.Backend("nccl");
    b.CommandLine("python3 train.py --batch 16");
    const trace::LaneId main = b.CpuThread("main");
    const trace::LaneId compute = b.GpuStream(0);
    const trace::LaneId comm = b.GpuStream(0);
    const trace::LaneId world = b.Communicator(kWorldComm);
    b.Workload(main, 0, 3, 16, 1, 3, 1'000'000);
    const int64_t c = kComputeMs[static_cast<size_t>(rank)] * kMs;
    for (int step = 0; step < 3; ++step) {
      const int64_t t = step * 40 * kMs;
      b.Step(main, step, t, t + 40 * kMs, 16);
      b.Kernel(compute, "gemm", t, t + c);
      b.Kernel(compute, "bias_grad", t + c, t + c + 4 * kMs);
      b.Kernel(comm, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", t + c, t + 34 * kMs);
      b.Collective(world, "ncclAllReduce", t + c, t + 34 * kMs, kWorldComm, static_cast<uint64_t>(step),
                   trace::CollectiveOp::kAllReduce, 8'000'000, 3);
      if (rank == 0) b.Copy(compute, t + 35 * kMs, t + 37 * kMs, 1 << 20);
    }
    if (rank == 0) {
      b.Collective(world, "ncclBroadcast", 118 * kMs, 119 * kMs, kWorldComm, 3, trace::CollectiveOp::kBroadcast,
                   1024, 3);
    }
    trace::RankTrace built = b.Build();
    if (rank == 1) built.drops.push_back({"cupti", "buffer overflow", 0, 1, 0, 5});
    traces.push_back(std::move(built));
  }
  return traces;
}

const Report& StragglerReport() {
  static const Report report = [] {
    AnalyzeOptions options;
    options.tool_version = kToolVersion;
    options.threads = 1;
    Result<Report> analyzed = AnalyzeTraces(StragglerTraces(), options);
    EXPECT_TRUE(analyzed.ok()) << analyzed.status().message();
    Report result = analyzed.ok() ? std::move(analyzed).value() : Report{};
    result.run.directory = "/runs/straggler";  // AnalyzeTraces reads no directory
    return result;
  }();
  return report;
}

const DeviceReport* Device(const Report& report, int rank) {
  for (const DeviceReport& device : report.ranks) {
    if (device.rank == rank) return &device;
  }
  return nullptr;
}

// The arithmetic above, on the analysis itself: what every format then prints.
TEST(ReportGolden, StragglerRunHasTheHandComputedFigures) {
  const Report& r = StragglerReport();
  ASSERT_EQ(r.ranks.size(), 3u);
  const std::array<double, 3> utilization = {90.0, 85.0, 85.0};
  const std::array<double, 3> overlap_pct = {100.0 * 4 / 14, 100.0 * 4 / 14, 100.0};
  const std::array<int64_t, 3> wait = {30 * kMs, 30 * kMs, 0};
  for (int rank = 0; rank < 3; ++rank) {
    SCOPED_TRACE(rank);
    const DeviceReport* d = Device(r, rank);
    ASSERT_NE(d, nullptr);
    EXPECT_EQ(d->step_stats.step_ns.median, 40.0 * kMs);
    EXPECT_EQ(d->step_stats.compute_ns.median, (rank == 2 ? 34.0 : 24.0) * kMs);
    EXPECT_NEAR(d->step_stats.utilization_pct.median, utilization[static_cast<size_t>(rank)], 1e-9);
    EXPECT_NEAR(d->step_stats.overlap_pct.median, overlap_pct[static_cast<size_t>(rank)], 1e-9);
    EXPECT_EQ(d->wait_ns, wait[static_cast<size_t>(rank)]);
    EXPECT_EQ(d->transfer_ns, 12 * kMs);
  }
  EXPECT_EQ(r.cross_rank.stragglers, (std::vector<int>{2}));
  ASSERT_EQ(r.cross_rank.kinds.size(), 1u);
  ASSERT_TRUE(r.cross_rank.kinds[0].busbw_gbps.has_value());
  EXPECT_NEAR(r.cross_rank.kinds[0].busbw_gbps->median, 2.0 * 4 / 3, 1e-9);
  ASSERT_TRUE(r.summary.throughput.has_value());
  EXPECT_NEAR(*r.summary.throughput, 1200.0, 1e-9);
  ASSERT_TRUE(r.cross_rank.compute_time_spread.has_value());
  EXPECT_NEAR(*r.cross_rank.compute_time_spread, 34.0 / 24.0, 1e-9);
  EXPECT_EQ(r.warnings.size(), 2u);
}

TEST(ReportGolden, StragglerText) {
  const std::string text = ReportToText(StragglerReport());
  ExpectMatchesGolden(GoldenPath(Golden("straggler.txt")), text);
  ExpectLine(text, "  throughput    1200.0 samples/s");
  ExpectLine(text, "   0  gpu 0   40.0 ms  24.0 ms  14.0 ms  10.0 ms    28.6%       0.58  90.0%  10.0 ms");
  ExpectLine(text, "   2  gpu 0   40.0 ms  34.0 ms  4.00 ms     0 ns   100.0%       0.12  85.0%     0 ns");
  ExpectLine(text, "ncclAllReduce  allreduce      3  7.63 MiB         2.7  60.0 ms   36.0 ms");
  ExpectLine(text, "stragglers: rank 2 (last in 2 of 2 steps, caused 60.0 ms of wait); max/median step time 1.00,");
}

TEST(ReportGolden, StragglerMarkdown) {
  const std::string markdown = ReportToMarkdown(StragglerReport());
  ExpectMatchesGolden(GoldenPath(Golden("straggler.md")), markdown);
  ExpectLine(markdown,
             "| 1 | gpu 0 | node-a | 40.0 ms | 24.0 ms | 14.0 ms | 10.0 ms | 28.6% | 0.58 | 85.0% | 10.0 ms |");
  ExpectLine(markdown, "| ncclAllReduce | allreduce | 3 | 7.63 MiB | 2.7 | 60.0 ms | 36.0 ms |");
}

TEST(ReportGolden, StragglerJson) {
  const std::string json = ReportToJson(StragglerReport());
  ExpectMatchesGolden(GoldenPath(Golden("straggler.json")), json);
  ExpectLine(json, "    \"throughput\": 1200.0,");
  ExpectLine(json, "        \"wait_caused_ns\": 60000000,");
  ExpectLine(json, "          \"median\": 2.6666666666666665,");
  ExpectLine(json, "    \"compute_time_spread\": 1.4166666666666667");
}

TEST(ReportGolden, StragglerHtml) {
  const std::string html = ReportToHtml(StragglerReport());
  ExpectMatchesGolden(GoldenPath(Golden("straggler.html")), html);
  ExpectLine(html,
             "<tr><td class=\"num\">2</td><td>gpu 0</td><td>node-b</td><td class=\"num\">40.0 ms</td>"
             "<td class=\"num\">34.0 ms</td><td class=\"num\">4.00 ms</td><td class=\"num\">0 ns</td>"
             "<td class=\"num\">100.0%</td><td class=\"num\">0.12</td><td class=\"num\">85.0%</td>"
             "<td class=\"num\">0 ns</td></tr>");
}

// ---- A weak-scaling sweep ---------------------------------------------------------------------
//
// Runs of 1, 2, 4 and 8 ranks, 32 samples per rank per step, 5 steps each with step times
// T - 0.2, T - 0.1, T, T + 0.1, T + 0.2 ms (median T), 4 MB all-reduced per step. T follows the
// projection model exactly, with compute c = 10 ms, latency α = 0.1 ms per hop, transfer
// γ = 2 ms and nothing hidden (no overlap): T(N) = 10 + 0.1 · 2(N-1) + 2 · 2(N-1)/N ms:
//   T(1) = 10, T(2) = 12.2, T(4) = 13.6, T(8) = 14.9 ms.
// Throughput 32N / T: 3200, 5245.9, 9411.8, 17181.2 samples/s. Weak efficiency
// X(N) / (N · X(1)) = T(1) / T(N): 100%, 82.0%, 73.5%, 67.1%.
// The fit recovers c, α, γ exactly; bus bandwidth S / γ = 4 MB / 2 ms = 2 GB/s. Projection:
//   T(16) = 10 + 3.0 + 3.75 = 16.75 ms: efficiency 10 / 16.75 = 59.7%, 32 · 16 / 16.75 ms = 30567.2 samples/s
//   T(32) = 10 + 6.2 + 3.875 = 20.075 ms: efficiency 49.8%, 51008.7 samples/s.

compare::ComparableRun WeakRun(int world_size, double step_ms, const std::string& command) {
  std::vector<double> steps;
  for (double offset_ms : {-0.2, -0.1, 0.0, 0.1, 0.2}) steps.push_back(step_ms + offset_ms);
  return rankscope::testing::MakeWeakRun({.world_size = world_size,
                                          .step_ms = steps,
                                          .program = "python3 train.py",
                                          .command = command,
                                          .backend = "nccl",
                                          .exposed_ms_per_extra_rank = 1.0,
                                          .comm_compute_per_extra_rank = 0.05});
}

constexpr const char* kCommand = "python3 train.py --batch 32";

compare::ScalingTable Scaling(std::vector<compare::ComparableRun> runs) {
  Result<compare::ScalingTable> table = compare::ComputeScalingOfRuns(std::move(runs));
  EXPECT_TRUE(table.ok()) << table.status().message();
  return table.ok() ? std::move(table).value() : compare::ScalingTable{};
}

const compare::ScalingTable& BaselineScaling() {
  static const compare::ScalingTable table = Scaling(
      {WeakRun(1, 10, kCommand), WeakRun(2, 12.2, kCommand), WeakRun(4, 13.6, kCommand), WeakRun(8, 14.9, kCommand)});
  return table;
}

TEST(ReportGolden, ScalingHasTheHandComputedFigures) {
  const compare::ScalingTable& table = BaselineScaling();
  ASSERT_EQ(table.points.size(), 4u);
  const std::array<double, 4> efficiency = {1.0, 10 / 12.2, 10 / 13.6, 10 / 14.9};
  for (size_t i = 0; i < 4; ++i) {
    ASSERT_TRUE(table.points[i].efficiency.has_value());
    EXPECT_NEAR(*table.points[i].efficiency, efficiency[i], 1e-9) << i;
  }
  ASSERT_TRUE(table.projection.has_value());
  const compare::ScalingFit& fit = table.projection->fit;
  EXPECT_NEAR(fit.compute_ns, 10 * kMs, 1);
  EXPECT_NEAR(fit.latency_ns, 0.1 * kMs, 1);
  EXPECT_NEAR(fit.transfer_ns, 2 * kMs, 1);
  ASSERT_TRUE(fit.bus_bandwidth_bps.has_value());
  EXPECT_NEAR(*fit.bus_bandwidth_bps, 2e9, 1e3);
  ASSERT_EQ(table.projection->points.size(), 2u);
  EXPECT_EQ(table.projection->points[0].world_size, 16);
  EXPECT_NEAR(table.projection->points[0].step_time_ns, 16.75 * kMs, 1);
  EXPECT_NEAR(table.projection->points[0].efficiency, 10 / 16.75, 1e-9);
  EXPECT_EQ(table.projection->points[1].world_size, 32);
  EXPECT_NEAR(table.projection->points[1].step_time_ns, 20.075 * kMs, 1);
}

TEST(ReportGolden, ScalingText) {
  const std::string text = ScalingToText(BaselineScaling(), kToolVersion);
  ExpectMatchesGolden(GoldenPath(Golden("scaling.txt")), text);
  ExpectLine(text, "|    2 |         64 |      5245.9 |              82.0% |");
  ExpectLine(text, "|    8 |        256 |     17181.2 |              67.1% |");
  ExpectLine(text, "   16                 59.7%              30567.2              16.7 ms");
}

TEST(ReportGolden, ScalingMarkdown) {
  const std::string markdown = ScalingToMarkdown(BaselineScaling());
  ExpectMatchesGolden(GoldenPath(Golden("scaling.md")), markdown);
  ExpectLine(markdown, "| 4 | 128 | 9411.8 | 73.5% |");
  ExpectLine(markdown, "| 32 | 49.8% | 51008.7 | 20.1 ms |");
}

TEST(ReportGolden, ScalingJson) {
  const std::string json = ScalingToJson(BaselineScaling(), kToolVersion);
  ExpectMatchesGolden(GoldenPath(Golden("scaling.json")), json);
  ExpectLine(json, "      \"efficiency\": 0.8196721311475409,");  // 10 / 12.2
  ExpectLine(json, "      \"bus_bandwidth_bps\": 2000000000.0,");
}

TEST(ReportGolden, ScalingHtml) {
  const std::string html = ScalingToHtml(BaselineScaling(), kToolVersion);
  ExpectMatchesGolden(GoldenPath(Golden("scaling.html")), html);
  ExpectLine(html,
             "<tr><td class=\"num\">8</td><td class=\"num\">256</td><td class=\"num\">17181.2</td>"
             "<td class=\"num\">67.1%</td></tr>");
}

// ---- The sweep against that baseline ------------------------------------------------------------
//
// The current sweep is the baseline with three changes: its command line has a new flag (a
// note), the 4-rank run's median step time is 13.6 × 1.06 = 14.416 ms but its steps spread
// over the baseline's (13.3 to 16.0 ms), and the 8-rank run is 20% slower in every step
// (T = 14.9 × 1.2 = 17.88 ms). Tolerance 5%, α = 0.01, 5 steps a side:
//   8 ranks, step time +20.0%, and throughput and efficiency 14.9 / 17.88 - 1 = -16.7%: beyond
//     the tolerance, and the U test separates the samples completely (p = 2/252 = 0.0079 < α):
//     REGRESSED, 3 checks.
//   4 ranks, step time +6.0% (throughput and efficiency 13.6 / 14.416 - 1 = -5.7%): beyond the
//     tolerance, but the samples interleave (p ≥ α): noise.
//   Everything else is unchanged (exposed comm and comm/compute are the same): 3 of the 20
//   checks (4 world sizes × the 5 default metrics) regressed.

compare::ComparableRun NoisyRun() {
  compare::ComparableRun run = WeakRun(4, 14.416, kCommand + std::string(" --fused-adam"));
  const std::vector<double> steps_ms = {13.3, 13.45, 14.416, 15.9, 16.0};
  for (compare::ComparableMetric& metric : run.metrics) {
    if (metric.name != "step_time_ns" && metric.name != "throughput") continue;
    metric.samples.clear();
    for (double step_ms : steps_ms) {
      metric.samples.push_back(metric.name == "step_time_ns" ? step_ms * kMs : 128.0 / (step_ms / 1e3));
    }
  }
  return run;
}

const compare::Comparison& SweepComparison() {
  static const compare::Comparison comparison = [] {
    const std::string command = kCommand + std::string(" --fused-adam");
    compare::ComparableSet baseline{"baseline/scaling.json", true, BaselineScaling().runs};
    compare::ComparableSet current{
        "sweep-after", true,
        Scaling({WeakRun(1, 10, command), WeakRun(2, 12.2, command), NoisyRun(), WeakRun(8, 14.9 * 1.2, command)})
            .runs};
    Result<compare::Comparison> compared = compare::CompareWithBaseline(baseline, current, {});
    EXPECT_TRUE(compared.ok()) << compared.status().message();
    return compared.ok() ? std::move(compared).value() : compare::Comparison{};
  }();
  return comparison;
}

TEST(ReportGolden, ComparisonHasTheHandComputedVerdicts) {
  const compare::Comparison& comparison = SweepComparison();
  EXPECT_TRUE(comparison.Regressed());
  int regressed = 0, noise = 0;
  for (const compare::MetricComparison& row : comparison.rows) {
    SCOPED_TRACE(std::to_string(row.world_size) + " " + row.metric);
    if (row.verdict == compare::Verdict::kRegressed) {
      ++regressed;
      EXPECT_EQ(row.world_size, 8);
      ASSERT_TRUE(row.p_value.has_value());
      EXPECT_NEAR(*row.p_value, 2.0 / 252, 1e-12);
    }
    if (row.verdict == compare::Verdict::kNotSignificant) {
      ++noise;
      EXPECT_EQ(row.world_size, 4);
    }
    if (row.world_size == 8 && row.metric == "step_time_ns") {
      EXPECT_NEAR(row.change, 0.2, 1e-9);
    }
    if (row.world_size == 8 && row.metric == "efficiency") {
      EXPECT_NEAR(row.change, 14.9 / 17.88 - 1, 1e-9);
    }
    if (row.world_size == 4 && row.metric == "step_time_ns") {
      EXPECT_NEAR(row.change, 0.06, 1e-9);
    }
  }
  EXPECT_EQ(regressed, 3);
  EXPECT_EQ(noise, 3);
  EXPECT_FALSE(comparison.notes.empty());
}

TEST(ReportGolden, ComparisonText) {
  const std::string text = ComparisonToText(SweepComparison());
  ExpectMatchesGolden(GoldenPath(Golden("comparison.txt")), text);
  ExpectLine(text,
             "    8  step_time_ns                  14.9 ms            17.9 ms  +20.0%       5.0%  0.0079  REGRESSED");
  ExpectLine(text,
             "    4  step_time_ns                  13.6 ms            14.4 ms   +6.0%       5.0%    0.55  noise");
  ExpectLine(text, "REGRESSION: 3 of 20 checks regressed");
}

TEST(ReportGolden, ComparisonMarkdown) {
  const std::string markdown = ComparisonToMarkdown(SweepComparison());
  ExpectMatchesGolden(GoldenPath(Golden("comparison.md")), markdown);
  ExpectLine(markdown, "| 8 | efficiency | 67.1% | 55.9% | -16.7% | 5.0% | 0.0079 | REGRESSED |");
}

TEST(ReportGolden, ComparisonJUnit) {
  const std::string xml = ComparisonToJUnit(SweepComparison());
  ExpectMatchesGolden(GoldenPath(Golden("comparison.xml")), xml);
  ExpectLine(xml, "<testsuites name=\"rankscope compare\" tests=\"20\" failures=\"3\">");
}

}  // namespace
}  // namespace rankscope::report
