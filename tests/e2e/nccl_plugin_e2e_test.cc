// End to end: two ranks whose NCCL profiler plugin calls come from a stand-in for NCCL
// (collector_nccl_plugin_program) run under `rankscope profile -n 2`, and `rankscope analyze`
// matches their collectives by (communicator, sequence) and finds the rank the other waited
// for: rank 1 arrives 20 ms late at each of the 6 AllReduces.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

#include "tests/e2e/e2e_process.h"
#include "tests/temp_dir.h"

namespace rankscope {
namespace {

using testing::ProcessResult;
using testing::RunProcess;
using testing::TempDir;

constexpr int kSteps = 6;                      // AllReduces, one per step
constexpr int64_t kStragglerNs = 20'000'000;   // rank 1's lateness at each of them
constexpr uint64_t kAllReduceBytes = 4 << 20;  // 1 Mi float32

const nlohmann::json* WaitOf(const nlohmann::json& report, int rank) {
  for (const nlohmann::json& wait : report["cross_rank"]["waits"]) {
    if (wait["rank"] == rank) return &wait;
  }
  return nullptr;
}

TEST(NcclPluginEndToEnd, PluginCollectivesAreMatchedAcrossRanksAndTheLateRankIsWaitedFor) {
  TempDir dir;
  const ProcessResult profiled =
      RunProcess({RANKSCOPE_CLI, "profile", "-n", "2", "-o", (dir / "run").string(), "--", NCCL_PLUGIN_PROGRAM});
  ASSERT_EQ(profiled.exit_code, 0) << profiled.err;

  const ProcessResult analyzed = RunProcess({RANKSCOPE_CLI, "analyze", (dir / "run").string(), "--format", "json"});
  ASSERT_EQ(analyzed.exit_code, 0) << analyzed.err;
  const nlohmann::json report = nlohmann::json::parse(analyzed.out, nullptr, false);
  ASSERT_FALSE(report.is_discarded()) << analyzed.out;

  ASSERT_EQ(report["run"]["ranks"], nlohmann::json::array({0, 1}));
  EXPECT_EQ(report["run"]["ranks_without_activity"], nlohmann::json::array());
  EXPECT_EQ(report["steps"]["steps_found"], kSteps);
  const nlohmann::json& cross = report["cross_rank"];
  // The plugin's rows, matched by (communicator, sequence); the Send/Recv pair is no
  // collective: neither matched nor unmatched.
  EXPECT_EQ(cross["collective_source"], "NCCL profiler plugin");
  EXPECT_EQ(cross["matched"], kSteps);
  EXPECT_EQ(cross["unmatched"], 0);
  ASSERT_EQ(cross["kinds"].size(), 1u) << cross["kinds"].dump();
  const nlohmann::json& allreduce = cross["kinds"][0];
  EXPECT_EQ(allreduce["kind"], "AllReduce");
  EXPECT_EQ(allreduce["op"], "allreduce");
  EXPECT_EQ(allreduce["count"], kSteps);
  EXPECT_EQ(allreduce["total_bytes"], kSteps * kAllReduceBytes);

  // Rank 0 waits about 20 ms at every AllReduce; rank 1 arrives last each time.
  const nlohmann::json* rank0 = WaitOf(report, 0);
  const nlohmann::json* rank1 = WaitOf(report, 1);
  ASSERT_NE(rank0, nullptr);
  ASSERT_NE(rank1, nullptr);
  const int64_t wait0 = (*rank0)["wait_ns"].get<int64_t>();
  const int64_t wait1 = (*rank1)["wait_ns"].get<int64_t>();
  EXPECT_GT(wait0, wait1);
  EXPECT_GT(wait0, kSteps * kStragglerNs / 2) << rank0->dump();
  EXPECT_LT(wait0, kSteps * kStragglerNs * 3) << rank0->dump();
  EXPECT_EQ((*rank1)["times_last"], kSteps) << rank1->dump();
  EXPECT_EQ((*rank1)["wait_caused_ns"], wait0);
  EXPECT_EQ(cross["stragglers"], nlohmann::json::array({1}));
}

}  // namespace
}  // namespace rankscope
