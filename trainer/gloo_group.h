// CPU collectives over Gloo's TCP transport. One GlooGroup is used by one thread at a time
// (the DDP engine's communication thread); every error names the operation and, when it
// can be found out, the rank that failed.
//
// Gloo contexts are not thread-safe: a call made while another thread is inside one of
// this group's calls fails at once with an internal error. Every rank must make the same
// calls in the same order with the same counts (a count of 0 is skipped on every rank).
// After the first failure the group is closed for good; later calls return that failure.
// A dead peer is found out at once when its connections close and named through
// Rendezvous::MissingRanks after a grace of up to 2.5 s ("all-reduce failed: rank 1 is
// gone (...)"); a hung peer after `timeout` ("all-reduce timed out after 30s: rank 1 did
// not respond (...)"). Create sets SIGPIPE to "ignore" if the program left it at the
// default, so that writing to a dead peer fails instead of killing this process.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "base/status.h"
#include "trainer/rendezvous.h"

namespace rankscope::trainer {

class GlooGroup {
 public:
  // Connects a full mesh among all ranks through the rendezvous store. Collectives time
  // out after `timeout` (a rank that hangs), and fail at once when a peer's connection
  // closes (a rank that died).
  // `members`: the world ranks of a smaller group (ascending, this rank among them; its rank
  // in the group is its index there), made by exactly those ranks at the same point of
  // their group-making order (a pipeline stage's data-parallel replicas); empty: all ranks.
  static Result<std::unique_ptr<GlooGroup>> Create(Rendezvous& rendezvous,
                                                   std::chrono::milliseconds timeout,
                                                   std::vector<int> members = {});
  ~GlooGroup();

  int rank() const;
  int size() const;
  // The same on every rank of this group and different for each group of a run: FNV-1a 64
  // of "<namespace>/<size>", the group's key namespace in the rendezvous store (e.g.
  // "gloo-0/4"; every rank creates its groups in the same order, so they share it). A group
  // of some ranks has their world ranks in its namespace: "gloo-1-r1-3/2".
  uint64_t communicator_id() const;
  // In-place sum over all ranks (ring all-reduce: a fixed order of additions, so every rank
  // gets the same bits, run after run).
  Status AllReduceSum(float* data, size_t count);
  Status Broadcast(float* data, size_t count, int root);
  // Every rank's `count` floats of `in`, in rank order, into out[size × count] (a ring).
  Status AllGather(const float* in, float* out, size_t count);
  // data[size × count]: block r (data + r × count) of every rank, summed, lands in this
  // rank's block r = rank() (a ring: each block summed in one fixed order, so the same bits
  // run after run). The other blocks are left holding partial sums.
  Status ReduceScatterSum(float* data, size_t count);
  // Point to point, blocking until the message is out or in. Messages between two ranks
  // match in the order they are sent; other ranks take no part (pipeline stages).
  Status Send(const float* data, size_t count, int peer);
  Status Recv(float* data, size_t count, int peer);
  // A send and a receive at once, both posted before either is waited for (a pipeline
  // stage sending its activations forward while receiving gradients back): two ranks that
  // send each other at the same time do not deadlock, as two blocking sends would (gloo
  // sends only once the receiver is ready). A count of 0 skips that half.
  Status SendRecv(const float* send_data, size_t send_count, int send_peer, float* recv_data, size_t recv_count,
                  int recv_peer);
  Status Barrier();

 private:
  struct State;
  explicit GlooGroup(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace rankscope::trainer
