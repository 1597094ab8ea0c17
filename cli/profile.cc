#include "cli/profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <ctime>

#include "analyzer/hang.h"
#include "cli/hang_watch.h"
#include "cli/launcher.h"
#include "report/report_writers.h"
#include "cli/messages.h"
#include "cli/run_summary.h"
#include "trace/run_dir.h"

namespace rankscope::cli {
namespace fs = std::filesystem;

namespace {

// Everything checked before the run directory is touched, so that a mistake costs nothing.
struct CheckedRequest {
  TraceSelection trace{};
  std::optional<int> local_ranks{};
  fs::path collector_library{};
  fs::path pytorch_hook{};
  int master_port = 0;
  std::optional<std::chrono::milliseconds> hang_timeout{};
};

// --hang-timeout: seconds, more than 0 and at most a week.
Result<std::chrono::milliseconds> ParseHangTimeout(const std::string& text) {
  double seconds = 0;
  size_t used = 0;
  try {
    seconds = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || !(seconds > 0) || seconds > 7 * 24 * 3600.0) {
    return InvalidArgument(fmt::format("--hang-timeout '{}': expected seconds, more than 0 (e.g. 600)", text));
  }
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000.0 + 0.5));
}

// Like a shell: 127 when the program does not exist, 126 when exec refuses it. Anything
// else (no pipe, no fork) is rankscope's own failure.
int CommandErrorCode(const Status& status) {
  switch (status.code()) {
    case StatusCode::kNotFound:
      return kExitCommandNotFound;
    case StatusCode::kInvalidArgument:
      return kExitCannotExecute;
    default:
      return kExitUsage;
  }
}

std::string Outcome(const ProfileRequest& request, const LaunchResult& result, const std::string& failure) {
  std::string outcome;
  if (!request.local_ranks) {
    outcome = result.processes.front().status.Describe();
  } else if (!failure.empty()) {
    outcome = failure;
  } else if (result.first_failure) {
    outcome = fmt::format("rank {} was the first to end unsuccessfully ({})", *result.first_failure,
                          result.processes[*result.first_failure].status.Describe());
  } else {
    outcome = fmt::format("all {} ranks exited with code 0", result.processes.size());
  }
  if (!result.forwarded_signals.empty()) {
    std::string names;
    for (const ForwardedSignal& signal : result.forwarded_signals) {
      names += (names.empty() ? "" : ", ") + SignalName(signal.received);
      if (signal.sent != signal.received) names += " as " + SignalName(signal.sent);
    }
    outcome += fmt::format(", after rankscope passed on {}", names);
  }
  return outcome;
}

}  // namespace

int RunProfile(const ProfileRequest& request, const ProfileContext& context) {
  std::FILE* out = context.messages;
  const auto usage_error = [out](const Status& status) {
    PrintError(out, status.message());
    return kExitUsage;
  };

  if (request.command.empty()) {
    PrintError(out, "missing command: put it after '--', e.g. rankscope profile -- python train.py");
    return kExitUsage;
  }
  CheckedRequest checked;
  {
    Result<TraceSelection> trace = ParseTraceList(request.trace_list);
    if (!trace.ok()) return usage_error(trace.status().WithContext("--trace"));
    checked.trace = *trace;
  }
  if (request.local_ranks) {
    Result<int> count = ParseLocalRankCount(*request.local_ranks);
    if (!count.ok()) return usage_error(count.status());
    checked.local_ranks = *count;
  }
  if (request.hang_timeout) {
    Result<std::chrono::milliseconds> timeout = ParseHangTimeout(*request.hang_timeout);
    if (!timeout.ok()) return usage_error(timeout.status());
    checked.hang_timeout = *timeout;
  }
  {
    Result<fs::path> library = FindCollectorLibrary(context.collector);
    if (!library.ok()) return usage_error(library.status());
    checked.collector_library = *library;
  }
  if (request.pytorch) {
    Result<fs::path> hook = PytorchHookDirectory(checked.collector_library);
    if (!hook.ok()) return usage_error(hook.status());
    checked.pytorch_hook = *hook;
  }
  {
    const std::optional<std::string> path_variable = GetVariable(context.environment, "PATH");
    Result<fs::path> program = ResolveCommand(request.command.front(), path_variable);
    if (!program.ok()) {
      PrintError(out, program.status().message());
      return CommandErrorCode(program.status());
    }
  }
  if (checked.local_ranks) {
    Result<int> port = FindFreeLocalPort();
    if (!port.ok()) return usage_error(port.status());
    checked.master_port = *port;
  }

  PreparedRunDir run_dir;
  if (request.output_dir) {
    Result<PreparedRunDir> prepared = PrepareRunDir(*request.output_dir, request.force);
    if (!prepared.ok()) return usage_error(prepared.status());
    run_dir = std::move(prepared).value();
  } else {
    Result<fs::path> created = CreateDefaultRunDir(context.working_directory, std::time(nullptr));
    if (!created.ok()) return usage_error(created.status());
    run_dir = PreparedRunDir{.path = *created, .created = true, .removed_files = {}};
  }

  const std::string run_id = trace::GenerateRunId();
  const InjectionSettings settings{.run_dir = run_dir.path,
                                   .run_id = run_id,
                                   .trace = checked.trace,
                                   .collector_library = checked.collector_library,
                                   .pytorch_hook = checked.pytorch_hook,
                                   .progress_file = checked.hang_timeout.has_value()};
  const Environment injected = InjectionEnvironment(context.environment, settings);
  std::vector<ProcessSpec> specs;
  if (checked.local_ranks) {
    for (int rank = 0; rank < *checked.local_ranks; ++rank) {
      const LocalRank local{.rank = rank, .world_size = *checked.local_ranks, .master_port = checked.master_port};
      specs.push_back(ProcessSpec{.argv = request.command, .env = LocalRankEnvironment(injected, local)});
    }
  } else {
    specs.push_back(ProcessSpec{.argv = request.command, .env = injected});
  }

  PrintInfo(out, fmt::format("profiling into {} (run id {}; tracing {}{}{})", run_dir.path.string(), run_id,
                             checked.trace.ToList(), request.pytorch ? " and PyTorch" : "",
                             checked.local_ranks ? fmt::format("; {} local ranks", *checked.local_ranks) : ""));
  if (!run_dir.removed_files.empty()) {
    const auto rank_files = std::count_if(run_dir.removed_files.begin(), run_dir.removed_files.end(),
                                          [](const fs::path& file) {
                                            return trace::ParseRankFileName(file.filename().string()).is_rank_file;
                                          });
    const auto companions = static_cast<std::ptrdiff_t>(run_dir.removed_files.size()) - rank_files;
    PrintNote(out, fmt::format("--force deleted {} rank file(s) of an earlier run{}", rank_files,
                               companions > 0 ? fmt::format(" and {} -wal/-shm/-journal file(s)", companions) : ""));
  }
  for (const std::string& note : InjectionReplacementNotes(context.environment, settings)) PrintNote(out, note);

  LaunchOptions options;
  options.stop_others_on_failure = checked.local_ranks.has_value();
  options.stop_grace = context.stop_grace;
  options.note = [out](const std::string& line) { PrintNote(out, line); };
  std::optional<HangWatch> watch;
  if (checked.hang_timeout) {
    // Every stop is an orderly one: stop all ranks, not only the others of a failed one.
    watch.emplace(run_dir.path, run_id, *checked.hang_timeout, HangWatch::Clock::now());
    options.watch = [&watch] { return watch->Hung(HangWatch::Clock::now()); };
    options.watch_interval = context.hang_check_interval;
  }
  Result<LaunchResult> launched = Launch(specs, options);
  if (!launched.ok()) {
    // The command never ran: leave no empty directory behind (remove() keeps a full one).
    if (run_dir.created) {
      std::error_code ignored;
      fs::remove(run_dir.path, ignored);
    }
    PrintError(out, launched.status().message());
    return CommandErrorCode(launched.status());
  }
  const LaunchResult& result = *launched;

  if (result.stopped_as_hung) {
    const double quiet_s = std::chrono::duration<double>(watch->quiet_for()).count();
    PrintInfo(out, fmt::format("no rank completed a step or collective for {:.1f} s (--hang-timeout): stopped the "
                               "job (SIGTERM, then SIGKILL after {:.1f} s)",
                               quiet_s, std::chrono::duration<double>(context.stop_grace).count()));
    if (watch->ranks_seen() == 0) {
      PrintNote(out, "no rank reported any progress: the collector found nothing to count (no collective or "
                     "step yet), or it is not in the ranks");
    }
    Result<std::optional<analyzer::HangReport>> diagnosis = analyzer::DiagnoseRun(run_dir.path);
    if (!diagnosis.ok()) {
      PrintNote(out, "no diagnosis: " + diagnosis.status().message());
    } else if (*diagnosis) {
      PrintText(out, report::HangReportToText(**diagnosis));
    }
    const SummaryHeader header{.run_dir = run_dir.path,
                               .run_id = run_id,
                               .outcome = fmt::format("stopped as hung after {:.1f} s without progress", quiet_s)};
    PrintText(out, FormatRunSummary(header, CollectRunStats(run_dir.path)));
    return kExitHang;
  }

  std::string failure;
  if (checked.local_ranks) {
    failure = DescribeRankFailure(result, context.stop_grace);
    if (!failure.empty()) PrintInfo(out, failure);
  }
  const SummaryHeader header{
      .run_dir = run_dir.path, .run_id = run_id, .outcome = Outcome(request, result, failure)};
  PrintText(out, FormatRunSummary(header, CollectRunStats(run_dir.path)));
  return result.ExitCode();
}

}  // namespace rankscope::cli
