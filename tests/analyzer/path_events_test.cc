// analyzer/path_events.h: a rank's events kept per lane, found by the window they start in,
// the same before Seal (a scan of all) and after (binary search of each lane's sorted runs).
#include "analyzer/path_events.h"

#include "analyzer/rank_scan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <tuple>
#include <vector>

namespace rankscope::analyzer {
namespace {

using Found = std::vector<std::tuple<uint32_t, int64_t, int64_t>>;  // lane, start, end

Found StartingIn(const RankPathEvents& events, int64_t start, int64_t end) {
  std::vector<const PathEvent*> out;
  events.StartingIn(start, end, &out);
  Found found;
  for (const PathEvent* e : out) found.emplace_back(e->lane, e->start_ns, e->end_ns);
  std::sort(found.begin(), found.end());
  return found;
}

PathEvent Event(uint32_t lane, int64_t start, int64_t end) {
  PathEvent e;
  e.lane = lane;
  e.start_ns = start;
  e.end_ns = end;
  return e;
}

TEST(RankPathEventsTest, TwoSortedRunsInALaneAreBothSearched) {
  RankPathEvents events;
  // Lane 1: kernels 0..90, then copies 5..95 (a second table of the same stream).
  for (int64_t t = 0; t < 100; t += 10) events.Add(Event(1, t, t + 5));
  for (int64_t t = 5; t < 100; t += 10) events.Add(Event(1, t, t + 2));
  events.Add(Event(2, 40, 60));
  const Found before = StartingIn(events, 30, 50);
  events.Seal();
  const Found after = StartingIn(events, 30, 50);
  const Found expected = {{1, 30, 35}, {1, 35, 37}, {1, 40, 45}, {1, 45, 47}, {2, 40, 60}};
  EXPECT_EQ(before, expected);
  EXPECT_EQ(after, expected);
  // [start, end): an event starting at the window's end is the next window's.
  EXPECT_EQ(StartingIn(events, 0, 10), (Found{{1, 0, 5}, {1, 5, 7}}));
  EXPECT_EQ(events.size(), 21u);
}

TEST(RankPathEventsTest, ALaneInNoOrderIsSortedAndFoundTheSame) {
  RankPathEvents events;
  std::mt19937 random(7);
  std::vector<int64_t> starts(500);
  for (size_t i = 0; i < starts.size(); ++i) starts[i] = static_cast<int64_t>(i) * 3;
  std::shuffle(starts.begin(), starts.end(), random);
  for (int64_t start : starts) events.Add(Event(7, start, start + 1));
  const Found before = StartingIn(events, 100, 400);
  events.Seal();
  EXPECT_EQ(StartingIn(events, 100, 400), before);
  EXPECT_EQ(before.size(), 100u);  // starts 102, 105, ..., 399
}

TEST(RankPathEventsTest, ARefFindsTheEventUntilSealAndNamesCanBeRewritten) {
  RankPathEvents events;
  events.Add(Event(3, 0, 1));
  const RankPathEvents::Ref ref = events.Add(Event(1, 5, 6));
  events.at(ref).activity_class = 2;
  events.ForEach([](PathEvent& e) { e.name = e.lane * 10; });
  events.Seal();
  std::vector<const PathEvent*> out;
  events.StartingIn(5, 6, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0]->activity_class, 2);
  EXPECT_EQ(out[0]->name, 10u);
}

TEST(RankPathEventsTest, AHugeLaneIdSharesOneListInsteadOfSizingATable) {
  RankPathEvents events;
  events.Add(Event(0x80000000u, 1, 2));
  events.Add(Event(0xFFFFFFFFu, 3, 4));
  events.Seal();
  EXPECT_EQ(StartingIn(events, 0, 10), (Found{{0x80000000u, 1, 2}, {0xFFFFFFFFu, 3, 4}}));
}

std::vector<StepRange> Steps(int64_t first, int64_t count, int64_t spacing) {
  std::vector<StepRange> steps;
  for (int64_t i = 0; i < count; ++i) steps.push_back({first + i * spacing, i * 100, i * 100 + 90, 0});
  return steps;
}

TEST(PathStepsKeptTest, EveryStrideThStepThePowerOfTwoThatLeavesAtMostTheMost) {
  EXPECT_TRUE(PathStepsKept(Steps(0, 200, 1), 200).empty());  // all of them: no list
  EXPECT_TRUE(PathStepsKept(Steps(0, 5000, 1), 0).empty());
  // 6,376 steps, at most 200: 6,376 / 200 = 31.9, so every 32nd: 0, 32, ..., 6,368 (200).
  const std::vector<int64_t> kept = PathStepsKept(Steps(0, 6376, 1), 200);
  ASSERT_EQ(kept.size(), 200u);
  EXPECT_EQ(kept.front(), 0);
  EXPECT_EQ(kept[1], 32);
  EXPECT_EQ(kept.back(), 6368);
  // Numbered 0, 10, 20, ...: the stride counts steps, not numbers (every 4th of 40 = every 40).
  EXPECT_EQ(PathStepsKept(Steps(0, 40, 10), 10), (std::vector<int64_t>{0, 40, 80, 120, 160, 200, 240, 280, 320, 360}));
  // Odd numbers 1, 3, 5, ...: 1/2 = 0, 3/2 = 1, ...: every 4th from 1.
  EXPECT_EQ(PathStepsKept(Steps(1, 16, 2), 4), (std::vector<int64_t>{1, 9, 17, 25}));
}

TEST(PathStepsKeptTest, RanksWithDifferentCountsKeepNestedSets) {
  // 6,400 steps fit every 32nd; 6,401 need every 64th, a subset of the other rank's.
  const std::vector<int64_t> a = PathStepsKept(Steps(0, 6400, 1), 200);
  const std::vector<int64_t> b = PathStepsKept(Steps(0, 6401, 1), 200);
  EXPECT_EQ(a.size(), 200u);
  EXPECT_EQ(b.size(), 101u);  // 0, 64, ..., 6,400
  for (int64_t step : b) {
    if (step < 6400) {
      EXPECT_TRUE(std::binary_search(a.begin(), a.end(), step)) << step;
    }
  }
  // A rank that lost its first step keeps the same numbers as the others.
  const std::vector<int64_t> c = PathStepsKept(Steps(1, 6375, 1), 200);
  EXPECT_EQ(c.front(), 32);
  EXPECT_TRUE(std::includes(a.begin(), a.end(), c.begin(), c.end()));
}

}  // namespace
}  // namespace rankscope::analyzer
