// Small TimelineModels built by hand for the view-core tests: rows from literal events,
// ranks from tracks of rows, and rank files on disk written through TraceWriter (those of a
// run that did not finish among them).
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "analyzer/classify.h"
#include "analyzer/run_events.h"
#include "gui/core/timeline_model.h"
#include "trace/events.h"
#include "trace/in_flight.h"
#include "trace/reader.h"
#include "trace/run_dir.h"
#include "trace/writer.h"

namespace rankscope::gui {

// Readable EventRefs in test failures.
inline void PrintTo(const EventRef& ref, std::ostream* os) {
  *os << "{rank " << ref.rank << ", track " << ref.track << ", row " << ref.row << ", index " << ref.index << "}";
}

namespace testing {

// One event of a hand-built row; `name` is a StringId of the rank being built.
struct RowEvent {
  int64_t start = 0;
  int64_t end = 0;
  uint32_t name = 0;
  EventClass event_class = EventClass::kCompute;
  EventSource source = EventSource::kKernel;
  uint32_t correlation = 0;
};

// A row from events that already hold the row invariants (sorted, not overlapping). The
// correlation column is filled only when some event has a correlation id.
inline EventRow MakeRow(const std::vector<RowEvent>& events) {
  EventRow row;
  bool any_correlation = false;
  for (const RowEvent& e : events) any_correlation = any_correlation || e.correlation != 0;
  for (size_t i = 0; i < events.size(); ++i) {
    const RowEvent& e = events[i];
    EXPECT_LE(e.start, e.end) << "event " << i;
    if (i > 0) {
      EXPECT_LE(events[i - 1].end, e.start) << "events " << i - 1 << " and " << i << " overlap";
    }
    row.start.push_back(e.start);
    row.end.push_back(e.end);
    row.name.push_back(e.name);
    row.event_class.push_back(static_cast<uint8_t>(e.event_class));
    row.source.push_back(static_cast<uint8_t>(e.source));
    if (any_correlation) row.correlation.push_back(e.correlation);
    row.class_mask = static_cast<uint8_t>(row.class_mask | (1u << static_cast<unsigned>(e.event_class)));
  }
  return row;
}

// A row of [start, end) spans of one class and name 0.
inline EventRow RowOfSpans(const std::vector<std::pair<int64_t, int64_t>>& spans,
                        EventClass event_class = EventClass::kCompute) {
  std::vector<RowEvent> events;
  events.reserve(spans.size());
  for (const auto& [start, end] : spans) events.push_back({start, end, 0, event_class, EventSource::kKernel, 0});
  return MakeRow(events);
}

// `count` events of `length` ns every `period` ns from `first`: the dense rows of the LOD tests.
inline EventRow RegularRow(int64_t first, int64_t length, int64_t period, size_t count,
                           EventClass event_class = EventClass::kCompute) {
  EventRow row;
  row.start.resize(count);
  row.end.resize(count);
  row.name.assign(count, 0);
  row.event_class.assign(count, static_cast<uint8_t>(event_class));
  row.source.assign(count, static_cast<uint8_t>(EventSource::kKernel));
  for (size_t i = 0; i < count; ++i) {
    row.start[i] = first + static_cast<int64_t>(i) * period;
    row.end[i] = row.start[i] + length;
  }
  row.class_mask = static_cast<uint8_t>(1u << static_cast<unsigned>(event_class));
  return row;
}

// Events of a hand-built rank, named by text.
struct NamedEvent {
  int64_t start = 0;
  int64_t end = 0;
  std::string name;
  EventClass event_class = EventClass::kCompute;
  EventSource source = EventSource::kKernel;
  uint32_t correlation = 0;
};

class RankBuilder {
 public:
  RankBuilder(int rank, std::string host) {
    timeline_.rank = rank;
    timeline_.host = std::move(host);
    timeline_.strings = {""};
  }

  uint32_t Str(const std::string& text) {
    for (size_t i = 0; i < timeline_.strings.size(); ++i) {
      if (timeline_.strings[i] == text) return static_cast<uint32_t>(i);
    }
    timeline_.strings.push_back(text);
    return static_cast<uint32_t>(timeline_.strings.size() - 1);
  }

  // A track; returns its index. Lanes are numbered 1, 2, ... in the order tracks are added.
  uint32_t AddTrack(trace::LaneKind kind, int device, std::string label) {
    gui::Track track;
    track.lane = static_cast<trace::LaneId>(timeline_.tracks.size() + 1);
    track.kind = kind;
    track.device = device;
    track.label = std::move(label);
    timeline_.tracks.push_back(std::move(track));
    return static_cast<uint32_t>(timeline_.tracks.size() - 1);
  }

  // A row of `track` from events in row order; returns the row's index.
  uint32_t AddRow(uint32_t track, const std::vector<NamedEvent>& events) {
    std::vector<RowEvent> row;
    for (const NamedEvent& e : events) {
      row.push_back({e.start, e.end, Str(e.name), e.event_class, e.source, e.correlation});
    }
    gui::Track& t = timeline_.tracks.at(track);
    t.rows.push_back(MakeRow(row));
    t.events += events.size();
    return static_cast<uint32_t>(t.rows.size() - 1);
  }

  RankBuilder& Offset(int64_t offset_ns) {
    timeline_.clock_offset_ns = offset_ns;
    return *this;
  }

  // The rank with its extent and event count filled in.
  RankTimeline Build() const {
    RankTimeline built = timeline_;
    int64_t first = std::numeric_limits<int64_t>::max();
    int64_t last = std::numeric_limits<int64_t>::min();
    size_t events = 0;
    for (const gui::Track& track : built.tracks) {
      for (const EventRow& row : track.rows) {
        events += row.size();
        if (row.size() == 0) continue;
        first = std::min(first, row.start.front());
        last = std::max(last, *std::max_element(row.end.begin(), row.end.end()));
      }
    }
    built.events = events;
    built.first_ns = events == 0 ? 0 : first;
    built.last_ns = events == 0 ? 0 : last;
    return built;
  }

 private:
  RankTimeline timeline_;
};

inline EventRef Ref(uint32_t rank, uint32_t track, uint32_t row, uint32_t index) {
  return EventRef{rank, track, row, index};
}

// Appends an API call to a trace (TraceBuilder has no helper for them).
inline void AddApiCall(trace::RankTrace& t, trace::LaneId lane, trace::StringId name, int64_t start, int64_t end,
                       uint64_t correlation) {
  trace::ApiCallEvent call;
  call.lane = lane;
  call.name = name;
  call.start_ns = start;
  call.end_ns = end;
  call.correlation_id = correlation;
  call.domain = trace::ApiDomain::kRuntime;
  t.events.api_calls.push_back(call);
}

// The event of `rank` with this name starting at `own_start` (the rank's own clock), if any.
inline std::optional<EventRef> FindByName(const TimelineModel& model, uint32_t rank, const std::string& name,
                                          int64_t own_start) {
  const RankTimeline& r = model.ranks().at(rank);
  for (uint32_t t = 0; t < r.tracks.size(); ++t) {
    for (uint32_t w = 0; w < r.tracks[t].rows.size(); ++w) {
      const EventRow& row = r.tracks[t].rows[w];
      for (uint32_t i = 0; i < row.size(); ++i) {
        if (row.start[i] == own_start && r.Str(row.name[i]) == name) return EventRef{rank, t, w, i};
      }
    }
  }
  return std::nullopt;
}

// ---- Rank files of a run that did not finish ----------------------------------------------

inline constexpr int64_t kEndRunOriginNs = 1'800'000'000'000'000'000;  // an instant in 2027
// Seconds after kEndRunOriginNs.
inline constexpr int64_t EndRunAt(double seconds) { return kEndRunOriginNs + static_cast<int64_t>(seconds * 1e9); }
inline constexpr uint64_t kEndRunComm = 0x3f2a11c09e4b7d21;

struct EndedRankFile {
  int rank = 0;
  int world_size = 2;
  std::string ended_by{};  // meta collector.ended_by; "" writes none
  std::optional<trace::InFlightState> state{};  // written with TraceWriter::ReplaceInFlight
  bool kernel = true;        // a kernel at 1.0-1.5 s, so AnalyzeRun has something to measure
  bool flagged_step = false;  // a "step" row 2-9 s flagged unfinished, as a collector closing it
  // false: written by a child process that exits without closing the file, as SIGKILL leaves it.
  bool closed = true;
};

// Rank file `spec.rank` of run "hung" in `dir`: lane 1 the thread "main" (tid 1000), lane 2 the
// communicator kEndRunComm, lane 3 a GPU stream.
inline void WriteEndedRankFile(const std::filesystem::path& dir, const EndedRankFile& spec) {
  auto write = [&]() -> bool {
    trace::RankIdentity who;
    who.run_id = "hung";
    who.rank = spec.rank;
    who.world_size = spec.world_size;
    who.host = "node-a";
    who.pid = 1000 + spec.rank;
    auto created = trace::TraceWriter::Create(dir / trace::RankFileName(spec.rank), who);
    if (!created.ok()) return false;
    trace::TraceWriter& writer = **created;
    trace::Lane main;
    main.kind = trace::LaneKind::kCpuThread;
    main.pid = who.pid;
    main.tid = 1000;
    main.name = "main";
    trace::Lane comm;
    comm.kind = trace::LaneKind::kCommunicator;
    comm.pid = who.pid;
    comm.comm_hash = kEndRunComm;
    trace::Lane stream;
    stream.kind = trace::LaneKind::kGpuStream;
    stream.pid = who.pid;
    stream.device = 0;
    stream.stream = 7;
    if (writer.AddLane(main) != 1 || writer.AddLane(comm) != 2 || writer.AddLane(stream) != 3) return false;
    trace::EventTables events;
    if (spec.kernel) {
      trace::KernelEvent kernel;
      kernel.lane = 3;
      kernel.name = writer.Intern("gemm");
      kernel.start_ns = EndRunAt(1.0);
      kernel.end_ns = EndRunAt(1.5);
      events.kernels.push_back(kernel);
    }
    if (spec.flagged_step) {
      trace::NvtxRangeEvent step;
      step.lane = 1;
      step.name = writer.Intern("step");
      step.start_ns = EndRunAt(2.0);
      step.end_ns = EndRunAt(9.0);
      step.args = writer.Intern("{\"rankscope.unfinished\":true}");
      events.nvtx_ranges.push_back(step);
      trace::NvtxRangeEvent done = step;  // ends at the same instant, not flagged
      done.name = writer.Intern("zero");
      done.start_ns = EndRunAt(8.0);
      done.args = trace::kEmptyString;
      events.nvtx_ranges.push_back(done);
      writer.SetMeta("collector.unfinished_ranges", "1");
    }
    if (!events.empty() && !writer.Submit(std::move(events))) return false;
    if (!spec.ended_by.empty()) writer.SetMeta("collector.ended_by", spec.ended_by);
    if (spec.state) writer.ReplaceInFlight(*spec.state);
    if (spec.closed) return writer.Close().ok();
    if (!writer.Flush(std::chrono::seconds(10)).ok()) return false;
    [[maybe_unused]] trace::TraceWriter* leaked = created->release();  // never closed, as after a kill
    return true;
  };
  if (spec.closed) {
    ASSERT_TRUE(write());
    return;
  }
  const pid_t child = ::fork();
  if (child == 0) ::_exit(write() ? 0 : 1);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

}  // namespace testing
}  // namespace rankscope::gui
