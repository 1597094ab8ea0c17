// Internal to collector/: each application thread's recording state, in static TLS, so the
// fast NVTX paths (Recorder::PushPlain, PopPlain), inline in recorder.h, reach it without
// a call.
#pragma once

#include <cstddef>
#include <cstdint>

#include "collector/nvtx_registry.h"
#include "collector/thread_buffer.h"

namespace rankscope::collector {

inline constexpr size_t kDomainSlots = 8;

struct DomainDepth {
  const NvtxDomain* domain;
  uint32_t depth;
};

// A push/pop range whose id this thread pushed on CUPTI's external-correlation stack.
struct CorrelatedRange {
  const NvtxDomain* domain;
  uint32_t depth;  // the range's level + 1, as its push and pop records carry it
  uint64_t id;
};
// Deeper ranges are recorded, but tag no device work of their own.
inline constexpr size_t kMaxCorrelatedRanges = 16;

// Trivial, so access needs no TLS guard (__thread: never dynamically initialized);
// initial-exec keeps it one instruction away (the library is preloaded or linked, so static
// TLS is available).
struct ThreadSlot {
  uint64_t generation;  // the recorder the slot belongs to; another one's slot is stale
  ThreadBuffer* buffer;
  DomainDepth depths[kDomainSlots];
  uint64_t ranges_started;
  uint32_t correlated_count;
  CorrelatedRange correlated[kMaxCorrelatedRanges];
};
extern __thread ThreadSlot tls_slot __attribute__((tls_model("initial-exec")));

// The open-range count of `domain` on this thread.
inline uint32_t& DepthOf(const NvtxDomain* domain) {
  for (DomainDepth& slot : tls_slot.depths) {
    if (slot.domain == domain) return slot.depth;
    if (slot.domain == nullptr) {
      slot.domain = domain;
      slot.depth = 0;
      return slot.depth;
    }
  }
  return tls_slot.depths[kDomainSlots - 1].depth;  // shared by domains beyond the slots
}

}  // namespace rankscope::collector
