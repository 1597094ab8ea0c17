// Other tools' traces in, rankscope's out: PyTorch profiler (Kineto) JSON and Nsight Systems
// SQLite exports become rankscope run directories, so every command and the viewer work on
// them; a run becomes Chrome trace-event JSON that Perfetto UI and chrome://tracing open.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "analyzer/analyze.h"
#include "analyzer/run_events.h"
#include "base/status.h"

namespace rankscope::interop {

enum class TraceFormat {
  kRankscopeRun,   // a run directory of rank files
  kRankscopeFile,  // one rank file
  kKinetoJson,     // PyTorch profiler / Kineto trace (.json or .json.gz), one rank
  // The older PyTorch profiler format (PyTorch without Kineto): a bare array of CPU
  // functions ("pid": "CPU functions", no "cat"), times from the profiler's start; one rank
  kTorchProfilerLegacyJson,
  kKinetoRun,      // a directory of Kineto traces, one per rank, and no rank files
  kNsysSqlite,     // `nsys export --type sqlite`, one rank per process
  kRankscopeReport,  // a JSON report of rankscope analyze or scale: figures, not a trace
};

std::string_view TraceFormatName(TraceFormat format);

// What `path` is, from its contents (not its name): SQLite files by their tables, gzip by
// its magic, JSON by its first MiB (a Kineto trace has "traceEvents" before its events, or is
// a bare array of them, whose first event says whether it is the older format; a rankscope
// report starts with its "format"). One line naming the path for anything else.
Result<TraceFormat> DetectTraceFormat(const std::filesystem::path& path);

struct ImportOptions {
  std::string run_id{};    // empty: a new one
  bool overwrite = false;  // an existing run directory's rank files are replaced
};

struct ImportResult {
  std::vector<std::filesystem::path> rank_files;  // written, by rank
  std::vector<std::string> notes;  // one line each: how ranks were chosen, what was left out
  uint64_t events = 0;
};

// Converts Kineto traces and older PyTorch profiler traces (one rank each: from
// distributedInfo, else from a file name such as "x_rank1.json" or "worker1.json", else the
// lowest rank free) and nsys SQLite exports (one rank per process of
// the report) into the rank files of one run in `run_dir`, created if missing; rank files
// already there are refused unless `options.overwrite`. Ranks must not repeat across
// inputs. An import that keeps no events fails, its one line saying what was left out and
// why. On error nothing half-written is left behind: files written so far are removed.
Result<ImportResult> ImportTraces(const std::vector<std::filesystem::path>& inputs, const std::filesystem::path& run_dir,
                                  const ImportOptions& options = {});

// What commands that read runs work on: `inputs` as the user gave them. A run directory or a
// rank file stands for itself; foreign traces (Kineto files, a directory of them, an nsys
// export) are imported into a temporary run, removed when this object goes.
class ResolvedRun {
 public:
  ResolvedRun(std::filesystem::path path, std::filesystem::path temporary, std::vector<std::string> notes,
              std::string display);
  ~ResolvedRun();
  ResolvedRun(const ResolvedRun&) = delete;
  ResolvedRun& operator=(const ResolvedRun&) = delete;

  const std::filesystem::path& path() const { return path_; }  // a run directory or rank file
  bool imported() const { return !temporary_.empty(); }
  const std::vector<std::string>& notes() const { return notes_; }
  // What the user gave ("a.json, b.json" for several inputs): how reports name the run.
  const std::string& display() const { return display_; }
  // The rank file of `rank` in path(); NotFound when the run holds none.
  Result<std::filesystem::path> RankFile(int rank) const;
  // `message` (a warning or error about path()) naming the user's inputs instead of the
  // temporary import.
  std::string Describe(std::string message) const;

 private:
  std::filesystem::path path_;
  std::filesystem::path temporary_;
  std::vector<std::string> notes_;
  std::string display_;
};

// Several inputs must all be foreign traces of one run (Kineto files, one per rank).
Result<std::unique_ptr<ResolvedRun>> ResolveRun(const std::vector<std::filesystem::path>& inputs);

// What commands that analyze call with the inputs the user gave. A run directory or rank
// file is analyzed from its files (analyzer::AnalyzeRun). Other tools' traces (Kineto files,
// a directory of them, nsys exports) are read straight into the analysis, inputs in
// parallel (options.threads), without rank files: the same ranks, rows and meta `import`
// writes, so the report is the one `import` then `analyze` gives.
struct AnalyzedInputs {
  analyzer::Report report;
  std::vector<std::string> notes;  // the reading's: how ranks were chosen, what was left out
  bool foreign = false;            // read from other tools' traces
  std::filesystem::path run;       // the run directory or rank file, when not foreign
};
Result<AnalyzedInputs> AnalyzeInputs(const std::vector<std::filesystem::path>& inputs,
                                     const analyzer::AnalyzeOptions& options);

// What the viewer calls with what the user opened: every event streamed into `sink` (in
// the order ranks are read; analyzer::ViewEventSink). A run directory or rank file is
// streamed from its files (analyzer::StreamRunEvents), to be analyzed afterwards. Other
// tools' traces are read as AnalyzeInputs reads them, inputs in parallel, straight into the
// view and, in the same pass, the analysis: no rank files, nothing written.
struct ViewOptions {
  analyzer::AnalyzeOptions analyze;  // its classify rules class the view's events too
  int threads = 0;                   // ranks (run) or inputs (foreign) read at once; 0: per core
  // (ranks or inputs done, in all); may be called from the reading threads.
  std::function<void(int, int)> progress;
};
struct ViewedInputs {
  bool foreign = false;
  std::filesystem::path run;  // not foreign: the run directory or rank file
  std::string display;        // what the user gave ("a.json, b.json"), as reports name it
  std::vector<std::string> notes;     // the reading's (AnalyzedInputs::notes)
  std::vector<std::string> warnings;  // the view's: missing ranks, skipped rows
  // Foreign only: the analysis of the same pass, or why it failed (the events are shown
  // either way).
  std::shared_ptr<const analyzer::Report> report;
  std::string analysis_error;
};
Result<ViewedInputs> ViewInputs(const std::vector<std::filesystem::path>& inputs, const ViewOptions& options,
                                analyzer::ViewEventSink& sink);

struct ChromeExportResult {
  uint64_t events = 0;  // trace events written, flows and metadata included
  int ranks = 0;
};

// Writes `run` (a run directory or rank file) as Chrome trace-event JSON: one process per
// rank, one thread per lane, NVTX nesting, flows from each launch to its kernel, rank
// metadata; gzip-compressed when `out` ends in ".gz". Written to a temporary file and
// renamed, so `out` is never half-written.
Result<ChromeExportResult> ExportChromeTrace(const std::filesystem::path& run, const std::filesystem::path& out);

}  // namespace rankscope::interop
