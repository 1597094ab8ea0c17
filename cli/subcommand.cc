#include "cli/subcommand.h"

#include <fmt/format.h>

#include "cli/messages.h"

namespace rankscope::cli {

std::string DescribeExtras(const CLI::App& app) {
  const std::vector<std::string> extras = app.remaining();
  if (extras.empty()) return "";
  const std::string& first = extras.front();
  const std::string name = app.get_name();
  if (!first.empty() && first.front() == '-') {
    return fmt::format("unknown option '{}' for rankscope {}; see rankscope {} --help", OneLine(first), name,
                       name);
  }
  return fmt::format(
      "unexpected argument '{}': put the command after '--' (rankscope {} [OPTIONS] -- CMD ARGS...)",
      OneLine(first), name);
}

Subcommand MakeSubcommand(CLI::App* app, bool takes_command, std::function<int(const CommandTail& tail)> run) {
  Subcommand subcommand;
  subcommand.app = app;
  subcommand.takes_command = takes_command;
  subcommand.run = [app, run = std::move(run)](const CommandTail& tail) {
    if (const std::string extras = DescribeExtras(*app); !extras.empty()) {
      PrintError(stderr, extras);
      return kExitUsage;
    }
    return run(tail);
  };
  return subcommand;
}

AnalyzeRequest AnalysisFlags::Parsed() const {
  AnalyzeRequest parsed = request;
  if (skip_option != nullptr && skip_option->count() > 0) parsed.skip_steps = skip_steps;
  return parsed;
}

void AddAnalysisOptions(CLI::App& app, AnalysisFlags& flags) {
  AnalyzeRequest& request = flags.request;
  flags.skip_option =
      app.add_option("--skip-steps", flags.skip_steps,
                     "Warm-up steps reported but left out of the aggregates (default 1; 0 with --steps)")
          ->type_name("N");
  app.add_option("--steps", request.steps, "Aggregate only steps numbered A to B (inclusive): A..B, A.., ..B or N")
      ->type_name("A..B");
  app.add_option("--comm-pattern", request.comm_patterns,
                 "Count kernels/ranges whose name contains TEXT (any case) as communication; repeatable")
      ->type_name("TEXT");
  app.add_option("--compute-pattern", request.compute_patterns,
                 "Count kernels/ranges whose name contains TEXT (any case) as compute; repeatable")
      ->type_name("TEXT");
  app.add_option("--step-name", request.step_names,
                 "Also take NVTX ranges with this name as steps (besides step, train_step, ProfilerStep#N)")
      ->type_name("NAME");
  app.add_option("--threads", request.threads, "Rank files (or other tools' traces) read at once (default: one per CPU)")->type_name("N");
}

}  // namespace rankscope::cli
