// Starts the processes of a profiled run, forwards signals to them, stops the others when
// one fails, and waits until every one has ended.
//
// Stopping in order. Every stop rankscope asks for lets the collector in each rank flush
// and close its file: the collector does that on SIGTERM (and SIGINT, SIGHUP, SIGQUIT) and
// SIGKILL is the one signal it cannot answer. So SIGHUP and SIGQUIT (a closed terminal,
// Ctrl-\), and a second SIGINT (an impatient Ctrl-C), reach the processes as SIGTERM; the
// first SIGINT and every SIGTERM are passed on as they are, so that a program keeps its own
// Ctrl-C behaviour (Python's KeyboardInterrupt, torchrun's shutdown).
//
// Parent death. Each process is started with PR_SET_PDEATHSIG = SIGTERM: if rankscope dies
// without passing anything on (SIGKILL, a crash), the kernel sends the process SIGTERM, the
// same orderly stop. It reaches the processes rankscope started (the -n ranks, or the
// command itself: torchrun stops its workers on SIGTERM); what they started in turn is
// theirs to stop. The kernel sends it when the *thread* that forked ends, so Launch must
// be called from a thread that lives until it returns (the process's only thread).
//
// Process groups. Each process starts in a process group of its own, with default signal
// dispositions and an empty signal mask. rankscope stays in the terminal's foreground
// group, so a key such as Ctrl-C signals rankscope alone, and rankscope sends the signal
// to each process's group exactly once (no double delivery, as there would be if the
// processes shared rankscope's group). Signalling the group reaches what a process
// started itself (the commands of `sh -c`, torchrun's workers), just as the key would
// have, and stopping a failed run leaves no stragglers. The cost: the processes run in a
// background group, so reading from the terminal stops them (SIGTTIN); redirect their
// input instead. Ctrl-Z pauses rankscope only.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace rankscope::cli {

// How a process ended.
struct ExitStatus {
  bool signaled = false;  // killed by a signal
  int value = 0;          // exit code, or the signal number when `signaled`

  bool ok() const { return !signaled && value == 0; }
  // What a shell would report: the exit code, or 128 + the signal number.
  int ShellCode() const { return signaled ? 128 + value : value; }
  // "exit code 7", "killed by SIGTERM".
  std::string Describe() const;
};

// From a waitpid() status of a process that ended.
ExitStatus ExitStatusFromWait(int wait_status);

// "SIGTERM"; "signal 42" for numbers without a name.
std::string SignalName(int signal);

// The signals rankscope passes on: SIGINT, SIGTERM, SIGHUP, SIGQUIT. One that rankscope
// inherited as ignored (nohup, `&` in a script) stays ignored and is not passed on.
const std::vector<int>& ForwardedSignals();

// The signal the processes get when rankscope receives `received` (see "Stopping in
// order"): SIGTERM for SIGHUP, SIGQUIT and for a SIGINT after an earlier one
// (`interrupted_before`); the signal itself otherwise.
int SignalForProcesses(int received, bool interrupted_before);

struct ForwardedSignal {
  int received = 0;  // what rankscope got
  int sent = 0;      // what it sent each process's group
};

struct ProcessSpec {
  std::vector<std::string> argv{};  // argv[0] is looked up in PATH like execvp does
  std::vector<std::string> env{};   // "NAME=value" entries: the process's whole environment
};

struct LaunchOptions {
  // -n: when one process fails, SIGTERM the others, then SIGKILL them after `stop_grace`.
  // Not done once a signal has been forwarded: the user is ending the run already, and
  // ranks may need the time to shut down.
  bool stop_others_on_failure = false;
  std::chrono::milliseconds stop_grace{5000};
  // Called with one-line notes (no "rankscope: " prefix), e.g. a process stopped by the
  // terminal. May be empty.
  std::function<void(const std::string&)> note{};
  // --hang-timeout: called every `watch_interval` while processes run (not once the run is
  // being stopped); when it returns true, every process is stopped like the others of a
  // failed rank (SIGTERM, SIGKILL after `stop_grace`) and LaunchResult::stopped_as_hung is set.
  std::function<bool()> watch{};
  std::chrono::milliseconds watch_interval{500};
};

struct ProcessOutcome {
  pid_t pid = 0;
  ExitStatus status{};
  bool stopped = false;  // sent SIGTERM because another process failed
  bool killed = false;   // ... and SIGKILL when it outlived the grace time
};

struct LaunchResult {
  std::vector<ProcessOutcome> processes;  // in the order of the specs
  std::optional<size_t> first_failure;    // the first process seen failing
  std::vector<ForwardedSignal> forwarded_signals;  // in the order they arrived
  bool stopped_as_hung = false;  // LaunchOptions::watch found the run hung and stopped it

  // The first failing process's ShellCode(), or 0 when every process succeeded.
  int ExitCode() const;
};

// Starts every process, then waits for all of them. Blocks the forwarded signals and
// SIGCHLD while it runs (and restores the mask and SIGCHLD's disposition when it returns),
// so call it from a process's only thread (which PR_SET_PDEATHSIG also needs). Fails only
// when a process cannot be started: NotFound when the program does not exist (a shell's
// 127), InvalidArgument when exec refuses it (126), IoError when pipe or fork fail; the
// processes already started are then killed and reaped.
Result<LaunchResult> Launch(const std::vector<ProcessSpec>& specs, const LaunchOptions& options);

// The one line telling which rank failed first and what was done about the others, e.g.
// "rank 2 failed (exit code 7); stopped the other 3 ranks". Empty when no rank failed, or
// when the failure followed a forwarded signal.
std::string DescribeRankFailure(const LaunchResult& result, std::chrono::milliseconds stop_grace);

}  // namespace rankscope::cli
