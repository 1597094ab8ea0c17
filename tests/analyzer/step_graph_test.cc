// Step graphs built from ranks' events (docs/metrics.md §10 "From a run's events"), and the
// critical path measured over steps, on hand-built events whose answer is known.
#include "analyzer/step_graph.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace rankscope::analyzer {
namespace {

constexpr int8_t kComputeClass = static_cast<int8_t>(ActivityClass::kCompute);
constexpr int8_t kCommClass = static_cast<int8_t>(ActivityClass::kComm);

// One rank's events, step windows and collective records.
struct FakeRank {
  int rank = 0;
  RankPathEvents events;
  std::vector<StepRange> steps;
  std::vector<CollectiveRecord> collectives;
  std::vector<int64_t> instance_ids;
  std::vector<MessageRecord> messages;

  uint32_t Name(const std::string& name) {
    for (size_t i = 0; i < events.names.size(); ++i) {
      if (events.names[i] == name) return static_cast<uint32_t>(i);
    }
    events.names.push_back(name);
    return static_cast<uint32_t>(events.names.size() - 1);
  }
  void Add(PathEvent::Kind kind, uint32_t lane, const std::string& name, int64_t start, int64_t end,
           int8_t activity_class = -1, uint64_t correlation = 0) {
    events.Add({kind, activity_class, lane, Name(name), start, end, correlation});
  }
  void Collective(int64_t instance, int64_t start, int64_t end) {
    CollectiveRecord record;
    record.start_ns = start;
    record.end_ns = end;
    collectives.push_back(record);
    instance_ids.push_back(instance);
  }
};

std::vector<RankPathInput> Inputs(const std::vector<FakeRank>& ranks, InstanceIds* ids) {
  std::vector<RankPathInput> inputs;
  ids->clear();
  for (const FakeRank& r : ranks) {
    inputs.push_back({r.rank, &r.events, &r.steps, &r.collectives, 0, &r.messages, nullptr});
    ids->push_back(r.instance_ids);
  }
  return inputs;
}

// Two CPU ranks as the trainer records them: a `step` holding `forward` holding compute
// ranges on the compute thread (lane 1), the all-reduce on the comm thread (lane 2). Rank 1
// computes longer; its all-reduce starts after its last compute range ends (the comm thread
// was idle: released by it), and each compute thread resumes (`sgd`) after its all-reduce ends.
std::vector<FakeRank> TwoCpuRanks() {
  std::vector<FakeRank> ranks(2);
  for (int r = 0; r < 2; ++r) {
    FakeRank& rank = ranks[static_cast<size_t>(r)];
    rank.rank = r;
    rank.steps = {{5, 0, 100, 0}};
    const int64_t compute_end = r == 0 ? 40 : 60;
    rank.Add(PathEvent::Kind::kRange, 1, "forward", 2, compute_end);  // encloses the kernels: not a node
    rank.Add(PathEvent::Kind::kRange, 1, "matmul", 2, 30, kComputeClass);
    rank.Add(PathEvent::Kind::kRange, 1, "relu", 32, compute_end, kComputeClass);
    rank.Add(PathEvent::Kind::kRange, 2, "allreduce", compute_end + 1, 90, kCommClass);
    rank.Add(PathEvent::Kind::kRange, 1, "sgd", 92, 98, kComputeClass);
    rank.Collective(0, compute_end + 1, 90);
  }
  return ranks;
}

TEST(StepGraphTest, CpuRanksGetLeavesProgramOrderCrossThreadReleasesAndOneInstance) {
  const std::vector<FakeRank> ranks = TwoCpuRanks();
  InstanceIds ids;
  const StepGraph graph = BuildStepGraph(Inputs(ranks, &ids), ids, 5);
  // Per rank: matmul, relu, allreduce, sgd (forward encloses matmul and relu: not a node).
  ASSERT_EQ(graph.nodes.size(), 8u);
  EXPECT_EQ(graph.start_ns, 0);
  EXPECT_EQ(graph.end_ns, 100);
  int members = 0;
  for (const WorkNode& node : graph.nodes) members += node.instance == 0 ? 1 : 0;
  EXPECT_EQ(members, 2);
  // matmul → relu → sgd (lane 1), relu → allreduce (the idle comm thread's release),
  // allreduce → sgd (the compute thread resumed after it): 4 per rank.
  EXPECT_EQ(graph.dependencies.size(), 8u);

  Result<CriticalPath> path = FindCriticalPath(graph);
  ASSERT_TRUE(path.ok()) << path.status().message();
  // Back from rank 0's sgd (98): the gap 90-92, rank 0's transfer 61-90 (rank 1 arrived last,
  // at 61), the gap 60-61 on rank 1's comm thread, rank 1's relu and matmul and their gaps.
  ASSERT_FALSE(path->segments.empty());
  EXPECT_EQ(path->segments.front().rank, 1);
  EXPECT_EQ(path->segments.back().rank, 0);
  ASSERT_EQ(path->waits.size(), 1u);
  EXPECT_EQ(path->waits[0].late_rank, 1);
  EXPECT_EQ(path->waits[0].wait_ns, 61 - 41);
  EXPECT_EQ(graph.names[static_cast<size_t>(path->waits[0].late_doing)], "relu");
}

TEST(StepGraphTest, SummaryBlamesTheLateRankAndAddsTheStepTail) {
  const std::vector<FakeRank> ranks = TwoCpuRanks();
  InstanceIds ids;
  const CriticalPathSummary summary = MeasureCriticalPaths(Inputs(ranks, &ids), ids, {5}, 10);
  ASSERT_EQ(summary.steps, 1);
  // The path ends at sgd's end (98); the steps end at 100: a 2 ns tail.
  EXPECT_EQ(summary.measured_step_ns, 100);
  EXPECT_EQ(summary.path_ns, 100);
  EXPECT_EQ(summary.max_mismatch_ns, 0);
  // Rank 1's compute on the path: matmul 28 (2-30) + relu 28 (32-60) = 56; rank 0's transfer
  // 29 (61-90); sgd 6; gaps: 2 (0-2) + 2 (30-32) + 1 (60-61) + 2 (90-92) + 2 (tail) = 9.
  int64_t compute = 0, transfer = 0, gaps = 0;
  for (const PathContribution& c : summary.top) {
    if (c.category == "compute") compute += c.ns_per_step;
    if (c.category == "communication transfer") transfer += c.ns_per_step;
    if (c.category == "host gap") gaps += c.ns_per_step;
  }
  EXPECT_EQ(compute, 56 + 6);
  EXPECT_EQ(transfer, 29);
  EXPECT_EQ(gaps, 9);
  ASSERT_EQ(summary.waits.size(), 1u);
  EXPECT_EQ(summary.waits[0].late_rank, 1);
  EXPECT_EQ(summary.waits[0].late_doing, "relu");
  // Own time (work that is not waiting, and CPU-lane gaps): rank 0 28 + 8 + 6 + 2 + 2 + 1 + 2
  // = 49, rank 1 28 + 28 + 6 + 7 = 69; rank 1 is scaled to 49/69 of its pace: the step shrinks.
  ASSERT_FALSE(summary.what_ifs.empty());
  EXPECT_EQ(summary.what_ifs[0].label, "every rank as fast as the median rank");
  EXPECT_LT(summary.what_ifs[0].projected_step_ns, 100);
  EXPECT_GT(summary.what_ifs[0].gain, 0);
}

TEST(StepGraphTest, GpuLaunchesAndASyncFollowCorrelationAndTheLastKernel) {
  FakeRank rank;
  rank.steps = {{0, 0, 50, 0}};
  rank.Add(PathEvent::Kind::kApiCall, 1, "cudaLaunchKernel", 1, 3, -1, 11);
  rank.Add(PathEvent::Kind::kApiCall, 1, "cudaLaunchKernel", 3, 5, -1, 12);
  rank.Add(PathEvent::Kind::kSync, 1, "cudaDeviceSynchronize", 5, 40);
  rank.Add(PathEvent::Kind::kKernel, 7, "gemm", 4, 20, kComputeClass, 11);
  rank.Add(PathEvent::Kind::kKernel, 7, "softmax", 20, 38, kComputeClass, 12);
  std::vector<FakeRank> ranks = {rank};
  InstanceIds ids;
  const StepGraph graph = BuildStepGraph(Inputs(ranks, &ids), ids, 0);
  ASSERT_EQ(graph.nodes.size(), 5u);
  int launches = 0, syncs = 0;
  for (const Dependency& d : graph.dependencies) {
    launches += d.kind == DependencyKind::kLaunch ? 1 : 0;
    syncs += d.kind == DependencyKind::kSync ? 1 : 0;
  }
  EXPECT_EQ(launches, 2);
  EXPECT_EQ(syncs, 1);  // the sync → softmax, the last kernel to end before it returned
  Result<CriticalPath> path = FindCriticalPath(graph);
  ASSERT_TRUE(path.ok());
  // sync's return 38-40, softmax 20-38, gemm 4-20, gemm's launch gap 1-4, the host gap 0-1.
  ASSERT_EQ(path->segments.size(), 5u);
  EXPECT_EQ(path->segments[0].category, PathCategory::kHostGap);
  EXPECT_EQ(path->segments[1].category, PathCategory::kLaunchGap);
  EXPECT_EQ(path->segments[2].category, PathCategory::kCompute);
  EXPECT_EQ(path->segments[3].category, PathCategory::kCompute);
  EXPECT_EQ(path->segments[4].category, PathCategory::kHost);
  EXPECT_EQ(path->length_ns(), 40);
}

// Two streams: gemm 0-10 on stream 7, the all-reduce 10-30 on stream 13, then sgd on stream 7
// at 31, launched at 5 (before stream 7 went idle at 10): stream 7 waited for stream 13's
// all-reduce (an event wait the trace does not tie to its work). A second sgd launched late,
// at 42, after stream 7 went idle at 35, waited for its launch, not for stream 13.
TEST(StepGraphTest, AStreamResumingAfterAGapWaitedForTheOtherStreamUnlessItsLaunchWasLate) {
  FakeRank rank;
  rank.steps = {{0, 0, 60, 0}};
  rank.Add(PathEvent::Kind::kApiCall, 1, "cudaLaunchKernel", 0, 1, -1, 1);
  rank.Add(PathEvent::Kind::kApiCall, 1, "cudaLaunchKernel", 2, 3, -1, 2);
  rank.Add(PathEvent::Kind::kApiCall, 1, "cudaLaunchKernel", 5, 6, -1, 3);
  rank.Add(PathEvent::Kind::kApiCall, 1, "cudaLaunchKernel", 42, 43, -1, 4);
  rank.Add(PathEvent::Kind::kKernel, 7, "gemm", 1, 10, kComputeClass, 1);
  rank.Add(PathEvent::Kind::kKernel, 13, "ncclDevKernel_AllReduce", 10, 30, kCommClass, 2);
  rank.Add(PathEvent::Kind::kKernel, 7, "sgd", 31, 35, kComputeClass, 3);
  rank.Add(PathEvent::Kind::kKernel, 7, "sgd_late", 44, 50, kComputeClass, 4);
  std::vector<FakeRank> ranks = {rank};
  InstanceIds ids;
  const StepGraph graph = BuildStepGraph(Inputs(ranks, &ids), ids, 0);
  std::vector<std::pair<std::string, std::string>> waits;  // (waited for, waiting), kSync only
  for (const Dependency& d : graph.dependencies) {
    if (d.kind != DependencyKind::kSync) continue;
    waits.emplace_back(graph.names[static_cast<size_t>(graph.nodes[d.from].name)],
                       graph.names[static_cast<size_t>(graph.nodes[d.to].name)]);
  }
  // The all-reduce also waited for gemm: stream 13 was idle from its launch (2) until 10.
  std::sort(waits.begin(), waits.end());
  EXPECT_EQ(waits, (std::vector<std::pair<std::string, std::string>>{{"gemm", "ncclDevKernel_AllReduce"},
                                                                      {"ncclDevKernel_AllReduce", "sgd"}}));
  Result<CriticalPath> path = FindCriticalPath(graph);
  ASSERT_TRUE(path.ok()) << path.status().message();
  // Back from sgd_late's end (50): sgd_late, released by its launch at 42, on the CPU thread
  // back to the step's start; the path spans 0-50.
  EXPECT_EQ(path->length_ns(), 50);
}

// --what-if-bandwidth: each factor is one more projection (×2, always made, only once); the
// all-reduce's transfer is on TwoCpuRanks' path, so more bandwidth projects a shorter step.
TEST(StepGraphTest, BandwidthWhatIfsAddAProjectionPerFactor) {
  const std::vector<FakeRank> ranks = TwoCpuRanks();
  InstanceIds ids;
  const CriticalPathSummary summary = MeasureCriticalPaths(Inputs(ranks, &ids), ids, {5}, 10, {}, 0, {2, 4});
  std::vector<std::string> labels;
  int64_t times_two = 0, times_four = 0;
  for (const WhatIfSummary& w : summary.what_ifs) {
    labels.push_back(w.label);
    if (w.label == "communication bandwidth ×2") times_two = w.projected_step_ns;
    if (w.label == "communication bandwidth ×4") times_four = w.projected_step_ns;
  }
  EXPECT_EQ(std::count(labels.begin(), labels.end(), "communication bandwidth ×2"), 1) << ::testing::PrintToString(labels);
  EXPECT_EQ(std::count(labels.begin(), labels.end(), "communication bandwidth ×4"), 1) << ::testing::PrintToString(labels);
  EXPECT_GT(times_two, 0);
  EXPECT_LT(times_four, times_two);
  EXPECT_LT(times_two, summary.measured_step_ns);
}

// A synchronous copy: the call returns after its copy ended, so it waited for it; the launch
// (call start → copy) and the wait (copy end → call end) are not a cycle.
TEST(StepGraphTest, ASynchronousCopyIsWaitedForByItsCall) {
  FakeRank rank;
  rank.steps = {{0, 0, 40, 0}};
  rank.Add(PathEvent::Kind::kApiCall, 1, "cudaMemcpy", 0, 30, -1, 5);
  rank.Add(PathEvent::Kind::kCopy, 3, "", 10, 28, static_cast<int8_t>(ActivityClass::kMemory), 5);
  rank.Add(PathEvent::Kind::kRange, 1, "loss", 31, 35, kComputeClass);
  std::vector<FakeRank> ranks = {rank};
  InstanceIds ids;
  const StepGraph graph = BuildStepGraph(Inputs(ranks, &ids), ids, 0);
  ASSERT_EQ(graph.nodes.size(), 3u);
  Result<CriticalPath> path = FindCriticalPath(graph);
  ASSERT_TRUE(path.ok()) << path.status().message();
  // loss 31-35, the host gap 30-31, the call's return 28-30, the copy 10-28, its launch gap 0-10.
  ASSERT_EQ(path->segments.size(), 5u);
  EXPECT_EQ(path->segments[0].category, PathCategory::kLaunchGap);
  EXPECT_EQ(path->segments[1].category, PathCategory::kMemcpy);
  EXPECT_EQ(path->segments[2].category, PathCategory::kHost);
  EXPECT_EQ(path->length_ns(), 35);
  EXPECT_EQ(*ProjectStepTime(graph, WhatIf{}), 35);
  // The copy 2× faster: 10-19; the call returns 2 later (21), the gap (1) and loss (4): 26.
  EXPECT_EQ(*ProjectStepTime(graph, FasterWork(graph, "copies", [](const std::string& n) { return n.empty(); }, 2)),
            26);
}

// Point to point: rank 1 posts its receive at 2; rank 0 computes until 10, then sends; the
// message moves 10-30; rank 1 then computes 31-40. The receive waits for the send's start.
TEST(StepGraphTest, AReceiveWaitsForItsSendOnTheOtherRank) {
  std::vector<FakeRank> ranks(2);
  for (int r = 0; r < 2; ++r) {
    ranks[static_cast<size_t>(r)].rank = r;
    ranks[static_cast<size_t>(r)].steps = {{0, 0, 40, 0}};
  }
  ranks[0].Add(PathEvent::Kind::kRange, 1, "forward", 0, 10, kComputeClass);
  ranks[0].Add(PathEvent::Kind::kRange, 1, "send", 10, 30, kCommClass);
  ranks[0].messages.push_back({true, 7, 0, 1, 10, 30, 1024, -1});
  ranks[1].Add(PathEvent::Kind::kRange, 1, "recv", 2, 30, kCommClass);
  ranks[1].Add(PathEvent::Kind::kRange, 1, "backward", 31, 40, kComputeClass);
  ranks[1].messages.push_back({false, 7, 1, 0, 2, 30, 1024, -1});
  InstanceIds ids;
  std::vector<RankPathInput> inputs = Inputs(ranks, &ids);
  const InstanceIds messages = MatchMessageInstances(inputs, 100);
  ASSERT_EQ(messages[0], std::vector<int64_t>{100});
  ASSERT_EQ(messages[1], std::vector<int64_t>{100});
  for (size_t r = 0; r < inputs.size(); ++r) inputs[r].message_instances = &messages[r];
  const StepGraph graph = BuildStepGraph(inputs, ids, 0);
  Result<CriticalPath> path = FindCriticalPath(graph);
  ASSERT_TRUE(path.ok()) << path.status().message();
  // backward 31-40 (rank 1), its gap 30-31, the message's transfer 10-30 on rank 1, and
  // before it rank 0's forward 0-10.
  ASSERT_EQ(path->segments.size(), 4u);
  EXPECT_EQ(path->segments[0].rank, 0);
  EXPECT_EQ(path->segments[0].category, PathCategory::kCompute);
  EXPECT_EQ(path->segments[1].category, PathCategory::kCommTransfer);
  EXPECT_EQ(path->segments[1].start_ns, 10);
  ASSERT_EQ(path->waits.size(), 1u);
  EXPECT_EQ(path->waits[0].waiting_rank, 1);
  EXPECT_EQ(path->waits[0].late_rank, 0);
  EXPECT_EQ(path->waits[0].wait_ns, 8);
  // An unmatched message (no receive) gets no instance.
  ranks[0].messages.push_back({true, 7, 0, 1, 35, 36, 8, -1});
  inputs = Inputs(ranks, &ids);
  EXPECT_EQ(MatchMessageInstances(inputs, 0)[0], (std::vector<int64_t>{0, -1}));
}

TEST(StepGraphTest, AtMostTheAskedStepsAreMeasuredEvenlySpread) {
  FakeRank rank;
  for (int64_t step = 0; step < 5; ++step) {
    rank.steps.push_back({step, step * 100, step * 100 + 90, 0});
    rank.Add(PathEvent::Kind::kRange, 1, "work", step * 100 + 10, step * 100 + 80, kComputeClass);
  }
  std::vector<FakeRank> ranks = {rank};
  InstanceIds ids;
  const std::vector<RankPathInput> inputs = Inputs(ranks, &ids);
  const CriticalPathSummary all = MeasureCriticalPaths(inputs, ids, {0, 1, 2, 3, 4}, 10);
  EXPECT_EQ(all.steps, 5);
  const CriticalPathSummary three = MeasureCriticalPaths(inputs, ids, {0, 1, 2, 3, 4}, 10, {}, 3);
  EXPECT_EQ(three.steps, 3);
  EXPECT_EQ(three.steps_aggregated, 5);
  ASSERT_EQ(three.paths.size(), 3u);
  EXPECT_EQ(three.paths[0].step, 0);  // the first, the middle, the last
  EXPECT_EQ(three.paths[1].step, 2);
  EXPECT_EQ(three.paths[2].step, 4);
}

TEST(StepGraphTest, RanksWithoutTheStepOrEventsGiveNoGraph) {
  std::vector<FakeRank> ranks = TwoCpuRanks();
  InstanceIds ids;
  EXPECT_TRUE(BuildStepGraph(Inputs(ranks, &ids), ids, 6).nodes.empty());
  const CriticalPathSummary summary = MeasureCriticalPaths(Inputs(ranks, &ids), ids, {6}, 10);
  EXPECT_EQ(summary.steps, 0);
  EXPECT_TRUE(summary.what_ifs.empty());
}

}  // namespace
}  // namespace rankscope::analyzer
