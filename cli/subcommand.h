// How main.cc wires subcommands: each lives in its own file (profile_subcommand.cc, later
// analyze, scale, compare, export, import, sweep), registers its options on the CLI11 app
// and returns a Subcommand that runs it once parsing is done.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

#include "cli/analyze_command.h"
#include "cli/profile.h"

namespace rankscope::cli {

// What followed the first "--" on the command line; main.cc splits it off before CLI11
// parses the rest, so no option of rankscope's can ever swallow the command's own options.
struct CommandTail {
  bool present = false;  // "--" was given
  std::vector<std::string> args;
};

struct Subcommand {
  CLI::App* app = nullptr;
  bool takes_command = false;  // accepts "-- CMD ARGS..."
  // Runs the parsed subcommand; returns the process exit code. Errors were printed.
  std::function<int(const CommandTail& tail)> run;
};

// Unknown options and stray arguments of a subcommand (left in app.remaining() because
// subcommands allow extras) as one error line; "" when there are none.
std::string DescribeExtras(const CLI::App& app);

// A Subcommand whose run refuses extras first (one error line, exit 2), then calls `run`.
Subcommand MakeSubcommand(CLI::App* app, bool takes_command, std::function<int(const CommandTail& tail)> run);

// The analysis options that analyze, scale, compare and sweep share: --skip-steps, --steps,
// --comm-pattern, --compute-pattern, --step-name, --threads.
struct AnalysisFlags {
  AnalyzeRequest request;
  int skip_steps = 1;
  CLI::Option* skip_option = nullptr;
  // The request with --skip-steps applied only when it was given.
  AnalyzeRequest Parsed() const;
};
void AddAnalysisOptions(CLI::App& app, AnalysisFlags& flags);

// What this process offers `rankscope profile` and `sweep`: the collector's places, the
// environment, the working directory.
ProfileContext ProcessProfileContext();

Subcommand AddProfileSubcommand(CLI::App& parent);
Subcommand AddAnalyzeSubcommand(CLI::App& parent);
Subcommand AddScaleSubcommand(CLI::App& parent);
Subcommand AddCompareSubcommand(CLI::App& parent);
Subcommand AddSweepSubcommand(CLI::App& parent);
Subcommand AddAbSubcommand(CLI::App& parent);
Subcommand AddImportSubcommand(CLI::App& parent);
Subcommand AddExportSubcommand(CLI::App& parent);

}  // namespace rankscope::cli
