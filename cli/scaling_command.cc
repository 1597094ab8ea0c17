#include "cli/scaling_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <iterator>
#include <sstream>

#include "compare/comparable_json.h"
#include "interop/interop.h"
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

bool HasRankFiles(const fs::path& dir) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind("rank-", 0) == 0 && name.size() > 12 && name.ends_with(".sqlite")) return true;
  }
  return false;
}

// "n4" → 4; nothing for other names.
std::optional<int> SweepSizeOf(const std::string& name) {
  if (name.size() < 2 || name.front() != 'n') return std::nullopt;
  int size = 0;
  const auto [end, ec] = std::from_chars(name.data() + 1, name.data() + name.size(), size);
  if (ec != std::errc() || end != name.data() + name.size() || size <= 0) return std::nullopt;
  return size;
}

// The n<N>/ runs of a sweep directory, smallest first.
std::vector<std::pair<int, fs::path>> SweepRuns(const fs::path& dir) {
  std::vector<std::pair<int, fs::path>> runs;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::optional<int> size = SweepSizeOf(it->path().filename().string());
    if (size && it->is_directory(ec) && HasRankFiles(it->path())) runs.emplace_back(*size, it->path());
  }
  std::sort(runs.begin(), runs.end());
  return runs;
}

// `source` names the run in warnings and reports: the user's path, not a temporary import's.
Result<compare::ComparableRun> AnalyzeToComparable(const fs::path& run, const std::string& source,
                                                    const analyzer::AnalyzeOptions& options,
                                                    std::vector<std::string>* warnings, bool* partial) {
  Result<analyzer::Report> report = analyzer::AnalyzeRun(run, options);
  if (!report.ok()) return report.status();
  for (const std::string& warning : report->warnings) warnings->push_back(source + ": " + warning);
  if (!report->run.missing_ranks.empty() || !report->run.ranks_without_activity.empty()) *partial = true;
  compare::ComparableRun comparable = compare::MakeComparable(*report);
  comparable.source = source;
  return comparable;
}

Result<compare::ComparableSet> LoadWithPartial(const std::string& path, const analyzer::AnalyzeOptions& options,
                                                std::vector<std::string>* warnings, bool* partial) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (ec || !fs::exists(status)) return NotFound(fmt::format("{}: no such file or directory", Printable(path)));
  compare::ComparableSet set;
  set.source = path;
  const std::vector<std::pair<int, fs::path>> sweep =
      fs::is_directory(status) && !HasRankFiles(path) ? SweepRuns(path) : std::vector<std::pair<int, fs::path>>();
  if (!sweep.empty()) {
    set.sweep = true;
    for (const auto& [size, dir] : sweep) {
      RS_ASSIGN_OR_RETURN(compare::ComparableRun run, AnalyzeToComparable(dir, dir.string(), options, warnings, partial));
      set.runs.push_back(std::move(run));
    }
    // Scaling efficiency joins the figures once there are two sizes to relate.
    if (set.runs.size() >= 2) {
      RS_ASSIGN_OR_RETURN(compare::ScalingTable table, compare::ComputeScalingOfRuns(std::move(set.runs)));
      set.runs = std::move(table.runs);
    }
    return set;
  }
  Result<interop::TraceFormat> format = interop::DetectTraceFormat(path);
  if (!format.ok()) {
    if (!fs::is_directory(status)) return format.status();
    return InvalidArgument(fmt::format(
        "{}: neither a run (no rank-*.sqlite files), a sweep (no n<N>/ run directories) nor a directory of PyTorch "
        "profiler traces",
        Printable(path)));
  }
  if (*format == interop::TraceFormat::kRankscopeReport) {
    std::ifstream file(path, std::ios::binary);
    std::ostringstream text;
    text << file.rdbuf();
    if (!file && !file.eof()) return IoError(fmt::format("{}: cannot read", Printable(path)));
    return compare::ParseComparableJson(text.str(), path);
  }
  // A run, or another tool's traces of one run (imported for the analysis).
  RS_ASSIGN_OR_RETURN(std::unique_ptr<interop::ResolvedRun> run, interop::ResolveRun({fs::path(path)}));
  for (const std::string& note : run->notes()) warnings->push_back(path + ": " + note);
  const size_t warned = warnings->size();
  Result<compare::ComparableRun> comparable = AnalyzeToComparable(run->path(), path, options, warnings, partial);
  for (size_t i = warned; i < warnings->size(); ++i) (*warnings)[i] = run->Describe(std::move((*warnings)[i]));
  if (!comparable.ok()) return Status(comparable.status().code(), run->Describe(comparable.status().message()));
  set.runs.push_back(std::move(*comparable));
  return set;
}

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

fs::path SweepRunDir(const fs::path& sweep_dir, int world_size) { return sweep_dir / fmt::format("n{}", world_size); }

Result<compare::ComparableSet> LoadComparableSet(const std::string& path, const analyzer::AnalyzeOptions& options,
                                                  std::vector<std::string>* warnings) {
  bool partial = false;
  return LoadWithPartial(path, options, warnings, &partial);
}

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
    Result<compare::ComparableSet> set = LoadWithPartial(path, *options, &warnings, &partial);
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
  Result<compare::ComparableSet> baseline = LoadComparableSet(request.baseline, *options, &warnings);
  if (!baseline.ok()) {
    PrintError(err, "--baseline " + baseline.status().message());
    return kExitUsage;
  }
  Result<compare::ComparableSet> current = LoadComparableSet(request.current, *options, &warnings);
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
  for (const auto& [path, text] :
       {std::pair{request.junit, report::ComparisonToJUnit(*comparison)},
        std::pair{request.markdown, report::ComparisonToMarkdown(*comparison)}}) {
    if (path.empty()) continue;
    if (Status written = WriteFileAtomically(path, text); !written.ok()) {
      PrintError(err, written.message());
      return kExitUsage;
    }
    PrintNote(err, fmt::format("wrote {}", path));
  }
  return comparison->Regressed() ? kExitRegression : 0;
}

Result<std::vector<int>> ParseSweepSizes(std::string_view text) {
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
  if (sizes.size() < 2) {
    return InvalidArgument(
        fmt::format("--ranks {}: a sweep needs two or more world sizes, e.g. --ranks 1,2,4", Printable(text)));
  }
  std::sort(sizes.begin(), sizes.end());
  return sizes;
}

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
    Result<compare::ComparableRun> run = AnalyzeToComparable(run_dir, run_dir.string(), *options, &warnings, &partial);
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
