// A run's events as the viewer shows them: every kernel, copy, set, NVTX range and mark,
// API call, sync and collective record of every rank, classified by the analyzer's rules
// (span_classifier.h), streamed rank by rank. Event details are read back on demand, so
// the viewer keeps only what it draws. Imported formats join here.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "analyzer/classify.h"
#include "analyzer/memory_series.h"
#include "base/status.h"
#include "trace/reader.h"

namespace rankscope::analyzer {

// A lane as the viewer labels its track and the Chrome export its thread: "GPU 0 · stream 7",
// "main (1234) · compute", the communicator's or counter's name.
std::string LaneLabel(const trace::Lane& lane);
// The viewer's track order within a rank: GPU streams by (device, stream), then
// communicators, CPU threads by tid, counters; lane id last.
bool LaneShownBefore(const trace::Lane& a, const trace::Lane& b);

// The table an event came from: what ReadEventDetails looks it up in.
enum class EventSource : uint8_t { kKernel, kMemcpy, kMemset, kNvtxRange, kApiCall, kSync, kCollective, kMark };
const char* EventSourceName(EventSource source);
// The title of a copy or set the file leaves unnamed, as Nsight Systems names them: "Memcpy
// HtoD" from its trace::CopyKind, "Memset".
std::string_view UnnamedCopyName(EventSource source, uint8_t copy_kind);

struct ViewEvent {
  int64_t start_ns = 0;  // the rank's own clock; end >= start (damaged rows are skipped)
  int64_t end_ns = 0;    // == start_ns for marks
  uint64_t correlation_id = 0;  // API call <-> device work; 0 if none
  trace::LaneId lane = trace::kNoLane;         // one of the rank's lanes (1..N)
  trace::StringId name = trace::kEmptyString;  // below the size of the rank's strings
  EventClass event_class = EventClass::kAnnotation;
  EventSource source = EventSource::kKernel;
  // Copies, from a stream with host calls: their trace::CopyKind ("Memcpy HtoD": copies and
  // sets have no name in the file; the viewer names them).
  uint8_t copy_kind = 0;
  // Step ranges whose name does not hold their number: the number + 1 (the viewer titles
  // them "step 41"); 0 for every other event.
  uint32_t step = 0;
};

struct ViewRank {
  // The rank file, or for another tool's trace streamed without one (rank_file false) the
  // input that holds the rank: no end state to read, details only through an import.
  std::filesystem::path file;
  bool rank_file = true;
  trace::RankMeta meta;
  std::vector<std::string> strings;  // index = StringId
  std::vector<trace::Lane> lanes;    // lanes[i].id == i + 1
  std::vector<uint64_t> lane_events;  // per lane id: events to expect (a hint, may be 0)
};

class ViewEventSink {
 public:
  virtual ~ViewEventSink() = default;
  // Each rank's calls come from one worker thread, in this order: OnRank, OnEvents (batches,
  // in storage order: not sorted; on a rank without device activity the ranges the CPU-side
  // rule classes come last, in one batch), OnRankDone. Different ranks' calls may run at once.
  virtual Status OnRank(size_t index, ViewRank rank) = 0;
  virtual Status OnEvents(size_t index, std::span<const ViewEvent> events) = 0;
  virtual Status OnRankDone(size_t index) = 0;

  // Ranks of other tools' traces (StreamedRunEvents) learn names as they go: strings and
  // lanes appended to the rank's before the first event that uses them; then, before its
  // marks and collectives and OnRankDone, the meta and lanes the rank ended with (its rank
  // number, lane names). Sinks that only read rank files refuse them (the default).
  virtual Status OnMoreNames(size_t index, std::span<const std::string> strings, std::span<const trace::Lane> lanes);
  virtual Status OnRankEnd(size_t index, trace::RankMeta meta, std::vector<trace::Lane> lanes);
  // The rank's memory counters (memory_series.h), once, after its marks and before
  // OnRankDone; not called for a rank without any. Ignored by default.
  virtual Status OnMemory(size_t index, std::vector<MemorySeries> series);
};

struct ViewLoadOptions {
  ClassifyOptions classify;
  int threads = 0;  // ranks read at once; 0 = one per hardware thread
  std::function<void(int, int)> progress;  // (ranks done, ranks in all), on the calling thread
};

struct ViewRun {
  std::filesystem::path directory;
  std::string run_id;
  size_t ranks = 0;                   // sink indices 0 .. ranks-1, in rank order
  std::vector<std::string> warnings;  // missing ranks, unfinished files, skipped rows
  // Damaged rows, not sent: ending before they start, or naming a string or lane id the
  // file does not hold.
  int64_t invalid_events = 0;
};

// Streams a run directory (or one rank file) into `sink`. Fails, one line naming the file,
// on what OpenRun refuses and on unreadable rank files.
Result<ViewRun> StreamRunEvents(const std::filesystem::path& run, const ViewLoadOptions& options, ViewEventSink& sink);

// The ranks of other tools' traces, streamed as they are read (interop/: no rank files),
// into `sink` as StreamRunEvents streams files: each AddRank visitor takes a rank's header,
// OnMoreNames, OnSpans (with StreamOptions::host_calls) and OnTrailer, and different ranks'
// visitors may be fed at once. Sink indices follow the AddRank calls (not rank order).
class StreamedRunEvents {
 public:
  StreamedRunEvents(ClassifyOptions classify, ViewEventSink& sink);
  ~StreamedRunEvents();
  StreamedRunEvents(const StreamedRunEvents&) = delete;
  StreamedRunEvents& operator=(const StreamedRunEvents&) = delete;

  // `source` (the input that holds the rank) stands for its file. Safe from several threads.
  trace::SpanVisitor& AddRank(std::filesystem::path source);
  // Once every rank has had its trailer: each rank's held-back ranges, then OnRankDone, on
  // up to `threads` workers. Fails when a rank never had its trailer.
  Result<ViewRun> Finish(int threads);

 private:
  class RankStream;
  ClassifyOptions classify_;
  ViewEventSink& sink_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<RankStream>> ranks_;
};

// The fields of one event, read back from its rank file: (label, value) pairs in display
// order, e.g. ("grid", "128 × 1 × 1"). Fails when no event of `source` on `lane` has exactly
// these times.
struct EventDetails {
  std::vector<std::pair<std::string, std::string>> fields;
  uint64_t correlation_id = 0;
};
Result<EventDetails> ReadEventDetails(const std::filesystem::path& file, EventSource source, trace::LaneId lane,
                                      int64_t start_ns, int64_t end_ns);

}  // namespace rankscope::analyzer
