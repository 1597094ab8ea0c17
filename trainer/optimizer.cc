#include "trainer/optimizer.h"

#include <algorithm>
#include <cmath>

namespace rankscope::trainer {

double LearningRate(const TrainerOptions& options, int replicas, int64_t step) {
  const int micro_steps = options.parallel == Parallelism::kPipeline ? options.micro_batches : options.accum;
  const double global_batch = static_cast<double>(options.batch) * micro_steps * replicas;
  const double scaled = options.lr * global_batch / options.lr_reference_batch;
  if (options.warmup_steps <= 0 || step >= options.warmup_steps) return scaled;
  return scaled * static_cast<double>(step + 1) / options.warmup_steps;
}

Result<Optimizer> Optimizer::Create(ComputeDevice& device, const TrainerOptions& options, size_t parameter_count) {
  Optimizer optimizer(device, options, parameter_count);
  const int buffers = options.optimizer == OptimizerKind::kAdamW ? 2 : 1;
  for (int i = 0; i < buffers; ++i) {
    RS_ASSIGN_OR_RETURN(float* buffer, device.Allocate(parameter_count, MemoryCategory::kOptimizerState));
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

namespace {

Result<double> ScaleToNorm(ComputeDevice& device, float* grads, size_t count, double squared, double max_norm) {
  const double norm = std::sqrt(squared);
  const double coefficient = max_norm / (norm + 1e-6);
  if (coefficient < 1.0) RS_RETURN_IF_ERROR(device.Scale(count, static_cast<float>(coefficient), grads));
  return norm;
}

}  // namespace

Result<double> ClipGradientNorm(ComputeDevice& device, float* grads, size_t count, double max_norm) {
  RS_ASSIGN_OR_RETURN(double squared, device.SquaredNorm(count, grads));
  return ScaleToNorm(device, grads, count, squared, max_norm);
}

Result<double> ClipGradientNorm(ComputeDevice& device, Collectives& collectives, float* scratch, float* grads,
                                size_t count, double max_norm, int copies) {
  RS_ASSIGN_OR_RETURN(double local, device.SquaredNorm(count, grads));
  const auto local_float = static_cast<float>(local);
  RS_RETURN_IF_ERROR(device.CopyToDevice(&local_float, scratch, 1));
  RS_RETURN_IF_ERROR(collectives.StartAllReduce(-1, scratch, 1));
  RS_RETURN_IF_ERROR(collectives.WaitAll());
  float global = 0.0f;
  RS_RETURN_IF_ERROR(device.CopyToHost(scratch, &global, 1));
  if (collectives.averages()) global *= static_cast<float>(collectives.size());
  return ScaleToNorm(device, grads, count, static_cast<double>(global) / copies, max_norm);
}

}  // namespace rankscope::trainer
