// docs/metrics.md §1–§5 end to end, through AnalyzeTraces on hand-built traces whose answers are
// known by construction. Every expected value carries the arithmetic that yields it; the
// rules where docs/metrics.md leaves a choice are those of analyzer/analyze.h.
#include "analyzer/analyze.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "report/report_writers.h"
#include "tests/golden.h"
#include "tests/rank_file_writer.h"
#include "tests/temp_dir.h"
#include "trace/run_dir.h"
#include "trace/writer.h"
#include "tests/trace_builder.h"

namespace rankscope::analyzer {

using report::ReportToJson;
namespace {

using testing::kCommCategory;
using testing::kComputeCategory;
using testing::TraceBuilder;

constexpr int64_t kUs = 1000;
constexpr int64_t kMs = 1000 * kUs;
constexpr uint64_t kWorldComm = 0xC0FFEE;
const char* const kNcclAllReduceKernel = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";

Result<Report> RunAnalysis(std::vector<TraceBuilder> builders, const AnalyzeOptions& options) {
  std::vector<trace::RankTrace> traces;
  for (TraceBuilder& builder : builders) traces.push_back(builder.Build());
  return AnalyzeTraces(traces, options);
}

Report Analyze(std::vector<TraceBuilder> builders, const AnalyzeOptions& options = {}) {
  Result<Report> report = RunAnalysis(std::move(builders), options);
  EXPECT_TRUE(report.ok()) << report.status().message();
  return report.ok() ? std::move(report).value() : Report{};
}

AnalyzeOptions NoWarmup() {
  AnalyzeOptions options;
  options.skip_steps = 0;
  return options;
}

const DeviceReport* FindDevice(const Report& report, int rank, int device) {
  for (const DeviceReport& d : report.ranks) {
    if (d.rank == rank && d.device == device) return &d;
  }
  return nullptr;
}

const RankWait* FindWait(const Report& report, int rank) {
  for (const RankWait& w : report.cross_rank.waits) {
    if (w.rank == rank) return &w;
  }
  return nullptr;
}

const CollectiveKindSummary* FindKind(const Report& report, const std::string& op) {
  for (const CollectiveKindSummary& kind : report.cross_rank.kinds) {
    if (kind.op == op) return &kind;
  }
  return nullptr;
}

const RunMetric* FindMetric(const Report& report, const std::string& name) {
  for (const RunMetric& metric : report.summary.metrics) {
    if (metric.name == name) return &metric;
  }
  return nullptr;
}

bool AnyWarningHas(const Report& report, const std::vector<std::string>& parts) {
  return std::any_of(report.warnings.begin(), report.warnings.end(), [&](const std::string& warning) {
    return std::all_of(parts.begin(), parts.end(),
                       [&](const std::string& part) { return warning.find(part) != std::string::npos; });
  });
}

void ExpectStats(const Stats& stats, int64_t count, double median, double min, double max, double p90) {
  EXPECT_EQ(stats.count, count);
  EXPECT_NEAR(stats.median, median, 1e-6 * std::max(1.0, std::abs(median)));
  EXPECT_NEAR(stats.min, min, 1e-6 * std::max(1.0, std::abs(min)));
  EXPECT_NEAR(stats.max, max, 1e-6 * std::max(1.0, std::abs(max)));
  EXPECT_NEAR(stats.p90, p90, 1e-6 * std::max(1.0, std::abs(p90)));
}

// The partition of Report::Breakdown: compute_only + overlap + comm_only + memory_only + idle.
int64_t PartitionSum(const Breakdown& b) {
  return b.compute_only_ns + b.overlap_ns + b.comm_only_ns + b.memory_only_ns + b.idle_ns;
}

// ---- §3: one device, whole-trace totals -------------------------------------------------

TEST(AnalyzeGolden, KernelsOverlappingAcrossStreamsCountAsTheirUnion) {
  TraceBuilder b;
  const trace::LaneId s1 = b.GpuStream(0);
  const trace::LaneId s2 = b.GpuStream(0);
  b.Kernel(s1, "gemm", 0, 100);
  b.Kernel(s2, "gemm_other_stream", 50, 150);
  b.Kernel(s1, "relu", 200, 300);
  const Report r = Analyze({b});
  ASSERT_EQ(r.ranks.size(), 1u);
  const Breakdown& t = r.ranks[0].totals;
  EXPECT_EQ(r.ranks[0].rank, 0);
  EXPECT_EQ(r.ranks[0].device, 0);
  EXPECT_EQ(t.window_ns, 300 - 0);                    // [first start 0, last end 300)
  EXPECT_EQ(t.compute_ns, (150 - 0) + (300 - 200));   // [0,100) ∪ [50,150) ∪ [200,300); not 3 × 100
  EXPECT_EQ(t.comm_ns, 0);
  EXPECT_EQ(t.memory_ns, 0);
  EXPECT_EQ(t.busy_ns, 250);
  EXPECT_EQ(t.idle_ns, 300 - 250);                    // the gap [150,200)
  EXPECT_EQ(t.compute_only_ns, 250);
  EXPECT_NEAR(t.utilization_pct, 100.0 * 250 / 300, 1e-9);
  EXPECT_EQ(PartitionSum(t), t.window_ns);
}

TEST(AnalyzeGolden, CommPartlyHiddenByCompute) {
  TraceBuilder b;
  const trace::LaneId compute = b.GpuStream(0);
  const trace::LaneId comm = b.GpuStream(0);
  b.Kernel(compute, "gemm", 0, 150);
  b.Kernel(comm, kNcclAllReduceKernel, 120, 200);
  const Report r = Analyze({b});
  ASSERT_EQ(r.ranks.size(), 1u);
  const Breakdown& t = r.ranks[0].totals;
  EXPECT_EQ(t.window_ns, 200 - 0);
  EXPECT_EQ(t.compute_ns, 150 - 0);
  EXPECT_EQ(t.comm_ns, 200 - 120);
  EXPECT_EQ(t.overlap_ns, 150 - 120);          // comm [120,200) ∩ compute [0,150)
  EXPECT_EQ(t.exposed_comm_ns, 200 - 150);     // comm [120,200) \ compute [0,150)
  EXPECT_EQ(t.comm_only_ns, 200 - 150);
  EXPECT_EQ(t.compute_only_ns, 120 - 0);
  EXPECT_NEAR(t.overlap_pct, 100.0 * 30 / 80, 1e-9);  // 37.5: |C ∩ M| / |M|
  ASSERT_TRUE(t.comm_compute_ratio.has_value());
  EXPECT_NEAR(*t.comm_compute_ratio, 80.0 / 150, 1e-12);  // |M| / |C|
  EXPECT_EQ(t.busy_ns, 200);
  EXPECT_EQ(t.idle_ns, 0);
  EXPECT_NEAR(t.utilization_pct, 100.0, 1e-9);
  EXPECT_EQ(PartitionSum(t), t.window_ns);  // 120 + 30 + 50 + 0 + 0
  // Without step ranges the one step is the same window.
  ASSERT_EQ(r.ranks[0].steps.size(), 1u);
  EXPECT_EQ(r.ranks[0].steps[0].breakdown.overlap_ns, 30);
  EXPECT_EQ(r.ranks[0].steps[0].breakdown.exposed_comm_ns, 50);
}

TEST(AnalyzeGolden, IdleGapsAndMemoryPartitionTheWindow) {
  TraceBuilder b;
  const trace::LaneId compute = b.GpuStream(0);
  const trace::LaneId comm = b.GpuStream(0);
  const trace::LaneId copy = b.GpuStream(0);
  b.Kernel(compute, "gemm", 0, 100);
  b.Copy(copy, 50, 200, 4096);
  b.Kernel(compute, "gemm", 300, 400);
  b.Kernel(comm, kNcclAllReduceKernel, 350, 450);
  b.Memset(copy, 600, 700, 64);
  const Report r = Analyze({b});
  ASSERT_EQ(r.ranks.size(), 1u);
  const Breakdown& t = r.ranks[0].totals;
  EXPECT_EQ(t.window_ns, 700 - 0);
  EXPECT_EQ(t.compute_ns, (100 - 0) + (400 - 300));             // C = [0,100) ∪ [300,400)
  EXPECT_EQ(t.comm_ns, 450 - 350);                              // M = [350,450)
  EXPECT_EQ(t.memory_ns, (200 - 50) + (700 - 600));             // Y = [50,200) ∪ [600,700)
  EXPECT_EQ(t.overlap_ns, 400 - 350);                           // C ∩ M = [350,400)
  EXPECT_EQ(t.exposed_comm_ns, 450 - 400);                      // M \ C = [400,450)
  EXPECT_EQ(t.compute_only_ns, 200 - 50);                       // |C| − |C ∩ M|
  EXPECT_EQ(t.comm_only_ns, 50);
  EXPECT_EQ(t.memory_only_ns, (200 - 100) + (700 - 600));       // Y \ (C ∪ M) = [100,200) ∪ [600,700)
  EXPECT_EQ(t.busy_ns, (200 - 0) + (450 - 300) + (700 - 600));  // [0,200) ∪ [300,450) ∪ [600,700) = 450
  EXPECT_EQ(t.idle_ns, 700 - 450);                              // [200,300) ∪ [450,600)
  EXPECT_NEAR(t.utilization_pct, 100.0 * 450 / 700, 1e-9);      // 64.29
  EXPECT_NEAR(t.overlap_pct, 100.0 * 50 / 100, 1e-9);
  EXPECT_EQ(PartitionSum(t), t.window_ns);                      // 150 + 50 + 50 + 200 + 250 = 700
}

TEST(AnalyzeGolden, TwoDevicesInOneProcessReportSeparately) {
  TraceBuilder b;
  const trace::LaneId host_thread = b.CpuThread("main");
  const trace::LaneId gpu0 = b.GpuStream(0);
  const trace::LaneId gpu0_comm = b.GpuStream(0);
  const trace::LaneId gpu1 = b.GpuStream(1);
  const trace::LaneId gpu1_comm = b.GpuStream(1);
  b.Step(host_thread, 0, 0, 2000, 32);
  b.Kernel(gpu0, "gemm", 0, 100);
  b.Kernel(gpu0_comm, kNcclAllReduceKernel, 100, 150);
  b.Kernel(gpu1, "gemm", 1000, 1300);
  b.Kernel(gpu1_comm, kNcclAllReduceKernel, 1200, 1400);
  const Report r = Analyze({b}, NoWarmup());
  ASSERT_EQ(r.ranks.size(), 2u);  // one DeviceReport per (rank, device), sorted by device
  EXPECT_EQ(r.ranks[0].rank, 0);
  EXPECT_EQ(r.ranks[0].device, 0);
  EXPECT_EQ(r.ranks[1].rank, 0);
  EXPECT_EQ(r.ranks[1].device, 1);

  // Totals: each device over its own window.
  const Breakdown& d0 = r.ranks[0].totals;
  EXPECT_EQ(d0.window_ns, 150 - 0);
  EXPECT_EQ(d0.compute_ns, 100);
  EXPECT_EQ(d0.comm_ns, 150 - 100);
  EXPECT_EQ(d0.overlap_ns, 0);
  EXPECT_EQ(d0.exposed_comm_ns, 50);
  EXPECT_NEAR(d0.utilization_pct, 100.0, 1e-9);
  const Breakdown& d1 = r.ranks[1].totals;
  EXPECT_EQ(d1.window_ns, 1400 - 1000);
  EXPECT_EQ(d1.compute_ns, 1300 - 1000);
  EXPECT_EQ(d1.comm_ns, 1400 - 1200);
  EXPECT_EQ(d1.overlap_ns, 1300 - 1200);
  EXPECT_EQ(d1.exposed_comm_ns, 1400 - 1300);
  EXPECT_NEAR(d1.overlap_pct, 100.0 * 100 / 200, 1e-9);
  ASSERT_TRUE(d1.comm_compute_ratio.has_value());
  EXPECT_NEAR(*d1.comm_compute_ratio, 200.0 / 300, 1e-12);
  EXPECT_NEAR(d1.utilization_pct, 100.0, 1e-9);

  // The step window is the host range [0,2000), the same for both devices.
  ASSERT_EQ(r.ranks[0].steps.size(), 1u);
  ASSERT_EQ(r.ranks[1].steps.size(), 1u);
  EXPECT_EQ(r.ranks[0].steps[0].breakdown.window_ns, 2000);
  EXPECT_EQ(r.ranks[0].steps[0].breakdown.busy_ns, 150);
  EXPECT_NEAR(r.ranks[0].steps[0].breakdown.utilization_pct, 100.0 * 150 / 2000, 1e-9);  // 7.5
  EXPECT_EQ(r.ranks[1].steps[0].breakdown.window_ns, 2000);
  EXPECT_EQ(r.ranks[1].steps[0].breakdown.busy_ns, 400);
  EXPECT_NEAR(r.ranks[1].steps[0].breakdown.utilization_pct, 100.0 * 400 / 2000, 1e-9);  // 20
}

TEST(AnalyzeGolden, ZeroCommGivesZeroRatiosAndNoCollectives) {
  std::vector<TraceBuilder> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    TraceBuilder b(rank, 2);
    const trace::LaneId gpu = b.GpuStream(0);
    b.Kernel(gpu, "gemm", 0, 100);
    b.Kernel(gpu, "gemm", 150, 250);
    ranks.push_back(b);
  }
  const Report r = Analyze(ranks);
  ASSERT_EQ(r.ranks.size(), 2u);
  for (const DeviceReport& d : r.ranks) {
    SCOPED_TRACE(d.rank);
    EXPECT_EQ(d.totals.window_ns, 250);
    EXPECT_EQ(d.totals.compute_ns, 100 + 100);
    EXPECT_EQ(d.totals.comm_ns, 0);
    EXPECT_EQ(d.totals.overlap_ns, 0);
    EXPECT_EQ(d.totals.exposed_comm_ns, 0);
    EXPECT_EQ(d.totals.overlap_pct, 0.0);  // 0 when |M| = 0
    EXPECT_EQ(d.totals.comm_compute_ratio, std::optional<double>(0.0));  // 0 / 200
    EXPECT_EQ(d.wait_ns, 0);
    EXPECT_EQ(d.transfer_ns, 0);
  }
  EXPECT_EQ(r.cross_rank.matched, 0);
  EXPECT_EQ(r.cross_rank.unmatched, 0);
  EXPECT_TRUE(r.cross_rank.kinds.empty());
  EXPECT_TRUE(r.cross_rank.stragglers.empty());
  EXPECT_EQ(r.cross_rank.collective_source, "");
}

TEST(AnalyzeGolden, CommWithoutComputeHasNoRatio) {
  TraceBuilder b;
  b.Kernel(b.GpuStream(0), kNcclAllReduceKernel, 0, 100);
  const Report r = Analyze({b});
  ASSERT_EQ(r.ranks.size(), 1u);
  const Breakdown& t = r.ranks[0].totals;
  EXPECT_EQ(t.comm_ns, 100);
  EXPECT_EQ(t.compute_ns, 0);
  EXPECT_EQ(t.comm_compute_ratio, std::nullopt);  // |M| / |C| with |C| = 0: null
  EXPECT_EQ(t.overlap_pct, 0.0);                  // |C ∩ M| = 0 of |M| = 100
  EXPECT_EQ(t.exposed_comm_ns, 100);
  EXPECT_NEAR(t.utilization_pct, 100.0, 1e-9);
}

// ---- §2: steps ------------------------------------------------------------------------

TEST(AnalyzeGolden, WithoutStepRangesTheDeviceExtentIsOneStepNeverSkipped) {
  TraceBuilder b;
  const trace::LaneId host_thread = b.CpuThread("main");
  const trace::LaneId gpu = b.GpuStream(0);
  b.Range(host_thread, "app", 0, "forward", 900, 4100);  // an annotation, not a step, not device time
  b.Kernel(gpu, "gemm", 1000, 2000);
  b.Kernel(gpu, "gemm", 3000, 4000);
  AnalyzeOptions options;
  options.skip_steps = 1;  // the default: must not drop the only step
  const Report r = Analyze({b}, options);
  ASSERT_EQ(r.ranks.size(), 1u);
  const DeviceReport& d = r.ranks[0];
  ASSERT_EQ(d.steps.size(), 1u);
  EXPECT_EQ(d.steps[0].start_ns, 1000);  // device-activity extent, not the annotation's 900
  EXPECT_EQ(d.steps[0].end_ns, 4000);
  EXPECT_TRUE(d.steps[0].aggregated);
  EXPECT_EQ(d.steps[0].breakdown.window_ns, 4000 - 1000);
  EXPECT_EQ(d.steps[0].breakdown.compute_ns, 1000 + 1000);
  ExpectStats(d.step_stats.step_ns, 1, 3000, 3000, 3000, 3000);
  EXPECT_EQ(r.steps.steps_found, 1);
  EXPECT_EQ(r.steps.steps_aggregated, 1);
  EXPECT_EQ(r.summary.steps, 1);
  ASSERT_TRUE(r.summary.step_time_ns.has_value());
  EXPECT_DOUBLE_EQ(*r.summary.step_time_ns, 3000);
}

// Steps 10..13 (numbers from the payload); step 10 is warm-up.
//   step 10 [0,5000):     gemm [0,1000)
//   step 11 [5000,6000):  gemm [5000,5500), nccl [5400,5600)
//   step 12 [6000,9000):  gemm [6000,7500), nccl [7500,8000), gemm [8800,9200) crosses into 13
//   step 13 [9000,11000): gemm [9000,10000), nccl [9500,10500)
std::vector<TraceBuilder> FourSteps() {
  TraceBuilder b;
  const trace::LaneId host_thread = b.CpuThread("main");
  const trace::LaneId compute = b.GpuStream(0);
  const trace::LaneId compute2 = b.GpuStream(0);
  const trace::LaneId comm = b.GpuStream(0);
  b.Step(host_thread, 10, 0, 5000, 32);
  b.Step(host_thread, 11, 5000, 6000, 32);
  b.Step(host_thread, 12, 6000, 9000, 32);
  b.Step(host_thread, 13, 9000, 11000, 32);
  b.Kernel(compute, "gemm", 0, 1000);
  b.Kernel(compute, "gemm", 5000, 5500);
  b.Kernel(comm, kNcclAllReduceKernel, 5400, 5600);
  b.Kernel(compute, "gemm", 6000, 7500);
  b.Kernel(comm, kNcclAllReduceKernel, 7500, 8000);
  b.Kernel(compute2, "gemm", 8800, 9200);
  b.Kernel(compute, "gemm", 9000, 10000);
  b.Kernel(comm, kNcclAllReduceKernel, 9500, 10500);
  return {b};
}

TEST(AnalyzeGolden, PerStepMetricsAndMediansAfterWarmup) {
  AnalyzeOptions options;
  options.skip_steps = 1;
  const Report r = Analyze(FourSteps(), options);
  ASSERT_EQ(r.ranks.size(), 1u);
  const DeviceReport& d = r.ranks[0];
  ASSERT_EQ(d.steps.size(), 4u);
  const std::array<int64_t, 4> numbers = {10, 11, 12, 13};
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(d.steps[i].number, numbers[i]);
  EXPECT_FALSE(d.steps[0].aggregated);  // warm-up
  EXPECT_TRUE(d.steps[1].aggregated);
  EXPECT_TRUE(d.steps[2].aggregated);
  EXPECT_TRUE(d.steps[3].aggregated);
  EXPECT_EQ(d.steps[0].start_ns, 0);
  EXPECT_EQ(d.steps[0].end_ns, 5000);

  const Breakdown& s11 = d.steps[1].breakdown;
  EXPECT_EQ(s11.window_ns, 6000 - 5000);
  EXPECT_EQ(s11.compute_ns, 5500 - 5000);
  EXPECT_EQ(s11.comm_ns, 5600 - 5400);
  EXPECT_EQ(s11.overlap_ns, 5500 - 5400);
  EXPECT_EQ(s11.exposed_comm_ns, 5600 - 5500);
  EXPECT_EQ(s11.busy_ns, 5600 - 5000);
  EXPECT_EQ(s11.idle_ns, 1000 - 600);
  EXPECT_NEAR(s11.utilization_pct, 60.0, 1e-9);  // 100 · 600 / 1000
  EXPECT_NEAR(s11.overlap_pct, 50.0, 1e-9);      // 100 · 100 / 200

  // Step 12 gets only [8800,9000) of the kernel that crosses its end: clipped to W.
  const Breakdown& s12 = d.steps[2].breakdown;
  EXPECT_EQ(s12.window_ns, 9000 - 6000);
  EXPECT_EQ(s12.compute_ns, (7500 - 6000) + (9000 - 8800));  // 1700
  EXPECT_EQ(s12.comm_ns, 8000 - 7500);
  EXPECT_EQ(s12.overlap_ns, 0);
  EXPECT_EQ(s12.busy_ns, (8000 - 6000) + (9000 - 8800));     // 2200
  EXPECT_EQ(s12.idle_ns, 3000 - 2200);
  EXPECT_EQ(PartitionSum(s12), 3000);

  const Breakdown& s13 = d.steps[3].breakdown;
  EXPECT_EQ(s13.window_ns, 11000 - 9000);
  EXPECT_EQ(s13.compute_ns, 10000 - 9000);  // [9000,9200) of the crossing kernel is inside it
  EXPECT_EQ(s13.comm_ns, 10500 - 9500);
  EXPECT_EQ(s13.overlap_ns, 10000 - 9500);
  EXPECT_EQ(s13.busy_ns, 10500 - 9000);

  // Aggregates over steps 11, 12, 13; p90 by linear interpolation at rank 0.9 · (3 − 1) = 1.8.
  const StepStats& st = d.step_stats;
  ExpectStats(st.step_ns, 3, 2000, 1000, 3000, 2000 + 0.8 * (3000 - 2000));            // [1000,3000,2000]
  ExpectStats(st.compute_ns, 3, 1000, 500, 1700, 1000 + 0.8 * (1700 - 1000));          // [500,1700,1000]
  ExpectStats(st.comm_ns, 3, 500, 200, 1000, 500 + 0.8 * (1000 - 500));                // [200,500,1000]
  ExpectStats(st.overlap_ns, 3, 100, 0, 500, 100 + 0.8 * (500 - 100));                 // [100,0,500]
  ExpectStats(st.exposed_comm_ns, 3, 500, 100, 500, 500);                              // [100,500,500]
  ExpectStats(st.busy_ns, 3, 1500, 600, 2200, 1500 + 0.8 * (2200 - 1500));             // [600,2200,1500]
  ExpectStats(st.idle_ns, 3, 500, 400, 800, 500 + 0.8 * (800 - 500));                  // [400,800,500]
  ExpectStats(st.overlap_pct, 3, 50, 0, 50, 50);                                       // [50,0,50]
  const double u12 = 100.0 * 2200 / 3000;                                              // 73.33
  ExpectStats(st.utilization_pct, 3, u12, 60, 75, u12 + 0.8 * (75 - u12));             // [60,u12,75]
  ExpectStats(st.comm_compute_ratio, 3, 0.4, 500.0 / 1700, 1.0, 0.4 + 0.8 * (1.0 - 0.4));  // [.4,.294,1]

  EXPECT_EQ(r.steps.steps_found, 4);
  EXPECT_EQ(r.steps.steps_aggregated, 3);
  EXPECT_EQ(r.summary.steps, 3);
  ASSERT_TRUE(r.summary.step_time_ns.has_value());
  EXPECT_DOUBLE_EQ(*r.summary.step_time_ns, 2000);
}

TEST(AnalyzeGolden, StepSelectionKeepsOnlyTheChosenNumbers) {
  AnalyzeOptions options = NoWarmup();
  options.first_step = 11;
  options.last_step = 12;
  const Report r = Analyze(FourSteps(), options);
  ASSERT_EQ(r.ranks.size(), 1u);
  const DeviceReport& d = r.ranks[0];
  ASSERT_EQ(d.steps.size(), 4u);  // all reported, two aggregated
  EXPECT_FALSE(d.steps[0].aggregated);  // 10 < 11
  EXPECT_TRUE(d.steps[1].aggregated);
  EXPECT_TRUE(d.steps[2].aggregated);
  EXPECT_FALSE(d.steps[3].aggregated);  // 13 > 12
  // [1000, 3000]: median (1000 + 3000) / 2 (numpy), p90 at rank 0.9 · 1 = 0.9.
  ExpectStats(d.step_stats.step_ns, 2, (1000 + 3000) / 2.0, 1000, 3000, 1000 + 0.9 * (3000 - 1000));
  EXPECT_EQ(r.steps.first, std::optional<int64_t>(11));
  EXPECT_EQ(r.steps.last, std::optional<int64_t>(12));
  EXPECT_EQ(r.steps.steps_aggregated, 2);
}

TEST(AnalyzeGolden, StepSelectionThatSelectsNothingIsAnError) {
  AnalyzeOptions options = NoWarmup();
  options.first_step = 20;
  options.last_step = 30;
  const Result<Report> r = RunAnalysis(FourSteps(), options);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("step"), std::string::npos) << r.status().message();
  EXPECT_EQ(r.status().message().find('\n'), std::string::npos);  // one line
}

TEST(AnalyzeGolden, ProfilerStepRangesOnTheBusiestLaneOutermostOnly) {
  TraceBuilder b;
  const trace::LaneId host_thread = b.CpuThread("main");
  const trace::LaneId other = b.CpuThread("loader");
  const trace::LaneId gpu = b.GpuStream(0);
  b.Range(host_thread, "", 0, "ProfilerStep#5", 0, 1000);
  b.Range(host_thread, "", 0, "train_step", 100, 900);  // nested: not a step of its own
  b.Range(host_thread, "", 0, "ProfilerStep#6", 1000, 3000);
  b.Range(host_thread, "", 0, "train_step", 1100, 2900);
  b.Range(other, "", 0, "STEP", 0, 3000);  // a step name, but on a lane with fewer of them
  b.Kernel(gpu, "gemm", 0, 500);
  b.Kernel(gpu, "gemm", 1000, 2000);
  const Report r = Analyze({b}, NoWarmup());
  ASSERT_EQ(r.ranks.size(), 1u);
  const DeviceReport& d = r.ranks[0];
  ASSERT_EQ(d.steps.size(), 2u);
  EXPECT_EQ(d.steps[0].number, 5);  // N of ProfilerStep#N
  EXPECT_EQ(d.steps[0].start_ns, 0);
  EXPECT_EQ(d.steps[0].end_ns, 1000);
  EXPECT_EQ(d.steps[1].number, 6);
  EXPECT_EQ(d.steps[1].start_ns, 1000);
  EXPECT_EQ(d.steps[1].end_ns, 3000);
  EXPECT_NEAR(d.steps[0].breakdown.utilization_pct, 100.0 * 500 / 1000, 1e-9);
  EXPECT_NEAR(d.steps[1].breakdown.utilization_pct, 100.0 * 1000 / 2000, 1e-9);
}

TEST(AnalyzeGolden, StepNumbersFallBackToScalarPayloadThenIndex) {
  TraceBuilder scalar;
  const trace::LaneId thread = scalar.CpuThread("main");
  const trace::LaneId gpu = scalar.GpuStream(0);
  scalar.Range(thread, "", 0, "step", 0, 100, "", trace::Payload{trace::PayloadKind::kInt64, 7, 0.0});
  scalar.Range(thread, "", 0, "step", 100, 200, "", trace::Payload{trace::PayloadKind::kInt64, 8, 0.0});
  scalar.Kernel(gpu, "gemm", 0, 200);
  const Report by_payload = Analyze({scalar}, NoWarmup());
  ASSERT_EQ(by_payload.ranks.size(), 1u);
  ASSERT_EQ(by_payload.ranks[0].steps.size(), 2u);
  EXPECT_EQ(by_payload.ranks[0].steps[0].number, 7);  // the integer scalar payload
  EXPECT_EQ(by_payload.ranks[0].steps[1].number, 8);

  TraceBuilder plain;
  const trace::LaneId thread2 = plain.CpuThread("main");
  const trace::LaneId gpu2 = plain.GpuStream(0);
  plain.Range(thread2, "", 0, "Train_Step", 0, 100);  // step names compare without case
  plain.Range(thread2, "", 0, "train_step", 100, 200);
  plain.Kernel(gpu2, "gemm", 0, 200);
  const Report by_index = Analyze({plain}, NoWarmup());
  ASSERT_EQ(by_index.ranks.size(), 1u);
  ASSERT_EQ(by_index.ranks[0].steps.size(), 2u);
  EXPECT_EQ(by_index.ranks[0].steps[0].number, 0);  // the range's (0-based) index
  EXPECT_EQ(by_index.ranks[0].steps[1].number, 1);
}

// ---- §5: throughput and run-level ratios ------------------------------------------------

TEST(AnalyzeGolden, ThroughputIsGlobalBatchOverMedianStepTime) {
  // Step times (ms), step 0 is warm-up: rank 0 {150, 90, 100, 120}, rank 1 {150, 100, 110, 95}.
  const std::array<std::array<int64_t, 4>, 2> step_ms = {{{150, 90, 100, 120}, {150, 100, 110, 95}}};
  // Each step: gemm [t, t+50ms); nccl rank 0 [t+40ms, t+60ms) (overlap 10 of 20 ms = 50%),
  // rank 1 [t+45ms, t+65ms) (overlap 5 of 20 ms = 25%).
  const std::array<int64_t, 2> nccl_start_ms = {40, 45};
  std::vector<TraceBuilder> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    TraceBuilder b(rank, 2);
    const trace::LaneId host_thread = b.CpuThread("main");
    const trace::LaneId compute = b.GpuStream(0);
    const trace::LaneId comm = b.GpuStream(0);
    b.Workload(host_thread, 0, /*world_size=*/2, /*batch=*/32, /*accum=*/2, /*steps=*/4, /*parameters=*/100);
    int64_t t = 0;
    for (int step = 0; step < 4; ++step) {
      const int64_t end = t + step_ms[rank][step] * kMs;
      b.Step(host_thread, step, t, end, 64);
      b.Kernel(compute, "gemm", t, t + 50 * kMs);
      b.Kernel(comm, kNcclAllReduceKernel, t + nccl_start_ms[rank] * kMs, t + (nccl_start_ms[rank] + 20) * kMs);
      t = end;
    }
    ranks.push_back(b);
  }
  const Report r = Analyze(ranks);  // skip_steps 1
  EXPECT_EQ(r.workload.world_size, std::optional<int64_t>(2));
  EXPECT_EQ(r.workload.batch_per_rank, std::optional<int64_t>(32));
  EXPECT_EQ(r.workload.accumulation, std::optional<int64_t>(2));
  EXPECT_EQ(r.workload.global_batch, std::optional<int64_t>(32 * 2 * 2));
  EXPECT_EQ(r.workload.steps, std::optional<int64_t>(4));
  EXPECT_EQ(r.workload.parameters, std::optional<int64_t>(100));
  EXPECT_EQ(r.workload.source, "workload mark");

  const DeviceReport* d0 = FindDevice(r, 0, 0);
  const DeviceReport* d1 = FindDevice(r, 1, 0);
  ASSERT_NE(d0, nullptr);
  ASSERT_NE(d1, nullptr);
  EXPECT_DOUBLE_EQ(d0->step_stats.step_ns.median, 100 * kMs);  // median of {90, 100, 120}
  EXPECT_DOUBLE_EQ(d1->step_stats.step_ns.median, 100 * kMs);  // median of {100, 110, 95}
  ASSERT_TRUE(r.summary.step_time_ns.has_value());
  EXPECT_DOUBLE_EQ(*r.summary.step_time_ns, 100 * kMs);
  ASSERT_TRUE(r.summary.throughput.has_value());
  EXPECT_NEAR(*r.summary.throughput, (32 * 2 * 2) / 0.100, 1e-6);  // 128 samples / 0.1 s = 1280/s
  EXPECT_EQ(r.summary.ranks, 2);
  EXPECT_EQ(r.summary.steps, 3);

  // Run-level overlap %: median over devices of {50, 25} = 37.5; the worst is rank 1's 25.
  const RunMetric* overlap = FindMetric(r, "overlap_pct");
  ASSERT_NE(overlap, nullptr);
  EXPECT_NEAR(overlap->median, (50.0 + 25.0) / 2, 1e-9);
  EXPECT_NEAR(overlap->worst, 25.0, 1e-9);
  EXPECT_EQ(overlap->worst_rank, 1);
  EXPECT_EQ(overlap->worst_device, 0);
  EXPECT_TRUE(overlap->higher_is_better);
}

// ---- §4: collectives, bus bandwidth, clocks, stragglers -----------------------------------

TEST(AnalyzeGolden, BusBandwidthFollowsNcclTests) {
  // Four ranks, identical: all-reduce 100 MB in 10 ms and in 20 ms, all-gather of 4 × 10 MB in 10 ms,
  // and a broadcast only rank 0 recorded.
  std::vector<TraceBuilder> ranks;
  for (int rank = 0; rank < 4; ++rank) {
    TraceBuilder b(rank, 4);
    const trace::LaneId compute = b.GpuStream(0);
    const trace::LaneId comm = b.GpuStream(0);
    const trace::LaneId world = b.Communicator(kWorldComm);
    b.Kernel(compute, "gemm", 0, 1 * kMs);
    b.Kernel(comm, kNcclAllReduceKernel, 1 * kMs, 11 * kMs);
    b.Collective(world, "ncclAllReduce", 1 * kMs, 11 * kMs, kWorldComm, 0, trace::CollectiveOp::kAllReduce,
                 100'000'000, 4);
    b.Kernel(comm, kNcclAllReduceKernel, 12 * kMs, 32 * kMs);
    b.Collective(world, "ncclAllReduce", 12 * kMs, 32 * kMs, kWorldComm, 1, trace::CollectiveOp::kAllReduce,
                 100'000'000, 4);
    b.Kernel(comm, "ncclDevKernel_AllGather_RING_LL", 33 * kMs, 43 * kMs);
    // NCCL's count for an all-gather is one rank's part: 10 MB each, 40 MB gathered.
    b.Collective(world, "ncclAllGather", 33 * kMs, 43 * kMs, kWorldComm, 2, trace::CollectiveOp::kAllGather,
                 10'000'000, 4);
    if (rank == 0) {
      b.Collective(world, "ncclBroadcast", 50 * kMs, 51 * kMs, kWorldComm, 3, trace::CollectiveOp::kBroadcast,
                   1000, 4);
    }
    ranks.push_back(b);
  }
  const Report r = Analyze(ranks, NoWarmup());
  EXPECT_EQ(r.cross_rank.collective_source, "NCCL profiler plugin");
  EXPECT_EQ(r.cross_rank.matched, 3);    // sequences 0, 1, 2 on every rank
  EXPECT_EQ(r.cross_rank.unmatched, 1);  // sequence 3 on rank 0 only

  const CollectiveKindSummary* all_reduce = FindKind(r, "allreduce");
  ASSERT_NE(all_reduce, nullptr);
  EXPECT_EQ(all_reduce->kind, "ncclAllReduce");
  EXPECT_EQ(all_reduce->count, 2);
  EXPECT_EQ(all_reduce->total_bytes, 2 * 100'000'000u);
  EXPECT_EQ(all_reduce->wait_ns, 0);                            // everyone starts together
  EXPECT_EQ(all_reduce->transfer_ns, 4 * (10 * kMs + 20 * kMs));  // 4 ranks × (10 + 20) ms
  ASSERT_TRUE(all_reduce->busbw_gbps.has_value());
  // algbw = 100e6 B / 10 ms = 10 GB/s → busbw 10 · 2·3/4 = 15; and 100e6 / 20 ms = 5 → 7.5.
  ExpectStats(*all_reduce->busbw_gbps, 2, (15.0 + 7.5) / 2, 7.5, 15.0, 7.5 + 0.9 * (15.0 - 7.5));

  const CollectiveKindSummary* all_gather = FindKind(r, "allgather");
  ASSERT_NE(all_gather, nullptr);
  EXPECT_EQ(all_gather->count, 1);
  EXPECT_EQ(all_gather->total_bytes, 40'000'000u);  // nccl-tests' size: 10 MB per rank × 4
  EXPECT_EQ(all_gather->transfer_ns, 4 * 10 * kMs);
  ASSERT_TRUE(all_gather->busbw_gbps.has_value());
  // algbw = 40e6 B / 10 ms = 4 GB/s → busbw 4 · 3/4 = 3.
  ExpectStats(*all_gather->busbw_gbps, 1, 3.0, 3.0, 3.0, 3.0);

  for (int rank = 0; rank < 4; ++rank) {
    const DeviceReport* d = FindDevice(r, rank, 0);
    ASSERT_NE(d, nullptr);
    EXPECT_EQ(d->wait_ns, 0);
    EXPECT_EQ(d->transfer_ns, 10 * kMs + 20 * kMs + 10 * kMs);
  }
}

// Four ranks: 0 and 1 on host "a", 2 and 3 on host "b" whose clock reads `skew_b` ahead.
// Steps k = 0..3, [k·100 ms, (k+1)·100 ms) in true time. Each step: gemm for 60 ms, then an
// all-reduce that rank r enters at +60 ms + r ms and leaves at +70 ms + jitter[r].
std::vector<TraceBuilder> TwoHostRun(int64_t skew_b) {
  const std::array<int64_t, 4> jitter = {-1 * kUs, 1 * kUs, 1 * kUs, -1 * kUs};
  std::vector<TraceBuilder> ranks;
  for (int rank = 0; rank < 4; ++rank) {
    TraceBuilder b(rank, 4);
    b.Host(rank < 2 ? "a" : "b");
    const int64_t shift = rank < 2 ? 0 : skew_b;
    const trace::LaneId host_thread = b.CpuThread("main");
    const trace::LaneId compute = b.GpuStream(0);
    const trace::LaneId comm = b.GpuStream(0);
    const trace::LaneId world = b.Communicator(kWorldComm);
    for (int step = 0; step < 4; ++step) {
      const int64_t t = step * 100 * kMs + shift;
      b.Step(host_thread, step, t, t + 100 * kMs, 32);
      b.Kernel(compute, "gemm", t, t + 60 * kMs);
      const int64_t start = t + 60 * kMs + rank * kMs;
      const int64_t end = t + 70 * kMs + jitter[rank];
      b.Kernel(comm, kNcclAllReduceKernel, start, end);
      b.Collective(world, "ncclAllReduce", start, end, kWorldComm, step, trace::CollectiveOp::kAllReduce,
                   1 << 20, 4);
    }
    ranks.push_back(b);
  }
  return ranks;
}

TEST(AnalyzeGolden, SkewedHostClocksAreAlignedBeforeWaitsAreComputed) {
  const Report skewed = Analyze(TwoHostRun(5 * kMs), NoWarmup());
  const Report straight = Analyze(TwoHostRun(0), NoWarmup());

  // Host "b": offset = median over collectives of (median end on "a" − median end on "b")
  //   = (e + 0) − (e + 5 ms) = −5 ms (the jitter ±1 µs cancels in each host's median).
  const ClockAlignment& clock = skewed.cross_rank.clock;
  ASSERT_EQ(clock.hosts.size(), 2u);
  EXPECT_EQ(clock.hosts[0].host, "a");  // rank 0's host is the reference, first
  EXPECT_EQ(clock.hosts[0].ranks, (std::vector<int>{0, 1}));
  EXPECT_EQ(clock.hosts[0].offset_ns, 0);
  EXPECT_EQ(clock.hosts[1].host, "b");
  EXPECT_EQ(clock.hosts[1].ranks, (std::vector<int>{2, 3}));
  EXPECT_NEAR(clock.hosts[1].offset_ns, -5 * kMs, 10);
  EXPECT_EQ(clock.hosts[1].collectives_used, 4);
  EXPECT_TRUE(clock.applied);
  // Residual: aligned ends e − 1 µs (ranks 0, 3) and e + 1 µs (ranks 1, 2): spread 2 µs each.
  ASSERT_TRUE(clock.residual_ns.has_value());
  EXPECT_NEAR(clock.residual_ns->median, 2 * kUs, 10);
  EXPECT_NEAR(clock.residual_ns->max, 2 * kUs, 10);
  EXPECT_EQ(clock.residual_ns->count, 4);

  // The unskewed run needs no offset.
  ASSERT_EQ(straight.cross_rank.clock.hosts.size(), 2u);
  EXPECT_EQ(straight.cross_rank.clock.hosts[1].offset_ns, 0);
  EXPECT_FALSE(straight.cross_rank.clock.applied);

  // Waits on aligned clocks: last = +63 ms (rank 3), wait_r = 3 − r ms per collective, × 4.
  // (Unaligned, ranks 2 and 3 would seem to arrive 5 ms later: waits 8, 7, 1, 0 ms.)
  // Transfer_r = e_r − last = 7 ms + jitter[r].
  const std::array<int64_t, 4> wait = {4 * 3 * kMs, 4 * 2 * kMs, 4 * 1 * kMs, 0};
  const std::array<int64_t, 4> transfer = {4 * (7 * kMs - kUs), 4 * (7 * kMs + kUs), 4 * (7 * kMs + kUs),
                                           4 * (7 * kMs - kUs)};
  for (const Report* report : {&skewed, &straight}) {
    SCOPED_TRACE(report == &skewed ? "skewed" : "straight");
    EXPECT_EQ(report->cross_rank.collective_source, "NCCL profiler plugin");
    EXPECT_EQ(report->cross_rank.matched, 4);
    for (int rank = 0; rank < 4; ++rank) {
      SCOPED_TRACE(rank);
      const DeviceReport* d = FindDevice(*report, rank, 0);
      ASSERT_NE(d, nullptr);
      EXPECT_EQ(d->wait_ns, wait[rank]);
      EXPECT_EQ(d->transfer_ns, transfer[rank]);
      ASSERT_EQ(d->steps.size(), 4u);
      for (const StepMetrics& step : d->steps) EXPECT_EQ(step.wait_ns, wait[rank] / 4);
      const RankWait* w = FindWait(*report, rank);
      ASSERT_NE(w, nullptr);
      EXPECT_EQ(w->wait_ns, wait[rank]);
      EXPECT_EQ(w->transfer_ns, transfer[rank]);
      EXPECT_EQ(w->times_last, rank == 3 ? 4 : 0);
      // Rank 3 caused (3 + 2 + 1) ms at each of the 4 collectives.
      EXPECT_EQ(w->wait_caused_ns, rank == 3 ? 4 * (3 + 2 + 1) * kMs : 0);
    }
    // The others waited (3 + 2 + 1) / 3 = 2 ms on average, under 5% of the 100 ms step.
    EXPECT_TRUE(report->cross_rank.stragglers.empty());
  }
}

// Four ranks on one host, NCCL kernels only. Step k: [k·100 ms, (k+1)·100 ms); rank r
// computes [t, t + compute_ms[k][r]) and then runs the all-reduce kernel until t + 90 ms.
std::vector<TraceBuilder> StragglerRun(const std::vector<std::array<int64_t, 4>>& compute_ns) {
  std::vector<TraceBuilder> ranks;
  for (int rank = 0; rank < 4; ++rank) {
    TraceBuilder b(rank, 4);
    const trace::LaneId host_thread = b.CpuThread("main");
    const trace::LaneId compute = b.GpuStream(0);
    const trace::LaneId comm = b.GpuStream(0);
    for (size_t step = 0; step < compute_ns.size(); ++step) {
      const int64_t t = static_cast<int64_t>(step) * 100 * kMs;
      b.Step(host_thread, static_cast<int64_t>(step), t, t + 100 * kMs, 32);
      b.Kernel(compute, "gemm", t, t + compute_ns[step][rank]);
      b.Kernel(comm, kNcclAllReduceKernel, t + compute_ns[step][rank], t + 90 * kMs);
    }
    ranks.push_back(b);
  }
  return ranks;
}

constexpr std::array<int64_t, 4> kRank2Late = {50 * kMs, 50 * kMs, 80 * kMs, 50 * kMs};
constexpr std::array<int64_t, 4> kRank1Late = {50 * kMs, 80 * kMs, 50 * kMs, 50 * kMs};
constexpr std::array<int64_t, 4> kRank3Late = {50 * kMs, 50 * kMs, 50 * kMs, 80 * kMs};
// Arrivals 0.1 ms apart: rank 3 is last, the others wait 0.3, 0.2, 0.1 ms: below 5% of 100 ms.
constexpr std::array<int64_t, 4> kBalanced = {50 * kMs, 50 * kMs + 100 * kUs, 50 * kMs + 200 * kUs,
                                              50 * kMs + 300 * kUs};

TEST(AnalyzeGolden, StragglerArrivingLateAtEveryStep) {
  const Report r = Analyze(StragglerRun({kRank2Late, kRank2Late, kRank2Late, kRank2Late}), NoWarmup());
  const CrossRank& x = r.cross_rank;
  EXPECT_EQ(x.collective_source, "NCCL kernels");
  EXPECT_EQ(x.matched, 4);
  EXPECT_EQ(x.ranks, (std::vector<int>{0, 1, 2, 3}));
  // last = +80 ms (rank 2); wait = 80 − 50 = 30 ms for the others; transfer = 90 − 80 = 10 ms.
  for (int rank = 0; rank < 4; ++rank) {
    SCOPED_TRACE(rank);
    const int64_t per_step_wait = rank == 2 ? 0 : (80 - 50) * kMs;
    const DeviceReport* d = FindDevice(r, rank, 0);
    ASSERT_NE(d, nullptr);
    EXPECT_EQ(d->wait_ns, 4 * per_step_wait);
    EXPECT_EQ(d->transfer_ns, 4 * (90 - 80) * kMs);
    ASSERT_EQ(d->steps.size(), 4u);
    for (const StepMetrics& step : d->steps) EXPECT_EQ(step.wait_ns, per_step_wait);
    ExpectStats(d->step_stats.wait_ns, 4, per_step_wait, per_step_wait, per_step_wait, per_step_wait);
    const RankWait* w = FindWait(r, rank);
    ASSERT_NE(w, nullptr);
    EXPECT_EQ(w->wait_ns, 4 * per_step_wait);
    EXPECT_EQ(w->transfer_ns, 4 * 10 * kMs);
    EXPECT_EQ(w->times_last, rank == 2 ? 4 : 0);
    EXPECT_EQ(w->wait_caused_ns, rank == 2 ? 4 * 3 * 30 * kMs : 0);  // 4 steps × 3 ranks × 30 ms
    EXPECT_EQ(w->steps_most_wait, rank == 2 ? 4 : 0);
    EXPECT_EQ(w->straggler, rank == 2);
  }
  ASSERT_EQ(x.steps.size(), 4u);
  for (size_t step = 0; step < 4; ++step) {
    EXPECT_EQ(x.steps[step].step, static_cast<int64_t>(step));
    EXPECT_EQ(x.steps[step].wait_ns, (std::vector<int64_t>{30 * kMs, 30 * kMs, 0, 30 * kMs}));
    EXPECT_EQ(x.steps[step].last_rank, std::optional<int>(2));
  }
  EXPECT_EQ(x.stragglers, (std::vector<int>{2}));
  ASSERT_EQ(x.kinds.size(), 1u);
  EXPECT_EQ(x.kinds[0].count, 4);
  EXPECT_EQ(x.kinds[0].wait_ns, 4 * 3 * 30 * kMs);
  EXPECT_EQ(x.kinds[0].transfer_ns, 4 * 4 * 10 * kMs);  // 4 collectives × 4 ranks × 10 ms
  // Spreads: step times all 100 ms → 1; median compute {50, 50, 80, 50} ms → 80 / 50.
  ASSERT_TRUE(x.step_time_spread.has_value());
  EXPECT_NEAR(*x.step_time_spread, 1.0, 1e-9);
  ASSERT_TRUE(x.compute_time_spread.has_value());
  EXPECT_NEAR(*x.compute_time_spread, 80.0 / 50.0, 1e-9);
}

TEST(AnalyzeGolden, BalancedRunHasNoStraggler) {
  const Report r = Analyze(StragglerRun({kBalanced, kBalanced, kBalanced, kBalanced}), NoWarmup());
  EXPECT_EQ(r.cross_rank.matched, 4);
  EXPECT_TRUE(r.cross_rank.stragglers.empty());
  const RankWait* w0 = FindWait(r, 0);
  ASSERT_NE(w0, nullptr);
  EXPECT_EQ(w0->wait_ns, 4 * 300 * kUs);  // last = +50.3 ms; rank 0 arrived at +50 ms
  const RankWait* w3 = FindWait(r, 3);
  ASSERT_NE(w3, nullptr);
  EXPECT_EQ(w3->times_last, 4);
  EXPECT_EQ(w3->wait_caused_ns, 4 * (300 + 200 + 100) * kUs);
  for (const RankWait& w : r.cross_rank.waits) {
    // Others waited (0.3 + 0.2 + 0.1) / 3 = 0.2 ms on average < 5% · 100 ms: no step counts.
    EXPECT_EQ(w.steps_most_wait, 0) << w.rank;
    EXPECT_FALSE(w.straggler) << w.rank;
  }
}

TEST(AnalyzeGolden, StragglerNeedsHalfOfTheAggregatedSteps) {
  // Step 0 (warm-up): rank 1 late. Steps 1, 2: rank 2 late. Step 3: rank 3 late. Step 4: balanced.
  const Report r = Analyze(StragglerRun({kRank1Late, kRank2Late, kRank2Late, kRank3Late, kBalanced}));
  const std::array<int64_t, 4> most = {0, 0, 2, 1};  // of the 4 aggregated steps 1..4
  for (int rank = 0; rank < 4; ++rank) {
    const RankWait* w = FindWait(r, rank);
    ASSERT_NE(w, nullptr);
    EXPECT_EQ(w->steps_most_wait, most[rank]) << rank;
  }
  EXPECT_EQ(r.cross_rank.stragglers, (std::vector<int>{2}));  // 2 of 4 is at least half; 1 of 4 is not
}

TEST(AnalyzeGolden, ThreeHostsEachGetTheirOwnOffset) {
  // Ranks 0, 1, 2 on hosts "a", "b", "c"; "b" reads 2 ms ahead, "c" 3 ms behind. Three
  // all-reduces that rank r enters at +60 ms + r ms and all leave at +70 ms (true time).
  const std::array<int64_t, 3> skew = {0, 2 * kMs, -3 * kMs};
  std::vector<TraceBuilder> ranks;
  for (int rank = 0; rank < 3; ++rank) {
    TraceBuilder b(rank, 3);
    b.Host(std::string(1, static_cast<char>('a' + rank)));
    const trace::LaneId compute = b.GpuStream(0);
    const trace::LaneId comm = b.GpuStream(0);
    const trace::LaneId world = b.Communicator(kWorldComm);
    for (int k = 0; k < 3; ++k) {
      const int64_t t = 10 * kMs + k * 100 * kMs + skew[rank];
      b.Kernel(compute, "gemm", t, t + 60 * kMs);
      b.Kernel(comm, kNcclAllReduceKernel, t + 60 * kMs + rank * kMs, t + 70 * kMs);
      b.Collective(world, "ncclAllReduce", t + 60 * kMs + rank * kMs, t + 70 * kMs, kWorldComm, k,
                   trace::CollectiveOp::kAllReduce, 1 << 20, 3);
    }
    ranks.push_back(b);
  }
  const Report r = Analyze(ranks, NoWarmup());
  const ClockAlignment& clock = r.cross_rank.clock;
  ASSERT_EQ(clock.hosts.size(), 3u);
  EXPECT_EQ(clock.hosts[0].host, "a");
  EXPECT_EQ(clock.hosts[0].offset_ns, 0);
  const std::array<int64_t, 3> offset = {0, -2 * kMs, 3 * kMs};  // reference end − host end
  for (const HostClock& host : clock.hosts) {
    const int rank = host.host[0] - 'a';
    ASSERT_TRUE(rank >= 0 && rank < 3) << host.host;
    EXPECT_EQ(host.ranks, (std::vector<int>{rank}));
    EXPECT_NEAR(host.offset_ns, offset[rank], 10) << host.host;
  }
  EXPECT_TRUE(clock.applied);
  ASSERT_TRUE(clock.residual_ns.has_value());
  EXPECT_NEAR(clock.residual_ns->max, 0, 10);  // the ends line up exactly once aligned
  // Aligned: last = +62 ms (rank 2); waits 2, 1, 0 ms per collective, × 3.
  const std::array<int64_t, 3> wait = {3 * 2 * kMs, 3 * 1 * kMs, 0};
  for (int rank = 0; rank < 3; ++rank) {
    const RankWait* w = FindWait(r, rank);
    ASSERT_NE(w, nullptr);
    EXPECT_EQ(w->wait_ns, wait[rank]) << rank;
    EXPECT_EQ(w->transfer_ns, 3 * (70 - 62) * kMs) << rank;
  }
}

TEST(AnalyzeGolden, NcclKernelsMatchAsTheNthOfTheirKind) {
  const char* const all_gather = "ncclDevKernel_AllGather_RING_LL";
  TraceBuilder r0(0, 2);
  const trace::LaneId s0 = r0.GpuStream(0);
  r0.Kernel(s0, kNcclAllReduceKernel, 100, 180);
  r0.Kernel(s0, all_gather, 200, 260);
  r0.Kernel(s0, kNcclAllReduceKernel, 300, 400);
  r0.Kernel(s0, all_gather, 500, 560);  // rank 1 has no second all-gather
  TraceBuilder r1(1, 2);
  const trace::LaneId s1 = r1.GpuStream(0);
  r1.Kernel(s1, kNcclAllReduceKernel, 130, 180);
  r1.Kernel(s1, all_gather, 210, 260);
  r1.Kernel(s1, kNcclAllReduceKernel, 350, 400);
  const Report r = Analyze({r0, r1});
  const CrossRank& x = r.cross_rank;
  EXPECT_EQ(x.collective_source, "NCCL kernels");
  EXPECT_EQ(x.matched, 2 + 1);  // all-reduce #0, #1; all-gather #0
  EXPECT_EQ(x.unmatched, 1);    // all-gather #1
  // Rank 0 waits 130 − 100, 350 − 300 at the all-reduces and 210 − 200 at the all-gather.
  const RankWait* w0 = FindWait(r, 0);
  const RankWait* w1 = FindWait(r, 1);
  ASSERT_NE(w0, nullptr);
  ASSERT_NE(w1, nullptr);
  EXPECT_EQ(w0->wait_ns, (130 - 100) + (350 - 300) + (210 - 200));
  EXPECT_EQ(w1->wait_ns, 0);
  EXPECT_EQ(w1->times_last, 3);
  EXPECT_EQ(w1->wait_caused_ns, 90);
  // Transfer: e − last on both ranks: (180 − 130) + (400 − 350) + (260 − 210).
  EXPECT_EQ(w0->transfer_ns, 50 + 50 + 50);
  EXPECT_EQ(w1->transfer_ns, 50 + 50 + 50);
  const CollectiveKindSummary* ar = FindKind(r, "allreduce");
  const CollectiveKindSummary* ag = FindKind(r, "allgather");
  ASSERT_NE(ar, nullptr);
  ASSERT_NE(ag, nullptr);
  EXPECT_EQ(ar->count, 2);
  EXPECT_EQ(ar->wait_ns, 30 + 50);
  EXPECT_EQ(ag->count, 1);
  EXPECT_EQ(ag->wait_ns, 10);
}

TEST(AnalyzeGolden, StragglerThresholdIsAtLeastFivePercentOfTheStep) {
  // Rank 1 arrives `late` after the others: they wait `late` each, on average `late`.
  auto run = [](int64_t late) {
    const std::array<int64_t, 4> arrivals = {50 * kMs, 50 * kMs + late, 50 * kMs, 50 * kMs};
    return Analyze(StragglerRun({arrivals, arrivals}), NoWarmup());
  };
  // 5 ms = 5% of the 100 ms median step: counts ("at least").
  const Report at = run(5 * kMs);
  EXPECT_EQ(at.cross_rank.stragglers, (std::vector<int>{1}));
  const RankWait* w = FindWait(at, 1);
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->steps_most_wait, 2);
  // 1 ns less: the others' wait is below the threshold in every step.
  const Report below = run(5 * kMs - 1);
  EXPECT_TRUE(below.cross_rank.stragglers.empty());
  const RankWait* wb = FindWait(below, 1);
  ASSERT_NE(wb, nullptr);
  EXPECT_EQ(wb->steps_most_wait, 0);
  EXPECT_EQ(wb->times_last, 2);  // still last, just not by enough
}

// ---- §1: user patterns ------------------------------------------------------------------

std::vector<TraceBuilder> PatternRun() {
  TraceBuilder b;
  const trace::LaneId s1 = b.GpuStream(0);
  const trace::LaneId s2 = b.GpuStream(0);
  const trace::LaneId s3 = b.GpuStream(0);
  b.Kernel(s1, "gemm", 0, 150);
  b.Kernel(s2, "deep_ep::dispatch", 100, 200);  // compute by default, comm by pattern
  b.Kernel(s3, "ncclFusedGemm", 300, 400);      // comm by default ("nccl"), compute by pattern
  return {b};
}

TEST(AnalyzeGolden, UserPatternsChangeTheClassOfAKernel) {
  const Report plain = Analyze(PatternRun());
  ASSERT_EQ(plain.ranks.size(), 1u);
  const Breakdown& p = plain.ranks[0].totals;
  EXPECT_EQ(p.compute_ns, 200 - 0);    // [0,150) ∪ [100,200)
  EXPECT_EQ(p.comm_ns, 400 - 300);     // ncclFusedGemm
  EXPECT_EQ(p.overlap_ns, 0);

  AnalyzeOptions options;
  options.classify.comm_patterns = {"deep_ep"};
  options.classify.compute_patterns = {"FusedGemm"};
  const Report patterned = Analyze(PatternRun(), options);
  ASSERT_EQ(patterned.ranks.size(), 1u);
  const Breakdown& t = patterned.ranks[0].totals;
  EXPECT_EQ(t.compute_ns, (150 - 0) + (400 - 300));  // gemm ∪ ncclFusedGemm
  EXPECT_EQ(t.comm_ns, 200 - 100);                   // deep_ep::dispatch
  EXPECT_EQ(t.overlap_ns, 150 - 100);
  EXPECT_EQ(t.exposed_comm_ns, 200 - 150);
  EXPECT_NEAR(t.overlap_pct, 100.0 * 50 / 100, 1e-9);
  EXPECT_EQ(t.busy_ns, p.busy_ns);  // the classes change, not the busy time: 200 + 100
  EXPECT_EQ(patterned.comm_patterns, (std::vector<std::string>{"deep_ep"}));
  EXPECT_EQ(patterned.compute_patterns, (std::vector<std::string>{"FusedGemm"}));
  bool found = false;
  for (const ActivitySummary& a : patterned.top_activities) {
    if (a.name != "deep_ep::dispatch") continue;
    found = true;
    EXPECT_EQ(a.activity_class, ActivityClass::kComm);
    EXPECT_EQ(a.count, 1);
    EXPECT_EQ(a.total_ns, 100);
  }
  EXPECT_TRUE(found);
}

// ---- The CPU backend -----------------------------------------------------------------------

// Two Gloo ranks, three steps of 1000 ns (step 0 is warm-up). On the "compute" thread:
// the step range and "forward" (category compute) [t, t + 600) on rank 0, [t, t + 700) on
// rank 1. On the "comm" thread: "allreduce" (category comm, 1000 bytes) from t + 500 (rank 0)
// or t + 600 (rank 1) to t + 900.
std::vector<TraceBuilder> CpuBackendRun() {
  std::vector<TraceBuilder> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    TraceBuilder b(rank, 2);
    b.Backend("gloo");
    b.CpuBackendCategories();
    const trace::LaneId compute = b.CpuThread("compute");
    const trace::LaneId comm = b.CpuThread("comm");
    for (int step = 0; step < 3; ++step) {
      const int64_t t = step * 1000;
      b.Step(compute, step, t, t + 1000, 32);
      b.Range(compute, "rankscope", kComputeCategory, "forward", t, t + (rank == 0 ? 600 : 700));
      b.Range(comm, "rankscope", kCommCategory, "allreduce", t + (rank == 0 ? 500 : 600), t + 900,
              R"({"bucket":0,"bytes":1000})");
    }
    ranks.push_back(b);
  }
  return ranks;
}

// Files that do not name their backend: NCCL kernels say NCCL, CPU-backend ranges alone say
// "cpu", GPU kernels without NCCL leave it unknown; a backend the files name wins.
TEST(AnalyzeGolden, TheBackendIsInferredWhenTheFilesDoNotNameIt) {
  std::vector<TraceBuilder> cpu = CpuBackendRun();
  for (TraceBuilder& rank : cpu) rank.Backend("");
  EXPECT_EQ(Analyze(cpu).workload.backend, "cpu");
  EXPECT_EQ(Analyze(CpuBackendRun()).workload.backend, "gloo");

  TraceBuilder gpu;
  const trace::LaneId stream = gpu.GpuStream(0);
  gpu.Kernel(stream, "gemm", 0, 100);
  EXPECT_EQ(Analyze({gpu}).workload.backend, "");
  gpu.Kernel(gpu.GpuStream(0), kNcclAllReduceKernel, 50, 150);
  EXPECT_EQ(Analyze({gpu}).workload.backend, "nccl");
}

TEST(AnalyzeGolden, CpuBackendRangesAreDeviceMinusOne) {
  const Report r = Analyze(CpuBackendRun());
  ASSERT_EQ(r.ranks.size(), 2u);
  const DeviceReport* d0 = FindDevice(r, 0, kCpuDevice);
  const DeviceReport* d1 = FindDevice(r, 1, kCpuDevice);
  ASSERT_NE(d0, nullptr);
  ASSERT_NE(d1, nullptr);

  ASSERT_EQ(d0->steps.size(), 3u);
  EXPECT_FALSE(d0->steps[0].aggregated);
  EXPECT_EQ(d0->steps[1].number, 1);
  EXPECT_EQ(d0->steps[1].start_ns, 1000);
  EXPECT_EQ(d0->steps[1].end_ns, 2000);
  const Breakdown& s = d0->steps[1].breakdown;
  EXPECT_EQ(s.window_ns, 1000);
  EXPECT_EQ(s.compute_ns, 600);
  EXPECT_EQ(s.comm_ns, 900 - 500);
  EXPECT_EQ(s.overlap_ns, 600 - 500);
  EXPECT_EQ(s.exposed_comm_ns, 900 - 600);
  EXPECT_EQ(s.busy_ns, 900);
  EXPECT_EQ(s.idle_ns, 100);
  EXPECT_NEAR(s.utilization_pct, 90.0, 1e-9);
  EXPECT_NEAR(s.overlap_pct, 100.0 * 100 / 400, 1e-9);  // 25
  ASSERT_TRUE(s.comm_compute_ratio.has_value());
  EXPECT_NEAR(*s.comm_compute_ratio, 400.0 / 600, 1e-12);
  EXPECT_EQ(PartitionSum(s), 1000);  // 500 + 100 + 300 + 0 + 100

  const Breakdown& s1 = d1->steps[1].breakdown;
  EXPECT_EQ(s1.compute_ns, 700);
  EXPECT_EQ(s1.comm_ns, 900 - 600);
  EXPECT_EQ(s1.overlap_ns, 700 - 600);
  EXPECT_NEAR(s1.overlap_pct, 100.0 * 100 / 300, 1e-9);

  // Totals: [0, 2900) for rank 0, three steps of compute 600, comm 400, busy 900.
  EXPECT_EQ(d0->totals.window_ns, 2900);
  EXPECT_EQ(d0->totals.compute_ns, 3 * 600);
  EXPECT_EQ(d0->totals.comm_ns, 3 * 400);
  EXPECT_EQ(d0->totals.busy_ns, 3 * 900);
  EXPECT_EQ(d0->totals.idle_ns, 2900 - 2700);

  // Collectives from the comm ranges, matched as the n-th "allreduce" on each rank.
  const CrossRank& x = r.cross_rank;
  EXPECT_EQ(x.collective_source, "comm ranges");
  EXPECT_EQ(x.matched, 3);
  ASSERT_EQ(x.kinds.size(), 1u);
  EXPECT_EQ(x.kinds[0].kind, "allreduce");
  EXPECT_EQ(x.kinds[0].count, 3);
  EXPECT_EQ(x.kinds[0].total_bytes, 3 * 1000u);  // "bytes" of the range's payload JSON
  // last = t + 600 (rank 1): rank 0 waits 100; transfer 900 − 600 = 300 on both.
  EXPECT_EQ(x.kinds[0].wait_ns, 3 * 100);
  EXPECT_EQ(x.kinds[0].transfer_ns, 3 * (300 + 300));
  ASSERT_TRUE(x.kinds[0].busbw_gbps.has_value());
  // algbw = 1000 B / 300 ns = 3.33 GB/s; all-reduce on n = 2: f = 2(2−1)/2 = 1.
  EXPECT_NEAR(x.kinds[0].busbw_gbps->median, 1000.0 / 300, 1e-9);
  EXPECT_EQ(d0->wait_ns, 3 * 100);
  EXPECT_EQ(d1->wait_ns, 0);
  EXPECT_EQ(d0->steps[1].wait_ns, 100);
  const RankWait* w1 = FindWait(r, 1);
  ASSERT_NE(w1, nullptr);
  EXPECT_EQ(w1->times_last, 3);
  EXPECT_EQ(w1->wait_caused_ns, 3 * 100);
  // In steps 1 and 2 rank 0 waited 100 ns ≥ 5% of 1000 ns: rank 1 caused the most wait in 2 of 2.
  EXPECT_EQ(w1->steps_most_wait, 2);
  EXPECT_EQ(x.stragglers, (std::vector<int>{1}));

  // Top activities: ranges of the compute and comm categories, summed over ranks.
  ASSERT_EQ(r.top_activities.size(), 2u);
  EXPECT_EQ(r.top_activities[0].name, "forward");
  EXPECT_EQ(r.top_activities[0].activity_class, ActivityClass::kCompute);
  EXPECT_EQ(r.top_activities[0].count, 2 * 3);
  EXPECT_EQ(r.top_activities[0].total_ns, 3 * 600 + 3 * 700);
  EXPECT_EQ(r.top_activities[1].name, "allreduce");
  EXPECT_EQ(r.top_activities[1].activity_class, ActivityClass::kComm);
  EXPECT_EQ(r.top_activities[1].count, 2 * 3);
  EXPECT_EQ(r.top_activities[1].total_ns, 3 * 400 + 3 * 300);
}

// ---- Bad input ------------------------------------------------------------------------------

TEST(AnalyzeGolden, NoRankWithDeviceActivityIsAnError) {
  std::vector<TraceBuilder> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    TraceBuilder b(rank, 2);
    const trace::LaneId host_thread = b.CpuThread("main");
    b.Step(host_thread, 0, 0, 1000, 32);  // annotations only
    ranks.push_back(b);
  }
  const Result<Report> r = RunAnalysis(ranks, {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("activity"), std::string::npos) << r.status().message();
  EXPECT_EQ(r.status().message().find('\n'), std::string::npos);
}

TEST(AnalyzeGolden, RankWithoutActivityIsReportedNotFatal) {
  TraceBuilder active(0, 2);
  active.Kernel(active.GpuStream(0), "gemm", 0, 100);
  TraceBuilder idle(1, 2);
  const trace::LaneId host_thread = idle.CpuThread("main");
  idle.Range(host_thread, "app", 0, "forward", 0, 100);
  const Report r = Analyze({active, idle});
  EXPECT_EQ(r.run.ranks, (std::vector<int>{0, 1}));
  EXPECT_EQ(r.run.ranks_without_activity, (std::vector<int>{1}));
  EXPECT_FALSE(r.warnings.empty());
  ASSERT_NE(FindDevice(r, 0, 0), nullptr);
  EXPECT_EQ(FindDevice(r, 0, 0)->totals.compute_ns, 100);
}

TEST(AnalyzeGolden, MissingRanksAreNamedInAWarning) {
  std::vector<TraceBuilder> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    TraceBuilder b(rank, 4);
    b.Kernel(b.GpuStream(0), "gemm", 0, 100);
    ranks.push_back(b);
  }
  const Report r = Analyze(ranks);
  EXPECT_EQ(r.run.world_size, std::optional<int>(4));
  EXPECT_EQ(r.run.ranks, (std::vector<int>{0, 1}));
  EXPECT_EQ(r.run.missing_ranks, (std::vector<int>{2, 3}));
  EXPECT_TRUE(AnyWarningHas(r, {"2", "3"})) << ::testing::PrintToString(r.warnings);
}

TEST(AnalyzeGolden, EventsEndingBeforeTheyStartAreCountedAndSkipped) {
  TraceBuilder b;
  const trace::LaneId host_thread = b.CpuThread("main");
  const trace::LaneId gpu = b.GpuStream(0);
  b.Kernel(gpu, "gemm", 0, 100);
  b.Kernel(gpu, "broken", 500, 400);           // end < start
  b.Range(host_thread, "app", 0, "forward", 900, 800);  // end < start
  const Report r = Analyze({b});
  EXPECT_EQ(r.run.invalid_events, 2);
  ASSERT_EQ(r.ranks.size(), 1u);
  EXPECT_EQ(r.ranks[0].totals.window_ns, 100);  // the broken kernel neither extends nor fills it
  EXPECT_EQ(r.ranks[0].totals.compute_ns, 100);
}

// ---- The file path: AnalyzeRun streams rank files and must agree with AnalyzeTraces --------

void ExpectFilesAgreeWithMemory(std::vector<TraceBuilder> builders, const AnalyzeOptions& options) {
  rankscope::testing::TempDir dir;
  std::vector<trace::RankTrace> traces;
  for (TraceBuilder& builder : builders) {
    traces.push_back(builder.Build());
    rankscope::testing::WriteRankTraceFile(traces.back(), dir / trace::RankFileName(*traces.back().meta.rank));
  }
  Result<Report> in_memory = AnalyzeTraces(traces, options);
  ASSERT_TRUE(in_memory.ok()) << in_memory.status().message();
  Result<Report> from_files = AnalyzeRun(dir.path(), options);
  ASSERT_TRUE(from_files.ok()) << from_files.status().message();
  EXPECT_EQ(from_files->run.directory, dir.path().string());
  from_files->run.directory.clear();
  EXPECT_EQ(ReportToJson(*from_files), ReportToJson(*in_memory));
}

TEST(AnalyzeGolden, AnalyzeRunOnFilesAgreesWithAnalyzeTraces) {
  {
    SCOPED_TRACE("two hosts, skewed");
    ExpectFilesAgreeWithMemory(TwoHostRun(5 * kMs), NoWarmup());
  }
  {
    SCOPED_TRACE("cpu backend");
    ExpectFilesAgreeWithMemory(CpuBackendRun(), {});
  }
  {
    SCOPED_TRACE("four steps");
    ExpectFilesAgreeWithMemory(FourSteps(), {});
  }
}

// Two ranks, `steps` steps of gemm then an all-reduce that ends when the later rank (rank 1,
// whose gemm takes longer every third step) has arrived.
std::vector<TraceBuilder> ManyStepsRun(int steps) {
  std::vector<TraceBuilder> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    TraceBuilder b(rank, 2);
    const trace::LaneId host_thread = b.CpuThread("main");
    const trace::LaneId compute = b.GpuStream(0);
    const trace::LaneId comm = b.GpuStream(0);
    const trace::LaneId world = b.Communicator(kWorldComm);
    for (int step = 0; step < steps; ++step) {
      const int64_t t = step * 10 * kMs;
      b.Step(host_thread, step, t, t + 10 * kMs, 32);
      const int64_t gemm_end = t + (rank == 1 && step % 3 == 0 ? 6 : 4) * kMs;
      b.Kernel(compute, "gemm", t, gemm_end);
      const int64_t last_arrival = t + (step % 3 == 0 ? 6 : 4) * kMs;
      b.Kernel(comm, kNcclAllReduceKernel, gemm_end, last_arrival + kMs);
      b.Collective(world, "ncclAllReduce", gemm_end, last_arrival + kMs, kWorldComm, static_cast<uint64_t>(step),
                   trace::CollectiveOp::kAllReduce, 1 << 20, 2);
      b.Kernel(compute, "sgd", last_arrival + kMs, last_arrival + 2 * kMs);
    }
    ranks.push_back(b);
  }
  return ranks;
}

TEST(AnalyzeGolden, TheCriticalPathKeepsOnlyTheStepsItFollowsAndFindsTheSamePathsInThem) {
  AnalyzeOptions all = NoWarmup();
  all.critical_path = true;
  all.critical_path_steps = 0;
  AnalyzeOptions some = all;
  some.critical_path_steps = 8;
  {
    SCOPED_TRACE("files (NVTX ranges first) agree with memory, following 8 of 40 steps");
    ExpectFilesAgreeWithMemory(ManyStepsRun(40), some);
  }
  const Report every = Analyze(ManyStepsRun(40), all);
  const Report kept = Analyze(ManyStepsRun(40), some);
  ASSERT_TRUE(every.critical_path.has_value());
  ASSERT_TRUE(kept.critical_path.has_value());
  EXPECT_EQ(every.critical_path->steps, 40);
  // 40 steps, at most 8: the stride is 8 (the smallest power of two with 40 <= 8 x stride):
  // steps 0, 8, 16, 24 and 32.
  EXPECT_EQ(kept.critical_path->steps, 5);
  EXPECT_EQ(kept.critical_path->steps_aggregated, 40);
  ASSERT_EQ(kept.critical_path->paths.size(), 5u);
  for (size_t i = 0; i < kept.critical_path->paths.size(); ++i) {
    const StepPath& path = kept.critical_path->paths[i];
    EXPECT_EQ(path.step, static_cast<int64_t>(8 * i));
    const StepPath& same = every.critical_path->paths.at(static_cast<size_t>(path.step));
    ASSERT_EQ(same.step, path.step);
    EXPECT_EQ(path.start_ns, same.start_ns);
    EXPECT_EQ(path.end_ns, same.end_ns);
    ASSERT_EQ(path.segments.size(), same.segments.size()) << "step " << path.step;
    for (size_t k = 0; k < path.segments.size(); ++k) {
      EXPECT_EQ(path.segments[k].rank, same.segments[k].rank);
      EXPECT_EQ(path.segments[k].start_ns, same.segments[k].start_ns);
      EXPECT_EQ(path.segments[k].end_ns, same.segments[k].end_ns);
    }
  }
  // Step 0 (rank 1 late): sgd resumes the compute stream after a gap in which the all-reduce
  // on the other stream ended (the stream waited for it, §10), whose last arrival is rank 1
  // after its 6 ms gemm: gemm 0-6 ms on rank 1, the all-reduce's last millisecond 6-7 ms,
  // sgd 7-8 ms; the step's tail 8-10 ms is the host gap "(step end)".
  const std::vector<StepPathSegment>& segments = kept.critical_path->paths[0].segments;
  ASSERT_EQ(segments.size(), 3u);
  EXPECT_EQ(segments[0].rank, 1);
  const std::array<std::array<int64_t, 2>, 3> times = {{{0, 6 * kMs}, {6 * kMs, 7 * kMs}, {7 * kMs, 8 * kMs}}};
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_TRUE(segments[k].work);
    EXPECT_EQ(segments[k].start_ns, times[k][0]);
    EXPECT_EQ(segments[k].end_ns, times[k][1]);
  }
  // Rank 1's gemm is 6 of the 10 ms in steps 0 and 24, 4 of 10 in 8, 16 and 32.
  bool gemm_on_rank_1 = false;
  for (const PathContribution& c : kept.critical_path->top) gemm_on_rank_1 |= c.rank == 1 && c.name == "gemm";
  EXPECT_TRUE(gemm_on_rank_1);
}

TEST(AnalyzeGolden, WithoutStepRangesTheCriticalPathFollowsTheWholeTraceAsOneStep) {
  std::vector<TraceBuilder> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    TraceBuilder b(rank, 2);
    const trace::LaneId gpu = b.GpuStream(0);
    b.Kernel(gpu, "gemm", 0, 100 * kUs);
    b.Kernel(gpu, "softmax", 150 * kUs, 200 * kUs);
    ranks.push_back(b);
  }
  AnalyzeOptions options = NoWarmup();
  options.critical_path = true;
  {
    SCOPED_TRACE("files (NVTX ranges first, there are none) agree with memory");
    ExpectFilesAgreeWithMemory(ranks, options);
  }
  const Report r = Analyze(ranks, options);
  ASSERT_TRUE(r.critical_path.has_value());
  // One step, the trace's 0-200 us: gemm 100 us, idle 50 us, softmax 50 us.
  EXPECT_EQ(r.critical_path->steps, 1);
  EXPECT_EQ(r.critical_path->path_ns, 200 * kUs);
  int64_t compute = 0;
  for (const PathContribution& c : r.critical_path->top) {
    if (c.category == "compute") compute += c.ns_per_step;
  }
  EXPECT_EQ(compute, 150 * kUs);
}

// ---- Golden JSON ---------------------------------------------------------------------------
// ReportToJson of a whole analysis against a checked-in file; RANKSCOPE_UPDATE_GOLDEN=1
// rewrites the file (tests/golden.h; review the diff by hand against the arithmetic above).

void ExpectJsonGolden(const Report& report, const std::string& name) {
  rankscope::testing::ExpectMatchesGolden(rankscope::testing::GoldenPath("tests/analyzer/golden/" + name + ".json"),
                                          ReportToJson(report));
}

TEST(AnalyzeGoldenJson, StragglerRun) {
  AnalyzeOptions options = NoWarmup();
  options.tool_version = "test";
  const Report r = Analyze(StragglerRun({kRank2Late, kRank2Late, kRank2Late, kRank2Late}), options);
  ExpectJsonGolden(r, "straggler");
}

TEST(AnalyzeGoldenJson, CpuBackendRun) {
  AnalyzeOptions options;
  options.tool_version = "test";
  const Report r = Analyze(CpuBackendRun(), options);
  ExpectJsonGolden(r, "cpu_backend");
}

}  // namespace
}  // namespace rankscope::analyzer
