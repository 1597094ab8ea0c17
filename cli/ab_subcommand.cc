// `rankscope ab --a 'CMD_A' --b 'CMD_B' --ranks 1,2 -o DIR [--pairs K] [--budget TIME]`.
#include <memory>

#include "cli/ab_command.h"
#include "cli/subcommand.h"

namespace rankscope::cli {
namespace {

struct AbFlags {
  AbRequest request;
  std::string output_dir, budget;
  CLI::Option* output_option = nullptr;
  CLI::Option* budget_option = nullptr;
  AnalysisFlags analysis;
};

}  // namespace

Subcommand AddAbSubcommand(CLI::App& parent) {
  auto flags = std::make_shared<AbFlags>();
  AbRequest& request = flags->request;
  CLI::App* app = parent.add_subcommand(
      "ab", "Run two commands alternately under the collector and judge B against A on the pairs");
  app->allow_extras();
  app->add_option("--a", request.a, "Command A, quoted: the baseline (e.g. the base commit's build)")->required();
  app->add_option("--b", request.b, "Command B, quoted: the candidate")->required();
  app->add_option("--ranks", request.sizes, "World sizes, e.g. 1,2,4")->type_name("LIST")->capture_default_str();
  app->add_option("--pairs", request.pairs, "At most this many pairs (each: A and B at every world size)")
      ->capture_default_str();
  flags->budget_option =
      app->add_option("--budget", flags->budget, "Start no pair that would end past this time, e.g. 30m")
          ->type_name("TIME");
  flags->output_option = app->add_option("-o,--output", flags->output_dir, "Where the runs go: DIR/pair-<k>/{a,b}/n<N>/")
                             ->type_name("DIR");
  app->add_option("--tolerance", request.tolerance, "How large a change matters (relative)")->capture_default_str();
  app->add_option("--metric", request.metrics, "NAME[:TOLERANCE]: check exactly these metrics (repeatable)");
  app->add_option("--junit", request.junit, "Also write the verdicts as JUnit XML (regressions fail)")->type_name("FILE");
  app->add_option("--markdown", request.markdown, "Also write the verdicts as Markdown")->type_name("FILE");
  app->add_option("--trace", request.trace_list, "What to record: a comma list of nvtx, cuda, nccl")
      ->type_name("LIST")
      ->capture_default_str();
  app->add_flag("--force", request.force, "Replace the runs of an earlier rankscope ab in DIR");
  AddAnalysisOptions(*app, flags->analysis);
  app->footer(
      "Pairs alternate their order (A B, B A, ...), so drift of a shared machine weighs on both sides.\n"
      "Per metric and world size: the typical ratio B/A with its interval and a verdict (regressed,\n"
      "improved, unchanged, can't tell). It may stop early once every verdict is decided; each look's\n"
      "interval is widened so that over all looks a false alarm stays under 1%.\n"
      "Exit code 0: no regression; 1: a regression; 2: bad options or a failing run.");

  return MakeSubcommand(app, false, [flags](const CommandTail&) {
    AbRequest parsed = flags->request;
    if (flags->output_option->count() > 0) parsed.output_dir = flags->output_dir;
    if (flags->budget_option->count() > 0) parsed.budget = flags->budget;
    parsed.analysis = flags->analysis.Parsed();
    return RunAb(parsed, ProcessProfileContext(), stdout);
  });
}

}  // namespace rankscope::cli
