#include "gui/core/timeline_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <mutex>
#include <tuple>

#include "gui/core/run_end.h"

namespace rankscope::gui {
namespace {

template <typename T>
size_t VectorBytes(const std::vector<T>& v) {
  return v.capacity() * sizeof(T);
}

// Rows get a correlation column with their first correlated event, no sooner.
void AppendToRow(EventRow& row, const analyzer::ViewEvent& event) {
  row.start.push_back(event.start_ns);
  row.end.push_back(event.end_ns);
  row.name.push_back(event.name);
  row.event_class.push_back(static_cast<uint8_t>(event.event_class));
  row.source.push_back(static_cast<uint8_t>(event.source));
  // Before this event, the row either had a column as long as its other columns or none.
  const bool has_column = !row.correlation.empty();
  if (has_column || event.correlation_id != 0) {
    if (!has_column) {
      row.correlation.reserve(row.start.capacity());
      row.correlation.assign(row.size() - 1, 0);
    }
    row.correlation.push_back(static_cast<uint32_t>(event.correlation_id));
  }
  row.class_mask |= static_cast<uint8_t>(1u << static_cast<unsigned>(event.event_class));
}

// Packs one lane's events of one table into rows as they arrive. Rows from rankscope's
// own files come in start order for device lanes, so they go straight into their rows with
// no copy; the first event out of order (NVTX ranges are stored as they end) sends the rest
// aside, and those are sorted and packed once at the end.
class RowPacker {
 public:
  void Reserve(size_t events) {
    if (rows_.empty()) {
      rows_.emplace_back();
      row_end_.push_back(std::numeric_limits<int64_t>::min());
    }
    EventRow& row = rows_.front();
    row.start.reserve(events);
    row.end.reserve(events);
    row.name.reserve(events);
    row.event_class.reserve(events);
    row.source.reserve(events);
  }

  void Add(const analyzer::ViewEvent& event) {
    ++events_;
    if (pending_.empty() && InOrder(event)) {
      Place(event);
    } else {
      pending_.push_back(event);
    }
  }

  size_t events() const { return events_; }

  // The rows, each sorted; the packer is left empty.
  std::vector<EventRow> Finish() {
    if (!pending_.empty()) {
      std::vector<analyzer::ViewEvent> all = Unpack();
      all.insert(all.end(), pending_.begin(), pending_.end());
      pending_ = {};
      rows_ = PackRows(std::move(all));
    }
    std::erase_if(rows_, [](const EventRow& row) { return row.size() == 0; });
    for (EventRow& row : rows_) {
      row.start.shrink_to_fit();
      row.end.shrink_to_fit();
      row.name.shrink_to_fit();
      row.event_class.shrink_to_fit();
      row.source.shrink_to_fit();
      row.correlation.shrink_to_fit();
    }
    return std::move(rows_);
  }

 private:
  // PackRows' order: by start, the longer first.
  bool InOrder(const analyzer::ViewEvent& event) const {
    return !placed_any_ || event.start_ns > last_start_ || (event.start_ns == last_start_ && event.end_ns <= last_end_);
  }

  void Place(const analyzer::ViewEvent& event) {
    placed_any_ = true;
    last_start_ = event.start_ns;
    last_end_ = event.end_ns;
    size_t r = 0;
    while (r < rows_.size() && row_end_[r] > event.start_ns) ++r;
    if (r == rows_.size()) {
      rows_.emplace_back();
      row_end_.push_back(event.end_ns);
    }
    row_end_[r] = event.end_ns;
    AppendToRow(rows_[r], event);
  }

  std::vector<analyzer::ViewEvent> Unpack() {
    std::vector<analyzer::ViewEvent> events;
    for (const EventRow& row : rows_) {
      for (size_t i = 0; i < row.size(); ++i) events.push_back(EventAt(row, i));
    }
    rows_.clear();
    row_end_.clear();
    return events;
  }

 public:
  static analyzer::ViewEvent EventAt(const EventRow& row, size_t i) {
    return {row.start[i], row.end[i], row.correlation.empty() ? 0 : row.correlation[i], trace::kNoLane, row.name[i],
            static_cast<EventClass>(row.event_class[i]), static_cast<EventSource>(row.source[i])};
  }

 private:
  std::vector<EventRow> rows_;
  std::vector<int64_t> row_end_;
  bool placed_any_ = false;
  int64_t last_start_ = 0, last_end_ = 0;
  size_t events_ = 0;
  std::vector<analyzer::ViewEvent> pending_;
};

// One lane: a packer per source table (tables arrive one after another, each in time
// order), merged at the end without sorting.
class LanePacker {
 public:
  void Reserve(size_t events) { hint_ = events; }

  void Add(const analyzer::ViewEvent& event) {
    RowPacker& packer = by_source_[static_cast<size_t>(event.source) & 7];
    if (packer.events() == 0 && hint_ > 0) {
      packer.Reserve(hint_);
      hint_ = 0;  // the first table is usually the lane's bulk; the others grow
    }
    packer.Add(event);
    ++events_;
  }

  size_t events() const { return events_; }

  std::vector<EventRow> Finish() {
    std::vector<std::vector<EventRow>> parts;
    for (RowPacker& packer : by_source_) {
      if (packer.events() > 0) parts.push_back(packer.Finish());
    }
    if (parts.empty()) return {};
    if (parts.size() == 1) return std::move(parts.front());
    // K-way merge of every sorted row of every part, in PackRows' order.
    struct Cursor {
      const EventRow* row;
      size_t index;
    };
    std::vector<Cursor> cursors;
    for (const std::vector<EventRow>& rows : parts) {
      for (const EventRow& row : rows) cursors.push_back({&row, 0});
    }
    auto after = [](const Cursor& a, const Cursor& b) {  // heap order: the earliest on top
      const int64_t sa = a.row->start[a.index], sb = b.row->start[b.index];
      return sa != sb ? sa > sb : a.row->end[a.index] < b.row->end[b.index];
    };
    std::make_heap(cursors.begin(), cursors.end(), after);
    RowPacker merged;
    merged.Reserve(events_);
    while (!cursors.empty()) {
      std::pop_heap(cursors.begin(), cursors.end(), after);
      Cursor& cursor = cursors.back();
      merged.Add(RowPacker::EventAt(*cursor.row, cursor.index));
      if (++cursor.index < cursor.row->size()) {
        std::push_heap(cursors.begin(), cursors.end(), after);
      } else {
        cursors.pop_back();
      }
    }
    parts.clear();
    return merged.Finish();
  }

 private:
  std::array<RowPacker, 8> by_source_;
  size_t hint_ = 0;
  size_t events_ = 0;
};

// One rank's events, packed per lane until the rank is complete.
struct RankBuilder {
  analyzer::ViewRank header;
  std::vector<LanePacker> by_lane;  // index = lane id; 0 = undeclared
  std::vector<std::pair<uint32_t, int64_t>> step_titles;  // (name, number) of titled steps
  std::vector<analyzer::MemorySeries> memory;
  int64_t first_ns = std::numeric_limits<int64_t>::max();
  int64_t last_ns = std::numeric_limits<int64_t>::min();
};

class ModelBuilder final : public analyzer::ViewEventSink {
 public:
  explicit ModelBuilder(const std::atomic<bool>* cancel) : cancel_(cancel) {}

  Status OnRank(size_t index, analyzer::ViewRank rank) override {
    RS_RETURN_IF_ERROR(CheckCancel());
    RankBuilder& builder = Builder(index);
    builder.by_lane.resize(rank.lanes.size() + 1);
    // The hints come from the file: each is capped by the file's size, but their sum is not.
    // Reserve no more in all than the largest one.
    uint64_t budget = 0;
    for (uint64_t hint : rank.lane_events) budget = std::max(budget, hint);
    for (size_t lane = 0; lane < rank.lane_events.size() && lane < builder.by_lane.size(); ++lane) {
      const uint64_t events = std::min(rank.lane_events[lane], budget);
      budget -= events;
      builder.by_lane[lane].Reserve(static_cast<size_t>(events));
    }
    builder.header = std::move(rank);
    return Status::Ok();
  }

  Status OnEvents(size_t index, std::span<const analyzer::ViewEvent> events) override {
    RS_RETURN_IF_ERROR(CheckCancel());
    RankBuilder& builder = Builder(index);
    if (builder.by_lane.empty()) builder.by_lane.resize(1);
    for (const analyzer::ViewEvent& event : events) {
      const size_t slot = event.lane < builder.by_lane.size() ? event.lane : 0;
      if (event.name == trace::kEmptyString &&
          (event.source == EventSource::kMemcpy || event.source == EventSource::kMemset)) {
        // Named once the rank's strings are final (NameSynthetic).
        analyzer::ViewEvent named = event;
        named.name = kUnnamedCopy + (event.source == EventSource::kMemset ? kMemsetSlot : event.copy_kind);
        builder.by_lane[slot].Add(named);
      } else if (event.step > 0 && builder.step_titles.size() < kMaxStepTitles) {
        // "step 41", titled at the end too.
        analyzer::ViewEvent named = event;
        named.name = kStepTitle + static_cast<uint32_t>(builder.step_titles.size());
        builder.step_titles.emplace_back(event.name, event.step - 1);
        builder.by_lane[slot].Add(named);
      } else {
        builder.by_lane[slot].Add(event);
      }
      builder.first_ns = std::min(builder.first_ns, event.start_ns);
      builder.last_ns = std::max(builder.last_ns, event.end_ns);
    }
    return Status::Ok();
  }

  Status OnMoreNames(size_t index, std::span<const std::string> strings, std::span<const trace::Lane> lanes) override {
    RankBuilder& builder = Builder(index);
    builder.header.strings.insert(builder.header.strings.end(), strings.begin(), strings.end());
    builder.header.lanes.insert(builder.header.lanes.end(), lanes.begin(), lanes.end());
    builder.by_lane.resize(builder.header.lanes.size() + 1);
    return Status::Ok();
  }

  Status OnRankEnd(size_t index, trace::RankMeta meta, std::vector<trace::Lane> lanes) override {
    RankBuilder& builder = Builder(index);
    builder.header.meta = std::move(meta);
    builder.header.lanes = std::move(lanes);
    builder.by_lane.resize(builder.header.lanes.size() + 1);
    return Status::Ok();
  }

  Status OnMemory(size_t index, std::vector<analyzer::MemorySeries> series) override {
    Builder(index).memory = std::move(series);
    return Status::Ok();
  }

  Status OnRankDone(size_t index) override {
    RS_RETURN_IF_ERROR(CheckCancel());
    RankBuilder& builder = Builder(index);
    RankTimeline timeline = Finish(builder);
    std::vector<std::string> warnings;
    if (timeline.rank_file) warnings = AddRankEnd(timeline, builder.header.lanes);
    {
      std::lock_guard lock(mutex_);
      finished_[index] = std::move(timeline);
      if (!warnings.empty()) warnings_[index] = std::move(warnings);
      builders_.erase(index);
    }
    return Status::Ok();
  }

  // In rank order (streamed ranks come in the order they were read).
  std::vector<RankTimeline> Take() {
    std::vector<RankTimeline> ranks;
    for (auto& [index, timeline] : finished_) ranks.push_back(std::move(timeline));
    std::stable_sort(ranks.begin(), ranks.end(),
                     [](const RankTimeline& a, const RankTimeline& b) { return a.rank < b.rank; });
    return ranks;
  }

  // By rank, in rank order.
  std::vector<std::string> TakeWarnings() {
    std::vector<std::string> all;
    for (auto& [index, warnings] : warnings_) {
      for (std::string& warning : warnings) all.push_back(std::move(warning));
    }
    return all;
  }

 private:
  Status CheckCancel() const {
    if (cancel_ != nullptr && cancel_->load(std::memory_order_relaxed)) {
      return Unavailable(TimelineModel::kCancelledMessage);
    }
    return Status::Ok();
  }

  RankBuilder& Builder(size_t index) {
    std::lock_guard lock(mutex_);
    std::unique_ptr<RankBuilder>& builder = builders_[index];
    if (!builder) builder = std::make_unique<RankBuilder>();
    return *builder;
  }

  // The rank's end state on its lanes; what cannot be read or placed is a warning, never an
  // error: the events are shown either way.
  static std::vector<std::string> AddRankEnd(RankTimeline& timeline, const std::vector<trace::Lane>& lanes) {
    if (timeline.rank < 0) return {};  // ranked files only, as the diagnosis reads them
    Result<RankEndInput> input = ReadRankEndInput(timeline);
    if (!input.ok()) return {fmt::format("in-flight state not shown: {}", input.status().message())};
    const size_t unplaced = ApplyRankEnd(timeline, lanes, *input);
    if (unplaced == 0) return {};
    return {fmt::format("{}: {} in-flight state entr{} name{} a lane the file does not declare (not shown)",
                        timeline.file.string(), unplaced, unplaced == 1 ? "y" : "ies", unplaced == 1 ? "s" : "")};
  }

  // Copies and sets the file leaves unnamed carry kUnnamedCopy + their copy kind (or
  // kMemsetSlot) until here: each such name becomes one string of the rank, as Nsight
  // Systems names them ("Memcpy HtoD", "Memset"), so they have a title and search finds them.
  static constexpr uint32_t kUnnamedCopy = 0xFFFFFF00u;
  static constexpr uint32_t kMemsetSlot = 0xFF;
  // Step ranges carry kStepTitle + their index in RankBuilder::step_titles until then.
  static constexpr uint32_t kStepTitle = 0xF0000000u;
  static constexpr size_t kMaxStepTitles = kUnnamedCopy - kStepTitle;

  static void NameSynthetic(RankTimeline& timeline, const std::vector<std::pair<uint32_t, int64_t>>& step_titles) {
    std::array<uint32_t, 256> ids{};  // 0: not yet added
    std::map<std::pair<uint32_t, int64_t>, uint32_t> titled;
    for (Track& track : timeline.tracks) {
      for (EventRow& row : track.rows) {
        for (uint32_t& name : row.name) {
          if (name < kStepTitle) continue;
          if (name < kUnnamedCopy) {
            const std::pair<uint32_t, int64_t>& title = step_titles[name - kStepTitle];
            auto [it, added] = titled.try_emplace(title, static_cast<uint32_t>(timeline.strings.size()));
            if (added) timeline.strings.push_back(fmt::format("{} {}", timeline.Str(title.first), title.second));
            name = it->second;
            continue;
          }
          const uint32_t slot = name - kUnnamedCopy;
          if (ids[slot] == 0) {
            ids[slot] = static_cast<uint32_t>(timeline.strings.size());
            timeline.strings.emplace_back(analyzer::UnnamedCopyName(
                slot == kMemsetSlot ? EventSource::kMemset : EventSource::kMemcpy, static_cast<uint8_t>(slot)));
          }
          name = ids[slot];
        }
      }
    }
  }

  static RankTimeline Finish(RankBuilder& builder) {
    RankTimeline timeline;
    timeline.rank = builder.header.meta.rank.value_or(-1);
    timeline.host = builder.header.meta.host;
    timeline.file = builder.header.file;
    timeline.rank_file = builder.header.rank_file;
    timeline.strings = std::move(builder.header.strings);
    timeline.first_ns = builder.first_ns;
    timeline.last_ns = builder.last_ns;
    const std::vector<trace::Lane>& lanes = builder.header.lanes;
    for (size_t slot = 0; slot < builder.by_lane.size(); ++slot) {
      LanePacker& packer = builder.by_lane[slot];
      if (packer.events() == 0) continue;
      Track track;
      if (slot == 0) {
        track.label = "events on undeclared lanes";
      } else {
        const trace::Lane& lane = lanes[slot - 1];
        track.lane = lane.id;
        track.kind = lane.kind;
        track.device = lane.kind == trace::LaneKind::kGpuStream ? lane.device : -1;
        track.label = analyzer::LaneLabel(lane);
      }
      track.events = packer.events();
      timeline.events += packer.events();
      track.rows = packer.Finish();
      packer = LanePacker();
      timeline.tracks.push_back(std::move(track));
    }
    if (timeline.events == 0) timeline.first_ns = timeline.last_ns = 0;
    for (const analyzer::MemorySeries& series : builder.memory) {
      CounterTrack counter = MakeCounterTrack(series);
      if (counter.size() == 0) continue;
      const bool first = timeline.events == 0 && timeline.counters.empty();
      timeline.first_ns = first ? counter.ts.front() : std::min(timeline.first_ns, counter.ts.front());
      timeline.last_ns = first ? counter.ts.back() : std::max(timeline.last_ns, counter.ts.back());
      timeline.counters.push_back(std::move(counter));
    }
    std::vector<analyzer::MemorySeries>().swap(builder.memory);
    NameSynthetic(timeline, builder.step_titles);
    // Events on undeclared lanes go last.
    std::stable_sort(timeline.tracks.begin(), timeline.tracks.end(), [&](const Track& a, const Track& b) {
      if (a.lane == trace::kNoLane || b.lane == trace::kNoLane) return b.lane == trace::kNoLane && a.lane != b.lane;
      return analyzer::LaneShownBefore(lanes[a.lane - 1], lanes[b.lane - 1]);
    });
    return timeline;
  }

  const std::atomic<bool>* cancel_ = nullptr;
  std::mutex mutex_;
  std::map<size_t, std::unique_ptr<RankBuilder>> builders_;
  std::map<size_t, RankTimeline> finished_;
  std::map<size_t, std::vector<std::string>> warnings_;
};

}  // namespace

analyzer::SpanColumns EventRow::Columns() const { return {start, end, name, event_class}; }

void EventRow::IndexBusy() {
  busy_blocks.assign(size() / kBusyBlock + 1, 0);
  int64_t sum = 0;
  for (size_t i = 0; i < size(); ++i) {
    if (i % kBusyBlock == 0) busy_blocks[i / kBusyBlock] = sum;
    sum += end[i] - start[i];
  }
  busy_blocks.shrink_to_fit();
}

int64_t EventRow::BusyNs(size_t first, size_t last) const {
  last = std::min(last, size());
  if (first >= last) return 0;
  // The prefix sum before `k`: its block's, then the events of the block before k.
  auto before = [&](size_t k) {
    const size_t block = k / kBusyBlock;
    int64_t sum = block < busy_blocks.size() ? busy_blocks[block] : 0;
    const size_t from = block < busy_blocks.size() ? block * kBusyBlock : 0;
    for (size_t i = from; i < k; ++i) sum += end[i] - start[i];
    return sum;
  };
  return before(last) - before(first);
}

size_t EventRow::MemoryBytes() const {
  return VectorBytes(start) + VectorBytes(end) + VectorBytes(name) + VectorBytes(event_class) + VectorBytes(source) +
         VectorBytes(correlation) + VectorBytes(busy_blocks);
}

std::vector<EventRow> PackRows(std::vector<analyzer::ViewEvent> events) {
  std::erase_if(events, [](const analyzer::ViewEvent& e) { return e.end_ns < e.start_ns; });
  // By start, the longer first: a parent before the children it starts with.
  auto before = [](const analyzer::ViewEvent& a, const analyzer::ViewEvent& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.end_ns > b.end_ns;
  };
  // Events come as a few sorted runs (one per table, or rows already packed): merging the
  // runs pairwise costs O(n log runs), far less than sorting from scratch.
  std::vector<size_t> bounds = {0};
  for (size_t i = 1; i < events.size(); ++i) {
    if (before(events[i], events[i - 1])) bounds.push_back(i);
  }
  bounds.push_back(events.size());
  while (bounds.size() > 2) {
    std::vector<size_t> merged = {0};
    for (size_t k = 0; k + 2 < bounds.size(); k += 2) {
      std::inplace_merge(events.begin() + static_cast<ptrdiff_t>(bounds[k]),
                         events.begin() + static_cast<ptrdiff_t>(bounds[k + 1]),
                         events.begin() + static_cast<ptrdiff_t>(bounds[k + 2]), before);
      merged.push_back(bounds[k + 2]);
    }
    if (bounds.size() % 2 == 0) merged.push_back(bounds.back());  // an odd run waits a round
    bounds = std::move(merged);
  }
  std::vector<EventRow> rows;
  std::vector<int64_t> row_end;
  for (const analyzer::ViewEvent& event : events) {
    size_t r = 0;
    while (r < rows.size() && row_end[r] > event.start_ns) ++r;
    if (r == rows.size()) {
      rows.emplace_back();
      row_end.push_back(event.end_ns);
    }
    row_end[r] = event.end_ns;
    AppendToRow(rows[r], event);
  }
  return rows;
}

std::string RankTimeline::Label() const {
  const std::string who = rank >= 0 ? fmt::format("rank {}", rank) : std::string("rank ?");
  return host.empty() ? who : fmt::format("{} · {}", who, host);
}

const std::string& RankTimeline::Str(uint32_t id) const {
  static const std::string kEmpty;
  return id < strings.size() ? strings[id] : kEmpty;
}

Result<std::unique_ptr<TimelineModel>> TimelineModel::Load(const std::filesystem::path& run,
                                                           const ModelLoadOptions& options) {
  analyzer::ViewLoadOptions load;
  load.classify = options.classify;
  load.threads = options.threads;
  load.progress = options.progress;
  return Build(run, [&](analyzer::ViewEventSink& sink) -> Result<std::vector<std::string>> {
    RS_ASSIGN_OR_RETURN(analyzer::ViewRun loaded, analyzer::StreamRunEvents(run, load, sink));
    return std::move(loaded.warnings);
  });
}

Result<std::unique_ptr<TimelineModel>> TimelineModel::Build(std::filesystem::path source, const EventStream& stream,
                                                            const std::atomic<bool>* cancel) {
  ModelBuilder builder(cancel);
  Result<std::vector<std::string>> streamed = stream(builder);
  // Whatever a cancelled stream says (a reader may word its stop its own way), it was cancelled.
  if (cancel != nullptr && cancel->load()) return Unavailable(kCancelledMessage);
  RS_ASSIGN_OR_RETURN(std::vector<std::string> warnings, std::move(streamed));
  auto model = std::make_unique<TimelineModel>(std::move(source), builder.Take());
  for (std::string& warning : warnings) model->AddWarning(std::move(warning));
  for (std::string& warning : builder.TakeWarnings()) model->AddWarning(std::move(warning));
  return model;
}

TimelineModel::TimelineModel(std::filesystem::path source, std::vector<RankTimeline> ranks)
    : source_(std::move(source)), ranks_(std::move(ranks)) {
  for (RankTimeline& rank : ranks_) {
    for (Track& track : rank.tracks) {
      for (EventRow& row : track.rows) {
        if (!row.HasBusyIndex()) row.IndexBusy();
      }
    }
  }
  UpdateExtent();
}

void TimelineModel::ApplyClockAlignment(const analyzer::ClockAlignment& clock) {
  for (const analyzer::HostClock& host : clock.hosts) {
    for (int rank : host.ranks) {
      for (RankTimeline& timeline : ranks_) {
        if (timeline.rank == rank) timeline.clock_offset_ns = host.offset_ns;
      }
    }
  }
  UpdateExtent();
}

void TimelineModel::UpdateExtent() {
  bool any = false;
  auto include = [&](int64_t first, int64_t last) {
    start_ns_ = any ? std::min(start_ns_, first) : first;
    end_ns_ = any ? std::max(end_ns_, last) : last;
    any = true;
  };
  for (const RankTimeline& timeline : ranks_) {
    if (timeline.events > 0 || !timeline.counters.empty()) {
      include(timeline.first_ns + timeline.clock_offset_ns, timeline.last_ns + timeline.clock_offset_ns);
    }
    if (timeline.end.show_marker) {
      const int64_t as_of = timeline.end.as_of_ns + timeline.clock_offset_ns;
      include(as_of, as_of);
    }
  }
  if (!any) start_ns_ = end_ns_ = 0;
}

size_t TimelineModel::events() const {
  size_t total = 0;
  for (const RankTimeline& timeline : ranks_) total += timeline.events;
  return total;
}

size_t TimelineModel::MemoryBytes() const {
  size_t total = 0;
  for (const RankTimeline& timeline : ranks_) {
    for (const std::string& s : timeline.strings) total += sizeof(std::string) + s.capacity();
    for (const Track& track : timeline.tracks) {
      for (const EventRow& row : track.rows) total += sizeof(EventRow) + row.MemoryBytes();
    }
    for (const CounterTrack& counter : timeline.counters) total += counter.MemoryBytes();
  }
  return total;
}

bool TimelineModel::Contains(const EventRef& ref) const {
  return ref.rank < ranks_.size() && ref.track < ranks_[ref.rank].tracks.size() &&
         ref.row < ranks_[ref.rank].tracks[ref.track].rows.size() &&
         ref.index < ranks_[ref.rank].tracks[ref.track].rows[ref.row].size();
}

int64_t TimelineModel::DisplayStart(const EventRef& ref) const {
  return row(ref).start[ref.index] + rank(ref).clock_offset_ns;
}

int64_t TimelineModel::DisplayEnd(const EventRef& ref) const {
  return row(ref).end[ref.index] + rank(ref).clock_offset_ns;
}

const std::string& TimelineModel::Name(const EventRef& ref) const { return rank(ref).Str(row(ref).name[ref.index]); }

EventClass TimelineModel::ClassOf(const EventRef& ref) const {
  return static_cast<EventClass>(row(ref).event_class[ref.index]);
}

EventSource TimelineModel::SourceOf(const EventRef& ref) const {
  return static_cast<EventSource>(row(ref).source[ref.index]);
}

const EndMark* TimelineModel::FindEndMark(const EventRef& ref) const {
  if (ref.rank >= ranks_.size()) return nullptr;
  const std::vector<EndMark>& marks = ranks_[ref.rank].end.marks;
  const auto key = std::make_tuple(ref.track, ref.row, ref.index);
  auto it = std::lower_bound(marks.begin(), marks.end(), key, [](const EndMark& mark, const auto& k) {
    return std::make_tuple(mark.track, mark.row, mark.index) < k;
  });
  return it != marks.end() && std::make_tuple(it->track, it->row, it->index) == key ? &*it : nullptr;
}

bool TimelineModel::HasEndMarks() const {
  return std::any_of(ranks_.begin(), ranks_.end(), [](const RankTimeline& rank) { return !rank.end.marks.empty(); });
}

uint32_t TimelineModel::CorrelationOf(const EventRef& ref) const {
  const EventRow& r = row(ref);
  return r.correlation.empty() ? 0 : r.correlation[ref.index];
}

}  // namespace rankscope::gui
