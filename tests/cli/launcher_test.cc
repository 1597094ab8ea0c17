// The launcher in this process: exit statuses, what a child inherits, and stopping the
// others when one fails. Signal forwarding is tested through the binary
// (rankscope_process_test.cc): a signal sent to this test process could reach a thread
// that does not block it.
#include "cli/launcher.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <sstream>

#include "cli/profile_command.h"
#include "cli_test_util.h"

namespace rankscope::cli {
namespace {

using testing::ReadFile;
using testing::TempDir;

ProcessSpec Shell(const std::string& script, std::vector<std::string> args = {}) {
  ProcessSpec spec{.argv = {"sh", "-c", script, "sh"}, .env = CurrentEnvironment()};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  return spec;
}

TEST(ExitStatus, ShellCodesAndDescriptions) {
  EXPECT_EQ((ExitStatus{.signaled = false, .value = 7}).ShellCode(), 7);
  EXPECT_EQ((ExitStatus{.signaled = true, .value = SIGTERM}).ShellCode(), 143);
  EXPECT_EQ((ExitStatus{.signaled = false, .value = 7}).Describe(), "exit code 7");
  EXPECT_EQ((ExitStatus{.signaled = true, .value = SIGSEGV}).Describe(), "killed by SIGSEGV");
  EXPECT_TRUE((ExitStatus{}).ok());
  EXPECT_EQ(SignalName(SIGINT), "SIGINT");
}

TEST(SignalForProcesses, EveryStopButTheFirstCtrlCIsASigterm) {
  EXPECT_EQ(SignalForProcesses(SIGINT, /*interrupted_before=*/false), SIGINT);  // the program's own Ctrl-C
  EXPECT_EQ(SignalForProcesses(SIGINT, /*interrupted_before=*/true), SIGTERM);
  EXPECT_EQ(SignalForProcesses(SIGTERM, false), SIGTERM);
  EXPECT_EQ(SignalForProcesses(SIGHUP, false), SIGTERM);
  EXPECT_EQ(SignalForProcesses(SIGQUIT, false), SIGTERM);
  EXPECT_EQ(SignalForProcesses(SIGQUIT, true), SIGTERM);
}

TEST(Launch, ReturnsTheExitCode) {
  auto result = Launch({Shell("exit 3")}, {});
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_EQ(result->ExitCode(), 3);
  ASSERT_EQ(result->processes.size(), 1u);
  EXPECT_EQ(result->processes[0].status.Describe(), "exit code 3");
  EXPECT_EQ(DescribeRankFailure(*result, std::chrono::seconds(5)),
            "rank 0 failed (exit code 3); no other rank was "
            "still running");

  auto ok = Launch({Shell("exit 0"), Shell("exit 0")}, {});
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->ExitCode(), 0);
  EXPECT_FALSE(ok->first_failure.has_value());
  EXPECT_EQ(DescribeRankFailure(*ok, std::chrono::seconds(5)), "");
}

TEST(Launch, ChildGetsItsEnvironmentDefaultSignalsAndItsOwnGroup) {
  TempDir tmp;
  // This process ignores SIGUSR1 and blocks SIGUSR2; neither may leak into the child.
  struct sigaction ignore {
  }, saved{};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGUSR1, &ignore, &saved);
  sigset_t usr2, old_mask;
  sigemptyset(&usr2);
  sigaddset(&usr2, SIGUSR2);
  pthread_sigmask(SIG_BLOCK, &usr2, &old_mask);

  ProcessSpec spec = Shell(
      "echo \"$ONLY_HERE\" > \"$1/env\"; cat /proc/self/status > \"$1/status\"; "
      "cat /proc/self/stat > \"$1/stat\"",
      {tmp.path().string()});
  spec.env.push_back("ONLY_HERE=yes");
  auto result = Launch({spec}, {});
  sigaction(SIGUSR1, &saved, nullptr);
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  ASSERT_TRUE(result.ok()) << result.status().message();
  ASSERT_EQ(result->ExitCode(), 0);

  EXPECT_EQ(ReadFile(tmp / "env"), "yes\n");
  const std::string status = ReadFile(tmp / "status");
  EXPECT_NE(status.find("SigBlk:\t0000000000000000"), std::string::npos) << status;
  EXPECT_NE(status.find("SigIgn:\t0000000000000000"), std::string::npos) << status;
  // /proc/self/stat: pid (comm) state ppid pgrp ...; cat's group is the shell's: the child's own.
  std::istringstream stat(ReadFile(tmp / "stat"));
  std::string pid, comm, state, ppid, pgrp;
  stat >> pid >> comm >> state >> ppid >> pgrp;
  EXPECT_EQ(pgrp, std::to_string(result->processes[0].pid));
}

TEST(Launch, MissingProgramIsNotFound) {
  ProcessSpec spec{.argv = {"rankscope-no-such-program"}, .env = CurrentEnvironment()};
  auto result = Launch({Shell("sleep 60"), spec}, {});
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kNotFound);
  EXPECT_NE(result.status().message().find("rankscope-no-such-program"), std::string::npos);
}

TEST(Launch, AFailureStopsTheOthers) {
  const auto start = std::chrono::steady_clock::now();
  auto result = Launch({Shell("sleep 60"), Shell("sleep 0.2; exit 4"), Shell("sleep 60")},
                       {.stop_others_on_failure = true, .stop_grace = std::chrono::seconds(5), .note = {}});
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(45));
  EXPECT_EQ(result->ExitCode(), 4);
  EXPECT_EQ(result->first_failure, 1u);
  EXPECT_TRUE(result->processes[0].stopped);
  EXPECT_TRUE(result->processes[2].stopped);
  EXPECT_FALSE(result->processes[0].killed) << "sh and its sleep end on SIGTERM";
  EXPECT_EQ(result->processes[0].status.Describe(), "killed by SIGTERM");
  EXPECT_EQ(DescribeRankFailure(*result, std::chrono::seconds(5)),
            "rank 1 failed (exit code 4); stopped the other "
            "2 ranks");
}

TEST(Launch, ThoseIgnoringSigtermGetSigkillAfterTheGrace) {
  auto result = Launch({Shell("trap '' TERM; sleep 60"), Shell("sleep 0.2; kill -SEGV $$")},
                       {.stop_others_on_failure = true, .stop_grace = std::chrono::milliseconds(300), .note = {}});
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_EQ(result->ExitCode(), 128 + SIGSEGV);
  EXPECT_TRUE(result->processes[0].killed);
  EXPECT_EQ(result->processes[0].status.Describe(), "killed by SIGKILL");
  EXPECT_EQ(DescribeRankFailure(*result, std::chrono::milliseconds(300)),
            "rank 1 failed (killed by SIGSEGV); stopped the other 1 rank (1 with SIGKILL after 0.3 s)");
}

TEST(Launch, WithoutStopOnFailureTheOthersFinish) {
  TempDir tmp;
  auto result = Launch({Shell("exit 2"), Shell("sleep 0.3; touch \"$1/finished\"", {tmp.path().string()})}, {});
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->ExitCode(), 2);
  EXPECT_FALSE(result->processes[1].stopped);
  EXPECT_TRUE(std::filesystem::exists(tmp / "finished"));
}

TEST(Launch, RestoresTheSignalMask) {
  sigset_t before, after;
  pthread_sigmask(SIG_SETMASK, nullptr, &before);
  ASSERT_TRUE(Launch({Shell("exit 0")}, {}).ok());
  pthread_sigmask(SIG_SETMASK, nullptr, &after);
  for (int signal : {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT}) {
    EXPECT_EQ(sigismember(&before, signal), sigismember(&after, signal)) << SignalName(signal);
  }
}

}  // namespace
}  // namespace rankscope::cli
