// The older PyTorch profiler format (PyTorch without Kineto, e.g. Debian's python3-torch 1.13):
// real traces from tests/interop/data/torch_legacy/ (its README says what the format is), and
// small hand-written ones for what those do not show. Also: ranks from file names, op args
// that size data, and the TensorBoard plugin's Gloo workers (bare arrays with "cat").
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "interop/interop.h"
#include "tests/golden.h"
#include "tests/interop/import_test_util.h"
#include "tests/shared_data.h"
#include "tests/temp_dir.h"
#include "trace/reader.h"

namespace rankscope::interop {
namespace {

namespace fs = std::filesystem;
using rankscope::testing::GoldenPath;
using rankscope::testing::TempDir;
using testing::AllNotes;
using testing::HasNote;
using testing::Load;
using testing::WriteText;
using testing::ImportOk;

const fs::path kLegacy = GoldenPath("tests/interop/data/torch_legacy");

const trace::NvtxRangeEvent* RangeNamed(const trace::RankTrace& rank, const std::string& name) {
  for (const trace::NvtxRangeEvent& range : rank.events.nvtx_ranges) {
    if (rank.str(range.name) == name) return &range;
  }
  return nullptr;
}

const trace::Lane* LaneOf(const trace::RankTrace& rank, trace::LaneId id) {
  for (const trace::Lane& lane : rank.lanes) {
    if (lane.id == id) return &lane;
  }
  return nullptr;
}

std::string Meta(const trace::RankTrace& rank, const std::string& key) {
  auto it = rank.meta.entries.find(key);
  return it == rank.meta.entries.end() ? "<absent>" : it->second;
}

// ---- the real traces ------------------------------------------------------------------------

TEST(TorchProfilerLegacy, DetectedByItsFirstEvent) {
  const Result<TraceFormat> plain = DetectTraceFormat(kLegacy / "cpu_single.json");
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_EQ(*plain, TraceFormat::kTorchProfilerLegacyJson);
  const Result<TraceFormat> gzipped = DetectTraceFormat(kLegacy / "ddp_gloo_rank0.json.gz");
  ASSERT_TRUE(gzipped.ok()) << gzipped.status().message();
  EXPECT_EQ(*gzipped, TraceFormat::kTorchProfilerLegacyJson);
  // A bare array of Kineto events ("cat" present) stays Kineto.
  TempDir dir;
  WriteText(dir / "kineto.json", R"([{"ph": "X", "cat": "cpu_op", "name": "a", "pid": "CPU functions", "tid": 1,
                                      "ts": 0, "dur": 1}])");
  const Result<TraceFormat> kineto = DetectTraceFormat(dir / "kineto.json");
  ASSERT_TRUE(kineto.ok()) << kineto.status().message();
  EXPECT_EQ(*kineto, TraceFormat::kKinetoJson);
}

// One process, 4 steps of a Linear(4, 2) under schedule(wait=1, warmup=1, active=2): every
// CPU function becomes a range on its thread's lane, at its time from the profiler's start.
TEST(TorchProfilerLegacy, EveryCpuFunctionBecomesARangeFromTheProfilersStart) {
  TempDir dir;
  const ImportResult imported = ImportOk({kLegacy / "cpu_single.json"}, dir / "run");
  ASSERT_EQ(imported.rank_files.size(), 1u);
  EXPECT_EQ(imported.events, 110u);  // every event of the file
  EXPECT_TRUE(HasNote(imported, "cpu_single.json': the older PyTorch profiler format (PyTorch without Kineto): 110 "
                                "CPU functions imported as ranges (cpu_op; ProfilerStep#N as user_annotation); the "
                                "file holds no clock and its times count from the profiler's start, so the rank "
                                "starts at 0 ns: ranks line up at their profilers' starts"))
      << AllNotes(imported);
  EXPECT_FALSE(HasNote(imported, "left out")) << AllNotes(imported);

  const trace::RankTrace rank = Load(imported.rank_files[0]);
  EXPECT_EQ(Meta(rank, "import.format"), "pytorch-profiler-without-kineto");
  EXPECT_EQ(Meta(rank, "import.time_origin"), "the profiler's start (the file holds no clock)");
  EXPECT_EQ(Meta(rank, "pid"), "0");  // the file has none
  ASSERT_EQ(rank.events.nvtx_ranges.size(), 110u);
  ASSERT_EQ(rank.lanes.size(), 1u);
  EXPECT_EQ(rank.lanes[0].kind, trace::LaneKind::kCpuThread);
  EXPECT_EQ(rank.lanes[0].tid, 1);
  EXPECT_EQ(rank.lanes[0].name, "CPU functions (thread 1)");

  int steps = 0;
  for (const trace::NvtxRangeEvent& range : rank.events.nvtx_ranges) {
    const std::string name = rank.str(range.name);
    EXPECT_EQ(range.style, trace::NvtxRangeStyle::kPushPop);
    EXPECT_EQ(rank.str(range.domain), name.starts_with("ProfilerStep#") ? "user_annotation" : "cpu_op") << name;
    EXPECT_EQ(range.args, trace::kEmptyString) << name;  // the format's args are always {}
    EXPECT_EQ(range.start_ns % 1000, 0) << name;         // whole microseconds
    EXPECT_LT(range.start_ns, 1'000'000'000) << name;    // from the profiler's start: well under a second
    steps += name.starts_with("ProfilerStep#");
  }
  EXPECT_EQ(steps, 2);
  const trace::NvtxRangeEvent* step1 = RangeNamed(rank, "ProfilerStep#1");
  const trace::NvtxRangeEvent* step2 = RangeNamed(rank, "ProfilerStep#2");
  ASSERT_NE(step1, nullptr);
  ASSERT_NE(step2, nullptr);
  EXPECT_LE(step1->end_ns, step2->start_ns);
  // The step holds its ops: the first addmm lies inside step 1.
  const trace::NvtxRangeEvent* addmm = RangeNamed(rank, "aten::addmm");
  ASSERT_NE(addmm, nullptr);
  EXPECT_GE(addmm->start_ns, step1->start_ns);
  EXPECT_LE(addmm->end_ns, step1->end_ns);
}

// 2 ranks of DDP over Gloo: ranks from the file names, all-reduces on Gloo's own threads.
TEST(TorchProfilerLegacy, DdpOverGlooRanksFromTheirFileNames) {
  TempDir dir;
  const ImportResult imported =
      ImportOk({kLegacy / "ddp_gloo_rank1.json.gz", kLegacy / "ddp_gloo_rank0.json.gz"}, dir / "run");
  ASSERT_EQ(imported.rank_files.size(), 2u) << AllNotes(imported);
  EXPECT_TRUE(HasNote(imported, "ddp_gloo_rank1.json.gz': no rank recorded; imported as rank 1, from its file name"))
      << AllNotes(imported);
  EXPECT_TRUE(HasNote(imported, "2 of the traces record no world size; taken as 2")) << AllNotes(imported);
  for (int r = 0; r < 2; ++r) {
    const trace::RankTrace rank = Load(imported.rank_files[static_cast<size_t>(r)]);
    EXPECT_EQ(rank.meta.rank, r);
    EXPECT_EQ(rank.meta.world_size, 2);
    EXPECT_EQ(Meta(rank, "import.rank_source"), "file name");
    int all_reduces = 0;
    for (const trace::NvtxRangeEvent& range : rank.events.nvtx_ranges) {
      if (rank.str(range.name) != "gloo:all_reduce") continue;
      ++all_reduces;
      EXPECT_EQ(rank.str(range.domain), "cpu_op");
      const trace::Lane* lane = LaneOf(rank, range.lane);
      ASSERT_NE(lane, nullptr);
      EXPECT_NE(lane->tid, 1);  // a Gloo thread, not the one that started the profiler
    }
    // One per recorded step, but rank 1's profiler stopped before its Gloo thread recorded the
    // second: the file holds only the first.
    EXPECT_EQ(all_reduces, r == 0 ? 2 : 1) << "rank " << r;
    EXPECT_NE(RangeNamed(rank, "c10d::allreduce_"), nullptr);
    EXPECT_NE(RangeNamed(rank, "DistributedDataParallel.forward"), nullptr);
  }
}

// ---- what the real traces do not show --------------------------------------------------------

TEST(TorchProfilerLegacy, RemoteCallsAndOtherPhasesAreLeftOutWithANote) {
  TempDir dir;
  WriteText(dir / "rpc.json", R"([
    {"name": "aten::add", "ph": "X", "ts": 5, "dur": 3, "tid": 1, "pid": "CPU functions", "args": {}},
    {"name": "aten::mul", "ph": "X", "ts": 6, "dur": 1, "tid": " node_id:1, thread_id:7 ", "pid": "CPU functions",
     "args": {}},
    {"name": "aten::add", "ph": "s", "ts": 5, "tid": 1, "pid": "CPU functions", "id": 0, "cat": "cpu_to_cuda",
     "args": {}},
    {"name": "aten::sub", "ph": "X", "dur": 1, "tid": 1, "pid": "CPU functions", "args": {}}])");
  const ImportResult imported = ImportOk({dir / "rpc.json"}, dir / "run");
  EXPECT_EQ(imported.events, 1u);
  EXPECT_TRUE(HasNote(imported, "rpc.json': left out 2 events of kinds rankscope does not import ('(CPU functions of "
                                "remote RPC calls)' 1, 'cpu_to_cuda' 1)"))
      << AllNotes(imported);
  EXPECT_TRUE(HasNote(imported, "rpc.json': left out 1 event without a valid ts/dur (first: traceEvents[3] (event "
                                "'aten::sub'): no ts)"))
      << AllNotes(imported);
  const trace::RankTrace rank = Load(imported.rank_files.at(0));
  ASSERT_EQ(rank.events.nvtx_ranges.size(), 1u);
  EXPECT_EQ(rank.events.nvtx_ranges[0].start_ns, 5000);
  EXPECT_EQ(rank.events.nvtx_ranges[0].end_ns, 8000);
}

// The ones the analyzer sizes collectives from ("Input Dims", "Input type", record_param_comms'
// message sizes) are kept, as compact JSON in the order of kSizeArgKeys; the rest is not.
TEST(TorchProfilerLegacy, OpArgsKeepWhatSizesTheData) {
  TempDir dir;
  WriteText(dir / "args.json", R"({"distributedInfo": {"rank": 0, "world_size": 2}, "traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1, "ts": 1, "dur": 5,
     "args": {"External id": 9, "Collective name": "allreduce", "dtype": "Float", "In msg nelems": 1024,
              "Out msg nelems": 1024, "Group size": 2, "In split size": "[]", "Out split size": "[]", "Seq": 3}},
    {"ph": "X", "cat": "cpu_op", "name": "gloo:all_reduce", "pid": 1, "tid": 2, "ts": 2, "dur": 3,
     "args": {"Input type": [ "float" ], "External id": 10, "Input Dims": [ [ 1024 ] ]}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 7, "dur": 1,
     "args": {"External id": 11, "Ev Idx": 4}}]})");
  const ImportResult imported = ImportOk({dir / "args.json"}, dir / "run");
  const trace::RankTrace rank = Load(imported.rank_files.at(0));
  const trace::NvtxRangeEvent* comms = RangeNamed(rank, "record_param_comms");
  const trace::NvtxRangeEvent* gloo = RangeNamed(rank, "gloo:all_reduce");
  const trace::NvtxRangeEvent* add = RangeNamed(rank, "aten::add");
  ASSERT_TRUE(comms && gloo && add);
  EXPECT_EQ(rank.str(comms->args),
            R"({"Collective name":"allreduce","dtype":"Float","In msg nelems":1024,"Out msg nelems":1024,)"
            R"("In split size":"[]","Out split size":"[]","Group size":2})");
  EXPECT_EQ(rank.str(gloo->args), R"({"Input Dims":[[1024]],"Input type":["float"]})");
  EXPECT_EQ(add->args, trace::kEmptyString);
  EXPECT_EQ(comms->correlation_id, 9u);  // External id still joins the op to its launches
}

// ---- ranks from file names --------------------------------------------------------------------

struct NamedRank {
  const char* file;
  int rank;  // -1: the name says none
};

class RankFromFileNameTest : public ::testing::TestWithParam<NamedRank> {};

TEST_P(RankFromFileNameTest, TakenWhereTheTraceRecordsNone) {
  const NamedRank& named = GetParam();
  TempDir dir;
  WriteText(dir / named.file,
            R"([{"name": "aten::add", "ph": "X", "ts": 1, "dur": 1, "tid": 1, "pid": "CPU functions", "args": {}}])");
  const ImportResult imported = ImportOk({dir / named.file}, dir / "run");
  ASSERT_EQ(imported.rank_files.size(), 1u);
  const int expected = named.rank < 0 ? 0 : named.rank;
  EXPECT_EQ(Load(imported.rank_files[0]).meta.rank, expected);
  EXPECT_EQ(HasNote(imported, "from its file name"), named.rank >= 0) << AllNotes(imported);
}

INSTANTIATE_TEST_SUITE_P(Names, RankFromFileNameTest,
                         ::testing::Values(NamedRank{"ddp_rank3.json", 3}, NamedRank{"trace-rank_12.pt.trace.json", 12},
                                           NamedRank{"rank-2.json", 2}, NamedRank{"gloo_cpu_worker1.json", 1},
                                           NamedRank{"rank5_step9.json", 5}, NamedRank{"myrank4.json", -1},
                                           NamedRank{"ranking4.json", -1}, NamedRank{"rank4x.json", -1},
                                           NamedRank{"profile.json", -1}),
                         [](const ::testing::TestParamInfo<NamedRank>& param) {
                           std::string name = param.param.file;
                           std::replace_if(name.begin(), name.end(), [](char c) { return !std::isalnum(c); }, '_');
                           return name;
                         });

// distributedInfo wins over the name; a name's rank that another input holds is not taken.
TEST(RankFromFileName, RecordedRanksAndTakenRanksComeFirst) {
  TempDir dir;
  WriteText(dir / "a_rank0.json", R"({"distributedInfo": {"rank": 1, "world_size": 2}, "traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "x", "pid": 1, "tid": 1, "ts": 1, "dur": 1}]})");
  WriteText(dir / "b_rank1.json", R"([{"ph": "X", "cat": "cpu_op", "name": "y", "pid": 1, "tid": 1, "ts": 1,
                                      "dur": 1}])");
  const ImportResult imported = ImportOk({dir / "a_rank0.json", dir / "b_rank1.json"}, dir / "run");
  ASSERT_EQ(imported.rank_files.size(), 2u);
  EXPECT_TRUE(HasNote(imported, "b_rank1.json': no rank recorded; imported as rank 0")) << AllNotes(imported);
  EXPECT_FALSE(HasNote(imported, "from its file name")) << AllNotes(imported);
  const trace::RankTrace rank0 = Load(imported.rank_files[0]);
  EXPECT_EQ(rank0.str(rank0.events.nvtx_ranges.at(0).name), "y");
}

// ---- the TensorBoard plugin's Gloo workers: bare arrays with "cat" -----------------------------

TEST(TensorBoardPluginGloo, WorkersImportWithRanksFromTheirNamesAndTheirSizes) {
  const fs::path folder = rankscope::testing::SharedDataDir() / "kineto" / "tb_plugin_distributed";
  const fs::path worker0 = folder / "test_distributed_gloo_cpu_worker0.json";
  const fs::path worker1 = folder / "test_distributed_gloo_cpu_worker1.json";
  RANKSCOPE_REQUIRE_SHARED_DATA(worker0);
  RANKSCOPE_REQUIRE_SHARED_DATA(worker1);
  const Result<TraceFormat> format = DetectTraceFormat(worker0);
  ASSERT_TRUE(format.ok()) << format.status().message();
  EXPECT_EQ(*format, TraceFormat::kKinetoJson);
  TempDir dir;
  const ImportResult imported = ImportOk({worker1, worker0}, dir / "run");
  ASSERT_EQ(imported.rank_files.size(), 2u) << AllNotes(imported);
  EXPECT_FALSE(HasNote(imported, "left out")) << AllNotes(imported);
  for (int r = 0; r < 2; ++r) {
    const trace::RankTrace rank = Load(imported.rank_files[static_cast<size_t>(r)]);
    EXPECT_EQ(rank.meta.rank, r);
    int broadcasts = 0;
    for (const trace::NvtxRangeEvent& range : rank.events.nvtx_ranges) {
      if (rank.str(range.name) != "gloo:broadcast") continue;
      ++broadcasts;
      EXPECT_EQ(rank.str(range.domain), "cpu_op");
      EXPECT_EQ(rank.str(range.args), R"({"Input Dims":[[53120]],"Input type":["float"]})");
    }
    EXPECT_GT(broadcasts, 0) << "rank " << r;
  }
}

}  // namespace
}  // namespace rankscope::interop
