// `rankscope profile` end to end: check the request, prepare the run directory, start the
// command (or N local ranks) with the collector injected, wait, and print the summary.
#pragma once

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "cli/profile_command.h"

namespace rankscope::cli {

// Exit codes of rankscope's own failures; otherwise it exits with the command's code.
inline constexpr int kExitUsage = 2;            // bad options, unusable run directory, ...
inline constexpr int kExitCannotExecute = 126;  // the command exists but cannot be run
inline constexpr int kExitCommandNotFound = 127;
// kExitHang (cli/hang_watch.h, 124): --hang-timeout found no progress and stopped the job.

// What the user asked for, as typed.
struct ProfileRequest {
  std::optional<std::string> output_dir{};    // -o; default: a new rankscope-run-<time>
  std::string trace_list{kDefaultTraceList};  // --trace
  bool force = false;                         // --force
  bool pytorch = false;                       // --pytorch: inject the PyTorch hook too
  std::optional<std::string> local_ranks{};   // -n, unparsed
  std::optional<std::string> hang_timeout{};  // --hang-timeout SECONDS, unparsed
  std::vector<std::string> command{};         // after "--"
};

// What the process around the request provides; tests substitute their own.
struct ProfileContext {
  CollectorCandidates collector{};
  Environment environment{};
  std::filesystem::path working_directory{};  // where the default run directory goes
  std::chrono::milliseconds stop_grace{5000};
  std::chrono::milliseconds hang_check_interval{500};  // how often --hang-timeout looks
  std::FILE* messages = stderr;  // notes, errors and the summary
};

// Returns the exit code: the command's (128 + signal when a signal ended it; with -n, the
// first failing rank's), or kExitUsage / kExitCannotExecute / kExitCommandNotFound after
// printing one "rankscope: error: ..." line.
int RunProfile(const ProfileRequest& request, const ProfileContext& context);

}  // namespace rankscope::cli
