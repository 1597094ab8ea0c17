// The critical path and the what-ifs on hand-built steps whose answer is known by
// construction; each test shows its arithmetic (docs/metrics.md §10).
#include "analyzer/critical_path.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace rankscope::analyzer {
namespace {

// Builds a step graph node by node; names are interned.
class GraphBuilder {
 public:
  explicit GraphBuilder(int64_t start = 0) { graph_.start_ns = start; }

  uint32_t Add(int32_t rank, int32_t lane, const std::string& name, int64_t start, int64_t end,
               PathCategory category = PathCategory::kCompute, bool device = false) {
    WorkNode node;
    node.rank = rank;
    node.lane = lane;
    node.device = device;
    node.category = category;
    node.start_ns = start;
    node.end_ns = end;
    node.name = Name(name);
    graph_.nodes.push_back(node);
    graph_.end_ns = std::max(graph_.end_ns, end);
    return static_cast<uint32_t>(graph_.nodes.size() - 1);
  }
  uint32_t Member(int64_t instance, int32_t rank, int32_t lane, const std::string& name, int64_t start, int64_t end) {
    const uint32_t id = Add(rank, lane, name, start, end, PathCategory::kCommTransfer);
    graph_.nodes[id].instance = instance;
    return id;
  }
  void Then(uint32_t from, uint32_t to, DependencyKind kind = DependencyKind::kProgramOrder) {
    graph_.dependencies.push_back({from, to, kind});
  }
  void Waits(uint32_t node) { graph_.nodes[node].waits = true; }
  int32_t Name(const std::string& name) {
    for (size_t i = 0; i < graph_.names.size(); ++i) {
      if (graph_.names[i] == name) return static_cast<int32_t>(i);
    }
    graph_.names.push_back(name);
    return static_cast<int32_t>(graph_.names.size() - 1);
  }
  const StepGraph& graph() const { return graph_; }

 private:
  StepGraph graph_;
};

// "rank/category/name start-end" per segment, for readable expectations.
std::vector<std::string> Describe(const StepGraph& graph, const CriticalPath& path) {
  std::vector<std::string> lines;
  for (const PathSegment& s : path.segments) {
    lines.push_back(std::to_string(s.rank) + "/" + PathCategoryName(s.category) + "/" +
                    (s.name >= 0 ? graph.names[static_cast<size_t>(s.name)] : "-") + " " + std::to_string(s.start_ns) +
                    "-" + std::to_string(s.end_ns));
  }
  return lines;
}

int64_t Project(const StepGraph& graph, const WhatIf& change) {
  Result<int64_t> projected = ProjectStepTime(graph, change);
  EXPECT_TRUE(projected.ok()) << projected.status().message();
  return projected.ok() ? *projected : -1;
}

// Rank 0 computes 0-10 and waits in the all-reduce until rank 1, which computed 0-25,
// arrives; both transfer 25-40; then each runs its optimizer (rank 0's 5 ns, rank 1's 4).
GraphBuilder ChainThroughACollective() {
  GraphBuilder b;
  const uint32_t a = b.Add(0, 0, "forward", 0, 10);
  const uint32_t r0 = b.Member(7, 0, 1, "allreduce", 10, 40);
  const uint32_t o0 = b.Add(0, 0, "optimizer", 40, 45);
  const uint32_t c = b.Add(1, 0, "forward", 0, 25);
  const uint32_t r1 = b.Member(7, 1, 1, "allreduce", 25, 40);
  const uint32_t o1 = b.Add(1, 0, "optimizer", 40, 44);
  b.Then(a, r0);
  b.Then(r0, o0);
  b.Then(c, r1);
  b.Then(r1, o1);
  return b;
}

TEST(CriticalPathTest, AChainThroughACollectiveFollowsTheLastArrivalToTheOtherRank) {
  const GraphBuilder b = ChainThroughACollective();
  Result<CriticalPath> path = FindCriticalPath(b.graph());
  ASSERT_TRUE(path.ok()) << path.status().message();
  // Ends with rank 0's optimizer (45); its all-reduce's last member is rank 1's (arrived at
  // 25): rank 0 transfers 25-40, and before 25 the path is rank 1's forward.
  EXPECT_EQ(Describe(b.graph(), *path),
            (std::vector<std::string>{"1/compute/forward 0-25", "0/communication transfer/allreduce 25-40",
                                      "0/compute/optimizer 40-45"}));
  EXPECT_EQ(path->length_ns(), 45);
  ASSERT_EQ(path->waits.size(), 1u);
  // Rank 0 arrived at 10 and waited 25 − 10 = 15 for rank 1, which was in its forward.
  EXPECT_EQ(path->waits[0].waiting_rank, 0);
  EXPECT_EQ(path->waits[0].late_rank, 1);
  EXPECT_EQ(path->waits[0].wait_ns, 15);
  EXPECT_EQ(b.graph().names[static_cast<size_t>(path->waits[0].late_doing)], "forward");
  EXPECT_EQ(b.graph().names[static_cast<size_t>(path->waits[0].collective)], "allreduce");
}

TEST(CriticalPathTest, WhatIfsReEvaluateTheChain) {
  const GraphBuilder b = ChainThroughACollective();
  const StepGraph& graph = b.graph();
  // Unchanged, the projection is the measured step: 45.
  EXPECT_EQ(Project(graph, WhatIf{}), 45);
  // Stragglers: own time rank 0 = 10 + 5 = 15, rank 1 = 25 + 4 = 29; the median rank of two is
  // the faster, 15; rank 1 × 15/29: forward 12.93 → 13, optimizer 2.07 → 2. The last arrival
  // is 13; each transfer stays 15 (40 − 25): ends at 28; rank 0's optimizer 28-33.
  EXPECT_EQ(Project(graph, RemoveStragglers(graph)), 33);
  // Fully overlapped: transfers 0, the all-reduce ends at the last arrival 25: 25 + 5 = 30.
  EXPECT_EQ(Project(graph, OverlapCommunication(graph)), 30);
  // Every forward 2× faster: rank 0's 10 → 5, rank 1's 25 → 12.5 → 13; last arrival
  // max(5, 13) = 13; 13 + 15 + 5 = 33.
  EXPECT_EQ(Project(graph, FasterWork(graph, "forward ×2", [](const std::string& n) { return n == "forward"; }, 2)),
            33);
  // Bandwidth ×3: transfer 15 → 5: 25 + 5 + 5 = 35.
  EXPECT_EQ(Project(graph, FasterCommunication(graph, 3)), 35);
}

// One GPU rank: the host launches K1 (0-2) and K2 (2-4), then synchronizes (4-30); K1 runs
// 3-15 and K2 15-28 on a stream; the sync returns at 30, and a host op runs 31-33.
GraphBuilder LaunchesAndASync() {
  GraphBuilder b;
  const uint32_t l1 = b.Add(0, 0, "cudaLaunchKernel", 0, 2, PathCategory::kHost);
  const uint32_t l2 = b.Add(0, 0, "cudaLaunchKernel", 2, 4, PathCategory::kHost);
  const uint32_t sync = b.Add(0, 0, "cudaDeviceSynchronize", 4, 30, PathCategory::kHost);
  const uint32_t host = b.Add(0, 0, "loss.item", 31, 33, PathCategory::kHost);
  const uint32_t k1 = b.Add(0, 1, "gemm", 3, 15, PathCategory::kCompute, true);
  const uint32_t k2 = b.Add(0, 1, "softmax", 15, 28, PathCategory::kCompute, true);
  b.Waits(sync);
  b.Then(l1, l2);
  b.Then(l2, sync);
  b.Then(sync, host);
  b.Then(l1, k1, DependencyKind::kLaunch);
  b.Then(l2, k2, DependencyKind::kLaunch);
  b.Then(k1, k2);
  b.Then(k2, sync, DependencyKind::kSync);
  return b;
}

TEST(CriticalPathTest, ASyncLeadsThePathToTheKernelItWaitedFor) {
  const GraphBuilder b = LaunchesAndASync();
  Result<CriticalPath> path = FindCriticalPath(b.graph());
  ASSERT_TRUE(path.ok()) << path.status().message();
  // Back from the host op: a host gap 30-31, the sync's return 28-30 (it blocked until K2
  // ended), K2, K1 (released by K1's end, not by its launch at 2), and before K1 the stream
  // idle from the launch call's start (0) to 3: a launch gap.
  EXPECT_EQ(Describe(b.graph(), *path),
            (std::vector<std::string>{"0/launch gap/gemm 0-3", "0/compute/gemm 3-15", "0/compute/softmax 15-28",
                                      "0/host work/cudaDeviceSynchronize 28-30", "0/host gap/loss.item 30-31",
                                      "0/host work/loss.item 31-33"}));
  EXPECT_EQ(path->length_ns(), 33);
  EXPECT_TRUE(path->waits.empty());
}

TEST(CriticalPathTest, FasterKernelsShortenTheSyncedStep) {
  const GraphBuilder b = LaunchesAndASync();
  const StepGraph& graph = b.graph();
  EXPECT_EQ(Project(graph, WhatIf{}), 33);
  // Kernels 2×: K1 3-9 (its 3 ns launch gap kept), K2 9-16 (13/2 = 6.5 → 7); the sync blocks
  // until 16 and returns in its 2 ns (30 − 28): 18; the host gap (1) and op (2): 21.
  EXPECT_EQ(Project(graph, FasterWork(graph, "kernels ×2",
                                      [](const std::string& n) { return n == "gemm" || n == "softmax"; }, 2)),
            21);
  // The host calls faster instead: the launches 0-1 and 1-2, K1 still starts 3 ns after its
  // launch (3-15), K2 15-28: the step barely moves (the path is on the GPU): 33.
  EXPECT_EQ(
      Project(graph, FasterWork(graph, "launch ×2", [](const std::string& n) { return n == "cudaLaunchKernel"; }, 2)),
      33);
}

// Three CPU ranks; rank 1 sleeps 0-10 before its forward (a planted straggler), each forward
// lasts 10, then the all-reduce; the others arrive at 10, rank 1 at 20; all end at 30.
GraphBuilder ASleepingStraggler() {
  GraphBuilder b;
  for (int32_t rank = 0; rank < 3; ++rank) {
    const int64_t start = rank == 1 ? 10 : 0;
    const uint32_t forward = b.Add(rank, 0, "forward", start, start + 10);
    const uint32_t part = b.Member(0, rank, 1, "allreduce", start + 10, 30);
    b.Then(forward, part);
  }
  return b;
}

TEST(CriticalPathTest, AHostGapOnTheLateRankIsBlamedAndRemovingTheStragglerProjectsTheOthersPace) {
  const GraphBuilder b = ASleepingStraggler();
  const StepGraph& graph = b.graph();
  Result<CriticalPath> path = FindCriticalPath(graph);
  ASSERT_TRUE(path.ok()) << path.status().message();
  // Every part ends at 30; the lowest rank's is the end. Its transfer is 20-30 (the last
  // arrival is rank 1's, at 20); before it, rank 1's forward 10-20 and its gap 0-10.
  EXPECT_EQ(Describe(graph, *path),
            (std::vector<std::string>{"1/host gap/forward 0-10", "1/compute/forward 10-20",
                                      "0/communication transfer/allreduce 20-30"}));
  ASSERT_EQ(path->waits.size(), 1u);
  EXPECT_EQ(path->waits[0].late_rank, 1);
  EXPECT_EQ(path->waits[0].wait_ns, 10);  // rank 0 arrived at 10, rank 1 at 20
  // Own time: ranks 0 and 2: 10 (forward); rank 1: 10 + 10 (gap) = 20; median 10. Rank 1
  // × 0.5: gap 5, forward 5, arrives at 10 with the others; transfers 10 (30 − 20): 20.
  EXPECT_EQ(Project(graph, RemoveStragglers(graph)), 20);
  EXPECT_EQ(Project(graph, WhatIf{}), 30);
}

TEST(CriticalPathTest, AHostGapBetweenOpsOnOneThread) {
  GraphBuilder b(100);
  const uint32_t first = b.Add(0, 0, "forward", 100, 105);
  const uint32_t second = b.Add(0, 0, "backward", 112, 120);
  b.Then(first, second);
  Result<CriticalPath> path = FindCriticalPath(b.graph());
  ASSERT_TRUE(path.ok());
  EXPECT_EQ(Describe(b.graph(), *path),
            (std::vector<std::string>{"0/compute/forward 100-105", "0/host gap/backward 105-112",
                                      "0/compute/backward 112-120"}));
  EXPECT_EQ(path->start_ns, 100);
  EXPECT_EQ(path->length_ns(), 20);
}

TEST(CriticalPathTest, DamagedGraphsAreErrorsAndCyclesEnd) {
  GraphBuilder b;
  const uint32_t x = b.Add(0, 0, "x", 0, 5);
  const uint32_t y = b.Add(0, 0, "y", 5, 9);
  b.Then(x, y);
  StepGraph bad = b.graph();
  bad.dependencies.push_back({0, 9, DependencyKind::kProgramOrder});
  EXPECT_FALSE(FindCriticalPath(bad).ok());
  EXPECT_FALSE(ProjectStepTime(bad, WhatIf{}).ok());
  StepGraph backwards = b.graph();
  backwards.nodes[1].end_ns = 1;
  EXPECT_FALSE(FindCriticalPath(backwards).ok());
  WhatIf wrong_size;
  wrong_size.duration_scale = {1.0};
  EXPECT_FALSE(ProjectStepTime(b.graph(), wrong_size).ok());
  // A cycle (inconsistent times) ends the walk instead of looping.
  StepGraph cycle = b.graph();
  cycle.nodes[0].end_ns = 9;
  cycle.dependencies.push_back({y, x, DependencyKind::kProgramOrder});
  Result<CriticalPath> path = FindCriticalPath(cycle);
  ASSERT_TRUE(path.ok());
  EXPECT_EQ(path->end_ns, 9);
  EXPECT_FALSE(ProjectStepTime(cycle, WhatIf{}).ok());
  // An empty step has an empty path.
  Result<CriticalPath> empty = FindCriticalPath(StepGraph{});
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->segments.empty());
}

}  // namespace
}  // namespace rankscope::analyzer
