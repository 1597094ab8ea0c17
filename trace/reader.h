// TraceReader: opens one rank file read-only and defensively, whatever state its writer left
// it in, checks that it is a rankscope trace of a schema this build understands, and reads
// it back: lanes, strings, events of one lane in a time range, or the whole rank into memory.
#pragma once

#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "trace/events.h"
#include "trace/in_flight.h"
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

// Streaming a rank without loading it (TraceReader::Stream): the small tables whole, then the
// interval tables as lean rows in batches. This is the analyzer's path on large runs.
struct StreamHeader {
  RankMeta meta;
  std::vector<std::string> strings;  // index = StringId
  std::vector<Lane> lanes;           // lanes[i].id == i + 1
  std::vector<DropRecord> drops;
  std::vector<NvtxMarkEvent> marks;
  std::vector<CollectiveEvent> collectives;
  std::vector<CounterSample> counters;
  // With StreamOptions::host_calls: rows per lane id over every event table, from the
  // file's block directory. A hint for reserving memory (a damaged file may lie), capped
  // by the file's size.
  std::vector<uint64_t> lane_rows;
};

enum class SpanTable : uint8_t { kKernels, kMemcpys, kMemsets, kNvtxRanges, kApiCalls, kSyncs };

struct StreamOptions {
  // Also stream API calls and synchronizations (after the NVTX ranges) and fill
  // SpanRow::correlation_id, and the copy kind and bytes of copies and sets: what the viewer
  // needs for launch flows and copy names. Metrics need none of it.
  bool host_calls = false;
  // With host_calls, only what links launches to their work (the critical path's): correlation
  // ids only when the file has API calls to link them to, and no copy kinds or bytes. Each
  // column left out is time saved on every row.
  bool launch_links_only = false;
  // Stream the NVTX ranges before every other table (whose order stays): a reader that
  // learns the steps from them can then keep only the rows of the steps it wants.
  bool ranges_first = false;
};

// What metrics need of one kernel, copy, set or NVTX range (or API call and sync, on
// request): 56 bytes, not a full record.
// Times are as stored: a damaged file may hold end < start, which consumers must check.
struct SpanRow {
  LaneId lane = kNoLane;
  StringId name = kEmptyString;    // kernels and ranges; empty for copies and sets
  TimestampNs start_ns = 0;
  TimestampNs end_ns = 0;
  StringId domain = kEmptyString;  // ranges only
  uint32_t category = 0;           // ranges only
  StringId args = kEmptyString;    // ranges only: the decoded payload as JSON
  uint32_t payload_kind = 0;       // ranges only: PayloadKind of a scalar payload
  int64_t payload_int = 0;         // ranges only
  uint64_t correlation_id = 0;     // with StreamOptions::host_calls only
  // With StreamOptions::host_calls (and not launch_links_only), copies and sets also carry
  // their copy kind in `category` (trace::CopyKind; 0 for sets) and their bytes in `payload_int`.
};

// What a stream that learns its rank as it goes (another tool's trace read straight into an
// analysis, interop/) knows only at its end.
struct StreamTrailer {
  RankMeta meta;                   // replaces the header's
  std::vector<Lane> lanes;         // replaces the header's and the additions (names may change)
  std::vector<DropRecord> drops;
  std::vector<NvtxMarkEvent> marks;
  std::vector<CollectiveEvent> collectives;
  std::vector<CounterSample> counters;
};

class SpanVisitor {
 public:
  virtual ~SpanVisitor() = default;
  virtual Status OnHeader(StreamHeader header) = 0;
  // Rows of one table in storage order (time order within a lane for files rankscope
  // wrote), in batches. An error stops the stream and is returned by Stream.
  virtual Status OnSpans(SpanTable table, std::span<const SpanRow> rows) = 0;

  // Streams that are not read from a rank file (TraceReader::Stream never calls these):
  // strings and lanes appended to the header's, before the first row that uses them; then,
  // after the last row, the trailer. Visitors that only read files refuse them.
  virtual Status OnMoreNames(std::span<const std::string> strings, std::span<const Lane> lanes);
  virtual Status OnTrailer(StreamTrailer trailer);
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
  // Fails with a one-line message naming the file when it is missing, not a regular file
  // (refused without opening it), not SQLite, truncated, not a rankscope trace, or from a
  // newer schema. Older schema versions read as if written now: tables they lack are
  // empty, columns they lack are 0. A file that was not closed (its writer was killed or is
  // still recording) is read through a private recovered copy, a snapshot of its commits
  // that goes with the reader (sql::ReadableDatabase); nothing is written beside the file.
  // Reads of events fail, naming the table, on a damaged page or an id that cannot be one.
  static Result<std::unique_ptr<TraceReader>> Open(const std::filesystem::path& path);
  ~TraceReader();
  TraceReader(const TraceReader&) = delete;
  TraceReader& operator=(const TraceReader&) = delete;

  const std::filesystem::path& path() const;
  const RankMeta& meta() const;

  Result<std::vector<std::string>> ReadStrings() const;
  Result<std::vector<Lane>> ReadLanes() const;
  Result<std::vector<DropRecord>> ReadDrops() const;

  // What the rank was inside when the file was last committed (trace/in_flight.h); empty
  // (as_of_ns 0) for files of schema < 3 and files whose collector never drained.
  Result<InFlightState> ReadInFlight() const;

  // Events of `lane` that overlap [t0, t1): start < t1 and end > t0, plus instants (marks,
  // counter samples) with t0 <= start < t1. Served by the (lane, start) indexes; sorted by
  // start within each table.
  Result<EventTables> ReadLaneRange(LaneId lane, TimestampNs t0, TimestampNs t1) const;

  // Calls visitor.OnHeader once, then OnSpans for kernels, memcpys, memsets and NVTX
  // ranges (then API calls and syncs when asked), all from one snapshot of the file (a
  // live file may be growing).
  Status Stream(SpanVisitor& visitor, StreamOptions options = {}) const;

  // The earliest start (or instant) of any event in the file; nullopt when it has none.
  Result<std::optional<TimestampNs>> FirstEventTime() const;

  // Loads everything into memory, reading the tables in row-id chunks on several threads.
  Result<RankTrace> LoadAll(LoadOptions options = {}) const;

  class Impl;

 private:
  explicit TraceReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rankscope::trace
