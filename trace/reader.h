// TraceReader: opens one rank file read-only and defensively, checks that it is a
// rankscope trace of a schema this build understands, and reads it back: lanes, strings,
// events of one lane in a time range, or the whole rank into memory.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "trace/events.h"
#include "trace/rank_meta.h"

namespace rankscope::trace {

// A whole rank in memory. Event tables are sorted by (lane, start).
struct RankTrace {
  std::filesystem::path path;
  RankMeta meta;
  std::vector<std::string> strings;  // index = StringId; strings[0] == ""
  std::vector<Lane> lanes;           // lanes[i].id == i + 1
  EventTables events;
  std::vector<DropRecord> drops;

  const std::string& str(StringId id) const;  // "" for ids out of range
  const Lane* lane(LaneId id) const;          // nullptr for ids out of range
};

struct LoadOptions {
  // Threads reading the event tables (each with its own read-only connection).
  // 0 = one per hardware thread.
  int threads = 0;
};

// One TraceReader serves one thread at a time (LoadAll uses threads of its own inside).
// Open one reader per thread to read a file from several.
class TraceReader {
 public:
  // Fails with a one-line message naming the file when it is missing, not SQLite,
  // truncated, not a rankscope trace, or from a newer schema.
  static Result<std::unique_ptr<TraceReader>> Open(const std::filesystem::path& path);
  ~TraceReader();
  TraceReader(const TraceReader&) = delete;
  TraceReader& operator=(const TraceReader&) = delete;

  const std::filesystem::path& path() const;
  const RankMeta& meta() const;

  Result<std::vector<std::string>> ReadStrings() const;
  Result<std::vector<Lane>> ReadLanes() const;
  Result<std::vector<DropRecord>> ReadDrops() const;

  // Events of `lane` that overlap [t0, t1): start < t1 and end > t0, plus instants (marks,
  // counter samples) with t0 <= start < t1. Served by the (lane, start) indexes; sorted by
  // start within each table.
  Result<EventTables> ReadLaneRange(LaneId lane, TimestampNs t0, TimestampNs t1) const;

  // Loads everything into memory, reading the tables in row-id chunks on several threads.
  Result<RankTrace> LoadAll(LoadOptions options = {}) const;

  class Impl;

 private:
  explicit TraceReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rankscope::trace
