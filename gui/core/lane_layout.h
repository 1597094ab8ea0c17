// Vertical layout: a header per rank (collapsible), then a band of rows per track, then its
// counters.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "gui/core/timeline_model.h"

namespace rankscope::gui {

struct LayoutEntry {
  // A rank's header, a row of one of its tracks, or one of its counters (RankTimeline::counters).
  enum class Kind : uint8_t { kRankHeader, kRow, kCounter };
  Kind kind = Kind::kRow;
  uint32_t rank = 0;
  uint32_t track = 0;  // rows: the track; counters: the counter
  uint32_t row = 0;    // rows only
  int y = 0;           // top, in content pixels
  int height = 0;
  bool first_row_of_track = false;
};

struct LayoutStyle {
  int rank_header_px = 22;
  int row_px = 18;
  int track_gap_px = 3;
  int counter_rows = 2;  // a counter is as tall as this many rows
};

class LaneLayout {
 public:
  // collapsed[i]: rank i shows its header only (missing entries: expanded).
  void Build(const TimelineModel& model, const std::vector<bool>& collapsed, const LayoutStyle& style = {});

  const std::vector<LayoutEntry>& entries() const { return entries_; }
  int total_height() const { return total_height_; }
  // The entry at content y; nullptr outside any entry (gaps, below the end).
  const LayoutEntry* EntryAt(int y) const;
  // Indices [first, last) of entries intersecting [y0, y1).
  std::pair<size_t, size_t> VisibleEntries(int y0, int y1) const;
  // The entry of a row; nullptr when its rank is collapsed.
  const LayoutEntry* RowEntry(uint32_t rank, uint32_t track, uint32_t row) const;
  const LayoutEntry* RankHeader(uint32_t rank) const;

 private:
  std::vector<LayoutEntry> entries_;
  int total_height_ = 0;
};

}  // namespace rankscope::gui
