#include "cli/scaling_command.h"

#include <fmt/format.h>

#include <algorithm>

#include "compare/run_set.h"
#include "compare/scaling.h"
#include "report/scaling_plot.h"
#include "report/scaling_report.h"
#include "base/text.h"
#include "cli/messages.h"
#include "cli/output_file.h"
#include "cli/profile_command.h"

namespace rankscope::cli {
namespace fs = std::filesystem;
namespace {

void PrintWarnings(std::FILE* err, const std::vector<std::string>& warnings) {
  for (const std::string& warning : warnings) PrintText(err, fmt::format("rankscope: warning: {}\n", OneLine(warning)));
}

std::string FormatScaling(ReportFormat format, const compare::ScalingTable& table, const std::string& version) {
  switch (format) {
    case ReportFormat::kText: return report::ScalingToText(table, version);
    case ReportFormat::kJson: return report::ScalingToJson(table, version);
    case ReportFormat::kMarkdown: return report::ScalingToMarkdown(table);
    case ReportFormat::kHtml: return report::ScalingToHtml(table, version);
  }
  return "";
}

// Checks every output path before any work; the first problem, or Ok.
Status CheckOutputs(const std::vector<std::pair<std::string, std::string>>& outputs) {
  for (const auto& [option, path] : outputs) {
    if (path.empty()) continue;
    RS_RETURN_IF_ERROR(CheckOutputPath(option, path));
  }
  return Status::Ok();
}

}  // namespace

int RunScale(const ScaleRequest& request, std::FILE* out, std::FILE* err) {
  Result<ReportFormat> format = ParseReportFormat(request.format);
  Result<analyzer::AnalyzeOptions> options = MakeAnalyzeOptions(request.analysis);
  Status checked = !format.ok() ? format.status() : !options.ok() ? options.status() : Status::Ok();
  if (checked.ok()) checked = CheckOutputs({{"--out", request.out}, {"--plot", request.plot}});
  if (checked.ok() && request.runs.empty()) checked = InvalidArgument("give two or more runs (or one sweep directory)");
  if (!checked.ok()) {
    PrintError(err, checked.message());
    return kExitUsage;
  }
  std::vector<compare::ComparableRun> runs;
  std::vector<std::string> warnings;
  bool partial = false;
  for (const std::string& path : request.runs) {
    Result<compare::ComparableSet> set = compare::LoadComparableSet(path, *options, &warnings, &partial);
    if (!set.ok()) {
      PrintWarnings(err, warnings);
      PrintError(err, set.status().message());
      return kExitUsage;
    }
    for (compare::ComparableRun& run : set->runs) runs.push_back(std::move(run));
  }
  PrintWarnings(err, warnings);
  Result<compare::ScalingTable> table = compare::ComputeScalingOfRuns(std::move(runs));
  if (!table.ok()) {
    PrintError(err, table.status().message());
    return kExitUsage;
  }
  const std::string text = FormatScaling(*format, *table, options->tool_version);
  if (!EmitReport(out, err, request.out, text, "scaling report")) return kExitUsage;
  if (!request.plot.empty()) {
    if (Status plotted = report::WriteScalingPlotPng(*table, request.plot); !plotted.ok()) {
      PrintError(err, plotted.message());
      return kExitUsage;
    }
    PrintNote(err, fmt::format("wrote the scaling plot to {}", request.plot));
  }
  return partial ? kExitPartial : 0;
}

int RunCompare(const CompareRequest& request, std::FILE* out, std::FILE* err) {
  compare::CompareOptions compare;
  Status checked = Status::Ok();
  if (Result<double> tolerance = compare::ParseTolerance(request.tolerance); tolerance.ok()) {
    compare.tolerance = *tolerance;
  } else {
    checked = InvalidArgument("--tolerance " + tolerance.status().message());
  }
  for (const std::string& metric : request.metrics) {
    if (!checked.ok()) break;
    Result<compare::MetricTolerance> parsed = compare::ParseMetricTolerance(metric);
    if (parsed.ok()) {
      compare.metrics.push_back(*parsed);
    } else {
      checked = parsed.status();
    }
  }
  compare.force = request.force;
  Result<analyzer::AnalyzeOptions> options = MakeAnalyzeOptions(request.analysis);
  if (checked.ok() && !options.ok()) checked = options.status();
  if (checked.ok()) checked = CheckOutputs({{"--junit", request.junit}, {"--markdown", request.markdown}});
  if (!checked.ok()) {
    PrintError(err, checked.message());
    return kExitUsage;
  }
  std::vector<std::string> warnings;
  // A partial run is warned about but does not change compare's verdict: no `partial`.
  Result<compare::ComparableSet> baseline = compare::LoadComparableSet(request.baseline, *options, &warnings, nullptr);
  if (!baseline.ok()) {
    PrintError(err, "--baseline " + baseline.status().message());
    return kExitUsage;
  }
  Result<compare::ComparableSet> current = compare::LoadComparableSet(request.current, *options, &warnings, nullptr);
  PrintWarnings(err, warnings);
  if (!current.ok()) {
    PrintError(err, current.status().message());
    return kExitUsage;
  }
  Result<compare::Comparison> comparison = compare::CompareWithBaseline(*baseline, *current, compare);
  if (!comparison.ok()) {
    PrintError(err, comparison.status().message());
    return kExitUsage;
  }
  PrintText(out, report::ComparisonToText(*comparison));
  if (!WriteReportFiles(err, {{request.junit, report::ComparisonToJUnit(*comparison)},
                              {request.markdown, report::ComparisonToMarkdown(*comparison)}})) {
    return kExitUsage;
  }
  return comparison->Regressed() ? kExitRegression : 0;
}

Result<std::vector<int>> ParseWorldSizes(std::string_view text, size_t at_least) {
  std::vector<int> sizes;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    Result<int> size = ParseLocalRankCount(text.substr(at, comma - at));
    if (!size.ok()) {
      return InvalidArgument(fmt::format("--ranks {}: {}", Printable(text), size.status().message()));
    }
    if (std::find(sizes.begin(), sizes.end(), *size) != sizes.end()) {
      return InvalidArgument(fmt::format("--ranks {}: {} is listed twice", Printable(text), *size));
    }
    sizes.push_back(*size);
    at = comma + 1;
  }
  if (sizes.size() < at_least) {
    return InvalidArgument(
        fmt::format("--ranks {}: a sweep needs two or more world sizes, e.g. --ranks 1,2,4", Printable(text)));
  }
  std::sort(sizes.begin(), sizes.end());
  return sizes;
}

Result<std::vector<int>> ParseSweepSizes(std::string_view text) { return ParseWorldSizes(text, 2); }

int RunSweep(const SweepRequest& request, const ProfileContext& context, std::FILE* out) {
  std::FILE* err = context.messages;
  Result<std::vector<int>> sizes = ParseSweepSizes(request.sizes);
  Result<analyzer::AnalyzeOptions> options = MakeAnalyzeOptions(request.analysis);
  Status checked = !sizes.ok() ? sizes.status() : !options.ok() ? options.status() : Status::Ok();
  if (checked.ok() && !request.output_dir) checked = InvalidArgument("-o DIR is required: where the runs go");
  if (checked.ok() && request.command.empty()) {
    checked = InvalidArgument("missing command: rankscope sweep --ranks 1,2,4 -o DIR -- CMD ARGS...");
  }
  if (checked.ok()) {
    // Refuse before anything runs, rather than after the first sizes took their time.
    for (const int size : *sizes) {
      const fs::path run = SweepRunDir(*request.output_dir, size);
      std::error_code ec;
      if (!request.force && fs::exists(run, ec)) {
        checked = AlreadyExists(fmt::format("{} exists (a sweep was run here); --force replaces its rank files",
                                            run.string()));
        break;
      }
    }
  }
  const fs::path dir = request.output_dir ? fs::path(*request.output_dir) : fs::path();
  if (checked.ok()) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) checked = IoError(fmt::format("-o {}: cannot create: {}", dir.string(), ec.message()));
  }
  if (checked.ok()) {
    checked = CheckOutputs({{"-o", (dir / "scaling.json").string()}});
  }
  if (!checked.ok()) {
    PrintError(err, checked.message());
    return kExitUsage;
  }

  for (const int size : *sizes) {
    PrintInfo(err, fmt::format("sweep: {} rank{} into {}", size, size == 1 ? "" : "s",
                               SweepRunDir(dir, size).string()));
    ProfileRequest profile;
    profile.output_dir = SweepRunDir(dir, size).string();
    profile.trace_list = request.trace_list;
    profile.force = request.force;
    profile.local_ranks = std::to_string(size);
    profile.command = request.command;
    const int code = RunProfile(profile, context);
    if (code != 0) {
      PrintError(err, fmt::format("sweep stopped: the {}-rank run failed (exit code {}); the runs before it are "
                                  "kept in {}",
                                  size, code, dir.string()));
      return code;
    }
  }

  std::vector<compare::ComparableRun> runs;
  std::vector<std::string> warnings;
  bool partial = false;
  for (const int size : *sizes) {
    const fs::path run_dir = SweepRunDir(dir, size);
    Result<compare::ComparableRun> run =
        compare::AnalyzeToComparable(run_dir, run_dir.string(), *options, &warnings, &partial);
    if (!run.ok()) {
      PrintWarnings(err, warnings);
      PrintError(err, run.status().message());
      return kExitUsage;
    }
    runs.push_back(std::move(*run));
  }
  PrintWarnings(err, warnings);
  Result<compare::ScalingTable> table = compare::ComputeScalingOfRuns(std::move(runs));
  if (!table.ok()) {
    PrintError(err, table.status().message());
    return kExitUsage;
  }
  PrintText(out, "\n" + report::ScalingToText(*table, options->tool_version));
  const std::string& version = options->tool_version;
  for (const auto& [name, text] : {std::pair{"scaling.json", report::ScalingToJson(*table, version)},
                                   std::pair{"scaling.html", report::ScalingToHtml(*table, version)}}) {
    if (Status written = WriteFileAtomically(dir / name, text); !written.ok()) {
      PrintError(err, written.message());
      return kExitUsage;
    }
  }
  if (Status plotted = report::WriteScalingPlotPng(*table, dir / "scaling.png"); !plotted.ok()) {
    PrintError(err, plotted.message());
    return kExitUsage;
  }
  PrintNote(err, fmt::format("wrote {0}/scaling.json (a baseline for rankscope compare), {0}/scaling.html and "
                             "{0}/scaling.png",
                             dir.string()));
  return partial ? kExitPartial : 0;
}

}  // namespace rankscope::cli
