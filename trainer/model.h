// The reference model: an MLP features → width (× depth) → classes with bias and
// activation, trained with softmax cross-entropy. Parameters, gradients and activations live
// on the compute device; parameters and gradients each in one flat buffer, in registration
// order w0, b0, w1, b1, ... (as PyTorch's model.parameters()).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "kernels/cpu_kernels.h"
#include "trainer/device.h"

namespace rankscope::trainer {

struct ModelShape {
  int features = 0;
  int width = 0;
  int depth = 0;  // hidden layers
  int classes = 0;
  kernels::Activation activation = kernels::Activation::kGelu;
};

struct Parameter {
  std::string name;   // "layers.2.weight"
  size_t offset = 0;  // into the flat parameter and gradient buffers
  size_t size = 0;
};

class Mlp {
 public:
  // Initializes like torch.nn.Linear: weights and biases uniform in ±1/sqrt(fan_in), from
  // `seed` (identical on every rank).
  static Result<Mlp> Create(ComputeDevice& device, const ModelShape& shape, int batch, uint64_t seed);

  const std::vector<Parameter>& parameters() const { return parameters_; }
  size_t parameter_count() const { return parameter_count_; }
  float* params() { return params_; }
  float* grads() { return grads_; }
  const ModelShape& shape() const { return shape_; }

  // x [batch × features] and labels [batch] already on the device. Adds the loss to the
  // device's LossStats.
  Status Forward(const float* x, const int32_t* labels);
  // Gradients of the mean loss times loss_scale (1/accumulation steps), added to the
  // gradient buffer when accumulate. grad_ready(i) runs as soon as parameter i's gradient
  // is final, in reverse registration order, as autograd hooks do.
  Status Backward(const float* x, const int32_t* labels, float loss_scale, bool accumulate,
                  const std::function<Status(int)>& grad_ready);

 private:
  struct Layer {
    int in = 0;
    int out = 0;
    kernels::Activation activation = kernels::Activation::kNone;
    int weight = 0;  // parameter indices
    int bias = 0;
    float* pre = nullptr;  // [batch × out] pre-activation
    float* out_values = nullptr;  // [batch × out] activation (== pre for the last layer)
  };

  Mlp(ComputeDevice& device, ModelShape shape, int batch) : device_(&device), shape_(shape), batch_(batch) {}
  float* param(int index) { return params_ + parameters_[static_cast<size_t>(index)].offset; }
  float* grad(int index) { return grads_ + parameters_[static_cast<size_t>(index)].offset; }

  ComputeDevice* device_;
  ModelShape shape_;
  int batch_;
  std::vector<Layer> layers_;
  std::vector<Parameter> parameters_;
  size_t parameter_count_ = 0;
  float* params_ = nullptr;
  float* grads_ = nullptr;
  float* probs_ = nullptr;
  float* dlogits_ = nullptr;
  // Two ping-pong buffers for the gradient flowing back through the layers.
  float* dactivation_[2] = {nullptr, nullptr};
};

}  // namespace rankscope::trainer
