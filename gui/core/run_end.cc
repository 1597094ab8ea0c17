#include "gui/core/run_end.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "analyzer/rank_scan.h"
#include "base/format.h"

namespace rankscope::gui {
namespace {

constexpr std::string_view kUnfinishedArg = "\"rankscope.unfinished\":true";

// A mark before its event has a place: the event it is, by lane, times, name and table.
struct PendingMark {
  EndMark mark;
  trace::LaneId lane = trace::kNoLane;
  int64_t end_ns = 0;
  uint32_t name = 0;
  EventSource source = EventSource::kNvtxRange;
};

struct RowEvent {
  uint32_t row = 0, index = 0;
};

std::optional<size_t> TrackOf(const RankTimeline& rank, trace::LaneId lane) {
  for (size_t t = 0; t < rank.tracks.size(); ++t) {
    if (rank.tracks[t].lane == lane) return t;
  }
  return std::nullopt;
}

// The first event of `track` from `source` starting at `start_ns` that `accept(row, row
// index, event index)` takes: a binary search per row.
template <typename Accept>
std::optional<RowEvent> FindInTrack(const Track& track, EventSource source, int64_t start_ns, Accept&& accept) {
  for (uint32_t r = 0; r < track.rows.size(); ++r) {
    const EventRow& row = track.rows[r];
    auto i = static_cast<size_t>(std::lower_bound(row.start.begin(), row.start.end(), start_ns) - row.start.begin());
    for (; i < row.size() && row.start[i] == start_ns; ++i) {
      if (row.source[i] == static_cast<uint8_t>(source) && accept(row, r, i)) {
        return RowEvent{r, static_cast<uint32_t>(i)};
      }
    }
  }
  return std::nullopt;
}

uint32_t Intern(RankTimeline& rank, const std::string& text) {
  rank.strings.push_back(text);
  return static_cast<uint32_t>(rank.strings.size() - 1);
}

// Where a collective goes: its own lane, or for NCCL's (lane 0) the communicator lane with
// its hash, else the rank's first shown lane. nullopt: it names a lane the file lacks.
std::optional<trace::LaneId> CollectiveLane(const RankTimeline& rank, const std::vector<trace::Lane>& lanes,
                                            const trace::FlightCollective& collective) {
  if (collective.lane != trace::kNoLane) {
    if (collective.lane <= lanes.size()) return collective.lane;
    return std::nullopt;
  }
  for (const trace::Lane& lane : lanes) {
    if (lane.kind == trace::LaneKind::kCommunicator && lane.comm_hash == collective.comm_hash) return lane.id;
  }
  if (!rank.tracks.empty()) return rank.tracks.front().lane;
  if (lanes.empty()) return trace::kNoLane;
  return std::min_element(lanes.begin(), lanes.end(), analyzer::LaneShownBefore)->id;
}

std::string AfterRunStart(const TimelineModel& model, const RankTimeline& rank, int64_t own_ns) {
  return format::FormatDuration(static_cast<double>(own_ns + rank.clock_offset_ns - model.start_ns())) +
         " after the run's start";
}

}  // namespace

Result<RankEndInput> ReadRankEndInput(const RankTimeline& rank) {
  RS_ASSIGN_OR_RETURN(std::unique_ptr<trace::TraceReader> reader, trace::TraceReader::Open(rank.file));
  RankEndInput input;
  RS_ASSIGN_OR_RETURN(input.end, analyzer::ReadRankEnd(*reader));
  const auto& meta = reader->meta().entries;
  const auto unfinished = meta.find("collector.unfinished_ranges");
  uint64_t count = 0;
  if (unfinished == meta.end()) return input;
  const std::string& value = unfinished->second;
  if (std::from_chars(value.data(), value.data() + value.size(), count).ec != std::errc() || count == 0) return input;
  // The collector closes every open range at one instant, so its flagged rows are among
  // those that end where their thread's ranges last end.
  for (const Track& track : rank.tracks) {
    if (track.kind != trace::LaneKind::kCpuThread || track.lane == trace::kNoLane) continue;
    int64_t last = std::numeric_limits<int64_t>::min();
    for (const EventRow& row : track.rows) {
      for (size_t i = 0; i < row.size(); ++i) {
        if (row.source[i] == static_cast<uint8_t>(EventSource::kNvtxRange)) last = std::max(last, row.end[i]);
      }
    }
    if (last == std::numeric_limits<int64_t>::min()) continue;
    RS_ASSIGN_OR_RETURN(trace::EventTables found, reader->ReadLaneRange(track.lane, last - 1, last));
    for (const trace::NvtxRangeEvent& range : found.nvtx_ranges) {
      if (range.lane == track.lane && range.end_ns == last && rank.Str(range.args).find(kUnfinishedArg) != std::string::npos) {
        input.flagged_rows.push_back({track.lane, range.start_ns, range.end_ns});
      }
    }
  }
  return input;
}

std::string InFlightLabel(const trace::FlightCollective& collective, int64_t as_of_ns) {
  std::string text = fmt::format(
      "{} #{}", analyzer::CollectiveTitle(analyzer::CollectiveOpName(collective.op), collective.name),
      collective.sequence);
  if (collective.peer >= 0) {
    text += fmt::format(" {} peer {}", collective.op == trace::CollectiveOp::kRecv ? "from" : "to", collective.peer);
  }
  return text + fmt::format(" in flight ({})",
                            format::FormatDuration(static_cast<double>(std::max<int64_t>(0, as_of_ns - collective.start_ns))));
}

std::string OpenRangeLabel(std::string_view name, int64_t start_ns, int64_t as_of_ns) {
  return fmt::format("{} · open at end ({})", name.empty() ? std::string_view("range") : name,
                     format::FormatDuration(static_cast<double>(std::max<int64_t>(0, as_of_ns - start_ns))));
}

size_t ApplyRankEnd(RankTimeline& rank, const std::vector<trace::Lane>& lanes, const RankEndInput& input) {
  const analyzer::RankEnd& end = input.end;
  const trace::InFlightState& state = end.state;
  RankEndState& out = rank.end;
  out = RankEndState();
  out.has_state = !state.empty();
  out.as_of_ns = state.as_of_ns;
  out.closed_cleanly = end.closed_cleanly;
  out.ended_by = end.ended_by;

  size_t unplaced = 0;
  std::vector<PendingMark> pending;
  std::map<trace::LaneId, std::vector<analyzer::ViewEvent>> added;  // by lane
  auto declared = [&](trace::LaneId lane) { return lane != trace::kNoLane && lane <= lanes.size(); };
  auto mark_row = [&](EndMark mark, trace::LaneId lane, const Track& track, const RowEvent& at) {
    const EventRow& row = track.rows[at.row];
    mark.file_row = true;
    pending.push_back({std::move(mark), lane, row.end[at.index], row.name[at.index],
                       static_cast<EventSource>(row.source[at.index])});
  };
  auto add_event = [&](EndMark mark, trace::LaneId lane, EventClass event_class, EventSource source) {
    analyzer::ViewEvent event;
    event.start_ns = mark.start_ns;
    event.end_ns = std::max(mark.start_ns, mark.as_of_ns);
    event.lane = lane;
    event.name = Intern(rank, mark.label);
    event.event_class = event_class;
    event.source = source;
    added[lane].push_back(event);
    pending.push_back({std::move(mark), lane, event.end_ns, event.name, source});
  };

  // Ranges the collector wrote as rows when it closed the file, flagged unfinished.
  std::vector<bool> range_shown(state.open_ranges.size(), false);
  for (const FlaggedRow& flagged : input.flagged_rows) {
    const std::optional<size_t> t = TrackOf(rank, flagged.lane);
    if (!t) continue;
    const Track& track = rank.tracks[*t];
    const auto at = FindInTrack(track, EventSource::kNvtxRange, flagged.start_ns,
                                [&](const EventRow& row, uint32_t, size_t i) { return row.end[i] == flagged.end_ns; });
    if (!at) continue;
    const std::string& name = rank.Str(track.rows[at->row].name[at->index]);
    EndMark mark;
    mark.kind = EndMarkKind::kOpenRange;
    mark.start_ns = flagged.start_ns;
    mark.as_of_ns = out.has_state ? state.as_of_ns : flagged.end_ns;
    mark.range.lane = flagged.lane;
    mark.range.depth = at->row;  // its row; the state, when it names the range, says better
    mark.range.start_ns = flagged.start_ns;
    mark.range.name = name;
    for (size_t k = 0; k < state.open_ranges.size(); ++k) {
      const trace::OpenRange& open = state.open_ranges[k];
      if (!range_shown[k] && open.lane == flagged.lane && open.start_ns == flagged.start_ns && open.name == name) {
        mark.range = open;
        range_shown[k] = true;
        break;
      }
    }
    mark.label = OpenRangeLabel(name, mark.start_ns, mark.as_of_ns);
    mark_row(std::move(mark), flagged.lane, track, *at);
  }

  // The state's open ranges: marked where the file holds them, added where it does not.
  for (size_t k = 0; k < state.open_ranges.size(); ++k) {
    if (range_shown[k]) continue;
    const trace::OpenRange& open = state.open_ranges[k];
    if (!declared(open.lane)) {
      ++unplaced;
      continue;
    }
    EndMark mark;
    mark.kind = EndMarkKind::kOpenRange;
    mark.start_ns = open.start_ns;
    mark.as_of_ns = state.as_of_ns;
    mark.range = open;
    mark.label = OpenRangeLabel(open.name, open.start_ns, state.as_of_ns);
    const std::optional<size_t> t = TrackOf(rank, open.lane);
    std::optional<RowEvent> at;
    if (t) {
      at = FindInTrack(rank.tracks[*t], EventSource::kNvtxRange, open.start_ns,
                       [&](const EventRow& row, uint32_t, size_t i) { return rank.Str(row.name[i]) == open.name; });
    }
    if (at) {
      mark_row(std::move(mark), open.lane, rank.tracks[*t], *at);
    } else {
      add_event(std::move(mark), open.lane, EventClass::kAnnotation, EventSource::kNvtxRange);
    }
  }

  // Collectives in flight: marked where the file holds a collective row that started with
  // them, added otherwise.
  for (const trace::FlightCollective& collective : state.collectives) {
    if (!collective.in_flight()) continue;
    const std::optional<trace::LaneId> lane = CollectiveLane(rank, lanes, collective);
    if (!lane) {
      ++unplaced;
      continue;
    }
    EndMark mark;
    mark.kind = EndMarkKind::kCollective;
    mark.start_ns = collective.start_ns;
    mark.as_of_ns = state.as_of_ns;
    mark.collective = collective;
    mark.label = InFlightLabel(collective, state.as_of_ns);
    const std::optional<size_t> t = TrackOf(rank, *lane);
    std::optional<RowEvent> at;
    if (t) {
      at = FindInTrack(rank.tracks[*t], EventSource::kCollective, collective.start_ns,
                       [](const EventRow&, uint32_t, size_t) { return true; });
    }
    if (at) {
      mark_row(std::move(mark), *lane, rank.tracks[*t], *at);
    } else {
      add_event(std::move(mark), *lane, EventClass::kCollective, EventSource::kCollective);
    }
  }

  // Lanes that got events are repacked; lanes that had none get a track.
  bool new_tracks = false;
  for (auto& [lane_id, events] : added) {
    const size_t count = events.size();
    if (const std::optional<size_t> t = TrackOf(rank, lane_id)) {
      Track& track = rank.tracks[*t];
      for (const EventRow& row : track.rows) {
        for (size_t i = 0; i < row.size(); ++i) {
          analyzer::ViewEvent event;
          event.start_ns = row.start[i];
          event.end_ns = row.end[i];
          event.correlation_id = row.correlation.empty() ? 0 : row.correlation[i];
          event.lane = lane_id;
          event.name = row.name[i];
          event.event_class = static_cast<EventClass>(row.event_class[i]);
          event.source = static_cast<EventSource>(row.source[i]);
          events.push_back(event);
        }
      }
      track.rows = PackRows(std::move(events));
      track.events += count;
    } else {
      Track track;
      if (lane_id == trace::kNoLane) {
        track.label = "events on undeclared lanes";
      } else {
        const trace::Lane& lane = lanes[lane_id - 1];
        track.lane = lane.id;
        track.kind = lane.kind;
        track.device = lane.kind == trace::LaneKind::kGpuStream ? lane.device : -1;
        track.label = analyzer::LaneLabel(lane);
      }
      track.rows = PackRows(std::move(events));
      track.events = count;
      rank.tracks.push_back(std::move(track));
      new_tracks = true;
    }
    if (rank.events == 0) {
      rank.first_ns = std::numeric_limits<int64_t>::max();
      rank.last_ns = std::numeric_limits<int64_t>::min();
    }
    for (const PendingMark& p : pending) {
      if (p.lane != lane_id || p.mark.file_row) continue;
      rank.first_ns = std::min(rank.first_ns, p.mark.start_ns);
      rank.last_ns = std::max(rank.last_ns, p.end_ns);
    }
    rank.events += count;
  }
  if (new_tracks) {
    // Load's order; tracks of lanes `lanes` does not hold (undeclared events) last.
    auto known = [&](const Track& track) { return declared(track.lane); };
    std::stable_sort(rank.tracks.begin(), rank.tracks.end(), [&](const Track& a, const Track& b) {
      if (!known(a) || !known(b)) return known(a) && !known(b);
      return analyzer::LaneShownBefore(lanes[a.lane - 1], lanes[b.lane - 1]);
    });
  }

  // Every mark finds its event, each event one mark.
  std::set<std::tuple<uint32_t, uint32_t, uint32_t>> taken;
  for (PendingMark& p : pending) {
    const std::optional<size_t> t = TrackOf(rank, p.lane);
    if (!t) continue;
    const auto track = static_cast<uint32_t>(*t);
    const auto at = FindInTrack(rank.tracks[*t], p.source, p.mark.start_ns,
                                [&](const EventRow& row, uint32_t r, size_t i) {
                                  return row.end[i] == p.end_ns && row.name[i] == p.name &&
                                         !taken.contains({track, r, static_cast<uint32_t>(i)});
                                });
    if (!at) continue;
    taken.insert({track, at->row, at->index});
    p.mark.track = track;
    p.mark.row = at->row;
    p.mark.index = at->index;
    out.marks.push_back(std::move(p.mark));
  }
  std::sort(out.marks.begin(), out.marks.end(), [](const EndMark& a, const EndMark& b) {
    return std::tie(a.track, a.row, a.index) < std::tie(b.track, b.row, b.index);
  });

  const bool ended_normally = end.closed_cleanly && !end.ended_by.starts_with("signal");
  out.show_marker = out.has_state && (!out.marks.empty() || !ended_normally);
  if (out.show_marker && rank.events > 0) rank.last_ns = std::max(rank.last_ns, out.as_of_ns);
  return unplaced;
}

std::vector<std::pair<std::string, std::string>> EndMarkFields(const TimelineModel& model, const EventRef& ref,
                                                               const EndMark& mark) {
  const RankTimeline& rank = model.rank(ref);
  const Track& track = rank.tracks[ref.track];
  const std::string open_for =
      format::FormatDuration(static_cast<double>(std::max<int64_t>(0, mark.as_of_ns - mark.start_ns)));
  std::vector<std::pair<std::string, std::string>> fields;
  if (mark.kind == EndMarkKind::kCollective) {
    const trace::FlightCollective& c = mark.collective;
    const std::string title = analyzer::CollectiveTitle(analyzer::CollectiveOpName(c.op), c.name);
    fields.emplace_back("state", mark.file_row ? "in flight when the file ended (the file holds a row for it)"
                                               : "in flight when the file ended");
    fields.emplace_back("communicator", analyzer::CommHashText(c.comm_hash));
    fields.emplace_back("sequence", fmt::format("#{}", c.sequence));
    fields.emplace_back("op", title);
    if (!c.name.empty() && c.name != title) fields.emplace_back("recorded name", c.name);
    fields.emplace_back("bytes", format::FormatBytes(static_cast<double>(c.bytes)));
    if (c.root >= 0) fields.emplace_back("root", fmt::format("{}", c.root));
    if (c.peer >= 0) fields.emplace_back("peer", fmt::format("communicator rank {}", c.peer));
    if (c.comm_rank >= 0) {
      fields.emplace_back("rank in communicator",
                          c.comm_size > 0 ? fmt::format("{} of {}", c.comm_rank, c.comm_size) : fmt::format("{}", c.comm_rank));
    }
    fields.emplace_back("lane", track.label);
    fields.emplace_back("entered", AfterRunStart(model, rank, mark.start_ns));
    fields.emplace_back("in flight for", open_for + " when the state was taken");
  } else {
    const trace::OpenRange& r = mark.range;
    fields.emplace_back("state", mark.file_row ? "open when the file was closed (written with the close time as its "
                                                 "end, flagged unfinished)"
                                               : "open when the file ended (the file holds no row for it)");
    fields.emplace_back("thread", track.label);
    fields.emplace_back("depth", fmt::format("{}", r.depth));
    if (!r.domain.empty()) fields.emplace_back("domain", r.domain);
    if (r.category != 0) fields.emplace_back("category", fmt::format("{}", r.category));
    if (!r.args.empty()) fields.emplace_back("args", r.args);
    fields.emplace_back("opened", AfterRunStart(model, rank, mark.start_ns));
    fields.emplace_back("open for", open_for + (rank.end.has_state ? " when the state was taken" : " when the file was closed"));
  }
  if (rank.end.has_state) fields.emplace_back("state taken", AfterRunStart(model, rank, rank.end.as_of_ns));
  fields.emplace_back("file", !rank.end.ended_by.empty() ? "ended by " + rank.end.ended_by
                              : rank.end.closed_cleanly  ? std::string("closed")
                                                         : std::string("never closed (killed or crashed)"));
  return fields;
}

}  // namespace rankscope::gui
