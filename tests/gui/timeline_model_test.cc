// gui/core/timeline_model.h: packing a lane's events into rows, the model's accessors and
// clock alignment on hand-built ranks, and TimelineModel::Load on rank files written
// through TraceWriter (tracks per lane, nesting, classes, correlation ids, bad input).
#include "gui/core/timeline_model.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "gui/core/queries.h"
#include "gui/core/search.h"
#include "tests/analyzer/hostile_rank_file.h"
#include "tests/trace_builder.h"
#include "tests/gui/model_builder.h"
#include "tests/rank_file_writer.h"
#include "tests/temp_dir.h"
#include "trace/run_dir.h"

namespace rankscope::gui {
namespace {

using analyzer::ViewEvent;
using testing::FindByName;
using testing::NamedEvent;
using testing::RankBuilder;
using testing::Ref;

ViewEvent V(int64_t start, int64_t end, uint32_t name, EventClass event_class = EventClass::kAnnotation,
            EventSource source = EventSource::kNvtxRange, uint64_t correlation = 0) {
  ViewEvent e;
  e.start_ns = start;
  e.end_ns = end;
  e.name = name;
  e.event_class = event_class;
  e.source = source;
  e.correlation_id = correlation;
  e.lane = 1;
  return e;
}

// (start, end, name) of each event of each row.
using Triple = std::tuple<int64_t, int64_t, uint32_t>;
std::vector<std::vector<Triple>> Layout(const std::vector<EventRow>& rows) {
  std::vector<std::vector<Triple>> out;
  for (const EventRow& row : rows) {
    out.emplace_back();
    for (size_t i = 0; i < row.size(); ++i) out.back().emplace_back(row.start[i], row.end[i], row.name[i]);
  }
  return out;
}

void ExpectRowInvariants(const std::vector<EventRow>& rows) {
  for (size_t r = 0; r < rows.size(); ++r) {
    const EventRow& row = rows[r];
    ASSERT_EQ(row.end.size(), row.size()) << "row " << r;
    ASSERT_EQ(row.name.size(), row.size()) << "row " << r;
    ASSERT_EQ(row.event_class.size(), row.size()) << "row " << r;
    ASSERT_EQ(row.source.size(), row.size()) << "row " << r;
    EXPECT_TRUE(row.correlation.empty() || row.correlation.size() == row.size()) << "row " << r;
    uint8_t mask = 0;
    for (size_t i = 0; i < row.size(); ++i) {
      EXPECT_LE(row.start[i], row.end[i]) << "row " << r << " event " << i;
      if (i > 0) {
        EXPECT_LE(row.end[i - 1], row.start[i]) << "row " << r << " events overlap at " << i;
      }
      mask = static_cast<uint8_t>(mask | (1u << row.event_class[i]));
    }
    EXPECT_EQ(row.class_mask, mask) << "row " << r;
  }
}

// ---- PackRows ----------------------------------------------------------------------------------

TEST(PackRows, NestedRangesStackByDepth) {
  // A [0,100) holds B [10,50), which holds C [20,30); D [60,90) is also in A; E [200,300) is alone.
  const std::vector<EventRow> rows =
      PackRows({V(200, 300, 5), V(20, 30, 3), V(0, 100, 1), V(60, 90, 4), V(10, 50, 2)});
  const std::vector<std::vector<Triple>> expected = {
      {{0, 100, 1}, {200, 300, 5}},  // depth 0: A, E
      {{10, 50, 2}, {60, 90, 4}},    // depth 1: B, D
      {{20, 30, 3}},                 // depth 2: C
  };
  EXPECT_EQ(Layout(rows), expected);
  ExpectRowInvariants(rows);
}

TEST(PackRows, EqualStartsPutTheLongestEventOutermost) {
  const std::vector<EventRow> rows = PackRows({V(0, 10, 1), V(0, 100, 2), V(0, 50, 3)});
  const std::vector<std::vector<Triple>> expected = {{{0, 100, 2}}, {{0, 50, 3}}, {{0, 10, 1}}};
  EXPECT_EQ(Layout(rows), expected);
}

TEST(PackRows, OverlappingEventsGoToTheFirstRowThatIsFree) {
  // [0,10) row 0; [5,15) overlaps it: row 1; [12,20) starts after row 0's last ended: row 0.
  // [10,11) touches [0,10)'s end (half-open): row 0 is free at 10.
  const std::vector<EventRow> rows = PackRows({V(0, 10, 1), V(5, 15, 2), V(12, 20, 3), V(10, 11, 4)});
  const std::vector<std::vector<Triple>> expected = {{{0, 10, 1}, {10, 11, 4}, {12, 20, 3}}, {{5, 15, 2}}};
  EXPECT_EQ(Layout(rows), expected);
  ExpectRowInvariants(rows);
}

TEST(PackRows, DropsEventsEndingBeforeTheyStartAndKeepsInstants) {
  const std::vector<EventRow> rows =
      PackRows({V(0, 10, 1), V(50, 40, 2), V(5, 5, 3, EventClass::kMark, EventSource::kMark), V(30, 30, 4)});
  // [50,40) is dropped. The mark at 5 lies inside [0,10): row 1. The instant at 30: row 0.
  const std::vector<std::vector<Triple>> expected = {{{0, 10, 1}, {30, 30, 4}}, {{5, 5, 3}}};
  EXPECT_EQ(Layout(rows), expected);
  ExpectRowInvariants(rows);
}

TEST(PackRows, KeepsClassSourceAndCorrelationColumns) {
  const std::vector<EventRow> rows = PackRows({
      V(100, 200, 1, EventClass::kCompute, EventSource::kKernel, 11),
      V(0, 50, 2, EventClass::kMemory, EventSource::kMemcpy, 12),
      V(60, 70, 3, EventClass::kMemory, EventSource::kMemset, 0),
  });
  ASSERT_EQ(rows.size(), 1u);
  const EventRow& row = rows[0];
  ASSERT_EQ(row.size(), 3u);
  EXPECT_EQ(row.start, (std::vector<int64_t>{0, 60, 100}));
  EXPECT_EQ(row.end, (std::vector<int64_t>{50, 70, 200}));
  EXPECT_EQ(row.name, (std::vector<uint32_t>{2, 3, 1}));
  EXPECT_EQ(row.event_class, (std::vector<uint8_t>{2, 2, 0}));  // memory, memory, compute
  EXPECT_EQ(row.source, (std::vector<uint8_t>{static_cast<uint8_t>(EventSource::kMemcpy),
                                              static_cast<uint8_t>(EventSource::kMemset),
                                              static_cast<uint8_t>(EventSource::kKernel)}));
  EXPECT_EQ(row.correlation, (std::vector<uint32_t>{12, 0, 11}));
  EXPECT_EQ(row.class_mask, (1u << 0) | (1u << 2));  // compute and memory
}

TEST(PackRows, RowsWithoutCorrelationIdsHaveNoCorrelationColumn) {
  const std::vector<EventRow> rows = PackRows({V(0, 100, 1), V(10, 20, 2, EventClass::kApiCall,
                                                                EventSource::kApiCall, 5)});
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_TRUE(rows[0].correlation.empty());  // the range has none
  EXPECT_EQ(rows[1].correlation, (std::vector<uint32_t>{5}));
  EXPECT_EQ(rows[0].class_mask, 1u << static_cast<unsigned>(EventClass::kAnnotation));
  EXPECT_EQ(rows[1].class_mask, 1u << static_cast<unsigned>(EventClass::kApiCall));
}

TEST(PackRows, CorrelationIdsKeepTheirLow32Bits) {
  const std::vector<EventRow> rows =
      PackRows({V(0, 10, 1, EventClass::kApiCall, EventSource::kApiCall, 0x1'0000'0007ULL)});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].correlation, (std::vector<uint32_t>{7}));  // 0x1'0000'0007 mod 2^32
}

TEST(PackRows, EmptyInputGivesNoRows) { EXPECT_TRUE(PackRows({}).empty()); }

// Random well-nested ranges (children strictly shorter than their parent), shuffled: each
// lands in the row of its nesting depth.
void AddTree(std::mt19937_64& random, int64_t start, int64_t end, int depth, std::vector<ViewEvent>& events,
             std::vector<int>& depths) {
  events.push_back(V(start, end, static_cast<uint32_t>(events.size())));
  depths.push_back(depth);
  if (depth >= 6 || end - start < 8) return;
  int64_t t = start;
  std::uniform_int_distribution<int> children(0, 3);
  const int n = children(random);
  for (int c = 0; c < n && t < end - 2; ++c) {
    const int64_t child_start = std::uniform_int_distribution<int64_t>(t, end - 2)(random);
    int64_t child_end = std::uniform_int_distribution<int64_t>(child_start + 1, end)(random);
    if (child_start == start && child_end == end) --child_end;  // strictly shorter than the parent
    AddTree(random, child_start, child_end, depth + 1, events, depths);
    t = child_end;
  }
}

TEST(PackRows, RandomWellNestedRangesLandAtTheirDepth) {
  std::mt19937_64 random(7);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<ViewEvent> events;
    std::vector<int> depths;
    int64_t t = 0;
    for (int root = 0; root < 20; ++root) {
      const int64_t length = std::uniform_int_distribution<int64_t>(1, 10'000)(random);
      AddTree(random, t, t + length, 0, events, depths);
      t += length + std::uniform_int_distribution<int64_t>(0, 100)(random);
    }
    std::vector<ViewEvent> shuffled = events;
    std::shuffle(shuffled.begin(), shuffled.end(), random);
    const std::vector<EventRow> rows = PackRows(shuffled);
    ExpectRowInvariants(rows);
    size_t packed = 0;
    for (size_t r = 0; r < rows.size(); ++r) {
      for (size_t i = 0; i < rows[r].size(); ++i) {
        ++packed;
        EXPECT_EQ(static_cast<int>(r), depths[rows[r].name[i]]) << "trial " << trial << " event " << rows[r].name[i];
      }
    }
    EXPECT_EQ(packed, events.size());
  }
}

// ---- A hand-built model ------------------------------------------------------------------------

// Rank 0 on host-a (offset 0): GPU row gemm [100,200) corr 7, nccl [250,400) corr 8; a thread
// row of launches [50,60) corr 7 and [70,80) corr 8.
// Rank 1 on host-b (offset +1000): GPU row gemm [0,500), no correlation ids.
TimelineModel TwoRanks() {
  RankBuilder r0(0, "host-a");
  const uint32_t gpu0 = r0.AddTrack(trace::LaneKind::kGpuStream, 0, "GPU 0 · stream 7");
  r0.AddRow(gpu0, {{100, 200, "gemm", EventClass::kCompute, EventSource::kKernel, 7},
                   {250, 400, "nccl", EventClass::kComm, EventSource::kKernel, 8}});
  const uint32_t thread0 = r0.AddTrack(trace::LaneKind::kCpuThread, -1, "thread 1 main");
  r0.AddRow(thread0, {{50, 60, "cudaLaunchKernel", EventClass::kApiCall, EventSource::kApiCall, 7},
                      {70, 80, "cudaLaunchKernel", EventClass::kApiCall, EventSource::kApiCall, 8}});
  RankBuilder r1(1, "host-b");
  r1.Offset(1000);
  r1.AddRow(r1.AddTrack(trace::LaneKind::kGpuStream, 0, "GPU 0 · stream 7"), {{0, 500, "gemm"}});
  return TimelineModel("hand-built", {r0.Build(), r1.Build()});
}

TEST(TimelineModel, ExtentIsOnTheCommonClock) {
  const TimelineModel model = TwoRanks();
  EXPECT_EQ(model.source().string(), "hand-built");
  EXPECT_EQ(model.events(), 5u);
  EXPECT_EQ(model.start_ns(), 50);    // rank 0's first launch
  EXPECT_EQ(model.end_ns(), 1500);    // rank 1's gemm: 500 + 1000
}

TEST(TimelineModel, AccessorsReadTheRowColumns) {
  const TimelineModel model = TwoRanks();
  const EventRef nccl = Ref(0, 0, 0, 1);
  EXPECT_TRUE(model.Contains(nccl));
  EXPECT_EQ(model.Name(nccl), "nccl");
  EXPECT_EQ(model.ClassOf(nccl), EventClass::kComm);
  EXPECT_EQ(model.SourceOf(nccl), EventSource::kKernel);
  EXPECT_EQ(model.CorrelationOf(nccl), 8u);
  EXPECT_EQ(model.DisplayStart(nccl), 250);
  EXPECT_EQ(model.DisplayEnd(nccl), 400);
  EXPECT_EQ(&model.row(nccl), &model.ranks()[0].tracks[0].rows[0]);
  EXPECT_EQ(model.rank(nccl).rank, 0);

  const EventRef launch = Ref(0, 1, 0, 0);
  EXPECT_EQ(model.Name(launch), "cudaLaunchKernel");
  EXPECT_EQ(model.ClassOf(launch), EventClass::kApiCall);
  EXPECT_EQ(model.SourceOf(launch), EventSource::kApiCall);
  EXPECT_EQ(model.CorrelationOf(launch), 7u);

  const EventRef other = Ref(1, 0, 0, 0);
  EXPECT_EQ(model.Name(other), "gemm");
  EXPECT_EQ(model.DisplayStart(other), 1000);  // 0 + 1000
  EXPECT_EQ(model.DisplayEnd(other), 1500);
  EXPECT_EQ(model.CorrelationOf(other), 0u);   // the row has no correlation column
  EXPECT_EQ(model.rank(other).rank, 1);
}

TEST(TimelineModel, ContainsRejectsEveryOutOfRangeIndex) {
  const TimelineModel model = TwoRanks();
  EXPECT_TRUE(model.Contains(Ref(0, 0, 0, 0)));
  EXPECT_TRUE(model.Contains(Ref(1, 0, 0, 0)));
  EXPECT_FALSE(model.Contains(Ref(0, 0, 0, 2)));  // the row has 2 events
  EXPECT_FALSE(model.Contains(Ref(0, 0, 1, 0)));  // the track has 1 row
  EXPECT_FALSE(model.Contains(Ref(0, 2, 0, 0)));  // the rank has 2 tracks
  EXPECT_FALSE(model.Contains(Ref(1, 1, 0, 0)));
  EXPECT_FALSE(model.Contains(Ref(2, 0, 0, 0)));  // 2 ranks
}

TEST(TimelineModel, RankLabelAndStrings) {
  const TimelineModel model = TwoRanks();
  EXPECT_EQ(model.ranks()[0].Label(), "rank 0 · host-a");
  EXPECT_EQ(model.ranks()[1].Label(), "rank 1 · host-b");
  const RankTimeline& r0 = model.ranks()[0];
  for (uint32_t id = 0; id < r0.strings.size(); ++id) {
    EXPECT_EQ(r0.Str(id), r0.strings[id]);
  }
}

TEST(TimelineModel, ApplyClockAlignmentSetsEachHostsOffset) {
  TimelineModel model = TwoRanks();
  analyzer::ClockAlignment clock;
  clock.hosts = {{"host-a", {0}, 0, 3}, {"host-b", {1}, -700, 3}};
  clock.applied = true;
  model.ApplyClockAlignment(clock);
  EXPECT_EQ(model.ranks()[0].clock_offset_ns, 0);
  EXPECT_EQ(model.ranks()[1].clock_offset_ns, -700);
  EXPECT_EQ(model.DisplayStart(Ref(1, 0, 0, 0)), -700);  // own 0, offset -700
  EXPECT_EQ(model.DisplayEnd(Ref(1, 0, 0, 0)), -200);
  EXPECT_EQ(model.DisplayStart(Ref(0, 0, 0, 0)), 100);
  // The extent follows: rank 1 now spans [-700, -200), rank 0 [50, 400).
  EXPECT_EQ(model.start_ns(), -700);
  EXPECT_EQ(model.end_ns(), 400);

  // Applying it again puts the ranks at the same place (offsets are set, not added).
  model.ApplyClockAlignment(clock);
  EXPECT_EQ(model.ranks()[1].clock_offset_ns, -700);
  EXPECT_EQ(model.start_ns(), -700);
}

TEST(TimelineModel, MemoryIsAtLeastTheColumnBytes) {
  const TimelineModel model = TwoRanks();
  // 22 bytes per event without correlation ids (8 + 8 + 4 + 1 + 1), 26 with them (+ 4).
  const EventRow& with_ids = model.ranks()[0].tracks[0].rows[0];
  const EventRow& without = model.ranks()[1].tracks[0].rows[0];
  EXPECT_GE(with_ids.MemoryBytes(), 26 * with_ids.size());
  EXPECT_GE(without.MemoryBytes(), 22 * without.size());
  EXPECT_GE(model.MemoryBytes(), with_ids.MemoryBytes() + without.MemoryBytes());
}

TEST(EventRow, ColumnsViewTheRowsVectors) {
  const TimelineModel model = TwoRanks();
  const EventRow& row = model.ranks()[0].tracks[0].rows[0];
  const analyzer::SpanColumns columns = row.Columns();
  EXPECT_EQ(columns.start.data(), row.start.data());
  EXPECT_EQ(columns.start.size(), row.size());
  EXPECT_EQ(columns.end.data(), row.end.data());
  EXPECT_EQ(columns.end.size(), row.size());
  EXPECT_EQ(columns.name.data(), row.name.data());
  EXPECT_EQ(columns.event_class.data(), row.event_class.data());
  EXPECT_EQ(columns.event_class.size(), row.size());
}

// ---- Load --------------------------------------------------------------------------------------

using analyzer::testing::TraceBuilder;
using rankscope::testing::TempDir;

constexpr uint64_t kWorld = 0xC0FFEE;
const char* const kNcclKernel = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";

// Rank `rank` of a 2-rank run on one host (so no clock offsets), times shifted by 100·rank:
//   GPU 0 stream: gemm [1000,2000) corr 11, NCCL kernel [2500,4000) corr 12,
//                 copy [4200,4300) corr 13, set [4400,4450)
//   communicator: collective record [2450,4050)
//   thread main:  step [500,5000) ⊃ forward [600,2100) ⊃ attention [700,1500); a workload
//                 mark at 550; launches [900,950) corr 11, [2400,2450) corr 12; a copy call
//                 [4100,4150) corr 13; a stream sync [4500,4600); on rank 1 also a CPU-backend
//                 compute range "cpu_work" [1600,1700) (category 1 = compute)
trace::RankTrace WrittenRank(int rank) {
  const int64_t s = 100 * rank;
  TraceBuilder b(rank, 2);
  b.Host("node").RunId("viewer-run");
  // Lanes in the file in the order thread, communicator, stream; tracks come out reordered.
  const trace::LaneId thread = b.CpuThread("main");
  const trace::LaneId comm = b.Communicator(kWorld);
  const trace::LaneId gpu = b.GpuStream(0);
  b.Kernel(gpu, "gemm", s + 1000, s + 2000);
  b.Kernel(gpu, kNcclKernel, s + 2500, s + 4000);
  b.Copy(gpu, s + 4200, s + 4300, 4096);
  b.Memset(gpu, s + 4400, s + 4450, 64);
  b.Collective(comm, "AllReduce", s + 2450, s + 4050, kWorld, 0, trace::CollectiveOp::kAllReduce, 1 << 20, 2);
  b.Step(thread, 0, s + 500, s + 5000, 32);
  b.Range(thread, "", 0, "forward", s + 600, s + 2100);
  b.Range(thread, "", 0, "attention", s + 700, s + 1500);
  b.Workload(thread, s + 550, 2, 32, 1, 1, 1000);
  if (rank == 1) {
    b.CpuBackendCategories();
    b.Range(thread, "rankscope", analyzer::testing::kComputeCategory, "cpu_work", s + 1600, s + 1700);
  }
  const trace::StringId launch = b.Str("cudaLaunchKernel");
  const trace::StringId copy_call = b.Str("cudaMemcpyAsync");
  trace::RankTrace t = b.Build();
  // Build() sorted the tables by (lane, start): kernels are gemm, NCCL.
  t.events.kernels[0].correlation_id = 11;
  t.events.kernels[1].correlation_id = 12;
  t.events.memcpys[0].correlation_id = 13;
  t.events.memcpys[0].copy_kind = trace::CopyKind::kHostToDevice;
  testing::AddApiCall(t, thread, launch, s + 900, s + 950, 11);
  testing::AddApiCall(t, thread, launch, s + 2400, s + 2450, 12);
  testing::AddApiCall(t, thread, copy_call, s + 4100, s + 4150, 13);
  trace::SyncEvent sync;
  sync.lane = thread;
  sync.start_ns = s + 4500;
  sync.end_ns = s + 4600;
  sync.sync_kind = trace::SyncKind::kStreamSynchronize;
  t.events.syncs.push_back(sync);
  return t;
}

void WriteRun(const TempDir& dir) {
  for (int rank = 0; rank < 2; ++rank) rankscope::testing::WriteRankTraceFile(WrittenRank(rank), dir / trace::RankFileName(rank));
}

std::unique_ptr<TimelineModel> MustLoad(const std::filesystem::path& path, const ModelLoadOptions& options = {}) {
  auto loaded = TimelineModel::Load(path, options);
  EXPECT_TRUE(loaded.ok()) << loaded.status().message();
  return loaded.ok() ? std::move(loaded).value() : nullptr;
}

TEST(TimelineModelLoad, LanesBecomeTracksInStreamCommunicatorThreadOrder) {
  TempDir dir;
  WriteRun(dir);
  const auto model = MustLoad(dir.path());
  ASSERT_NE(model, nullptr);
  ASSERT_EQ(model->ranks().size(), 2u);
  for (int rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE(rank);
    const RankTimeline& r = model->ranks()[rank];
    EXPECT_EQ(r.rank, rank);
    EXPECT_EQ(r.host, "node");
    EXPECT_EQ(r.file.filename().string(), trace::RankFileName(rank));
    ASSERT_EQ(r.tracks.size(), 3u);
    EXPECT_EQ(r.tracks[0].kind, trace::LaneKind::kGpuStream);
    EXPECT_EQ(r.tracks[0].device, 0);
    EXPECT_EQ(r.tracks[1].kind, trace::LaneKind::kCommunicator);
    EXPECT_EQ(r.tracks[1].device, -1);
    EXPECT_EQ(r.tracks[2].kind, trace::LaneKind::kCpuThread);
    EXPECT_EQ(r.tracks[2].device, -1);
    EXPECT_NE(r.tracks[2].label.find("main"), std::string::npos) << r.tracks[2].label;
    for (const Track& track : r.tracks) {
      EXPECT_FALSE(track.label.empty());
      EXPECT_NE(track.lane, trace::kNoLane);
      size_t in_rows = 0;
      for (const EventRow& row : track.rows) in_rows += row.size();
      EXPECT_EQ(track.events, in_rows);
    }
    // GPU: 2 kernels, a copy, a set. Communicator: 1 record. Thread: 3 ranges (+1 on rank 1),
    // a mark, 3 API calls, a sync.
    EXPECT_EQ(r.tracks[0].events, 4u);
    EXPECT_EQ(r.tracks[1].events, 1u);
    EXPECT_EQ(r.tracks[2].events, rank == 0 ? 8u : 9u);
    EXPECT_EQ(r.events, rank == 0 ? 13u : 14u);
    EXPECT_EQ(r.first_ns, 500 + 100 * rank);  // the step range starts first
    EXPECT_EQ(r.last_ns, 5000 + 100 * rank);  // and ends last
    EXPECT_EQ(r.clock_offset_ns, 0);          // one host: nothing to align
  }
  EXPECT_EQ(model->events(), 27u);
  EXPECT_EQ(model->start_ns(), 500);
  EXPECT_EQ(model->end_ns(), 5100);
  EXPECT_EQ(model->source().string(), dir.path().string());
}

TEST(TimelineModelLoad, NestedNvtxRangesStackIntoRows) {
  TempDir dir;
  WriteRun(dir);
  const auto model = MustLoad(dir.path());
  ASSERT_NE(model, nullptr);
  for (uint32_t rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE(rank);
    const int64_t s = 100 * rank;
    // Titled with its number (its payload's step 0).
    const auto step = FindByName(*model, rank, "step 0", s + 500);
    const auto forward = FindByName(*model, rank, "forward", s + 600);
    const auto attention = FindByName(*model, rank, "attention", s + 700);
    ASSERT_TRUE(step && forward && attention);
    EXPECT_EQ(step->track, 2u);
    EXPECT_EQ(forward->track, 2u);
    EXPECT_EQ(attention->track, 2u);
    EXPECT_EQ(step->row, 0u);       // outermost
    EXPECT_EQ(forward->row, 1u);    // inside step
    EXPECT_EQ(attention->row, 2u);  // inside forward
    EXPECT_EQ(model->DisplayEnd(*step), s + 5000);
    EXPECT_EQ(model->ClassOf(*step), EventClass::kAnnotation);
    EXPECT_EQ(model->SourceOf(*step), EventSource::kNvtxRange);
    EXPECT_EQ(model->ClassOf(*attention), EventClass::kAnnotation);
    // The launch at 900 lies inside step, forward and attention: a fourth row.
    const auto launch = FindByName(*model, rank, "cudaLaunchKernel", s + 900);
    ASSERT_TRUE(launch.has_value());
    EXPECT_EQ(launch->track, 2u);
    EXPECT_EQ(launch->row, 3u);
    for (const EventRow& row : model->ranks()[rank].tracks[2].rows) {
      for (size_t i = 1; i < row.size(); ++i) {
        EXPECT_LE(row.end[i - 1], row.start[i]);
      }
    }
  }
}

TEST(TimelineModelLoad, EventsGetTheAnalyzersClasses) {
  TempDir dir;
  WriteRun(dir);
  const auto model = MustLoad(dir.path());
  ASSERT_NE(model, nullptr);
  const RankTimeline& r1 = model->ranks()[1];
  const EventRow& gpu = r1.tracks[0].rows.at(0);
  ASSERT_EQ(r1.tracks[0].rows.size(), 1u);  // nothing on the stream overlaps
  ASSERT_EQ(gpu.size(), 4u);
  EXPECT_EQ(r1.Str(gpu.name[0]), "gemm");
  EXPECT_EQ(gpu.event_class[0], static_cast<uint8_t>(EventClass::kCompute));
  EXPECT_EQ(gpu.source[0], static_cast<uint8_t>(EventSource::kKernel));
  EXPECT_EQ(r1.Str(gpu.name[1]), kNcclKernel);
  EXPECT_EQ(gpu.event_class[1], static_cast<uint8_t>(EventClass::kComm));  // "nccl" in the name
  EXPECT_EQ(gpu.event_class[2], static_cast<uint8_t>(EventClass::kMemory));
  EXPECT_EQ(gpu.source[2], static_cast<uint8_t>(EventSource::kMemcpy));
  EXPECT_EQ(gpu.event_class[3], static_cast<uint8_t>(EventClass::kMemory));
  EXPECT_EQ(gpu.source[3], static_cast<uint8_t>(EventSource::kMemset));
  EXPECT_EQ(gpu.start, (std::vector<int64_t>{1100, 2600, 4300, 4500}));
  EXPECT_EQ(gpu.end, (std::vector<int64_t>{2100, 4100, 4400, 4550}));

  const EventRow& comm = r1.tracks[1].rows.at(0);
  ASSERT_EQ(comm.size(), 1u);
  EXPECT_EQ(comm.event_class[0], static_cast<uint8_t>(EventClass::kCollective));
  EXPECT_EQ(comm.source[0], static_cast<uint8_t>(EventSource::kCollective));
  EXPECT_EQ(comm.start[0], 2550);

  const auto mark = FindByName(*model, 1, "workload", 650);
  ASSERT_TRUE(mark.has_value());
  EXPECT_EQ(model->ClassOf(*mark), EventClass::kMark);
  EXPECT_EQ(model->SourceOf(*mark), EventSource::kMark);
  EXPECT_EQ(model->DisplayEnd(*mark), 650);

  const auto cpu_work = FindByName(*model, 1, "cpu_work", 1700);
  ASSERT_TRUE(cpu_work.has_value());
  EXPECT_EQ(model->ClassOf(*cpu_work), EventClass::kCompute);  // category "compute": CPU backend work

  // The sync, wherever it landed on the thread track.
  bool found_sync = false;
  for (const EventRow& row : r1.tracks[2].rows) {
    for (size_t i = 0; i < row.size(); ++i) {
      if (row.source[i] == static_cast<uint8_t>(EventSource::kSync)) {
        found_sync = true;
        EXPECT_EQ(row.event_class[i], static_cast<uint8_t>(EventClass::kSync));
        EXPECT_EQ(row.start[i], 4600);
        EXPECT_EQ(row.end[i], 4700);
      }
    }
  }
  EXPECT_TRUE(found_sync);
}

TEST(TimelineModelLoad, ApiCallsAndDeviceWorkKeepTheirCorrelationIds) {
  TempDir dir;
  WriteRun(dir);
  const auto model = MustLoad(dir.path());
  ASSERT_NE(model, nullptr);
  for (uint32_t rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE(rank);
    const int64_t s = 100 * rank;
    const auto launch1 = FindByName(*model, rank, "cudaLaunchKernel", s + 900);
    const auto launch2 = FindByName(*model, rank, "cudaLaunchKernel", s + 2400);
    const auto copy_call = FindByName(*model, rank, "cudaMemcpyAsync", s + 4100);
    const auto gemm = FindByName(*model, rank, "gemm", s + 1000);
    const auto nccl = FindByName(*model, rank, kNcclKernel, s + 2500);
    ASSERT_TRUE(launch1 && launch2 && copy_call && gemm && nccl);
    EXPECT_EQ(model->ClassOf(*launch1), EventClass::kApiCall);
    EXPECT_EQ(model->SourceOf(*launch1), EventSource::kApiCall);
    EXPECT_EQ(model->CorrelationOf(*launch1), 11u);
    EXPECT_EQ(model->CorrelationOf(*launch2), 12u);
    EXPECT_EQ(model->CorrelationOf(*copy_call), 13u);
    EXPECT_EQ(model->CorrelationOf(*gemm), 11u);
    EXPECT_EQ(model->CorrelationOf(*nccl), 12u);
    EXPECT_EQ(model->CorrelationOf(Ref(rank, 0, 0, 2)), 13u);  // the copy
    EXPECT_EQ(model->CorrelationOf(Ref(rank, 0, 0, 3)), 0u);   // the set has none
    // Titled with its number (its payload's step 0).
    const auto step = FindByName(*model, rank, "step 0", s + 500);
    ASSERT_TRUE(step.has_value());
    EXPECT_EQ(model->CorrelationOf(*step), 0u);
  }
}

// A load whose cancel flag is set stops and fails with the cancellation, whatever the reader.
TEST(TimelineModelLoad, ACancelledLoadFailsAsCancelled) {
  TempDir dir;
  WriteRun(dir);
  std::atomic<bool> cancel{true};
  const auto model = TimelineModel::Build(
      dir.path(),
      [&](analyzer::ViewEventSink& sink) -> Result<std::vector<std::string>> {
        RS_ASSIGN_OR_RETURN(analyzer::ViewRun run, analyzer::StreamRunEvents(dir.path(), {}, sink));
        return run.warnings;
      },
      &cancel);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().message(), TimelineModel::kCancelledMessage);
  cancel = false;
  EXPECT_TRUE(TimelineModel::Build(dir.path(), [&](analyzer::ViewEventSink& sink) -> Result<std::vector<std::string>> {
                RS_ASSIGN_OR_RETURN(analyzer::ViewRun run, analyzer::StreamRunEvents(dir.path(), {}, sink));
                return run.warnings;
              }, &cancel).ok());
}

// Copies and sets have no name in a rank file: the model titles them as Nsight Systems does,
// from the copy kind, so they have a label and search finds them.
TEST(TimelineModelLoad, UnnamedCopiesAndSetsAreTitledByKind) {
  TempDir dir;
  WriteRun(dir);
  const auto model = MustLoad(dir.path());
  ASSERT_NE(model, nullptr);
  for (uint32_t rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(model->Name(Ref(rank, 0, 0, 2)), "Memcpy HtoD");
    EXPECT_EQ(model->SourceOf(Ref(rank, 0, 0, 2)), EventSource::kMemcpy);
    EXPECT_EQ(model->Name(Ref(rank, 0, 0, 3)), "Memset");
  }
  const SearchMatches copies = SearchMatches::Find(*model, [](std::string_view name) { return name == "Memcpy HtoD"; });
  EXPECT_EQ(copies.size(), 2u);
}

// The trainer's memory marks and a CUDA counter lane become two counter tracks of the rank
// ("nvtx" first); the marks stay marks on their thread; the counters widen the rank's extent.
TEST(TimelineModelLoad, MemoryMarksAndCounterLanesBecomeCounterTracks) {
  TempDir dir;
  TraceBuilder b(0, 1);
  b.Host("node").RunId("memory-run");
  const trace::LaneId thread = b.CpuThread("main");
  const trace::LaneId gpu = b.GpuStream(0);
  b.Kernel(gpu, "gemm", 1000, 2000);
  b.Mark(thread, "rankscope", "memory: parameters", 900, R"({"bytes": 4096})");
  b.Mark(thread, "rankscope", "memory: activations", 1200, R"({"bytes": 1024})");
  b.Counter("cuda memory: device (gpu 0)", 0, {{500, 8192.0}, {2500, 2048.0}});
  rankscope::testing::WriteRankTraceFile(b.Build(), dir / trace::RankFileName(0));
  const auto model = MustLoad(dir.path());
  ASSERT_NE(model, nullptr);
  const RankTimeline& rank = model->ranks()[0];
  ASSERT_EQ(rank.counters.size(), 2u);
  const CounterTrack& nvtx = rank.counters[0];
  EXPECT_EQ(nvtx.source, "nvtx");
  EXPECT_EQ(nvtx.categories, (std::vector<std::string>{"parameters", "activations"}));
  EXPECT_EQ(nvtx.total, (std::vector<int64_t>{4096, 5120}));
  const CounterTrack& cuda = rank.counters[1];
  EXPECT_EQ(cuda.label, "memory · cuda");
  EXPECT_EQ(cuda.categories, (std::vector<std::string>{"device (gpu 0)"}));
  EXPECT_EQ(cuda.ts, (std::vector<int64_t>{500, 2500}));
  EXPECT_EQ(cuda.peak, 8192);
  EXPECT_EQ(rank.first_ns, 500);
  EXPECT_EQ(rank.last_ns, 2500);
  EXPECT_EQ(model->end_ns() - model->start_ns(), 2000);
  // The counter lane has no events: no track of its own. The marks are on the thread.
  for (const Track& track : rank.tracks) EXPECT_NE(track.kind, trace::LaneKind::kCounter);
  EXPECT_TRUE(FindByName(*model, 0, "memory: parameters", 900).has_value());
}

TEST(TimelineModelLoad, ClassifyOptionsReachTheClassifier) {
  TempDir dir;
  WriteRun(dir);
  ModelLoadOptions options;
  options.classify.comm_patterns = {"GEMM"};  // case-insensitive substring
  const auto model = MustLoad(dir.path(), options);
  ASSERT_NE(model, nullptr);
  const auto gemm = FindByName(*model, 0, "gemm", 1000);
  ASSERT_TRUE(gemm.has_value());
  EXPECT_EQ(model->ClassOf(*gemm), EventClass::kComm);
}

TEST(TimelineModelLoad, OneRankFileAndProgress) {
  TempDir dir;
  WriteRun(dir);
  std::mutex mutex;
  std::vector<std::pair<int, int>> calls;
  ModelLoadOptions options;
  options.threads = 2;
  options.progress = [&](int done, int total) {
    std::lock_guard<std::mutex> lock(mutex);
    calls.emplace_back(done, total);
  };
  const auto whole = MustLoad(dir.path(), options);
  ASSERT_NE(whole, nullptr);
  ASSERT_FALSE(calls.empty());
  EXPECT_EQ(calls.back(), std::make_pair(2, 2));
  for (const auto& [done, total] : calls) {
    EXPECT_EQ(total, 2);
    EXPECT_LE(done, total);
  }

  const auto single = MustLoad(dir / trace::RankFileName(1));
  ASSERT_NE(single, nullptr);
  ASSERT_EQ(single->ranks().size(), 1u);
  EXPECT_EQ(single->ranks()[0].rank, 1);
  EXPECT_EQ(single->events(), 14u);
  EXPECT_EQ(single->start_ns(), 600);
  EXPECT_EQ(single->end_ns(), 5100);
}

TEST(TimelineModelLoad, MissingDirectoryIsAnErrorNamingIt) {
  TempDir dir;
  const std::filesystem::path missing = dir / "no-such-run";
  auto loaded = TimelineModel::Load(missing, {});
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.status().message().find("no-such-run"), std::string::npos) << loaded.status().message();
  EXPECT_EQ(loaded.status().message().find('\n'), std::string::npos) << "one line";
}

TEST(TimelineModelLoad, NonSqliteFileIsAnErrorNamingTheFile) {
  TempDir dir;
  const std::filesystem::path file = dir / "rank-0.sqlite";
  {
    std::ofstream out(file, std::ios::binary);
    for (int i = 0; i < 200; ++i) out << "this is not a database, just text\n";
  }
  auto from_dir = TimelineModel::Load(dir.path(), {});
  ASSERT_FALSE(from_dir.ok());
  EXPECT_NE(from_dir.status().message().find("rank-0.sqlite"), std::string::npos) << from_dir.status().message();
  auto from_file = TimelineModel::Load(file, {});
  ASSERT_FALSE(from_file.ok());
  EXPECT_NE(from_file.status().message().find("rank-0.sqlite"), std::string::npos) << from_file.status().message();
}

// Ids the file does not hold (-1, 987654321, 2^31, 2^63-1) in any id column the viewer
// reads: the model loads, without the damaged rows, says how many it skipped, and its
// queries run over what is left.
TEST(TimelineModelLoad, RowsWithIdsTheFileLacksAreSkippedAndCounted) {
  TempDir dir;
  const std::filesystem::path sound = dir / "sound.sqlite";
  rankscope::testing::WriteSoundRankFile(sound);
  for (const rankscope::testing::IdColumn& column : rankscope::testing::IdColumns()) {
    SCOPED_TRACE(std::string(column.table) + "." + column.column);
    const std::filesystem::path damaged = dir / "rank-0.sqlite";
    std::filesystem::copy_file(sound, damaged, std::filesystem::copy_options::overwrite_existing);
    rankscope::testing::DamageIdColumn(damaged, column);
    const auto model = MustLoad(damaged, ModelLoadOptions{.classify = {}, .threads = 1, .progress = {}});
    ASSERT_NE(model, nullptr);
    EXPECT_EQ(model->events(), static_cast<size_t>(rankscope::testing::kAllRows - 4));
    EXPECT_TRUE(std::any_of(model->warnings().begin(), model->warnings().end(), [](const std::string& warning) {
      return warning.find("4 damaged event(s)") != std::string::npos;
    }));
    const std::vector<EventRef> found =
        SearchMatches::Find(*model, [](std::string_view name) { return !name.empty(); }).All(*model);
    EXPECT_FALSE(found.empty());
    for (const EventRef& ref : found) EXPECT_FALSE(model->Name(ref).empty());
    EXPECT_FALSE(MeasureDisplayRange(*model, model->start_ns(), model->end_ns(), 10).empty());
  }
}

}  // namespace
}  // namespace rankscope::gui
