// The screen `rankscope profile` prints when the command has ended: what was recorded,
// what is missing or damaged, and where to look next.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace rankscope::cli {

// One rank file, counted.
struct RankFileStats {
  std::string file_name;
  std::optional<int> rank;  // nullopt for rank-unknown files
  int64_t pid = 0;
  uint64_t events = 0;
  uint64_t dropped = 0;      // events the collector or writer lost (the `drops` table)
  uintmax_t bytes = 0;       // the file plus its -wal file
  std::string read_error{};  // set when the file opened but could not be loaded
  std::string cupti_status{};  // meta `cupti.status`: "on", "off: <why>", "not started: ..."
  bool closed_cleanly = true;  // meta `closed_cleanly`: false after SIGKILL, a crash, a failed writer
  // meta `recording_stopped`: why the writer stopped before the end (disk full, ...); what
  // came after was not recorded and is counted nowhere, not even in `dropped`.
  std::string recording_stopped{};
  bool python = false;        // the process ran a Python interpreter (meta `command_line`)
  bool pytorch_hook = false;  // `--pytorch`'s hook ran in it (meta `pytorch.hook`)
};

// A run directory, counted.
struct RunStats {
  std::string run_id;  // as recorded in the rank files; empty when there are none
  std::optional<int> world_size;
  std::vector<RankFileStats> ranks;     // sorted by rank
  std::vector<RankFileStats> unranked;  // rank-unknown files, sorted by pid
  std::vector<int> missing_ranks;
  std::vector<int> extra_ranks;
  std::vector<std::string> crashed;                 // files whose writer never closed them
  // Some process still holds the directory's recording lock (trace::RunIsRecording): one
  // of the run outlived the command, and its file is not final yet.
  bool still_recording = false;
  std::map<std::string, uint64_t> drops_by_reason;  // "writer: queue full" -> events
  std::vector<int> cupti_on;                        // ranks that recorded CUDA activity
  std::map<std::string, std::vector<int>> cupti_off;  // why CUPTI was off -> ranks
  std::vector<int> empty_ranks;                       // ranks whose files hold no event

  bool empty() const { return ranks.empty() && unranked.empty(); }
};

// Opens the run directory (trace::OpenRun) and counts every rank file. A directory with no
// rank file at all is not an error (the command may never have started the collector): it
// gives an empty RunStats. Errors are OpenRun's (files of two runs, damaged files, ...).
Result<RunStats> CollectRunStats(const std::filesystem::path& run_dir);

struct SummaryHeader {
  std::filesystem::path run_dir{};
  std::string run_id{};       // the id rankscope gave the run
  std::string outcome{};      // e.g. "exit code 0", "rank 2 failed (exit code 7)"
  size_t max_rank_rows = 16;  // more ranks are folded into one line: one screen at most
};

// The summary text, lines ending in '\n'.
std::string FormatRunSummary(const SummaryHeader& header, const Result<RunStats>& stats);

// "1,234,567".
std::string GroupThousands(uint64_t value);

}  // namespace rankscope::cli
