// `rankscope import` and `rankscope export`: other tools' traces into a run, a run out to
// Chrome trace JSON. Testable without a process: streams are parameters.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

namespace rankscope::cli {

struct ImportRequest {
  std::vector<std::string> inputs;  // Kineto JSON files or directories, nsys SQLite exports
  std::string output;               // the run directory to write
  bool force = false;               // replace the rank files a directory already holds
};

// Imports, prints the import's notes and a summary to `err`. Returns 0, or 2 with one error
// line (nothing of the import left behind).
int RunImport(const ImportRequest& request, std::FILE* err);

struct ExportRequest {
  std::vector<std::string> inputs;  // a run (or rank file), or another tool's traces of one
  std::string chrome;               // the Chrome trace JSON to write (.gz: compressed)
};

// Exports, naming the file written on `err`. Returns 0, or 2 with one error line.
int RunExport(const ExportRequest& request, std::FILE* err);

}  // namespace rankscope::cli
