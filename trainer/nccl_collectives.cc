// Collectives on a CUDA communication stream over NCCL (CUDA builds only). A bucket's
// all-reduce waits for the compute stream with an event, runs on the communication stream,
// and the compute stream waits for it in turn before the gradients are used.
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <optional>
#include <vector>

#include "trainer/annotations.h"
#include "trainer/collectives.h"
#include "trainer/comm_util.h"
#include "trainer/nccl_group.h"

namespace rankscope::trainer {
namespace {

Status CudaStatus(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return Status::Ok();
  return Unavailable(fmt::format("{}: {}", what, cudaGetErrorString(error)));
}

class NcclCollectives final : public Collectives {
 public:
  NcclCollectives(std::unique_ptr<NcclGroup> group, ComputeDevice& device, int rank, int size)
      : group_(std::move(group)), device_(&device), rank_(rank), size_(size) {}

  ~NcclCollectives() override {
    if (comm_stream_ != nullptr) cudaStreamSynchronize(comm_stream_);
    for (cudaEvent_t event : ready_events_) cudaEventDestroy(event);
    for (cudaEvent_t event : event_pool_) cudaEventDestroy(event);
    if (done_event_ != nullptr) cudaEventDestroy(done_event_);
    if (comm_stream_ != nullptr) cudaStreamDestroy(comm_stream_);
  }

  Status Init() {
    RS_RETURN_IF_ERROR(CudaStatus(cudaStreamCreateWithFlags(&comm_stream_, cudaStreamNonBlocking), "cudaStreamCreate"));
    return CudaStatus(cudaEventCreateWithFlags(&done_event_, cudaEventDisableTiming), "cudaEventCreate");
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  bool averages() const override { return true; }

  Status Broadcast(float* data, size_t count, int root) override {
    RS_RETURN_IF_ERROR(group_->Broadcast(data, count, root, compute()));
    return group_->Synchronize(compute());
  }

  Status StartAllReduce(int bucket, float* data, size_t count) override {
    if (launched_ == ready_events_.size()) {
      cudaEvent_t event = nullptr;
      RS_RETURN_IF_ERROR(CudaStatus(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate"));
      ready_events_.push_back(event);
    }
    cudaEvent_t ready = ready_events_[launched_++];
    RS_RETURN_IF_ERROR(CudaStatus(cudaEventRecord(ready, compute()), "cudaEventRecord"));
    RS_RETURN_IF_ERROR(CudaStatus(cudaStreamWaitEvent(comm_stream_, ready, 0), "cudaStreamWaitEvent"));
    AllReduceRange range(static_cast<uint64_t>(bucket), count * sizeof(float), RangeCategory::kNone);
    return group_->AllReduceAverage(data, count, comm_stream_);
  }

  Result<Ticket> StartAllGather(int layer, const float* in, float* out, size_t count) override {
    RS_RETURN_IF_ERROR(OrderAfterCompute());
    {
      ScopedRange range("allgather");
      (void)layer;  // NCCL's profiler plugin reports the collective and its size
      RS_RETURN_IF_ERROR(group_->AllGather(in, out, count, comm_stream_));
    }
    return MarkDone();
  }

  Result<Ticket> StartReduceScatter(int layer, float* data, size_t count) override {
    RS_RETURN_IF_ERROR(OrderAfterCompute());
    {
      ScopedRange range("reducescatter");
      (void)layer;
      RS_RETURN_IF_ERROR(group_->ReduceScatterAverage(data, count, comm_stream_));
    }
    return MarkDone();
  }

  Status Wait(Ticket ticket) override {
    if (ticket >= done_events_.size()) return InvalidArgument(fmt::format("wait: no collective {} was started", ticket));
    // The compute stream waits on the device; errors come out at the next WaitAll.
    return CudaStatus(cudaStreamWaitEvent(compute(), done_events_[ticket], 0), "cudaStreamWaitEvent");
  }

  Status SendRecv(const Outgoing& send, const Incoming& recv) override {
    if (send.count == 0 && recv.count == 0) return Status::Ok();
    {
      // NCCL's profiler plugin reports the transfers; these say where the CPU issued them.
      std::optional<ScopedRange> send_range;
      std::optional<ScopedRange> recv_range;
      if (send.count > 0) send_range.emplace("send");
      if (recv.count > 0) recv_range.emplace("recv");
      RS_RETURN_IF_ERROR(OrderAfterCompute());
      RS_RETURN_IF_ERROR(
          group_->SendRecv(send.data, send.count, send.peer, recv.data, recv.count, recv.peer, comm_stream_));
    }
    if (recv.count == 0) return Status::Ok();
    RS_ASSIGN_OR_RETURN(Ticket received, MarkDone());
    return Wait(received);
  }

  Status WaitAll() override {
    launched_ = 0;
    done_events_.clear();
    next_event_ = 0;
    // Synchronize polls NCCL's asynchronous errors and aborts on a dead peer or a timeout.
    RS_RETURN_IF_ERROR(group_->Synchronize(comm_stream_));
    RS_RETURN_IF_ERROR(CudaStatus(cudaEventRecord(done_event_, comm_stream_), "cudaEventRecord"));
    return CudaStatus(cudaStreamWaitEvent(compute(), done_event_, 0), "cudaStreamWaitEvent");
  }

 private:
  cudaStream_t compute() { return static_cast<cudaStream_t>(device_->stream()); }

  // The communication stream waits for the compute work enqueued so far.
  Status OrderAfterCompute() {
    cudaEvent_t ready = nullptr;
    RS_ASSIGN_OR_RETURN(ready, NewEvent());
    RS_RETURN_IF_ERROR(CudaStatus(cudaEventRecord(ready, compute()), "cudaEventRecord"));
    return CudaStatus(cudaStreamWaitEvent(comm_stream_, ready, 0), "cudaStreamWaitEvent");
  }

  // An event after the communication stream's work so far: the ticket of what was just
  // enqueued.
  Result<Ticket> MarkDone() {
    cudaEvent_t done = nullptr;
    RS_ASSIGN_OR_RETURN(done, NewEvent());
    RS_RETURN_IF_ERROR(CudaStatus(cudaEventRecord(done, comm_stream_), "cudaEventRecord"));
    done_events_.push_back(done);
    return static_cast<Ticket>(done_events_.size() - 1);
  }

  // Events are reused from one WaitAll to the next: a step needs as many as it starts.
  Result<cudaEvent_t> NewEvent() {
    if (next_event_ == event_pool_.size()) {
      cudaEvent_t event = nullptr;
      RS_RETURN_IF_ERROR(CudaStatus(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate"));
      event_pool_.push_back(event);
    }
    return event_pool_[next_event_++];
  }

  std::unique_ptr<NcclGroup> group_;
  ComputeDevice* device_;
  int rank_;
  int size_;
  cudaStream_t comm_stream_ = nullptr;
  cudaEvent_t done_event_ = nullptr;
  std::vector<cudaEvent_t> ready_events_;
  std::vector<cudaEvent_t> done_events_;  // by ticket, since the last WaitAll
  std::vector<cudaEvent_t> event_pool_;   // NewEvent's, destroyed at the end
  size_t next_event_ = 0;
  size_t launched_ = 0;
};

}  // namespace

Result<std::unique_ptr<Collectives>> MakeNcclCollectives(Rendezvous& rendezvous, ComputeDevice& device,
                                                         int cuda_device, std::chrono::milliseconds timeout,
                                                         std::vector<int> members) {
  if (!device.is_gpu()) return InvalidArgument("NCCL collectives need the GPU compute device");
  int current = 0;
  RS_RETURN_IF_ERROR(CudaStatus(cudaGetDevice(&current), "cudaGetDevice"));
  (void)cuda_device;  // the compute device already selected its GPU on this thread
  int rank = rendezvous.world().rank;
  int size = rendezvous.world().world_size;
  if (!members.empty()) {
    RS_ASSIGN_OR_RETURN(rank, comm::RankInGroup(members, rank, size));
    size = static_cast<int>(members.size());
  }
  RS_ASSIGN_OR_RETURN(std::unique_ptr<NcclGroup> group,
                      NcclGroup::Create(rendezvous, current, timeout, std::move(members)));
  auto collectives = std::make_unique<NcclCollectives>(std::move(group), device, rank, size);
  RS_RETURN_IF_ERROR(collectives->Init());
  return std::unique_ptr<Collectives>(std::move(collectives));
}

}  // namespace rankscope::trainer
