// gui/core/queries.h: search, next/previous match with wrap-around, launch flows, and range
// statistics, which must equal the analyzer's step and whole-trace breakdowns.
#include "gui/core/queries.h"
#include "gui/core/search.h"

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "analyzer/analyze.h"
#include "tests/analyzer/breakdown_expect.h"
#include "tests/trace_builder.h"
#include "tests/gui/model_builder.h"
#include "tests/rank_file_writer.h"
#include "tests/temp_dir.h"
#include "trace/run_dir.h"

namespace rankscope::gui {
namespace {

using testing::RankBuilder;
using testing::Ref;

// Rank 0 (offset 0):
//   track 0, GPU 0 stream A: gemm [100,200) corr 7, nccl [250,400) corr 8, gemm [500,600) corr 9,
//                            orphan [700,800) corr 99 (no API call has 99)
//   track 1, thread:  row 0 step [0,1000) (annotation, no corr)
//                     row 1 cudaLaunchKernel [50,60) corr 7, [70,80) corr 8, [90,95) corr 9
//   track 2, GPU 0 stream B: nccl2 [150,260) comm
//   track 3, GPU 1 stream: a copy [300,350) memory (no name)
// Rank 1 (offset +1000):
//   track 0, GPU 0: gemm [0,100) corr 7, nccl [150,300) no corr     → display [1000,1100), [1150,1300)
//   track 1, thread: cudaLaunchKernel [-935,-925) corr 7          → display [65,75)
TimelineModel QueryModel() {
  RankBuilder r0(0, "host-a");
  const uint32_t gpu = r0.AddTrack(trace::LaneKind::kGpuStream, 0, "GPU 0 · stream A");
  r0.AddRow(gpu, {{100, 200, "gemm", EventClass::kCompute, EventSource::kKernel, 7},
                  {250, 400, "nccl", EventClass::kComm, EventSource::kKernel, 8},
                  {500, 600, "gemm", EventClass::kCompute, EventSource::kKernel, 9},
                  {700, 800, "orphan", EventClass::kCompute, EventSource::kKernel, 99}});
  const uint32_t thread = r0.AddTrack(trace::LaneKind::kCpuThread, -1, "thread 1 main");
  r0.AddRow(thread, {{0, 1000, "step", EventClass::kAnnotation, EventSource::kNvtxRange, 0}});
  r0.AddRow(thread, {{50, 60, "cudaLaunchKernel", EventClass::kApiCall, EventSource::kApiCall, 7},
                     {70, 80, "cudaLaunchKernel", EventClass::kApiCall, EventSource::kApiCall, 8},
                     {90, 95, "cudaLaunchKernel", EventClass::kApiCall, EventSource::kApiCall, 9}});
  const uint32_t stream_b = r0.AddTrack(trace::LaneKind::kGpuStream, 0, "GPU 0 · stream B");
  r0.AddRow(stream_b, {{150, 260, "nccl2", EventClass::kComm, EventSource::kKernel, 0}});
  const uint32_t gpu1 = r0.AddTrack(trace::LaneKind::kGpuStream, 1, "GPU 1 · stream C");
  r0.AddRow(gpu1, {{300, 350, "", EventClass::kMemory, EventSource::kMemcpy, 0}});

  RankBuilder r1(1, "host-b");
  r1.Offset(1000);
  const uint32_t gpu_b = r1.AddTrack(trace::LaneKind::kGpuStream, 0, "GPU 0 · stream A");
  r1.AddRow(gpu_b, {{0, 100, "gemm", EventClass::kCompute, EventSource::kKernel, 7},
                    {150, 300, "nccl", EventClass::kComm, EventSource::kKernel, 0}});
  const uint32_t thread_b = r1.AddTrack(trace::LaneKind::kCpuThread, -1, "thread 2 main");
  r1.AddRow(thread_b, {{-935, -925, "cudaLaunchKernel", EventClass::kApiCall, EventSource::kApiCall, 7}});
  return TimelineModel("queries", {r0.Build(), r1.Build()});
}

auto NameIs(std::string_view wanted) {
  return [wanted](std::string_view name) { return name == wanted; };
}

// ---- SearchMatches (gui/core/search.h) --------------------------------------------------------

std::vector<EventRef> Found(const TimelineModel& model, std::string_view name) {
  return SearchMatches::Find(model, NameIs(name)).All(model);
}

TEST(SearchMatches, ListsMatchesInStartOrderOnTheCommonClock) {
  const TimelineModel model = QueryModel();
  // Launches at display 50, 70, 90 (rank 0) and 65 (rank 1: -935 + 1000). On their own
  // clocks rank 1's would come first.
  const std::vector<EventRef> expected = {Ref(0, 1, 1, 0), Ref(1, 1, 0, 0), Ref(0, 1, 1, 1), Ref(0, 1, 1, 2)};
  EXPECT_EQ(Found(model, "cudaLaunchKernel"), expected);
  const std::vector<EventRef> expected_gemms = {Ref(0, 0, 0, 0), Ref(0, 0, 0, 2), Ref(1, 0, 0, 0)};
  EXPECT_EQ(Found(model, "gemm"), expected_gemms);  // display 100, 500, 1000
  const SearchMatches none = SearchMatches::Find(model, NameIs("nothing"));
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(none.size(), 0u);
}

TEST(SearchMatches, CountsEveryNamedEventAndUnnamedOnesNever) {
  const TimelineModel model = QueryModel();
  const SearchMatches all = SearchMatches::Find(model, [](std::string_view) { return true; });
  // Every named event: 9 on rank 0 (the copy on GPU 1 has no name), 3 on rank 1.
  EXPECT_EQ(all.size(), 12u);
  EXPECT_EQ(all.All(model).size(), 12u);
  EXPECT_TRUE(all.InRow(0, 3, 0).empty()) << "the unnamed copy matched";
  ASSERT_EQ(all.InRow(0, 0, 0).size(), 4u);
  EXPECT_EQ(all.MemoryBytes() >= 12 * sizeof(uint32_t), true);
}

TEST(SearchMatches, AsksAboutEachNameAtMostOncePerRank) {
  const TimelineModel model = QueryModel();
  std::map<std::string, int> asked;
  const SearchMatches found = SearchMatches::Find(model, [&asked](std::string_view name) {
    ++asked[std::string(name)];
    return name.find("nccl") != std::string_view::npos;
  });
  // nccl (rank 0 at 250, rank 1 at 1150) and nccl2 (rank 0 at 150).
  const std::vector<EventRef> expected = {Ref(0, 2, 0, 0), Ref(0, 0, 0, 1), Ref(1, 0, 0, 1)};
  EXPECT_EQ(found.All(model), expected);
  for (const auto& [name, times] : asked) EXPECT_LE(times, 2) << name;  // once on each rank
  EXPECT_LE(asked["step"], 1);
  EXPECT_LE(asked["orphan"], 1);
  EXPECT_LE(asked["nccl2"], 1);
  EXPECT_GE(asked["nccl"], 1);
}

TEST(SearchMatches, StepsFromATimeForwardAndBackwardWithWrapAround) {
  const TimelineModel model = QueryModel();
  const SearchMatches launches = SearchMatches::Find(model, NameIs("cudaLaunchKernel"));
  // Matches at display 50, 65, 70, 90.
  const EventRef at50 = Ref(0, 1, 1, 0), at65 = Ref(1, 1, 0, 0), at70 = Ref(0, 1, 1, 1), at90 = Ref(0, 1, 1, 2);
  EXPECT_EQ(launches.StepFromTime(model, 0, true), at50);
  EXPECT_EQ(launches.StepFromTime(model, 50, true), at65);  // strictly after
  EXPECT_EQ(launches.StepFromTime(model, 60, true), at65);
  EXPECT_EQ(launches.StepFromTime(model, 65, true), at70);
  EXPECT_EQ(launches.StepFromTime(model, 89, true), at90);
  EXPECT_EQ(launches.StepFromTime(model, 90, true), at50);  // past the last: wraps to the first
  EXPECT_EQ(launches.StepFromTime(model, 5000, true), at50);
  EXPECT_EQ(launches.StepFromTime(model, 1000, false), at90);
  EXPECT_EQ(launches.StepFromTime(model, 90, false), at70);  // strictly before
  EXPECT_EQ(launches.StepFromTime(model, 68, false), at65);
  EXPECT_EQ(launches.StepFromTime(model, 65, false), at50);
  EXPECT_EQ(launches.StepFromTime(model, 50, false), at90);  // before the first: wraps to the last
  EXPECT_EQ(launches.StepFromTime(model, -100, false), at90);
  // Positions: "k of N".
  EXPECT_EQ(launches.PositionOf(model, at50), 0u);
  EXPECT_EQ(launches.PositionOf(model, at65), 1u);
  EXPECT_EQ(launches.PositionOf(model, at90), 3u);
}

TEST(SearchMatches, NoMatchesGiveNothing) {
  const TimelineModel model = QueryModel();
  const SearchMatches none = SearchMatches::Find(model, NameIs("nothing"));
  EXPECT_EQ(none.StepFromTime(model, 0, true), std::nullopt);
  EXPECT_EQ(none.Step(model, Ref(0, 0, 0, 0), false), std::nullopt);
}

TEST(SearchMatches, ASingleMatchIsAlwaysTheNext) {
  const TimelineModel model = QueryModel();
  const SearchMatches one = SearchMatches::Find(model, NameIs("orphan"));
  ASSERT_EQ(one.size(), 1u);
  const EventRef orphan = Ref(0, 0, 0, 3);
  EXPECT_EQ(one.StepFromTime(model, 0, true), orphan);
  EXPECT_EQ(one.StepFromTime(model, 9000, false), orphan);
  EXPECT_EQ(one.Step(model, orphan, true), orphan);
  EXPECT_EQ(one.Step(model, orphan, false), orphan);
}

// Equal starts: stepping from a match goes to the next in (start, rank, track, row, index)
// order, so each is reached once, forward and backward, and never sticks.
TEST(SearchMatches, StepsThroughEqualStartsOneByOne) {
  RankBuilder r0(0, "host-a");
  for (int t = 0; t < 3; ++t) {
    const uint32_t track = r0.AddTrack(trace::LaneKind::kGpuStream, 0, "stream " + std::to_string(t));
    r0.AddRow(track, {{100, 200, "k", EventClass::kCompute, EventSource::kKernel, 0},
                      {300, 400, "k", EventClass::kCompute, EventSource::kKernel, 0}});
  }
  const TimelineModel model("ties", {r0.Build()});
  const SearchMatches found = SearchMatches::Find(model, NameIs("k"));
  const std::vector<EventRef> order = found.All(model);
  ASSERT_EQ(order.size(), 6u);
  for (size_t i = 0; i < order.size(); ++i) {
    EXPECT_EQ(found.Step(model, order[i], true), order[(i + 1) % order.size()]) << i;
    EXPECT_EQ(found.Step(model, order[i], false), order[(i + order.size() - 1) % order.size()]) << i;
    EXPECT_EQ(found.PositionOf(model, order[i]), i);
  }
}

// Far more than the old 100,000-match cap: the count is exact and stepping reaches the last.
TEST(SearchMatches, HasNoLimitAndReachesTheLastOfManyMatches) {
  constexpr int kEvents = 250'000;
  RankBuilder r0(0, "host-a");
  const uint32_t track = r0.AddTrack(trace::LaneKind::kGpuStream, 0, "stream");
  std::vector<testing::NamedEvent> events;
  for (int i = 0; i < kEvents; ++i) {
    events.push_back({i * 10, i * 10 + 5, i % 2 == 0 ? "AllReduce" : "gemm", EventClass::kCompute,
                      EventSource::kKernel, 0});
  }
  r0.AddRow(track, events);
  const TimelineModel model("many", {r0.Build()});
  const SearchMatches found = SearchMatches::Find(model, NameIs("AllReduce"));
  EXPECT_EQ(found.size(), static_cast<size_t>(kEvents / 2));
  const auto last = found.StepFromTime(model, model.end_ns(), false);
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(model.DisplayStart(*last), (kEvents - 2) * 10);
  EXPECT_EQ(found.PositionOf(model, *last), static_cast<size_t>(kEvents / 2 - 1));
  EXPECT_EQ(found.Step(model, *last, true), found.StepFromTime(model, -1, true)) << "wraps to the first";
}

// ---- CorrelatedEvent --------------------------------------------------------------------------

TEST(CorrelatedEvent, KernelLeadsToItsLaunchAndBack) {
  const TimelineModel model = QueryModel();
  EXPECT_EQ(CorrelatedEvent(model, Ref(0, 0, 0, 0)), Ref(0, 1, 1, 0));  // gemm corr 7 → launch at 50
  EXPECT_EQ(CorrelatedEvent(model, Ref(0, 0, 0, 1)), Ref(0, 1, 1, 1));  // nccl corr 8 → launch at 70
  EXPECT_EQ(CorrelatedEvent(model, Ref(0, 0, 0, 2)), Ref(0, 1, 1, 2));  // gemm corr 9 → launch at 90
  EXPECT_EQ(CorrelatedEvent(model, Ref(0, 1, 1, 0)), Ref(0, 0, 0, 0));  // and back
  EXPECT_EQ(CorrelatedEvent(model, Ref(0, 1, 1, 1)), Ref(0, 0, 0, 1));
  EXPECT_EQ(CorrelatedEvent(model, Ref(0, 1, 1, 2)), Ref(0, 0, 0, 2));
}

TEST(CorrelatedEvent, StaysOnTheEventsRank) {
  const TimelineModel model = QueryModel();
  // Correlation id 7 exists on both ranks; each side finds its own rank's partner.
  EXPECT_EQ(CorrelatedEvent(model, Ref(1, 0, 0, 0)), Ref(1, 1, 0, 0));
  EXPECT_EQ(CorrelatedEvent(model, Ref(1, 1, 0, 0)), Ref(1, 0, 0, 0));
}

TEST(CorrelatedEvent, NothingWithoutAPartner) {
  const TimelineModel model = QueryModel();
  EXPECT_EQ(CorrelatedEvent(model, Ref(0, 0, 0, 3)), std::nullopt);  // orphan: no launch with 99
  EXPECT_EQ(CorrelatedEvent(model, Ref(1, 0, 0, 1)), std::nullopt);  // no correlation id
  EXPECT_EQ(CorrelatedEvent(model, Ref(0, 1, 0, 0)), std::nullopt);  // an NVTX range
  EXPECT_EQ(CorrelatedEvent(model, Ref(0, 2, 0, 0)), std::nullopt);  // nccl2: no correlation id
}

// ---- MeasureDisplayRange on the hand-built model ------------------------------------------------

const analyzer::RangeDeviceStats* Find(const std::vector<analyzer::RangeDeviceStats>& stats, int rank, int device) {
  for (const analyzer::RangeDeviceStats& s : stats) {
    if (s.rank == rank && s.device == device) return &s;
  }
  return nullptr;
}

TEST(MeasureDisplayRange, BreaksDownEachRanksDeviceOverTheWindow) {
  const TimelineModel model = QueryModel();
  // Display [0, 1200): rank 0's own clock [0, 1200), rank 1's [-1000, 200).
  const auto stats = MeasureDisplayRange(model, 0, 1200, 5);

  // Rank 0, GPU 0: C = gemm 100 + gemm 100 + orphan 100 = 300; M = [150,260) ∪ [250,400) =
  // [150,400) = 250; C ∩ M = [150,200) = 50; busy = [100,400) + [500,600) + [700,800) = 500.
  const analyzer::RangeDeviceStats* gpu0 = Find(stats, 0, 0);
  ASSERT_NE(gpu0, nullptr);
  const analyzer::Breakdown& b = gpu0->breakdown;
  EXPECT_EQ(b.window_ns, 1200);
  EXPECT_EQ(b.compute_ns, 300);
  EXPECT_EQ(b.comm_ns, 250);
  EXPECT_EQ(b.memory_ns, 0);
  EXPECT_EQ(b.overlap_ns, 50);
  EXPECT_EQ(b.exposed_comm_ns, 200);   // 250 - 50
  EXPECT_EQ(b.busy_ns, 500);
  EXPECT_EQ(b.idle_ns, 700);           // 1200 - 500
  EXPECT_EQ(b.compute_only_ns, 250);   // 300 - 50
  EXPECT_EQ(b.comm_only_ns, 200);
  EXPECT_EQ(b.memory_only_ns, 0);
  EXPECT_DOUBLE_EQ(b.overlap_pct, 20.0);  // 100 · 50 / 250
  ASSERT_TRUE(b.comm_compute_ratio.has_value());
  EXPECT_DOUBLE_EQ(*b.comm_compute_ratio, 250.0 / 300.0);
  EXPECT_DOUBLE_EQ(b.utilization_pct, 100.0 * 500 / 1200);
  // Top: gemm 200 (2), nccl 150, nccl2 110, orphan 100; the API calls and the step are not device time.
  ASSERT_EQ(gpu0->top.size(), 4u);
  EXPECT_EQ(gpu0->top[0].name, "gemm");
  EXPECT_EQ(gpu0->top[0].count, 2);
  EXPECT_EQ(gpu0->top[0].total_ns, 200);
  EXPECT_EQ(gpu0->top[0].activity_class, analyzer::ActivityClass::kCompute);
  EXPECT_EQ(gpu0->top[1].name, "nccl");
  EXPECT_EQ(gpu0->top[1].total_ns, 150);
  EXPECT_EQ(gpu0->top[1].activity_class, analyzer::ActivityClass::kComm);
  EXPECT_EQ(gpu0->top[2].name, "nccl2");
  EXPECT_EQ(gpu0->top[2].total_ns, 110);
  EXPECT_EQ(gpu0->top[3].name, "orphan");
  EXPECT_EQ(gpu0->top[3].total_ns, 100);

  // Rank 0, GPU 1: the copy, 50 ns of memory.
  const analyzer::RangeDeviceStats* gpu1 = Find(stats, 0, 1);
  ASSERT_NE(gpu1, nullptr);
  EXPECT_EQ(gpu1->breakdown.window_ns, 1200);
  EXPECT_EQ(gpu1->breakdown.memory_ns, 50);
  EXPECT_EQ(gpu1->breakdown.memory_only_ns, 50);
  EXPECT_EQ(gpu1->breakdown.busy_ns, 50);
  EXPECT_EQ(gpu1->breakdown.compute_ns, 0);

  // Rank 1, GPU 0, own clock [-1000, 200): gemm [0,100) = 100; nccl [150,300) clipped to
  // [150,200) = 50; busy 150.
  const analyzer::RangeDeviceStats* r1 = Find(stats, 1, 0);
  ASSERT_NE(r1, nullptr);
  EXPECT_EQ(r1->breakdown.window_ns, 1200);
  EXPECT_EQ(r1->breakdown.compute_ns, 100);
  EXPECT_EQ(r1->breakdown.comm_ns, 50);
  EXPECT_EQ(r1->breakdown.overlap_ns, 0);
  EXPECT_EQ(r1->breakdown.exposed_comm_ns, 50);
  EXPECT_EQ(r1->breakdown.busy_ns, 150);
  EXPECT_EQ(r1->breakdown.idle_ns, 1050);
  EXPECT_DOUBLE_EQ(r1->breakdown.utilization_pct, 12.5);  // 100 · 150 / 1200
  ASSERT_EQ(r1->top.size(), 2u);
  EXPECT_EQ(r1->top[0].name, "gemm");
  EXPECT_EQ(r1->top[0].total_ns, 100);
  EXPECT_EQ(r1->top[1].name, "nccl");
  EXPECT_EQ(r1->top[1].total_ns, 50);  // clipped to the window

  // No CPU-backend work anywhere: no device -1 entry with activity.
  const analyzer::RangeDeviceStats* cpu = Find(stats, 0, analyzer::kCpuDevice);
  if (cpu != nullptr) {
    EXPECT_EQ(cpu->breakdown.busy_ns, 0);
  }
}

TEST(MeasureDisplayRange, TopIsLimited) {
  const TimelineModel model = QueryModel();
  const auto stats = MeasureDisplayRange(model, 0, 1200, 2);
  const analyzer::RangeDeviceStats* gpu0 = Find(stats, 0, 0);
  ASSERT_NE(gpu0, nullptr);
  ASSERT_EQ(gpu0->top.size(), 2u);
  EXPECT_EQ(gpu0->top[0].name, "gemm");
  EXPECT_EQ(gpu0->top[1].name, "nccl");
}

// ---- MeasureDisplayRange against `rankscope analyze` on the same files --------------------------

using analyzer::testing::TraceBuilder;
using rankscope::testing::TempDir;

// Two ranks on one host, three contiguous steps of 10 µs each (rank r shifted by 100·r).
// In step k, with b = 10000·k + 100·r:
//   GPU 0 stream A: gemm [b+500, b+4000), gemm [b+4200, b+7000), gemm2 [b+9500, b+10500)
//                   (which crosses into the next step), copy [b+7500, b+8000)
//   GPU 0 stream B: NCCL kernel [b+3000, b+6000)
//   GPU 1 (rank 0): gemm [b+1000, b+2000)
std::vector<TraceBuilder> StepRun() {
  std::vector<TraceBuilder> ranks;
  for (int r = 0; r < 2; ++r) {
    TraceBuilder t(r, 2);
    t.Host("node").RunId("steps-run");
    const trace::LaneId thread = t.CpuThread("main");
    const trace::LaneId a = t.GpuStream(0);
    const trace::LaneId comm = t.GpuStream(0);
    const trace::LaneId other = r == 0 ? t.GpuStream(1) : trace::kNoLane;
    for (int k = 0; k < 3; ++k) {
      const int64_t base = 10'000 * k + 100 * r;
      t.Step(thread, k, base, base + 10'000, 32);
      t.Kernel(a, "gemm", base + 500, base + 4000);
      t.Kernel(a, "gemm", base + 4200, base + 7000);
      t.Copy(a, base + 7500, base + 8000, 1 << 20);
      t.Kernel(a, "gemm2", base + 9500, base + 10'500);
      t.Kernel(comm, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", base + 3000, base + 6000);
      if (other != trace::kNoLane) t.Kernel(other, "gemm", base + 1000, base + 2000);
    }
    ranks.push_back(t);
  }
  return ranks;
}

using analyzer::testing::ExpectSameBreakdown;

struct AnalyzedRun {
  analyzer::Report report;
  std::unique_ptr<TimelineModel> model;
};

// Writes StepRun() to `dir`, analyzes it with no warm-up steps, and loads the viewer's model.
AnalyzedRun AnalyzeAndLoad(const TempDir& dir) {
  AnalyzedRun run;
  for (TraceBuilder& builder : StepRun()) {
    const trace::RankTrace t = builder.Build();
    rankscope::testing::WriteRankTraceFile(t, dir / trace::RankFileName(*t.meta.rank));
  }
  analyzer::AnalyzeOptions options;
  options.skip_steps = 0;
  auto report = analyzer::AnalyzeRun(dir.path(), options);
  EXPECT_TRUE(report.ok()) << report.status().message();
  if (report.ok()) run.report = std::move(report).value();
  auto model = TimelineModel::Load(dir.path(), {});
  EXPECT_TRUE(model.ok()) << model.status().message();
  if (model.ok()) run.model = std::move(model).value();
  return run;
}

TEST(MeasureDisplayRange, StepWindowEqualsTheAnalyzersStepMetrics) {
  TempDir dir;
  const AnalyzedRun run = AnalyzeAndLoad(dir);
  ASSERT_NE(run.model, nullptr);
  // Rank 0 has GPUs 0 and 1, rank 1 GPU 0.
  ASSERT_EQ(run.report.ranks.size(), 3u);
  int steps_compared = 0;
  for (const analyzer::DeviceReport& device : run.report.ranks) {
    ASSERT_EQ(device.steps.size(), 3u) << "rank " << device.rank << " device " << device.device;
    const int64_t offset = run.model->ranks().at(device.rank).clock_offset_ns;
    for (const analyzer::StepMetrics& step : device.steps) {
      SCOPED_TRACE(::testing::Message() << "rank " << device.rank << " device " << device.device << " step "
                                        << step.number);
      const auto stats = MeasureDisplayRange(*run.model, step.start_ns + offset, step.end_ns + offset, 10);
      const analyzer::RangeDeviceStats* got = Find(stats, device.rank, device.device);
      ASSERT_NE(got, nullptr);
      ExpectSameBreakdown(got->breakdown, step.breakdown);
      ++steps_compared;
    }
  }
  EXPECT_EQ(steps_compared, 9);
}

TEST(MeasureDisplayRange, StepWindowMatchesTheHandArithmetic) {
  TempDir dir;
  const AnalyzedRun run = AnalyzeAndLoad(dir);
  ASSERT_NE(run.model, nullptr);
  // Rank 0, GPU 0, step 1 = [10000, 20000):
  //   C = [10000,10500) (gemm2 of step 0, clipped) + 3500 + 2800 + [19500,20000) (clipped) = 7300
  //   M = [13000,16000) = 3000;  C ∩ M = [13000,14000) + [14200,16000) = 2800;  |M \ C| = 200
  //   Y = [17500,18000) = 500;   busy = [10000,17000) + [17500,18000) + [19500,20000) = 8000
  const auto stats = MeasureDisplayRange(*run.model, 10'000, 20'000, 10);
  const analyzer::RangeDeviceStats* gpu0 = Find(stats, 0, 0);
  ASSERT_NE(gpu0, nullptr);
  const analyzer::Breakdown& b = gpu0->breakdown;
  EXPECT_EQ(b.window_ns, 10'000);
  EXPECT_EQ(b.compute_ns, 7300);
  EXPECT_EQ(b.comm_ns, 3000);
  EXPECT_EQ(b.memory_ns, 500);
  EXPECT_EQ(b.overlap_ns, 2800);
  EXPECT_EQ(b.exposed_comm_ns, 200);
  EXPECT_EQ(b.busy_ns, 8000);
  EXPECT_EQ(b.idle_ns, 2000);
  EXPECT_EQ(b.compute_only_ns, 4500);  // 7300 - 2800
  EXPECT_EQ(b.comm_only_ns, 200);
  EXPECT_EQ(b.memory_only_ns, 500);
  EXPECT_NEAR(b.overlap_pct, 100.0 * 2800 / 3000, 1e-9);
  EXPECT_NEAR(b.utilization_pct, 80.0, 1e-9);
  // Partition: 4500 + 2800 + 200 + 500 + 2000 = 10000.
  EXPECT_EQ(b.compute_only_ns + b.overlap_ns + b.comm_only_ns + b.memory_only_ns + b.idle_ns, b.window_ns);
  // Top: gemm 3500 + 2800 = 6300 (2), NCCL 3000, gemm2 500 + 500 = 1000 (2); the copy may be
  // listed too, but the compute and comm kernels come in this order.
  ASSERT_GE(gpu0->top.size(), 3u);
  EXPECT_EQ(gpu0->top[0].name, "gemm");
  EXPECT_EQ(gpu0->top[0].total_ns, 6300);
  EXPECT_EQ(gpu0->top[0].count, 2);
  EXPECT_EQ(gpu0->top[1].name, "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
  EXPECT_EQ(gpu0->top[1].total_ns, 3000);
  EXPECT_EQ(gpu0->top[2].name, "gemm2");
  EXPECT_EQ(gpu0->top[2].total_ns, 1000);
  EXPECT_EQ(gpu0->top[2].count, 2);
}

TEST(MeasureDisplayRange, DeviceExtentEqualsTheAnalyzersTotals) {
  TempDir dir;
  const AnalyzedRun run = AnalyzeAndLoad(dir);
  ASSERT_NE(run.model, nullptr);
  ASSERT_EQ(run.report.ranks.size(), 3u);
  for (const analyzer::DeviceReport& device : run.report.ranks) {
    SCOPED_TRACE(::testing::Message() << "rank " << device.rank << " device " << device.device);
    const int64_t shift = 100 * device.rank;
    // GPU 0: first gemm of step 0 at 500 to gemm2 of step 2 ending at 20000 + 10500.
    // GPU 1: first gemm at 1000 to the last one ending at 20000 + 2000.
    const int64_t first = shift + (device.device == 0 ? 500 : 1000);
    const int64_t last = shift + 20'000 + (device.device == 0 ? 10'500 : 2000);
    EXPECT_EQ(device.totals.window_ns, last - first);
    const int64_t offset = run.model->ranks().at(device.rank).clock_offset_ns;
    const auto stats = MeasureDisplayRange(*run.model, first + offset, last + offset, 10);
    const analyzer::RangeDeviceStats* got = Find(stats, device.rank, device.device);
    ASSERT_NE(got, nullptr);
    ExpectSameBreakdown(got->breakdown, device.totals);
  }
}

}  // namespace
}  // namespace rankscope::gui
