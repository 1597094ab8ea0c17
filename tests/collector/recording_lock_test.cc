// The run directory's recording lock (trace/recording_lock.h) as the collector holds it and
// as `profile --force` and the analyzer ask about it.
#include "trace/recording_lock.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "collector/recorder.h"
#include "tests/collector/collector_test_util.h"
#include "trace/run_dir.h"

namespace rankscope::collector {
namespace {

using trace::testing::TempDir;

bool Recording(const std::filesystem::path& dir) {
  const Result<bool> recording = trace::RunIsRecording(dir);
  EXPECT_TRUE(recording.ok()) << recording.status().message();
  return recording.ok() && *recording;
}

TEST(RecordingLock, HeldWhileTheHolderLivesAndNotAfter) {
  TempDir dir;
  EXPECT_FALSE(Recording(dir.path())) << "no lock file: nothing records";
  EXPECT_FALSE(Recording(dir / "no-such-directory"));
  {
    Result<trace::RecordingLock> held = trace::RecordingLock::Acquire(dir.path());
    ASSERT_TRUE(held.ok()) << held.status().message();
    // Shared: a second recorder of the run holds it too.
    Result<trace::RecordingLock> second = trace::RecordingLock::Acquire(dir.path());
    ASSERT_TRUE(second.ok()) << second.status().message();
    EXPECT_TRUE(Recording(dir.path()));
  }
  EXPECT_FALSE(Recording(dir.path())) << "the lock file stays, unlocked";
  EXPECT_TRUE(std::filesystem::exists(trace::RecordingLockPath(dir.path())));
  auto listed = trace::ListRankFiles(dir.path());
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(listed->empty()) << "the lock file is no rank file";
}

TEST(RecordingLock, TheKernelLetsGoOfAKilledHolder) {
  TempDir dir;
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t holder = fork();
  if (holder == 0) {
    Result<trace::RecordingLock> held = trace::RecordingLock::Acquire(dir.path());
    const char state = held.ok() ? 'y' : 'n';
    [[maybe_unused]] const ssize_t written = write(ready[1], &state, 1);
    pause();  // until SIGKILL
    _exit(0);
  }
  close(ready[1]);
  char state = 0;
  ASSERT_EQ(read(ready[0], &state, 1), 1);
  close(ready[0]);
  EXPECT_EQ(state, 'y');
  EXPECT_TRUE(Recording(dir.path()));
  kill(holder, SIGKILL);
  waitpid(holder, nullptr, 0);
  EXPECT_FALSE(Recording(dir.path()));
}

TEST(RecordingLock, ARecorderHoldsItFromItsFileUntilClose) {
  TempDir dir;
  Recorder recorder(testing::MakeRecorderOptions(dir, {.run_id = "live", .rank = 0, .world_size = 1}));
  EXPECT_FALSE(Recording(dir.path())) << "nothing recorded yet: no file, no lock";
  recorder.Mark(testing::Named(recorder.registry().DefaultDomain(), "m"));
  ASSERT_TRUE(recorder.Flush(std::chrono::seconds(10)).ok());
  EXPECT_TRUE(Recording(dir.path()));
  ASSERT_TRUE(recorder.Close(Recorder::EndReason::kExit).ok());
  EXPECT_FALSE(Recording(dir.path()));
}

}  // namespace
}  // namespace rankscope::collector
