// CuptiConverter on hand-built CUDA 13.0 activity buffers, walked by the real
// cuptiActivityGetNextRecord: what each record kind becomes in the rank's tables.
#include "collector/cupti_records.h"

#include <cupti.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "collector/cupti_api.h"
#include "tests/collector/collector_test_util.h"

namespace rankscope::collector {
namespace {

using testing::FakeDeviceSink;

constexpr int64_t kPid = 4242;
// The fake clock: device timestamps plus this offset, so a test sees the conversion happen.
constexpr int64_t kClockOffset = 1'000'000'000'000;
constexpr uint32_t kLaunchKernel = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
constexpr uint32_t kStreamSynchronize = CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020;

// An activity buffer as CUPTI fills it: records back to back, 8-byte aligned.
class ActivityBuffer {
 public:
  template <typename Record>
  void Add(const Record& record) {
    static_assert(sizeof(Record) % 8 == 0, "CUPTI records are padded to 8 bytes");
    const size_t offset = bytes_;
    bytes_ += sizeof(Record);
    words_.resize(bytes_ / 8);
    std::memcpy(reinterpret_cast<uint8_t*>(words_.data()) + offset, &record, sizeof(Record));
  }
  uint8_t* data() { return reinterpret_cast<uint8_t*>(words_.data()); }
  size_t size() const { return bytes_; }

 private:
  std::vector<uint64_t> words_;  // uint64_t: the alignment CUPTI requires
  size_t bytes_ = 0;
};

class CuptiRecords : public ::testing::Test {
 protected:
  // The real record walker and callback names: the converter must agree with CUPTI on
  // record sizes, which only the real library can tell.
  void SetUp() override {
    Result<CuptiApi*> real = LoadCupti();
    // Only a missing library skips: one that loads but does not fit must fail.
    if (!real.ok() && real.status().code() == StatusCode::kNotFound) GTEST_SKIP() << real.status().message();
    ASSERT_TRUE(real.ok()) << real.status().message();
    api_.ActivityGetNextRecord = (*real)->ActivityGetNextRecord;
    api_.GetCallbackName = (*real)->GetCallbackName;
  }

  trace::EventTables Convert(ActivityBuffer& buffer) {
    trace::EventTables out;
    converter_.ConvertBuffer(sink_.sink(), buffer.data(), buffer.size(), out);
    return out;
  }

  CuptiApi api_;
  CuptiConverter converter_{api_, kPid};
  FakeDeviceSink sink_{kClockOffset};
};

CUpti_ActivityKernel10 Kernel(const char* name, uint32_t device, uint32_t context, uint32_t stream,
                              uint32_t correlation, uint64_t start, uint64_t end) {
  CUpti_ActivityKernel10 k{};
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.name = name;
  k.deviceId = device;
  k.contextId = context;
  k.streamId = stream;
  k.correlationId = correlation;
  k.start = start;
  k.end = end;
  k.gridX = k.gridY = k.gridZ = 1;
  k.blockX = k.blockY = k.blockZ = 1;
  return k;
}

CUpti_ActivityAPI ApiCall(CUpti_ActivityKind kind, uint32_t cbid, uint32_t tid, uint32_t correlation,
                          uint64_t start, uint64_t end) {
  CUpti_ActivityAPI a{};
  a.kind = kind;
  a.cbid = cbid;
  a.processId = kPid;
  a.threadId = tid;
  a.correlationId = correlation;
  a.start = start;
  a.end = end;
  return a;
}

CUpti_ActivityExternalCorrelation External(CUpti_ExternalCorrelationKind kind, uint64_t id, uint32_t correlation) {
  CUpti_ActivityExternalCorrelation x{};
  x.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
  x.externalKind = kind;
  x.externalId = id;
  x.correlationId = correlation;
  return x;
}

CUpti_ActivitySynchronization2 Sync(CUpti_ActivitySynchronizationType type, uint32_t correlation, uint64_t start,
                                    uint64_t end) {
  CUpti_ActivitySynchronization2 s{};
  s.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  s.type = type;
  s.correlationId = correlation;
  s.contextId = 1;
  s.streamId = 7;
  s.cudaEventId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
  s.start = start;
  s.end = end;
  return s;
}

CUpti_ActivityOverhead3 Overhead(CUpti_ActivityOverheadKind kind, CUpti_ActivityObjectKind object, uint64_t start,
                                 uint64_t end) {
  CUpti_ActivityOverhead3 o{};
  o.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
  o.overheadKind = kind;
  o.objectKind = object;
  o.start = start;
  o.end = end;
  return o;
}

CUpti_ActivityMemory4 Memory(CUpti_ActivityMemoryOperationType operation, CUpti_ActivityMemoryKind kind,
                             uint32_t device, uint64_t bytes, uint64_t timestamp) {
  CUpti_ActivityMemory4 m{};
  m.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
  m.memoryOperationType = operation;
  m.memoryKind = kind;
  m.deviceId = device;
  m.contextId = 1;
  m.streamId = CUPTI_INVALID_STREAM_ID;
  m.bytes = bytes;
  m.address = 0x7f0000000000 + bytes;
  m.timestamp = timestamp;
  return m;
}

constexpr auto kAllocation = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
constexpr auto kRelease = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
constexpr auto kDeviceMemory = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;

TEST(CuptiNames, DemangledKernelNameReadsItaniumSymbolsOnly) {
  EXPECT_EQ(DemangledKernelName("_Z6matmulPKfS0_Pfi"), "matmul(float const*, float const*, float*, int)");
  EXPECT_EQ(DemangledKernelName("_ZN5flash10fwd_kernelILi128EEEvPf"), "void flash::fwd_kernel<128>(float*)");
  EXPECT_EQ(DemangledKernelName("vector_add"), "vector_add");  // extern "C" kernels
  EXPECT_EQ(DemangledKernelName("_Znot a symbol"), "_Znot a symbol");  // kept, not emptied
  EXPECT_EQ(DemangledKernelName(nullptr), "");
}

TEST_F(CuptiRecords, KernelGoesOnItsStreamLaneWithItsLaunchShape) {
  ActivityBuffer buffer;
  CUpti_ActivityKernel10 k = Kernel("_Z6matmulPKfS0_Pfi", 1, 3, 7, 42, 1000, 1500);
  k.gridX = 128;
  k.gridY = 2;
  k.gridZ = 3;
  k.blockX = 256;
  k.blockY = 4;
  k.blockZ = 1;
  k.registersPerThread = 96;
  k.staticSharedMemory = 4096;
  k.dynamicSharedMemory = 49152;
  buffer.Add(k);
  buffer.Add(Kernel("vector_add", 1, 3, 7, 43, 1600, 1700));  // same stream: same lane
  buffer.Add(Kernel("vector_add", 1, 3, 8, 44, 1600, 1800));  // another stream
  trace::EventTables out = Convert(buffer);

  ASSERT_EQ(out.kernels.size(), 3u);
  const trace::KernelEvent& e = out.kernels[0];
  EXPECT_EQ(sink_.str(e.name), "matmul(float const*, float const*, float*, int)");
  EXPECT_EQ(e.start_ns, 1000 + kClockOffset);
  EXPECT_EQ(e.end_ns, 1500 + kClockOffset);
  EXPECT_EQ(e.correlation_id, 42u);
  EXPECT_EQ(e.grid, (trace::Dim3{128, 2, 3}));
  EXPECT_EQ(e.block, (trace::Dim3{256, 4, 1}));
  EXPECT_EQ(e.registers_per_thread, 96u);
  EXPECT_EQ(e.static_shared_bytes, 4096u);
  EXPECT_EQ(e.dynamic_shared_bytes, 49152u);
  const trace::Lane& lane = sink_.lane(e.lane);
  EXPECT_EQ(lane.kind, trace::LaneKind::kGpuStream);
  EXPECT_EQ(lane.device, 1);
  EXPECT_EQ(lane.context, 3u);
  EXPECT_EQ(lane.stream, 7u);
  EXPECT_EQ(lane.pid, kPid);
  EXPECT_EQ(lane.name, "stream 7");

  EXPECT_EQ(sink_.str(out.kernels[1].name), "vector_add");
  EXPECT_EQ(out.kernels[1].lane, e.lane);
  EXPECT_NE(out.kernels[2].lane, e.lane);
  EXPECT_EQ(sink_.lane(out.kernels[2].lane).stream, 8u);
  EXPECT_EQ(sink_.lanes().size(), 2u);  // each stream's lane is added once
  EXPECT_EQ(converter_.stats().records, 3u);
}

TEST_F(CuptiRecords, KernelNamePointerReusedForAnotherKernelGetsTheNewName) {
  // After a module unload CUPTI may hand out the same name address for another kernel.
  char name[32] = "_Z7kernelAv";
  ActivityBuffer first;
  first.Add(Kernel(name, 0, 1, 7, 1, 100, 200));
  trace::EventTables a = Convert(first);
  std::strcpy(name, "_Z7kernelBv");
  ActivityBuffer second;
  second.Add(Kernel(name, 0, 1, 7, 2, 300, 400));
  trace::EventTables b = Convert(second);
  ASSERT_EQ(a.kernels.size(), 1u);
  ASSERT_EQ(b.kernels.size(), 1u);
  EXPECT_EQ(sink_.str(a.kernels[0].name), "kernelA()");
  EXPECT_EQ(sink_.str(b.kernels[0].name), "kernelB()");
}

TEST_F(CuptiRecords, CopiesAndSetsKeepKindsBytesAndDevices) {
  ActivityBuffer buffer;
  CUpti_ActivityMemcpy6 copy{};
  copy.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  copy.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  copy.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
  copy.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  copy.bytes = 1 << 20;
  copy.start = 2000;
  copy.end = 2600;
  copy.deviceId = 0;
  copy.contextId = 1;
  copy.streamId = 13;
  copy.correlationId = 50;
  buffer.Add(copy);
  CUpti_ActivityMemcpyPtoP4 peer{};
  peer.kind = CUPTI_ACTIVITY_KIND_MEMCPY2;
  peer.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_PTOP;
  peer.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  peer.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  peer.bytes = 4096;
  peer.start = 3000;
  peer.end = 3100;
  peer.deviceId = 0;
  peer.contextId = 1;
  peer.streamId = 13;
  peer.srcDeviceId = 0;
  peer.dstDeviceId = 3;
  peer.correlationId = 51;
  buffer.Add(peer);
  CUpti_ActivityMemset4 set{};
  set.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  set.value = 0xAB;
  set.bytes = 512;
  set.start = 4000;
  set.end = 4010;
  set.deviceId = 2;
  set.contextId = 5;
  set.streamId = 9;
  set.correlationId = 52;
  set.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_MANAGED;
  buffer.Add(set);
  trace::EventTables out = Convert(buffer);

  ASSERT_EQ(out.memcpys.size(), 2u);
  const trace::MemcpyEvent& h2d = out.memcpys[0];
  EXPECT_EQ(sink_.str(h2d.name), "Memcpy HtoD");
  EXPECT_EQ(h2d.copy_kind, trace::CopyKind::kHostToDevice);
  EXPECT_EQ(h2d.src_kind, trace::MemoryKind::kPinned);
  EXPECT_EQ(h2d.dst_kind, trace::MemoryKind::kDevice);
  EXPECT_EQ(h2d.bytes, uint64_t{1} << 20);
  EXPECT_EQ(h2d.start_ns, 2000 + kClockOffset);
  EXPECT_EQ(h2d.end_ns, 2600 + kClockOffset);
  EXPECT_EQ(h2d.correlation_id, 50u);
  EXPECT_EQ(h2d.src_device, -1);  // not a peer copy
  EXPECT_EQ(h2d.dst_device, -1);
  EXPECT_EQ(sink_.lane(h2d.lane).kind, trace::LaneKind::kGpuStream);
  EXPECT_EQ(sink_.lane(h2d.lane).stream, 13u);

  const trace::MemcpyEvent& p2p = out.memcpys[1];
  EXPECT_EQ(sink_.str(p2p.name), "Memcpy PtoP");
  EXPECT_EQ(p2p.copy_kind, trace::CopyKind::kPeerToPeer);
  EXPECT_EQ(p2p.src_kind, trace::MemoryKind::kDevice);
  EXPECT_EQ(p2p.dst_kind, trace::MemoryKind::kDevice);
  EXPECT_EQ(p2p.bytes, 4096u);
  EXPECT_EQ(p2p.src_device, 0);
  EXPECT_EQ(p2p.dst_device, 3);
  EXPECT_EQ(p2p.correlation_id, 51u);
  EXPECT_EQ(p2p.lane, h2d.lane);

  ASSERT_EQ(out.memsets.size(), 1u);
  const trace::MemsetEvent& memset = out.memsets[0];
  EXPECT_EQ(sink_.str(memset.name), "Memset");
  EXPECT_EQ(memset.value, 0xABu);
  EXPECT_EQ(memset.bytes, 512u);
  EXPECT_EQ(memset.memory_kind, trace::MemoryKind::kManaged);
  EXPECT_EQ(memset.correlation_id, 52u);
  EXPECT_EQ(memset.start_ns, 4000 + kClockOffset);
  EXPECT_EQ(memset.end_ns, 4010 + kClockOffset);
  const trace::Lane& set_lane = sink_.lane(memset.lane);
  EXPECT_EQ(set_lane.device, 2);
  EXPECT_EQ(set_lane.context, 5u);
  EXPECT_EQ(set_lane.stream, 9u);
}

TEST_F(CuptiRecords, ApiCallsGoOnTheirThreadLaneNamedWithoutVersion) {
  ActivityBuffer buffer;
  CUpti_ActivityAPI launch = ApiCall(CUPTI_ACTIVITY_KIND_RUNTIME, kLaunchKernel, 111, 60, 500, 900);
  launch.returnValue = 0;
  buffer.Add(launch);
  CUpti_ActivityAPI driver = ApiCall(CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 111, 61,
                                     950, 990);
  driver.returnValue = 700;  // CUDA_ERROR_ILLEGAL_ADDRESS
  buffer.Add(driver);
  buffer.Add(ApiCall(CUPTI_ACTIVITY_KIND_RUNTIME, kLaunchKernel, 222, 62, 1000, 1100));
  trace::EventTables out = Convert(buffer);

  ASSERT_EQ(out.api_calls.size(), 3u);
  const trace::ApiCallEvent& runtime = out.api_calls[0];
  EXPECT_EQ(sink_.str(runtime.name), "cudaLaunchKernel");
  EXPECT_EQ(runtime.domain, trace::ApiDomain::kRuntime);
  EXPECT_EQ(runtime.callback_id, kLaunchKernel);
  EXPECT_EQ(runtime.correlation_id, 60u);
  EXPECT_EQ(runtime.return_code, 0);
  EXPECT_EQ(runtime.start_ns, 500 + kClockOffset);
  EXPECT_EQ(runtime.end_ns, 900 + kClockOffset);
  EXPECT_EQ(runtime.external_id, 0u);
  const trace::Lane& lane = sink_.lane(runtime.lane);
  EXPECT_EQ(lane.kind, trace::LaneKind::kCpuThread);
  EXPECT_EQ(lane.pid, kPid);
  EXPECT_EQ(lane.tid, 111);
  EXPECT_EQ(lane.name, "thread-111");

  const trace::ApiCallEvent& launch_driver = out.api_calls[1];
  EXPECT_EQ(sink_.str(launch_driver.name), "cuLaunchKernel");
  EXPECT_EQ(launch_driver.domain, trace::ApiDomain::kDriver);
  EXPECT_EQ(launch_driver.callback_id, static_cast<uint32_t>(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel));
  EXPECT_EQ(launch_driver.return_code, 700);
  EXPECT_EQ(launch_driver.lane, runtime.lane);

  EXPECT_NE(out.api_calls[2].lane, runtime.lane);
  EXPECT_EQ(sink_.lane(out.api_calls[2].lane).tid, 222);
  EXPECT_EQ(sink_.lanes().size(), 2u);
}

TEST_F(CuptiRecords, ApiCallWithAnUnnamedCallbackIdIsNamedByItsNumber) {
  api_.GetCallbackName = [](CUpti_CallbackDomain, uint32_t, const char**) { return CUPTI_ERROR_INVALID_PARAMETER; };
  ActivityBuffer buffer;
  buffer.Add(ApiCall(CUPTI_ACTIVITY_KIND_RUNTIME, 9999, 111, 1, 10, 20));
  buffer.Add(ApiCall(CUPTI_ACTIVITY_KIND_DRIVER, 8888, 111, 2, 30, 40));
  trace::EventTables out = Convert(buffer);
  ASSERT_EQ(out.api_calls.size(), 2u);
  EXPECT_EQ(sink_.str(out.api_calls[0].name), "runtime API 9999");
  EXPECT_EQ(sink_.str(out.api_calls[1].name), "driver API 8888");
}

TEST_F(CuptiRecords, ApiCallWithZeroStartIsKeptButReversedTimesAreNot) {
  // A host timestamp of 0 is a clock value, not CUPTI's "no time" of device records.
  ActivityBuffer buffer;
  buffer.Add(ApiCall(CUPTI_ACTIVITY_KIND_RUNTIME, kLaunchKernel, 111, 1, 0, 20));
  buffer.Add(ApiCall(CUPTI_ACTIVITY_KIND_RUNTIME, kLaunchKernel, 111, 2, 50, 40));
  trace::EventTables out = Convert(buffer);
  ASSERT_EQ(out.api_calls.size(), 1u);
  EXPECT_EQ(out.api_calls[0].correlation_id, 1u);
  EXPECT_EQ(out.api_calls[0].start_ns, kClockOffset);
  EXPECT_EQ(converter_.stats().invalid_timestamps, 1u);
}

TEST_F(CuptiRecords, ExternalIdComesFromTheNvtxCorrelationKindOnly) {
  ActivityBuffer buffer;
  // CUPTI writes one record per kind with a non-empty stack before the API record.
  buffer.Add(External(kNvtxCorrelationKind, 77, 10));
  buffer.Add(ApiCall(CUPTI_ACTIVITY_KIND_RUNTIME, kLaunchKernel, 111, 10, 100, 200));
  // Kineto's kinds (CUSTOM0, CUSTOM1) around ours: only ours is an NVTX range.
  buffer.Add(External(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 55, 11));
  buffer.Add(ApiCall(CUPTI_ACTIVITY_KIND_RUNTIME, kLaunchKernel, 111, 11, 300, 400));
  buffer.Add(External(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 99, 12));
  buffer.Add(External(kNvtxCorrelationKind, 88, 12));
  buffer.Add(External(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1, 66, 12));
  buffer.Add(ApiCall(CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 111, 12, 500, 600));
  buffer.Add(ApiCall(CUPTI_ACTIVITY_KIND_RUNTIME, kLaunchKernel, 111, 13, 700, 800));  // no range open
  trace::EventTables out = Convert(buffer);

  ASSERT_EQ(out.api_calls.size(), 4u);
  EXPECT_EQ(out.api_calls[0].external_id, 77u);
  EXPECT_EQ(out.api_calls[1].external_id, 0u);
  EXPECT_EQ(out.api_calls[2].external_id, 88u);
  EXPECT_EQ(out.api_calls[3].external_id, 0u);
  EXPECT_TRUE(out.kernels.empty());
  EXPECT_EQ(converter_.stats().records, 9u);
  EXPECT_EQ(converter_.stats().unknown_kinds, 0u);  // correlation records are not "unknown"
}

TEST_F(CuptiRecords, ExternalIdOfAnEarlierBufferReachesTheApiCallInTheNext) {
  ActivityBuffer first;
  first.Add(External(kNvtxCorrelationKind, 123, 20));
  Convert(first);
  ActivityBuffer second;
  second.Add(ApiCall(CUPTI_ACTIVITY_KIND_RUNTIME, kLaunchKernel, 111, 20, 100, 200));
  trace::EventTables out = Convert(second);
  ASSERT_EQ(out.api_calls.size(), 1u);
  EXPECT_EQ(out.api_calls[0].external_id, 123u);
}

TEST_F(CuptiRecords, SyncGoesOnTheThreadLaneOfItsApiCall) {
  ActivityBuffer buffer;
  buffer.Add(ApiCall(CUPTI_ACTIVITY_KIND_RUNTIME, kStreamSynchronize, 333, 70, 100, 900));
  CUpti_ActivitySynchronization2 sync =
      Sync(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE, 70, 150, 880);
  buffer.Add(sync);
  CUpti_ActivitySynchronization2 event_sync = Sync(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE, 71, 10, 20);
  event_sync.streamId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
  event_sync.cudaEventId = 5;
  event_sync.contextId = CUPTI_INVALID_CONTEXT_ID;
  buffer.Add(ApiCall(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020, 444, 71, 5,
                     30));
  buffer.Add(event_sync);
  trace::EventTables out = Convert(buffer);

  ASSERT_EQ(out.syncs.size(), 2u);
  const trace::SyncEvent& s = out.syncs[0];
  EXPECT_EQ(sink_.str(s.name), "Stream synchronize");
  EXPECT_EQ(s.sync_kind, trace::SyncKind::kStreamSynchronize);
  EXPECT_EQ(s.correlation_id, 70u);
  EXPECT_EQ(s.context, 1u);
  EXPECT_EQ(s.stream, 7u);
  EXPECT_EQ(s.cuda_event_id, 0u);  // CUPTI's "not applicable"
  EXPECT_EQ(s.start_ns, 150 + kClockOffset);
  EXPECT_EQ(s.end_ns, 880 + kClockOffset);
  EXPECT_EQ(s.lane, out.api_calls[0].lane);
  EXPECT_EQ(sink_.lane(s.lane).tid, 333);

  const trace::SyncEvent& e = out.syncs[1];
  EXPECT_EQ(sink_.str(e.name), "Event synchronize");
  EXPECT_EQ(e.sync_kind, trace::SyncKind::kEventSynchronize);
  EXPECT_EQ(e.stream, 0u);
  EXPECT_EQ(e.cuda_event_id, 5u);
  EXPECT_EQ(e.context, 0u);
  EXPECT_EQ(sink_.lane(e.lane).tid, 444);
}

TEST_F(CuptiRecords, SyncBeforeItsApiCallWaitsForTheCallInALaterBuffer) {
  ActivityBuffer first;
  first.Add(Sync(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE, 80, 150, 880));
  trace::EventTables early = Convert(first);
  EXPECT_TRUE(early.syncs.empty());  // its thread is not known yet

  ActivityBuffer second;
  second.Add(ApiCall(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020, 555, 80, 100,
                     900));
  trace::EventTables late = Convert(second);
  ASSERT_EQ(late.syncs.size(), 1u);
  EXPECT_EQ(late.syncs[0].sync_kind, trace::SyncKind::kContextSynchronize);
  EXPECT_EQ(sink_.str(late.syncs[0].name), "Context synchronize");
  ASSERT_EQ(late.api_calls.size(), 1u);
  EXPECT_EQ(late.syncs[0].lane, late.api_calls[0].lane);
  EXPECT_EQ(sink_.lane(late.syncs[0].lane).tid, 555);

  trace::EventTables rest;
  converter_.FlushPendingSyncs(sink_.sink(), rest);
  EXPECT_TRUE(rest.syncs.empty());  // placed once, not again
}

TEST_F(CuptiRecords, SyncWhoseCallNeverCameIsFlushedToTheThreadUnknownLane) {
  ActivityBuffer buffer;
  buffer.Add(Sync(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT, 90, 150, 880));
  trace::EventTables out = Convert(buffer);
  EXPECT_TRUE(out.syncs.empty());

  trace::EventTables flushed;
  converter_.FlushPendingSyncs(sink_.sink(), flushed);
  ASSERT_EQ(flushed.syncs.size(), 1u);
  EXPECT_EQ(flushed.syncs[0].sync_kind, trace::SyncKind::kStreamWaitEvent);
  EXPECT_EQ(flushed.syncs[0].correlation_id, 90u);
  EXPECT_EQ(flushed.syncs[0].start_ns, 150 + kClockOffset);
  const trace::Lane& lane = sink_.lane(flushed.syncs[0].lane);
  EXPECT_EQ(lane.kind, trace::LaneKind::kCpuThread);
  EXPECT_EQ(lane.pid, kPid);
  EXPECT_EQ(lane.tid, 0);
  EXPECT_EQ(lane.name, "CUDA synchronization (thread unknown)");

  trace::EventTables again;
  converter_.FlushPendingSyncs(sink_.sink(), again);
  EXPECT_TRUE(again.syncs.empty());
}

TEST_F(CuptiRecords, OverheadGoesOnTheLaneOfItsObject) {
  ActivityBuffer buffer;
  CUpti_ActivityOverhead3 thread = Overhead(CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH, CUPTI_ACTIVITY_OBJECT_THREAD,
                                            100, 200);
  thread.objectId.pt.processId = kPid;
  thread.objectId.pt.threadId = 777;
  thread.correlationId = 5;
  buffer.Add(thread);
  CUpti_ActivityOverhead3 device = Overhead(CUPTI_ACTIVITY_OVERHEAD_DRIVER_COMPILER, CUPTI_ACTIVITY_OBJECT_DEVICE,
                                            300, 400);
  device.objectId.dcs.deviceId = 2;
  buffer.Add(device);
  CUpti_ActivityOverhead3 context = Overhead(CUPTI_ACTIVITY_OVERHEAD_CUPTI_RESOURCE, CUPTI_ACTIVITY_OBJECT_CONTEXT,
                                             500, 600);
  context.objectId.dcs.deviceId = 2;
  context.objectId.dcs.contextId = 4;
  buffer.Add(context);
  CUpti_ActivityOverhead3 stream = Overhead(CUPTI_ACTIVITY_OVERHEAD_COMMAND_BUFFER_FULL, CUPTI_ACTIVITY_OBJECT_STREAM,
                                            700, 800);
  stream.objectId.dcs.deviceId = 2;
  stream.objectId.dcs.contextId = 4;
  stream.objectId.dcs.streamId = 15;
  buffer.Add(stream);
  buffer.Add(Overhead(CUPTI_ACTIVITY_OVERHEAD_LAZY_FUNCTION_LOADING, CUPTI_ACTIVITY_OBJECT_PROCESS, 900, 1000));
  buffer.Add(Overhead(static_cast<CUpti_ActivityOverheadKind>(0x7000000), CUPTI_ACTIVITY_OBJECT_THREAD, 1100, 1200));
  trace::EventTables out = Convert(buffer);

  ASSERT_EQ(out.overheads.size(), 6u);
  const trace::OverheadEvent& on_thread = out.overheads[0];
  EXPECT_EQ(on_thread.overhead_kind, trace::OverheadKind::kCuptiBufferFlush);
  EXPECT_EQ(sink_.str(on_thread.name), "CUPTI buffer flush");
  EXPECT_EQ(on_thread.correlation_id, 5u);
  EXPECT_EQ(on_thread.start_ns, 100 + kClockOffset);
  EXPECT_EQ(on_thread.end_ns, 200 + kClockOffset);
  EXPECT_EQ(sink_.lane(on_thread.lane).kind, trace::LaneKind::kCpuThread);
  EXPECT_EQ(sink_.lane(on_thread.lane).tid, 777);

  const trace::Lane& device_lane = sink_.lane(out.overheads[1].lane);
  EXPECT_EQ(out.overheads[1].overhead_kind, trace::OverheadKind::kDriverCompiler);
  EXPECT_EQ(sink_.str(out.overheads[1].name), "Driver compiler");
  EXPECT_EQ(device_lane.kind, trace::LaneKind::kGpuStream);
  EXPECT_EQ(device_lane.device, 2);
  EXPECT_EQ(device_lane.context, 0u);
  EXPECT_EQ(device_lane.stream, 0u);

  const trace::Lane& context_lane = sink_.lane(out.overheads[2].lane);
  EXPECT_EQ(out.overheads[2].overhead_kind, trace::OverheadKind::kCuptiResource);
  EXPECT_EQ(context_lane.device, 2);
  EXPECT_EQ(context_lane.context, 4u);
  EXPECT_EQ(context_lane.stream, 0u);

  const trace::Lane& stream_lane = sink_.lane(out.overheads[3].lane);
  EXPECT_EQ(out.overheads[3].overhead_kind, trace::OverheadKind::kCommandBufferFull);
  EXPECT_EQ(sink_.str(out.overheads[3].name), "Command buffer full");
  EXPECT_EQ(stream_lane.device, 2);
  EXPECT_EQ(stream_lane.context, 4u);
  EXPECT_EQ(stream_lane.stream, 15u);

  // The process as a whole: its main thread, whose tid is the pid.
  const trace::Lane& process_lane = sink_.lane(out.overheads[4].lane);
  EXPECT_EQ(out.overheads[4].overhead_kind, trace::OverheadKind::kLazyFunctionLoading);
  EXPECT_EQ(process_lane.kind, trace::LaneKind::kCpuThread);
  EXPECT_EQ(process_lane.tid, kPid);

  EXPECT_EQ(out.overheads[5].overhead_kind, trace::OverheadKind::kUnknown);
  EXPECT_EQ(sink_.str(out.overheads[5].name), "Profiler overhead");
}

TEST_F(CuptiRecords, DeviceRecordsWithoutValidTimesAreCountedNotEmitted) {
  ActivityBuffer buffer;
  buffer.Add(Kernel("k", 0, 1, 7, 1, 0, 500));     // CUPTI's "no time"
  buffer.Add(Kernel("k", 0, 1, 7, 2, 600, 550));   // ends before it starts
  buffer.Add(Kernel("k", 0, 1, 7, 3, 700, 700));   // zero length is a time
  CUpti_ActivityMemcpy6 copy{};
  copy.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  copy.start = 0;
  copy.end = 100;
  buffer.Add(copy);
  CUpti_ActivityMemcpyPtoP4 peer{};
  peer.kind = CUPTI_ACTIVITY_KIND_MEMCPY2;
  peer.start = 200;
  peer.end = 100;
  buffer.Add(peer);
  CUpti_ActivityMemset4 set{};
  set.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  set.start = 0;
  set.end = 0;
  buffer.Add(set);
  buffer.Add(Sync(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE, 9, 0, 100));
  buffer.Add(Overhead(CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH, CUPTI_ACTIVITY_OBJECT_THREAD, 300, 200));
  trace::EventTables out = Convert(buffer);

  ASSERT_EQ(out.kernels.size(), 1u);
  EXPECT_EQ(out.kernels[0].correlation_id, 3u);
  EXPECT_EQ(out.kernels[0].start_ns, out.kernels[0].end_ns);
  EXPECT_TRUE(out.memcpys.empty());
  EXPECT_TRUE(out.memsets.empty());
  EXPECT_TRUE(out.overheads.empty());
  trace::EventTables flushed;
  converter_.FlushPendingSyncs(sink_.sink(), flushed);
  EXPECT_TRUE(flushed.syncs.empty());  // not kept waiting either
  EXPECT_EQ(converter_.stats().invalid_timestamps, 7u);
  EXPECT_EQ(converter_.stats().records, 8u);
}

TEST_F(CuptiRecords, UnknownKindsAreSkippedAndCounted) {
  ActivityBuffer buffer;
  buffer.Add(Kernel("before", 0, 1, 7, 1, 100, 200));
  CUpti_ActivityMarker2 marker{};
  marker.kind = CUPTI_ACTIVITY_KIND_MARKER;
  buffer.Add(marker);
  CUpti_ActivityName name{};
  name.kind = CUPTI_ACTIVITY_KIND_NAME;
  buffer.Add(name);
  buffer.Add(Kernel("after", 0, 1, 7, 2, 300, 400));
  trace::EventTables out = Convert(buffer);
  ASSERT_EQ(out.kernels.size(), 2u);
  EXPECT_EQ(sink_.str(out.kernels[1].name), "after");  // the walk went on past them
  EXPECT_EQ(converter_.stats().unknown_kinds, 2u);
  EXPECT_EQ(converter_.stats().records, 4u);
  EXPECT_EQ(converter_.stats().unfinished_buffers, 0u);
}

TEST_F(CuptiRecords, BufferEndingInAnInvalidRecordIsCountedAsUnfinished) {
  ActivityBuffer buffer;
  buffer.Add(Kernel("complete", 0, 1, 7, 1, 100, 200));
  const uint64_t invalid[2] = {0, 0};  // kind CUPTI_ACTIVITY_KIND_INVALID
  buffer.Add(invalid);
  buffer.Add(Kernel("unreachable", 0, 1, 7, 2, 300, 400));
  trace::EventTables out = Convert(buffer);
  ASSERT_EQ(out.kernels.size(), 1u);
  EXPECT_EQ(sink_.str(out.kernels[0].name), "complete");
  EXPECT_EQ(converter_.stats().unfinished_buffers, 1u);
  EXPECT_EQ(converter_.stats().records, 1u);

  uint64_t nothing = 0;
  trace::EventTables none;
  converter_.ConvertBuffer(sink_.sink(), reinterpret_cast<uint8_t*>(&nothing), 0, none);
  EXPECT_EQ(converter_.stats().unfinished_buffers, 1u);  // an empty buffer ends normally
}

// The samples of one counter lane as (time, bytes live).
std::vector<std::pair<int64_t, double>> SamplesOf(const trace::EventTables& out, trace::LaneId lane) {
  std::vector<std::pair<int64_t, double>> samples;
  for (const trace::CounterSample& sample : out.counter_samples) {
    if (sample.lane == lane) samples.emplace_back(sample.ts_ns, sample.value);
  }
  return samples;
}

TEST_F(CuptiRecords, MemoryAllocationsAndReleasesBecomeTheBytesLiveOnACounterLane) {
  ActivityBuffer buffer;
  buffer.Add(Memory(kAllocation, kDeviceMemory, 0, 100, 1000));
  buffer.Add(Memory(kAllocation, kDeviceMemory, 0, 200, 2000));
  buffer.Add(Memory(kRelease, kDeviceMemory, 0, 100, 3000));
  trace::EventTables out = Convert(buffer);

  ASSERT_EQ(out.counter_samples.size(), 3u);
  ASSERT_EQ(sink_.lanes().size(), 1u);
  const trace::LaneId lane_id = out.counter_samples[0].lane;
  const trace::Lane& lane = sink_.lane(lane_id);
  EXPECT_EQ(lane.kind, trace::LaneKind::kCounter);
  EXPECT_EQ(lane.name, "cuda memory: device (gpu 0)");
  EXPECT_EQ(lane.device, 0);
  EXPECT_EQ(lane.pid, kPid);
  EXPECT_EQ(SamplesOf(out, lane_id), (std::vector<std::pair<int64_t, double>>{
                                         {1000 + kClockOffset, 100.0},
                                         {2000 + kClockOffset, 300.0},
                                         {3000 + kClockOffset, 200.0}}));

  // The count carries over to the next buffer, on the same lane.
  ActivityBuffer next;
  next.Add(Memory(kRelease, kDeviceMemory, 0, 200, 4000));
  trace::EventTables later = Convert(next);
  ASSERT_EQ(later.counter_samples.size(), 1u);
  EXPECT_EQ(later.counter_samples[0].lane, lane_id);
  EXPECT_EQ(later.counter_samples[0].ts_ns, 4000 + kClockOffset);
  EXPECT_EQ(later.counter_samples[0].value, 0.0);
  EXPECT_EQ(sink_.lanes().size(), 1u);
  EXPECT_EQ(converter_.stats().memory_releases_clamped, 0u);
  EXPECT_EQ(converter_.stats().records, 4u);
}

TEST_F(CuptiRecords, MemoryOfAnotherKindOrDeviceCountsOnALaneOfItsOwn) {
  ActivityBuffer buffer;
  buffer.Add(Memory(kAllocation, kDeviceMemory, 0, 100, 1000));
  buffer.Add(Memory(kAllocation, CUPTI_ACTIVITY_MEMORY_KIND_PINNED, 0, 50, 1100));
  buffer.Add(Memory(kAllocation, kDeviceMemory, 1, 70, 1200));
  buffer.Add(Memory(kAllocation, kDeviceMemory, 0, 30, 1300));
  buffer.Add(Memory(kRelease, CUPTI_ACTIVITY_MEMORY_KIND_PINNED, 0, 50, 1400));
  trace::EventTables out = Convert(buffer);

  ASSERT_EQ(out.counter_samples.size(), 5u);
  ASSERT_EQ(sink_.lanes().size(), 3u);
  const trace::LaneId device0 = out.counter_samples[0].lane;
  const trace::LaneId pinned0 = out.counter_samples[1].lane;
  const trace::LaneId device1 = out.counter_samples[2].lane;
  EXPECT_EQ(sink_.lane(device0).name, "cuda memory: device (gpu 0)");
  EXPECT_EQ(sink_.lane(pinned0).name, "cuda memory: pinned (gpu 0)");
  EXPECT_EQ(sink_.lane(pinned0).device, 0);
  EXPECT_EQ(sink_.lane(pinned0).kind, trace::LaneKind::kCounter);
  EXPECT_EQ(sink_.lane(device1).name, "cuda memory: device (gpu 1)");
  EXPECT_EQ(sink_.lane(device1).device, 1);
  EXPECT_EQ(sink_.lane(device1).kind, trace::LaneKind::kCounter);
  using Samples = std::vector<std::pair<int64_t, double>>;
  EXPECT_EQ(SamplesOf(out, device0), (Samples{{1000 + kClockOffset, 100.0}, {1300 + kClockOffset, 130.0}}));
  EXPECT_EQ(SamplesOf(out, pinned0), (Samples{{1100 + kClockOffset, 50.0}, {1400 + kClockOffset, 0.0}}));
  EXPECT_EQ(SamplesOf(out, device1), (Samples{{1200 + kClockOffset, 70.0}}));
}

TEST_F(CuptiRecords, ReleaseOfMemoryAllocatedBeforeTracingStopsAtZeroAndIsCounted) {
  ActivityBuffer buffer;
  buffer.Add(Memory(kAllocation, kDeviceMemory, 0, 100, 1000));
  buffer.Add(Memory(kRelease, kDeviceMemory, 0, 300, 2000));  // 200 bytes from before tracing
  buffer.Add(Memory(kAllocation, kDeviceMemory, 0, 40, 3000));
  buffer.Add(Memory(kRelease, kDeviceMemory, 2, 64, 4000));  // nothing allocated on gpu 2 yet
  trace::EventTables out = Convert(buffer);

  ASSERT_EQ(out.counter_samples.size(), 4u);
  EXPECT_EQ(out.counter_samples[0].value, 100.0);
  EXPECT_EQ(out.counter_samples[1].value, 0.0);
  EXPECT_EQ(out.counter_samples[2].value, 40.0);
  EXPECT_EQ(out.counter_samples[3].value, 0.0);
  EXPECT_EQ(sink_.lane(out.counter_samples[3].lane).name, "cuda memory: device (gpu 2)");
  EXPECT_EQ(converter_.stats().memory_releases_clamped, 2u);
  EXPECT_EQ(converter_.stats().invalid_timestamps, 0u);
}

TEST_F(CuptiRecords, MemoryRecordWithoutTimeIsCountedNotSampledButItsBytesStayLive) {
  ActivityBuffer buffer;
  buffer.Add(Memory(kAllocation, kDeviceMemory, 0, 100, 0));  // CUPTI's "no time"
  CUpti_ActivityMemory4 invalid = Memory(kAllocation, kDeviceMemory, 0, 999, 500);
  invalid.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_INVALID;
  buffer.Add(invalid);
  buffer.Add(Memory(kAllocation, kDeviceMemory, 0, 50, 600));
  trace::EventTables out = Convert(buffer);

  ASSERT_EQ(out.counter_samples.size(), 1u);
  EXPECT_EQ(out.counter_samples[0].ts_ns, 600 + kClockOffset);
  EXPECT_EQ(out.counter_samples[0].value, 150.0);  // the untimed allocation is still held
  EXPECT_EQ(sink_.lanes().size(), 1u);
  EXPECT_EQ(converter_.stats().invalid_timestamps, 1u);
  EXPECT_EQ(converter_.stats().unknown_kinds, 1u);  // the record with no operation
  EXPECT_EQ(converter_.stats().records, 3u);
}

TEST_F(CuptiRecords, EveryKindOfOneBufferInOrder) {
  // A buffer as a training step leaves it: correlation, launch, kernel, copy, set, sync.
  ActivityBuffer buffer;
  buffer.Add(External(kNvtxCorrelationKind, 5, 100));
  buffer.Add(ApiCall(CUPTI_ACTIVITY_KIND_RUNTIME, kLaunchKernel, 111, 100, 10, 20));
  buffer.Add(Kernel("_Z4stepv", 0, 1, 7, 100, 30, 40));
  CUpti_ActivityMemcpy6 copy{};
  copy.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  copy.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
  copy.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  copy.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
  copy.start = 50;
  copy.end = 60;
  copy.streamId = 7;
  copy.contextId = 1;
  copy.correlationId = 101;
  buffer.Add(copy);
  buffer.Add(ApiCall(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020, 111, 101, 45, 65));
  CUpti_ActivityMemset4 set{};
  set.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  set.start = 70;
  set.end = 75;
  set.streamId = 7;
  set.contextId = 1;
  set.correlationId = 102;
  buffer.Add(set);
  buffer.Add(Sync(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE, 103, 80, 90));
  buffer.Add(ApiCall(CUPTI_ACTIVITY_KIND_RUNTIME, kStreamSynchronize, 111, 103, 78, 92));
  trace::EventTables out = Convert(buffer);

  EXPECT_EQ(converter_.stats().records, 8u);
  ASSERT_EQ(out.kernels.size(), 1u);
  ASSERT_EQ(out.memcpys.size(), 1u);
  ASSERT_EQ(out.memsets.size(), 1u);
  ASSERT_EQ(out.api_calls.size(), 3u);
  ASSERT_EQ(out.syncs.size(), 1u);
  EXPECT_EQ(sink_.str(out.kernels[0].name), "step()");
  EXPECT_EQ(out.kernels[0].lane, out.memcpys[0].lane);
  EXPECT_EQ(out.kernels[0].lane, out.memsets[0].lane);
  EXPECT_EQ(sink_.str(out.memcpys[0].name), "Memcpy DtoH");
  EXPECT_EQ(sink_.str(out.api_calls[1].name), "cudaMemcpy");
  EXPECT_EQ(out.api_calls[0].external_id, 5u);
  EXPECT_EQ(out.api_calls[0].correlation_id, out.kernels[0].correlation_id);
  EXPECT_EQ(out.syncs[0].lane, out.api_calls[2].lane);
  EXPECT_EQ(sink_.lanes().size(), 2u);  // one stream, one thread
}

}  // namespace
}  // namespace rankscope::collector
