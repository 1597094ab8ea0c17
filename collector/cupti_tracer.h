// CUPTI as the recorder's device tracer: a CuptiSession (what CUPTI fills) and a
// CuptiConverter (what the rank file gets), driven from the drain thread.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "base/status.h"
#include "collector/cupti_api.h"
#include "collector/cupti_session.h"
#include "collector/device_tracer.h"

namespace rankscope::collector {

class Recorder;

struct CuptiTracerOptions {
  CuptiOptions session;
  int64_t pid = 0;
  // How often the drain thread asks CUPTI for buffers that are complete but not full, so the
  // file keeps up with the run (and a killed rank loses little).
  std::chrono::milliseconds flush_interval{1000};
};

// Starts CUPTI. On failure nothing stays enabled and the status says why.
Result<std::unique_ptr<DeviceTracer>> StartCuptiTracer(CuptiApi& api, CuptiTracerOptions options);

// The collector's way in, for InitializeInjection and for a library loaded after CUDA
// started: loads libcupti (or uses `api` when given: tests), starts the tracer and attaches
// it to `recorder`. When CUPTI cannot run, records why in meta `cupti.status`, prints one
// line to stderr, and leaves NVTX and NCCL recording as they are. Returns whether CUPTI runs.
bool StartCuptiTracing(Recorder& recorder, CuptiApi* api = nullptr);

}  // namespace rankscope::collector
