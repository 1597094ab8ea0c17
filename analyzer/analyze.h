// Analyzing a run: load every rank (in parallel, streaming), classify, find steps, compute
// docs/metrics.md §3–§5 per device, per step, across ranks and per run, into a Report.
//
// Rules where docs/metrics.md leaves a choice (docs/report-json.md repeats them for users):
// - Steps: NVTX ranges whose name is one of `step_names` (any case) or "ProfilerStep#N",
//   on the thread lane that has the most of them, outermost ranges only, without those the
//   run ended inside (payload "rankscope.unfinished": true). The number is the
//   "step" field of the range's payload JSON, else N of ProfilerStep#N, else an integer
//   scalar payload, else the range's index. Without step ranges the whole trace (its
//   device-activity extent) is one step, which --skip-steps never drops. When
//   --skip-steps would leave no step and no --steps range is given, every step is
//   aggregated, with a warning.
// - Step windows are the host ranges themselves; totals use [first device activity start,
//   last device activity end) per device.
// - Collectives, in order of preference per rank: NCCL profiler-plugin records (matched by
//   (comm hash, sequence)); else NCCL kernels; else ranges classified comm (matched as the
//   n-th of the same name). Bytes come from the record, or from the range's payload JSON:
//   its "bytes" field, else Kineto's "Input Dims" × "Input type" element sizes.
// - A rank without device activity is measured by the CPU-side rule (docs/metrics.md §1):
//   gloo:/nccl:/c10d:: ranges are comm, each thread's outermost cpu_op ranges compute,
//   minus that thread's comm.
// - A collective belongs to the step (number) of the last-arriving rank's step window that
//   holds that rank's start; a rank's StepMetrics::wait_ns sums its wait over the
//   collectives that start inside its own step window.
// - Straggler: in each aggregated step, the rank that caused the most wait (the sum of
//   the others' waits at collectives where it arrived last), counted only when the
//   others waited on average at least 5% of the step's median time. A rank is flagged when
//   it is that rank in at least half of the aggregated steps.
// - Clock alignment: ranks are grouped by host name. Each other host's offset is the
//   median over matched collectives of (reference-host median end − that host's median
//   end); the reference host is rank 0's.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
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
  // NVTX range names that mark a training step (docs/metrics.md §2), compared without case;
  // "ProfilerStep#<N>" always counts, with N as the step number.
  std::vector<std::string> step_names = DefaultStepNames();
  int skip_steps = 1;                   // warm-up steps left out of the aggregates
  std::optional<int64_t> first_step;    // --steps A..B: only step numbers in [A, B]
  std::optional<int64_t> last_step;
  int threads = 0;                      // ranks read at once; 0 = one per hardware thread
  size_t top = 10;                      // entries in Report::top_activities
  // Also each aggregated step's critical path, blame and what-ifs (Report::critical_path,
  // docs/metrics.md §10): keeps the events of the steps it follows (critical_path_steps)
  // until the report is built.
  bool critical_path = false;
  // Extra what-ifs for it: work whose name contains `text` (any case) `factor`× faster.
  struct FasterWorkWhatIf {
    std::string text;
    double factor = 2;
  };
  std::vector<FasterWorkWhatIf> what_ifs;
  // And communication bandwidth this many times higher (beside the default ×2).
  std::vector<double> bandwidth_what_ifs;
  // The most aggregated steps whose graph is built (rank_scan.h PathStepsKept: every
  // 2^k-th by number); 0: every one.
  size_t critical_path_steps = 200;
  std::string tool_version;
  // Called on the calling thread after each rank is read: (ranks done, ranks in all).
  std::function<void(int, int)> progress;
};

// Analyzes a run directory (or one rank file). Errors, one line each: what OpenRun refuses
// (missing directory, corrupt file, files of two runs), no rank with anything to measure
// (device activity, or CPU operators and comm ranges for the CPU-side rule), and
// a --steps range that selects no step. Missing ranks, ranks without activity and
// unfinished files are not errors: the report covers what is there and says what is not
// (Report::warnings). A run that did not finish gets Report::did_not_finish (hang.h).
Result<Report> AnalyzeRun(const std::filesystem::path& run, const AnalyzeOptions& options);

// The same analysis over traces already in memory (tests, importers). Each trace's meta
// must name its rank.
Result<Report> AnalyzeTraces(const std::vector<trace::RankTrace>& ranks, const AnalyzeOptions& options);

// A run whose ranks stream in from elsewhere: another tool's traces read straight into the
// analysis (interop/), without rank files. Each rank gets a visitor, fed OnHeader, then
// OnMoreNames and OnSpans as the reading goes, then OnTrailer (trace/reader.h); different
// ranks' visitors may be fed at once. Finish measures every rank and builds the report, as
// AnalyzeRun does for the same ranks written to files.
class StreamedRunAnalysis {
 public:
  explicit StreamedRunAnalysis(AnalyzeOptions options);
  ~StreamedRunAnalysis();
  StreamedRunAnalysis(const StreamedRunAnalysis&) = delete;
  StreamedRunAnalysis& operator=(const StreamedRunAnalysis&) = delete;

  // A visitor for one more rank, alive as long as this object; `source` (the input that
  // holds the rank) names it in messages. Safe to call from several threads.
  trace::SpanVisitor& AddRank(std::filesystem::path source);
  // Once every rank has had its trailer: the report of the run `display` names (what the
  // user gave). Fails as AnalyzeRun does on the same ranks, and on ranks without a rank.
  Result<Report> Finish(const std::filesystem::path& display);

 private:
  struct Rank;
  AnalyzeOptions options_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<Rank>> ranks_;
};

}  // namespace rankscope::analyzer
