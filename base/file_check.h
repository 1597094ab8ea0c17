// Inputs are opened only once they are known to be what a command reads. Opening a FIFO
// for reading blocks until some process writes to it, and a device may never end: a path
// that names one gets one line and no open.
#pragma once

#include <filesystem>
#include <string_view>

#include "base/status.h"

namespace rankscope {

// "a FIFO", "a socket", "a character device", "a block device", "a directory", ...
std::string_view FileTypeName(std::filesystem::file_type type);

// Ok for a regular file (symbolic links followed). Otherwise one line naming the path:
// NotFound "no such file or directory", InvalidArgument "not a regular file (a FIFO)",
// IoError when its type cannot be read.
Status CheckRegularFile(const std::filesystem::path& path);

// The same, but a directory is fine too.
Status CheckRegularFileOrDirectory(const std::filesystem::path& path);

}  // namespace rankscope
