#include "gui/core/search.h"

#include <algorithm>
#include <limits>
#include <tuple>

namespace rankscope::gui {
namespace {

// A position in the match order: start on the common clock, then the event's indices.
struct Key {
  int64_t start = 0;
  uint32_t rank = 0, track = 0, row = 0, index = 0;
  auto Tuple() const { return std::tie(start, rank, track, row, index); }
  bool operator<(const Key& other) const { return Tuple() < other.Tuple(); }
};

Key KeyOf(const TimelineModel& model, const EventRef& ref) {
  return {model.DisplayStart(ref), ref.rank, ref.track, ref.row, ref.index};
}

}  // namespace

SearchMatches SearchMatches::Find(const TimelineModel& model, const std::function<bool(std::string_view)>& matches) {
  SearchMatches found;
  const std::vector<RankTimeline>& ranks = model.ranks();
  for (uint32_t r = 0; r < ranks.size(); ++r) {
    const RankTimeline& rank = ranks[r];
    // Each distinct name is tested once; -1 = not yet.
    std::vector<int8_t> verdict(rank.strings.size(), -1);
    for (uint32_t t = 0; t < rank.tracks.size(); ++t) {
      const std::vector<EventRow>& rows = rank.tracks[t].rows;
      for (uint32_t w = 0; w < rows.size(); ++w) {
        Row row{r, t, w, {}};
        const std::vector<uint32_t>& names = rows[w].name;
        for (uint32_t i = 0; i < names.size(); ++i) {
          const uint32_t id = names[i];
          if (id >= verdict.size()) continue;
          int8_t& known = verdict[id];
          if (known < 0) known = !rank.strings[id].empty() && matches(rank.strings[id]) ? 1 : 0;
          if (known == 1) row.indices.push_back(i);
        }
        if (row.indices.empty()) continue;
        row.indices.shrink_to_fit();
        found.total_ += row.indices.size();
        found.rows_.push_back(std::move(row));
      }
    }
  }
  return found;
}

std::span<const uint32_t> SearchMatches::InRow(uint32_t rank, uint32_t track, uint32_t row) const {
  const auto key = std::make_tuple(rank, track, row);
  auto it = std::lower_bound(rows_.begin(), rows_.end(), key, [](const Row& r, const auto& k) {
    return std::make_tuple(r.rank, r.track, r.row) < k;
  });
  if (it == rows_.end() || std::make_tuple(it->rank, it->track, it->row) != key) return {};
  return it->indices;
}

namespace {

// The first match after `anchor` (forward), or the last before it, wrapping around.
std::optional<EventRef> Nearest(const TimelineModel& model, const std::vector<SearchMatches::Row>& rows,
                                const Key& anchor, bool forward) {
  std::optional<Key> best;
  std::optional<Key> wrap;  // the first (last) match of all, when none is after (before)
  for (const SearchMatches::Row& row : rows) {
    const EventRow& events = model.ranks()[row.rank].tracks[row.track].rows[row.row];
    const int64_t offset = model.ranks()[row.rank].clock_offset_ns;
    auto key_at = [&](size_t k) {
      return Key{events.start[row.indices[k]] + offset, row.rank, row.track, row.row, row.indices[k]};
    };
    // Keys ascend along the list: the first key above the anchor (forward), or the first
    // not below it.
    size_t lo = 0, hi = row.indices.size();
    while (lo < hi) {
      const size_t mid = lo + (hi - lo) / 2;
      const Key k = key_at(mid);
      if (forward ? !(anchor < k) : k < anchor) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    if (forward) {
      if (lo < row.indices.size() && (!best || key_at(lo) < *best)) best = key_at(lo);
      if (!wrap || key_at(0) < *wrap) wrap = key_at(0);
    } else {
      if (lo > 0 && (!best || *best < key_at(lo - 1))) best = key_at(lo - 1);
      const Key last = key_at(row.indices.size() - 1);
      if (!wrap || *wrap < last) wrap = last;
    }
  }
  if (!best && !wrap) return std::nullopt;
  const Key& chosen = best ? *best : *wrap;
  return EventRef{chosen.rank, chosen.track, chosen.row, chosen.index};
}

}  // namespace

std::optional<EventRef> SearchMatches::Step(const TimelineModel& model, const EventRef& from, bool forward) const {
  return Nearest(model, rows_, KeyOf(model, from), forward);
}

std::optional<EventRef> SearchMatches::StepFromTime(const TimelineModel& model, int64_t time_ns, bool forward) const {
  // An anchor after every event starting at time_ns (forward), or before all of them.
  constexpr uint32_t kMax = std::numeric_limits<uint32_t>::max();
  const Key anchor = forward ? Key{time_ns, kMax, kMax, kMax, kMax} : Key{time_ns, 0, 0, 0, 0};
  return Nearest(model, rows_, anchor, forward);
}

size_t SearchMatches::PositionOf(const TimelineModel& model, const EventRef& ref) const {
  const Key anchor = KeyOf(model, ref);
  size_t before = 0;
  for (const Row& row : rows_) {
    const EventRow& events = model.ranks()[row.rank].tracks[row.track].rows[row.row];
    const int64_t offset = model.ranks()[row.rank].clock_offset_ns;
    auto it = std::partition_point(row.indices.begin(), row.indices.end(), [&](uint32_t i) {
      return Key{events.start[i] + offset, row.rank, row.track, row.row, i} < anchor;
    });
    before += static_cast<size_t>(it - row.indices.begin());
  }
  return before;
}

std::vector<EventRef> SearchMatches::All(const TimelineModel& model) const {
  std::vector<EventRef> all;
  all.reserve(total_);
  for (const Row& row : rows_) {
    for (uint32_t i : row.indices) all.push_back({row.rank, row.track, row.row, i});
  }
  std::sort(all.begin(), all.end(),
            [&](const EventRef& a, const EventRef& b) { return KeyOf(model, a) < KeyOf(model, b); });
  return all;
}

size_t SearchMatches::MemoryBytes() const {
  size_t bytes = rows_.capacity() * sizeof(Row);
  for (const Row& row : rows_) bytes += row.indices.capacity() * sizeof(uint32_t);
  return bytes;
}

}  // namespace rankscope::gui
