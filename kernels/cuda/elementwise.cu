// Element-wise and reduction kernels of the trainer: bias + activation, softmax
// cross-entropy, gradient-bucket copies, scaling and the squared norm.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/cuda/cuda_util.cuh"
#include "kernels/cuda_kernels.h"

namespace rankscope::kernels::cuda {
namespace {

constexpr float kInvSqrt2Pi = 0.39894228040143267794f;

// GELU(x) = x·Φ(x) = 0.5·x·(1 + erf(x/√2)). normcdff is Φ computed through erfc, so the
// lower tail keeps its relative accuracy (1 + erf(x/√2) would cancel), as the CPU does.
__device__ __forceinline__ float Activate(Activation act, float x) {
  switch (act) {
    case Activation::kRelu:
      return x < 0.0f ? 0.0f : x;  // a NaN passes through, as on the CPU
    case Activation::kGelu:
      return x * normcdff(x);
    case Activation::kNone:
      break;
  }
  return x;
}

// g · act'(x) at the pre-activation x. ReLU'(0) = 0, as in PyTorch; ReLU selects rather than
// multiplies, so an infinite g where x ≤ 0 gives 0, as on the CPU.
__device__ __forceinline__ float ActivationGradient(Activation act, float x, float g) {
  switch (act) {
    case Activation::kRelu:
      return x > 0.0f ? g : 0.0f;
    case Activation::kGelu:  // Φ(x) + x·φ(x)
      return g * (normcdff(x) + x * (kInvSqrt2Pi * expf(-0.5f * x * x)));
    case Activation::kNone:
      break;
  }
  return g;
}

// Rows×cols element-wise kernels: x covers columns, y covers rows (grid-stride, since
// gridDim.y is limited to 65535).
constexpr int kRowKernelThreads = 256;
constexpr int kMaxGridY = 65535;

dim3 RowGrid(int rows, int cols) {
  return dim3(static_cast<unsigned int>((cols + kRowKernelThreads - 1) / kRowKernelThreads),
              static_cast<unsigned int>(rows < kMaxGridY ? rows : kMaxGridY));
}

__global__ void BiasActivationForwardKernel(Activation act, int rows, int cols,
                                            const float* __restrict__ bias, float* pre,
                                            float* out) {
  const int col = static_cast<int>(blockIdx.x) * kRowKernelThreads + static_cast<int>(threadIdx.x);
  if (col >= cols) return;
  const float bias_value = bias != nullptr ? bias[col] : 0.0f;  // null: no bias
  for (int row = static_cast<int>(blockIdx.y); row < rows; row += static_cast<int>(gridDim.y)) {
    const size_t index = static_cast<size_t>(row) * static_cast<size_t>(cols) + col;
    const float x = pre[index] + bias_value;
    pre[index] = x;
    out[index] = Activate(act, x);
  }
}

// One block per strip of 32 columns, all rows: each thread sums its own rows in a fixed
// order and the block adds the 32 partial sums in a fixed order, so dbias is the same bits
// on every run (no atomics). Rows are read kBackwardBatch at a time before any store, since
// dpre may alias dout and the compiler could not otherwise overlap the loads.
constexpr int kStripCols = 32;
constexpr int kStripRowThreads = 32;
constexpr int kBackwardBatch = 4;

__global__ void __launch_bounds__(kStripCols * kStripRowThreads)
    BiasActivationBackwardKernel(Activation act, int rows, int cols, const float* pre,
                                 const float* dout, float* dpre, float* dbias, bool accumulate) {
  __shared__ float partial[kStripRowThreads][kStripCols + 1];
  const int col = static_cast<int>(blockIdx.x) * kStripCols + static_cast<int>(threadIdx.x);
  float sum = 0.0f;
  if (col < cols) {
    constexpr int kRowsPerPass = kStripRowThreads * kBackwardBatch;
    for (int base = static_cast<int>(threadIdx.y); base < rows; base += kRowsPerPass) {
      float x[kBackwardBatch];
      float g[kBackwardBatch];
#pragma unroll
      for (int s = 0; s < kBackwardBatch; ++s) {
        const int row = base + s * kStripRowThreads;
        if (row < rows) {
          const size_t index = static_cast<size_t>(row) * static_cast<size_t>(cols) + col;
          x[s] = pre[index];
          g[s] = dout[index];
        }
      }
#pragma unroll
      for (int s = 0; s < kBackwardBatch; ++s) {
        const int row = base + s * kStripRowThreads;
        if (row < rows) {
          const size_t index = static_cast<size_t>(row) * static_cast<size_t>(cols) + col;
          const float d = ActivationGradient(act, x[s], g[s]);
          dpre[index] = d;
          sum += d;
        }
      }
    }
  }
  partial[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && col < cols && dbias != nullptr) {
    float total = 0.0f;
    for (int y = 0; y < kStripRowThreads; ++y) total += partial[y][threadIdx.x];
    dbias[col] = accumulate ? dbias[col] + total : total;
  }
}

// One warp per row: max/argmax, then Σ exp, then the probabilities. The block adds its rows'
// losses and hits, and one thread adds them to the totals with atomics.
constexpr int kSoftmaxWarps = 8;

__global__ void __launch_bounds__(kSoftmaxWarps * 32)
    SoftmaxCrossEntropyForwardKernel(int rows, int classes, const float* logits,
                                     const int32_t* __restrict__ labels, float* probs,
                                     float* loss_sum, int* correct) {
  __shared__ float block_loss[kSoftmaxWarps];
  __shared__ int block_correct[kSoftmaxWarps];
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int row = static_cast<int>(blockIdx.x) * kSoftmaxWarps + warp;
  float row_loss = 0.0f;
  int row_correct = 0;
  if (row < rows) {  // whole warp takes the same branch
    const float* x = logits + static_cast<size_t>(row) * static_cast<size_t>(classes);
    float* p = probs + static_cast<size_t>(row) * static_cast<size_t>(classes);
    // Argmax is the first index of the maximum, as std::max_element; INT32_MAX = none yet.
    float best = -INFINITY;
    int best_index = INT32_MAX;
    for (int c = lane; c < classes; c += 32) {
      const float v = x[c];
      if (best_index == INT32_MAX || v > best) {
        best = v;
        best_index = c;
      }
    }
    for (int offset = 16; offset > 0; offset /= 2) {
      const float other = __shfl_xor_sync(0xffffffffu, best, offset);
      const int other_index = __shfl_xor_sync(0xffffffffu, best_index, offset);
      if (other_index != INT32_MAX &&
          (best_index == INT32_MAX || other > best || (other == best && other_index < best_index))) {
        best = other;
        best_index = other_index;
      }
    }
    float sum = 0.0f;
    for (int c = lane; c < classes; c += 32) sum += expf(x[c] - best);
    for (int offset = 16; offset > 0; offset /= 2) {
      sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    }
    const int label = labels[row];
    const bool label_ok = label >= 0 && label < classes;
    // Read before probs are written, in case a caller computes them in place.
    const float label_logit = label_ok ? x[label] : 0.0f;
    __syncwarp();
    const float inverse_sum = 1.0f / sum;
    for (int c = lane; c < classes; c += 32) p[c] = expf(x[c] - best) * inverse_sum;
    if (label_ok) {
      // −log(e^(x_label − max) / sum), without forming the probability (no log(0)).
      row_loss = logf(sum) - (label_logit - best);
      row_correct = (best_index == label) ? 1 : 0;
    } else {
      row_loss = NAN;  // out-of-range label: make it visible, never read out of bounds
    }
  }
  if (lane == 0) {
    block_loss[warp] = row_loss;
    block_correct[warp] = row_correct;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float loss = 0.0f;
    int hits = 0;
    for (int w = 0; w < kSoftmaxWarps; ++w) {
      loss += block_loss[w];
      hits += block_correct[w];
    }
    if (loss_sum != nullptr) atomicAdd(loss_sum, loss);
    if (correct != nullptr) atomicAdd(correct, hits);
  }
}

__global__ void SoftmaxCrossEntropyBackwardKernel(int rows, int classes,
                                                  const float* probs,
                                                  const int32_t* __restrict__ labels, float scale,
                                                  float* dlogits) {
  const int col = static_cast<int>(blockIdx.x) * kRowKernelThreads + static_cast<int>(threadIdx.x);
  if (col >= classes) return;
  for (int row = static_cast<int>(blockIdx.y); row < rows; row += static_cast<int>(gridDim.y)) {
    const size_t index = static_cast<size_t>(row) * static_cast<size_t>(classes) + col;
    const float one_hot = (labels[row] == col) ? 1.0f : 0.0f;
    dlogits[index] = (probs[index] - one_hot) * scale;
  }
}

__global__ void ScaleKernel(size_t n, float factor, float* __restrict__ data) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    data[i] *= factor;
  }
}

__global__ void AccumulateKernel(size_t n, const float* __restrict__ add, float* __restrict__ sum) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    sum[i] += add[i];
  }
}

// Squared norm in two fixed-shape passes (no atomics), so every run and every rank gets
// the same bits for the same data: kNormBlocks partial sums in double, then one block adds
// them in a fixed tree order.
constexpr int kNormThreads = 256;
constexpr int kNormBlocks = 1024;
constexpr int kNormFinalThreads = 1024;  // ≥ kNormBlocks: one partial per thread

template <int kThreads>
__device__ double BlockSum(double value, double* shared) {
  shared[threadIdx.x] = value;
  __syncthreads();
#pragma unroll
  for (int width = kThreads / 2; width > 0; width /= 2) {
    if (static_cast<int>(threadIdx.x) < width) shared[threadIdx.x] += shared[threadIdx.x + width];
    __syncthreads();
  }
  return shared[0];
}

__global__ void __launch_bounds__(kNormThreads)
    SquaredNormPartialKernel(size_t n, const float* __restrict__ data, double* partials) {
  __shared__ double shared[kNormThreads];
  double sum = 0.0;
  const size_t stride = static_cast<size_t>(gridDim.x) * kNormThreads;
  for (size_t i = static_cast<size_t>(blockIdx.x) * kNormThreads + threadIdx.x; i < n;
       i += stride) {
    const double v = data[i];
    sum += v * v;
  }
  const double total = BlockSum<kNormThreads>(sum, shared);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

__global__ void __launch_bounds__(kNormFinalThreads)
    SquaredNormFinalKernel(int count, const double* partials, float* result) {
  __shared__ double shared[kNormFinalThreads];
  const double value = static_cast<int>(threadIdx.x) < count ? partials[threadIdx.x] : 0.0;
  const double total = BlockSum<kNormFinalThreads>(value, shared);
  if (threadIdx.x == 0) *result = static_cast<float>(total);
}

Status LaunchSquaredNorm(cudaStream_t stream, size_t n, const float* data, int blocks,
                         double* partials, float* result) {
  SquaredNormPartialKernel<<<blocks, kNormThreads, 0, stream>>>(n, data, partials);
  RS_RETURN_IF_ERROR(internal::CheckLaunch("cuda::SquaredNorm partial launch"));
  SquaredNormFinalKernel<<<1, kNormFinalThreads, 0, stream>>>(blocks, partials, result);
  return internal::CheckLaunch("cuda::SquaredNorm final launch");
}

Status CheckRowsCols(const char* what, int rows, int cols) {
  if (rows < 0 || cols < 0) {
    return InvalidArgument(std::string(what) + ": negative size rows=" + std::to_string(rows) +
                           " cols=" + std::to_string(cols));
  }
  return Status::Ok();
}

}  // namespace

Status BiasActivationForward(cudaStream_t stream, Activation act, int rows, int cols,
                             const float* bias, float* pre, float* out) {
  constexpr const char* kWhat = "cuda::BiasActivationForward";
  RS_RETURN_IF_ERROR(CheckRowsCols(kWhat, rows, cols));
  const size_t elements = static_cast<size_t>(rows) * static_cast<size_t>(cols);
  // A null bias means none (as on the CPU).
  RS_RETURN_IF_ERROR(internal::CheckPointer(kWhat, "pre", pre, elements));
  RS_RETURN_IF_ERROR(internal::CheckPointer(kWhat, "out", out, elements));
  if (elements == 0) return Status::Ok();
  if (out == pre && act != Activation::kNone) {
    return InvalidArgument(std::string(kWhat) + ": out may equal pre only without activation");
  }
  internal::ClearStaleError();
  BiasActivationForwardKernel<<<RowGrid(rows, cols), kRowKernelThreads, 0, stream>>>(
      act, rows, cols, bias, pre, out);
  return internal::CheckLaunch("cuda::BiasActivationForward launch");
}

Status BiasActivationBackward(cudaStream_t stream, Activation act, int rows, int cols,
                              const float* pre, const float* dout, float* dpre, float* dbias,
                              bool accumulate) {
  constexpr const char* kWhat = "cuda::BiasActivationBackward";
  RS_RETURN_IF_ERROR(CheckRowsCols(kWhat, rows, cols));
  const size_t elements = static_cast<size_t>(rows) * static_cast<size_t>(cols);
  RS_RETURN_IF_ERROR(internal::CheckPointer(kWhat, "pre", pre, elements));
  RS_RETURN_IF_ERROR(internal::CheckPointer(kWhat, "dout", dout, elements));
  RS_RETURN_IF_ERROR(internal::CheckPointer(kWhat, "dpre", dpre, elements));
  // A null dbias means no bias gradient is wanted. With no rows nothing is written, dbias
  // included, as on the CPU.
  if (elements == 0) return Status::Ok();
  internal::ClearStaleError();
  const dim3 block(kStripCols, kStripRowThreads);
  const dim3 grid(static_cast<unsigned int>((cols + kStripCols - 1) / kStripCols));
  BiasActivationBackwardKernel<<<grid, block, 0, stream>>>(act, rows, cols, pre, dout, dpre,
                                                           dbias, accumulate);
  return internal::CheckLaunch("cuda::BiasActivationBackward launch");
}

Status SoftmaxCrossEntropyForward(cudaStream_t stream, int rows, int classes,
                                  const float* logits, const int32_t* labels, float* probs,
                                  float* loss_sum, int* correct) {
  constexpr const char* kWhat = "cuda::SoftmaxCrossEntropyForward";
  RS_RETURN_IF_ERROR(CheckRowsCols(kWhat, rows, classes));
  if (rows > 0 && classes == 0) {
    return InvalidArgument(std::string(kWhat) + ": rows without classes have no valid label");
  }
  const size_t elements = static_cast<size_t>(rows) * static_cast<size_t>(classes);
  RS_RETURN_IF_ERROR(internal::CheckPointer(kWhat, "logits", logits, elements));
  RS_RETURN_IF_ERROR(internal::CheckPointer(kWhat, "probs", probs, elements));
  RS_RETURN_IF_ERROR(internal::CheckPointer(kWhat, "labels", labels, static_cast<size_t>(rows)));
  RS_RETURN_IF_ERROR(internal::CheckPointer(kWhat, "loss_sum", loss_sum, 1));
  internal::ClearStaleError();
  // The kernel adds into the totals: start them at zero, in stream order.
  RS_RETURN_IF_ERROR(internal::FromCudaError(
      cudaMemsetAsync(loss_sum, 0, sizeof(float), stream), "cuda::SoftmaxCrossEntropyForward: "
                                                           "cudaMemsetAsync(loss_sum)"));
  if (correct != nullptr) {
    RS_RETURN_IF_ERROR(internal::FromCudaError(
        cudaMemsetAsync(correct, 0, sizeof(int), stream),
        "cuda::SoftmaxCrossEntropyForward: cudaMemsetAsync(correct)"));
  }
  if (rows == 0) return Status::Ok();
  const unsigned int blocks = static_cast<unsigned int>((rows + kSoftmaxWarps - 1) / kSoftmaxWarps);
  SoftmaxCrossEntropyForwardKernel<<<blocks, kSoftmaxWarps * 32, 0, stream>>>(
      rows, classes, logits, labels, probs, loss_sum, correct);
  return internal::CheckLaunch("cuda::SoftmaxCrossEntropyForward launch");
}

Status SoftmaxCrossEntropyBackward(cudaStream_t stream, int rows, int classes,
                                   const float* probs, const int32_t* labels, float scale,
                                   float* dlogits) {
  constexpr const char* kWhat = "cuda::SoftmaxCrossEntropyBackward";
  RS_RETURN_IF_ERROR(CheckRowsCols(kWhat, rows, classes));
  const size_t elements = static_cast<size_t>(rows) * static_cast<size_t>(classes);
  RS_RETURN_IF_ERROR(internal::CheckPointer(kWhat, "probs", probs, elements));
  RS_RETURN_IF_ERROR(internal::CheckPointer(kWhat, "dlogits", dlogits, elements));
  RS_RETURN_IF_ERROR(internal::CheckPointer(kWhat, "labels", labels, elements > 0 ? rows : 0));
  if (elements == 0) return Status::Ok();
  internal::ClearStaleError();
  SoftmaxCrossEntropyBackwardKernel<<<RowGrid(rows, classes), kRowKernelThreads, 0, stream>>>(
      rows, classes, probs, labels, scale, dlogits);
  return internal::CheckLaunch("cuda::SoftmaxCrossEntropyBackward launch");
}

Status Flatten(cudaStream_t stream, std::span<const ConstSpan> parts, float* flat) {
  size_t total = 0;
  for (const ConstSpan& part : parts) {
    RS_RETURN_IF_ERROR(internal::CheckPointer("cuda::Flatten", "part", part.data, part.size));
    total += part.size;
  }
  RS_RETURN_IF_ERROR(internal::CheckPointer("cuda::Flatten", "flat", flat, total));
  size_t offset = 0;
  for (const ConstSpan& part : parts) {
    if (part.size == 0) continue;
    RS_RETURN_IF_ERROR(internal::FromCudaError(
        cudaMemcpyAsync(flat + offset, part.data, part.size * sizeof(float),
                        cudaMemcpyDeviceToDevice, stream),
        "cuda::Flatten: cudaMemcpyAsync"));
    offset += part.size;
  }
  return Status::Ok();
}

Status Unflatten(cudaStream_t stream, const float* flat, std::span<const MutableSpan> parts) {
  size_t total = 0;
  for (const MutableSpan& part : parts) {
    RS_RETURN_IF_ERROR(internal::CheckPointer("cuda::Unflatten", "part", part.data, part.size));
    total += part.size;
  }
  RS_RETURN_IF_ERROR(internal::CheckPointer("cuda::Unflatten", "flat", flat, total));
  size_t offset = 0;
  for (const MutableSpan& part : parts) {
    if (part.size == 0) continue;
    RS_RETURN_IF_ERROR(internal::FromCudaError(
        cudaMemcpyAsync(part.data, flat + offset, part.size * sizeof(float),
                        cudaMemcpyDeviceToDevice, stream),
        "cuda::Unflatten: cudaMemcpyAsync"));
    offset += part.size;
  }
  return Status::Ok();
}

Status Scale(cudaStream_t stream, size_t n, float factor, float* data) {
  RS_RETURN_IF_ERROR(internal::CheckPointer("cuda::Scale", "data", data, n));
  if (n == 0) return Status::Ok();
  internal::ClearStaleError();
  ScaleKernel<<<internal::ElementwiseBlocks(n), internal::kElementwiseThreads, 0, stream>>>(
      n, factor, data);
  return internal::CheckLaunch("cuda::Scale launch");
}

Status Accumulate(cudaStream_t stream, size_t n, const float* add, float* sum) {
  RS_RETURN_IF_ERROR(internal::CheckPointer("cuda::Accumulate", "add", add, n));
  RS_RETURN_IF_ERROR(internal::CheckPointer("cuda::Accumulate", "sum", sum, n));
  if (n == 0) return Status::Ok();
  internal::ClearStaleError();
  AccumulateKernel<<<internal::ElementwiseBlocks(n), internal::kElementwiseThreads, 0, stream>>>(n, add, sum);
  return internal::CheckLaunch("cuda::Accumulate launch");
}

Status SquaredNorm(cudaStream_t stream, size_t n, const float* data, float* result) {
  RS_RETURN_IF_ERROR(internal::CheckPointer("cuda::SquaredNorm", "data", data, n));
  RS_RETURN_IF_ERROR(internal::CheckPointer("cuda::SquaredNorm", "result", result, 1));
  internal::ClearStaleError();
  if (n == 0) {
    return internal::FromCudaError(cudaMemsetAsync(result, 0, sizeof(float), stream),
                                   "cuda::SquaredNorm: cudaMemsetAsync");
  }
  // The block count depends on n only, so the summation order does too.
  const size_t wanted = (n + kNormThreads - 1) / kNormThreads;
  const int blocks = static_cast<int>(wanted < kNormBlocks ? wanted : kNormBlocks);
  // Stream-ordered scratch for the partial sums: safe with concurrent calls on other streams.
  void* scratch = nullptr;
  RS_RETURN_IF_ERROR(internal::FromCudaError(
      cudaMallocAsync(&scratch, static_cast<size_t>(blocks) * sizeof(double), stream),
      "cuda::SquaredNorm: cudaMallocAsync"));
  double* partials = static_cast<double*>(scratch);
  const Status launched = LaunchSquaredNorm(stream, n, data, blocks, partials, result);
  const Status freed =
      internal::FromCudaError(cudaFreeAsync(scratch, stream), "cuda::SquaredNorm: cudaFreeAsync");
  return launched.ok() ? freed : launched;
}

}  // namespace rankscope::kernels::cuda
