// Every event kind and every field survives writer -> SQLite -> reader unchanged.
#include <cstring>
#include <limits>

#include <sqlite3.h>

#include <gtest/gtest.h>

#include "trace/reader.h"
#include "trace/schema.h"
#include "trace/run_dir.h"
#include "trace_test_util.h"

namespace rankscope::trace {
namespace {

using testing::MakeIdentity;
using testing::MustCreate;
using testing::TempDir;

// Field-by-field equality through the bytes of the fixed-size records is fragile (padding),
// so each kind compares its fields explicitly.
void ExpectCommon(const EventCommon& a, const EventCommon& b) {
  EXPECT_EQ(a.lane, b.lane);
  EXPECT_EQ(a.start_ns, b.start_ns);
  EXPECT_EQ(a.end_ns, b.end_ns);
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.correlation_id, b.correlation_id);
}
void ExpectNvtx(const NvtxAttributes& a, const NvtxAttributes& b) {
  EXPECT_EQ(a.domain, b.domain);
  EXPECT_EQ(a.category, b.category);
  EXPECT_EQ(a.color, b.color);
  EXPECT_EQ(a.payload.kind, b.payload.kind);
  EXPECT_EQ(a.payload.int_value, b.payload.int_value);
  EXPECT_EQ(a.payload.real_value, b.payload.real_value);
  EXPECT_EQ(a.args, b.args);
}

struct Fixture {
  LaneId gpu = 0, thread = 0, thread2 = 0, comm = 0, counter = 0;
  EventTables events;
};

// One of each kind, with every field set to a value that differs from its default and
// exercises the storage edges (uint64 above INT64_MAX, negative int32, large uint32).
Fixture Populate(TraceWriter& w) {
  Fixture f;
  Lane gpu;
  gpu.kind = LaneKind::kGpuStream;
  gpu.role = LaneRole::kCompute;
  gpu.device = 3;
  gpu.context = 11;
  gpu.stream = std::numeric_limits<uint64_t>::max() - 5;
  gpu.pid = 4242;
  gpu.name = "stream 7";
  f.gpu = w.AddLane(gpu);
  Lane thread;
  thread.kind = LaneKind::kCpuThread;
  thread.pid = 4242;
  thread.tid = 4243;
  thread.name = "main";
  f.thread = w.AddLane(thread);
  thread.tid = 4244;
  thread.name = "comm";
  thread.role = LaneRole::kComm;
  f.thread2 = w.AddLane(thread);
  Lane comm;
  comm.kind = LaneKind::kCommunicator;
  comm.comm_hash = 0xfedcba9876543210ULL;
  comm.name = "world";
  f.comm = w.AddLane(comm);
  Lane counter;
  counter.kind = LaneKind::kCounter;
  counter.device = 3;
  counter.name = "gpu memory [bytes]";
  f.counter = w.AddLane(counter);

  KernelEvent k;
  k.lane = f.gpu;
  k.start_ns = 1'700'000'000'000'000'001;
  k.end_ns = k.start_ns + 12345;
  k.name = w.Intern("_Z4gemmPfS_S_iii");
  k.correlation_id = 0x8000000000000001ULL;
  k.grid = {128, 2, 3};
  k.block = {256, 4, 1};
  k.registers_per_thread = 96;
  k.static_shared_bytes = 49152;
  k.dynamic_shared_bytes = 4000000000u;
  f.events.kernels.push_back(k);

  MemcpyEvent c;
  c.lane = f.gpu;
  c.start_ns = k.end_ns + 10;
  c.end_ns = c.start_ns + 999;
  c.name = w.Intern("Memcpy PtoP");
  c.correlation_id = 77;
  c.bytes = 0xffffffffffULL;
  c.copy_kind = CopyKind::kPeerToPeer;
  c.src_kind = MemoryKind::kDevice;
  c.dst_kind = MemoryKind::kManaged;
  c.src_device = 3;
  c.dst_device = 5;
  f.events.memcpys.push_back(c);

  MemsetEvent s;
  s.lane = f.gpu;
  s.start_ns = c.end_ns + 1;
  s.end_ns = s.start_ns + 5;
  s.name = w.Intern("Memset");
  s.correlation_id = 78;
  s.bytes = 1 << 20;
  s.value = 0xdeadbeef;
  s.memory_kind = MemoryKind::kPinned;
  f.events.memsets.push_back(s);

  ApiCallEvent a;
  a.lane = f.thread;
  a.start_ns = k.start_ns - 5000;
  a.end_ns = a.start_ns + 3000;
  a.name = w.Intern("cudaLaunchKernel");
  a.correlation_id = k.correlation_id;
  a.domain = ApiDomain::kRuntime;
  a.callback_id = 211;
  a.return_code = -3;
  a.external_id = 0xc000000000000005ULL;  // above INT64_MAX: stored by its bits
  f.events.api_calls.push_back(a);

  SyncEvent y;
  y.lane = f.thread;
  y.start_ns = a.end_ns + 10;
  y.end_ns = y.start_ns + 50000;
  y.name = w.Intern("cudaStreamSynchronize");
  y.correlation_id = 90;
  y.sync_kind = SyncKind::kStreamWaitEvent;
  y.context = 11;
  y.stream = std::numeric_limits<uint64_t>::max();
  y.cuda_event_id = 0x9000000000000000ULL;
  f.events.syncs.push_back(y);

  NvtxRangeEvent r;
  r.lane = f.thread;
  r.start_ns = a.start_ns - 100;
  r.end_ns = y.end_ns + 100;
  r.name = w.Intern("rankscope.step");
  r.correlation_id = 5;
  r.domain = w.Intern("rankscope");
  r.category = 7;
  r.color = 0xff00ff00;
  r.payload = {PayloadKind::kUint64, static_cast<int64_t>(0xffffffffffffff00ULL), 0.0};
  r.args = w.Intern(R"({"step":3,"samples":256})");
  r.style = NvtxRangeStyle::kStartEnd;
  r.end_lane = f.thread2;
  f.events.nvtx_ranges.push_back(r);
  NvtxRangeEvent r2 = r;
  r2.start_ns += 1;
  r2.payload = {PayloadKind::kDouble, 0, -2.5e-300};
  r2.style = NvtxRangeStyle::kPushPop;
  r2.end_lane = kNoLane;
  f.events.nvtx_ranges.push_back(r2);

  NvtxMarkEvent m;
  m.lane = f.thread2;
  m.start_ns = m.end_ns = r.start_ns + 42;
  m.name = w.Intern("checkpoint saved");
  m.correlation_id = 6;
  m.domain = w.Intern("app");
  m.category = 1;
  m.color = 0x80123456;
  m.payload = {PayloadKind::kInt32, -17, 0.0};
  f.events.nvtx_marks.push_back(m);

  CollectiveEvent g;
  g.lane = f.comm;
  g.start_ns = k.end_ns + 100;
  g.end_ns = g.start_ns + 777777;
  g.name = w.Intern("ncclAllReduce");
  g.correlation_id = 1234;
  g.comm_hash = 0xfedcba9876543210ULL;
  g.sequence = 41;
  g.op = CollectiveOp::kReduceScatter;
  g.reduce_op = ReduceOp::kAvg;
  g.datatype = DataType::kBfloat16;
  g.bytes = 25ULL << 20;
  g.root = 2;
  g.peer = 6;
  g.comm_rank = 3;
  g.comm_size = 8;
  g.channels = 16;
  g.algorithm = w.Intern("RING");
  g.protocol = w.Intern("LL128");
  f.events.collectives.push_back(g);

  f.events.counter_samples.push_back({f.counter, k.start_ns, 1.5e9});
  f.events.counter_samples.push_back({f.counter, k.end_ns, -0.25});

  CollectivePartEvent p;
  p.lane = f.comm;
  p.start_ns = g.start_ns + 10;
  p.end_ns = p.start_ns + 5000;
  p.name = w.Intern("proxy send step");
  p.correlation_id = 1235;
  p.comm_hash = g.comm_hash;
  p.sequence = g.sequence;
  p.part_kind = CollectivePartKind::kProxySendStep;
  p.channel = 31;
  p.peer = 7;
  p.step = 123456;
  p.bytes = (1ULL << 63) + 3;
  f.events.collective_parts.push_back(p);
  CollectivePartEvent channel;  // the unknowns: channel, peer and step -1, bytes 0
  channel.lane = f.comm;
  channel.start_ns = p.start_ns + 1;
  channel.end_ns = channel.start_ns + 40;
  channel.comm_hash = g.comm_hash;
  channel.sequence = g.sequence;
  channel.part_kind = CollectivePartKind::kKernelChannel;
  f.events.collective_parts.push_back(channel);

  OverheadEvent o;
  o.lane = f.thread;
  o.start_ns = a.start_ns - 2000;
  o.end_ns = o.start_ns + 1500;
  o.name = w.Intern("CUPTI overhead");
  o.correlation_id = 0x8000000000000002ULL;
  o.overhead_kind = OverheadKind::kUvmActivityInit;
  f.events.overheads.push_back(o);
  return f;
}

TEST(RoundTrip, EveryEventKindAndField) {
  TempDir dir;
  const auto path = dir / "rank-1.sqlite";
  auto writer = MustCreate(path, MakeIdentity("run-abc", 1, 4));
  ASSERT_NE(writer, nullptr);
  Fixture f = Populate(*writer);
  EventTables expected = f.events;
  writer->SetMeta("trainer.batch", "64");
  writer->AddDrops(DropRecord{"cupti", "buffer overflow", 3, 11, 7, 12});
  writer->AddDrops(DropRecord{"cupti", "buffer overflow", 3, 11, 7, 3});
  ASSERT_TRUE(writer->Submit(std::move(f.events)));
  ASSERT_TRUE(writer->Close().ok());
  EXPECT_EQ(writer->stats().events_committed, expected.size());

  auto reader = TraceReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  auto loaded = (*reader)->LoadAll();
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  const RankTrace& t = *loaded;
  const EventTables& e = t.events;

  ASSERT_EQ(e.kernels.size(), 1u);
  const KernelEvent& k = e.kernels[0];
  ExpectCommon(k, expected.kernels[0]);
  EXPECT_EQ(k.grid, expected.kernels[0].grid);
  EXPECT_EQ(k.block, expected.kernels[0].block);
  EXPECT_EQ(k.registers_per_thread, 96u);
  EXPECT_EQ(k.static_shared_bytes, 49152u);
  EXPECT_EQ(k.dynamic_shared_bytes, 4000000000u);
  EXPECT_EQ(t.str(k.name), "_Z4gemmPfS_S_iii");

  ASSERT_EQ(e.memcpys.size(), 1u);
  const MemcpyEvent& c = e.memcpys[0];
  ExpectCommon(c, expected.memcpys[0]);
  EXPECT_EQ(c.bytes, 0xffffffffffULL);
  EXPECT_EQ(c.copy_kind, CopyKind::kPeerToPeer);
  EXPECT_EQ(c.src_kind, MemoryKind::kDevice);
  EXPECT_EQ(c.dst_kind, MemoryKind::kManaged);
  EXPECT_EQ(c.src_device, 3);
  EXPECT_EQ(c.dst_device, 5);

  ASSERT_EQ(e.memsets.size(), 1u);
  ExpectCommon(e.memsets[0], expected.memsets[0]);
  EXPECT_EQ(e.memsets[0].bytes, 1u << 20);
  EXPECT_EQ(e.memsets[0].value, 0xdeadbeef);
  EXPECT_EQ(e.memsets[0].memory_kind, MemoryKind::kPinned);

  ASSERT_EQ(e.api_calls.size(), 1u);
  ExpectCommon(e.api_calls[0], expected.api_calls[0]);
  EXPECT_EQ(e.api_calls[0].domain, ApiDomain::kRuntime);
  EXPECT_EQ(e.api_calls[0].callback_id, 211u);
  EXPECT_EQ(e.api_calls[0].return_code, -3);
  EXPECT_EQ(e.api_calls[0].correlation_id, k.correlation_id);
  EXPECT_EQ(e.api_calls[0].external_id, 0xc000000000000005ULL);

  ASSERT_EQ(e.syncs.size(), 1u);
  ExpectCommon(e.syncs[0], expected.syncs[0]);
  EXPECT_EQ(e.syncs[0].sync_kind, SyncKind::kStreamWaitEvent);
  EXPECT_EQ(e.syncs[0].context, 11u);
  EXPECT_EQ(e.syncs[0].stream, std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(e.syncs[0].cuda_event_id, 0x9000000000000000ULL);

  ASSERT_EQ(e.nvtx_ranges.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    ExpectCommon(e.nvtx_ranges[i], expected.nvtx_ranges[i]);
    ExpectNvtx(e.nvtx_ranges[i], expected.nvtx_ranges[i]);
    EXPECT_EQ(e.nvtx_ranges[i].style, expected.nvtx_ranges[i].style);
    EXPECT_EQ(e.nvtx_ranges[i].end_lane, expected.nvtx_ranges[i].end_lane);
  }
  EXPECT_EQ(static_cast<uint64_t>(e.nvtx_ranges[0].payload.int_value), 0xffffffffffffff00ULL);
  EXPECT_EQ(e.nvtx_ranges[1].payload.real_value, -2.5e-300);
  EXPECT_EQ(t.str(e.nvtx_ranges[0].args), R"({"step":3,"samples":256})");
  EXPECT_EQ(t.str(e.nvtx_ranges[0].domain), "rankscope");

  ASSERT_EQ(e.nvtx_marks.size(), 1u);
  ExpectCommon(e.nvtx_marks[0], expected.nvtx_marks[0]);
  ExpectNvtx(e.nvtx_marks[0], expected.nvtx_marks[0]);

  ASSERT_EQ(e.collectives.size(), 1u);
  const CollectiveEvent& g = e.collectives[0];
  const CollectiveEvent& x = expected.collectives[0];
  ExpectCommon(g, x);
  EXPECT_EQ(g.comm_hash, x.comm_hash);
  EXPECT_EQ(g.sequence, 41u);
  EXPECT_EQ(g.op, CollectiveOp::kReduceScatter);
  EXPECT_EQ(g.reduce_op, ReduceOp::kAvg);
  EXPECT_EQ(g.datatype, DataType::kBfloat16);
  EXPECT_EQ(g.bytes, 25ULL << 20);
  EXPECT_EQ(g.root, 2);
  EXPECT_EQ(g.peer, 6);
  EXPECT_EQ(g.comm_rank, 3);
  EXPECT_EQ(g.comm_size, 8);
  EXPECT_EQ(g.channels, 16u);
  EXPECT_EQ(t.str(g.algorithm), "RING");
  EXPECT_EQ(t.str(g.protocol), "LL128");

  ASSERT_EQ(e.counter_samples.size(), 2u);
  EXPECT_EQ(e.counter_samples[0].lane, f.counter);
  EXPECT_EQ(e.counter_samples[0].ts_ns, expected.counter_samples[0].ts_ns);
  EXPECT_EQ(e.counter_samples[0].value, 1.5e9);
  EXPECT_EQ(e.counter_samples[1].value, -0.25);

  ASSERT_EQ(e.collective_parts.size(), 2u);
  const CollectivePartEvent& p = e.collective_parts[0];
  ExpectCommon(p, expected.collective_parts[0]);
  EXPECT_EQ(p.comm_hash, 0xfedcba9876543210ULL);
  EXPECT_EQ(p.sequence, 41u);
  EXPECT_EQ(p.part_kind, CollectivePartKind::kProxySendStep);
  EXPECT_EQ(p.channel, 31);
  EXPECT_EQ(p.peer, 7);
  EXPECT_EQ(p.step, 123456);
  EXPECT_EQ(p.bytes, (1ULL << 63) + 3);
  EXPECT_EQ(t.str(p.name), "proxy send step");
  const CollectivePartEvent& channel = e.collective_parts[1];
  ExpectCommon(channel, expected.collective_parts[1]);
  EXPECT_EQ(channel.part_kind, CollectivePartKind::kKernelChannel);
  EXPECT_EQ(channel.channel, -1);
  EXPECT_EQ(channel.peer, -1);
  EXPECT_EQ(channel.step, -1);
  EXPECT_EQ(channel.bytes, 0u);

  ASSERT_EQ(e.overheads.size(), 1u);
  ExpectCommon(e.overheads[0], expected.overheads[0]);
  EXPECT_EQ(e.overheads[0].overhead_kind, OverheadKind::kUvmActivityInit);
  EXPECT_EQ(t.str(e.overheads[0].name), "CUPTI overhead");

  // Lanes, including identity fields and the longest-event bookkeeping.
  ASSERT_EQ(t.lanes.size(), 5u);
  const Lane* gpu = t.lane(f.gpu);
  ASSERT_NE(gpu, nullptr);
  EXPECT_EQ(gpu->kind, LaneKind::kGpuStream);
  EXPECT_EQ(gpu->role, LaneRole::kCompute);
  EXPECT_EQ(gpu->device, 3);
  EXPECT_EQ(gpu->context, 11u);
  EXPECT_EQ(gpu->stream, std::numeric_limits<uint64_t>::max() - 5);
  EXPECT_EQ(gpu->pid, 4242);
  EXPECT_EQ(gpu->name, "stream 7");
  EXPECT_EQ(gpu->max_duration_ns, 12345);
  EXPECT_EQ(t.lane(f.thread2)->role, LaneRole::kComm);
  EXPECT_EQ(t.lane(f.thread2)->tid, 4244);
  EXPECT_EQ(t.lane(f.comm)->comm_hash, 0xfedcba9876543210ULL);
  EXPECT_EQ(t.lane(f.counter)->kind, LaneKind::kCounter);

  // Meta: identity, version, both calibration pairs, extra keys.
  const RankMeta& meta = t.meta;
  EXPECT_EQ(meta.run_id, "run-abc");
  EXPECT_EQ(meta.rank, 1);
  EXPECT_EQ(meta.world_size, 4);
  EXPECT_EQ(meta.local_rank, 1);
  EXPECT_EQ(meta.host, "testhost");
  EXPECT_EQ(meta.pid, getpid());
  EXPECT_EQ(meta.command_line, "trainer --steps 3");
  EXPECT_EQ(meta.backend, "gloo");
  EXPECT_EQ(meta.schema_version, kSchemaVersion);
  EXPECT_FALSE(meta.tool_version.empty());
  EXPECT_TRUE(meta.closed_cleanly);
  ASSERT_TRUE(meta.clock_start.has_value());
  ASSERT_TRUE(meta.clock_end.has_value());
  EXPECT_LE(meta.clock_start->realtime_ns, meta.clock_end->realtime_ns);
  EXPECT_LE(meta.clock_start->monotonic_ns, meta.clock_end->monotonic_ns);
  EXPECT_EQ(meta.entries.at("trainer.batch"), "64");

  ASSERT_EQ(t.drops.size(), 1u);
  EXPECT_EQ(t.drops[0].source, "cupti");
  EXPECT_EQ(t.drops[0].reason, "buffer overflow");
  EXPECT_EQ(t.drops[0].device, 3);
  EXPECT_EQ(t.drops[0].context, 11u);
  EXPECT_EQ(t.drops[0].stream, 7u);
  EXPECT_EQ(t.drops[0].count, 15u);
}

TEST(RoundTrip, InterningAndLaneIdentity) {
  TempDir dir;
  auto writer = MustCreate(dir / "rank-0.sqlite", MakeIdentity("r", 0, 1));
  ASSERT_NE(writer, nullptr);
  EXPECT_EQ(writer->Intern(""), kEmptyString);
  const StringId a = writer->Intern("a");
  EXPECT_EQ(writer->Intern("a"), a);
  EXPECT_NE(writer->Intern("b"), a);
  Lane lane;
  lane.kind = LaneKind::kCpuThread;
  lane.tid = 5;
  const LaneId id = writer->AddLane(lane);
  lane.name = "worker";  // a name given later renames, it does not add
  EXPECT_EQ(writer->AddLane(lane), id);
  lane.tid = 6;
  EXPECT_NE(writer->AddLane(lane), id);
  ASSERT_TRUE(writer->Close().ok());
  auto reader = TraceReader::Open(dir / "rank-0.sqlite");
  ASSERT_TRUE(reader.ok());
  auto lanes = (*reader)->ReadLanes();
  ASSERT_TRUE(lanes.ok());
  ASSERT_EQ(lanes->size(), 2u);
  EXPECT_EQ((*lanes)[0].name, "worker");
  auto strings = (*reader)->ReadStrings();
  ASSERT_TRUE(strings.ok());
  EXPECT_EQ((*strings)[a], "a");
}

TEST(RoundTrip, LaneRangeQueryReturnsOverlappingEvents) {
  TempDir dir;
  auto writer = MustCreate(dir / "rank-0.sqlite", MakeIdentity("r", 0, 1));
  ASSERT_NE(writer, nullptr);
  Lane a_desc, b_desc;
  a_desc.kind = b_desc.kind = LaneKind::kGpuStream;
  a_desc.stream = 1;
  b_desc.stream = 2;
  const LaneId a = writer->AddLane(a_desc), b = writer->AddLane(b_desc);
  EventTables batch;
  auto kernel = [&](LaneId lane, TimestampNs s, TimestampNs e) {
    KernelEvent k;
    k.lane = lane;
    k.start_ns = s;
    k.end_ns = e;
    batch.kernels.push_back(k);
  };
  kernel(a, 0, 1000);     // long: starts well before the window, reaches into it
  kernel(a, 100, 200);    // ends before the window
  kernel(a, 400, 500);    // ends exactly at t0: [400, 500) does not overlap [500, 600)
  kernel(a, 550, 560);    // inside
  kernel(a, 600, 700);    // starts at t1: outside
  kernel(b, 550, 560);    // other lane
  NvtxMarkEvent at_t0;
  at_t0.lane = a;
  at_t0.start_ns = at_t0.end_ns = 500;
  batch.nvtx_marks.push_back(at_t0);
  batch.counter_samples.push_back({a, 599, 1.0});
  batch.counter_samples.push_back({a, 600, 2.0});
  ASSERT_TRUE(writer->Submit(std::move(batch)));
  ASSERT_TRUE(writer->Close().ok());

  auto reader = TraceReader::Open(dir / "rank-0.sqlite");
  ASSERT_TRUE(reader.ok());
  auto range = (*reader)->ReadLaneRange(a, 500, 600);
  ASSERT_TRUE(range.ok()) << range.status().message();
  ASSERT_EQ(range->kernels.size(), 2u);
  EXPECT_EQ(range->kernels[0].start_ns, 0);
  EXPECT_EQ(range->kernels[1].start_ns, 550);
  ASSERT_EQ(range->nvtx_marks.size(), 1u);
  ASSERT_EQ(range->counter_samples.size(), 1u);
  EXPECT_EQ(range->counter_samples[0].ts_ns, 599);
  EXPECT_FALSE((*reader)->ReadLaneRange(a, 10, 5).ok());
}

// The earliest event of any table: here a counter sample (ts_ns) before every span.
TEST(RoundTrip, FirstEventTimeLooksAtEveryTable) {
  TempDir dir;
  testing::WriteRankFile(dir / "rank-0.sqlite", MakeIdentity("r", 0, 1), 3);  // kernels from 0
  {
    auto reader = TraceReader::Open(dir / "rank-0.sqlite");
    ASSERT_TRUE(reader.ok());
    EXPECT_EQ(*(*reader)->FirstEventTime(), std::optional<TimestampNs>(0));
  }
  auto writer = MustCreate(dir / "rank-1.sqlite", MakeIdentity("r", 1, 2));
  ASSERT_NE(writer, nullptr);
  Lane lane;
  lane.kind = LaneKind::kCounter;
  const LaneId id = writer->AddLane(lane);
  EventTables batch;
  KernelEvent k;
  k.lane = id;
  k.start_ns = 50;
  k.end_ns = 60;
  batch.kernels.push_back(k);
  batch.counter_samples.push_back({id, -7, 1.0});
  ASSERT_TRUE(writer->Submit(std::move(batch)));
  ASSERT_TRUE(writer->Close().ok());
  auto reader = TraceReader::Open(dir / "rank-1.sqlite");
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ(*(*reader)->FirstEventTime(), std::optional<TimestampNs>(-7));

  auto empty_writer = MustCreate(dir / "rank-2.sqlite", MakeIdentity("r", 2, 3));
  ASSERT_NE(empty_writer, nullptr);
  ASSERT_TRUE(empty_writer->Close().ok());
  auto empty = TraceReader::Open(dir / "rank-2.sqlite");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(*(*empty)->FirstEventTime(), std::nullopt);
}

// The version 2 tables and api_calls.external_id through the range query. The long event
// on each lane is found only if the writer counted it in the lane's max_duration_ns.
TEST(RoundTrip, LaneRangeQueryCoversTheVersion2Tables) {
  TempDir dir;
  auto writer = MustCreate(dir / "rank-0.sqlite", MakeIdentity("r", 0, 1));
  ASSERT_NE(writer, nullptr);
  Lane comm_desc, thread_desc;
  comm_desc.kind = LaneKind::kCommunicator;
  comm_desc.comm_hash = 0xabcULL;
  thread_desc.kind = LaneKind::kCpuThread;
  thread_desc.tid = 12;
  const LaneId comm = writer->AddLane(comm_desc), thread = writer->AddLane(thread_desc);
  EventTables batch;
  auto part = [&](TimestampNs s, TimestampNs e, int32_t step) {
    CollectivePartEvent p;
    p.lane = comm;
    p.start_ns = s;
    p.end_ns = e;
    p.comm_hash = 0xabcULL;
    p.sequence = 9;
    p.part_kind = CollectivePartKind::kProxyRecvStep;
    p.step = step;
    batch.collective_parts.push_back(p);
  };
  part(0, 10000, 1);  // long: starts well before the window, reaches into it
  part(400, 500, 2);  // ends exactly at t0
  part(550, 560, 3);  // inside
  part(600, 700, 4);  // starts at t1
  auto overhead = [&](TimestampNs s, TimestampNs e, OverheadKind kind) {
    OverheadEvent o;
    o.lane = thread;
    o.start_ns = s;
    o.end_ns = e;
    o.overhead_kind = kind;
    batch.overheads.push_back(o);
  };
  overhead(0, 9000, OverheadKind::kCuptiBufferFlush);
  overhead(560, 570, OverheadKind::kDriverCompiler);
  overhead(100, 200, OverheadKind::kCuptiResource);  // before the window
  ApiCallEvent call;
  call.lane = thread;
  call.start_ns = 520;
  call.end_ns = 530;
  call.correlation_id = 31;
  call.external_id = 77;
  batch.api_calls.push_back(call);
  ASSERT_TRUE(writer->Submit(std::move(batch)));
  ASSERT_TRUE(writer->Close().ok());

  auto reader = TraceReader::Open(dir / "rank-0.sqlite");
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  auto on_comm = (*reader)->ReadLaneRange(comm, 500, 600);
  ASSERT_TRUE(on_comm.ok()) << on_comm.status().message();
  std::vector<int32_t> steps;
  for (const CollectivePartEvent& p : on_comm->collective_parts) steps.push_back(p.step);
  EXPECT_EQ(steps, (std::vector<int32_t>{1, 3}));
  EXPECT_EQ(on_comm->collective_parts[0].part_kind, CollectivePartKind::kProxyRecvStep);
  EXPECT_EQ(on_comm->collective_parts[0].comm_hash, 0xabcULL);
  EXPECT_EQ(on_comm->collective_parts[0].sequence, 9u);
  EXPECT_TRUE(on_comm->overheads.empty());
  EXPECT_TRUE(on_comm->api_calls.empty());

  auto on_thread = (*reader)->ReadLaneRange(thread, 500, 600);
  ASSERT_TRUE(on_thread.ok()) << on_thread.status().message();
  std::vector<OverheadKind> kinds;
  for (const OverheadEvent& o : on_thread->overheads) kinds.push_back(o.overhead_kind);
  EXPECT_EQ(kinds,
            (std::vector<OverheadKind>{OverheadKind::kCuptiBufferFlush, OverheadKind::kDriverCompiler}));
  ASSERT_EQ(on_thread->api_calls.size(), 1u);
  EXPECT_EQ(on_thread->api_calls[0].correlation_id, 31u);
  EXPECT_EQ(on_thread->api_calls[0].external_id, 77u);
  EXPECT_TRUE(on_thread->collective_parts.empty());
}

TEST(RoundTrip, LoadAllSortsByLaneAndTime) {
  TempDir dir;
  auto writer = MustCreate(dir / "rank-0.sqlite", MakeIdentity("r", 0, 1));
  ASSERT_NE(writer, nullptr);
  Lane l1, l2;
  l1.kind = l2.kind = LaneKind::kGpuStream;
  l2.stream = 1;
  const LaneId a = writer->AddLane(l1), b = writer->AddLane(l2);
  for (TimestampNs t : {300, 100, 200}) {
    EventTables batch;
    KernelEvent k;
    k.lane = b;
    k.start_ns = t;
    k.end_ns = t + 1;
    batch.kernels.push_back(k);
    k.lane = a;
    batch.kernels.push_back(k);
    OverheadEvent o;
    o.lane = b;
    o.start_ns = t;
    o.end_ns = t + 1;
    batch.overheads.push_back(o);
    o.lane = a;
    batch.overheads.push_back(o);
    ASSERT_TRUE(writer->Submit(std::move(batch)));
  }
  ASSERT_TRUE(writer->Close().ok());
  auto reader = TraceReader::Open(dir / "rank-0.sqlite");
  ASSERT_TRUE(reader.ok());
  auto trace = (*reader)->LoadAll();
  ASSERT_TRUE(trace.ok());
  std::vector<std::pair<LaneId, TimestampNs>> order, overheads;
  for (const KernelEvent& k : trace->events.kernels) order.emplace_back(k.lane, k.start_ns);
  for (const OverheadEvent& o : trace->events.overheads) overheads.emplace_back(o.lane, o.start_ns);
  const std::vector<std::pair<LaneId, TimestampNs>> expected = {
      {a, 100}, {a, 200}, {a, 300}, {b, 100}, {b, 200}, {b, 300}};
  EXPECT_EQ(order, expected);
  EXPECT_EQ(overheads, expected);
}

}  // namespace
}  // namespace rankscope::trace

namespace rankscope::trace {
namespace {

// Enough rows for several load chunks, spread over lanes out of order.
std::filesystem::path WriteManyKernels(const testing::TempDir& dir, int rows) {
  const auto path = dir / "rank-0.sqlite";
  auto writer = testing::MustCreate(path, testing::MakeIdentity("r", 0, 1));
  if (!writer) return path;
  LaneId lanes[3];
  for (uint64_t s = 0; s < 3; ++s) {
    Lane lane;
    lane.kind = LaneKind::kGpuStream;
    lane.stream = s;
    lanes[s] = writer->AddLane(lane);
  }
  EventTables batch;
  for (int i = 0; i < rows; ++i) {
    KernelEvent k;
    k.lane = lanes[(i * 7) % 3];
    k.start_ns = i;
    k.end_ns = i + 1;
    k.correlation_id = static_cast<uint64_t>(i);
    batch.kernels.push_back(k);
  }
  EXPECT_TRUE(writer->Submit(std::move(batch)));
  EXPECT_TRUE(writer->Close().ok());
  return path;
}

std::vector<uint64_t> Correlations(const EventTables& t) {
  std::vector<uint64_t> ids;
  for (const KernelEvent& k : t.kernels) ids.push_back(k.correlation_id);
  return ids;
}

TEST(Load, ParallelChunkedLoadEqualsSingleThreaded) {
  testing::TempDir dir;
  const auto path = WriteManyKernels(dir, 200000);
  auto reader = TraceReader::Open(path);
  ASSERT_TRUE(reader.ok());
  auto one = (*reader)->LoadAll(LoadOptions{1});
  auto four = (*reader)->LoadAll(LoadOptions{4});
  ASSERT_TRUE(one.ok() && four.ok());
  ASSERT_EQ(one->events.kernels.size(), 200000u);
  EXPECT_EQ(Correlations(one->events), Correlations(four->events));
  for (size_t i = 1; i < one->events.kernels.size(); ++i) {
    const KernelEvent& a = one->events.kernels[i - 1];
    const KernelEvent& b = one->events.kernels[i];
    ASSERT_TRUE(a.lane < b.lane || (a.lane == b.lane && a.start_ns <= b.start_ns)) << i;
  }
}

TEST(Load, RowIdGapsFromOtherToolsAreClosed) {
  testing::TempDir dir;
  const auto path = WriteManyKernels(dir, 150000);
  testing::ExecSql(path, "DELETE FROM kernels WHERE id % 3 = 0 OR id BETWEEN 60000 AND 70000");
  auto reader = TraceReader::Open(path);
  ASSERT_TRUE(reader.ok());
  auto trace = (*reader)->LoadAll(LoadOptions{2});
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  size_t expected = 0;
  for (int id = 1; id <= 150000; ++id) expected += (id % 3 != 0 && (id < 60000 || id > 70000));
  EXPECT_EQ(trace->events.kernels.size(), expected);
  for (const KernelEvent& k : trace->events.kernels) {
    const int64_t id = static_cast<int64_t>(k.correlation_id) + 1;
    ASSERT_TRUE(id % 3 != 0 && (id < 60000 || id > 70000)) << "row " << id << " was deleted";
  }
}

TEST(Load, CleanCloseBuildsTheLaneTimeIndexes) {
  testing::TempDir dir;
  const auto path = WriteManyKernels(dir, 10);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT count(*) FROM sqlite_schema WHERE type='index' AND name LIKE '%_lane_time'",
                               -1, &stmt, nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(stmt, 0), 11);  // 10 event tables + counter_samples
  sqlite3_finalize(stmt);
  // The range query uses it.
  ASSERT_EQ(sqlite3_prepare_v2(db, "EXPLAIN QUERY PLAN SELECT * FROM kernels WHERE lane = 1 AND start_ns >= 0 AND start_ns < 5",
                               -1, &stmt, nullptr),
            SQLITE_OK);
  std::string plan;
  while (sqlite3_step(stmt) == SQLITE_ROW) plan += reinterpret_cast<const char*>(sqlite3_column_text(stmt, 3));
  EXPECT_NE(plan.find("kernels_lane_time"), std::string::npos) << plan;
  sqlite3_finalize(stmt);
  sqlite3_close(db);
}

}  // namespace
}  // namespace rankscope::trace

namespace rankscope::trace {
namespace {

std::vector<std::pair<LaneId, uint64_t>> LaneAndCorrelation(const std::filesystem::path& path) {
  auto reader = TraceReader::Open(path);
  EXPECT_TRUE(reader.ok()) << reader.status().message();
  if (!reader.ok()) return {};
  auto trace = (*reader)->LoadAll(LoadOptions{2});
  EXPECT_TRUE(trace.ok()) << trace.status().message();
  std::vector<std::pair<LaneId, uint64_t>> rows;
  if (trace.ok()) {
    for (const KernelEvent& k : trace->events.kernels) rows.emplace_back(k.lane, k.correlation_id);
  }
  return rows;
}

TEST(Load, MissingOrWrongBlockCountsFallBackToCounting) {
  testing::TempDir dir;
  const auto path = WriteManyKernels(dir, 140000);
  const auto expected = LaneAndCorrelation(path);
  ASSERT_EQ(expected.size(), 140000u);

  testing::ExecSql(path, "DELETE FROM lane_blocks WHERE block = 1");  // one block not counted
  EXPECT_EQ(LaneAndCorrelation(path), expected);
  // Same total, wrong distribution over lanes.
  testing::ExecSql(path, "UPDATE lane_blocks SET rows = rows + 1 WHERE lane = 1 AND block = 0;"
             "UPDATE lane_blocks SET rows = rows - 1 WHERE lane = 2 AND block = 0");
  EXPECT_EQ(LaneAndCorrelation(path), expected);
  testing::ExecSql(path, "UPDATE lane_blocks SET lane = lane + 10");  // counts for lanes that do not exist
  EXPECT_EQ(LaneAndCorrelation(path), expected);
  testing::ExecSql(path, "DELETE FROM lane_blocks");
  EXPECT_EQ(LaneAndCorrelation(path), expected);
}

TEST(Load, RowsOnUndeclaredLanesAreKeptInLaneOrder) {
  testing::TempDir dir;
  const auto path = WriteManyKernels(dir, 1000);
  testing::ExecSql(path, "UPDATE kernels SET lane = 99 WHERE id <= 5; UPDATE kernels SET lane = 0 WHERE id > 995");
  const auto rows = LaneAndCorrelation(path);
  ASSERT_EQ(rows.size(), 1000u);
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(rows[i].first, 0u);
  for (size_t i = 995; i < 1000; ++i) EXPECT_EQ(rows[i].first, 99u);
  EXPECT_TRUE(std::is_sorted(rows.begin(), rows.end(),
                             [](const auto& a, const auto& b) { return a.first < b.first; }));
}

TEST(Load, SortByLaneAndTimeOrdersBatches) {
  EventTables t;
  for (auto [lane, start] : {std::pair{2u, 5}, {1u, 9}, {2u, 1}, {1u, 3}}) {
    NvtxMarkEvent m;
    m.lane = lane;
    m.start_ns = m.end_ns = start;
    t.nvtx_marks.push_back(m);
    t.counter_samples.push_back({lane, start, 0.0});
  }
  t.SortByLaneAndTime();
  std::vector<std::pair<LaneId, TimestampNs>> marks, samples;
  for (const auto& m : t.nvtx_marks) marks.emplace_back(m.lane, m.start_ns);
  for (const auto& c : t.counter_samples) samples.emplace_back(c.lane, c.ts_ns);
  const std::vector<std::pair<LaneId, TimestampNs>> expected = {{1, 3}, {1, 9}, {2, 1}, {2, 5}};
  EXPECT_EQ(marks, expected);
  EXPECT_EQ(samples, expected);
}

}  // namespace
}  // namespace rankscope::trace
