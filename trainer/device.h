// Where the trainer's tensors live and its kernels run. The model, the DDP engine and the
// optimizer are written once against this interface; CpuDevice runs the CPU kernels on a
// thread pool (each kernel call an NVTX range in category "compute"), CudaDevice runs the
// CUDA kernels on a compute stream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "base/status.h"
#include "kernels/cpu_kernels.h"

namespace rankscope::trainer {

struct LossStats {
  double loss_sum = 0;  // Σ over rows of −log p(label)
  int64_t correct = 0;
  int64_t rows = 0;
};

// What a device buffer holds. Allocate adds its bytes to its category and marks the
// category's new total (annotations.h MarkMemory): the memory counters.
enum class MemoryCategory : uint8_t {
  kParameters,      // weights and biases (FSDP: its shards and the gathered layers)
  kGradients,
  kOptimizerState,  // momentum, Adam's moments
  kActivations,     // what the backward pass needs of the forward (a pipeline: per micro-batch)
  kCommunication,   // DDP's buckets, received gradients, reduction scratch
  kData,            // the input batch and its labels
};
inline constexpr int kMemoryCategories = 6;
const char* MemoryCategoryName(MemoryCategory category);  // "parameters", "optimizer", "comm buffers", ...

class ComputeDevice {
 public:
  virtual ~ComputeDevice() = default;
  // Zero-filled device memory (AllocateFloats, AllocateLabels) counted in `category`.
  Result<float*> Allocate(size_t count, MemoryCategory category);
  Result<int32_t*> AllocateLabelsIn(size_t count, MemoryCategory category);
  // Bytes allocated so far through Allocate, per category.
  uint64_t allocated_bytes(MemoryCategory category) const { return allocated_[static_cast<size_t>(category)]; }


  virtual std::string Describe() const = 0;  // "cpu (8 threads, avx2+fma)", "cuda:0 (H100)"
  virtual bool is_gpu() const = 0;

  // Zero-filled device memory, owned by the device until it is destroyed.
  virtual Result<float*> AllocateFloats(size_t count) = 0;
  virtual Result<int32_t*> AllocateLabels(size_t count) = 0;
  virtual Status CopyToDevice(const float* host, float* device, size_t count) = 0;
  virtual Status CopyLabelsToDevice(const int32_t* host, int32_t* device, size_t count) = 0;
  virtual Status CopyToHost(const float* device, float* host, size_t count) = 0;

  // The operations of kernels/cpu_kernels.h, same semantics.
  virtual Status LinearForward(int batch, int in, int out, const float* x, const float* w, float* y) = 0;
  virtual Status LinearBackwardData(int batch, int in, int out, const float* dy, const float* w,
                                    float* dx) = 0;
  virtual Status LinearBackwardWeight(int batch, int in, int out, const float* dy, const float* x,
                                      float* dw, bool accumulate) = 0;
  virtual Status BiasActivationForward(kernels::Activation act, int rows, int cols, const float* bias,
                                       float* pre, float* out) = 0;
  virtual Status BiasActivationBackward(kernels::Activation act, int rows, int cols, const float* pre,
                                        const float* dout, float* dpre, float* dbias, bool accumulate) = 0;
  // Adds this batch's loss to the running LossStats (read with TakeLoss).
  virtual Status SoftmaxCrossEntropyForward(int rows, int classes, const float* logits,
                                            const int32_t* labels, float* probs) = 0;
  virtual Status SoftmaxCrossEntropyBackward(int rows, int classes, const float* probs,
                                             const int32_t* labels, float scale, float* dlogits) = 0;
  // Waits for the losses enqueued since the last call and returns their sum.
  virtual Result<LossStats> TakeLoss() = 0;

  virtual Status SgdStep(size_t n, float* params, const float* grads, float* momentum,
                         const kernels::SgdOptions& options, bool first_step) = 0;
  virtual Status AdamWStep(size_t n, float* params, const float* grads, float* exp_avg,
                           float* exp_avg_sq, const kernels::AdamWOptions& options, int64_t step) = 0;

  virtual Status Flatten(std::span<const kernels::ConstSpan> parts, float* flat) = 0;
  virtual Status Unflatten(const float* flat, std::span<const kernels::MutableSpan> parts) = 0;
  virtual Status Scale(size_t n, float factor, float* data) = 0;
  // sum[i] += add[i] for i < n.
  virtual Status Accumulate(size_t n, const float* add, float* sum) = 0;
  virtual Result<double> SquaredNorm(size_t n, const float* data) = 0;

  // Waits until all work enqueued so far has finished.
  virtual Status Synchronize() = 0;
  // An opaque handle of the compute stream (cudaStream_t) for the collectives; null on CPU.
  virtual void* stream() = 0;

 private:
  void Count(MemoryCategory category, uint64_t bytes);
  uint64_t allocated_[kMemoryCategories] = {};
};

// threads: the kernel thread pool size (≥ 1).
std::unique_ptr<ComputeDevice> MakeCpuDevice(int threads);

// Whether a GPU can be used, and why not: "no CUDA support in this build", or the CUDA error.
struct GpuAvailability {
  bool usable = false;
  int device_count = 0;
  std::string reason;
};
GpuAvailability ProbeGpu();

// local_rank selects the GPU (local_rank mod device count). bf16 makes the GEMMs run on tensor
// cores with bf16 inputs and fp32 accumulation.
Result<std::unique_ptr<ComputeDevice>> MakeCudaDevice(int local_rank, bool bf16);

}  // namespace rankscope::trainer
