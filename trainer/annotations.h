// The trainer's NVTX annotations, domain "rankscope":
//   step       (payload schema "rankscope step": step, samples)
//   forward, backward, optimizer
//   allreduce  one per bucket, NCCL backend (payload schema "rankscope allreduce": bucket,
//              bytes; NCCL's profiler plugin reports the collective itself)
//   allreduce, broadcast  one per Gloo collective, CPU backend (payload schema "rankscope
//              collective", see CollectiveFields: the collector's flight recorder learns
//              from it which collective a rank waits in)
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
// analyzer's global batch is world_size / stages · batch · accum · micro_batches
// (docs/metrics.md §5).
struct Workload {
  uint64_t world_size = 0;
  uint64_t batch = 0;
  uint64_t accum = 0;
  uint64_t steps = 0;
  uint64_t parameters = 0;  // this rank's: a pipeline stage's layers, else the whole model's
  uint64_t parallel = 0;    // 0 ddp, 1 fsdp, 2 pipeline (Parallelism)
  uint64_t stages = 1;      // pipeline stages (1 otherwise); world_size / stages replicas
  uint64_t micro_batches = 1;  // a pipeline's per step (1 otherwise)
};
void MarkWorkload(const Workload& workload);

// A memory counter's new value: a mark named `name` ("memory: parameters", ...; it must be
// a string literal) with the payload schema "rankscope memory" (bytes: UINT64), the bytes
// the category holds from now on (trainer/README.md).
void MarkMemory(const char* name, uint64_t bytes);

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

// The payload of schema "rankscope collective", field by field in this order (names and
// types are a convention the collector reads; trainer/README.md). Every rank of a
// communicator gives the same comm and, for the same call, the same sequence.
struct CollectiveFields {
  uint64_t comm = 0;       // communicator id: equal on its ranks, different per communicator
  uint64_t sequence = 0;   // 0 for the communicator's first collective, +1 for each later one
  uint64_t bytes = 0;      // message size
  int64_t root = -1;       // broadcast/reduce root, else -1
  int64_t peer = -1;       // send/recv peer, else -1
  int64_t comm_rank = 0;   // this rank's index in the communicator
  int64_t comm_size = 0;   // ranks in the communicator
  int64_t bucket = -1;     // the DDP bucket, else -1
};

// A pipeline stage's forward or backward pass of one micro-batch: the payload of schema
// "rankscope micro-batch" on its "forward" / "backward" range (trainer/README.md).
struct MicroBatchFields {
  uint64_t stage = 0;          // this rank's pipeline stage, 0 = the first
  uint64_t stages = 0;         // stages in the pipeline
  uint64_t micro_batch = 0;    // within the step, 0 = the first
  uint64_t micro_batches = 0;  // per step
};

// "forward" or "backward" (`name`, which must outlive the push): with the micro-batch
// payload when `fields` is given (a pipeline), a plain range otherwise.
class PassRange {
 public:
  PassRange(const char* name, const MicroBatchFields* fields);
  ~PassRange();
  PassRange(const PassRange&) = delete;
  PassRange& operator=(const PassRange&) = delete;
};

// A collective from the moment the rank enters it until it returns; `op` names it
// ("allreduce", "broadcast") and must outlive the range's push.
class CollectiveRange {
 public:
  CollectiveRange(const char* op, const CollectiveFields& fields, RangeCategory category);
  ~CollectiveRange();
  CollectiveRange(const CollectiveRange&) = delete;
  CollectiveRange& operator=(const CollectiveRange&) = delete;
};

}  // namespace rankscope::trainer
