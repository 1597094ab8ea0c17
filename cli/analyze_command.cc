#include "cli/analyze_command.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "analyzer/hang.h"
#include "report/report_writers.h"
#include "base/text.h"
#include "cli/messages.h"
#include "cli/output_file.h"
#include "cli/profile.h"

#ifndef RANKSCOPE_VERSION
#define RANKSCOPE_VERSION "unknown"
#endif

namespace rankscope::cli {
namespace fs = std::filesystem;
namespace {

std::optional<int64_t> ParseStepNumber(std::string_view text) {
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

const char* FormatName(ReportFormat format) {
  switch (format) {
    case ReportFormat::kText: return "text";
    case ReportFormat::kJson: return "JSON";
    case ReportFormat::kMarkdown: return "Markdown";
    case ReportFormat::kHtml: return "HTML";
  }
  return "";
}

}  // namespace

Result<ReportFormat> ParseReportFormat(const std::string& text) {
  if (text == "text") return ReportFormat::kText;
  if (text == "json") return ReportFormat::kJson;
  if (text == "md" || text == "markdown") return ReportFormat::kMarkdown;
  if (text == "html") return ReportFormat::kHtml;
  return InvalidArgument(fmt::format("--format {}: expected text, json, md or html", Printable(text)));
}

Result<std::pair<std::optional<int64_t>, std::optional<int64_t>>> ParseStepRange(const std::string& text) {
  using Range = std::pair<std::optional<int64_t>, std::optional<int64_t>>;
  const std::string usage = fmt::format("--steps {}: expected A..B, A.., ..B or N (step numbers)", Printable(text));
  const size_t dots = text.find("..");
  if (dots == std::string::npos) {
    const std::optional<int64_t> single = ParseStepNumber(text);
    if (!single) return InvalidArgument(usage);
    return Range{single, single};
  }
  const std::string_view first(text.data(), dots);
  const std::string_view last(text.data() + dots + 2, text.size() - dots - 2);
  if (first.empty() && last.empty()) return InvalidArgument(usage);
  Range range;
  if (!first.empty()) {
    range.first = ParseStepNumber(first);
    if (!range.first) return InvalidArgument(usage);
  }
  if (!last.empty()) {
    range.second = ParseStepNumber(last);
    if (!range.second) return InvalidArgument(usage);
  }
  if (range.first && range.second && *range.first > *range.second) {
    return InvalidArgument(fmt::format("--steps {}: the first step is after the last", Printable(text)));
  }
  return range;
}

Result<analyzer::AnalyzeOptions> MakeAnalyzeOptions(const AnalyzeRequest& request) {
  analyzer::AnalyzeOptions options;
  options.tool_version = RANKSCOPE_VERSION;
  options.threads = request.threads;
  if (request.threads < 0) return InvalidArgument(fmt::format("--threads {}: must be 0 or more", request.threads));
  if (!request.steps.empty()) {
    RS_ASSIGN_OR_RETURN(auto range, ParseStepRange(request.steps));
    options.first_step = range.first;
    options.last_step = range.second;
  }
  // An explicit step range means exactly those steps, unless warm-up is asked for too.
  options.skip_steps = request.skip_steps.value_or(request.steps.empty() ? 1 : 0);
  if (options.skip_steps < 0) {
    return InvalidArgument(fmt::format("--skip-steps {}: must be 0 or more", options.skip_steps));
  }
  for (const auto* patterns : {&request.comm_patterns, &request.compute_patterns, &request.step_names}) {
    for (const std::string& pattern : *patterns) {
      if (pattern.empty()) return InvalidArgument("an empty pattern or step name matches everything; give some text");
    }
  }
  options.classify.comm_patterns = request.comm_patterns;
  options.classify.compute_patterns = request.compute_patterns;
  options.step_names.insert(options.step_names.end(), request.step_names.begin(), request.step_names.end());
  options.critical_path = request.critical_path || !request.what_ifs.empty() ||
                          !request.bandwidth_what_ifs.empty() || request.critical_path_steps;
  for (double factor : request.bandwidth_what_ifs) {
    if (!(factor > 0) || !std::isfinite(factor)) {
      return InvalidArgument(fmt::format("--what-if-bandwidth {}: expected a factor above 0 (e.g. 4: four times the "
                                         "bandwidth)",
                                         factor));
    }
    options.bandwidth_what_ifs.push_back(factor);
  }
  if (request.critical_path_steps) {
    if (*request.critical_path_steps < 0) {
      return InvalidArgument(fmt::format("--critical-path-steps {}: must be 0 (every step) or more",
                                         *request.critical_path_steps));
    }
    options.critical_path_steps = static_cast<size_t>(*request.critical_path_steps);
  }
  for (const std::string& what_if : request.what_ifs) {
    const size_t eq = what_if.rfind('=');
    const std::string text = eq == std::string::npos ? std::string() : what_if.substr(0, eq);
    double factor = 0;
    if (eq != std::string::npos) {
      const std::string number = what_if.substr(eq + 1);
      const char* begin = number.c_str();
      char* end = nullptr;
      factor = std::strtod(begin, &end);
      if (number.empty() || end != begin + number.size()) factor = 0;
    }
    if (text.empty() || !(factor > 0) || !std::isfinite(factor)) {
      return InvalidArgument(fmt::format("--what-if {}: expected NAME=FACTOR, work whose name contains NAME "
                                         "FACTOR times faster (e.g. gemm=2)",
                                         Printable(what_if)));
    }
    options.what_ifs.push_back({text, factor});
  }
  return options;
}

Result<std::unique_ptr<interop::ResolvedRun>> ResolveInputs(const std::vector<std::string>& inputs, std::FILE* err) {
  std::vector<std::filesystem::path> paths(inputs.begin(), inputs.end());
  RS_ASSIGN_OR_RETURN(std::unique_ptr<interop::ResolvedRun> run, interop::ResolveRun(paths));
  for (const std::string& note : run->notes()) PrintNote(err, note);
  return run;
}

int RunAnalyze(const AnalyzeRequest& request, std::FILE* out, std::FILE* err, bool progress_to_terminal) {
  Result<ReportFormat> format = ParseReportFormat(request.format);
  if (!format.ok()) {
    PrintError(err, format.status().message());
    return kExitUsage;
  }
  Result<analyzer::AnalyzeOptions> options = MakeAnalyzeOptions(request);
  if (!options.ok()) {
    PrintError(err, options.status().message());
    return kExitUsage;
  }
  if (!request.out.empty()) {
    // Refuse an unwritable destination before the (possibly long) analysis.
    if (Status writable = CheckOutputPath("--out", request.out); !writable.ok()) {
      PrintError(err, writable.message());
      return kExitUsage;
    }
  }
  if (progress_to_terminal) {
    options->progress = [err](int done, int total) {
      PrintText(err, fmt::format("\rrankscope: read {}/{} rank files{}", done, total, done == total ? "\n" : ""));
    };
  }
  const std::vector<std::filesystem::path> paths(request.inputs.begin(), request.inputs.end());
  Result<interop::AnalyzedInputs> analyzed = interop::AnalyzeInputs(paths, *options);
  if (!analyzed.ok()) {
    // A run that hung before anything measurable still says who waited for whom.
    const auto is_rankscope_run = [&] {
      const Result<interop::TraceFormat> kind = interop::DetectTraceFormat(paths[0]);
      return kind.ok() && (*kind == interop::TraceFormat::kRankscopeRun || *kind == interop::TraceFormat::kRankscopeFile);
    };
    if (paths.size() == 1 && is_rankscope_run()) {
      Result<std::optional<analyzer::HangReport>> end = analyzer::DiagnoseRun(paths[0]);
      if (end.ok() && *end) {
        PrintText(err, *format == ReportFormat::kJson ? report::HangReportToJson(**end) + "\n"
                                                      : report::HangReportToText(**end));
      }
    }
    PrintError(err, analyzed.status().message());
    return kExitUsage;
  }
  for (const std::string& note : analyzed->notes) PrintNote(err, note);
  analyzer::Report* report = &analyzed->report;

  std::string text;
  switch (*format) {
    case ReportFormat::kText: text = report::ReportToText(*report); break;
    case ReportFormat::kJson: text = report::ReportToJson(*report); break;
    case ReportFormat::kMarkdown: text = report::ReportToMarkdown(*report); break;
    case ReportFormat::kHtml: text = report::ReportToHtml(*report); break;
  }
  // The text report ends with its warnings; elsewhere they go to stderr.
  const bool warnings_in_output = *format == ReportFormat::kText && request.out.empty();
  if (!warnings_in_output) {
    for (const std::string& warning : report->warnings) PrintText(err, fmt::format("rankscope: warning: {}\n", OneLine(warning)));
  }
  if (!EmitReport(out, err, request.out, text, fmt::format("{} report", FormatName(*format)))) return kExitUsage;
  const bool partial = !report->run.missing_ranks.empty() || !report->run.ranks_without_activity.empty();
  return partial ? kExitPartial : 0;
}

}  // namespace rankscope::cli
