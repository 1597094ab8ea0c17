// SGD and AdamW updates with torch.optim semantics, element-wise over contiguous ranges of
// the parameters (each element's update is independent, so the split never changes results).
#include <algorithm>
#include <cmath>

#include "kernels/cpu_kernels.h"
#include "kernels/parallel_internal.h"

namespace rankscope::kernels {
namespace {

// Optimizer steps stream three to four arrays; below this, one thread is as fast.
constexpr size_t kMinParamsPerTask = 32 * 1024;

// The SGD variants, each a loop without branches so it vectorizes. Weight decay is skipped
// (not multiplied by 0) when off, as torch does, so an infinite weight stays infinite
// rather than turning into NaN.
enum class SgdMomentum { kNone, kFirstStep, kLater };

template <bool kDecay, SgdMomentum kMomentum>
void SgdRange(size_t begin, size_t end, float* params, const float* grads, float* buffer, float lr,
              float weight_decay, float momentum) {
  for (size_t i = begin; i < end; ++i) {
    float g = grads[i];
    if constexpr (kDecay) g += weight_decay * params[i];
    if constexpr (kMomentum == SgdMomentum::kFirstStep) buffer[i] = g;
    if constexpr (kMomentum == SgdMomentum::kLater) {
      g = momentum * buffer[i] + g;
      buffer[i] = g;
    }
    params[i] -= lr * g;
  }
}

template <bool kDecay>
void SgdRangeDispatch(SgdMomentum mode, size_t begin, size_t end, float* params, const float* grads,
                      float* buffer, float lr, float weight_decay, float momentum) {
  switch (mode) {
    case SgdMomentum::kNone:
      SgdRange<kDecay, SgdMomentum::kNone>(begin, end, params, grads, buffer, lr, weight_decay,
                                           momentum);
      break;
    case SgdMomentum::kFirstStep:
      SgdRange<kDecay, SgdMomentum::kFirstStep>(begin, end, params, grads, buffer, lr, weight_decay,
                                                momentum);
      break;
    case SgdMomentum::kLater:
      SgdRange<kDecay, SgdMomentum::kLater>(begin, end, params, grads, buffer, lr, weight_decay,
                                            momentum);
      break;
  }
}

struct AdamWScalars {
  float decay;                  // 1 − lr·wd
  float step_size;              // lr / (1 − β1^t)
  float bias_correction2_sqrt;  // sqrt(1 − β2^t)
  float beta1, one_minus_beta1;
  float beta2, one_minus_beta2;
  float eps;
};

void AdamWRange(size_t begin, size_t end, float* params, const float* grads, float* exp_avg,
                float* exp_avg_sq, const AdamWScalars s) {
  for (size_t i = begin; i < end; ++i) {
    const float g = grads[i];
    const float m = s.beta1 * exp_avg[i] + s.one_minus_beta1 * g;
    const float v = s.beta2 * exp_avg_sq[i] + s.one_minus_beta2 * g * g;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    const float denominator = std::sqrt(v) / s.bias_correction2_sqrt + s.eps;
    params[i] = params[i] * s.decay - s.step_size * (m / denominator);
  }
}

}  // namespace

void SgdStep(ThreadPool& pool, size_t n, float* params, const float* grads, float* momentum_buffer,
             const SgdOptions& options, bool first_step) {
  const float lr = options.lr;
  const float weight_decay = options.weight_decay;
  const float momentum = options.momentum;
  // Without a buffer there is nowhere to keep momentum: plain SGD.
  const SgdMomentum mode = momentum == 0.0f || momentum_buffer == nullptr ? SgdMomentum::kNone
                           : first_step                                   ? SgdMomentum::kFirstStep
                                                                          : SgdMomentum::kLater;
  internal::ParallelRanges(pool, n, kMinParamsPerTask, internal::kFloatAlignment,
                           [&](size_t begin, size_t end) {
                             if (weight_decay != 0.0f) {
                               SgdRangeDispatch<true>(mode, begin, end, params, grads,
                                                      momentum_buffer, lr, weight_decay, momentum);
                             } else {
                               SgdRangeDispatch<false>(mode, begin, end, params, grads,
                                                       momentum_buffer, lr, weight_decay, momentum);
                             }
                           });
}

void AdamWStep(ThreadPool& pool, size_t n, float* params, const float* grads, float* exp_avg,
               float* exp_avg_sq, const AdamWOptions& options, int64_t step) {
  // Steps count from 1; anything lower is treated as the first step rather than dividing by
  // a zero bias correction.
  const double t = static_cast<double>(std::max<int64_t>(1, step));
  // Scalars in double, as torch computes them in Python, then rounded once to float.
  const double beta1 = options.beta1;
  const double beta2 = options.beta2;
  const double lr = options.lr;
  const AdamWScalars scalars{
      .decay = static_cast<float>(1.0 - lr * options.weight_decay),
      .step_size = static_cast<float>(lr / (1.0 - std::pow(beta1, t))),
      .bias_correction2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(beta2, t))),
      .beta1 = options.beta1,
      .one_minus_beta1 = static_cast<float>(1.0 - beta1),
      .beta2 = options.beta2,
      .one_minus_beta2 = static_cast<float>(1.0 - beta2),
      .eps = options.eps,
  };
  internal::ParallelRanges(pool, n, kMinParamsPerTask, internal::kFloatAlignment,
                           [&](size_t begin, size_t end) {
                             AdamWRange(begin, end, params, grads, exp_avg, exp_avg_sq, scalars);
                           });
}

}  // namespace rankscope::kernels
