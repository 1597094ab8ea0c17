// `rankscope export RUN --chrome out.json[.gz]`.
#include <memory>

#include "cli/interop_command.h"
#include "cli/subcommand.h"

namespace rankscope::cli {

Subcommand AddExportSubcommand(CLI::App& parent) {
  auto request = std::make_shared<ExportRequest>();
  CLI::App* app = parent.add_subcommand(
      "export", "Write a run as Chrome trace-event JSON for Perfetto UI and chrome://tracing");
  app->allow_extras();
  app->add_option("RUN", request->inputs,
                  "Run directory (or one rank file); or another tool's traces of one run, imported on the fly")
      ->required()
      ->type_name("RUN");
  app->add_option("--chrome", request->chrome,
                  "The Chrome trace JSON to write; gzip-compressed when it ends in .gz")
      ->required()
      ->type_name("FILE.json");
  app->footer(
      "One process per rank, one thread per lane (GPU stream, CPU thread, communicator), NVTX nesting, flows\n"
      "from each launch to its kernel, and the ranks' metadata. Exit status: 0, or 2 with one error line.");
  return MakeSubcommand(app, false, [request](const CommandTail&) { return RunExport(*request, stderr); });
}

}  // namespace rankscope::cli
