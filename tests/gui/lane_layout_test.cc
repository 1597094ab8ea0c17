// gui/core/lane_layout.h: a header per rank, then the rows of each track; collapsed ranks
// keep only their header; lookups by y and by row agree with the entries.
#include "gui/core/lane_layout.h"

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "tests/gui/model_builder.h"

namespace rankscope::gui {
namespace {

using testing::NamedEvent;
using testing::RankBuilder;
using Kind = LayoutEntry::Kind;

// Three ranks: rank 0 has a track of 2 rows and one of 1; rank 1 one track of 3 rows;
// rank 2 tracks of 1, 1 and 2 rows. 3 headers + 10 rows = 13 entries expanded.
TimelineModel ThreeRanks() {
  std::vector<RankTimeline> ranks;
  auto rows = [](RankBuilder& b, uint32_t track, int count) {
    for (int r = 0; r < count; ++r) b.AddRow(track, {NamedEvent{100 * r, 100 * r + 50, "k"}});
  };
  {
    RankBuilder b(0, "host-a");
    rows(b, b.AddTrack(trace::LaneKind::kGpuStream, 0, "GPU 0 · stream 7"), 2);
    rows(b, b.AddTrack(trace::LaneKind::kCpuThread, -1, "thread 1 main"), 1);
    ranks.push_back(b.Build());
  }
  {
    RankBuilder b(1, "host-a");
    rows(b, b.AddTrack(trace::LaneKind::kGpuStream, 0, "GPU 0 · stream 7"), 3);
    ranks.push_back(b.Build());
  }
  {
    RankBuilder b(2, "host-b");
    rows(b, b.AddTrack(trace::LaneKind::kGpuStream, 0, "GPU 0 · stream 7"), 1);
    rows(b, b.AddTrack(trace::LaneKind::kGpuStream, 0, "GPU 0 · stream 9"), 1);
    rows(b, b.AddTrack(trace::LaneKind::kCpuThread, -1, "thread 2 main"), 2);
    ranks.push_back(b.Build());
  }
  return TimelineModel("hand-built", std::move(ranks));
}

// (kind, rank, track, row) of each entry.
using Shape = std::tuple<Kind, uint32_t, uint32_t, uint32_t>;
std::vector<Shape> Shapes(const LaneLayout& layout) {
  std::vector<Shape> shapes;
  for (const LayoutEntry& e : layout.entries()) {
    shapes.emplace_back(e.kind, e.rank, e.kind == Kind::kRow ? e.track : 0, e.kind == Kind::kRow ? e.row : 0);
  }
  return shapes;
}

// Entries in y order, not overlapping, with the style's heights; rows of one track
// back to back; tracks of one rank `track_gap_px` apart; the total below the last entry.
void ExpectConsistentGeometry(const LaneLayout& layout, const LayoutStyle& style) {
  const std::vector<LayoutEntry>& entries = layout.entries();
  ASSERT_FALSE(entries.empty());
  EXPECT_GE(entries.front().y, 0);
  for (size_t i = 0; i < entries.size(); ++i) {
    const LayoutEntry& e = entries[i];
    EXPECT_EQ(e.height, e.kind == Kind::kRankHeader ? style.rank_header_px : style.row_px) << i;
    if (e.kind == Kind::kRow) {
      EXPECT_EQ(e.first_row_of_track, e.row == 0) << i;
    }
    if (i == 0) continue;
    const LayoutEntry& before = entries[i - 1];
    EXPECT_LE(before.y + before.height, e.y) << "entries " << i - 1 << " and " << i << " overlap";
    if (e.kind == Kind::kRow && before.kind == Kind::kRow && before.rank == e.rank) {
      if (before.track == e.track) {
        EXPECT_EQ(e.y, before.y + before.height) << "rows of one track are back to back: " << i;
      } else {
        EXPECT_EQ(e.y, before.y + before.height + style.track_gap_px) << "tracks apart by the gap: " << i;
      }
    }
  }
  const LayoutEntry& last = entries.back();
  EXPECT_GE(layout.total_height(), last.y + last.height);
  EXPECT_LE(layout.total_height(), last.y + last.height + style.track_gap_px);
}

TEST(LaneLayout, ExpandedRanksShowAHeaderThenEveryRowOfEveryTrack) {
  const TimelineModel model = ThreeRanks();
  LaneLayout layout;
  layout.Build(model, {});
  const std::vector<Shape> expected = {
      {Kind::kRankHeader, 0, 0, 0}, {Kind::kRow, 0, 0, 0}, {Kind::kRow, 0, 0, 1}, {Kind::kRow, 0, 1, 0},
      {Kind::kRankHeader, 1, 0, 0}, {Kind::kRow, 1, 0, 0}, {Kind::kRow, 1, 0, 1}, {Kind::kRow, 1, 0, 2},
      {Kind::kRankHeader, 2, 0, 0}, {Kind::kRow, 2, 0, 0}, {Kind::kRow, 2, 1, 0}, {Kind::kRow, 2, 2, 0},
      {Kind::kRow, 2, 2, 1},
  };
  EXPECT_EQ(Shapes(layout), expected);
  ExpectConsistentGeometry(layout, LayoutStyle{});
  // Default style: headers 22 px, rows 18 px.
  EXPECT_EQ(layout.entries()[0].height, 22);
  EXPECT_EQ(layout.entries()[1].height, 18);
  // At least 3 headers, 10 rows and the gaps between tracks: 1 in rank 0, 2 in rank 2.
  EXPECT_GE(layout.total_height(), 3 * 22 + 10 * 18 + 3 * 3);
}

TEST(LaneLayout, HonoursTheStyle) {
  const TimelineModel model = ThreeRanks();
  LayoutStyle style;
  style.rank_header_px = 30;
  style.row_px = 10;
  style.track_gap_px = 5;
  LaneLayout layout;
  layout.Build(model, {}, style);
  ASSERT_EQ(layout.entries().size(), 13u);
  ExpectConsistentGeometry(layout, style);
}

TEST(LaneLayout, CollapsedRankShowsOnlyItsHeader) {
  const TimelineModel model = ThreeRanks();
  LaneLayout expanded;
  expanded.Build(model, {});
  LaneLayout collapsed;
  collapsed.Build(model, {false, true});  // rank 1 collapsed; rank 2 missing: expanded
  const std::vector<Shape> expected = {
      {Kind::kRankHeader, 0, 0, 0}, {Kind::kRow, 0, 0, 0}, {Kind::kRow, 0, 0, 1}, {Kind::kRow, 0, 1, 0},
      {Kind::kRankHeader, 1, 0, 0},
      {Kind::kRankHeader, 2, 0, 0}, {Kind::kRow, 2, 0, 0}, {Kind::kRow, 2, 1, 0}, {Kind::kRow, 2, 2, 0},
      {Kind::kRow, 2, 2, 1},
  };
  EXPECT_EQ(Shapes(collapsed), expected);
  ExpectConsistentGeometry(collapsed, LayoutStyle{});

  EXPECT_EQ(collapsed.RowEntry(1, 0, 0), nullptr);
  EXPECT_EQ(collapsed.RowEntry(1, 0, 2), nullptr);
  ASSERT_NE(collapsed.RankHeader(1), nullptr);
  ASSERT_NE(collapsed.RankHeader(2), nullptr);
  // Rank 2's header comes right after rank 1's (give or take a gap) ...
  const int after_header = collapsed.RankHeader(1)->y + collapsed.RankHeader(1)->height;
  EXPECT_GE(collapsed.RankHeader(2)->y, after_header);
  EXPECT_LE(collapsed.RankHeader(2)->y, after_header + LayoutStyle{}.track_gap_px);
  // ... so everything from rank 2 on moved up by the same amount, and the total with it.
  const int shift = expanded.RankHeader(2)->y - collapsed.RankHeader(2)->y;
  EXPECT_GE(shift, 3 * 18);  // at least rank 1's three rows
  EXPECT_EQ(collapsed.total_height(), expanded.total_height() - shift);
  for (uint32_t track = 0; track < 3; ++track) {
    const LayoutEntry* before = expanded.RowEntry(2, track, 0);
    const LayoutEntry* after = collapsed.RowEntry(2, track, 0);
    ASSERT_NE(before, nullptr);
    ASSERT_NE(after, nullptr);
    EXPECT_EQ(after->y, before->y - shift);
  }
  // Rank 0 is untouched.
  EXPECT_EQ(collapsed.RowEntry(0, 1, 0)->y, expanded.RowEntry(0, 1, 0)->y);
}

TEST(LaneLayout, EveryRankCollapsedIsAStackOfHeaders) {
  const TimelineModel model = ThreeRanks();
  LaneLayout layout;
  layout.Build(model, {true, true, true});
  const std::vector<Shape> expected = {
      {Kind::kRankHeader, 0, 0, 0}, {Kind::kRankHeader, 1, 0, 0}, {Kind::kRankHeader, 2, 0, 0}};
  EXPECT_EQ(Shapes(layout), expected);
  EXPECT_GE(layout.total_height(), 3 * 22);
  EXPECT_LE(layout.total_height(), 3 * 22 + 3 * 3);
}

TEST(LaneLayout, RowEntryAndRankHeaderNameTheirEntries) {
  const TimelineModel model = ThreeRanks();
  LaneLayout layout;
  layout.Build(model, {});
  for (uint32_t rank = 0; rank < 3; ++rank) {
    const LayoutEntry* header = layout.RankHeader(rank);
    ASSERT_NE(header, nullptr) << rank;
    EXPECT_EQ(header->kind, Kind::kRankHeader);
    EXPECT_EQ(header->rank, rank);
    const RankTimeline& r = model.ranks()[rank];
    for (uint32_t track = 0; track < r.tracks.size(); ++track) {
      for (uint32_t row = 0; row < r.tracks[track].rows.size(); ++row) {
        const LayoutEntry* e = layout.RowEntry(rank, track, row);
        ASSERT_NE(e, nullptr) << rank << "/" << track << "/" << row;
        EXPECT_EQ(e->kind, Kind::kRow);
        EXPECT_EQ(e->rank, rank);
        EXPECT_EQ(e->track, track);
        EXPECT_EQ(e->row, row);
        EXPECT_GT(e->y, header->y) << "rows come below their rank's header";
        EXPECT_EQ(layout.EntryAt(e->y), e);
      }
    }
  }
  EXPECT_EQ(layout.RowEntry(0, 0, 2), nullptr);  // track 0 of rank 0 has 2 rows
  EXPECT_EQ(layout.RowEntry(0, 5, 0), nullptr);
  EXPECT_EQ(layout.RankHeader(3), nullptr);
}

TEST(LaneLayout, EntryAtAgreesWithEntryRangesAndGaps) {
  const TimelineModel model = ThreeRanks();
  for (const std::vector<bool>& collapsed :
       {std::vector<bool>{}, std::vector<bool>{true}, std::vector<bool>{false, true, false}}) {
    LaneLayout layout;
    layout.Build(model, collapsed);
    const std::vector<LayoutEntry>& entries = layout.entries();
    for (int y = -5; y < layout.total_height() + 20; ++y) {
      const LayoutEntry* expected = nullptr;
      for (const LayoutEntry& e : entries) {
        if (e.y <= y && y < e.y + e.height) expected = &e;
      }
      EXPECT_EQ(layout.EntryAt(y), expected) << "y = " << y;
    }
    // Each entry's first and last pixel rows.
    for (const LayoutEntry& e : entries) {
      EXPECT_EQ(layout.EntryAt(e.y), &e);
      EXPECT_EQ(layout.EntryAt(e.y + e.height - 1), &e);
    }
  }
}

TEST(LaneLayout, TrackGapHitsNoEntry) {
  const TimelineModel model = ThreeRanks();
  LaneLayout layout;
  layout.Build(model, {});
  // Between rank 0's track 0 (rows 0, 1) and track 1 lies the 3-px gap.
  const LayoutEntry* last_of_track0 = layout.RowEntry(0, 0, 1);
  const LayoutEntry* first_of_track1 = layout.RowEntry(0, 1, 0);
  ASSERT_NE(last_of_track0, nullptr);
  ASSERT_NE(first_of_track1, nullptr);
  for (int y = last_of_track0->y + last_of_track0->height; y < first_of_track1->y; ++y) {
    EXPECT_EQ(layout.EntryAt(y), nullptr) << y;
  }
  EXPECT_EQ(first_of_track1->y - (last_of_track0->y + last_of_track0->height), 3);
}

TEST(LaneLayout, VisibleEntriesAreExactlyThoseIntersectingTheBand) {
  const TimelineModel model = ThreeRanks();
  LaneLayout layout;
  layout.Build(model, {false, true});
  const std::vector<LayoutEntry>& entries = layout.entries();
  const int total = layout.total_height();
  for (int y0 = -10; y0 < total + 10; y0 += 3) {
    for (int span : {1, 2, 7, 18, 40, 100, 1000}) {
      const int y1 = y0 + span;
      size_t first = entries.size(), last = entries.size();
      for (size_t i = 0; i < entries.size(); ++i) {
        if (entries[i].y < y1 && entries[i].y + entries[i].height > y0) {
          if (first == entries.size()) first = i;
          last = i + 1;
        }
      }
      const auto [got_first, got_last] = layout.VisibleEntries(y0, y1);
      if (first == entries.size()) {
        EXPECT_EQ(got_first, got_last) << "[" << y0 << ", " << y1 << ") should be empty";
      } else {
        EXPECT_EQ(got_first, first) << "[" << y0 << ", " << y1 << ")";
        EXPECT_EQ(got_last, last) << "[" << y0 << ", " << y1 << ")";
      }
    }
  }
  const auto [all_first, all_last] = layout.VisibleEntries(0, total);
  EXPECT_EQ(all_first, 0u);
  EXPECT_EQ(all_last, entries.size());
}

TEST(LaneLayout, EmptyModelHasNoEntries) {
  const TimelineModel model("empty", {});
  LaneLayout layout;
  layout.Build(model, {});
  EXPECT_TRUE(layout.entries().empty());
  EXPECT_EQ(layout.total_height(), 0);
  EXPECT_EQ(layout.EntryAt(0), nullptr);
  const auto [first, last] = layout.VisibleEntries(0, 100);
  EXPECT_EQ(first, last);
}

TEST(LaneLayout, RebuildReplacesTheEntries) {
  const TimelineModel model = ThreeRanks();
  LaneLayout layout;
  layout.Build(model, {true, true, true});
  layout.Build(model, {});
  EXPECT_EQ(layout.entries().size(), 13u);
}

// A rank's counters come after its tracks, each `counter_rows` rows tall and a track gap
// apart; a collapsed rank hides them with its tracks.
TEST(LaneLayout, CountersFollowTheirRanksTracks) {
  std::vector<RankTimeline> ranks;
  RankBuilder b(0, "host-a");
  b.AddRow(b.AddTrack(trace::LaneKind::kGpuStream, 0, "GPU 0 · stream 7"), {NamedEvent{0, 50, "k"}});
  ranks.push_back(b.Build());
  ranks[0].counters.resize(2);
  const TimelineModel model("hand-built", std::move(ranks));
  LayoutStyle style;
  style.counter_rows = 3;
  LaneLayout layout;
  layout.Build(model, {}, style);
  const std::vector<LayoutEntry>& entries = layout.entries();
  ASSERT_EQ(entries.size(), 4u);  // header, row, two counters
  const LayoutEntry& row = entries[1];
  for (uint32_t c = 0; c < 2; ++c) {
    const LayoutEntry& counter = entries[2 + c];
    EXPECT_EQ(counter.kind, Kind::kCounter);
    EXPECT_EQ(counter.track, c);
    EXPECT_EQ(counter.height, 3 * style.row_px);
    EXPECT_EQ(counter.y, row.y + row.height + style.track_gap_px + c * (counter.height + style.track_gap_px));
  }
  EXPECT_EQ(layout.EntryAt(entries[3].y + 5), &entries[3]);
  EXPECT_EQ(layout.total_height(), entries[3].y + entries[3].height + style.track_gap_px);
  layout.Build(model, {true}, style);
  EXPECT_EQ(layout.entries().size(), 1u);
}

}  // namespace
}  // namespace rankscope::gui
