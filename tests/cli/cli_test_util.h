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

#include "tests/child_process.h"
#include "tests/temp_dir.h"


namespace rankscope::cli::testing {

using rankscope::testing::TempDir;

using rankscope::testing::ReadFile;

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

using RankscopeRun = rankscope::testing::ProcessResult;

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
  RankscopeProcess(const std::vector<std::string>& args, const RunOptions& options)
      : process_(Argv(args), Environment(options),
                 rankscope::testing::ProcessOptions{options.cwd, options.as_nobody, options.timeout}) {}

  pid_t pid() const { return process_.pid(); }
  RankscopeRun Wait() { return process_.Wait(); }

 private:
  static std::vector<std::string> Argv(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {RANKSCOPE_BINARY};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  }
  static std::map<std::string, std::string> Environment(const RunOptions& options) {
    std::map<std::string, std::string> env = rankscope::testing::CurrentEnvironment();
    // These tests check the launcher, not the collector: inject a library that does nothing.
    env["RANKSCOPE_COLLECTOR_LIB"] = EMPTY_PRELOAD_LIBRARY;
    // Sanitizer builds: in a sanitized child (cli_test_fake_rank) the preloaded library comes
    // before the sanitizer runtime.
    env["ASAN_OPTIONS"] = rankscope::testing::ChildAsanOptions();
    for (const char* name : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LD_PRELOAD"}) env.erase(name);
    for (const auto& [name, value] : options.set_env) env[name] = value;
    for (const std::string& name : options.unset_env) env.erase(name);
    return env;
  }

  rankscope::testing::ChildProcess process_;
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
