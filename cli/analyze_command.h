// `rankscope analyze`: what the options ask for, checked, and the run that prints or writes
// the report. Testable without a process: streams are parameters.
#pragma once

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "analyzer/analyze.h"
#include "interop/interop.h"
#include "base/status.h"

namespace rankscope::cli {

inline constexpr int kExitPartial = 1;  // a report was written, but ranks were missing or idle

enum class ReportFormat { kText, kJson, kMarkdown, kHtml };

struct AnalyzeRequest {
  // A run directory or rank file; or other tools' traces of one run: Kineto JSON files (one
  // per rank, or a directory of them) or an Nsight Systems SQLite export, imported on the fly.
  std::vector<std::string> inputs;
  std::string format = "text";
  std::string out;                      // "" = stdout
  std::optional<int> skip_steps;        // nullopt: 1, or 0 with --steps
  std::string steps;                    // "A..B", "A..", "..B" or "N"; "" = all
  std::vector<std::string> comm_patterns;
  std::vector<std::string> compute_patterns;
  std::vector<std::string> step_names;  // extra step range names
  int threads = 0;
  bool critical_path = false;           // --critical-path
  std::vector<std::string> what_ifs;    // --what-if TEXT=FACTOR (implies --critical-path)
  std::vector<double> bandwidth_what_ifs;  // --what-if-bandwidth FACTOR (implies --critical-path)
  std::optional<int64_t> critical_path_steps;  // --critical-path-steps N (0: every step)
};

Result<ReportFormat> ParseReportFormat(const std::string& text);
// "A..B" (inclusive), "A..", "..B" or "N" into (first, last).
Result<std::pair<std::optional<int64_t>, std::optional<int64_t>>> ParseStepRange(const std::string& text);
// The analyzer's options for a request; errors name the bad option.
Result<analyzer::AnalyzeOptions> MakeAnalyzeOptions(const AnalyzeRequest& request);

// The run `inputs` name (interop::ResolveRun): foreign traces are imported into a
// temporary run, the import's notes printed to `err`.
Result<std::unique_ptr<interop::ResolvedRun>> ResolveInputs(const std::vector<std::string>& inputs, std::FILE* err);

// Analyzes, then prints the report to `out` or writes it to request.out (replaced
// atomically: a failed run never leaves half a file). Errors go to `err` as one line.
// Returns 0, kExitPartial, or 2 on bad input.
int RunAnalyze(const AnalyzeRequest& request, std::FILE* out, std::FILE* err, bool progress_to_terminal);

}  // namespace rankscope::cli
