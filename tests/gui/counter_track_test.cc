// gui/core/counter_track.h: a memory series as a step area: the totals after each change,
// the total and the categories at a time, and each pixel column's largest total.
#include "gui/core/counter_track.h"

#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

namespace rankscope::gui {
namespace {

// Categories 0 "parameters", 1 "activations":
//   t=100 parameters 40     total 40
//   t=200 activations 30    total 70
//   t=250 activations 10    total 50
//   t=400 parameters 100    total 110 (the peak)
analyzer::MemorySeries Series() {
  analyzer::MemorySeries series;
  series.source = "nvtx";
  series.categories = {"parameters", "activations"};
  series.samples = {{0, 100, 40}, {1, 200, 30}, {1, 250, 10}, {0, 400, 100}};
  return series;
}

TEST(CounterTrack, TotalsAfterEachChangeAndThePeak) {
  const CounterTrack track = MakeCounterTrack(Series());
  EXPECT_EQ(track.label, "memory · nvtx");
  EXPECT_EQ(track.total, (std::vector<int64_t>{40, 70, 50, 110}));
  EXPECT_EQ(track.peak, 110);
  EXPECT_EQ(track.TotalAt(99), 0);    // before the first change
  EXPECT_EQ(track.TotalAt(200), 70);  // a change counts from its own time
  EXPECT_EQ(track.TotalAt(399), 50);
  EXPECT_EQ(track.TotalAt(1000), 110);
  EXPECT_EQ(track.CategoriesAt(260), (std::vector<int64_t>{40, 10}));
  EXPECT_EQ(track.CategoriesAt(0), (std::vector<int64_t>{0, 0}));
  EXPECT_GT(track.MemoryBytes(), 4 * (3 * sizeof(int64_t) + sizeof(uint32_t)));
}

// Columns of 100 ns from t=50: [50,150) 40, [150,250) 70 (the change at 200), [250,350) 50
// (carried in at its start: 10 at 250 makes 50), [350,450) 110, [450,550) 110.
TEST(CounterTrack, EachColumnHoldsItsLargestTotal) {
  const CounterTrack track = MakeCounterTrack(Series());
  EXPECT_EQ(CounterColumns(track, 50, 100.0, 5), (std::vector<int64_t>{40, 70, 50, 110, 110}));
  // Before the first change nothing is held; one wide column sees the peak.
  EXPECT_EQ(CounterColumns(track, -200, 100.0, 2), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(CounterColumns(track, 0, 1000.0, 1), (std::vector<int64_t>{110}));
  EXPECT_TRUE(CounterColumns(track, 0, 100.0, 0).empty());
  EXPECT_EQ(CounterColumns(CounterTrack{}, 0, 100.0, 2), (std::vector<int64_t>{0, 0}));
}

TEST(CounterTrack, SamplesNamingNoCategoryAreSkipped) {
  analyzer::MemorySeries series = Series();
  series.samples.push_back({7, 500, 1});
  EXPECT_EQ(MakeCounterTrack(series).size(), 4u);
}

}  // namespace
}  // namespace rankscope::gui
