// Small TimelineModels built by hand for the view-core tests: rows from literal events,
// ranks from tracks of rows, and rank files on disk written through TraceWriter.
#pragma once

#include <algorithm>
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
#include "trace/reader.h"
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

}  // namespace testing
}  // namespace rankscope::gui
