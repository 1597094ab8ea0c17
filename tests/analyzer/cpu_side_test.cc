// docs/metrics.md §1 "CPU-side distributed traces" end to end, through AnalyzeTraces: ranks
// without device activity measured from their CPU operators and gloo/nccl/c10d ranges, the
// PyTorch profiler TensorBoard plugin's own Gloo-on-CPU fixtures reproduced from the report,
// user patterns on NVTX ranges, and the rule left alone where there is device activity.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "analyzer/analyze.h"
#include "analyzer/span_classifier.h"
#include "report/report_writers.h"
#include "tests/golden.h"
#include "tests/trace_builder.h"

namespace rankscope::analyzer {
namespace {

using testing::TraceBuilder;

constexpr int64_t kUs = 1000;  // the fixtures' times are microseconds

Result<Report> RunAnalysis(const std::vector<trace::RankTrace>& traces, const AnalyzeOptions& options = {}) {
  return AnalyzeTraces(traces, options);
}

Report Analyze(const std::vector<trace::RankTrace>& traces, const AnalyzeOptions& options = {}) {
  Result<Report> report = RunAnalysis(traces, options);
  EXPECT_TRUE(report.ok()) << report.status().message();
  return report.ok() ? std::move(report).value() : Report{};
}

const DeviceReport* FindDevice(const Report& report, int rank, int device) {
  for (const DeviceReport& d : report.ranks) {
    if (d.rank == rank && d.device == device) return &d;
  }
  return nullptr;
}

const CollectiveKindSummary* FindKind(const Report& report, const std::string& kind) {
  for (const CollectiveKindSummary& k : report.cross_rank.kinds) {
    if (k.kind == kind) return &k;
  }
  return nullptr;
}

const CollectiveKindOnRank* OnRank(const CollectiveKindSummary& kind, int rank) {
  for (const CollectiveKindOnRank& r : kind.per_rank) {
    if (r.rank == rank) return &r;
  }
  return nullptr;
}

const RankWait* FindWait(const Report& report, int rank) {
  for (const RankWait& w : report.cross_rank.waits) {
    if (w.rank == rank) return &w;
  }
  return nullptr;
}

const ActivitySummary* FindActivity(const Report& report, const std::string& name) {
  for (const ActivitySummary& a : report.top_activities) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

// A thread lane with the pid and tid a Kineto trace gives it.
trace::LaneId KinetoThread(TraceBuilder& b, int64_t tid) {
  return b.CpuThread("thread " + std::to_string(tid));
}

trace::RankTrace WithKinetoThreads(TraceBuilder& b, const std::vector<std::pair<trace::LaneId, int64_t>>& tids) {
  trace::RankTrace trace = b.Build();
  for (const auto& [lane, tid] : tids) {
    trace.lanes[lane - 1].pid = 23803;
    trace.lanes[lane - 1].tid = tid;
  }
  return trace;
}

// ---- PayloadBytes (§4 "comm ranges": bytes) ---------------------------------------------------

TEST(PayloadBytes, BytesFieldElseInputDimsTimesElementSize) {
  EXPECT_EQ(PayloadBytes(R"({"bytes":4096})"), 4096u);
  EXPECT_EQ(PayloadBytes(R"({"bytes":4096,"Input Dims":[[10]],"Input type":["float"]})"), 4096u);  // bytes wins
  EXPECT_EQ(PayloadBytes(R"({"External id":165,"Input Dims":[[53120]],"Input type":["float"]})"), 53120u * 4);
  EXPECT_EQ(PayloadBytes(R"({"Input Dims":[[2,3]],"Input type":["c10::BFloat16"]})"), 2u * 3 * 2);
  EXPECT_EQ(PayloadBytes(R"({"Input Dims":[[8]],"Input type":["Half"]})"), 8u * 2);
  EXPECT_EQ(PayloadBytes(R"({"Input Dims":[[8]],"Input type":["long int"]})"), 8u * 8);
  EXPECT_EQ(PayloadBytes(R"({"Input Dims":[[8]],"Input type":["double"]})"), 8u * 8);
  EXPECT_EQ(PayloadBytes(R"({"Input Dims":[[8]],"Input type":["Int"]})"), 8u * 4);
  // Every tensor input counts (a coalesced collective moves them all); scalars carry none.
  EXPECT_EQ(PayloadBytes(R"({"Input Dims":[[1000],[10,10],[]],"Input type":["float","double","Int"]})"),
            1000u * 4 + 100u * 8);
  // Unknown types, tensor lists, negative or non-integer dims, and products past 64 bits: unknown.
  EXPECT_EQ(PayloadBytes(R"({"Input Dims":[[8]],"Input type":["TensorList"]})"), 0u);
  EXPECT_EQ(PayloadBytes(R"({"Input Dims":[[[8]]],"Input type":["float"]})"), 0u);
  EXPECT_EQ(PayloadBytes(R"({"Input Dims":[[-8]],"Input type":["float"]})"), 0u);
  EXPECT_EQ(PayloadBytes(R"({"Input Dims":[[8.5]],"Input type":["float"]})"), 0u);
  EXPECT_EQ(PayloadBytes(R"({"Input Dims":[[4294967296,4294967296]],"Input type":["float"]})"), 0u);
  EXPECT_EQ(PayloadBytes(R"({"bytes":-1})"), 0u);
  EXPECT_EQ(PayloadBytes(R"({"Input Dims":[[8]]})"), 0u);
  EXPECT_EQ(PayloadBytes("not json"), 0u);
  EXPECT_EQ(PayloadBytes(""), 0u);
}

// ---- The TensorBoard plugin's Gloo-on-CPU fixtures --------------------------------------------

// test_distributed_gloo_cpu_worker{0,1}.json of pytorch/kineto's tb_plugin tests, event for
// event: every event is a cpu_op of pid 23803; the main thread 23800 runs aten::add_ and
// aten::mul, threads 23803 and 23805 run the gloo collectives. Times in µs; the args are
// what the importer keeps of them (External id, Input Dims, Input type).
struct FixtureOp {
  int64_t tid;
  const char* name;
  int64_t ts, dur;
  const char* args;
};

trace::RankTrace TbPluginWorker(int worker, const std::vector<FixtureOp>& ops) {
  TraceBuilder b(worker, 2);
  b.Host("");  // Kineto names no host: both workers read as one clock
  const trace::LaneId t23800 = KinetoThread(b, 23800);
  const trace::LaneId t23803 = KinetoThread(b, 23803);
  const trace::LaneId t23805 = KinetoThread(b, 23805);
  for (const FixtureOp& op : ops) {
    const trace::LaneId lane = op.tid == 23800 ? t23800 : op.tid == 23803 ? t23803 : t23805;
    b.Range(lane, "cpu_op", 0, op.name, op.ts * kUs, (op.ts + op.dur) * kUs, op.args);
  }
  return WithKinetoThreads(b, {{t23800, 23800}, {t23803, 23803}, {t23805, 23805}});
}

std::vector<trace::RankTrace> TbPluginGlooCpu() {
  const char* const kBroadcast = R"({"Input Dims":[[53120]],"Input type":["float"]})";
  const char* const kAllReduce = R"({"Input Dims":[[2049000]],"Input type":["float"]})";
  return {
      TbPluginWorker(0, {{23803, "gloo:broadcast", 16, 38, kBroadcast},
                         {23805, "gloo:broadcast", 25, 36, kBroadcast},
                         {23803, "gloo:broadcast", 66, 18, kBroadcast},
                         {23800, "aten::add_", 0, 20,
                          R"({"Input Dims":[[1000],[1000],[]],"Input type":["float","float","Int"]})"},
                         {23800, "aten::mul", 30, 101, ""},
                         {23805, "gloo:all_reduce", 110, 18, kAllReduce},
                         {23803, "gloo:all_reduce", 120, 36, kAllReduce}}),
      TbPluginWorker(1, {{23803, "gloo:broadcast", 20, 28, kBroadcast},
                         {23805, "gloo:broadcast", 28, 30, kBroadcast},
                         {23803, "gloo:broadcast", 77, 6, kBroadcast},
                         {23800, "aten::add_", 0, 30,
                          R"({"Input Dims":[[1000],[1000],[]],"Input type":["float","float","Int"]})"},
                         {23800, "aten::mul", 70, 70, ""},
                         {23805, "gloo:all_reduce", 88, 38, kAllReduce},
                         {23803, "gloo:all_reduce", 130, 16, kAllReduce}}),
  };
}

int64_t Us(int64_t ns) { return ns / kUs; }
// Python's round(), which the plugin uses for its averages: half to even.
int64_t PythonRound(double value) { return static_cast<int64_t>(std::nearbyint(value)); }

TEST(TbPluginGlooCpu, TheReportReproducesThePluginsDistributedView) {
  AnalyzeOptions options;
  options.tool_version = "test";
  const Report r = Analyze(TbPluginGlooCpu(), options);
  ASSERT_EQ(r.ranks.size(), 2u);
  EXPECT_TRUE(r.run.ranks_without_activity.empty());
  EXPECT_EQ(r.steps.source, "whole trace (no step ranges)");

  // steps_to_overlap [computation not overlapped, overlapped, communication not
  // overlapped, other] of the one step: the breakdown's partition, other = memory_only + idle.
  //   worker0: C = [0,20) ∪ [30,131) = 121; M = [16,61) ∪ [66,84) ∪ [110,156) = 109;
  //            C ∩ M = [16,20) ∪ [30,61) ∪ [66,84) ∪ [110,131) = 4 + 31 + 18 + 21 = 74;
  //            window [0,156) → [121 − 74, 74, 109 − 74, 156 − 121 − 109 + 74] = [47, 74, 35, 0]
  //   worker1: C = [0,30) ∪ [70,140) = 100; M = [20,58) ∪ [77,83) ∪ [88,126) ∪ [130,146) = 98;
  //            C ∩ M = [20,30) ∪ [77,83) ∪ [88,126) ∪ [130,140) = 10 + 6 + 38 + 10 = 64;
  //            window [0,146) → [36, 64, 34, 12]
  const std::vector<std::vector<int64_t>> steps_to_overlap = {{47, 74, 35, 0}, {36, 64, 34, 12}};
  // steps_costs[0].costs[3] (communication), [6] (CPU ops not communicating), [8] (total).
  const std::vector<std::vector<int64_t>> costs = {{109, 47, 156}, {98, 36, 146}};
  for (int worker = 0; worker < 2; ++worker) {
    SCOPED_TRACE(::testing::Message() << "worker" << worker);
    const DeviceReport* d = FindDevice(r, worker, kCpuDevice);
    ASSERT_NE(d, nullptr);
    ASSERT_EQ(d->steps.size(), 1u);
    const Breakdown& b = d->steps[0].breakdown;
    EXPECT_EQ((std::vector<int64_t>{Us(b.compute_only_ns), Us(b.overlap_ns), Us(b.comm_only_ns),
                                    Us(b.memory_only_ns + b.idle_ns)}),
              steps_to_overlap[static_cast<size_t>(worker)]);
    EXPECT_EQ((std::vector<int64_t>{Us(b.comm_ns), Us(b.compute_only_ns), Us(b.window_ns)}),
              costs[static_cast<size_t>(worker)]);
  }

  // len(comm_node_list) == 5 on each worker: five collectives, all matched across the two.
  EXPECT_EQ(r.cross_rank.collective_source, "comm ranges");
  EXPECT_EQ(r.cross_rank.matched, 5);
  EXPECT_EQ(r.cross_rank.unmatched, 0);

  // comm_ops rows [name, calls, total bytes, avg bytes, total time, avg time, total data
  // transfer, avg data transfer] per worker. Calls and bytes are the kind's (53120 floats
  // = 212480 B per broadcast, 2049000 floats = 8196000 B per all-reduce); time and data
  // transfer are the kind's per-rank entry, the end-aligned split:
  //   broadcast   instances (w0 | w1; d_min):  [16,54) | [20,48); 28   [25,61) | [28,58); 30
  //                                            [66,84) | [77,83); 6
  //     w0 time [16,61) ∪ [66,84) = 63; transfer [26,54) ∪ [31,61) ∪ [78,84) = 35 + 6 = 41
  //     w1 time [20,58) ∪ [77,83) = 44; transfer [20,48) ∪ [28,58) ∪ [77,83) = 38 + 6 = 44
  //   all_reduce  instances:                   [110,128) | [88,126); 18   [120,156) | [130,146); 16
  //     w0 time [110,156) = 46; transfer [110,128) ∪ [140,156) = 34
  //     w1 time [88,126) ∪ [130,146) = 54; transfer [108,126) ∪ [130,146) = 34
  using Row = std::vector<int64_t>;  // the row without its name
  const std::vector<std::vector<std::pair<std::string, Row>>> comm_ops = {
      {{"gloo:broadcast", {3, 637440, 212480, 63, 21, 41, 14}}, {"gloo:all_reduce", {2, 16392000, 8196000, 46, 23, 34, 17}}},
      {{"gloo:broadcast", {3, 637440, 212480, 44, 15, 44, 15}}, {"gloo:all_reduce", {2, 16392000, 8196000, 54, 27, 34, 17}}},
  };
  for (int worker = 0; worker < 2; ++worker) {
    for (const auto& [name, expected] : comm_ops[static_cast<size_t>(worker)]) {
      SCOPED_TRACE(::testing::Message() << "worker" << worker << " " << name);
      const CollectiveKindSummary* kind = FindKind(r, name);
      ASSERT_NE(kind, nullptr);
      const CollectiveKindOnRank* on_rank = OnRank(*kind, worker);
      ASSERT_NE(on_rank, nullptr);
      const auto calls = static_cast<double>(kind->count);
      const Row row = {kind->count,
                       static_cast<int64_t>(kind->total_bytes),
                       PythonRound(static_cast<double>(kind->total_bytes) / calls),
                       Us(on_rank->time_ns),
                       PythonRound(static_cast<double>(Us(on_rank->time_ns)) / calls),
                       Us(on_rank->end_aligned_transfer_ns),
                       PythonRound(static_cast<double>(Us(on_rank->end_aligned_transfer_ns)) / calls)};
      EXPECT_EQ(row, expected);
      EXPECT_EQ(on_rank->end_aligned_wait_ns, on_rank->time_ns - on_rank->end_aligned_transfer_ns);
    }
  }

  // steps_to_wait [data transfer, synchronizing] of the step: its communication time split
  // end-aligned. On each worker the two kinds never run at once (broadcasts end by 84 µs,
  // all-reduces start at 88 µs or later), and every comm range is a matched collective, so
  // transfer = Σ kinds' end-aligned transfer and synchronizing = comm_ns − transfer:
  //   worker0 [41 + 34, 109 − 75] = [75, 34]; worker1 [44 + 34, 98 − 78] = [78, 20]
  const std::vector<std::vector<int64_t>> steps_to_wait = {{75, 34}, {78, 20}};
  for (int worker = 0; worker < 2; ++worker) {
    SCOPED_TRACE(::testing::Message() << "worker" << worker);
    int64_t transfer = 0, wait = 0;
    for (const CollectiveKindSummary& kind : r.cross_rank.kinds) {
      const CollectiveKindOnRank* on_rank = OnRank(kind, worker);
      ASSERT_NE(on_rank, nullptr);
      transfer += on_rank->end_aligned_transfer_ns;
      wait += on_rank->end_aligned_wait_ns;
    }
    const DeviceReport* device = FindDevice(r, worker, kCpuDevice);
    ASSERT_NE(device, nullptr);
    const Breakdown& b = device->steps[0].breakdown;
    EXPECT_EQ((std::vector<int64_t>{Us(transfer), Us(b.comm_ns - transfer)}), steps_to_wait[static_cast<size_t>(worker)]);
    EXPECT_EQ(wait, b.comm_ns - transfer);
  }

  // rankscope's own wait and transfer (§4) differ: they take the last rank's *start* on
  // aligned clocks (one host, no offset), per instance, summed rather than united:
  //   broadcast #0 last start 20 (w1): w0 waits 4; transfers w0 54 − 20 = 34, w1 48 − 20 = 28
  //   broadcast #1 last start 28 (w1): w0 waits 3; transfers 61 − 28 = 33, 58 − 28 = 30
  //   broadcast #2 last start 77 (w1): w0 waits 11; transfers 84 − 77 = 7, 83 − 77 = 6
  //   all_reduce #0 last start 110 (w0): w1 waits 22; transfers 128 − 110 = 18, 126 − 110 = 16
  //   all_reduce #1 last start 130 (w1): w0 waits 10; transfers 156 − 130 = 26, 146 − 130 = 16
  //   worker0: wait 4 + 3 + 11 + 10 = 28, transfer 34 + 33 + 7 + 18 + 26 = 118
  //   worker1: wait 22, transfer 28 + 30 + 6 + 16 + 16 = 96
  // The plugin's split assumes every rank's copy of a collective ends at the same instant;
  // §4 assumes that only of the clock offset between hosts (one median per host).
  ASSERT_NE(FindWait(r, 0), nullptr);
  ASSERT_NE(FindWait(r, 1), nullptr);
  EXPECT_EQ(Us(FindWait(r, 0)->wait_ns), 28);
  EXPECT_EQ(Us(FindWait(r, 0)->transfer_ns), 118);
  EXPECT_EQ(Us(FindWait(r, 1)->wait_ns), 22);
  EXPECT_EQ(Us(FindWait(r, 1)->transfer_ns), 96);
  EXPECT_EQ(Us(FindKind(r, "gloo:broadcast")->wait_ns), 4 + 3 + 11);
  EXPECT_EQ(Us(FindKind(r, "gloo:all_reduce")->wait_ns), 22 + 10);

  rankscope::testing::ExpectMatchesGolden(rankscope::testing::GoldenPath("tests/analyzer/golden/tb_plugin_gloo_cpu.json"),
                                          report::ReportToJson(r));
}

// ---- A CPU-only PyTorch job with ProfilerStep#N -----------------------------------------------

// Rank r, steps ProfilerStep#1 [0,1000) and #2 [1000,2000) on the main thread; in each step t:
//   main thread:  "## forward ##" user_annotation [t+90, t+450) and "nn.Module: Linear"
//                 python_function [t+95, t+420) (annotations);
//                 aten::linear [t+100, t+400) holding aten::addmm [t+150, t+350);
//                 "autograd::engine::evaluate_function: AddmmBackward0" [t+500, t+900)
//                 holding c10d::allreduce_ [t+700, t+750) (cpu_op, comm by name)
//   gloo thread:  gloo:all_reduce [t+720, t+980) on rank 0, [t+760, t+980) on rank 1,
//                 1024 floats
//   before the first step: aten::empty [−50, −10) (outside every step)
trace::RankTrace CpuOnlyRank(int rank) {
  TraceBuilder b(rank, 2);
  b.Host("node");
  const trace::LaneId main = b.CpuThread("main");
  const trace::LaneId gloo = b.CpuThread("gloo");
  b.Range(main, "cpu_op", 0, "aten::empty", -50, -10);
  for (int step = 1; step <= 2; ++step) {
    const int64_t t = (step - 1) * 1000;
    b.Range(main, "user_annotation", 0, "ProfilerStep#" + std::to_string(step), t, t + 1000);
    b.Range(main, "user_annotation", 0, "## forward ##", t + 90, t + 450);
    b.Range(main, "python_function", 0, "nn.Module: Linear", t + 95, t + 420);
    b.Range(main, "cpu_op", 0, "aten::linear", t + 100, t + 400);
    b.Range(main, "cpu_op", 0, "aten::addmm", t + 150, t + 350);
    b.Range(main, "cpu_op", 0, "autograd::engine::evaluate_function: AddmmBackward0", t + 500, t + 900);
    b.Range(main, "cpu_op", 0, "c10d::allreduce_", t + 700, t + 750);
    b.Range(gloo, "cpu_op", 0, "gloo:all_reduce", t + (rank == 0 ? 720 : 760), t + 980,
            R"({"Input Dims":[[1024]],"Input type":["float"]})");
  }
  return b.Build();
}

TEST(CpuSideRule, StepsComputeCommAndMatchedCollectivesWithBytes) {
  AnalyzeOptions options;
  options.skip_steps = 0;
  const Report r = Analyze({CpuOnlyRank(0), CpuOnlyRank(1)}, options);
  ASSERT_EQ(r.ranks.size(), 2u);
  EXPECT_EQ(r.steps.source, "NVTX ranges 'ProfilerStep#1', 'ProfilerStep#2'");
  EXPECT_EQ(r.workload.backend, "cpu");
  bool noted = false;
  for (const std::string& warning : r.warnings) noted = noted || warning.find("CPU-side rule") != std::string::npos;
  EXPECT_TRUE(noted) << "the report says how CPU-only ranks were measured";

  // Per step on rank 0 (t = step start):
  //   C = top-level ops on the main thread minus its comm: [t+100,t+400) ∪ ([t+500,t+900) \ [t+700,t+750))
  //     = 300 + 200 + 150 = 650 (aten::addmm is inside aten::linear; the annotations are not ops)
  //   M = c10d [t+700,t+750) ∪ gloo [t+720,t+980) = [t+700,t+980) = 280
  //   C ∩ M = [t+750,t+900) = 150: the gloo thread works while backward computes
  // Rank 1: M = [t+700,t+750) ∪ [t+760,t+980) = 270, C ∩ M = [t+760,t+900) = 140.
  for (int rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE(::testing::Message() << "rank " << rank);
    const DeviceReport* d = FindDevice(r, rank, kCpuDevice);
    ASSERT_NE(d, nullptr);
    ASSERT_EQ(d->steps.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
      const StepMetrics& step = d->steps[i];
      EXPECT_EQ(step.number, static_cast<int64_t>(i) + 1);
      EXPECT_EQ(step.breakdown.window_ns, 1000);
      EXPECT_EQ(step.breakdown.compute_ns, 650);
      EXPECT_EQ(step.breakdown.comm_ns, rank == 0 ? 280 : 270);
      EXPECT_EQ(step.breakdown.overlap_ns, rank == 0 ? 150 : 140);
      EXPECT_EQ(step.breakdown.compute_only_ns + step.breakdown.overlap_ns + step.breakdown.comm_only_ns +
                    step.breakdown.memory_only_ns + step.breakdown.idle_ns,
                step.breakdown.window_ns);
      // Rank 0 reaches the gloo all-reduce 40 ns before rank 1 and waits for it.
      EXPECT_EQ(step.wait_ns, rank == 0 ? 40 : 0);
    }
    // aten::empty before the first step counts in the whole-trace totals only.
    EXPECT_EQ(d->totals.window_ns, 1980 - (-50));
    EXPECT_EQ(d->totals.compute_ns, 2 * 650 + 40);
  }

  // One kind, matched in both steps: the gloo work (1024 floats = 4096 B each). The c10d op
  // on the main thread that handed it to Gloo is comm time, but the same collective: not a
  // kind of its own when the rank has the backend's ranges.
  EXPECT_EQ(r.cross_rank.collective_source, "comm ranges");
  EXPECT_EQ(r.cross_rank.matched, 2);
  EXPECT_EQ(r.cross_rank.unmatched, 0);
  const CollectiveKindSummary* gloo = FindKind(r, "gloo:all_reduce");
  ASSERT_NE(gloo, nullptr);
  EXPECT_EQ(FindKind(r, "c10d::allreduce_"), nullptr);
  EXPECT_EQ(gloo->op, "allreduce");
  EXPECT_EQ(gloo->count, 2);
  EXPECT_EQ(gloo->total_bytes, 2u * 4096);
  EXPECT_EQ(gloo->wait_ns, 2 * 40);
  ASSERT_TRUE(gloo->busbw_gbps.has_value());  // 4096 B in 220 ns, × 2(n−1)/n = 1
  EXPECT_NEAR(gloo->busbw_gbps->median, 4096.0 / 220, 1e-9);

  // Top activities: compute ops by their full duration, the nested and annotated ones absent.
  ASSERT_NE(FindActivity(r, "aten::linear"), nullptr);
  EXPECT_EQ(FindActivity(r, "aten::linear")->activity_class, ActivityClass::kCompute);
  EXPECT_EQ(FindActivity(r, "aten::linear")->count, 4);
  EXPECT_EQ(FindActivity(r, "c10d::allreduce_")->activity_class, ActivityClass::kComm);
  EXPECT_EQ(FindActivity(r, "aten::addmm"), nullptr);
  EXPECT_EQ(FindActivity(r, "## forward ##"), nullptr);
  EXPECT_EQ(FindActivity(r, "nn.Module: Linear"), nullptr);
}

TEST(CpuSideRule, NcclUserAnnotationIsCommAndOldKinetoOperatorsAreCompute) {
  // PyTorch 1.8's traces call CPU operators "Operator"; a comm name counts in any domain.
  TraceBuilder b;
  const trace::LaneId main = b.CpuThread("main");
  b.Range(main, "Operator", 0, "aten::conv2d", 0, 100);
  b.Range(main, "user_annotation", 0, "nccl:all_reduce", 200, 300);
  const Report r = Analyze({b.Build()});
  const DeviceReport* d = FindDevice(r, 0, kCpuDevice);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->totals.compute_ns, 100);
  EXPECT_EQ(d->totals.comm_ns, 100);
  EXPECT_EQ(d->totals.window_ns, 300);
}

// ---- The rule is for ranks without device activity only --------------------------------------

TEST(CpuSideRule, ARankWithDeviceActivityKeepsGlooRangesAsAnnotations) {
  TraceBuilder b;
  const trace::LaneId stream = b.GpuStream(0);
  const trace::LaneId main = b.CpuThread("main");
  const trace::LaneId gloo = b.CpuThread("gloo");
  b.Kernel(stream, "gemm", 100, 200);
  b.Range(main, "cpu_op", 0, "aten::mm", 0, 150);
  b.Range(gloo, "cpu_op", 0, "gloo:all_reduce", 120, 400, R"({"Input Dims":[[10]],"Input type":["float"]})");
  const Report r = Analyze({b.Build()});
  ASSERT_EQ(r.ranks.size(), 1u);
  EXPECT_EQ(r.ranks[0].device, 0);  // no CPU device: the ranges are annotations
  EXPECT_EQ(r.ranks[0].totals.compute_ns, 100);
  EXPECT_EQ(r.ranks[0].totals.comm_ns, 0);
  EXPECT_EQ(r.cross_rank.collective_source, "");
  EXPECT_EQ(FindActivity(r, "gloo:all_reduce"), nullptr);
  for (const std::string& warning : r.warnings) EXPECT_EQ(warning.find("CPU-side rule"), std::string::npos);

  // So does a rank whose device activity is CPU-backend work (a comm lane role), even when
  // that work streams after the candidates (rows come by lane, and the main thread's lane
  // is first).
  TraceBuilder cpu_backend;
  const trace::LaneId thread = cpu_backend.CpuThread("main");
  const trace::LaneId comm_lane = cpu_backend.CpuThread("comm", trace::LaneRole::kComm);
  cpu_backend.Range(comm_lane, "rankscope", 0, "allreduce", 0, 100);
  cpu_backend.Range(thread, "cpu_op", 0, "aten::mm", 0, 50);
  cpu_backend.Range(thread, "cpu_op", 0, "gloo:broadcast", 200, 300);
  const Report backend = Analyze({cpu_backend.Build()});
  ASSERT_EQ(backend.ranks.size(), 1u);
  EXPECT_EQ(backend.ranks[0].totals.compute_ns, 0);
  EXPECT_EQ(backend.ranks[0].totals.comm_ns, 100);
}

TEST(CpuSideRule, NoDeviceActivityAndNoCpuOperatorsIsStillAnError) {
  TraceBuilder b;
  const trace::LaneId main = b.CpuThread("main");
  b.Range(main, "user_annotation", 0, "ProfilerStep#1", 0, 1000);
  b.Range(main, "user_annotation", 0, "## forward ##", 10, 500);
  b.Range(main, "python_function", 0, "train.py(12): step", 20, 400);
  const Result<Report> r = RunAnalysis({b.Build()});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message().rfind("no rank has device activity", 0), 0u) << r.status().message();
  EXPECT_EQ(r.status().message().find('\n'), std::string::npos);
}

// ---- User patterns re-class NVTX ranges -------------------------------------------------------

TEST(UserPatterns, ReclassAnnotationsButNeverSteps) {
  auto trace = [] {
    TraceBuilder b;
    const trace::LaneId stream = b.GpuStream(0);
    const trace::LaneId main = b.CpuThread("main");
    b.Kernel(stream, "gemm", 0, 100);
    b.Range(main, "", 0, "step", 0, 1000);
    b.Range(main, "user_annotation", 0, "my_all_to_all", 200, 500);
    b.Range(main, "user_annotation", 0, "data_loading", 600, 700);
    return b.Build();
  };
  AnalyzeOptions plain;
  plain.skip_steps = 0;
  const Report without = Analyze({trace()}, plain);
  ASSERT_EQ(without.ranks.size(), 1u);  // GPU 0 only: the ranges are annotations

  AnalyzeOptions options = plain;
  options.classify.comm_patterns = {"ALL_TO_ALL"};  // any case
  options.classify.compute_patterns = {"loading", "step", "all_to"};  // comm patterns win
  const Report with = Analyze({trace()}, options);
  const DeviceReport* cpu = FindDevice(with, 0, kCpuDevice);
  ASSERT_NE(cpu, nullptr);
  ASSERT_EQ(cpu->steps.size(), 1u);  // "step" is still the step, and no compute
  EXPECT_EQ(cpu->steps[0].breakdown.window_ns, 1000);
  EXPECT_EQ(cpu->steps[0].breakdown.comm_ns, 500 - 200);
  EXPECT_EQ(cpu->steps[0].breakdown.compute_ns, 700 - 600);
  EXPECT_EQ(with.steps.source, "NVTX ranges 'step'");
}

TEST(UserPatterns, ApplyOnCpuSideRanksBeforeTheRule) {
  // A pattern classes what the rule would not (an annotation) and overrides what it would
  // (a comm-named range); neither turns the rule off.
  TraceBuilder b;
  const trace::LaneId main = b.CpuThread("main");
  b.Range(main, "cpu_op", 0, "aten::mm", 0, 100);
  b.Range(main, "user_annotation", 0, "wait_for_data", 100, 150);
  b.Range(main, "cpu_op", 0, "gloo:barrier", 200, 300);
  AnalyzeOptions options;
  options.classify.comm_patterns = {"wait_for"};
  options.classify.compute_patterns = {"barrier"};
  const Report r = Analyze({b.Build()}, options);
  const DeviceReport* d = FindDevice(r, 0, kCpuDevice);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->totals.compute_ns, 100 + 100);  // aten::mm by the rule, gloo:barrier by pattern
  EXPECT_EQ(d->totals.comm_ns, 50);            // wait_for_data by pattern
}

}  // namespace
}  // namespace rankscope::analyzer
