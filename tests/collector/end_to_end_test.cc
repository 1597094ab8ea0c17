// The real collector library injected into real programs, as `rankscope profile` does it.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/collector/collector_test_util.h"
#include "tests/trace/trace_test_util.h"
#include "trace/reader.h"
#include "trace/recording_lock.h"
#include "trace/run_dir.h"

namespace rankscope::collector {
namespace {

using testing::CountByName;
using testing::Load;
using trace::testing::TempDir;

struct Child {
  pid_t pid = -1;
  int stdout_fd = -1;
};

// Starts `argv` with the collector's environment (preloaded unless `preload` is false).
Child Start(const TempDir& dir, std::vector<std::string> argv, std::map<std::string, std::string> extra,
            bool preload = true) {
  std::map<std::string, std::string> env = testing::CollectorEnvironment();
  for (const auto& [name, value] : extra) env[name] = value;
  env["RANKSCOPE_RUN_DIR"] = dir.path().string();
  env["RANKSCOPE_RUN_ID"] = "e2e";
  env["NVTX_INJECTION64_PATH"] = COLLECTOR_LIBRARY;
  if (preload) env["LD_PRELOAD"] = COLLECTOR_LIBRARY;
  int pipe_fds[2];
  EXPECT_EQ(pipe(pipe_fds), 0);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(pipe_fds[1], STDOUT_FILENO);
    close(pipe_fds[0]);
    const rlimit no_core{0, 0};  // SIGQUIT's default action dumps core: not into the test's tree
    setrlimit(RLIMIT_CORE, &no_core);
    clearenv();
    for (const auto& [name, value] : env) setenv(name.c_str(), value.c_str(), 1);
    std::vector<char*> args;
    for (std::string& arg : argv) args.push_back(arg.data());
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close(pipe_fds[1]);
  return {pid, pipe_fds[0]};
}

bool WaitForLine(const Child& child, const std::string& line, int timeout_ms = 30000) {
  std::string seen;
  char buffer[256];
  for (int waited = 0; waited < timeout_ms; waited += 50) {
    pollfd fd{child.stdout_fd, POLLIN, 0};
    if (poll(&fd, 1, 50) > 0) {
      ssize_t n = read(child.stdout_fd, buffer, sizeof(buffer));
      if (n <= 0) return false;
      seen.append(buffer, static_cast<size_t>(n));
      if (seen.find(line + "\n") != std::string::npos) return true;
    }
  }
  return false;
}

int Wait(Child& child) {
  int status = 0;
  waitpid(child.pid, &status, 0);
  close(child.stdout_fd);
  return status;
}

int RunProgram(const TempDir& dir, std::vector<std::string> argv, std::map<std::string, std::string> env = {},
        bool preload = true) {
  Child child = Start(dir, std::move(argv), std::move(env), preload);
  return Wait(child);
}

const trace::NvtxRangeEvent* Enclosing(const trace::RankTrace& trace, const trace::NvtxRangeEvent& inner,
                                       const std::string& name) {
  for (const auto& range : trace.events.nvtx_ranges) {
    if (trace.str(range.name) == name && range.lane == inner.lane && range.start_ns <= inner.start_ns &&
        range.end_ns >= inner.end_ns) {
      return &range;
    }
  }
  return nullptr;
}

void CheckAnnotations(const trace::RankTrace& trace) {
  EXPECT_TRUE(trace.meta.closed_cleanly);
  std::map<std::string, int> counts = CountByName(trace);
  EXPECT_EQ(counts, (std::map<std::string, int>{{"step", 3}, {"forward", 3}, {"matmul", 3},
                                                {"work", 300}, {"inner", 300}, {"io-wait", 1},
                                                {"wide-\xC3\xBC", 1}}));
  EXPECT_EQ(trace.events.nvtx_ranges.size(), 611u);
  // Thread lanes, named by NVTX (main) and by pthread_setname_np (workers).
  std::vector<std::string> lane_names;
  for (const auto& lane : trace.lanes) {
    EXPECT_EQ(lane.kind, trace::LaneKind::kCpuThread);
    lane_names.push_back(lane.name);
  }
  std::sort(lane_names.begin(), lane_names.end());
  EXPECT_EQ(lane_names, (std::vector<std::string>{"main-thread", "worker-0", "worker-1", "worker-2"}));
  std::map<uint64_t, uint64_t> step_samples;
  for (const auto& range : trace.events.nvtx_ranges) {
    std::string name = trace.str(range.name);
    std::string lane = trace.lane(range.lane)->name;
    if (name == "step") {
      EXPECT_EQ(trace.str(range.domain), "rankscope");
      nlohmann::json args = nlohmann::json::parse(trace.str(range.args));
      step_samples[args["step"].get<uint64_t>()] = args["samples"].get<uint64_t>();
    } else if (name == "forward") {
      EXPECT_NE(Enclosing(trace, range, "step"), nullptr);
      EXPECT_EQ(range.category, 1u);
      EXPECT_EQ(range.color, 0xFF00FF00u);
    } else if (name == "matmul") {
      const auto* forward = Enclosing(trace, range, "forward");
      ASSERT_NE(forward, nullptr);
      const auto* step = Enclosing(trace, *forward, "step");
      ASSERT_NE(step, nullptr);
      // The scalar payload is the step number, which the step's extended payload also holds.
      EXPECT_EQ(range.payload.kind, trace::PayloadKind::kUint64);
      EXPECT_EQ(range.payload.int_value,
                nlohmann::json::parse(trace.str(step->args))["step"].get<int64_t>());
    } else if (name == "work") {
      EXPECT_EQ(trace.str(range.domain), "app");
      EXPECT_EQ(range.category, 2u);
      EXPECT_EQ(lane.rfind("worker-", 0), 0u);
    } else if (name == "inner") {
      EXPECT_NE(Enclosing(trace, range, "work"), nullptr);
    } else if (name == "io-wait") {
      EXPECT_EQ(range.style, trace::NvtxRangeStyle::kStartEnd);
      EXPECT_EQ(lane, "main-thread");
      ASSERT_NE(trace.lane(range.end_lane), nullptr);
      EXPECT_EQ(trace.lane(range.end_lane)->name, "worker-0");
    }
    EXPECT_EQ(trace.str(range.args).find("unfinished"), std::string::npos) << name;
  }
  EXPECT_EQ(step_samples, (std::map<uint64_t, uint64_t>{{0, 32}, {1, 64}, {2, 96}}));
  ASSERT_EQ(trace.events.nvtx_marks.size(), 1u);
  const auto& mark = trace.events.nvtx_marks[0];
  EXPECT_EQ(trace.str(mark.name), "checkpoint");
  EXPECT_EQ(mark.payload.kind, trace::PayloadKind::kInt32);
  EXPECT_EQ(mark.payload.int_value, -5);
  EXPECT_NE(Enclosing(trace, trace::NvtxRangeEvent{{mark.lane, mark.start_ns, mark.end_ns, 0, 0}, {}, {}, {}},
                      "step"), nullptr);
  EXPECT_EQ(trace.meta.entries.at("nvtx.category..1"), "compute");
  EXPECT_EQ(trace.meta.entries.at("nvtx.category.app.2"), "io");
  EXPECT_TRUE(trace.drops.empty());
}

TEST(EndToEnd, AnnotationsFromThreadsDomainsAndPayloads) {
  TempDir dir;
  int status = RunProgram(dir, {NVTX_PROGRAM, "annotate"}, {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}});
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  trace::RankTrace trace = Load(dir / "rank-1.sqlite");
  EXPECT_EQ(trace.meta.rank, 1);
  EXPECT_EQ(trace.meta.world_size, 2);
  EXPECT_EQ(trace.meta.run_id, "e2e");
  CheckAnnotations(trace);
}

TEST(EndToEnd, BothClockSourcesGiveTheSameAnswer) {
  for (const char* clock : {"tsc", "realtime"}) {
    TempDir dir;
    int status = RunProgram(dir, {NVTX_PROGRAM, "annotate"}, {{"RANK", "0"}, {"RANKSCOPE_CLOCK", clock}});
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    trace::RankTrace trace = Load(dir / "rank-0.sqlite");
    EXPECT_EQ(trace.meta.entries["collector.clock"], clock);
    CheckAnnotations(trace);
    // Timestamps lie between the file's start and end calibration readings.
    for (const auto& range : trace.events.nvtx_ranges) {
      EXPECT_GE(range.start_ns, trace.meta.clock_start->realtime_ns - 1'000'000'000);
      EXPECT_LE(range.end_ns, trace.meta.clock_end->realtime_ns);
    }
  }
}

#ifdef NCCL_PROGRAM
TEST(EndToEnd, NcclRangesAndPayloadsWithoutAGpu) {
  TempDir dir;
  int status = RunProgram(dir, {NCCL_PROGRAM}, {{"RANK", "0"}});
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  trace::RankTrace trace = Load(dir / "rank-0.sqlite");
  std::map<std::string, nlohmann::json> by_name;
  for (const auto& range : trace.events.nvtx_ranges) {
    EXPECT_EQ(trace.str(range.domain), "NCCL");
    by_name[trace.str(range.name)] = nlohmann::json::parse(trace.str(range.args));
  }
  ASSERT_EQ(by_name.count("ncclAllReduce"), 1u) << "NCCL emitted no range: has it moved its NVTX range?";
  EXPECT_EQ(by_name["ncclAllReduce"]["Message size [bytes]"], 4096);  // 1024 floats
  EXPECT_EQ(by_name["ncclAllReduce"]["Reduction operation"], "Sum");
  EXPECT_EQ(by_name["ncclAllReduce"]["NCCL communicator ID"], 0);  // null communicator
  EXPECT_EQ(by_name["ncclBroadcast"]["Message size [bytes]"], 512);  // 256 bf16
  EXPECT_EQ(by_name["ncclBroadcast"]["Root"], 3);
  EXPECT_EQ(by_name["ncclSend"]["Message size [bytes]"], 80);  // 10 int64
  EXPECT_EQ(by_name["ncclSend"]["Peer rank"], 5);
  EXPECT_EQ(by_name["ncclAllGather"]["Message size [bytes]"], 256);
}

TEST(EndToEnd, NcclRangesFollowTheTraceSelection) {
  TempDir dir;
  int status = RunProgram(dir, {NCCL_PROGRAM}, {{"RANK", "0"}, {"RANKSCOPE_TRACE", "nvtx"}});
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  trace::RankTrace trace = Load(dir / "rank-0.sqlite");
  EXPECT_TRUE(trace.events.nvtx_ranges.empty());
  EXPECT_EQ(trace.meta.entries["collector.trace"], "nvtx");
}
#endif

TEST(EndToEnd, KilledRankKeepsWhatWasCommitted) {
  TempDir dir;
  Child child = Start(dir, {NVTX_PROGRAM, "spin"}, {{"RANK", "0"}, {"WORLD_SIZE", "1"}});
  ASSERT_TRUE(WaitForLine(child, "ready"));
  kill(child.pid, SIGKILL);
  int status = Wait(child);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  trace::RankTrace trace = Load(dir / "rank-0.sqlite");
  EXPECT_FALSE(trace.meta.closed_cleanly);
  EXPECT_FALSE(trace.meta.clock_end.has_value());
  EXPECT_GE(trace.events.nvtx_ranges.size(), 1000u);
  // What the analyzer needs to read the committed ranges came with them, not at a close
  // that never happened: the category's name, and the ranges' category.
  EXPECT_EQ(trace.meta.entries["nvtx.category..1"], "compute");
  EXPECT_EQ(trace.events.nvtx_ranges.front().category, 1u);
  auto run = trace::OpenRun(dir.path());
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(run->crashed, std::vector<std::string>{"rank-0.sqlite"});
  auto recording = trace::RunIsRecording(dir.path());
  ASSERT_TRUE(recording.ok()) << recording.status().message();
  EXPECT_FALSE(*recording) << "the kernel let go of a killed rank's lock";
}

// The rank file's in-flight state as the drain commits it, read while the program runs.
std::optional<trace::InFlightState> CommittedInFlight(const std::filesystem::path& path) {
  auto reader = trace::TraceReader::Open(path);
  if (!reader.ok()) return std::nullopt;  // not created yet
  auto state = (*reader)->ReadInFlight();
  if (!state.ok()) return std::nullopt;
  return *state;
}

TEST(EndToEnd, KilledRankSaysWhichCollectiveItWaitedIn) {
  TempDir dir;
  Child child = Start(dir, {NVTX_PROGRAM, "hang"}, {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"RANKSCOPE_PROGRESS_FILE", "1"}});
  const bool ready = WaitForLine(child, "ready");
  // Killed once a drain has committed the second all-reduce: at most a drain interval and a
  // commit interval after it was entered.
  bool committed = false;
  for (int waited_ms = 0; ready && !committed && waited_ms < 30'000; waited_ms += 20) {
    const std::optional<trace::InFlightState> state = CommittedInFlight(dir / "rank-0.sqlite");
    committed = state && state->collectives.size() == 2;
    if (!committed) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(child.pid, SIGKILL);
  const int status = Wait(child);
  ASSERT_TRUE(ready && committed);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

  trace::RankTrace trace = Load(dir / "rank-0.sqlite");
  EXPECT_FALSE(trace.meta.closed_cleanly);
  auto reader = trace::TraceReader::Open(dir / "rank-0.sqlite");
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  auto state = (*reader)->ReadInFlight();
  ASSERT_TRUE(state.ok()) << state.status().message();
  ASSERT_EQ(state->collectives.size(), 2u);
  EXPECT_FALSE(state->collectives[0].in_flight());
  const trace::FlightCollective& waited_in = state->collectives[1];
  EXPECT_TRUE(waited_in.in_flight());
  EXPECT_EQ(waited_in.comm_hash, 0x9E3779B97F4A7C15u);
  EXPECT_EQ(waited_in.sequence, 1u);
  EXPECT_EQ(waited_in.op, trace::CollectiveOp::kAllReduce);
  EXPECT_EQ(waited_in.bytes, 4096u);
  EXPECT_EQ(waited_in.comm_size, 2);
  EXPECT_EQ(state->completed_collectives, 1u);
  std::vector<std::pair<std::string, uint32_t>> open;
  for (const trace::OpenRange& range : state->open_ranges) open.emplace_back(range.name, range.depth);
  EXPECT_EQ(open, (std::vector<std::pair<std::string, uint32_t>>{{"step", 0}, {"allreduce", 1}}));
  const std::string progress = rankscope::testing::ReadFile(dir / "rank-0.progress");
  EXPECT_NE(progress.find("\ncollectives 1\nsteps 0\n"), std::string::npos) << progress;
}

TEST(EndToEnd, SighupAndSigquitFlushAndKeepTheirDefaultAction) {
  for (int signal_number : {SIGHUP, SIGQUIT}) {
    TempDir dir;
    Child child = Start(dir, {NVTX_PROGRAM, "spin"}, {{"RANK", "0"}});
    ASSERT_TRUE(WaitForLine(child, "ready"));
    kill(child.pid, signal_number);
    int status = Wait(child);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == signal_number) << status;
    trace::RankTrace trace = Load(dir / "rank-0.sqlite");
    EXPECT_TRUE(trace.meta.closed_cleanly) << signal_number;
    EXPECT_EQ(trace.meta.entries["collector.ended_by"], "signal " + std::to_string(signal_number));
    EXPECT_GE(trace.events.nvtx_ranges.size(), 1000u);
  }
}


TEST(EndToEnd, SigtermKeepsTheDefaultActionAndClosesTheFile) {
  TempDir dir;
  Child child = Start(dir, {NVTX_PROGRAM, "spin"}, {{"RANK", "0"}});
  ASSERT_TRUE(WaitForLine(child, "ready"));
  auto recording = trace::RunIsRecording(dir.path());
  ASSERT_TRUE(recording.ok()) << recording.status().message();
  EXPECT_TRUE(*recording) << "a recording rank holds the run directory's lock";
  kill(child.pid, SIGTERM);
  int status = Wait(child);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << status;
  trace::RankTrace trace = Load(dir / "rank-0.sqlite");
  EXPECT_TRUE(trace.meta.closed_cleanly);
  EXPECT_EQ(trace.meta.entries["collector.ended_by"], "signal 15");
  EXPECT_GE(trace.events.nvtx_ranges.size(), 1000u);
}

TEST(EndToEnd, ProgramsOwnEarlierHandlerStillRuns) {
  // Not preloaded: NVTX loads the collector after the program installed its handler, so
  // the collector chains to it.
  TempDir dir;
  Child child = Start(dir, {NVTX_PROGRAM, "handler"}, {{"RANK", "0"}}, /*preload=*/false);
  ASSERT_TRUE(WaitForLine(child, "ready"));
  kill(child.pid, SIGTERM);
  int status = Wait(child);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 3);  // the program's handler ran and the program went on
  trace::RankTrace trace = Load(dir / "rank-0.sqlite");
  EXPECT_TRUE(trace.meta.closed_cleanly);
  EXPECT_EQ(trace.meta.entries["collector.ended_by"], "exit");
  EXPECT_EQ(CountByName(trace), (std::map<std::string, int>{{"waiting", 1}}));
}

TEST(EndToEnd, IgnoredSigtermStaysIgnored) {
  TempDir dir;
  sigset_t none;
  sigemptyset(&none);
  struct sigaction ignore {}, previous {};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGTERM, &ignore, &previous);  // inherited by the child across exec
  Child child = Start(dir, {NVTX_PROGRAM, "spin"}, {{"RANK", "0"}});
  sigaction(SIGTERM, &previous, nullptr);
  ASSERT_TRUE(WaitForLine(child, "ready"));
  kill(child.pid, SIGTERM);
  usleep(200 * 1000);
  EXPECT_EQ(waitpid(child.pid, nullptr, WNOHANG), 0);  // still running
  kill(child.pid, SIGKILL);
  Wait(child);
}

TEST(EndToEnd, ForkedChildRecordsNothing) {
  TempDir dir;
  int status = RunProgram(dir, {NVTX_PROGRAM, "fork"}, {{"RANK", "0"}});
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    files.push_back(entry.path().filename().string());
  }
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{std::string(trace::kRecordingLockFileName), "rank-0.sqlite"}));
  trace::RankTrace trace = Load(dir / "rank-0.sqlite");
  EXPECT_TRUE(trace.meta.closed_cleanly);
  EXPECT_EQ(CountByName(trace), (std::map<std::string, int>{{"parent-after", 1}, {"parent-before", 1}}));
}

TEST(EndToEnd, ExecHandsAnUnusedRankToTheNextImage) {
  TempDir dir;
  int status = RunProgram(dir, {NVTX_PROGRAM, "exec-quiet"}, {{"RANK", "0"}});
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  trace::RankTrace trace = Load(dir / "rank-0.sqlite");
  EXPECT_EQ(CountByName(trace), (std::map<std::string, int>{{"after-exec", 1}}));
  EXPECT_NE(trace.meta.command_line.find("after-exec"), std::string::npos);
}

TEST(EndToEnd, ExecClosesTheFileOfAnImageThatRecorded) {
  TempDir dir;
  int status = RunProgram(dir, {NVTX_PROGRAM, "exec-busy"}, {{"RANK", "0"}});
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  trace::RankTrace before = Load(dir / "rank-0.sqlite");
  EXPECT_TRUE(before.meta.closed_cleanly);
  EXPECT_EQ(before.meta.entries["collector.ended_by"], "exec");
  EXPECT_EQ(CountByName(before), (std::map<std::string, int>{{"before-exec", 1}}));
  trace::RankTrace after = Load(dir / trace::UnknownRankFileName(before.meta.pid));
  EXPECT_EQ(after.meta.entries["collector.claimed_rank"], "0");
  EXPECT_EQ(CountByName(after), (std::map<std::string, int>{{"after-exec", 1}}));
}

TEST(EndToEnd, WithoutRunDirTheLibraryIsInert) {
  TempDir dir;
  Child child;
  const std::string asan_options = rankscope::testing::ChildAsanOptions();  // no allocation after fork
  {
    int pipe_fds[2];
    ASSERT_EQ(pipe(pipe_fds), 0);
    child.pid = fork();
    if (child.pid == 0) {
      unsetenv("RANKSCOPE_RUN_DIR");
      setenv("LD_PRELOAD", COLLECTOR_LIBRARY, 1);
      setenv("NVTX_INJECTION64_PATH", COLLECTOR_LIBRARY, 1);
      setenv("RANK", "0", 1);
      setenv("ASAN_OPTIONS", asan_options.c_str(), 1);
      if (chdir(dir.path().c_str()) != 0) _exit(126);
      execl(NVTX_PROGRAM, NVTX_PROGRAM, "annotate", static_cast<char*>(nullptr));
      _exit(127);
    }
    close(pipe_fds[1]);
    child.stdout_fd = pipe_fds[0];
  }
  int status = Wait(child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(EndToEnd, BadRankVariableTurnsRecordingOffWithOneLine) {
  TempDir dir;
  int status = RunProgram(dir, {NVTX_PROGRAM, "annotate"}, {{"RANK", "zero"}});
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);  // the program is unharmed
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

}  // namespace
}  // namespace rankscope::collector

#ifdef RANKSCOPE_CLI
namespace rankscope::collector {
namespace {

TEST(EndToEnd, ProfileCommandRecordsEveryLocalRank) {
  TempDir dir;
  std::string run = (dir / "run").string();
  // Sanitizer builds: the preloaded library comes before the sanitizer runtime.
  std::string command = "ASAN_OPTIONS=" + rankscope::testing::ChildAsanOptions() + " " + std::string(RANKSCOPE_CLI) + " profile -o " + run + " -n 2 -- " + NVTX_PROGRAM +
                        " annotate 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[512];
  while (fgets(buffer, sizeof(buffer), pipe) != nullptr) output += buffer;
  int status = pclose(pipe);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << output;
  auto opened = trace::OpenRun(run);
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  EXPECT_TRUE(opened->complete());
  EXPECT_EQ(opened->world_size, 2);
  ASSERT_EQ(opened->ranks.size(), 2u);
  EXPECT_TRUE(opened->unranked.empty());
  for (const auto& file : opened->ranks) {
    trace::RankTrace trace = Load(file.path);
    EXPECT_EQ(trace.meta.run_id, opened->run_id);
    CheckAnnotations(trace);
  }
  EXPECT_NE(output.find("2 of world size 2 recorded"), std::string::npos) << output;
}

// `rankscope profile` killed outright: its rank gets SIGTERM from the kernel
// (PR_SET_PDEATHSIG) and closes its file as on any SIGTERM.
TEST(EndToEnd, RanksOfAKilledProfileStopInOrder) {
  TempDir dir;
  const std::filesystem::path run = dir / "run";
  std::map<std::string, std::string> env = testing::CollectorEnvironment();
  std::vector<std::string> argv = {RANKSCOPE_CLI, "profile", "-o", run.string(), "-n", "1", "--", NVTX_PROGRAM, "spin"};
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  Child profile{fork(), pipe_fds[0]};
  if (profile.pid == 0) {
    dup2(pipe_fds[1], STDOUT_FILENO);
    close(pipe_fds[0]);
    clearenv();
    for (const auto& [name, value] : env) setenv(name.c_str(), value.c_str(), 1);
    std::vector<char*> args;
    for (std::string& arg : argv) args.push_back(arg.data());
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close(pipe_fds[1]);
  ASSERT_TRUE(WaitForLine(profile, "ready"));  // the rank's, through profile's stdout
  kill(profile.pid, SIGKILL);
  Wait(profile);
  // The rank is no child of this test: it is done when it lets go of the recording lock.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  bool stopped = false;
  while (!stopped && std::chrono::steady_clock::now() < give_up) {
    auto recording = trace::RunIsRecording(run);
    ASSERT_TRUE(recording.ok()) << recording.status().message();
    stopped = !*recording;
    if (!stopped) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  trace::RankTrace trace = Load(run / "rank-0.sqlite");
  if (!stopped && trace.meta.pid > 0) kill(static_cast<pid_t>(trace.meta.pid), SIGKILL);  // no spinning orphan
  ASSERT_TRUE(stopped) << "the rank outlived its profile";
  EXPECT_TRUE(trace.meta.closed_cleanly);
  EXPECT_EQ(trace.meta.entries["collector.ended_by"], "signal 15");
  EXPECT_EQ(trace.meta.entries["nvtx.category..1"], "compute");
}

}  // namespace
}  // namespace rankscope::collector
#endif
