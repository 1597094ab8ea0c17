// The learning-rate schedule, gradient-norm clipping and the optimizer steps, against the
// formulas written out by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "trainer/device.h"
#include "trainer/optimizer.h"
#include "trainer/options.h"

namespace rankscope::trainer {
namespace {

TEST(LearningRateTest, LinearScalingWithTheGlobalBatch) {
  TrainerOptions o;
  o.lr = 0.1;
  o.batch = 64;
  o.accum = 2;
  o.lr_reference_batch = 256;
  o.warmup_steps = 0;
  // Global batch 64 · 2 · 4 = 512 = 2 × the reference batch.
  EXPECT_DOUBLE_EQ(LearningRate(o, 4, 0), 0.2);
  EXPECT_DOUBLE_EQ(LearningRate(o, 4, 1000), 0.2);
  // 64 · 2 · 1 = 128: half the reference.
  EXPECT_DOUBLE_EQ(LearningRate(o, 1, 0), 0.05);
  o.accum = 1;
  o.batch = 32;
  o.lr_reference_batch = 96;
  // 32 · 1 · 3 = 96: exactly the reference, so lr itself.
  EXPECT_DOUBLE_EQ(LearningRate(o, 3, 7), 0.1);
}

TEST(LearningRateTest, WarmUpRampsLinearly) {
  TrainerOptions o;
  o.lr = 0.1;
  o.batch = 64;
  o.accum = 2;
  o.lr_reference_batch = 256;
  o.warmup_steps = 5;
  const double full = 0.2;  // world 4, as above
  EXPECT_DOUBLE_EQ(LearningRate(o, 4, 0), full * 1 / 5);
  EXPECT_DOUBLE_EQ(LearningRate(o, 4, 1), full * 2 / 5);
  EXPECT_DOUBLE_EQ(LearningRate(o, 4, 3), full * 4 / 5);
  EXPECT_DOUBLE_EQ(LearningRate(o, 4, 4), full);  // step warmup − 1 reaches the full rate
  EXPECT_DOUBLE_EQ(LearningRate(o, 4, 5), full);
  EXPECT_DOUBLE_EQ(LearningRate(o, 4, 50), full);
  // Increasing, never above the full rate.
  for (int64_t s = 1; s < 10; ++s) {
    EXPECT_GE(LearningRate(o, 4, s), LearningRate(o, 4, s - 1));
    EXPECT_LE(LearningRate(o, 4, s), full);
  }
  o.warmup_steps = 1;
  EXPECT_DOUBLE_EQ(LearningRate(o, 4, 0), full);
}

TEST(LearningRateTest, NoWarmUp) {
  TrainerOptions o;
  o.lr = 0.3;
  o.batch = 10;
  o.accum = 1;
  o.lr_reference_batch = 20;
  o.warmup_steps = 0;
  EXPECT_DOUBLE_EQ(LearningRate(o, 2, 0), 0.3);
  EXPECT_DOUBLE_EQ(LearningRate(o, 2, 1), 0.3);
}

class DeviceTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { device_ = MakeCpuDevice(GetParam()); }

  float* Upload(const std::vector<float>& host) {
    Result<float*> buffer = device_->AllocateFloats(host.size());
    EXPECT_TRUE(buffer.ok());
    if (!buffer.ok()) return nullptr;
    EXPECT_TRUE(device_->CopyToDevice(host.data(), *buffer, host.size()).ok());
    return *buffer;
  }
  std::vector<float> Download(const float* data, size_t count) {
    std::vector<float> host(count);
    EXPECT_TRUE(device_->CopyToHost(data, host.data(), count).ok());
    return host;
  }

  std::unique_ptr<ComputeDevice> device_;
};

using ClipGradientNormTest = DeviceTest;

TEST_P(ClipGradientNormTest, BelowTheLimitIsUntouched) {
  const std::vector<float> host = {3.0f, 4.0f, 0.0f};
  float* grads = Upload(host);
  Result<double> norm = ClipGradientNorm(*device_, grads, host.size(), 10.0);
  ASSERT_TRUE(norm.ok());
  EXPECT_NEAR(*norm, 5.0, 1e-12);
  EXPECT_EQ(Download(grads, host.size()), host);
}

TEST_P(ClipGradientNormTest, AboveTheLimitIsScaledToIt) {
  const std::vector<float> host = {3.0f, -4.0f};
  float* grads = Upload(host);
  Result<double> norm = ClipGradientNorm(*device_, grads, host.size(), 1.0);
  ASSERT_TRUE(norm.ok());
  EXPECT_NEAR(*norm, 5.0, 1e-12);  // the norm before clipping
  const std::vector<float> clipped = Download(grads, host.size());
  const double coefficient = 1.0 / (5.0 + 1e-6);
  EXPECT_NEAR(clipped[0], 3.0 * coefficient, 1e-6);
  EXPECT_NEAR(clipped[1], -4.0 * coefficient, 1e-6);
  EXPECT_NEAR(std::hypot(clipped[0], clipped[1]), 1.0, 1e-5);
}

TEST_P(ClipGradientNormTest, LargeBufferUsesEveryElement) {
  // 100000 elements of 0.01 and one of 1: Σ g² = 100000 · 0.01² + 1 = 11 (in float, 0.01 is
  // not exact; the tolerance covers it).
  std::vector<float> host(100001, 0.01f);
  host[54321] = 1.0f;
  float* grads = Upload(host);
  Result<double> norm = ClipGradientNorm(*device_, grads, host.size(), 0.5);
  ASSERT_TRUE(norm.ok());
  EXPECT_NEAR(*norm, std::sqrt(11.0), 1e-5);
  const std::vector<float> clipped = Download(grads, host.size());
  const double coefficient = 0.5 / (std::sqrt(11.0) + 1e-6);
  EXPECT_NEAR(clipped[0], 0.01 * coefficient, 1e-7);
  EXPECT_NEAR(clipped[54321], coefficient, 1e-6);
  EXPECT_NEAR(clipped[100000], 0.01 * coefficient, 1e-7);
}

INSTANTIATE_TEST_SUITE_P(Threads, ClipGradientNormTest, ::testing::Values(1, 2));

using OptimizerTest = DeviceTest;

TEST_P(OptimizerTest, SgdMomentumFirstAndLaterSteps) {
  TrainerOptions o;
  o.optimizer = OptimizerKind::kSgd;
  o.momentum = 0.9;
  o.weight_decay = 0.1;
  const std::vector<double> p0 = {1.0, -2.0, 0.5, 0.0};
  const std::vector<double> g1 = {0.1, 0.2, -0.3, 1.0};
  const std::vector<double> g2 = {-0.4, 0.0, 0.25, 1.0};
  const double lr1 = 0.5;
  const double lr2 = 0.25;

  Result<Optimizer> created = Optimizer::Create(*device_, o, p0.size());
  ASSERT_TRUE(created.ok());
  Optimizer optimizer = std::move(created).value();
  EXPECT_EQ(optimizer.state().size(), 1u);
  EXPECT_EQ(optimizer.parameter_count(), p0.size());
  EXPECT_EQ(optimizer.steps_taken(), 0);
  float* params = Upload(std::vector<float>(p0.begin(), p0.end()));
  float* grads = Upload(std::vector<float>(g1.begin(), g1.end()));

  // Step 1: d = g + wd·p; buf = d; p −= lr·buf.
  std::vector<double> p = p0;
  std::vector<double> buf(p.size());
  for (size_t i = 0; i < p.size(); ++i) {
    buf[i] = g1[i] + 0.1 * p[i];
    p[i] -= lr1 * buf[i];
  }
  ASSERT_TRUE(optimizer.Step(params, grads, lr1).ok());
  EXPECT_EQ(optimizer.steps_taken(), 1);
  std::vector<float> got = Download(params, p.size());
  std::vector<float> got_buf = Download(optimizer.state()[0], p.size());
  for (size_t i = 0; i < p.size(); ++i) {
    EXPECT_NEAR(got[i], p[i], 1e-6) << "step 1, element " << i;
    EXPECT_NEAR(got_buf[i], buf[i], 1e-6) << "step 1, element " << i;
  }

  // Step 2: d = g + wd·p; buf = 0.9·buf + d; p −= lr·buf.
  ASSERT_TRUE(device_->CopyToDevice(std::vector<float>(g2.begin(), g2.end()).data(), grads, g2.size()).ok());
  for (size_t i = 0; i < p.size(); ++i) {
    buf[i] = 0.9 * buf[i] + (g2[i] + 0.1 * p[i]);
    p[i] -= lr2 * buf[i];
  }
  ASSERT_TRUE(optimizer.Step(params, grads, lr2).ok());
  EXPECT_EQ(optimizer.steps_taken(), 2);
  got = Download(params, p.size());
  got_buf = Download(optimizer.state()[0], p.size());
  for (size_t i = 0; i < p.size(); ++i) {
    EXPECT_NEAR(got[i], p[i], 1e-6) << "step 2, element " << i;
    EXPECT_NEAR(got_buf[i], buf[i], 1e-6) << "step 2, element " << i;
  }
}

TEST_P(OptimizerTest, SgdResumedFromACheckpointUsesItsMomentum) {
  // After set_steps_taken (resume) the next step is not a first step: the restored buffer
  // carries momentum into it.
  TrainerOptions o;
  o.optimizer = OptimizerKind::kSgd;
  o.momentum = 0.5;
  o.weight_decay = 0.0;
  Result<Optimizer> created = Optimizer::Create(*device_, o, 2);
  ASSERT_TRUE(created.ok());
  Optimizer optimizer = std::move(created).value();
  const std::vector<float> restored = {2.0f, -1.0f};
  ASSERT_TRUE(device_->CopyToDevice(restored.data(), optimizer.state()[0], 2).ok());
  optimizer.set_steps_taken(7);
  float* params = Upload({1.0f, 1.0f});
  float* grads = Upload({0.5f, 0.5f});
  ASSERT_TRUE(optimizer.Step(params, grads, 0.1).ok());
  EXPECT_EQ(optimizer.steps_taken(), 8);
  // buf = 0.5·[2, −1] + 0.5 = [1.5, 0]; p = 1 − 0.1·buf.
  const std::vector<float> got = Download(params, 2);
  EXPECT_NEAR(got[0], 1.0 - 0.1 * 1.5, 1e-7);
  EXPECT_NEAR(got[1], 1.0, 1e-7);
}

TEST_P(OptimizerTest, SgdWithoutMomentum) {
  TrainerOptions o;
  o.optimizer = OptimizerKind::kSgd;
  o.momentum = 0.0;
  o.weight_decay = 0.0;
  Result<Optimizer> created = Optimizer::Create(*device_, o, 2);
  ASSERT_TRUE(created.ok());
  Optimizer optimizer = std::move(created).value();
  float* params = Upload({1.0f, -1.0f});
  float* grads = Upload({0.5f, 0.25f});
  for (int step = 0; step < 2; ++step) ASSERT_TRUE(optimizer.Step(params, grads, 0.1).ok());
  // Plain SGD: p −= lr·g twice.
  const std::vector<float> got = Download(params, 2);
  EXPECT_NEAR(got[0], 1.0 - 2 * 0.1 * 0.5, 1e-7);
  EXPECT_NEAR(got[1], -1.0 - 2 * 0.1 * 0.25, 1e-7);
}

TEST_P(OptimizerTest, AdamWFirstAndSecondSteps) {
  TrainerOptions o;
  o.optimizer = OptimizerKind::kAdamW;
  o.weight_decay = 0.01;
  const std::vector<double> p0 = {1.0, -2.0, 0.5};
  const std::vector<double> g1 = {0.1, -0.2, 0.3};
  const std::vector<double> g2 = {0.05, 0.2, -0.1};
  // The kernel's options are floats: the reference uses the same rounded values.
  const double lr = static_cast<double>(0.01f);
  const double wd = static_cast<double>(0.01f);
  const double beta1 = static_cast<double>(0.9f);
  const double beta2 = static_cast<double>(0.999f);
  const double eps = static_cast<double>(1e-8f);
  Result<Optimizer> created = Optimizer::Create(*device_, o, p0.size());
  ASSERT_TRUE(created.ok());
  Optimizer optimizer = std::move(created).value();
  ASSERT_EQ(optimizer.state().size(), 2u);
  float* params = Upload(std::vector<float>(p0.begin(), p0.end()));
  float* grads = Upload(std::vector<float>(g1.begin(), g1.end()));
  std::vector<double> p = p0;
  std::vector<double> m(p.size(), 0.0);
  std::vector<double> v(p.size(), 0.0);
  for (int t = 1; t <= 2; ++t) {
    const std::vector<double>& g = t == 1 ? g1 : g2;
    if (t == 2) {
      ASSERT_TRUE(device_->CopyToDevice(std::vector<float>(g.begin(), g.end()).data(), grads, g.size()).ok());
    }
    for (size_t i = 0; i < p.size(); ++i) {
      p[i] -= lr * wd * p[i];
      m[i] = beta1 * m[i] + (1 - beta1) * g[i];
      v[i] = beta2 * v[i] + (1 - beta2) * g[i] * g[i];
      const double m_hat = m[i] / (1 - std::pow(beta1, t));
      const double v_hat = v[i] / (1 - std::pow(beta2, t));
      p[i] -= lr * m_hat / (std::sqrt(v_hat) + eps);
    }
    ASSERT_TRUE(optimizer.Step(params, grads, 0.01).ok());
    const std::vector<float> got = Download(params, p.size());
    const std::vector<float> got_m = Download(optimizer.state()[0], p.size());
    const std::vector<float> got_v = Download(optimizer.state()[1], p.size());
    for (size_t i = 0; i < p.size(); ++i) {
      EXPECT_NEAR(got[i], p[i], 2e-6) << "step " << t << ", element " << i;
      EXPECT_NEAR(got_m[i], m[i], 1e-7) << "step " << t << ", element " << i;
      EXPECT_NEAR(got_v[i], v[i], 1e-9) << "step " << t << ", element " << i;
    }
  }
  EXPECT_EQ(optimizer.steps_taken(), 2);
}

INSTANTIATE_TEST_SUITE_P(Threads, OptimizerTest, ::testing::Values(1, 2));

}  // namespace
}  // namespace rankscope::trainer
