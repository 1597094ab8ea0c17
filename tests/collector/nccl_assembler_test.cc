// NcclAssembler on hand-made plugin records: the rows it writes, when it writes them, and
// the times it gives them.
#include "collector/nccl_assembler.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "tests/collector/collector_test_util.h"

namespace rankscope::collector {
namespace {

using testing::FakeDeviceSink;
using trace::CollectiveOp;
using trace::CollectivePartKind;
using trace::DataType;

constexpr int64_t kPid = 4242;
constexpr int64_t kIdle = 1'000;        // ns: the idle limit the tests give the assembler
constexpr int64_t kStall = 10'000'000;  // ns: and the stall limit
constexpr uint64_t kComm = 1;     // the plugin context of the communicator
constexpr uint64_t kHash = 0xC0FFEE0012345678;

// "func\0datatype\0algo\0proto", as the plugin writes an operation's names.
std::string OperationText(std::string_view func, std::string_view datatype, std::string_view algo = {},
                          std::string_view proto = {}) {
  std::string text;
  for (std::string_view part : {func, datatype, algo, proto}) {
    text.append(part);
    text.push_back('\0');
  }
  return text;
}

NcclRecord CommRecord(uint64_t comm, uint64_t hash, int rank, int ranks) {
  NcclRecord record;
  record.kind = NcclRecordKind::kComm;
  record.id = comm;
  record.comm = comm;
  record.comm_hash = hash;
  record.rank = rank;
  record.ranks = ranks;
  record.api_version = 5;
  return record;
}

NcclRecord CollStart(uint64_t id, uint64_t sequence, uint64_t count, int channels, int root = 0,
                     uint64_t comm = kComm) {
  NcclRecord record;
  record.kind = NcclRecordKind::kStart;
  record.event = NcclEventKind::kColl;
  record.id = id;
  record.comm = comm;
  record.sequence = sequence;
  record.count = count;
  record.channels = channels;
  record.root = root;
  return record;
}

NcclRecord P2pStart(uint64_t id, int peer, uint64_t count, int channels = 1, uint64_t comm = kComm) {
  NcclRecord record;
  record.kind = NcclRecordKind::kStart;
  record.event = NcclEventKind::kP2p;
  record.id = id;
  record.comm = comm;
  record.count = count;
  record.peer = peer;
  record.channels = channels;
  return record;
}

NcclRecord KernelChannel(uint64_t id, uint64_t parent, int channel, uint64_t gpu_start = 0) {
  NcclRecord record;
  record.kind = NcclRecordKind::kStart;
  record.event = NcclEventKind::kKernelChannel;
  record.id = id;
  record.parent = parent;
  record.comm = kComm;
  record.channel = channel;
  record.value = gpu_start;
  return record;
}

NcclRecord ProxyOp(uint64_t id, uint64_t parent, int channel, int peer, bool is_send, int steps = 4) {
  NcclRecord record;
  record.kind = NcclRecordKind::kStart;
  record.event = NcclEventKind::kProxyOp;
  record.id = id;
  record.parent = parent;
  record.comm = kComm;
  record.channel = channel;
  record.peer = peer;
  record.step = steps;
  record.is_send = is_send ? 1 : 0;
  return record;
}

NcclRecord ProxyStep(uint64_t id, uint64_t proxy_op, int step) {
  NcclRecord record;
  record.kind = NcclRecordKind::kStart;
  record.event = NcclEventKind::kProxyStep;
  record.id = id;
  record.parent = proxy_op;
  record.comm = kComm;
  record.step = step;
  return record;
}

NcclRecord Stop(uint64_t id) {
  NcclRecord record;
  record.kind = NcclRecordKind::kStop;
  record.id = id;
  return record;
}

// A kernel channel's GPU stop time, or the bytes proxy work moved.
NcclRecord State(uint64_t id, uint64_t value, int state = 22) {
  NcclRecord record;
  record.kind = NcclRecordKind::kState;
  record.id = id;
  record.value = value;
  record.state = state;
  return record;
}

class NcclAssemblerTest : public ::testing::Test {
 protected:
  void Add(const NcclRecord& record, int64_t ts_ns, std::string_view text = {}) {
    assembler_.Add(record, text, ts_ns);
  }
  // The communicator "world" of the plugin context kComm: this rank 1 of 4.
  void AddWorld(int64_t ts_ns = 0) { Add(CommRecord(kComm, kHash, 1, 4), ts_ns, "world"); }
  // An AllReduce of `count` floats on `channels` kernel channels, started and stopped at `ts_ns`.
  void AddAllReduce(uint64_t id, uint64_t sequence, int channels, int64_t ts_ns, uint64_t count = 256) {
    Add(CollStart(id, sequence, count, channels), ts_ns, OperationText("AllReduce", "ncclFloat32", "RING", "LL"));
    Add(Stop(id), ts_ns);
  }
  // Emits and returns what the pass wrote (and only that).
  trace::EventTables Emit(int64_t now_ns, bool final = false) {
    trace::EventTables out;
    assembler_.Emit(sink_.sink(), out, now_ns, final);
    return out;
  }
  std::string Name(trace::StringId id) const { return sink_.str(id); }

  FakeDeviceSink sink_;
  NcclAssembler assembler_{kPid, kIdle, kStall};
};

// ---- the operation's row ----------------------------------------------------------------

TEST_F(NcclAssemblerTest, CollectiveRowCarriesItsCommunicatorAndDescription) {
  AddWorld();
  Add(CollStart(0x10, 7, 1000, 2), 100, OperationText("AllReduce", "ncclBfloat16", "RING", "LL128"));
  Add(Stop(0x10), 110);
  const trace::EventTables out = Emit(110 + kIdle);
  ASSERT_EQ(out.collectives.size(), 1u);
  const trace::CollectiveEvent& row = out.collectives[0];
  EXPECT_EQ(row.comm_hash, kHash);
  EXPECT_EQ(row.sequence, 7u);
  EXPECT_EQ(Name(row.name), "AllReduce");
  EXPECT_EQ(row.op, CollectiveOp::kAllReduce);
  EXPECT_EQ(row.datatype, DataType::kBfloat16);
  EXPECT_EQ(row.bytes, 2000u);  // 1000 bf16 elements
  EXPECT_EQ(row.comm_rank, 1);
  EXPECT_EQ(row.comm_size, 4);
  EXPECT_EQ(row.channels, 2u);
  EXPECT_EQ(Name(row.algorithm), "RING");
  EXPECT_EQ(Name(row.protocol), "LL128");
  EXPECT_EQ(row.root, -1);  // NCCL passes root 0 for an AllReduce; it has none
  EXPECT_EQ(row.peer, -1);
  EXPECT_EQ(row.start_ns, 100);  // no kernel channel: host times
  EXPECT_EQ(row.end_ns, 110);
  EXPECT_EQ(assembler_.stats().operations, 1u);
  EXPECT_TRUE(assembler_.empty());
}

TEST_F(NcclAssemblerTest, CommunicatorLaneIsNamedAfterTheCommunicatorAndTheRank) {
  AddWorld();
  AddAllReduce(0x10, 0, 0, 100);
  AddAllReduce(0x20, 1, 0, 200);
  const trace::EventTables out = Emit(200 + kIdle);
  ASSERT_EQ(out.collectives.size(), 2u);
  ASSERT_EQ(sink_.lanes().size(), 1u);  // one lane for the communicator's operations
  EXPECT_EQ(out.collectives[0].lane, out.collectives[1].lane);
  const trace::Lane& lane = sink_.lane(out.collectives[0].lane);
  EXPECT_EQ(lane.kind, trace::LaneKind::kCommunicator);
  EXPECT_EQ(lane.pid, kPid);
  EXPECT_EQ(lane.comm_hash, kHash);
  EXPECT_EQ(lane.name, "world (rank 1 of 4)");
}

TEST_F(NcclAssemblerTest, UnnamedCommunicatorLaneIsNamedAfterItsHash) {
  Add(CommRecord(kComm, 0xABCDEF, 0, 2), 0, "");
  AddAllReduce(0x10, 0, 0, 100);
  const trace::EventTables out = Emit(100 + kIdle);
  ASSERT_EQ(out.collectives.size(), 1u);
  EXPECT_EQ(sink_.lane(out.collectives[0].lane).name, "NCCL 0000000000abcdef (rank 0 of 2)");
}

TEST_F(NcclAssemblerTest, EachCommunicatorHasItsOwnLane) {
  AddWorld();
  Add(CommRecord(2, 0x77, 0, 2), 0, "pipeline");
  AddAllReduce(0x10, 0, 0, 100);
  Add(CollStart(0x20, 0, 8, 0, 0, /*comm=*/2), 100, OperationText("AllGather", "ncclInt8"));
  Add(Stop(0x20), 100);
  const trace::EventTables out = Emit(100 + kIdle);
  ASSERT_EQ(out.collectives.size(), 2u);
  EXPECT_NE(out.collectives[0].lane, out.collectives[1].lane);
  EXPECT_EQ(sink_.lane(out.collectives[0].lane).name, "world (rank 1 of 4)");
  EXPECT_EQ(sink_.lane(out.collectives[1].lane).name, "pipeline (rank 0 of 2)");
  EXPECT_EQ(out.collectives[1].comm_hash, 0x77u);
  EXPECT_EQ(out.collectives[1].comm_size, 2);
}

TEST_F(NcclAssemblerTest, RootIsKeptForRootedCollectivesAndPeerForPointToPoint) {
  AddWorld();
  Add(CollStart(0x10, 0, 16, 0, /*root=*/3), 100, OperationText("Broadcast", "ncclInt32"));
  Add(Stop(0x10), 100);
  Add(CollStart(0x20, 1, 16, 0, /*root=*/2), 100, OperationText("Reduce", "ncclInt32"));
  Add(Stop(0x20), 100);
  Add(P2pStart(0x30, /*peer=*/2, 16), 100, OperationText("Send", "ncclInt32"));
  Add(Stop(0x30), 100);
  const trace::EventTables out = Emit(100 + kIdle);
  ASSERT_EQ(out.collectives.size(), 3u);  // in start order
  EXPECT_EQ(out.collectives[0].op, CollectiveOp::kBroadcast);
  EXPECT_EQ(out.collectives[0].root, 3);
  EXPECT_EQ(out.collectives[0].peer, -1);
  EXPECT_EQ(out.collectives[1].op, CollectiveOp::kReduce);
  EXPECT_EQ(out.collectives[1].root, 2);
  EXPECT_EQ(out.collectives[2].op, CollectiveOp::kSend);
  EXPECT_EQ(out.collectives[2].root, -1);
  EXPECT_EQ(out.collectives[2].peer, 2);
  EXPECT_EQ(out.collectives[2].bytes, 64u);
  EXPECT_EQ(out.collectives[2].channels, 1u);
  EXPECT_EQ(out.collectives[2].algorithm, trace::kEmptyString);  // point-to-point names none
  EXPECT_EQ(out.collectives[2].protocol, trace::kEmptyString);
}

TEST_F(NcclAssemblerTest, BytesAreTheCountTimesTheTypeSize) {
  AddWorld();
  const std::vector<std::pair<std::string, uint64_t>> cases = {
      {"ncclInt8", 100}, {"ncclFloat16", 200}, {"ncclBfloat16", 200}, {"ncclFloat32", 400},
      {"ncclInt64", 800}, {"ncclFloat64", 800}, {"ncclFloat8e4m3", 100}, {"ncclMystery", 0}};
  for (size_t i = 0; i < cases.size(); ++i) {
    Add(CollStart(0x10 * (i + 1), i, 100, 0), 100, OperationText("AllGather", cases[i].first));
    Add(Stop(0x10 * (i + 1)), 100);
  }
  const trace::EventTables out = Emit(100 + kIdle);
  ASSERT_EQ(out.collectives.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(out.collectives[i].bytes, cases[i].second) << cases[i].first;
  }
  EXPECT_EQ(out.collectives.back().datatype, DataType::kUnknown);
}

TEST_F(NcclAssemblerTest, EveryNcclFunctionNameGetsItsOp) {
  AddWorld();
  const std::vector<std::pair<std::string, CollectiveOp>> cases = {
      {"AllReduce", CollectiveOp::kAllReduce},       {"AllGather", CollectiveOp::kAllGather},
      {"ReduceScatter", CollectiveOp::kReduceScatter}, {"Broadcast", CollectiveOp::kBroadcast},
      {"Reduce", CollectiveOp::kReduce},             {"AlltoAll", CollectiveOp::kAllToAll},
      {"Gather", CollectiveOp::kGather},             {"Scatter", CollectiveOp::kScatter},
      {"SomethingNew", CollectiveOp::kUnknown}};
  for (size_t i = 0; i < cases.size(); ++i) {
    Add(CollStart(0x10 * (i + 1), i, 1, 0), 100, OperationText(cases[i].first, "ncclUint8"));
    Add(Stop(0x10 * (i + 1)), 100);
  }
  Add(P2pStart(0x1000, 1, 1), 100, OperationText("Send", "ncclUint8"));
  Add(Stop(0x1000), 100);
  Add(P2pStart(0x1010, 1, 1), 100, OperationText("Recv", "ncclUint8"));
  Add(Stop(0x1010), 100);
  const trace::EventTables out = Emit(100 + kIdle);
  ASSERT_EQ(out.collectives.size(), cases.size() + 2);
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(out.collectives[i].op, cases[i].second) << cases[i].first;
    EXPECT_EQ(Name(out.collectives[i].name), cases[i].first);
  }
  EXPECT_EQ(out.collectives[cases.size()].op, CollectiveOp::kSend);
  EXPECT_EQ(out.collectives[cases.size() + 1].op, CollectiveOp::kRecv);
}

TEST_F(NcclAssemblerTest, PointToPointSequencesCountPerCommunicatorFunctionAndPeer) {
  AddWorld();
  Add(CommRecord(2, 0x77, 0, 2), 0, "other");
  struct Case {
    uint64_t comm;
    const char* func;
    int peer;
    uint64_t expected_sequence;
  };
  const std::vector<Case> cases = {
      {kComm, "Send", 1, 0}, {kComm, "Send", 1, 1}, {kComm, "Send", 2, 0}, {kComm, "Recv", 1, 0},
      {kComm, "Send", 1, 2}, {kComm, "Recv", 1, 1}, {2, "Send", 1, 0},     {2, "Send", 1, 1}};
  for (size_t i = 0; i < cases.size(); ++i) {
    const uint64_t id = 0x10 * (i + 1);
    Add(P2pStart(id, cases[i].peer, 4, 1, cases[i].comm), 100, OperationText(cases[i].func, "ncclFloat32"));
    Add(Stop(id), 100);
  }
  const trace::EventTables out = Emit(100 + kIdle);
  ASSERT_EQ(out.collectives.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(out.collectives[i].sequence, cases[i].expected_sequence) << "operation " << i;
    EXPECT_EQ(out.collectives[i].peer, cases[i].peer);
  }
}

TEST_F(NcclAssemblerTest, PointToPointSequencesDoNotRestartWhenTheCommunicatorIsDrainedLate) {
  // The communicator's init was recorded on another thread, whose buffer drained later.
  for (uint64_t id : {0x10, 0x20}) {
    Add(P2pStart(id, 1, 4), 100, OperationText("Send", "ncclFloat32"));
    Add(Stop(id), 100);
  }
  AddWorld(50);
  Add(P2pStart(0x30, 1, 4), 200, OperationText("Send", "ncclFloat32"));
  Add(Stop(0x30), 200);
  const trace::EventTables out = Emit(200 + kIdle);
  ASSERT_EQ(out.collectives.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(out.collectives[i].sequence, i);
    EXPECT_EQ(out.collectives[i].comm_hash, kHash);
  }
}

// ---- when an operation is written ----------------------------------------------------------

TEST_F(NcclAssemblerTest, OperationIsNotWrittenBeforeItsStop) {
  AddWorld();
  Add(CollStart(0x10, 0, 4, 1), 100, OperationText("AllReduce", "ncclFloat32"));
  Add(KernelChannel(0x11, 0x10, 0), 120);
  Add(Stop(0x11), 130);
  // Its one channel is over, and long ago, but NCCL has not stopped the operation yet.
  EXPECT_TRUE(Emit(1'000'000).collectives.empty());
  Add(Stop(0x10), 1'000'100);
  const trace::EventTables out = Emit(1'000'100);
  ASSERT_EQ(out.collectives.size(), 1u);
  EXPECT_EQ(out.collectives[0].start_ns, 100);
  EXPECT_EQ(out.collectives[0].end_ns, 1'000'100);
  EXPECT_EQ(out.collective_parts.size(), 1u);
}

TEST_F(NcclAssemblerTest, OperationIsNotWrittenWhileAPartIsRunning) {
  AddWorld();
  AddAllReduce(0x10, 0, 2, 100);
  Add(KernelChannel(0x11, 0x10, 0), 110);
  Add(KernelChannel(0x12, 0x10, 1), 110);
  Add(ProxyOp(0x13, 0x10, 0, 2, true), 110);
  Add(Stop(0x11), 200);
  Add(Stop(0x12), 200);
  // Both announced channels stopped, but the proxy still sends: neither done nor idle.
  EXPECT_TRUE(Emit(200).collectives.empty());
  EXPECT_TRUE(Emit(1'000'000).collectives.empty());
  Add(Stop(0x13), 1'000'000);
  const trace::EventTables out = Emit(1'000'000);
  ASSERT_EQ(out.collectives.size(), 1u);
  EXPECT_EQ(out.collective_parts.size(), 3u);
  EXPECT_EQ(out.collectives[0].end_ns, 1'000'000);  // the last stop of it or its parts
}

TEST_F(NcclAssemblerTest, OperationIsWrittenOnceItsAnnouncedKernelChannelsStopped) {
  AddWorld();
  AddAllReduce(0x10, 0, 2, 100);
  Add(KernelChannel(0x11, 0x10, 0), 110);
  Add(KernelChannel(0x12, 0x10, 1), 110);
  Add(Stop(0x11), 150);
  EXPECT_TRUE(Emit(150).collectives.empty());  // one of two
  Add(Stop(0x12), 160);
  const trace::EventTables out = Emit(160);  // no idle time needed
  ASSERT_EQ(out.collectives.size(), 1u);
  EXPECT_EQ(out.collective_parts.size(), 2u);
  EXPECT_TRUE(Emit(100'000).collectives.empty());  // written once
  EXPECT_EQ(assembler_.stats().operations, 1u);
}

TEST_F(NcclAssemblerTest, OperationWithFewerChannelsThanAnnouncedIsWrittenAfterTheIdleLimit) {
  AddWorld();
  AddAllReduce(0x10, 0, 2, 100);
  Add(KernelChannel(0x11, 0x10, 0), 110);
  Add(Stop(0x11), 150);  // the second channel never reports (graph capture, say)
  EXPECT_TRUE(Emit(150).collectives.empty());
  EXPECT_TRUE(Emit(150 + kIdle - 1).collectives.empty());
  const trace::EventTables out = Emit(150 + kIdle);
  ASSERT_EQ(out.collectives.size(), 1u);
  EXPECT_EQ(out.collectives[0].channels, 2u);  // as announced
  EXPECT_EQ(out.collective_parts.size(), 1u);
}

TEST_F(NcclAssemblerTest, APartThatNeverStopsHoldsItsOperationOnlyUntilTheStallLimit) {
  AddWorld();
  AddAllReduce(0x10, 0, 0, 100);
  Add(ProxyOp(0x13, 0x10, 0, 2, true), 110);  // its stop is lost
  EXPECT_TRUE(Emit(110 + kStall - 1).collectives.empty());
  const trace::EventTables out = Emit(110 + kStall);
  ASSERT_EQ(out.collectives.size(), 1u);
  EXPECT_EQ(out.collective_parts.size(), 1u);
  EXPECT_TRUE(assembler_.empty());
}

TEST_F(NcclAssemblerTest, OperationWithoutPartsIsWrittenAfterTheIdleLimit) {
  AddWorld();
  AddAllReduce(0x10, 0, 0, 100);
  EXPECT_TRUE(Emit(100 + kIdle - 1).collectives.empty());
  EXPECT_EQ(Emit(100 + kIdle).collectives.size(), 1u);
}

TEST_F(NcclAssemblerTest, FinalWritesEverythingStillOpen) {
  AddWorld();
  Add(CollStart(0x10, 3, 4, 2), 100, OperationText("AllReduce", "ncclFloat32"));  // never stopped
  Add(KernelChannel(0x11, 0x10, 0), 150);                                          // still running
  Add(ProxyOp(0x20, 0, 1, 3, false), 170);                                         // no operation
  EXPECT_TRUE(Emit(1'000'000).collectives.empty());
  const trace::EventTables out = Emit(1'000'000, /*final=*/true);
  ASSERT_EQ(out.collectives.size(), 1u);
  EXPECT_EQ(out.collectives[0].sequence, 3u);
  EXPECT_EQ(out.collectives[0].start_ns, 100);
  EXPECT_EQ(out.collectives[0].end_ns, 150);  // the last thing heard of it
  ASSERT_EQ(out.collective_parts.size(), 2u);
  EXPECT_EQ(assembler_.stats().orphan_parts, 1u);
  EXPECT_TRUE(assembler_.empty());
  const trace::EventTables again = Emit(2'000'000, /*final=*/true);
  EXPECT_TRUE(again.collectives.empty());
  EXPECT_TRUE(again.collective_parts.empty());
}

TEST_F(NcclAssemblerTest, OperationsAreWrittenInStartOrder) {
  AddWorld();
  AddAllReduce(0x30, 2, 0, 100);
  AddAllReduce(0x10, 0, 0, 100);
  AddAllReduce(0x20, 1, 0, 100);
  const trace::EventTables out = Emit(100 + kIdle);
  ASSERT_EQ(out.collectives.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(out.collectives[i].sequence, i);
}

// ---- the flight recorder ---------------------------------------------------------------------

class NcclFlightTest : public NcclAssemblerTest {
 protected:
  NcclFlightTest() { assembler_.SetFlightRecorder(&flight_); }
  // The flight recorder's entries now.
  std::vector<trace::FlightCollective> Entries() { return flight_.Snapshot(1).collectives; }

  FlightRecorder flight_;
};

TEST_F(NcclFlightTest, ACollectiveIsEnteredAtItsStartAndCompletedWhenItsChannelsAllStopped) {
  AddWorld();
  AddAllReduce(0x10, 7, 2, 100, /*count=*/256);
  ASSERT_EQ(Entries().size(), 1u);
  EXPECT_TRUE(Entries()[0].in_flight());  // entered: enqueued, not yet run
  Add(KernelChannel(0x11, 0x10, 0), 110);
  Add(KernelChannel(0x12, 0x10, 1), 110);
  Add(Stop(0x11), 150);
  Add(Stop(0x12), 160);
  ASSERT_EQ(Emit(160).collectives.size(), 1u);
  const std::vector<trace::FlightCollective> entries = Entries();
  ASSERT_EQ(entries.size(), 1u);
  const trace::FlightCollective& allreduce = entries[0];
  EXPECT_EQ(allreduce.end_ns, std::optional<int64_t>(160));  // the last channel's stop
  EXPECT_EQ(allreduce.start_ns, 100);
  EXPECT_EQ(allreduce.comm_hash, kHash);
  EXPECT_EQ(allreduce.sequence, 7u);
  EXPECT_EQ(allreduce.op, CollectiveOp::kAllReduce);
  EXPECT_EQ(allreduce.name, "AllReduce");
  EXPECT_EQ(allreduce.bytes, 1024u);  // 256 floats
  EXPECT_EQ(allreduce.root, -1);
  EXPECT_EQ(allreduce.comm_rank, 1);
  EXPECT_EQ(allreduce.comm_size, 4);
  EXPECT_EQ(flight_.completed_collectives(), 1u);
  EXPECT_EQ(flight_.last_progress_ns(), 160);
}

TEST_F(NcclFlightTest, ACollectiveWithoutChannelsIsCompletedOnceQuiet) {
  AddWorld();
  AddAllReduce(0x10, 0, 0, 100);
  ASSERT_EQ(Emit(100 + kIdle).collectives.size(), 1u);
  ASSERT_EQ(Entries().size(), 1u);
  EXPECT_EQ(Entries()[0].end_ns, std::optional<int64_t>(100));
  EXPECT_EQ(flight_.in_flight(), 0u);
}

TEST_F(NcclFlightTest, ACollectiveWhoseChannelNeverStopsStaysInFlightWhenWrittenAtTheStallLimit) {
  AddWorld();
  Add(CollStart(0x10, 12, 256, 1, /*root=*/3), 100, OperationText("Broadcast", "ncclFloat32", "RING", "LL"));
  Add(Stop(0x10), 100);
  Add(KernelChannel(0x11, 0x10, 0), 110);  // waits for a peer that never comes
  const trace::EventTables out = Emit(110 + kStall);
  ASSERT_EQ(out.collectives.size(), 1u);  // the row is written, as before
  const std::vector<trace::FlightCollective> entries = Entries();
  ASSERT_EQ(entries.size(), 1u);
  const trace::FlightCollective& stuck = entries[0];
  EXPECT_TRUE(stuck.in_flight());
  EXPECT_EQ(stuck.comm_hash, kHash);
  EXPECT_EQ(stuck.sequence, 12u);
  EXPECT_EQ(stuck.op, CollectiveOp::kBroadcast);
  EXPECT_EQ(stuck.bytes, 1024u);
  EXPECT_EQ(stuck.root, 3);
  EXPECT_EQ(stuck.start_ns, 100);
  EXPECT_EQ(flight_.completed_collectives(), 0u);
  EXPECT_EQ(flight_.last_progress_ns(), 0);
}

TEST_F(NcclFlightTest, ACollectiveWrittenAtTheEndStaysInFlight) {
  AddWorld();
  AddAllReduce(0x10, 0, 1, 100);
  Add(KernelChannel(0x11, 0x10, 0), 110);
  Add(Stop(0x11), 120);
  AddAllReduce(0x20, 1, 1, 200);
  Add(KernelChannel(0x21, 0x20, 0), 210);  // still running when the process ends
  EXPECT_EQ(Emit(300, /*final=*/true).collectives.size(), 2u);
  const std::vector<trace::FlightCollective> entries = Entries();
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].sequence, 0u);
  EXPECT_FALSE(entries[0].in_flight());
  EXPECT_EQ(entries[1].sequence, 1u);
  EXPECT_TRUE(entries[1].in_flight());
  EXPECT_EQ(flight_.completed_collectives(), 1u);
}

TEST_F(NcclFlightTest, ASendIsEnteredWithItsPeer) {
  AddWorld();
  Add(P2pStart(0x10, /*peer=*/2, 16), 100, OperationText("Send", "ncclInt32"));
  Add(P2pStart(0x20, /*peer=*/2, 16), 110, OperationText("Send", "ncclInt32"));
  std::vector<trace::FlightCollective> entries = Entries();
  ASSERT_EQ(entries.size(), 2u);
  for (uint64_t i = 0; i < 2; ++i) {
    EXPECT_TRUE(entries[i].in_flight());
    EXPECT_EQ(entries[i].op, CollectiveOp::kSend);
    EXPECT_EQ(entries[i].peer, 2);
    EXPECT_EQ(entries[i].root, -1);
    EXPECT_EQ(entries[i].bytes, 64u);
    EXPECT_EQ(entries[i].sequence, i);  // the n-th send to that peer
    EXPECT_EQ(entries[i].comm_hash, kHash);
  }
  Add(Stop(0x10), 100);
  Add(KernelChannel(0x11, 0x10, 0), 120);
  Add(Stop(0x11), 130);
  ASSERT_EQ(Emit(130).collectives.size(), 1u);
  entries = Entries();
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].end_ns, std::optional<int64_t>(130));
  EXPECT_TRUE(entries[1].in_flight());
}

// ---- times ----------------------------------------------------------------------------------

TEST_F(NcclAssemblerTest, GpuTimesAreConvertedWithTheSmallestHostMinusGpuOffset) {
  constexpr int64_t kGpu = 50'000'000;  // %globaltimer
  constexpr int64_t kHost = 7'000;      // host - GPU, as the clocks really are
  AddWorld();
  AddAllReduce(0x10, 0, 2, kGpu + kHost);
  // The proxy thread sees each channel some time after it happened, never before.
  Add(KernelChannel(0x11, 0x10, 0, kGpu + 100), kGpu + 100 + kHost + 500);
  Add(KernelChannel(0x12, 0x10, 1, kGpu + 150), kGpu + 150 + kHost + 40);  // the closest look
  Add(State(0x11, kGpu + 900), kGpu + 900 + kHost + 200);
  Add(Stop(0x11), kGpu + 900 + kHost + 200);
  Add(State(0x12, kGpu + 950), kGpu + 950 + kHost + 60);
  Add(Stop(0x12), kGpu + 950 + kHost + 60);
  const trace::EventTables out = Emit(kGpu + 950 + kHost + 60);
  ASSERT_EQ(assembler_.gpu_clock_offset_ns(), kHost + 40);
  ASSERT_EQ(out.collectives.size(), 1u);
  EXPECT_EQ(out.collectives[0].start_ns, kGpu + 100 + kHost + 40);  // the first channel's start
  EXPECT_EQ(out.collectives[0].end_ns, kGpu + 950 + kHost + 40);    // the last channel's stop
  ASSERT_EQ(out.collective_parts.size(), 2u);
  std::map<int32_t, trace::CollectivePartEvent> by_channel;
  for (const auto& part : out.collective_parts) by_channel[part.channel] = part;
  EXPECT_EQ(by_channel[0].start_ns, kGpu + 100 + kHost + 40);
  EXPECT_EQ(by_channel[0].end_ns, kGpu + 900 + kHost + 40);
  EXPECT_EQ(by_channel[1].start_ns, kGpu + 150 + kHost + 40);
  EXPECT_EQ(by_channel[1].end_ns, kGpu + 950 + kHost + 40);
}

TEST_F(NcclAssemblerTest, CallbacksThatComeLateDoNotMoveTheOffset) {
  AddWorld();
  AddAllReduce(0x10, 0, 1, 0);
  Add(KernelChannel(0x11, 0x10, 0, 1'000), 1'000 + 300);
  Add(State(0x11, 2'000), 2'000 + 300);
  Add(Stop(0x11), 2'000 + 300);
  AddAllReduce(0x20, 1, 1, 3'000);
  Add(KernelChannel(0x21, 0x20, 0, 4'000), 4'000 + 900);  // a later, worse look
  Add(State(0x21, 5'000), 5'000 + 900);
  Add(Stop(0x21), 5'000 + 900);
  const trace::EventTables out = Emit(6'000);
  ASSERT_EQ(out.collectives.size(), 2u);
  EXPECT_EQ(out.collectives[1].start_ns, 4'300);
  EXPECT_EQ(out.collectives[1].end_ns, 5'300);
}

TEST_F(NcclAssemblerTest, HostTimesAreUsedWhenKernelChannelsHaveNoGpuTimes) {
  AddWorld();
  AddAllReduce(0x10, 0, 2, 1'000);
  Add(KernelChannel(0x11, 0x10, 0), 1'100);
  Add(KernelChannel(0x12, 0x10, 1), 1'120);
  Add(Stop(0x11), 1'500);
  Add(Stop(0x12), 1'600);
  const trace::EventTables out = Emit(1'600);
  EXPECT_FALSE(assembler_.gpu_clock_offset_ns().has_value());
  ASSERT_EQ(out.collectives.size(), 1u);
  EXPECT_EQ(out.collectives[0].start_ns, 1'000);  // enqueued
  EXPECT_EQ(out.collectives[0].end_ns, 1'600);    // the last part's stop
  ASSERT_EQ(out.collective_parts.size(), 2u);
  std::map<int32_t, trace::CollectivePartEvent> by_channel;
  for (const auto& part : out.collective_parts) by_channel[part.channel] = part;
  EXPECT_EQ(by_channel[0].start_ns, 1'100);
  EXPECT_EQ(by_channel[0].end_ns, 1'500);
  EXPECT_EQ(by_channel[1].start_ns, 1'120);
  EXPECT_EQ(by_channel[1].end_ns, 1'600);
}

TEST_F(NcclAssemblerTest, GpuTimesHoursAwayFromTheHostClockAreNotUsed) {
  constexpr int64_t kTwoHours = int64_t{2} * 3600 * 1'000'000'000;
  const int64_t host = kTwoHours + 1'000;
  AddWorld();
  AddAllReduce(0x10, 0, 1, host);
  Add(KernelChannel(0x11, 0x10, 0, 100), host + 100);  // not a clock reading
  Add(State(0x11, 200), host + 400);
  Add(Stop(0x11), host + 400);
  const trace::EventTables out = Emit(host + 400);
  EXPECT_FALSE(assembler_.gpu_clock_offset_ns().has_value());
  ASSERT_EQ(out.collectives.size(), 1u);
  EXPECT_EQ(out.collectives[0].start_ns, host);
  EXPECT_EQ(out.collectives[0].end_ns, host + 400);
}

// ---- parts ----------------------------------------------------------------------------------

TEST_F(NcclAssemblerTest, KernelChannelPartsCarryTheOperationsKeyAndLane) {
  AddWorld();
  AddAllReduce(0x10, 9, 1, 100);
  Add(KernelChannel(0x11, 0x10, 5, 1'000), 1'100);
  Add(State(0x11, 1'800), 1'900);
  Add(Stop(0x11), 1'900);
  const trace::EventTables out = Emit(1'900);
  ASSERT_EQ(out.collectives.size(), 1u);
  ASSERT_EQ(out.collective_parts.size(), 1u);
  const trace::CollectivePartEvent& part = out.collective_parts[0];
  EXPECT_EQ(part.part_kind, CollectivePartKind::kKernelChannel);
  EXPECT_EQ(part.lane, out.collectives[0].lane);
  EXPECT_EQ(part.comm_hash, kHash);
  EXPECT_EQ(part.sequence, 9u);
  EXPECT_EQ(part.channel, 5);
  EXPECT_EQ(part.peer, -1);
  EXPECT_EQ(part.step, -1);
  EXPECT_EQ(part.bytes, 0u);
  EXPECT_EQ(part.start_ns, 1'100);  // offset 100 from the start observation
  EXPECT_EQ(part.end_ns, 1'900);
  EXPECT_EQ(Name(part.name), "channel 5");
  EXPECT_EQ(assembler_.stats().parts, 1u);
}

TEST_F(NcclAssemblerTest, ProxyOperationPartsCarryDirectionPeerChannelAndBytes) {
  AddWorld();
  Add(P2pStart(0x10, 3, 1024), 100, OperationText("Send", "ncclFloat32"));
  Add(Stop(0x10), 100);
  Add(ProxyOp(0x11, 0x10, 2, 3, /*is_send=*/true), 200);
  Add(State(0x11, 1024, 1), 300);  // bytes moved so far: only ever grows
  Add(State(0x11, 4096, 2), 400);
  Add(State(0x11, 2048, 3), 450);
  Add(Stop(0x11), 500);
  Add(P2pStart(0x20, 3, 16), 600, OperationText("Recv", "ncclFloat32"));
  Add(Stop(0x20), 600);
  Add(ProxyOp(0x21, 0x20, 1, 3, /*is_send=*/false), 650);
  Add(Stop(0x21), 700);
  const trace::EventTables out = Emit(700 + kIdle);
  ASSERT_EQ(out.collectives.size(), 2u);
  ASSERT_EQ(out.collective_parts.size(), 2u);
  const trace::CollectivePartEvent& send = out.collective_parts[0];
  EXPECT_EQ(send.part_kind, CollectivePartKind::kProxySend);
  EXPECT_EQ(send.peer, 3);
  EXPECT_EQ(send.channel, 2);
  EXPECT_EQ(send.bytes, 4096u);
  EXPECT_EQ(send.step, -1);
  EXPECT_EQ(send.start_ns, 200);
  EXPECT_EQ(send.end_ns, 500);
  EXPECT_EQ(send.comm_hash, kHash);
  EXPECT_EQ(send.sequence, 0u);
  EXPECT_EQ(send.lane, out.collectives[0].lane);
  EXPECT_EQ(Name(send.name), "send to peer 3 · channel 2");
  const trace::CollectivePartEvent& recv = out.collective_parts[1];
  EXPECT_EQ(recv.part_kind, CollectivePartKind::kProxyRecv);
  EXPECT_EQ(recv.peer, 3);
  EXPECT_EQ(recv.channel, 1);
  EXPECT_EQ(Name(recv.name), "recv from peer 3 · channel 1");
  EXPECT_EQ(out.collectives[0].end_ns, 500);  // the proxy's stop ends the operation
}

TEST_F(NcclAssemblerTest, ProxyStepsInheritDirectionPeerAndChannelFromTheirProxyOperation) {
  AddWorld();
  AddAllReduce(0x10, 4, 0, 100);
  Add(ProxyOp(0x11, 0x10, 1, 2, /*is_send=*/false), 110);
  Add(ProxyStep(0x12, 0x11, 5), 120);
  Add(State(0x12, 512, 10), 130);
  Add(Stop(0x12), 140);
  Add(ProxyOp(0x13, 0x10, 3, 0, /*is_send=*/true), 110);
  Add(ProxyStep(0x14, 0x13, 6), 150);
  Add(State(0x14, 256, 9), 160);
  Add(Stop(0x14), 170);
  Add(Stop(0x11), 180);
  Add(Stop(0x13), 180);
  const trace::EventTables out = Emit(180 + kIdle);
  ASSERT_EQ(out.collectives.size(), 1u);
  ASSERT_EQ(out.collective_parts.size(), 4u);
  std::map<CollectivePartKind, trace::CollectivePartEvent> by_kind;
  for (const auto& part : out.collective_parts) {
    EXPECT_EQ(part.comm_hash, kHash);
    EXPECT_EQ(part.sequence, 4u);
    EXPECT_EQ(part.lane, out.collectives[0].lane);
    by_kind[part.part_kind] = part;
  }
  ASSERT_EQ(by_kind.size(), 4u);
  const trace::CollectivePartEvent& recv_step = by_kind[CollectivePartKind::kProxyRecvStep];
  EXPECT_EQ(recv_step.step, 5);
  EXPECT_EQ(recv_step.peer, 2);
  EXPECT_EQ(recv_step.channel, 1);
  EXPECT_EQ(recv_step.bytes, 512u);
  EXPECT_EQ(recv_step.start_ns, 120);
  EXPECT_EQ(recv_step.end_ns, 140);
  EXPECT_EQ(Name(recv_step.name), "recv step 5");
  const trace::CollectivePartEvent& send_step = by_kind[CollectivePartKind::kProxySendStep];
  EXPECT_EQ(send_step.step, 6);
  EXPECT_EQ(send_step.peer, 0);
  EXPECT_EQ(send_step.channel, 3);
  EXPECT_EQ(send_step.bytes, 256u);
  EXPECT_EQ(Name(send_step.name), "send step 6");
  // Versions 4 and 5 report bytes per step only: each proxy operation moved its steps' sum.
  EXPECT_EQ(by_kind[CollectivePartKind::kProxyRecv].bytes, 512u);
  EXPECT_EQ(by_kind[CollectivePartKind::kProxySend].bytes, 256u);
}

TEST_F(NcclAssemblerTest, PartsDrainedBeforeTheirOperationStillAttach) {
  AddWorld();
  // Another thread's buffer came first: the parts arrive before the operation's start.
  Add(ProxyStep(0x12, 0x11, 0), 120);
  Add(Stop(0x12), 140);
  Add(ProxyOp(0x11, 0x10, 1, 2, true), 110);
  Add(Stop(0x11), 140);
  Add(KernelChannel(0x13, 0x10, 0), 115);
  Add(Stop(0x13), 140);
  const trace::EventTables early = Emit(140 + kIdle - 1);  // not idle long enough for orphans
  EXPECT_TRUE(early.collectives.empty());
  EXPECT_TRUE(early.collective_parts.empty());
  Add(CollStart(0x10, 6, 4, 1), 100, OperationText("AllReduce", "ncclFloat32"));
  Add(Stop(0x10), 105);
  const trace::EventTables out = Emit(140 + kIdle - 1);
  ASSERT_EQ(out.collectives.size(), 1u);
  ASSERT_EQ(out.collective_parts.size(), 3u);
  for (const auto& part : out.collective_parts) EXPECT_EQ(part.sequence, 6u);
  EXPECT_EQ(assembler_.stats().orphan_parts, 0u);
  EXPECT_TRUE(assembler_.empty());
}

TEST_F(NcclAssemblerTest, PartsWithoutAnOperationAreWrittenAsOrphansOnceStoppedAndIdle) {
  AddWorld();
  Add(ProxyOp(0x11, 0, 2, 3, true), 100);        // another process's (PXN) work
  Add(KernelChannel(0x21, 0x20, 1), 110);        // its operation's record was lost
  Add(Stop(0x11), 500);
  Add(Stop(0x21), 500);
  EXPECT_TRUE(Emit(500 + kIdle - 1).collective_parts.empty());
  const trace::EventTables out = Emit(500 + kIdle);
  EXPECT_TRUE(out.collectives.empty());
  ASSERT_EQ(out.collective_parts.size(), 2u);
  for (const auto& part : out.collective_parts) {
    EXPECT_EQ(part.comm_hash, kHash);
    EXPECT_EQ(part.sequence, 0u);
    EXPECT_EQ(sink_.lane(part.lane).name, "world (rank 1 of 4)");
  }
  EXPECT_EQ(assembler_.stats().orphan_parts, 2u);
  EXPECT_EQ(assembler_.stats().parts, 2u);
  EXPECT_TRUE(assembler_.empty());
}

TEST_F(NcclAssemblerTest, RunningOrphansAreWrittenOnlyOnFinal) {
  AddWorld();
  Add(ProxyOp(0x11, 0, 2, 3, false), 100);
  Add(State(0x11, 64, 5), 300);
  EXPECT_TRUE(Emit(1'000'000).collective_parts.empty());
  const trace::EventTables out = Emit(1'000'000, /*final=*/true);
  ASSERT_EQ(out.collective_parts.size(), 1u);
  EXPECT_EQ(out.collective_parts[0].start_ns, 100);
  EXPECT_EQ(out.collective_parts[0].end_ns, 300);  // the last thing heard of it
  EXPECT_EQ(out.collective_parts[0].bytes, 64u);
  EXPECT_EQ(assembler_.stats().orphan_parts, 1u);
}

TEST_F(NcclAssemblerTest, StopOrStateOfAnUnknownEventIsCountedAsUnmatched) {
  AddWorld();
  Add(Stop(0x999), 100);
  Add(State(0x998, 5), 100);
  const trace::EventTables out = Emit(100'000, /*final=*/true);
  EXPECT_TRUE(out.collectives.empty());
  EXPECT_TRUE(out.collective_parts.empty());
  EXPECT_EQ(assembler_.stats().unmatched_stops, 2u);
}

// ---- version 3 --------------------------------------------------------------------------------

TEST_F(NcclAssemblerTest, Version3TakesTheCommunicatorFromEachOperation) {
  // Version 3 inits one context for every communicator and names none.
  Add(CommRecord(kComm, 0, -1, 0), 0, "");
  NcclRecord first = CollStart(0x10, 0, 4, 0);
  first.comm_hash = 0x111;
  Add(first, 100, OperationText("AllReduce", "ncclFloat32"));
  Add(Stop(0x10), 100);
  NcclRecord second = CollStart(0x20, 0, 4, 0);
  second.comm_hash = 0x222;
  Add(second, 100, OperationText("AllReduce", "ncclFloat32"));
  Add(Stop(0x20), 100);
  NcclRecord third = CollStart(0x30, 1, 4, 0);
  third.comm_hash = 0x111;
  Add(third, 100, OperationText("AllReduce", "ncclFloat32"));
  Add(Stop(0x30), 100);
  for (uint64_t id : {0x40, 0x50}) {
    NcclRecord send = P2pStart(id, 1, 4);
    send.comm_hash = id == 0x40 ? 0x111 : 0x222;
    Add(send, 100, OperationText("Send", "ncclFloat32"));
    Add(Stop(id), 100);
  }
  const trace::EventTables out = Emit(100 + kIdle);
  ASSERT_EQ(out.collectives.size(), 5u);
  EXPECT_EQ(out.collectives[0].comm_hash, 0x111u);
  EXPECT_EQ(out.collectives[1].comm_hash, 0x222u);
  EXPECT_EQ(out.collectives[2].comm_hash, 0x111u);
  EXPECT_EQ(out.collectives[2].sequence, 1u);
  EXPECT_EQ(out.collectives[0].lane, out.collectives[2].lane);
  EXPECT_NE(out.collectives[0].lane, out.collectives[1].lane);
  EXPECT_EQ(out.collectives[0].comm_rank, -1);  // neither init nor the descriptor said
  EXPECT_EQ(out.collectives[0].comm_size, 0);
  // Point-to-point counters per communicator: each first Send to peer 1 is number 0.
  EXPECT_EQ(out.collectives[3].sequence, 0u);
  EXPECT_EQ(out.collectives[4].sequence, 0u);
  EXPECT_EQ(out.collectives[3].lane, out.collectives[0].lane);
  EXPECT_EQ(out.collectives[4].lane, out.collectives[1].lane);
  ASSERT_EQ(sink_.lanes().size(), 2u);
  EXPECT_EQ(sink_.lane(out.collectives[0].lane).comm_hash, 0x111u);
  EXPECT_EQ(sink_.lane(out.collectives[0].lane).name, "NCCL 0000000000000111");
  EXPECT_EQ(sink_.lane(out.collectives[1].lane).comm_hash, 0x222u);
}

TEST_F(NcclAssemblerTest, Version3TakesTheRankFromTheDescriptor) {
  Add(CommRecord(kComm, 0, -1, 0), 0, "");
  NcclRecord start = CollStart(0x10, 0, 4, 0);
  start.comm_hash = 0x111;
  start.rank = 2;
  Add(start, 100, OperationText("AllReduce", "ncclFloat32"));
  Add(Stop(0x10), 100);
  const trace::EventTables out = Emit(100 + kIdle);
  ASSERT_EQ(out.collectives.size(), 1u);
  EXPECT_EQ(out.collectives[0].comm_rank, 2);
  EXPECT_EQ(out.collectives[0].comm_size, 0);  // nothing says how many
}

TEST_F(NcclAssemblerTest, InitsRankWinsOverTheDescriptors) {
  AddWorld();  // this rank 1 of 4
  NcclRecord start = CollStart(0x10, 0, 4, 0);
  start.rank = 3;
  Add(start, 100, OperationText("AllReduce", "ncclFloat32"));
  Add(Stop(0x10), 100);
  const trace::EventTables out = Emit(100 + kIdle);
  ASSERT_EQ(out.collectives.size(), 1u);
  EXPECT_EQ(out.collectives[0].comm_rank, 1);
  EXPECT_EQ(out.collectives[0].comm_size, 4);
}

TEST_F(NcclAssemblerTest, Version3LaneIsNamedAfterTheCommunicatorNameOfItsOperations) {
  Add(CommRecord(kComm, 0, -1, 0), 0, "");
  NcclRecord coll = CollStart(0x10, 0, 4, 0);
  coll.comm_hash = 0x111;
  std::string text = OperationText("AllReduce", "ncclFloat32", "TREE", "SIMPLE");
  text.append("tensor-parallel");
  text.push_back('\0');
  Add(coll, 100, text);
  Add(Stop(0x10), 100);
  const trace::EventTables out = Emit(100 + kIdle);
  ASSERT_EQ(out.collectives.size(), 1u);
  EXPECT_EQ(sink_.lane(out.collectives[0].lane).name, "tensor-parallel");
  EXPECT_EQ(Name(out.collectives[0].algorithm), "TREE");
  EXPECT_EQ(Name(out.collectives[0].protocol), "SIMPLE");
}

// ---- NCCL's names ---------------------------------------------------------------------------

TEST(NcclNames, CollectiveOpsByNcclFunctionName) {
  EXPECT_EQ(NcclCollectiveOp("AllReduce"), CollectiveOp::kAllReduce);
  EXPECT_EQ(NcclCollectiveOp("AllGather"), CollectiveOp::kAllGather);
  EXPECT_EQ(NcclCollectiveOp("ReduceScatter"), CollectiveOp::kReduceScatter);
  EXPECT_EQ(NcclCollectiveOp("Broadcast"), CollectiveOp::kBroadcast);
  EXPECT_EQ(NcclCollectiveOp("Reduce"), CollectiveOp::kReduce);
  EXPECT_EQ(NcclCollectiveOp("AlltoAll"), CollectiveOp::kAllToAll);
  EXPECT_EQ(NcclCollectiveOp("AllToAll"), CollectiveOp::kAllToAll);
  EXPECT_EQ(NcclCollectiveOp("Send"), CollectiveOp::kSend);
  EXPECT_EQ(NcclCollectiveOp("Recv"), CollectiveOp::kRecv);
  EXPECT_EQ(NcclCollectiveOp("Gather"), CollectiveOp::kGather);
  EXPECT_EQ(NcclCollectiveOp("Scatter"), CollectiveOp::kScatter);
  EXPECT_EQ(NcclCollectiveOp("allreduce"), CollectiveOp::kUnknown);  // NCCL's spelling only
  EXPECT_EQ(NcclCollectiveOp(""), CollectiveOp::kUnknown);
}

TEST(NcclNames, DataTypesByNcclName) {
  const std::vector<std::pair<std::string, DataType>> cases = {
      {"ncclInt8", DataType::kInt8},           {"ncclUint8", DataType::kUint8},
      {"ncclInt32", DataType::kInt32},         {"ncclUint32", DataType::kUint32},
      {"ncclInt64", DataType::kInt64},         {"ncclUint64", DataType::kUint64},
      {"ncclFloat16", DataType::kFloat16},     {"ncclFloat32", DataType::kFloat32},
      {"ncclFloat64", DataType::kFloat64},     {"ncclBfloat16", DataType::kBfloat16},
      {"ncclFloat8e4m3", DataType::kFloat8E4M3}, {"ncclFloat8e5m2", DataType::kFloat8E5M2},
      {"float", DataType::kUnknown},           {"", DataType::kUnknown}};
  for (const auto& [name, type] : cases) EXPECT_EQ(NcclDataType(name), type) << name;
}

TEST(NcclNames, TypeSizes) {
  EXPECT_EQ(NcclTypeSize(DataType::kInt8), 1);
  EXPECT_EQ(NcclTypeSize(DataType::kUint8), 1);
  EXPECT_EQ(NcclTypeSize(DataType::kFloat8E4M3), 1);
  EXPECT_EQ(NcclTypeSize(DataType::kFloat8E5M2), 1);
  EXPECT_EQ(NcclTypeSize(DataType::kFloat16), 2);
  EXPECT_EQ(NcclTypeSize(DataType::kBfloat16), 2);
  EXPECT_EQ(NcclTypeSize(DataType::kInt32), 4);
  EXPECT_EQ(NcclTypeSize(DataType::kUint32), 4);
  EXPECT_EQ(NcclTypeSize(DataType::kFloat32), 4);
  EXPECT_EQ(NcclTypeSize(DataType::kInt64), 8);
  EXPECT_EQ(NcclTypeSize(DataType::kUint64), 8);
  EXPECT_EQ(NcclTypeSize(DataType::kFloat64), 8);
  EXPECT_EQ(NcclTypeSize(DataType::kUnknown), 0);
}

}  // namespace
}  // namespace rankscope::collector
