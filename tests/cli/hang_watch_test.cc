// The --hang-timeout watch (cli/hang_watch.h): progress is a change in any of the run's
// progress files; other runs' files and other files never count.
#include "cli/hang_watch.h"

#include <fstream>

#include <gtest/gtest.h>

#include "tests/temp_dir.h"

namespace rankscope::cli {
namespace {

using namespace std::chrono_literals;
using testing::TempDir;

void WriteProgress(const std::filesystem::path& path, const std::string& run_id, int collectives) {
  std::ofstream(path) << "rankscope-progress 1\nrun_id " << run_id << "\nrank 0\npid 1\ncollectives " << collectives
                      << "\nsteps 0\nlast_progress_ns 5\n";
}

TEST(HangWatch, ProgressInAnyRankResetsTheClock) {
  TempDir dir;
  const HangWatch::Clock::time_point t0{};
  HangWatch watch(dir.path(), "run-a", 10s, t0);
  EXPECT_FALSE(watch.Hung(t0 + 9s));  // nothing yet: counted from the start
  EXPECT_TRUE(watch.Hung(t0 + 10s));
  WriteProgress(dir / "rank-0.progress", "run-a", 1);
  EXPECT_FALSE(watch.Hung(t0 + 11s));  // first sight is progress
  EXPECT_EQ(watch.ranks_seen(), 1u);
  WriteProgress(dir / "rank-1.progress", "run-a", 1);
  EXPECT_FALSE(watch.Hung(t0 + 15s));
  EXPECT_FALSE(watch.Hung(t0 + 24s));
  EXPECT_EQ(watch.quiet_for(), 9000ms);
  EXPECT_TRUE(watch.Hung(t0 + 25s));  // unchanged for 10 s
  WriteProgress(dir / "rank-1.progress", "run-a", 2);
  EXPECT_FALSE(watch.Hung(t0 + 26s));
}

TEST(HangWatch, OtherRunsFilesAndOtherFilesAreNotProgress) {
  TempDir dir;
  const HangWatch::Clock::time_point t0{};
  HangWatch watch(dir.path(), "run-a", 10s, t0);
  WriteProgress(dir / "rank-0.progress", "run-b", 1);         // an earlier run's
  std::ofstream(dir / "rank-1.progress") << "garbage\n";       // not a progress file
  std::ofstream(dir / "rank-0.sqlite") << "changing";          // not a progress file
  EXPECT_FALSE(watch.Hung(t0 + 5s));
  WriteProgress(dir / "rank-0.progress", "run-b", 2);
  std::ofstream(dir / "rank-0.sqlite") << "changed";
  EXPECT_TRUE(watch.Hung(t0 + 10s));
  EXPECT_EQ(watch.ranks_seen(), 0u);
}

}  // namespace
}  // namespace rankscope::cli
