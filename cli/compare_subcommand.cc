// `rankscope compare --baseline BASE.json CURRENT [--tolerance 5%] [--metric NAME[:TOL]]...
// [--junit FILE] [--markdown FILE] [--force]`.
#include <memory>

#include "cli/messages.h"
#include "cli/scaling_command.h"
#include "cli/subcommand.h"

namespace rankscope::cli {
namespace {

struct CompareFlags {
  CompareRequest request;
  AnalysisFlags analysis;
};

}  // namespace

Subcommand AddCompareSubcommand(CLI::App& parent) {
  auto flags = std::make_shared<CompareFlags>();
  CompareRequest& request = flags->request;
  CLI::App* app = parent.add_subcommand(
      "compare", "Check a run or sweep against a saved baseline; exit 1 when a metric regressed (the CI gate)");
  app->allow_extras();
  app->add_option("--baseline", request.baseline,
                  "The baseline: a JSON report of rankscope analyze or scale (or a run or sweep directory)")
      ->required()
      ->type_name("BASE.json");
  app->add_option("CURRENT", request.current, "A run directory, a sweep directory or a JSON report")
      ->required()
      ->type_name("CURRENT");
  app->add_option("--tolerance", request.tolerance, "Relative change allowed before a metric regresses")
      ->type_name("PCT")
      ->capture_default_str();
  app->add_option("--metric", request.metrics,
                  "Check only these metrics, each with its own tolerance if given (e.g. throughput:3%); repeatable")
      ->type_name("NAME[:TOL]");
  app->add_option("--junit", request.junit, "Also write the verdicts as JUnit XML")->type_name("FILE");
  app->add_option("--markdown", request.markdown, "Also write the comparison as Markdown (a PR comment)")
      ->type_name("FILE");
  app->add_flag("--force", request.force, "Compare even when the workloads differ (program, batch, world sizes)");
  AddAnalysisOptions(*app, flags->analysis);
  app->footer(
      "A metric regresses when it changed beyond the tolerance in its bad direction and a Mann-Whitney U\n"
      "test on the per-step samples says the change is real (p < 0.01).\n"
      "Metrics: throughput, step_time_ns, efficiency, exposed_comm_ns, comm_compute_ratio (checked by\n"
      "default), overlap_pct, utilization_pct, compute_ns, comm_ns, overlap_ns, wait_ns.\n"
      "Exit status: 0 no regression; 1 a regression; 2 bad input.");

  return MakeSubcommand(app, false, [flags](const CommandTail&) {
    CompareRequest parsed = flags->request;
    parsed.analysis = flags->analysis.Parsed();
    return RunCompare(parsed, stdout, stderr);
  });
}

}  // namespace rankscope::cli
