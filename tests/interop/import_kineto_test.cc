// The Kineto (PyTorch profiler) JSON importer (interop/import_kineto.cc): the real traces in
// ../shared/data/kineto/ against the independent reference values of ../shared/data/README.md,
// the old-format TensorBoard-plugin fixtures, a hand-written trace with every category for
// exact rows, every kind of damaged structure (which fails) and of damaged event (which is
// left out and noted); the stored inputs are in tests/interop/data/kineto/, which also seeds
// the fuzzer.
#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "analyzer/analyze.h"
#include "interop/import_internal.h"
#include "interop/interop.h"
#include "tests/interop/import_test_util.h"
#include "tests/shared_data.h"
#include "tests/temp_dir.h"
#include "trace/reader.h"

namespace rankscope::interop {

using analyzer::AnalyzeOptions;
using analyzer::AnalyzeRun;
using analyzer::Breakdown;
using analyzer::DeviceReport;
using analyzer::Report;
namespace {

using testing::AllNotes;
using testing::Gzip;
using testing::HasNote;
using testing::Load;
using testing::WriteText;
using testing::ImportOk;

namespace fs = std::filesystem;
using rankscope::testing::TempDir;

const fs::path kSourceDir = RANKSCOPE_SOURCE_DIR;
const fs::path kKineto = rankscope::testing::SharedDataDir() / "kineto";
const fs::path kTbPlugin = kKineto / "tb_plugin_distributed";
const fs::path kBadSeeds = kSourceDir / "tests" / "interop" / "data" / "kineto";

// ---- helpers -----------------------------------------------------------------------------




// Through the importer itself, past format detection (which turns non-traces away first).
Result<ImportResult> ImportDirect(const std::vector<fs::path>& inputs, const fs::path& run) {
  fs::create_directories(run);
  import::RunSink sink(run, "kineto-test-run");
  for (const fs::path& input : inputs) {
    Status status = import::ImportKineto(input, sink);
    if (!status.ok()) return status;
  }
  ImportResult result;
  Status finished = sink.Finish(&result);
  if (!finished.ok()) return finished;
  return result;
}


bool HasRankFiles(const fs::path& run) {
  std::error_code ec;
  for (fs::directory_iterator it(run, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().filename().string().starts_with("rank-")) return true;
  }
  return false;
}

const trace::Lane* FindLane(const trace::RankTrace& rank, trace::LaneKind kind, int64_t a, int64_t b) {
  for (const trace::Lane& lane : rank.lanes) {
    if (lane.kind != kind) continue;
    const bool gpu_match = lane.device == a && lane.stream == static_cast<uint64_t>(b);
    if (kind == trace::LaneKind::kGpuStream && gpu_match) return &lane;
    if (kind == trace::LaneKind::kCpuThread && lane.pid == a && lane.tid == b) return &lane;
  }
  return nullptr;
}

trace::LaneId GpuLaneId(const trace::RankTrace& rank, int device, uint64_t stream) {
  const trace::Lane* lane = FindLane(rank, trace::LaneKind::kGpuStream, device, static_cast<int64_t>(stream));
  return lane != nullptr ? lane->id : trace::kNoLane;
}

trace::LaneId CpuLaneId(const trace::RankTrace& rank, int64_t pid, int64_t tid) {
  const trace::Lane* lane = FindLane(rank, trace::LaneKind::kCpuThread, pid, tid);
  return lane != nullptr ? lane->id : trace::kNoLane;
}

// The one row of `table` named `name`; nullptr (and a failure) when there is not exactly one.
template <typename Event>
const Event* Named(const trace::RankTrace& rank, const std::vector<Event>& table, const std::string& name) {
  const Event* found = nullptr;
  int count = 0;
  for (const Event& event : table) {
    if (rank.str(event.name) == name) {
      found = &event;
      ++count;
    }
  }
  EXPECT_EQ(count, 1) << "rows named '" << name << "'";
  return count == 1 ? found : nullptr;
}

// ---- reference values (../shared/data/README.md) ------------------------------------------------

struct Reference {
  const char* file;
  int rank;
  int device;
  int64_t window_ns, compute_ns, comm_ns, overlap_ns;
  double overlap_pct, comm_compute_ratio, utilization_pct;
};

constexpr Reference kReferences[] = {
    {"hta_trace_filter/sampled_rank-0.json.gz", 0, 0, 1222846928, 210320000, 396199000, 59216008, 14.95, 1.883791,
     44.79},
    {"hta_trace_filter/sampled_rank-1.json.gz", 1, 1, 1231185896, 271973000, 379053000, 75530344, 19.93, 1.393716,
     47.11},
    {"hta_trace_diff/control_rank3.json.gz", 3, 3, 464594104, 281335288, 163535000, 75613680, 46.24, 0.581282, 83.64},
    {"hta_trace_diff/test_rank1.json.gz", 1, 1, 745238992, 548113704, 251341000, 178036656, 70.83, 0.458556, 96.33},
};

// Times within 0.01% of the table; the ratio too (relative); percentages within ±0.05 points.
void ExpectWithin(double ours, double reference, double relative, const char* what, const char* file) {
  EXPECT_LE(std::fabs(ours - reference), std::fabs(reference) * relative)
      << file << ": " << what << " " << ours << " vs reference " << reference;
}

class KinetoReferenceTest : public ::testing::TestWithParam<Reference> {};

TEST_P(KinetoReferenceTest, WholeTraceTotalsMatchTheReference) {
  RANKSCOPE_REQUIRE_SHARED_DATA(kKineto);
  const Reference& ref = GetParam();
  TempDir dir;
  const ImportResult imported = ImportOk({kKineto / ref.file}, dir / "run");
  ASSERT_EQ(imported.rank_files.size(), 1u);
  EXPECT_EQ(imported.rank_files[0].filename(), "rank-" + std::to_string(ref.rank) + ".sqlite");

  Result<Report> report = AnalyzeRun(dir / "run", AnalyzeOptions{});
  ASSERT_TRUE(report.ok()) << report.status().message();
  const DeviceReport* device = nullptr;
  for (const DeviceReport& d : report->ranks) {
    if (d.rank == ref.rank && d.device == ref.device) device = &d;
  }
  ASSERT_NE(device, nullptr) << ref.file << ": no report for rank " << ref.rank << " device " << ref.device;
  const Breakdown& t = device->totals;
  ExpectWithin(static_cast<double>(t.window_ns), static_cast<double>(ref.window_ns), 1e-4, "window ns", ref.file);
  ExpectWithin(static_cast<double>(t.compute_ns), static_cast<double>(ref.compute_ns), 1e-4, "compute ns", ref.file);
  ExpectWithin(static_cast<double>(t.comm_ns), static_cast<double>(ref.comm_ns), 1e-4, "comm ns", ref.file);
  ExpectWithin(static_cast<double>(t.overlap_ns), static_cast<double>(ref.overlap_ns), 1e-4, "overlap ns", ref.file);
  ASSERT_TRUE(t.comm_compute_ratio.has_value());
  ExpectWithin(*t.comm_compute_ratio, ref.comm_compute_ratio, 1e-4, "comm/compute", ref.file);
  EXPECT_NEAR(t.overlap_pct, ref.overlap_pct, 0.05) << ref.file << ": overlap %";
  EXPECT_NEAR(t.utilization_pct, ref.utilization_pct, 0.05) << ref.file << ": utilization %";
}

INSTANTIATE_TEST_SUITE_P(RealTraces, KinetoReferenceTest, ::testing::ValuesIn(kReferences),
                         [](const ::testing::TestParamInfo<Reference>& param) {
                           std::string name = fs::path(param.param.file).filename().string();
                           name = name.substr(0, name.find('.'));
                           std::replace_if(name.begin(), name.end(), [](char c) { return !std::isalnum(c); }, '_');
                           return name;
                         });

// Rows and identity of a real trace. The counts are those of python3's json.load of the file
// (events per category), not the importer's.
TEST(KinetoImportTest, RealTraceRowsAndIdentity) {
  RANKSCOPE_REQUIRE_SHARED_DATA(kKineto);
  TempDir dir;
  const ImportResult imported = ImportOk({kKineto / "hta_trace_filter" / "sampled_rank-0.json.gz"}, dir / "run");
  ASSERT_EQ(imported.rank_files.size(), 1u);
  const trace::RankTrace rank = Load(imported.rank_files[0]);
  EXPECT_EQ(rank.meta.rank, 0);
  EXPECT_EQ(rank.meta.world_size, 128);
  EXPECT_EQ(rank.meta.backend, "nccl");
  EXPECT_EQ(rank.meta.pid, 4037);
  EXPECT_EQ(rank.events.kernels.size(), 1154u);
  EXPECT_EQ(rank.events.api_calls.size(), 1204u);
  EXPECT_EQ(rank.events.memcpys.size(), 40u);
  EXPECT_EQ(rank.events.memsets.size(), 10u);
  EXPECT_EQ(rank.events.nvtx_ranges.size(), 2329u + 73u);
  // The profiler's span ("Trace") is the one event left out, and said so.
  EXPECT_TRUE(HasNote(imported, "left out 1 event of kinds rankscope does not import ('Trace' 1)"))
      << AllNotes(imported);
  // Kernels sit on their streams of device 0, named as the trace names them.
  const trace::Lane* stream7 = FindLane(rank, trace::LaneKind::kGpuStream, 0, 7);
  ASSERT_NE(stream7, nullptr);
  EXPECT_EQ(stream7->name, "stream 7");
  EXPECT_EQ(stream7->context, 1u);
  const trace::Lane* thread = FindLane(rank, trace::LaneKind::kCpuThread, 4037, 23695);
  ASSERT_NE(thread, nullptr);
  EXPECT_EQ(thread->name, "thread 23695 (python3.8)");
  for (const trace::KernelEvent& k : rank.events.kernels) {
    const trace::Lane* lane = rank.lane(k.lane);
    ASSERT_NE(lane, nullptr);
    EXPECT_EQ(lane->kind, trace::LaneKind::kGpuStream);
    EXPECT_EQ(lane->device, 0);
  }
  // The first kernel of the file, exactly: ts 1682725898082228 µs, dur 10 µs.
  const trace::KernelEvent* first = nullptr;
  for (const trace::KernelEvent& k : rank.events.kernels) {
    if (k.correlation_id == 6935929) first = &k;
  }
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->start_ns, 1682725898082228000);
  EXPECT_EQ(first->end_ns, 1682725898082238000);
  EXPECT_EQ(rank.str(first->name),
            "void fbgemm_gpu::permute_2D_lengths_kernel<int>(int, int, int const*, int const*, int*)");
  EXPECT_EQ(first->grid, (trace::Dim3{2400, 1, 1}));
  EXPECT_EQ(first->block, (trace::Dim3{256, 1, 1}));
  EXPECT_EQ(first->registers_per_thread, 27u);
  EXPECT_EQ(rank.lane(first->lane)->stream, 23u);
}

// ---- the TensorBoard plugin's old-format fixtures -------------------------------------------------

// Bare event arrays, "cat": "Kernel", "tid": "stream 16", string thread ids, no
// distributedInfo: each imports, with its kernels on the stream its tid names.
TEST(KinetoImportTest, OldFormatFixturesImport) {
  RANKSCOPE_REQUIRE_SHARED_DATA(kKineto);
  TempDir dir;
  Result<ImportResult> imported = ImportTraces(
      {kTbPlugin / "test_distributed_nccl_worker0.json", kTbPlugin / "test_distributed_nccl_worker1.json"},
      dir / "run");
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  ASSERT_EQ(imported->rank_files.size(), 2u);
  EXPECT_TRUE(HasNote(*imported, "test_distributed_nccl_worker0.json': no rank recorded; imported as rank 0"))
      << AllNotes(*imported);
  EXPECT_TRUE(HasNote(*imported, "test_distributed_nccl_worker1.json': no rank recorded; imported as rank 1"))
      << AllNotes(*imported);

  const trace::RankTrace worker0 = Load(imported->rank_files[0]);
  EXPECT_EQ(worker0.meta.rank, 0);
  EXPECT_EQ(worker0.meta.world_size, 2);  // the ranks imported
  EXPECT_EQ(worker0.meta.pid, 23803);
  ASSERT_EQ(worker0.events.kernels.size(), 3u);
  const trace::LaneId stream16 = GpuLaneId(worker0, 0, 16);
  const trace::LaneId stream7 = GpuLaneId(worker0, 0, 7);
  ASSERT_NE(stream16, trace::kNoLane);
  ASSERT_NE(stream7, trace::kNoLane);
  EXPECT_EQ(worker0.lane(stream16)->name, "stream 16");
  const auto& kernels = worker0.events.kernels;
  const auto* broadcast = Named(worker0, kernels, "ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclWorkElem)");
  const auto* all_reduce = Named(worker0, kernels, "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)");
  const auto* add = Named(worker0, worker0.events.kernels, "void at::native::vectorized_elementwise_kernel");
  ASSERT_TRUE(broadcast != nullptr && all_reduce != nullptr && add != nullptr);
  EXPECT_EQ(broadcast->lane, stream16);
  EXPECT_EQ(all_reduce->lane, stream16);
  EXPECT_EQ(add->lane, stream7);
  EXPECT_EQ(broadcast->correlation_id, 28506u);
  EXPECT_EQ(broadcast->start_ns, 16000);  // ts 16 µs, no baseTimeNanoseconds
  EXPECT_EQ(broadcast->end_ns, 32000);
  // cpu_op ranges on their threads, whose ids the old format writes as strings.
  ASSERT_EQ(worker0.events.nvtx_ranges.size(), 3u);
  const auto* nccl_all_reduce = Named(worker0, worker0.events.nvtx_ranges, "nccl:all_reduce");
  ASSERT_NE(nccl_all_reduce, nullptr);
  EXPECT_EQ(nccl_all_reduce->lane, CpuLaneId(worker0, 23803, 25166));
  EXPECT_EQ(worker0.str(nccl_all_reduce->domain), "cpu_op");

  const trace::RankTrace worker1 = Load(imported->rank_files[1]);
  EXPECT_EQ(worker1.meta.rank, 1);
  EXPECT_EQ(worker1.events.kernels.size(), 3u);

  for (const char* fixture : {"test_distributed_gloo_gpu_worker0.json", "test_distributed_gloo_gpu_worker1.json",
                              "test_distributed_gloo_cpu_worker0.json",
                              "test_distributed_nccl_user_annotation_has_communication_worker0.json"}) {
    TempDir other;
    Result<ImportResult> one = ImportTraces({kTbPlugin / fixture}, other / "run");
    ASSERT_TRUE(one.ok()) << fixture << ": " << one.status().message();
    const trace::RankTrace rank = Load(one->rank_files.at(0));
    const bool gpu = std::string(fixture).find("gloo_gpu") != std::string::npos;
    EXPECT_EQ(rank.events.kernels.size(), gpu ? 1u : 0u) << fixture;
    if (gpu) {
      EXPECT_EQ(rank.events.kernels[0].lane, GpuLaneId(rank, 0, 7)) << fixture;
    }
    EXPECT_FALSE(rank.events.nvtx_ranges.empty()) << fixture;
  }
}

// ---- a hand-written trace with every category ------------------------------------------------------

constexpr int64_t kBase = 1'700'000'000'000'000'000;  // baseTimeNanoseconds
constexpr int64_t kPid = 4242;

// Top-level fields in an unusual order: distributedInfo and baseTimeNanoseconds after the
// events (as newer PyTorch writes baseTimeNanoseconds), thread names at the end of the array.
const char* const kEveryCategory = R"json({
  "schemaVersion": 1,
  "deviceProperties": [{"id": 1, "name": "NVIDIA H100", "totalGlobalMem": 85000000000}],
  "traceEvents": [
  {"ph": "M", "name": "process_name", "pid": 4242, "tid": 0, "args": {"name": "python3"}},
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#5", "pid": 4242, "tid": 4242, "ts": 1000.000,
   "dur": 500.000,
   "args": {"External id": 1, "Trace name": "PyTorch Profiler"}},
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#6", "pid": 4242, "tid": 4242, "ts": 1500.000,
   "dur": 400.250,
   "args": {"External id": 2}},
  {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 4242, "tid": 4242, "ts": 1010.5, "dur": 20.125,
   "args": {"External id": 10, "Input Dims": [[2, 3], [3, 4]], "Input type": ["float", "float"]}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 4242, "tid": 4242, "ts": 1012.001, "dur": 5.002,
   "args": {"External id": 10, "cbid": 211, "correlation": 100}},
  {"args": {"External id": 10, "queued": 0, "device": 1, "context": 1, "stream": 7, "correlation": 100,
            "registers per thread": 96, "shared memory": 49152, "blocks per SM": 0.5, "warps per SM": 2.0,
            "grid": [64, 2, 1], "block": [128, 1, 1], "est. achieved occupancy %": 4},
   "dur": 30.877, "ts": 1020.123, "tid": 7, "pid": 1, "name": "void gemm_kernel<float>(float*)", "cat": "kernel",
   "ph": "X"},
  {"ph": "s", "id": 100, "pid": 4242, "tid": 4242, "ts": 1012.001, "cat": "ac2g", "name": "ac2g"},
  {"ph": "f", "id": 100, "pid": 1, "tid": 7, "ts": 1020.123, "cat": "ac2g", "name": "ac2g", "bp": "e"},
  {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)", "pid": 1, "tid": 20,
   "ts": 1040.000, "dur": 100.000, "args": {"device": 1, "context": 1, "stream": 20, "correlation": 101,
   "grid": [2, 1, 1], "block": [512, 1, 1]}},
  {"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernel", "pid": 4242, "tid": 4250, "ts": 1100.000, "dur": 3.000,
   "args": {"cbid": 307, "correlation": 102}},
  {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> Device)", "pid": 1, "tid": 7, "ts": 1200.000,
   "dur": 10.000, "args": {"device": 1, "context": 1, "stream": 7, "correlation": 103, "bytes": 4096,
   "memory bandwidth (GB/s)": 0.4096}},
  {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy PtoP (Device -> Device)", "pid": 1, "tid": 7, "ts": 1215.000,
   "dur": 5.000, "args": {"fromDevice": 0, "inDevice": 1, "toDevice": 1, "fromContext": 2, "inContext": 1,
   "toContext": 1, "stream": 7, "correlation": 104, "bytes": 1024}},
  {"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "pid": 1, "tid": 7, "ts": 1230.000, "dur": 1.500,
   "args": {"device": 1, "context": 1, "stream": 7, "correlation": 105, "bytes": 8}},
  {"ph": "X", "cat": "cuda_sync", "name": "Stream Sync", "pid": 1, "tid": 7, "ts": 1300.000, "dur": 2.000,
   "args": {"cuda_sync_kind": "Stream Sync", "stream": 7, "correlation": 106, "device": 1, "context": 1}},
  {"ph": "X", "cat": "cuda_sync", "name": "Event Sync", "pid": 1, "tid": 7, "ts": 1310.000, "dur": 1.000,
   "args": {"cuda_sync_kind": "Event Sync", "wait_on_stream": 20, "wait_on_cuda_event_id": 55, "stream": 7,
   "correlation": 107, "device": 1, "context": 1}},
  {"ph": "X", "cat": "cuda_sync", "name": "Stream Wait Event", "pid": 1, "tid": 7, "ts": 1320.000, "dur": 0.500,
   "args": {"cuda_sync_kind": "Stream Wait Event", "wait_on_stream": 20, "wait_on_cuda_event_id": 56, "stream": 7,
   "correlation": 108, "device": 1, "context": 1}},
  {"ph": "X", "cat": "cuda_sync", "name": "Context Sync", "pid": 1, "tid": -1, "ts": 1330.000, "dur": 4.000,
   "args": {"cuda_sync_kind": "Context Sync", "stream": 4294967295, "correlation": 109, "device": 1, "context": 1}},
  {"ph": "X", "cat": "python_function", "name": "train.py(10): step", "pid": 4242, "tid": 4242, "ts": 1001.000,
   "dur": 490.000, "args": {"Python id": 3}},
  {"ph": "X", "cat": "gpu_user_annotation", "name": "## forward ##", "pid": 1, "tid": 7, "ts": 1020.123,
   "dur": 200.000, "args": {"External id": 1, "device": 1, "stream": 7}},
  {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 4242, "tid": 4250, "ts": 1400.000,
   "args": {"Device Type": 1, "Device Id": 1, "Addr": 139900000000000, "Bytes": 512, "Total Allocated": 512,
            "Total Reserved": 2097152}},
  {"name": "Iteration Start: PyTorch Profiler", "ph": "i", "s": "g", "pid": "Traces", "tid": "Trace PyTorch Profiler",
   "ts": 1000.000},
  {"ph": "X", "cat": "Trace", "ts": 999.000, "dur": 1000.000, "pid": "Spans", "tid": "PyTorch Profiler",
   "name": "PyTorch Profiler (0)", "args": {"Op count": 0}},
  {"ph": "C", "name": "memory", "pid": 4242, "ts": 1000.0, "args": {"allocated": 1}},
  {"ph": "X", "cat": "kernel", "name": "elementwise \"add\"", "pid": 1, "tid": 7, "ts": 1600.0005, "dur": 1.5e1,
   "args": {"device": 1, "context": 1, "stream": 7, "correlation": 110}},
  {"ph": "M", "name": "thread_name", "pid": 4242, "tid": 4242, "args": {"name": "thread 4242 (python3)"}},
  {"ph": "M", "name": "thread_name", "pid": 1, "tid": 7, "args": {"name": "stream 7 "}}
  ],
  "distributedInfo": {"backend": "nccl", "rank": 2, "world_size": 4, "pg_count": 1,
                      "pg_config": [{"pg_name": "0", "ranks": "{}"}], "nccl_version": "2.21.5"},
  "displayTimeUnit": "ms",
  "baseTimeNanoseconds": 1700000000000000000
})json";

class EveryCategoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteText(dir_ / "trace.json", kEveryCategory);
    imported_ = ImportOk({dir_ / "trace.json"}, dir_ / "run");
    ASSERT_EQ(imported_.rank_files.size(), 1u);
    rank_ = Load(imported_.rank_files[0]);
  }

  static int64_t At(int64_t ns_after_base) { return kBase + ns_after_base; }

  TempDir dir_;
  ImportResult imported_;
  trace::RankTrace rank_;
};

TEST_F(EveryCategoryTest, IdentityFromDistributedInfo) {
  EXPECT_EQ(imported_.rank_files[0].filename(), "rank-2.sqlite");
  EXPECT_EQ(rank_.meta.rank, 2);
  EXPECT_EQ(rank_.meta.world_size, 4);
  EXPECT_EQ(rank_.meta.backend, "nccl");
  EXPECT_EQ(rank_.meta.pid, kPid);  // the OS pid of the CPU events
  EXPECT_FALSE(HasNote(imported_, "no rank recorded")) << AllNotes(imported_);
}

TEST_F(EveryCategoryTest, LanesAndTheirNames) {
  using trace::LaneKind;
  const trace::Lane* main_thread = FindLane(rank_, LaneKind::kCpuThread, kPid, 4242);
  const trace::Lane* driver_thread = FindLane(rank_, LaneKind::kCpuThread, kPid, 4250);
  const trace::Lane* stream7 = FindLane(rank_, LaneKind::kGpuStream, 1, 7);
  const trace::Lane* stream20 = FindLane(rank_, LaneKind::kGpuStream, 1, 20);
  const trace::Lane* no_stream = FindLane(rank_, LaneKind::kGpuStream, 1, 4294967295);
  const trace::Lane* global = FindLane(rank_, LaneKind::kCpuThread, 0, 0);
  ASSERT_TRUE(main_thread && driver_thread && stream7 && stream20 && no_stream && global);
  EXPECT_EQ(rank_.lanes.size(), 8u);  // and the [memory] event's two counters
  // thread_name metadata after the events still names the lane; "stream 7 " is trimmed.
  EXPECT_EQ(main_thread->name, "thread 4242 (python3)");
  EXPECT_EQ(driver_thread->name, "python3 (thread 4250)");  // no thread_name: the process's
  EXPECT_EQ(stream7->name, "stream 7");
  EXPECT_EQ(stream20->name, "stream 20");
  EXPECT_EQ(no_stream->name, "no stream (context and device synchronization)");
  EXPECT_EQ(global->name, "Trace PyTorch Profiler");
  for (const trace::Lane* gpu : {stream7, stream20, no_stream}) {
    EXPECT_EQ(gpu->device, 1);
    EXPECT_EQ(gpu->context, 1u);
    EXPECT_EQ(gpu->role, trace::LaneRole::kNone);
  }
  EXPECT_EQ(main_thread->device, -1);
}

TEST_F(EveryCategoryTest, Kernels) {
  ASSERT_EQ(rank_.events.kernels.size(), 3u);
  const auto* gemm = Named(rank_, rank_.events.kernels, "void gemm_kernel<float>(float*)");
  ASSERT_NE(gemm, nullptr);
  EXPECT_EQ(gemm->lane, GpuLaneId(rank_, 1, 7));
  EXPECT_EQ(gemm->start_ns, At(1'020'123));  // 1020.123 µs after the base
  EXPECT_EQ(gemm->end_ns, At(1'051'000));    // + 30.877 µs
  EXPECT_EQ(gemm->correlation_id, 100u);
  EXPECT_EQ(gemm->grid, (trace::Dim3{64, 2, 1}));
  EXPECT_EQ(gemm->block, (trace::Dim3{128, 1, 1}));
  EXPECT_EQ(gemm->registers_per_thread, 96u);
  EXPECT_EQ(gemm->static_shared_bytes, 49152u);  // Kineto's static + dynamic total
  EXPECT_EQ(gemm->dynamic_shared_bytes, 0u);

  const auto* nccl = Named(rank_, rank_.events.kernels, "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)");
  ASSERT_NE(nccl, nullptr);
  EXPECT_EQ(nccl->lane, GpuLaneId(rank_, 1, 20));
  EXPECT_EQ(nccl->start_ns, At(1'040'000));
  EXPECT_EQ(nccl->end_ns, At(1'140'000));
  EXPECT_EQ(nccl->correlation_id, 101u);

  // An escaped name; a fourth decimal rounds to the nearest ns (1600000.5 -> 1600001), and
  // an exponent is read exactly (1.5e1 µs = 15000 ns).
  const auto* add = Named(rank_, rank_.events.kernels, "elementwise \"add\"");
  ASSERT_NE(add, nullptr);
  EXPECT_EQ(add->start_ns, At(1'600'001));
  EXPECT_EQ(add->end_ns, At(1'615'001));
  EXPECT_EQ(add->grid, (trace::Dim3{0, 0, 0}));
}

TEST_F(EveryCategoryTest, CopiesAndSets) {
  ASSERT_EQ(rank_.events.memcpys.size(), 2u);
  const auto* htod = Named(rank_, rank_.events.memcpys, "Memcpy HtoD (Pinned -> Device)");
  ASSERT_NE(htod, nullptr);
  EXPECT_EQ(htod->lane, GpuLaneId(rank_, 1, 7));
  EXPECT_EQ(htod->start_ns, At(1'200'000));
  EXPECT_EQ(htod->end_ns, At(1'210'000));
  EXPECT_EQ(htod->correlation_id, 103u);
  EXPECT_EQ(htod->bytes, 4096u);
  EXPECT_EQ(htod->copy_kind, trace::CopyKind::kHostToDevice);
  EXPECT_EQ(htod->src_kind, trace::MemoryKind::kPinned);
  EXPECT_EQ(htod->dst_kind, trace::MemoryKind::kDevice);
  EXPECT_EQ(htod->src_device, -1);

  // A peer copy names its devices fromDevice / inDevice / toDevice.
  const auto* peer = Named(rank_, rank_.events.memcpys, "Memcpy PtoP (Device -> Device)");
  ASSERT_NE(peer, nullptr);
  EXPECT_EQ(peer->lane, GpuLaneId(rank_, 1, 7));
  EXPECT_EQ(peer->copy_kind, trace::CopyKind::kPeerToPeer);
  EXPECT_EQ(peer->src_kind, trace::MemoryKind::kDevice);
  EXPECT_EQ(peer->src_device, 0);
  EXPECT_EQ(peer->dst_device, 1);
  EXPECT_EQ(peer->bytes, 1024u);

  ASSERT_EQ(rank_.events.memsets.size(), 1u);
  const trace::MemsetEvent& set = rank_.events.memsets[0];
  EXPECT_EQ(rank_.str(set.name), "Memset (Device)");
  EXPECT_EQ(set.lane, GpuLaneId(rank_, 1, 7));
  EXPECT_EQ(set.start_ns, At(1'230'000));
  EXPECT_EQ(set.end_ns, At(1'231'500));
  EXPECT_EQ(set.bytes, 8u);
  EXPECT_EQ(set.memory_kind, trace::MemoryKind::kDevice);
  EXPECT_EQ(set.correlation_id, 105u);
}

TEST_F(EveryCategoryTest, ApiCalls) {
  ASSERT_EQ(rank_.events.api_calls.size(), 2u);
  const auto* launch = Named(rank_, rank_.events.api_calls, "cudaLaunchKernel");
  ASSERT_NE(launch, nullptr);
  EXPECT_EQ(launch->lane, CpuLaneId(rank_, kPid, 4242));
  EXPECT_EQ(launch->start_ns, At(1'012'001));
  EXPECT_EQ(launch->end_ns, At(1'017'003));
  EXPECT_EQ(launch->domain, trace::ApiDomain::kRuntime);
  EXPECT_EQ(launch->callback_id, 211u);
  EXPECT_EQ(launch->correlation_id, 100u);  // its kernel's
  EXPECT_EQ(launch->external_id, 10u);      // the cpu_op aten::mm it was made in

  const auto* driver = Named(rank_, rank_.events.api_calls, "cuLaunchKernel");
  ASSERT_NE(driver, nullptr);
  EXPECT_EQ(driver->lane, CpuLaneId(rank_, kPid, 4250));
  EXPECT_EQ(driver->domain, trace::ApiDomain::kDriver);
  EXPECT_EQ(driver->callback_id, 307u);
  EXPECT_EQ(driver->correlation_id, 102u);
  EXPECT_EQ(driver->external_id, 0u);
}

TEST_F(EveryCategoryTest, Syncs) {
  ASSERT_EQ(rank_.events.syncs.size(), 4u);
  const trace::LaneId stream7 = GpuLaneId(rank_, 1, 7);
  const auto* stream_sync = Named(rank_, rank_.events.syncs, "Stream Sync");
  const auto* event_sync = Named(rank_, rank_.events.syncs, "Event Sync");
  const auto* wait = Named(rank_, rank_.events.syncs, "Stream Wait Event");
  const auto* context_sync = Named(rank_, rank_.events.syncs, "Context Sync");
  ASSERT_TRUE(stream_sync && event_sync && wait && context_sync);
  EXPECT_EQ(stream_sync->sync_kind, trace::SyncKind::kStreamSynchronize);
  EXPECT_EQ(stream_sync->lane, stream7);
  EXPECT_EQ(stream_sync->stream, 7u);
  EXPECT_EQ(stream_sync->context, 1u);
  EXPECT_EQ(stream_sync->correlation_id, 106u);
  EXPECT_EQ(stream_sync->start_ns, At(1'300'000));
  EXPECT_EQ(stream_sync->end_ns, At(1'302'000));
  EXPECT_EQ(event_sync->sync_kind, trace::SyncKind::kEventSynchronize);
  EXPECT_EQ(event_sync->cuda_event_id, 55u);
  EXPECT_EQ(event_sync->stream, 7u);
  EXPECT_EQ(wait->sync_kind, trace::SyncKind::kStreamWaitEvent);
  EXPECT_EQ(wait->lane, stream7);
  EXPECT_EQ(wait->stream, 20u);  // the stream waited on
  EXPECT_EQ(wait->cuda_event_id, 56u);
  EXPECT_EQ(wait->end_ns - wait->start_ns, 500);
  EXPECT_EQ(context_sync->sync_kind, trace::SyncKind::kContextSynchronize);
  EXPECT_EQ(context_sync->lane, GpuLaneId(rank_, 1, 4294967295));
  EXPECT_EQ(context_sync->stream, 0u);  // none
  EXPECT_EQ(context_sync->correlation_id, 109u);
}

TEST_F(EveryCategoryTest, RangesAndMarks) {
  ASSERT_EQ(rank_.events.nvtx_ranges.size(), 5u);
  const trace::LaneId main_thread = CpuLaneId(rank_, kPid, 4242);
  const auto* step5 = Named(rank_, rank_.events.nvtx_ranges, "ProfilerStep#5");
  ASSERT_NE(step5, nullptr);
  EXPECT_EQ(step5->lane, main_thread);
  EXPECT_EQ(step5->start_ns, At(1'000'000));
  EXPECT_EQ(step5->end_ns, At(1'500'000));
  EXPECT_EQ(rank_.str(step5->domain), "user_annotation");
  EXPECT_EQ(step5->style, trace::NvtxRangeStyle::kPushPop);
  EXPECT_EQ(step5->correlation_id, 1u);  // its External id
  EXPECT_EQ(rank_.str(step5->args), R"({"External id":1,"Trace name":"PyTorch Profiler"})");

  const auto* mm = Named(rank_, rank_.events.nvtx_ranges, "aten::mm");
  ASSERT_NE(mm, nullptr);
  EXPECT_EQ(mm->lane, main_thread);
  EXPECT_EQ(mm->start_ns, At(1'010'500));
  EXPECT_EQ(mm->end_ns, At(1'030'625));
  EXPECT_EQ(rank_.str(mm->domain), "cpu_op");
  // Of op args, only those that size the data are kept (External id and the like are not).
  EXPECT_EQ(rank_.str(mm->args), R"({"Input Dims":[[2,3],[3,4]],"Input type":["float","float"]})");
  EXPECT_EQ(mm->correlation_id, 10u);

  const auto* python = Named(rank_, rank_.events.nvtx_ranges, "train.py(10): step");
  ASSERT_NE(python, nullptr);
  EXPECT_EQ(rank_.str(python->domain), "python_function");
  EXPECT_EQ(python->args, trace::kEmptyString);

  const auto* gpu = Named(rank_, rank_.events.nvtx_ranges, "## forward ##");
  ASSERT_NE(gpu, nullptr);
  EXPECT_EQ(gpu->lane, GpuLaneId(rank_, 1, 7));
  EXPECT_EQ(rank_.str(gpu->domain), "gpu_user_annotation");
  EXPECT_EQ(rank_.str(gpu->args), R"({"External id":1,"device":1,"stream":7})");

  // The [memory] instant is a memory counter's samples (MemoryEvents below), not a mark.
  ASSERT_EQ(rank_.events.nvtx_marks.size(), 1u);
  ASSERT_EQ(rank_.events.counter_samples.size(), 2u);
  EXPECT_EQ(rank_.events.counter_samples[0].ts_ns, At(1'400'000));
  EXPECT_EQ(rank_.events.counter_samples[0].value, 512.0);
  EXPECT_EQ(rank_.events.counter_samples[1].value, 2097152.0);
  const auto* iteration = Named(rank_, rank_.events.nvtx_marks, "Iteration Start: PyTorch Profiler");
  ASSERT_NE(iteration, nullptr);
  EXPECT_EQ(iteration->lane, CpuLaneId(rank_, 0, 0));
  EXPECT_EQ(iteration->start_ns, At(1'000'000));
}

TEST_F(EveryCategoryTest, SkippedEventsNotedOnce) {
  std::vector<std::string> skipped;
  for (const std::string& note : imported_.notes) {
    if (note.find("left out") != std::string::npos) skipped.push_back(note);
  }
  ASSERT_EQ(skipped.size(), 1u) << AllNotes(imported_);
  // The ac2g flow pair is read for correlation, so it is not among the events left out.
  EXPECT_NE(skipped[0].find("trace.json': left out 2 events"), std::string::npos) << skipped[0];
  EXPECT_EQ(skipped[0].find("ac2g"), std::string::npos) << skipped[0];
  EXPECT_NE(skipped[0].find("'Trace' 1"), std::string::npos) << skipped[0];
  EXPECT_NE(skipped[0].find("'ph C' 1"), std::string::npos) << skipped[0];
}

TEST_F(EveryCategoryTest, AnalyzerFindsProfilerSteps) {
  AnalyzeOptions options;
  options.skip_steps = 0;
  Result<Report> report = AnalyzeRun(dir_ / "run", options);
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_EQ(report->steps.steps_found, 2);
  EXPECT_NE(report->steps.source.find("ProfilerStep#"), std::string::npos) << report->steps.source;
  ASSERT_EQ(report->ranks.size(), 1u);
  const DeviceReport& device = report->ranks[0];
  EXPECT_EQ(device.rank, 2);
  EXPECT_EQ(device.device, 1);
  ASSERT_EQ(device.steps.size(), 2u);
  EXPECT_EQ(device.steps[0].number, 5);
  EXPECT_EQ(device.steps[0].start_ns, At(1'000'000));
  EXPECT_EQ(device.steps[0].end_ns, At(1'500'000));
  EXPECT_EQ(device.steps[1].number, 6);
  EXPECT_EQ(device.steps[1].end_ns, At(1'900'250));
  // Whole trace: [gemm start, add end); the NCCL kernel is the comm, the gemm and add compute.
  EXPECT_EQ(device.totals.window_ns, 1'615'001 - 1'020'123);
  EXPECT_EQ(device.totals.comm_ns, 100'000);
  EXPECT_EQ(device.totals.compute_ns, 30'877 + 15'000);
  EXPECT_EQ(device.totals.overlap_ns, 1'051'000 - 1'040'000);
  EXPECT_EQ(device.totals.memory_ns, 10'000 + 5'000 + 1'500);
}

TEST(KinetoImportTest, GzippedTraceImportsTheSame) {
  TempDir dir;
  WriteText(dir / "trace.json.gz", Gzip(kEveryCategory));
  ASSERT_EQ(import::Head(dir / "trace.json.gz", 2), "\x1f\x8b");
  const ImportResult imported = ImportOk({dir / "trace.json.gz"}, dir / "run");
  ASSERT_EQ(imported.rank_files.size(), 1u);
  const trace::RankTrace rank = Load(imported.rank_files[0]);
  EXPECT_EQ(rank.meta.rank, 2);
  EXPECT_EQ(rank.events.kernels.size(), 3u);
  EXPECT_EQ(rank.events.nvtx_ranges.size(), 5u);
  const auto* gemm = Named(rank, rank.events.kernels, "void gemm_kernel<float>(float*)");
  ASSERT_NE(gemm, nullptr);
  EXPECT_EQ(gemm->start_ns, kBase + 1'020'123);
  EXPECT_EQ(gemm->end_ns, kBase + 1'051'000);
}

// A rank without a world size: the world holds at least that rank, not just the one file.
TEST(KinetoImportTest, ARankWithoutWorldSizeImpliesAWorldAboveIt) {
  TempDir dir;
  WriteText(dir / "rank3.json", R"json({"distributedInfo": {"rank": 3}, "traceEvents": [
    {"ph": "X", "cat": "kernel", "name": "relu", "pid": 0, "tid": 7, "ts": 100, "dur": 10,
     "args": {"device": 0, "stream": 7, "correlation": 5}}]})json");
  const ImportResult imported = ImportOk({dir / "rank3.json"}, dir / "run");
  ASSERT_EQ(imported.rank_files.size(), 1u);
  EXPECT_TRUE(HasNote(imported, "1 of the traces record no world size; taken as 4 (the highest rank imported + 1)"))
      << AllNotes(imported);
  const trace::RankTrace rank = Load(imported.rank_files[0]);
  EXPECT_EQ(rank.meta.rank, 3);
  EXPECT_EQ(rank.meta.world_size, 4);
}

// Older traces: absolute epoch microseconds, no baseTimeNanoseconds, no distributedInfo.
TEST(KinetoImportTest, AbsoluteMicrosecondsAndNoRank) {
  TempDir dir;
  WriteText(dir / "old.json", R"json({"schemaVersion": 1, "traceEvents": [
    {"ph": "X", "cat": "kernel", "name": "relu", "pid": 0, "tid": 7, "ts": 1682725898236567, "dur": 10,
     "args": {"device": 0, "context": 1, "stream": 7, "correlation": 5}},
    {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 31, "tid": 32, "ts": 1682725898236560.5,
     "dur": 4.25, "args": {"cbid": 211, "correlation": 5}}]})json");
  const ImportResult imported = ImportOk({dir / "old.json"}, dir / "run");
  ASSERT_EQ(imported.rank_files.size(), 1u);
  EXPECT_TRUE(HasNote(imported, "old.json': no rank recorded; imported as rank 0")) << AllNotes(imported);
  const trace::RankTrace rank = Load(imported.rank_files[0]);
  EXPECT_EQ(rank.meta.rank, 0);
  EXPECT_EQ(rank.meta.world_size, 1);
  EXPECT_EQ(rank.meta.pid, 31);
  ASSERT_EQ(rank.events.kernels.size(), 1u);
  EXPECT_EQ(rank.events.kernels[0].start_ns, 1682725898236567000);
  EXPECT_EQ(rank.events.kernels[0].end_ns, 1682725898236577000);
  ASSERT_EQ(rank.events.api_calls.size(), 1u);
  EXPECT_EQ(rank.events.api_calls[0].start_ns, 1682725898236560500);
  EXPECT_EQ(rank.events.api_calls[0].end_ns, 1682725898236564750);
  EXPECT_EQ(rank.events.api_calls[0].domain, trace::ApiDomain::kRuntime);
}

// Traces whose events carry no args.correlation tie each launch to its device work through
// ac2g flows only (s at the call, f at the kernel, same id): the import takes the flow's id.
TEST(KinetoImportTest, FlowsGiveTheCorrelationArgsDoNot) {
  TempDir dir;
  WriteText(dir / "flows.json", R"json({"traceEvents": [
    {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 120, "dur": 30,
     "args": {"device": 0, "stream": 7}},
    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, "tid": 7, "ts": 200,
     "dur": 5, "args": {"device": 0, "stream": 7, "bytes": 64}},
    {"ph": "X", "cat": "kernel", "name": "orphan", "pid": 0, "tid": 7, "ts": 300, "dur": 1, "args": {"device": 0}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 31, "tid": 32, "ts": 100, "dur": 4},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "pid": 31, "tid": 32, "ts": 190, "dur": 4},
    {"ph": "X", "cat": "kernel", "name": "relu", "pid": 0, "tid": 7, "ts": 400, "dur": 2,
     "args": {"device": 0, "stream": 7, "correlation": 77}},
    {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 11, "pid": 31, "tid": 32, "ts": 100, "bp": "e"},
    {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 11, "pid": 0, "tid": 7, "ts": 120, "bp": "e"},
    {"ph": "s", "cat": "async_cpu_to_gpu", "name": "async_gpu", "id": "12", "pid": 31, "tid": 32, "ts": 190},
    {"ph": "f", "cat": "async_cpu_to_gpu", "name": "async_gpu", "id": "12", "pid": 0, "tid": 7, "ts": 200}]})json");
  const ImportResult imported = ImportOk({dir / "flows.json"}, dir / "run");
  ASSERT_EQ(imported.rank_files.size(), 1u);
  EXPECT_TRUE(HasNote(imported, "4 of 5 events without args.correlation (launch calls, the device work they started) "
                                "took it from the ac2g flow at their start; the others have no correlation"))
      << AllNotes(imported);
  EXPECT_FALSE(HasNote(imported, "left out")) << AllNotes(imported);
  const trace::RankTrace rank = Load(imported.rank_files[0]);
  const auto* gemm = Named(rank, rank.events.kernels, "gemm");
  const auto* relu = Named(rank, rank.events.kernels, "relu");
  const auto* orphan = Named(rank, rank.events.kernels, "orphan");
  const auto* launch = Named(rank, rank.events.api_calls, "cudaLaunchKernel");
  const auto* copy_call = Named(rank, rank.events.api_calls, "cudaMemcpyAsync");
  ASSERT_TRUE(gemm && relu && orphan && launch && copy_call);
  EXPECT_EQ(gemm->correlation_id, 11u);
  EXPECT_EQ(launch->correlation_id, 11u);
  EXPECT_EQ(relu->correlation_id, 77u);  // args.correlation wins where there is one
  EXPECT_EQ(orphan->correlation_id, 0u);
  EXPECT_EQ(copy_call->correlation_id, 12u);
  ASSERT_EQ(rank.events.memcpys.size(), 1u);
  EXPECT_EQ(rank.events.memcpys[0].correlation_id, 12u);
  EXPECT_EQ(rank.events.memcpys[0].bytes, 64u);
}

TEST(KinetoImportTest, AFlowWithoutAnIdIsNamedAmongWhatWasLeftOut) {
  TempDir dir;
  WriteText(dir / "flows.json", R"json({"traceEvents": [
    {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 120, "dur": 30, "args": {"device": 0}},
    {"ph": "f", "cat": "ac2g", "name": "ac2g", "pid": 0, "tid": 7, "ts": 120}]})json");
  const ImportResult imported = ImportOk({dir / "flows.json"}, dir / "run");
  EXPECT_TRUE(HasNote(imported, "'(flow end without id, pid or tid)' 1")) << AllNotes(imported);
  EXPECT_TRUE(HasNote(imported, "0 of 1 event without args.correlation")) << AllNotes(imported);
}

TEST(KinetoImportTest, TwoFilesWithOneRankAreRefused) {
  TempDir dir;
  WriteText(dir / "a.json", kEveryCategory);
  WriteText(dir / "b.json", kEveryCategory);
  Result<ImportResult> imported = ImportTraces({dir / "a.json", dir / "b.json"}, dir / "run");
  ASSERT_FALSE(imported.ok());
  EXPECT_NE(imported.status().message().find("both hold rank 2"), std::string::npos) << imported.status().message();
  EXPECT_NE(imported.status().message().find("a.json"), std::string::npos) << imported.status().message();
  EXPECT_NE(imported.status().message().find("b.json"), std::string::npos) << imported.status().message();
  EXPECT_FALSE(HasRankFiles(dir / "run"));
}

TEST(KinetoImportTest, RanksOfSeveralFilesWithoutDistributedInfoAreAssigned) {
  TempDir dir;
  const std::string trace = R"json({"traceEvents": [
    {"ph": "X", "cat": "kernel", "name": "relu", "pid": 0, "tid": 7, "ts": 10, "dur": 1, "args": {"stream": 7}}]})json";
  WriteText(dir / "x.json", trace);
  WriteText(dir / "y.json", trace);
  const ImportResult imported = ImportOk({dir / "x.json", dir / "y.json"}, dir / "run");
  ASSERT_EQ(imported.rank_files.size(), 2u);
  EXPECT_TRUE(HasNote(imported, "x.json': no rank recorded; imported as rank 0")) << AllNotes(imported);
  EXPECT_TRUE(HasNote(imported, "y.json': no rank recorded; imported as rank 1")) << AllNotes(imported);
}

// ---- [memory] events: memory counters ------------------------------------------------------------------

// The counter lanes of `rank` by name.
std::map<std::string, const trace::Lane*> CounterLanes(const trace::RankTrace& rank) {
  std::map<std::string, const trace::Lane*> lanes;
  for (const trace::Lane& lane : rank.lanes) {
    if (lane.kind == trace::LaneKind::kCounter) lanes[lane.name] = &lane;
  }
  return lanes;
}

// The samples of the counter lane named `name`, in file order, as (ns after kBase, value).
std::vector<std::pair<int64_t, double>> Samples(const trace::RankTrace& rank, const std::string& name) {
  trace::LaneId id = trace::kNoLane;
  for (const trace::Lane& lane : rank.lanes) {
    if (lane.kind == trace::LaneKind::kCounter && lane.name == name) id = lane.id;
  }
  std::vector<std::pair<int64_t, double>> samples;
  for (const trace::CounterSample& sample : rank.events.counter_samples) {
    if (sample.lane == id) samples.emplace_back(sample.ts_ns - kBase, sample.value);
  }
  return samples;
}

// profile_memory=True as PyTorch 2.x writes it: one [memory] instant per allocation and free
// with the allocator's totals after it. The CPU's (Device Id -1), two GPUs' and a device of
// another type; a plain instant between them stays a mark.
const char* const kMemoryEvents = R"json({
  "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1},
  "baseTimeNanoseconds": 1700000000000000000,
  "traceEvents": [
  {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 4242, "tid": 4242, "ts": 1000.5,
   "args": {"Device Type": 0, "Device Id": -1, "Addr": 94000000000000, "Bytes": 4096, "Total Allocated": 4096,
            "Total Reserved": 0}},
  {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 4242, "tid": 4242, "ts": 1001.25,
   "args": {"Device Type": 1, "Device Id": 0, "Addr": 139900000000000, "Bytes": 1048576, "Total Allocated": 1048576,
            "Total Reserved": 2097152}},
  {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 4242, "tid": 4250, "ts": 1002,
   "args": {"Device Type": 1, "Device Id": 0, "Addr": 139900001048576, "Bytes": 512, "Total Allocated": 1049088,
            "Total Reserved": 2097152}},
  {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "checkpoint", "pid": 4242, "tid": 4242, "ts": 1002.5},
  {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 4242, "tid": 4242, "ts": 1003,
   "args": {"Device Type": 1, "Device Id": 1, "Addr": 140000000000000, "Bytes": 256, "Total Allocated": 256,
            "Total Reserved": 20971520}},
  {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 4242, "tid": 4242, "ts": 1004.001,
   "args": {"Device Type": 1, "Device Id": 0, "Addr": 139900000000000, "Bytes": -1048576, "Total Allocated": 512,
            "Total Reserved": 2097152}},
  {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 4242, "tid": 4242, "ts": 1005,
   "args": {"Device Type": 13, "Device Id": 0, "Addr": 1, "Bytes": 64, "Total Allocated": 64}},
  {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 4242, "tid": 4242, "ts": 1006,
   "args": {"Device Type": 0, "Device Id": -1, "Addr": 94000000000000, "Bytes": -4096, "Total Allocated": 0,
            "Total Reserved": 0}}
  ]})json";

TEST(KinetoImportTest, MemoryEventsAreCountersOfAllocatedAndReservedBytesPerDevice) {
  TempDir dir;
  WriteText(dir / "memory.json", kMemoryEvents);
  const ImportResult imported = ImportOk({dir / "memory.json"}, dir / "run");
  ASSERT_EQ(imported.rank_files.size(), 1u);
  EXPECT_FALSE(HasNote(imported, "left out")) << AllNotes(imported);
  const trace::RankTrace rank = Load(imported.rank_files[0]);
  const std::map<std::string, const trace::Lane*> lanes = CounterLanes(rank);
  // Device type 13 has no "Total Reserved": no reserved counter.
  const std::map<std::string, int32_t> expected_devices = {
      {"pytorch allocated memory: cpu", -1},    {"pytorch reserved memory: cpu", -1},
      {"pytorch allocated memory: cuda:0", 0},  {"pytorch reserved memory: cuda:0", 0},
      {"pytorch allocated memory: cuda:1", 1},  {"pytorch reserved memory: cuda:1", 1},
      {"pytorch allocated memory: device type 13:0", -1}};
  ASSERT_EQ(lanes.size(), expected_devices.size());
  for (const auto& [name, device] : expected_devices) {
    ASSERT_TRUE(lanes.contains(name)) << name;
    EXPECT_EQ(lanes.at(name)->device, device) << name;
  }
  EXPECT_EQ(trace::MemoryCounterName(trace::kPytorchAllocatedSource, "cuda:0"), "pytorch allocated memory: cuda:0");
  using Series = std::vector<std::pair<int64_t, double>>;
  EXPECT_EQ(Samples(rank, "pytorch allocated memory: cpu"), (Series{{1'000'500, 4096}, {1'006'000, 0}}));
  EXPECT_EQ(Samples(rank, "pytorch reserved memory: cpu"), (Series{{1'000'500, 0}, {1'006'000, 0}}));
  EXPECT_EQ(Samples(rank, "pytorch allocated memory: cuda:0"),
            (Series{{1'001'250, 1048576}, {1'002'000, 1049088}, {1'004'001, 512}}));
  EXPECT_EQ(Samples(rank, "pytorch reserved memory: cuda:0"),
            (Series{{1'001'250, 2097152}, {1'002'000, 2097152}, {1'004'001, 2097152}}));
  EXPECT_EQ(Samples(rank, "pytorch allocated memory: cuda:1"), (Series{{1'003'000, 256}}));
  EXPECT_EQ(Samples(rank, "pytorch reserved memory: cuda:1"), (Series{{1'003'000, 20971520}}));
  EXPECT_EQ(Samples(rank, "pytorch allocated memory: device type 13:0"), (Series{{1'005'000, 64}}));
  EXPECT_EQ(rank.events.counter_samples.size(), 13u);
  // Only the plain instant is a mark, on its thread.
  ASSERT_EQ(rank.events.nvtx_marks.size(), 1u);
  EXPECT_EQ(rank.str(rank.events.nvtx_marks[0].name), "checkpoint");
  EXPECT_EQ(rank.events.nvtx_marks[0].lane, CpuLaneId(rank, 4242, 4242));
}

// Older traces have no "Total Allocated": the bytes allocated are the running sum of "Bytes"
// on each device, never below zero (a free of memory allocated before the profiler started).
TEST(KinetoImportTest, MemoryEventsWithoutTotalsSumTheirBytes) {
  TempDir dir;
  WriteText(dir / "memory.json", R"json({"baseTimeNanoseconds": 1700000000000000000, "traceEvents": [
    {"ph": "i", "name": "[memory]", "ts": 10, "args": {"Device Type": 1, "Device Id": 2, "Bytes": 1000}},
    {"ph": "i", "name": "[memory]", "ts": 11, "args": {"Device Type": 1, "Device Id": 3, "Bytes": 7}},
    {"ph": "i", "name": "[memory]", "ts": 12, "args": {"Device Type": 1, "Device Id": 2, "Bytes": 500}},
    {"ph": "i", "name": "[memory]", "ts": 13, "args": {"Device Type": 1, "Device Id": 2, "Bytes": -1200}},
    {"ph": "i", "name": "[memory]", "ts": 14, "args": {"Device Type": 1, "Device Id": 2, "Bytes": -1000}},
    {"ph": "i", "name": "[memory]", "ts": 15, "args": {"Device Type": 1, "Device Id": 2, "Bytes": 300}},
    {"ph": "i", "name": "[memory]", "ts": 16, "args": {"Device Type": 0, "Device Id": 0, "Bytes": 64}}]})json");
  const ImportResult imported = ImportOk({dir / "memory.json"}, dir / "run");
  ASSERT_EQ(imported.rank_files.size(), 1u);
  EXPECT_FALSE(HasNote(imported, "left out")) << AllNotes(imported);
  const trace::RankTrace rank = Load(imported.rank_files[0]);
  const std::map<std::string, const trace::Lane*> lanes = CounterLanes(rank);
  EXPECT_EQ(lanes.size(), 3u);  // no "Total Reserved", no reserved counters
  using Series = std::vector<std::pair<int64_t, double>>;
  EXPECT_EQ(Samples(rank, "pytorch allocated memory: cuda:2"),
            (Series{{10'000, 1000}, {12'000, 1500}, {13'000, 300}, {14'000, 0}, {15'000, 300}}));
  EXPECT_EQ(Samples(rank, "pytorch allocated memory: cuda:3"), (Series{{11'000, 7}}));
  EXPECT_EQ(Samples(rank, "pytorch allocated memory: cpu"), (Series{{16'000, 64}}));
  EXPECT_TRUE(rank.events.nvtx_marks.empty());
}

// A damaged [memory] event is left out like any damaged event (counted as a memory event, in
// the notes and the rank's meta) and changes no running sum.
TEST(KinetoImportTest, ADamagedMemoryEventIsLeftOutAndNoted) {
  TempDir dir;
  WriteText(dir / "memory.json", R"json({"baseTimeNanoseconds": 1700000000000000000, "traceEvents": [
    {"ph": "i", "name": "[memory]", "ts": 10, "args": {"Device Type": 1, "Device Id": 0, "Bytes": 1000}},
    {"ph": "i", "name": "[memory]", "ts": 11, "args": {"Device Type": 1, "Device Id": 0, "Bytes": "-1000"}},
    {"ph": "i", "name": "[memory]", "ts": 12, "args": {"Device Type": 1, "Device Id": 0, "Bytes": 24}}]})json");
  const ImportResult imported = ImportOk({dir / "memory.json"}, dir / "run");
  ASSERT_EQ(imported.rank_files.size(), 1u);
  const std::string note =
      "left out 1 memory event without a valid args.Bytes (first: traceEvents[1] (event '[memory]'): args.Bytes is a "
      "string, not an integer)";
  EXPECT_TRUE(HasNote(imported, "memory.json': " + note)) << AllNotes(imported);
  const trace::RankTrace rank = Load(imported.rank_files[0]);
  ASSERT_TRUE(rank.meta.entries.contains("import.left_out.memory"));
  EXPECT_EQ(rank.meta.entries.at("import.left_out.memory"), note);
  using Series = std::vector<std::pair<int64_t, double>>;
  EXPECT_EQ(Samples(rank, "pytorch allocated memory: cuda:0"), (Series{{10'000, 1000}, {12'000, 1024}}));
}

// `rankscope export` of an imported Kineto trace keeps its memory counters: the Chrome
// export read back gives the same lanes and samples.
TEST(KinetoImportTest, MemoryCountersSurviveTheChromeExport) {
  TempDir dir;
  WriteText(dir / "memory.json", kMemoryEvents);
  const ImportResult imported = ImportOk({dir / "memory.json"}, dir / "run");
  ASSERT_EQ(imported.rank_files.size(), 1u);
  Result<ChromeExportResult> exported = ExportChromeTrace(dir / "run", dir / "export.json");
  ASSERT_TRUE(exported.ok()) << exported.status().message();
  const ImportResult again = ImportOk({dir / "export.json"}, dir / "again");
  ASSERT_EQ(again.rank_files.size(), 1u);
  const trace::RankTrace before = Load(imported.rank_files[0]);
  const trace::RankTrace after = Load(again.rank_files[0]);
  std::map<std::string, std::vector<std::pair<int64_t, double>>> before_series, after_series;
  for (const auto& [name, lane] : CounterLanes(before)) before_series[name] = Samples(before, name);
  for (const auto& [name, lane] : CounterLanes(after)) after_series[name] = Samples(after, name);
  EXPECT_EQ(before_series.size(), 7u);
  EXPECT_EQ(after_series, before_series);
  for (const auto& [name, lane] : CounterLanes(after)) EXPECT_EQ(lane->device, CounterLanes(before).at(name)->device);
}

// ---- bad input ---------------------------------------------------------------------------------------

// Damaged structure: the import fails with one line naming the file.
struct BadInput {
  const char* file;      // in tests/interop/data/kineto/
  const char* expected;  // in the message
};

constexpr BadInput kBadInputs[] = {
    {"malformed.json", "malformed JSON in traceEvents[0] at byte "},
    {"truncated.json.gz", "truncated gzip file"},
    {"truncated_header.json.gz", "truncated gzip file"},  // cut before any JSON comes out
    {"no_trace_events.json", "no traceEvents array"},
};

class KinetoBadInputTest : public ::testing::TestWithParam<BadInput> {};

TEST_P(KinetoBadInputTest, OneLineErrorNamingTheFile) {
  const BadInput& bad = GetParam();
  const fs::path input = kBadSeeds / bad.file;
  ASSERT_TRUE(fs::exists(input)) << input;
  TempDir dir;
  Result<ImportResult> imported = ImportTraces({input}, dir / "run");
  ASSERT_FALSE(imported.ok()) << bad.file << " imported";
  const std::string message = imported.status().message();
  EXPECT_NE(message.find(bad.file), std::string::npos) << message;
  EXPECT_NE(message.find(bad.expected), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  EXPECT_FALSE(HasRankFiles(dir / "run"));
}

INSTANTIATE_TEST_SUITE_P(Seeds, KinetoBadInputTest, ::testing::ValuesIn(kBadInputs),
                         [](const ::testing::TestParamInfo<BadInput>& param) {
                           std::string name = param.param.file;
                           name = name.substr(0, name.find('.'));
                           return name;
                         });

// One damaged event in a sound file: it is left out, counted and noted (the policy of
// import_internal.h); the rest of the file imports.
struct DamagedInput {
  const char* file;     // in tests/interop/data/kineto/
  const char* damaged;  // the name of the event left out
  int kernels_kept;
  const char* note;  // the whole note after the file's name, also the meta row's value
};

constexpr DamagedInput kDamagedInputs[] = {
    {"missing_ts.json", "relu", 1,
     "left out 1 kernel event without a valid ts/dur (first: traceEvents[1] (kernel 'relu'): no ts)"},
    {"string_dur.json", "gemm", 0,
     "left out 1 kernel event without a valid ts/dur (first: traceEvents[1] (kernel 'gemm'): dur is a string, not "
     "a number)"},
    {"kernel_args_not_object.json", "gemm", 1,
     "left out 1 kernel event with args that are not an object (first: traceEvents[0] (kernel 'gemm'): args is an "
     "array, not an object)"},
};

class KinetoDamagedEventTest : public ::testing::TestWithParam<DamagedInput> {};

TEST_P(KinetoDamagedEventTest, LeftOutCountedAndNoted) {
  const DamagedInput& damaged = GetParam();
  const fs::path input = kBadSeeds / damaged.file;
  ASSERT_TRUE(fs::exists(input)) << input;
  TempDir dir;
  const ImportResult imported = ImportOk({input}, dir / "run");
  ASSERT_EQ(imported.rank_files.size(), 1u);
  const std::string note = std::string(damaged.file) + "': " + damaged.note;
  EXPECT_TRUE(HasNote(imported, note)) << "expected '" << note << "' in:\n" << AllNotes(imported);
  const trace::RankTrace rank = Load(imported.rank_files[0]);
  EXPECT_EQ(rank.meta.rank, 0);
  EXPECT_EQ(static_cast<int>(rank.events.kernels.size()), damaged.kernels_kept);
  for (const trace::KernelEvent& kernel : rank.events.kernels) EXPECT_NE(rank.str(kernel.name), damaged.damaged);
  ASSERT_TRUE(rank.meta.entries.contains("import.left_out.kernel"));
  EXPECT_EQ(rank.meta.entries.at("import.left_out.kernel"), damaged.note);
}

INSTANTIATE_TEST_SUITE_P(Seeds, KinetoDamagedEventTest, ::testing::ValuesIn(kDamagedInputs),
                         [](const ::testing::TestParamInfo<DamagedInput>& param) {
                           std::string name = param.param.file;
                           name = name.substr(0, name.find('.'));
                           return name;
                         });

// The rest of a file with a damaged event is imported as it would be without it.
TEST(KinetoImportTest, AroundADamagedEventTheFileImportsAsItIs) {
  TempDir dir;
  const ImportResult imported = ImportOk({kBadSeeds / "string_dur.json"}, dir / "run");
  ASSERT_EQ(imported.rank_files.size(), 1u);
  EXPECT_EQ(imported.events, 1u);
  const trace::RankTrace rank = Load(imported.rank_files[0]);
  EXPECT_EQ(rank.meta.world_size, 2);
  const auto* launch = Named(rank, rank.events.api_calls, "cudaLaunchKernel");
  ASSERT_NE(launch, nullptr);
  EXPECT_EQ(launch->correlation_id, 1u);
  EXPECT_EQ(launch->start_ns, 1'000'000);  // ts 1000.0 µs, no baseTimeNanoseconds
  EXPECT_EQ(launch->end_ns, 1'005'000);
}

// Format detection turns away a non-object before the importer sees it; the importer, handed
// one anyway, says the same in its own words.
TEST(KinetoImportTest, TopLevelThatIsNotAnObject) {
  const fs::path input = kBadSeeds / "not_object.json";
  TempDir dir;
  Result<ImportResult> detected = ImportTraces({input}, dir / "run");
  ASSERT_FALSE(detected.ok());
  EXPECT_NE(detected.status().message().find("not_object.json"), std::string::npos) << detected.status().message();

  Result<ImportResult> direct = ImportDirect({input}, dir / "direct");
  ASSERT_FALSE(direct.ok());
  const std::string message = direct.status().message();
  EXPECT_NE(message.find("not_object.json': the top level is not a JSON object (a number)"), std::string::npos)
      << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  EXPECT_FALSE(HasRankFiles(dir / "direct"));
}

// More damaged structure, written here: each is one line naming the file, and leaves no rank
// file.
TEST(KinetoImportTest, MoreBadInputs) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"traceEvents": {"ph": "X"}})", "traceEvents is an object, not an array"},
      {R"({"traceEvents": []} {"more": 1})", "more after the top-level value"},
      {R"({"traceEvents": [], "baseTimeNanoseconds": "soon"})", "baseTimeNanoseconds is 'soon', not an integer"},
      {"{\"traceEvents\": [{\"ph\": \"X\", \"name\": \"\xff\"}]}", "malformed JSON"},
      {R"({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k")", "malformed JSON"},
  };
  for (const auto& [text, expected] : cases) {
    TempDir dir;
    WriteText(dir / "bad.json", text);
    Result<ImportResult> imported = ImportTraces({dir / "bad.json"}, dir / "run");
    ASSERT_FALSE(imported.ok()) << text;
    const std::string message = imported.status().message();
    EXPECT_NE(message.find("bad.json'"), std::string::npos) << message;
    EXPECT_NE(message.find(expected), std::string::npos) << "expected '" << expected << "' in: " << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    EXPECT_FALSE(HasRankFiles(dir / "run")) << text;
  }
}

// More damaged events, written here, each next to a sound kernel: the import succeeds, the
// damaged event is absent (and made no lane), and one note names its kind, count and reason.
TEST(KinetoImportTest, MoreDamagedEvents) {
  constexpr const char* kSound =
      R"({"ph": "X", "cat": "kernel", "name": "sound", "pid": 0, "tid": 7, "ts": 1, "dur": 1, "args": {"stream": 7}})";
  const std::pair<const char*, const char*> cases[] = {
      {"3", "left out 1 event not a JSON object (first: traceEvents[1] is a number)"},
      {R"({"ph": "X", "cat": "kernel", "ts": 1, "dur": 1, "tid": 9, "args": {"stream": 9}})",
       "left out 1 kernel event without a valid pid (first: traceEvents[1] (kernel): no pid)"},
      {R"({"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "ts": 1, "dur": 1})",
       "left out 1 cpu_op event without a valid tid (first: traceEvents[1] (cpu_op 'a'): no tid)"},
      {R"({"ph": "X", "cat": "cuda_runtime", "name": "c", "pid": 1, "tid": 1, "ts": 1})",
       "left out 1 cuda_runtime event without a valid ts/dur (first: traceEvents[1] (cuda_runtime 'c'): no dur)"},
      {R"({"ph": "X", "cat": "kernel", "name": "k", "pid": "GPU", "tid": 9, "ts": 1, "dur": 1})",
       "left out 1 kernel event without a valid pid (first: traceEvents[1] (kernel 'k'): pid 'GPU' is not a number)"},
      {R"({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 9, "ts": 1, "dur": -1})",
       "left out 1 kernel event without a valid ts/dur (first: traceEvents[1] (kernel 'k'): dur '-1' is not a "
       "duration in microseconds)"},
      {R"({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 9, "ts": 1, "dur": 1, "args": {"grid": [1, 2]}})",
       "left out 1 kernel event without a valid args.grid (first: traceEvents[1] (kernel 'k'): args.grid is not "
       "[x, y, z] of unsigned integers)"},
      {R"({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 9, "ts": 1, "dur": 1,
           "args": {"correlation": "7"}})",
       "left out 1 kernel event without a valid args.correlation (first: traceEvents[1] (kernel 'k'): "
       "args.correlation is a string, not an integer)"},
      {R"({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 9, "ts": 1e400, "dur": 1})",
       "left out 1 kernel event without a valid ts/dur (first: traceEvents[1] (kernel 'k'): ts '1e400' is not a "
       "time in microseconds)"},
      {R"({"ph": "X", "cat": "gpu_memcpy", "name": "m", "pid": 0, "tid": 9, "ts": 1, "dur": 1,
           "args": {"bytes": -4}})",
       "left out 1 gpu_memcpy event without a valid args.bytes (first: traceEvents[1] (gpu_memcpy 'm'): args.bytes "
       "is negative)"},
      {R"({"cat": "kernel", "name": "k", "pid": 0, "tid": 9, "ts": 1, "dur": 1})",
       "left out 1 kernel event without ph (first: traceEvents[1] (kernel 'k'): no ph)"},
      {R"({"ph": "i", "name": "mark", "pid": 0, "tid": 9, "ts": "soon"})",
       "left out 1 instant event without a valid ts (first: traceEvents[1] (event 'mark'): ts is a string, not a "
       "number)"},
      // [memory] events: counted as memory events, and they make no counter lane.
      {R"({"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": 2,
           "args": {"Device Type": 1, "Device Id": 0, "Bytes": 8, "Total Allocated": "8"}})",
       "left out 1 memory event without a valid args.Total Allocated (first: traceEvents[1] (event '[memory]'): "
       "args.Total Allocated is a string, not an integer)"},
      {R"({"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": 2,
           "args": {"Device Type": 1, "Device Id": 0, "Total Allocated": 8, "Total Reserved": null}})",
       "left out 1 memory event without a valid args.Total Reserved (first: traceEvents[1] (event '[memory]'): "
       "args.Total Reserved is null, not an integer)"},
      {R"({"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": 2, "args": {"Device Id": 0, "Bytes": 8}})",
       "left out 1 memory event without a valid args.Device Type (first: traceEvents[1] (event '[memory]'): no "
       "args.Device Type)"},
      {R"({"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": 2, "args": {"Device Type": 1, "Bytes": 8}})",
       "left out 1 memory event without a valid args.Device Id (first: traceEvents[1] (event '[memory]'): no "
       "args.Device Id)"},
      {R"({"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": 2, "args": {"Device Type": 0, "Device Id": -1}})",
       "left out 1 memory event without a valid args.Bytes (first: traceEvents[1] (event '[memory]'): neither "
       "args.Total Allocated nor args.Bytes)"},
      {R"({"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": 2,
           "args": {"Device Type": 1, "Device Id": 0, "Total Allocated": -8}})",
       "left out 1 memory event without a valid args.Total Allocated (first: traceEvents[1] (event '[memory]'): "
       "args.Total Allocated is negative)"},
      {R"({"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": [2], "args": {"Device Type": 0, "Bytes": 8}})",
       "left out 1 memory event without a valid ts (first: traceEvents[1] (event '[memory]'): ts is an array, not "
       "a number)"},
  };
  for (const auto& [damaged, note] : cases) {
    SCOPED_TRACE(damaged);
    TempDir dir;
    WriteText(dir / "damaged.json", std::string(R"({"traceEvents": [)") + kSound + ", " + damaged + "]}");
    const ImportResult imported = ImportOk({dir / "damaged.json"}, dir / "run");
    ASSERT_EQ(imported.rank_files.size(), 1u);
    EXPECT_TRUE(HasNote(imported, std::string("damaged.json': ") + note)) << AllNotes(imported);
    EXPECT_EQ(imported.events, 1u);
    const trace::RankTrace rank = Load(imported.rank_files[0]);
    ASSERT_EQ(rank.events.kernels.size(), 1u);
    EXPECT_EQ(rank.str(rank.events.kernels[0].name), "sound");
    EXPECT_EQ(rank.lanes.size(), 1u);  // the sound kernel's stream
  }
}

// Several damaged events of one kind make one note, their reasons counted, the first one shown.
TEST(KinetoImportTest, DamagedEventsOfOneKindMakeOneNote) {
  TempDir dir;
  WriteText(dir / "damaged.json", R"json({"distributedInfo": {"rank": 1, "world_size": 2}, "traceEvents": [
    {"ph": "X", "cat": "kernel", "name": "a", "pid": 0, "tid": 7, "dur": 1},
    {"ph": "X", "cat": "kernel", "name": "b", "pid": 0, "tid": 7, "ts": 5, "dur": "1"},
    {"ph": "X", "cat": "kernel", "name": "c", "tid": 7, "ts": 5, "dur": 1},
    {"ph": "X", "cat": "kernel", "name": "d", "pid": 0, "tid": 7, "ts": 5, "dur": 1},
    {"ph": "X", "cat": "cuda_runtime", "name": "e", "pid": 3, "tid": 3, "ts": 5, "dur": 1, "args": [1]}]})json");
  const ImportResult imported = ImportOk({dir / "damaged.json"}, dir / "run");
  const std::string kernels =
      "left out 3 kernel events: 2 without a valid ts/dur, 1 without a valid pid (first: traceEvents[0] (kernel "
      "'a'): no ts)";
  const std::string calls =
      "left out 1 cuda_runtime event with args that are not an object (first: traceEvents[4] (cuda_runtime 'e'): "
      "args is an array, not an object)";
  EXPECT_TRUE(HasNote(imported, "damaged.json': " + kernels)) << AllNotes(imported);
  EXPECT_TRUE(HasNote(imported, "damaged.json': " + calls)) << AllNotes(imported);
  const trace::RankTrace rank = Load(imported.rank_files.at(0));
  ASSERT_EQ(rank.events.kernels.size(), 1u);
  EXPECT_EQ(rank.str(rank.events.kernels[0].name), "d");
  EXPECT_TRUE(rank.events.api_calls.empty());
  EXPECT_EQ(rank.meta.entries.at("import.left_out.kernel"), kernels);
  EXPECT_EQ(rank.meta.entries.at("import.left_out.cuda_runtime"), calls);
}

// A file with no events at all would be a run with nothing in it: the import fails with one
// line saying so, and writes nothing.
TEST(KinetoImportTest, EmptyEventArrayIsAnError) {
  TempDir dir;
  WriteText(dir / "empty.json", R"({"distributedInfo": {"rank": 1, "world_size": 2}, "traceEvents": []})");
  Result<ImportResult> imported = ImportTraces({dir / "empty.json"}, dir / "run");
  ASSERT_FALSE(imported.ok());
  EXPECT_EQ(imported.status().message(),
            fmt::format("no events rankscope imports: '{}' holds no events", (dir / "empty.json").string()));
  EXPECT_FALSE(fs::exists(dir / "run"));
}

// Events only of kinds no importer reads, or only damaged ones: the one error line says what
// was left out and why, input by input.
TEST(KinetoImportTest, AnImportThatKeepsNoEventsFailsSayingWhatItLeftOut) {
  TempDir dir;
  WriteText(dir / "counters.json", R"([
    {"ph": "C", "name": "memory", "pid": 1, "ts": 1, "args": {"bytes": 4}},
    {"ph": "X", "name": "no category", "pid": 1, "tid": 1, "ts": 1, "dur": 2}])");
  WriteText(dir / "damaged.json", R"({"distributedInfo": {"rank": 1},
    "traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "dur": 2}]})");
  Result<ImportResult> imported = ImportTraces({dir / "counters.json", dir / "damaged.json"}, dir / "run");
  ASSERT_FALSE(imported.ok());
  EXPECT_EQ(imported.status().message(),
            fmt::format("no events rankscope imports: '{}': left out 2 events of kinds rankscope does not import "
                        "('(no cat)' 1, 'ph C' 1); '{}': left out 1 kernel event without a valid ts/dur (first: "
                        "traceEvents[0] (kernel 'k'): no ts)",
                        (dir / "counters.json").string(), (dir / "damaged.json").string()));
  EXPECT_FALSE(fs::exists(dir / "run"));
}

}  // namespace
}  // namespace rankscope::interop
