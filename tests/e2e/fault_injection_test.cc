// Fault injection, end to end: the real trainer under the real collector and `rankscope
// profile`, hurt on purpose, then `rankscope analyze`. Whatever happens to a rank, to
// `profile` or to the disk, the committed part of every rank file stays analyzable, the
// training is not harmed by the profiler, and nothing already written is lost.
//
// Each case is small: 2 ranks of a tiny model whose steps sleep a few milliseconds, so the
// faults land mid-run whatever the machine's load.
#include <signal.h>
#include <sqlite3.h>
#include <sys/mount.h>
#include <sys/types.h>

#include <chrono>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
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

// A tiny model; every step sleeps `step_ms` so that a run lasts steps · step_ms.
std::vector<std::string> TrainerArgs(int steps, int step_ms) {
  return {TRAINER_BINARY, "--steps", std::to_string(steps), "--batch", "8", "--width", "32", "--depth", "2",
          "--log-every", "0", "--extra-step-delay-ms", std::to_string(step_ms)};
}

std::vector<std::string> ProfileArgv(const fs::path& dir, int ranks, const std::vector<std::string>& job,
                                     bool force = false) {
  std::vector<std::string> argv = {RANKSCOPE_CLI, "profile", "-n", std::to_string(ranks), "-o", dir.string()};
  if (force) argv.push_back("--force");
  argv.push_back("--");
  argv.insert(argv.end(), job.begin(), job.end());
  return argv;
}

std::vector<pid_t> Children(pid_t parent) {
  std::ifstream in("/proc/" + std::to_string(parent) + "/task/" + std::to_string(parent) + "/children");
  std::vector<pid_t> pids;
  for (pid_t pid = 0; in >> pid;) pids.push_back(pid);
  return pids;
}

// The RANK variable of a running process; -1 when unreadable.
int RankOf(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  std::string entry;
  while (std::getline(in, entry, '\0')) {
    if (entry.rfind("RANK=", 0) == 0) return std::stoi(entry.substr(5));
  }
  return -1;
}

// The pid of local rank `rank` of a running `profile`, waiting for it to start.
pid_t WaitForRank(pid_t profile, int rank) {
  for (auto deadline = std::chrono::steady_clock::now() + 60s; std::chrono::steady_clock::now() < deadline;) {
    for (pid_t child : Children(profile)) {
      if (RankOf(child) == rank) return child;
    }
    std::this_thread::sleep_for(5ms);
  }
  return -1;
}

ProcessResult Analyze(const fs::path& run) { return RunProcess({RANKSCOPE_CLI, "analyze", run.string(), "--format", "json"}); }

// What a rank file holds once SQLite has recovered it (its hot journal rolled back or its WAL's
// committed frames replayed), counted on a private copy so the original stays as it was.
struct Committed {
  int64_t rows = 0;   // in every event table
  int64_t steps = 0;  // NVTX ranges named "step"
};

Committed CommittedIn(const fs::path& rank_file) {
  TempDir copy;
  for (const char* suffix : {"", "-wal", "-journal"}) {
    const fs::path from = rank_file.string() + suffix;
    if (fs::exists(from)) fs::copy_file(from, copy / ("rank.sqlite" + std::string(suffix)));
  }
  sqlite3* db = nullptr;
  Committed committed;
  if (sqlite3_open_v2((copy / "rank.sqlite").c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
    ADD_FAILURE() << rank_file << ": " << sqlite3_errmsg(db);
    sqlite3_close(db);
    return committed;
  }
  auto count = [&](const std::string& sql) -> int64_t {
    sqlite3_stmt* statement = nullptr;
    int64_t n = -1;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &statement, nullptr) == SQLITE_OK &&
        sqlite3_step(statement) == SQLITE_ROW) {
      n = sqlite3_column_int64(statement, 0);
    }
    EXPECT_GE(n, 0) << rank_file << ": " << sql << ": " << sqlite3_errmsg(db);
    sqlite3_finalize(statement);
    return n;
  };
  for (const char* table : {"kernels", "memcpys", "memsets", "api_calls", "syncs", "nvtx_ranges", "nvtx_marks",
                            "collectives", "counter_samples", "collective_parts", "overheads"}) {
    committed.rows += count(std::string("SELECT count(*) FROM ") + table);
  }
  committed.steps =
      count("SELECT count(*) FROM nvtx_ranges r JOIN strings s ON s.id = r.name WHERE s.value = 'step'");
  sqlite3_close(db);
  return committed;
}

std::string Meta(const fs::path& rank_file, const std::string& key) {
  TempDir copy;
  fs::copy_file(rank_file, copy / "rank.sqlite");
  if (fs::exists(rank_file.string() + "-wal")) fs::copy_file(rank_file.string() + "-wal", copy / "rank.sqlite-wal");
  sqlite3* db = nullptr;
  std::string value;
  if (sqlite3_open_v2((copy / "rank.sqlite").c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) == SQLITE_OK) {
    sqlite3_stmt* statement = nullptr;
    if (sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key = ?", -1, &statement, nullptr) == SQLITE_OK) {
      sqlite3_bind_text(statement, 1, key.c_str(), -1, SQLITE_TRANSIENT);
      if (sqlite3_step(statement) == SQLITE_ROW) value = reinterpret_cast<const char*>(sqlite3_column_text(statement, 0));
    }
    sqlite3_finalize(statement);
  }
  sqlite3_close(db);
  return value;
}

// The report's run.live: the run was still recording when it was read.
bool Live(const nlohmann::json& report) {
  const nlohmann::json& run = report["run"];
  return run.contains("live") && run["live"].is_boolean() && run["live"].get<bool>();
}

std::vector<int> Ints(const nlohmann::json& array) {
  std::vector<int> out;
  for (const nlohmann::json& v : array) out.push_back(v.get<int>());
  return out;
}

// ---- A rank killed at any instant is analyzed up to its last commit ---------------------------

TEST(FaultInjection, ARankKilledAtAnyInstantIsAnalyzedUpToItsLastCommit) {
  // 20 instants from 100 to 575 ms after rank 1's collector created its file: through its
  // start-up, its first commits and its steady state (the writer commits every 200 ms). From
  // the file, not the process: a loaded machine (sanitizers, parallel builds) can take more
  // than 100 ms from exec to the collector's start, and a rank killed before it has no file.
  for (int i = 0; i < 20; ++i) {
    const auto instant = std::chrono::milliseconds(100 + 25 * i);
    SCOPED_TRACE(::testing::Message() << "kill -9 of rank 1 at " << instant.count() << " ms");
    TempDir dir;
    ChildProcess profile(ProfileArgv(dir / "run", 2, TrainerArgs(400, 4)), EndToEndEnvironment(),
                         ProcessOptions{.timeout = 120s});
    const pid_t rank1 = WaitForRank(profile.pid(), 1);
    ASSERT_GT(rank1, 0) << "rank 1 never started";
    const fs::path killed = dir / "run" / "rank-1.sqlite";
    for (auto deadline = std::chrono::steady_clock::now() + 60s;
         !fs::exists(killed) && std::chrono::steady_clock::now() < deadline;) {
      std::this_thread::sleep_for(2ms);
    }
    ASSERT_TRUE(fs::exists(killed)) << "rank 1 never created its file";
    std::this_thread::sleep_for(instant);
    ASSERT_EQ(::kill(rank1, SIGKILL), 0);
    const ProcessResult profiled = profile.Wait();
    ASSERT_FALSE(profiled.timed_out) << profiled.err;
    EXPECT_NE(profiled.exit_code, 0);  // a rank died

    const Committed committed = CommittedIn(killed);
    const Committed survivor = CommittedIn(dir / "run" / "rank-0.sqlite");

    const ProcessResult analyzed = Analyze(dir / "run");
    ASSERT_FALSE(analyzed.timed_out);
    const nlohmann::json report = nlohmann::json::parse(analyzed.out, nullptr, false);
    ASSERT_FALSE(report.is_discarded()) << analyzed.err;
    // Every committed row is read, from both files: the killed rank's prefix is all there.
    EXPECT_EQ(report["run"]["events"].get<int64_t>(), committed.rows + survivor.rows) << analyzed.err;
    if (committed.steps > 0) {
      // A rank with committed steps is analyzed like a closed one: not "without activity".
      EXPECT_EQ(analyzed.exit_code, 0) << analyzed.err;
      EXPECT_EQ(Ints(report["run"]["ranks"]), (std::vector<int>{0, 1})) << analyzed.err;
      EXPECT_TRUE(report["run"]["ranks_without_activity"].empty()) << analyzed.err;
      for (const nlohmann::json& rank : report["ranks"]) {
        if (rank["rank"] == 1) {
          EXPECT_EQ(static_cast<int64_t>(rank["steps"].size()), committed.steps);
        }
      }
    }
    bool listed_unfinished = false;
    for (const nlohmann::json& file : report["run"]["unfinished_files"]) {
      listed_unfinished |= file.get<std::string>().find("rank-1.sqlite") != std::string::npos;
    }
    EXPECT_TRUE(listed_unfinished) << analyzed.err;
    // Reading wrote nothing beside the files.
    for (const fs::directory_entry& entry : fs::directory_iterator(dir / "run")) {
      EXPECT_EQ(entry.path().string().find("-shm"), std::string::npos) << entry.path();
    }
  }
}

// ---- Signals to `profile`: an orderly stop in which every rank flushes -----------------------

class SignalToProfile : public ::testing::TestWithParam<int> {};

TEST_P(SignalToProfile, StopsEveryRankWithItsFileClosedAndAnalyzable) {
  const int signal_number = GetParam();
  TempDir dir;
  ChildProcess profile(ProfileArgv(dir / "run", 2, TrainerArgs(400, 4)), EndToEndEnvironment(),
                       ProcessOptions{.timeout = 120s});
  ASSERT_GT(WaitForRank(profile.pid(), 1), 0);
  std::this_thread::sleep_for(600ms);  // a few commits in
  ASSERT_EQ(::kill(profile.pid(), signal_number), 0);
  if (signal_number == SIGINT) {
    std::this_thread::sleep_for(20ms);
    ASSERT_EQ(::kill(profile.pid(), SIGINT), 0);  // the impatient second Ctrl-C
  }
  const ProcessResult profiled = profile.Wait();
  ASSERT_FALSE(profiled.timed_out) << profiled.err;
  // The command was stopped by the SIGTERM profile sent in place of HUP, QUIT or the second
  // INT (README: 143); a rank that ended on the first SIGINT already makes it 130.
  if (signal_number == SIGINT) {
    EXPECT_TRUE(profiled.exit_code == 128 + SIGINT || profiled.exit_code == 128 + SIGTERM) << profiled.exit_code;
  } else {
    EXPECT_EQ(profiled.exit_code, 128 + SIGTERM) << profiled.err;
  }
  for (int rank = 0; rank < 2; ++rank) {
    const fs::path file = dir / "run" / ("rank-" + std::to_string(rank) + ".sqlite");
    EXPECT_EQ(Meta(file, "closed_cleanly"), "1") << file;
    if (fs::exists(file.string() + "-journal")) {
      std::fprintf(stderr, "journal of %s: %ju bytes\n", file.c_str(),
                   static_cast<uintmax_t>(fs::file_size(file.string() + "-journal")));
    }
    EXPECT_FALSE(fs::exists(file.string() + "-journal")) << file;
  }
  const ProcessResult analyzed = Analyze(dir / "run");
  EXPECT_EQ(analyzed.exit_code, 0) << analyzed.err;
}

INSTANTIATE_TEST_SUITE_P(HupQuitAndTwoInts, SignalToProfile, ::testing::Values(SIGHUP, SIGQUIT, SIGINT),
                         [](const ::testing::TestParamInfo<int>& param) {
                           return std::string(param.param == SIGHUP ? "Hup" : param.param == SIGQUIT ? "Quit" : "TwoInts");
                         });

// ---- `profile` killed: its ranks notice and stop with a flush ---------------------------------

TEST(FaultInjection, RanksOfAKilledProfileStopWithTheirFilesClosed) {
  TempDir dir;
  ChildProcess profile(ProfileArgv(dir / "run", 2, TrainerArgs(2000, 4)), EndToEndEnvironment(),
                       ProcessOptions{.timeout = 120s});
  std::vector<pid_t> ranks = {WaitForRank(profile.pid(), 0), WaitForRank(profile.pid(), 1)};
  ASSERT_GT(ranks[0], 0);
  ASSERT_GT(ranks[1], 0);
  std::this_thread::sleep_for(400ms);
  ASSERT_EQ(::kill(profile.pid(), SIGKILL), 0);
  profile.Wait();
  // The ranks are no longer our children: wait for them to disappear (a 2000-step run would
  // take 8 s; they must stop well before).
  for (pid_t pid : ranks) {
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (::kill(pid, 0) == 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(10ms);
    EXPECT_NE(::kill(pid, 0), 0) << "rank process " << pid << " runs on without its profile";
  }
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(Meta(dir / "run" / ("rank-" + std::to_string(rank) + ".sqlite"), "closed_cleanly"), "1") << rank;
  }
}

// ---- A live run: analyzed while it records; not deleted by --force ---------------------------

TEST(FaultInjection, ALiveRunIsAnalyzedFromASnapshotAndItsFilesSurviveForce) {
  TempDir dir;
  ChildProcess profile(ProfileArgv(dir / "run", 2, TrainerArgs(500, 4)), EndToEndEnvironment(),
                       ProcessOptions{.timeout = 120s});
  ASSERT_GT(WaitForRank(profile.pid(), 1), 0);
  std::this_thread::sleep_for(500ms);
  int analyzed_live = 0;
  for (int attempt = 0; attempt < 4; ++attempt) {
    const ProcessResult analyzed = Analyze(dir / "run");
    const nlohmann::json report = nlohmann::json::parse(analyzed.out, nullptr, false);
    ASSERT_FALSE(report.is_discarded()) << analyzed.err;
    EXPECT_EQ(analyzed.exit_code, 0) << analyzed.err;
    EXPECT_EQ(Ints(report["run"]["ranks"]), (std::vector<int>{0, 1})) << analyzed.err;
    analyzed_live += Live(report) ? 1 : 0;
  }
  EXPECT_GT(analyzed_live, 0) << "no report said the run was still recording";

  const ProcessResult forced =
      RunProcess(ProfileArgv(dir / "run", 1, TrainerArgs(2, 0), /*force=*/true));
  EXPECT_EQ(forced.exit_code, 2) << forced.err;
  EXPECT_NE(forced.err.find("still being recorded"), std::string::npos) << forced.err;

  const ProcessResult profiled = profile.Wait();
  EXPECT_EQ(profiled.exit_code, 0) << profiled.err;
  const ProcessResult analyzed = Analyze(dir / "run");
  EXPECT_EQ(analyzed.exit_code, 0) << analyzed.err;
  const nlohmann::json report = nlohmann::json::parse(analyzed.out, nullptr, false);
  ASSERT_FALSE(report.is_discarded());
  EXPECT_EQ(report["steps"]["steps_found"], 500);
  EXPECT_FALSE(Live(report));
}

// ---- The disk fills or the files go away: the training is not harmed ------------------------

TEST(FaultInjection, AFullDiskStopsRecordingNotTraining) {
  TempDir dir;
  const fs::path mount_point = dir / "small";
  fs::create_directories(mount_point);
  // 2 MiB fills a few hundred milliseconds into the run, after both ranks made their files.
  if (::mount("tmpfs", mount_point.c_str(), "tmpfs", 0, "size=2m") != 0) {
    GTEST_SKIP() << "cannot mount a small tmpfs here (needs root): " << std::strerror(errno);
  }
  struct Unmount {
    fs::path path;
    ~Unmount() { ::umount2(path.c_str(), MNT_DETACH); }
  } unmount{mount_point};
  const ProcessResult profiled = RunProcess(ProfileArgv(mount_point / "run", 2, TrainerArgs(300, 2)));
  EXPECT_EQ(profiled.exit_code, 0) << profiled.err;  // the training ran to its end
  EXPECT_NE(profiled.err.find("recording stopped"), std::string::npos) << profiled.err;
  // Each rank file that was not closed says why recording stopped (the room for that was
  // kept while it recorded).
  int stopped = 0;
  for (int rank = 0; rank < 2; ++rank) {
    const fs::path file = mount_point / "run" / ("rank-" + std::to_string(rank) + ".sqlite");
    ASSERT_TRUE(fs::exists(file)) << file << "\n" << profiled.err;
    if (Meta(file, "closed_cleanly") == "1") continue;
    EXPECT_NE(Meta(file, "recording_stopped"), "") << file;
    ++stopped;
  }
  EXPECT_GT(stopped, 0) << "the disk never filled";
  const ProcessResult analyzed = Analyze(mount_point / "run");
  EXPECT_FALSE(analyzed.timed_out);
  EXPECT_LE(analyzed.exit_code, 1) << analyzed.err;  // what was committed is analyzed
}

TEST(FaultInjection, RankFilesTruncatedMidRunStopRecordingNotTraining) {
  TempDir dir;
  ChildProcess profile(ProfileArgv(dir / "run", 2, TrainerArgs(300, 3)), EndToEndEnvironment(),
                       ProcessOptions{.timeout = 120s});
  ASSERT_GT(WaitForRank(profile.pid(), 1), 0);
  std::this_thread::sleep_for(400ms);
  for (const fs::directory_entry& entry : fs::directory_iterator(dir / "run")) {
    if (entry.path().filename().string().rfind("rank-", 0) == 0) fs::resize_file(entry.path(), 0);
  }
  const ProcessResult profiled = profile.Wait();
  EXPECT_FALSE(profiled.timed_out);
  EXPECT_EQ(profiled.exit_code, 0) << profiled.err;  // no SIGBUS, no crash: the training ends normally
}

}  // namespace
}  // namespace rankscope
