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

// Where a model's parameters and gradients live.
enum class ParameterStorage {
  kOwned,  // one flat buffer each, allocated by the model (DDP, one rank)
  kBound,  // none: each layer's are bound by the caller (BindLayer) before use (FSDP)
};

// Calls around each layer's work, by layer index (0 = the input layer); an empty function
// is skipped. FSDP gathers a layer's parameters before its forward and backward and
// scatters its gradients after its backward.
struct LayerHooks {
  std::function<Status(int)> before_forward;
  std::function<Status(int)> after_forward;
  std::function<Status(int)> before_backward;
  std::function<Status(int)> after_backward;  // once its gradients are final
};

class Mlp {
 public:
  // Initializes like torch.nn.Linear: weights and biases uniform in ±1/sqrt(fan_in), from
  // `seed` (identical on every rank). With kBound storage the values are not on the device:
  // InitialParameters gives them.
  static Result<Mlp> Create(ComputeDevice& device, const ModelShape& shape, int batch, uint64_t seed,
                            ParameterStorage storage = ParameterStorage::kOwned);
  // The initial values of every parameter, flat in registration order (what Create puts in
  // an owned buffer).
  static std::vector<float> InitialParameters(const ModelShape& shape, uint64_t seed);

  const std::vector<Parameter>& parameters() const { return parameters_; }
  size_t parameter_count() const { return parameter_count_; }
  // The flat buffers; null with kBound storage.
  float* params() { return params_; }
  float* grads() { return grads_; }
  const ModelShape& shape() const { return shape_; }

  int layer_count() const { return static_cast<int>(layers_.size()); }
  // Layer l's parameters, its weight then its bias, are the flat range [offset, offset + count).
  struct Span {
    size_t offset = 0;
    size_t count = 0;
  };
  Span LayerSpan(int layer) const;
  // kBound storage: layer l's weight and bias from now on are params[0, count) and their
  // gradients grads[0, count) (count = LayerSpan(l).count, weight first).
  void BindLayer(int layer, float* params, float* grads);

  // x [batch × features] and labels [batch] already on the device. Adds the loss to the
  // device's LossStats.
  Status Forward(const float* x, const int32_t* labels, const LayerHooks& hooks = {});
  // Gradients of the mean loss times loss_scale (1/accumulation steps), added to the
  // gradient buffer when accumulate. grad_ready(i) runs as soon as parameter i's gradient
  // is final, in reverse registration order, as autograd hooks do.
  Status Backward(const float* x, const int32_t* labels, float loss_scale, bool accumulate,
                  const std::function<Status(int)>& grad_ready, const LayerHooks& hooks = {});

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
  float* param(int index) { return param_at_[static_cast<size_t>(index)]; }
  float* grad(int index) { return grad_at_[static_cast<size_t>(index)]; }

  ComputeDevice* device_;
  ModelShape shape_;
  int batch_;
  std::vector<Layer> layers_;
  std::vector<Parameter> parameters_;
  size_t parameter_count_ = 0;
  float* params_ = nullptr;
  float* grads_ = nullptr;
  // Where each parameter and its gradient are now: into the flat buffers, or bound.
  std::vector<float*> param_at_;
  std::vector<float*> grad_at_;
  float* probs_ = nullptr;
  float* dlogits_ = nullptr;
  // Two ping-pong buffers for the gradient flowing back through the layers.
  float* dactivation_[2] = {nullptr, nullptr};
};

}  // namespace rankscope::trainer
