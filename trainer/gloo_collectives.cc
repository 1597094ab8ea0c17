// Collectives on a communication thread over Gloo: the CPU counterpart of a CUDA
// communication stream. Jobs run strictly in submission order. Each collective is a range
// with the "rankscope collective" payload (annotations.h), numbered per communicator in the
// order the rank calls them, whatever the operation: every rank makes the same calls in the
// same order, so the same call gets the same number everywhere. Sends and receives are
// numbered per pair of ranks instead, with the peer in the payload.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "trainer/annotations.h"
#include "trainer/collectives.h"
#include "trainer/gloo_group.h"

namespace rankscope::trainer {
namespace {

class GlooCollectives final : public Collectives {
 public:
  GlooCollectives(std::unique_ptr<GlooGroup> group, SimulatedLink link)
      : group_(std::move(group)),
        communicator_(group_->communicator_id()),
        link_(link),
        thread_([this] { RunJobs(); }) {}

  ~GlooCollectives() override {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }

  int rank() const override { return group_->rank(); }
  int size() const override { return group_->size(); }
  bool averages() const override { return false; }

  Status Broadcast(float* data, size_t count, int root) override {
    Submit([this, data, count, root] {
      CollectiveFields fields = NextCollective(count);
      fields.root = root;
      CollectiveRange range("broadcast", fields, RangeCategory::kComm);
      return Paced(group_->Broadcast(data, count, root), static_cast<double>(count));
    });
    return WaitAll();
  }

  Status StartAllReduce(int bucket, float* data, size_t count) override {
    Submit([this, bucket, data, count] {
      CollectiveFields fields = NextCollective(count);
      fields.bucket = bucket;
      CollectiveRange range("allreduce", fields, RangeCategory::kComm);
      // A ring all-reduce sends 2 (n - 1) / n of the buffer from each rank.
      const double n = size();
      return Paced(group_->AllReduceSum(data, count), 2 * (n - 1) / n * static_cast<double>(count));
    });
    return Status::Ok();
  }

  Status WaitAll() override {
    std::unique_lock lock(mutex_);
    idle_.wait(lock, [this] { return jobs_.empty() && !busy_; });
    Status error = first_error_;
    return error;
  }

  Result<Ticket> StartAllGather(int layer, const float* in, float* out, size_t count) override {
    return Submit([this, layer, in, out, count] {
      CollectiveFields fields = NextCollective(count);
      fields.bucket = layer;
      CollectiveRange range("allgather", fields, RangeCategory::kComm);
      return Paced(group_->AllGather(in, out, count), (size() - 1.0) * static_cast<double>(count));
    });
  }

  Result<Ticket> StartReduceScatter(int layer, float* data, size_t count) override {
    return Submit([this, layer, data, count] {
      // One rank's part, as NCCL's recvcount (and the all-gather's sendcount) gives it.
      CollectiveFields fields = NextCollective(count);
      fields.bucket = layer;
      CollectiveRange range("reducescatter", fields, RangeCategory::kComm);
      return Paced(group_->ReduceScatterSum(data, count), (size() - 1.0) * static_cast<double>(count));
    });
  }

  Status Wait(Ticket ticket) override {
    std::unique_lock lock(mutex_);
    idle_.wait(lock, [this, ticket] { return completed_ > ticket; });
    Status error = first_error_;
    return error;
  }

  // One job on the communication thread, waited for. Messages are numbered per pair of
  // ranks (sends and receives apart), not on the communicator: only the two ranks take
  // part. A send and a receive at once are two nested ranges, "send" around "recv".
  Status SendRecv(const Outgoing& send, const Incoming& recv) override {
    if (send.count == 0 && recv.count == 0) return Status::Ok();
    const Ticket ticket = Submit([this, send, recv] {
      std::optional<CollectiveRange> send_range;
      std::optional<CollectiveRange> recv_range;
      if (send.count > 0) send_range.emplace("send", MessageFields(send.count, send.peer, send.label, sent_to_), RangeCategory::kComm);
      if (recv.count > 0) {
        recv_range.emplace("recv", MessageFields(recv.count, recv.peer, recv.label, received_from_), RangeCategory::kComm);
      }
      return Paced(group_->SendRecv(send.data, send.count, send.peer, recv.data, recv.count, recv.peer),
                   static_cast<double>(std::max(send.count, recv.count)));
    });
    return Wait(ticket);
  }

 private:
  // A message's annotation: its number between this rank and `peer` in `numbers` (sends or
  // receives so far), counted only for a valid peer so that a refused message leaves the
  // numbering as the peer sees it.
  CollectiveFields MessageFields(size_t count, int peer, int label, std::map<int, uint64_t>& numbers) {
    CollectiveFields fields = NextCollective(count, false);
    const bool valid = peer >= 0 && peer < group_->size() && peer != group_->rank();
    fields.sequence = valid ? numbers[peer]++ : 0;
    fields.peer = peer;
    fields.bucket = label;
    return fields;
  }

  Ticket Submit(std::function<Status()> job) {
    Ticket ticket = 0;
    {
      std::lock_guard lock(mutex_);
      ticket = submitted_++;
      jobs_.push_back(std::move(job));
    }
    wake_.notify_one();
    return ticket;
  }

  // The next collective's number (unless `numbered` is false: point to point) and shape;
  // called on the communication thread only.
  CollectiveFields NextCollective(size_t count, bool numbered = true) {
    CollectiveFields fields;
    fields.comm = communicator_;
    if (numbered) fields.sequence = next_sequence_++;
    fields.bytes = count * sizeof(float);
    fields.comm_rank = group_->rank();
    fields.comm_size = group_->size();
    return fields;
  }

  // After a collective's data moved (every rank had arrived), the time `floats` more would
  // take on the simulated link: the collective then lasts as long as on a network link,
  // without using the CPU, so work beside it overlaps it as it would a real transfer.
  Status Paced(Status moved, double floats) const {
    if (!moved.ok() || link_.gbps <= 0) return moved;
    const double seconds = floats * sizeof(float) * 8 / (link_.gbps * 1e9);
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    return moved;
  }

  void RunJobs() {
    NameThisThread("comm");
    std::unique_lock lock(mutex_);
    while (true) {
      wake_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stopping, nothing left
      std::function<Status()> job = std::move(jobs_.front());
      jobs_.pop_front();
      // After a failure the group is unusable; later jobs are dropped, not run.
      const bool skip = !first_error_.ok();
      busy_ = true;
      lock.unlock();
      Status status = skip ? Status::Ok() : job();
      lock.lock();
      busy_ = false;
      ++completed_;
      if (!status.ok() && first_error_.ok()) first_error_ = std::move(status);
      idle_.notify_all();  // WaitAll waits for an empty queue, Wait for one ticket
    }
  }

  std::unique_ptr<GlooGroup> group_;
  const uint64_t communicator_;
  const SimulatedLink link_;
  uint64_t next_sequence_ = 0;  // the communication thread's
  std::map<int, uint64_t> sent_to_;        // messages per peer, the communication thread's
  std::map<int, uint64_t> received_from_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable idle_;
  std::deque<std::function<Status()>> jobs_;
  bool busy_ = false;
  Ticket submitted_ = 0;  // jobs submitted and completed (run or skipped) so far
  Ticket completed_ = 0;
  bool stopping_ = false;
  Status first_error_;
  std::thread thread_;  // last: starts after everything above exists
};

}  // namespace

Result<std::unique_ptr<Collectives>> MakeGlooCollectives(Rendezvous& rendezvous,
                                                         std::chrono::milliseconds timeout,
                                                         std::vector<int> members, SimulatedLink link) {
  RS_ASSIGN_OR_RETURN(std::unique_ptr<GlooGroup> group, GlooGroup::Create(rendezvous, timeout, std::move(members)));
  return std::unique_ptr<Collectives>(std::make_unique<GlooCollectives>(std::move(group), link));
}

#ifndef RANKSCOPE_TRAINER_CUDA
Result<std::unique_ptr<Collectives>> MakeNcclCollectives(Rendezvous&, ComputeDevice&, int,
                                                         std::chrono::milliseconds, std::vector<int>) {
  return Unsupported("this build of rankscope-trainer has no CUDA/NCCL support");
}
#endif

}  // namespace rankscope::trainer
