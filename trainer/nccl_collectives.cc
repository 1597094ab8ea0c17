// Collectives on a CUDA communication stream over NCCL (CUDA builds only). A bucket's
// all-reduce waits for the compute stream with an event, runs on the communication stream,
// and the compute stream waits for it in turn before the gradients are used.
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <vector>

#include "trainer/annotations.h"
#include "trainer/collectives.h"
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

  Status WaitAll() override {
    launched_ = 0;
    // Synchronize polls NCCL's asynchronous errors and aborts on a dead peer or a timeout.
    RS_RETURN_IF_ERROR(group_->Synchronize(comm_stream_));
    RS_RETURN_IF_ERROR(CudaStatus(cudaEventRecord(done_event_, comm_stream_), "cudaEventRecord"));
    return CudaStatus(cudaStreamWaitEvent(compute(), done_event_, 0), "cudaStreamWaitEvent");
  }

 private:
  cudaStream_t compute() { return static_cast<cudaStream_t>(device_->stream()); }

  std::unique_ptr<NcclGroup> group_;
  ComputeDevice* device_;
  int rank_;
  int size_;
  cudaStream_t comm_stream_ = nullptr;
  cudaEvent_t done_event_ = nullptr;
  std::vector<cudaEvent_t> ready_events_;
  size_t launched_ = 0;
};

}  // namespace

Result<std::unique_ptr<Collectives>> MakeNcclCollectives(Rendezvous& rendezvous, ComputeDevice& device,
                                                         int cuda_device, std::chrono::milliseconds timeout) {
  if (!device.is_gpu()) return InvalidArgument("NCCL collectives need the GPU compute device");
  int current = 0;
  RS_RETURN_IF_ERROR(CudaStatus(cudaGetDevice(&current), "cudaGetDevice"));
  (void)cuda_device;  // the compute device already selected its GPU on this thread
  RS_ASSIGN_OR_RETURN(std::unique_ptr<NcclGroup> group, NcclGroup::Create(rendezvous, current, timeout));
  auto collectives = std::make_unique<NcclCollectives>(std::move(group), device, rendezvous.world().rank,
                                                       rendezvous.world().world_size);
  RS_RETURN_IF_ERROR(collectives->Init());
  return std::unique_ptr<Collectives>(std::move(collectives));
}

}  // namespace rankscope::trainer
