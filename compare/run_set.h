// What a path given to `rankscope scale` or `compare` (or opened in the viewer) holds, read
// into comparable runs: a run directory or rank file (analyzed now), a sweep directory of
// n<N>/ runs (each analyzed, with scaling efficiency), a JSON report (read back), or another
// tool's traces of one run (imported through interop::ResolveRun, then analyzed).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "analyzer/analyze.h"
#include "base/status.h"
#include "compare/comparable.h"

namespace rankscope::compare {

// Where `rankscope sweep` puts the N-rank run: DIR/n<N>.
std::filesystem::path SweepRunDir(const std::filesystem::path& sweep_dir, int world_size);

struct SweepRun {
  int world_size = 0;
  std::filesystem::path directory;
};

// The n<N>/ directories of `dir` that hold rank files, smallest N first; empty for a
// directory that is no sweep (and for a path that is no directory).
std::vector<SweepRun> SweepRuns(const std::filesystem::path& dir);

// Analyzes the run at `run` now. `source` names it in the record and in warnings: the
// user's path, not a temporary import's. The report's warnings are appended to `warnings`;
// `*partial` becomes true when the run has missing ranks or ranks without activity
// (`partial` may be null).
Result<ComparableRun> AnalyzeToComparable(const std::filesystem::path& run, const std::string& source,
                                          const analyzer::AnalyzeOptions& options,
                                          std::vector<std::string>* warnings, bool* partial);

// Reads whatever `path` holds into a set, as the top of this file says. A sweep's runs
// gain their scaling efficiency when there are two or more. Warnings are appended to
// `warnings`, and `*partial` (when not null) becomes true when an analyzed run has missing
// or idle ranks. Errors (one line, naming `path`): a missing path, a directory that is
// neither a run, a sweep nor a directory of PyTorch profiler traces, a file in no format
// rankscope reads, and whatever the analysis or the JSON report's parser refuses.
Result<ComparableSet> LoadComparableSet(const std::filesystem::path& path, const analyzer::AnalyzeOptions& options,
                                        std::vector<std::string>* warnings, bool* partial);

}  // namespace rankscope::compare
