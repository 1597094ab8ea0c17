// Runs a program as a child process with its output captured in files, for tests that
// exercise real binaries (rankscope, rankscope-trainer). Shared by every test suite.
#pragma once

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/temp_dir.h"

extern char** environ;

namespace rankscope::testing {

inline std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

inline std::map<std::string, std::string> CurrentEnvironment() {
  std::map<std::string, std::string> env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string text = *entry;
    const size_t eq = text.find('=');
    if (eq != std::string::npos) env[text.substr(0, eq)] = text.substr(eq + 1);
  }
  return env;
}

// ASAN_OPTIONS for a child that preloads the collector: in sanitizer builds the preloaded
// library comes before the sanitizer runtime. Keeps what the test preset set (notably
// intercept_tls_get_addr=0, see CMakePresets.json).
inline std::string ChildAsanOptions() {
  const char* inherited = std::getenv("ASAN_OPTIONS");
  const std::string base = inherited == nullptr ? "" : inherited;
  return base.empty() ? "verify_asan_link_order=0" : base + ":verify_asan_link_order=0";
}

struct ProcessResult {
  int exit_code = -1;      // 128 + N when signal N ended the process
  bool timed_out = false;  // it hung and was SIGKILLed
  std::string out;
  std::string err;
  std::chrono::duration<double> elapsed{};
};

struct ProcessOptions {
  std::filesystem::path cwd{};       // empty: the test's
  bool as_nobody = false;            // drop root privileges (uid/gid 65534)
  std::chrono::seconds timeout{90};  // a generous "did not hang" bound
};

// A started child: argv[0] is the program's path; env is its whole environment.
class ChildProcess {
 public:
  ChildProcess(std::vector<std::string> argv_storage, const std::map<std::string, std::string>& env,
               const ProcessOptions& options = {})
      : options_(options) {
    std::vector<std::string> env_storage;
    for (const auto& [name, value] : env) env_storage.push_back(name + "=" + value);
    std::vector<char*> argv, envp;
    for (std::string& arg : argv_storage) argv.push_back(arg.data());
    argv.push_back(nullptr);
    for (std::string& entry : env_storage) envp.push_back(entry.data());
    envp.push_back(nullptr);

    std::filesystem::permissions(output_.path(), std::filesystem::perms::all);  // for as_nobody
    const int out_fd = ::open((output_ / "stdout").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    const int err_fd = ::open((output_ / "stderr").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    const std::string cwd = options.cwd.string();
    start_ = std::chrono::steady_clock::now();
    pid_ = ::fork();
    if (pid_ == 0) {
      // Only async-signal-safe calls from here to exec.
      if (!cwd.empty() && ::chdir(cwd.c_str()) != 0) ::_exit(120);
      if (options.as_nobody && (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0)) {
        ::_exit(121);
      }
      ::dup2(out_fd, STDOUT_FILENO);
      ::dup2(err_fd, STDERR_FILENO);
      ::execve(argv[0], argv.data(), envp.data());
      ::_exit(122);
    }
    ::close(out_fd);
    ::close(err_fd);
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess() {
    if (!waited_ && pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }

  pid_t pid() const { return pid_; }
  std::string StdoutSoFar() const { return ReadFile(output_ / "stdout"); }

  ProcessResult Wait() {
    ProcessResult run;
    const auto deadline = start_ + options_.timeout;
    int status = 0;
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        run.timed_out = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    waited_ = true;
    run.elapsed = std::chrono::steady_clock::now() - start_;
    run.exit_code = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
    run.out = ReadFile(output_ / "stdout");
    run.err = ReadFile(output_ / "stderr");
    return run;
  }

 private:
  ProcessOptions options_;
  TempDir output_;
  pid_t pid_ = -1;
  bool waited_ = false;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace rankscope::testing
