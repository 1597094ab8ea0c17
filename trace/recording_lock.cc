#include "trace/recording_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "base/text.h"

namespace rankscope::trace {
namespace {

int FlockRetryingInterrupts(int fd, int operation) {
  int result = 0;
  do {
    result = ::flock(fd, operation);
  } while (result != 0 && errno == EINTR);
  return result;
}

}  // namespace

std::filesystem::path RecordingLockPath(const std::filesystem::path& run_dir) {
  return run_dir / kRecordingLockFileName;
}

Result<RecordingLock> RecordingLock::Acquire(const std::filesystem::path& run_dir) {
  const std::filesystem::path path = RecordingLockPath(run_dir);
  // Read-only is enough for flock; O_NOFOLLOW: a link planted there is not ours to create.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666);
  if (fd < 0) {
    const int error = errno;
    return IoError(fmt::format("cannot open the recording lock {}: {}", Quoted(path), std::strerror(error)));
  }
  if (FlockRetryingInterrupts(fd, LOCK_SH | LOCK_NB) != 0) {
    const int error = errno;
    ::close(fd);
    if (error == EWOULDBLOCK) {
      return Unavailable(fmt::format("the recording lock {} is held exclusively for a moment", Quoted(path)));
    }
    return IoError(fmt::format("cannot lock {}: {}", Quoted(path), std::strerror(error)));
  }
  return RecordingLock(fd);
}

RecordingLock::RecordingLock(RecordingLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

RecordingLock& RecordingLock::operator=(RecordingLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

void RecordingLock::CloseInForkedChild() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

RecordingLock::~RecordingLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the lock
}

Result<bool> RunIsRecording(const std::filesystem::path& run_dir) {
  const std::filesystem::path path = RecordingLockPath(run_dir);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    const int error = errno;
    if (error == ENOENT || error == ENOTDIR) return false;
    return IoError(fmt::format("cannot tell whether {} is still being recorded: {}: {}", Quoted(run_dir),
                               Quoted(path), std::strerror(error)));
  }
  const int locked = FlockRetryingInterrupts(fd, LOCK_EX | LOCK_NB);
  const int error = errno;
  ::close(fd);  // also lets go of the exclusive lock when the probe got it
  if (locked == 0) return false;
  if (error == EWOULDBLOCK) return true;
  return IoError(fmt::format("cannot tell whether {} is still being recorded: locking {}: {}", Quoted(run_dir),
                             Quoted(path), std::strerror(error)));
}

}  // namespace rankscope::trace
