#include "collector/cupti_session.h"

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "collector/no_throw.h"

namespace rankscope::collector {
namespace {

std::atomic<CuptiSession*> g_active{nullptr};

#if defined(__x86_64__)
uint64_t CUPTIAPI TscTimestamp() { return __rdtsc(); }
#endif

struct KindSpec {
  CUpti_ActivityKind kind;
  const char* name;
  bool required;  // without it, CUPTI counts as unavailable
};

// CONCURRENT_KERNEL first: it is the one that needs a working driver, so its failure means
// "no CUPTI here" before anything else was turned on.
constexpr KindSpec kKinds[] = {
    {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "concurrent_kernel", true},
    {CUPTI_ACTIVITY_KIND_MEMCPY, "memcpy", false},
    {CUPTI_ACTIVITY_KIND_MEMCPY2, "memcpy2", false},
    {CUPTI_ACTIVITY_KIND_MEMSET, "memset", false},
    {CUPTI_ACTIVITY_KIND_MEMORY2, "memory2", false},
    {CUPTI_ACTIVITY_KIND_RUNTIME, "runtime", false},
    {CUPTI_ACTIVITY_KIND_DRIVER, "driver", false},
    {CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, "synchronization", false},
    {CUPTI_ACTIVITY_KIND_OVERHEAD, "overhead", false},
    {CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, "external_correlation", false},
};

// API calls made so often that recording them costs more than they tell (Kineto's list).
constexpr CUpti_CallbackId kQuietRuntimeCalls[] = {CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020};
constexpr CUpti_CallbackId kQuietDriverCalls[] = {CUPTI_DRIVER_TRACE_CBID_cuKernelGetAttribute,
                                                  CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxGetState,
                                                  CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent};

}  // namespace

Result<std::unique_ptr<CuptiSession>> CuptiSession::Start(CuptiApi& api, CuptiOptions options) {
  CuptiSession* expected = nullptr;
  auto session = std::unique_ptr<CuptiSession>(new CuptiSession(api, options));
  if (!g_active.compare_exchange_strong(expected, session.get())) {
    return Unavailable("a CUPTI session of this collector is already running");
  }
  if (Status configured = session->Configure(); !configured.ok()) {
    session->Undo();
    g_active.store(nullptr);
    session->stopped_ = true;
    return configured;
  }
  return session;
}

CuptiSession::CuptiSession(CuptiApi& api, CuptiOptions options) : api_(api), options_(options) {
  // A buffer is in at most one of these lists at a time: reserved here, CUPTI's callbacks
  // never allocate (an allocation failure there could not be reported).
  owned_.reserve(options_.max_buffers);
  free_.reserve(options_.max_buffers);
  completed_.reserve(options_.max_buffers);
}

CuptiSession::~CuptiSession() {
  Stop();
  for (uint8_t* buffer : owned_) std::free(buffer);
}

Status CuptiSession::Configure() {
  api_.GetVersion(&info_.version);
  char other[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN * 2] = {};
  CUpti_SubscriberParams params{};
  params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
  params.subscriberName = "rankscope";
  params.oldSubscriberName = other;
  params.oldSubscriberSize = sizeof(other);
  const CUptiResult subscribed =
      api_.Subscribe_v2(&subscriber_, &NoThrow<&CuptiSession::OnCallback>::Call, this, &params);
  if (subscribed != CUPTI_SUCCESS) {
    subscriber_ = nullptr;
    if (subscribed == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
      other[sizeof(other) - 1] = '\0';
      return Unavailable(fmt::format(
          "another CUPTI client is attached ({}): Nsight Systems, Nsight Compute, torch.profiler and cuda-gdb "
          "each take CUPTI's only subscriber slot",
          other[0] != '\0' ? std::string("'") + other + "'" : "it did not give its name"));
    }
    return Unavailable(fmt::format("cuptiSubscribe_v2 failed: {}{}", CuptiResultText(api_, subscribed),
                                   subscribed == CUPTI_ERROR_UNKNOWN ? " (no usable CUDA driver?)" : ""));
  }
  // Thread ids as the kernel knows them (gettid), so API calls land on the NVTX lanes.
  if (CUptiResult r = api_.SetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM); r != CUPTI_SUCCESS) {
    return Unavailable(fmt::format("cuptiSetThreadIdType failed: {}", CuptiResultText(api_, r)));
  }
#if defined(__x86_64__)
  // Must precede enabling any kind, and must never be repeated in this process.
  if (options_.tsc_timestamps && !api_.timestamp_callback_registered.exchange(true)) {
    if (CUptiResult r = api_.ActivityRegisterTimestampCallback(&TscTimestamp); r != CUPTI_SUCCESS) {
      return Unavailable(fmt::format("cuptiActivityRegisterTimestampCallback failed: {}", CuptiResultText(api_, r)));
    }
  }
#endif
  if (CUptiResult r = api_.ActivityRegisterCallbacks(&NoThrow<&BufferRequested>::Call,
                                                        &NoThrow<&BufferCompleted>::Call); r != CUPTI_SUCCESS) {
    return Unavailable(fmt::format("cuptiActivityRegisterCallbacks failed: {}", CuptiResultText(api_, r)));
  }
  for (const KindSpec& spec : kKinds) {
    const CUptiResult r = api_.ActivityEnable(spec.kind);
    if (r == CUPTI_SUCCESS) {
      enabled_.push_back(spec.kind);
      info_.kinds.push_back(spec.name);
    } else if (spec.required) {
      return Unavailable(fmt::format("cuptiActivityEnable({}) failed: {}{}", spec.name, CuptiResultText(api_, r),
                                     r == CUPTI_ERROR_UNKNOWN ? " (no usable CUDA driver?)" : ""));
    } else {
      info_.kinds_failed.push_back(fmt::format("{}: {}", spec.name, CuptiResultText(api_, r)));
    }
  }
  const auto enabled = [&](CUpti_ActivityKind kind) {
    return std::find(enabled_.begin(), enabled_.end(), kind) != enabled_.end();
  };
  if (enabled(CUPTI_ACTIVITY_KIND_RUNTIME)) {
    for (CUpti_CallbackId cbid : kQuietRuntimeCalls) api_.ActivityEnableRuntimeApi(cbid, 0);
  }
  if (enabled(CUPTI_ACTIVITY_KIND_DRIVER)) {
    for (CUpti_CallbackId cbid : kQuietDriverCalls) api_.ActivityEnableDriverApi(cbid, 0);
  }
  // Flush before a device reset frees what the records describe; track contexts and streams
  // for per-stream drop counts. Neither is essential: failures leave tracing on.
  api_.EnableCallback(1, subscriber_, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020);
  api_.EnableCallback(1, subscriber_, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxReset_v2);
  api_.EnableDomain(1, subscriber_, CUPTI_CB_DOMAIN_RESOURCE);
  api_.ActivityFlushPeriod(static_cast<uint32_t>(options_.flush_period.count()));
  return Status::Ok();
}

void CuptiSession::Undo() {
  for (auto it = enabled_.rbegin(); it != enabled_.rend(); ++it) api_.ActivityDisable(*it);
  enabled_.clear();
  if (subscriber_ != nullptr) api_.Unsubscribe(subscriber_);
  subscriber_ = nullptr;
}

void CuptiSession::Stop() {
  if (stopped_) return;
  // The last chance to ask CUPTI what it dropped since the last TakeDrops: once stopped,
  // TakeDrops no longer asks, and the end of a run (the final flush) would lose the count.
  size_t dropped = 0;
  if (api_.ActivityGetNumDroppedRecords(nullptr, 0, &dropped) == CUPTI_SUCCESS && dropped > 0) {
    AddDrops(Stream{}, dropped);
  }
  stopped_ = true;
  Undo();
  CuptiSession* self = this;
  g_active.compare_exchange_strong(self, nullptr);
}

void CuptiSession::Flush(bool forced) {
  if (stopped_) return;
  api_.ActivityFlushAll(forced ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
}

std::vector<CompletedBuffer> CuptiSession::TakeCompleted() {
  std::vector<CompletedBuffer> taken;
  taken.reserve(options_.max_buffers);  // becomes completed_: CUPTI's callback must not allocate
  std::lock_guard lock(mutex_);
  std::swap(taken, completed_);
  return taken;
}

void CuptiSession::Recycle(const std::vector<CompletedBuffer>& buffers) {
  std::lock_guard lock(mutex_);
  for (const CompletedBuffer& buffer : buffers) free_.push_back(buffer.data);
}

std::vector<trace::DropRecord> CuptiSession::TakeDrops() {
  size_t dropped = 0;
  if (!stopped_ && api_.ActivityGetNumDroppedRecords(nullptr, 0, &dropped) == CUPTI_SUCCESS && dropped > 0) {
    AddDrops(Stream{}, dropped);
  }
  std::lock_guard lock(mutex_);
  if (refused_ > reported_refused_) {
    drops_.push_back({"cupti", "activity buffer pool exhausted (buffer requests refused)", -1, 0, 0,
                      refused_ - reported_refused_});
    reported_refused_ = refused_;
  }
  return std::exchange(drops_, {});
}

void CuptiSession::CollectDropsOfLiveStreams() {
  if (stopped_) return;
  std::vector<Stream> streams;
  {
    std::lock_guard lock(mutex_);
    streams = streams_;
  }
  for (const Stream& stream : streams) {
    size_t dropped = 0;
    if (api_.ActivityGetNumDroppedRecords(stream.context, stream.stream_id, &dropped) == CUPTI_SUCCESS && dropped > 0) {
      AddDrops(stream, dropped);
    }
  }
}

uint64_t CuptiSession::buffers_refused() const {
  std::lock_guard lock(mutex_);
  return refused_;
}

void CuptiSession::AddDrops(const Stream& stream, size_t dropped) {
  trace::DropRecord drop{"cupti", "insufficient activity buffer space",
                         stream.context == nullptr ? -1 : static_cast<int32_t>(stream.device), stream.context_id,
                         stream.stream_id, dropped};
  std::lock_guard lock(mutex_);
  drops_.push_back(drop);
}

void CuptiSession::PushCorrelation(uint64_t range_id) const {
  api_.ActivityPushExternalCorrelationId(kNvtxCorrelationKind, range_id);
}

void CuptiSession::PopCorrelation() const {
  uint64_t last = 0;
  api_.ActivityPopExternalCorrelationId(kNvtxCorrelationKind, &last);
}

void CuptiSession::OnResource(CUpti_CallbackId cbid, const CUpti_ResourceData* data) {
  if (data == nullptr) return;
  Stream stream;
  stream.context = data->context;
  if (cbid == CUPTI_CBID_RESOURCE_STREAM_CREATED || cbid == CUPTI_CBID_RESOURCE_STREAM_DESTROY_STARTING) {
    stream.stream = data->resourceHandle.stream;
    api_.GetStreamIdEx(stream.context, stream.stream, 0, &stream.stream_id);
  } else if (cbid != CUPTI_CBID_RESOURCE_CONTEXT_CREATED && cbid != CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING) {
    return;
  }
  api_.GetContextId(stream.context, &stream.context_id);
  api_.GetDeviceId(stream.context, &stream.device);
  const bool created = cbid == CUPTI_CBID_RESOURCE_STREAM_CREATED || cbid == CUPTI_CBID_RESOURCE_CONTEXT_CREATED;
  const bool whole_context = cbid == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING;
  if (!created) {
    // The handles are still valid here and nowhere after: count what this stream, or this
    // context and the streams still tracked in it, lost now.
    std::vector<Stream> going = {stream};
    if (whole_context) {
      std::lock_guard lock(mutex_);
      for (const Stream& known : streams_) {
        if (known.context == stream.context && known.stream != nullptr) going.push_back(known);
      }
    }
    for (const Stream& gone : going) {
      size_t dropped = 0;
      if (api_.ActivityGetNumDroppedRecords(gone.context, gone.stream_id, &dropped) == CUPTI_SUCCESS && dropped > 0) {
        AddDrops(gone, dropped);
      }
    }
  }
  std::lock_guard lock(mutex_);
  if (created) {
    streams_.push_back(stream);
    return;
  }
  std::erase_if(streams_, [&](const Stream& known) {
    return known.context == stream.context && (whole_context || known.stream == stream.stream);
  });
}

void CUPTIAPI CuptiSession::BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = nullptr;
  *size = 0;
  *max_records = 0;  // as many as fit
  CuptiSession* session = g_active.load();
  if (session == nullptr) return;
  std::lock_guard lock(session->mutex_);
  if (!session->free_.empty()) {
    *buffer = session->free_.back();
    session->free_.pop_back();
  } else if (session->allocated_ < session->options_.max_buffers) {
    // CUPTI requires 8-byte alignment; buffer_bytes is a multiple of 8.
    *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, session->options_.buffer_bytes));
    if (*buffer != nullptr) {
      ++session->allocated_;
      session->owned_.push_back(*buffer);
    }
  }
  if (*buffer == nullptr) {
    ++session->refused_;  // CUPTI drops records and counts them (cuptiActivityGetNumDroppedRecords)
    return;
  }
  *size = session->options_.buffer_bytes;
}

void CUPTIAPI CuptiSession::BufferCompleted(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  if (buffer == nullptr) return;
  CuptiSession* session = g_active.load();
  if (session == nullptr) return;  // a buffer of a session already gone: its memory was ours
  std::lock_guard lock(session->mutex_);
  if (valid == 0) {
    session->free_.push_back(buffer);
  } else {
    session->completed_.push_back({buffer, valid});
  }
}

void CUPTIAPI CuptiSession::OnCallback(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                       const void* data) {
  auto* session = static_cast<CuptiSession*>(userdata);
  if (session == nullptr || session != g_active.load()) return;
  if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
    session->OnResource(cbid, static_cast<const CUpti_ResourceData*>(data));
    return;
  }
  const auto* call = static_cast<const CUpti_CallbackData*>(data);
  const bool resets = (domain == CUPTI_CB_DOMAIN_RUNTIME_API && cbid == CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020) ||
                      (domain == CUPTI_CB_DOMAIN_DRIVER_API &&
                       cbid == CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxReset_v2);
  if (resets && call != nullptr && call->callbackSite == CUPTI_API_ENTER) {
    // Records of the device's work must leave CUPTI before the reset frees its context.
    session->api_.ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  }
}

}  // namespace rankscope::collector
