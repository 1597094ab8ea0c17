// The CPU compute device: CPU kernels on a fixed thread pool. Each kernel call is an NVTX
// range in category "compute" on the calling (compute) thread.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <vector>

#include "trainer/annotations.h"
#include "trainer/device.h"

namespace rankscope::trainer {
namespace {

namespace k = kernels;

class CpuDevice final : public ComputeDevice {
 public:
  explicit CpuDevice(int threads) : pool_(threads) {}

  std::string Describe() const override {
    return fmt::format("cpu ({} thread{}, {})", pool_.size(), pool_.size() == 1 ? "" : "s", k::GemmIsa());
  }
  bool is_gpu() const override { return false; }

  Result<float*> AllocateFloats(size_t count) override {
    floats_.emplace_back(count, 0.0f);
    return floats_.back().data();
  }
  Result<int32_t*> AllocateLabels(size_t count) override {
    labels_.emplace_back(count, 0);
    return labels_.back().data();
  }
  Status CopyToDevice(const float* host, float* device, size_t count) override {
    if (count > 0) std::memcpy(device, host, count * sizeof(float));
    return Status::Ok();
  }
  Status CopyLabelsToDevice(const int32_t* host, int32_t* device, size_t count) override {
    if (count > 0) std::memcpy(device, host, count * sizeof(int32_t));
    return Status::Ok();
  }
  Status CopyToHost(const float* device, float* host, size_t count) override {
    if (count > 0) std::memcpy(host, device, count * sizeof(float));
    return Status::Ok();
  }

  Status LinearForward(int batch, int in, int out, const float* x, const float* w, float* y) override {
    ScopedRange range("linear_forward", RangeCategory::kCompute);
    k::LinearForward(pool_, batch, in, out, x, w, y);
    return Status::Ok();
  }
  Status LinearBackwardData(int batch, int in, int out, const float* dy, const float* w, float* dx) override {
    ScopedRange range("linear_backward_data", RangeCategory::kCompute);
    k::LinearBackwardData(pool_, batch, in, out, dy, w, dx);
    return Status::Ok();
  }
  Status LinearBackwardWeight(int batch, int in, int out, const float* dy, const float* x, float* dw,
                              bool accumulate) override {
    ScopedRange range("linear_backward_weight", RangeCategory::kCompute);
    k::LinearBackwardWeight(pool_, batch, in, out, dy, x, dw, accumulate);
    return Status::Ok();
  }
  Status BiasActivationForward(k::Activation act, int rows, int cols, const float* bias, float* pre,
                               float* out) override {
    ScopedRange range("bias_activation_forward", RangeCategory::kCompute);
    k::BiasActivationForward(pool_, act, rows, cols, bias, pre, out);
    return Status::Ok();
  }
  Status BiasActivationBackward(k::Activation act, int rows, int cols, const float* pre, const float* dout,
                                float* dpre, float* dbias, bool accumulate) override {
    ScopedRange range("bias_activation_backward", RangeCategory::kCompute);
    k::BiasActivationBackward(pool_, act, rows, cols, pre, dout, dpre, dbias, accumulate);
    return Status::Ok();
  }
  Status SoftmaxCrossEntropyForward(int rows, int classes, const float* logits, const int32_t* labels,
                                    float* probs) override {
    ScopedRange range("softmax_cross_entropy_forward", RangeCategory::kCompute);
    int correct = 0;
    const double mean = k::SoftmaxCrossEntropyForward(pool_, rows, classes, logits, labels, probs, &correct);
    loss_.loss_sum += mean * rows;
    loss_.correct += correct;
    loss_.rows += rows;
    return Status::Ok();
  }
  Status SoftmaxCrossEntropyBackward(int rows, int classes, const float* probs, const int32_t* labels,
                                     float scale, float* dlogits) override {
    ScopedRange range("softmax_cross_entropy_backward", RangeCategory::kCompute);
    k::SoftmaxCrossEntropyBackward(pool_, rows, classes, probs, labels, scale, dlogits);
    return Status::Ok();
  }
  Result<LossStats> TakeLoss() override {
    LossStats taken = loss_;
    loss_ = {};
    return taken;
  }

  Status SgdStep(size_t n, float* params, const float* grads, float* momentum, const k::SgdOptions& options,
                 bool first_step) override {
    ScopedRange range("sgd_step", RangeCategory::kCompute);
    k::SgdStep(pool_, n, params, grads, momentum, options, first_step);
    return Status::Ok();
  }
  Status AdamWStep(size_t n, float* params, const float* grads, float* exp_avg, float* exp_avg_sq,
                   const k::AdamWOptions& options, int64_t step) override {
    ScopedRange range("adamw_step", RangeCategory::kCompute);
    k::AdamWStep(pool_, n, params, grads, exp_avg, exp_avg_sq, options, step);
    return Status::Ok();
  }

  Status Flatten(std::span<const k::ConstSpan> parts, float* flat) override {
    ScopedRange range("bucket_flatten", RangeCategory::kCompute);
    k::Flatten(parts, flat);
    return Status::Ok();
  }
  Status Unflatten(const float* flat, std::span<const k::MutableSpan> parts) override {
    ScopedRange range("bucket_unflatten", RangeCategory::kCompute);
    k::Unflatten(flat, parts);
    return Status::Ok();
  }
  Status Scale(size_t n, float factor, float* data) override {
    ScopedRange range("scale", RangeCategory::kCompute);
    k::Scale(pool_, n, factor, data);
    return Status::Ok();
  }
  Status Accumulate(size_t n, const float* add, float* sum) override {
    ScopedRange range("accumulate", RangeCategory::kCompute);
    k::Accumulate(pool_, n, add, sum);
    return Status::Ok();
  }
  Result<double> SquaredNorm(size_t n, const float* data) override {
    ScopedRange range("squared_norm", RangeCategory::kCompute);
    return k::SquaredNorm(pool_, n, data);
  }

  Status Synchronize() override { return Status::Ok(); }
  void* stream() override { return nullptr; }

 private:
  k::ThreadPool pool_;
  // deque: growing it never moves the buffers already handed out.
  std::deque<std::vector<float>> floats_;
  std::deque<std::vector<int32_t>> labels_;
  LossStats loss_;
};

}  // namespace

std::unique_ptr<ComputeDevice> MakeCpuDevice(int threads) { return std::make_unique<CpuDevice>(threads); }

#ifndef RANKSCOPE_TRAINER_CUDA
GpuAvailability ProbeGpu() { return {false, 0, "this build has no CUDA support"}; }

Result<std::unique_ptr<ComputeDevice>> MakeCudaDevice(int, bool) {
  return Unsupported("this build of rankscope-trainer has no CUDA support (configure with the CUDA toolkit)");
}
#endif

}  // namespace rankscope::trainer
