// analyzer/path_events.h: a rank's events kept per lane, found by the window they start in,
// the same before Seal (a scan of all) and after (binary search of each lane's sorted runs).
#include "analyzer/path_events.h"

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

}  // namespace
}  // namespace rankscope::analyzer
