// Optimizer steps with torch.optim.SGD (dampening 0, no Nesterov) and torch.optim.AdamW
// semantics. One thread per parameter (grid-stride); the scalar bias corrections are
// computed once on the host in double, as PyTorch does in Python.
#include <cmath>
#include <cstdint>
#include <string>

#include "kernels/cuda/cuda_util.cuh"
#include "kernels/cuda_kernels.h"

namespace rankscope::kernels::cuda {
namespace {

__global__ void SgdKernel(size_t n, float* __restrict__ params, const float* __restrict__ grads,
                          float* __restrict__ momentum_buffer, float lr, float momentum,
                          float weight_decay, bool first_step) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float p = params[i];
    float g = grads[i];
    if (weight_decay != 0.0f) g += weight_decay * p;  // skipped, not ·0: inf stays inf
    if (momentum != 0.0f) {
      // torch: the buffer starts as a copy of the first gradient.
      const float buffer = first_step ? g : momentum * momentum_buffer[i] + g;
      momentum_buffer[i] = buffer;
      g = buffer;
    }
    params[i] = p - lr * g;
  }
}

__global__ void AdamWKernel(size_t n, float* __restrict__ params, const float* __restrict__ grads,
                            float* __restrict__ exp_avg, float* __restrict__ exp_avg_sq,
                            float decay_factor, float beta1, float one_minus_beta1,
                            float beta2, float one_minus_beta2, float eps, float step_size,
                            float bias_correction2_sqrt) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float g = grads[i];
    const float p = params[i] * decay_factor;  // decoupled weight decay first
    const float m = beta1 * exp_avg[i] + one_minus_beta1 * g;
    const float v = beta2 * exp_avg_sq[i] + one_minus_beta2 * g * g;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    const float denom = sqrtf(v) / bias_correction2_sqrt + eps;
    params[i] = p - step_size * (m / denom);
  }
}

}  // namespace

Status SgdStep(cudaStream_t stream, size_t n, float* params, const float* grads,
               float* momentum_buffer, const SgdOptions& options, bool first_step) {
  constexpr const char* kWhat = "cuda::SgdStep";
  RS_RETURN_IF_ERROR(internal::CheckPointer(kWhat, "params", params, n));
  RS_RETURN_IF_ERROR(internal::CheckPointer(kWhat, "grads", grads, n));
  if (n == 0) return Status::Ok();
  // Without a buffer there is nowhere to keep momentum: plain SGD, as on the CPU.
  const float momentum = momentum_buffer == nullptr ? 0.0f : options.momentum;
  internal::ClearStaleError();
  SgdKernel<<<internal::ElementwiseBlocks(n), internal::kElementwiseThreads, 0, stream>>>(
      n, params, grads, momentum_buffer, options.lr, momentum, options.weight_decay, first_step);
  return internal::CheckLaunch("cuda::SgdStep launch");
}

Status AdamWStep(cudaStream_t stream, size_t n, float* params, const float* grads,
                 float* exp_avg, float* exp_avg_sq, const AdamWOptions& options, int64_t step) {
  constexpr const char* kWhat = "cuda::AdamWStep";
  if (step < 1) {
    return InvalidArgument(std::string(kWhat) + ": step counts from 1, got " +
                           std::to_string(step));
  }
  RS_RETURN_IF_ERROR(internal::CheckPointer(kWhat, "params", params, n));
  RS_RETURN_IF_ERROR(internal::CheckPointer(kWhat, "grads", grads, n));
  RS_RETURN_IF_ERROR(internal::CheckPointer(kWhat, "exp_avg", exp_avg, n));
  RS_RETURN_IF_ERROR(internal::CheckPointer(kWhat, "exp_avg_sq", exp_avg_sq, n));
  if (n == 0) return Status::Ok();
  const double t = static_cast<double>(step);
  const double bias_correction1 = 1.0 - std::pow(static_cast<double>(options.beta1), t);
  const double bias_correction2 = 1.0 - std::pow(static_cast<double>(options.beta2), t);
  const double lr = options.lr;
  const float decay_factor = static_cast<float>(1.0 - lr * options.weight_decay);
  const float step_size = static_cast<float>(lr / bias_correction1);
  const float bias_correction2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
  const float one_minus_beta1 = static_cast<float>(1.0 - static_cast<double>(options.beta1));
  const float one_minus_beta2 = static_cast<float>(1.0 - static_cast<double>(options.beta2));
  internal::ClearStaleError();
  AdamWKernel<<<internal::ElementwiseBlocks(n), internal::kElementwiseThreads, 0, stream>>>(
      n, params, grads, exp_avg, exp_avg_sq, decay_factor, options.beta1, one_minus_beta1,
      options.beta2, one_minus_beta2, options.eps, step_size, bias_correction2_sqrt);
  return internal::CheckLaunch("cuda::AdamWStep launch");
}

}  // namespace rankscope::kernels::cuda
