// `rankscope profile --hang-timeout`: watches the progress files the ranks' collectors keep
// (<rank file>.progress, written with RANKSCOPE_PROGRESS_FILE=1 when a rank completes a
// collective or a step) and says when no rank has made progress for the timeout. Times are
// the launcher's own (a file's content changing is progress), so the ranks' clocks and
// hosts do not matter; on several hosts the run directory must be on a shared filesystem.
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <string>

namespace rankscope::cli {

class HangWatch {
 public:
  using Clock = std::chrono::steady_clock;

  // `started`: when the job started; before any progress, the timeout counts from there.
  HangWatch(std::filesystem::path run_dir, std::string run_id, std::chrono::milliseconds timeout,
            Clock::time_point started);

  // Reads the run's progress files (those of other runs, and unreadable ones, are skipped)
  // and returns true when none changed for the timeout. O(ranks) small reads.
  bool Hung(Clock::time_point now);

  // How long no rank made progress, as of the last Hung call.
  std::chrono::milliseconds quiet_for() const { return quiet_for_; }
  // Ranks that reported progress at least once (files seen).
  size_t ranks_seen() const { return seen_.size(); }

 private:
  std::filesystem::path run_dir_;
  std::string run_id_;
  std::chrono::milliseconds timeout_;
  Clock::time_point last_progress_;
  std::chrono::milliseconds quiet_for_{0};
  std::map<std::string, std::string> seen_;  // file name -> content
};

// The value `rankscope profile` exits with when --hang-timeout stopped the job.
inline constexpr int kExitHang = 124;

}  // namespace rankscope::cli
