// Who wrote a rank file: the identity the collector gives the writer, and what a reader
// finds in the file's `meta` table.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "base/status.h"
#include "base/launch_env.h"
#include "trace/clock.h"

namespace rankscope::trace {

// Far above any real job; a larger rank or world size in a file is damage, not data.
using rankscope::kMaxWorldSize;

struct RankIdentity {
  // Every member has a default, so designated initializers may name only some.
  std::string run_id{};              // the same in every rank file of one run
  std::optional<int> rank{};         // nullopt: the process had no rank (e.g. a data loader)
  std::optional<int> world_size{};
  std::optional<int> local_rank{};
  std::string host{};
  int64_t pid = 0;
  std::string command_line{};
  std::string backend{};             // "nccl", "gloo", ... empty when unknown
};

struct RankMeta : RankIdentity {
  std::string tool_version;
  int schema_version = 0;
  std::optional<ClockSample> clock_start;
  std::optional<ClockSample> clock_end;  // absent when the writer never closed (crash)
  bool closed_cleanly = false;
  std::map<std::string, std::string> entries;  // every meta row, known keys included
};

// The meta rows a writer records for `identity` (clock and version rows excluded).
std::map<std::string, std::string> IdentityToMeta(const RankIdentity& identity);

// Parses meta rows; fails on missing or malformed required keys.
Result<RankMeta> MetaFromRows(std::map<std::string, std::string> rows);

// Meta rows of one calibration pair: "clock.<which>.realtime_ns" and so on.
std::map<std::string, std::string> ClockToMeta(const char* which, const ClockSample& sample);

}  // namespace rankscope::trace
