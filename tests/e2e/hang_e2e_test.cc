// Hangs and mismatches, end to end: the real trainer with a planted failure, under
// `rankscope profile --hang-timeout` and the real collector, then `rankscope analyze`. The
// job must stop soon after the hang, the diagnosis must name the rank that never arrived,
// the communicator and the sequence the others wait in, and what the stuck rank was inside;
// a healthy run must never be stopped.
#include <signal.h>
#include <sqlite3.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/e2e/e2e_process.h"
#include "tests/temp_dir.h"

namespace rankscope {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::ChildProcess;
using testing::EndToEndEnvironment;
using testing::ProcessOptions;
using testing::ProcessResult;
using testing::RunProcess;
using testing::TempDir;

std::vector<std::string> Trainer(int steps, int step_ms, std::vector<std::string> extra) {
  std::vector<std::string> argv = {TRAINER_BINARY, "--steps", std::to_string(steps), "--batch", "8", "--width", "32",
                                   "--depth", "2", "--log-every", "0", "--extra-step-delay-ms",
                                   std::to_string(step_ms)};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

std::vector<std::string> Profile(const fs::path& dir, int ranks, double hang_timeout_s,
                                 const std::vector<std::string>& job) {
  std::vector<std::string> argv = {RANKSCOPE_CLI, "profile", "-n", std::to_string(ranks), "-o", dir.string()};
  if (hang_timeout_s > 0) {
    argv.push_back("--hang-timeout");
    argv.push_back(std::to_string(hang_timeout_s));
  }
  argv.push_back("--");
  argv.insert(argv.end(), job.begin(), job.end());
  return argv;
}

nlohmann::json AnalyzeJson(const fs::path& run) {
  const ProcessResult analyzed = RunProcess({RANKSCOPE_CLI, "analyze", run.string(), "--format", "json"});
  nlohmann::json report = nlohmann::json::parse(analyzed.out, nullptr, false);
  EXPECT_FALSE(report.is_discarded()) << analyzed.err;
  return report;
}

TEST(Hang, AStuckRankIsNamedAndTheJobStoppedSoonAfter) {
  TempDir dir;
  const auto started = std::chrono::steady_clock::now();
  // Rank 2 stops inside step 3's backward pass; Gloo's own timeout (60 s) is far away.
  const ProcessResult profiled = RunProcess(Profile(dir / "run", 4, 4, Trainer(40, 20, {"--hang-rank", "2:3"})));
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  ASSERT_FALSE(profiled.timed_out) << profiled.err;
  EXPECT_EQ(profiled.exit_code, 124) << profiled.err;
  EXPECT_LT(wall_s, 40.0) << profiled.err;  // start-up + 3 steps + 4 s + the stop, with room for a loaded machine
  EXPECT_NE(profiled.err.find("--hang-timeout"), std::string::npos) << profiled.err;
  EXPECT_NE(profiled.err.find("Rank 2 never entered"), std::string::npos) << profiled.err;
  EXPECT_NE(profiled.err.find("backward"), std::string::npos) << profiled.err;

  const nlohmann::json report = AnalyzeJson(dir / "run");
  ASSERT_TRUE(report.contains("did_not_finish")) << report.dump();
  const nlohmann::json& end = report["did_not_finish"];
  EXPECT_EQ(end["verdict"], "hang") << end.dump(1);
  ASSERT_EQ(end["communicators"].size(), 1u) << end.dump(1);
  const nlohmann::json& stalled = end["communicators"][0]["stalled"];
  ASSERT_TRUE(stalled.is_object()) << end.dump(1);
  EXPECT_EQ(stalled["missing"], nlohmann::json::array({2})) << end.dump(1);
  EXPECT_EQ(stalled["waiting"], nlohmann::json::array({0, 1, 3})) << end.dump(1);
  EXPECT_EQ(stalled["op"], "allreduce") << end.dump(1);
  EXPECT_GE(stalled["waited_ns"].get<int64_t>(), 3'000'000'000) << end.dump(1);
  // Every rank passed the initial broadcast (sequence 0) and three steps' all-reduces.
  EXPECT_GT(stalled["sequence"].get<int64_t>(), 3) << end.dump(1);
  ASSERT_EQ(end["culprits"].size(), 1u) << end.dump(1);
  EXPECT_EQ(end["culprits"][0]["rank"], 2) << end.dump(1);
  EXPECT_NE(end["culprits"][0].dump().find("backward"), std::string::npos) << end.dump(1);
}

TEST(Hang, AMismatchedCollectiveIsNamedAsOne) {
  TempDir dir;
  // Rank 1 broadcasts where rank 0 all-reduces: Gloo waits for messages that never come.
  const ProcessResult profiled = RunProcess(
      Profile(dir / "run", 2, 3, Trainer(40, 20, {"--mismatch-rank", "1:2", "--timeout", "120"})));
  ASSERT_FALSE(profiled.timed_out) << profiled.err;
  EXPECT_EQ(profiled.exit_code, 124) << profiled.err;
  const nlohmann::json report = AnalyzeJson(dir / "run");
  ASSERT_TRUE(report.contains("did_not_finish")) << report.dump();
  const nlohmann::json& end = report["did_not_finish"];
  EXPECT_EQ(end["verdict"], "mismatch") << end.dump(1);
  ASSERT_EQ(end["communicators"].size(), 1u) << end.dump(1);
  ASSERT_EQ(end["communicators"][0]["mismatches"].size(), 1u) << end.dump(1);
  EXPECT_NE(end["communicators"][0]["mismatches"][0]["fields"].dump().find("op"), std::string::npos) << end.dump(1);
  EXPECT_NE(end["summary"].get<std::string>().find("Broadcast"), std::string::npos) << end.dump(1);
}

// SIGKILL gives the collector no chance to write anything more: the file must already say
// which collective the rank was in.
TEST(Hang, ASigkilledRanksFileStillShowsItsCollectiveInFlight) {
  TempDir dir;
  ChildProcess profile(Profile(dir / "run", 2, 0, Trainer(40, 20, {"--hang-rank", "1:2"})), EndToEndEnvironment(),
                       ProcessOptions{.timeout = 120s});
  // Rank 0 waits in step 2's first all-reduce once rank 1 hangs; give its collector a drain
  // and a commit (50 + 200 ms), then kill it.
  const fs::path progress = dir / "run" / "rank-0.sqlite";
  for (auto deadline = std::chrono::steady_clock::now() + 60s;
       !fs::exists(progress) && std::chrono::steady_clock::now() < deadline;) {
    std::this_thread::sleep_for(50ms);
  }
  std::this_thread::sleep_for(2500ms);  // start-up and two steps of 20 ms, then the wait
  pid_t rank0 = 0;
  {
    std::ifstream children("/proc/" + std::to_string(profile.pid()) + "/task/" + std::to_string(profile.pid()) +
                           "/children");
    children >> rank0;  // the first rank started
  }
  ASSERT_GT(rank0, 0);
  ASSERT_EQ(::kill(rank0, SIGKILL), 0);
  const ProcessResult profiled = profile.Wait();
  ASSERT_FALSE(profiled.timed_out) << profiled.err;

  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open_v2((dir / "run" / "rank-0.sqlite").c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db,
                               "SELECT name, sequence FROM flight_collectives WHERE end_ns IS NULL ORDER BY sequence",
                               -1, &stmt, nullptr),
            SQLITE_OK)
      << sqlite3_errmsg(db);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW) << "no collective in flight in the killed rank's file";
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)), "allreduce");
  EXPECT_GT(sqlite3_column_int64(stmt, 1), 0);
  sqlite3_finalize(stmt);
  sqlite3_close(db);
}

// Steps slower than a tenth of the timeout, five runs at once (ten ranks on this machine's
// cores: as noisy as it gets): none is stopped.
TEST(Hang, AHealthyRunIsNeverStopped) {
  TempDir dir;
  std::vector<std::unique_ptr<ChildProcess>> runs;
  for (int run = 0; run < 5; ++run) {
    runs.push_back(std::make_unique<ChildProcess>(
        Profile(dir / ("run" + std::to_string(run)), 2, 3, Trainer(5, 300, {})), EndToEndEnvironment(),
        ProcessOptions{.timeout = 120s}));
  }
  for (size_t run = 0; run < runs.size(); ++run) {
    SCOPED_TRACE(::testing::Message() << "run " << run);
    const ProcessResult profiled = runs[run]->Wait();
    ASSERT_FALSE(profiled.timed_out) << profiled.err;
    EXPECT_EQ(profiled.exit_code, 0) << profiled.err;
    EXPECT_EQ(profiled.err.find("--hang-timeout"), std::string::npos) << profiled.err;
  }
}

}  // namespace
}  // namespace rankscope
