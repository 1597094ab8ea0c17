// The CUPTI path in one process: a Recorder, StartCuptiTracing with a fake CUPTI whose
// record walker is the real one, hand-built buffers fed through the buffer callbacks CUPTI
// would call, and the rank file read back.
#include "collector/cupti_tracer.h"

#include <cupti.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "collector/cupti_api.h"
#include "collector/recorder.h"
#include "tests/collector/collector_test_util.h"
#include "tests/trace/trace_test_util.h"
#include "trace/reader.h"

namespace rankscope::collector {
namespace {

using testing::Load;
using testing::Named;
using trace::testing::TempDir;

constexpr char kAllKinds[] =
    "concurrent_kernel,memcpy,memcpy2,memset,memory2,runtime,driver,synchronization,overhead,external_correlation";

int64_t ThisThread() { return static_cast<int64_t>(syscall(SYS_gettid)); }

// A buffer CUPTI handed out, filled the way CUPTI fills it.
struct FilledBuffer {
  uint8_t* data = nullptr;
  size_t size = 0;
  size_t valid = 0;

  template <typename Record>
  void Add(const Record& record) {
    static_assert(sizeof(Record) % 8 == 0, "CUPTI records are padded to 8 bytes");
    ASSERT_LE(valid + sizeof(Record), size);
    std::memcpy(data + valid, &record, sizeof(Record));
    valid += sizeof(Record);
  }
};

// A CUPTI without a driver that does what the collector asks, records it, and holds
// buffers until flushed. Its record walker and names are the real library's. Application
// threads (correlation pushes) and the drain thread (flushes, drop counts) both call it.
class FakeCupti {
 public:
  CUptiResult subscribe_result = CUPTI_SUCCESS;
  std::string old_subscriber;
  std::map<CUpti_ActivityKind, CUptiResult> enable_results;
  // A forced flush that takes this long, as a CUPTI stuck on a hung GPU would.
  std::chrono::milliseconds forced_flush_delay{0};

  FakeCupti() { current = this; }
  ~FakeCupti() { current = nullptr; }

  // False when libcupti itself is missing.
  bool Install(CuptiApi& api) {
    Result<CuptiApi*> real = LoadCupti();
    if (!real.ok()) return false;
    api.GetVersion = [](uint32_t* version) {
      *version = 130001;
      return CUPTI_SUCCESS;
    };
    api.GetResultString = (*real)->GetResultString;
    api.ActivityGetNextRecord = (*real)->ActivityGetNextRecord;
    api.GetCallbackName = (*real)->GetCallbackName;
    api.Subscribe_v2 = [](CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback, void* userdata,
                          CUpti_SubscriberParams* params) {
      std::lock_guard lock(current->mutex_);
      current->log_.push_back("subscribe");
      if (current->subscribe_result == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
        std::strncpy(params->oldSubscriberName, current->old_subscriber.c_str(), params->oldSubscriberSize);
      }
      if (current->subscribe_result != CUPTI_SUCCESS) return current->subscribe_result;
      current->callback_ = callback;
      current->userdata_ = userdata;
      *subscriber = reinterpret_cast<CUpti_SubscriberHandle>(uintptr_t{0x5b});
      return CUPTI_SUCCESS;
    };
    api.Unsubscribe = [](CUpti_SubscriberHandle) { return current->Log("unsubscribe"); };
    api.EnableCallback = [](uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain, CUpti_CallbackId) {
      return CUPTI_SUCCESS;
    };
    api.EnableDomain = [](uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain) { return CUPTI_SUCCESS; };
    api.SetThreadIdType = [](CUpti_ActivityThreadIdType) { return CUPTI_SUCCESS; };
    api.ActivityRegisterTimestampCallback = [](CUpti_TimestampCallbackFunc) {
      return current->Log("timestamp callback");
    };
    api.ActivityRegisterCallbacks = [](CUpti_BuffersCallbackRequestFunc requested,
                                       CUpti_BuffersCallbackCompleteFunc completed) {
      std::lock_guard lock(current->mutex_);
      current->requested_ = requested;
      current->completed_ = completed;
      return CUPTI_SUCCESS;
    };
    api.ActivityEnable = [](CUpti_ActivityKind kind) {
      std::lock_guard lock(current->mutex_);
      auto answer = current->enable_results.find(kind);
      return answer == current->enable_results.end() ? CUPTI_SUCCESS : answer->second;
    };
    api.ActivityDisable = [](CUpti_ActivityKind) { return CUPTI_SUCCESS; };
    api.ActivityEnableDriverApi = [](CUpti_CallbackId, uint8_t) { return CUPTI_SUCCESS; };
    api.ActivityEnableRuntimeApi = [](CUpti_CallbackId, uint8_t) { return CUPTI_SUCCESS; };
    api.ActivityFlushAll = [](uint32_t flag) { return current->FlushAll(flag); };
    api.ActivityFlushPeriod = [](uint32_t) { return CUPTI_SUCCESS; };
    api.ActivityGetNumDroppedRecords = [](CUcontext context, uint32_t stream, size_t* dropped) {
      std::lock_guard lock(current->mutex_);
      auto it = current->dropped_.find({context, stream});
      *dropped = it == current->dropped_.end() ? 0 : std::exchange(it->second, 0);  // CUPTI resets on read
      return CUPTI_SUCCESS;
    };
    api.ActivityPushExternalCorrelationId = [](CUpti_ExternalCorrelationKind kind, uint64_t id) {
      std::lock_guard lock(current->mutex_);
      EXPECT_EQ(kind, kNvtxCorrelationKind);
      current->stacks_[ThisThread()].push_back(id);
      current->correlation_log_.push_back("push " + std::to_string(id));
      return CUPTI_SUCCESS;
    };
    api.ActivityPopExternalCorrelationId = [](CUpti_ExternalCorrelationKind kind, uint64_t* last) {
      std::lock_guard lock(current->mutex_);
      EXPECT_EQ(kind, kNvtxCorrelationKind);
      std::vector<uint64_t>& stack = current->stacks_[ThisThread()];
      current->correlation_log_.push_back("pop");
      if (stack.empty()) {
        ADD_FAILURE() << "pop from an empty external-correlation stack";
        return CUPTI_ERROR_QUEUE_EMPTY;
      }
      *last = stack.back();
      stack.pop_back();
      return CUPTI_SUCCESS;
    };
    api.GetContextId = [](CUcontext context, uint32_t* id) {
      *id = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(context) >> 12);
      return CUPTI_SUCCESS;
    };
    api.GetDeviceId = [](CUcontext, uint32_t* id) {
      *id = 1;
      return CUPTI_SUCCESS;
    };
    api.GetStreamIdEx = [](CUcontext, CUstream stream, uint8_t, uint32_t* id) {
      *id = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(stream) >> 12);
      return CUPTI_SUCCESS;
    };
    return true;
  }

  // CUPTI asking the collector for a buffer to fill.
  FilledBuffer Request() {
    CUpti_BuffersCallbackRequestFunc requested;
    {
      std::lock_guard lock(mutex_);
      requested = requested_;
    }
    FilledBuffer buffer;
    size_t max_records = 0;
    if (requested != nullptr) requested(&buffer.data, &buffer.size, &max_records);
    EXPECT_NE(buffer.data, nullptr);
    return buffer;
  }
  // CUPTI handing a full buffer back.
  void Complete(const FilledBuffer& buffer) {
    CUpti_BuffersCallbackCompleteFunc completed;
    {
      std::lock_guard lock(mutex_);
      completed = completed_;
    }
    completed(nullptr, 0, buffer.data, buffer.size, buffer.valid);
  }
  // CUPTI keeping a partly filled buffer until a forced flush.
  void Hold(const FilledBuffer& buffer) {
    std::lock_guard lock(mutex_);
    held_.push_back(buffer);
  }
  void SetDropped(CUcontext context, uint32_t stream, size_t count) {
    std::lock_guard lock(mutex_);
    dropped_[{context, stream}] = count;
  }
  // CUPTI telling the subscriber about a resource.
  void ResourceCallback(CUpti_CallbackId cbid, CUcontext context, CUstream stream) {
    CUpti_ResourceData data{};
    data.context = context;
    data.resourceHandle.stream = stream;
    callback_(userdata_, CUPTI_CB_DOMAIN_RESOURCE, cbid, &data);
  }

  std::vector<uint64_t> Stack() {
    std::lock_guard lock(mutex_);
    return stacks_[ThisThread()];
  }
  std::vector<std::string> CorrelationLog() {
    std::lock_guard lock(mutex_);
    return correlation_log_;
  }
  std::vector<std::string> Log() {
    std::lock_guard lock(mutex_);
    return log_;
  }
  // How often `entry` is in the log.
  int64_t LogCount(const std::string& entry) {
    std::lock_guard lock(mutex_);
    return std::count(log_.begin(), log_.end(), entry);
  }

 private:
  CUptiResult Log(std::string entry) {
    std::lock_guard lock(mutex_);
    log_.push_back(std::move(entry));
    return CUPTI_SUCCESS;
  }
  CUptiResult FlushAll(uint32_t flag) {
    std::vector<FilledBuffer> held;
    CUpti_BuffersCallbackCompleteFunc completed;
    {
      std::lock_guard lock(mutex_);
      const bool forced = (flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) != 0;
      log_.push_back(forced ? "flush forced" : "flush");
      if (forced) held.swap(held_);
      completed = completed_;
    }
    if ((flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) != 0) std::this_thread::sleep_for(forced_flush_delay);
    // As CUPTI does: the completion callback runs inside the flush, without our lock.
    for (const FilledBuffer& buffer : held) completed(nullptr, 0, buffer.data, buffer.size, buffer.valid);
    return CUPTI_SUCCESS;
  }

  static inline FakeCupti* current = nullptr;
  std::mutex mutex_;
  std::vector<std::string> log_;
  std::vector<std::string> correlation_log_;
  std::map<int64_t, std::vector<uint64_t>> stacks_;  // per thread, as CUPTI keeps them
  CUpti_CallbackFunc callback_ = nullptr;
  void* userdata_ = nullptr;
  CUpti_BuffersCallbackRequestFunc requested_ = nullptr;
  CUpti_BuffersCallbackCompleteFunc completed_ = nullptr;
  std::vector<FilledBuffer> held_;
  std::map<std::pair<CUcontext, uint32_t>, size_t> dropped_;
};

CUpti_ActivityExternalCorrelation External(uint64_t id, uint32_t correlation) {
  CUpti_ActivityExternalCorrelation x{};
  x.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
  x.externalKind = kNvtxCorrelationKind;
  x.externalId = id;
  x.correlationId = correlation;
  return x;
}

CUpti_ActivityAPI Launch(int64_t tid, uint32_t correlation, uint64_t start, uint64_t end) {
  CUpti_ActivityAPI a{};
  a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  a.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
  a.processId = static_cast<uint32_t>(getpid());
  a.threadId = static_cast<uint32_t>(tid);
  a.correlationId = correlation;
  a.start = start;
  a.end = end;
  return a;
}

CUpti_ActivityKernel10 Kernel(const char* name, uint32_t stream, uint32_t correlation, uint64_t start,
                              uint64_t end) {
  CUpti_ActivityKernel10 k{};
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.name = name;
  k.deviceId = 0;
  k.contextId = 1;
  k.streamId = stream;
  k.correlationId = correlation;
  k.start = start;
  k.end = end;
  k.gridX = 64;
  k.gridY = k.gridZ = 1;
  k.blockX = 128;
  k.blockY = k.blockZ = 1;
  return k;
}

CUpti_ActivityMemcpy6 Copy(uint32_t stream, uint32_t correlation, uint64_t start, uint64_t end) {
  CUpti_ActivityMemcpy6 m{};
  m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
  m.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  m.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
  m.bytes = 8192;
  m.deviceId = 0;
  m.contextId = 1;
  m.streamId = stream;
  m.correlationId = correlation;
  m.start = start;
  m.end = end;
  return m;
}

CUpti_ActivityMemory4 Memory(CUpti_ActivityMemoryOperationType operation, uint64_t bytes, uint64_t timestamp) {
  CUpti_ActivityMemory4 m{};
  m.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
  m.memoryOperationType = operation;
  m.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  m.deviceId = 0;
  m.contextId = 1;
  m.bytes = bytes;
  m.timestamp = timestamp;
  return m;
}

std::map<std::string, trace::NvtxRangeEvent> RangesByName(const trace::RankTrace& trace) {
  std::map<std::string, trace::NvtxRangeEvent> ranges;
  for (const auto& range : trace.events.nvtx_ranges) ranges[trace.str(range.name)] = range;
  return ranges;
}

class CuptiTracerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fake_.Install(api_)) {
      Result<CuptiApi*> loaded = LoadCupti();
      // Only a missing library skips: one that loads but does not fit must fail.
      if (loaded.status().code() == StatusCode::kNotFound) GTEST_SKIP() << loaded.status().message();
      FAIL() << loaded.status().message();
    }
  }

  // Rank 0, timestamps in CLOCK_REALTIME ns (so CUPTI's hand-made times are exact in the file).
  RecorderOptions Options() const {
    return testing::MakeRecorderOptions(dir_, {.run_id = "cupti",
                                               .rank = 0,
                                               .world_size = 1,
                                               .clock_override = "realtime",
                                               .command_line = "cupti_tracer_test"});
  }

  trace::RankTrace CloseAndLoad(Recorder& recorder) {
    EXPECT_TRUE(recorder.Close(Recorder::EndReason::kExit).ok());
    return Load(dir_ / "rank-0.sqlite");
  }

  TempDir dir_;
  FakeCupti fake_;
  CuptiApi api_;
};

TEST_F(CuptiTracerTest, DeviceWorkLandsOnStreamLanesAndJoinsTheRangeThatLaunchedIt) {
  Recorder recorder(Options());
  ASSERT_TRUE(StartCuptiTracing(recorder, &api_));
  EXPECT_TRUE(StartCuptiTracing(recorder, &api_));  // already running: nothing new
  EXPECT_EQ(fake_.LogCount("subscribe"), 1);

  const NvtxDomain* domain = recorder.registry().CreateDomain("app");
  recorder.Push(Named(domain, "step"));
  recorder.Push(Named(domain, "forward"));
  const std::vector<uint64_t> open = fake_.Stack();
  ASSERT_EQ(open.size(), 2u);

  // What CUPTI writes for a kernel launched inside "forward", and a copy after it.
  const int64_t tid = ThisThread();
  const auto now = static_cast<uint64_t>(RealtimeNowNs());
  FilledBuffer buffer = fake_.Request();
  buffer.Add(External(open.back(), 500));
  buffer.Add(Launch(tid, 500, now + 1000, now + 5000));
  buffer.Add(Kernel("_Z6matmulPfS_", 7, 500, now + 6000, now + 9000));
  buffer.Add(Copy(13, 501, now + 9500, now + 9900));
  fake_.Complete(buffer);
  recorder.Pop(domain, {});
  recorder.Pop(domain, {});
  EXPECT_TRUE(fake_.Stack().empty());
  trace::RankTrace trace = CloseAndLoad(recorder);

  std::map<std::string, trace::NvtxRangeEvent> ranges = RangesByName(trace);
  ASSERT_EQ(ranges.size(), 2u);
  EXPECT_EQ(ranges["step"].correlation_id, open.front());
  EXPECT_EQ(ranges["forward"].correlation_id, open.back());
  EXPECT_NE(open.front(), open.back());

  ASSERT_EQ(trace.events.api_calls.size(), 1u);
  const trace::ApiCallEvent& call = trace.events.api_calls[0];
  EXPECT_EQ(trace.str(call.name), "cudaLaunchKernel");
  EXPECT_EQ(call.domain, trace::ApiDomain::kRuntime);
  EXPECT_EQ(call.start_ns, static_cast<int64_t>(now + 1000));
  EXPECT_EQ(call.end_ns, static_cast<int64_t>(now + 5000));
  // The innermost open range, on the same thread lane as the NVTX ranges.
  EXPECT_EQ(call.external_id, ranges["forward"].correlation_id);
  EXPECT_EQ(call.lane, ranges["forward"].lane);
  ASSERT_NE(trace.lane(call.lane), nullptr);
  EXPECT_EQ(trace.lane(call.lane)->kind, trace::LaneKind::kCpuThread);
  EXPECT_EQ(trace.lane(call.lane)->tid, tid);

  ASSERT_EQ(trace.events.kernels.size(), 1u);
  const trace::KernelEvent& kernel = trace.events.kernels[0];
  EXPECT_EQ(trace.str(kernel.name), "matmul(float*, float*)");
  EXPECT_EQ(kernel.correlation_id, call.correlation_id);
  EXPECT_EQ(kernel.start_ns, static_cast<int64_t>(now + 6000));
  EXPECT_EQ(kernel.grid, (trace::Dim3{64, 1, 1}));
  const trace::Lane* kernel_lane = trace.lane(kernel.lane);
  ASSERT_NE(kernel_lane, nullptr);
  EXPECT_EQ(kernel_lane->kind, trace::LaneKind::kGpuStream);
  EXPECT_EQ(kernel_lane->device, 0);
  EXPECT_EQ(kernel_lane->context, 1u);
  EXPECT_EQ(kernel_lane->stream, 7u);
  EXPECT_EQ(kernel_lane->pid, getpid());

  ASSERT_EQ(trace.events.memcpys.size(), 1u);
  const trace::MemcpyEvent& copy = trace.events.memcpys[0];
  EXPECT_EQ(trace.str(copy.name), "Memcpy DtoH");
  EXPECT_EQ(copy.bytes, 8192u);
  const trace::Lane* copy_lane = trace.lane(copy.lane);
  ASSERT_NE(copy_lane, nullptr);
  EXPECT_EQ(copy_lane->kind, trace::LaneKind::kGpuStream);
  EXPECT_EQ(copy_lane->stream, 13u);

  EXPECT_EQ(trace.meta.entries["cupti.status"], "on");
  EXPECT_EQ(trace.meta.entries["cupti.kinds"], kAllKinds);
  EXPECT_EQ(trace.meta.entries["cupti.records"], "4");
  EXPECT_EQ(trace.meta.entries["cupti.version"], "130001");
  EXPECT_EQ(trace.meta.entries["cupti.clock"], "realtime");
  EXPECT_EQ(trace.meta.entries.count("cupti.kinds_failed"), 0u);
  EXPECT_TRUE(trace.drops.empty());
  // The end: a forced flush, then CUPTI let go.
  std::vector<std::string> log = fake_.Log();
  auto forced = std::find(log.begin(), log.end(), "flush forced");
  auto unsubscribed = std::find(log.begin(), log.end(), "unsubscribe");
  ASSERT_NE(forced, log.end());
  ASSERT_NE(unsubscribed, log.end());
  EXPECT_LT(forced, unsubscribed);
}

TEST_F(CuptiTracerTest, MemoryRecordsReachTheRankFileAsCounterSamples) {
  Recorder recorder(Options());
  ASSERT_TRUE(StartCuptiTracing(recorder, &api_));
  const auto now = static_cast<uint64_t>(RealtimeNowNs());
  FilledBuffer buffer = fake_.Request();
  buffer.Add(Memory(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, 4096, now + 100));
  buffer.Add(Memory(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE, 8192, now + 200));  // held from before
  buffer.Add(Memory(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, 1024, now + 300));
  fake_.Complete(buffer);
  trace::RankTrace trace = CloseAndLoad(recorder);

  ASSERT_EQ(trace.events.counter_samples.size(), 3u);
  const trace::CounterSample* samples = trace.events.counter_samples.data();
  EXPECT_EQ(samples[0].ts_ns, static_cast<int64_t>(now + 100));
  EXPECT_EQ(samples[0].value, 4096.0);
  EXPECT_EQ(samples[1].value, 0.0);
  EXPECT_EQ(samples[2].ts_ns, static_cast<int64_t>(now + 300));
  EXPECT_EQ(samples[2].value, 1024.0);
  EXPECT_EQ(samples[1].lane, samples[0].lane);
  EXPECT_EQ(samples[2].lane, samples[0].lane);
  const trace::Lane* lane = trace.lane(samples[0].lane);
  ASSERT_NE(lane, nullptr);
  EXPECT_EQ(lane->kind, trace::LaneKind::kCounter);
  EXPECT_EQ(lane->name, "cuda memory: device (gpu 0)");
  EXPECT_EQ(lane->device, 0);
  EXPECT_EQ(lane->pid, getpid());
  EXPECT_EQ(trace.meta.entries["cupti.memory_releases_clamped"], "1");
  EXPECT_EQ(trace.meta.entries["cupti.records"], "3");
}

TEST_F(CuptiTracerTest, NestedRangesArePushedAndPoppedInOrder) {
  Recorder recorder(Options());
  ASSERT_TRUE(StartCuptiTracing(recorder, &api_));
  const NvtxDomain* domain = recorder.registry().DefaultDomain();
  recorder.Push(Named(domain, "outer"));
  const std::vector<uint64_t> outer = fake_.Stack();
  recorder.Push(Named(domain, "inner"));
  const std::vector<uint64_t> both = fake_.Stack();
  recorder.Pop(domain, {});
  EXPECT_EQ(fake_.Stack(), outer);
  recorder.Pop(domain, {});
  EXPECT_TRUE(fake_.Stack().empty());
  ASSERT_EQ(outer.size(), 1u);
  ASSERT_EQ(both.size(), 2u);
  EXPECT_EQ(both[0], outer[0]);
  EXPECT_EQ(fake_.CorrelationLog(), (std::vector<std::string>{"push " + std::to_string(both[0]),
                                                               "push " + std::to_string(both[1]), "pop", "pop"}));
  trace::RankTrace trace = CloseAndLoad(recorder);
  std::map<std::string, trace::NvtxRangeEvent> ranges = RangesByName(trace);
  EXPECT_EQ(ranges["outer"].correlation_id, both[0]);
  EXPECT_EQ(ranges["inner"].correlation_id, both[1]);
}

TEST_F(CuptiTracerTest, OutOfOrderPopsAcrossDomainsLeaveTheOpenRangesOnTheStack) {
  Recorder recorder(Options());
  ASSERT_TRUE(StartCuptiTracing(recorder, &api_));
  const NvtxDomain* a = recorder.registry().CreateDomain("a");
  const NvtxDomain* b = recorder.registry().CreateDomain("b");
  recorder.Push(Named(a, "a1"));
  recorder.Push(Named(a, "a2"));
  recorder.Push(Named(b, "b1"));
  const std::vector<uint64_t> ids = fake_.Stack();  // a1, a2, b1
  ASSERT_EQ(ids.size(), 3u);

  // a2 ends while b1 (pushed after it, in another domain) stays open.
  recorder.Pop(a, {});
  EXPECT_EQ(fake_.Stack(), (std::vector<uint64_t>{ids[0], ids[2]}));
  // a1 ends under b1 too.
  recorder.Pop(a, {});
  EXPECT_EQ(fake_.Stack(), (std::vector<uint64_t>{ids[2]}));
  recorder.Push(Named(a, "a3"));
  const std::vector<uint64_t> with_a3 = fake_.Stack();
  ASSERT_EQ(with_a3.size(), 2u);
  EXPECT_EQ(with_a3[0], ids[2]);
  recorder.Pop(b, {});
  EXPECT_EQ(fake_.Stack(), (std::vector<uint64_t>{with_a3[1]}));
  recorder.Pop(a, {});
  EXPECT_TRUE(fake_.Stack().empty());
  recorder.Pop(a, {});  // nothing open: CUPTI is not asked to pop
  EXPECT_TRUE(fake_.Stack().empty());

  trace::RankTrace trace = CloseAndLoad(recorder);
  std::map<std::string, trace::NvtxRangeEvent> ranges = RangesByName(trace);
  ASSERT_EQ(ranges.size(), 4u);
  EXPECT_EQ(ranges["a1"].correlation_id, ids[0]);
  EXPECT_EQ(ranges["a2"].correlation_id, ids[1]);
  EXPECT_EQ(ranges["b1"].correlation_id, ids[2]);
  EXPECT_EQ(ranges["a3"].correlation_id, with_a3[1]);
}

TEST_F(CuptiTracerTest, RangesDeeperThanSixteenRecordButTagNoDeviceWork) {
  Recorder recorder(Options());
  ASSERT_TRUE(StartCuptiTracing(recorder, &api_));
  const NvtxDomain* domain = recorder.registry().DefaultDomain();
  const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (int i = 0; i < 20; ++i) out.push_back("level-" + std::to_string(i));
    return out;
  }();
  for (const std::string& name : names) recorder.Push(Named(domain, name.c_str()));
  const std::vector<uint64_t> ids = fake_.Stack();
  EXPECT_EQ(ids.size(), 16u);
  for (int i = 0; i < 4; ++i) recorder.Pop(domain, {});  // the untagged ones
  EXPECT_EQ(fake_.Stack(), ids);
  recorder.Pop(domain, {});
  EXPECT_EQ(fake_.Stack().size(), 15u);
  // With room again, a new range is tagged.
  recorder.Push(Named(domain, "again"));
  EXPECT_EQ(fake_.Stack().size(), 16u);
  const uint64_t again = fake_.Stack().back();
  for (int i = 0; i < 16; ++i) recorder.Pop(domain, {});
  EXPECT_TRUE(fake_.Stack().empty());

  trace::RankTrace trace = CloseAndLoad(recorder);
  std::map<std::string, trace::NvtxRangeEvent> ranges = RangesByName(trace);
  ASSERT_EQ(ranges.size(), 21u);
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(ranges[names[i]].correlation_id, i < 16 ? ids[i] : 0u) << names[i];
  }
  EXPECT_EQ(ranges["again"].correlation_id, again);
}

TEST_F(CuptiTracerTest, RangeOpenedBeforeCuptiStartedIsNotPopped) {
  Recorder recorder(Options());
  const NvtxDomain* domain = recorder.registry().DefaultDomain();
  recorder.Push(Named(domain, "before"));
  ASSERT_TRUE(StartCuptiTracing(recorder, &api_));
  recorder.Push(Named(domain, "after"));
  EXPECT_EQ(fake_.Stack().size(), 1u);
  recorder.Pop(domain, {});
  recorder.Pop(domain, {});  // "before" was never on CUPTI's stack
  EXPECT_TRUE(fake_.Stack().empty());
  EXPECT_EQ(fake_.CorrelationLog().size(), 2u);
  trace::RankTrace trace = CloseAndLoad(recorder);
  std::map<std::string, trace::NvtxRangeEvent> ranges = RangesByName(trace);
  EXPECT_EQ(ranges["before"].correlation_id, 0u);
  EXPECT_NE(ranges["after"].correlation_id, 0u);
}

TEST_F(CuptiTracerTest, FailingConcurrentKernelTurnsCuptiOffAndNvtxGoesOn) {
  fake_.enable_results[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL] = CUPTI_ERROR_UNKNOWN;
  Recorder recorder(Options());
  const NvtxDomain* domain = recorder.registry().DefaultDomain();
  recorder.Push(Named(domain, "before"));
  recorder.Pop(domain, {});
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(StartCuptiTracing(recorder, &api_));
  const std::string err = ::testing::internal::GetCapturedStderr();
  recorder.Push(Named(domain, "after"));
  recorder.Pop(domain, {});
  EXPECT_TRUE(fake_.CorrelationLog().empty());  // no tracer: nothing tagged
  EXPECT_EQ(fake_.LogCount("unsubscribe"), 1);

  const std::string reason =
      "cuptiActivityEnable(concurrent_kernel) failed: CUPTI_ERROR_UNKNOWN (999) (no usable CUDA driver?)";
  EXPECT_EQ(err, "rankscope: rank 0: CUDA activity is not recorded: " + reason +
                     "; NVTX and NCCL recording go on\n");
  trace::RankTrace trace = CloseAndLoad(recorder);
  EXPECT_EQ(trace.meta.entries["cupti.status"], "off: " + reason);
  std::map<std::string, trace::NvtxRangeEvent> ranges = RangesByName(trace);
  EXPECT_EQ(ranges.size(), 2u);
  EXPECT_EQ(ranges.count("before"), 1u);
  EXPECT_EQ(ranges.count("after"), 1u);
  EXPECT_TRUE(trace.events.kernels.empty());
}

TEST_F(CuptiTracerTest, FastNvtxRangesTagDeviceWorkToo) {
  Recorder recorder(Options());
  ASSERT_TRUE(StartCuptiTracing(recorder, &api_));
  const NvtxDomain* domain = recorder.registry().CreateDomain("app");
  recorder.Push(Named(domain, "step"));  // the thread's first event takes the general path
  // What nvtxRangePushA / nvtxDomainRangePushEx with plain attributes record.
  EXPECT_EQ(recorder.PushPlain(domain, {.message = "forward", .category = 2}), 1);
  const std::vector<uint64_t> open = fake_.Stack();
  ASSERT_EQ(open.size(), 2u);
  EXPECT_EQ(recorder.PopPlain(domain), 1);
  EXPECT_EQ(fake_.Stack().size(), 1u);
  EXPECT_EQ(recorder.PopPlain(domain), 0);
  EXPECT_TRUE(fake_.Stack().empty());
  trace::RankTrace trace = CloseAndLoad(recorder);
  std::map<std::string, trace::NvtxRangeEvent> ranges = RangesByName(trace);
  ASSERT_EQ(ranges.size(), 2u);
  EXPECT_EQ(ranges["step"].correlation_id, open.front());
  EXPECT_EQ(ranges["forward"].correlation_id, open.back());
  EXPECT_EQ(ranges["forward"].category, 2u);
}

TEST_F(CuptiTracerTest, AnotherProfilerAttachedIsNamedInTheStatus) {
  fake_.subscribe_result = CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  fake_.old_subscriber = "Nsight Systems";
  Recorder recorder(Options());
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(StartCuptiTracing(recorder, &api_));
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("'Nsight Systems'"), std::string::npos) << err;
  recorder.Mark(Named(recorder.registry().DefaultDomain(), "m"));
  trace::RankTrace trace = CloseAndLoad(recorder);
  const std::string status = trace.meta.entries["cupti.status"];
  EXPECT_TRUE(status.starts_with("off: another CUPTI client is attached ('Nsight Systems')")) << status;
  EXPECT_EQ(trace.events.nvtx_marks.size(), 1u);
}

TEST_F(CuptiTracerTest, CudaNotSelectedLeavesCuptiAlone) {
  RecorderOptions options = Options();
  options.config.trace.cuda = false;
  Recorder recorder(std::move(options));
  EXPECT_FALSE(StartCuptiTracing(recorder, &api_));
  EXPECT_TRUE(fake_.Log().empty());  // not even subscribed
  trace::RankTrace trace = CloseAndLoad(recorder);
  EXPECT_EQ(trace.meta.entries["cupti.status"], "off: not selected (--trace)");
}

TEST_F(CuptiTracerTest, ProcessThatNeverStartedCudaSaysSo) {
  Recorder recorder(Options());
  recorder.Mark(Named(recorder.registry().DefaultDomain(), "m"));
  trace::RankTrace trace = CloseAndLoad(recorder);
  // This test process never loads libcuda (the fake CUPTI stands in for it).
  EXPECT_EQ(trace.meta.entries["cupti.status"],
            "not started: the process never loaded the CUDA driver (libcuda.so.1): no NVIDIA driver on this "
            "machine, or the program does not use CUDA");
  EXPECT_TRUE(fake_.Log().empty());
}

// A final flush that hangs does not hold the process at exit: Close gives up after its
// timeout with one stderr line, and the file is still closed once the flush comes back.
TEST_F(CuptiTracerTest, CloseDoesNotWaitForeverOnAStuckFlush) {
  RecorderOptions options = Options();
  options.close_timeout = std::chrono::milliseconds(200);
  fake_.forced_flush_delay = std::chrono::seconds(3);
  {
    Recorder recorder(std::move(options));
    ASSERT_TRUE(StartCuptiTracing(recorder, &api_));
    recorder.Mark(Named(recorder.registry().DefaultDomain(), "before-close"));
    ::testing::internal::CaptureStderr();
    const Status closed = recorder.Close(Recorder::EndReason::kExit);
    const std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(closed.code(), StatusCode::kUnavailable) << closed.ToString();
    EXPECT_NE(closed.message().find("did not finish closing within 200 ms"), std::string::npos) << closed.message();
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  }  // the destructor waits for the drain thread, which then finishes the file
  trace::RankTrace trace = Load(dir_ / "rank-0.sqlite");
  EXPECT_TRUE(trace.meta.closed_cleanly);
  EXPECT_EQ(trace.events.nvtx_marks.size(), 1u);
}

TEST_F(CuptiTracerTest, FinishDeviceTracingFlushesWhatCuptiStillHeldBeforeClose) {
  RecorderOptions options = Options();
  options.drain_interval = std::chrono::hours(1);  // only the flush points drain
  Recorder recorder(std::move(options));
  ASSERT_TRUE(StartCuptiTracing(recorder, &api_));
  const auto now = static_cast<uint64_t>(RealtimeNowNs());
  FilledBuffer buffer = fake_.Request();
  buffer.Add(Kernel("tail_kernel", 3, 900, now + 100, now + 200));
  fake_.Hold(buffer);  // not full: CUPTI keeps it until a forced flush

  recorder.FinishDeviceTracing(std::chrono::seconds(10));
  std::vector<std::string> log = fake_.Log();
  EXPECT_EQ(std::count(log.begin(), log.end(), "flush forced"), 1);
  EXPECT_EQ(std::count(log.begin(), log.end(), "unsubscribe"), 1);  // CUPTI is done with
  EXPECT_TRUE(recorder.recording());  // NVTX goes on until exit
  recorder.Mark(Named(recorder.registry().DefaultDomain(), "after finish"));
  // Ranges after the final flush tag nothing: CUPTI is no longer asked to push ids.
  const size_t correlation_calls = fake_.CorrelationLog().size();
  recorder.Push(Named(recorder.registry().DefaultDomain(), "late range"));
  recorder.Pop(recorder.registry().DefaultDomain(), {});
  EXPECT_EQ(fake_.CorrelationLog().size(), correlation_calls);

  trace::RankTrace trace = CloseAndLoad(recorder);
  log = fake_.Log();
  EXPECT_EQ(std::count(log.begin(), log.end(), "flush forced"), 1);  // Close did not flush again
  ASSERT_EQ(trace.events.kernels.size(), 1u);
  EXPECT_EQ(trace.str(trace.events.kernels[0].name), "tail_kernel");
  EXPECT_EQ(trace.events.nvtx_marks.size(), 1u);
  EXPECT_EQ(trace.meta.entries["cupti.records"], "1");
}

TEST_F(CuptiTracerTest, CloseWithoutFinishStillFlushesCupti) {
  Recorder recorder(Options());
  ASSERT_TRUE(StartCuptiTracing(recorder, &api_));
  const auto now = static_cast<uint64_t>(RealtimeNowNs());
  FilledBuffer buffer = fake_.Request();
  buffer.Add(Kernel("k", 3, 1, now + 100, now + 200));
  fake_.Hold(buffer);
  trace::RankTrace trace = CloseAndLoad(recorder);
  EXPECT_EQ(trace.events.kernels.size(), 1u);
}

TEST_F(CuptiTracerTest, CuptiDropsBecomeDropRows) {
  RecorderOptions options = Options();
  options.drain_interval = std::chrono::hours(1);  // everything is counted at the end
  Recorder recorder(std::move(options));
  ASSERT_TRUE(StartCuptiTracing(recorder, &api_));
  const auto context = reinterpret_cast<CUcontext>(uintptr_t{0x3000});  // context id 3
  const auto stream = reinterpret_cast<CUstream>(uintptr_t{0xd000});    // stream id 13
  fake_.ResourceCallback(CUPTI_CBID_RESOURCE_STREAM_CREATED, context, stream);
  fake_.SetDropped(context, 13, 4);
  fake_.ResourceCallback(CUPTI_CBID_RESOURCE_STREAM_DESTROY_STARTING, context, stream);
  fake_.SetDropped(nullptr, 0, 5);
  FilledBuffer buffer = fake_.Request();
  buffer.Add(Kernel("untimed", 3, 1, 0, 0));  // CUPTI could not time it
  fake_.Complete(buffer);

  trace::RankTrace trace = CloseAndLoad(recorder);
  std::map<std::string, trace::DropRecord> drops;
  for (const trace::DropRecord& drop : trace.drops) {
    EXPECT_EQ(drop.source, "cupti");
    drops[drop.reason + (drop.stream != 0 ? " (stream)" : "")] = drop;
  }
  ASSERT_EQ(drops.size(), 3u);
  const trace::DropRecord& per_stream = drops["insufficient activity buffer space (stream)"];
  EXPECT_EQ(per_stream.device, 1);
  EXPECT_EQ(per_stream.context, 3u);
  EXPECT_EQ(per_stream.stream, 13u);
  EXPECT_EQ(per_stream.count, 4u);
  const trace::DropRecord& global = drops["insufficient activity buffer space"];
  EXPECT_EQ(global.device, -1);
  EXPECT_EQ(global.count, 5u);
  EXPECT_EQ(drops["record without valid timestamps"].count, 1u);
  EXPECT_TRUE(trace.events.kernels.empty());
}

#if defined(__x86_64__)
TEST_F(CuptiTracerTest, TscRecorderMakesCuptiTimeWithTheTsc) {
  RecorderOptions options = Options();
  options.config.clock_override = "tsc";
  Recorder recorder(std::move(options));
  ASSERT_EQ(recorder.clock_source(), ClockSource::kTsc);
  ASSERT_TRUE(StartCuptiTracing(recorder, &api_));
  EXPECT_EQ(fake_.LogCount("timestamp callback"), 1);
  trace::RankTrace trace = CloseAndLoad(recorder);
  EXPECT_EQ(trace.meta.entries["cupti.clock"], "tsc");
}
#endif

}  // namespace
}  // namespace rankscope::collector
