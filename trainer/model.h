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
#include "trainer/annotations.h"
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

// Which part of the model an Mlp holds and how many micro-batches' activations it keeps: a
// pipeline stage holds layers [first_layer, end_layer) and the activations of every
// micro-batch it has in flight (forward done, backward not yet).
struct ModelPart {
  int first_layer = 0;
  int end_layer = -1;  // -1: through the last layer
  int activation_sets = 1;
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
                            ParameterStorage storage = ParameterStorage::kOwned, const ModelPart& part = {});
  // The whole model's layers: depth + 1.
  static int LayerCount(const ModelShape& shape) { return shape.depth + 1; }
  // Multiply-adds per row of each of the whole model's layers over a forward and backward
  // pass (3 · in · out; 2 · in · out for the first, which computes no input gradient): what
  // a pipeline balances its stages by.
  static std::vector<int64_t> LayerWork(const ModelShape& shape);
  // The initial values of every parameter, flat in registration order (what Create puts in
  // an owned buffer).
  static std::vector<float> InitialParameters(const ModelShape& shape, uint64_t seed);

  const std::vector<Parameter>& parameters() const { return parameters_; }
  size_t parameter_count() const { return parameter_count_; }
  // The flat buffers; null with kBound storage.
  float* params() { return params_; }
  float* grads() { return grads_; }
  const ModelShape& shape() const { return shape_; }

  // The layers this Mlp holds; hooks and LayerSpan count them from 0.
  int layer_count() const { return static_cast<int>(layers_.size()); }
  int first_layer() const { return first_layer_; }
  // Whether it holds the last layer, and so computes the loss.
  bool computes_loss() const { return first_layer_ + layer_count() == LayerCount(shape_); }
  int input_width() const { return layers_.front().in; }
  int output_width() const { return layers_.back().out; }
  // Which set of activation buffers the next Forward fills and the next Backward reads
  // (a pipeline's micro-batch in flight), 0 ≤ set < activation_sets.
  void SelectActivations(int set) { set_ = static_cast<size_t>(set); }
  // The last held layer's activation [batch × output_width] after Forward (what a stage
  // sends on), and d(loss)/d(input) [batch × input_width] after Backward when the first
  // held layer is not the model's first (what a stage sends back).
  const float* output() const { return layers_.back().out_values[set_]; }
  const float* input_gradient() const { return input_gradient_; }
  // Layer l's parameters, its weight then its bias, are the flat range [offset, offset + count).
  struct Span {
    size_t offset = 0;
    size_t count = 0;
  };
  Span LayerSpan(int layer) const;
  // kBound storage: layer l's weight and bias from now on are params[0, count) and their
  // gradients grads[0, count) (count = LayerSpan(l).count, weight first).
  void BindLayer(int layer, float* params, float* grads);

  // `input` [batch × input_width] (the data x, or the previous stage's output) and, when
  // computes_loss, labels [batch], already on the device. Adds the loss to the device's
  // LossStats. `micro_batch` labels the "forward" range (a pipeline).
  Status Forward(const float* input, const int32_t* labels, const LayerHooks& hooks = {},
                 const MicroBatchFields* micro_batch = nullptr);
  // Gradients of the mean loss times loss_scale (1/accumulation steps), added to the
  // gradient buffer when accumulate. grad_ready(i) runs as soon as parameter i's gradient
  // is final, in reverse registration order, as autograd hooks do. Without the loss
  // (a pipeline stage before the last), `upstream` [batch × output_width] is d(loss)/d(output)
  // from the next stage, already scaled; it is overwritten.
  Status Backward(const float* input, const int32_t* labels, float loss_scale, bool accumulate,
                  const std::function<Status(int)>& grad_ready, const LayerHooks& hooks = {},
                  float* upstream = nullptr, const MicroBatchFields* micro_batch = nullptr);

 private:
  struct Layer {
    int in = 0;
    int out = 0;
    kernels::Activation activation = kernels::Activation::kNone;
    int weight = 0;  // parameter indices
    int bias = 0;
    std::vector<float*> pre;         // per activation set: [batch × out] pre-activation
    std::vector<float*> out_values;  // per activation set: [batch × out] activation (== pre
                                     // for the model's last layer)
  };

  Mlp(ComputeDevice& device, ModelShape shape, int batch) : device_(&device), shape_(shape), batch_(batch) {}
  float* param(int index) { return param_at_[static_cast<size_t>(index)]; }
  float* grad(int index) { return grad_at_[static_cast<size_t>(index)]; }

  ComputeDevice* device_;
  ModelShape shape_;
  int batch_;
  int first_layer_ = 0;
  size_t set_ = 0;
  std::vector<Layer> layers_;
  std::vector<Parameter> parameters_;
  size_t parameter_count_ = 0;
  float* params_ = nullptr;
  float* grads_ = nullptr;
  // Where each parameter and its gradient are now: into the flat buffers, or bound.
  std::vector<float*> param_at_;
  std::vector<float*> grad_at_;
  std::vector<float*> probs_;  // per activation set, when computes_loss
  float* dlogits_ = nullptr;
  float* input_gradient_ = nullptr;  // when first_layer > 0
  // Two ping-pong buffers for the gradient flowing back through the layers.
  float* dactivation_[2] = {nullptr, nullptr};
};

}  // namespace rankscope::trainer
