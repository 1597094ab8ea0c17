#include "cli/launcher.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/text.h"

namespace rankscope::cli {
namespace {

using Clock = std::chrono::steady_clock;

// Blocks SIGCHLD and the forwarded signals for the launcher's lifetime, so that
// sigtimedwait() sees every one of them in a single place, with no handler and no race.
class BlockedSignals {
 public:
  BlockedSignals() {
    // An inherited SIG_IGN for SIGCHLD would make the kernel reap children for us.
    struct sigaction default_action {};
    default_action.sa_handler = SIG_DFL;
    sigemptyset(&default_action.sa_mask);
    sigaction(SIGCHLD, &default_action, &saved_sigchld_);

    sigemptyset(&set_);
    sigaddset(&set_, SIGCHLD);
    for (int signal : ForwardedSignals()) {
      struct sigaction current {};
      sigaction(signal, nullptr, &current);
      if ((current.sa_flags & SA_SIGINFO) == 0 && current.sa_handler == SIG_IGN) continue;
      sigaddset(&set_, signal);
    }
    pthread_sigmask(SIG_BLOCK, &set_, &saved_mask_);
  }

  ~BlockedSignals() {
    // What arrived after the last process ended has no one left to go to; unblocked, it
    // would kill rankscope before it prints the summary.
    const timespec no_wait{};
    while (sigtimedwait(&set_, nullptr, &no_wait) > 0) {
    }
    pthread_sigmask(SIG_SETMASK, &saved_mask_, nullptr);
    sigaction(SIGCHLD, &saved_sigchld_, nullptr);
  }

  BlockedSignals(const BlockedSignals&) = delete;
  BlockedSignals& operator=(const BlockedSignals&) = delete;

  // The next blocked signal, waiting at most `timeout` (forever when nullopt); 0 when the
  // wait ended without one.
  int Wait(std::optional<Clock::duration> timeout) const {
    siginfo_t info{};
    int signal = 0;
    if (timeout) {
      const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(*timeout).count();
      const timespec wait{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
      signal = sigtimedwait(&set_, &info, &wait);
    } else {
      signal = sigwaitinfo(&set_, &info);
    }
    return signal > 0 ? signal : 0;  // EAGAIN (timeout) and EINTR alike: look again
  }

 private:
  sigset_t set_{};
  sigset_t saved_mask_{};
  struct sigaction saved_sigchld_ {};
};

// A process of the launch while it runs.
struct Child {
  pid_t pid = 0;
  bool ended = false;
  bool paused = false;  // stopped by a signal (e.g. SIGTTIN), waiting for SIGCONT
};

// Signals the child's process group; falls back to the process alone when it has moved to
// another group (a program may call setsid() itself).
void SignalChild(const Child& child, int signal) {
  if (::kill(-child.pid, signal) != 0 && errno == ESRCH) ::kill(child.pid, signal);
  // A stopped group would keep the signal pending until it is continued.
  if (child.paused && signal != SIGKILL) {
    if (::kill(-child.pid, SIGCONT) != 0 && errno == ESRCH) ::kill(child.pid, SIGCONT);
  }
}

// fork + execvpe rather than posix_spawnp: glibc's posix_spawn sets its internal signals
// (32 and 33) to SIG_IGN in the child, and exec keeps ignored signals ignored. After a
// plain fork they are merely handled, and exec resets handled signals to the default.
Result<pid_t> Spawn(const ProcessSpec& spec) {
  if (spec.argv.empty() || spec.argv[0].empty()) return NotFound("cannot run '': the command is empty");
  // Everything the child needs is built before fork: between fork and exec it only makes
  // system calls.
  std::vector<std::string> argv_storage = spec.argv, env_storage = spec.env;
  std::vector<char*> argv, envp;
  for (std::string& arg : argv_storage) argv.push_back(arg.data());
  argv.push_back(nullptr);
  for (std::string& entry : env_storage) envp.push_back(entry.data());
  envp.push_back(nullptr);
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  sigset_t no_signals;
  sigemptyset(&no_signals);
  const pid_t launcher = ::getpid();

  // The child reports a failed exec through this pipe; a successful exec closes it.
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) {
    return IoError(fmt::format("cannot start {}: pipe: {}", Printable(spec.argv[0], 256), std::strerror(errno)));
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int error = errno;
    ::close(report[0]);
    ::close(report[1]);
    return IoError(fmt::format("cannot start {}: fork: {}", Printable(spec.argv[0], 256), std::strerror(error)));
  }
  if (pid == 0) {
    ::setpgid(0, 0);  // a group of its own, led by the child
    // If rankscope dies unannounced, the process stops in order (see launcher.h); exec
    // keeps this setting.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    for (int signal = 1; signal < NSIG; ++signal) {
      // SIGKILL, SIGSTOP and glibc's internal signals refuse; exec resets the latter.
      ::sigaction(signal, &default_action, nullptr);
    }
    ::sigprocmask(SIG_SETMASK, &no_signals, nullptr);
    // rankscope died before the prctl took effect: that SIGTERM will never come, so stop
    // here as it would have stopped us.
    if (::getppid() != launcher) ::raise(SIGTERM);
    ::execvpe(argv[0], argv.data(), envp.data());
    const int error = errno;
    [[maybe_unused]] const ssize_t written = ::write(report[1], &error, sizeof error);
    ::_exit(127);
  }
  ::close(report[1]);
  int exec_error = 0;
  ssize_t got = 0;
  do {
    got = ::read(report[0], &exec_error, sizeof exec_error);
  } while (got < 0 && errno == EINTR);
  ::close(report[0]);
  if (got <= 0) return pid;  // closed by a successful exec

  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  const std::string command = Printable(spec.argv[0], 256);
  if (exec_error == ENOENT || exec_error == ENOTDIR) {
    return NotFound(fmt::format("cannot run {}: command not found", command));
  }
  return InvalidArgument(fmt::format("cannot run {}: {}", command, std::strerror(exec_error)));
}

// Blocking wait for one child, retrying on EINTR.
void ReapBlocking(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

class RunningLaunch {
 public:
  RunningLaunch(const LaunchOptions& options, LaunchResult& result) : options_(options), result_(result) {}

  void Add(pid_t pid) {
    children_.push_back(Child{.pid = pid});
    result_.processes.push_back(ProcessOutcome{.pid = pid});
    ++running_;
  }

  // Kills what was started when a later process could not be.
  void Abandon() {
    for (Child& child : children_) {
      if (child.ended) continue;
      SignalChild(child, SIGKILL);
      ReapBlocking(child.pid);
      child.ended = true;
    }
    running_ = 0;
  }

  void WaitForAll(const BlockedSignals& signals) {
    while (true) {
      ReapEnded();
      if (running_ == 0) return;
      std::optional<Clock::duration> timeout;
      if (kill_pending_) {
        const Clock::duration left = kill_deadline_ - Clock::now();
        if (left <= Clock::duration::zero()) {
          KillStopped();
          continue;
        }
        timeout = left;
      }
      if (Watching()) {
        const Clock::time_point now = Clock::now();
        if (now >= next_watch_) {
          next_watch_ = now + options_.watch_interval;
          if (options_.watch()) {
            result_.stopped_as_hung = true;
            StopOthers();
            continue;
          }
        }
        const Clock::duration left = next_watch_ - now;
        timeout = timeout ? std::min(*timeout, left) : left;
      }
      const int signal = signals.Wait(timeout);
      if (signal != 0 && signal != SIGCHLD) Forward(signal);
    }
  }

 private:
  void ReapEnded() {
    for (size_t i = 0; i < children_.size(); ++i) {
      Child& child = children_[i];
      while (!child.ended) {
        int status = 0;
        const pid_t pid = ::waitpid(child.pid, &status, WNOHANG | WUNTRACED | WCONTINUED);
        if (pid == 0) break;
        if (pid < 0) {
          if (errno == EINTR) continue;
          // ECHILD: someone else reaped it; all we can say is that it is gone.
          Ended(i, ExitStatus{.signaled = false, .value = 127});
          break;
        }
        if (WIFSTOPPED(status)) {
          Paused(i, WSTOPSIG(status));
        } else if (WIFCONTINUED(status)) {
          child.paused = false;
        } else {
          Ended(i, ExitStatusFromWait(status));
        }
      }
    }
  }

  void Paused(size_t index, int signal) {
    children_[index].paused = true;
    if ((signal == SIGTTIN || signal == SIGTTOU) && options_.note) {
      const std::string who = children_.size() == 1 ? "the command" : fmt::format("rank {}", index);
      options_.note(
          fmt::format("{} (pid {}) is stopped by {}: it used the terminal, but it runs in a "
                      "background process group; redirect its input (e.g. </dev/null)",
                      who, children_[index].pid, SignalName(signal)));
    }
  }

  void Ended(size_t index, ExitStatus status) {
    children_[index].ended = true;
    --running_;
    result_.processes[index].status = status;
    if (status.ok() || result_.first_failure) return;
    result_.first_failure = index;
    if (options_.stop_others_on_failure && result_.forwarded_signals.empty() && !result_.stopped_as_hung) {
      StopOthers();
    }
  }

  // The hang watch runs until the run is being stopped for any reason.
  bool Watching() const {
    return options_.watch && !result_.stopped_as_hung && !kill_pending_ && !result_.first_failure &&
           result_.forwarded_signals.empty();
  }

  void StopOthers() {
    for (size_t i = 0; i < children_.size(); ++i) {
      if (children_[i].ended) continue;
      SignalChild(children_[i], SIGTERM);
      result_.processes[i].stopped = true;
    }
    if (running_ > 0) {
      kill_pending_ = true;
      kill_deadline_ = Clock::now() + options_.stop_grace;
    }
  }

  void KillStopped() {
    kill_pending_ = false;
    for (size_t i = 0; i < children_.size(); ++i) {
      if (children_[i].ended || !result_.processes[i].stopped) continue;
      SignalChild(children_[i], SIGKILL);
      result_.processes[i].killed = true;
    }
  }

  void Forward(int received) {
    bool interrupted_before = false;
    for (const ForwardedSignal& earlier : result_.forwarded_signals) {
      interrupted_before = interrupted_before || earlier.received == SIGINT;
    }
    const int sent = SignalForProcesses(received, interrupted_before);
    result_.forwarded_signals.push_back(ForwardedSignal{.received = received, .sent = sent});
    for (const Child& child : children_) {
      if (!child.ended) SignalChild(child, sent);
    }
  }

  const LaunchOptions& options_;
  LaunchResult& result_;
  std::vector<Child> children_;
  size_t running_ = 0;
  // A plain flag, not std::optional: GCC 12 warns about optional<time_point> (maybe-uninitialized).
  bool kill_pending_ = false;
  Clock::time_point kill_deadline_{};
  Clock::time_point next_watch_ = Clock::now();
};

}  // namespace

std::string ExitStatus::Describe() const {
  return signaled ? fmt::format("killed by {}", SignalName(value)) : fmt::format("exit code {}", value);
}

ExitStatus ExitStatusFromWait(int wait_status) {
  if (WIFSIGNALED(wait_status)) return {.signaled = true, .value = WTERMSIG(wait_status)};
  return {.signaled = false, .value = WEXITSTATUS(wait_status)};
}

std::string SignalName(int signal) {
  const char* abbreviation = sigabbrev_np(signal);
  return abbreviation != nullptr ? fmt::format("SIG{}", abbreviation) : fmt::format("signal {}", signal);
}

const std::vector<int>& ForwardedSignals() {
  static const std::vector<int> signals = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
  return signals;
}

int SignalForProcesses(int received, bool interrupted_before) {
  if (received == SIGHUP || received == SIGQUIT) return SIGTERM;
  if (received == SIGINT && interrupted_before) return SIGTERM;
  return received;
}

int LaunchResult::ExitCode() const { return first_failure ? processes[*first_failure].status.ShellCode() : 0; }

Result<LaunchResult> Launch(const std::vector<ProcessSpec>& specs, const LaunchOptions& options) {
  LaunchResult result;
  BlockedSignals signals;
  RunningLaunch launch(options, result);
  for (const ProcessSpec& spec : specs) {
    Result<pid_t> pid = Spawn(spec);
    if (!pid.ok()) {
      launch.Abandon();
      return pid.status();
    }
    launch.Add(*pid);
  }
  launch.WaitForAll(signals);
  return result;
}

std::string DescribeRankFailure(const LaunchResult& result, std::chrono::milliseconds stop_grace) {
  if (!result.first_failure || !result.forwarded_signals.empty() || result.stopped_as_hung) return "";
  const size_t rank = *result.first_failure;
  size_t stopped = 0, killed = 0;
  for (const ProcessOutcome& process : result.processes) {
    stopped += process.stopped ? 1 : 0;
    killed += process.killed ? 1 : 0;
  }
  std::string line = fmt::format("rank {} failed ({})", rank, result.processes[rank].status.Describe());
  if (stopped == 0) return line + "; no other rank was still running";
  line += fmt::format("; stopped the other {} rank{}", stopped, stopped == 1 ? "" : "s");
  if (killed > 0) {
    line += fmt::format(" ({} with SIGKILL after {:.1f} s)", killed,
                        std::chrono::duration<double>(stop_grace).count());
  }
  return line;
}

}  // namespace rankscope::cli
