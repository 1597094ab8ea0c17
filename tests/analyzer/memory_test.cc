// docs/metrics.md §5 "Memory" on hand-built counters: the peak and what held it, each
// category's own peak, and each aggregated step's largest total.
#include "analyzer/memory.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "analyzer/memory_series.h"

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
  MemorySeries series;
  series.source = "nvtx";
  series.categories = {"parameters", "activations"};
  series.samples = {{0, 10, 40}, {1, 150, 30}, {1, 160, 10}, {0, 250, 100}, {1, 260, 0}};
  activity.memory.push_back(series);
  activity.steps = {{0, 100, 200, 0}, {1, 200, 300, 0}};
  return activity;
}

TEST(MemoryTest, ThePeakWhatHeldItAndEachStepsLargestTotal) {
  const RankActivity activity = Counters();
  const std::optional<RankMemory> memory = MeasureMemory(activity, activity.memory[0], {0, 1});
  ASSERT_TRUE(memory.has_value());
  EXPECT_EQ(memory->rank, 3);
  EXPECT_EQ(memory->source, "nvtx");
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
  const std::optional<RankMemory> memory = MeasureMemory(activity, activity.memory[0], {2});
  ASSERT_TRUE(memory.has_value());
  ASSERT_TRUE(memory->step_peak_bytes.has_value());
  EXPECT_DOUBLE_EQ(memory->step_peak_bytes->median, 100);
}

TEST(MemoryTest, NoSamplesNoFigures) { EXPECT_FALSE(MeasureMemory(RankActivity{}, MemorySeries{}, {0}).has_value()); }

// Marks and counter lanes become one series per source: "nvtx" first, then by name; each
// series's samples in time order, categories in first-seen order.
TEST(MemorySeriesTest, MarksAndCounterLanesGiveOneSeriesPerSource) {
  std::vector<trace::Lane> lanes(4);
  for (size_t i = 0; i < lanes.size(); ++i) lanes[i].id = static_cast<trace::LaneId>(i + 1);
  lanes[0].kind = trace::LaneKind::kCpuThread;  // lane 1: a thread
  lanes[1].kind = trace::LaneKind::kCounter;
  lanes[1].name = "pytorch reserved memory: cuda:0";
  lanes[2].kind = trace::LaneKind::kCounter;
  lanes[2].name = "cuda memory: device (gpu 0)";
  lanes[3].kind = trace::LaneKind::kCounter;
  lanes[3].name = "sm occupancy";  // a counter, but not of memory
  const std::vector<trace::CounterSample> samples = {
      {3, 300, 2048.0}, {2, 50, 4096.0}, {3, 100, 1024.0}, {4, 10, 7.0},
      {1, 20, 1.0},                      // a thread lane: not a counter
      {9, 20, 1.0},                      // no such lane
      {3, 400, -1.0},                    // negative: dropped
      {3, 500, std::nan("")}};           // not a number: dropped
  MemorySeriesBuilder builder;
  EXPECT_TRUE(builder.AddMark("memory: parameters", R"({"bytes": 40})", 5));
  EXPECT_TRUE(builder.AddMark("memory: activations", R"({"bytes": -3})", 6));  // a memory mark, but no bytes
  EXPECT_FALSE(builder.AddMark("memory:", "", 7));
  EXPECT_FALSE(builder.AddMark("step", R"({"bytes": 1})", 8));
  builder.AddCounters(lanes, samples);
  const std::vector<MemorySeries> series = builder.Finish();
  ASSERT_EQ(series.size(), 3u);
  EXPECT_EQ(series[0].source, "nvtx");
  EXPECT_EQ(series[0].categories, std::vector<std::string>{"parameters"});
  ASSERT_EQ(series[0].samples.size(), 1u);
  EXPECT_EQ(series[0].samples[0].bytes, 40);
  EXPECT_EQ(series[1].source, "cuda");
  EXPECT_EQ(series[1].categories, std::vector<std::string>{"device (gpu 0)"});
  ASSERT_EQ(series[1].samples.size(), 2u);
  EXPECT_EQ(series[1].samples[0].ts_ns, 100);
  EXPECT_EQ(series[1].samples[0].bytes, 1024);
  EXPECT_EQ(series[1].samples[1].ts_ns, 300);
  EXPECT_EQ(series[2].source, "pytorch reserved");
  EXPECT_EQ(series[2].categories, std::vector<std::string>{"cuda:0"});
  ASSERT_EQ(series[2].samples.size(), 1u);
  EXPECT_EQ(series[2].samples[0].bytes, 4096);
  EXPECT_TRUE(builder.Finish().empty());
}

}  // namespace
}  // namespace rankscope::analyzer
