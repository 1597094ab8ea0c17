#include "collector/stderr_line.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace rankscope::collector {

void WriteStderrLine(std::string_view text) noexcept {
  const int saved_errno = errno;
  char line[1024];
  const size_t length = std::min(text.size(), sizeof line - 1);
  std::memcpy(line, text.data(), length);
  line[length] = '\n';

  pollfd out{STDERR_FILENO, POLLOUT, 0};
  if (::poll(&out, 1, 0) == 1 && (out.revents & POLLOUT) != 0) {
    sigset_t pipe_only, previous, pending;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_only, &previous);
    sigpending(&pending);
    const bool pipe_was_pending = sigismember(&pending, SIGPIPE) == 1;
    ssize_t written = 0;
    do {
      written = ::write(STDERR_FILENO, line, length + 1);
    } while (written < 0 && errno == EINTR);
    // Our SIGPIPE is taken back; one that was pending before is the host's and stays.
    if (written < 0 && errno == EPIPE && !pipe_was_pending) {
      const timespec no_wait{};
      while (sigtimedwait(&pipe_only, nullptr, &no_wait) < 0 && errno == EINTR) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  }
  errno = saved_errno;
}

}  // namespace rankscope::collector
