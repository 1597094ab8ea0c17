// Helpers of the cli/ tests: temporary directories, files, and running the built
// `rankscope` binary with its output captured.
#pragma once

#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
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

namespace rankscope::cli::testing {

using rankscope::testing::TempDir;

inline std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

inline void WriteFile(const std::filesystem::path& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary);
  out << content;
}

inline std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Every file under `dir` with its content ("" for directories): to show nothing changed.
inline std::map<std::string, std::string> Snapshot(const std::filesystem::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    const std::string name = std::filesystem::relative(entry.path(), dir).string();
    files[name] = entry.is_regular_file() ? ReadFile(entry.path()) : std::string("<dir>");
  }
  return files;
}

struct RankscopeRun {
  int exit_code = -1;      // 128 + N when signal N ended rankscope
  bool timed_out = false;  // it hung and was SIGKILLed
  std::string out;
  std::string err;
  std::chrono::duration<double> elapsed{};
};

struct RunOptions {
  std::map<std::string, std::string> set_env{};  // added to (or replacing in) the test's environment
  std::vector<std::string> unset_env{};
  std::filesystem::path cwd{};       // empty: the test's
  bool as_nobody = false;            // drop root privileges (uid/gid 65534)
  std::chrono::seconds timeout{90};  // a generous "did not hang" bound
};

// A started `rankscope`, its output going to files in a directory of its own.
class RankscopeProcess {
 public:
  RankscopeProcess(const std::vector<std::string>& args, const RunOptions& options) : options_(options) {
    std::map<std::string, std::string> env;
    for (char** entry = environ; *entry != nullptr; ++entry) {
      const std::string text = *entry;
      const size_t eq = text.find('=');
      if (eq != std::string::npos) env[text.substr(0, eq)] = text.substr(eq + 1);
    }
    // These tests check the launcher, not the collector: inject a library that does nothing.
    env["RANKSCOPE_COLLECTOR_LIB"] = EMPTY_PRELOAD_LIBRARY;
    // Sanitizer builds: in a sanitized child (cli_test_fake_rank) the preloaded library comes
    // before the sanitizer runtime.
    env["ASAN_OPTIONS"] = env["ASAN_OPTIONS"].empty() ? "verify_asan_link_order=0"
                                                      : env["ASAN_OPTIONS"] + ":verify_asan_link_order=0";
    for (const char* name : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LD_PRELOAD"}) env.erase(name);
    for (const auto& [name, value] : options.set_env) env[name] = value;
    for (const std::string& name : options.unset_env) env.erase(name);

    std::vector<std::string> env_storage, argv_storage = {RANKSCOPE_BINARY};
    for (const auto& [name, value] : env) env_storage.push_back(name + "=" + value);
    argv_storage.insert(argv_storage.end(), args.begin(), args.end());
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

  pid_t pid() const { return pid_; }

  RankscopeRun Wait() {
    RankscopeRun run;
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
    run.elapsed = std::chrono::steady_clock::now() - start_;
    run.exit_code = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
    run.out = ReadFile(output_ / "stdout");
    run.err = ReadFile(output_ / "stderr");
    return run;
  }

 private:
  RunOptions options_;
  TempDir output_;
  pid_t pid_ = -1;
  std::chrono::steady_clock::time_point start_;
};

inline RankscopeRun RunRankscope(const std::vector<std::string>& args, const RunOptions& options = {}) {
  RankscopeProcess process(args, options);
  return process.Wait();
}

// Polls until `path` exists; false after `timeout` (a hang, not a timing assertion).
inline bool WaitForFile(const std::filesystem::path& path,
                        std::chrono::seconds timeout = std::chrono::seconds(60)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!std::filesystem::exists(path)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

}  // namespace rankscope::cli::testing
