#include "collector/proc_files.h"

#include <fcntl.h>
#include <unistd.h>

namespace rankscope::collector {

std::string ReadSmallFile(const char* path, size_t max_bytes) {
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::string out;
  char chunk[4096];
  while (out.size() < max_bytes) {
    ssize_t n = ::read(fd, chunk, sizeof(chunk));
    if (n <= 0) break;
    out.append(chunk, static_cast<size_t>(n));
  }
  ::close(fd);
  if (out.size() > max_bytes) out.resize(max_bytes);
  return out;
}

}  // namespace rankscope::collector
