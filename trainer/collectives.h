// The DDP engine's view of the communication backend: all-reduces that run beside the
// compute, and a blocking broadcast for the initial parameters.
//   Gloo (CPU): a communication thread runs the collectives in order, each an NVTX range
//     "allreduce" or "broadcast" in category "comm" on that thread, with the payload
//     "rankscope collective" (communicator, sequence number, bytes, root, bucket, ...).
//   NCCL (GPU): a communication stream, ordered after the compute stream with CUDA events.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>

#include "base/status.h"
#include "trainer/device.h"
#include "trainer/rendezvous.h"

namespace rankscope::trainer {

class Collectives {
 public:
  virtual ~Collectives() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Blocking: data (device memory) equals root's everywhere on return.
  virtual Status Broadcast(float* data, size_t count, int root) = 0;
  // Starts an in-place all-reduce of bucket `bucket` once the compute work enqueued so far
  // (which produced `data`) is done. Returns without waiting for it.
  virtual Status StartAllReduce(int bucket, float* data, size_t count) = 0;
  // Waits until every started all-reduce is done and visible to later compute work. The
  // first error of any of them is returned (and later ones are skipped).
  virtual Status WaitAll() = 0;
  // True when the all-reduce averages (NCCL's ncclAvg); false when it sums (Gloo) and the
  // caller divides by size().
  virtual bool averages() const = 0;
};

Result<std::unique_ptr<Collectives>> MakeGlooCollectives(Rendezvous& rendezvous,
                                                         std::chrono::milliseconds timeout);
// CUDA builds only; otherwise an Unsupported error.
Result<std::unique_ptr<Collectives>> MakeNcclCollectives(Rendezvous& rendezvous, ComputeDevice& device,
                                                         int cuda_device, std::chrono::milliseconds timeout);

}  // namespace rankscope::trainer
