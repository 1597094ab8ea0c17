// How main.cc wires subcommands: each lives in its own file (profile_subcommand.cc, later
// analyze, scale, compare, export, import, sweep), registers its options on the CLI11 app
// and returns a Subcommand that runs it once parsing is done.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

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

Subcommand AddProfileSubcommand(CLI::App& parent);
Subcommand AddAnalyzeSubcommand(CLI::App& parent);

}  // namespace rankscope::cli
