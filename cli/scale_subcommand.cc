// `rankscope scale RUN... [--format F] [--out FILE] [--plot FILE.png]`.
#include <memory>

#include "cli/messages.h"
#include "cli/scaling_command.h"
#include "cli/subcommand.h"

namespace rankscope::cli {
namespace {

struct ScaleFlags {
  ScaleRequest request;
  AnalysisFlags analysis;
};

}  // namespace

Subcommand AddScaleSubcommand(CLI::App& parent) {
  auto flags = std::make_shared<ScaleFlags>();
  ScaleRequest& request = flags->request;
  CLI::App* app = parent.add_subcommand(
      "scale", "Scaling efficiency across runs of one workload at different world sizes, with a projection");
  app->allow_extras();
  app->add_option("RUN", request.runs,
                  "Run directories, sweep directories (n<N>/ runs) or JSON reports; two or more world sizes")
      ->required()
      ->type_name("RUN");
  app->add_option("--format", request.format, "text (terminal), json (a compare baseline), md or html")
      ->type_name("FORMAT")
      ->capture_default_str();
  app->add_option("--out", request.out, "Write the report to FILE instead of standard output")->type_name("FILE");
  app->add_option("--plot", request.plot, "Also write the efficiency and throughput charts as a PNG")
      ->type_name("FILE.png");
  AddAnalysisOptions(*app, flags->analysis);
  app->footer(
      "Weak or strong scaling is chosen from the runs' batch sizes. Efficiency is projected to 2x and 4x the\n"
      "largest world size when three or more sizes were measured.\n"
      "Exit status: 0; 1 when a run had missing or idle ranks (named on stderr); 2 on bad input.");

  return MakeSubcommand(app, false, [flags](const CommandTail&) {
    ScaleRequest parsed = flags->request;
    parsed.analysis = flags->analysis.Parsed();
    return RunScale(parsed, stdout, stderr);
  });
}

}  // namespace rankscope::cli
