// `rankscope import FILE... -o RUN [--force]`.
#include <memory>

#include "cli/interop_command.h"
#include "cli/subcommand.h"

namespace rankscope::cli {

Subcommand AddImportSubcommand(CLI::App& parent) {
  auto request = std::make_shared<ImportRequest>();
  CLI::App* app = parent.add_subcommand(
      "import", "Convert PyTorch profiler JSON or Nsight Systems SQLite traces into a rankscope run");
  app->allow_extras();
  app->add_option("FILE", request->inputs,
                  "PyTorch profiler JSON traces, Kineto's or the older format (.json, .json.gz; one per rank, "
                  "from distributedInfo or a file name like x_rank1.json) or a directory of them; Nsight Systems "
                  "SQLite exports (nsys export --type sqlite; one rank per process)")
      ->required()
      ->type_name("FILE");
  app->add_option("-o,--output", request->output, "The run directory to write (created if missing)")
      ->required()
      ->type_name("RUN");
  app->add_flag("--force", request->force, "Replace the rank files the run directory already holds");
  app->footer(
      "rankscope analyze, scale, compare and export, and rankscope-gui, also take such traces directly.\n"
      "Exit status: 0 on success; 2 with one error line, and no rank file written, otherwise (also when the\n"
      "traces hold no event rankscope imports: the line says what was left out).");
  return MakeSubcommand(app, false, [request](const CommandTail&) { return RunImport(*request, stderr); });
}

}  // namespace rankscope::cli
