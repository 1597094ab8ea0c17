// `rankscope analyze RUN [--format F] [--out FILE] [--skip-steps N] [--steps A..B] ...`.
#include <unistd.h>

#include <memory>

#include "cli/analyze_command.h"
#include "cli/messages.h"
#include "cli/profile.h"
#include "cli/subcommand.h"

namespace rankscope::cli {
namespace {

struct AnalyzeFlags {
  AnalyzeRequest request;
  int skip_steps = 1;
  CLI::Option* skip_option = nullptr;
};

}  // namespace

Subcommand AddAnalyzeSubcommand(CLI::App& parent) {
  auto flags = std::make_shared<AnalyzeFlags>();
  AnalyzeRequest& request = flags->request;
  CLI::App* app = parent.add_subcommand(
      "analyze", "Compute overlap, comm/compute ratio, utilization, waits and stragglers of a profiled run");
  app->allow_extras();
  app->add_option("RUN", request.run, "Run directory (or one rank file) written by rankscope profile")
      ->required()
      ->type_name("RUN");
  app->add_option("--format", request.format, "text (terminal), json, md (Markdown) or html")
      ->type_name("FORMAT")
      ->capture_default_str();
  app->add_option("--out", request.out, "Write the report to FILE instead of standard output")->type_name("FILE");
  flags->skip_option =
      app->add_option("--skip-steps", flags->skip_steps,
                      "Warm-up steps reported but left out of the aggregates (default 1; 0 with --steps)")
          ->type_name("N");
  app->add_option("--steps", request.steps, "Aggregate only steps numbered A to B (inclusive): A..B, A.., ..B or N")
      ->type_name("A..B");
  app->add_option("--comm-pattern", request.comm_patterns,
                  "Count kernels/ranges whose name contains TEXT (any case) as communication; repeatable")
      ->type_name("TEXT");
  app->add_option("--compute-pattern", request.compute_patterns,
                  "Count kernels/ranges whose name contains TEXT (any case) as compute; repeatable")
      ->type_name("TEXT");
  app->add_option("--step-name", request.step_names,
                  "Also take NVTX ranges with this name as steps (besides step, train_step, ProfilerStep#N)")
      ->type_name("NAME");
  app->add_option("--threads", request.threads, "Rank files read at once (default: one per CPU)")->type_name("N");
  app->footer(
      "Exit status: 0 with a complete report; 1 when the report was written but ranks were missing or had\n"
      "no device activity (each named on stderr); 2 on bad options or an unusable run.");

  Subcommand subcommand;
  subcommand.app = app;
  subcommand.run = [app, flags](const CommandTail&) {
    if (const std::string extras = DescribeExtras(*app); !extras.empty()) {
      PrintError(stderr, extras);
      return kExitUsage;
    }
    AnalyzeRequest parsed = flags->request;
    if (flags->skip_option->count() > 0) parsed.skip_steps = flags->skip_steps;
    return RunAnalyze(parsed, stdout, stderr, ::isatty(STDERR_FILENO) == 1);
  };
  return subcommand;
}

}  // namespace rankscope::cli
