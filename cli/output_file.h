// Report files the CLI writes (--out, --plot, --junit, --markdown, a sweep's reports):
// checked before the work that fills them, and replaced atomically so a failure never
// leaves half a file or damages the one already there.
#pragma once

#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace rankscope::cli {

// InvalidArgument naming `option` when `path` cannot be written: its directory is missing
// or not writable, or it is a directory.
Status CheckOutputPath(const std::string& option, const std::filesystem::path& path);

// Writes `text` to `path` through a temporary file in the same directory and a rename.
Status WriteFileAtomically(const std::filesystem::path& path, const std::string& text);

// A report's --out: `text` to `out` when `path` is empty, else written atomically with a
// "wrote the <what> to <path>" note on `err`. False, with the error printed, when writing failed.
bool EmitReport(std::FILE* out, std::FILE* err, const std::string& path, const std::string& text,
                std::string_view what);

// (path, text) pairs written atomically, each with a "wrote <path>" note; empty paths are
// skipped. False, with the error printed, at the first that fails.
bool WriteReportFiles(std::FILE* err, const std::vector<std::pair<std::string, std::string>>& files);

}  // namespace rankscope::cli
