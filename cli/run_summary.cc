#include "cli/run_summary.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "base/format.h"
#include "base/text.h"
#include "trace/reader.h"
#include "trace/recording_lock.h"
#include "trace/run_dir.h"
#include "trace/schema.h"

namespace rankscope::cli {
namespace fs = std::filesystem;

namespace {

uintmax_t SizeOrZero(const fs::path& path) {
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  return ec ? 0 : size;
}

RankFileStats CountFile(const trace::RunFile& file, std::map<std::string, uint64_t>& drops_by_reason) {
  RankFileStats stats;
  stats.file_name = file.path.filename().string();
  stats.rank = file.meta.rank;
  stats.pid = file.meta.pid;
  fs::path wal = file.path;
  wal += "-wal";
  stats.bytes = SizeOrZero(file.path) + SizeOrZero(wal);
  if (auto status = file.meta.entries.find("cupti.status"); status != file.meta.entries.end()) {
    stats.cupti_status = status->second;
  }
  stats.closed_cleanly = file.meta.closed_cleanly;
  stats.python = file.meta.command_line.find("python") != std::string::npos;
  stats.pytorch_hook = file.meta.entries.contains("pytorch.hook");
  if (auto stopped = file.meta.entries.find(std::string(trace::meta_key::kRecordingStopped));
      stopped != file.meta.entries.end()) {
    stats.recording_stopped = stopped->second;
  }

  // LoadAll is the reader's fast path (parallel, about 5M events/s); one rank at a time
  // keeps memory at one rank's events.
  auto reader = trace::TraceReader::Open(file.path);
  if (!reader.ok()) {
    stats.read_error = reader.status().message();
    return stats;
  }
  auto trace = (*reader)->LoadAll();
  if (!trace.ok()) {
    stats.read_error = trace.status().message();
    return stats;
  }
  stats.events = trace->events.size();
  for (const trace::DropRecord& drop : trace->drops) {
    stats.dropped += drop.count;
    drops_by_reason[fmt::format("{}: {}", drop.source, drop.reason)] += drop.count;
  }
  return stats;
}

std::string RankList(const std::vector<int>& ranks) {
  std::string text;
  for (int rank : ranks) text += fmt::format("{}{}", text.empty() ? "" : ", ", rank);
  return text;
}

std::string Row(std::string_view label, const std::string& events, const std::string& dropped,
                const std::string& size, std::string_view note = "") {
  std::string row = fmt::format("    {:>7} {:>14} {:>10} {:>11}", label, events, dropped, size);
  if (!note.empty()) row += fmt::format("  {}", note);
  return row + "\n";
}

// "rank 3", or the file name of a process without a rank.
std::string FileLabel(const RankFileStats& stats) {
  return stats.rank ? fmt::format("rank {}", *stats.rank) : stats.file_name;
}

std::string RankRow(const RankFileStats& stats) {
  const std::string label = stats.rank ? std::to_string(*stats.rank) : "?";
  if (!stats.read_error.empty()) {
    return fmt::format("    {:>7}  unreadable: {}\n", label, Printable(stats.read_error, 160));
  }
  // Its counts end early: "dropped 0" alone would claim nothing was lost.
  const std::string_view note = !stats.recording_stopped.empty() ? "recording stopped early"
                                : !stats.closed_cleanly         ? "not closed"
                                                                : "";
  return Row(label, GroupThousands(stats.events), GroupThousands(stats.dropped),
             format::FormatBytes(static_cast<double>(stats.bytes)), note);
}

// One line per file whose writer stopped before the end, at most header.max_rank_rows of them.
void AppendStoppedEarly(const SummaryHeader& header, const RunStats& stats, std::string& out) {
  std::vector<const RankFileStats*> stopped;
  for (const auto* files : {&stats.ranks, &stats.unranked}) {
    for (const RankFileStats& file : *files) {
      if (!file.recording_stopped.empty()) stopped.push_back(&file);
    }
  }
  const size_t shown = std::min(stopped.size(), header.max_rank_rows);
  for (size_t i = 0; i < shown; ++i) {
    out += fmt::format("  stopped early:  {}: {}; nothing after it was recorded (the process ran on)\n",
                       FileLabel(*stopped[i]), Printable(stopped[i]->recording_stopped, 160));
  }
  if (shown < stopped.size()) {
    out += fmt::format("  stopped early:  {} more file(s) likewise (meta recording_stopped says why)\n",
                       stopped.size() - shown);
  }
}

void AppendRankTable(const SummaryHeader& header, const RunStats& stats, std::string& out) {
  uint64_t events = 0, dropped = 0;
  uintmax_t bytes = 0;
  for (const RankFileStats& rank : stats.ranks) {
    events += rank.events;
    dropped += rank.dropped;
    bytes += rank.bytes;
  }
  out += Row("rank", "events", "dropped", "size");
  const size_t shown = std::min(stats.ranks.size(), header.max_rank_rows);
  for (size_t i = 0; i < shown; ++i) out += RankRow(stats.ranks[i]);
  if (shown < stats.ranks.size()) {
    out += fmt::format("    {:>7} ({} more ranks, counted in the total)\n", "...", stats.ranks.size() - shown);
  }
  if (stats.ranks.size() > 1)
    out += Row("total", GroupThousands(events), GroupThousands(dropped), format::FormatBytes(static_cast<double>(bytes)));
}

void AppendUnranked(const RunStats& stats, std::string& out) {
  if (stats.unranked.empty()) return;
  uint64_t events = 0;
  uintmax_t bytes = 0;
  for (const RankFileStats& file : stats.unranked) {
    events += file.events;
    bytes += file.bytes;
  }
  out += fmt::format(
      "  unranked:       {} file{} of processes without a rank (rank-unknown-<pid>.sqlite): "
      "{} events, {}\n",
      stats.unranked.size(), stats.unranked.size() == 1 ? "" : "s", GroupThousands(events), format::FormatBytes(static_cast<double>(bytes)));
}

// Ranks that recorded nothing: said at once, with what would help, rather than at `analyze`.
void AppendEmptyRanks(const RunStats& stats, std::string& out) {
  if (stats.empty_ranks.empty()) return;
  bool python = true, hooked = true;
  for (const RankFileStats& file : stats.ranks) {
    if (!file.rank || std::find(stats.empty_ranks.begin(), stats.empty_ranks.end(), *file.rank) == stats.empty_ranks.end()) {
      continue;
    }
    python = python && file.python;
    hooked = hooked && file.pytorch_hook;
  }
  std::string help;
  if (python && !hooked) {
    help = "they run Python: profile again with --pytorch to record PyTorch's steps, collectives and compute";
  } else if (python) {
    help = "the PyTorch hook saw no optimizer step, module call or torch.distributed collective in them";
  } else {
    help = "nothing marked its work: annotate it with NVTX ranges, or run CUDA work on a GPU with --trace cuda";
  }
  out += fmt::format("  nothing to analyze: rank{} {} recorded no events; {}\n", stats.empty_ranks.size() == 1 ? "" : "s",
                     RankList(stats.empty_ranks), help);
}

void AppendProblems(const SummaryHeader& header, const RunStats& stats, std::string& out) {
  if (!stats.run_id.empty() && stats.run_id != header.run_id) {
    out += fmt::format("  warning:        the rank files record run id {}, not this run's\n",
                       Printable(stats.run_id));
  }
  if (!stats.missing_ranks.empty()) {
    out += fmt::format("  missing ranks:  {} (no rank file)\n", RankList(stats.missing_ranks));
  }
  if (!stats.extra_ranks.empty()) {
    out += fmt::format("  extra ranks:    {} (beyond world size {})\n", RankList(stats.extra_ranks),
                       stats.world_size.value_or(0));
  }
  if (stats.still_recording) {
    out += "  still running:  a process of this run still records into the directory (it outlived the "
           "command); its file is not final\n";
  }
  AppendStoppedEarly(header, stats, out);
  // Files not closed that no stop explains: their process ended without closing them.
  std::string names;
  for (const auto* files : {&stats.ranks, &stats.unranked}) {
    for (const RankFileStats& file : *files) {
      if (!file.closed_cleanly && file.recording_stopped.empty()) {
        names += (names.empty() ? "" : ", ") + file.file_name;
      }
    }
  }
  if (!names.empty()) {
    out += fmt::format("  not closed:     {} ({}; what was committed before is kept)\n", names,
                       stats.still_recording ? "still being written, or its process ended without closing it"
                                             : "its process ended without closing it: SIGKILL, a crash or _exit");
  }
  // CUDA activity: worth a line when some rank recorded it, or tried and could not.
  if (!stats.cupti_on.empty()) {
    out += fmt::format("  CUDA activity:  recorded through CUPTI on {} of {} ranks\n", stats.cupti_on.size(),
                       stats.ranks.size());
  }
  for (const auto& [reason, ranks] : stats.cupti_off) {
    out += fmt::format("  CUDA activity:  not recorded on rank{} {}: {}\n", ranks.size() == 1 ? "" : "s",
                       RankList(ranks), Printable(reason, 200));
  }
  AppendEmptyRanks(stats, out);
  if (!stats.drops_by_reason.empty()) {
    std::string reasons;
    for (const auto& [reason, count] : stats.drops_by_reason) {
      reasons += fmt::format("{}{} {}", reasons.empty() ? "" : "; ", Printable(reason, 48), GroupThousands(count));
    }
    out += fmt::format("  dropped events: {}\n", reasons);
  }
}

}  // namespace

Result<RunStats> CollectRunStats(const fs::path& run_dir) {
  RunStats stats;
  std::error_code ec;
  if (fs::is_directory(run_dir, ec) && !trace::HasRankFiles(run_dir)) return stats;
  RS_ASSIGN_OR_RETURN(trace::Run run, trace::OpenRun(run_dir));
  stats.run_id = run.run_id;
  stats.world_size = run.world_size;
  stats.missing_ranks = run.missing_ranks;
  stats.extra_ranks = run.extra_ranks;
  stats.crashed = run.crashed;
  // The summary must not fail over a lock it cannot probe: then it claims nothing.
  const Result<bool> recording = trace::RunIsRecording(run_dir);
  stats.still_recording = recording.ok() && *recording;
  for (const trace::RunFile& file : run.ranks) {
    stats.ranks.push_back(CountFile(file, stats.drops_by_reason));
    const RankFileStats& rank = stats.ranks.back();
    if (!rank.rank) continue;
    if (rank.events == 0 && rank.read_error.empty()) stats.empty_ranks.push_back(*rank.rank);
    if (rank.cupti_status == "on") stats.cupti_on.push_back(*rank.rank);
    // Why CUDA activity is missing: CUPTI turned off ("off: ...") or never started, as without
    // a driver ("not started: ..."). "off: not selected (--trace)" is the user's choice: no news.
    if (rank.cupti_status.starts_with("off: not selected")) continue;
    for (const std::string_view prefix : {"off: ", "not started: "}) {
      if (rank.cupti_status.starts_with(prefix)) {
        stats.cupti_off[rank.cupti_status.substr(prefix.size())].push_back(*rank.rank);
      }
    }
  }
  for (const trace::RunFile& file : run.unranked) stats.unranked.push_back(CountFile(file, stats.drops_by_reason));
  return stats;
}

std::string FormatRunSummary(const SummaryHeader& header, const Result<RunStats>& stats) {
  std::string out = "rankscope: summary\n";
  out += fmt::format("  command:        {}\n", header.outcome);
  out += fmt::format("  run directory:  {}\n", header.run_dir.string());
  out += fmt::format("  run id:         {}\n", header.run_id);
  if (!stats.ok()) {
    out += fmt::format("  ranks:          cannot read the run: {}\n", stats.status().message());
    return out;
  }
  if (stats->empty()) {
    out +=
        "  ranks:          none recorded: no process wrote a rank file. The collector writes one\n"
        "                  for every process with a RANK (set by torchrun, srun, mpirun or -n)\n"
        "                  and for other processes that record NVTX events. It loads through\n"
        "                  LD_PRELOAD into dynamically linked programs: a static program, or a\n"
        "                  launcher that drops the environment (RANKSCOPE_*, LD_PRELOAD), leaves\n"
        "                  no trace.\n";
    return out;
  }
  const RunStats& run = *stats;
  if (run.world_size) {
    out += fmt::format("  ranks:          {} of world size {} recorded\n",
                       run.ranks.size() - run.extra_ranks.size(), *run.world_size);
  } else {
    out += fmt::format("  ranks:          {} recorded\n", run.ranks.size());
  }
  AppendProblems(header, run, out);
  if (!run.ranks.empty()) AppendRankTable(header, run, out);
  AppendUnranked(run, out);
  const std::string& example = !run.ranks.empty() ? run.ranks.front().file_name : run.unranked.front().file_name;
  out += fmt::format("  next:           sqlite3 {} .tables\n", (header.run_dir / example).string());
  out += "                  (tables and columns: docs/schema.md in the rankscope sources)\n";
  return out;
}

std::string GroupThousands(uint64_t value) {
  std::string digits = std::to_string(value);
  for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3) digits.insert(static_cast<size_t>(i), ",");
  return digits;
}

}  // namespace rankscope::cli
