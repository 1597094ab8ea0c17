// CUDA versions of the operations in cpu_kernels.h, same semantics and layouts (row-major),
// on device pointers, enqueued on `stream`. Each returns the launch error as a Status
// (cudaGetLastError after the launch); execution errors surface at the next synchronization.
// Built only when the CUDA toolkit is found (RANKSCOPE_HAVE_CUDA).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include "base/status.h"
#include "kernels/cpu_kernels.h"  // Transpose, Activation, SgdOptions, AdamWOptions, spans

namespace rankscope::kernels::cuda {

// Tiled shared-memory SGEMM (fp32 in, fp32 accumulate, fp32 out).
Status Gemm(cudaStream_t stream, Transpose transpose_a, Transpose transpose_b, int m, int n,
            int k, float alpha, const float* a, int lda, const float* b, int ldb, float beta,
            float* c, int ldc);
// Tensor-core GEMM: bf16 in, fp32 accumulate, fp32 out (WMMA/mma.sync, sm_80+).
Status GemmBf16(cudaStream_t stream, Transpose transpose_a, Transpose transpose_b, int m, int n,
                int k, float alpha, const __nv_bfloat16* a, int lda, const __nv_bfloat16* b,
                int ldb, float beta, float* c, int ldc);
Status CastToBf16(cudaStream_t stream, size_t n, const float* in, __nv_bfloat16* out);

Status BiasActivationForward(cudaStream_t stream, Activation act, int rows, int cols,
                             const float* bias, float* pre, float* out);
Status BiasActivationBackward(cudaStream_t stream, Activation act, int rows, int cols,
                              const float* pre, const float* dout, float* dpre, float* dbias,
                              bool accumulate);

// loss_sum receives Σ_rows −log probs[label] (one float, device memory) and correct the
// number of rows whose argmax is the label (one int, device memory): the caller divides
// after copying back, so nothing here synchronizes.
Status SoftmaxCrossEntropyForward(cudaStream_t stream, int rows, int classes,
                                  const float* logits, const int32_t* labels, float* probs,
                                  float* loss_sum, int* correct);
Status SoftmaxCrossEntropyBackward(cudaStream_t stream, int rows, int classes,
                                   const float* probs, const int32_t* labels, float scale,
                                   float* dlogits);

Status SgdStep(cudaStream_t stream, size_t n, float* params, const float* grads,
               float* momentum_buffer, const SgdOptions& options, bool first_step);
Status AdamWStep(cudaStream_t stream, size_t n, float* params, const float* grads,
                 float* exp_avg, float* exp_avg_sq, const AdamWOptions& options, int64_t step);

// parts live in device memory; the span arrays themselves are host memory.
Status Flatten(cudaStream_t stream, std::span<const ConstSpan> parts, float* flat);
Status Unflatten(cudaStream_t stream, const float* flat, std::span<const MutableSpan> parts);
Status Scale(cudaStream_t stream, size_t n, float factor, float* data);
// sum[i] += add[i] for i < n.
Status Accumulate(cudaStream_t stream, size_t n, const float* add, float* sum);
// *result (device memory, one float) = Σ data[i]².
Status SquaredNorm(cudaStream_t stream, size_t n, const float* data, float* result);

}  // namespace rankscope::kernels::cuda
