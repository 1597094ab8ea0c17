// The reference MLP on the CPU device: its gradients against central finite differences of
// its own loss, the order and timing of the gradient hooks, and gradient accumulation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "trainer/device.h"
#include "trainer/model.h"
#include "trainer/synthetic_data.h"

namespace rankscope::trainer {
namespace {

constexpr int kBatch = 4;

ModelShape SmallShape(kernels::Activation activation) {
  ModelShape shape;
  shape.features = 5;
  shape.width = 7;
  shape.depth = 2;
  shape.classes = 3;
  shape.activation = activation;
  return shape;
}

// (threads, activation)
class MlpTest : public ::testing::TestWithParam<std::tuple<int, kernels::Activation>> {
 protected:
  void SetUp() override {
    device_ = MakeCpuDevice(std::get<0>(GetParam()));
    ModelShape shape = SmallShape(std::get<1>(GetParam()));
    shape.depth = Depth();
    Result<Mlp> model = Mlp::Create(*device_, shape, kBatch, 77);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    model_ = std::make_unique<Mlp>(std::move(model).value());

    const SyntheticDataset dataset(3, 100, shape.features, shape.classes);
    std::vector<float> x(static_cast<size_t>(kBatch * shape.features));
    std::vector<int32_t> labels(kBatch);
    for (int i = 0; i < kBatch; ++i) {
      dataset.Sample(i, &x[static_cast<size_t>(i * shape.features)], &labels[static_cast<size_t>(i)]);
    }
    // Labels of more than one class, so the loss is not trivially pushed one way.
    labels[0] = 0;
    labels[1] = 1;
    labels[2] = 2;
    Result<float*> device_x = device_->AllocateFloats(x.size());
    Result<int32_t*> device_labels = device_->AllocateLabels(labels.size());
    ASSERT_TRUE(device_x.ok() && device_labels.ok());
    x_ = *device_x;
    labels_ = *device_labels;
    ASSERT_TRUE(device_->CopyToDevice(x.data(), x_, x.size()).ok());
    ASSERT_TRUE(device_->CopyLabelsToDevice(labels.data(), labels_, labels.size()).ok());
  }

  std::vector<float> Read(const float* data) {
    std::vector<float> host(model_->parameter_count());
    EXPECT_TRUE(device_->CopyToHost(data, host.data(), host.size()).ok());
    return host;
  }

  // The mean loss of the batch at the given parameters, as the device reports it.
  double Loss(const std::vector<float>& params) {
    EXPECT_TRUE(device_->CopyToDevice(params.data(), model_->params(), params.size()).ok());
    EXPECT_TRUE(model_->Forward(x_, labels_).ok());
    Result<LossStats> stats = device_->TakeLoss();
    EXPECT_TRUE(stats.ok());
    if (!stats.ok()) return NAN;
    EXPECT_EQ(stats->rows, kBatch);
    return stats->loss_sum / static_cast<double>(stats->rows);
  }

  // Forward and backward at the current parameters; returns the gradients.
  std::vector<float> Gradients(float loss_scale = 1.0f, bool accumulate = false) {
    EXPECT_TRUE(model_->Forward(x_, labels_).ok());
    EXPECT_TRUE(device_->TakeLoss().ok());
    EXPECT_TRUE(model_->Backward(x_, labels_, loss_scale, accumulate, [](int) { return Status::Ok(); }).ok());
    return Read(model_->grads());
  }

  bool IsGelu() const { return std::get<1>(GetParam()) == kernels::Activation::kGelu; }
  virtual int Depth() const { return 2; }

  void CheckFiniteDifferences();

  std::unique_ptr<ComputeDevice> device_;
  std::unique_ptr<Mlp> model_;
  float* x_ = nullptr;
  int32_t* labels_ = nullptr;
};

TEST_P(MlpTest, ParametersInRegistrationOrder) {
  const std::vector<Parameter>& p = model_->parameters();
  const std::vector<std::pair<std::string, size_t>> expected = {
      {"layers.0.weight", 35}, {"layers.0.bias", 7}, {"layers.1.weight", 49},
      {"layers.1.bias", 7},    {"layers.2.weight", 21}, {"layers.2.bias", 3}};
  ASSERT_EQ(p.size(), expected.size());
  size_t offset = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    EXPECT_EQ(p[i].name, expected[i].first);
    EXPECT_EQ(p[i].size, expected[i].second);
    EXPECT_EQ(p[i].offset, offset);
    offset += p[i].size;
  }
  EXPECT_EQ(model_->parameter_count(), offset);
  EXPECT_EQ(offset, 122u);
}

TEST_P(MlpTest, InitializationIsBoundedAndSeeded) {
  const std::vector<float> params = Read(model_->params());
  const std::vector<double> fan_in = {5, 5, 7, 7, 7, 7};  // weight and bias of each layer
  for (size_t i = 0; i < model_->parameters().size(); ++i) {
    const Parameter& p = model_->parameters()[i];
    const double bound = 1.0 / std::sqrt(fan_in[i]);
    for (size_t j = 0; j < p.size; ++j) {
      EXPECT_LE(std::abs(params[p.offset + j]), bound) << p.name << "[" << j << "]";
    }
  }
  Result<Mlp> same = Mlp::Create(*device_, model_->shape(), kBatch, 77);
  Result<Mlp> other = Mlp::Create(*device_, model_->shape(), kBatch, 78);
  ASSERT_TRUE(same.ok() && other.ok());
  std::vector<float> same_params(params.size());
  std::vector<float> other_params(params.size());
  ASSERT_TRUE(device_->CopyToHost(same->params(), same_params.data(), params.size()).ok());
  ASSERT_TRUE(device_->CopyToHost(other->params(), other_params.data(), params.size()).ok());
  EXPECT_EQ(params, same_params);
  EXPECT_NE(params, other_params);
  // Gradients start at zero.
  EXPECT_EQ(Read(model_->grads()), std::vector<float>(params.size(), 0.0f));
}

void MlpTest::CheckFiniteDifferences() {
  // Tolerances for fp32: the loss (about 1) carries a rounding error of a few 1e-7, which a
  // central difference with eps = 1e-2 turns into a few 1e-5 at most; the truncation error
  // eps²/6 · f''' is of the same order for this small, smooth network. Measured: at most
  // 4e-6 absolute and 3e-4 relative. A wrong factor, sign or index moves a gradient far
  // beyond 5e-3 relative + 5e-5 absolute (a 2 % error in one element is caught).
  constexpr float kEps = 1e-2f;
  constexpr double kRelative = 5e-3;
  constexpr double kAbsolute = 5e-5;
  const std::vector<float> params = Read(model_->params());
  const std::vector<float> grads = Gradients();
  ASSERT_EQ(grads.size(), params.size());

  auto difference = [&](size_t i, float eps) {
    std::vector<float> shifted = params;
    shifted[i] = params[i] + eps;
    const double plus = Loss(shifted);
    shifted[i] = params[i] - eps;
    const double minus = Loss(shifted);
    // The step actually taken in fp32.
    const double step = static_cast<double>(params[i] + eps) - static_cast<double>(params[i] - eps);
    return (plus - minus) / step;
  };
  auto close = [&](double a, double b) {
    return std::abs(a - b) <= kRelative * std::max(std::abs(a), std::abs(b)) + kAbsolute;
  };

  size_t skipped = 0;
  double largest = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    const double numeric = difference(i, kEps);
    largest = std::max(largest, std::abs(numeric));
    if (!IsGelu()) {
      // ReLU: a perturbation that moves a pre-activation across 0 makes the difference
      // quotient meaningless. Detect it by the quotient changing with the step; the analytic
      // gradient plays no part in that decision, so a wrong gradient is not excused by it.
      if (!close(numeric, difference(i, kEps / 2))) {
        ++skipped;
        continue;
      }
    }
    EXPECT_TRUE(close(grads[i], numeric)) << "parameter element " << i << ": backward " << grads[i]
                                          << ", finite difference " << numeric;
  }
  EXPECT_LE(skipped, params.size() / 10) << "too many ReLU kinks to judge the gradient";
  EXPECT_GT(largest, 1e-2) << "the loss hardly depends on the parameters: a vacuous check";
  // The model is left with its original parameters.
  (void)Loss(params);
}

TEST_P(MlpTest, GradientsMatchFiniteDifferences) { CheckFiniteDifferences(); }

// depth 0: one linear layer straight from the input to the logits.
class LinearMlpTest : public MlpTest {
 protected:
  int Depth() const override { return 0; }
};

TEST_P(LinearMlpTest, GradientsMatchFiniteDifferences) {
  ASSERT_EQ(model_->parameter_count(), 18u);  // 3 × 5 weights + 3 biases
  CheckFiniteDifferences();
}

TEST_P(LinearMlpTest, GradientHooksRunBiasThenWeight) {
  ASSERT_TRUE(model_->Forward(x_, labels_).ok());
  std::vector<int> order;
  ASSERT_TRUE(model_->Backward(x_, labels_, 1.0f, false, [&](int p) {
    order.push_back(p);
    return Status::Ok();
  }).ok());
  EXPECT_EQ(order, (std::vector<int>{1, 0}));
}

TEST_P(MlpTest, GradientHooksRunOnceEachInReverseOrderWhenFinal) {
  ASSERT_TRUE(model_->Forward(x_, labels_).ok());
  std::vector<int> order;
  std::vector<std::vector<float>> at_hook(model_->parameters().size());
  const auto hook = [&](int parameter) {
    order.push_back(parameter);
    const Parameter& p = model_->parameters()[static_cast<size_t>(parameter)];
    std::vector<float> now(p.size);
    Status status = device_->CopyToHost(model_->grads() + p.offset, now.data(), p.size);
    at_hook[static_cast<size_t>(parameter)] = std::move(now);
    return status;
  };
  ASSERT_TRUE(model_->Backward(x_, labels_, 1.0f, false, hook).ok());
  // Bias before weight within a layer, the last layer first.
  EXPECT_EQ(order, (std::vector<int>{5, 4, 3, 2, 1, 0}));
  // Each gradient was already final when its hook ran.
  const std::vector<float> grads = Read(model_->grads());
  for (size_t i = 0; i < model_->parameters().size(); ++i) {
    const Parameter& p = model_->parameters()[i];
    EXPECT_EQ(at_hook[i], std::vector<float>(grads.begin() + static_cast<std::ptrdiff_t>(p.offset),
                                             grads.begin() + static_cast<std::ptrdiff_t>(p.offset + p.size)))
        << p.name;
  }
}

TEST_P(MlpTest, InitialParametersAreWhatCreatePutsOnTheDevice) {
  EXPECT_EQ(Mlp::InitialParameters(model_->shape(), 77), Read(model_->params()));
  EXPECT_NE(Mlp::InitialParameters(model_->shape(), 78), Read(model_->params()));
}

// FSDP's use of the model: no flat buffers, each layer bound to buffers of its own. Bound
// to copies of the owned model's values, every loss and gradient bit is the same; the
// layer hooks run around each layer's work, forward in order and backward in reverse.
TEST_P(MlpTest, BoundLayersComputeWhatOwnedBuffersDoAndHooksRunAroundEachLayer) {
  Result<Mlp> created = Mlp::Create(*device_, model_->shape(), kBatch, 77, ParameterStorage::kBound);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  Mlp& bound = *created;
  EXPECT_EQ(bound.params(), nullptr);
  EXPECT_EQ(bound.grads(), nullptr);
  ASSERT_EQ(bound.layer_count(), model_->layer_count());
  const std::vector<float> initial = Mlp::InitialParameters(model_->shape(), 77);
  std::vector<float*> layer_grads;
  size_t next_offset = 0;
  for (int l = 0; l < bound.layer_count(); ++l) {
    const Mlp::Span span = bound.LayerSpan(l);
    EXPECT_EQ(span.offset, next_offset) << "layer " << l;  // contiguous, weight then bias
    next_offset = span.offset + span.count;
    Result<float*> params = device_->AllocateFloats(span.count);
    Result<float*> grads = device_->AllocateFloats(span.count);
    ASSERT_TRUE(params.ok() && grads.ok());
    ASSERT_TRUE(device_->CopyToDevice(initial.data() + span.offset, *params, span.count).ok());
    bound.BindLayer(l, *params, *grads);
    layer_grads.push_back(*grads);
  }
  EXPECT_EQ(next_offset, bound.parameter_count());

  std::vector<std::string> calls;
  const auto note = [&calls](const char* what) {
    return [&calls, what](int layer) {
      calls.push_back(what + std::to_string(layer));
      return Status::Ok();
    };
  };
  LayerHooks hooks{note("f"), note("F"), note("b"), note("B")};
  ASSERT_TRUE(model_->Forward(x_, labels_).ok());
  Result<LossStats> owned_loss = device_->TakeLoss();
  ASSERT_TRUE(bound.Forward(x_, labels_, hooks).ok());
  Result<LossStats> bound_loss = device_->TakeLoss();
  ASSERT_TRUE(owned_loss.ok() && bound_loss.ok());
  EXPECT_EQ(owned_loss->loss_sum, bound_loss->loss_sum);
  const auto no_hook = [](int) { return Status::Ok(); };
  ASSERT_TRUE(model_->Backward(x_, labels_, 1.0f, false, no_hook).ok());
  ASSERT_TRUE(bound.Backward(x_, labels_, 1.0f, false, no_hook, hooks).ok());
  const std::vector<float> owned_grads = Read(model_->grads());
  for (int l = 0; l < bound.layer_count(); ++l) {
    const Mlp::Span span = bound.LayerSpan(l);
    std::vector<float> mine(span.count);
    ASSERT_TRUE(device_->CopyToHost(layer_grads[static_cast<size_t>(l)], mine.data(), span.count).ok());
    EXPECT_EQ(mine, std::vector<float>(owned_grads.begin() + static_cast<std::ptrdiff_t>(span.offset),
                                       owned_grads.begin() + static_cast<std::ptrdiff_t>(span.offset + span.count)))
        << "layer " << l;
  }
  std::vector<std::string> expected;
  for (int l = 0; l < bound.layer_count(); ++l) {
    expected.push_back("f" + std::to_string(l));
    expected.push_back("F" + std::to_string(l));
  }
  for (int l = bound.layer_count(); l-- > 0;) {
    expected.push_back("b" + std::to_string(l));
    expected.push_back("B" + std::to_string(l));
  }
  EXPECT_EQ(calls, expected);
}

TEST_P(MlpTest, HookErrorStopsTheBackwardPass) {
  ASSERT_TRUE(model_->Forward(x_, labels_).ok());
  std::vector<int> order;
  const auto hook = [&](int parameter) {
    order.push_back(parameter);
    return parameter == 3 ? Unavailable("peer lost") : Status::Ok();
  };
  const Status status = model_->Backward(x_, labels_, 1.0f, false, hook);
  EXPECT_EQ(status.code(), StatusCode::kUnavailable);
  EXPECT_EQ(order, (std::vector<int>{5, 4, 3}));
}

TEST_P(MlpTest, AccumulateAddsAndOverwriteReplaces) {
  const std::vector<float> once = Gradients();
  const std::vector<float> twice = Gradients(1.0f, /*accumulate=*/true);
  ASSERT_EQ(twice.size(), once.size());
  for (size_t i = 0; i < once.size(); ++i) EXPECT_FLOAT_EQ(twice[i], 2.0f * once[i]) << "element " << i;

  // Without accumulate, stale gradients are overwritten, not added to.
  const std::vector<float> stale(model_->parameter_count(), 7.0f);
  ASSERT_TRUE(device_->CopyToDevice(stale.data(), model_->grads(), stale.size()).ok());
  EXPECT_EQ(Gradients(), once);

  // loss_scale scales the gradients (1/accumulation steps in training).
  const std::vector<float> quarter = Gradients(0.25f);
  for (size_t i = 0; i < once.size(); ++i) EXPECT_FLOAT_EQ(quarter[i], 0.25f * once[i]) << "element " << i;

  // Four quarter-scaled accumulated micro-steps equal one full step.
  (void)Gradients(0.25f, false);
  for (int micro = 1; micro < 4; ++micro) (void)Gradients(0.25f, true);
  const std::vector<float> accumulated = Read(model_->grads());
  for (size_t i = 0; i < once.size(); ++i) {
    EXPECT_NEAR(accumulated[i], once[i], 1e-6 + 1e-5 * std::abs(once[i])) << "element " << i;
  }
  // Not vacuous: the gradients are not all zero.
  EXPECT_GT(std::abs(*std::max_element(once.begin(), once.end(),
                                       [](float a, float b) { return std::abs(a) < std::abs(b); })),
            1e-3f);
}

TEST_P(MlpTest, ForwardReportsTheLossOfEachBatch) {
  ASSERT_TRUE(model_->Forward(x_, labels_).ok());
  Result<LossStats> first = device_->TakeLoss();
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->rows, kBatch);
  EXPECT_GE(first->correct, 0);
  EXPECT_LE(first->correct, kBatch);
  // Near log(3) for a freshly initialized 3-class model, and certainly positive and finite.
  EXPECT_GT(first->loss_sum, 0.0);
  EXPECT_LT(first->loss_sum / kBatch, 5.0);
  // Two forward passes add up; TakeLoss resets.
  ASSERT_TRUE(model_->Forward(x_, labels_).ok());
  ASSERT_TRUE(model_->Forward(x_, labels_).ok());
  Result<LossStats> second = device_->TakeLoss();
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->rows, 2 * kBatch);
  EXPECT_NEAR(second->loss_sum, 2 * first->loss_sum, 1e-9);
  Result<LossStats> empty = device_->TakeLoss();
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->rows, 0);
}

std::string Name(const ::testing::TestParamInfo<std::tuple<int, kernels::Activation>>& info) {
  return std::string(std::get<1>(info.param) == kernels::Activation::kGelu ? "Gelu" : "Relu") + "Threads" +
         std::to_string(std::get<0>(info.param));
}

INSTANTIATE_TEST_SUITE_P(CpuDevice, MlpTest,
                         ::testing::Combine(::testing::Values(1, 2),
                                            ::testing::Values(kernels::Activation::kGelu, kernels::Activation::kRelu)),
                         Name);
INSTANTIATE_TEST_SUITE_P(CpuDevice, LinearMlpTest,
                         ::testing::Combine(::testing::Values(1, 2), ::testing::Values(kernels::Activation::kGelu)),
                         Name);

TEST(MlpThreadsTest, OneAndTwoThreadsAgree) {
  std::vector<std::vector<float>> results;
  for (int threads : {1, 2}) {
    std::unique_ptr<ComputeDevice> device = MakeCpuDevice(threads);
    // Large enough that the kernels split their work.
    ModelShape shape;
    shape.features = 64;
    shape.width = 256;
    shape.depth = 2;
    shape.classes = 10;
    constexpr int kRows = 64;
    Result<Mlp> model = Mlp::Create(*device, shape, kRows, 5);
    ASSERT_TRUE(model.ok());
    const SyntheticDataset dataset(1, 1000, shape.features, shape.classes);
    std::vector<float> x(static_cast<size_t>(kRows * shape.features));
    std::vector<int32_t> labels(kRows);
    for (int i = 0; i < kRows; ++i) {
      dataset.Sample(i, &x[static_cast<size_t>(i * shape.features)], &labels[static_cast<size_t>(i)]);
    }
    Result<float*> dx = device->AllocateFloats(x.size());
    Result<int32_t*> dl = device->AllocateLabels(labels.size());
    ASSERT_TRUE(dx.ok() && dl.ok());
    ASSERT_TRUE(device->CopyToDevice(x.data(), *dx, x.size()).ok());
    ASSERT_TRUE(device->CopyLabelsToDevice(labels.data(), *dl, labels.size()).ok());
    ASSERT_TRUE(model->Forward(*dx, *dl).ok());
    ASSERT_TRUE(model->Backward(*dx, *dl, 1.0f, false, [](int) { return Status::Ok(); }).ok());
    std::vector<float> grads(model->parameter_count());
    ASSERT_TRUE(device->CopyToHost(model->grads(), grads.data(), grads.size()).ok());
    results.push_back(std::move(grads));
  }
  ASSERT_EQ(results[0].size(), results[1].size());
  for (size_t i = 0; i < results[0].size(); ++i) {
    ASSERT_NEAR(results[0][i], results[1][i], 1e-6 + 1e-4 * std::abs(results[0][i])) << "element " << i;
  }
}

// The memory counters: a model's buffers counted by what they hold; a pipeline stage keeps
// one set of activations per micro-batch in flight.
TEST(MlpMemoryTest, BuffersAreCountedByWhatTheyHold) {
  ModelShape shape;
  shape.features = 6;
  shape.width = 5;
  shape.depth = 2;  // layers 6→5, 5→5, 5→3: 35 + 30 + 18 = 83 parameters
  shape.classes = 3;
  constexpr int kRows = 4;
  std::unique_ptr<ComputeDevice> device = MakeCpuDevice(1);
  Result<Mlp> model = Mlp::Create(*device, shape, kRows, 5);
  ASSERT_TRUE(model.ok());
  EXPECT_EQ(device->allocated_bytes(MemoryCategory::kParameters), 83u * 4);
  EXPECT_EQ(device->allocated_bytes(MemoryCategory::kGradients), 83u * 4);
  // Per row: pre and activation of 5 + 5 (hidden), 3 (the last layer: pre only), probs 3,
  // dlogits 3, two ping-pong gradient buffers of the widest layer (6): 4 x (20 + 3 + 3 + 3 + 12).
  const uint64_t one_set = kRows * 4u * (5 + 5 + 5 + 5 + 3 + 3);
  const uint64_t scratch = kRows * 4u * (3 + 2 * 6);
  EXPECT_EQ(device->allocated_bytes(MemoryCategory::kActivations), one_set + scratch);
  EXPECT_EQ(device->allocated_bytes(MemoryCategory::kOptimizerState), 0u);

  std::unique_ptr<ComputeDevice> staged = MakeCpuDevice(1);
  // The last two layers with three micro-batches' activations: per set 5 + 5 (hidden), 3
  // (last), probs 3; once dlogits 3, the input gradient 5, two ping-pong buffers of 5.
  Result<Mlp> stage = Mlp::Create(*staged, shape, kRows, 5, ParameterStorage::kOwned, ModelPart{1, 3, 3});
  ASSERT_TRUE(stage.ok());
  EXPECT_EQ(staged->allocated_bytes(MemoryCategory::kParameters), 48u * 4);
  EXPECT_EQ(staged->allocated_bytes(MemoryCategory::kActivations),
            3 * kRows * 4u * (5 + 5 + 3 + 3) + kRows * 4u * (3 + 5 + 2 * 5));
}

}  // namespace
}  // namespace rankscope::trainer
