// Collectives on a communication thread over Gloo: the CPU counterpart of a CUDA
// communication stream. Jobs run strictly in submission order. Each collective is a range
// with the "rankscope collective" payload (annotations.h), numbered per communicator in the
// order the rank calls them, broadcasts and all-reduces alike: every rank makes the same
// calls in the same order, so the same call gets the same number everywhere.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
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

 private:
  void Submit(std::function<Status()> job) {
    {
      std::lock_guard lock(mutex_);
      jobs_.push_back(std::move(job));
    }
    wake_.notify_one();
  }

  // The next collective's number and shape; called on the communication thread only.
  CollectiveFields NextCollective(size_t count) {
    CollectiveFields fields;
    fields.comm = communicator_;
    fields.sequence = next_sequence_++;
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
      if (!status.ok() && first_error_.ok()) first_error_ = std::move(status);
      if (jobs_.empty()) idle_.notify_all();
    }
  }

  std::unique_ptr<GlooGroup> group_;
  const uint64_t communicator_;
  uint64_t next_sequence_ = 0;  // the communication thread's
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable idle_;
  std::deque<std::function<Status()>> jobs_;
  bool busy_ = false;
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
