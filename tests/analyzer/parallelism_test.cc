// docs/metrics.md §4 "Parallel strategies" on hand-built CPU-backend traces whose figures are
// known by construction: a 2-stage GPipe pipeline of 2 micro-batches, balanced and then with
// a stage twice as slow (its messages matched send with receive, its bubble split into the
// schedule's, the imbalance's and communication's), and FSDP all-gathers partly hidden
// behind compute. Times in milliseconds; every message moves in 1 ms once both sides are in.
#include "analyzer/parallelism.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "analyzer/analyze.h"
#include "tests/trace_builder.h"

namespace rankscope::analyzer {
namespace {

using testing::kCommCategory;
using testing::kComputeCategory;
using testing::TraceBuilder;

constexpr int64_t kMs = 1'000'000;
constexpr uint64_t kComm = 77;

struct Pass {
  bool forward;
  int micro_batch;
  int64_t start, end;  // ms
};
struct Message {
  bool send;
  int peer;
  int micro_batch;
  int64_t start, end;  // ms
};

// One pipeline rank of 2 stages on the CPU backend: its passes, each a compute kernel
// inside a labelled forward/backward range, and its messages on the comm thread.
TraceBuilder PipelineRank(int rank, const std::vector<Pass>& passes, const std::vector<Message>& messages,
                          int64_t step_end) {
  TraceBuilder b(rank, 2);
  b.CpuBackendCategories();
  const trace::LaneId compute = b.CpuThread("compute");
  const trace::LaneId comm = b.CpuThread("comm");
  b.Step(compute, 0, 0, step_end * kMs, 8);
  b.Mark(compute, "rankscope", "workload", 0,
         R"({"world_size":2,"batch":4,"accum":1,"steps":1,"parameters":100,"parallel":2,"stages":2,"micro_batches":2})");
  for (const Pass& pass : passes) {
    const std::string args = "{\"stage\":" + std::to_string(rank) + ",\"stages\":2,\"micro_batch\":" +
                             std::to_string(pass.micro_batch) + ",\"micro_batches\":2}";
    b.Range(compute, "rankscope", 0, pass.forward ? "forward" : "backward", pass.start * kMs, pass.end * kMs, args);
    b.Range(compute, "rankscope", kComputeCategory, "linear", pass.start * kMs, pass.end * kMs);
  }
  uint64_t sent = 0, received = 0;
  for (const Message& m : messages) {
    const std::string args = "{\"comm\":" + std::to_string(kComm) + ",\"sequence\":" +
                             std::to_string(m.send ? sent++ : received++) + ",\"bytes\":4096,\"root\":-1,\"peer\":" +
                             std::to_string(m.peer) + ",\"comm_rank\":" + std::to_string(rank) +
                             ",\"comm_size\":2,\"bucket\":" + std::to_string(m.micro_batch) + "}";
    b.Range(comm, "rankscope", kCommCategory, m.send ? "send" : "recv", m.start * kMs, m.end * kMs, args);
  }
  return b;
}

Report Analyze(std::vector<TraceBuilder> builders) {
  std::vector<trace::RankTrace> traces;
  for (TraceBuilder& builder : builders) traces.push_back(builder.Build());
  AnalyzeOptions options;
  options.skip_steps = 0;
  Result<Report> report = AnalyzeTraces(traces, options);
  EXPECT_TRUE(report.ok()) << report.status().message();
  return report.ok() ? std::move(report).value() : Report{};
}

// Balanced: forward 10 ms, backward 20 ms on both stages.
//   rank 0: F0 [0,10) send a0 [10,11)  F1 [11,21) send a1 [21,22)  recv g0 [22,53)  B0 [53,73)
//           recv g1 [73,74)  B1 [74,94)
//   rank 1: recv a0 [0,11)  F0 [11,21)  recv a1 [21,22)  F1 [22,32)  B0 [32,52)  send g0 [52,53)
//           B1 [53,73)  send g1 [73,74)
TEST(ParallelismTest, ABalancedPipelineHasTheSchedulesBubble) {
  const Report r = Analyze(
      {PipelineRank(0, {{true, 0, 0, 10}, {true, 1, 11, 21}, {false, 0, 53, 73}, {false, 1, 74, 94}},
                    {{true, 1, 0, 10, 11}, {true, 1, 1, 21, 22}, {false, 1, 0, 22, 53}, {false, 1, 1, 73, 74}}, 100),
       PipelineRank(1, {{true, 0, 11, 21}, {true, 1, 22, 32}, {false, 0, 32, 52}, {false, 1, 53, 73}},
                    {{false, 0, 0, 0, 11}, {false, 0, 1, 21, 22}, {true, 0, 0, 52, 53}, {true, 0, 1, 73, 74}}, 100)});
  const Parallelism& p = r.parallelism;
  EXPECT_EQ(p.strategy, "pipeline");
  EXPECT_EQ(p.strategy_source, "workload mark");
  // Sends and receives are messages, not collectives: nothing unmatched.
  EXPECT_EQ(r.cross_rank.unmatched, 0);
  EXPECT_TRUE(r.warnings.empty() || r.warnings.front().find("not seen on every rank") == std::string::npos);
  // The workload: batch 4 x 1 replica (2 ranks in 2 stages) x 2 micro-batches.
  EXPECT_EQ(r.workload.global_batch, 8);

  ASSERT_TRUE(p.point_to_point.has_value());
  EXPECT_EQ(p.point_to_point->matched, 4);
  EXPECT_EQ(p.point_to_point->unmatched, 0);
  ASSERT_EQ(p.point_to_point->routes.size(), 2u);
  const MessageRoute& forward = p.point_to_point->routes[0];
  EXPECT_EQ(forward.from_rank, 0);
  EXPECT_EQ(forward.to_rank, 1);
  EXPECT_EQ(forward.count, 2);
  EXPECT_EQ(forward.total_bytes, 8192u);
  EXPECT_EQ(forward.receiver_wait_ns, 10 * kMs);  // rank 1 waited in recv a0 from 0 until 10
  EXPECT_EQ(forward.sender_wait_ns, 0);
  EXPECT_EQ(forward.transfer_ns, 2 * kMs);  // 1 ms per message
  ASSERT_TRUE(forward.bandwidth_gbps.has_value());
  EXPECT_DOUBLE_EQ(forward.bandwidth_gbps->median, 4096.0 / 1e6);  // bytes per ns = GB/s
  const MessageRoute& backward = p.point_to_point->routes[1];
  EXPECT_EQ(backward.from_rank, 1);
  EXPECT_EQ(backward.receiver_wait_ns, 30 * kMs);  // rank 0 in recv g0 from 22 until 52

  ASSERT_TRUE(p.pipeline.has_value());
  const PipelineFigures& pipe = *p.pipeline;
  EXPECT_EQ(pipe.stages, 2);
  EXPECT_EQ(pipe.micro_batches, 2);
  EXPECT_EQ(pipe.replicas, 1);
  EXPECT_DOUBLE_EQ(pipe.ideal_bubble_pct, 100.0 / 3);  // (S − 1) / (M + S − 1) = 1/3
  ASSERT_EQ(pipe.stage_rows.size(), 2u);
  // Window [0, 94): 94 ms; each stage busy 2 x 10 + 2 x 20 = 60 ms; bubble 34/94.
  for (const PipelineStageFigures& row : pipe.stage_rows) {
    EXPECT_EQ(row.window_ns, 94 * kMs);
    EXPECT_EQ(row.busy_ns, 60 * kMs);
    EXPECT_DOUBLE_EQ(row.bubble_pct, 100.0 * 34 / 94);
    EXPECT_DOUBLE_EQ(row.busy_vs_mean, 1.0);
    EXPECT_EQ(row.transfer_ns, 4 * kMs);  // its 4 messages, 1 ms each
  }
  // Rank 0 waited 30 ms for g0; nothing else idle. Rank 1 waited 10 ms for a0 and idled
  // [74, 94) after its last message, while rank 0 ran B1.
  EXPECT_EQ(pipe.stage_rows[0].neighbour_wait_ns, 30 * kMs);
  EXPECT_EQ(pipe.stage_rows[0].other_idle_ns, 0);
  EXPECT_EQ(pipe.stage_rows[1].neighbour_wait_ns, 10 * kMs);
  EXPECT_EQ(pipe.stage_rows[1].other_idle_ns, 20 * kMs);
  // Balanced stages without communication: 60 x (M + S − 1) / M = 90 ms; no imbalance; the
  // 4 ms left are the transfers on the path, under 5% of the window: the schedule's bubble.
  EXPECT_EQ(pipe.window_ns, 94 * kMs);
  EXPECT_EQ(pipe.balanced_window_ns, 90 * kMs);
  EXPECT_EQ(pipe.imbalance_ns, 0);
  EXPECT_EQ(pipe.communication_ns, 4 * kMs);
  EXPECT_EQ(pipe.diagnosis.rfind("the bubble is the schedule's", 0), 0u) << pipe.diagnosis;
}

// Stage 1 twice as slow: forward 20 ms, backward 40 ms; stage 0 as above.
//   rank 0: F0 [0,10) send a0 [10,11)  F1 [11,21) send a1 [21,32) (rank 1 is in F0 until 31)
//           recv g0 [32,93) B0 [93,113) recv g1 [113,134) B1 [134,154)
//   rank 1: recv a0 [0,11)  F0 [11,31)  recv a1 [31,32)  F1 [32,52)  B0 [52,92)
//           send g0 [92,93)  B1 [93,133)  send g1 [133,134)
TEST(ParallelismTest, ASlowStageShowsAsImbalance) {
  const Report r = Analyze(
      {PipelineRank(0, {{true, 0, 0, 10}, {true, 1, 11, 21}, {false, 0, 93, 113}, {false, 1, 134, 154}},
                    {{true, 1, 0, 10, 11}, {true, 1, 1, 21, 32}, {false, 1, 0, 32, 93}, {false, 1, 1, 113, 134}}, 160),
       PipelineRank(1, {{true, 0, 11, 31}, {true, 1, 32, 52}, {false, 0, 52, 92}, {false, 1, 93, 133}},
                    {{false, 0, 0, 0, 11}, {false, 0, 1, 31, 32}, {true, 0, 0, 92, 93}, {true, 0, 1, 133, 134}}, 160)});
  ASSERT_TRUE(r.parallelism.point_to_point.has_value());
  EXPECT_EQ(r.parallelism.point_to_point->routes[0].sender_wait_ns, 10 * kMs);  // a1: 21 → 31
  ASSERT_TRUE(r.parallelism.pipeline.has_value());
  const PipelineFigures& pipe = *r.parallelism.pipeline;
  ASSERT_EQ(pipe.stage_rows.size(), 2u);
  // Window [0, 154); busy 60 and 120 ms, mean 90.
  EXPECT_EQ(pipe.stage_rows[0].busy_ns, 60 * kMs);
  EXPECT_EQ(pipe.stage_rows[1].busy_ns, 120 * kMs);
  EXPECT_DOUBLE_EQ(pipe.stage_rows[0].bubble_pct, 100.0 * 94 / 154);
  EXPECT_DOUBLE_EQ(pipe.stage_rows[1].bubble_pct, 100.0 * 34 / 154);
  EXPECT_DOUBLE_EQ(pipe.bubble_pct, (100.0 * 94 / 154 + 100.0 * 34 / 154) / 2);  // median of two
  EXPECT_DOUBLE_EQ(pipe.stage_rows[1].busy_vs_mean, 120.0 / 90);
  // Rank 0 waited for rank 1 to receive a1 [21,31), and for g0 [32,92) and g1 [113,133): 90 ms.
  EXPECT_EQ(pipe.stage_rows[0].neighbour_wait_ns, 90 * kMs);
  // Balanced: 90 x 3/2 = 135 ms; the slow stage adds (120 − 90) x (M − 1)/M = 15 ms (it
  // paces the second micro-batch); communication the last 154 − 150 = 4 ms.
  EXPECT_EQ(pipe.window_ns, 154 * kMs);
  EXPECT_EQ(pipe.balanced_window_ns, 135 * kMs);
  EXPECT_EQ(pipe.imbalance_ns, 15 * kMs);
  EXPECT_EQ(pipe.communication_ns, 4 * kMs);
  EXPECT_EQ(pipe.diagnosis.rfind("mostly imbalance", 0), 0u) << pipe.diagnosis;
  EXPECT_NE(pipe.diagnosis.find("stage 1 (rank 1) computes 1.33x the mean stage"), std::string::npos)
      << pipe.diagnosis;
}

// A message whose other side no rank recorded is counted and warned about, not matched.
TEST(ParallelismTest, AMessageWithoutItsOtherSideIsUnmatched) {
  const Report r = Analyze({PipelineRank(0, {{true, 0, 0, 10}}, {{true, 1, 0, 10, 11}}, 20),
                            PipelineRank(1, {{true, 0, 11, 21}}, {}, 20)});
  ASSERT_TRUE(r.parallelism.point_to_point.has_value());
  EXPECT_EQ(r.parallelism.point_to_point->matched, 0);
  EXPECT_EQ(r.parallelism.point_to_point->unmatched, 1);
  bool warned = false;
  for (const std::string& warning : r.warnings) warned = warned || warning.find("point-to-point") != std::string::npos;
  EXPECT_TRUE(warned);
}

// Without messages between the stages (a GPU run without NCCL's profiler plugin records no
// send or receive), the trainer's numbering puts ranks 0 and 1 in one replica: the window
// still spans both stages, and what waiting there was counts as other idle time.
TEST(ParallelismTest, WithoutMessagesTheTrainersNumberingGivesTheReplicas) {
  const Report r = Analyze(
      {PipelineRank(0, {{true, 0, 0, 10}, {true, 1, 11, 21}, {false, 0, 53, 73}, {false, 1, 74, 94}}, {}, 100),
       PipelineRank(1, {{true, 0, 11, 21}, {true, 1, 22, 32}, {false, 0, 32, 52}, {false, 1, 53, 73}}, {}, 100)});
  ASSERT_TRUE(r.parallelism.pipeline.has_value());
  const PipelineFigures& pipe = *r.parallelism.pipeline;
  EXPECT_EQ(pipe.replicas, 1);
  ASSERT_EQ(pipe.stage_rows.size(), 2u);
  EXPECT_EQ(pipe.stage_rows[1].window_ns, 94 * kMs);
  EXPECT_EQ(pipe.stage_rows[1].neighbour_wait_ns, 0);
  EXPECT_EQ(pipe.stage_rows[1].other_idle_ns, 34 * kMs);
}

// On a GPU a pass's range is the CPU enqueueing kernels that run later: the bubble comes from
// the kernels. 2 stages, 1 micro-batch; every pass is enqueued in [0, 4) ms; step [0, 100):
//   rank 0 kernels: F0 [10,20)  B0 [50,70)      rank 1 kernels: F0 [25,35)  B0 [35,45)
// The window is [10, 70) = 60 ms (the kernels' hull, not the ranges'); busy 30 and 20 ms.
TEST(ParallelismTest, OnGpuRanksTheBubbleComesFromTheKernels) {
  std::vector<TraceBuilder> ranks;
  const int64_t kernels[2][2][2] = {{{10, 20}, {50, 70}}, {{25, 35}, {35, 45}}};
  for (int rank = 0; rank < 2; ++rank) {
    TraceBuilder b(rank, 2);
    const trace::LaneId main = b.CpuThread("main");
    const trace::LaneId stream = b.GpuStream(0);
    b.Step(main, 0, 0, 100 * kMs, 4);
    b.Mark(main, "rankscope", "workload", 0,
           R"({"world_size":2,"batch":4,"accum":1,"steps":1,"parameters":100,"parallel":2,"stages":2,"micro_batches":1})");
    const std::string args =
        "{\"stage\":" + std::to_string(rank) + ",\"stages\":2,\"micro_batch\":0,\"micro_batches\":1}";
    b.Range(main, "rankscope", 0, "forward", 0, 1 * kMs, args);
    b.Range(main, "rankscope", 0, "backward", 2 * kMs, 3 * kMs, args);
    for (const auto& kernel : kernels[rank]) b.Kernel(stream, "gemm", kernel[0] * kMs, kernel[1] * kMs);
    ranks.push_back(std::move(b));
  }
  const Report r = Analyze(std::move(ranks));
  EXPECT_EQ(r.parallelism.strategy, "pipeline");
  ASSERT_TRUE(r.parallelism.pipeline.has_value());
  const PipelineFigures& pipe = *r.parallelism.pipeline;
  EXPECT_DOUBLE_EQ(pipe.ideal_bubble_pct, 50.0);  // (S − 1) / (M + S − 1) = 1/2
  ASSERT_EQ(pipe.stage_rows.size(), 2u);
  EXPECT_EQ(pipe.window_ns, 60 * kMs);
  EXPECT_EQ(pipe.stage_rows[0].window_ns, 60 * kMs);
  EXPECT_EQ(pipe.stage_rows[0].busy_ns, 30 * kMs);
  EXPECT_DOUBLE_EQ(pipe.stage_rows[0].bubble_pct, 50.0);
  EXPECT_EQ(pipe.stage_rows[1].busy_ns, 20 * kMs);
  EXPECT_DOUBLE_EQ(pipe.stage_rows[1].bubble_pct, 100.0 * 40 / 60);
  // Balanced stages: the mean 25 ms x (M + S − 1) / M = 50 ms; with one micro-batch the
  // slowest stage paces nothing after it.
  EXPECT_EQ(pipe.balanced_window_ns, 50 * kMs);
  EXPECT_EQ(pipe.imbalance_ns, 0);
}

// FSDP on 2 identical ranks, one step [0, 100): compute [0,30) and [50,80); layer 0's
// all-gather [30,50) in the gap (20 ms exposed), layer 1's [20,40) half behind compute (10 of
// 20 exposed); reduce-scatters layer 1 [80,90) (10 exposed) and layer 0 [70,85) (5 of 15).
TEST(ParallelismTest, FsdpExposureIsAllGatherTimeOutsideCompute) {
  std::vector<TraceBuilder> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    TraceBuilder b(rank, 2);
    b.CpuBackendCategories();
    const trace::LaneId compute = b.CpuThread("compute");
    const trace::LaneId comm = b.CpuThread("comm");
    b.Step(compute, 0, 0, 100 * kMs, 4);
    b.Range(compute, "rankscope", kComputeCategory, "linear", 0, 30 * kMs);
    b.Range(compute, "rankscope", kComputeCategory, "linear", 50 * kMs, 80 * kMs);
    uint64_t sequence = 0;
    const auto collective = [&](const char* op, int layer, int64_t start, int64_t end) {
      const std::string args = "{\"comm\":" + std::to_string(kComm) + ",\"sequence\":" + std::to_string(sequence++) +
                               ",\"bytes\":1000,\"root\":-1,\"peer\":-1,\"comm_rank\":" + std::to_string(rank) +
                               ",\"comm_size\":2,\"bucket\":" + std::to_string(layer) + "}";
      b.Range(comm, "rankscope", kCommCategory, op, start * kMs, end * kMs, args);
    };
    collective("allgather", 1, 20, 40);
    collective("allgather", 0, 30, 50);
    collective("reducescatter", 0, 70, 85);
    collective("reducescatter", 1, 80, 90);
    ranks.push_back(b);
  }
  const Report r = Analyze(ranks);
  EXPECT_EQ(r.parallelism.strategy, "fsdp");
  EXPECT_EQ(r.parallelism.strategy_source, "collectives");
  EXPECT_EQ(r.cross_rank.unmatched, 0);
  ASSERT_TRUE(r.parallelism.fsdp.has_value());
  const FsdpFigures& fsdp = *r.parallelism.fsdp;
  ASSERT_EQ(fsdp.layers.size(), 2u);
  EXPECT_EQ(fsdp.layers[0].layer, 0);
  EXPECT_DOUBLE_EQ(fsdp.layers[0].all_gathers, 1.0);
  EXPECT_DOUBLE_EQ(fsdp.layers[0].gather_ns, 20.0 * kMs);
  EXPECT_DOUBLE_EQ(fsdp.layers[0].exposed_gather_ns, 20.0 * kMs);
  EXPECT_DOUBLE_EQ(fsdp.layers[0].reduce_scatter_ns, 15.0 * kMs);
  EXPECT_DOUBLE_EQ(fsdp.layers[0].exposed_reduce_scatter_ns, 5.0 * kMs);
  EXPECT_DOUBLE_EQ(fsdp.layers[1].exposed_gather_ns, 10.0 * kMs);
  EXPECT_DOUBLE_EQ(fsdp.layers[1].exposed_reduce_scatter_ns, 10.0 * kMs);
  EXPECT_DOUBLE_EQ(fsdp.gather_ns, 40.0 * kMs);
  EXPECT_DOUBLE_EQ(fsdp.exposed_gather_ns, 30.0 * kMs);
  ASSERT_TRUE(fsdp.exposed_gather_pct.has_value());
  EXPECT_DOUBLE_EQ(*fsdp.exposed_gather_pct, 75.0);
  // nccl-tests' size of an all-gather is one rank's 1000 bytes times 2 ranks.
  for (const CollectiveKindSummary& kind : r.cross_rank.kinds) {
    EXPECT_EQ(kind.total_bytes, 2 * 2000u) << kind.kind;  // 2 instances of 2000 bytes each
  }
}

}  // namespace
}  // namespace rankscope::analyzer
