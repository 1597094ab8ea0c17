// Collectives on a communication thread over Gloo: the CPU counterpart of a CUDA
// communication stream. Jobs run strictly in submission order. Each collective is a range
// with the "rankscope collective" payload (annotations.h), numbered per communicator in the
// order the rank calls them, whatever the operation: every rank makes the same calls in the
// same order, so the same call gets the same number everywhere. Sends and receives are
// numbered per pair of ranks instead, with the peer in the payload.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "trainer/annotations.h"
#include "trainer/collectives.h"
#include "trainer/gloo_group.h"

namespace rankscope::trainer {
namespace {

class GlooCollectives final : public Collectives {
 public:
  explicit GlooCollectives(std::unique_ptr<GlooGroup> group)
      : group_(std::move(group)), communicator_(group_->communicator_id()), thread_([this] { RunJobs(); }) {}

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
      return group_->Broadcast(data, count, root);
    });
    return WaitAll();
  }

  Status StartAllReduce(int bucket, float* data, size_t count) override {
    Submit([this, bucket, data, count] {
      CollectiveFields fields = NextCollective(count);
      fields.bucket = bucket;
      CollectiveRange range("allreduce", fields, RangeCategory::kComm);
      return group_->AllReduceSum(data, count);
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
      return group_->AllGather(in, out, count);
    });
  }

  Result<Ticket> StartReduceScatter(int layer, float* data, size_t count) override {
    return Submit([this, layer, data, count] {
      // Its message size is the whole input, as nccl-tests and NCCL's profiler count it.
      CollectiveFields fields = NextCollective(count * static_cast<size_t>(group_->size()));
      fields.bucket = layer;
      CollectiveRange range("reducescatter", fields, RangeCategory::kComm);
      return group_->ReduceScatterSum(data, count);
    });
  }

  Status Wait(Ticket ticket) override {
    std::unique_lock lock(mutex_);
    idle_.wait(lock, [this, ticket] { return completed_ > ticket; });
    Status error = first_error_;
    return error;
  }

  Status Send(const float* data, size_t count, int peer) override {
    return PointToPoint("send", sent_to_, count, peer, [this, data, count, peer] { return group_->Send(data, count, peer); });
  }

  Status Recv(float* data, size_t count, int peer) override {
    return PointToPoint("recv", received_from_, count, peer,
                        [this, data, count, peer] { return group_->Recv(data, count, peer); });
  }

 private:
  // One message on the communication thread, waited for. Numbered per pair of ranks in
  // `numbers` (sends or receives), not on the communicator: only the two ranks take part.
  Status PointToPoint(const char* op, std::map<int, uint64_t>& numbers, size_t count, int peer,
                      std::function<Status()> transfer) {
    const Ticket ticket = Submit([this, op, &numbers, count, peer, transfer = std::move(transfer)] {
      CollectiveFields fields = NextCollective(count, false);
      fields.sequence = numbers[peer]++;
      fields.peer = peer;
      CollectiveRange range(op, fields, RangeCategory::kComm);
      return transfer();
    });
    return Wait(ticket);
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
                                                         std::chrono::milliseconds timeout) {
  RS_ASSIGN_OR_RETURN(std::unique_ptr<GlooGroup> group, GlooGroup::Create(rendezvous, timeout));
  return std::unique_ptr<Collectives>(std::make_unique<GlooCollectives>(std::move(group)));
}

#ifndef RANKSCOPE_TRAINER_CUDA
Result<std::unique_ptr<Collectives>> MakeNcclCollectives(Rendezvous&, ComputeDevice&, int,
                                                         std::chrono::milliseconds) {
  return Unsupported("this build of rankscope-trainer has no CUDA/NCCL support");
}
#endif

}  // namespace rankscope::trainer
