#include "trainer/model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "trainer/annotations.h"

namespace rankscope::trainer {
namespace {

// SplitMix64 stream for initialization; the data generator uses its own streams.
class InitRandom {
 public:
  explicit InitRandom(uint64_t seed) : state_(seed ^ 0x696e697469616c21ull) {}
  double Uniform() {  // [0, 1)
    uint64_t x = (state_ += 0x9E3779B97F4A7C15ull);
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    x ^= x >> 31;
    return static_cast<double>(x >> 11) * 0x1.0p-53;
  }

 private:
  uint64_t state_;
};

}  // namespace

namespace {

// The layers' widths: features, width × depth, classes.
std::vector<int> Widths(const ModelShape& shape) {
  std::vector<int> widths = {shape.features};
  for (int i = 0; i < shape.depth; ++i) widths.push_back(shape.width);
  widths.push_back(shape.classes);
  return widths;
}

}  // namespace

std::vector<float> Mlp::InitialParameters(const ModelShape& shape, uint64_t seed) {
  const std::vector<int> widths = Widths(shape);
  size_t count = 0;
  for (size_t l = 0; l + 1 < widths.size(); ++l) count += static_cast<size_t>(widths[l] + 1) * widths[l + 1];
  std::vector<float> host(count);
  InitRandom random(seed);
  size_t at = 0;
  for (size_t l = 0; l + 1 < widths.size(); ++l) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(widths[l]));
    // The weight [in × out], then the bias [out]: registration order.
    const size_t layer_count = static_cast<size_t>(widths[l] + 1) * widths[l + 1];
    for (size_t i = 0; i < layer_count; ++i) host[at++] = static_cast<float>((2.0 * random.Uniform() - 1.0) * bound);
  }
  return host;
}

std::vector<int64_t> Mlp::LayerWork(const ModelShape& shape) {
  const std::vector<int> widths = Widths(shape);
  std::vector<int64_t> work;
  for (size_t l = 0; l + 1 < widths.size(); ++l) {
    // Forward, the weight gradient, and (but for the first layer) the input gradient.
    const int64_t passes = l == 0 ? 2 : 3;
    work.push_back(passes * widths[l] * widths[l + 1]);
  }
  return work;
}

Result<Mlp> Mlp::Create(ComputeDevice& device, const ModelShape& shape, int batch, uint64_t seed,
                        ParameterStorage storage, const ModelPart& part) {
  Mlp model(device, shape, batch);
  const std::vector<int> widths = Widths(shape);
  const int total = LayerCount(shape);
  const int end = part.end_layer < 0 ? total : part.end_layer;
  if (part.first_layer < 0 || part.first_layer >= end || end > total || part.activation_sets < 1) {
    return InvalidArgument(fmt::format("a model part of layers [{}, {}) with {} activation set(s) is not part of a "
                                       "model of {} layers", part.first_layer, end, part.activation_sets, total));
  }
  model.first_layer_ = part.first_layer;

  // Where the part's parameters start in the whole model's registration order.
  size_t skipped = 0;
  for (int l = 0; l < part.first_layer; ++l) skipped += static_cast<size_t>(widths[l] + 1) * widths[l + 1];
  size_t max_width = 0;
  for (int l = part.first_layer; l < end; ++l) {
    Layer layer;
    layer.in = widths[static_cast<size_t>(l)];
    layer.out = widths[static_cast<size_t>(l) + 1];
    layer.activation = l + 1 == total ? kernels::Activation::kNone : shape.activation;
    const auto add = [&](std::string name, size_t size) {
      model.parameters_.push_back({std::move(name), model.parameter_count_, size});
      model.parameter_count_ += size;
      return static_cast<int>(model.parameters_.size() - 1);
    };
    layer.weight = add(fmt::format("layers.{}.weight", l), static_cast<size_t>(layer.in) * layer.out);
    layer.bias = add(fmt::format("layers.{}.bias", l), static_cast<size_t>(layer.out));
    max_width = std::max(max_width, static_cast<size_t>(std::max(layer.in, layer.out)));
    model.layers_.push_back(layer);
  }
  model.param_at_.assign(model.parameters_.size(), nullptr);
  model.grad_at_.assign(model.parameters_.size(), nullptr);

  if (storage == ParameterStorage::kOwned) {
    RS_ASSIGN_OR_RETURN(model.params_, device.Allocate(model.parameter_count_, MemoryCategory::kParameters));
    RS_ASSIGN_OR_RETURN(model.grads_, device.Allocate(model.parameter_count_, MemoryCategory::kGradients));
    for (size_t i = 0; i < model.parameters_.size(); ++i) {
      model.param_at_[i] = model.params_ + model.parameters_[i].offset;
      model.grad_at_[i] = model.grads_ + model.parameters_[i].offset;
    }
  }
  const size_t rows = static_cast<size_t>(batch);
  const auto sets = static_cast<size_t>(part.activation_sets);
  for (Layer& layer : model.layers_) {
    for (size_t set = 0; set < sets; ++set) {
      RS_ASSIGN_OR_RETURN(float* pre, device.Allocate(rows * static_cast<size_t>(layer.out), MemoryCategory::kActivations));
      float* out_values = pre;
      if (layer.activation != kernels::Activation::kNone) {
        RS_ASSIGN_OR_RETURN(out_values, device.Allocate(rows * static_cast<size_t>(layer.out), MemoryCategory::kActivations));
      }
      layer.pre.push_back(pre);
      layer.out_values.push_back(out_values);
    }
  }
  if (model.computes_loss()) {
    for (size_t set = 0; set < sets; ++set) {
      RS_ASSIGN_OR_RETURN(float* probs, device.Allocate(rows * static_cast<size_t>(shape.classes), MemoryCategory::kActivations));
      model.probs_.push_back(probs);
    }
    RS_ASSIGN_OR_RETURN(model.dlogits_, device.Allocate(rows * static_cast<size_t>(shape.classes), MemoryCategory::kActivations));
  }
  if (part.first_layer > 0) {
    RS_ASSIGN_OR_RETURN(model.input_gradient_,
                        device.Allocate(rows * static_cast<size_t>(model.input_width()), MemoryCategory::kActivations));
  }
  for (float*& buffer : model.dactivation_) {
    RS_ASSIGN_OR_RETURN(buffer, device.Allocate(rows * max_width, MemoryCategory::kActivations));
  }

  if (storage == ParameterStorage::kOwned) {
    const std::vector<float> host = InitialParameters(shape, seed);
    RS_RETURN_IF_ERROR(device.CopyToDevice(host.data() + skipped, model.params_, model.parameter_count_));
  }
  return model;
}

Mlp::Span Mlp::LayerSpan(int layer) const {
  const Layer& l = layers_[static_cast<size_t>(layer)];
  const Parameter& weight = parameters_[static_cast<size_t>(l.weight)];
  const Parameter& bias = parameters_[static_cast<size_t>(l.bias)];
  return {weight.offset, weight.size + bias.size};
}

void Mlp::BindLayer(int layer, float* params, float* grads) {
  const Layer& l = layers_[static_cast<size_t>(layer)];
  const size_t weight_size = parameters_[static_cast<size_t>(l.weight)].size;
  param_at_[static_cast<size_t>(l.weight)] = params;
  param_at_[static_cast<size_t>(l.bias)] = params + weight_size;
  grad_at_[static_cast<size_t>(l.weight)] = grads;
  grad_at_[static_cast<size_t>(l.bias)] = grads + weight_size;
}

namespace {

Status CallHook(const std::function<Status(int)>& hook, size_t layer) {
  return hook ? hook(static_cast<int>(layer)) : Status::Ok();
}

}  // namespace

Status Mlp::Forward(const float* input, const int32_t* labels, const LayerHooks& hooks,
                    const MicroBatchFields* micro_batch) {
  PassRange range("forward", micro_batch);
  for (size_t l = 0; l < layers_.size(); ++l) {
    Layer& layer = layers_[l];
    RS_RETURN_IF_ERROR(CallHook(hooks.before_forward, l));
    RS_RETURN_IF_ERROR(device_->LinearForward(batch_, layer.in, layer.out, input, param(layer.weight), layer.pre[set_]));
    RS_RETURN_IF_ERROR(device_->BiasActivationForward(layer.activation, batch_, layer.out, param(layer.bias),
                                                      layer.pre[set_], layer.out_values[set_]));
    RS_RETURN_IF_ERROR(CallHook(hooks.after_forward, l));
    input = layer.out_values[set_];
  }
  if (!computes_loss()) return Status::Ok();
  return device_->SoftmaxCrossEntropyForward(batch_, shape_.classes, layers_.back().out_values[set_], labels,
                                             probs_[set_]);
}

Status Mlp::Backward(const float* input, const int32_t* labels, float loss_scale, bool accumulate,
                     const std::function<Status(int)>& grad_ready, const LayerHooks& hooks, float* upstream,
                     const MicroBatchFields* micro_batch) {
  PassRange range("backward", micro_batch);
  if (computes_loss()) {
    RS_RETURN_IF_ERROR(device_->SoftmaxCrossEntropyBackward(batch_, shape_.classes, probs_[set_], labels,
                                                            loss_scale / static_cast<float>(batch_), dlogits_));
    // d(output of layer l) arrives in `upstream`; dpre overwrites it in place.
    upstream = dlogits_;
  } else if (upstream == nullptr) {
    return InvalidArgument("backward: a model part without the loss needs the gradient of its output");
  }
  int next_buffer = 0;
  for (size_t l = layers_.size(); l-- > 0;) {
    Layer& layer = layers_[l];
    const float* layer_input = l == 0 ? input : layers_[l - 1].out_values[set_];
    RS_RETURN_IF_ERROR(CallHook(hooks.before_backward, l));
    RS_RETURN_IF_ERROR(device_->BiasActivationBackward(layer.activation, batch_, layer.out, layer.pre[set_], upstream,
                                                       upstream, grad(layer.bias), accumulate));
    RS_RETURN_IF_ERROR(grad_ready(layer.bias));
    RS_RETURN_IF_ERROR(device_->LinearBackwardWeight(batch_, layer.in, layer.out, upstream, layer_input,
                                                     grad(layer.weight), accumulate));
    RS_RETURN_IF_ERROR(grad_ready(layer.weight));
    // No gradient for the input data; a later stage's input gradient goes back to the
    // stage before it.
    if (l == 0 && first_layer_ == 0) return CallHook(hooks.after_backward, l);
    float* downstream = l == 0 ? input_gradient_ : dactivation_[next_buffer];
    next_buffer ^= 1;
    RS_RETURN_IF_ERROR(device_->LinearBackwardData(batch_, layer.in, layer.out, upstream, param(layer.weight),
                                                   downstream));
    // After the last use of its weights: FSDP may release them.
    RS_RETURN_IF_ERROR(CallHook(hooks.after_backward, l));
    upstream = downstream;
  }
  return Status::Ok();
}

}  // namespace rankscope::trainer
