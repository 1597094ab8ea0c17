// Rank files of schema version 1, written by the previous release, still open and read:
// the tables version 2 added read as empty, and api_calls.external_id as 0.
#include <map>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "trace/reader.h"
#include "trace/schema.h"
#include "trace_test_util.h"

namespace rankscope::trace {
namespace {

using testing::MakeIdentity;
using testing::MustCreate;
using testing::TempDir;

// Turns a closed version 2 file into the file the previous release would have written
// with the same version 1 events.
void DowngradeToVersion1(const std::filesystem::path& path) {
  testing::ExecSql(path,
                   "ALTER TABLE api_calls DROP COLUMN external_id; "
                   "DROP TABLE collective_parts; DROP TABLE overheads; "
                   "DELETE FROM enums WHERE type IN ('collective_part_kind', 'overhead_kind'); "
                   "DELETE FROM lane_blocks WHERE event_table IN ('collective_parts', 'overheads'); "
                   "UPDATE meta SET value = '1' WHERE key = 'schema_version'; "
                   "PRAGMA user_version = 1;");
}

struct Written {
  LaneId gpu = kNoLane, thread = kNoLane, comm = kNoLane, counter = kNoLane;
};

// A closed version 2 file with rows in every table: two API calls (one inside an NVTX
// range, so with an external id), two collective parts and two overheads among them.
Written WriteVersion2File(const std::filesystem::path& path) {
  Written w;
  auto writer = MustCreate(path, MakeIdentity("run-v1", 0, 1));
  EXPECT_NE(writer, nullptr);
  if (writer == nullptr) return w;
  Lane gpu;
  gpu.kind = LaneKind::kGpuStream;
  gpu.stream = 7;
  w.gpu = writer->AddLane(gpu);
  Lane thread;
  thread.kind = LaneKind::kCpuThread;
  thread.tid = 100;
  w.thread = writer->AddLane(thread);
  Lane comm;
  comm.kind = LaneKind::kCommunicator;
  comm.comm_hash = 0x1234ULL;
  w.comm = writer->AddLane(comm);
  Lane counter;
  counter.kind = LaneKind::kCounter;
  counter.name = "power [W]";
  w.counter = writer->AddLane(counter);

  EventTables batch;
  NvtxRangeEvent range;
  range.lane = w.thread;
  range.start_ns = 1000;
  range.end_ns = 9000;
  range.name = writer->Intern("forward");
  range.correlation_id = 55;
  batch.nvtx_ranges.push_back(range);
  for (int i = 0; i < 2; ++i) {
    ApiCallEvent call;
    call.lane = w.thread;
    call.start_ns = 2000 + 1000 * i;
    call.end_ns = call.start_ns + 100;
    call.name = writer->Intern("cudaLaunchKernel");
    call.correlation_id = 10 + static_cast<uint64_t>(i);
    call.domain = ApiDomain::kRuntime;
    call.callback_id = 211;
    call.return_code = -i;
    call.external_id = i == 0 ? range.correlation_id : 0;
    batch.api_calls.push_back(call);
    KernelEvent kernel;
    kernel.lane = w.gpu;
    kernel.start_ns = 2500 + 1000 * i;
    kernel.end_ns = kernel.start_ns + 400;
    kernel.name = writer->Intern("gemm");
    kernel.correlation_id = call.correlation_id;
    batch.kernels.push_back(kernel);
  }
  SyncEvent sync;
  sync.lane = w.thread;
  sync.start_ns = 4000;
  sync.end_ns = 4500;
  sync.sync_kind = SyncKind::kStreamSynchronize;
  batch.syncs.push_back(sync);
  NvtxMarkEvent mark;
  mark.lane = w.thread;
  mark.start_ns = mark.end_ns = 1500;
  mark.name = writer->Intern("checkpoint");
  batch.nvtx_marks.push_back(mark);
  CollectiveEvent collective;
  collective.lane = w.comm;
  collective.start_ns = 5000;
  collective.end_ns = 7000;
  collective.comm_hash = 0x1234ULL;
  collective.sequence = 4;
  collective.op = CollectiveOp::kAllReduce;
  batch.collectives.push_back(collective);
  batch.counter_samples.push_back({w.counter, 5000, 312.5});
  for (int i = 0; i < 2; ++i) {
    CollectivePartEvent part;
    part.lane = w.comm;
    part.start_ns = 5100 + 100 * i;
    part.end_ns = part.start_ns + 50;
    part.comm_hash = collective.comm_hash;
    part.sequence = collective.sequence;
    part.part_kind = CollectivePartKind::kKernelChannel;
    part.channel = i;
    batch.collective_parts.push_back(part);
  }
  OverheadEvent overhead;
  overhead.lane = w.thread;
  overhead.start_ns = 1100;
  overhead.end_ns = 1200;
  overhead.overhead_kind = OverheadKind::kCuptiBufferFlush;
  batch.overheads.push_back(overhead);
  overhead.lane = w.gpu;
  overhead.overhead_kind = OverheadKind::kDriverCompiler;
  batch.overheads.push_back(overhead);
  EXPECT_TRUE(writer->Submit(std::move(batch)));
  EXPECT_TRUE(writer->Close().ok());
  return w;
}

std::unique_ptr<TraceReader> MustOpen(const std::filesystem::path& path) {
  auto reader = TraceReader::Open(path);
  EXPECT_TRUE(reader.ok()) << reader.status().message();
  return reader.ok() ? std::move(reader).value() : nullptr;
}

// The version 1 rows of WriteVersion2File, as a version 1 reader would see them.
void ExpectVersion1Rows(const Written& w, const RankTrace& t) {
  EXPECT_EQ(t.meta.schema_version, 1);
  EXPECT_EQ(t.meta.run_id, "run-v1");
  ASSERT_EQ(t.lanes.size(), 4u);
  const EventTables& e = t.events;
  ASSERT_EQ(e.api_calls.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const ApiCallEvent& call = e.api_calls[i];
    EXPECT_EQ(call.lane, w.thread);
    EXPECT_EQ(call.start_ns, 2000 + 1000 * static_cast<TimestampNs>(i));
    EXPECT_EQ(call.end_ns, call.start_ns + 100);
    EXPECT_EQ(t.str(call.name), "cudaLaunchKernel");
    EXPECT_EQ(call.correlation_id, 10 + i);
    EXPECT_EQ(call.domain, ApiDomain::kRuntime);
    EXPECT_EQ(call.callback_id, 211u);
    EXPECT_EQ(call.return_code, -static_cast<int32_t>(i));
    EXPECT_EQ(call.external_id, 0u);
  }
  ASSERT_EQ(e.kernels.size(), 2u);
  EXPECT_EQ(e.kernels[1].correlation_id, 11u);
  ASSERT_EQ(e.syncs.size(), 1u);
  EXPECT_EQ(e.syncs[0].sync_kind, SyncKind::kStreamSynchronize);
  ASSERT_EQ(e.nvtx_ranges.size(), 1u);
  EXPECT_EQ(e.nvtx_ranges[0].correlation_id, 55u);
  ASSERT_EQ(e.nvtx_marks.size(), 1u);
  EXPECT_EQ(t.str(e.nvtx_marks[0].name), "checkpoint");
  ASSERT_EQ(e.collectives.size(), 1u);
  EXPECT_EQ(e.collectives[0].sequence, 4u);
  ASSERT_EQ(e.counter_samples.size(), 1u);
  EXPECT_EQ(e.counter_samples[0].value, 312.5);
  EXPECT_TRUE(e.collective_parts.empty());
  EXPECT_TRUE(e.overheads.empty());
}

TEST(SchemaVersion1, LoadAllReadsTheOldRowsWithDefaults) {
  TempDir dir;
  const auto path = dir / "rank-0.sqlite";
  const Written w = WriteVersion2File(path);
  {
    // The same file before the downgrade has what the version 1 file must not show.
    auto reader = MustOpen(path);
    ASSERT_NE(reader, nullptr);
    auto v2 = reader->LoadAll();
    ASSERT_TRUE(v2.ok()) << v2.status().message();
    EXPECT_EQ(v2->meta.schema_version, kSchemaVersion);
    ASSERT_EQ(v2->events.api_calls.size(), 2u);
    EXPECT_EQ(v2->events.api_calls[0].external_id, 55u);
    EXPECT_EQ(v2->events.collective_parts.size(), 2u);
    EXPECT_EQ(v2->events.overheads.size(), 2u);
  }
  DowngradeToVersion1(path);
  auto reader = MustOpen(path);
  ASSERT_NE(reader, nullptr);
  EXPECT_EQ(reader->meta().schema_version, 1);
  for (int threads : {1, 3}) {
    auto trace = reader->LoadAll(LoadOptions{threads});
    ASSERT_TRUE(trace.ok()) << trace.status().message();
    ExpectVersion1Rows(w, *trace);
  }
}

TEST(SchemaVersion1, ReadLaneRangeReadsTheOldRowsWithDefaults) {
  TempDir dir;
  const auto path = dir / "rank-0.sqlite";
  const Written w = WriteVersion2File(path);
  DowngradeToVersion1(path);
  auto reader = MustOpen(path);
  ASSERT_NE(reader, nullptr);

  auto thread = reader->ReadLaneRange(w.thread, 0, 10000);
  ASSERT_TRUE(thread.ok()) << thread.status().message();
  ASSERT_EQ(thread->api_calls.size(), 2u);
  EXPECT_EQ(thread->api_calls[0].correlation_id, 10u);
  EXPECT_EQ(thread->api_calls[0].callback_id, 211u);
  EXPECT_EQ(thread->api_calls[0].external_id, 0u);
  EXPECT_EQ(thread->api_calls[1].return_code, -1);
  EXPECT_EQ(thread->api_calls[1].external_id, 0u);
  EXPECT_EQ(thread->syncs.size(), 1u);
  EXPECT_EQ(thread->nvtx_ranges.size(), 1u);
  EXPECT_EQ(thread->nvtx_marks.size(), 1u);
  EXPECT_TRUE(thread->overheads.empty());

  auto comm = reader->ReadLaneRange(w.comm, 0, 10000);
  ASSERT_TRUE(comm.ok()) << comm.status().message();
  EXPECT_EQ(comm->collectives.size(), 1u);
  EXPECT_TRUE(comm->collective_parts.empty());

  auto gpu = reader->ReadLaneRange(w.gpu, 0, 10000);
  ASSERT_TRUE(gpu.ok()) << gpu.status().message();
  EXPECT_EQ(gpu->kernels.size(), 2u);
  EXPECT_TRUE(gpu->overheads.empty());

  auto counter = reader->ReadLaneRange(w.counter, 0, 10000);
  ASSERT_TRUE(counter.ok()) << counter.status().message();
  EXPECT_EQ(counter->counter_samples.size(), 1u);
}

// Collects everything a stream hands over.
class CollectingVisitor : public SpanVisitor {
 public:
  Status OnHeader(StreamHeader received) override {
    header = std::move(received);
    return Status::Ok();
  }
  Status OnSpans(SpanTable table, std::span<const SpanRow> batch) override {
    rows[table].insert(rows[table].end(), batch.begin(), batch.end());
    return Status::Ok();
  }
  StreamHeader header;
  std::map<SpanTable, std::vector<SpanRow>> rows;
};

TEST(SchemaVersion1, StreamReadsTheOldRows) {
  TempDir dir;
  const auto path = dir / "rank-0.sqlite";
  const Written w = WriteVersion2File(path);
  DowngradeToVersion1(path);
  auto reader = MustOpen(path);
  ASSERT_NE(reader, nullptr);
  CollectingVisitor v;
  const Status streamed = reader->Stream(v, StreamOptions{.host_calls = true});
  ASSERT_TRUE(streamed.ok()) << streamed.message();
  EXPECT_EQ(v.header.meta.schema_version, 1);
  EXPECT_EQ(v.header.lanes.size(), 4u);
  EXPECT_EQ(v.header.marks.size(), 1u);
  ASSERT_EQ(v.header.collectives.size(), 1u);
  EXPECT_EQ(v.header.collectives[0].op, CollectiveOp::kAllReduce);
  ASSERT_EQ(v.header.lane_rows.size(), 5u);  // index = lane id
  EXPECT_EQ(v.header.lane_rows[w.thread], 5u);  // two calls, a sync, a range, a mark
  ASSERT_EQ(v.rows[SpanTable::kApiCalls].size(), 2u);
  EXPECT_EQ(v.rows[SpanTable::kApiCalls][0].lane, w.thread);
  EXPECT_EQ(v.rows[SpanTable::kApiCalls][1].correlation_id, 11u);
  EXPECT_EQ(v.rows[SpanTable::kKernels].size(), 2u);
  EXPECT_EQ(v.rows[SpanTable::kSyncs].size(), 1u);
  EXPECT_EQ(v.rows[SpanTable::kNvtxRanges].size(), 1u);
}

// The version decides, not what the file happens to hold: a file that says version 1 is
// read as version 1 even where it has version 2 tables and columns with rows in them.
TEST(SchemaVersion1, VersionTwoTablesAndColumnsOfAVersion1FileAreIgnored) {
  TempDir dir;
  const auto path = dir / "rank-0.sqlite";
  const Written w = WriteVersion2File(path);
  testing::ExecSql(path, "UPDATE meta SET value = '1' WHERE key = 'schema_version'; PRAGMA user_version = 1;");
  auto reader = MustOpen(path);
  ASSERT_NE(reader, nullptr);
  auto trace = reader->LoadAll();
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  ExpectVersion1Rows(w, *trace);
  auto thread = reader->ReadLaneRange(w.thread, 0, 10000);
  ASSERT_TRUE(thread.ok()) << thread.status().message();
  ASSERT_EQ(thread->api_calls.size(), 2u);
  EXPECT_EQ(thread->api_calls[0].external_id, 0u);
  EXPECT_TRUE(thread->overheads.empty());
}

// Names version 2 added are neither validated nor read in a version 1 file, whatever they
// are there: here views that no event query could read.
TEST(SchemaVersion1, VersionTwoNamesAreNotValidated) {
  TempDir dir;
  const auto path = dir / "rank-0.sqlite";
  const Written w = WriteVersion2File(path);
  DowngradeToVersion1(path);
  testing::ExecSql(path, "CREATE VIEW overheads AS SELECT 1 AS unrelated; "
                         "CREATE VIEW collective_parts AS SELECT 2 AS unrelated");
  auto reader = MustOpen(path);
  ASSERT_NE(reader, nullptr);
  auto trace = reader->LoadAll();
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  ExpectVersion1Rows(w, *trace);
  auto comm = reader->ReadLaneRange(w.comm, 0, 10000);
  ASSERT_TRUE(comm.ok()) << comm.status().message();
  EXPECT_TRUE(comm->collective_parts.empty());
}

// Version 1 files are still checked for everything version 1 has.
TEST(SchemaVersion1, MissingVersion1TableOrColumnIsRefused) {
  struct Case {
    const char* sql;
    const char* words;
  };
  for (const Case& c : {Case{"DROP TABLE syncs", "table 'syncs' is missing or malformed"},
                        Case{"ALTER TABLE api_calls DROP COLUMN return_code",
                             "table 'api_calls' is missing or malformed"}}) {
    TempDir dir;
    const auto path = dir / "rank-0.sqlite";
    WriteVersion2File(path);
    DowngradeToVersion1(path);
    testing::ExecSql(path, c.sql);
    auto reader = TraceReader::Open(path);
    ASSERT_FALSE(reader.ok()) << c.sql;
    EXPECT_EQ(reader.status().code(), StatusCode::kCorrupt) << c.sql;
    EXPECT_NE(reader.status().message().find(c.words), std::string::npos) << reader.status().message();
    EXPECT_NE(reader.status().message().find(path.string()), std::string::npos) << reader.status().message();
  }
}

// A version 1 file large enough for several load chunks, with and without the block
// directory: every row lands in place with its external id 0.
TEST(SchemaVersion1, ParallelLoadOfManyBlocks) {
  TempDir dir;
  const auto path = dir / "rank-0.sqlite";
  constexpr size_t kCalls = 140000;  // three blocks of 65,536 row ids
  {
    auto writer = MustCreate(path, MakeIdentity("run-v1", 0, 1));
    ASSERT_NE(writer, nullptr);
    LaneId lanes[2];
    for (int64_t tid : {1, 2}) {
      Lane lane;
      lane.kind = LaneKind::kCpuThread;
      lane.tid = tid;
      lanes[tid - 1] = writer->AddLane(lane);
    }
    EventTables batch;
    for (size_t i = 0; i < kCalls; ++i) {
      ApiCallEvent call;
      call.lane = lanes[i % 2];
      call.start_ns = static_cast<TimestampNs>(i);
      call.end_ns = call.start_ns + 1;
      call.correlation_id = i;
      call.external_id = i + 1;
      batch.api_calls.push_back(call);
    }
    ASSERT_TRUE(writer->Submit(std::move(batch)));
    ASSERT_TRUE(writer->Close().ok());
  }
  DowngradeToVersion1(path);
  for (bool with_directory : {true, false}) {
    if (!with_directory) testing::ExecSql(path, "DELETE FROM lane_blocks");
    auto reader = MustOpen(path);
    ASSERT_NE(reader, nullptr);
    auto trace = reader->LoadAll(LoadOptions{3});
    ASSERT_TRUE(trace.ok()) << trace.status().message();
    const std::vector<ApiCallEvent>& calls = trace->events.api_calls;
    ASSERT_EQ(calls.size(), kCalls);
    for (size_t i = 0; i < calls.size(); ++i) {
      // Lane 1 holds the even calls in time order, then lane 2 the odd ones.
      const uint64_t expected = i < kCalls / 2 ? 2 * i : 2 * (i - kCalls / 2) + 1;
      ASSERT_EQ(calls[i].correlation_id, expected) << i;
      ASSERT_EQ(calls[i].external_id, 0u) << i;
    }
    EXPECT_TRUE(trace->events.overheads.empty());
  }
}

}  // namespace
}  // namespace rankscope::trace
