// interop/interop.h ExportChromeTrace and its exact re-import (import_chrome.cc): a run
// holding every table on several lanes of two ranks becomes Chrome trace-event JSON shaped
// like Kineto's (processes, threads, categories, args, NVTX nesting, launch flows, the
// "rankscope" object), plain or gzipped, written whole or not at all; ImportTraces turns it
// back into the same run, row for row, and the analysis gives the same report.
#include <sqlite3.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "analyzer/analyze.h"
#include "interop/import_internal.h"
#include "interop/interop.h"
#include "report/report_writers.h"
#include "tests/interop/import_test_util.h"
#include "tests/trace_builder.h"
#include "tests/rank_file_writer.h"
#include "tests/temp_dir.h"
#include "trace/reader.h"
#include "trace/run_dir.h"
#include "trace/writer.h"

namespace rankscope::interop {

using analyzer::AnalyzeRun;
using analyzer::Report;
using report::ReportToJson;
namespace {

using testing::AllNotes;
using testing::HasNote;
using testing::Load;

namespace fs = std::filesystem;
using nlohmann::json;
using rankscope::testing::TempDir;
using analyzer::testing::TraceBuilder;

constexpr uint64_t kWorld = 0xC0FFEE0123456789;  // above 2^63: exercises unsigned ids
// Rank r's clock: an ordinary epoch time with nanoseconds that 3 decimals of µs must keep.
constexpr int64_t kT0 = 1'712'345'678'901'234'567;
constexpr int64_t kNsPerSecond = 1'000'000'000;
constexpr int64_t kDayNs = 86'400'000'000'000;
const char* const kNcclKernel = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";

// ---- the run ---------------------------------------------------------------------------

// The lanes of every rank, in id order.
enum : trace::LaneId { kGpu = 1, kCopies, kMain, kWorker, kComm, kCounter };

// A time far beyond what µs doubles hold to the nanosecond (more than 2^53 ns from any
// base), so the export must add exact times to its event.
int64_t LateMark(int rank) { return kT0 + 300 * kDayNs + 2 * rank + 1; }

// Rank `rank` of run "chrome-run", times shifted by 10·rank ns. Every table, several lanes:
//   GPU stream (lane 1): gemm [2000,6000) corr 101, the NCCL kernel [6500,9500) corr 102,
//                        gemm [20500,30000) corr 105, an unnamed kernel [30500,31000)
//   copy stream (lane 2): an unnamed HtoD copy [1500,1900) corr 103, memset32 [3300,3400) corr 104
//   main thread (lane 3): steps [1000,20000) and [20000,40000); forward [1100,9000) corr 7,
//       inside it inner [1200,3000) corr 8, launches and a copy inside those (external ids 8
//       and 7), a driver memset call, an unnamed call of unknown domain, an unnamed CUPTI
//       flush overhead, two syncs; a start/end range "prefetch" [1500,25000) that ends on the
//       worker thread; the workload mark, a "tick" mark with a uint32 payload
//   worker (lane 4): a compiler overhead [100,200), the "late" mark (LateMark)
//   communicator (lane 5): an all-reduce [6400,9600) with two parts, a send [31000,32000)
//   counter (lane 6): gpu_util samples, an infinity and extremes included (SQLite stores no NaN)
trace::RankTrace BuildRank(int rank) {
  TraceBuilder b(rank, 2);
  b.RunId("chrome-run");
  b.Host("node-a");
  b.CommandLine("python train.py --chrome");
  b.Backend("nccl");
  b.Meta("job", "nightly \"quoted\" · ünïcode");
  b.Meta("nvtx.category.app.3", "inner work");
  EXPECT_EQ(b.GpuStream(0, trace::LaneRole::kCompute), kGpu);
  EXPECT_EQ(b.GpuStream(0, trace::LaneRole::kMemory), kCopies);
  EXPECT_EQ(b.CpuThread("main"), kMain);
  EXPECT_EQ(b.CpuThread("worker"), kWorker);
  EXPECT_EQ(b.Communicator(kWorld, "world"), kComm);
  EXPECT_EQ(b.Lane(trace::LaneKind::kCounter, -1), kCounter);
  // Names and texts, interned up front.
  const trace::StringId gemm = b.Str("gemm"), nccl = b.Str(kNcclKernel), launch = b.Str("cudaLaunchKernel");
  const trace::StringId memcpy_call = b.Str("cudaMemcpyAsync"), memset_call = b.Str("cuMemsetD32Async");
  const trace::StringId sync_name = b.Str("cudaStreamSynchronize"), wait_name = b.Str("cudaStreamWaitEvent");
  const trace::StringId step = b.Str("step"), forward = b.Str("forward"), inner = b.Str("inner");
  const trace::StringId prefetch = b.Str("prefetch"), rankscope = b.Str("rankscope"), app = b.Str("app");
  const trace::StringId workload = b.Str("workload"), tick = b.Str("tick"), late = b.Str("late");
  const trace::StringId allreduce = b.Str("AllReduce"), send = b.Str("Send"), ring = b.Str("RING");
  const trace::StringId ll = b.Str("LL"), simple = b.Str("SIMPLE"), memset_name = b.Str("memset32");
  const trace::StringId compile = b.Str("compile"), channel = b.Str("channel 0"), proxy = b.Str("proxy step");
  const std::string step1 = "{\"step\":1,\"samples\":32}", step2 = "{\"step\":2,\"samples\":32}";
  const std::string shape = "{\"world_size\":2,\"batch\":32,\"accum\":1,\"steps\":2,\"parameters\":1000}";
  const trace::StringId step1_args = b.Str(step1), step2_args = b.Str(step2), shape_args = b.Str(shape);
  b.Str("a string no event uses");
  trace::RankTrace t = b.Build();
  t.lanes[kCounter - 1].name = "gpu_util";
  const int64_t t0 = kT0 + 10 * rank;
  trace::EventTables& e = t.events;

  auto common = [&](trace::EventCommon& event, trace::LaneId lane, trace::StringId name, int64_t start, int64_t end,
                    uint64_t correlation) {
    event.lane = lane;
    event.name = name;
    event.start_ns = t0 + start;
    event.end_ns = t0 + end;
    event.correlation_id = correlation;
  };
  auto kernel = [&](trace::StringId name, int64_t start, int64_t end, uint64_t correlation, trace::Dim3 grid,
                    trace::Dim3 block, uint32_t registers, uint32_t static_shared, uint32_t dynamic_shared) {
    trace::KernelEvent k;
    common(k, kGpu, name, start, end, correlation);
    k.grid = grid;
    k.block = block;
    k.registers_per_thread = registers;
    k.static_shared_bytes = static_shared;
    k.dynamic_shared_bytes = dynamic_shared;
    e.kernels.push_back(k);
  };
  kernel(gemm, 2000, 6000, 101, {128, 2, 1}, {256, 1, 1}, 64, 1024, 4096);
  kernel(nccl, 6500, 9500, 102, {2, 1, 1}, {512, 1, 1}, 96, 87568, 0);
  kernel(gemm, 20500, 30000, 105, {64, 1, 1}, {128, 2, 1}, 32, 0, 0);
  kernel(trace::kEmptyString, 30500, 31000, 0, {1, 1, 1}, {32, 1, 1}, 8, 0, 0);

  trace::MemcpyEvent copy;
  common(copy, kCopies, trace::kEmptyString, 1500, 1900, 103);
  copy.bytes = uint64_t{1} << 20;
  copy.copy_kind = trace::CopyKind::kHostToDevice;
  copy.src_kind = trace::MemoryKind::kPinned;
  copy.dst_kind = trace::MemoryKind::kDevice;
  copy.src_device = -1;
  copy.dst_device = 0;
  e.memcpys.push_back(copy);
  trace::MemsetEvent set;
  common(set, kCopies, memset_name, 3300, 3400, 104);
  set.bytes = 4096;
  set.value = 0xdeadbeef;
  set.memory_kind = trace::MemoryKind::kDevice;
  e.memsets.push_back(set);

  auto call = [&](trace::StringId name, int64_t start, int64_t end, uint64_t correlation, uint64_t external,
                  trace::ApiDomain domain, uint32_t cbid, int32_t rc) {
    trace::ApiCallEvent a;
    common(a, kMain, name, start, end, correlation);
    a.external_id = external;
    a.domain = domain;
    a.callback_id = cbid;
    a.return_code = rc;
    e.api_calls.push_back(a);
  };
  call(launch, 1300, 1350, 101, 8, trace::ApiDomain::kRuntime, 211, 0);
  call(memcpy_call, 1400, 1460, 103, 8, trace::ApiDomain::kRuntime, 41, 0);
  call(launch, 3100, 3150, 102, 7, trace::ApiDomain::kRuntime, 211, 0);
  call(memset_call, 3200, 3230, 104, 7, trace::ApiDomain::kDriver, 282, 0);
  call(trace::kEmptyString, 3300, 3310, 0, 0, trace::ApiDomain::kUnknown, 999, -3);
  call(launch, 20100, 20150, 105, 0, trace::ApiDomain::kRuntime, 211, 0);

  auto sync = [&](trace::StringId name, int64_t start, int64_t end, trace::SyncKind kind, uint64_t stream,
                  uint64_t cuda_event) {
    trace::SyncEvent y;
    common(y, kMain, name, start, end, 0);
    y.sync_kind = kind;
    y.context = 1;
    y.stream = stream;
    y.cuda_event_id = cuda_event;
    e.syncs.push_back(y);
  };
  sync(sync_name, 9100, 9900, trace::SyncKind::kStreamSynchronize, 1, 0);
  sync(wait_name, 19000, 19100, trace::SyncKind::kStreamWaitEvent, 2, 77);

  auto range = [&](trace::LaneId lane, trace::StringId domain, trace::StringId name, int64_t start, int64_t end,
                   uint64_t correlation, trace::Payload payload, trace::StringId args) {
    trace::NvtxRangeEvent r;
    common(r, lane, name, start, end, correlation);
    r.domain = domain;
    r.payload = payload;
    r.args = args;
    return r;
  };
  e.nvtx_ranges.push_back(range(kMain, rankscope, step, 1000, 20000, 0, {}, step1_args));
  e.nvtx_ranges.push_back(range(kMain, rankscope, step, 20000, 40000, 0, {}, step2_args));
  e.nvtx_ranges.push_back(range(kMain, app, forward, 1100, 9000, 7, {trace::PayloadKind::kInt64, -5, 0.0}, 0));
  trace::NvtxRangeEvent inner_range =
      range(kMain, app, inner, 1200, 3000, 8, {trace::PayloadKind::kDouble, 0, 2.5}, trace::kEmptyString);
  inner_range.category = 3;
  inner_range.color = 0xFF00FF00;
  e.nvtx_ranges.push_back(inner_range);
  trace::NvtxRangeEvent async =
      range(kMain, app, prefetch, 1500, 25000, 0,
            {trace::PayloadKind::kUint64, static_cast<int64_t>((uint64_t{1} << 63) + 5), 0.0}, trace::kEmptyString);
  async.style = trace::NvtxRangeStyle::kStartEnd;
  async.end_lane = kWorker;
  e.nvtx_ranges.push_back(async);

  auto mark = [&](trace::LaneId lane, trace::StringId domain, trace::StringId name, int64_t at, trace::Payload payload,
                  trace::StringId args) {
    trace::NvtxMarkEvent m;
    common(m, lane, name, at - t0, at - t0, 0);
    m.domain = domain;
    m.payload = payload;
    m.args = args;
    return m;
  };
  e.nvtx_marks.push_back(mark(kMain, rankscope, workload, t0 + 900, {}, shape_args));
  trace::NvtxMarkEvent tick_mark =
      mark(kMain, trace::kEmptyString, tick, t0 + 5000, {trace::PayloadKind::kUint32, 42, 0}, trace::kEmptyString);
  tick_mark.category = 2;
  tick_mark.color = 0x80FFFFFF;
  tick_mark.correlation_id = 9;
  e.nvtx_marks.push_back(tick_mark);
  e.nvtx_marks.push_back(
      mark(kWorker, app, late, LateMark(rank), {trace::PayloadKind::kFloat, 0, 0.25}, trace::kEmptyString));

  trace::CollectiveEvent all;
  common(all, kComm, allreduce, 6400, 9600, 0);
  all.comm_hash = kWorld;
  all.sequence = 1;
  all.op = trace::CollectiveOp::kAllReduce;
  all.reduce_op = trace::ReduceOp::kSum;
  all.datatype = trace::DataType::kFloat32;
  all.bytes = uint64_t{1} << 22;
  all.comm_rank = rank;
  all.comm_size = 2;
  all.channels = 2;
  all.algorithm = ring;
  all.protocol = ll;
  e.collectives.push_back(all);
  trace::CollectiveEvent p2p;
  common(p2p, kComm, send, 31000, 32000, 0);
  p2p.comm_hash = kWorld;
  p2p.sequence = 2;
  p2p.op = trace::CollectiveOp::kSend;
  p2p.datatype = trace::DataType::kUint8;
  p2p.bytes = 65536;
  p2p.peer = 1 - rank;
  p2p.comm_rank = rank;
  p2p.comm_size = 2;
  p2p.channels = 1;
  p2p.protocol = simple;
  e.collectives.push_back(p2p);

  trace::CollectivePartEvent part;
  common(part, kComm, channel, 6500, 9400, 0);
  part.comm_hash = kWorld;
  part.sequence = 1;
  part.part_kind = trace::CollectivePartKind::kKernelChannel;
  part.channel = 0;
  part.bytes = uint64_t{1} << 21;
  e.collective_parts.push_back(part);
  common(part, kComm, proxy, 7000, 7500, 0);
  part.part_kind = trace::CollectivePartKind::kProxySendStep;
  part.channel = 1;
  part.peer = 1 - rank;
  part.step = 3;
  part.bytes = 65536;
  e.collective_parts.push_back(part);

  trace::OverheadEvent overhead;
  common(overhead, kMain, trace::kEmptyString, 3400, 3500, 0);
  overhead.overhead_kind = trace::OverheadKind::kCuptiBufferFlush;
  e.overheads.push_back(overhead);
  common(overhead, kWorker, compile, 100, 200, 0);
  overhead.overhead_kind = trace::OverheadKind::kDriverCompiler;
  e.overheads.push_back(overhead);

  const double samples[] = {0.5, 0.1 + 0.2, -1e-300, -std::numeric_limits<double>::infinity(), 1e300};
  for (int i = 0; i < 5; ++i) e.counter_samples.push_back({kCounter, t0 + 1000 * (i + 1), samples[i]});
  e.SortByLaneAndTime();
  return t;
}

// The two ranks as rank files in `dir`.
void WriteRun(const fs::path& dir) {
  for (int rank = 0; rank < 2; ++rank) {
    rankscope::testing::WriteRankTraceFile(BuildRank(rank), dir / trace::RankFileName(rank));
  }
}


std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

json ParseFile(const fs::path& path) {
  json parsed = json::parse(ReadFile(path), nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(parsed.is_discarded()) << path;
  return parsed;
}

std::vector<std::string> Listing(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// The round trip's import: through the driver, as `rankscope import` runs it.
Result<ImportResult> Import(const fs::path& exported, const fs::path& run_dir) {
  return ImportTraces({exported}, run_dir);
}

// ---- rows, field by field --------------------------------------------------------------

uint64_t Bits(double value) { return std::bit_cast<uint64_t>(value); }

auto Common(const trace::EventCommon& e) {
  return std::make_tuple(e.lane, e.start_ns, e.end_ns, e.name, e.correlation_id);
}
auto Nvtx(const trace::NvtxAttributes& a) {
  return std::make_tuple(a.domain, a.category, a.color, static_cast<int>(a.payload.kind), a.payload.int_value,
                         Bits(a.payload.real_value), a.args);
}
auto Row(const trace::KernelEvent& k) {
  return std::tuple_cat(Common(k), std::make_tuple(k.grid.x, k.grid.y, k.grid.z, k.block.x, k.block.y, k.block.z,
                                                   k.registers_per_thread, k.static_shared_bytes,
                                                   k.dynamic_shared_bytes));
}
auto Row(const trace::MemcpyEvent& c) {
  return std::tuple_cat(Common(c), std::make_tuple(c.bytes, static_cast<int>(c.copy_kind), static_cast<int>(c.src_kind),
                                                   static_cast<int>(c.dst_kind), c.src_device, c.dst_device));
}
auto Row(const trace::MemsetEvent& s) {
  return std::tuple_cat(Common(s), std::make_tuple(s.bytes, s.value, static_cast<int>(s.memory_kind)));
}
auto Row(const trace::ApiCallEvent& a) {
  return std::tuple_cat(Common(a),
                        std::make_tuple(static_cast<int>(a.domain), a.callback_id, a.return_code, a.external_id));
}
auto Row(const trace::SyncEvent& y) {
  return std::tuple_cat(Common(y),
                        std::make_tuple(static_cast<int>(y.sync_kind), y.context, y.stream, y.cuda_event_id));
}
auto Row(const trace::NvtxRangeEvent& r) {
  return std::tuple_cat(Common(r), Nvtx(r), std::make_tuple(static_cast<int>(r.style), r.end_lane));
}
auto Row(const trace::NvtxMarkEvent& m) { return std::tuple_cat(Common(m), Nvtx(m)); }
auto Row(const trace::CollectiveEvent& c) {
  return std::tuple_cat(Common(c), std::make_tuple(c.comm_hash, c.sequence, static_cast<int>(c.op),
                                                   static_cast<int>(c.reduce_op), static_cast<int>(c.datatype), c.bytes,
                                                   c.root, c.peer, c.comm_rank, c.comm_size, c.channels, c.algorithm,
                                                   c.protocol));
}
auto Row(const trace::CounterSample& s) { return std::make_tuple(s.lane, s.ts_ns, Bits(s.value)); }
auto Row(const trace::CollectivePartEvent& p) {
  return std::tuple_cat(Common(p), std::make_tuple(p.comm_hash, p.sequence, static_cast<int>(p.part_kind), p.channel,
                                                   p.peer, p.step, p.bytes));
}
auto Row(const trace::OverheadEvent& o) {
  return std::tuple_cat(Common(o), std::make_tuple(static_cast<int>(o.overhead_kind)));
}
template <typename T>
auto Rows(const std::vector<T>& table) {
  std::vector<decltype(Row(table.front()))> rows;
  for (const T& record : table) rows.push_back(Row(record));
  return rows;
}

auto LaneRow(const trace::Lane& l) {
  return std::make_tuple(l.id, static_cast<int>(l.kind), static_cast<int>(l.role), l.device, l.context, l.stream, l.pid,
                         l.tid, l.comm_hash, l.name, l.max_duration_ns);
}

// Every event of every table, lanes, strings and drops, field by field.
void ExpectSameRank(const trace::RankTrace& want, const trace::RankTrace& got) {
  EXPECT_EQ(want.strings, got.strings);
  ASSERT_EQ(want.lanes.size(), got.lanes.size());
  for (size_t i = 0; i < want.lanes.size(); ++i) {
    EXPECT_EQ(LaneRow(want.lanes[i]), LaneRow(got.lanes[i])) << "lane " << i + 1;
  }
  const trace::EventTables& w = want.events;
  const trace::EventTables& g = got.events;
  EXPECT_EQ(Rows(w.kernels), Rows(g.kernels));
  EXPECT_EQ(Rows(w.memcpys), Rows(g.memcpys));
  EXPECT_EQ(Rows(w.memsets), Rows(g.memsets));
  EXPECT_EQ(Rows(w.api_calls), Rows(g.api_calls));
  EXPECT_EQ(Rows(w.syncs), Rows(g.syncs));
  EXPECT_EQ(Rows(w.nvtx_ranges), Rows(g.nvtx_ranges));
  EXPECT_EQ(Rows(w.nvtx_marks), Rows(g.nvtx_marks));
  EXPECT_EQ(Rows(w.collectives), Rows(g.collectives));
  EXPECT_EQ(Rows(w.counter_samples), Rows(g.counter_samples));
  EXPECT_EQ(Rows(w.collective_parts), Rows(g.collective_parts));
  EXPECT_EQ(Rows(w.overheads), Rows(g.overheads));
  EXPECT_EQ(want.drops.size(), got.drops.size());
}

// ---- the JSON -----------------------------------------------------------------------------

std::vector<json> EventsOf(const json& trace, const std::string& ph) {
  std::vector<json> events;
  for (const json& event : trace["traceEvents"]) {
    if (event["ph"] == ph) events.push_back(event);
  }
  return events;
}

// Non-const throughout, so that a missing key reads as null and fails an expectation
// instead of tripping nlohmann's assertion.
json* FindEvent(json& trace, const std::string& ph, int pid, const std::string& name) {
  for (json& event : trace["traceEvents"]) {
    if (event["ph"] == ph && event["pid"] == pid && event.contains("name") && event["name"] == name) return &event;
  }
  return nullptr;
}

// The ns a µs value of the export stands for, relative to its base.
int64_t Ns(const json& us) { return std::llround(us.get<double>() * 1000.0); }

class ChromeExportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    run_ = dir_.path() / "run";
    fs::create_directories(run_);
    WriteRun(run_);
  }

  // Exports the run to `name` in the test's directory and parses it.
  json Export(const std::string& name, ChromeExportResult* result = nullptr) {
    Result<ChromeExportResult> exported = ExportChromeTrace(run_, dir_.path() / name);
    EXPECT_TRUE(exported.ok()) << exported.status().message();
    if (result != nullptr && exported.ok()) *result = *exported;
    return ParseFile(dir_.path() / name);
  }

  TempDir dir_;
  fs::path run_;
};

TEST_F(ChromeExportTest, TopLevelKeysBaseTimeAndCounts) {
  ChromeExportResult result;
  json trace = Export("trace.json", &result);
  ASSERT_TRUE(trace.is_object());
  EXPECT_TRUE(trace["traceEvents"].is_array());
  EXPECT_EQ(trace["displayTimeUnit"], "ns");
  // Whole seconds at or below rank 0's first event (the compiler overhead at kT0 + 100).
  EXPECT_EQ(trace["baseTimeNanoseconds"].get<int64_t>(), (kT0 + 100) / 1'000'000'000 * 1'000'000'000);
  EXPECT_EQ(result.ranks, 2);
  EXPECT_EQ(result.events, trace["traceEvents"].size());
  json& rankscope = trace["rankscope"];
  EXPECT_EQ(rankscope["format"], "rankscope-chrome-trace");
  EXPECT_EQ(rankscope["version"], 1);
  EXPECT_EQ(rankscope["run_id"], "chrome-run");
}

TEST_F(ChromeExportTest, OneProcessPerRankOneThreadPerLane) {
  json trace = Export("trace.json");
  for (int rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE(rank);
    json* process = FindEvent(trace, "M", rank, "process_name");
    ASSERT_NE(process, nullptr);
    EXPECT_EQ((*process)["args"]["name"], "rank " + std::to_string(rank) + " (node-a, pid " +
                                              std::to_string(1000 + rank) + ")");
    json* labels = FindEvent(trace, "M", rank, "process_labels");
    ASSERT_NE(labels, nullptr);
    EXPECT_EQ((*labels)["args"]["labels"], "world size 2, nccl, GPU 0");
    json* sort = FindEvent(trace, "M", rank, "process_sort_index");
    ASSERT_NE(sort, nullptr);
    EXPECT_EQ((*sort)["args"]["sort_index"], rank);

    std::map<int, std::string> names;
    std::map<int, int> order;
    for (const json& event : EventsOf(trace, "M")) {
      if (event["pid"] != rank) continue;
      if (event["name"] == "thread_name") names[event["tid"]] = event["args"]["name"];
      if (event["name"] == "thread_sort_index") order[event["tid"]] = event["args"]["sort_index"];
    }
    const int main_tid = 2000 + kMain, worker_tid = 2000 + kWorker;
    EXPECT_EQ(names, (std::map<int, std::string>{{kGpu, "GPU 0 · stream 1"},
                                                 {kCopies, "GPU 0 · stream 2"},
                                                 {kMain, "main (" + std::to_string(main_tid) + ")"},
                                                 {kWorker, "worker (" + std::to_string(worker_tid) + ")"},
                                                 {kComm, "world"},
                                                 {kCounter, "gpu_util"}}));
    // The viewer's track order: GPU streams, communicators, threads, counters.
    EXPECT_EQ(order,
              (std::map<int, int>{{kGpu, 0}, {kCopies, 1}, {kComm, 2}, {kMain, 3}, {kWorker, 4}, {kCounter, 5}}));
  }
}

TEST_F(ChromeExportTest, KinetoCategoriesArgsAndExactMicroseconds) {
  json trace = Export("trace.json");
  const int64_t base = trace["baseTimeNanoseconds"];
  json* gemm = FindEvent(trace, "X", 1, "gemm");
  ASSERT_NE(gemm, nullptr);
  EXPECT_EQ((*gemm)["cat"], "kernel");
  EXPECT_EQ((*gemm)["tid"], kGpu);
  EXPECT_EQ(base + Ns((*gemm)["ts"]), kT0 + 10 + 2000);
  EXPECT_EQ(Ns((*gemm)["dur"]), 4000);
  json& args = (*gemm)["args"];
  EXPECT_EQ(args["correlation"], 101);
  EXPECT_EQ(args["External id"], 8);  // the launching call's
  EXPECT_EQ(args["device"], 0);
  EXPECT_EQ(args["stream"], kGpu);
  EXPECT_EQ(args["grid"], json::array({128, 2, 1}));
  EXPECT_EQ(args["block"], json::array({256, 1, 1}));
  EXPECT_EQ(args["registers per thread"], 64);
  EXPECT_EQ(args["shared memory"], 1024 + 4096);
  EXPECT_FALSE(gemm->contains("start_ns"));
  // 3 decimals of µs: the nanoseconds as written.
  const std::string text = ReadFile(dir_.path() / "trace.json");
  const int64_t offset = kT0 + 10 + 2000 - base;
  const std::string decimals = std::to_string(1000 + offset % 1000).substr(1);
  EXPECT_NE(text.find("\"ts\":" + std::to_string(offset / 1000) + "." + decimals + ","), std::string::npos)
      << offset;

  json* copy = FindEvent(trace, "X", 0, "Memcpy HtoD (Pinned -> Device)");
  ASSERT_NE(copy, nullptr);
  EXPECT_EQ((*copy)["cat"], "gpu_memcpy");
  EXPECT_EQ((*copy)["args"]["unnamed"], true);
  EXPECT_EQ((*copy)["args"]["bytes"], 1 << 20);
  EXPECT_EQ((*copy)["args"]["copy kind"], "HtoD");
  json* set = FindEvent(trace, "X", 0, "memset32");
  ASSERT_NE(set, nullptr);
  EXPECT_EQ((*set)["cat"], "gpu_memset");
  EXPECT_EQ((*set)["args"]["memory kind"], "device");
  json* driver = FindEvent(trace, "X", 0, "cuMemsetD32Async");
  ASSERT_NE(driver, nullptr);
  EXPECT_EQ((*driver)["cat"], "cuda_driver");
  json* launch = FindEvent(trace, "X", 0, "cudaLaunchKernel");
  ASSERT_NE(launch, nullptr);
  EXPECT_EQ((*launch)["cat"], "cuda_runtime");
  EXPECT_EQ((*launch)["args"]["cbid"], 211);
  EXPECT_EQ((*launch)["args"]["correlation"], 101);
  json* sync = FindEvent(trace, "X", 0, "cudaStreamSynchronize");
  ASSERT_NE(sync, nullptr);
  EXPECT_EQ((*sync)["cat"], "cuda_sync");
  EXPECT_EQ((*sync)["args"]["sync kind"], "stream_synchronize");
  json* flush = FindEvent(trace, "X", 0, "cupti_buffer_flush");
  ASSERT_NE(flush, nullptr);
  EXPECT_EQ((*flush)["cat"], "overhead");
  json* allreduce = FindEvent(trace, "X", 0, "AllReduce");
  ASSERT_NE(allreduce, nullptr);
  EXPECT_EQ((*allreduce)["cat"], "collective");
  EXPECT_EQ((*allreduce)["args"]["comm hash"].get<uint64_t>(), kWorld);
  EXPECT_EQ((*allreduce)["args"]["op"], "AllReduce");
  EXPECT_EQ((*allreduce)["args"]["algorithm"], "RING");
  json* part = FindEvent(trace, "X", 0, "proxy step");
  ASSERT_NE(part, nullptr);
  EXPECT_EQ((*part)["cat"], "collective_part");
  EXPECT_EQ((*part)["args"]["part kind"], "proxy_send_step");
  json* inner = FindEvent(trace, "X", 0, "inner");
  ASSERT_NE(inner, nullptr);
  EXPECT_EQ((*inner)["cat"], "user_annotation");
  EXPECT_EQ((*inner)["args"]["External id"], 8);
  EXPECT_EQ((*inner)["args"]["payload kind"], "double");
  EXPECT_EQ((*inner)["args"]["payload"], 2.5);
}

TEST_F(ChromeExportTest, PushPopRangesNestOnTheirThread) {
  json trace = Export("trace.json");
  // Chrome nests the X events of a thread by time: on each thread, any two either nest or
  // are disjoint.
  std::map<std::pair<int, int>, std::vector<std::pair<int64_t, int64_t>>> spans;
  for (const json& event : EventsOf(trace, "X")) {
    const int64_t start = Ns(event["ts"]);
    spans[{event["pid"], event["tid"]}].emplace_back(start, start + Ns(event["dur"]));
  }
  for (const auto& [thread, list] : spans) {
    for (const auto& a : list) {
      for (const auto& b : list) {
        const bool disjoint = a.second <= b.first || b.second <= a.first;
        const bool nested =
            (a.first <= b.first && b.second <= a.second) || (b.first <= a.first && a.second <= b.second);
        EXPECT_TRUE(disjoint || nested) << "pid " << thread.first << " tid " << thread.second;
      }
    }
  }
  // step ⊃ forward ⊃ inner ⊃ the launch of gemm, on the main thread of rank 0.
  std::vector<std::pair<int64_t, int64_t>> chain;
  for (const char* name : {"step", "forward", "inner", "cudaLaunchKernel"}) {
    json* event = FindEvent(trace, "X", 0, name);
    ASSERT_NE(event, nullptr) << name;
    EXPECT_EQ((*event)["tid"], kMain) << name;
    chain.emplace_back(Ns((*event)["ts"]), Ns((*event)["ts"]) + Ns((*event)["dur"]));
  }
  EXPECT_EQ((*FindEvent(trace, "X", 0, "cudaLaunchKernel"))["args"]["correlation"], 101);
  for (size_t i = 1; i < chain.size(); ++i) {
    EXPECT_LT(chain[i - 1].first, chain[i].first) << i;
    EXPECT_GT(chain[i - 1].second, chain[i].second) << i;
  }

  // The start/end range: an async pair that begins on main and ends on the worker.
  json* begin = FindEvent(trace, "b", 0, "prefetch");
  json* end = FindEvent(trace, "e", 0, "prefetch");
  ASSERT_NE(begin, nullptr);
  ASSERT_NE(end, nullptr);
  EXPECT_EQ((*begin)["tid"], kMain);
  EXPECT_EQ((*end)["tid"], kWorker);
  EXPECT_EQ((*begin)["id"], (*end)["id"]);
  EXPECT_EQ(Ns((*end)["ts"]) - Ns((*begin)["ts"]), 25000 - 1500);
  EXPECT_EQ((*begin)["args"]["payload"].get<uint64_t>(), (uint64_t{1} << 63) + 5);
}

TEST_F(ChromeExportTest, MarksAreInstantsCountersAreCounterEvents) {
  json trace = Export("trace.json");
  json* tick = FindEvent(trace, "i", 1, "tick");
  ASSERT_NE(tick, nullptr);
  EXPECT_EQ((*tick)["s"], "t");
  EXPECT_EQ((*tick)["cat"], "user_annotation");
  EXPECT_EQ((*tick)["args"]["payload"], 42);
  EXPECT_EQ((*tick)["args"]["color"], 0x80FFFFFFu);
  EXPECT_EQ((*tick)["args"]["External id"], 9);
  EXPECT_EQ((*tick)["args"]["domain"], "");
  // Too far from the base for µs doubles: exact ns beside them.
  json* late = FindEvent(trace, "i", 1, "late");
  ASSERT_NE(late, nullptr);
  EXPECT_EQ((*late)["start_ns"].get<int64_t>(), LateMark(1));
  EXPECT_EQ((*late)["end_ns"].get<int64_t>(), LateMark(1));

  std::vector<json> values;
  for (const json& counter : EventsOf(trace, "C")) {
    if (counter["pid"] != 0) continue;
    EXPECT_EQ(counter["name"], "gpu_util");
    EXPECT_EQ(counter["tid"], kCounter);
    values.push_back(counter["args"]["value"]);
  }
  ASSERT_EQ(values.size(), 5u);
  EXPECT_EQ(values[1].get<double>(), 0.1 + 0.2);
  EXPECT_EQ(values[2].get<double>(), -1e-300);
  EXPECT_EQ(values[3], "-Infinity");  // JSON has no number for it
}

TEST_F(ChromeExportTest, FlowsPairEachLaunchWithItsDeviceWork) {
  json trace = Export("trace.json");
  // Each flow: one `s` on the calling thread at the call's start, one `f` ("bp":"e") at the
  // start of the device event; the X events there carry the same correlation id.
  std::map<uint64_t, json> starts, finishes;
  for (const json& event : trace["traceEvents"]) {
    if (event["ph"] == "s") {
      EXPECT_TRUE(starts.emplace(event["id"].get<uint64_t>(), event).second) << event;
    }
    if (event["ph"] == "f") {
      EXPECT_TRUE(finishes.emplace(event["id"].get<uint64_t>(), event).second) << event;
    }
  }
  auto slice_at = [&](json& point, const std::set<std::string>& cats) -> json* {
    for (json& event : trace["traceEvents"]) {
      if (event["ph"] == "X" && event["pid"] == point["pid"] && event["tid"] == point["tid"] &&
          event["ts"] == point["ts"] &&
          cats.contains(event["cat"].get<std::string>())) {
        return &event;
      }
    }
    return nullptr;
  };
  std::set<std::pair<int, uint64_t>> linked;  // (rank, correlation)
  for (auto& [id, start] : starts) {
    ASSERT_TRUE(finishes.contains(id)) << id;
    json& finish = finishes.at(id);
    EXPECT_EQ(start["cat"], "ac2g");
    EXPECT_EQ(finish["cat"], "ac2g");
    EXPECT_EQ(finish["bp"], "e");
    EXPECT_EQ(start["pid"], finish["pid"]);
    json* call = slice_at(start, {"cuda_runtime", "cuda_driver"});
    json* work = slice_at(finish, {"kernel", "gpu_memcpy", "gpu_memset"});
    ASSERT_NE(call, nullptr) << start;
    ASSERT_NE(work, nullptr) << finish;
    EXPECT_EQ((*call)["args"]["correlation"], (*work)["args"]["correlation"]);
    linked.emplace(start["pid"].get<int>(), (*work)["args"]["correlation"].get<uint64_t>());
  }
  EXPECT_EQ(starts.size(), finishes.size());
  // Both ranks: three kernels, the copy and the set (not the unnamed kernel, launched by nobody).
  std::set<std::pair<int, uint64_t>> expected;
  for (int rank = 0; rank < 2; ++rank) {
    for (uint64_t correlation : {101, 102, 103, 104, 105}) expected.emplace(rank, correlation);
  }
  EXPECT_EQ(linked, expected);
}

TEST_F(ChromeExportTest, RankscopeObjectHoldsMetaLanesAndStrings) {
  json trace = Export("trace.json");
  json& ranks = trace["rankscope"]["ranks"];
  ASSERT_EQ(ranks.size(), 2u);
  for (int rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE(rank);
    const trace::RankTrace original = Load(run_ / trace::RankFileName(rank));
    json& entry = ranks[static_cast<size_t>(rank)];
    EXPECT_EQ(entry["pid"], rank);
    EXPECT_EQ(entry["file"], trace::RankFileName(rank));
    const auto meta = entry["meta"].get<std::map<std::string, std::string>>();
    EXPECT_EQ(meta, original.meta.entries);
    EXPECT_EQ(entry["meta"]["job"], "nightly \"quoted\" · ünïcode");
    ASSERT_EQ(entry["lanes"].size(), original.lanes.size());
    for (size_t i = 0; i < original.lanes.size(); ++i) {
      json& lane = entry["lanes"][i];
      const trace::Lane& want = original.lanes[i];
      EXPECT_EQ(lane["id"], want.id);
      EXPECT_EQ(lane["kind"], i < 2 ? "gpu_stream" : i < 4 ? "cpu_thread" : i == 4 ? "communicator" : "counter");
      EXPECT_EQ(lane["device"], want.device);
      EXPECT_EQ(lane["stream"], want.stream);
      EXPECT_EQ(lane["pid"], want.pid);
      EXPECT_EQ(lane["tid"], want.tid);
      EXPECT_EQ(lane["comm_hash"].get<uint64_t>(), want.comm_hash);
      EXPECT_EQ(lane["name"], want.name);
      EXPECT_EQ(lane["max_duration_ns"], want.max_duration_ns);
    }
    EXPECT_EQ(entry["lanes"][kGpu - 1]["role"], "compute");
    EXPECT_EQ(entry["lanes"][kMain - 1]["role"], "none");
    EXPECT_EQ(entry["strings"].get<std::vector<std::string>>(),
              std::vector<std::string>(original.strings.begin() + 1, original.strings.end()));
  }
}

TEST_F(ChromeExportTest, GzipReadsBackAsThePlainExport) {
  ASSERT_TRUE(ExportChromeTrace(run_, dir_.path() / "trace.json").ok());
  Result<ChromeExportResult> gz = ExportChromeTrace(run_, dir_.path() / "trace.json.gz");
  ASSERT_TRUE(gz.ok()) << gz.status().message();
  const std::string raw = ReadFile(dir_.path() / "trace.json.gz");
  ASSERT_GE(raw.size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>(raw[0]), 0x1f);
  EXPECT_EQ(static_cast<unsigned char>(raw[1]), 0x8b);
  EXPECT_LT(raw.size(), ReadFile(dir_.path() / "trace.json").size());
  Result<std::string> gunzipped = import::ReadMaybeGzip(dir_.path() / "trace.json.gz");
  ASSERT_TRUE(gunzipped.ok()) << gunzipped.status().message();
  EXPECT_EQ(*gunzipped, ReadFile(dir_.path() / "trace.json"));
}

// ---- the round trip ------------------------------------------------------------------------

class ChromeRoundTripTest : public ChromeExportTest, public ::testing::WithParamInterface<std::string> {};

TEST_P(ChromeRoundTripTest, ImportGivesBackEveryRankExactly) {
  const fs::path exported = dir_.path() / GetParam();
  ASSERT_TRUE(ExportChromeTrace(run_, exported).ok());
  const fs::path back = dir_.path() / "back";
  Result<ImportResult> imported = Import(exported, back);
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  ASSERT_EQ(imported->rank_files.size(), 2u);
  uint64_t events = 0;
  for (int rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE(rank);
    const trace::RankTrace want = Load(run_ / trace::RankFileName(rank));
    const trace::RankTrace got = Load(back / trace::RankFileName(rank));
    events += want.events.size();
    ExpectSameRank(want, got);
    EXPECT_EQ(got.meta.rank, rank);
    EXPECT_EQ(got.meta.world_size, 2);
    EXPECT_EQ(got.meta.pid, want.meta.pid);
    EXPECT_EQ(got.meta.clock_start, want.meta.clock_start);
    EXPECT_TRUE(got.meta.closed_cleanly);
    // What an import must change: the run id is the new run's (ImportTraces names every run
    // it writes; a run directory holds one run id), and the end calibration is the new
    // file's own, written by its writer when it closed. Every other meta row is the original's.
    EXPECT_NE(got.meta.run_id, want.meta.run_id);
    std::map<std::string, std::string> want_meta = want.meta.entries, got_meta = got.meta.entries;
    for (auto* meta : {&want_meta, &got_meta}) {
      std::erase_if(*meta,
                    [](const auto& row) { return row.first == "run_id" || row.first.starts_with("clock.end."); });
    }
    EXPECT_EQ(want_meta, got_meta);
  }
  EXPECT_EQ(imported->events, events);
  EXPECT_TRUE(imported->notes.empty()) << imported->notes.front();
  Result<trace::Run> reopened = trace::OpenRun(back);
  ASSERT_TRUE(reopened.ok()) << reopened.status().message();
  EXPECT_TRUE(reopened->complete());
}

TEST_P(ChromeRoundTripTest, AnalysisOfTheImportIsTheSame) {
  const fs::path exported = dir_.path() / GetParam();
  ASSERT_TRUE(ExportChromeTrace(run_, exported).ok());
  const fs::path back = dir_.path() / "back";
  ASSERT_TRUE(Import(exported, back).ok());
  Result<Report> original = AnalyzeRun(run_, {});
  Result<Report> imported = AnalyzeRun(back, {});
  ASSERT_TRUE(original.ok()) << original.status().message();
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  EXPECT_GT(original->summary.steps, 0);
  // Apart from where the run lies and its id, the reports are the same, to the last digit.
  auto comparable = [](const Report& report) {
    std::string text = ReportToJson(report);
    for (const std::string& own : {report.run.directory, report.run.run_id}) {
      for (size_t at = text.find(own); !own.empty() && at != std::string::npos; at = text.find(own, at)) {
        text.replace(at, own.size(), "<run>");
      }
    }
    return text;
  };
  EXPECT_EQ(comparable(*original), comparable(*imported));
}

INSTANTIATE_TEST_SUITE_P(PlainAndGzip, ChromeRoundTripTest, ::testing::Values("trace.json", "trace.json.gz"),
                         [](const auto& param) { return param.param.ends_with(".gz") ? "Gzip" : "Plain"; });

// The base time is the run's, not the first rank's: a rank whose events start seconds
// earlier must not get negative ts, which Perfetto drops.
TEST_F(ChromeExportTest, ARankThatStartsEarlierGetsNoNegativeTs) {
  TempDir other;
  rankscope::testing::WriteRankTraceFile(BuildRank(0), other.path() / trace::RankFileName(0));
  TraceBuilder early(1, 2);
  early.RunId("chrome-run");
  early.Kernel(early.GpuStream(0), "early_gemm", kT0 - 5 * kNsPerSecond + 250, kT0 - 5 * kNsPerSecond + 900);
  rankscope::testing::WriteRankTraceFile(early.Build(), other.path() / trace::RankFileName(1));
  const fs::path exported = other.path() / "trace.json";
  ASSERT_TRUE(ExportChromeTrace(other.path(), exported).ok());
  json trace = ParseFile(exported);
  const int64_t base = trace["baseTimeNanoseconds"].get<int64_t>();
  EXPECT_LE(base, kT0 - 5 * kNsPerSecond + 250);
  EXPECT_GT(base, kT0 - 6 * kNsPerSecond);
  for (const json& event : trace["traceEvents"]) {
    if (event.contains("ts")) {
      EXPECT_GE(event["ts"].get<double>(), 0.0) << event.dump();
    }
  }
}

TEST_F(ChromeExportTest, AProcessWithoutAHostNamesItsPidAlone) {
  TempDir other;
  trace::RankTrace hostless = BuildRank(0);
  hostless.meta.host.clear();  // as imported traces often are
  rankscope::testing::WriteRankTraceFile(hostless, other.path() / trace::RankFileName(0));
  const fs::path exported = other.path() / "trace.json";
  ASSERT_TRUE(ExportChromeTrace(other.path(), exported).ok());
  json trace = ParseFile(exported);
  json* process = FindEvent(trace, "M", 0, "process_name");
  ASSERT_NE(process, nullptr);
  EXPECT_EQ((*process)["args"]["name"], "rank 0 (pid 1000)");
}

TEST_F(ChromeExportTest, ProcessWithoutRankImportsUnderTheFirstFreeRank) {
  TempDir other;
  trace::RankTrace loader = BuildRank(0);
  loader.meta.rank.reset();
  loader.meta.world_size.reset();
  rankscope::testing::WriteRankTraceFile(BuildRank(0), other.path() / trace::RankFileName(0));
  rankscope::testing::WriteRankTraceFile(loader, other.path() / trace::UnknownRankFileName(1000));
  const fs::path exported = other.path() / "trace.json";
  ASSERT_TRUE(ExportChromeTrace(other.path(), exported).ok());
  json trace = ParseFile(exported);
  json* process = FindEvent(trace, "M", 1 << 20, "process_name");
  ASSERT_NE(process, nullptr);
  EXPECT_EQ((*process)["args"]["name"], "pid 1000 (node-a, no rank)");

  Result<ImportResult> imported = Import(exported, other.path() / "back");
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  // Two notes: the rank it was given, and the world size it was given (it recorded neither).
  ASSERT_EQ(imported->notes.size(), 2u);
  EXPECT_NE(imported->notes[0].find("imported as rank 1"), std::string::npos) << imported->notes[0];
  EXPECT_NE(imported->notes[1].find("record no world size; taken as 2"), std::string::npos) << imported->notes[1];
  const trace::RankTrace got = Load(other.path() / "back" / trace::RankFileName(1));
  EXPECT_EQ(got.meta.rank, 1);
  ExpectSameRank(Load(other.path() / trace::UnknownRankFileName(1000)), got);
}

TEST_F(ChromeExportTest, DropsSurviveTheRoundTrip) {
  TempDir other;
  trace::RankTrace rank = BuildRank(0);
  rank.meta.world_size = 1;
  {
    rankscope::testing::WriteRankTraceFile(rank, other.path() / trace::RankFileName(0));
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open((other.path() / trace::RankFileName(0)).c_str(), &db), SQLITE_OK);
    EXPECT_EQ(sqlite3_exec(db,
                           "INSERT INTO drops(source, reason, device, context, stream, count) "
                           "VALUES('cupti', 'buffer overflow', 0, 1, 7, 12)",
                           nullptr, nullptr, nullptr),
              SQLITE_OK)
        << sqlite3_errmsg(db);
    sqlite3_close(db);
  }
  const fs::path exported = other.path() / "trace.json";
  ASSERT_TRUE(ExportChromeTrace(other.path(), exported).ok());
  json drops = ParseFile(exported)["rankscope"]["ranks"][0]["drops"];
  ASSERT_EQ(drops.size(), 1u);
  EXPECT_EQ(drops[0]["source"], "cupti");
  EXPECT_EQ(drops[0]["count"], 12);
  Result<ImportResult> imported = Import(exported, other.path() / "back");
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  const trace::RankTrace back = Load(other.path() / "back" / trace::RankFileName(0));
  ASSERT_EQ(back.drops.size(), 1u);
  EXPECT_EQ(back.drops[0].source, "cupti");
  EXPECT_EQ(back.drops[0].reason, "buffer overflow");
  EXPECT_EQ(back.drops[0].device, 0);
  EXPECT_EQ(back.drops[0].context, 1u);
  EXPECT_EQ(back.drops[0].stream, 7u);
  EXPECT_EQ(back.drops[0].count, 12u);
}

// ---- errors ---------------------------------------------------------------------------------

TEST_F(ChromeExportTest, MissingRunIsAnErrorNamingIt) {
  const fs::path missing = dir_.path() / "no-such-run";
  Result<ChromeExportResult> exported = ExportChromeTrace(missing, dir_.path() / "trace.json");
  ASSERT_FALSE(exported.ok());
  EXPECT_NE(exported.status().message().find(missing.string()), std::string::npos) << exported.status().message();
  EXPECT_EQ(exported.status().message().find('\n'), std::string::npos);
  EXPECT_FALSE(fs::exists(dir_.path() / "trace.json"));
}

TEST_F(ChromeExportTest, UnwritableOutputWritesNothing) {
  const fs::path nowhere = dir_.path() / "missing-dir" / "trace.json";
  Result<ChromeExportResult> exported = ExportChromeTrace(run_, nowhere);
  ASSERT_FALSE(exported.ok());
  EXPECT_NE(exported.status().message().find(nowhere.string()), std::string::npos) << exported.status().message();
  EXPECT_FALSE(fs::exists(nowhere.parent_path()));

  const fs::path directory = dir_.path() / "a-directory";
  fs::create_directories(directory);
  exported = ExportChromeTrace(run_, directory);
  ASSERT_FALSE(exported.ok());
  EXPECT_NE(exported.status().message().find(directory.string()), std::string::npos) << exported.status().message();
  EXPECT_TRUE(fs::is_empty(directory));
  EXPECT_EQ(Listing(dir_.path()), (std::vector<std::string>{"a-directory", "run"}));
}

TEST_F(ChromeExportTest, FailureHalfwayLeavesTheOldFileAndNoTemporary) {
  const fs::path out = dir_.path() / "trace.json.gz";
  std::ofstream(out) << "an earlier export";
  // Rank 1 opens, but its kernels table holds a row id LoadAll refuses: rank 0 is written
  // by then.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((run_ / trace::RankFileName(1)).c_str(), &db), SQLITE_OK);
  EXPECT_EQ(sqlite3_exec(db, "UPDATE kernels SET id = -5 WHERE id = 1", nullptr, nullptr, nullptr), SQLITE_OK)
      << sqlite3_errmsg(db);
  sqlite3_close(db);
  Result<ChromeExportResult> exported = ExportChromeTrace(run_, out);
  ASSERT_FALSE(exported.ok());
  EXPECT_NE(exported.status().message().find("rank-1.sqlite"), std::string::npos) << exported.status().message();
  EXPECT_EQ(ReadFile(out), "an earlier export");
  EXPECT_EQ(Listing(dir_.path()), (std::vector<std::string>{"run", "trace.json.gz"}));
}

TEST_F(ChromeExportTest, ExistingOutputIsReplacedWhole) {
  const fs::path out = dir_.path() / "trace.json";
  std::ofstream(out) << std::string(4 << 20, 'x');  // longer than the export
  ASSERT_TRUE(ExportChromeTrace(run_, out).ok());
  ASSERT_TRUE(ExportChromeTrace(run_, dir_.path() / "fresh.json").ok());
  EXPECT_EQ(ReadFile(out), ReadFile(dir_.path() / "fresh.json"));
  EXPECT_EQ(Listing(dir_.path()), (std::vector<std::string>{"fresh.json", "run", "trace.json"}));
}

// The export, edited by `edit`, imported: the error names the file and says what is wrong.
class ChromeImportErrorTest : public ChromeExportTest {
 protected:
  std::string ImportError(const std::function<void(json&)>& edit) {
    json trace = Export("trace.json");
    edit(trace);
    const fs::path edited = dir_.path() / "edited.json";
    std::ofstream(edited) << trace.dump();
    const fs::path back = dir_.path() / "back";
    Result<ImportResult> imported = Import(edited, back);
    EXPECT_FALSE(imported.ok());
    if (imported.ok()) return "";
    const std::string message = imported.status().message();
    EXPECT_NE(message.find(edited.string()), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    // Nothing half-imported stays behind.
    if (fs::exists(back)) {
      EXPECT_TRUE(fs::is_empty(back)) << Listing(back).front();
    }
    return message;
  }
};

TEST_F(ChromeImportErrorTest, AnotherFormatOrANewerVersion) {
  EXPECT_NE(ImportError([](json& t) { t["rankscope"]["format"] = "someone-elses"; }).find("someone-elses"),
            std::string::npos);
  EXPECT_NE(ImportError([](json& t) { t["rankscope"]["version"] = 2; }).find("version 2"), std::string::npos);
}

// The "rankscope" object is the file's structure: what is missing there fails the import.
TEST_F(ChromeImportErrorTest, MissingFieldsOfTheStructure) {
  EXPECT_NE(ImportError([](json& t) { t["rankscope"].erase("format"); }).find("no \"format\""), std::string::npos);
  EXPECT_NE(ImportError([](json& t) { t["rankscope"]["ranks"][1].erase("lanes"); }).find("no \"lanes\""),
            std::string::npos);
  EXPECT_NE(ImportError([](json& t) { t["rankscope"]["ranks"][0]["lanes"][0]["kind"] = 7.5; })
                .find("\"kind\" is not an integer"),
            std::string::npos);
  EXPECT_NE(ImportError([](json& t) { t.erase("baseTimeNanoseconds"); }).find("baseTimeNanoseconds"),
            std::string::npos);
  EXPECT_NE(ImportError([](json& t) { t["traceEvents"] = json::object(); }).find("traceEvents"), std::string::npos);
}

// The export, edited by `edit`, imported: damaged events are left out (the policy of
// import_internal.h) and the import succeeds.
class ChromeImportDamageTest : public ChromeExportTest {
 protected:
  ImportResult ImportEdited(const std::function<void(json&)>& edit) {
    json trace = Export("trace.json");
    edit(trace);
    const fs::path edited = dir_.path() / "edited.json";
    std::ofstream(edited) << trace.dump();
    back_ = dir_.path() / "back";
    fs::remove_all(back_);
    Result<ImportResult> imported = Import(edited, back_);
    EXPECT_TRUE(imported.ok()) << imported.status().message();
    return imported.ok() ? std::move(imported).value() : ImportResult{};
  }
  trace::RankTrace Original(int rank) const { return Load(run_ / trace::RankFileName(rank)); }
  trace::RankTrace Back(int rank) const { return Load(back_ / trace::RankFileName(rank)); }

  fs::path back_;
};

// Each event of `name` and phase X loses `arg`.
std::function<void(json&)> EraseArg(const std::string& name, const std::string& arg) {
  return [=](json& t) {
    for (json& event : t["traceEvents"]) {
      if (event["ph"] == "X" && event["name"] == name) event["args"].erase(arg);
    }
  };
}

TEST_F(ChromeImportDamageTest, AKernelWithoutItsGridIsLeftOutAndNoted) {
  const ImportResult imported = ImportEdited(EraseArg("gemm", "grid"));
  // Each rank has two gemm kernels; every one is left out, on its own rank.
  for (int rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE(rank);
    const std::string source = "edited.json' (rank-" + std::to_string(rank) + ".sqlite): ";
    EXPECT_TRUE(HasNote(imported, source + "left out 2 kernel events without a valid \"grid\" (first: traceEvents["))
        << AllNotes(imported);
    const trace::RankTrace original = Original(rank), back = Back(rank);
    EXPECT_EQ(back.events.kernels.size(), original.events.kernels.size() - 2);
    for (const trace::KernelEvent& kernel : back.events.kernels) EXPECT_NE(back.str(kernel.name), "gemm");
    EXPECT_EQ(back.events.memcpys.size(), original.events.memcpys.size());
    ASSERT_TRUE(back.meta.entries.contains("import.left_out.kernel"));
    EXPECT_TRUE(back.meta.entries.at("import.left_out.kernel").starts_with("left out 2 kernel events"))
        << back.meta.entries.at("import.left_out.kernel");
    EXPECT_NE(back.meta.entries.at("import.left_out.kernel").find("'gemm'): no \"grid\""), std::string::npos)
        << back.meta.entries.at("import.left_out.kernel");
  }
}

TEST_F(ChromeImportDamageTest, EveryKindOfDamageIsCountedUnderItsReason) {
  const ImportResult without_correlation = ImportEdited(EraseArg("cudaLaunchKernel", "correlation"));
  EXPECT_TRUE(HasNote(without_correlation, "cuda_runtime event without a valid \"correlation\" (first: ") ||
              HasNote(without_correlation, "cuda_runtime events without a valid \"correlation\" (first: "))
      << AllNotes(without_correlation);
  EXPECT_LT(Back(0).events.api_calls.size(), Original(0).events.api_calls.size());

  const ImportResult without_dur = ImportEdited([](json& t) {
    for (json& event : t["traceEvents"]) {
      if (event["ph"] == "X" && event["cat"] == "kernel") event.erase("dur");
    }
  });
  EXPECT_TRUE(HasNote(without_dur, "kernel events without a valid \"dur\"")) << AllNotes(without_dur);
  EXPECT_TRUE(Back(0).events.kernels.empty());
  EXPECT_EQ(Back(0).events.memcpys.size(), Original(0).events.memcpys.size());

  const ImportResult backwards = ImportEdited([](json& t) {
    for (json& event : t["traceEvents"]) {
      if (event["ph"] == "X" && event["cat"] == "gpu_memset" && event["pid"] == 1) event["dur"] = -1.0;
    }
  });
  EXPECT_TRUE(HasNote(backwards, "(rank-1.sqlite): left out 1 gpu_memset event without a valid \"dur\" (first: "))
      << AllNotes(backwards);
  EXPECT_NE(AllNotes(backwards).find("it ends before it starts"), std::string::npos) << AllNotes(backwards);
  EXPECT_TRUE(Back(1).events.memsets.empty());
  EXPECT_EQ(Back(0).events.memsets.size(), Original(0).events.memsets.size());

  // An event of a process the "rankscope" object does not list belongs to no rank.
  const ImportResult stray = ImportEdited([](json& t) {
    t["traceEvents"].push_back({{"ph", "X"}, {"cat", "kernel"}, {"pid", 7}});
    t["traceEvents"].push_back(3);
  });
  EXPECT_TRUE(HasNote(stray, "edited.json': left out 1 kernel event of a pid the \"rankscope\" object does not "
                             "list (first: traceEvents["))
      << AllNotes(stray);
  EXPECT_TRUE(HasNote(stray, "pid 7 is not a process")) << AllNotes(stray);
  EXPECT_TRUE(HasNote(stray, "edited.json': left out 1 event not a JSON object")) << AllNotes(stray);
  EXPECT_EQ(Back(0).events.kernels.size(), Original(0).events.kernels.size());
}

// A start/end range whose "e" is missing never ended: left out, on the rank of its "b".
TEST_F(ChromeImportDamageTest, ARangeThatNeverEndsIsLeftOut) {
  const ImportResult imported = ImportEdited([](json& t) {
    json kept = json::array();
    for (json& event : t["traceEvents"]) {
      if (!(event["ph"] == "e" && event["pid"] == 1)) kept.push_back(event);
    }
    t["traceEvents"] = kept;
  });
  EXPECT_TRUE(HasNote(imported, "(rank-1.sqlite): left out 1 start/end range event that never ended (no \"e\")"))
      << AllNotes(imported);
  EXPECT_EQ(Back(1).events.nvtx_ranges.size(), Original(1).events.nvtx_ranges.size() - 1);
  EXPECT_EQ(Back(0).events.nvtx_ranges.size(), Original(0).events.nvtx_ranges.size());
}

}  // namespace
}  // namespace rankscope::interop
