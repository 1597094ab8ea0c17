#include "gui/core/lane_layout.h"

#include <algorithm>

namespace rankscope::gui {

void LaneLayout::Build(const TimelineModel& model, const std::vector<bool>& collapsed, const LayoutStyle& style) {
  entries_.clear();
  int y = 0;
  const std::vector<RankTimeline>& ranks = model.ranks();
  for (uint32_t r = 0; r < ranks.size(); ++r) {
    entries_.push_back({LayoutEntry::Kind::kRankHeader, r, 0, 0, y, style.rank_header_px, false});
    y += style.rank_header_px;
    if (r < collapsed.size() && collapsed[r]) continue;
    const std::vector<Track>& tracks = ranks[r].tracks;
    for (uint32_t t = 0; t < tracks.size(); ++t) {
      for (uint32_t row = 0; row < tracks[t].rows.size(); ++row) {
        entries_.push_back({LayoutEntry::Kind::kRow, r, t, row, y, style.row_px, row == 0});
        y += style.row_px;
      }
      y += style.track_gap_px;
    }
    for (uint32_t c = 0; c < ranks[r].counters.size(); ++c) {
      const int height = style.row_px * style.counter_rows;
      entries_.push_back({LayoutEntry::Kind::kCounter, r, c, 0, y, height, true});
      y += height + style.track_gap_px;
    }
  }
  total_height_ = y;
}

const LayoutEntry* LaneLayout::EntryAt(int y) const {
  auto it = std::upper_bound(entries_.begin(), entries_.end(), y,
                             [](int value, const LayoutEntry& entry) { return value < entry.y; });
  if (it == entries_.begin()) return nullptr;
  --it;
  return y < it->y + it->height ? &*it : nullptr;
}

std::pair<size_t, size_t> LaneLayout::VisibleEntries(int y0, int y1) const {
  // Entries are sorted by y and do not overlap: first ending after y0, first starting at y1.
  auto first = std::partition_point(entries_.begin(), entries_.end(),
                                    [&](const LayoutEntry& entry) { return entry.y + entry.height <= y0; });
  auto last = std::partition_point(first, entries_.end(), [&](const LayoutEntry& entry) { return entry.y < y1; });
  return {static_cast<size_t>(first - entries_.begin()), static_cast<size_t>(last - entries_.begin())};
}

const LayoutEntry* LaneLayout::RowEntry(uint32_t rank, uint32_t track, uint32_t row) const {
  for (const LayoutEntry& entry : entries_) {
    if (entry.kind == LayoutEntry::Kind::kRow && entry.rank == rank && entry.track == track && entry.row == row) {
      return &entry;
    }
  }
  return nullptr;
}

const LayoutEntry* LaneLayout::RankHeader(uint32_t rank) const {
  for (const LayoutEntry& entry : entries_) {
    if (entry.kind == LayoutEntry::Kind::kRankHeader && entry.rank == rank) return &entry;
  }
  return nullptr;
}

}  // namespace rankscope::gui
