// What a language hook (the PyTorch hook that `rankscope profile --pytorch` injects) hands
// the collector through the exported `rankscope_hook_*` functions (collector/README.md,
// "Language hooks"): finished ranges and collectives, timed by the hook itself on the
// CLOCK_REALTIME nanoseconds that rank files use. Fixed-size bodies of thread-buffer
// records (record_codec.h); their text is the strings listed with each.
#pragma once

#include <cstdint>

#include "trace/events.h"

namespace rankscope::collector {

// The hook ABI's version; `rankscope_hook_version` returns it and a hook refuses others.
inline constexpr int kHookAbiVersion = 1;

// The NVTX domain hook ranges are recorded in, and its two named categories: what the
// analyzer classifies as compute and comm (docs/metrics.md §1, rule 2).
inline constexpr const char* kHookDomainName = "pytorch";
enum class HookRole : uint32_t { kAnnotation = 0, kCompute = 1, kComm = 2 };

// A finished range on the calling thread. Text: the name, then `args` JSON (may be empty).
struct HookRangeBody {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint32_t name_size = 0;
  HookRole role = HookRole::kAnnotation;
};

// A finished collective: a `collectives` row on its communicator's lane, and a comm range
// on the calling thread (the thread that completed it). Text: the name, the communicator's
// name, then `args` JSON for the range (may be empty).
struct HookCollectiveBody {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint64_t comm_hash = 0;
  uint64_t sequence = 0;
  uint64_t bytes = 0;
  int32_t root = -1;
  int32_t peer = -1;
  int32_t comm_rank = -1;
  int32_t comm_size = 0;
  trace::CollectiveOp op = trace::CollectiveOp::kUnknown;
  trace::ReduceOp reduce_op = trace::ReduceOp::kNone;
  trace::DataType datatype = trace::DataType::kUnknown;
  uint8_t padding = 0;
  uint32_t name_size = 0;
  uint32_t comm_name_size = 0;
};

}  // namespace rankscope::collector
