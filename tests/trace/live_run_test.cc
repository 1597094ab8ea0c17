// A run still being recorded into: OpenRun says so (the recording lock is held), and its
// unclosed files are reported as live snapshots rather than as files of dead processes.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "tests/trace/trace_test_util.h"
#include "trace/recording_lock.h"
#include "trace/run_dir.h"

namespace rankscope::trace {
namespace {

using testing::MakeIdentity;
using testing::MustCreate;
using testing::TempDir;

bool AnyContains(const std::vector<std::string>& lines, const std::string& text) {
  for (const std::string& line : lines) {
    if (line.find(text) != std::string::npos) return true;
  }
  return false;
}

TEST(LiveRun, AnUnclosedFileIsLiveWhileTheRecordingLockIsHeldAndDeadAfter) {
  TempDir dir;
  auto writer = MustCreate(dir / "rank-0.sqlite", MakeIdentity("live", 0, 1));
  ASSERT_NE(writer, nullptr);
  ASSERT_TRUE(writer->Flush(std::chrono::seconds(10)).ok());
  {
    Result<RecordingLock> lock = RecordingLock::Acquire(dir.path());
    ASSERT_TRUE(lock.ok()) << lock.status().message();
    const Result<trace::Run> run = OpenRun(dir.path());
    ASSERT_TRUE(run.ok()) << run.status().message();
    EXPECT_TRUE(run->recording);
    EXPECT_EQ(run->crashed, std::vector<std::string>{"rank-0.sqlite"});
    EXPECT_TRUE(AnyContains(run->Warnings(), "rank-0.sqlite is still being recorded")) << run->Warnings()[0];
  }
  // The lock let go (its process died, say) while the file stays unclosed.
  const Result<trace::Run> run = OpenRun(dir.path());
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_FALSE(run->recording);
  EXPECT_TRUE(AnyContains(run->Warnings(), "rank-0.sqlite was not closed cleanly"));
  ASSERT_TRUE(writer->Close().ok());
  const Result<trace::Run> closed = OpenRun(dir.path());
  ASSERT_TRUE(closed.ok()) << closed.status().message();
  EXPECT_FALSE(closed->recording);
  EXPECT_TRUE(closed->crashed.empty());
}

}  // namespace
}  // namespace rankscope::trace
