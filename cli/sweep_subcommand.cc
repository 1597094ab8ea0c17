// `rankscope sweep --ranks 1,2,4 -o DIR [--trace LIST] [--force] -- CMD ARGS...`.
#include <fmt/format.h>

#include <memory>

#include "cli/messages.h"
#include "cli/scaling_command.h"
#include "cli/subcommand.h"

namespace rankscope::cli {
namespace {

class SweepHelpFormatter : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App* /*app*/, std::string name) const override {
    return fmt::format("Usage: {} --ranks 1,2,4 -o DIR [OPTIONS] -- CMD ARGS...\n", name);
  }
};

struct SweepFlags {
  SweepRequest request;
  std::string output_dir;
  CLI::Option* output_option = nullptr;
  AnalysisFlags analysis;
};

}  // namespace

Subcommand AddSweepSubcommand(CLI::App& parent) {
  auto flags = std::make_shared<SweepFlags>();
  SweepRequest& request = flags->request;
  CLI::App* app = parent.add_subcommand(
      "sweep", "Profile a command at several world sizes (DIR/n<N>/), then print the scaling table");
  app->allow_extras();
  app->add_option("--ranks", request.sizes, "World sizes to run, e.g. 1,2,4 (two or more)")
      ->required()
      ->type_name("LIST");
  flags->output_option =
      app->add_option("-o,--output", flags->output_dir, "Sweep directory: one run per size in DIR/n<N>/")
          ->type_name("DIR");
  app->add_option("--trace", request.trace_list, "What to record: a comma list of nvtx, cuda, nccl")
      ->type_name("LIST")
      ->capture_default_str();
  app->add_flag("--force", request.force, "Reuse existing DIR/n<N>/ runs: delete their rank files first");
  AddAnalysisOptions(*app, flags->analysis);
  app->formatter(std::make_shared<SweepHelpFormatter>());
  app->footer(
      "Each size runs as N local ranks with torchrun's variables (like rankscope profile -n N). The sweep\n"
      "ends by writing DIR/scaling.json (a baseline for rankscope compare), DIR/scaling.html and\n"
      "DIR/scaling.png. A failing run stops the sweep with its exit code; earlier runs are kept.");

  return MakeSubcommand(app, true, [flags](const CommandTail& tail) {
    SweepRequest parsed = flags->request;
    if (flags->output_option->count() > 0) parsed.output_dir = flags->output_dir;
    parsed.command = tail.args;
    parsed.analysis = flags->analysis.Parsed();
    return RunSweep(parsed, ProcessProfileContext(), stdout);
  });
}

}  // namespace rankscope::cli
