// `rankscope analyze RUN... [--format F] [--out FILE] [--skip-steps N] [--steps A..B] ...`.
#include <unistd.h>

#include <memory>

#include "cli/analyze_command.h"
#include "cli/messages.h"
#include "cli/profile.h"
#include "cli/subcommand.h"

namespace rankscope::cli {

Subcommand AddAnalyzeSubcommand(CLI::App& parent) {
  auto flags = std::make_shared<AnalysisFlags>();
  AnalyzeRequest& request = flags->request;
  CLI::App* app = parent.add_subcommand(
      "analyze", "Compute overlap, comm/compute ratio, utilization, waits and stragglers of a profiled run");
  app->allow_extras();
  app->add_option("RUN", request.inputs,
                  "Run directory (or one rank file) written by rankscope profile; or another tool's traces of one "
                  "run: PyTorch profiler JSON files (one per rank, or their directory) or an Nsight Systems SQLite "
                  "export")
      ->required()
      ->type_name("RUN");
  app->add_option("--format", request.format, "text (terminal), json, md (Markdown) or html")
      ->type_name("FORMAT")
      ->capture_default_str();
  app->add_option("--out", request.out, "Write the report to FILE instead of standard output")->type_name("FILE");
  AddAnalysisOptions(*app, *flags);
  app->add_flag("--critical-path", request.critical_path,
                "Also follow each step's critical path across ranks: what set the step time, who waited for "
                "whom, and what-if projections (keeps the events of the steps it follows in memory)");
  app->add_option("--what-if", request.what_ifs,
                  "With the critical path, also project work whose name contains NAME (any case) FACTOR times "
                  "faster; repeatable; implies --critical-path")
      ->type_name("NAME=FACTOR");
  app->add_option("--what-if-bandwidth", request.bandwidth_what_ifs,
                  "With the critical path, also project communication bandwidth FACTOR times higher (x2 is always "
                  "projected); repeatable; implies --critical-path")
      ->type_name("FACTOR");
  app->add_option("--critical-path-steps", request.critical_path_steps,
                  "Follow at most N aggregated steps, every 2^k-th by number (default 200; 0: every step); implies "
                  "--critical-path")
      ->type_name("N");
  app->footer(
      "Exit status: 0 with a complete report; 1 when the report was written but ranks were missing or had\n"
      "no device activity (each named on stderr); 2 on bad options or an unusable run.");

  return MakeSubcommand(app, false, [flags](const CommandTail&) {
    return RunAnalyze(flags->Parsed(), stdout, stderr, ::isatty(STDERR_FILENO) == 1);
  });
}

}  // namespace rankscope::cli
