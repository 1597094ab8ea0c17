// GPU collectives over NCCL (CUDA builds only). The unique id travels through the
// rendezvous store. Operations are enqueued on a caller's stream; Synchronize waits for a
// stream while polling ncclCommGetAsyncError, and aborts the communicator on an error or
// a timeout, so a dead peer never hangs the job.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <vector>

#include <cuda_runtime_api.h>

#include "base/status.h"
#include "trainer/rendezvous.h"

namespace rankscope::trainer {

class NcclGroup {
 public:
  // cudaSetDevice(device) must already have been called by this thread.
  // `members`: a group of some ranks, as GlooGroup::Create takes it; empty: all ranks.
  static Result<std::unique_ptr<NcclGroup>> Create(Rendezvous& rendezvous, int device,
                                                   std::chrono::milliseconds timeout,
                                                   std::vector<int> members = {});
  ~NcclGroup();

  // In-place average over all ranks (ncclAvg), enqueued on `stream`.
  Status AllReduceAverage(float* device_data, size_t count, cudaStream_t stream);
  Status Broadcast(float* device_data, size_t count, int root, cudaStream_t stream);
  // Every rank's `count` floats into out[size × count], in rank order (ncclAllGather).
  Status AllGather(const float* device_in, float* device_out, size_t count, cudaStream_t stream);
  // data[size × count]: block r averaged over the ranks into this rank's block r = rank
  // (ncclReduceScatter with ncclAvg, in place).
  Status ReduceScatterAverage(float* device_data, size_t count, cudaStream_t stream);
  // Point to point (ncclSend / ncclRecv); matched in order between two ranks.
  Status Send(const float* device_data, size_t count, int peer, cudaStream_t stream);
  Status Recv(float* device_data, size_t count, int peer, cudaStream_t stream);
  // Both in one NCCL group call, so that two ranks sending each other do not deadlock; a
  // count of 0 skips that half.
  Status SendRecv(const float* send_data, size_t send_count, int send_peer, float* recv_data, size_t recv_count,
                  int recv_peer, cudaStream_t stream);
  // Waits for `stream`; on an asynchronous NCCL error or after the timeout, aborts the
  // communicator and returns the error.
  Status Synchronize(cudaStream_t stream);

 private:
  struct State;
  explicit NcclGroup(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace rankscope::trainer
