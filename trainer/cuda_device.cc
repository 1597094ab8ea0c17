// The GPU compute device (CUDA builds only): the CUDA kernels on one compute stream.
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "kernels/cuda_kernels.h"
#include "trainer/device.h"

namespace rankscope::trainer {
namespace {

namespace k = kernels;
namespace kc = kernels::cuda;

Status CudaStatus(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return Status::Ok();
  return Unavailable(fmt::format("{}: {} ({})", what, cudaGetErrorString(error), static_cast<int>(error)));
}

class CudaDevice final : public ComputeDevice {
 public:
  CudaDevice(int device, bool bf16, std::string name) : device_(device), bf16_(bf16), name_(std::move(name)) {}

  ~CudaDevice() override {
    if (stream_ != nullptr) cudaStreamSynchronize(stream_);
    for (void* pointer : allocations_) cudaFree(pointer);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  Status Init() {
    RS_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(device_), "cudaSetDevice"));
    RS_RETURN_IF_ERROR(CudaStatus(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate"));
    return Status::Ok();
  }

  std::string Describe() const override {
    return fmt::format("cuda:{} ({}, {})", device_, name_, bf16_ ? "bf16 tensor cores" : "fp32");
  }
  bool is_gpu() const override { return true; }

  Result<float*> AllocateFloats(size_t count) override {
    RS_ASSIGN_OR_RETURN(void* pointer, Allocate(count * sizeof(float)));
    return static_cast<float*>(pointer);
  }
  Result<int32_t*> AllocateLabels(size_t count) override {
    RS_ASSIGN_OR_RETURN(void* pointer, Allocate(count * sizeof(int32_t)));
    return static_cast<int32_t*>(pointer);
  }
  Status CopyToDevice(const float* host, float* device, size_t count) override {
    return CudaStatus(cudaMemcpyAsync(device, host, count * sizeof(float), cudaMemcpyHostToDevice, stream_),
                      "copy to the GPU");
  }
  Status CopyLabelsToDevice(const int32_t* host, int32_t* device, size_t count) override {
    return CudaStatus(cudaMemcpyAsync(device, host, count * sizeof(int32_t), cudaMemcpyHostToDevice, stream_),
                      "copy to the GPU");
  }
  Status CopyToHost(const float* device, float* host, size_t count) override {
    RS_RETURN_IF_ERROR(CudaStatus(
        cudaMemcpyAsync(host, device, count * sizeof(float), cudaMemcpyDeviceToHost, stream_), "copy from the GPU"));
    return Synchronize();
  }

  Status LinearForward(int batch, int in, int out, const float* x, const float* w, float* y) override {
    return Gemm(k::Transpose::kNo, k::Transpose::kYes, batch, out, in, x, in, w, in, 0.0f, y, out);
  }
  Status LinearBackwardData(int batch, int in, int out, const float* dy, const float* w, float* dx) override {
    return Gemm(k::Transpose::kNo, k::Transpose::kNo, batch, in, out, dy, out, w, in, 0.0f, dx, in);
  }
  Status LinearBackwardWeight(int batch, int in, int out, const float* dy, const float* x, float* dw,
                              bool accumulate) override {
    return Gemm(k::Transpose::kYes, k::Transpose::kNo, out, in, batch, dy, out, x, in, accumulate ? 1.0f : 0.0f, dw,
                in);
  }
  Status BiasActivationForward(k::Activation act, int rows, int cols, const float* bias, float* pre,
                               float* out) override {
    return kc::BiasActivationForward(stream_, act, rows, cols, bias, pre, out);
  }
  Status BiasActivationBackward(k::Activation act, int rows, int cols, const float* pre, const float* dout,
                                float* dpre, float* dbias, bool accumulate) override {
    return kc::BiasActivationBackward(stream_, act, rows, cols, pre, dout, dpre, dbias, accumulate);
  }
  Status SoftmaxCrossEntropyForward(int rows, int classes, const float* logits, const int32_t* labels,
                                    float* probs) override {
    // One device slot per forward pass until TakeLoss, so nothing here waits for the GPU.
    if (loss_slots_used_ == loss_sums_.size()) {
      RS_ASSIGN_OR_RETURN(float* sum, AllocateFloats(1));
      RS_ASSIGN_OR_RETURN(int32_t* correct, AllocateLabels(1));
      loss_sums_.push_back(sum);
      loss_correct_.push_back(correct);
    }
    float* sum = loss_sums_[loss_slots_used_];
    int* correct = loss_correct_[loss_slots_used_];
    ++loss_slots_used_;
    loss_rows_ += rows;
    return kc::SoftmaxCrossEntropyForward(stream_, rows, classes, logits, labels, probs, sum, correct);
  }
  Status SoftmaxCrossEntropyBackward(int rows, int classes, const float* probs, const int32_t* labels, float scale,
                                     float* dlogits) override {
    return kc::SoftmaxCrossEntropyBackward(stream_, rows, classes, probs, labels, scale, dlogits);
  }
  Result<LossStats> TakeLoss() override {
    LossStats stats;
    stats.rows = loss_rows_;
    std::vector<float> sums(loss_slots_used_);
    std::vector<int32_t> correct(loss_slots_used_);
    for (size_t i = 0; i < loss_slots_used_; ++i) {
      RS_RETURN_IF_ERROR(CudaStatus(
          cudaMemcpyAsync(&sums[i], loss_sums_[i], sizeof(float), cudaMemcpyDeviceToHost, stream_), "loss copy"));
      RS_RETURN_IF_ERROR(CudaStatus(
          cudaMemcpyAsync(&correct[i], loss_correct_[i], sizeof(int32_t), cudaMemcpyDeviceToHost, stream_),
          "loss copy"));
    }
    RS_RETURN_IF_ERROR(Synchronize());
    for (size_t i = 0; i < loss_slots_used_; ++i) {
      stats.loss_sum += sums[i];
      stats.correct += correct[i];
    }
    loss_slots_used_ = 0;
    loss_rows_ = 0;
    return stats;
  }

  Status SgdStep(size_t n, float* params, const float* grads, float* momentum, const k::SgdOptions& options,
                 bool first_step) override {
    return kc::SgdStep(stream_, n, params, grads, momentum, options, first_step);
  }
  Status AdamWStep(size_t n, float* params, const float* grads, float* exp_avg, float* exp_avg_sq,
                   const k::AdamWOptions& options, int64_t step) override {
    return kc::AdamWStep(stream_, n, params, grads, exp_avg, exp_avg_sq, options, step);
  }
  Status Flatten(std::span<const k::ConstSpan> parts, float* flat) override {
    return kc::Flatten(stream_, parts, flat);
  }
  Status Unflatten(const float* flat, std::span<const k::MutableSpan> parts) override {
    return kc::Unflatten(stream_, flat, parts);
  }
  Status Scale(size_t n, float factor, float* data) override { return kc::Scale(stream_, n, factor, data); }
  Status Accumulate(size_t n, const float* add, float* sum) override { return kc::Accumulate(stream_, n, add, sum); }
  Result<double> SquaredNorm(size_t n, const float* data) override {
    if (norm_ == nullptr) {
      RS_ASSIGN_OR_RETURN(norm_, AllocateFloats(1));
    }
    RS_RETURN_IF_ERROR(kc::SquaredNorm(stream_, n, data, norm_));
    float value = 0;
    RS_RETURN_IF_ERROR(CopyToHost(norm_, &value, 1));
    return static_cast<double>(value);
  }

  Status Synchronize() override { return CudaStatus(cudaStreamSynchronize(stream_), "GPU work"); }
  void* stream() override { return stream_; }

 private:
  Result<void*> Allocate(size_t bytes) {
    void* pointer = nullptr;
    RS_RETURN_IF_ERROR(CudaStatus(cudaMalloc(&pointer, std::max<size_t>(bytes, 1)), "cudaMalloc"));
    allocations_.push_back(pointer);
    RS_RETURN_IF_ERROR(CudaStatus(cudaMemsetAsync(pointer, 0, bytes, stream_), "cudaMemsetAsync"));
    return pointer;
  }

  // bf16 copies of a GEMM's inputs; they grow to the largest GEMM and stay.
  Result<__nv_bfloat16*> Bf16Scratch(int which, size_t count) {
    if (count > bf16_capacity_[which]) {
      RS_RETURN_IF_ERROR(Synchronize());  // the old buffer may still be read by a queued GEMM
      void* pointer = nullptr;
      RS_RETURN_IF_ERROR(CudaStatus(cudaMalloc(&pointer, count * sizeof(__nv_bfloat16)), "cudaMalloc"));
      allocations_.push_back(pointer);
      bf16_scratch_[which] = static_cast<__nv_bfloat16*>(pointer);
      bf16_capacity_[which] = count;
    }
    return bf16_scratch_[which];
  }

  // C[m×n] = op(A)·op(B) (+ beta·C); A stored with row stride lda, B with ldb.
  Status Gemm(k::Transpose ta, k::Transpose tb, int m, int n, int kk, const float* a, int lda, const float* b,
              int ldb, float beta, float* c, int ldc) {
    if (!bf16_) return kc::Gemm(stream_, ta, tb, m, n, kk, 1.0f, a, lda, b, ldb, beta, c, ldc);
    const size_t a_count = static_cast<size_t>(ta == k::Transpose::kNo ? m : kk) * static_cast<size_t>(lda);
    const size_t b_count = static_cast<size_t>(tb == k::Transpose::kNo ? kk : n) * static_cast<size_t>(ldb);
    RS_ASSIGN_OR_RETURN(__nv_bfloat16 * a16, Bf16Scratch(0, a_count));
    RS_ASSIGN_OR_RETURN(__nv_bfloat16 * b16, Bf16Scratch(1, b_count));
    RS_RETURN_IF_ERROR(kc::CastToBf16(stream_, a_count, a, a16));
    RS_RETURN_IF_ERROR(kc::CastToBf16(stream_, b_count, b, b16));
    return kc::GemmBf16(stream_, ta, tb, m, n, kk, 1.0f, a16, lda, b16, ldb, beta, c, ldc);
  }

  int device_;
  bool bf16_;
  std::string name_;
  cudaStream_t stream_ = nullptr;
  std::vector<void*> allocations_;
  std::vector<float*> loss_sums_;
  std::vector<int32_t*> loss_correct_;
  size_t loss_slots_used_ = 0;
  int64_t loss_rows_ = 0;
  float* norm_ = nullptr;
  __nv_bfloat16* bf16_scratch_[2] = {nullptr, nullptr};
  size_t bf16_capacity_[2] = {0, 0};
};

}  // namespace

GpuAvailability ProbeGpu() {
  GpuAvailability availability;
  const cudaError_t error = cudaGetDeviceCount(&availability.device_count);
  if (error != cudaSuccess) {
    availability.reason = fmt::format("cudaGetDeviceCount: {}", cudaGetErrorString(error));
    availability.device_count = 0;
    return availability;
  }
  if (availability.device_count == 0) {
    availability.reason = "no CUDA device";
    return availability;
  }
  availability.usable = true;
  return availability;
}

Result<std::unique_ptr<ComputeDevice>> MakeCudaDevice(int local_rank, bool bf16) {
  const GpuAvailability gpu = ProbeGpu();
  if (!gpu.usable) return Unavailable(gpu.reason);
  const int device = local_rank % gpu.device_count;
  cudaDeviceProp properties{};
  RS_RETURN_IF_ERROR(CudaStatus(cudaGetDeviceProperties(&properties, device), "cudaGetDeviceProperties"));
  if (bf16 && properties.major < 8) {
    return Unsupported(fmt::format("--precision bf16 needs compute capability 8.0 or newer; {} has {}.{}",
                                   properties.name, properties.major, properties.minor));
  }
  auto cuda = std::make_unique<CudaDevice>(device, bf16, properties.name);
  RS_RETURN_IF_ERROR(cuda->Init());
  return std::unique_ptr<ComputeDevice>(std::move(cuda));
}

}  // namespace rankscope::trainer
