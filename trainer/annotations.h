// The trainer's NVTX annotations, domain "rankscope":
//   step       (payload schema "rankscope step": step, samples)
//   forward, backward, optimizer
//   allreduce  one per bucket (payload schema "rankscope allreduce": bucket, bytes)
// plus, on the CPU backend, one range per kernel call in category "compute" and one per
// Gloo collective in category "comm", so the analyzer sees a compute lane and a
// communication lane as it would see CUDA streams. Without an NVTX tool attached every
// call is a cheap no-op.
#pragma once

#include <cstdint>

namespace rankscope::trainer {

enum class RangeCategory : uint32_t { kNone = 0, kCompute = 1, kComm = 2 };

// Creates the domain, names the categories, registers the payload schemas. Call once,
// before any range.
void InitAnnotations();
// Names the calling thread for both the OS and NVTX ("compute", "comm").
void NameThisThread(const char* name);

// The run's shape, once, as a mark "workload" (payload schema "rankscope workload"): the
// analyzer's global batch is world_size · batch · accum (docs/metrics.md §5).
struct Workload {
  uint64_t world_size = 0;
  uint64_t batch = 0;
  uint64_t accum = 0;
  uint64_t steps = 0;
  uint64_t parameters = 0;
};
void MarkWorkload(const Workload& workload);

class ScopedRange {
 public:
  explicit ScopedRange(const char* name, RangeCategory category = RangeCategory::kNone);
  ~ScopedRange();
  ScopedRange(const ScopedRange&) = delete;
  ScopedRange& operator=(const ScopedRange&) = delete;
};

class StepRange {
 public:
  StepRange(uint64_t step, uint64_t samples);
  ~StepRange();
  StepRange(const StepRange&) = delete;
  StepRange& operator=(const StepRange&) = delete;
};

class AllReduceRange {
 public:
  AllReduceRange(uint64_t bucket, uint64_t bytes, RangeCategory category);
  ~AllReduceRange();
  AllReduceRange(const AllReduceRange&) = delete;
  AllReduceRange& operator=(const AllReduceRange&) = delete;
};

}  // namespace rankscope::trainer
