// Bias + activation, softmax cross-entropy and the gradient-bucket helpers. Each kernel
// splits its work into ranges fixed by the shape and the pool size, and every reduction adds
// in an order fixed by the shape alone, so results are reproducible run to run.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu_kernels.h"
#include "kernels/gemm_internal.h"  // CpuHasAvx2Fma
#include "kernels/parallel_internal.h"

namespace rankscope::kernels {
namespace {

using internal::ParallelRanges;

// Enough work per task to outweigh waking a pool thread (a few microseconds).
constexpr size_t kMinElementsPerTask = 16 * 1024;
// Activations with erf/exp are dearer per element, so fewer of them make a task worth it.
constexpr size_t kMinTranscendentalsPerTask = 4 * 1024;

constexpr float kSqrtHalf = 0.70710678118654752f;      // 1/√2
constexpr float kInvSqrtTwoPi = 0.39894228040143268f;  // 1/√(2π)

// The GELU math is written branch-free (selects, no library calls) so the loops over it
// vectorize; libm's erff/expf would stay scalar calls at several nanoseconds each.

// exp(v) for v ≤ 0, to about 1 ulp: v = n·ln2 + r with |r| ≤ ln2/2, exp(r) by its Taylor
// polynomial to degree 7 (truncation < 1e-8 relative), 2^n put into the exponent bits.
// Below −87 (where exp is no longer a normal float) the result is 0; a NaN stays NaN.
inline float ExpNonPositive(float v) {
  constexpr float kMinArgument = -87.0f;
  constexpr float kLog2e = 1.44269504f;
  constexpr float kLn2High = 0.693145751953125f;  // ln 2 to 15 bits: n·kLn2High is exact
  constexpr float kLn2Low = 1.42860677e-6f;       // ln 2 − kLn2High
  constexpr float kRound = 12582912.0f;           // 1.5·2^23: x + kRound − kRound rounds x
  const bool underflow = v < kMinArgument;
  const float clamped = v < kMinArgument ? kMinArgument : v;
  const float n = (clamped * kLog2e + kRound) - kRound;  // in [−126, 0]
  const float r = (clamped - n * kLn2High) - n * kLn2Low;
  float poly = 1.0f / 5040.0f;
  poly = poly * r + 1.0f / 720.0f;
  poly = poly * r + 1.0f / 120.0f;
  poly = poly * r + 1.0f / 24.0f;
  poly = poly * r + 1.0f / 6.0f;
  poly = poly * r + 0.5f;
  poly = poly * r + 1.0f;
  poly = poly * r + 1.0f;
  // n + 127 + 2^23 holds n + 127 in its low mantissa bits; shifted up they become the
  // exponent field of 2^n.
  const uint32_t exponent = std::bit_cast<uint32_t>(n + (127.0f + 8388608.0f)) << 23;
  const float result = poly * std::bit_cast<float>(exponent);
  return underflow ? 0.0f : result;
}

// The standard normal CDF Φ(x), and exp(−x²/2) (which the GELU derivative needs too).
// With z = |x|/√2, Φ(−|x|) = erfc(z)/2 and erfc(z) = exp(−z²)·t·P(t), t = 1/(1 + z·7/16):
// t maps z ∈ [0, ∞) into (0, 1], where erfc(z)·exp(z²)/t is smooth, and P is its degree-9
// Chebyshev fit over z ∈ [0, 9.4] (relative error 1e-8; beyond 9.4, exp(−z²) is 0 in
// float). Evaluated in float, erfc is good to ~3e-7 relative, so Φ keeps full relative
// accuracy in the lower tail, unlike 1 + erf(x/√2).
struct NormalCdf {
  float cdf;
  float gauss;  // exp(−x²/2)
};
inline NormalCdf StandardNormal(float x) {
  constexpr float kP = 0.4375f;
  const float gauss = ExpNonPositive(-0.5f * x * x);
  const float z = std::abs(x) * kSqrtHalf;
  const float t = 1.0f / (1.0f + kP * z);
  float poly = -3.762836754e-02f;
  poly = poly * t + 1.865318269e-01f;
  poly = poly * t - 3.230750263e-01f;
  poly = poly * t + 1.805959344e-01f;
  poly = poly * t - 1.951299980e-02f;
  poly = poly * t + 1.182753369e-01f;
  poly = poly * t + 1.789984256e-01f;
  poly = poly * t + 2.219777256e-01f;
  poly = poly * t + 2.470140904e-01f;
  poly = poly * t + 2.468230277e-01f;
  const float lower_tail = 0.5f * gauss * t * poly;  // Φ(−|x|)
  const float upper = 1.0f - lower_tail;             // Φ(|x|)
  return {x < 0.0f ? lower_tail : upper, gauss};
}

// GELU(x) = x·Φ(x) = 0.5·x·(1 + erf(x/√2)).
inline float Gelu(float x) { return x * StandardNormal(x).cdf; }

// d/dx [x·Φ(x)] = Φ(x) + x·φ(x) = 0.5·(1 + erf(x/√2)) + x·exp(−x²/2)/√(2π).
inline float GeluDerivative(float x) {
  const NormalCdf normal = StandardNormal(x);
  return normal.cdf + x * normal.gauss * kInvSqrtTwoPi;
}

// The GELU loops are compiled twice, for baseline x86-64 and for AVX2+FMA, and chosen once
// from the CPU: eight lanes and fused multiply-adds make them several times faster. (The
// FMA version rounds slightly differently; a given machine always runs the same one, so
// results stay reproducible there.) Dispatch is by hand rather than target_clones: an ifunc
// resolver runs before sanitizer runtimes are up and crashes ThreadSanitizer builds.
[[gnu::always_inline]] inline void GeluForwardLoop(size_t width, const float* pre, float* out) {
  for (size_t c = 0; c < width; ++c) out[c] = Gelu(pre[c]);
}

[[gnu::always_inline]] inline void GeluBackwardLoop(size_t width, const float* pre,
                                                    const float* dout, float* dpre, float* sums) {
  for (size_t c = 0; c < width; ++c) {
    const float d = dout[c] * GeluDerivative(pre[c]);
    dpre[c] = d;
    sums[c] += d;
  }
}

void GeluForwardBaseline(size_t width, const float* pre, float* out) {
  GeluForwardLoop(width, pre, out);
}
void GeluBackwardBaseline(size_t width, const float* pre, const float* dout, float* dpre,
                          float* sums) {
  GeluBackwardLoop(width, pre, dout, dpre, sums);
}

#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) void GeluForwardAvx2(size_t width, const float* pre,
                                                         float* out) {
  GeluForwardLoop(width, pre, out);
}
__attribute__((target("avx2,fma"))) void GeluBackwardAvx2(size_t width, const float* pre,
                                                          const float* dout, float* dpre,
                                                          float* sums) {
  GeluBackwardLoop(width, pre, dout, dpre, sums);
}
#endif

bool UseAvx2() {
  static const bool avx2 = internal::CpuHasAvx2Fma();
  return avx2;
}

void GeluForwardSegment(size_t width, const float* pre, float* out) {
#if defined(__x86_64__)
  if (UseAvx2()) return GeluForwardAvx2(width, pre, out);
#endif
  GeluForwardBaseline(width, pre, out);
}

void GeluBackwardSegment(size_t width, const float* pre, const float* dout, float* dpre,
                         float* sums) {
#if defined(__x86_64__)
  if (UseAvx2()) return GeluBackwardAvx2(width, pre, dout, dpre, sums);
#endif
  GeluBackwardBaseline(width, pre, dout, dpre, sums);
}

size_t MinRowsPerTask(Activation act, int cols) {
  const size_t per_task =
      act == Activation::kGelu ? kMinTranscendentalsPerTask : kMinElementsPerTask;
  return std::max<size_t>(1, per_task / static_cast<size_t>(std::max(1, cols)));
}

void BiasActivationRows(Activation act, int cols, const float* bias, float* pre, float* out,
                        size_t row_begin, size_t row_end) {
  for (size_t r = row_begin; r < row_end; ++r) {
    float* pre_row = pre + r * static_cast<size_t>(cols);
    float* out_row = out + r * static_cast<size_t>(cols);
    if (bias != nullptr) {
      for (int c = 0; c < cols; ++c) pre_row[c] += bias[c];
    }
    switch (act) {
      case Activation::kNone:
        if (out_row != pre_row)
          std::memcpy(out_row, pre_row, sizeof(float) * static_cast<size_t>(cols));
        break;
      case Activation::kRelu:
        // Written so that a NaN passes through (max(0, NaN) would hide it).
        for (int c = 0; c < cols; ++c) out_row[c] = pre_row[c] < 0.0f ? 0.0f : pre_row[c];
        break;
      case Activation::kGelu:
        GeluForwardSegment(static_cast<size_t>(cols), pre_row, out_row);
        break;
    }
  }
}

// dpre = dout ⊙ act'(pre) for one row segment, added into `sums`.
template <typename Derivative>
void BackwardSegment(size_t width, const float* pre, const float* dout, float* dpre, float* sums,
                     const Derivative& derivative) {
  for (size_t c = 0; c < width; ++c) {
    const float d = derivative(pre[c], dout[c]);
    dpre[c] = d;
    sums[c] += d;
  }
}

// dpre = dout ⊙ act'(pre) for columns [col_begin, col_end) of every row, and the column sums
// of dpre into dbias, added row by row in order.
void BiasActivationBackwardColumns(Activation act, int rows, int cols, const float* pre,
                                   const float* dout, float* dpre, float* dbias, bool accumulate,
                                   size_t col_begin, size_t col_end) {
  // Column sums for a chunk of columns at a time, kept on the stack.
  constexpr size_t kChunk = 256;
  float sums[kChunk];
  for (size_t chunk_begin = col_begin; chunk_begin < col_end; chunk_begin += kChunk) {
    const size_t width = std::min(kChunk, col_end - chunk_begin);
    std::fill(sums, sums + width, 0.0f);
    for (int r = 0; r < rows; ++r) {
      const size_t offset = static_cast<size_t>(r) * static_cast<size_t>(cols) + chunk_begin;
      switch (act) {
        case Activation::kNone:
          BackwardSegment(width, pre + offset, dout + offset, dpre + offset, sums,
                          [](float, float g) { return g; });
          break;
        case Activation::kRelu:
          BackwardSegment(width, pre + offset, dout + offset, dpre + offset, sums,
                          [](float x, float g) { return x > 0.0f ? g : 0.0f; });
          break;
        case Activation::kGelu:
          GeluBackwardSegment(width, pre + offset, dout + offset, dpre + offset, sums);
          break;
      }
    }
    if (dbias != nullptr) {
      float* dbias_chunk = dbias + chunk_begin;
      for (size_t c = 0; c < width; ++c) {
        dbias_chunk[c] = accumulate ? dbias_chunk[c] + sums[c] : sums[c];
      }
    }
  }
}

// Softmax cross-entropy is reduced over fixed chunks of rows (independent of the pool size),
// and the chunks' partial sums are added in chunk order.
constexpr int kSoftmaxRowsPerChunk = 32;
constexpr size_t kMinSoftmaxElementsPerTask = 8 * 1024;

struct SoftmaxPartial {
  double loss = 0.0;
  int correct = 0;
};

SoftmaxPartial SoftmaxRows(int classes, const float* logits, const int32_t* labels, float* probs,
                           int row_begin, int row_end) {
  SoftmaxPartial partial;
  for (int r = row_begin; r < row_end; ++r) {
    const size_t offset = static_cast<size_t>(r) * static_cast<size_t>(classes);
    const float* x = logits + offset;
    float* p = probs + offset;
    // The first index of the maximum is the prediction (ties go to the lower class).
    int argmax = 0;
    for (int c = 1; c < classes; ++c) {
      if (x[c] > x[argmax]) argmax = c;
    }
    const float max_logit = x[argmax];
    float sum = 0.0f;
    for (int c = 0; c < classes; ++c) {
      p[c] = std::exp(x[c] - max_logit);
      sum += p[c];
    }
    const float inverse_sum = 1.0f / sum;
    for (int c = 0; c < classes; ++c) p[c] *= inverse_sum;
    const int32_t label = labels[r];
    if (label < 0 || label >= classes) {
      // Outside the contract: poison the loss rather than read out of bounds.
      partial.loss += std::numeric_limits<double>::quiet_NaN();
      continue;
    }
    // −log softmax[label] = log Σ exp(x − max) − (x[label] − max), in double.
    partial.loss += std::log(static_cast<double>(sum)) -
                    (static_cast<double>(x[label]) - static_cast<double>(max_logit));
    if (argmax == label) ++partial.correct;
  }
  return partial;
}

// Squared norm: fixed chunks, each summed with eight double accumulators (a fixed order the
// compiler can still vectorize), the chunk sums then added in chunk order.
constexpr size_t kNormChunk = 32 * 1024;

double SquaredNormChunk(const float* data, size_t n) {
  constexpr size_t kLanes = 8;
  double lanes[kLanes] = {};
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (size_t j = 0; j < kLanes; ++j) {
      const double v = data[i + j];
      lanes[j] += v * v;
    }
  }
  double total = 0.0;
  for (size_t j = 0; j < kLanes; ++j) total += lanes[j];
  for (; i < n; ++i) total += static_cast<double>(data[i]) * static_cast<double>(data[i]);
  return total;
}

}  // namespace

void BiasActivationForward(ThreadPool& pool, Activation act, int rows, int cols, const float* bias,
                           float* pre, float* out) {
  if (rows <= 0 || cols <= 0) return;
  ParallelRanges(
      pool, static_cast<size_t>(rows), MinRowsPerTask(act, cols), 1,
      [&](size_t begin, size_t end) { BiasActivationRows(act, cols, bias, pre, out, begin, end); });
}

void BiasActivationBackward(ThreadPool& pool, Activation act, int rows, int cols, const float* pre,
                            const float* dout, float* dpre, float* dbias, bool accumulate) {
  if (rows <= 0 || cols <= 0) return;
  // Split by columns so each bias gradient is one task's sum over all rows in order.
  const size_t per_task =
      act == Activation::kGelu ? kMinTranscendentalsPerTask : kMinElementsPerTask;
  const size_t min_cols =
      std::max<size_t>(internal::kFloatAlignment, per_task / static_cast<size_t>(rows));
  ParallelRanges(pool, static_cast<size_t>(cols), min_cols, internal::kFloatAlignment,
                 [&](size_t begin, size_t end) {
                   BiasActivationBackwardColumns(act, rows, cols, pre, dout, dpre, dbias,
                                                 accumulate, begin, end);
                 });
}

double SoftmaxCrossEntropyForward(ThreadPool& pool, int rows, int classes, const float* logits,
                                  const int32_t* labels, float* probs, int* correct) {
  if (correct != nullptr) *correct = 0;
  if (rows <= 0 || classes <= 0) return 0.0;
  const int chunks = (rows + kSoftmaxRowsPerChunk - 1) / kSoftmaxRowsPerChunk;
  std::vector<SoftmaxPartial> partials(static_cast<size_t>(chunks));
  auto run_chunk = [&](int chunk) {
    const int begin = chunk * kSoftmaxRowsPerChunk;
    const int end = std::min(rows, begin + kSoftmaxRowsPerChunk);
    partials[static_cast<size_t>(chunk)] = SoftmaxRows(classes, logits, labels, probs, begin, end);
  };
  const size_t elements = static_cast<size_t>(rows) * static_cast<size_t>(classes);
  if (pool.size() == 1 || elements < 2 * kMinSoftmaxElementsPerTask) {
    for (int chunk = 0; chunk < chunks; ++chunk) run_chunk(chunk);
  } else {
    pool.ParallelFor(chunks, run_chunk);
  }
  double loss = 0.0;
  int total_correct = 0;
  for (const SoftmaxPartial& partial : partials) {
    loss += partial.loss;
    total_correct += partial.correct;
  }
  if (correct != nullptr) *correct = total_correct;
  return loss / rows;
}

void SoftmaxCrossEntropyBackward(ThreadPool& pool, int rows, int classes, const float* probs,
                                 const int32_t* labels, float scale, float* dlogits) {
  if (rows <= 0 || classes <= 0) return;
  const size_t min_rows = std::max<size_t>(1, kMinElementsPerTask / static_cast<size_t>(classes));
  ParallelRanges(pool, static_cast<size_t>(rows), min_rows, 1, [&](size_t begin, size_t end) {
    for (size_t r = begin; r < end; ++r) {
      const size_t offset = r * static_cast<size_t>(classes);
      const float* p = probs + offset;
      float* d = dlogits + offset;
      for (int c = 0; c < classes; ++c) d[c] = p[c] * scale;
      const int32_t label = labels[r];
      if (label >= 0 && label < classes) d[label] = (p[label] - 1.0f) * scale;
    }
  });
}

void Flatten(std::span<const ConstSpan> parts, float* flat) {
  for (const ConstSpan& part : parts) {
    if (part.size == 0) continue;
    std::memcpy(flat, part.data, part.size * sizeof(float));
    flat += part.size;
  }
}

void Unflatten(const float* flat, std::span<const MutableSpan> parts) {
  for (const MutableSpan& part : parts) {
    if (part.size == 0) continue;
    std::memcpy(part.data, flat, part.size * sizeof(float));
    flat += part.size;
  }
}

void Scale(ThreadPool& pool, size_t n, float factor, float* data) {
  ParallelRanges(pool, n, kMinElementsPerTask * 4, internal::kFloatAlignment,
                 [&](size_t begin, size_t end) {
                   for (size_t i = begin; i < end; ++i) data[i] *= factor;
                 });
}

void Accumulate(ThreadPool& pool, size_t n, const float* add, float* sum) {
  ParallelRanges(pool, n, kMinElementsPerTask * 4, internal::kFloatAlignment,
                 [&](size_t begin, size_t end) {
                   for (size_t i = begin; i < end; ++i) sum[i] += add[i];
                 });
}

double SquaredNorm(ThreadPool& pool, size_t n, const float* data) {
  if (n == 0) return 0.0;
  const size_t chunks = (n + kNormChunk - 1) / kNormChunk;
  std::vector<double> partials(chunks);
  auto run_chunk = [&](size_t chunk) {
    const size_t begin = chunk * kNormChunk;
    partials[chunk] = SquaredNormChunk(data + begin, std::min(kNormChunk, n - begin));
  };
  if (pool.size() == 1 || chunks < 4) {
    for (size_t chunk = 0; chunk < chunks; ++chunk) run_chunk(chunk);
  } else {
    // Contiguous runs of chunks per thread; the partial sums do not depend on who ran them.
    ParallelRanges(pool, chunks, 1, 1, [&](size_t begin, size_t end) {
      for (size_t chunk = begin; chunk < end; ++chunk) run_chunk(chunk);
    });
  }
  double total = 0.0;
  for (double partial : partials) total += partial;
  return total;
}

}  // namespace rankscope::kernels
