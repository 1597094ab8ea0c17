// The viewer's data: every event of a run, rank by rank and lane by lane, in columns that
// cost 22 bytes per event (26 where correlation ids exist). Nested events stack in rows,
// so each row is a sorted run of non-overlapping events that one binary search culls.
// Loaded through the analyzer (analyzer/run_events.h), which classifies every event. Each
// rank also keeps what it was inside when its file ended (RankEndState, placed by
// gui/core/run_end.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "analyzer/hang.h"
#include "analyzer/range_stats.h"
#include "analyzer/report.h"
#include "analyzer/run_events.h"
#include "base/status.h"
#include "gui/core/counter_track.h"

namespace rankscope::gui {

using analyzer::EventClass;
using analyzer::EventSource;

// One row of a track: events sorted by start that do not overlap (so ends are sorted too).
struct EventRow {
  std::vector<int64_t> start;         // the rank's own clock
  std::vector<int64_t> end;
  std::vector<uint32_t> name;         // StringId into RankTimeline::strings
  std::vector<uint8_t> event_class;   // EventClass
  std::vector<uint8_t> source;        // EventSource
  // Parallel to start, or empty when the row has none. CUPTI's correlation ids are 32-bit;
  // wider ones from other sources keep their low 32 bits.
  std::vector<uint32_t> correlation;
  uint8_t class_mask = 0;             // bit (1 << EventClass) for each class present
  // busy_blocks[b] = the summed durations of events [0, kBusyBlock·b): the busy time of any
  // run of events in O(kBusyBlock) (BusyNs), for the density of folded items; 0.25 bytes an
  // event. Filled by IndexBusy (every model's rows have it).
  static constexpr size_t kBusyBlock = 32;
  std::vector<int64_t> busy_blocks;

  size_t size() const { return start.size(); }
  void IndexBusy();
  bool HasBusyIndex() const { return busy_blocks.size() == size() / kBusyBlock + 1; }
  // The summed durations of events [first, last): O(kBusyBlock) with the index (O(last)
  // without it).
  int64_t BusyNs(size_t first, size_t last) const;
  analyzer::SpanColumns Columns() const;
  size_t MemoryBytes() const;
};

struct Track {
  trace::LaneId lane = trace::kNoLane;
  trace::LaneKind kind = trace::LaneKind::kCpuThread;
  int device = -1;     // the GPU of a stream lane; -1 for host lanes
  std::string label;   // "GPU 0 · stream 7", "thread 4121 main", "communicator 0x3f…"
  std::vector<EventRow> rows;  // row 0 outermost: nested events stack downward
  size_t events = 0;
};

// A collective in flight, or a range open, when the rank's file ended: one event of the rank's
// rows, drawn in the "open at end" style.
enum class EndMarkKind : uint8_t { kCollective, kOpenRange };

struct EndMark {
  EndMarkKind kind = EndMarkKind::kOpenRange;
  uint32_t track = 0, row = 0, index = 0;  // the event, within its rank
  // The event is a row of the file: a range its collector closed at the end and flagged
  // unfinished (args "rankscope.unfinished"), or a collective it wrote. False: the event
  // was added from the in-flight state, as the file holds no row for it (a SIGKILLed rank).
  bool file_row = false;
  int64_t start_ns = 0;  // own clock: entered or opened
  int64_t as_of_ns = 0;  // own clock: the state's time (a flagged row's end without a state)
  std::string label;     // "AllReduce #41 in flight (12.4 s)", "backward · open at end (12.5 s)"
  trace::FlightCollective collective;  // kCollective
  trace::OpenRange range;              // kOpenRange
};

// How a rank's file ended, and its marks.
struct RankEndState {
  bool has_state = false;  // the file holds an in-flight state (schema 3, at least one drain)
  int64_t as_of_ns = 0;    // own clock; 0 without a state
  bool closed_cleanly = true;
  std::string ended_by;    // meta collector.ended_by: "exit", "signal 15", "" (never closed)
  // The "state at" marker is drawn: the state holds marks, or the file did not end by exit
  // or exec (a signal, a kill).
  bool show_marker = false;
  std::vector<EndMark> marks;  // by (track, row, index)
};

struct RankTimeline {
  int rank = -1;  // -1: the file names no rank
  std::string host;
  std::filesystem::path file;
  // `file` is a rank file: event details and the end state are read back from it. False for
  // another tool's trace read straight into the model (`file` is that input).
  bool rank_file = true;
  std::vector<std::string> strings;  // index = StringId
  std::vector<Track> tracks;         // GPU streams (by device, stream), communicators, threads
  std::vector<CounterTrack> counters;  // memory counters by source, drawn under the tracks
  int64_t clock_offset_ns = 0;       // added to this rank's times: the run's common clock
  int64_t first_ns = 0;              // extent of its events and counter changes, own clock
  int64_t last_ns = 0;
  size_t events = 0;
  RankEndState end;

  std::string Label() const;  // "rank 3 · host-a"
  const std::string& Str(uint32_t id) const;
};

// Names one event: rank, track and row indices, then the event's index in the row.
struct EventRef {
  uint32_t rank = 0, track = 0, row = 0, index = 0;
  bool operator==(const EventRef&) const = default;
};

struct ModelLoadOptions {
  analyzer::ClassifyOptions classify;
  int threads = 0;
  std::function<void(int, int)> progress;  // (ranks read, ranks in all)
};

class TimelineModel {
 public:
  // Reads a run directory or one rank file, and each rank's end state (ReadRankEndInput,
  // ApplyRankEnd; a state that cannot be read is a warning). Errors are one line naming
  // the file.
  static Result<std::unique_ptr<TimelineModel>> Load(const std::filesystem::path& run, const ModelLoadOptions& options);
  // The model of what `stream` sends the sink it is given (e.g. interop::ViewInputs, which
  // reads other tools' traces too), ranks in rank order; `stream` returns the reading's
  // warnings. End states are read for rank files only.
  // `cancel` (may be null), once set, stops the stream at its next batch: Build then fails
  // with kCancelledMessage.
  using EventStream = std::function<Result<std::vector<std::string>>(analyzer::ViewEventSink&)>;
  static Result<std::unique_ptr<TimelineModel>> Build(std::filesystem::path source, const EventStream& stream,
                                                      const std::atomic<bool>* cancel = nullptr);
  static constexpr const char* kCancelledMessage = "loading cancelled";
  // A model of ranks built elsewhere (tests, benchmarks): rows must already hold their
  // invariants.
  TimelineModel(std::filesystem::path source, std::vector<RankTimeline> ranks);

  const std::filesystem::path& source() const { return source_; }
  const std::vector<RankTimeline>& ranks() const { return ranks_; }
  const std::vector<std::string>& warnings() const { return warnings_; }
  void AddWarning(std::string warning) { warnings_.push_back(std::move(warning)); }

  // Puts ranks on the run's common clock, from the analyzer's clock alignment.
  void ApplyClockAlignment(const analyzer::ClockAlignment& clock);

  // The run's extent on the common clock: [first event, last event end), reaching each
  // shown "state at" marker.
  int64_t start_ns() const { return start_ns_; }
  int64_t end_ns() const { return end_ns_; }
  size_t events() const;
  size_t MemoryBytes() const;

  const RankTimeline& rank(const EventRef& ref) const { return ranks_[ref.rank]; }
  const EventRow& row(const EventRef& ref) const { return ranks_[ref.rank].tracks[ref.track].rows[ref.row]; }
  bool Contains(const EventRef& ref) const;
  // The event's times on the common clock.
  int64_t DisplayStart(const EventRef& ref) const;
  int64_t DisplayEnd(const EventRef& ref) const;
  const std::string& Name(const EventRef& ref) const;
  EventClass ClassOf(const EventRef& ref) const;
  EventSource SourceOf(const EventRef& ref) const;
  uint32_t CorrelationOf(const EventRef& ref) const;  // 0 if none
  // The end mark `ref` is, if any: O(log marks of its rank).
  const EndMark* FindEndMark(const EventRef& ref) const;
  bool HasEndMarks() const;

 private:
  void UpdateExtent();

  std::filesystem::path source_;
  std::vector<RankTimeline> ranks_;
  std::vector<std::string> warnings_;
  int64_t start_ns_ = 0, end_ns_ = 0;
};

// Packs one lane's events into rows: sorts them by (start, longest first), then puts each
// event in the first row whose last event has ended (first fit), which for well-nested
// ranges is exactly their nesting depth. Events with end < start are dropped.
std::vector<EventRow> PackRows(std::vector<analyzer::ViewEvent> events);

}  // namespace rankscope::gui
