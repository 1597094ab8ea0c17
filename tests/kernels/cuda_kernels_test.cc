// The CUDA kernels against the CPU kernels (the reference semantics) on random inputs.
// Without a usable GPU every test skips, saying why.
//
// GEMM tolerance: a float dot product of length k, however ordered and with or without FMA,
// is within k·u·Σ|a·b| of the exact one (u = 2^-24); GPU and CPU each contribute that, and
// alpha, beta and the final addition a few more roundings. The bf16 GEMM is compared with
// the CPU GEMM run on the bf16-rounded inputs, so only accumulation differs (bf16 products
// are exact in fp32); tensor cores may truncate instead of rounding while accumulating, so
// its allowance is doubled. Both bounds stay far below the effect of any real indexing
// mistake (about Σ|a·b|/k for one wrong product).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "kernels/cpu_kernels.h"
#include "kernels/cuda_kernels.h"

namespace rankscope::kernels {
namespace {

constexpr double kUnitRoundoff = std::numeric_limits<float>::epsilon() / 2;
constexpr float kSentinel = -12345.0f;  // fills C's row padding, which no GEMM may touch
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Why there is no usable GPU, or "" when there is one.
std::string NoGpuReason() {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    return std::string("cudaGetDeviceCount failed: ") + cudaGetErrorName(error) + " (" +
           cudaGetErrorString(error) + ")";
  }
  if (count == 0) return "cudaGetDeviceCount found no device";
  return "";
}

// Device memory for `count` elements of T; freed on destruction.
template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t count) : count_(count) {
    if (count_ > 0) {
      void* raw = nullptr;
      const cudaError_t error = cudaMalloc(&raw, count_ * sizeof(T));
      EXPECT_EQ(error, cudaSuccess) << cudaGetErrorString(error);
      data_ = static_cast<T*>(raw);
    }
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { Upload(host); }
  ~DeviceBuffer() {
    if (data_ != nullptr) cudaFree(data_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() const { return data_; }
  size_t count() const { return count_; }

  void Upload(const std::vector<T>& host) {
    ASSERT_EQ(host.size(), count_);
    if (count_ == 0) return;
    ASSERT_EQ(cudaMemcpy(data_, host.data(), count_ * sizeof(T), cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  // Element i, copied back on its own.
  T DownloadAt(size_t i) const {
    T value{};
    EXPECT_LT(i, count_);
    if (i < count_) {
      EXPECT_EQ(cudaMemcpy(&value, data_ + i, sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    }
    return value;
  }
  std::vector<T> Download() const {
    std::vector<T> host(count_);
    if (count_ > 0) {
      EXPECT_EQ(cudaMemcpy(host.data(), data_, count_ * sizeof(T), cudaMemcpyDeviceToHost),
                cudaSuccess);
    }
    return host;
  }

 private:
  size_t count_ = 0;
  T* data_ = nullptr;
};

// Round-to-nearest-even float → bf16, as __float2bfloat16_rn does (NaN stays NaN).
uint16_t ToBf16Bits(float value) {
  uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

float FromBf16Bits(uint16_t half) {
  const uint32_t bits = static_cast<uint32_t>(half) << 16;
  float value = 0.0f;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

// Elements of `actual` farther from `expected` than tolerance[i]; reports the first few.
// NaN in both counts as equal.
::testing::AssertionResult AllNear(const std::vector<float>& actual,
                                   const std::vector<float>& expected,
                                   const std::vector<double>& tolerance) {
  if (actual.size() != expected.size()) {
    return ::testing::AssertionFailure() << "sizes differ: " << actual.size() << " vs "
                                         << expected.size();
  }
  size_t bad = 0;
  std::string first;
  for (size_t i = 0; i < actual.size(); ++i) {
    if (std::isnan(actual[i]) && std::isnan(expected[i])) continue;
    const double diff = std::fabs(static_cast<double>(actual[i]) - expected[i]);
    if (!(diff <= tolerance[i])) {
      if (++bad <= 5) {
        first += "\n  [" + std::to_string(i) + "] got " + std::to_string(actual[i]) +
                 " want " + std::to_string(expected[i]) + " (tolerance " +
                 std::to_string(tolerance[i]) + ")";
      }
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << actual.size() << " differ:" << first;
}

// Relative + absolute tolerance for element-wise results.
std::vector<double> Tolerance(const std::vector<float>& expected, double relative,
                              double absolute) {
  std::vector<double> tolerance(expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    tolerance[i] = relative * std::fabs(static_cast<double>(expected[i])) + absolute;
  }
  return tolerance;
}

std::vector<float> RandomVector(size_t n, uint32_t seed, float low = -1.0f, float high = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(low, high);
  std::vector<float> values(n);
  for (float& v : values) v = uniform(rng);
  return values;
}

class CudaKernelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string reason = NoGpuReason();
    if (!reason.empty()) GTEST_SKIP() << "no usable GPU: " << reason;
    ASSERT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  void Sync() {
    const cudaError_t error = cudaStreamSynchronize(stream_);
    ASSERT_EQ(error, cudaSuccess) << cudaGetErrorString(error);
  }

  cudaStream_t stream_ = nullptr;
  ThreadPool pool_{2};
};

// ---------------------------------------------------------------------------------------
// GEMM

struct GemmCase {
  Transpose ta = Transpose::kNo;
  Transpose tb = Transpose::kNo;
  int m = 0, n = 0, k = 0;
  int pad = 0;  // added to every leading dimension
  float alpha = 1.0f;
  float beta = 0.0f;
  int offset = 0;  // elements by which A and B start past their allocation (misalignment)

  std::string Describe() const {
    return std::string(ta == Transpose::kYes ? "T" : "N") + (tb == Transpose::kYes ? "T" : "N") +
           " m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k) +
           " pad=" + std::to_string(pad) + " alpha=" + std::to_string(alpha) +
           " beta=" + std::to_string(beta) + " offset=" + std::to_string(offset);
  }
};

// Stored operands of a case: the padding of A and B holds NaN (reading it would show), C's
// padding holds kSentinel (writing it would show); with beta == 0, C's elements start as NaN
// (they must be ignored).
struct GemmOperands {
  int lda = 0, ldb = 0, ldc = 0;
  std::vector<float> a, b, c;

  GemmOperands(const GemmCase& g, uint32_t seed) {
    const bool ta = g.ta == Transpose::kYes;
    const bool tb = g.tb == Transpose::kYes;
    const int a_rows = ta ? g.k : g.m;
    const int a_cols = ta ? g.m : g.k;
    const int b_rows = tb ? g.n : g.k;
    const int b_cols = tb ? g.k : g.n;
    lda = a_cols + g.pad;
    ldb = b_cols + g.pad;
    ldc = g.n + g.pad;
    std::mt19937 rng(seed);
    a = Fill(a_rows, a_cols, lda, g.offset, kNaN, rng);
    b = Fill(b_rows, b_cols, ldb, g.offset, kNaN, rng);
    c = Fill(g.m, g.n, ldc, 0, kSentinel, rng);
    if (g.beta == 0.0f) {
      for (int r = 0; r < g.m; ++r) {
        std::fill_n(c.begin() + static_cast<ptrdiff_t>(r) * ldc, g.n, kNaN);
      }
    }
  }

  static std::vector<float> Fill(int rows, int cols, int ld, int offset, float padding,
                                 std::mt19937& rng) {
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    std::vector<float> data(static_cast<size_t>(offset) + static_cast<size_t>(rows) * ld + 1,
                            padding);
    for (int r = 0; r < rows; ++r) {
      for (int col = 0; col < cols; ++col) {
        data[static_cast<size_t>(offset) + static_cast<size_t>(r) * ld + col] = uniform(rng);
      }
    }
    return data;
  }
};

// Per-element tolerance: factor·u·(|alpha|·Σ|a·b| + |beta·c|), padding must match exactly.
std::vector<double> GemmTolerance(ThreadPool& pool, const GemmCase& g, const GemmOperands& ops,
                                  double factor) {
  auto absolute = [](std::vector<float> values) {
    for (float& v : values) v = std::isnan(v) ? v : std::fabs(v);
    return values;
  };
  const std::vector<float> abs_a = absolute(ops.a);
  const std::vector<float> abs_b = absolute(ops.b);
  std::vector<float> bound(ops.c.size(), 0.0f);
  if (g.m > 0 && g.n > 0) {
    Gemm(pool, g.ta, g.tb, g.m, g.n, g.k, 1.0f, abs_a.data() + g.offset, ops.lda,
         abs_b.data() + g.offset, ops.ldb, 0.0f, bound.data(), ops.ldc);
  }
  std::vector<double> tolerance(ops.c.size(), 0.0);
  for (int r = 0; r < g.m; ++r) {
    for (int col = 0; col < g.n; ++col) {
      const size_t i = static_cast<size_t>(r) * ops.ldc + col;
      const double old_c = g.beta == 0.0f ? 0.0 : std::fabs(static_cast<double>(ops.c[i]));
      tolerance[i] = factor * kUnitRoundoff *
                     (std::fabs(g.alpha) * bound[i] + std::fabs(g.beta) * old_c) + 1e-30;
    }
  }
  return tolerance;
}

std::vector<GemmCase> GemmCases() {
  struct Shape {
    int m, n, k, pad;
  };
  // Odd sizes cross every tile edge; pad 3 makes the bf16 leading dimensions unaligned
  // (scalar loads), pad 8 keeps them aligned with gaps between rows. The last three have
  // enough 128×128 tiles (≥ 192) to pick the large tile shape on current GPUs.
  const Shape shapes[] = {{1, 1, 1, 0},       {5, 7, 3, 0},        {17, 33, 9, 3},
                          {64, 64, 64, 0},    {129, 67, 131, 3},   {100, 300, 37, 8},
                          {256, 512, 96, 8},  {2048, 2048, 40, 0}, {2100, 1500, 70, 3},
                          {1500, 2100, 77, 8}};
  std::vector<GemmCase> cases;
  for (Transpose ta : {Transpose::kNo, Transpose::kYes}) {
    for (Transpose tb : {Transpose::kNo, Transpose::kYes}) {
      for (const Shape& s : shapes) {
        GemmCase g;
        g.ta = ta;
        g.tb = tb;
        g.m = s.m;
        g.n = s.n;
        g.k = s.k;
        g.pad = s.pad;
        cases.push_back(g);
        g.alpha = 0.75f;  // alpha and beta at work
        g.beta = -0.5f;
        cases.push_back(g);
      }
      // Base pointers one element past alignment (bf16: the scalar load path).
      GemmCase misaligned;
      misaligned.ta = ta;
      misaligned.tb = tb;
      misaligned.m = 70;
      misaligned.n = 90;
      misaligned.k = 48;
      misaligned.offset = 1;
      misaligned.beta = 1.0f;
      cases.push_back(misaligned);
      // k = 0 and alpha = 0: C = beta·C without touching A or B.
      GemmCase empty_k = misaligned;
      empty_k.offset = 0;
      empty_k.k = 0;
      empty_k.beta = 2.0f;
      cases.push_back(empty_k);
      GemmCase zero_alpha = misaligned;
      zero_alpha.offset = 0;
      zero_alpha.alpha = 0.0f;
      zero_alpha.beta = -1.0f;
      cases.push_back(zero_alpha);
    }
  }
  return cases;
}

TEST_F(CudaKernelsTest, GemmMatchesCpuForAllTransposesAndShapes) {
  uint32_t seed = 1;
  for (const GemmCase& g : GemmCases()) {
    SCOPED_TRACE(g.Describe());
    const GemmOperands ops(g, seed++);
    std::vector<float> expected = ops.c;
    Gemm(pool_, g.ta, g.tb, g.m, g.n, g.k, g.alpha, ops.a.data() + g.offset, ops.lda,
         ops.b.data() + g.offset, ops.ldb, g.beta, expected.data(), ops.ldc);

    DeviceBuffer<float> a(ops.a), b(ops.b), c(ops.c);
    const Status status = cuda::Gemm(stream_, g.ta, g.tb, g.m, g.n, g.k, g.alpha,
                                     a.get() + g.offset, ops.lda, b.get() + g.offset, ops.ldb,
                                     g.beta, c.get(), ops.ldc);
    ASSERT_TRUE(status.ok()) << status.ToString();
    Sync();
    const double factor = 2.0 * g.k + 8.0;
    EXPECT_TRUE(AllNear(c.Download(), expected, GemmTolerance(pool_, g, ops, factor)));
  }
}

TEST_F(CudaKernelsTest, GemmBf16MatchesCpuOnRoundedInputs) {
  uint32_t seed = 1000;
  for (const GemmCase& g : GemmCases()) {
    SCOPED_TRACE(g.Describe());
    GemmOperands ops(g, seed++);
    // Round A and B to bf16; the CPU reference works on exactly those values.
    std::vector<uint16_t> a_bits(ops.a.size()), b_bits(ops.b.size());
    for (size_t i = 0; i < ops.a.size(); ++i) {
      a_bits[i] = ToBf16Bits(ops.a[i]);
      ops.a[i] = FromBf16Bits(a_bits[i]);
    }
    for (size_t i = 0; i < ops.b.size(); ++i) {
      b_bits[i] = ToBf16Bits(ops.b[i]);
      ops.b[i] = FromBf16Bits(b_bits[i]);
    }
    std::vector<float> expected = ops.c;
    Gemm(pool_, g.ta, g.tb, g.m, g.n, g.k, g.alpha, ops.a.data() + g.offset, ops.lda,
         ops.b.data() + g.offset, ops.ldb, g.beta, expected.data(), ops.ldc);

    static_assert(sizeof(__nv_bfloat16) == sizeof(uint16_t));
    DeviceBuffer<uint16_t> a(a_bits), b(b_bits);
    DeviceBuffer<float> c(ops.c);
    const auto* a_bf16 = reinterpret_cast<const __nv_bfloat16*>(a.get()) + g.offset;
    const auto* b_bf16 = reinterpret_cast<const __nv_bfloat16*>(b.get()) + g.offset;
    const Status status = cuda::GemmBf16(stream_, g.ta, g.tb, g.m, g.n, g.k, g.alpha, a_bf16,
                                         ops.lda, b_bf16, ops.ldb, g.beta, c.get(), ops.ldc);
    ASSERT_TRUE(status.ok()) << status.ToString();
    Sync();
    const double factor = 2.0 * (2.0 * g.k + 8.0);
    EXPECT_TRUE(AllNear(c.Download(), expected, GemmTolerance(pool_, g, ops, factor)));
  }
}

TEST_F(CudaKernelsTest, GemmEmptyOutputIsANoOp) {
  DeviceBuffer<float> c(std::vector<float>{kSentinel});
  for (const auto& [m, n] : {std::pair{0, 5}, std::pair{5, 0}}) {
    EXPECT_TRUE(cuda::Gemm(stream_, Transpose::kNo, Transpose::kNo, m, n, 3, 1.0f, nullptr, 3,
                           nullptr, 5, 0.0f, c.get(), 5)
                    .ok());
    EXPECT_TRUE(cuda::GemmBf16(stream_, Transpose::kNo, Transpose::kNo, m, n, 3, 1.0f, nullptr,
                               3, nullptr, 5, 0.0f, c.get(), 5)
                    .ok());
  }
  Sync();
  EXPECT_EQ(c.DownloadAt(0), kSentinel);
}

TEST_F(CudaKernelsTest, CastToBf16RoundsToNearestEven) {
  std::vector<float> values = RandomVector(10001, 7, -1e4f, 1e4f);
  std::vector<float> specials = {0.0f,
                                 -0.0f,
                                 1.0f,
                                 std::numeric_limits<float>::infinity(),
                                 -std::numeric_limits<float>::infinity(),
                                 std::numeric_limits<float>::max(),  // rounds up to inf
                                 std::numeric_limits<float>::denorm_min(),
                                 std::numeric_limits<float>::min(),
                                 1e-40f,
                                 kNaN};
  for (uint32_t bits : {0x3f808000u, 0x3f818000u, 0xbf808000u, 0x3f808001u, 0x3f807fffu}) {
    float v = 0.0f;  // exact ties (to even both ways) and their neighbours
    std::memcpy(&v, &bits, sizeof(v));
    specials.push_back(v);
  }
  values.insert(values.end(), specials.begin(), specials.end());
  DeviceBuffer<float> in(values);
  DeviceBuffer<uint16_t> out(values.size());
  const Status status = cuda::CastToBf16(stream_, values.size(), in.get(),
                                         reinterpret_cast<__nv_bfloat16*>(out.get()));
  ASSERT_TRUE(status.ok()) << status.ToString();
  Sync();
  const std::vector<uint16_t> got = out.Download();
  for (size_t i = 0; i < values.size(); ++i) {
    if (std::isnan(values[i])) {
      EXPECT_TRUE(std::isnan(FromBf16Bits(got[i]))) << i;
    } else {
      EXPECT_EQ(got[i], ToBf16Bits(values[i])) << "value " << values[i] << " at " << i;
    }
  }
}

// ---------------------------------------------------------------------------------------
// Bias + activation

constexpr Activation kActivations[] = {Activation::kNone, Activation::kRelu, Activation::kGelu};

TEST_F(CudaKernelsTest, BiasActivationForwardMatchesCpu) {
  struct Shape {
    int rows, cols;
  };
  for (Activation act : kActivations) {
    for (const Shape s : {Shape{1, 1}, Shape{37, 300}, Shape{70000, 3}, Shape{64, 1025}}) {
      for (bool in_place : {false, true}) {
        if (in_place && act != Activation::kNone) continue;  // allowed only without activation
        const bool with_bias = s.cols != 1025;  // one shape without bias (a null pointer)
        SCOPED_TRACE("act=" + std::to_string(static_cast<int>(act)) + " rows=" +
                     std::to_string(s.rows) + " cols=" + std::to_string(s.cols) +
                     " in_place=" + std::to_string(in_place) +
                     " bias=" + std::to_string(with_bias));
        const size_t n = static_cast<size_t>(s.rows) * s.cols;
        const std::vector<float> bias = RandomVector(s.cols, 11);
        std::vector<float> pre = RandomVector(n, 12, -4.0f, 4.0f);
        std::vector<float> out(n, kNaN);
        DeviceBuffer<float> bias_d(bias), pre_d(pre), out_d(out);
        float* out_target = in_place ? pre_d.get() : out_d.get();
        const Status status = cuda::BiasActivationForward(
            stream_, act, s.rows, s.cols, with_bias ? bias_d.get() : nullptr, pre_d.get(),
            out_target);
        ASSERT_TRUE(status.ok()) << status.ToString();
        BiasActivationForward(pool_, act, s.rows, s.cols, with_bias ? bias.data() : nullptr,
                              pre.data(), in_place ? pre.data() : out.data());
        Sync();
        EXPECT_TRUE(AllNear(pre_d.Download(), pre, Tolerance(pre, 1e-6, 1e-7)));
        if (!in_place) {
          EXPECT_TRUE(AllNear(out_d.Download(), out, Tolerance(out, 4e-6, 1e-6)));
        }
      }
    }
  }
}

TEST_F(CudaKernelsTest, BiasActivationBackwardMatchesCpu) {
  struct Shape {
    int rows, cols;
  };
  for (Activation act : kActivations) {
    for (const Shape s : {Shape{1, 1}, Shape{37, 300}, Shape{1000, 33}, Shape{0, 5}}) {
      for (bool accumulate : {false, true}) {
        for (bool in_place : {false, true}) {  // dpre aliasing dout
          SCOPED_TRACE("act=" + std::to_string(static_cast<int>(act)) + " rows=" +
                       std::to_string(s.rows) + " cols=" + std::to_string(s.cols) +
                       " accumulate=" + std::to_string(accumulate) +
                       " in_place=" + std::to_string(in_place));
          const size_t n = static_cast<size_t>(s.rows) * s.cols;
          const std::vector<float> pre = RandomVector(n, 21, -4.0f, 4.0f);
          std::vector<float> dout = RandomVector(n, 22);
          std::vector<float> dpre(n, kNaN);
          std::vector<float> dbias = RandomVector(s.cols, 23);
          if (!accumulate) std::fill(dbias.begin(), dbias.end(), kNaN);  // must be overwritten
          DeviceBuffer<float> pre_d(pre), dout_d(dout), dpre_d(dpre), dbias_d(dbias);
          float* dpre_target = in_place ? dout_d.get() : dpre_d.get();
          const Status status =
              cuda::BiasActivationBackward(stream_, act, s.rows, s.cols, pre_d.get(),
                                           dout_d.get(), dpre_target, dbias_d.get(), accumulate);
          ASSERT_TRUE(status.ok()) << status.ToString();
          float* dpre_host = in_place ? dout.data() : dpre.data();
          BiasActivationBackward(pool_, act, s.rows, s.cols, pre.data(), dout.data(), dpre_host,
                                 dbias.data(), accumulate);
          Sync();
          const std::vector<float> expected_dpre = in_place ? dout : dpre;
          const std::vector<float> got_dpre = in_place ? dout_d.Download() : dpre_d.Download();
          // GELU's derivative cancels near its root and 1 + erf cancels for negative x: an
          // absolute allowance covers the few ulps of erff/expf that then show.
          EXPECT_TRUE(AllNear(got_dpre, expected_dpre, Tolerance(expected_dpre, 4e-6, 5e-7)));
          // Column sums in a different order: within (rows + 2)·u·Σ|dpre| on each side.
          std::vector<double> dbias_tolerance(s.cols, 1e-30);
          for (int col = 0; col < s.cols; ++col) {
            double magnitude = std::fabs(static_cast<double>(dbias[col]));
            for (int r = 0; r < s.rows; ++r) {
              magnitude += std::fabs(expected_dpre[static_cast<size_t>(r) * s.cols + col]);
            }
            // ... plus what the per-element derivative differences add up to.
            dbias_tolerance[col] += 2.0 * (s.rows + 4.0) * kUnitRoundoff * magnitude +
                                    4e-6 * magnitude + 5e-7 * s.rows;
          }
          EXPECT_TRUE(AllNear(dbias_d.Download(), dbias, dbias_tolerance));
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------
// Softmax cross-entropy

TEST_F(CudaKernelsTest, SoftmaxCrossEntropyMatchesCpu) {
  struct Shape {
    int rows, classes;
  };
  for (const Shape s : {Shape{1, 1}, Shape{300, 10}, Shape{77, 1000}, Shape{5, 33}}) {
    SCOPED_TRACE("rows=" + std::to_string(s.rows) + " classes=" + std::to_string(s.classes));
    const size_t n = static_cast<size_t>(s.rows) * s.classes;
    std::vector<float> logits = RandomVector(n, 31, -10.0f, 10.0f);
    // A row of huge logits: the max subtraction must keep it finite.
    for (int c = 0; c < s.classes; ++c) logits[c] += 1000.0f;
    std::vector<int32_t> labels(s.rows);
    std::mt19937 rng(32);
    for (int32_t& label : labels) {
      label = std::uniform_int_distribution<int32_t>(0, s.classes - 1)(rng);
    }
    // Some rows whose label is the argmax, so `correct` counts more than chance.
    for (int r = 0; r < s.rows; r += 3) {
      const float* row = logits.data() + static_cast<size_t>(r) * s.classes;
      labels[r] = static_cast<int32_t>(std::max_element(row, row + s.classes) - row);
    }

    std::vector<float> probs(n);
    int expected_correct = -1;
    const double mean_loss = SoftmaxCrossEntropyForward(pool_, s.rows, s.classes, logits.data(),
                                                        labels.data(), probs.data(),
                                                        &expected_correct);

    DeviceBuffer<float> logits_d(logits), probs_d(n), loss_d(std::vector<float>{kNaN});
    DeviceBuffer<int32_t> labels_d(labels);
    DeviceBuffer<int> correct_d(std::vector<int>{-7});
    Status status =
        cuda::SoftmaxCrossEntropyForward(stream_, s.rows, s.classes, logits_d.get(),
                                         labels_d.get(), probs_d.get(), loss_d.get(),
                                         correct_d.get());
    ASSERT_TRUE(status.ok()) << status.ToString();
    Sync();
    EXPECT_TRUE(AllNear(probs_d.Download(), probs, Tolerance(probs, 1e-5, 1e-7)));
    const double expected_sum = mean_loss * s.rows;
    EXPECT_NEAR(loss_d.DownloadAt(0), expected_sum, 1e-5 * std::fabs(expected_sum) + 1e-5);
    EXPECT_EQ(correct_d.DownloadAt(0), expected_correct);

    const float scale = 1.0f / static_cast<float>(s.rows);
    std::vector<float> dlogits(n);
    SoftmaxCrossEntropyBackward(pool_, s.rows, s.classes, probs.data(), labels.data(), scale,
                                dlogits.data());
    // The GPU backward starts from the CPU probabilities, so only its own arithmetic counts.
    probs_d.Upload(probs);
    DeviceBuffer<float> dlogits_d(n);
    status = cuda::SoftmaxCrossEntropyBackward(stream_, s.rows, s.classes, probs_d.get(),
                                               labels_d.get(), scale, dlogits_d.get());
    ASSERT_TRUE(status.ok()) << status.ToString();
    Sync();
    EXPECT_TRUE(AllNear(dlogits_d.Download(), dlogits, Tolerance(dlogits, 1e-6, 1e-9)));
  }
}

// ---------------------------------------------------------------------------------------
// Optimizers

TEST_F(CudaKernelsTest, SgdStepsMatchCpu) {
  const size_t n = 10007;
  struct SgdCase {
    SgdOptions options;
    bool with_buffer;  // momentum without a buffer is plain SGD
  };
  for (const SgdCase& sgd_case :
       {SgdCase{{0.1f, 0.9f, 0.0f}, true}, SgdCase{{0.05f, 0.9f, 0.01f}, true},
        SgdCase{{0.1f, 0.0f, 0.0f}, false}, SgdCase{{0.1f, 0.0f, 0.1f}, false},
        SgdCase{{0.1f, 0.9f, 0.1f}, false}}) {
    const SgdOptions& options = sgd_case.options;
    SCOPED_TRACE("lr=" + std::to_string(options.lr) + " momentum=" +
                 std::to_string(options.momentum) + " wd=" + std::to_string(options.weight_decay) +
                 " buffer=" + std::to_string(sgd_case.with_buffer));
    std::vector<float> params = RandomVector(n, 41);
    std::vector<float> buffer(n, 0.0f);
    DeviceBuffer<float> params_d(params), buffer_d(buffer), grads_d(n);
    const bool with_momentum = sgd_case.with_buffer;
    for (int step = 0; step < 5; ++step) {
      const std::vector<float> grads = RandomVector(n, 42 + step);
      grads_d.Upload(grads);
      const Status status =
          cuda::SgdStep(stream_, n, params_d.get(), grads_d.get(),
                        with_momentum ? buffer_d.get() : nullptr, options, step == 0);
      ASSERT_TRUE(status.ok()) << status.ToString();
      SgdStep(pool_, n, params.data(), grads.data(), with_momentum ? buffer.data() : nullptr,
              options, step == 0);
      Sync();
      EXPECT_TRUE(AllNear(params_d.Download(), params, Tolerance(params, 1e-5, 1e-6)));
      EXPECT_TRUE(AllNear(buffer_d.Download(), buffer, Tolerance(buffer, 1e-5, 1e-6)));
    }
  }
}

TEST_F(CudaKernelsTest, AdamWStepsMatchCpu) {
  const size_t n = 10007;
  for (const AdamWOptions& options :
       {AdamWOptions{}, AdamWOptions{3e-3f, 0.8f, 0.99f, 1e-6f, 0.1f}}) {
    SCOPED_TRACE("lr=" + std::to_string(options.lr) + " wd=" + std::to_string(options.weight_decay));
    std::vector<float> params = RandomVector(n, 51);
    std::vector<float> exp_avg(n, 0.0f), exp_avg_sq(n, 0.0f);
    DeviceBuffer<float> params_d(params), exp_avg_d(exp_avg), exp_avg_sq_d(exp_avg_sq),
        grads_d(n);
    for (int64_t step = 1; step <= 6; ++step) {
      const std::vector<float> grads = RandomVector(n, 52 + static_cast<uint32_t>(step));
      grads_d.Upload(grads);
      const Status status = cuda::AdamWStep(stream_, n, params_d.get(), grads_d.get(),
                                            exp_avg_d.get(), exp_avg_sq_d.get(), options, step);
      ASSERT_TRUE(status.ok()) << status.ToString();
      AdamWStep(pool_, n, params.data(), grads.data(), exp_avg.data(), exp_avg_sq.data(), options,
                step);
      Sync();
      EXPECT_TRUE(AllNear(params_d.Download(), params, Tolerance(params, 1e-5, 1e-6)));
      EXPECT_TRUE(AllNear(exp_avg_d.Download(), exp_avg, Tolerance(exp_avg, 1e-5, 1e-7)));
      EXPECT_TRUE(AllNear(exp_avg_sq_d.Download(), exp_avg_sq, Tolerance(exp_avg_sq, 1e-5, 1e-9)));
    }
  }
}

// ---------------------------------------------------------------------------------------
// Gradient buckets

TEST_F(CudaKernelsTest, FlattenAndUnflattenRoundTrip) {
  const std::vector<size_t> sizes = {5, 0, 1000, 3, 4097};
  std::vector<std::vector<float>> host_parts;
  std::vector<std::unique_ptr<DeviceBuffer<float>>> device_parts;
  std::vector<ConstSpan> host_spans, device_spans;
  size_t total = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    host_parts.push_back(RandomVector(sizes[i], 60 + static_cast<uint32_t>(i)));
    device_parts.push_back(std::make_unique<DeviceBuffer<float>>(host_parts.back()));
    total += sizes[i];
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    host_spans.push_back({host_parts[i].data(), sizes[i]});
    device_spans.push_back({device_parts[i]->get(), sizes[i]});
  }
  std::vector<float> expected_flat(total);
  Flatten(host_spans, expected_flat.data());

  DeviceBuffer<float> flat(total);
  Status status = cuda::Flatten(stream_, device_spans, flat.get());
  ASSERT_TRUE(status.ok()) << status.ToString();
  Sync();
  EXPECT_EQ(flat.Download(), expected_flat);

  std::vector<std::unique_ptr<DeviceBuffer<float>>> outputs;
  std::vector<MutableSpan> output_spans;
  for (size_t size : sizes) {
    outputs.push_back(std::make_unique<DeviceBuffer<float>>(std::vector<float>(size, kSentinel)));
    output_spans.push_back({outputs.back()->get(), size});
  }
  status = cuda::Unflatten(stream_, flat.get(), output_spans);
  ASSERT_TRUE(status.ok()) << status.ToString();
  Sync();
  for (size_t i = 0; i < sizes.size(); ++i) EXPECT_EQ(outputs[i]->Download(), host_parts[i]) << i;
}

TEST_F(CudaKernelsTest, ScaleMatchesCpuExactly) {
  for (size_t n : {size_t{1}, size_t{1000}, size_t{300001}}) {
    std::vector<float> data = RandomVector(n, 71, -100.0f, 100.0f);
    DeviceBuffer<float> data_d(data);
    const Status status = cuda::Scale(stream_, n, 0.37f, data_d.get());
    ASSERT_TRUE(status.ok()) << status.ToString();
    Scale(pool_, n, 0.37f, data.data());
    Sync();
    EXPECT_EQ(data_d.Download(), data) << n;  // one multiplication each: identical bits
  }
}

TEST_F(CudaKernelsTest, AccumulateMatchesCpuExactly) {
  for (size_t n : {size_t{1}, size_t{1000}, size_t{300001}}) {
    std::vector<float> sum = RandomVector(n, 73, -100.0f, 100.0f);
    const std::vector<float> add = RandomVector(n, 74, -100.0f, 100.0f);
    DeviceBuffer<float> sum_d(sum), add_d(add);
    const Status status = cuda::Accumulate(stream_, n, add_d.get(), sum_d.get());
    ASSERT_TRUE(status.ok()) << status.ToString();
    Accumulate(pool_, n, add.data(), sum.data());
    Sync();
    EXPECT_EQ(sum_d.Download(), sum) << n;  // one addition each: identical bits
  }
}

TEST_F(CudaKernelsTest, SquaredNormMatchesCpuAndIsDeterministic) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{255}, size_t{100003}, size_t{5000000}}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    const std::vector<float> data = RandomVector(n, 81, -3.0f, 3.0f);
    const double expected = SquaredNorm(pool_, n, data.data());
    DeviceBuffer<float> data_d(data), result_d(std::vector<float>{kNaN, kNaN});
    ASSERT_TRUE(cuda::SquaredNorm(stream_, n, data_d.get(), result_d.get()).ok());
    ASSERT_TRUE(cuda::SquaredNorm(stream_, n, data_d.get(), result_d.get() + 1).ok());
    Sync();
    const float first = result_d.DownloadAt(0);
    const float second = result_d.DownloadAt(1);
    // Double accumulation: the only visible error is the final rounding to float.
    EXPECT_NEAR(first, expected, 2e-7 * expected + 1e-30);
    EXPECT_EQ(std::memcmp(&first, &second, sizeof(float)), 0) << first << " vs " << second;
  }
}

// ---------------------------------------------------------------------------------------
// Argument checking

TEST_F(CudaKernelsTest, BadArgumentsAreRejectedWithoutLaunching) {
  DeviceBuffer<float> buffer(64);
  float* p = buffer.get();
  auto code = [](const Status& status) { return status.code(); };
  EXPECT_EQ(code(cuda::Gemm(stream_, Transpose::kNo, Transpose::kNo, -1, 4, 4, 1.0f, p, 4, p, 4,
                            0.0f, p, 4)),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code(cuda::Gemm(stream_, Transpose::kNo, Transpose::kNo, 4, 4, 4, 1.0f, nullptr, 4, p,
                            4, 0.0f, p, 4)),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code(cuda::Gemm(stream_, Transpose::kNo, Transpose::kYes, 4, 4, 8, 1.0f, p, 8, p, 4,
                            0.0f, p, 4)),
            StatusCode::kInvalidArgument);  // ldb < k for a transposed B
  EXPECT_EQ(code(cuda::GemmBf16(stream_, Transpose::kNo, Transpose::kNo, 4, 4, 4, 1.0f, nullptr,
                                4, nullptr, 4, 0.0f, p, 3)),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code(cuda::CastToBf16(stream_, 4, nullptr, nullptr)), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(cuda::BiasActivationForward(stream_, Activation::kGelu, 2, 2, p, p, p)),
            StatusCode::kInvalidArgument);  // out == pre needs kNone
  EXPECT_EQ(code(cuda::BiasActivationBackward(stream_, Activation::kRelu, 2, -2, p, p, p, p,
                                              false)),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code(cuda::SoftmaxCrossEntropyForward(stream_, 2, 3, p, nullptr, p, p, nullptr)),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code(cuda::SgdStep(stream_, 4, p, nullptr, p, SgdOptions{}, true)),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code(cuda::AdamWStep(stream_, 4, p, p, p, p, AdamWOptions{}, 0)),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code(cuda::SquaredNorm(stream_, 4, p, nullptr)), StatusCode::kInvalidArgument);
  const ConstSpan bad_part{nullptr, 3};
  EXPECT_EQ(code(cuda::Flatten(stream_, std::span<const ConstSpan>(&bad_part, 1), p)),
            StatusCode::kInvalidArgument);
  Sync();
}

}  // namespace
}  // namespace rankscope::kernels
