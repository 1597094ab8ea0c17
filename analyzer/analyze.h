// Analyzing a run: load every rank (in parallel, streaming), classify, find steps, compute
// METRICS.md §3–§5 per device, per step, across ranks and per run, into a Report.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "analyzer/classify.h"
#include "analyzer/report.h"
#include "base/status.h"
#include "trace/reader.h"

namespace rankscope::analyzer {

struct AnalyzeOptions {
  ClassifyOptions classify;
  // NVTX range names that mark a training step (METRICS.md §2), compared without case;
  // "ProfilerStep#<N>" always counts, with N as the step number.
  std::vector<std::string> step_names = {"step", "train_step"};
  int skip_steps = 1;                   // warm-up steps left out of the aggregates
  std::optional<int64_t> first_step;    // --steps A..B: only step numbers in [A, B]
  std::optional<int64_t> last_step;
  int threads = 0;                      // ranks read at once; 0 = one per hardware thread
  size_t top = 10;                      // entries in Report::top_activities
  std::string tool_version;
  // Called on the calling thread after each rank is read: (ranks done, ranks in all).
  std::function<void(int, int)> progress;
};

// Analyzes a run directory (or one rank file). Errors, one line each: what OpenRun refuses
// (missing directory, corrupt file, files of two runs), no rank with device activity, and
// a --steps range that selects no step. Missing ranks, ranks without activity and
// unfinished files are not errors: the report covers what is there and says what is not
// (Report::warnings).
Result<Report> AnalyzeRun(const std::filesystem::path& run, const AnalyzeOptions& options);

// The same analysis over traces already in memory (tests, importers). Each trace's meta
// must name its rank.
Result<Report> AnalyzeTraces(const std::vector<trace::RankTrace>& ranks, const AnalyzeOptions& options);

}  // namespace rankscope::analyzer
