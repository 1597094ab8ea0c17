// The element-wise kernels against naive loops (in double where rounding matters), the
// activation and loss gradients against finite differences, and the optimizers against
// torch.optim's update rules written out per element.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu_kernels.h"

namespace rankscope::kernels {
namespace {

constexpr double kFloatEps = std::numeric_limits<float>::epsilon();  // 2^-23
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::vector<float> Random(size_t n, float low, float high, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(low, high);
  std::vector<float> v(n);
  for (float& x : v) x = uniform(rng);
  return v;
}

const char* Name(Activation act) {
  switch (act) {
    case Activation::kNone:
      return "none";
    case Activation::kRelu:
      return "relu";
    case Activation::kGelu:
      return "gelu";
  }
  return "?";
}

double ReferenceActivation(Activation act, double x) {
  switch (act) {
    case Activation::kNone:
      return x;
    case Activation::kRelu:
      return x > 0 ? x : 0.0;
    case Activation::kGelu:
      return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
  }
  return kNaN;
}

double ReferenceDerivative(Activation act, double x) {
  switch (act) {
    case Activation::kNone:
      return 1.0;
    case Activation::kRelu:
      return x > 0 ? 1.0 : 0.0;
    case Activation::kGelu:
      return 0.5 * (1.0 + std::erf(x / std::sqrt(2.0))) +
             x * std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI);
  }
  return kNaN;
}

// GELU in float: erf is good to an ulp or two, but 1 + erf(x/√2) loses the relative accuracy
// of erf for negative x (it is computed next to 1), leaving an absolute error of a few
// float eps times |x|. The tanh approximation of GELU, by contrast, is off by up to ~1e-4.
double ActivationTolerance(Activation act, double x) {
  return act == Activation::kGelu ? 4 * kFloatEps * (1.0 + std::abs(x)) : 0.0;
}

struct Shape {
  int rows, cols;
};
constexpr Shape kShapes[] = {{1, 1}, {3, 5}, {64, 300}, {257, 129}, {512, 1024}};

TEST(BiasActivationTest, ForwardMatchesNaive) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (Activation act : {Activation::kNone, Activation::kRelu, Activation::kGelu}) {
      for (const Shape& s : kShapes) {
        SCOPED_TRACE(std::string(Name(act)) + " " + std::to_string(s.rows) + "x" +
                     std::to_string(s.cols) + " threads " + std::to_string(threads));
        const size_t n = static_cast<size_t>(s.rows) * s.cols;
        const std::vector<float> input = Random(n, -6.0f, 6.0f, 1);
        const std::vector<float> bias = Random(static_cast<size_t>(s.cols), -1.0f, 1.0f, 2);
        std::vector<float> pre = input, out(n, kNaN);
        BiasActivationForward(pool, act, s.rows, s.cols, bias.data(), pre.data(), out.data());
        int failures = 0;
        for (size_t i = 0; i < n && failures < 5; ++i) {
          const float expected_pre = input[i] + bias[i % static_cast<size_t>(s.cols)];
          if (pre[i] != expected_pre) {
            ++failures;
            ADD_FAILURE() << "pre[" << i << "] " << pre[i] << " != " << expected_pre;
          }
          const double expected = ReferenceActivation(act, expected_pre);
          if (!(std::abs(out[i] - expected) <= ActivationTolerance(act, expected_pre))) {
            ++failures;
            ADD_FAILURE() << "out[" << i << "] " << out[i] << " != " << expected
                          << " at x = " << expected_pre;
          }
        }
      }
    }
  }
}

TEST(BiasActivationTest, ForwardInPlaceWithoutActivation) {
  ThreadPool pool(2);
  const std::vector<float> input = Random(64 * 300, -2.0f, 2.0f, 3);
  const std::vector<float> bias = Random(300, -1.0f, 1.0f, 4);
  std::vector<float> data = input;
  BiasActivationForward(pool, Activation::kNone, 64, 300, bias.data(), data.data(), data.data());
  for (size_t i = 0; i < data.size(); ++i) ASSERT_EQ(data[i], input[i] + bias[i % 300]) << i;
}

TEST(BiasActivationTest, ReluPassesNaNThrough) {
  ThreadPool pool(1);
  const float bias[2] = {0.0f, 0.0f};
  float pre[2] = {std::numeric_limits<float>::quiet_NaN(), -1.0f};
  float out[2] = {0.0f, 5.0f};
  BiasActivationForward(pool, Activation::kRelu, 1, 2, bias, pre, out);
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_EQ(out[1], 0.0f);
}

TEST(BiasActivationTest, BackwardMatchesNaive) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (Activation act : {Activation::kNone, Activation::kRelu, Activation::kGelu}) {
      for (const Shape& s : kShapes) {
        for (bool accumulate : {false, true}) {
          SCOPED_TRACE(std::string(Name(act)) + " " + std::to_string(s.rows) + "x" +
                       std::to_string(s.cols) + " threads " + std::to_string(threads) +
                       (accumulate ? " accumulate" : ""));
          const size_t n = static_cast<size_t>(s.rows) * s.cols;
          const std::vector<float> pre = Random(n, -5.0f, 5.0f, 5);
          const std::vector<float> dout = Random(n, -1.0f, 1.0f, 6);
          const std::vector<float> dbias0 = Random(static_cast<size_t>(s.cols), -1.0f, 1.0f, 7);
          std::vector<float> dpre(n, kNaN), dbias = dbias0;
          BiasActivationBackward(pool, act, s.rows, s.cols, pre.data(), dout.data(), dpre.data(),
                                 dbias.data(), accumulate);
          int failures = 0;
          for (size_t i = 0; i < n && failures < 5; ++i) {
            const double expected = dout[i] * ReferenceDerivative(act, pre[i]);
            const double tolerance = act == Activation::kGelu ? 4 * kFloatEps : 0.0;
            if (!(std::abs(dpre[i] - expected) <= tolerance)) {
              ++failures;
              ADD_FAILURE() << "dpre[" << i << "] " << dpre[i] << " != " << expected;
            }
          }
          // dbias against the double-precision column sums of the dpre just checked: a float
          // sum of `rows` terms is within rows·eps·Σ|terms| of it.
          for (int c = 0; c < s.cols && failures < 5; ++c) {
            double sum = accumulate ? dbias0[static_cast<size_t>(c)] : 0.0;
            double magnitude = std::abs(sum);
            for (int r = 0; r < s.rows; ++r) {
              sum += dpre[static_cast<size_t>(r) * s.cols + c];
              magnitude += std::abs(dpre[static_cast<size_t>(r) * s.cols + c]);
            }
            const double tolerance = (s.rows + 1) * kFloatEps * magnitude;
            if (!(std::abs(dbias[static_cast<size_t>(c)] - sum) <= tolerance)) {
              ++failures;
              ADD_FAILURE() << "dbias[" << c << "] " << dbias[static_cast<size_t>(c)]
                            << " != " << sum;
            }
          }
        }
      }
    }
  }
}

TEST(BiasActivationTest, BackwardInPlaceAndWithoutBias) {
  ThreadPool pool(2);
  const std::vector<float> pre = Random(64 * 300, -3.0f, 3.0f, 8);
  const std::vector<float> dout = Random(64 * 300, -1.0f, 1.0f, 9);
  std::vector<float> separate(dout.size()), dbias(300);
  BiasActivationBackward(pool, Activation::kGelu, 64, 300, pre.data(), dout.data(), separate.data(),
                         dbias.data(), false);
  std::vector<float> in_place = dout;
  BiasActivationBackward(pool, Activation::kGelu, 64, 300, pre.data(), in_place.data(),
                         in_place.data(), nullptr, false);
  EXPECT_EQ(std::memcmp(separate.data(), in_place.data(), separate.size() * sizeof(float)), 0);
}

// GELU is computed as x·Φ(x) with Φ from erfc, which keeps its relative accuracy in the
// lower tail (where 1 + erf(x/√2) would cancel), and large, tiny and NaN inputs behave.
TEST(BiasActivationTest, GeluAccurateAcrossTheRange) {
  ThreadPool pool(1);
  std::vector<float> x;
  for (int i = -1400; i <= 1400; ++i) x.push_back(static_cast<float>(i) / 100.0f);
  for (float v : {1e-30f, -1e-30f, 1e3f, -1e3f, 1e25f, -1e25f}) x.push_back(v);
  const int cols = static_cast<int>(x.size());
  const std::vector<float> zero_bias(x.size(), 0.0f), ones(x.size(), 1.0f);
  std::vector<float> pre = x, out(x.size()), slope(x.size());
  BiasActivationForward(pool, Activation::kGelu, 1, cols, zero_bias.data(), pre.data(), out.data());
  BiasActivationBackward(pool, Activation::kGelu, 1, cols, x.data(), ones.data(), slope.data(),
                         nullptr, false);
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    const double cdf = 0.5 * std::erfc(-v / std::sqrt(2.0));
    const double expected = v * cdf;
    const double expected_slope = cdf + v * std::exp(-0.5 * v * v) / std::sqrt(2.0 * M_PI);
    // Relative to the value: erfc to a few eps, plus the rounding of x² inside exp(−x²/2)
    // (eps·x²/2 relative); values below ~1e-38 may flush to zero.
    const double relative = 16 * kFloatEps * (1.0 + 0.5 * v * v);
    EXPECT_NEAR(out[i], expected, relative * std::abs(expected) + 1e-37) << "x = " << v;
    EXPECT_NEAR(slope[i], expected_slope, relative * std::abs(expected_slope) + 4 * kFloatEps)
        << "x = " << v;
  }
  const float nan = std::numeric_limits<float>::quiet_NaN();
  float nan_pre = nan, nan_out = 0.0f, nan_slope = 0.0f, one = 1.0f, zero = 0.0f;
  BiasActivationForward(pool, Activation::kGelu, 1, 1, &zero, &nan_pre, &nan_out);
  BiasActivationBackward(pool, Activation::kGelu, 1, 1, &nan_pre, &one, &nan_slope, nullptr, false);
  EXPECT_TRUE(std::isnan(nan_out));
  EXPECT_TRUE(std::isnan(nan_slope));
}

// The backward pass against central differences of the forward kernel itself: with
// L = Σ dout·act(pre), dL/dpre = dpre. Step h = 1e-2: the rounding error of the difference
// is about eps·|act|/h ≈ 5e-5 and the truncation error h²·|act'''|/6 ≈ 2e-5.
TEST(BiasActivationTest, BackwardMatchesFiniteDifferences) {
  ThreadPool pool(1);
  constexpr float kStep = 1e-2f;
  for (Activation act : {Activation::kRelu, Activation::kGelu}) {
    SCOPED_TRACE(Name(act));
    std::vector<float> x = Random(200, -4.0f, 4.0f, 10);
    for (float& v : x) {
      if (std::abs(v) < 2 * kStep) v += 4 * kStep;  // keep ReLU's kink out of the stencil
    }
    const std::vector<float> dout = Random(x.size(), 0.5f, 2.0f, 11);
    const int cols = static_cast<int>(x.size());
    const std::vector<float> zero_bias(x.size(), 0.0f);
    std::vector<float> dpre(x.size()), dbias(x.size());
    BiasActivationBackward(pool, act, 1, cols, x.data(), dout.data(), dpre.data(), dbias.data(),
                           false);
    std::vector<float> plus(x.size()), minus(x.size()), out_plus(x.size()), out_minus(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      plus[i] = x[i] + kStep;
      minus[i] = x[i] - kStep;
    }
    BiasActivationForward(pool, act, 1, cols, zero_bias.data(), plus.data(), out_plus.data());
    BiasActivationForward(pool, act, 1, cols, zero_bias.data(), minus.data(), out_minus.data());
    for (size_t i = 0; i < x.size(); ++i) {
      const double slope = (static_cast<double>(out_plus[i]) - out_minus[i]) /
                           (static_cast<double>(plus[i]) - minus[i]);
      EXPECT_NEAR(dpre[i], dout[i] * slope, 2e-4 * dout[i]) << "x = " << x[i];
    }
  }
}

// ---------------------------------------------------------------------------------------
// Softmax cross-entropy.

struct SoftmaxReference {
  std::vector<double> probs;
  double loss = 0.0;
  int correct = 0;
};

SoftmaxReference NaiveSoftmax(int rows, int classes, const std::vector<float>& logits,
                              const std::vector<int32_t>& labels) {
  SoftmaxReference ref;
  ref.probs.resize(logits.size());
  for (int r = 0; r < rows; ++r) {
    const float* x = logits.data() + static_cast<size_t>(r) * classes;
    double max = x[0];
    int argmax = 0;
    for (int c = 1; c < classes; ++c) {
      if (x[c] > max) {
        max = x[c];
        argmax = c;
      }
    }
    double sum = 0.0;
    for (int c = 0; c < classes; ++c) sum += std::exp(x[c] - max);
    for (int c = 0; c < classes; ++c) {
      ref.probs[static_cast<size_t>(r) * classes + c] = std::exp(x[c] - max) / sum;
    }
    const int label = labels[static_cast<size_t>(r)];
    ref.loss += std::log(sum) - (x[label] - max);
    ref.correct += argmax == label;
  }
  ref.loss /= rows;
  return ref;
}

std::vector<int32_t> RandomLabels(int rows, int classes, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> pick(0, classes - 1);
  std::vector<int32_t> labels(static_cast<size_t>(rows));
  for (int32_t& l : labels) l = pick(rng);
  return labels;
}

TEST(SoftmaxCrossEntropyTest, ForwardMatchesNaive) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (int rows : {1, 3, 100, 1000}) {
      for (int classes : {1, 2, 16, 33, 64}) {
        SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(classes) + " threads " +
                     std::to_string(threads));
        // Logits spread enough that some rows are confident and some predictions right.
        const std::vector<float> logits =
            Random(static_cast<size_t>(rows) * classes, -8.0f, 8.0f, 12);
        const std::vector<int32_t> labels = RandomLabels(rows, classes, 13);
        std::vector<float> probs(logits.size(), kNaN);
        int correct = -1;
        const double loss = SoftmaxCrossEntropyForward(pool, rows, classes, logits.data(),
                                                       labels.data(), probs.data(), &correct);
        const SoftmaxReference ref = NaiveSoftmax(rows, classes, logits, labels);
        // Float exp and sum: a few eps relative per probability, and per-row log terms of
        // similar relative accuracy in the mean.
        EXPECT_NEAR(loss, ref.loss, 16 * kFloatEps * (1.0 + ref.loss));
        EXPECT_EQ(correct, ref.correct);
        for (size_t i = 0; i < probs.size(); ++i) {
          ASSERT_NEAR(probs[i], ref.probs[i], 16 * kFloatEps * ref.probs[i] + 1e-30) << i;
        }
      }
    }
  }
}

TEST(SoftmaxCrossEntropyTest, StableForHugeLogitsAndTiesGoToTheFirstClass) {
  ThreadPool pool(1);
  const std::vector<float> logits = {1000.0f, 999.0f, -1000.0f,  // huge: exp would overflow
                                     1.0f,    3.0f,   3.0f,      // tie between 1 and 2
                                     -5.0f,   -5.0f,  -5.0f};    // all equal
  const std::vector<int32_t> labels = {0, 1, 0};
  std::vector<float> probs(9);
  int correct = 0;
  const double loss =
      SoftmaxCrossEntropyForward(pool, 3, 3, logits.data(), labels.data(), probs.data(), &correct);
  const SoftmaxReference ref = NaiveSoftmax(3, 3, logits, labels);
  EXPECT_TRUE(std::isfinite(loss));
  EXPECT_NEAR(loss, ref.loss, 1e-6);
  // Ties predict the first of the tied classes: class 1 in row 1, class 0 in row 2.
  EXPECT_EQ(correct, 3);
  for (size_t i = 0; i < probs.size(); ++i) EXPECT_NEAR(probs[i], ref.probs[i], 1e-6) << i;
  // A null `correct` is allowed.
  EXPECT_EQ(
      SoftmaxCrossEntropyForward(pool, 3, 3, logits.data(), labels.data(), probs.data(), nullptr),
      loss);
}

TEST(SoftmaxCrossEntropyTest, LossIsBitIdenticalAcrossRunsAndThreadCounts) {
  const int rows = 1000, classes = 33;
  const std::vector<float> logits = Random(static_cast<size_t>(rows) * classes, -4.0f, 4.0f, 14);
  const std::vector<int32_t> labels = RandomLabels(rows, classes, 15);
  std::vector<float> probs(logits.size());
  ThreadPool one(1);
  const double reference = SoftmaxCrossEntropyForward(one, rows, classes, logits.data(),
                                                      labels.data(), probs.data(), nullptr);
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (int run = 0; run < 2; ++run) {
      const double loss = SoftmaxCrossEntropyForward(pool, rows, classes, logits.data(),
                                                     labels.data(), probs.data(), nullptr);
      EXPECT_EQ(std::memcmp(&loss, &reference, sizeof loss), 0) << "threads " << threads;
    }
  }
}

TEST(SoftmaxCrossEntropyTest, BackwardMatchesNaive) {
  for (int threads : {1, 3}) {
    ThreadPool pool(threads);
    const int rows = 700, classes = 40;
    const std::vector<float> logits = Random(static_cast<size_t>(rows) * classes, -3.0f, 3.0f, 16);
    const std::vector<int32_t> labels = RandomLabels(rows, classes, 17);
    std::vector<float> probs(logits.size()), dlogits(logits.size(), kNaN);
    (void)SoftmaxCrossEntropyForward(pool, rows, classes, logits.data(), labels.data(),
                                     probs.data(), nullptr);
    const float scale = 0.5f / rows;
    SoftmaxCrossEntropyBackward(pool, rows, classes, probs.data(), labels.data(), scale,
                                dlogits.data());
    for (int r = 0; r < rows; ++r) {
      for (int c = 0; c < classes; ++c) {
        const size_t i = static_cast<size_t>(r) * classes + c;
        const double onehot = labels[static_cast<size_t>(r)] == c ? 1.0 : 0.0;
        const double expected = (probs[i] - onehot) * scale;
        ASSERT_NEAR(dlogits[i], expected, 2 * kFloatEps * std::abs(expected)) << r << "," << c;
      }
    }
  }
}

// dlogits with scale 1/rows is the gradient of the mean loss; compare with central
// differences of the forward loss. h = 1e-2: the loss is good to ~1e-7, so the difference
// quotient carries ~1e-5 of rounding and ~h²/6·|L'''| ≈ 1e-5 of truncation, against
// gradients of order 0.1.
TEST(SoftmaxCrossEntropyTest, BackwardMatchesFiniteDifferencesOfTheLoss) {
  ThreadPool pool(1);
  const int rows = 3, classes = 5;
  std::vector<float> logits = Random(rows * classes, -2.0f, 2.0f, 18);
  const std::vector<int32_t> labels = {4, 0, 2};
  std::vector<float> probs(logits.size()), dlogits(logits.size());
  (void)SoftmaxCrossEntropyForward(pool, rows, classes, logits.data(), labels.data(), probs.data(),
                                   nullptr);
  SoftmaxCrossEntropyBackward(pool, rows, classes, probs.data(), labels.data(), 1.0f / rows,
                              dlogits.data());
  constexpr float kStep = 1e-2f;
  std::vector<float> scratch(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    const float original = logits[i];
    logits[i] = original + kStep;
    const double up = SoftmaxCrossEntropyForward(pool, rows, classes, logits.data(), labels.data(),
                                                 scratch.data(), nullptr);
    const float up_at = logits[i];
    logits[i] = original - kStep;
    const double down = SoftmaxCrossEntropyForward(pool, rows, classes, logits.data(),
                                                   labels.data(), scratch.data(), nullptr);
    const float down_at = logits[i];
    logits[i] = original;
    const double slope = (up - down) / (static_cast<double>(up_at) - down_at);
    EXPECT_NEAR(dlogits[i], slope, 1e-4) << "logit " << i;
  }
}

// ---------------------------------------------------------------------------------------
// Optimizers.

constexpr size_t kOptimizerSizes[] = {1, 17, 100003};

// Relative tolerance for float updates written the same way: a couple of roundings.
void ExpectCloseFloats(const std::vector<float>& actual, const std::vector<float>& expected,
                       const char* what) {
  ASSERT_EQ(actual.size(), expected.size());
  int failures = 0;
  for (size_t i = 0; i < actual.size() && failures < 5; ++i) {
    const double tolerance = 4 * kFloatEps * std::max(1e-3, std::abs(double{expected[i]}));
    if (!(std::abs(actual[i] - expected[i]) <= tolerance)) {
      ++failures;
      ADD_FAILURE() << what << "[" << i << "] " << actual[i] << " != " << expected[i];
    }
  }
}

TEST(SgdTest, MatchesTorchRuleOverSeveralSteps) {
  struct Case {
    SgdOptions options;
    bool with_buffer;
  };
  const Case cases[] = {
      {{.lr = 0.1f, .momentum = 0.9f, .weight_decay = 0.0f}, true},
      {{.lr = 0.05f, .momentum = 0.9f, .weight_decay = 0.01f}, true},
      {{.lr = 0.1f, .momentum = 0.0f, .weight_decay = 0.01f}, false},
      {{.lr = 0.2f, .momentum = 0.5f, .weight_decay = 0.0f}, true},
  };
  for (int threads : {1, 3}) {
    ThreadPool pool(threads);
    for (const Case& c : cases) {
      for (size_t n : kOptimizerSizes) {
        SCOPED_TRACE("momentum " + std::to_string(c.options.momentum) + " wd " +
                     std::to_string(c.options.weight_decay) + " n " + std::to_string(n) +
                     " threads " + std::to_string(threads));
        std::vector<float> params = Random(n, -1.0f, 1.0f, 20);
        std::vector<float> expected_params = params;
        // The buffer starts as garbage: the first step must overwrite it, not read it.
        std::vector<float> buffer(n, std::numeric_limits<float>::quiet_NaN());
        std::vector<float> expected_buffer(n, 0.0f);
        for (int step = 0; step < 5; ++step) {
          const std::vector<float> grads = Random(n, -1.0f, 1.0f, 30 + static_cast<uint32_t>(step));
          SgdStep(pool, n, params.data(), grads.data(), c.with_buffer ? buffer.data() : nullptr,
                  c.options, step == 0);
          for (size_t i = 0; i < n; ++i) {
            float g = grads[i] + c.options.weight_decay * expected_params[i];
            if (c.options.momentum != 0.0f) {
              expected_buffer[i] = step == 0 ? g : c.options.momentum * expected_buffer[i] + g;
              g = expected_buffer[i];
            }
            expected_params[i] = expected_params[i] - c.options.lr * g;
          }
          ExpectCloseFloats(params, expected_params, "param");
          if (c.with_buffer) ExpectCloseFloats(buffer, expected_buffer, "buffer");
        }
      }
    }
  }
}

TEST(AdamWTest, MatchesTorchRuleOverSeveralSteps) {
  const AdamWOptions options{
      .lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.1f};
  for (int threads : {1, 3}) {
    ThreadPool pool(threads);
    for (size_t n : kOptimizerSizes) {
      SCOPED_TRACE("n " + std::to_string(n) + " threads " + std::to_string(threads));
      std::vector<float> params = Random(n, -1.0f, 1.0f, 40);
      std::vector<float> exp_avg(n, 0.0f), exp_avg_sq(n, 0.0f);
      std::vector<double> p(params.begin(), params.end()), m(n, 0.0), v(n, 0.0);
      for (int64_t step = 1; step <= 6; ++step) {
        std::vector<float> grads = Random(n, -1.0f, 1.0f, 50 + static_cast<uint32_t>(step));
        if (n > 1) grads[0] = 0.0f;  // m and v may stay zero: the update must be finite
        AdamWStep(pool, n, params.data(), grads.data(), exp_avg.data(), exp_avg_sq.data(), options,
                  step);
        const double b1 = options.beta1, b2 = options.beta2;
        const double correction1 = 1 - std::pow(b1, static_cast<double>(step));
        const double correction2 = 1 - std::pow(b2, static_cast<double>(step));
        int failures = 0;
        for (size_t i = 0; i < n && failures < 5; ++i) {
          p[i] *= 1 - double{options.lr} * options.weight_decay;
          m[i] = b1 * m[i] + (1 - b1) * grads[i];
          v[i] = b2 * v[i] + (1 - b2) * grads[i] * grads[i];
          const double denominator = std::sqrt(v[i] / correction2) + options.eps;
          p[i] -= options.lr * (m[i] / correction1) / denominator;
          // Float state drifts from the double one by a few roundings per step; the
          // smallest real difference (weight decay, 1e-3 per step here) is far larger.
          const bool ok = std::abs(params[i] - p[i]) <= 1e-6 &&
                          std::abs(exp_avg[i] - m[i]) <= 1e-6 * (1 + std::abs(m[i])) &&
                          std::abs(exp_avg_sq[i] - v[i]) <= 1e-6 * (1e-6 + std::abs(v[i]));
          if (!ok) {
            ++failures;
            ADD_FAILURE() << "step " << step << " element " << i << ": param " << params[i]
                          << " vs " << p[i] << ", m " << exp_avg[i] << " vs " << m[i] << ", v "
                          << exp_avg_sq[i] << " vs " << v[i];
          }
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------
// Buckets.

TEST(BucketTest, FlattenThenUnflattenRoundTrips) {
  const std::vector<size_t> sizes = {3, 0, 1, 1000, 17};
  std::vector<std::vector<float>> tensors;
  std::vector<ConstSpan> inputs;
  size_t total = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    tensors.push_back(Random(sizes[i], -1.0f, 1.0f, 60 + static_cast<uint32_t>(i)));
    inputs.push_back({tensors.back().data(), sizes[i]});
    total += sizes[i];
  }
  std::vector<float> flat(total + 1, kNaN);
  flat[total] = 42.0f;  // one past the end stays as it was
  Flatten(inputs, flat.data());
  size_t offset = 0;
  for (const auto& tensor : tensors) {
    for (float v : tensor) ASSERT_EQ(flat[offset++], v);
  }
  EXPECT_EQ(flat[total], 42.0f);

  for (float& v : flat) v *= 2.0f;
  std::vector<std::vector<float>> outputs;
  std::vector<MutableSpan> targets;
  for (size_t size : sizes) outputs.emplace_back(size, kNaN);
  for (auto& output : outputs) targets.push_back({output.data(), output.size()});
  Unflatten(flat.data(), targets);
  for (size_t i = 0; i < tensors.size(); ++i) {
    for (size_t j = 0; j < tensors[i].size(); ++j) ASSERT_EQ(outputs[i][j], 2.0f * tensors[i][j]);
  }
}

TEST(BucketTest, ScaleMultipliesExactlyTheFirstN) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (size_t n : {size_t{0}, size_t{5}, (size_t{1} << 20) + 3}) {
      const std::vector<float> original = Random(n + 1, -10.0f, 10.0f, 70);
      std::vector<float> data = original;
      Scale(pool, n, 0.37f, data.data());
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(data[i], original[i] * 0.37f) << i;
      EXPECT_EQ(data[n], original[n]);
    }
  }
}

TEST(BucketTest, AccumulateAddsExactlyTheFirstN) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (size_t n : {size_t{0}, size_t{5}, (size_t{1} << 20) + 3}) {
      const std::vector<float> original = Random(n + 1, -10.0f, 10.0f, 71);
      const std::vector<float> add = Random(n + 1, -10.0f, 10.0f, 72);
      std::vector<float> sum = original;
      Accumulate(pool, n, add.data(), sum.data());
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(sum[i], original[i] + add[i]) << i;
      EXPECT_EQ(sum[n], original[n]);
    }
  }
}

TEST(BucketTest, SquaredNormMatchesDoubleSumAndIsReproducible) {
  ThreadPool one(1);
  for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{100003}, (size_t{1} << 21) + 5}) {
    const std::vector<float> data = Random(n, -3.0f, 3.0f, 80);
    double expected = 0.0;
    for (float v : data) expected += static_cast<double>(v) * v;
    const double reference = SquaredNorm(one, n, data.data());
    // Double accumulation of n positive terms: within n·eps_double of the sum.
    EXPECT_NEAR(reference, expected, static_cast<double>(n) * 2.3e-16 * expected) << n;
    for (int threads : {2, 3}) {
      ThreadPool pool(threads);
      for (int run = 0; run < 2; ++run) {
        const double norm = SquaredNorm(pool, n, data.data());
        EXPECT_EQ(std::memcmp(&norm, &reference, sizeof norm), 0) << n << " threads " << threads;
      }
    }
  }
}

}  // namespace
}  // namespace rankscope::kernels
