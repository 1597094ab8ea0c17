// Runs the built `rankscope` binary as a user would: bad input, exit codes, the environment
// a command gets, local ranks, failing ranks and signals. RANKSCOPE_COLLECTOR_LIB points at
// a library that does nothing, so these tests do not depend on the collector.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli/launcher.h"
#include "cli_test_util.h"
#include "trace/recording_lock.h"

namespace rankscope::cli {
namespace {

namespace fs = std::filesystem;
using testing::Lines;
using testing::RankscopeProcess;
using testing::RankscopeRun;
using testing::ReadFile;
using testing::RunOptions;
using testing::RunRankscope;
using testing::Snapshot;
using testing::TempDir;
using testing::WriteFile;

// Exactly one line on stderr, starting "rankscope: error: ", exit code 2.
void ExpectUsageError(const RankscopeRun& run, const std::string& mentions = "") {
  EXPECT_FALSE(run.timed_out);
  EXPECT_EQ(run.exit_code, 2) << run.err;
  const std::vector<std::string> lines = Lines(run.err);
  ASSERT_EQ(lines.size(), 1u) << run.err;
  EXPECT_EQ(lines[0].rfind("rankscope: error: ", 0), 0u) << lines[0];
  if (!mentions.empty()) {
    EXPECT_NE(lines[0].find(mentions), std::string::npos) << lines[0];
  }
}

// A directory holding an earlier run's rank file and a user's notes.
void FillExistingRunDir(const fs::path& dir) {
  fs::create_directory(dir);
  WriteFile(dir / "rank-0.sqlite", "earlier run");
  WriteFile(dir / "rank-0.sqlite-wal", "earlier wal");
  WriteFile(dir / "notes.txt", "keep me");
}

TEST(RankscopeErrors, MissingCommand) {
  TempDir cwd;
  ExpectUsageError(RunRankscope({"profile", "--"}, {.cwd = cwd.path()}), "missing command");
  ExpectUsageError(RunRankscope({"profile"}, {.cwd = cwd.path()}), "missing command");
  EXPECT_TRUE(fs::is_empty(cwd.path())) << "no run directory for a run that never started";
}

TEST(RankscopeErrors, CommandBeforeDashDash) { ExpectUsageError(RunRankscope({"profile", "true"}), "'--'"); }

TEST(RankscopeErrors, UnknownSubcommandAndOption) {
  ExpectUsageError(RunRankscope({"bogus"}), "unknown subcommand 'bogus'");
  ExpectUsageError(RunRankscope({}), "missing subcommand");
  ExpectUsageError(RunRankscope({"profile", "--bogus", "--", "true"}), "unknown option '--bogus'");
  ExpectUsageError(RunRankscope({"--bogus"}));
}

TEST(RankscopeErrors, UnknownTraceItemIsNamedWithTheValidOnes) {
  TempDir cwd;
  const RankscopeRun run = RunRankscope({"profile", "--trace", "nvtx,gpu", "--", "true"}, {.cwd = cwd.path()});
  ExpectUsageError(run, "'gpu'");
  EXPECT_NE(run.err.find("nvtx, cuda, nccl"), std::string::npos) << run.err;
  EXPECT_TRUE(fs::is_empty(cwd.path()));
}

TEST(RankscopeErrors, BadRankCounts) {
  TempDir cwd;
  for (const char* count : {"0", "-3", "abc", "2x", "1025", "99999999999999999999", ""}) {
    SCOPED_TRACE(count);
    ExpectUsageError(RunRankscope({"profile", "-n", count, "--", "true"}, {.cwd = cwd.path()}), "-n");
  }
  EXPECT_TRUE(fs::is_empty(cwd.path()));
}

TEST(RankscopeErrors, ExistingRunDirWithoutForceIsUntouched) {
  TempDir tmp;
  const fs::path dir = tmp / "run";
  FillExistingRunDir(dir);
  const auto before = Snapshot(dir);
  ExpectUsageError(RunRankscope({"profile", "-o", dir.string(), "--", "true"}), "--force");
  EXPECT_EQ(Snapshot(dir), before);
}

TEST(RankscopeErrors, ForceRefusesAFile) {
  TempDir tmp;
  const fs::path file = tmp / "run";
  WriteFile(file, "not a directory");
  ExpectUsageError(RunRankscope({"profile", "--force", "-o", file.string(), "--", "true"}), "not a directory");
  EXPECT_EQ(ReadFile(file), "not a directory");
}

TEST(RankscopeErrors, ParentIsAFile) {
  TempDir tmp;
  WriteFile(tmp / "file", "x");
  ExpectUsageError(RunRankscope({"profile", "-o", (tmp / "file" / "run").string(), "--", "true"}));
  EXPECT_EQ(ReadFile(tmp / "file"), "x");
}

TEST(RankscopeErrors, UnwritableParent) {
  TempDir tmp;
  const fs::path parent = tmp / "read-only";
  fs::create_directory(parent);
  WriteFile(parent / "data.txt", "mine");
  fs::permissions(parent, fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read |
                              fs::perms::group_exec | fs::perms::others_read | fs::perms::others_exec);
  // Root writes anywhere: run rankscope as nobody, who may read the tree but not write it.
  const bool root = ::geteuid() == 0;
  if (root) fs::permissions(tmp.path(), fs::perms::all & ~fs::perms::group_write & ~fs::perms::others_write);
  const RankscopeRun run =
      RunRankscope({"profile", "-o", (parent / "run").string(), "--", "true"}, {.cwd = "/", .as_nobody = root});
  ExpectUsageError(run, "Permission denied");
  EXPECT_FALSE(fs::exists(parent / "run"));
  EXPECT_EQ(ReadFile(parent / "data.txt"), "mine");
}

TEST(RankscopeErrors, MissingCollectorLibrary) {
  TempDir cwd;
  const RankscopeRun run = RunRankscope(
      {"profile", "--", "true"},
      {.set_env = {{"RANKSCOPE_COLLECTOR_LIB", "/nonexistent/librankscope_collector.so"}}, .cwd = cwd.path()});
  ExpectUsageError(run, "RANKSCOPE_COLLECTOR_LIB");
  EXPECT_TRUE(fs::is_empty(cwd.path()));
}

TEST(RankscopeErrors, CommandNotFoundExits127AndLeavesNothing) {
  TempDir tmp;
  const RankscopeRun run =
      RunRankscope({"profile", "-o", (tmp / "run").string(), "--", "rankscope-no-such-command", "x"});
  EXPECT_EQ(run.exit_code, 127) << run.err;
  const std::vector<std::string> lines = Lines(run.err);
  ASSERT_EQ(lines.size(), 1u) << run.err;
  EXPECT_EQ(lines[0].rfind("rankscope: error: ", 0), 0u);
  EXPECT_NE(lines[0].find("rankscope-no-such-command"), std::string::npos);
  EXPECT_NE(lines[0].find("not found"), std::string::npos);
  EXPECT_FALSE(fs::exists(tmp / "run"));
}

TEST(RankscopeErrors, CommandNotFoundKeepsRankFilesEvenWithForce) {
  TempDir tmp;
  const fs::path dir = tmp / "run";
  FillExistingRunDir(dir);
  const auto before = Snapshot(dir);
  const RankscopeRun run = RunRankscope({"profile", "--force", "-o", dir.string(), "--", "./no-such-program"});
  EXPECT_EQ(run.exit_code, 127) << run.err;
  EXPECT_EQ(Lines(run.err).size(), 1u) << run.err;
  EXPECT_EQ(Snapshot(dir), before);
}

TEST(RankscopeErrors, NotExecutableExits126) {
  TempDir tmp;
  WriteFile(tmp / "script.sh", "#!/bin/sh\nexit 0\n");
  fs::permissions(tmp / "script.sh", fs::perms::owner_read | fs::perms::owner_write);
  const RankscopeRun run =
      RunRankscope({"profile", "-o", (tmp / "run").string(), "--", (tmp / "script.sh").string()});
  // No execute bit at all: even root may not run it.
  EXPECT_EQ(run.exit_code, 126) << run.err;
  EXPECT_EQ(Lines(run.err).size(), 1u) << run.err;
  EXPECT_FALSE(fs::exists(tmp / "run"));
}

TEST(RankscopeProfile, HelpExitsZero) {
  const RankscopeRun run = RunRankscope({"profile", "--help"});
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_NE(run.out.find("--trace"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("-n"), std::string::npos) << run.out;
}

TEST(RankscopeProfile, PassesTheExitCodeThrough) {
  TempDir tmp;
  const RankscopeRun run = RunRankscope({"profile", "-o", (tmp / "run").string(), "--", "sh", "-c", "exit 5"});
  EXPECT_EQ(run.exit_code, 5) << run.err;
  EXPECT_NE(run.err.find("exit code 5"), std::string::npos) << run.err;
  // The empty library writes no rank files: the summary says so instead of failing.
  EXPECT_NE(run.err.find("none recorded"), std::string::npos) << run.err;
  EXPECT_TRUE(fs::is_directory(tmp / "run"));
}

TEST(RankscopeErrors, BadHangTimeouts) {
  for (const char* value : {"abc", "0", "-1", "1e9", "5s", ""}) {
    SCOPED_TRACE(value);
    ExpectUsageError(RunRankscope({"profile", "--hang-timeout", value, "--", "true"}), "--hang-timeout");
  }
}

// A job in which nothing reports progress (this test's collector is an empty library) is
// stopped after the timeout, whole: the shell and the sleeps it started, then exit 124.
TEST(RankscopeProfile, HangTimeoutStopsAJobWithoutProgress) {
  TempDir tmp;
  const auto started = std::chrono::steady_clock::now();
  const RankscopeRun run = RunRankscope({"profile", "--hang-timeout", "0.5", "-o", (tmp / "run").string(), "--",
                                         "sh", "-c", "sleep 60 & sleep 60; wait"});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_FALSE(run.timed_out);
  EXPECT_EQ(run.exit_code, 124) << run.err;
  EXPECT_LT(seconds, 30.0) << run.err;
  EXPECT_NE(run.err.find("no rank completed a step or collective for"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("no rank reported any progress"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("stopped as hung"), std::string::npos) << run.err;
}

TEST(RankscopeProfile, CommandOutputIsUntouched) {
  TempDir tmp;
  const RankscopeRun run = RunRankscope(
      {"profile", "-o", (tmp / "run").string(), "--", "sh", "-c", "echo to-stdout; echo to-stderr >&2"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, "to-stdout\n") << "rankscope writes only to stderr";
  EXPECT_NE(run.err.find("to-stderr"), std::string::npos);
}

TEST(RankscopeProfile, GivesTheCommandTheInjectionEnvironment) {
  TempDir tmp;
  const fs::path other_preload = tmp / "libother.so";
  fs::copy_file(EMPTY_PRELOAD_LIBRARY, other_preload);
  const fs::path env_file = tmp / "env.txt";
  const RankscopeRun run = RunRankscope(
      {"profile", "-o", (tmp / "run").string(), "--", "sh", "-c", "env > \"$1\"", "sh", env_file.string()},
      {.set_env = {{"LD_PRELOAD", other_preload.string()}, {"RANK", "9"}}});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  std::map<std::string, std::string> env;
  for (const std::string& line : Lines(ReadFile(env_file))) {
    const size_t eq = line.find('=');
    if (eq != std::string::npos) env[line.substr(0, eq)] = line.substr(eq + 1);
  }
  EXPECT_EQ(env["RANKSCOPE_RUN_DIR"], fs::canonical(tmp / "run").string());
  const std::string run_id = env["RANKSCOPE_RUN_ID"];
  EXPECT_EQ(run_id.size(), 32u);
  EXPECT_TRUE(std::all_of(run_id.begin(), run_id.end(), [](char c) { return std::isxdigit(c) != 0; }));
  EXPECT_NE(run.err.find(run_id), std::string::npos) << "the summary names the run id";
  EXPECT_EQ(env["RANKSCOPE_TRACE"], "nvtx,cuda,nccl");
  EXPECT_EQ(env["NVTX_INJECTION64_PATH"], EMPTY_PRELOAD_LIBRARY);
  EXPECT_EQ(env["LD_PRELOAD"], std::string(EMPTY_PRELOAD_LIBRARY) + ":" + other_preload.string());
  // One library plays CUDA's injection and NCCL's profiler plugin too.
  EXPECT_EQ(env["CUDA_INJECTION64_PATH"], EMPTY_PRELOAD_LIBRARY);
  EXPECT_EQ(env["NCCL_PROFILER_PLUGIN"], EMPTY_PRELOAD_LIBRARY);
  // Without -n the command's own launcher sets ranks: what was there passes through.
  EXPECT_EQ(env["RANK"], "9");
  EXPECT_EQ(env.count("WORLD_SIZE"), 0u);
  EXPECT_EQ(env.count("MASTER_PORT"), 0u);
}

TEST(RankscopeProfile, TraceListIsCanonicalAndSelectsTheInjections) {
  TempDir tmp;
  const fs::path env_file = tmp / "trace.txt";
  const RankscopeRun run = RunRankscope(
      {"profile", "--trace", " nccl , nvtx", "-o", (tmp / "run").string(), "--", "sh", "-c",
       "echo \"$RANKSCOPE_TRACE|${CUDA_INJECTION64_PATH:-unset}|${NCCL_PROFILER_PLUGIN:+set}\" > \"$1\"", "sh",
       env_file.string()},
      {.unset_env = {"CUDA_INJECTION64_PATH", "NCCL_PROFILER_PLUGIN"}});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(ReadFile(env_file), "nvtx,nccl|unset|set\n");
}

TEST(RankscopeProfile, ReplacingAnotherCudaInjectionIsOneNote) {
  TempDir tmp;
  const RankscopeRun run =
      RunRankscope({"profile", "-o", (tmp / "run").string(), "--", "true"},
                   {.set_env = {{"CUDA_INJECTION64_PATH", "/opt/other/libinjection.so"}}});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.err.find("rankscope: note: CUDA_INJECTION64_PATH was '/opt/other/libinjection.so' (another tool's "
                         "CUDA injection); this run uses the collector instead\n"),
            std::string::npos)
      << run.err;
}

TEST(RankscopeProfile, ForceReplacesOnlyRankFiles) {
  TempDir tmp;
  const fs::path dir = tmp / "run";
  FillExistingRunDir(dir);
  fs::create_directory(dir / "plots");
  WriteFile(dir / "rank-unknown-12.sqlite-shm", "shm");
  WriteFile(dir / "rank-1.sqlite.bak", "backup");
  const RankscopeRun run = RunRankscope({"profile", "--force", "-o", dir.string(), "--", "true"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_FALSE(fs::exists(dir / "rank-0.sqlite"));
  EXPECT_FALSE(fs::exists(dir / "rank-0.sqlite-wal"));
  EXPECT_FALSE(fs::exists(dir / "rank-unknown-12.sqlite-shm"));
  EXPECT_EQ(ReadFile(dir / "notes.txt"), "keep me");
  EXPECT_EQ(ReadFile(dir / "rank-1.sqlite.bak"), "backup");
  EXPECT_TRUE(fs::is_directory(dir / "plots"));
}

TEST(RankscopeProfile, ForceRefusesARunStillRecording) {
  TempDir tmp;
  const fs::path dir = tmp / "run";
  FillExistingRunDir(dir);
  auto live = trace::RecordingLock::Acquire(dir);  // held as a live rank's collector holds it
  ASSERT_TRUE(live.ok()) << live.status().message();
  const auto before = Snapshot(dir);
  ExpectUsageError(RunRankscope({"profile", "--force", "-o", dir.string(), "--", "true"}), "still being recorded");
  EXPECT_EQ(Snapshot(dir), before);
}

TEST(RankscopeProfile, DefaultRunDirIsNewInTheCurrentDirectory) {
  TempDir cwd;
  ASSERT_EQ(RunRankscope({"profile", "--", "true"}, {.cwd = cwd.path()}).exit_code, 0);
  ASSERT_EQ(RunRankscope({"profile", "--", "true"}, {.cwd = cwd.path()}).exit_code, 0);
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(cwd.path())) names.push_back(entry.path().filename().string());
  ASSERT_EQ(names.size(), 2u);
  for (const std::string& name : names) {
    // rankscope-run-YYYYmmdd-HHMMSS, maybe with -2 when both started in the same second.
    EXPECT_EQ(name.rfind("rankscope-run-", 0), 0u) << name;
    const std::string stamp = name.substr(14, 15);
    EXPECT_EQ(stamp.size(), 15u) << name;
    EXPECT_EQ(stamp[8], '-') << name;
  }
}

TEST(RankscopeLocalRanks, GiveEachRankTorchrunVariables) {
  TempDir tmp;
  const std::string script =
      "echo \"$RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $GROUP_RANK $MASTER_ADDR $MASTER_PORT\" "
      "> \"$1/out-$RANK\"";
  const RankscopeRun run = RunRankscope(
      {"profile", "-n", "3", "-o", (tmp / "run").string(), "--", "sh", "-c", script, "sh", tmp.path()});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  std::string port;
  for (int rank = 0; rank < 3; ++rank) {
    std::istringstream fields(ReadFile(tmp / ("out-" + std::to_string(rank))));
    std::string r, world, local, local_world, group, addr, master_port;
    fields >> r >> world >> local >> local_world >> group >> addr >> master_port;
    EXPECT_EQ(r, std::to_string(rank));
    EXPECT_EQ(world, "3");
    EXPECT_EQ(local, std::to_string(rank));
    EXPECT_EQ(local_world, "3");
    EXPECT_EQ(group, "0");
    EXPECT_EQ(addr, "127.0.0.1");
    const int port_number = std::atoi(master_port.c_str());
    EXPECT_GT(port_number, 0);
    EXPECT_LT(port_number, 65536);
    if (rank == 0) port = master_port;
    EXPECT_EQ(master_port, port) << "every rank meets at the same port";
  }
  EXPECT_NE(run.err.find("all 3 ranks exited with code 0"), std::string::npos) << run.err;
}

TEST(RankscopeLocalRanks, AFailingRankStopsTheOthers) {
  TempDir tmp;
  const RankscopeRun run = RunRankscope({"profile", "-n", "4", "-o", (tmp / "run").string(), "--", "sh", "-c",
                                         "if [ \"$RANK\" = 2 ]; then exit 7; fi; sleep 60"});
  ASSERT_FALSE(run.timed_out);
  EXPECT_EQ(run.exit_code, 7) << run.err;
  EXPECT_NE(run.err.find("rankscope: rank 2 failed (exit code 7); stopped the other 3 ranks\n"), std::string::npos)
      << run.err;
  EXPECT_LT(run.elapsed.count(), 45.0) << "the other ranks were left sleeping";
}

TEST(RankscopeLocalRanks, ARankKilledByASignalGives128PlusSignal) {
  TempDir tmp;
  const RankscopeRun run = RunRankscope({"profile", "-n", "2", "-o", (tmp / "run").string(), "--", "sh", "-c",
                                         "if [ \"$RANK\" = 1 ]; then kill -KILL $$; fi; sleep 60"});
  ASSERT_FALSE(run.timed_out);
  EXPECT_EQ(run.exit_code, 128 + SIGKILL) << run.err;
  EXPECT_NE(run.err.find("rank 1 failed (killed by SIGKILL); stopped the other 1 rank"), std::string::npos)
      << run.err;
}

TEST(RankscopeLocalRanks, RanksWriteRankFilesThatTheSummaryCounts) {
  TempDir tmp;
  const RankscopeRun run =
      RunRankscope({"profile", "-n", "2", "-o", (tmp / "run").string(), "--", FAKE_RANK_BINARY, "25", "3"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_TRUE(fs::exists(tmp / "run" / "rank-0.sqlite"));
  EXPECT_TRUE(fs::exists(tmp / "run" / "rank-1.sqlite"));
  EXPECT_NE(run.err.find("2 of world size 2 recorded"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("nvtx: buffer overflow' 6"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("sqlite3 "), std::string::npos) << run.err;
  // The total row: 50 events, 6 dropped.
  bool total_found = false;
  for (const std::string& line : Lines(run.err)) {
    std::istringstream fields(line);
    std::string label, events, dropped;
    fields >> label >> events >> dropped;
    if (label == "total") {
      total_found = true;
      EXPECT_EQ(events, "50");
      EXPECT_EQ(dropped, "6");
    }
  }
  EXPECT_TRUE(total_found) << run.err;
}

TEST(RankscopeSignals, SigtermReachesTheCommand) {
  TempDir tmp;
  const fs::path started = tmp / "started";
  RankscopeProcess process({"profile", "-o", (tmp / "run").string(), "--", "sh", "-c", "touch \"$1\"; sleep 60",
                            "sh", started.string()},
                           {});
  ASSERT_TRUE(testing::WaitForFile(started));
  ::kill(process.pid(), SIGTERM);
  const RankscopeRun run = process.Wait();
  ASSERT_FALSE(run.timed_out);
  EXPECT_EQ(run.exit_code, 128 + SIGTERM) << run.err;
  EXPECT_NE(run.err.find("killed by SIGTERM"), std::string::npos) << run.err;
  EXPECT_LT(run.elapsed.count(), 45.0);
}

TEST(RankscopeSignals, ACommandThatTrapsSigtermDecidesTheExitCode) {
  TempDir tmp;
  const fs::path started = tmp / "started";
  const fs::path trapped = tmp / "trapped";
  // Counts the SIGTERMs it gets: rankscope must pass the signal on exactly once.
  const std::string script = "trap 'echo x >> \"$2\"; exit 0' TERM; touch \"$1\"; while :; do sleep 0.1; done";
  RankscopeProcess process({"profile", "-o", (tmp / "run").string(), "--", "sh", "-c", script, "sh",
                            started.string(), trapped.string()},
                           {});
  ASSERT_TRUE(testing::WaitForFile(started));
  ::kill(process.pid(), SIGTERM);
  const RankscopeRun run = process.Wait();
  ASSERT_FALSE(run.timed_out);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(ReadFile(trapped), "x\n");
}

TEST(RankscopeSignals, SignalsReachEveryLocalRankOnce) {
  TempDir tmp;
  const std::string script =
      "trap 'echo x >> \"$1/trapped-$RANK\"; exit 3' INT; touch \"$1/started-$RANK\"; while :; do sleep 0.1; done";
  RankscopeProcess process(
      {"profile", "-n", "3", "-o", (tmp / "run").string(), "--", "sh", "-c", script, "sh", tmp.path().string()},
      {});
  for (int rank = 0; rank < 3; ++rank) {
    ASSERT_TRUE(testing::WaitForFile(tmp / ("started-" + std::to_string(rank))));
  }
  ::kill(process.pid(), SIGINT);
  const RankscopeRun run = process.Wait();
  ASSERT_FALSE(run.timed_out);
  EXPECT_EQ(run.exit_code, 3) << run.err;
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_EQ(ReadFile(tmp / ("trapped-" + std::to_string(rank))), "x\n") << "rank " << rank;
  }
  EXPECT_EQ(run.err.find("failed"), std::string::npos) << "no failure report when the user ended the run";
}

// Polls until `path` holds `content`; false after a minute (a hang, not a timing verdict).
bool WaitForContent(const fs::path& path, const std::string& content) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (ReadFile(path) != content) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

// SIGHUP (a closed terminal) and SIGQUIT (Ctrl-\) stop the command in order: as SIGTERM,
// which the collector answers with a flush, never as a signal that kills it unflushed.
TEST(RankscopeSignals, SighupAndSigquitReachTheCommandAsSigterm) {
  for (const int signal : {SIGHUP, SIGQUIT}) {
    TempDir tmp;
    const fs::path started = tmp / "started";
    RankscopeProcess process({"profile", "-o", (tmp / "run").string(), "--", "sh", "-c", "touch \"$1\"; sleep 60",
                              "sh", started.string()},
                             {});
    ASSERT_TRUE(testing::WaitForFile(started));
    ::kill(process.pid(), signal);
    const RankscopeRun run = process.Wait();
    ASSERT_FALSE(run.timed_out);
    EXPECT_EQ(run.exit_code, 128 + SIGTERM) << "the SIGTERM that ended the command decides\n" << run.err;
    EXPECT_NE(run.err.find("killed by SIGTERM, after rankscope passed on " + SignalName(signal) + " as SIGTERM"),
              std::string::npos)
        << run.err;
  }
}

// The first Ctrl-C is the program's (Python's KeyboardInterrupt); a second one no longer
// waits for the program to agree: it becomes the orderly stop.
TEST(RankscopeSignals, ASecondSigintIsASigterm) {
  TempDir tmp;
  const fs::path started = tmp / "started";
  const fs::path got = tmp / "got";
  const std::string script =
      "trap 'echo INT >> \"$2\"' INT; trap 'echo TERM >> \"$2\"; exit 5' TERM; touch \"$1\"; "
      "while :; do sleep 0.1; done";
  RankscopeProcess process(
      {"profile", "-o", (tmp / "run").string(), "--", "sh", "-c", script, "sh", started.string(), got.string()}, {});
  ASSERT_TRUE(testing::WaitForFile(started));
  ::kill(process.pid(), SIGINT);
  ASSERT_TRUE(WaitForContent(got, "INT\n")) << ReadFile(got);
  ::kill(process.pid(), SIGINT);
  const RankscopeRun run = process.Wait();
  ASSERT_FALSE(run.timed_out);
  EXPECT_EQ(ReadFile(got), "INT\nTERM\n");
  EXPECT_EQ(run.exit_code, 5) << run.err;
  EXPECT_NE(run.err.find("after rankscope passed on SIGINT, SIGINT as SIGTERM"), std::string::npos) << run.err;
}

// rankscope killed outright passes nothing on; the kernel sends the command SIGTERM
// (PR_SET_PDEATHSIG), so its ranks stop in order instead of running on unwatched.
TEST(RankscopeSignals, ACommandWhoseProfileIsKilledGetsSigterm) {
  TempDir tmp;
  const fs::path started = tmp / "started";
  const fs::path got = tmp / "got";
  const std::string script =
      "trap 'echo TERM > \"$2\"; exit 0' TERM; echo $$ > \"$1.tmp\"; mv \"$1.tmp\" \"$1\"; "
      "while :; do sleep 0.1; done";
  RankscopeProcess process(
      {"profile", "-o", (tmp / "run").string(), "--", "sh", "-c", script, "sh", started.string(), got.string()}, {});
  ASSERT_TRUE(testing::WaitForFile(started));
  ::kill(process.pid(), SIGKILL);
  process.Wait();
  const bool stopped = testing::WaitForFile(got);
  if (!stopped) ::kill(std::atoi(ReadFile(started).c_str()), SIGKILL);  // leave no orphan behind
  ASSERT_TRUE(stopped) << "the command outlived rankscope";
  EXPECT_TRUE(WaitForContent(got, "TERM\n")) << ReadFile(got);
}

}  // namespace
}  // namespace rankscope::cli
