// TraceReader::Stream: the header's small tables whole, then every span table as lean rows
// in batches, and a visitor's error ends the stream.
#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "trace/reader.h"
#include "trace_test_util.h"

namespace rankscope::trace {
namespace {

using testing::MakeIdentity;
using testing::MustCreate;
using testing::TempDir;

// Records everything the reader hands over, batch by batch.
class RecordingVisitor : public SpanVisitor {
 public:
  Status OnHeader(StreamHeader received) override {
    ++headers;
    header = std::move(received);
    return Status::Ok();
  }
  Status OnSpans(SpanTable table, std::span<const SpanRow> rows) override {
    batches.push_back({table, rows.size()});
    std::vector<SpanRow>& into = Rows(table);
    into.insert(into.end(), rows.begin(), rows.end());
    return Status::Ok();
  }
  std::vector<SpanRow>& Rows(SpanTable table) {
    switch (table) {
      case SpanTable::kKernels: return kernels;
      case SpanTable::kMemcpys: return memcpys;
      case SpanTable::kMemsets: return memsets;
      case SpanTable::kNvtxRanges: return ranges;
      case SpanTable::kApiCalls: return api_calls;
      case SpanTable::kSyncs: return syncs;
    }
    return kernels;
  }
  const std::string& Str(StringId id) const {
    static const std::string kNone = "<out of range>";
    return id < header.strings.size() ? header.strings[id] : kNone;
  }

  int headers = 0;
  StreamHeader header;
  std::vector<std::pair<SpanTable, size_t>> batches;
  std::vector<SpanRow> kernels, memcpys, memsets, ranges, api_calls, syncs;
};

struct Written {
  LaneId gpu = kNoLane, thread = kNoLane, comm = kNoLane;
};

// A closed rank file with two kernels, one copy, one set, two ranges, a mark and a collective
// (and, with `launch`, the API call that launched the first kernel).
Written WriteSmallRank(const std::filesystem::path& path, bool launch = false) {
  Written w;
  auto writer = MustCreate(path, MakeIdentity("run-stream", 2, 4));
  EXPECT_NE(writer, nullptr);
  if (writer == nullptr) return w;
  Lane gpu;
  gpu.kind = LaneKind::kGpuStream;
  gpu.role = LaneRole::kCompute;
  gpu.device = 1;
  gpu.stream = 7;
  gpu.name = "stream 7";
  w.gpu = writer->AddLane(gpu);
  Lane thread;
  thread.kind = LaneKind::kCpuThread;
  thread.pid = 10;
  thread.tid = 11;
  thread.name = "main";
  w.thread = writer->AddLane(thread);
  Lane comm;
  comm.kind = LaneKind::kCommunicator;
  comm.comm_hash = 0xabcdefULL;
  comm.name = "world";
  w.comm = writer->AddLane(comm);
  writer->SetMeta("nvtx.category.rankscope.1", "compute");

  EventTables batch;
  KernelEvent k;
  k.lane = w.gpu;
  k.name = writer->Intern("gemm");
  k.start_ns = 1000;
  k.end_ns = 1500;
  k.correlation_id = 9;
  k.grid = {4, 1, 1};
  batch.kernels.push_back(k);
  k.name = writer->Intern("ncclDevKernel_AllReduce");
  k.start_ns = 1600;
  k.end_ns = 2600;
  batch.kernels.push_back(k);

  MemcpyEvent c;
  c.lane = w.gpu;
  c.name = writer->Intern("Memcpy HtoD");  // a name the lean row leaves out
  c.start_ns = 3000;
  c.end_ns = 3100;
  c.bytes = 4096;
  batch.memcpys.push_back(c);

  MemsetEvent s;
  s.lane = w.gpu;
  s.start_ns = 3200;
  s.end_ns = 3250;
  s.bytes = 64;
  batch.memsets.push_back(s);

  NvtxRangeEvent r;
  r.lane = w.thread;
  r.name = writer->Intern("step");
  r.domain = writer->Intern("rankscope");
  r.category = 0;
  r.args = writer->Intern(R"({"step":5,"samples":32})");
  r.payload = {PayloadKind::kInt64, -42, 0.0};
  r.start_ns = 900;
  r.end_ns = 4000;
  batch.nvtx_ranges.push_back(r);
  NvtxRangeEvent r2;
  r2.lane = w.thread;
  r2.name = writer->Intern("forward");
  r2.domain = writer->Intern("rankscope");
  r2.category = 1;
  r2.payload = {PayloadKind::kDouble, 0, 2.5};
  r2.start_ns = 950;
  r2.end_ns = 1400;
  batch.nvtx_ranges.push_back(r2);

  NvtxMarkEvent m;
  m.lane = w.thread;
  m.name = writer->Intern("workload");
  m.domain = writer->Intern("rankscope");
  m.args = writer->Intern(R"({"world_size":4,"batch":32})");
  m.start_ns = m.end_ns = 800;
  batch.nvtx_marks.push_back(m);

  CollectiveEvent g;
  g.lane = w.comm;
  g.name = writer->Intern("ncclAllReduce");
  g.start_ns = 1550;
  g.end_ns = 2650;
  g.comm_hash = 0xabcdefULL;
  g.sequence = 3;
  g.op = CollectiveOp::kAllReduce;
  g.bytes = 1 << 20;
  g.comm_size = 4;
  batch.collectives.push_back(g);

  if (launch) {
    ApiCallEvent call;
    call.lane = w.thread;
    call.name = writer->Intern("cudaLaunchKernel");
    call.start_ns = 960;
    call.end_ns = 990;
    call.correlation_id = 9;
    batch.api_calls.push_back(call);
  }

  EXPECT_TRUE(writer->Submit(std::move(batch)));
  EXPECT_TRUE(writer->Close().ok());
  return w;
}

TEST(Stream, HeaderThenEverySpanRowField) {
  TempDir dir;
  const auto path = dir / "rank-2.sqlite";
  const Written w = WriteSmallRank(path);
  auto reader = TraceReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  RecordingVisitor v;
  ASSERT_TRUE((*reader)->Stream(v).ok());

  // Header: meta, strings, lanes, marks, collectives.
  EXPECT_EQ(v.headers, 1);
  EXPECT_EQ(v.header.meta.run_id, "run-stream");
  EXPECT_EQ(v.header.meta.rank, 2);
  EXPECT_EQ(v.header.meta.world_size, 4);
  EXPECT_EQ(v.header.meta.host, "testhost");
  EXPECT_EQ(v.header.meta.entries.at("nvtx.category.rankscope.1"), "compute");
  ASSERT_FALSE(v.header.strings.empty());
  EXPECT_EQ(v.header.strings[0], "");
  ASSERT_EQ(v.header.lanes.size(), 3u);
  for (size_t i = 0; i < v.header.lanes.size(); ++i) EXPECT_EQ(v.header.lanes[i].id, i + 1);
  const Lane& gpu = v.header.lanes[w.gpu - 1];
  EXPECT_EQ(gpu.kind, LaneKind::kGpuStream);
  EXPECT_EQ(gpu.role, LaneRole::kCompute);
  EXPECT_EQ(gpu.device, 1);
  EXPECT_EQ(gpu.stream, 7u);
  EXPECT_EQ(gpu.name, "stream 7");
  EXPECT_EQ(v.header.lanes[w.thread - 1].kind, LaneKind::kCpuThread);
  EXPECT_EQ(v.header.lanes[w.thread - 1].tid, 11);
  EXPECT_EQ(v.header.lanes[w.comm - 1].kind, LaneKind::kCommunicator);
  EXPECT_EQ(v.header.lanes[w.comm - 1].comm_hash, 0xabcdefULL);

  ASSERT_EQ(v.header.marks.size(), 1u);
  const NvtxMarkEvent& m = v.header.marks[0];
  EXPECT_EQ(m.lane, w.thread);
  EXPECT_EQ(v.Str(m.name), "workload");
  EXPECT_EQ(v.Str(m.domain), "rankscope");
  EXPECT_EQ(v.Str(m.args), R"({"world_size":4,"batch":32})");
  EXPECT_EQ(m.start_ns, 800);

  ASSERT_EQ(v.header.collectives.size(), 1u);
  const CollectiveEvent& g = v.header.collectives[0];
  EXPECT_EQ(g.lane, w.comm);
  EXPECT_EQ(v.Str(g.name), "ncclAllReduce");
  EXPECT_EQ(g.start_ns, 1550);
  EXPECT_EQ(g.end_ns, 2650);
  EXPECT_EQ(g.comm_hash, 0xabcdefULL);
  EXPECT_EQ(g.sequence, 3u);
  EXPECT_EQ(g.op, CollectiveOp::kAllReduce);
  EXPECT_EQ(g.bytes, 1u << 20);
  EXPECT_EQ(g.comm_size, 4);

  // Kernels: lane, name, times; the range-only fields stay zero.
  ASSERT_EQ(v.kernels.size(), 2u);
  EXPECT_EQ(v.kernels[0].lane, w.gpu);
  EXPECT_EQ(v.Str(v.kernels[0].name), "gemm");
  EXPECT_EQ(v.kernels[0].start_ns, 1000);
  EXPECT_EQ(v.kernels[0].end_ns, 1500);
  EXPECT_EQ(v.Str(v.kernels[1].name), "ncclDevKernel_AllReduce");
  EXPECT_EQ(v.kernels[1].start_ns, 1600);
  EXPECT_EQ(v.kernels[1].end_ns, 2600);
  for (const SpanRow& row : v.kernels) {
    EXPECT_EQ(row.domain, kEmptyString);
    EXPECT_EQ(row.category, 0u);
    EXPECT_EQ(row.args, kEmptyString);
    EXPECT_EQ(row.payload_kind, 0u);
    EXPECT_EQ(row.payload_int, 0);
  }

  // Copies and sets: lane and times; no name.
  ASSERT_EQ(v.memcpys.size(), 1u);
  EXPECT_EQ(v.memcpys[0].lane, w.gpu);
  EXPECT_EQ(v.memcpys[0].name, kEmptyString);
  EXPECT_EQ(v.memcpys[0].start_ns, 3000);
  EXPECT_EQ(v.memcpys[0].end_ns, 3100);
  ASSERT_EQ(v.memsets.size(), 1u);
  EXPECT_EQ(v.memsets[0].lane, w.gpu);
  EXPECT_EQ(v.memsets[0].name, kEmptyString);
  EXPECT_EQ(v.memsets[0].start_ns, 3200);
  EXPECT_EQ(v.memsets[0].end_ns, 3250);
  for (const SpanRow& row : {v.memcpys[0], v.memsets[0]}) {
    EXPECT_EQ(row.domain, kEmptyString);
    EXPECT_EQ(row.category, 0u);
    EXPECT_EQ(row.args, kEmptyString);
    EXPECT_EQ(row.payload_kind, 0u);
    EXPECT_EQ(row.payload_int, 0);
  }

  // Ranges: every field.
  ASSERT_EQ(v.ranges.size(), 2u);
  const SpanRow& step = v.ranges[0];
  EXPECT_EQ(step.lane, w.thread);
  EXPECT_EQ(v.Str(step.name), "step");
  EXPECT_EQ(step.start_ns, 900);
  EXPECT_EQ(step.end_ns, 4000);
  EXPECT_EQ(v.Str(step.domain), "rankscope");
  EXPECT_EQ(step.category, 0u);
  EXPECT_EQ(v.Str(step.args), R"({"step":5,"samples":32})");
  EXPECT_EQ(step.payload_kind, static_cast<uint32_t>(PayloadKind::kInt64));
  EXPECT_EQ(step.payload_int, -42);
  const SpanRow& forward = v.ranges[1];
  EXPECT_EQ(v.Str(forward.name), "forward");
  EXPECT_EQ(forward.start_ns, 950);
  EXPECT_EQ(forward.end_ns, 1400);
  EXPECT_EQ(forward.category, 1u);
  EXPECT_EQ(forward.args, kEmptyString);
  EXPECT_EQ(forward.payload_kind, static_cast<uint32_t>(PayloadKind::kDouble));

  // One batch per non-empty table, in the documented table order.
  const std::vector<std::pair<SpanTable, size_t>> expected_batches = {
      {SpanTable::kKernels, 2}, {SpanTable::kMemcpys, 1}, {SpanTable::kMemsets, 1}, {SpanTable::kNvtxRanges, 2}};
  EXPECT_EQ(v.batches, expected_batches);
}

TEST(Stream, HostCallsCarryCorrelationIdsAndCopyDetails) {
  TempDir dir;
  WriteSmallRank(dir / "rank-2.sqlite");
  auto reader = TraceReader::Open(dir / "rank-2.sqlite");
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  RecordingVisitor v;
  ASSERT_TRUE((*reader)->Stream(v, StreamOptions{.host_calls = true}).ok());
  ASSERT_EQ(v.kernels.size(), 2u);
  EXPECT_EQ(v.kernels[0].correlation_id, 9u);  // the viewer shows it, API calls or not
  ASSERT_EQ(v.memcpys.size(), 1u);
  EXPECT_EQ(v.memcpys[0].payload_int, 4096);  // bytes
  ASSERT_EQ(v.memsets.size(), 1u);
  EXPECT_EQ(v.memsets[0].payload_int, 64);
}

TEST(Stream, LaunchLinksOnlyLeaveOutCopyDetailsAndCorrelationsWithoutApiCalls) {
  TempDir dir;
  WriteSmallRank(dir / "rank-2.sqlite");
  WriteSmallRank(dir / "rank-3.sqlite", /*launch=*/true);
  const StreamOptions options{.host_calls = true, .launch_links_only = true};
  auto without = TraceReader::Open(dir / "rank-2.sqlite");
  ASSERT_TRUE(without.ok()) << without.status().message();
  RecordingVisitor v;
  ASSERT_TRUE((*without)->Stream(v, options).ok());
  ASSERT_EQ(v.kernels.size(), 2u);
  EXPECT_EQ(v.kernels[0].correlation_id, 0u);  // no API call to link it to
  EXPECT_EQ(v.memcpys.at(0).payload_int, 0);
  EXPECT_TRUE(v.api_calls.empty());

  auto with = TraceReader::Open(dir / "rank-3.sqlite");
  ASSERT_TRUE(with.ok()) << with.status().message();
  RecordingVisitor launched;
  ASSERT_TRUE((*with)->Stream(launched, options).ok());
  ASSERT_EQ(launched.api_calls.size(), 1u);
  EXPECT_EQ(launched.api_calls[0].correlation_id, 9u);
  EXPECT_EQ(launched.kernels.at(0).correlation_id, 9u);
  EXPECT_EQ(launched.memcpys.at(0).payload_int, 0);  // still no bytes
}

TEST(Stream, RangesFirstSendsTheNvtxRangesBeforeTheOtherTables) {
  TempDir dir;
  WriteSmallRank(dir / "rank-2.sqlite", /*launch=*/true);
  auto reader = TraceReader::Open(dir / "rank-2.sqlite");
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  RecordingVisitor v;
  ASSERT_TRUE((*reader)->Stream(v, StreamOptions{.host_calls = true, .ranges_first = true}).ok());
  const std::vector<std::pair<SpanTable, size_t>> expected_batches = {{SpanTable::kNvtxRanges, 2},
                                                                      {SpanTable::kKernels, 2},
                                                                      {SpanTable::kMemcpys, 1},
                                                                      {SpanTable::kMemsets, 1},
                                                                      {SpanTable::kApiCalls, 1}};
  EXPECT_EQ(v.batches, expected_batches);
}

TEST(Stream, BatchesLargeTablesInStorageOrder) {
  TempDir dir;
  const auto path = dir / "rank-0.sqlite";
  constexpr int kKernels = 4096 * 2 + 100;  // two full batches and a partial one
  auto writer = MustCreate(path, MakeIdentity("run-big", 0, 1));
  ASSERT_NE(writer, nullptr);
  Lane lane;
  lane.kind = LaneKind::kGpuStream;
  lane.device = 0;
  const LaneId id = writer->AddLane(lane);
  EventTables batch;
  for (int i = 0; i < kKernels; ++i) {
    KernelEvent k;
    k.lane = id;
    k.name = writer->Intern("k" + std::to_string(i % 3));
    k.start_ns = 10 * i;
    k.end_ns = 10 * i + 5;
    batch.kernels.push_back(k);
  }
  ASSERT_TRUE(writer->Submit(std::move(batch)));
  ASSERT_TRUE(writer->Close().ok());

  auto reader = TraceReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  RecordingVisitor v;
  ASSERT_TRUE((*reader)->Stream(v).ok());
  ASSERT_EQ(v.kernels.size(), static_cast<size_t>(kKernels));
  size_t max_batch = 0;
  size_t kernel_batches = 0;
  for (const auto& [table, size] : v.batches) {
    EXPECT_EQ(table, SpanTable::kKernels);  // the other tables are empty: no calls
    EXPECT_GT(size, 0u);
    max_batch = std::max(max_batch, size);
    ++kernel_batches;
  }
  EXPECT_LE(max_batch, 4096u);
  EXPECT_GE(kernel_batches, 3u);  // 8292 rows need at least ceil(8292 / 4096) = 3 batches
  for (int i = 0; i < kKernels; ++i) {
    ASSERT_EQ(v.kernels[i].start_ns, 10 * i) << i;
    ASSERT_EQ(v.kernels[i].end_ns, 10 * i + 5) << i;
    ASSERT_EQ(v.Str(v.kernels[i].name), "k" + std::to_string(i % 3)) << i;
  }
}

// Fails on the n-th OnSpans call (or in OnHeader when fail_at == 0).
class FailingVisitor : public SpanVisitor {
 public:
  explicit FailingVisitor(int fail_at) : fail_at_(fail_at) {}
  Status OnHeader(StreamHeader) override {
    if (fail_at_ == 0) return InvalidArgument("header refused");
    return Status::Ok();
  }
  Status OnSpans(SpanTable, std::span<const SpanRow>) override {
    ++calls;
    if (calls == fail_at_) return Inconsistent("visitor gave up at call " + std::to_string(calls));
    return Status::Ok();
  }
  int calls = 0;

 private:
  int fail_at_;
};

TEST(Stream, VisitorErrorStopsTheStreamAndIsReturned) {
  TempDir dir;
  const auto path = dir / "rank-2.sqlite";
  WriteSmallRank(path);
  auto reader = TraceReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status().message();

  FailingVisitor at_second(2);  // kernels, then memcpys fails; memsets and ranges never come
  const Status status = (*reader)->Stream(at_second);
  EXPECT_EQ(status.code(), StatusCode::kInconsistent);
  EXPECT_EQ(status.message(), "visitor gave up at call 2");
  EXPECT_EQ(at_second.calls, 2);

  FailingVisitor at_header(0);
  const Status header_status = (*reader)->Stream(at_header);
  EXPECT_EQ(header_status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(header_status.message(), "header refused");
  EXPECT_EQ(at_header.calls, 0);

  // The reader still works after a refused stream.
  RecordingVisitor again;
  EXPECT_TRUE((*reader)->Stream(again).ok());
  EXPECT_EQ(again.kernels.size(), 2u);
}

}  // namespace
}  // namespace rankscope::trace
