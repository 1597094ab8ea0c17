// The CUPTI functions the collector calls, as a table of function pointers: the real one
// comes from libcupti, loaded at run time (so the collector loads, and NVTX and NCCL
// recording work, on machines without CUDA); tests pass fakes that fail on purpose or
// capture the callbacks CUPTI would call.
#pragma once

#include <cupti.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "base/status.h"

namespace rankscope::collector {

struct CuptiApi {
  CUptiResult (*GetVersion)(uint32_t* version) = nullptr;
  CUptiResult (*GetResultString)(CUptiResult result, const char** text) = nullptr;
  CUptiResult (*Subscribe_v2)(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback, void* userdata,
                              CUpti_SubscriberParams* params) = nullptr;
  CUptiResult (*Unsubscribe)(CUpti_SubscriberHandle subscriber) = nullptr;
  CUptiResult (*EnableCallback)(uint32_t enable, CUpti_SubscriberHandle subscriber, CUpti_CallbackDomain domain,
                                CUpti_CallbackId cbid) = nullptr;
  CUptiResult (*EnableDomain)(uint32_t enable, CUpti_SubscriberHandle subscriber,
                              CUpti_CallbackDomain domain) = nullptr;
  CUptiResult (*SetThreadIdType)(CUpti_ActivityThreadIdType type) = nullptr;
  CUptiResult (*ActivityRegisterTimestampCallback)(CUpti_TimestampCallbackFunc callback) = nullptr;
  CUptiResult (*ActivityRegisterCallbacks)(CUpti_BuffersCallbackRequestFunc requested,
                                           CUpti_BuffersCallbackCompleteFunc completed) = nullptr;
  CUptiResult (*ActivityEnable)(CUpti_ActivityKind kind) = nullptr;
  CUptiResult (*ActivityDisable)(CUpti_ActivityKind kind) = nullptr;
  CUptiResult (*ActivityEnableDriverApi)(CUpti_CallbackId cbid, uint8_t enable) = nullptr;
  CUptiResult (*ActivityEnableRuntimeApi)(CUpti_CallbackId cbid, uint8_t enable) = nullptr;
  CUptiResult (*ActivityFlushAll)(uint32_t flag) = nullptr;
  CUptiResult (*ActivityFlushPeriod)(uint32_t milliseconds) = nullptr;
  CUptiResult (*ActivityGetNextRecord)(uint8_t* buffer, size_t valid_bytes, CUpti_Activity** record) = nullptr;
  CUptiResult (*ActivityGetNumDroppedRecords)(CUcontext context, uint32_t stream, size_t* dropped) = nullptr;
  CUptiResult (*ActivityPushExternalCorrelationId)(CUpti_ExternalCorrelationKind kind, uint64_t id) = nullptr;
  CUptiResult (*ActivityPopExternalCorrelationId)(CUpti_ExternalCorrelationKind kind, uint64_t* last) = nullptr;
  CUptiResult (*GetCallbackName)(CUpti_CallbackDomain domain, uint32_t cbid, const char** name) = nullptr;
  CUptiResult (*GetContextId)(CUcontext context, uint32_t* id) = nullptr;
  CUptiResult (*GetDeviceId)(CUcontext context, uint32_t* id) = nullptr;
  CUptiResult (*GetStreamIdEx)(CUcontext context, CUstream stream, uint8_t per_thread, uint32_t* id) = nullptr;

  // CUPTI corrupts kernel timestamps when a timestamp callback is registered twice in one
  // process (pytorch/pytorch#192021): the table remembers that it was, for its library.
  std::atomic<bool> timestamp_callback_registered{false};
};

// The external-correlation kind the NVTX handlers push (Kineto uses CUSTOM0 and CUSTOM1).
inline constexpr CUpti_ExternalCorrelationKind kNvtxCorrelationKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2;

// "CUPTI_ERROR_UNKNOWN (999)": the result's name, or its number when the table cannot say.
std::string CuptiResultText(const CuptiApi& api, CUptiResult result);

// The CUPTI major version this collector was built for, and the library's version encoding
// (CUDA 13: 130001 = 13.0 update 1).
inline constexpr uint32_t kCuptiBuiltVersion = CUPTI_API_VERSION;
bool CuptiVersionCompatible(uint32_t library_version);

// Loads libcupti once per process: RANKSCOPE_CUPTI_LIBRARY when set, else libcupti.so.13 on
// the library path, else the toolkit's copy found at build time. Checks that every function
// above exists and that the library's major version matches the headers the records were
// compiled against. The table lives for the whole process.
Result<CuptiApi*> LoadCupti();

}  // namespace rankscope::collector
