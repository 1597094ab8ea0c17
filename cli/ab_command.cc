#include "cli/ab_command.h"

#include <fmt/format.h>
#include <unistd.h>
#include <wordexp.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <tuple>

#include "base/format.h"
#include "base/text.h"
#include "cli/messages.h"
#include "cli/output_file.h"
#include "cli/profile_command.h"
#include "cli/scaling_command.h"
#include "compare/ab.h"
#include "compare/run_set.h"
#include "compare/scaling.h"
#include "report/ab_report.h"

namespace rankscope::cli {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Side {
  char name;  // 'a' or 'b'
  std::vector<std::string> command;
};

fs::path RunDir(const fs::path& dir, int pair, char side, int size) {
  return dir / fmt::format("pair-{}", pair) / std::string(1, side) / fmt::format("n{}", size);
}

}  // namespace

Result<double> ParseBudget(std::string_view text) {
  const std::string s(text);
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  const std::string unit = s.substr(used);
  const double scale = unit.empty() || unit == "s" ? 1 : unit == "m" ? 60 : unit == "h" ? 3600 : 0;
  if (used == 0 || scale == 0 || !(value > 0) || !std::isfinite(value)) {
    return InvalidArgument(fmt::format("--budget {}: expected a time such as 90s, 30m or 1.5h", Printable(text)));
  }
  return value * scale;
}

Result<std::vector<std::string>> SplitCommandLine(std::string_view text) {
  wordexp_t words{};
  const std::string line(text);
  const int code = wordexp(line.c_str(), &words, WRDE_NOCMD | WRDE_UNDEF);
  if (code != 0) {
    if (code != WRDE_NOSPACE) wordfree(&words);
    const char* why = code == WRDE_BADCHAR  ? "it holds a character a shell treats specially (| & ; < > ( ) { } or a newline)"
                      : code == WRDE_CMDSUB ? "command substitution $(...) is not run"
                      : code == WRDE_BADVAL ? "it names an undefined variable"
                      : code == WRDE_SYNTAX ? "unbalanced quotes"
                                            : "it cannot be split";
    return InvalidArgument(fmt::format("{}: {}", Printable(text), why));
  }
  std::vector<std::string> out(words.we_wordv, words.we_wordv + words.we_wordc);
  wordfree(&words);
  if (out.empty()) return InvalidArgument("an empty command");
  return out;
}

int RunAb(const AbRequest& request, const ProfileContext& context, std::FILE* out) {
  std::FILE* err = context.messages;
  auto refuse = [&](const Status& status) {
    PrintError(err, status.message());
    return kExitUsage;
  };
  Result<std::vector<int>> sizes = ParseWorldSizes(request.sizes, 1);
  if (!sizes.ok()) return refuse(sizes.status());
  Result<std::vector<std::string>> a = SplitCommandLine(request.a);
  if (!a.ok()) return refuse(Status(a.status().code(), "--a " + a.status().message()));
  Result<std::vector<std::string>> b = SplitCommandLine(request.b);
  if (!b.ok()) return refuse(Status(b.status().code(), "--b " + b.status().message()));
  // A program that is not there fails here, not at the first pair's run.
  const std::optional<std::string> path_variable = GetVariable(context.environment, "PATH");
  for (const auto& [option, words] : {std::pair{"--a", &*a}, std::pair{"--b", &*b}}) {
    Result<std::filesystem::path> program = ResolveCommand(words->front(), path_variable);
    if (!program.ok()) {
      return refuse(Status(program.status().code(), fmt::format("{}: {}", option, program.status().message())));
    }
  }
  if (request.pairs < 1) return refuse(InvalidArgument(fmt::format("--pairs {}: at least 1", request.pairs)));
  std::optional<double> budget_s;
  if (request.budget) {
    Result<double> parsed = ParseBudget(*request.budget);
    if (!parsed.ok()) return refuse(parsed.status());
    budget_s = *parsed;
  }
  compare::AbOptions options;
  // Overall 99%, as compare's alpha of 0.01, shared out over the looks this run may take.
  const compare::AbLooks looks = compare::PlanLooks(0.99, request.pairs);
  options.confidence = looks.per_look_confidence;
  Result<double> tolerance = compare::ParseTolerance(request.tolerance);
  if (!tolerance.ok()) return refuse(InvalidArgument("--tolerance " + tolerance.status().message()));
  options.tolerance = *tolerance;
  for (const std::string& text : request.metrics) {
    Result<compare::MetricTolerance> metric = compare::ParseMetricTolerance(text);
    if (!metric.ok()) return refuse(metric.status());
    options.metrics.push_back(*metric);
  }
  if (Result<std::vector<compare::MetricTolerance>> checked = compare::AbMetrics(options); !checked.ok()) {
    return refuse(checked.status());
  }
  Result<analyzer::AnalyzeOptions> analyze = MakeAnalyzeOptions(request.analysis);
  if (!analyze.ok()) return refuse(analyze.status());
  if (!request.output_dir) return refuse(InvalidArgument("-o DIR is required: where the runs go"));
  for (const auto& [option, path] : {std::pair{"--junit", request.junit}, std::pair{"--markdown", request.markdown}}) {
    if (path.empty()) continue;
    if (Status writable = CheckOutputPath(option, path); !writable.ok()) return refuse(writable);
  }
  const fs::path dir = *request.output_dir;
  std::error_code ec;
  if (fs::exists(dir / "pair-0", ec) && !request.force) {
    return refuse(AlreadyExists(fmt::format("{} holds A/B runs already; --force replaces them", dir.string())));
  }
  fs::create_directories(dir, ec);
  if (ec) return refuse(IoError(fmt::format("-o {}: cannot create: {}", dir.string(), ec.message())));
  const fs::path log_path = dir / "ab.log";
  std::FILE* log = std::fopen(log_path.c_str(), "a");
  if (log == nullptr) return refuse(IoError(fmt::format("{}: cannot write", log_path.string())));
  ProfileContext quiet = context;
  quiet.messages = log;

  const Side sides[2] = {{'a', *a}, {'b', *b}};
  // Values per (world size, metric): index = pair.
  std::map<std::pair<int, std::string>, compare::PairedMetric> paired;
  std::vector<compare::AbRow> rows;
  const auto started = Clock::now();
  double slowest_pair_s = 0;
  int pairs_done = 0;
  std::string stop_reason = fmt::format("{} pairs, as --pairs asked", request.pairs);
  for (int pair = 0; pair < request.pairs; ++pair) {
    const double elapsed = std::chrono::duration<double>(Clock::now() - started).count();
    if (budget_s && pair > 0 && elapsed + slowest_pair_s > *budget_s) {
      stop_reason = fmt::format("{} pairs: another would pass the --budget of {}", pair, *request.budget);
      break;
    }
    const auto pair_started = Clock::now();
    // A B, then B A: a drift within a pair weighs on both sides alike over two pairs.
    const int first = pair % 2;
    std::map<std::tuple<int, char>, compare::ComparableRun> runs;
    for (const int size : *sizes) {
      for (int k = 0; k < 2; ++k) {
        const Side& side = sides[(first + k) % 2];
        const fs::path run_dir = RunDir(dir, pair, side.name, size);
        PrintInfo(err, fmt::format("ab: pair {}, {} at {} rank{}", pair + 1, static_cast<char>(std::toupper(side.name)),
                                   size, size == 1 ? "" : "s"));
        ProfileRequest profile;
        profile.output_dir = run_dir.string();
        profile.trace_list = request.trace_list;
        profile.force = request.force;
        profile.local_ranks = std::to_string(size);
        profile.command = side.command;
        // The command's own output goes to the log beside the collector's messages: ab prints
        // only its verdicts. The children inherit the descriptor.
        std::fflush(stdout);
        std::fflush(log);
        const int saved_stdout = dup(STDOUT_FILENO);
        if (saved_stdout >= 0) dup2(fileno(log), STDOUT_FILENO);
        const int code = RunProfile(profile, quiet);
        std::fflush(stdout);
        if (saved_stdout >= 0) {
          dup2(saved_stdout, STDOUT_FILENO);
          close(saved_stdout);
        }
        if (code != 0) {
          std::fclose(log);
          PrintError(err, fmt::format("{}'s {}-rank run of pair {} failed (exit code {}); its messages are in {}",
                                      static_cast<char>(std::toupper(side.name)), size, pair + 1, code,
                                      log_path.string()));
          return kExitUsage;
        }
        std::vector<std::string> warnings;
        bool partial = false;
        Result<compare::ComparableRun> run =
            compare::AnalyzeToComparable(run_dir, run_dir.string(), *analyze, &warnings, &partial);
        if (!run.ok()) {
          std::fclose(log);
          PrintError(err, run.status().message());
          return kExitUsage;
        }
        runs[{size, side.name}] = std::move(*run);
      }
    }
    // With two or more world sizes, each side's runs of this pair are a scaling study of
    // their own: its efficiency at each size is one more metric, paired by round.
    if (sizes->size() >= 2) {
      for (const Side& side : sides) {
        std::vector<compare::ComparableRun> study;
        for (const int size : *sizes) study.push_back(runs[{size, side.name}]);
        Result<compare::ScalingTable> table = compare::ComputeScalingOfRuns(std::move(study));
        if (!table.ok()) continue;  // no efficiency this pair; the other metrics still count
        for (compare::ComparableRun& run : table->runs) runs[{run.workload.world_size, side.name}] = std::move(run);
      }
    }
    for (const auto& [key, run] : runs) {
      const auto& [size, side] = key;
      for (const compare::ComparableMetric& metric : run.metrics) {
        compare::PairedMetric& values = paired[{size, metric.name}];
        values.world_size = size;
        values.metric = metric.name;
        std::vector<double>& column = side == 'a' ? values.a : values.b;
        column.resize(static_cast<size_t>(pair), NAN);  // a metric a run lacked stays unpaired
        column.push_back(metric.value);
      }
    }
    for (auto& [key, values] : paired) {
      values.a.resize(static_cast<size_t>(pair + 1), NAN);
      values.b.resize(static_cast<size_t>(pair + 1), NAN);
    }
    ++pairs_done;
    slowest_pair_s = std::max(slowest_pair_s, std::chrono::duration<double>(Clock::now() - pair_started).count());
    std::vector<compare::PairedMetric> all;
    for (const auto& [key, values] : paired) {
      // Efficiency is measured against the smallest size, where it is 1 by definition.
      if (values.metric == "efficiency" && values.world_size == sizes->front()) continue;
      all.push_back(values);
    }
    Result<std::vector<compare::AbRow>> judged = compare::JudgePairs(all, options);
    if (!judged.ok()) {
      std::fclose(log);
      return refuse(judged.status());
    }
    rows = std::move(*judged);
    if (looks.IsLook(pairs_done) && pairs_done < request.pairs && compare::AllDecided(rows)) {
      stop_reason = fmt::format("{} pairs: every verdict was decided", pairs_done);
      break;
    }
  }
  std::fclose(log);

  report::AbSummary summary{request.a, request.b, stop_reason,
                            std::chrono::duration<double>(Clock::now() - started).count(), options.confidence, rows};
  PrintText(out, report::AbToText(summary));
  if (!WriteReportFiles(err, {{request.junit, report::AbToJUnit(summary)},
                              {request.markdown, report::AbToMarkdown(summary)}})) {
    return kExitUsage;
  }
  const bool regressed = compare::AnyRegressed(rows);
  return regressed ? kExitRegression : 0;
}

}  // namespace rankscope::cli
