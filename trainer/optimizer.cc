#include "trainer/optimizer.h"

#include <algorithm>
#include <cmath>

namespace rankscope::trainer {

double LearningRate(const TrainerOptions& options, int world_size, int64_t step) {
  const double global_batch = static_cast<double>(options.batch) * options.accum * world_size;
  const double scaled = options.lr * global_batch / options.lr_reference_batch;
  if (options.warmup_steps <= 0 || step >= options.warmup_steps) return scaled;
  return scaled * static_cast<double>(step + 1) / options.warmup_steps;
}

Result<Optimizer> Optimizer::Create(ComputeDevice& device, const TrainerOptions& options, size_t parameter_count) {
  Optimizer optimizer(device, options, parameter_count);
  const int buffers = options.optimizer == OptimizerKind::kAdamW ? 2 : 1;
  for (int i = 0; i < buffers; ++i) {
    RS_ASSIGN_OR_RETURN(float* buffer, device.AllocateFloats(parameter_count));
    optimizer.state_.push_back(buffer);
  }
  return optimizer;
}

Status Optimizer::Step(float* params, const float* grads, double lr) {
  ++steps_taken_;
  if (options_.optimizer == OptimizerKind::kAdamW) {
    kernels::AdamWOptions adamw;
    adamw.lr = static_cast<float>(lr);
    adamw.weight_decay = static_cast<float>(options_.weight_decay);
    return device_->AdamWStep(count_, params, grads, state_[0], state_[1], adamw, steps_taken_);
  }
  kernels::SgdOptions sgd;
  sgd.lr = static_cast<float>(lr);
  sgd.momentum = static_cast<float>(options_.momentum);
  sgd.weight_decay = static_cast<float>(options_.weight_decay);
  return device_->SgdStep(count_, params, grads, state_[0], sgd, steps_taken_ == 1);
}

Result<double> ClipGradientNorm(ComputeDevice& device, float* grads, size_t count, double max_norm) {
  RS_ASSIGN_OR_RETURN(double squared, device.SquaredNorm(count, grads));
  const double norm = std::sqrt(squared);
  const double coefficient = max_norm / (norm + 1e-6);
  if (coefficient < 1.0) RS_RETURN_IF_ERROR(device.Scale(count, static_cast<float>(coefficient), grads));
  return norm;
}

}  // namespace rankscope::trainer
