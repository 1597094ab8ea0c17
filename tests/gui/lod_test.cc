// gui/core/lod.h: one row's draw items at any zoom (sub-pixel events fold, wide ones stay
// exact, everything visible is covered), hit testing and the first-ending search.
#include "gui/core/lod.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/gui/model_builder.h"

namespace rankscope::gui {
namespace {

using testing::MakeRow;
using testing::RegularRow;
using testing::RowEvent;
using testing::RowOfSpans;

std::vector<DrawItem> Items(const EventRow& row, int64_t t0, double ns_per_px, double width_px,
                            LodOptions options = {}) {
  std::vector<DrawItem> items;
  BuildRowGeometry(row, t0, ns_per_px, width_px, options, &items);
  return items;
}

// The events of `row` overlapping [t0, t1): indices [first, last).
std::pair<size_t, size_t> Visible(const EventRow& row, int64_t t0, int64_t t1) {
  size_t first = 0;
  while (first < row.size() && row.end[first] <= t0) ++first;
  size_t last = first;
  while (last < row.size() && row.start[last] < t1) ++last;
  return {first, last};
}

// How strictly ExpectValidGeometry holds items to the view's half-open edges.
enum class Cull {
  kExact,      // exactly the events overlapping [t0, t1)
  kEdgeSlack,  // also events touching t0, and events starting within a pixel after t1
};

// Every property an item list must have, whatever the zoom:
// - items are in time order, do not overlap, and each is a run of consecutive events;
// - together they hold every event overlapping the view, each once, and (kExact) no other;
// - each event's pixel span (clipped to the view) lies within its item, give or take a pixel;
// - folds are at least min_width_px wide unless the next item starts sooner, and events at
//   least min_width_px wide are single items.
void ExpectValidGeometry(const EventRow& row, int64_t t0, double ns_per_px, double width_px,
                         const std::vector<DrawItem>& items, double min_width_px = 1.0, Cull cull = Cull::kExact) {
  const int64_t t1 = t0 + static_cast<int64_t>(width_px * ns_per_px);
  const auto [first, last] = Visible(row, t0, t1);
  if (items.empty()) {
    EXPECT_EQ(first, last) << "visible events but no items";
    return;
  }
  const size_t begin = items.front().index;
  if (cull == Cull::kExact) {
    EXPECT_EQ(begin, first) << "the first visible event must start the first item";
  } else {
    EXPECT_LE(begin, first) << "the first visible event is not drawn";
    for (size_t e = begin; e < first && e < row.size(); ++e) {
      EXPECT_GE(row.end[e], t0) << "event " << e << " ends before the view but is drawn";
    }
  }
  size_t next = begin;
  for (size_t j = 0; j < items.size(); ++j) {
    const DrawItem& item = items[j];
    ASSERT_EQ(item.index, next) << "item " << j << " skips or repeats events";
    ASSERT_GE(item.count, 1u) << "item " << j;
    ASSERT_LE(item.index + item.count, row.size()) << "item " << j;
    EXPECT_LE(item.x0, item.x1) << "item " << j;
    if (j > 0) {
      EXPECT_LE(items[j - 1].x1, item.x0 + 1e-6) << "items " << j - 1 << " and " << j << " overlap";
    }
    // Folds are min_width_px wide, unless the next item starts sooner.
    const bool next_is_close = j + 1 < items.size() && items[j + 1].x0 < item.x0 + min_width_px;
    if (item.count > 1 && !next_is_close) {
      EXPECT_GE(item.x1 - item.x0, min_width_px - 1e-9) << "fold " << j;
    }
    for (uint32_t e = item.index; e < item.index + item.count; ++e) {
      const double x_start = std::max((static_cast<double>(row.start[e] - t0)) / ns_per_px, 0.0);
      const double x_end = std::min((static_cast<double>(row.end[e] - t0)) / ns_per_px, width_px);
      ASSERT_LE(item.x0, x_start + 1.0) << "event " << e << " starts before its item " << j;
      ASSERT_GE(item.x1, x_end - 1.0) << "event " << e << " ends after its item " << j;
      const double width = static_cast<double>(row.end[e] - row.start[e]) / ns_per_px;
      if (width >= min_width_px) {
        EXPECT_EQ(item.count, 1u) << "wide event " << e << " (" << width << " px) was folded";
      }
    }
    next = item.index + item.count;
  }
  if (cull == Cull::kExact) {
    EXPECT_EQ(next, last) << "items hold events [" << last << ", " << next << ") that start at or after the "
                          << "view's end " << t1 << " (or miss visible ones)";
  } else {
    EXPECT_GE(next, last) << "the items miss visible events";
    for (size_t e = last; e < next; ++e) {
      EXPECT_LE(static_cast<double>(row.start[e]), static_cast<double>(t1) + ns_per_px)
          << "event " << e << " starts more than a pixel after the view";
    }
  }
}

// ---- Wide events ----------------------------------------------------------------------------

TEST(BuildRowGeometry, WideEventsAreSingleItemsAtExactPixels) {
  const EventRow row = MakeRow({
      {1000, 2000, 0, EventClass::kCompute, EventSource::kKernel, 0},
      {3000, 5000, 0, EventClass::kComm, EventSource::kKernel, 0},
      {6000, 6500, 0, EventClass::kMemory, EventSource::kMemcpy, 0},
  });
  // 10 ns per pixel over 1000 px: the view is [0, 10 µs).
  const std::vector<DrawItem> items = Items(row, 0, 10.0, 1000);
  ASSERT_EQ(items.size(), 3u);
  EXPECT_DOUBLE_EQ(items[0].x0, 100.0);  // 1000 / 10
  EXPECT_DOUBLE_EQ(items[0].x1, 200.0);  // 2000 / 10
  EXPECT_DOUBLE_EQ(items[1].x0, 300.0);
  EXPECT_DOUBLE_EQ(items[1].x1, 500.0);
  EXPECT_DOUBLE_EQ(items[2].x0, 600.0);
  EXPECT_DOUBLE_EQ(items[2].x1, 650.0);
  for (uint32_t i = 0; i < 3; ++i) {
    EXPECT_EQ(items[i].index, i);
    EXPECT_EQ(items[i].count, 1u);
  }
  EXPECT_EQ(items[0].event_class, static_cast<uint8_t>(EventClass::kCompute));
  EXPECT_EQ(items[1].event_class, static_cast<uint8_t>(EventClass::kComm));
  EXPECT_EQ(items[2].event_class, static_cast<uint8_t>(EventClass::kMemory));
}

TEST(BuildRowGeometry, XIsRelativeToT0) {
  const EventRow row = RowOfSpans({{1'000'250, 1'000'750}});
  // t0 = 1 ms, 2.5 ns/px: x0 = 250 / 2.5 = 100, x1 = 750 / 2.5 = 300.
  const std::vector<DrawItem> items = Items(row, 1'000'000, 2.5, 400);
  ASSERT_EQ(items.size(), 1u);
  EXPECT_DOUBLE_EQ(items[0].x0, 100.0);
  EXPECT_DOUBLE_EQ(items[0].x1, 300.0);
}

TEST(BuildRowGeometry, LeavesOutEventsOutsideTheHalfOpenView) {
  const EventRow row = RowOfSpans({
      {0, 100},              // long before
      {18'000, 19'000},      // ends exactly at t0: not visible
      {20'000, 21'000},      // inside
      {28'000, 28'990},      // inside
      {29'000, 29'500},      // starts exactly at the view's end: not visible
      {50'000, 51'000},      // long after
  });
  // t0 = 19 µs, 10 ns/px, 1000 px: [19 µs, 29 µs).
  const std::vector<DrawItem> items = Items(row, 19'000, 10.0, 1000);
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(items[0].index, 2u);
  EXPECT_DOUBLE_EQ(items[0].x0, 100.0);  // (20000 - 19000) / 10
  EXPECT_DOUBLE_EQ(items[0].x1, 200.0);
  EXPECT_EQ(items[1].index, 3u);
  EXPECT_DOUBLE_EQ(items[1].x0, 900.0);  // (28000 - 19000) / 10
  EXPECT_DOUBLE_EQ(items[1].x1, 999.0);  // (28990 - 19000) / 10
}

TEST(BuildRowGeometry, DrawsEventsCrossingTheViewEdges) {
  const EventRow row = RowOfSpans({{0, 5000}, {8000, 20'000}});
  // t0 = 4 µs, 10 ns/px, 300 px: [4 µs, 7 µs) sees the end of the first event only.
  std::vector<DrawItem> items = Items(row, 4000, 10.0, 300);
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0].index, 0u);
  EXPECT_LE(items[0].x0, 0.0);
  EXPECT_DOUBLE_EQ(items[0].x1, 100.0);  // (5000 - 4000) / 10

  // [7.5 µs, 10.5 µs): the second event starts at x = 50 and runs past the right edge.
  items = Items(row, 7500, 10.0, 300);
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0].index, 1u);
  EXPECT_DOUBLE_EQ(items[0].x0, 50.0);
  EXPECT_GE(items[0].x1, 300.0);

  // An event wider than the view on both sides.
  items = Items(row, 10'000, 10.0, 300);
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0].index, 1u);
  EXPECT_LE(items[0].x0, 0.0);
  EXPECT_GE(items[0].x1, 300.0);
}

// A fold says how much of its span its events cover: the density the viewer shades it by.
// The busy sums come from per-32-event prefix blocks, exact for any run of events.
TEST(BuildRowGeometry, FoldsSayHowBusyTheyAre) {
  EventRow dense = testing::RegularRow(0, 5, 10, 10'000);   // 5 ns of every 10: 50%
  EventRow sparse = testing::RegularRow(0, 1, 10, 10'000);  // 1 ns of every 10: 10%
  dense.IndexBusy();
  sparse.IndexBusy();
  EXPECT_EQ(dense.BusyNs(0, 10'000), 50'000);
  EXPECT_EQ(dense.BusyNs(3, 70), 67 * 5);
  EXPECT_EQ(sparse.BusyNs(31, 33), 2);
  EXPECT_EQ(sparse.BusyNs(5, 5), 0);
  for (const auto& [row, share] : {std::pair<const EventRow*, double>{&dense, 0.5}, {&sparse, 0.1}}) {
    std::vector<DrawItem> items;
    BuildRowGeometry(*row, 0, 1000.0, 100, LodOptions{}, &items);
    ASSERT_FALSE(items.empty());
    for (const DrawItem& item : items) {
      ASSERT_GT(item.count, 1u);
      EXPECT_NEAR(item.busy, share, 0.01) << "a fold of " << item.count;
    }
  }
  // A single event is as busy as it gets.
  std::vector<DrawItem> wide;
  BuildRowGeometry(testing::RegularRow(0, 900, 1000, 3), 0, 1.0, 3000, LodOptions{}, &wide);
  ASSERT_EQ(wide.size(), 3u);
  for (const DrawItem& item : wide) EXPECT_EQ(item.busy, 1.0f);
}

TEST(BuildRowGeometry, EmptyRowAndEmptyViewGiveNothing) {
  EXPECT_TRUE(Items(EventRow{}, 0, 10.0, 1000).empty());
  const EventRow row = RowOfSpans({{100, 200}});
  EXPECT_TRUE(Items(row, 1'000'000, 10.0, 1000).empty());
}

TEST(BuildRowGeometry, AppendsToTheOutputVector) {
  const EventRow row = RowOfSpans({{1000, 2000}, {3000, 4000}});
  std::vector<DrawItem> items;
  items.push_back(DrawItem{-5, -4, 77, 1, 0});
  BuildRowGeometry(row, 0, 10.0, 1000, LodOptions{}, &items);
  ASSERT_EQ(items.size(), 3u);
  EXPECT_EQ(items[0].index, 77u);  // the earlier item is kept
  EXPECT_EQ(items[1].index, 0u);
  EXPECT_EQ(items[2].index, 1u);
}

// ---- Sub-pixel events -------------------------------------------------------------------------

// The case: 10^6 events of 10 ns every 15 ns (5 ns gaps): 15 ms of events.
constexpr size_t kDense = 1'000'000;
constexpr int64_t kLength = 10;
constexpr int64_t kPeriod = 15;

TEST(BuildRowGeometry, MillionSubPixelEventsFoldIntoAtMostOneItemPerPixel) {
  const EventRow row = RegularRow(0, kLength, kPeriod, kDense);
  // All of it over 1000 px: 15 ms / 1000 px = 15 µs per pixel, so an event is 1/1500 px.
  const double ns_per_px = 15'000.0;
  const std::vector<DrawItem> items = Items(row, 0, ns_per_px, 1000);
  EXPECT_LE(items.size(), 1000u);
  size_t folded = 0;
  for (const DrawItem& item : items) {
    folded += item.count;
    EXPECT_EQ(item.event_class, static_cast<uint8_t>(EventClass::kCompute));
  }
  EXPECT_EQ(folded, kDense);  // every event in exactly one item
  ExpectValidGeometry(row, 0, ns_per_px, 1000, items);
}

TEST(BuildRowGeometry, DenseRowAtEveryZoomIsCoveredWithoutOverlap) {
  const EventRow row = RegularRow(0, kLength, kPeriod, kDense);
  // From the whole row down to single events: 15000, 1500, 150, 12 (event 0.83 px, gap
  // 0.42 px: all fold), 8 (event 1.25 px: alone), 3, 1 ns per pixel.
  for (double ns_per_px : {15'000.0, 1'500.0, 150.0, 12.0, 8.0, 3.0, 1.0}) {
    for (int64_t t0 : {int64_t{0}, int64_t{3}, int64_t{7'500'003}, int64_t{14'999'000}}) {
      SCOPED_TRACE(::testing::Message() << ns_per_px << " ns/px from " << t0);
      const std::vector<DrawItem> items = Items(row, t0, ns_per_px, 1000);
      EXPECT_LE(items.size(), 1000u);
      ExpectValidGeometry(row, t0, ns_per_px, 1000, items, 1.0, Cull::kEdgeSlack);
    }
  }
}

TEST(BuildRowGeometry, FoldsStopAtTheViewsRightEdge) {
  const EventRow row = RegularRow(0, kLength, kPeriod, kDense);
  // [0, 1000 px · 150 ns) = [0, 150 µs) holds events 0 .. 9999 (15 · 9999 < 150000 = 15 · 10000);
  // [0, 1.5 ms) at 1500 ns/px holds events 0 .. 99999.
  for (const auto& [ns_per_px, visible] : {std::pair<double, size_t>{150.0, 10'000}, {1500.0, 100'000}}) {
    const std::vector<DrawItem> items = Items(row, 0, ns_per_px, 1000);
    size_t folded = 0;
    for (const DrawItem& item : items) folded += item.count;
    EXPECT_EQ(folded, visible) << ns_per_px << " ns/px: events after the view's end were folded in";
    ExpectValidGeometry(row, 0, ns_per_px, 1000, items);
  }
}

TEST(BuildRowGeometry, DenseRowZoomedInDrawsEachEventAlone) {
  const EventRow row = RegularRow(0, kLength, kPeriod, kDense);
  // 1 ns per pixel from t0 = 7 500 003 ns: [7 500 003, 7 501 003). Event k is [15k, 15k + 10);
  // visible when 15k + 10 > 7 500 003 (k >= 500 000) and 15k < 7 501 003 (k <= 500 066): 67.
  const int64_t t0 = 7'500'003;
  const std::vector<DrawItem> items = Items(row, t0, 1.0, 1000);
  ASSERT_EQ(items.size(), 67u);
  EXPECT_EQ(items.front().index, 500'000u);
  EXPECT_DOUBLE_EQ(items.front().x1, 7.0);  // 7 500 010 - 7 500 003
  for (size_t j = 1; j < items.size(); ++j) {
    const int64_t k = 500'000 + static_cast<int64_t>(j);
    EXPECT_EQ(items[j].index, static_cast<uint32_t>(k));
    EXPECT_EQ(items[j].count, 1u);
    EXPECT_DOUBLE_EQ(items[j].x0, static_cast<double>(15 * k - t0));
    EXPECT_DOUBLE_EQ(items[j].x1, static_cast<double>(15 * k + 10 - t0));
  }
  EXPECT_DOUBLE_EQ(items.back().x1, 997.0);  // 15 · 500 066 + 10 - 7 500 003
}

TEST(BuildRowGeometry, WideEventsAmongFoldsKeepExactPixels) {
  // 100 ns per pixel. Runs of 10-ns events (0.1 px) with 5-ns gaps, around two wide events
  // (10 µs = 100 px and 25 µs = 250 px) set several pixels away from the runs.
  std::vector<RowEvent> events;
  auto run = [&events](int64_t from, int count) {
    for (int i = 0; i < count; ++i) events.push_back({from + 15 * i, from + 15 * i + 10});
  };
  run(0, 200);                               // [0, 2995): ~30 px of folds
  events.push_back({10'000, 20'000});        // x 100 .. 200
  run(25'000, 100);                          // [25000, 26495)
  events.push_back({40'000, 65'000});        // x 400 .. 650
  run(70'000, 300);
  const EventRow row = MakeRow(events);
  const std::vector<DrawItem> items = Items(row, 0, 100.0, 1000);
  ExpectValidGeometry(row, 0, 100.0, 1000, items);
  int wide_seen = 0;
  for (const DrawItem& item : items) {
    if (item.index == 200) {
      ++wide_seen;
      EXPECT_EQ(item.count, 1u);
      EXPECT_DOUBLE_EQ(item.x0, 100.0);  // 10000 / 100
      EXPECT_DOUBLE_EQ(item.x1, 200.0);  // 20000 / 100
    }
    if (item.index == 301) {             // 200 + 1 + 100
      ++wide_seen;
      EXPECT_EQ(item.count, 1u);
      EXPECT_DOUBLE_EQ(item.x0, 400.0);
      EXPECT_DOUBLE_EQ(item.x1, 650.0);
    }
  }
  EXPECT_EQ(wide_seen, 2);
  // 600 narrow events over ~75 px of runs: far fewer items than events.
  EXPECT_LT(items.size(), 100u);
}

TEST(BuildRowGeometry, FoldTakesTheClassHoldingTheMostTime) {
  // 100 ns/px: each group spans 0.19 px, so it folds into one item of three events.
  const EventRow row = MakeRow({
      {0, 4, 0, EventClass::kComm, EventSource::kKernel, 0},         // comm 4
      {5, 9, 0, EventClass::kComm, EventSource::kKernel, 0},         // comm 4: 8 in all
      {10, 19, 0, EventClass::kCompute, EventSource::kKernel, 0},    // compute 9 > 8
      {5000, 5004, 0, EventClass::kCompute, EventSource::kKernel, 0},  // compute 8 in all
      {5005, 5009, 0, EventClass::kCompute, EventSource::kKernel, 0},
      {5010, 5019, 0, EventClass::kComm, EventSource::kKernel, 0},     // comm 9 > 8
  });
  const std::vector<DrawItem> items = Items(row, 0, 100.0, 100);
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(items[0].index, 0u);
  EXPECT_EQ(items[0].count, 3u);
  EXPECT_EQ(items[0].event_class, static_cast<uint8_t>(EventClass::kCompute));
  EXPECT_EQ(items[1].index, 3u);
  EXPECT_EQ(items[1].count, 3u);
  EXPECT_EQ(items[1].event_class, static_cast<uint8_t>(EventClass::kComm));
  for (const DrawItem& item : items) {
    EXPECT_GE(item.x1 - item.x0, 1.0);  // min_width_px
  }
}

TEST(BuildRowGeometry, FoldOfASingleClassRowHasThatClass) {
  const EventRow row = RegularRow(1000, 3, 7, 5000, EventClass::kMemory);
  const std::vector<DrawItem> items = Items(row, 0, 1000.0, 500);
  ASSERT_FALSE(items.empty());
  for (const DrawItem& item : items) {
    EXPECT_EQ(item.event_class, static_cast<uint8_t>(EventClass::kMemory));
  }
}

TEST(BuildRowGeometry, MinWidthOptionDecidesWhatFolds) {
  // 20-ns events every 25 ns at 10 ns/px: 2 px wide with half-pixel gaps.
  const EventRow row = RegularRow(0, 20, 25, 100);
  // min_width 1 px: every event is wide enough to stand alone, at its exact pixels.
  const std::vector<DrawItem> alone = Items(row, 0, 10.0, 300);
  ASSERT_EQ(alone.size(), 100u);
  EXPECT_DOUBLE_EQ(alone[7].x0, 17.5);  // 7 · 25 / 10
  EXPECT_DOUBLE_EQ(alone[7].x1, 19.5);  // (7 · 25 + 20) / 10
  ExpectValidGeometry(row, 0, 10.0, 300, alone);
  // min_width 4 px: every event is narrower and the gaps are under a pixel, so they fold.
  LodOptions wide;
  wide.min_width_px = 4.0;
  const std::vector<DrawItem> folded = Items(row, 0, 10.0, 300, wide);
  ExpectValidGeometry(row, 0, 10.0, 300, folded, 4.0);
  EXPECT_LT(folded.size(), 100u);
}

TEST(BuildRowGeometry, RandomRowsAtRandomZoomsAreValid) {
  std::mt19937_64 random(20240611);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<RowEvent> events;
    int64_t t = 0;
    std::uniform_int_distribution<int> kind(0, 9);
    for (int i = 0; i < 20'000; ++i) {
      const int k = kind(random);
      // Mostly short events and gaps, sometimes long ones.
      const int64_t gap = k < 7 ? std::uniform_int_distribution<int64_t>(0, 50)(random)
                                : std::uniform_int_distribution<int64_t>(0, 200'000)(random);
      const int64_t length = k < 6 ? std::uniform_int_distribution<int64_t>(0, 40)(random)
                                   : std::uniform_int_distribution<int64_t>(0, 500'000)(random);
      t += gap;
      events.push_back({t, t + length, 0, static_cast<EventClass>(k % 3), EventSource::kKernel, 0});
      t += length;
    }
    const EventRow row = MakeRow(events);
    const double ns_per_px = std::pow(10.0, std::uniform_real_distribution<double>(-0.5, 6.0)(random));
    const double width = std::uniform_real_distribution<double>(100, 3000)(random);
    const int64_t t0 = std::uniform_int_distribution<int64_t>(-1000, t)(random);
    SCOPED_TRACE(::testing::Message() << "trial " << trial << ": " << ns_per_px << " ns/px, " << width
                                    << " px from " << t0);
    const std::vector<DrawItem> items = Items(row, t0, ns_per_px, width);
    ExpectValidGeometry(row, t0, ns_per_px, width, items, 1.0, Cull::kEdgeSlack);
  }
}

// ---- Hit testing ----------------------------------------------------------------------------

TEST(EventAt, FindsTheEventCoveringTheTime) {
  const EventRow row = RowOfSpans({{100, 200}, {300, 400}, {1000, 1010}});
  EXPECT_EQ(EventAt(row, 100, 0), 0u);  // the start is inside
  EXPECT_EQ(EventAt(row, 150, 0), 0u);
  EXPECT_EQ(EventAt(row, 199, 0), 0u);
  EXPECT_EQ(EventAt(row, 350, 0), 1u);
  EXPECT_EQ(EventAt(row, 1005, 0), 2u);
  EXPECT_EQ(EventAt(row, 250, 0), std::nullopt);  // in a gap, no tolerance
  EXPECT_EQ(EventAt(row, 50, 0), std::nullopt);
  EXPECT_EQ(EventAt(row, 5000, 0), std::nullopt);
  EXPECT_EQ(EventAt(EventRow{}, 0, 1000), std::nullopt);
}

TEST(EventAt, TakesTheNearestEventWithinTheTolerance) {
  const EventRow row = RowOfSpans({{100, 200}, {300, 400}, {1000, 1010}});
  EXPECT_EQ(EventAt(row, 230, 50), 0u);   // 30 after event 0, 70 before event 1
  EXPECT_EQ(EventAt(row, 290, 50), 1u);   // 10 before event 1
  EXPECT_EQ(EventAt(row, 60, 50), 0u);    // 40 before event 0
  EXPECT_EQ(EventAt(row, 40, 50), std::nullopt);   // 60 away
  EXPECT_EQ(EventAt(row, 600, 50), std::nullopt);  // 200 from event 1, 400 from event 2
  EXPECT_EQ(EventAt(row, 1100, 100), 2u);          // 90 after event 2's end
  EXPECT_EQ(EventAt(row, 2000, 100), std::nullopt);
}

TEST(EventAt, FindsAnEventNarrowerThanTheToleranceWhenClickingNextToIt) {
  // A 2-ns kernel alone at 5 µs; the view has 1000 ns per pixel, so it is 0.002 px wide.
  const EventRow row = RowOfSpans({{0, 100}, {5000, 5002}, {50'000, 60'000}});
  const double ns_per_px = 1000;
  const int64_t tolerance = static_cast<int64_t>(3 * ns_per_px);  // 3 px
  // A click 1.5 px right of it and one 2 px left of it.
  EXPECT_EQ(EventAt(row, 5002 + static_cast<int64_t>(1.5 * ns_per_px), tolerance), 1u);
  EXPECT_EQ(EventAt(row, 5000 - static_cast<int64_t>(2 * ns_per_px), tolerance), 1u);
  // Without the tolerance the click misses.
  EXPECT_EQ(EventAt(row, 6500, 0), std::nullopt);
}

TEST(EventAt, SelectsTheRightEventAmongAMillion) {
  const EventRow row = RegularRow(0, kLength, kPeriod, kDense);
  for (int64_t k : {int64_t{0}, int64_t{1}, int64_t{123'456}, int64_t{500'000}, int64_t{999'999}}) {
    EXPECT_EQ(EventAt(row, kPeriod * k + 3, 0), static_cast<uint32_t>(k)) << k;   // inside event k
    EXPECT_EQ(EventAt(row, kPeriod * k + 9, 0), static_cast<uint32_t>(k)) << k;   // its last ns
    if (k + 1 < static_cast<int64_t>(kDense)) {
      EXPECT_EQ(EventAt(row, kPeriod * k + 12, 0), std::nullopt) << k;            // in the gap
      // 1 ns after k's end, 4 ns before k + 1: k. 4 ns after k's end, 1 ns before k + 1: k + 1.
      EXPECT_EQ(EventAt(row, kPeriod * k + 11, 2), static_cast<uint32_t>(k)) << k;
      EXPECT_EQ(EventAt(row, kPeriod * k + 14, 2), static_cast<uint32_t>(k + 1)) << k;
    }
  }
}

TEST(FirstEndingAfter, FindsTheFirstEventEndingStrictlyAfterT) {
  const EventRow row = RowOfSpans({{100, 200}, {300, 400}, {1000, 1010}});
  EXPECT_EQ(FirstEndingAfter(row, -5), 0u);
  EXPECT_EQ(FirstEndingAfter(row, 0), 0u);
  EXPECT_EQ(FirstEndingAfter(row, 199), 0u);
  EXPECT_EQ(FirstEndingAfter(row, 200), 1u);  // event 0 ends at 200, not after it
  EXPECT_EQ(FirstEndingAfter(row, 250), 1u);
  EXPECT_EQ(FirstEndingAfter(row, 400), 2u);
  EXPECT_EQ(FirstEndingAfter(row, 1009), 2u);
  EXPECT_EQ(FirstEndingAfter(row, 1010), 3u);  // none: the row's size
  EXPECT_EQ(FirstEndingAfter(EventRow{}, 0), 0u);
  const EventRow dense = RegularRow(0, kLength, kPeriod, kDense);
  EXPECT_EQ(FirstEndingAfter(dense, 7'500'003), 500'000u);  // event 500000 ends at 7 500 010
  EXPECT_EQ(FirstEndingAfter(dense, 7'500'010), 500'001u);
}

}  // namespace
}  // namespace rankscope::gui
