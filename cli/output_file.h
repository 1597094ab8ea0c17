// Report files the CLI writes (--out, --plot, --junit, --markdown, a sweep's reports):
// checked before the work that fills them, and replaced atomically so a failure never
// leaves half a file or damages the one already there.
#pragma once

#include <filesystem>
#include <string>

#include "base/status.h"

namespace rankscope::cli {

// InvalidArgument naming `option` when `path` cannot be written: its directory is missing
// or not writable, or it is a directory.
Status CheckOutputPath(const std::string& option, const std::filesystem::path& path);

// Writes `text` to `path` through a temporary file in the same directory and a rename.
Status WriteFileAtomically(const std::filesystem::path& path, const std::string& text);

}  // namespace rankscope::cli
