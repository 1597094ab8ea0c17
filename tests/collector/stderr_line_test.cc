// The collector's stderr line must neither kill nor stall its host: each case runs in a
// child whose stderr is a broken or a full pipe, with an alarm in case it hangs.
#include "collector/stderr_line.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include <gtest/gtest.h>

namespace rankscope::collector {
namespace {

// Runs `body` in a child with stderr on a fresh pipe, prepared by `prepare(read_end,
// write_end)`; returns the child's wait status. SIGALRM ends a child that hangs.
template <typename Prepare>
int InChildWithStderrPipe(Prepare prepare) {
  const pid_t child = fork();
  if (child == 0) {
    int fds[2];
    if (pipe(fds) != 0) _exit(90);
    prepare(fds[0], fds[1]);
    dup2(fds[1], STDERR_FILENO);
    alarm(20);
    errno = EILSEQ;
    WriteStderrLine("rankscope: a line");
    _exit(errno == EILSEQ ? 0 : 91);
  }
  int status = 0;
  waitpid(child, &status, 0);
  return status;
}

TEST(StderrLine, ABrokenPipeDoesNotKillTheHost) {
  const int status = InChildWithStderrPipe([](int read_end, int) { close(read_end); });
  ASSERT_TRUE(WIFEXITED(status)) << "ended by signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "90: no pipe; 91: errno changed";
}

TEST(StderrLine, AFullPipeDoesNotStallTheHost) {
  const int status = InChildWithStderrPipe([](int, int write_end) {
    const int flags = fcntl(write_end, F_GETFL);
    fcntl(write_end, F_SETFL, flags | O_NONBLOCK);
    static const char block[4096] = {};  // no allocation after fork
    while (write(write_end, block, sizeof block) > 0) {
    }
    fcntl(write_end, F_SETFL, flags);  // blocking again, as stderr usually is
  });
  ASSERT_TRUE(WIFEXITED(status)) << "ended by signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace rankscope::collector
