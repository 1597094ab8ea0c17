// Why a run did not finish: from the in-flight state every rank file ends with
// (trace/in_flight.h), which rank the others wait for, in which collective and since when,
// which ranks entered the same collective differently, and what the culprits were doing.
// Only the files' meta, lanes and in-flight tables are read, never their events, so a
// launcher can ask right after it stopped a hung job. The rules are in docs/metrics.md §9.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analyzer/report.h"
#include "base/status.h"
#include "trace/in_flight.h"
#include "trace/reader.h"
#include "trace/run_dir.h"

namespace rankscope::analyzer {

// How one rank's file ended.
struct RankEnd {
  int rank = 0;
  std::string host;
  int64_t pid = 0;
  bool closed_cleanly = false;
  // Meta collector.ended_by: "exit", "exec", "signal 15", ...; "" when the file was never
  // closed (killed), or was closed by a writer that does not say (an importer).
  std::string ended_by;
  std::vector<std::string> lane_names;  // index = lane id - 1
  trace::InFlightState state;           // empty() for files without one
};

// The diagnosis of `ranks` (one entry per rank file, any order) in a run of `world_size`
// ranks (nullopt when unknown: then ranks up to the highest rank seen). Never fails: what
// cannot be known (a missing file, a file without state) is said, not guessed.
// Verdict kFinished when every file was closed by exit or exec (or by a writer that does not
// say how it ended) and nothing was in flight. `live`: a process still records into the run
// (trace::Run::recording), so its unclosed files are snapshots, not killed ranks.
HangReport DiagnoseRunEnd(const std::vector<RankEnd>& ranks, std::optional<int> world_size, bool live = false);

// One rank file's meta, lane names and in-flight state. Errors: a file without a rank, and
// what the reader returns for damaged lane or in-flight tables.
Result<RankEnd> ReadRankEnd(const trace::TraceReader& reader);

// The rank files of `run` (OpenRun), each opened and read by ReadRankEnd.
Result<std::vector<RankEnd>> ReadRunEnd(const trace::Run& run);

// OpenRun + ReadRunEnd + DiagnoseRunEnd; nullopt for a run that finished. Independent of
// AnalyzeRun: it works on a run that hung before it recorded anything to measure. On a run
// still recording it diagnoses what the files had committed (HangReport::live).
Result<std::optional<HangReport>> DiagnoseRun(const std::filesystem::path& path);

// ---- How the diagnosis names things (its paragraph and every report writer) --------------

// "0, 1, 3", "0-7, 9": runs of three or more consecutive ranks are written as a range.
std::string CompactRanks(std::vector<int> ranks);
// "rank 2", "ranks 0, 1, 3".
std::string RanksPhrase(const std::vector<int>& ranks);
// A communicator hash as 16 hex digits (as docs/schema.md's queries print it).
std::string CommHashText(uint64_t comm_hash);
// "AllReduce", "Broadcast", ... for a known op ("allreduce": CollectiveOpName); the recorded
// name otherwise, or "collective" when there is none.
std::string CollectiveTitle(std::string_view op, std::string_view name);

}  // namespace rankscope::analyzer
