// docs/metrics.md §5 "Memory" on hand-built counters: the peak and what held it, each
// category's own peak, and each aggregated step's largest total.
#include "analyzer/memory.h"

#include <gtest/gtest.h>

namespace rankscope::analyzer {
namespace {

// Categories 0 "parameters", 1 "activations". Steps 0 [100, 200) and 1 [200, 300).
//   t=10  parameters 40            total 40
//   t=150 activations 30           total 70   (inside step 0)
//   t=160 activations 10           total 50
//   t=250 parameters 100           total 110  (inside step 1: the peak)
//   t=260 activations 0            total 100
RankActivity Counters() {
  RankActivity activity;
  activity.rank = 3;
  activity.memory_categories = {"parameters", "activations"};
  activity.memory = {{0, 10, 40}, {1, 150, 30}, {1, 160, 10}, {0, 250, 100}, {1, 260, 0}};
  activity.steps = {{0, 100, 200, 0}, {1, 200, 300, 0}};
  return activity;
}

TEST(MemoryTest, ThePeakWhatHeldItAndEachStepsLargestTotal) {
  const std::optional<RankMemory> memory = MeasureMemory(Counters(), {0, 1});
  ASSERT_TRUE(memory.has_value());
  EXPECT_EQ(memory->rank, 3);
  EXPECT_EQ(memory->peak_bytes, 110);
  EXPECT_EQ(memory->peak_at_ns, 250);
  ASSERT_EQ(memory->at_peak.size(), 2u);
  EXPECT_EQ(memory->at_peak[0].category, "parameters");
  EXPECT_EQ(memory->at_peak[0].bytes, 100);
  EXPECT_EQ(memory->at_peak[1].bytes, 10);
  EXPECT_EQ(memory->category_peaks[1].bytes, 30);  // activations' own peak, at t=150
  // Step 0: 40 held at its start, 70 at t=150: 70. Step 1: 50 at its start, then 110: 110.
  ASSERT_TRUE(memory->step_peak_bytes.has_value());
  EXPECT_EQ(memory->step_peak_bytes->count, 2);
  EXPECT_DOUBLE_EQ(memory->step_peak_bytes->min, 70);
  EXPECT_DOUBLE_EQ(memory->step_peak_bytes->max, 110);
}

TEST(MemoryTest, AStepWithoutAChangeHoldsTheTotalBeforeIt) {
  RankActivity activity = Counters();
  activity.steps.push_back({2, 300, 400, 0});  // after every change: 100 throughout
  const std::optional<RankMemory> memory = MeasureMemory(activity, {2});
  ASSERT_TRUE(memory.has_value());
  ASSERT_TRUE(memory->step_peak_bytes.has_value());
  EXPECT_DOUBLE_EQ(memory->step_peak_bytes->median, 100);
}

TEST(MemoryTest, NoCountersNoFigures) { EXPECT_FALSE(MeasureMemory(RankActivity{}, {0}).has_value()); }

}  // namespace
}  // namespace rankscope::analyzer
