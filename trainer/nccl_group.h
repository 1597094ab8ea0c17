// GPU collectives over NCCL (CUDA builds only). The unique id travels through the
// rendezvous store. Operations are enqueued on a caller's stream; Synchronize waits for a
// stream while polling ncclCommGetAsyncError, and aborts the communicator on an error or
// a timeout, so a dead peer never hangs the job.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>

#include <cuda_runtime_api.h>

#include "base/status.h"
#include "trainer/rendezvous.h"

namespace rankscope::trainer {

class NcclGroup {
 public:
  // cudaSetDevice(device) must already have been called by this thread.
  static Result<std::unique_ptr<NcclGroup>> Create(Rendezvous& rendezvous, int device,
                                                   std::chrono::milliseconds timeout);
  ~NcclGroup();

  // In-place average over all ranks (ncclAvg), enqueued on `stream`.
  Status AllReduceAverage(float* device_data, size_t count, cudaStream_t stream);
  Status Broadcast(float* device_data, size_t count, int root, cudaStream_t stream);
  // Waits for `stream`; on an asynchronous NCCL error or after the timeout, aborts the
  // communicator and returns the error.
  Status Synchronize(cudaStream_t stream);

 private:
  struct State;
  explicit NcclGroup(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace rankscope::trainer
