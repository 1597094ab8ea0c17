#include "cli/hang_watch.h"

#include <fstream>
#include <sstream>
#include <system_error>

namespace rankscope::cli {
namespace fs = std::filesystem;

HangWatch::HangWatch(fs::path run_dir, std::string run_id, std::chrono::milliseconds timeout, Clock::time_point started)
    : run_dir_(std::move(run_dir)), run_id_(std::move(run_id)), timeout_(timeout), last_progress_(started) {}

bool HangWatch::Hung(Clock::time_point now) {
  std::error_code error;
  for (fs::directory_iterator it(run_dir_, error), end; !error && it != end; it.increment(error)) {
    const fs::path& path = it->path();
    if (path.extension() != ".progress") continue;
    std::ifstream in(path);
    std::stringstream content;
    content << in.rdbuf();
    const std::string text = content.str();
    // "rankscope-progress 1\nrun_id <id>\n...": another run's file (left by an earlier run
    // in the same directory) never counts.
    if (!text.starts_with("rankscope-progress 1\n") || text.find("\nrun_id " + run_id_ + "\n") == std::string::npos) {
      continue;
    }
    std::string& seen = seen_[path.filename().string()];
    if (seen != text) {
      seen = text;
      last_progress_ = now;
    }
  }
  quiet_for_ = std::chrono::duration_cast<std::chrono::milliseconds>(now - last_progress_);
  return quiet_for_ >= timeout_;
}

}  // namespace rankscope::cli
