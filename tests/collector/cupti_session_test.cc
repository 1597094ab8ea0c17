// CuptiSession against a fake CUPTI: the calls it makes to start, the ways starting fails
// (and what it undoes), its buffer pool, its drop counts and its callbacks.
#include "collector/cupti_session.h"

#include <cupti.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace rankscope::collector {
namespace {

// Everything the fake CUPTI was asked, and what it answers. The functions of a CuptiApi are
// plain function pointers, so they reach the state through a global.
struct FakeCupti {
  // ---- answers ----
  CUptiResult subscribe_result = CUPTI_SUCCESS;
  std::string old_subscriber;  // written back on CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
  CUptiResult thread_id_result = CUPTI_SUCCESS;
  std::map<CUpti_ActivityKind, CUptiResult> enable_results;  // default CUPTI_SUCCESS
  size_t global_dropped = 0;                                  // reset when read, as CUPTI does
  std::map<std::pair<CUcontext, uint32_t>, size_t> stream_dropped;
  std::map<CUcontext, uint32_t> context_ids, device_ids;
  std::map<CUstream, uint32_t> stream_ids;

  // ---- what was asked ----
  std::vector<std::string> calls;  // every call, in order, by name
  std::string subscriber_name;
  size_t subscriber_struct_size = 0;
  CUpti_CallbackFunc callback = nullptr;
  void* userdata = nullptr;
  int subscribes = 0;
  std::vector<CUpti_SubscriberHandle> unsubscribed;
  std::vector<CUpti_ActivityThreadIdType> thread_id_types;
  std::vector<CUpti_TimestampCallbackFunc> timestamp_callbacks;
  CUpti_BuffersCallbackRequestFunc requested = nullptr;
  CUpti_BuffersCallbackCompleteFunc completed = nullptr;
  std::vector<CUpti_ActivityKind> enabled, disabled;  // every successful enable; every disable
  std::vector<std::pair<CUpti_CallbackId, uint8_t>> runtime_filters, driver_filters;
  struct EnabledCallback {
    uint32_t enable;
    CUpti_SubscriberHandle subscriber;
    CUpti_CallbackDomain domain;
    CUpti_CallbackId cbid;
  };
  std::vector<EnabledCallback> callbacks_enabled;
  std::vector<std::pair<uint32_t, CUpti_CallbackDomain>> domains_enabled;
  std::vector<uint32_t> flushes;
  std::vector<uint32_t> flush_periods;
  std::vector<std::pair<CUcontext, uint32_t>> drop_queries;

  static inline FakeCupti* current = nullptr;
  static inline const auto kSubscriber = reinterpret_cast<CUpti_SubscriberHandle>(uintptr_t{0x5b});

  FakeCupti() { current = this; }
  ~FakeCupti() { current = nullptr; }

  size_t CallIndex(const std::string& name) const {
    return static_cast<size_t>(std::find(calls.begin(), calls.end(), name) - calls.begin());
  }
  size_t CallCount(const std::string& name) const {
    return static_cast<size_t>(std::count(calls.begin(), calls.end(), name));
  }

  void Install(CuptiApi& api) {
    api.GetVersion = [](uint32_t* version) {
      *version = 130001;
      return CUPTI_SUCCESS;
    };
    api.GetResultString = [](CUptiResult result, const char** text) {
      switch (result) {
        case CUPTI_ERROR_UNKNOWN: *text = "CUPTI_ERROR_UNKNOWN"; return CUPTI_SUCCESS;
        case CUPTI_ERROR_NOT_SUPPORTED: *text = "CUPTI_ERROR_NOT_SUPPORTED"; return CUPTI_SUCCESS;
        case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES: *text = "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"; return CUPTI_SUCCESS;
        default: return CUPTI_ERROR_INVALID_PARAMETER;
      }
    };
    api.Subscribe_v2 = [](CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc function, void* data,
                          CUpti_SubscriberParams* params) {
      FakeCupti& f = *current;
      f.calls.push_back("Subscribe_v2");
      ++f.subscribes;
      f.subscriber_struct_size = params->structSize;
      f.subscriber_name = params->subscriberName != nullptr ? params->subscriberName : "";
      if (f.subscribe_result == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED && params->oldSubscriberName != nullptr) {
        std::strncpy(params->oldSubscriberName, f.old_subscriber.c_str(), params->oldSubscriberSize);
      }
      if (f.subscribe_result != CUPTI_SUCCESS) return f.subscribe_result;
      f.callback = function;
      f.userdata = data;
      *subscriber = kSubscriber;
      return CUPTI_SUCCESS;
    };
    api.Unsubscribe = [](CUpti_SubscriberHandle subscriber) {
      current->calls.push_back("Unsubscribe");
      current->unsubscribed.push_back(subscriber);
      return CUPTI_SUCCESS;
    };
    api.EnableCallback = [](uint32_t enable, CUpti_SubscriberHandle subscriber, CUpti_CallbackDomain domain,
                            CUpti_CallbackId cbid) {
      current->calls.push_back("EnableCallback");
      current->callbacks_enabled.push_back({enable, subscriber, domain, cbid});
      return CUPTI_SUCCESS;
    };
    api.EnableDomain = [](uint32_t enable, CUpti_SubscriberHandle, CUpti_CallbackDomain domain) {
      current->calls.push_back("EnableDomain");
      current->domains_enabled.emplace_back(enable, domain);
      return CUPTI_SUCCESS;
    };
    api.SetThreadIdType = [](CUpti_ActivityThreadIdType type) {
      current->calls.push_back("SetThreadIdType");
      current->thread_id_types.push_back(type);
      return current->thread_id_result;
    };
    api.ActivityRegisterTimestampCallback = [](CUpti_TimestampCallbackFunc function) {
      current->calls.push_back("ActivityRegisterTimestampCallback");
      current->timestamp_callbacks.push_back(function);
      return CUPTI_SUCCESS;
    };
    api.ActivityRegisterCallbacks = [](CUpti_BuffersCallbackRequestFunc on_request,
                                       CUpti_BuffersCallbackCompleteFunc on_complete) {
      current->calls.push_back("ActivityRegisterCallbacks");
      current->requested = on_request;
      current->completed = on_complete;
      return CUPTI_SUCCESS;
    };
    api.ActivityEnable = [](CUpti_ActivityKind kind) {
      FakeCupti& f = *current;
      f.calls.push_back("ActivityEnable");
      auto answer = f.enable_results.find(kind);
      const CUptiResult result = answer == f.enable_results.end() ? CUPTI_SUCCESS : answer->second;
      if (result == CUPTI_SUCCESS) f.enabled.push_back(kind);
      return result;
    };
    api.ActivityDisable = [](CUpti_ActivityKind kind) {
      current->calls.push_back("ActivityDisable");
      current->disabled.push_back(kind);
      return CUPTI_SUCCESS;
    };
    api.ActivityEnableDriverApi = [](CUpti_CallbackId cbid, uint8_t enable) {
      current->calls.push_back("ActivityEnableDriverApi");
      current->driver_filters.emplace_back(cbid, enable);
      return CUPTI_SUCCESS;
    };
    api.ActivityEnableRuntimeApi = [](CUpti_CallbackId cbid, uint8_t enable) {
      current->calls.push_back("ActivityEnableRuntimeApi");
      current->runtime_filters.emplace_back(cbid, enable);
      return CUPTI_SUCCESS;
    };
    api.ActivityFlushAll = [](uint32_t flag) {
      current->calls.push_back("ActivityFlushAll");
      current->flushes.push_back(flag);
      return CUPTI_SUCCESS;
    };
    api.ActivityFlushPeriod = [](uint32_t milliseconds) {
      current->calls.push_back("ActivityFlushPeriod");
      current->flush_periods.push_back(milliseconds);
      return CUPTI_SUCCESS;
    };
    api.ActivityGetNextRecord = [](uint8_t*, size_t, CUpti_Activity**) { return CUPTI_ERROR_MAX_LIMIT_REACHED; };
    api.ActivityGetNumDroppedRecords = [](CUcontext context, uint32_t stream, size_t* dropped) {
      FakeCupti& f = *current;
      f.drop_queries.emplace_back(context, stream);
      if (context == nullptr) {
        *dropped = std::exchange(f.global_dropped, 0);
      } else {
        auto it = f.stream_dropped.find({context, stream});
        *dropped = it == f.stream_dropped.end() ? 0 : std::exchange(it->second, 0);
      }
      return CUPTI_SUCCESS;
    };
    api.ActivityPushExternalCorrelationId = [](CUpti_ExternalCorrelationKind, uint64_t) { return CUPTI_SUCCESS; };
    api.ActivityPopExternalCorrelationId = [](CUpti_ExternalCorrelationKind, uint64_t*) { return CUPTI_SUCCESS; };
    api.GetCallbackName = [](CUpti_CallbackDomain, uint32_t, const char**) { return CUPTI_ERROR_INVALID_PARAMETER; };
    api.GetContextId = [](CUcontext context, uint32_t* id) {
      *id = current->context_ids[context];
      return CUPTI_SUCCESS;
    };
    api.GetDeviceId = [](CUcontext context, uint32_t* id) {
      *id = current->device_ids[context];
      return CUPTI_SUCCESS;
    };
    api.GetStreamIdEx = [](CUcontext, CUstream stream, uint8_t, uint32_t* id) {
      *id = current->stream_ids[stream];
      return CUPTI_SUCCESS;
    };
  }

  // CUPTI asking for a buffer.
  std::pair<uint8_t*, size_t> Request() const {
    uint8_t* buffer = reinterpret_cast<uint8_t*>(uintptr_t{1});  // overwritten
    size_t size = 1, max_records = 1;
    requested(&buffer, &size, &max_records);
    EXPECT_EQ(max_records, 0u);  // "as many as fit"
    return {buffer, size};
  }
};

CuptiOptions SmallPool(size_t max_buffers = 4) {
  CuptiOptions options;
  options.buffer_bytes = 4096;
  options.max_buffers = max_buffers;
  options.flush_period = std::chrono::milliseconds(250);
  return options;
}

constexpr CUpti_ActivityKind kAllKinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,          CUPTI_ACTIVITY_KIND_MEMCPY2,
    CUPTI_ACTIVITY_KIND_MEMSET,            CUPTI_ACTIVITY_KIND_MEMORY2,         CUPTI_ACTIVITY_KIND_RUNTIME,
    CUPTI_ACTIVITY_KIND_DRIVER,            CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, CUPTI_ACTIVITY_KIND_OVERHEAD,
    CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
};

class CuptiSessionTest : public ::testing::Test {
 protected:
  void SetUp() override { fake_.Install(api_); }

  std::unique_ptr<CuptiSession> MustStart(CuptiOptions options = SmallPool()) {
    Result<std::unique_ptr<CuptiSession>> started = CuptiSession::Start(api_, options);
    EXPECT_TRUE(started.ok()) << started.status().message();
    return started.ok() ? std::move(*started) : nullptr;
  }

  // CUPTI calling the subscriber's callback for a runtime or driver API call.
  void CallApi(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, CUpti_ApiCallbackSite site) {
    CUpti_CallbackData data{};
    data.callbackSite = site;
    data.functionName = "reset";
    fake_.callback(fake_.userdata, domain, cbid, &data);
  }
  // ... and for a resource going or coming.
  void Resource(CUpti_CallbackId cbid, CUcontext context, CUstream stream) {
    CUpti_ResourceData data{};
    data.context = context;
    data.resourceHandle.stream = stream;
    fake_.callback(fake_.userdata, CUPTI_CB_DOMAIN_RESOURCE, cbid, &data);
  }

  FakeCupti fake_;
  CuptiApi api_;
};

TEST_F(CuptiSessionTest, StartSubscribesConfiguresAndEnablesEveryKind) {
  std::unique_ptr<CuptiSession> session = MustStart();
  ASSERT_NE(session, nullptr);

  EXPECT_EQ(fake_.subscriber_name, "rankscope");
  EXPECT_EQ(fake_.subscriber_struct_size, CUpti_SubscriberParams_STRUCT_SIZE);
  EXPECT_EQ(fake_.userdata, session.get());
  EXPECT_EQ(fake_.thread_id_types, std::vector{CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM});
  ASSERT_NE(fake_.requested, nullptr);
  ASSERT_NE(fake_.completed, nullptr);
  EXPECT_TRUE(fake_.timestamp_callbacks.empty());  // CUPTI's own clock unless asked

  // CONCURRENT_KERNEL first: the kind that needs a driver fails before anything is on.
  EXPECT_EQ(fake_.enabled, std::vector<CUpti_ActivityKind>(std::begin(kAllKinds), std::end(kAllKinds)));
  EXPECT_EQ(session->info().kinds,
            (std::vector<std::string>{"concurrent_kernel", "memcpy", "memcpy2", "memset", "memory2", "runtime",
                                      "driver", "synchronization", "overhead", "external_correlation"}));
  EXPECT_TRUE(session->info().kinds_failed.empty());
  EXPECT_EQ(session->info().version, 130001u);

  // Configuration precedes enabling: thread ids and buffer callbacks apply to every record.
  EXPECT_LT(fake_.CallIndex("Subscribe_v2"), fake_.CallIndex("SetThreadIdType"));
  EXPECT_LT(fake_.CallIndex("SetThreadIdType"), fake_.CallIndex("ActivityEnable"));
  EXPECT_LT(fake_.CallIndex("ActivityRegisterCallbacks"), fake_.CallIndex("ActivityEnable"));

  // Kineto's quiet list, turned off because RUNTIME and DRIVER are on.
  EXPECT_EQ(fake_.runtime_filters,
            (std::vector<std::pair<CUpti_CallbackId, uint8_t>>{{CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020, 0}}));
  EXPECT_EQ(fake_.driver_filters,
            (std::vector<std::pair<CUpti_CallbackId, uint8_t>>{{CUPTI_DRIVER_TRACE_CBID_cuKernelGetAttribute, 0},
                                                               {CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxGetState, 0},
                                                               {CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent, 0}}));
  EXPECT_EQ(fake_.flush_periods, std::vector<uint32_t>{250});

  // Device resets flush first; resources are tracked for per-stream drop counts.
  ASSERT_EQ(fake_.callbacks_enabled.size(), 2u);
  EXPECT_EQ(fake_.callbacks_enabled[0].enable, 1u);
  EXPECT_EQ(fake_.callbacks_enabled[0].subscriber, FakeCupti::kSubscriber);
  EXPECT_EQ(fake_.callbacks_enabled[0].domain, CUPTI_CB_DOMAIN_RUNTIME_API);
  EXPECT_EQ(fake_.callbacks_enabled[0].cbid, static_cast<CUpti_CallbackId>(CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020));
  EXPECT_EQ(fake_.callbacks_enabled[1].subscriber, FakeCupti::kSubscriber);
  EXPECT_EQ(fake_.callbacks_enabled[1].domain, CUPTI_CB_DOMAIN_DRIVER_API);
  EXPECT_EQ(fake_.callbacks_enabled[1].cbid,
            static_cast<CUpti_CallbackId>(CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxReset_v2));
  EXPECT_EQ(fake_.domains_enabled,
            (std::vector<std::pair<uint32_t, CUpti_CallbackDomain>>{{1, CUPTI_CB_DOMAIN_RESOURCE}}));
  EXPECT_TRUE(fake_.disabled.empty());
  EXPECT_TRUE(fake_.unsubscribed.empty());
}

TEST_F(CuptiSessionTest, StopDisablesEveryKindAndUnsubscribesOnce) {
  std::unique_ptr<CuptiSession> session = MustStart();
  ASSERT_NE(session, nullptr);
  session->Stop();
  std::vector<CUpti_ActivityKind> disabled = fake_.disabled;
  std::reverse(disabled.begin(), disabled.end());
  EXPECT_EQ(disabled, fake_.enabled);
  EXPECT_EQ(fake_.unsubscribed, std::vector<CUpti_SubscriberHandle>{FakeCupti::kSubscriber});
  session->Stop();  // idempotent
  session.reset();  // and the destructor does not stop it again
  EXPECT_EQ(fake_.disabled.size(), std::size(kAllKinds));
  EXPECT_EQ(fake_.unsubscribed.size(), 1u);
}

TEST_F(CuptiSessionTest, AnotherSubscriberIsNamedInTheStatus) {
  fake_.subscribe_result = CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  fake_.old_subscriber = "Nsight Systems";
  Result<std::unique_ptr<CuptiSession>> started = CuptiSession::Start(api_, SmallPool());
  ASSERT_FALSE(started.ok());
  EXPECT_EQ(started.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(started.status().message().find("another CUPTI client is attached ('Nsight Systems')"), std::string::npos)
      << started.status().message();
  EXPECT_TRUE(fake_.enabled.empty());
  EXPECT_TRUE(fake_.unsubscribed.empty());  // nothing to undo: the slot was never ours
}

TEST_F(CuptiSessionTest, AnotherSubscriberWithoutANameIsStillExplained) {
  fake_.subscribe_result = CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  Result<std::unique_ptr<CuptiSession>> started = CuptiSession::Start(api_, SmallPool());
  ASSERT_FALSE(started.ok());
  EXPECT_NE(started.status().message().find("(it did not give its name)"), std::string::npos)
      << started.status().message();
}

TEST_F(CuptiSessionTest, SubscribeWithoutADriverNamesTheResult) {
  fake_.subscribe_result = CUPTI_ERROR_UNKNOWN;
  Result<std::unique_ptr<CuptiSession>> started = CuptiSession::Start(api_, SmallPool());
  ASSERT_FALSE(started.ok());
  EXPECT_EQ(started.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(started.status().message(),
            "cuptiSubscribe_v2 failed: CUPTI_ERROR_UNKNOWN (999) (no usable CUDA driver?)");
  EXPECT_EQ(fake_.CallCount("SetThreadIdType"), 0u);
  EXPECT_TRUE(fake_.unsubscribed.empty());
}

TEST_F(CuptiSessionTest, ResultWithoutANameIsGivenByNumber) {
  fake_.subscribe_result = CUPTI_ERROR_INVALID_DEVICE;  // the fake has no text for it
  Result<std::unique_ptr<CuptiSession>> started = CuptiSession::Start(api_, SmallPool());
  ASSERT_FALSE(started.ok());
  EXPECT_EQ(started.status().message(), "cuptiSubscribe_v2 failed: CUPTI error 2");
}

TEST_F(CuptiSessionTest, FailingConcurrentKernelUndoesEverythingAndFreesTheSlot) {
  fake_.enable_results[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL] = CUPTI_ERROR_UNKNOWN;
  Result<std::unique_ptr<CuptiSession>> started = CuptiSession::Start(api_, SmallPool());
  ASSERT_FALSE(started.ok());
  EXPECT_EQ(started.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(started.status().message(),
            "cuptiActivityEnable(concurrent_kernel) failed: CUPTI_ERROR_UNKNOWN (999) (no usable CUDA driver?)");
  EXPECT_EQ(fake_.CallCount("ActivityEnable"), 1u);  // nothing after the required kind
  std::set<CUpti_ActivityKind> enabled(fake_.enabled.begin(), fake_.enabled.end());
  std::set<CUpti_ActivityKind> disabled(fake_.disabled.begin(), fake_.disabled.end());
  EXPECT_EQ(disabled, enabled);
  EXPECT_EQ(fake_.unsubscribed, std::vector<CUpti_SubscriberHandle>{FakeCupti::kSubscriber});
  EXPECT_EQ(fake_.CallCount("ActivityFlushPeriod"), 0u);
  EXPECT_EQ(fake_.CallCount("EnableDomain"), 0u);

  // The slot is free again: a later attempt may run.
  fake_.enable_results.clear();
  EXPECT_NE(MustStart(), nullptr);
}

TEST_F(CuptiSessionTest, FailureAfterSubscribingUnsubscribes) {
  fake_.thread_id_result = CUPTI_ERROR_INSUFFICIENT_PRIVILEGES;
  Result<std::unique_ptr<CuptiSession>> started = CuptiSession::Start(api_, SmallPool());
  ASSERT_FALSE(started.ok());
  EXPECT_EQ(started.status().message(),
            "cuptiSetThreadIdType failed: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES (35)");
  EXPECT_EQ(fake_.unsubscribed, std::vector<CUpti_SubscriberHandle>{FakeCupti::kSubscriber});
  EXPECT_TRUE(fake_.enabled.empty());
}

TEST_F(CuptiSessionTest, FailingOptionalKindLeavesTheSessionRunning) {
  fake_.enable_results[CUPTI_ACTIVITY_KIND_MEMSET] = CUPTI_ERROR_NOT_SUPPORTED;
  std::unique_ptr<CuptiSession> session = MustStart();
  ASSERT_NE(session, nullptr);
  EXPECT_EQ(session->info().kinds_failed, std::vector<std::string>{"memset: CUPTI_ERROR_NOT_SUPPORTED (27)"});
  const std::vector<std::string>& kinds = session->info().kinds;
  EXPECT_EQ(std::find(kinds.begin(), kinds.end(), "memset"), kinds.end());
  EXPECT_EQ(kinds.size(), std::size(kAllKinds) - 1);
  EXPECT_TRUE(fake_.unsubscribed.empty());
  session->Stop();
  // Only what was enabled is disabled.
  EXPECT_EQ(std::count(fake_.disabled.begin(), fake_.disabled.end(), CUPTI_ACTIVITY_KIND_MEMSET), 0);
}

TEST_F(CuptiSessionTest, FailingMemoryActivityLeavesTheOtherKindsOn) {
  fake_.enable_results[CUPTI_ACTIVITY_KIND_MEMORY2] = CUPTI_ERROR_UNKNOWN;
  std::unique_ptr<CuptiSession> session = MustStart();
  ASSERT_NE(session, nullptr);
  EXPECT_EQ(session->info().kinds_failed, std::vector<std::string>{"memory2: CUPTI_ERROR_UNKNOWN (999)"});
  const std::vector<std::string>& kinds = session->info().kinds;
  EXPECT_EQ(std::find(kinds.begin(), kinds.end(), "memory2"), kinds.end());
  EXPECT_EQ(kinds.size(), std::size(kAllKinds) - 1);
  EXPECT_EQ(kinds.back(), "external_correlation");  // the kinds after it were still enabled
  EXPECT_TRUE(fake_.unsubscribed.empty());
}

TEST_F(CuptiSessionTest, QuietApiFiltersOnlyForTheApiKindsThatAreOn) {
  fake_.enable_results[CUPTI_ACTIVITY_KIND_RUNTIME] = CUPTI_ERROR_NOT_SUPPORTED;
  std::unique_ptr<CuptiSession> session = MustStart();
  ASSERT_NE(session, nullptr);
  EXPECT_TRUE(fake_.runtime_filters.empty());
  EXPECT_EQ(fake_.driver_filters.size(), 3u);
  session.reset();

  FakeCupti other;
  CuptiApi other_api;
  other.Install(other_api);
  other.enable_results[CUPTI_ACTIVITY_KIND_DRIVER] = CUPTI_ERROR_NOT_SUPPORTED;
  Result<std::unique_ptr<CuptiSession>> started = CuptiSession::Start(other_api, SmallPool());
  ASSERT_TRUE(started.ok());
  EXPECT_EQ(other.runtime_filters.size(), 1u);
  EXPECT_TRUE(other.driver_filters.empty());
}

#if defined(__x86_64__)
TEST_F(CuptiSessionTest, TimestampCallbackIsRegisteredOncePerLibrary) {
  // CUPTI corrupts kernel times when the callback is registered twice in a process.
  CuptiOptions options = SmallPool();
  options.tsc_timestamps = true;
  std::unique_ptr<CuptiSession> first = MustStart(options);
  ASSERT_NE(first, nullptr);
  ASSERT_EQ(fake_.timestamp_callbacks.size(), 1u);
  EXPECT_LT(fake_.CallIndex("ActivityRegisterTimestampCallback"), fake_.CallIndex("ActivityEnable"));
  // It reads the TSC, the collector's clock.
  const uint64_t before = __rdtsc();
  const uint64_t stamp = fake_.timestamp_callbacks[0]();
  const uint64_t after = __rdtsc();
  EXPECT_LE(before, stamp);
  EXPECT_LE(stamp, after);
  first->Stop();

  std::unique_ptr<CuptiSession> second = MustStart(options);
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(fake_.timestamp_callbacks.size(), 1u);
  EXPECT_TRUE(api_.timestamp_callback_registered.load());
}
#endif

TEST_F(CuptiSessionTest, OnlyOneSessionRunsAtATime) {
  std::unique_ptr<CuptiSession> first = MustStart();
  ASSERT_NE(first, nullptr);
  Result<std::unique_ptr<CuptiSession>> second = CuptiSession::Start(api_, SmallPool());
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find("already running"), std::string::npos);
  EXPECT_EQ(fake_.subscribes, 1);  // the refused one never touched CUPTI
  EXPECT_TRUE(fake_.unsubscribed.empty());  // nor undid the running one
  first.reset();
  EXPECT_NE(MustStart(), nullptr);
}

TEST_F(CuptiSessionTest, BufferPoolHandsOutAlignedBuffersAndRecyclesThem) {
  std::unique_ptr<CuptiSession> session = MustStart(SmallPool(/*max_buffers=*/2));
  ASSERT_NE(session, nullptr);
  auto [a, a_size] = fake_.Request();
  auto [b, b_size] = fake_.Request();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(a, b);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 8, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b) % 8, 0u);
  EXPECT_EQ(a_size, 4096u);
  EXPECT_EQ(b_size, 4096u);
  std::memset(a, 0xA5, a_size);  // the whole buffer is ours to fill (ASan would tell)

  fake_.completed(nullptr, 0, a, a_size, 100);
  fake_.completed(nullptr, 0, b, b_size, 0);  // nothing in it: straight back to the pool
  std::vector<CompletedBuffer> completed = session->TakeCompleted();
  ASSERT_EQ(completed.size(), 1u);
  EXPECT_EQ(completed[0].data, a);
  EXPECT_EQ(completed[0].valid, 100u);
  EXPECT_TRUE(session->TakeCompleted().empty());

  EXPECT_EQ(fake_.Request().first, b);  // the empty one, reused
  session->Recycle(completed);
  EXPECT_EQ(fake_.Request().first, a);  // the converted one, reused
  EXPECT_EQ(session->buffers_refused(), 0u);
}

TEST_F(CuptiSessionTest, RequestsBeyondThePoolAreRefusedAndReportedAsDrops) {
  std::unique_ptr<CuptiSession> session = MustStart(SmallPool(/*max_buffers=*/2));
  ASSERT_NE(session, nullptr);
  EXPECT_NE(fake_.Request().first, nullptr);
  EXPECT_NE(fake_.Request().first, nullptr);
  auto [refused, size] = fake_.Request();
  EXPECT_EQ(refused, nullptr);
  EXPECT_EQ(size, 0u);
  EXPECT_EQ(fake_.Request().first, nullptr);
  EXPECT_EQ(session->buffers_refused(), 2u);

  std::vector<trace::DropRecord> drops = session->TakeDrops();
  ASSERT_EQ(drops.size(), 1u);
  EXPECT_EQ(drops[0].source, "cupti");
  EXPECT_EQ(drops[0].reason, "activity buffer pool exhausted (buffer requests refused)");
  EXPECT_EQ(drops[0].count, 2u);
  EXPECT_EQ(drops[0].device, -1);
  EXPECT_TRUE(session->TakeDrops().empty());  // reported once
  EXPECT_EQ(fake_.Request().first, nullptr);
  drops = session->TakeDrops();
  ASSERT_EQ(drops.size(), 1u);
  EXPECT_EQ(drops[0].count, 1u);  // only the new refusal
}

TEST_F(CuptiSessionTest, RecordsCuptiDroppedAreReportedOnce) {
  std::unique_ptr<CuptiSession> session = MustStart();
  ASSERT_NE(session, nullptr);
  fake_.global_dropped = 7;
  std::vector<trace::DropRecord> drops = session->TakeDrops();
  ASSERT_EQ(drops.size(), 1u);
  EXPECT_EQ(drops[0].source, "cupti");
  EXPECT_EQ(drops[0].reason, "insufficient activity buffer space");
  EXPECT_EQ(drops[0].device, -1);
  EXPECT_EQ(drops[0].context, 0u);
  EXPECT_EQ(drops[0].stream, 0u);
  EXPECT_EQ(drops[0].count, 7u);
  EXPECT_TRUE(session->TakeDrops().empty());
}

TEST_F(CuptiSessionTest, StopKeepsTheDropsCountedUpToIt) {
  // After Stop CUPTI cannot be asked any more: the count since the last TakeDrops must be
  // read on the way out, or the end of a run loses it.
  std::unique_ptr<CuptiSession> session = MustStart();
  ASSERT_NE(session, nullptr);
  fake_.global_dropped = 3;
  session->Stop();
  std::vector<trace::DropRecord> drops = session->TakeDrops();
  ASSERT_EQ(drops.size(), 1u);
  EXPECT_EQ(drops[0].reason, "insufficient activity buffer space");
  EXPECT_EQ(drops[0].count, 3u);
  fake_.global_dropped = 5;  // nobody may ask once unsubscribed
  EXPECT_TRUE(session->TakeDrops().empty());
}

TEST_F(CuptiSessionTest, CompletedBuffersOutliveStop) {
  std::unique_ptr<CuptiSession> session = MustStart();
  ASSERT_NE(session, nullptr);
  auto [buffer, size] = fake_.Request();
  auto [late, late_size] = fake_.Request();
  fake_.completed(nullptr, 0, buffer, size, 64);
  session->Stop();
  fake_.completed(nullptr, 0, late, late_size, 64);  // after Stop: ignored
  std::vector<CompletedBuffer> completed = session->TakeCompleted();
  ASSERT_EQ(completed.size(), 1u);
  EXPECT_EQ(completed[0].data, buffer);
}

TEST_F(CuptiSessionTest, DeviceResetFlushesEverythingFirst) {
  std::unique_ptr<CuptiSession> session = MustStart();
  ASSERT_NE(session, nullptr);
  CallApi(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020, CUPTI_API_ENTER);
  EXPECT_EQ(fake_.flushes, std::vector<uint32_t>{CUPTI_ACTIVITY_FLAG_FLUSH_FORCED});
  CallApi(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020, CUPTI_API_EXIT);
  CallApi(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, CUPTI_API_ENTER);
  EXPECT_EQ(fake_.flushes.size(), 1u);  // only before a reset
  CallApi(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxReset_v2, CUPTI_API_ENTER);
  EXPECT_EQ(fake_.flushes,
            (std::vector<uint32_t>{CUPTI_ACTIVITY_FLAG_FLUSH_FORCED, CUPTI_ACTIVITY_FLAG_FLUSH_FORCED}));

  // A callback for a session that is gone does nothing.
  CUpti_CallbackFunc callback = fake_.callback;
  void* userdata = fake_.userdata;
  session->Stop();
  CUpti_CallbackData data{};
  data.callbackSite = CUPTI_API_ENTER;
  callback(userdata, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020, &data);
  EXPECT_EQ(fake_.flushes.size(), 2u);
}

TEST_F(CuptiSessionTest, DestroyedStreamsReportTheirOwnDrops) {
  std::unique_ptr<CuptiSession> session = MustStart();
  ASSERT_NE(session, nullptr);
  const auto context = reinterpret_cast<CUcontext>(uintptr_t{0x1000});
  const auto stream = reinterpret_cast<CUstream>(uintptr_t{0x2000});
  const auto other_stream = reinterpret_cast<CUstream>(uintptr_t{0x3000});
  fake_.context_ids[context] = 3;
  fake_.device_ids[context] = 1;
  fake_.stream_ids[stream] = 13;
  fake_.stream_ids[other_stream] = 14;
  fake_.stream_dropped[{context, 13}] = 4;

  Resource(CUPTI_CBID_RESOURCE_CONTEXT_CREATED, context, nullptr);
  Resource(CUPTI_CBID_RESOURCE_STREAM_CREATED, context, stream);
  Resource(CUPTI_CBID_RESOURCE_STREAM_CREATED, context, other_stream);
  EXPECT_TRUE(fake_.drop_queries.empty());  // nothing to count at creation

  Resource(CUPTI_CBID_RESOURCE_STREAM_DESTROY_STARTING, context, stream);
  ASSERT_EQ(fake_.drop_queries.size(), 1u);
  EXPECT_EQ(fake_.drop_queries[0], std::make_pair(context, 13u));
  std::vector<trace::DropRecord> drops = session->TakeDrops();
  ASSERT_EQ(drops.size(), 1u);
  EXPECT_EQ(drops[0].source, "cupti");
  EXPECT_EQ(drops[0].reason, "insufficient activity buffer space");
  EXPECT_EQ(drops[0].device, 1);
  EXPECT_EQ(drops[0].context, 3u);
  EXPECT_EQ(drops[0].stream, 13u);
  EXPECT_EQ(drops[0].count, 4u);

  // At the end, only what is still alive is asked: the context and the other stream.
  fake_.drop_queries.clear();
  session->CollectDropsOfLiveStreams();
  std::vector<std::pair<CUcontext, uint32_t>> queries = fake_.drop_queries;
  std::sort(queries.begin(), queries.end());
  EXPECT_EQ(queries, (std::vector<std::pair<CUcontext, uint32_t>>{{context, 0u}, {context, 14u}}));

  // A context going takes its streams with it, and what they dropped is asked first, while
  // their handles are still valid.
  fake_.drop_queries.clear();
  Resource(CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING, context, nullptr);
  queries = fake_.drop_queries;
  std::sort(queries.begin(), queries.end());
  EXPECT_EQ(queries, (std::vector<std::pair<CUcontext, uint32_t>>{{context, 0u}, {context, 14u}}));
  fake_.drop_queries.clear();
  session->CollectDropsOfLiveStreams();
  EXPECT_TRUE(fake_.drop_queries.empty());
}

TEST_F(CuptiSessionTest, LiveStreamDropsCarryTheirStream) {
  std::unique_ptr<CuptiSession> session = MustStart();
  ASSERT_NE(session, nullptr);
  const auto context = reinterpret_cast<CUcontext>(uintptr_t{0x1000});
  const auto stream = reinterpret_cast<CUstream>(uintptr_t{0x2000});
  fake_.context_ids[context] = 2;
  fake_.device_ids[context] = 0;
  fake_.stream_ids[stream] = 21;
  fake_.stream_dropped[{context, 21}] = 9;
  Resource(CUPTI_CBID_RESOURCE_STREAM_CREATED, context, stream);
  session->CollectDropsOfLiveStreams();
  std::vector<trace::DropRecord> drops = session->TakeDrops();
  ASSERT_EQ(drops.size(), 1u);
  EXPECT_EQ(drops[0].device, 0);
  EXPECT_EQ(drops[0].context, 2u);
  EXPECT_EQ(drops[0].stream, 21u);
  EXPECT_EQ(drops[0].count, 9u);
}

TEST_F(CuptiSessionTest, FlushAsksForCompleteOrForcedBuffers) {
  std::unique_ptr<CuptiSession> session = MustStart();
  ASSERT_NE(session, nullptr);
  session->Flush(/*forced=*/false);
  session->Flush(/*forced=*/true);
  EXPECT_EQ(fake_.flushes, (std::vector<uint32_t>{0, CUPTI_ACTIVITY_FLAG_FLUSH_FORCED}));
  session->Stop();
  session->Flush(/*forced=*/true);  // nothing to ask once stopped
  EXPECT_EQ(fake_.flushes.size(), 2u);
}

}  // namespace
}  // namespace rankscope::collector
