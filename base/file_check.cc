#include "base/file_check.h"

#include <fmt/format.h>

#include <system_error>

#include "base/text.h"

namespace rankscope {
namespace fs = std::filesystem;
namespace {

Status Check(const fs::path& path, bool directory_ok) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (status.type() == fs::file_type::not_found) {
    return NotFound(fmt::format("{}: no such file or directory", Quoted(path)));
  }
  if (ec) return IoError(fmt::format("{}: cannot read: {}", Quoted(path), ec.message()));
  if (status.type() == fs::file_type::regular) return Status::Ok();
  if (directory_ok && status.type() == fs::file_type::directory) return Status::Ok();
  return InvalidArgument(fmt::format("{}: not a regular file ({})", Quoted(path), FileTypeName(status.type())));
}

}  // namespace

std::string_view FileTypeName(fs::file_type type) {
  switch (type) {
    case fs::file_type::regular: return "a regular file";
    case fs::file_type::directory: return "a directory";
    case fs::file_type::symlink: return "a symbolic link";
    case fs::file_type::block: return "a block device";
    case fs::file_type::character: return "a character device";
    case fs::file_type::fifo: return "a FIFO";
    case fs::file_type::socket: return "a socket";
    case fs::file_type::not_found: return "missing";
    case fs::file_type::none:
    case fs::file_type::unknown: break;
  }
  return "of an unknown type";
}

Status CheckRegularFile(const fs::path& path) { return Check(path, false); }

Status CheckRegularFileOrDirectory(const fs::path& path) { return Check(path, true); }

}  // namespace rankscope
