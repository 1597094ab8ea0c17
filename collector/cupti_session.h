// One CUPTI activity session per process: subscribes, configures and enables CUPTI, keeps
// the pool of activity buffers CUPTI fills, and hands completed buffers to the drain
// thread. Any failure on the way in undoes what was done and says why, so that the
// collector can record the reason and go on with NVTX and NCCL only.
//
// Threads: CUPTI calls the buffer callbacks on its worker thread and on threads that flush;
// the resource and API callbacks on application threads. Each takes the session's mutex
// only to move a buffer or a handle; no CUPTI call is made while holding it (CUPTI holds
// its own lock around callbacks, which would deadlock against ours).
#pragma once

#include <cupti.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/status.h"
#include "collector/cupti_api.h"
#include "trace/events.h"

namespace rankscope::collector {

struct CuptiOptions {
  // Make CUPTI time with the collector's TSC ticks (registered once per process), so that
  // CUPTI and NVTX records share one clock; otherwise CUPTI's default, CLOCK_REALTIME.
  bool tsc_timestamps = false;
  size_t buffer_bytes = size_t{8} << 20;  // per activity buffer (CUPTI suggests 1-10 MiB)
  size_t max_buffers = 32;                // CUPTI drops records when all are in use
  std::chrono::milliseconds flush_period{500};
};

// An activity buffer CUPTI finished with: `valid` bytes of records.
struct CompletedBuffer {
  uint8_t* data = nullptr;
  size_t valid = 0;
};

struct CuptiStartInfo {
  uint32_t version = 0;
  std::vector<std::string> kinds;         // activity kinds enabled
  std::vector<std::string> kinds_failed;  // optional kinds CUPTI refused, with the reason
};

class CuptiSession {
 public:
  // At most one session runs at a time (CUPTI's buffer callbacks carry no user data).
  static Result<std::unique_ptr<CuptiSession>> Start(CuptiApi& api, CuptiOptions options);
  ~CuptiSession();  // Stop()
  CuptiSession(const CuptiSession&) = delete;
  CuptiSession& operator=(const CuptiSession&) = delete;

  const CuptiApi& api() const { return api_; }
  const CuptiStartInfo& info() const { return info_; }

  // Asks CUPTI for every buffer whose records are complete; `forced` also for incomplete
  // ones (exit, device reset). The buffers arrive through TakeCompleted.
  void Flush(bool forced);
  std::vector<CompletedBuffer> TakeCompleted();
  // Returns converted buffers to the pool.
  void Recycle(const std::vector<CompletedBuffer>& buffers);

  // Records CUPTI dropped since the last call (globally, and per context and stream as
  // streams and contexts go away), plus buffer requests the pool refused.
  std::vector<trace::DropRecord> TakeDrops();
  // Per-context and per-stream counts of every context and stream still alive: only where
  // nothing can destroy them concurrently (the exit flush).
  void CollectDropsOfLiveStreams();
  uint64_t buffers_refused() const;

  // NVTX correlation, on the calling thread: the range id tags the CUDA API calls made
  // until the matching pop.
  void PushCorrelation(uint64_t range_id) const;
  void PopCorrelation() const;

  // Disables every kind and unsubscribes; later callbacks are ignored. Idempotent. Buffers
  // already completed stay available to TakeCompleted.
  void Stop();

 private:
  struct Stream {
    CUcontext context = nullptr;
    CUstream stream = nullptr;  // nullptr: the context as a whole
    uint32_t device = 0, context_id = 0, stream_id = 0;
  };

  CuptiSession(CuptiApi& api, CuptiOptions options);
  Status Configure();
  void Undo();
  void OnResource(CUpti_CallbackId cbid, const CUpti_ResourceData* data);
  void AddDrops(const Stream& stream, size_t dropped);

  static void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records);
  static void CUPTIAPI BufferCompleted(CUcontext context, uint32_t stream, uint8_t* buffer, size_t size,
                                       size_t valid);
  static void CUPTIAPI OnCallback(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                  const void* data);

  CuptiApi& api_;
  const CuptiOptions options_;
  CuptiStartInfo info_;
  CUpti_SubscriberHandle subscriber_ = nullptr;
  std::vector<CUpti_ActivityKind> enabled_;
  bool stopped_ = false;

  mutable std::mutex mutex_;  // guards everything below
  std::vector<uint8_t*> free_;
  size_t allocated_ = 0;
  uint64_t refused_ = 0, reported_refused_ = 0;
  std::vector<CompletedBuffer> completed_;
  std::vector<uint8_t*> owned_;  // every buffer ever allocated, freed with the session
  std::vector<Stream> streams_;  // alive contexts and streams
  std::vector<trace::DropRecord> drops_;
};

}  // namespace rankscope::collector
