// SGD with momentum or AdamW over the model's flat parameter buffer, the learning-rate
// schedule (linear scaling with warm-up) and gradient-norm clipping.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "trainer/collectives.h"
#include "trainer/device.h"
#include "trainer/options.h"

namespace rankscope::trainer {

// lr · global_batch / reference_batch (Goyal et al.'s linear scaling), ramped linearly over
// the first warmup_steps steps: step s (from 0) uses (s + 1) / warmup_steps of it. The
// global batch is batch · accum (a pipeline: · micro-batches) · replicas, the data-parallel
// replicas: every rank, or a pipeline's world / stages.
double LearningRate(const TrainerOptions& options, int replicas, int64_t step);

class Optimizer {
 public:
  static Result<Optimizer> Create(ComputeDevice& device, const TrainerOptions& options, size_t parameter_count);

  Status Step(float* params, const float* grads, double lr);

  int64_t steps_taken() const { return steps_taken_; }
  void set_steps_taken(int64_t steps) { steps_taken_ = steps; }
  // Momentum (SGD) or exp_avg and exp_avg_sq (AdamW), device memory, for checkpoints.
  const std::vector<float*>& state() const { return state_; }
  size_t parameter_count() const { return count_; }

 private:
  Optimizer(ComputeDevice& device, const TrainerOptions& options, size_t count)
      : device_(&device), options_(options), count_(count) {}

  ComputeDevice* device_;
  TrainerOptions options_;
  size_t count_;
  std::vector<float*> state_;
  int64_t steps_taken_ = 0;
};

// torch.nn.utils.clip_grad_norm_: when the global L2 norm exceeds max_norm, scales the
// gradients by max_norm / (norm + 1e-6). Returns the norm before clipping.
Result<double> ClipGradientNorm(ComputeDevice& device, float* grads, size_t count, double max_norm);
// The same when each rank holds a part of the gradients (FSDP's shards, a pipeline stage's
// layers): the parts' squared norms are summed over `collectives` and divided by `copies`
// (ranks holding the same part: a pipeline's data-parallel replicas), so every rank scales
// by the global norm. `scratch`: one float of device memory. Every rank must call it.
Result<double> ClipGradientNorm(ComputeDevice& device, Collectives& collectives, float* scratch, float* grads,
                                size_t count, double max_norm, int copies);

}  // namespace rankscope::trainer
