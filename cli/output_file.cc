#include "cli/output_file.h"

#include <fmt/format.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "cli/messages.h"

namespace rankscope::cli {
namespace fs = std::filesystem;

Status CheckOutputPath(const std::string& option, const fs::path& path) {
  const fs::path parent = fs::absolute(path).parent_path();
  std::error_code ec;
  if (!fs::is_directory(parent, ec)) {
    return InvalidArgument(fmt::format("{} {}: directory {} does not exist", option, path.string(), parent.string()));
  }
  if (fs::is_directory(path, ec)) {
    return InvalidArgument(fmt::format("{} {}: is a directory; give a file name", option, path.string()));
  }
  if (::access(parent.c_str(), W_OK) != 0) {
    return InvalidArgument(
        fmt::format("{} {}: cannot write in {}: {}", option, path.string(), parent.string(), std::strerror(errno)));
  }
  return Status::Ok();
}

namespace {

Status WriteAll(int fd, const std::string& text) {
  for (size_t written = 0; written < text.size();) {
    const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return IoError(std::strerror(n < 0 ? errno : EIO));
    written += static_cast<size_t>(n);
  }
  return Status::Ok();
}

}  // namespace

Status WriteFileAtomically(const fs::path& path, const std::string& text) {
  // A character device (/dev/null, /dev/stdout) is written into: renaming over it would put
  // a file where the device was.
  struct stat info {};
  if (::stat(path.c_str(), &info) == 0 && S_ISCHR(info.st_mode)) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return IoError(fmt::format("cannot write {}: {}", path.string(), std::strerror(errno)));
    Status written = WriteAll(fd, text);
    if (::close(fd) != 0 && written.ok()) written = IoError(std::strerror(errno));
    if (!written.ok()) return IoError(fmt::format("cannot write {}: {}", path.string(), written.message()));
    return Status::Ok();
  }
  // A name no file had: an existing one (a FIFO above all, which would block the open) is
  // never opened, only replaced by the rename.
  std::string temporary = path.string() + ".tmp-XXXXXX";
  const int fd = ::mkstemp(temporary.data());
  if (fd < 0) return IoError(fmt::format("cannot write {}: {}", path.string(), std::strerror(errno)));
  ::fchmod(fd, 0644);  // mkstemp's 0600 is for secrets; a report is an ordinary file
  const auto fail = [&](int error) {
    ::close(fd);
    ::unlink(temporary.c_str());
    return IoError(fmt::format("cannot write {}: {}", temporary, std::strerror(error)));
  };
  if (Status written = WriteAll(fd, text); !written.ok()) return fail(errno != 0 ? errno : EIO);
  if (::close(fd) != 0) {
    const int error = errno;
    ::unlink(temporary.c_str());
    return IoError(fmt::format("cannot write {}: {}", temporary, std::strerror(error)));
  }
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    const int error = errno;
    ::unlink(temporary.c_str());
    return IoError(fmt::format("cannot write {}: {}", path.string(), std::strerror(error)));
  }
  return Status::Ok();
}

bool EmitReport(std::FILE* out, std::FILE* err, const std::string& path, const std::string& text,
                std::string_view what) {
  if (path.empty()) {
    PrintText(out, text);
    return true;
  }
  if (Status written = WriteFileAtomically(path, text); !written.ok()) {
    PrintError(err, written.message());
    return false;
  }
  PrintNote(err, fmt::format("wrote the {} to {}", what, path));
  return true;
}

bool WriteReportFiles(std::FILE* err, const std::vector<std::pair<std::string, std::string>>& files) {
  for (const auto& [path, text] : files) {
    if (path.empty()) continue;
    if (Status written = WriteFileAtomically(path, text); !written.ok()) {
      PrintError(err, written.message());
      return false;
    }
    PrintNote(err, fmt::format("wrote {}", path));
  }
  return true;
}

}  // namespace rankscope::cli
