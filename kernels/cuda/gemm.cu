// fp32 SGEMM: shared-memory tiles, 8×8 register micro-tiles, register-prefetched double
// buffering. C[m×n] = alpha · op(A) · op(B) + beta · C, all row-major.
#include <cstdint>

#include "kernels/cuda/cuda_util.cuh"
#include "kernels/cuda_kernels.h"

namespace rankscope::kernels::cuda {
namespace {

constexpr int kTileK = 8;
constexpr int kMicro = 8;      // each thread owns an 8×8 block of C ...
constexpr int kHalfMicro = 4;  // ... as two 4-wide halves, tile_m/2 (tile_n/2) apart, so the
                               // float4 shared-memory reads of a warp hit distinct banks
constexpr int kSmemPad = 4;    // keeps rows 16-byte aligned, staggers banks on stores

template <int kTileM, int kTileN>
struct SgemmShape {
  static constexpr int kThreadsM = kTileM / kMicro;
  static constexpr int kThreadsN = kTileN / kMicro;
  static constexpr int kThreads = kThreadsM * kThreadsN;
  static constexpr int kLoadsA = kTileM * kTileK / kThreads;  // A elements per thread per tile
  static constexpr int kLoadsB = kTileN * kTileK / kThreads;
  static_assert(kTileM * kTileK % kThreads == 0 && kTileN * kTileK % kThreads == 0);
};

// Position (inside the block tile) of the p-th A element this thread loads: i is the row of
// op(A), kk the k offset. Consecutive threads walk along the dimension that is contiguous in
// global memory, so the loads coalesce.
template <int kTileM, int kThreads>
__device__ __forceinline__ void APosition(bool transpose_a, int p, int& i, int& kk) {
  const int e = static_cast<int>(threadIdx.x) + p * kThreads;
  if (transpose_a) {  // stored k×m: m is contiguous
    i = e % kTileM;
    kk = e / kTileM;
  } else {  // stored m×k: k is contiguous
    kk = e % kTileK;
    i = e / kTileK;
  }
}

// Same for op(B) (k×n): kk the k offset, j the column.
template <int kTileN, int kThreads>
__device__ __forceinline__ void BPosition(bool transpose_b, int p, int& kk, int& j) {
  const int e = static_cast<int>(threadIdx.x) + p * kThreads;
  if (transpose_b) {  // stored n×k: k is contiguous
    kk = e % kTileK;
    j = e / kTileK;
  } else {  // stored k×n: n is contiguous
    j = e % kTileN;
    kk = e / kTileN;
  }
}

// At least 2 blocks per multiprocessor: caps the 128×128 kernel at 128 registers (it needs
// 130 uncapped, which would leave one block of 8 warps per multiprocessor), without spills.
template <int kTileM, int kTileN>
__global__ void __launch_bounds__(SgemmShape<kTileM, kTileN>::kThreads, 2)
    SgemmKernel(bool transpose_a, bool transpose_b, int m, int n, int k, float alpha,
                const float* __restrict__ a, int lda, const float* __restrict__ b, int ldb,
                float beta, float* __restrict__ c, int ldc) {
  using Shape = SgemmShape<kTileM, kTileN>;
  // k-major tiles: row kk holds op(A)[·][kk] (resp. op(B)[kk][·]), so a thread's micro-tile
  // operands are contiguous float4s.
  __shared__ __align__(16) float tile_a[2][kTileK][kTileM + kSmemPad];
  __shared__ __align__(16) float tile_b[2][kTileK][kTileN + kSmemPad];

  const int row0 = static_cast<int>(blockIdx.y) * kTileM;
  const int col0 = static_cast<int>(blockIdx.x) * kTileN;
  const int tx = static_cast<int>(threadIdx.x) % Shape::kThreadsN;
  const int ty = static_cast<int>(threadIdx.x) / Shape::kThreadsN;

  float staged_a[Shape::kLoadsA];
  float staged_b[Shape::kLoadsB];

  // Global → registers for the k-tile starting at k0, zero outside the matrices.
  auto load_global = [&](int k0) {
#pragma unroll
    for (int p = 0; p < Shape::kLoadsA; ++p) {
      int i, kk;
      APosition<kTileM, Shape::kThreads>(transpose_a, p, i, kk);
      const int row = row0 + i;
      const int kidx = k0 + kk;
      float value = 0.0f;
      if (row < m && kidx < k) {
        value = transpose_a ? a[static_cast<int64_t>(kidx) * lda + row]
                            : a[static_cast<int64_t>(row) * lda + kidx];
      }
      staged_a[p] = value;
    }
#pragma unroll
    for (int p = 0; p < Shape::kLoadsB; ++p) {
      int kk, j;
      BPosition<kTileN, Shape::kThreads>(transpose_b, p, kk, j);
      const int col = col0 + j;
      const int kidx = k0 + kk;
      float value = 0.0f;
      if (col < n && kidx < k) {
        value = transpose_b ? b[static_cast<int64_t>(col) * ldb + kidx]
                            : b[static_cast<int64_t>(kidx) * ldb + col];
      }
      staged_b[p] = value;
    }
  };
  auto store_shared = [&](int buffer) {
#pragma unroll
    for (int p = 0; p < Shape::kLoadsA; ++p) {
      int i, kk;
      APosition<kTileM, Shape::kThreads>(transpose_a, p, i, kk);
      tile_a[buffer][kk][i] = staged_a[p];
    }
#pragma unroll
    for (int p = 0; p < Shape::kLoadsB; ++p) {
      int kk, j;
      BPosition<kTileN, Shape::kThreads>(transpose_b, p, kk, j);
      tile_b[buffer][kk][j] = staged_b[p];
    }
  };

  float acc[kMicro][kMicro];
#pragma unroll
  for (int i = 0; i < kMicro; ++i) {
#pragma unroll
    for (int j = 0; j < kMicro; ++j) acc[i][j] = 0.0f;
  }

  const int num_tiles = (k + kTileK - 1) / kTileK;
  if (num_tiles > 0) {
    load_global(0);
    store_shared(0);
  }
  __syncthreads();

  for (int tile = 0; tile < num_tiles; ++tile) {
    const int buffer = tile & 1;
    // Issue the next tile's global loads now; they complete while we compute.
    if (tile + 1 < num_tiles) load_global((tile + 1) * kTileK);
#pragma unroll
    for (int kk = 0; kk < kTileK; ++kk) {
      const float4 a_lo = *reinterpret_cast<const float4*>(&tile_a[buffer][kk][ty * kHalfMicro]);
      const float4 a_hi = *reinterpret_cast<const float4*>(
          &tile_a[buffer][kk][kTileM / 2 + ty * kHalfMicro]);
      const float4 b_lo = *reinterpret_cast<const float4*>(&tile_b[buffer][kk][tx * kHalfMicro]);
      const float4 b_hi = *reinterpret_cast<const float4*>(
          &tile_b[buffer][kk][kTileN / 2 + tx * kHalfMicro]);
      const float av[kMicro] = {a_lo.x, a_lo.y, a_lo.z, a_lo.w, a_hi.x, a_hi.y, a_hi.z, a_hi.w};
      const float bv[kMicro] = {b_lo.x, b_lo.y, b_lo.z, b_lo.w, b_hi.x, b_hi.y, b_hi.z, b_hi.w};
#pragma unroll
      for (int i = 0; i < kMicro; ++i) {
#pragma unroll
        for (int j = 0; j < kMicro; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
      }
    }
    // The other buffer was last read in the previous iteration, which every thread finished
    // before the barrier that ended it.
    if (tile + 1 < num_tiles) store_shared(buffer ^ 1);
    __syncthreads();
  }

  // Epilogue: acc[i][j] is C[row_of(i)][col_of(j)]; halves are tile/2 apart.
#pragma unroll
  for (int i = 0; i < kMicro; ++i) {
    const int row = row0 + (i / kHalfMicro) * (kTileM / 2) + ty * kHalfMicro + i % kHalfMicro;
    if (row >= m) continue;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int col = col0 + half * (kTileN / 2) + tx * kHalfMicro;
      float* out = c + static_cast<int64_t>(row) * ldc + col;
      float value[kHalfMicro];
#pragma unroll
      for (int q = 0; q < kHalfMicro; ++q) value[q] = alpha * acc[i][half * kHalfMicro + q];
      if (col + kHalfMicro <= n && (reinterpret_cast<uintptr_t>(out) & 15u) == 0) {
        float4 result = make_float4(value[0], value[1], value[2], value[3]);
        if (beta != 0.0f) {  // beta == 0 must not read C (it may hold NaNs)
          const float4 old = *reinterpret_cast<const float4*>(out);
          result.x += beta * old.x;
          result.y += beta * old.y;
          result.z += beta * old.z;
          result.w += beta * old.w;
        }
        *reinterpret_cast<float4*>(out) = result;
      } else {
#pragma unroll
        for (int q = 0; q < kHalfMicro; ++q) {
          if (col + q < n) out[q] = (beta != 0.0f) ? value[q] + beta * out[q] : value[q];
        }
      }
    }
  }
}

template <int kTileM, int kTileN>
Status LaunchSgemm(cudaStream_t stream, bool transpose_a, bool transpose_b, int m, int n, int k,
                   float alpha, const float* a, int lda, const float* b, int ldb, float beta,
                   float* c, int ldc) {
  const unsigned int tiles_m = static_cast<unsigned int>((m + kTileM - 1) / kTileM);
  const unsigned int tiles_n = static_cast<unsigned int>((n + kTileN - 1) / kTileN);
  if (tiles_m > 65535u) return InvalidArgument("cuda::Gemm: m too large for the grid");
  const dim3 grid(tiles_n, tiles_m);
  SgemmKernel<kTileM, kTileN><<<grid, SgemmShape<kTileM, kTileN>::kThreads, 0, stream>>>(
      transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  return internal::CheckLaunch("cuda::Gemm launch");
}

}  // namespace

Status Gemm(cudaStream_t stream, Transpose transpose_a, Transpose transpose_b, int m, int n,
            int k, float alpha, const float* a, int lda, const float* b, int ldb, float beta,
            float* c, int ldc) {
  const bool trans_a = transpose_a == Transpose::kYes;
  const bool trans_b = transpose_b == Transpose::kYes;
  RS_RETURN_IF_ERROR(
      internal::ValidateGemm("cuda::Gemm", trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc));
  if (m == 0 || n == 0) return Status::Ok();
  // alpha == 0: C = beta·C without reading A or B (BLAS semantics); k = 0 does exactly that.
  const int k_used = (alpha == 0.0f) ? 0 : k;
  internal::ClearStaleError();
  // Small problems: 64×64 tiles so that more multiprocessors get a block.
  const int64_t big_tiles = static_cast<int64_t>((m + 127) / 128) * ((n + 127) / 128);
  if (big_tiles >= internal::MultiprocessorCount()) {
    return LaunchSgemm<128, 128>(stream, trans_a, trans_b, m, n, k_used, alpha, a, lda, b, ldb,
                                 beta, c, ldc);
  }
  return LaunchSgemm<64, 64>(stream, trans_a, trans_b, m, n, k_used, alpha, a, lda, b, ldb, beta,
                             c, ldc);
}

}  // namespace rankscope::kernels::cuda
