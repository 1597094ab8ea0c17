// analyzer/range_stats.h: docs/metrics.md §3 over any window of rows the viewer holds, and the
// window's top activities. Expected values are worked out by hand (overlap = |C ∩ M|,
// exposed = |M \ C|, idle = window − |C ∪ M ∪ Y|), then cross-checked against
// DeviceTimeline::Measure on random rows.
#include "analyzer/range_stats.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "analyzer/intervals.h"
#include "analyzer/metrics.h"
#include "tests/analyzer/breakdown_expect.h"

namespace rankscope::analyzer {
namespace {

// A row that owns its columns.
struct Row {
  std::vector<int64_t> start, end;
  std::vector<uint32_t> name;
  std::vector<uint8_t> event_class;

  Row& Add(int64_t s, int64_t e, uint32_t n, EventClass c) {
    start.push_back(s);
    end.push_back(e);
    name.push_back(n);
    event_class.push_back(static_cast<uint8_t>(c));
    return *this;
  }
  SpanColumns Columns() const { return SpanColumns{start, end, name, event_class}; }
};

const std::vector<std::string> kNames = {"", "gemm", "nccl", "copy", "attn", "all_gather", "step", "launch"};
constexpr uint32_t kGemm = 1, kNccl = 2, kCopy = 3, kAttn = 4, kAllGather = 5, kStep = 6, kLaunch = 7;

DeviceRows Device(const std::vector<const Row*>& rows, Interval window, int rank = 0, int device = 0) {
  DeviceRows d;
  d.rank = rank;
  d.device = device;
  d.strings = &kNames;
  for (const Row* row : rows) d.rows.push_back(row->Columns());
  d.window = window;
  return d;
}

RangeDeviceStats MeasureOne(const DeviceRows& device, size_t top = 10) {
  const std::vector<RangeDeviceStats> stats = MeasureRange(std::span<const DeviceRows>(&device, 1), top);
  EXPECT_EQ(stats.size(), 1u);
  return stats.empty() ? RangeDeviceStats{} : stats[0];
}

int64_t PartitionSum(const Breakdown& b) {
  return b.compute_only_ns + b.overlap_ns + b.comm_only_ns + b.memory_only_ns + b.idle_ns;
}

// Stream A: gemm [0,100), gemm [200,400), copy [400,450). Stream B: nccl [50,250).
struct TwoStreams {
  Row a, b;
  TwoStreams() {
    a.Add(0, 100, kGemm, EventClass::kCompute)
        .Add(200, 400, kGemm, EventClass::kCompute)
        .Add(400, 450, kCopy, EventClass::kMemory);
    b.Add(50, 250, kNccl, EventClass::kComm);
  }
};

TEST(MeasureRange, OverlappingComputeAndCommRows) {
  const TwoStreams s;
  const RangeDeviceStats stats = MeasureOne(Device({&s.a, &s.b}, {0, 500}));
  const Breakdown& b = stats.breakdown;
  EXPECT_EQ(stats.rank, 0);
  EXPECT_EQ(stats.device, 0);
  EXPECT_EQ(b.window_ns, 500);
  EXPECT_EQ(b.compute_ns, 300);        // [0,100) + [200,400)
  EXPECT_EQ(b.comm_ns, 200);           // [50,250)
  EXPECT_EQ(b.memory_ns, 50);          // [400,450)
  EXPECT_EQ(b.overlap_ns, 100);        // [50,100) + [200,250)
  EXPECT_EQ(b.exposed_comm_ns, 100);   // [100,200)
  EXPECT_EQ(b.busy_ns, 450);           // [0,450)
  EXPECT_EQ(b.idle_ns, 50);            // 500 - 450
  EXPECT_EQ(b.compute_only_ns, 200);   // 300 - 100
  EXPECT_EQ(b.comm_only_ns, 100);
  EXPECT_EQ(b.memory_only_ns, 50);
  EXPECT_DOUBLE_EQ(b.overlap_pct, 50.0);  // 100 · 100 / 200
  ASSERT_TRUE(b.comm_compute_ratio.has_value());
  EXPECT_DOUBLE_EQ(*b.comm_compute_ratio, 200.0 / 300.0);
  EXPECT_DOUBLE_EQ(b.utilization_pct, 90.0);  // 100 · 450 / 500
  EXPECT_EQ(PartitionSum(b), 500);            // 200 + 100 + 100 + 50 + 50
}

TEST(MeasureRange, WindowClipsEvents) {
  const TwoStreams s;
  // [75, 325): C = [75,100) + [200,325) = 150; M = [75,250) = 175; C ∩ M = [75,100) +
  // [200,250) = 75; busy = [75,325) = 250 (no gap left); the copy is outside.
  const Breakdown b = MeasureOne(Device({&s.a, &s.b}, {75, 325})).breakdown;
  EXPECT_EQ(b.window_ns, 250);
  EXPECT_EQ(b.compute_ns, 150);
  EXPECT_EQ(b.comm_ns, 175);
  EXPECT_EQ(b.memory_ns, 0);
  EXPECT_EQ(b.overlap_ns, 75);
  EXPECT_EQ(b.exposed_comm_ns, 100);   // [100,200)
  EXPECT_EQ(b.busy_ns, 250);
  EXPECT_EQ(b.idle_ns, 0);
  EXPECT_EQ(b.compute_only_ns, 75);    // C \ M = [250,325)
  EXPECT_EQ(b.comm_only_ns, 100);
  EXPECT_EQ(b.memory_only_ns, 0);
  EXPECT_DOUBLE_EQ(b.overlap_pct, 100.0 * 75 / 175);
  ASSERT_TRUE(b.comm_compute_ratio.has_value());
  EXPECT_DOUBLE_EQ(*b.comm_compute_ratio, 175.0 / 150.0);
  EXPECT_DOUBLE_EQ(b.utilization_pct, 100.0);
  EXPECT_EQ(PartitionSum(b), 250);
}

TEST(MeasureRange, WindowInsideOneEvent) {
  const TwoStreams s;
  // [210, 240) lies inside gemm [200,400) and nccl [50,250): everything overlaps.
  const Breakdown b = MeasureOne(Device({&s.a, &s.b}, {210, 240})).breakdown;
  EXPECT_EQ(b.window_ns, 30);
  EXPECT_EQ(b.compute_ns, 30);
  EXPECT_EQ(b.comm_ns, 30);
  EXPECT_EQ(b.overlap_ns, 30);
  EXPECT_EQ(b.exposed_comm_ns, 0);
  EXPECT_EQ(b.busy_ns, 30);
  EXPECT_EQ(b.idle_ns, 0);
  EXPECT_DOUBLE_EQ(b.overlap_pct, 100.0);
}

TEST(MeasureRange, SameClassRowsAreMergedNotAdded) {
  // Two compute streams overlapping by 50: |C| = |[0,150)| = 150, not 200.
  Row a, b;
  a.Add(0, 100, kGemm, EventClass::kCompute);
  b.Add(50, 150, kAttn, EventClass::kCompute);
  const Breakdown m = MeasureOne(Device({&a, &b}, {0, 200})).breakdown;
  EXPECT_EQ(m.compute_ns, 150);
  EXPECT_EQ(m.busy_ns, 150);
  EXPECT_EQ(m.idle_ns, 50);
  EXPECT_EQ(m.compute_only_ns, 150);
}

TEST(MeasureRange, MemoryUnderComputeIsNotMemoryOnly) {
  Row a, c;
  a.Add(0, 100, kGemm, EventClass::kCompute);
  c.Add(50, 150, kCopy, EventClass::kMemory);
  // C = 100, Y = 100, busy = [0,150) = 150, memory only = [100,150) = 50, idle = 50.
  const Breakdown b = MeasureOne(Device({&a, &c}, {0, 200})).breakdown;
  EXPECT_EQ(b.compute_ns, 100);
  EXPECT_EQ(b.memory_ns, 100);
  EXPECT_EQ(b.busy_ns, 150);
  EXPECT_EQ(b.memory_only_ns, 50);
  EXPECT_EQ(b.compute_only_ns, 100);
  EXPECT_EQ(b.idle_ns, 50);
  EXPECT_EQ(b.comm_ns, 0);
  EXPECT_DOUBLE_EQ(b.overlap_pct, 0.0);  // |M| = 0
  ASSERT_TRUE(b.comm_compute_ratio.has_value());
  EXPECT_DOUBLE_EQ(*b.comm_compute_ratio, 0.0);  // 0 / 100
  EXPECT_DOUBLE_EQ(b.utilization_pct, 75.0);    // 100 · 150 / 200
  EXPECT_EQ(PartitionSum(b), 200);
}

TEST(MeasureRange, RatioIsUndefinedWithoutCompute) {
  Row m;
  m.Add(0, 10, kNccl, EventClass::kComm);
  const Breakdown b = MeasureOne(Device({&m}, {0, 20})).breakdown;
  EXPECT_EQ(b.comm_ns, 10);
  EXPECT_EQ(b.exposed_comm_ns, 10);
  EXPECT_EQ(b.comm_only_ns, 10);
  EXPECT_DOUBLE_EQ(b.overlap_pct, 0.0);           // 100 · 0 / 10
  EXPECT_FALSE(b.comm_compute_ratio.has_value());  // |M| / 0
}

TEST(MeasureRange, IdleWindowHasZeroRatio) {
  const TwoStreams s;
  // [1000, 2000): nothing there.
  const Breakdown b = MeasureOne(Device({&s.a, &s.b}, {1000, 2000})).breakdown;
  EXPECT_EQ(b.window_ns, 1000);
  EXPECT_EQ(b.busy_ns, 0);
  EXPECT_EQ(b.idle_ns, 1000);
  ASSERT_TRUE(b.comm_compute_ratio.has_value());
  EXPECT_DOUBLE_EQ(*b.comm_compute_ratio, 0.0);  // both 0
  EXPECT_DOUBLE_EQ(b.utilization_pct, 0.0);
}

TEST(MeasureRange, EmptyWindowIsAllZero) {
  const TwoStreams s;
  const RangeDeviceStats stats = MeasureOne(Device({&s.a, &s.b}, {220, 220}));
  const Breakdown& b = stats.breakdown;
  EXPECT_EQ(b.window_ns, 0);
  EXPECT_EQ(b.compute_ns, 0);
  EXPECT_EQ(b.comm_ns, 0);
  EXPECT_EQ(b.busy_ns, 0);
  EXPECT_EQ(b.idle_ns, 0);
  EXPECT_DOUBLE_EQ(b.utilization_pct, 0.0);  // "0 for an empty window"
  EXPECT_TRUE(stats.top.empty());
}

TEST(MeasureRange, HostSideClassesAreNotDeviceTime) {
  Row host, device;
  host.Add(0, 1000, kStep, EventClass::kAnnotation);
  Row calls;
  calls.Add(10, 20, kLaunch, EventClass::kApiCall)
      .Add(30, 900, kLaunch, EventClass::kSync)
      .Add(900, 950, kAllGather, EventClass::kCollective)
      .Add(960, 960, kStep, EventClass::kMark);
  device.Add(100, 200, kGemm, EventClass::kCompute);
  const RangeDeviceStats stats = MeasureOne(Device({&host, &calls, &device}, {0, 1000}));
  const Breakdown& b = stats.breakdown;
  EXPECT_EQ(b.compute_ns, 100);
  EXPECT_EQ(b.comm_ns, 0);   // the collective record is not comm time
  EXPECT_EQ(b.memory_ns, 0);
  EXPECT_EQ(b.busy_ns, 100);
  EXPECT_EQ(b.idle_ns, 900);
  ASSERT_EQ(stats.top.size(), 1u);  // only device work is an activity
  EXPECT_EQ(stats.top[0].name, "gemm");
  EXPECT_EQ(stats.top[0].total_ns, 100);
}

TEST(MeasureRange, TopActivitiesAreClippedToTheWindowAndSortedLongestFirst) {
  Row a, b, c;
  a.Add(0, 100, kGemm, EventClass::kCompute).Add(200, 400, kGemm, EventClass::kCompute);
  b.Add(50, 250, kNccl, EventClass::kComm).Add(800, 830, kAllGather, EventClass::kComm);
  c.Add(450, 470, kGemm, EventClass::kCompute).Add(600, 700, kAttn, EventClass::kCompute);
  // Window [50, 650):
  //   gemm:       [50,100) 50 + [200,400) 200 + [450,470) 20 = 270 over 3 events (two rows)
  //   nccl:       [50,250) = 200, 1 event
  //   attn:       [600,650) = 50 (clipped from 100), 1 event
  //   all_gather: outside, not listed
  const RangeDeviceStats stats = MeasureOne(Device({&a, &b, &c}, {50, 650}));
  ASSERT_EQ(stats.top.size(), 3u);
  EXPECT_EQ(stats.top[0].name, "gemm");
  EXPECT_EQ(stats.top[0].activity_class, ActivityClass::kCompute);
  EXPECT_EQ(stats.top[0].count, 3);
  EXPECT_EQ(stats.top[0].total_ns, 270);
  EXPECT_EQ(stats.top[1].name, "nccl");
  EXPECT_EQ(stats.top[1].activity_class, ActivityClass::kComm);
  EXPECT_EQ(stats.top[1].count, 1);
  EXPECT_EQ(stats.top[1].total_ns, 200);
  EXPECT_EQ(stats.top[2].name, "attn");
  EXPECT_EQ(stats.top[2].count, 1);
  EXPECT_EQ(stats.top[2].total_ns, 50);

  // Only the two longest when asked for two.
  const RangeDeviceStats two = MeasureOne(Device({&a, &b, &c}, {50, 650}), 2);
  ASSERT_EQ(two.top.size(), 2u);
  EXPECT_EQ(two.top[0].name, "gemm");
  EXPECT_EQ(two.top[1].name, "nccl");

  // A window that holds only the end of the first gemm: [90, 150) → gemm 10, nccl 60.
  const RangeDeviceStats narrow = MeasureOne(Device({&a, &b, &c}, {90, 150}));
  ASSERT_EQ(narrow.top.size(), 2u);
  EXPECT_EQ(narrow.top[0].name, "nccl");
  EXPECT_EQ(narrow.top[0].total_ns, 60);
  EXPECT_EQ(narrow.top[1].name, "gemm");
  EXPECT_EQ(narrow.top[1].total_ns, 10);
  EXPECT_EQ(narrow.top[1].count, 1);
}

TEST(MeasureRange, EachDeviceIsMeasuredOverItsOwnWindow) {
  const TwoStreams s;
  Row cpu;
  cpu.Add(1000, 1600, kAttn, EventClass::kCompute);
  const std::vector<DeviceRows> devices = {Device({&s.a, &s.b}, {0, 500}, 0, 0),
                                           Device({&cpu}, {1200, 2200}, 3, kCpuDevice)};
  const std::vector<RangeDeviceStats> stats = MeasureRange(devices, 5);
  ASSERT_EQ(stats.size(), 2u);
  const RangeDeviceStats* gpu = nullptr;
  const RangeDeviceStats* host = nullptr;
  for (const RangeDeviceStats& one : stats) {
    if (one.rank == 0 && one.device == 0) gpu = &one;
    if (one.rank == 3 && one.device == kCpuDevice) host = &one;
  }
  ASSERT_NE(gpu, nullptr);
  ASSERT_NE(host, nullptr);
  EXPECT_EQ(gpu->breakdown.busy_ns, 450);
  EXPECT_EQ(host->breakdown.window_ns, 1000);
  EXPECT_EQ(host->breakdown.compute_ns, 400);  // [1200,1600)
  EXPECT_EQ(host->breakdown.idle_ns, 600);
  ASSERT_EQ(host->top.size(), 1u);
  EXPECT_EQ(host->top[0].total_ns, 400);
  EXPECT_TRUE(MeasureRange({}, 5).empty());
}

// Random rows of each class against DeviceTimeline::Measure over the same intervals.
TEST(MeasureRange, AgreesWithDeviceTimelineOnRandomRows) {
  std::mt19937_64 random(99);
  for (int trial = 0; trial < 40; ++trial) {
    std::vector<Row> rows(6);
    std::vector<Interval> compute, comm, memory;
    for (size_t r = 0; r < rows.size(); ++r) {
      int64_t t = std::uniform_int_distribution<int64_t>(0, 500)(random);
      for (int i = 0; i < 60; ++i) {
        t += std::uniform_int_distribution<int64_t>(0, 300)(random);
        const int64_t length = std::uniform_int_distribution<int64_t>(0, 400)(random);
        const int k = std::uniform_int_distribution<int>(0, 5)(random);  // 3..5: host-side
        const EventClass c = static_cast<EventClass>(k);
        rows[r].Add(t, t + length, static_cast<uint32_t>(1 + k % 5), c);
        if (k == 0) compute.push_back({t, t + length});
        if (k == 1) comm.push_back({t, t + length});
        if (k == 2) memory.push_back({t, t + length});
        t += length;
      }
    }
    DeviceActivity activity;
    activity.device = 0;
    activity.compute = IntervalSet::FromUnsorted(compute);
    activity.comm = IntervalSet::FromUnsorted(comm);
    activity.memory = IntervalSet::FromUnsorted(memory);
    const DeviceTimeline timeline(activity);
    std::vector<const Row*> pointers;
    for (const Row& row : rows) pointers.push_back(&row);
    for (int w = 0; w < 10; ++w) {
      const int64_t t0 = std::uniform_int_distribution<int64_t>(-100, 30'000)(random);
      const int64_t t1 = t0 + std::uniform_int_distribution<int64_t>(0, 20'000)(random);
      SCOPED_TRACE(::testing::Message() << "trial " << trial << " window [" << t0 << ", " << t1 << ")");
      const Breakdown got = MeasureOne(Device(pointers, {t0, t1})).breakdown;
      const Breakdown want = timeline.Measure({t0, t1});
      testing::ExpectSameBreakdown(got, want);
      EXPECT_EQ(PartitionSum(got), got.window_ns);
    }
  }
}

}  // namespace
}  // namespace rankscope::analyzer
