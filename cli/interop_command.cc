#include "cli/interop_command.h"

#include <fmt/format.h>

#include <filesystem>
#include <memory>

#include "interop/interop.h"
#include "base/text.h"
#include "cli/analyze_command.h"
#include "cli/messages.h"
#include "cli/output_file.h"
#include "cli/profile.h"

namespace rankscope::cli {
namespace fs = std::filesystem;

int RunImport(const ImportRequest& request, std::FILE* err) {
  if (request.output.empty()) {
    PrintError(err, "give the run directory to write with -o DIR");
    return kExitUsage;
  }
  std::vector<fs::path> inputs(request.inputs.begin(), request.inputs.end());
  Result<interop::ImportResult> imported =
      interop::ImportTraces(inputs, request.output, interop::ImportOptions{.overwrite = request.force});
  if (!imported.ok()) {
    PrintError(err, imported.status().message());
    return kExitUsage;
  }
  for (const std::string& note : imported->notes) PrintNote(err, note);
  PrintInfo(err, fmt::format("imported {} rank{} ({} events) into {}", imported->rank_files.size(),
                             imported->rank_files.size() == 1 ? "" : "s", imported->events, request.output));
  return 0;
}

int RunExport(const ExportRequest& request, std::FILE* err) {
  if (request.chrome.empty()) {
    PrintError(err, "give the file to write with --chrome FILE.json (or FILE.json.gz)");
    return kExitUsage;
  }
  if (Status writable = CheckOutputPath("--chrome", request.chrome); !writable.ok()) {
    PrintError(err, writable.message());
    return kExitUsage;
  }
  Result<std::unique_ptr<interop::ResolvedRun>> run = ResolveInputs(request.inputs, err);
  if (!run.ok()) {
    PrintError(err, run.status().message());
    return kExitUsage;
  }
  Result<interop::ChromeExportResult> exported = interop::ExportChromeTrace((*run)->path(), request.chrome);
  if (!exported.ok()) {
    PrintError(err, (*run)->Describe(exported.status().message()));
    return kExitUsage;
  }
  PrintNote(err, fmt::format("wrote {} trace events of {} rank{} to {} (open it in https://ui.perfetto.dev or "
                             "chrome://tracing)",
                             exported->events, exported->ranks, exported->ranks == 1 ? "" : "s", request.chrome));
  return 0;
}

}  // namespace rankscope::cli
