#include "compare/run_set.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>

#include "base/text.h"
#include "compare/scaling.h"
#include "interop/interop.h"
#include "trace/run_dir.h"

namespace rankscope::compare {
namespace fs = std::filesystem;
namespace {

// "n4" → 4; nothing for other names.
std::optional<int> SweepSizeOf(const std::string& name) {
  if (name.size() < 2 || name.front() != 'n') return std::nullopt;
  int size = 0;
  const auto [end, ec] = std::from_chars(name.data() + 1, name.data() + name.size(), size);
  if (ec != std::errc() || end != name.data() + name.size() || size <= 0) return std::nullopt;
  return size;
}

Result<ComparableSet> LoadSweep(const fs::path& path, const std::vector<SweepRun>& sweep,
                                const analyzer::AnalyzeOptions& options, std::vector<std::string>* warnings,
                                bool* partial) {
  ComparableSet set;
  set.source = path.string();
  set.sweep = true;
  for (const SweepRun& run : sweep) {
    RS_ASSIGN_OR_RETURN(ComparableRun comparable,
                        AnalyzeToComparable(run.directory, run.directory.string(), options, warnings, partial));
    set.runs.push_back(std::move(comparable));
  }
  // Scaling efficiency joins the figures once there are two sizes to relate.
  if (set.runs.size() >= 2) {
    RS_ASSIGN_OR_RETURN(ScalingTable table, ComputeScalingOfRuns(std::move(set.runs)));
    set.runs = std::move(table.runs);
  }
  return set;
}

Result<ComparableSet> ReadJsonReport(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  std::ostringstream text;
  text << file.rdbuf();
  if (!file && !file.eof()) return IoError(fmt::format("{}: cannot read", Quoted(path)));
  return ParseComparableJson(text.str(), path.string());
}

// The comparable figures of a report; its warnings, each prefixed with `source`, join
// `warnings`.
ComparableRun ComparableOfReport(const analyzer::Report& report, const std::string& source,
                                 std::vector<std::string>* warnings, bool* partial) {
  for (const std::string& warning : report.warnings) warnings->push_back(source + ": " + warning);
  const bool partial_run = !report.run.missing_ranks.empty() || !report.run.ranks_without_activity.empty();
  if (partial_run && partial != nullptr) *partial = true;
  ComparableRun comparable = MakeComparable(report);
  comparable.source = source;
  return comparable;
}

// A run, or another tool's traces of one run (read straight into the analysis).
Result<ComparableSet> LoadRun(const fs::path& path, const analyzer::AnalyzeOptions& options,
                              std::vector<std::string>* warnings, bool* partial) {
  RS_ASSIGN_OR_RETURN(interop::AnalyzedInputs analyzed, interop::AnalyzeInputs({path}, options));
  for (const std::string& note : analyzed.notes) warnings->push_back(path.string() + ": " + note);
  ComparableSet set;
  set.source = path.string();
  set.runs.push_back(ComparableOfReport(analyzed.report, path.string(), warnings, partial));
  return set;
}

}  // namespace

fs::path SweepRunDir(const fs::path& sweep_dir, int world_size) { return sweep_dir / fmt::format("n{}", world_size); }

std::vector<SweepRun> SweepRuns(const fs::path& dir) {
  std::vector<SweepRun> runs;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::optional<int> size = SweepSizeOf(it->path().filename().string());
    std::error_code type_ec;
    if (size && it->is_directory(type_ec) && trace::HasRankFiles(it->path())) {
      runs.push_back(SweepRun{*size, it->path()});
    }
  }
  std::sort(runs.begin(), runs.end(), [](const SweepRun& a, const SweepRun& b) {
    return a.world_size != b.world_size ? a.world_size < b.world_size : a.directory < b.directory;
  });
  return runs;
}

Result<ComparableRun> AnalyzeToComparable(const fs::path& run, const std::string& source,
                                          const analyzer::AnalyzeOptions& options,
                                          std::vector<std::string>* warnings, bool* partial) {
  Result<analyzer::Report> report = analyzer::AnalyzeRun(run, options);
  if (!report.ok()) return report.status();
  return ComparableOfReport(*report, source, warnings, partial);
}

Result<ComparableSet> LoadComparableSet(const fs::path& path, const analyzer::AnalyzeOptions& options,
                                        std::vector<std::string>* warnings, bool* partial) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (!fs::exists(status)) {
    if (ec && ec != std::errc::no_such_file_or_directory) {
      return IoError(fmt::format("{}: cannot read: {}", Quoted(path), ec.message()));
    }
    return NotFound(fmt::format("{}: no such file or directory", Quoted(path)));
  }
  const bool directory = fs::is_directory(status);
  if (directory && !trace::HasRankFiles(path)) {
    const std::vector<SweepRun> sweep = SweepRuns(path);
    if (!sweep.empty()) return LoadSweep(path, sweep, options, warnings, partial);
  }
  Result<interop::TraceFormat> format = interop::DetectTraceFormat(path);
  if (!format.ok()) {
    if (!directory) return format.status();
    return InvalidArgument(fmt::format(
        "{}: neither a run (no rank-*.sqlite files), a sweep (no n<N>/ run directories) nor a directory of PyTorch "
        "profiler traces",
        Quoted(path)));
  }
  if (*format == interop::TraceFormat::kRankscopeReport) return ReadJsonReport(path);
  return LoadRun(path, options, warnings, partial);
}

}  // namespace rankscope::compare
