// `rankscope ab --a CMD --b CMD --ranks 1,2 -o DIR`: interleaved A/B runs judged on their
// pairs (docs/metrics.md §8). Testable without a process: the profile context and the output
// stream are parameters.
#pragma once

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "cli/analyze_command.h"
#include "cli/profile.h"

namespace rankscope::cli {

struct AbRequest {
  std::string a, b;            // command lines, split into words as a shell would (no expansion of $(...))
  std::string sizes = "1";     // --ranks: one or more world sizes
  int pairs = 10;              // --pairs: at most this many pairs per world size
  std::optional<std::string> budget;  // --budget: "90s", "30m", "1h"; no new pair would end past it
  std::optional<std::string> output_dir;
  std::string trace_list{kDefaultTraceList};
  std::string tolerance = "2%";
  std::vector<std::string> metrics;  // NAME or NAME:TOLERANCE
  std::string junit, markdown;       // files to write; "" = none
  bool force = false;
  AnalyzeRequest analysis;
};

// "90s", "30m", "1.5h", "45" (seconds) → seconds; errors name the text.
Result<double> ParseBudget(std::string_view text);
// A command line split into words as sh would split it, with quotes; command substitution
// and undefined variables are refused.
Result<std::vector<std::string>> SplitCommandLine(std::string_view text);

// Runs the pairs (A B, then B A, ...: each pair's runs of every world size back to back) into
// DIR/pair-<k>/{a,b}/n<N>, the runs' own messages going to DIR/ab.log; stops early once
// every verdict is decided (from compare::PlanLooks's first look on: the chance of a false
// alarm over all looks stays under 1%), or when the budget would be passed; prints
// the verdict table. Returns 0 (nothing regressed), kExitRegression (1), or kExitUsage (2)
// for bad options and failing runs (one line naming the side and the world size).
int RunAb(const AbRequest& request, const ProfileContext& context, std::FILE* out);

}  // namespace rankscope::cli
