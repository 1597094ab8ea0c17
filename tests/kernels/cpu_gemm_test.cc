// The CPU GEMM against a naive triple loop in double precision, on both micro-kernels
// (forced through the private ISA switch) and several thread counts.
//
// Tolerance: a float dot product of length k, however ordered and with or without FMA,
// differs from the exact one by at most about k·eps·Σ|a_p·b_p| (eps = 2^-24 for
// round-to-nearest float); alpha, beta and the final addition add a few more roundings. So
// each element is checked against (k + 4)·eps·(|alpha|·Σ|a·b| + |beta|·|c|), the worst-case
// bound, which is still far below the size of any real mistake: a single product dropped or
// taken from the wrong place changes the result by about Σ|a·b|/k.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu_kernels.h"
#include "kernels/gemm_internal.h"

namespace rankscope::kernels {
namespace {

using internal::GemmIsaKind;
using internal::kKc;
using internal::kMc;
using internal::kMr;
using internal::kNc;
using internal::kNr;

constexpr double kEps = std::numeric_limits<float>::epsilon() / 2;  // unit roundoff
constexpr float kSentinel = -12345.0f;  // fills C's padding, which Gemm must not touch

struct Shape {
  int m, n, k;
};

std::string Describe(Transpose ta, Transpose tb, const Shape& s) {
  return std::string(ta == Transpose::kYes ? "T" : "N") + (tb == Transpose::kYes ? "T" : "N") +
         " " + std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k);
}

// A GEMM problem with its stored operands; stride padding is filled with NaN on A and B (so
// reading outside the matrix shows up) and with kSentinel on C.
struct Problem {
  Transpose ta = Transpose::kNo;
  Transpose tb = Transpose::kNo;
  Shape shape{};
  int lda = 0, ldb = 0, ldc = 0;
  std::vector<float> a, b, c;

  Problem(Transpose transpose_a, Transpose transpose_b, Shape s, int pad, uint32_t seed)
      : ta(transpose_a), tb(transpose_b), shape(s) {
    const int a_rows = ta == Transpose::kYes ? s.k : s.m;
    const int a_cols = ta == Transpose::kYes ? s.m : s.k;
    const int b_rows = tb == Transpose::kYes ? s.n : s.k;
    const int b_cols = tb == Transpose::kYes ? s.k : s.n;
    lda = a_cols + pad;
    ldb = b_cols + 2 * pad;
    ldc = s.n + 3 * pad;
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    a = Fill(a_rows, a_cols, lda, std::numeric_limits<float>::quiet_NaN(), rng, uniform);
    b = Fill(b_rows, b_cols, ldb, std::numeric_limits<float>::quiet_NaN(), rng, uniform);
    c = Fill(s.m, s.n, ldc, kSentinel, rng, uniform);
  }

  static std::vector<float> Fill(int rows, int cols, int ld, float padding, std::mt19937& rng,
                                 std::uniform_real_distribution<float>& uniform) {
    std::vector<float> data(static_cast<size_t>(rows) * ld, padding);
    for (int r = 0; r < rows; ++r) {
      for (int col = 0; col < cols; ++col) data[static_cast<size_t>(r) * ld + col] = uniform(rng);
    }
    return data;
  }

  float A(int i, int p) const {
    return ta == Transpose::kYes ? a[static_cast<size_t>(p) * lda + i]
                                 : a[static_cast<size_t>(i) * lda + p];
  }
  float B(int p, int j) const {
    return tb == Transpose::kYes ? b[static_cast<size_t>(j) * ldb + p]
                                 : b[static_cast<size_t>(p) * ldb + j];
  }

  void Run(ThreadPool& pool, float alpha, float beta, std::vector<float>& out) const {
    Gemm(pool, ta, tb, shape.m, shape.n, shape.k, alpha, a.data(), lda, b.data(), ldb, beta,
         out.data(), ldc);
  }

  // Checks `out` (the result of Run on a copy of c) against the double-precision product.
  void Check(float alpha, float beta, const std::vector<float>& out) const {
    int reported = 0;
    for (int i = 0; i < shape.m; ++i) {
      for (int j = 0; j < shape.n; ++j) {
        double exact = 0.0, magnitude = 0.0;
        for (int p = 0; p < shape.k; ++p) {
          const double product = static_cast<double>(A(i, p)) * B(p, j);
          exact += product;
          magnitude += std::abs(product);
        }
        const size_t at = static_cast<size_t>(i) * ldc + j;
        double expected = alpha * exact;
        double bound = std::abs(alpha) * magnitude;
        if (beta != 0.0f) {
          expected += static_cast<double>(beta) * c[at];
          bound += std::abs(static_cast<double>(beta) * c[at]);
        }
        const double tolerance = (shape.k + 4) * kEps * bound + 1e-30;
        const double error = std::abs(out[at] - expected);
        if (!(error <= tolerance) && reported++ < 5) {
          ADD_FAILURE() << "C(" << i << "," << j << ") = " << out[at] << ", expected " << expected
                        << " (tolerance " << tolerance << ")";
        }
      }
      // The stride padding of C is not C.
      for (int j = shape.n; j < ldc; ++j) {
        const size_t at = static_cast<size_t>(i) * ldc + j;
        if (out[at] != kSentinel && reported++ < 5) {
          ADD_FAILURE() << "padding C(" << i << "," << j << ") written: " << out[at];
        }
      }
    }
  }
};

const std::vector<Shape>& Shapes() {
  static const std::vector<Shape> shapes = {
      {1, 1, 1},
      {1, 1, 7},
      {2, 3, 1},
      {7, 13, 29},
      {1, 37, 19},
      {41, 1, 23},
      {kMr, kNr, 8},
      {kMr - 1, kNr - 1, 5},
      {kMr + 1, kNr + 1, 9},
      {kMc - 1, kNr * 2 + 3, kKc + 1},
      {kMc + 1, 31, kKc - 1},
      {2 * kMc + 5, 20, 2 * kKc + 3},
      {3, kNc + 5, 2},  // two column blocks
      {257, 131, 300},
  };
  return shapes;
}

constexpr Transpose kTransposes[] = {Transpose::kNo, Transpose::kYes};

// Runs with each micro-kernel forced, restoring the automatic choice afterwards.
class GemmIsaTest : public testing::TestWithParam<GemmIsaKind> {
 protected:
  void SetUp() override {
    original_ = internal::ActiveGemmIsa();
    if (!internal::ForceGemmIsa(GetParam())) GTEST_SKIP() << "this CPU lacks AVX2/FMA";
  }
  void TearDown() override { ASSERT_TRUE(internal::ForceGemmIsa(original_)); }

 private:
  GemmIsaKind original_ = GemmIsaKind::kPortable;
};

TEST_P(GemmIsaTest, ReportsTheForcedIsa) {
  EXPECT_STREQ(GemmIsa(), GetParam() == GemmIsaKind::kAvx2Fma ? "avx2+fma" : "portable");
}

TEST_P(GemmIsaTest, AllTransposesAndShapesMatchNaive) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    uint32_t seed = 1;
    for (const Shape& shape : Shapes()) {
      for (Transpose ta : kTransposes) {
        for (Transpose tb : kTransposes) {
          SCOPED_TRACE(Describe(ta, tb, shape) + ", threads " + std::to_string(threads));
          // Unpadded strides for even seeds, padded ones for odd.
          const Problem problem(ta, tb, shape, seed % 2 == 0 ? 0 : 3, seed);
          ++seed;
          std::vector<float> out = problem.c;
          problem.Run(pool, 1.0f, 0.0f, out);
          problem.Check(1.0f, 0.0f, out);
        }
      }
    }
  }
}

TEST_P(GemmIsaTest, AlphaAndBeta) {
  struct Scalars {
    float alpha, beta;
  };
  const Scalars cases[] = {{1.0f, 1.0f}, {-1.5f, 0.25f}, {0.5f, 0.0f}, {2.0f, -1.0f}};
  ThreadPool pool(2);
  uint32_t seed = 100;
  for (const Shape& shape : {Shape{7, 13, 29}, Shape{kMc + 1, 37, kKc + 5}, Shape{64, 64, 64}}) {
    for (Transpose ta : kTransposes) {
      for (Transpose tb : kTransposes) {
        for (const Scalars& s : cases) {
          SCOPED_TRACE(Describe(ta, tb, shape) + " alpha " + std::to_string(s.alpha) + " beta " +
                       std::to_string(s.beta));
          const Problem problem(ta, tb, shape, 2, seed++);
          std::vector<float> out = problem.c;
          problem.Run(pool, s.alpha, s.beta, out);
          problem.Check(s.alpha, s.beta, out);
        }
      }
    }
  }
}

TEST_P(GemmIsaTest, BetaZeroIgnoresNaNsInC) {
  ThreadPool pool(2);
  for (const Shape& shape : {Shape{7, 13, 29}, Shape{kMc + 3, 2 * kNr + 1, kKc + 2}}) {
    for (Transpose ta : kTransposes) {
      for (Transpose tb : kTransposes) {
        SCOPED_TRACE(Describe(ta, tb, shape));
        Problem problem(ta, tb, shape, 1, 7);
        for (int i = 0; i < shape.m; ++i) {
          for (int j = 0; j < shape.n; ++j) {
            problem.c[static_cast<size_t>(i) * problem.ldc + j] =
                std::numeric_limits<float>::quiet_NaN();
          }
        }
        std::vector<float> out = problem.c;
        problem.Run(pool, 0.75f, 0.0f, out);
        problem.Check(0.75f, 0.0f, out);
      }
    }
  }
}

TEST_P(GemmIsaTest, ZeroAlphaOrZeroKOnlyScalesC) {
  ThreadPool pool(1);
  const Problem problem(Transpose::kNo, Transpose::kNo, {5, 9, 4}, 1, 3);
  std::vector<float> out = problem.c;
  Gemm(pool, Transpose::kNo, Transpose::kNo, 5, 9, 0, 1.0f, problem.a.data(), problem.lda,
       problem.b.data(), problem.ldb, 2.0f, out.data(), problem.ldc);
  for (int i = 0; i < 5; ++i) {
    for (int j = 0; j < 9; ++j) {
      const size_t at = static_cast<size_t>(i) * problem.ldc + j;
      EXPECT_EQ(out[at], 2.0f * problem.c[at]);
    }
  }
  std::vector<float> nan_c(problem.c.size(), std::numeric_limits<float>::quiet_NaN());
  problem.Run(pool, 0.0f, 0.0f, nan_c);
  for (int i = 0; i < 5; ++i) {
    for (int j = 0; j < 9; ++j) EXPECT_EQ(nan_c[static_cast<size_t>(i) * problem.ldc + j], 0.0f);
  }
}

TEST_P(GemmIsaTest, EmptyShapesTouchNothing) {
  ThreadPool pool(2);
  std::vector<float> c(16, kSentinel);
  const float a[4] = {1, 2, 3, 4};
  Gemm(pool, Transpose::kNo, Transpose::kNo, 0, 4, 4, 1.0f, a, 4, a, 4, 0.0f, c.data(), 4);
  Gemm(pool, Transpose::kNo, Transpose::kNo, 4, 0, 4, 1.0f, a, 4, a, 4, 0.0f, c.data(), 4);
  for (float v : c) EXPECT_EQ(v, kSentinel);
}

TEST_P(GemmIsaTest, BitIdenticalRunToRun) {
  const Problem problem(Transpose::kNo, Transpose::kYes, {257, 131, 300}, 0, 11);
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    std::vector<float> first = problem.c, second = problem.c;
    problem.Run(pool, 1.0f, 0.5f, first);
    problem.Run(pool, 1.0f, 0.5f, second);
    EXPECT_EQ(std::memcmp(first.data(), second.data(), first.size() * sizeof(float)), 0)
        << "threads " << threads;
  }
}

// Stronger than the API promises (same thread count): this implementation computes every
// element with the same steps whatever rectangle of C a thread gets.
TEST_P(GemmIsaTest, BitIdenticalAcrossThreadCounts) {
  const Problem problem(Transpose::kYes, Transpose::kNo, {kMc * 2 + 7, 3 * kNr + 5, kKc + 9}, 0,
                        12);
  ThreadPool one(1);
  std::vector<float> reference = problem.c;
  problem.Run(one, 1.0f, 0.0f, reference);
  for (int threads : {2, 3, 4}) {
    ThreadPool pool(threads);
    std::vector<float> out = problem.c;
    problem.Run(pool, 1.0f, 0.0f, out);
    EXPECT_EQ(std::memcmp(reference.data(), out.data(), out.size() * sizeof(float)), 0)
        << "threads " << threads;
  }
}

TEST_P(GemmIsaTest, LinearHelpersMapToGemm) {
  constexpr int kBatch = 37, kIn = 45, kOut = 29;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  auto random = [&](size_t n) {
    std::vector<float> v(n);
    for (float& x : v) x = uniform(rng);
    return v;
  };
  const std::vector<float> x = random(kBatch * kIn), w = random(kOut * kIn),
                           dy = random(kBatch * kOut), dw0 = random(kOut * kIn);
  ThreadPool pool(2);
  auto expect_close = [](double expected, double magnitude, float actual, int k) {
    EXPECT_NEAR(actual, expected, (k + 4) * kEps * magnitude + 1e-30);
  };

  std::vector<float> y(kBatch * kOut);
  LinearForward(pool, kBatch, kIn, kOut, x.data(), w.data(), y.data());
  for (int b = 0; b < kBatch; ++b) {
    for (int o = 0; o < kOut; ++o) {
      double sum = 0, mag = 0;
      for (int i = 0; i < kIn; ++i) {
        sum += double{x[b * kIn + i]} * w[o * kIn + i];
        mag += std::abs(double{x[b * kIn + i]} * w[o * kIn + i]);
      }
      expect_close(sum, mag, y[b * kOut + o], kIn);
    }
  }

  std::vector<float> dx(kBatch * kIn);
  LinearBackwardData(pool, kBatch, kIn, kOut, dy.data(), w.data(), dx.data());
  for (int b = 0; b < kBatch; ++b) {
    for (int i = 0; i < kIn; ++i) {
      double sum = 0, mag = 0;
      for (int o = 0; o < kOut; ++o) {
        sum += double{dy[b * kOut + o]} * w[o * kIn + i];
        mag += std::abs(double{dy[b * kOut + o]} * w[o * kIn + i]);
      }
      expect_close(sum, mag, dx[b * kIn + i], kOut);
    }
  }

  for (bool accumulate : {false, true}) {
    std::vector<float> dw = dw0;
    LinearBackwardWeight(pool, kBatch, kIn, kOut, dy.data(), x.data(), dw.data(), accumulate);
    for (int o = 0; o < kOut; ++o) {
      for (int i = 0; i < kIn; ++i) {
        double sum = accumulate ? dw0[o * kIn + i] : 0.0;
        double mag = std::abs(sum);
        for (int b = 0; b < kBatch; ++b) {
          sum += double{dy[b * kOut + o]} * x[b * kIn + i];
          mag += std::abs(double{dy[b * kOut + o]} * x[b * kIn + i]);
        }
        expect_close(sum, mag, dw[o * kIn + i], kBatch);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, GemmIsaTest,
                         testing::Values(GemmIsaKind::kPortable, GemmIsaKind::kAvx2Fma),
                         [](const testing::TestParamInfo<GemmIsaKind>& isa) {
                           return isa.param == GemmIsaKind::kAvx2Fma ? "Avx2Fma" : "Portable";
                         });

TEST(GemmIsaSelectionTest, AutomaticChoiceFollowsTheCpu) {
  // Unless the environment forces the portable kernel, AVX2+FMA CPUs use it.
  const char* forced = std::getenv("RANKSCOPE_GEMM_ISA");
  if (forced != nullptr && std::string(forced) == "portable") {
    EXPECT_EQ(internal::ActiveGemmIsa(), GemmIsaKind::kPortable);
  } else {
    EXPECT_EQ(internal::ActiveGemmIsa() == GemmIsaKind::kAvx2Fma, internal::CpuHasAvx2Fma());
  }
}

}  // namespace
}  // namespace rankscope::kernels
