// The parallel engines' view of the communication backend: DDP's all-reduces that run
// beside the compute and its blocking broadcast of the initial parameters; FSDP's
// all-gathers and reduce-scatters, each waited for on its own; a pipeline's point-to-point
// sends and receives.
//   Gloo (CPU): a communication thread runs the collectives in order, each an NVTX range
//     "allreduce" or "broadcast" in category "comm" on that thread, with the payload
//     "rankscope collective" (communicator, sequence number, bytes, root, bucket, ...).
//   NCCL (GPU): a communication stream, ordered after the compute stream with CUDA events.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

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
  // True when the all-reduce and the reduce-scatter average (NCCL's ncclAvg); false when
  // they sum (Gloo) and the caller divides by size().
  virtual bool averages() const = 0;

  // A started collective, to wait for by itself: FSDP waits for one layer's all-gather
  // while the next layer's runs. Tickets grow in start order and hold until WaitAll.
  using Ticket = uint64_t;
  // Starts gathering every rank's `count` floats of `in` into out[size × count] (rank
  // order) once the compute work enqueued so far is done. `layer` labels its range.
  virtual Result<Ticket> StartAllGather(int layer, const float* in, float* out, size_t count) = 0;
  // Starts reducing data[size × count] block by block: this rank's block (data + rank ×
  // count) gets the sum over ranks (the average where averages()).
  virtual Result<Ticket> StartReduceScatter(int layer, float* data, size_t count) = 0;
  // Waits until `ticket` and every collective started before it are done and their
  // results visible to later compute work; the first error of any of them.
  virtual Status Wait(Ticket ticket) = 0;
  // Point to point, in order with the collectives and the compute: a send reads its data
  // as the compute work enqueued so far left it; after a receive, later compute work sees
  // the data. Messages between two ranks match in the order they are sent. `label` goes
  // into the message's annotation (a pipeline's micro-batch; -1: none).
  struct Outgoing {
    const float* data = nullptr;
    size_t count = 0;  // 0: nothing to send
    int peer = -1;
    int label = -1;
  };
  struct Incoming {
    float* data = nullptr;
    size_t count = 0;  // 0: nothing to receive
    int peer = -1;
    int label = -1;
  };
  // Both halves posted before either is waited for, as torch's batch_isend_irecv: two
  // ranks that send each other at once (a pipeline stage sending activations forward while
  // its next stage sends gradients back) do not deadlock. Returns once the receive is in
  // and the send is out.
  virtual Status SendRecv(const Outgoing& send, const Incoming& recv) = 0;
  Status Send(const float* data, size_t count, int peer) { return SendRecv({data, count, peer, -1}, {}); }
  Status Recv(float* data, size_t count, int peer) { return SendRecv({}, {data, count, peer, -1}); }
};

// A network link the Gloo collectives pretend to cross (--link-gbps): each one, once its
// data moved through memory, lasts as long again as its bytes would take at `gbps` (Gbit/s)
// more, sleeping, as a transfer over a network keeps a GPU job's collectives off its cores.
struct SimulatedLink {
  double gbps = 0;  // 0: no link, only memory
};

// `members`: the world ranks of a group of some ranks (GlooGroup::Create); empty: all.
Result<std::unique_ptr<Collectives>> MakeGlooCollectives(Rendezvous& rendezvous,
                                                         std::chrono::milliseconds timeout,
                                                         std::vector<int> members = {}, SimulatedLink link = {});
// CUDA builds only; otherwise an Unsupported error.
Result<std::unique_ptr<Collectives>> MakeNcclCollectives(Rendezvous& rendezvous, ComputeDevice& device,
                                                         int cuda_device, std::chrono::milliseconds timeout,
                                                         std::vector<int> members = {});

}  // namespace rankscope::trainer
