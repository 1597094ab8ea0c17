#include "cli/output_file.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

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

Status WriteFileAtomically(const fs::path& path, const std::string& text) {
  const fs::path temporary = path.string() + fmt::format(".tmp-{}", ::getpid());
  {
    std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
    if (!file) return IoError(fmt::format("cannot write {}: {}", temporary.string(), std::strerror(errno)));
    file.write(text.data(), static_cast<std::streamsize>(text.size()));
    file.flush();
    if (!file) {
      std::error_code ignored;
      fs::remove(temporary, ignored);
      return IoError(fmt::format("cannot write {}: {}", temporary.string(), std::strerror(errno)));
    }
  }
  std::error_code ec;
  fs::rename(temporary, path, ec);
  if (ec) {
    fs::remove(temporary, ec);
    return IoError(fmt::format("cannot write {}: {}", path.string(), ec.message()));
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

}  // namespace rankscope::cli
