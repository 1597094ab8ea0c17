// `rankscope scale`, `rankscope compare` and `rankscope sweep`: the scaling study and the CI
// regression gate (docs/metrics.md §6, §7). Testable without a process: streams are parameters.
#pragma once

#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "analyzer/analyze.h"
#include "compare/compare.h"
#include "compare/run_set.h"
#include "cli/analyze_command.h"
#include "cli/profile.h"

namespace rankscope::cli {

// compare's exit codes: 0 nothing regressed, 1 a regression, 2 bad input (kExitUsage).
inline constexpr int kExitRegression = 1;

// Where `rankscope sweep` puts the N-rank run: DIR/n<N>. What a path given to scale or
// compare holds is read by compare::LoadComparableSet (compare/run_set.h).
using compare::SweepRunDir;

struct ScaleRequest {
  std::vector<std::string> runs;
  std::string format = "text";
  std::string out;   // "" = stdout
  std::string plot;  // a PNG to write; "" = none
  AnalyzeRequest analysis;  // the analysis options (run, format and out unused)
};

// Prints or writes the scaling report; returns 0, kExitPartial (a run had missing or idle
// ranks), or kExitUsage after one error line.
int RunScale(const ScaleRequest& request, std::FILE* out, std::FILE* err);

struct CompareRequest {
  std::string baseline;
  std::string current;
  std::string tolerance = "5%";
  std::vector<std::string> metrics;  // NAME or NAME:TOLERANCE
  std::string junit, markdown;       // files to write; "" = none
  bool force = false;
  AnalyzeRequest analysis;
};

// Prints the comparison table; returns 0, kExitRegression or kExitUsage.
int RunCompare(const CompareRequest& request, std::FILE* out, std::FILE* err);

// "1,2,4" → {1, 2, 4}: at least `at_least` distinct sizes from 1 to kMaxLocalRanks, in
// ascending order. ParseSweepSizes: two or more.
Result<std::vector<int>> ParseWorldSizes(std::string_view text, size_t at_least);
Result<std::vector<int>> ParseSweepSizes(std::string_view text);

struct SweepRequest {
  std::string sizes;                   // --ranks
  std::optional<std::string> output_dir;
  std::string trace_list{kDefaultTraceList};
  bool force = false;
  std::vector<std::string> command;
  AnalyzeRequest analysis;
};

// Profiles the command at each world size into DIR/n<N>/, then prints the scaling table
// and writes DIR/scaling.{json,html,png}. Returns the first failing run's exit code (the
// runs before it are kept), kExitUsage for bad options, kExitPartial for partial runs, else 0.
int RunSweep(const SweepRequest& request, const ProfileContext& context, std::FILE* out);

}  // namespace rankscope::cli
