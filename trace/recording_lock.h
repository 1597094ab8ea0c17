// Whether a run directory is still being recorded into. Every process that records into a
// run directory (the collector in each rank) holds a shared flock on
// `<run dir>/.rankscope-recording.lock` for as long as it records; a command that would
// delete or judge rank files (`profile --force`, `analyze`) asks RunIsRecording first.
//
// flock, not a pid file: the kernel drops the lock when its holder ends, SIGKILL included,
// so a killed run never leaves a stale "recording" mark. The lock file itself stays (hidden,
// empty, not a rank file: run_dir.h's rules ignore it); removing it could split the lock
// between two files while someone holds it.
#pragma once

#include <filesystem>
#include <string_view>

#include "base/status.h"

namespace rankscope::trace {

inline constexpr std::string_view kRecordingLockFileName = ".rankscope-recording.lock";

std::filesystem::path RecordingLockPath(const std::filesystem::path& run_dir);

// A shared hold on a run directory's recording lock, released when the object goes (or
// when its process ends, however it ends). The descriptor is close-on-exec.
class RecordingLock {
 public:
  // Creates the lock file when missing and takes the shared lock without waiting (LOCK_SH |
  // LOCK_NB). Unavailable while a RunIsRecording probe holds it for an instant (the caller
  // may try again); IoError when the file cannot be created or opened. Never blocks.
  static Result<RecordingLock> Acquire(const std::filesystem::path& run_dir);

  RecordingLock(RecordingLock&& other) noexcept;
  RecordingLock& operator=(RecordingLock&& other) noexcept;
  RecordingLock(const RecordingLock&) = delete;
  RecordingLock& operator=(const RecordingLock&) = delete;
  ~RecordingLock();

  // In a forked child: closes the child's copy of the descriptor, so that the child does
  // not keep the lock alive after its parent lets go; the parent's hold is untouched.
  // Only close(): safe between fork and exec.
  void CloseInForkedChild() noexcept;

 private:
  explicit RecordingLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

// True while some process holds the run directory's recording lock; false when none does
// or when there is no lock file (a run recorded before locks existed, or none at all).
// Probes with LOCK_EX | LOCK_NB and lets go at once; never blocks. Errors: a lock file
// that exists but cannot be opened or locked.
Result<bool> RunIsRecording(const std::filesystem::path& run_dir);

}  // namespace rankscope::trace
