// The NCCL profiler plugin's entry points, called as NCCL calls them (no NCCL needed: the
// descriptors are made here), against real recorders writing rank files.
#include "collector/nccl_plugin.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "collector/fast_clock.h"
#include "collector/recorder.h"
#include "tests/collector/collector_test_util.h"
#include "tests/trace/trace_test_util.h"
#include "trace/reader.h"

namespace rankscope::collector {
namespace {

using testing::Load;
using trace::CollectiveOp;
using trace::CollectivePartKind;
using trace::testing::TempDir;

constexpr uint64_t kCommHash = 0x5EED5EED12345678;
// The simulated GPU's %globaltimer runs this far behind CLOCK_REALTIME.
constexpr int64_t kGpuBehind = 250'000'000;

// Callback times are CLOCK_REALTIME readings. No drain before Close: every record is in
// before any row is written, so every row uses the GPU clock offset that the file's meta reports.
RecorderOptions Options(const TempDir& dir, int rank, int world_size = 2) {
  return testing::MakeRecorderOptions(dir, {.run_id = "plugin",
                                            .rank = rank,
                                            .world_size = world_size,
                                            .clock_override = "realtime",
                                            .command_line = "nccl_plugin_test",
                                            .drain_interval = std::chrono::hours(1)});
}

std::string Meta(const trace::RankTrace& trace, const std::string& key) {
  auto it = trace.meta.entries.find(key);
  return it != trace.meta.entries.end() ? it->second : "(missing)";
}

int64_t GpuClockOffset(const trace::RankTrace& trace) {
  const std::string offset = Meta(trace, "nccl.gpu_clock_offset_ns");
  EXPECT_NE(offset, "(missing)");
  return offset == "(missing)" ? 0 : std::stoll(offset);
}

std::vector<trace::CollectivePartEvent> PartsOf(const trace::RankTrace& trace, uint64_t sequence) {
  std::vector<trace::CollectivePartEvent> parts;
  for (const auto& part : trace.events.collective_parts) {
    if (part.sequence == sequence) parts.push_back(part);
  }
  std::sort(parts.begin(), parts.end(), [](const auto& a, const auto& b) {
    return std::tie(a.part_kind, a.channel, a.step) < std::tie(b.part_kind, b.channel, b.step);
  });
  return parts;
}

// ---- NCCL's side: descriptors and calls --------------------------------------------------

nccl_abi::EventDescrV5 CollV5(uint64_t sequence, const char* func, size_t count, const char* datatype, int root,
                              uint8_t channels, const char* algo, const char* proto) {
  nccl_abi::EventDescrV5 descr{};
  descr.type = nccl_abi::kColl;
  descr.coll.seq_number = sequence;
  descr.coll.func = func;
  descr.coll.count = count;
  descr.coll.root = root;
  descr.coll.datatype = datatype;
  descr.coll.channels = channels;
  descr.coll.warps = 16;
  descr.coll.algo = algo;
  descr.coll.proto = proto;
  return descr;
}

nccl_abi::EventDescrV5 P2pV5(const char* func, size_t count, const char* datatype, int peer, uint8_t channels) {
  nccl_abi::EventDescrV5 descr{};
  descr.type = nccl_abi::kP2p;
  descr.p2p.func = func;
  descr.p2p.count = count;
  descr.p2p.datatype = datatype;
  descr.p2p.peer = peer;
  descr.p2p.channels = channels;
  return descr;
}

nccl_abi::EventDescrV5 KernelChannelV5(void* parent, uint8_t channel, uint64_t gpu_timer) {
  nccl_abi::EventDescrV5 descr{};
  descr.type = nccl_abi::kKernelCh;
  descr.parent = parent;
  descr.kernel_ch.channel = channel;
  descr.kernel_ch.gpu_timer = gpu_timer;
  return descr;
}

nccl_abi::EventDescrV5 ProxyOpV5(void* parent, pid_t pid, uint8_t channel, int peer, bool is_send) {
  nccl_abi::EventDescrV5 descr{};
  descr.type = nccl_abi::kProxyOp;
  descr.parent = parent;
  descr.proxy_op.pid = pid;
  descr.proxy_op.channel = channel;
  descr.proxy_op.peer = peer;
  descr.proxy_op.steps = 2;
  descr.proxy_op.chunk_size = 4096;
  descr.proxy_op.is_send = is_send ? 1 : 0;
  return descr;
}

nccl_abi::EventDescrV5 ProxyStepV5(void* parent, int step) {
  nccl_abi::EventDescrV5 descr{};
  descr.type = nccl_abi::kProxyStep;
  descr.parent = parent;
  descr.proxy_step.step = step;
  return descr;
}

void* StartV5(void* context, nccl_abi::EventDescrV5 descr) {
  void* handle = &descr;  // the plugin must overwrite it
  EXPECT_EQ(NcclStartEventV5(context, &handle, &descr), nccl_abi::kSuccess);
  return handle;
}

void* StartV4(void* context, nccl_abi::EventDescrV4 descr) {
  void* handle = &descr;
  EXPECT_EQ(NcclStartEventV4(context, &handle, &descr), nccl_abi::kSuccess);
  return handle;
}

void* StartV3(void* context, nccl_abi::EventDescrV3 descr) {
  void* handle = &descr;
  EXPECT_EQ(NcclStartEventV3(context, &handle, &descr), nccl_abi::kSuccess);
  return handle;
}

void Stop(void* handle) { EXPECT_EQ(NcclStopEvent(handle), nccl_abi::kSuccess); }

// A kernel channel's end, as NCCL's proxy reports it: the GPU stop time, then the stop.
void StopKernelChannel(void* handle, uint64_t gpu_timer) {
  nccl_abi::StateArgsV5 args{};
  args.kernel_ch.gpu_timer = gpu_timer;
  EXPECT_EQ(NcclRecordEventStateV5(handle, nccl_abi::kKernelChStop, &args), nccl_abi::kSuccess);
  Stop(handle);
}

class NcclPluginTest : public ::testing::Test {
 protected:
  void TearDown() override {
    SetNcclRecorder(nullptr);
    unsetenv("RANKSCOPE_NCCL_PROXY_STEPS");
  }

  TempDir dir_;
};

// ---- version 5: two ranks --------------------------------------------------------------------

constexpr int kCollectives = 4;
constexpr size_t kElements = 1 << 20;           // bf16: 2 MiB per AllReduce
constexpr int64_t kPeriod = 10'000'000;         // one collective every 10 ms of GPU time
constexpr int64_t kLate = 3'000'000;            // rank 1's kernels start 3 ms after rank 0's
constexpr int64_t kKernel = 2'000'000;          // channel 0 runs 2 ms, channel 1 a little longer

struct ChannelTimes {
  uint64_t start[2];
  uint64_t stop[2];
};

// GPU times of collective k's two channels on `rank`, from `gpu_base` (in the past: NCCL's
// proxy reports a channel after it ran, never before).
ChannelTimes PlannedTimes(uint64_t gpu_base, int rank, int k) {
  ChannelTimes times{};
  for (int c = 0; c < 2; ++c) {
    times.start[c] = gpu_base + static_cast<uint64_t>(k * kPeriod + rank * kLate + c * 1'000);
    times.stop[c] = times.start[c] + static_cast<uint64_t>(kKernel + c * 7'000);
  }
  return times;
}

// What NCCL does on one rank for kCollectives AllReduces on the shared communicator.
void RunRankV5(const TempDir& dir, int rank, uint64_t gpu_base) {
  Recorder recorder(Options(dir, rank));
  SetNcclRecorder(&recorder);
  void* context = nullptr;
  int mask = 0;
  ASSERT_EQ(NcclInitV5(&context, kCommHash, &mask, "world", 1, 2, rank, nullptr), nccl_abi::kSuccess);
  ASSERT_NE(context, nullptr);
  for (int k = 0; k < kCollectives; ++k) {
    nccl_abi::EventDescrV5 coll = CollV5(k, "AllReduce", kElements, "ncclBfloat16", 0, 2, "RING", "LL128");
    coll.rank = rank;
    void* operation = StartV5(context, coll);
    ASSERT_NE(operation, nullptr);
    Stop(operation);  // NCCL stops an operation once it is enqueued
    const ChannelTimes times = PlannedTimes(gpu_base, rank, k);
    void* channels[2];
    for (int c = 0; c < 2; ++c) channels[c] = StartV5(context, KernelChannelV5(operation, c, times.start[c]));
    for (int c = 0; c < 2; ++c) StopKernelChannel(channels[c], times.stop[c]);
  }
  EXPECT_EQ(NcclFinalize(context), nccl_abi::kSuccess);
  ASSERT_TRUE(recorder.Close(Recorder::EndReason::kExit).ok());
  SetNcclRecorder(nullptr);
}

TEST_F(NcclPluginTest, TwoRanksRecordTheSameCollectivesTimedByTheirGpuTimers) {
  const uint64_t gpu_base = static_cast<uint64_t>(RealtimeNowNs() - kGpuBehind - 200'000'000);
  RunRankV5(dir_, 0, gpu_base);
  RunRankV5(dir_, 1, gpu_base);  // same GPU clock, kernels kLate later

  std::map<int, trace::RankTrace> traces;
  std::map<int, std::map<std::pair<uint64_t, uint64_t>, trace::CollectiveEvent>> by_key;
  for (int rank : {0, 1}) {
    SCOPED_TRACE(::testing::Message() << "rank " << rank);
    trace::RankTrace& trace = traces[rank] = Load(dir_ / ("rank-" + std::to_string(rank) + ".sqlite"));
    EXPECT_TRUE(trace.meta.closed_cleanly);
    EXPECT_EQ(Meta(trace, "nccl.profiler"), "v5");
    EXPECT_EQ(Meta(trace, "nccl.operations"), std::to_string(kCollectives));
    EXPECT_EQ(Meta(trace, "nccl.parts"), std::to_string(2 * kCollectives));
    EXPECT_EQ(Meta(trace, "nccl.orphan_parts"), "0");
    EXPECT_EQ(Meta(trace, "nccl.unmatched_stops"), "0");
    // The callbacks came 200 ms or more after the GPU times they report.
    const int64_t offset = GpuClockOffset(trace);
    EXPECT_GT(offset, kGpuBehind + 100'000'000);
    EXPECT_LT(offset, kGpuBehind + 60'000'000'000);

    ASSERT_EQ(trace.events.collectives.size(), static_cast<size_t>(kCollectives));
    for (const trace::CollectiveEvent& collective : trace.events.collectives) {
      by_key[rank][{collective.comm_hash, collective.sequence}] = collective;
      const trace::Lane* lane = trace.lane(collective.lane);
      ASSERT_NE(lane, nullptr);
      EXPECT_EQ(lane->kind, trace::LaneKind::kCommunicator);
      EXPECT_EQ(lane->comm_hash, kCommHash);
      EXPECT_EQ(lane->name, "world (rank " + std::to_string(rank) + " of 2)");
      EXPECT_EQ(trace.str(collective.name), "AllReduce");
      EXPECT_EQ(collective.op, CollectiveOp::kAllReduce);
      EXPECT_EQ(collective.datatype, trace::DataType::kBfloat16);
      EXPECT_EQ(collective.bytes, 2 * kElements);
      EXPECT_EQ(collective.root, -1);
      EXPECT_EQ(collective.comm_rank, rank);
      EXPECT_EQ(collective.comm_size, 2);
      EXPECT_EQ(collective.channels, 2u);
      EXPECT_EQ(trace.str(collective.algorithm), "RING");
      EXPECT_EQ(trace.str(collective.protocol), "LL128");
      // From the first channel's start to the last channel's stop, on the host clock.
      const ChannelTimes times = PlannedTimes(gpu_base, rank, static_cast<int>(collective.sequence));
      EXPECT_EQ(collective.start_ns, static_cast<int64_t>(times.start[0]) + offset);
      EXPECT_EQ(collective.end_ns, static_cast<int64_t>(times.stop[1]) + offset);

      const std::vector<trace::CollectivePartEvent> parts = PartsOf(trace, collective.sequence);
      ASSERT_EQ(parts.size(), 2u);
      for (int c = 0; c < 2; ++c) {
        EXPECT_EQ(parts[c].part_kind, CollectivePartKind::kKernelChannel);
        EXPECT_EQ(parts[c].channel, c);
        EXPECT_EQ(parts[c].comm_hash, kCommHash);
        EXPECT_EQ(parts[c].lane, collective.lane);
        EXPECT_EQ(parts[c].start_ns, static_cast<int64_t>(times.start[c]) + offset);
        EXPECT_EQ(parts[c].end_ns, static_cast<int64_t>(times.stop[c]) + offset);
        EXPECT_EQ(trace.str(parts[c].name), "channel " + std::to_string(c));
      }
    }
  }
  // Both ranks name every collective alike: (communicator, sequence) matches them.
  std::set<std::pair<uint64_t, uint64_t>> keys[2];
  for (int rank : {0, 1}) {
    for (const auto& [key, collective] : by_key[rank]) keys[rank].insert(key);
  }
  EXPECT_EQ(keys[0], keys[1]);
  std::set<std::pair<uint64_t, uint64_t>> expected;
  for (uint64_t k = 0; k < kCollectives; ++k) expected.insert({kCommHash, k});
  EXPECT_EQ(keys[0], expected);
  // On the GPU clock, rank 1 is kLate behind at every collective.
  const int64_t offsets[2] = {GpuClockOffset(traces[0]), GpuClockOffset(traces[1])};
  for (const auto& key : expected) {
    EXPECT_EQ((by_key[1][key].start_ns - offsets[1]) - (by_key[0][key].start_ns - offsets[0]), kLate);
  }
}

TEST_F(NcclPluginTest, ProxyWorkIsWrittenAsPartsOfItsOperation) {
  Recorder recorder(Options(dir_, 0));
  SetNcclRecorder(&recorder);
  void* context = nullptr;
  int mask = 0;
  ASSERT_EQ(NcclInitV5(&context, kCommHash, &mask, "world", 2, 2, 0, nullptr), nccl_abi::kSuccess);
  ASSERT_NE(mask & nccl_abi::kProxyStep, 0);
  void* operation = StartV5(context, CollV5(3, "AllGather", 1024, "ncclFloat32", 0, 1, "RING", "SIMPLE"));
  Stop(operation);
  void* proxy = StartV5(context, ProxyOpV5(operation, getpid(), 1, 1, /*is_send=*/true));
  ASSERT_NE(proxy, nullptr);
  for (int step = 0; step < 2; ++step) {
    void* handle = StartV5(context, ProxyStepV5(proxy, step));
    ASSERT_NE(handle, nullptr);
    nccl_abi::StateArgsV5 args{};
    args.proxy_step.trans_size = 1000 + static_cast<size_t>(step);
    EXPECT_EQ(NcclRecordEventStateV5(handle, nccl_abi::kProxyStepSendWait, &args), nccl_abi::kSuccess);
    Stop(handle);
  }
  Stop(proxy);
  EXPECT_EQ(NcclFinalize(context), nccl_abi::kSuccess);
  ASSERT_TRUE(recorder.Close(Recorder::EndReason::kExit).ok());

  const trace::RankTrace trace = Load(dir_ / "rank-0.sqlite");
  ASSERT_EQ(trace.events.collectives.size(), 1u);
  EXPECT_EQ(trace.events.collectives[0].op, CollectiveOp::kAllGather);
  EXPECT_EQ(trace.events.collectives[0].bytes, 4096u);
  const std::vector<trace::CollectivePartEvent> parts = PartsOf(trace, 3);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0].part_kind, CollectivePartKind::kProxySend);
  EXPECT_EQ(parts[0].peer, 1);
  EXPECT_EQ(parts[0].channel, 1);
  for (int step = 0; step < 2; ++step) {
    const trace::CollectivePartEvent& part = parts[1 + step];
    EXPECT_EQ(part.part_kind, CollectivePartKind::kProxySendStep);
    EXPECT_EQ(part.step, step);
    EXPECT_EQ(part.peer, 1);
    EXPECT_EQ(part.channel, 1);
    EXPECT_EQ(part.bytes, 1000u + static_cast<uint64_t>(step));
    EXPECT_EQ(part.comm_hash, kCommHash);
  }
  EXPECT_EQ(Meta(trace, "nccl.orphan_parts"), "0");
}

// ---- versions 4 and 3 -------------------------------------------------------------------------

TEST_F(NcclPluginTest, Version4RecordsThroughItsOwnEntryPoints) {
  constexpr uint64_t kHash = 0xD1D1D1D1;
  Recorder recorder(Options(dir_, 1));
  SetNcclRecorder(&recorder);
  void* context = nullptr;
  int mask = 0;
  ASSERT_EQ(NcclInitV4(&context, &mask, "data-parallel", kHash, 1, 2, 1, nullptr), nccl_abi::kSuccess);
  EXPECT_EQ(mask, NcclActivationMask());
  const uint64_t gpu_base = static_cast<uint64_t>(RealtimeNowNs() - kGpuBehind - 100'000'000);

  nccl_abi::EventDescrV4 coll{};
  coll.type = nccl_abi::kColl;
  coll.rank = 1;
  coll.coll.seq_number = 0;
  coll.coll.func = "Broadcast";
  coll.coll.count = 300;
  coll.coll.root = 1;
  coll.coll.datatype = "ncclInt64";
  coll.coll.channels = 1;
  coll.coll.algo = "TREE";
  coll.coll.proto = "SIMPLE";
  void* broadcast = StartV4(context, coll);
  ASSERT_NE(broadcast, nullptr);
  Stop(broadcast);
  nccl_abi::EventDescrV4 channel{};
  channel.type = nccl_abi::kKernelCh;
  channel.parent = broadcast;
  channel.kernel_ch.channel = 0;
  channel.kernel_ch.gpu_timer = gpu_base;
  StopKernelChannel(StartV4(context, channel), gpu_base + 500'000);

  nccl_abi::EventDescrV4 send{};
  send.type = nccl_abi::kP2p;
  send.p2p.func = "Send";
  send.p2p.count = 10;
  send.p2p.datatype = "ncclFloat16";
  send.p2p.peer = 0;
  send.p2p.channels = 1;
  void* p2p = StartV4(context, send);
  ASSERT_NE(p2p, nullptr);
  Stop(p2p);
  channel.parent = p2p;
  channel.kernel_ch.channel = 4;
  channel.kernel_ch.gpu_timer = gpu_base + 1'000'000;
  StopKernelChannel(StartV4(context, channel), gpu_base + 1'200'000);
  EXPECT_EQ(NcclFinalize(context), nccl_abi::kSuccess);
  ASSERT_TRUE(recorder.Close(Recorder::EndReason::kExit).ok());

  const trace::RankTrace trace = Load(dir_ / "rank-1.sqlite");
  EXPECT_EQ(Meta(trace, "nccl.profiler"), "v4");
  const int64_t offset = GpuClockOffset(trace);
  ASSERT_EQ(trace.events.collectives.size(), 2u);
  std::map<CollectiveOp, trace::CollectiveEvent> by_op;
  for (const auto& collective : trace.events.collectives) by_op[collective.op] = collective;
  const trace::CollectiveEvent& bcast = by_op[CollectiveOp::kBroadcast];
  EXPECT_EQ(bcast.comm_hash, kHash);
  EXPECT_EQ(bcast.root, 1);
  EXPECT_EQ(bcast.bytes, 2400u);
  EXPECT_EQ(bcast.comm_rank, 1);
  EXPECT_EQ(bcast.comm_size, 2);
  EXPECT_EQ(bcast.channels, 1u);
  EXPECT_EQ(trace.str(bcast.algorithm), "TREE");
  EXPECT_EQ(trace.str(bcast.protocol), "SIMPLE");
  EXPECT_EQ(bcast.start_ns, static_cast<int64_t>(gpu_base) + offset);
  EXPECT_EQ(bcast.end_ns, static_cast<int64_t>(gpu_base + 500'000) + offset);
  EXPECT_EQ(trace.lane(bcast.lane)->name, "data-parallel (rank 1 of 2)");
  const trace::CollectiveEvent& sent = by_op[CollectiveOp::kSend];
  EXPECT_EQ(sent.peer, 0);
  EXPECT_EQ(sent.root, -1);
  EXPECT_EQ(sent.sequence, 0u);
  EXPECT_EQ(sent.bytes, 20u);
  EXPECT_EQ(sent.lane, bcast.lane);
  EXPECT_EQ(sent.end_ns - sent.start_ns, 200'000);
  ASSERT_EQ(trace.events.collective_parts.size(), 2u);
}

TEST_F(NcclPluginTest, Version3TakesTheCommunicatorFromEachOperationAndTimesFromTheHost) {
  constexpr uint64_t kHash = 0x3333;
  Recorder recorder(Options(dir_, 0));
  SetNcclRecorder(&recorder);
  void* context = nullptr;
  int mask = 0;
  ASSERT_EQ(NcclInitV3(&context, &mask), nccl_abi::kSuccess);
  EXPECT_EQ(mask, NcclActivationMask());

  struct Bracket {
    int64_t start_before, start_after, stop_before, stop_after;
  };
  std::vector<Bracket> brackets;
  for (uint64_t k = 0; k < 2; ++k) {
    nccl_abi::EventDescrV3 coll{};
    coll.type = nccl_abi::kColl;
    coll.coll.comm_name = "tensor-parallel";
    coll.coll.comm_hash = kHash;
    coll.coll.seq_number = k;
    coll.coll.func = "ReduceScatter";
    coll.coll.count = 64;
    coll.coll.datatype = "ncclFloat16";
    coll.coll.max_channels = 2;
    coll.coll.algo = "RING";
    coll.coll.proto = "LL";
    Bracket bracket{};
    bracket.start_before = RealtimeNowNs();
    void* operation = StartV3(context, coll);
    bracket.start_after = RealtimeNowNs();
    ASSERT_NE(operation, nullptr);
    Stop(operation);
    nccl_abi::EventDescrV3 channel{};
    channel.type = nccl_abi::kKernelCh;
    channel.parent = operation;
    void* channels[2];
    for (uint8_t c = 0; c < 2; ++c) {
      channel.kernel_ch.channel = c;
      channels[c] = StartV3(context, channel);
    }
    nccl_abi::EventDescrV3 proxy{};
    proxy.type = nccl_abi::kProxyOp;
    proxy.parent = operation;
    proxy.proxy_op.pid = getpid();
    proxy.proxy_op.channel = 1;
    proxy.proxy_op.peer = 1;
    proxy.proxy_op.is_send = 0;
    void* proxy_op = StartV3(context, proxy);
    nccl_abi::StateArgsV3 args{};
    args.proxy_op.trans_size = 128;
    EXPECT_EQ(NcclRecordEventStateV3(proxy_op, nccl_abi::kProxyOpRecvReceived, &args), nccl_abi::kSuccess);
    Stop(proxy_op);
    Stop(channels[0]);
    bracket.stop_before = RealtimeNowNs();
    Stop(channels[1]);
    bracket.stop_after = RealtimeNowNs();
    brackets.push_back(bracket);
  }
  EXPECT_EQ(NcclFinalize(context), nccl_abi::kSuccess);
  ASSERT_TRUE(recorder.Close(Recorder::EndReason::kExit).ok());

  const trace::RankTrace trace = Load(dir_ / "rank-0.sqlite");
  EXPECT_EQ(Meta(trace, "nccl.profiler"), "v3");
  EXPECT_EQ(Meta(trace, "nccl.gpu_clock_offset_ns"), "(missing)");  // version 3 has no GPU timers
  ASSERT_EQ(trace.events.collectives.size(), 2u);
  for (const trace::CollectiveEvent& collective : trace.events.collectives) {
    SCOPED_TRACE(::testing::Message() << "sequence " << collective.sequence);
    ASSERT_LT(collective.sequence, 2u);
    EXPECT_EQ(collective.comm_hash, kHash);
    EXPECT_EQ(collective.op, CollectiveOp::kReduceScatter);
    EXPECT_EQ(collective.bytes, 128u);
    EXPECT_EQ(collective.channels, 2u);
    EXPECT_EQ(trace.str(collective.algorithm), "RING");
    EXPECT_EQ(trace.str(collective.protocol), "LL");
    const trace::Lane* lane = trace.lane(collective.lane);
    ASSERT_NE(lane, nullptr);
    EXPECT_EQ(lane->comm_hash, kHash);
    EXPECT_EQ(lane->name, "tensor-parallel");
    // Host times: from the enqueue to the last channel's stop.
    const Bracket& bracket = brackets[collective.sequence];
    EXPECT_GE(collective.start_ns, bracket.start_before);
    EXPECT_LE(collective.start_ns, bracket.start_after);
    EXPECT_GE(collective.end_ns, bracket.stop_before);
    EXPECT_LE(collective.end_ns, bracket.stop_after);
    const std::vector<trace::CollectivePartEvent> parts = PartsOf(trace, collective.sequence);
    ASSERT_EQ(parts.size(), 3u);
    EXPECT_EQ(parts[0].part_kind, CollectivePartKind::kKernelChannel);
    EXPECT_EQ(parts[1].part_kind, CollectivePartKind::kKernelChannel);
    EXPECT_EQ(parts[2].part_kind, CollectivePartKind::kProxyRecv);
    EXPECT_EQ(parts[2].bytes, 128u);
    EXPECT_EQ(parts[2].peer, 1);
    for (const auto& part : parts) EXPECT_EQ(part.comm_hash, kHash);
  }
}

// ---- init ---------------------------------------------------------------------------------------

TEST_F(NcclPluginTest, InitFailsWhenTheRecorderDoesNotTraceNccl) {
  RecorderOptions options = Options(dir_, 0);
  options.config.trace.nccl = false;
  Recorder recorder(std::move(options));
  SetNcclRecorder(&recorder);
  void* context = &recorder;
  int mask = 0;
  EXPECT_NE(NcclInitV5(&context, kCommHash, &mask, "world", 1, 2, 0, nullptr), nccl_abi::kSuccess);
  EXPECT_EQ(context, nullptr);
  context = &recorder;
  EXPECT_NE(NcclInitV4(&context, &mask, "world", kCommHash, 1, 2, 0, nullptr), nccl_abi::kSuccess);
  EXPECT_EQ(context, nullptr);
  context = &recorder;
  EXPECT_NE(NcclInitV3(&context, &mask), nccl_abi::kSuccess);
  EXPECT_EQ(context, nullptr);
  ASSERT_TRUE(recorder.Close(Recorder::EndReason::kExit).ok());
  const trace::RankTrace trace = Load(dir_ / "rank-0.sqlite");
  EXPECT_EQ(Meta(trace, "nccl.profiler"), "(missing)");
  EXPECT_TRUE(trace.events.collectives.empty());
}

TEST_F(NcclPluginTest, InitFailsWithoutARecorder) {
  SetNcclRecorder(nullptr);
  void* context = nullptr;
  int mask = 0;
  EXPECT_NE(NcclInitV5(&context, kCommHash, &mask, "world", 1, 2, 0, nullptr), nccl_abi::kSuccess);
  EXPECT_EQ(context, nullptr);
  EXPECT_NE(NcclInitV4(&context, &mask, "world", kCommHash, 1, 2, 0, nullptr), nccl_abi::kSuccess);
  EXPECT_NE(NcclInitV3(&context, &mask), nccl_abi::kSuccess);
  EXPECT_EQ(context, nullptr);
}

TEST_F(NcclPluginTest, ActivationMaskAsksForOperationsKernelChannelsProxyOperationsAndSteps) {
  constexpr int kWithoutSteps = nccl_abi::kColl | nccl_abi::kP2p | nccl_abi::kProxyOp | nccl_abi::kKernelCh;
  unsetenv("RANKSCOPE_NCCL_PROXY_STEPS");
  EXPECT_EQ(NcclActivationMask(), kWithoutSteps | nccl_abi::kProxyStep);
  setenv("RANKSCOPE_NCCL_PROXY_STEPS", "1", 1);
  EXPECT_EQ(NcclActivationMask(), kWithoutSteps | nccl_abi::kProxyStep);
  setenv("RANKSCOPE_NCCL_PROXY_STEPS", "0", 1);
  EXPECT_EQ(NcclActivationMask(), kWithoutSteps);

  Recorder recorder(Options(dir_, 0));
  SetNcclRecorder(&recorder);
  void* context = nullptr;
  int mask = 0;
  ASSERT_EQ(NcclInitV5(&context, kCommHash, &mask, "world", 1, 2, 0, nullptr), nccl_abi::kSuccess);
  EXPECT_EQ(mask, kWithoutSteps);  // what init hands NCCL
  EXPECT_EQ(NcclFinalize(context), nccl_abi::kSuccess);
  ASSERT_TRUE(recorder.Close(Recorder::EndReason::kExit).ok());
}

// ---- handles ----------------------------------------------------------------------------------

TEST_F(NcclPluginTest, HandlesCarryTheKindOfTheirEvent) {
  Recorder recorder(Options(dir_, 0));
  SetNcclRecorder(&recorder);
  void* context = nullptr;
  int mask = 0;
  ASSERT_EQ(NcclInitV5(&context, kCommHash, &mask, "world", 1, 2, 0, nullptr), nccl_abi::kSuccess);
  void* coll = StartV5(context, CollV5(0, "AllReduce", 4, "ncclFloat32", 0, 1, "RING", "LL"));
  void* p2p = StartV5(context, P2pV5("Recv", 4, "ncclFloat32", 1, 1));
  void* proxy = StartV5(context, ProxyOpV5(coll, getpid(), 0, 1, false));
  void* step = StartV5(context, ProxyStepV5(proxy, 0));
  void* channel = StartV5(context, KernelChannelV5(coll, 0, 0));
  EXPECT_EQ(NcclHandleKind(coll), NcclEventKind::kColl);
  EXPECT_EQ(NcclHandleKind(p2p), NcclEventKind::kP2p);
  EXPECT_EQ(NcclHandleKind(proxy), NcclEventKind::kProxyOp);
  EXPECT_EQ(NcclHandleKind(step), NcclEventKind::kProxyStep);
  EXPECT_EQ(NcclHandleKind(channel), NcclEventKind::kKernelChannel);
  std::set<void*> distinct = {coll, p2p, proxy, step, channel};
  EXPECT_EQ(distinct.size(), 5u);
  // Events it did not ask for get no handle.
  for (uint64_t type : {uint64_t{nccl_abi::kGroup}, uint64_t{nccl_abi::kProxyCtrl}, uint64_t{nccl_abi::kNetPlugin},
                        uint64_t{nccl_abi::kCollApi}, uint64_t{nccl_abi::kKernelLaunch}}) {
    nccl_abi::EventDescrV5 descr{};
    descr.type = type;
    EXPECT_EQ(StartV5(context, descr), nullptr) << "type " << type;
  }
  // Null and foreign handles are nothing of ours.
  alignas(16) static int foreign = 0;
  EXPECT_EQ(NcclHandleKind(nullptr), NcclEventKind::kNone);
  EXPECT_EQ(NcclHandleKind(&foreign), NcclEventKind::kNone);
  EXPECT_EQ(NcclHandleKind(reinterpret_cast<void*>(uintptr_t{0x1230})), NcclEventKind::kNone);
  EXPECT_EQ(NcclHandleKind(reinterpret_cast<void*>(uintptr_t{0x123F})), NcclEventKind::kNone);
  for (void* handle : {channel, step, proxy, p2p, coll}) Stop(handle);
  EXPECT_EQ(NcclFinalize(context), nccl_abi::kSuccess);
  ASSERT_TRUE(recorder.Close(Recorder::EndReason::kExit).ok());
}

TEST_F(NcclPluginTest, NullHandlesAreIgnoredAndUnknownOnesCounted) {
  Recorder recorder(Options(dir_, 0));
  SetNcclRecorder(&recorder);
  void* context = nullptr;
  int mask = 0;
  ASSERT_EQ(NcclInitV5(&context, kCommHash, &mask, "world", 1, 2, 0, nullptr), nccl_abi::kSuccess);
  void* coll = StartV5(context, CollV5(0, "AllReduce", 4, "ncclFloat32", 0, 0, "RING", "LL"));
  Stop(coll);
  // NCCL passes a null handle for events the plugin gave none.
  EXPECT_EQ(NcclStopEvent(nullptr), nccl_abi::kSuccess);
  nccl_abi::StateArgsV5 args{};
  args.kernel_ch.gpu_timer = 12345;
  EXPECT_EQ(NcclRecordEventStateV5(nullptr, nccl_abi::kKernelChStop, &args), nccl_abi::kSuccess);
  nccl_abi::StateArgsV3 args3{};
  args3.proxy_op.trans_size = 64;
  EXPECT_EQ(NcclRecordEventStateV3(nullptr, nccl_abi::kProxyOpSendDone, &args3), nccl_abi::kSuccess);
  void* handle = &args;
  EXPECT_EQ(NcclStartEventV5(context, &handle, nullptr), nccl_abi::kSuccess);
  EXPECT_EQ(handle, nullptr);
  // A handle of our making that never started (its start record was refused, say).
  Stop(reinterpret_cast<void*>((uint64_t{999} << 4) | static_cast<uint64_t>(NcclEventKind::kKernelChannel)));
  EXPECT_EQ(NcclFinalize(context), nccl_abi::kSuccess);
  ASSERT_TRUE(recorder.Close(Recorder::EndReason::kExit).ok());

  const trace::RankTrace trace = Load(dir_ / "rank-0.sqlite");
  EXPECT_EQ(trace.events.collectives.size(), 1u);
  EXPECT_TRUE(trace.events.collective_parts.empty());
  EXPECT_EQ(Meta(trace, "nccl.unmatched_stops"), "1");
}

TEST_F(NcclPluginTest, ProxyOperationOfAnotherProcessGetsNoParent) {
  Recorder recorder(Options(dir_, 0));
  SetNcclRecorder(&recorder);
  void* context = nullptr;
  int mask = 0;
  ASSERT_EQ(NcclInitV5(&context, kCommHash, &mask, "world", 1, 2, 0, nullptr), nccl_abi::kSuccess);
  void* coll = StartV5(context, CollV5(7, "AllReduce", 4, "ncclFloat32", 0, 0, "RING", "LL"));
  Stop(coll);
  // PXN: this proxy works for another process, whose handles only look like ours.
  void* foreign = StartV5(context, ProxyOpV5(coll, getpid() + 100000, 2, 1, true));
  void* own = StartV5(context, ProxyOpV5(coll, getpid(), 3, 1, true));
  ASSERT_NE(foreign, nullptr);
  ASSERT_NE(own, nullptr);
  Stop(foreign);
  Stop(own);
  EXPECT_EQ(NcclFinalize(context), nccl_abi::kSuccess);
  ASSERT_TRUE(recorder.Close(Recorder::EndReason::kExit).ok());

  const trace::RankTrace trace = Load(dir_ / "rank-0.sqlite");
  ASSERT_EQ(trace.events.collectives.size(), 1u);
  ASSERT_EQ(trace.events.collective_parts.size(), 2u);
  std::map<int32_t, trace::CollectivePartEvent> by_channel;
  for (const auto& part : trace.events.collective_parts) by_channel[part.channel] = part;
  EXPECT_EQ(by_channel[3].sequence, 7u);  // ours joins the operation
  EXPECT_EQ(by_channel[2].sequence, 0u);  // the other process's stands alone
  EXPECT_EQ(Meta(trace, "nccl.orphan_parts"), "1");
}

// ---- after close ------------------------------------------------------------------------------

TEST_F(NcclPluginTest, CallsAfterTheRecorderClosedAreIgnored) {
  Recorder recorder(Options(dir_, 0));
  SetNcclRecorder(&recorder);
  void* context = nullptr;
  int mask = 0;
  ASSERT_EQ(NcclInitV5(&context, kCommHash, &mask, "world", 1, 2, 0, nullptr), nccl_abi::kSuccess);
  void* coll = StartV5(context, CollV5(0, "AllReduce", 4, "ncclFloat32", 0, 1, "RING", "LL"));
  void* channel = StartV5(context, KernelChannelV5(coll, 0, 0));
  Stop(coll);
  ASSERT_TRUE(recorder.Close(Recorder::EndReason::kExit).ok());

  // NCCL goes on after the collector closed (exit handlers, say).
  StopKernelChannel(channel, 1);
  EXPECT_EQ(StartV5(context, CollV5(1, "AllReduce", 4, "ncclFloat32", 0, 1, "RING", "LL")), nullptr);
  nccl_abi::StateArgsV3 args3{};
  args3.proxy_op.trans_size = 64;
  EXPECT_EQ(NcclRecordEventStateV3(channel, nccl_abi::kProxyOpSendDone, &args3), nccl_abi::kSuccess);
  EXPECT_EQ(NcclFinalize(context), nccl_abi::kSuccess);
  void* late_context = nullptr;
  EXPECT_NE(NcclInitV5(&late_context, kCommHash, &mask, "world", 1, 2, 0, nullptr), nccl_abi::kSuccess);
  EXPECT_EQ(late_context, nullptr);

  const trace::RankTrace trace = Load(dir_ / "rank-0.sqlite");
  EXPECT_TRUE(trace.meta.closed_cleanly);
  ASSERT_EQ(trace.events.collectives.size(), 1u);  // written at close, with what it had
  EXPECT_EQ(trace.events.collectives[0].sequence, 0u);
  EXPECT_EQ(trace.events.collective_parts.size(), 1u);
  EXPECT_EQ(Meta(trace, "nccl.unmatched_stops"), "0");
}

}  // namespace
}  // namespace rankscope::collector
