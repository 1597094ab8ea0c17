// Tensor-core GEMM: bf16 operands, fp32 accumulation and output, mma.sync.m16n8k16.
//
// Block tiles are staged through shared memory by a cp.async pipeline (kStages deep). Each
// operand keeps its global orientation in shared memory (so every copy is a contiguous
// 16-byte piece), and ldmatrix, with or without .trans, turns either orientation into the
// register fragments mma.sync wants: that is how the four transpose combinations are
// handled. Edges are zero-filled on load and guarded on store.
//
// Fragment layouts (PTX ISA, mma.m16n8k16 with .bf16; g = lane/4, t = lane%4):
//   A 16×16, 4 registers of 2 values: a[0] (row g, k 2t..2t+1), a[1] (row g+8, k 2t..),
//     a[2] (row g, k 2t+8..), a[3] (row g+8, k 2t+8..)
//   B 16×8, 2 registers: b[0] (k 2t..2t+1, col g), b[1] (k 2t+8.., col g)
//   C 16×8, 4 floats: c[0..1] (row g, cols 2t, 2t+1), c[2..3] (row g+8, same cols)
// ldmatrix.x4 loads four 8×8 matrices, lanes 8q..8q+7 giving the row addresses of matrix q;
// register q then holds (row lane/4, cols 2·(lane%4)..+1) of matrix q, or with .trans
// (rows 2·(lane%4)..+1, col lane/4), i.e. a pair running down a stored column.
#include <atomic>
#include <cstdint>

#include <cuda_bf16.h>

#include "kernels/cuda/cuda_util.cuh"
#include "kernels/cuda_kernels.h"

namespace rankscope::kernels::cuda {
namespace {

using Bf16 = __nv_bfloat16;

constexpr int kChunk = 8;    // bf16 elements per 16-byte cp.async
constexpr int kSmemPad = 8;  // bf16; row strides become 80, 144 or 272 bytes, so the 8 row
                             // addresses of one ldmatrix matrix hit distinct bank groups

// One tile configuration. A is stored m×k (kATrans: k×m), B k×n (kBTrans: n×k); the shared
// copy of each operand tile has the same orientation as in global memory, rows padded.
template <int kTileMArg, int kTileNArg, int kWarpsMArg, int kWarpsNArg, int kMinBlocksArg,
          bool kATransArg, bool kBTransArg>
struct Bf16Config {
  static constexpr int kTileM = kTileMArg;
  static constexpr int kTileN = kTileNArg;
  static constexpr int kTileK = 32;
  static constexpr int kStages = 4;
  static constexpr int kWarpsM = kWarpsMArg;
  static constexpr int kWarpsN = kWarpsNArg;
  static constexpr int kMinBlocks = kMinBlocksArg;
  static constexpr bool kATrans = kATransArg;
  static constexpr bool kBTrans = kBTransArg;
  static constexpr int kThreads = 32 * kWarpsM * kWarpsN;
  static constexpr int kWarpTileM = kTileM / kWarpsM;
  static constexpr int kWarpTileN = kTileN / kWarpsN;
  static constexpr int kMmaM = kWarpTileM / 16;  // 16-row MMA tiles per warp
  static constexpr int kMmaN = kWarpTileN / 8;   // 8-column MMA tiles per warp

  static constexpr int kARows = kATrans ? kTileK : kTileM;  // stored rows per tile
  static constexpr int kACols = kATrans ? kTileM : kTileK;  // contiguous elements per row
  static constexpr int kALd = kACols + kSmemPad;
  static constexpr int kAElems = kARows * kALd;
  static constexpr int kBRows = kBTrans ? kTileN : kTileK;
  static constexpr int kBCols = kBTrans ? kTileK : kTileN;
  static constexpr int kBLd = kBCols + kSmemPad;
  static constexpr int kBElems = kBRows * kBLd;
  static constexpr int kStageElems = kAElems + kBElems;
  static constexpr int kSmemBytes = kStages * kStageElems * static_cast<int>(sizeof(Bf16));

  static_assert(kWarpTileM % 16 == 0 && kWarpTileN % 16 == 0);  // B loads 2 n-tiles at once
  static_assert(kTileK % 16 == 0);
  // ldmatrix and cp.async need 16-byte aligned shared addresses: every row stride, region
  // size and in-row offset used below is a multiple of 8 elements.
  static_assert(kALd % 8 == 0 && kBLd % 8 == 0 && kAElems % 8 == 0 && kBElems % 8 == 0);
  static_assert((kARows * kACols / kChunk) % kThreads == 0);
  static_assert((kBRows * kBCols / kChunk) % kThreads == 0);
  // kMinBlocks blocks (plus 1 KiB reserved each) must fit the 228 KiB of an sm_90 SM.
  static_assert(kMinBlocks * (kSmemBytes + 1024) <= 228 * 1024);
};

__device__ __forceinline__ void CpAsync16(void* shared_dst, const void* global_src,
                                          int src_bytes) {
  const unsigned int dst = static_cast<unsigned int>(__cvta_generic_to_shared(shared_dst));
  // src_bytes < 16 zero-fills the rest: that is how tile edges become zeros.
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(global_src),
               "r"(src_bytes)
               : "memory");
}

__device__ __forceinline__ void CpAsyncCommit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

template <int kPending>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// Volatile so they stay between the barriers that guard the shared buffers.
__device__ __forceinline__ void LdMatrixX4(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

__device__ __forceinline__ void LdMatrixX4Trans(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

// c += a·b for one 16×8×16 tile.
__device__ __forceinline__ void Mma16816(float (&c)[4], const uint32_t (&a)[4],
                                         const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Copies the kRows×kCols window of a row-major global matrix (rows×cols, stride ld) starting
// at (row0, col0) into shared memory (stride kCols + kSmemPad). Outside the matrix: zeros.
// vector_ok (base 16-byte aligned, ld a multiple of 8) allows 16-byte cp.async; otherwise
// guarded scalar loads, stored to shared memory directly (before the same barrier).
template <int kRows, int kCols, int kThreads>
__device__ __forceinline__ void LoadTile(Bf16* shared, const Bf16* global, int ld, int row0,
                                         int col0, int rows, int cols, bool vector_ok) {
  constexpr int kChunksPerRow = kCols / kChunk;
  constexpr int kChunksPerThread = kRows * kChunksPerRow / kThreads;
#pragma unroll
  for (int p = 0; p < kChunksPerThread; ++p) {
    // Consecutive threads take consecutive 16-byte pieces of a row: coalesced.
    const int chunk = static_cast<int>(threadIdx.x) + p * kThreads;
    const int r = chunk / kChunksPerRow;
    const int cc = (chunk % kChunksPerRow) * kChunk;
    const int global_row = row0 + r;
    const int global_col = col0 + cc;
    Bf16* dst = shared + r * (kCols + kSmemPad) + cc;
    if (vector_ok) {
      int valid = 0;
      if (global_row < rows) valid = min(max(cols - global_col, 0), kChunk);
      // An empty copy still needs a valid address: use the matrix base.
      const Bf16* src =
          valid > 0 ? global + static_cast<int64_t>(global_row) * ld + global_col : global;
      CpAsync16(dst, src, valid * static_cast<int>(sizeof(Bf16)));
    } else {
      const bool row_ok = global_row < rows;
      const Bf16* src = global + static_cast<int64_t>(row_ok ? global_row : 0) * ld;
#pragma unroll
      for (int e = 0; e < kChunk; ++e) {
        dst[e] = (row_ok && global_col + e < cols) ? src[global_col + e] : __ushort_as_bfloat16(0);
      }
    }
  }
}

template <class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinBlocks)
    GemmBf16Kernel(int m, int n, int k, float alpha, const Bf16* __restrict__ a, int lda,
                   bool a_vector_ok, const Bf16* __restrict__ b, int ldb, bool b_vector_ok,
                   float beta, float* __restrict__ c, int ldc) {
  extern __shared__ __align__(128) unsigned char shared_raw[];
  Bf16* const shared = reinterpret_cast<Bf16*>(shared_raw);
  const uint32_t shared_address = static_cast<uint32_t>(__cvta_generic_to_shared(shared_raw));

  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int warp_m = warp / Cfg::kWarpsN;
  const int warp_n = warp % Cfg::kWarpsN;
  const int block_row = static_cast<int>(blockIdx.y) * Cfg::kTileM;
  const int block_col = static_cast<int>(blockIdx.x) * Cfg::kTileN;

  // This lane's ldmatrix row address, as an element offset inside a stage's A (B) region,
  // for the warp's first fragment at kk = 0. Lane l addresses row l%8 of matrix l/8;
  // matrices 1 and 3 are "+8" along one dimension (pair_hi), 2 and 3 along the other
  // (quad_hi). The x4 orders are chosen so registers 0..3 come out as the fragments above:
  //   A: (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15)
  //   B: (k 0-7, cols 0-7), (k 8-15, cols 0-7), (k 0-7, cols 8-15), (k 8-15, cols 8-15),
  //      i.e. b[0], b[1] of n-tile j, then b[0], b[1] of n-tile j+1.
  const int lane_row = lane & 7;
  const int pair_hi = ((lane >> 3) & 1) * 8;
  const int quad_hi = (lane >> 4) * 8;
  const int warp_row0 = warp_m * Cfg::kWarpTileM;
  const int warp_col0 = warp_n * Cfg::kWarpTileN;
  int a_lane;
  int b_lane;
  if constexpr (Cfg::kATrans) {  // stored [k][m]: .trans gives pairs along k
    a_lane = (quad_hi + lane_row) * Cfg::kALd + warp_row0 + pair_hi;
  } else {  // stored [m][k]
    a_lane = (warp_row0 + pair_hi + lane_row) * Cfg::kALd + quad_hi;
  }
  if constexpr (Cfg::kBTrans) {  // stored [n][k]: rows of n, pairs along k without .trans
    b_lane = (warp_col0 + quad_hi + lane_row) * Cfg::kBLd + pair_hi;
  } else {  // stored [k][n]: .trans gives pairs along k
    b_lane = (pair_hi + lane_row) * Cfg::kBLd + warp_col0 + quad_hi;
  }

  auto load_stage = [&](int tile, int stage) {
    Bf16* const stage_a = shared + stage * Cfg::kStageElems;
    Bf16* const stage_b = stage_a + Cfg::kAElems;
    const int k0 = tile * Cfg::kTileK;
    if constexpr (Cfg::kATrans) {  // stored k×m
      LoadTile<Cfg::kTileK, Cfg::kTileM, Cfg::kThreads>(stage_a, a, lda, k0, block_row, k, m,
                                                        a_vector_ok);
    } else {  // stored m×k
      LoadTile<Cfg::kTileM, Cfg::kTileK, Cfg::kThreads>(stage_a, a, lda, block_row, k0, m, k,
                                                        a_vector_ok);
    }
    if constexpr (Cfg::kBTrans) {  // stored n×k
      LoadTile<Cfg::kTileN, Cfg::kTileK, Cfg::kThreads>(stage_b, b, ldb, block_col, k0, n, k,
                                                        b_vector_ok);
    } else {  // stored k×n
      LoadTile<Cfg::kTileK, Cfg::kTileN, Cfg::kThreads>(stage_b, b, ldb, k0, block_col, k, n,
                                                        b_vector_ok);
    }
  };

  float acc[Cfg::kMmaM][Cfg::kMmaN][4];
#pragma unroll
  for (int i = 0; i < Cfg::kMmaM; ++i) {
#pragma unroll
    for (int j = 0; j < Cfg::kMmaN; ++j) {
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[i][j][q] = 0.0f;
    }
  }

  const int num_tiles = (k + Cfg::kTileK - 1) / Cfg::kTileK;
  // Prologue: the first kStages-1 tiles in flight, one commit group each (maybe empty).
#pragma unroll
  for (int s = 0; s < Cfg::kStages - 1; ++s) {
    if (s < num_tiles) load_stage(s, s);
    CpAsyncCommit();
  }

  for (int tile = 0; tile < num_tiles; ++tile) {
    // Groups committed so far: kStages-1 + tile; tile's own group is number tile, so at
    // most kStages-2 may still be pending.
    CpAsyncWait<Cfg::kStages - 2>();
    // Makes every thread's copies of this tile visible, and proves every warp has finished
    // computing on tile-1, whose stage the load below overwrites.
    __syncthreads();
    const int next = tile + Cfg::kStages - 1;
    if (next < num_tiles) load_stage(next, next % Cfg::kStages);
    CpAsyncCommit();

    const int stage = tile % Cfg::kStages;
    const uint32_t stage_a = shared_address + stage * Cfg::kStageElems * 2;
    const uint32_t stage_b = stage_a + Cfg::kAElems * 2;
#pragma unroll
    for (int kk = 0; kk < Cfg::kTileK; kk += 16) {
      uint32_t frag_a[Cfg::kMmaM][4];
      uint32_t frag_b[Cfg::kMmaN][2];
#pragma unroll
      for (int i = 0; i < Cfg::kMmaM; ++i) {
        if constexpr (Cfg::kATrans) {
          LdMatrixX4Trans(frag_a[i], stage_a + (a_lane + kk * Cfg::kALd + i * 16) * 2);
        } else {
          LdMatrixX4(frag_a[i], stage_a + (a_lane + i * 16 * Cfg::kALd + kk) * 2);
        }
      }
#pragma unroll
      for (int jj = 0; jj < Cfg::kMmaN / 2; ++jj) {
        uint32_t r[4];
        if constexpr (Cfg::kBTrans) {
          LdMatrixX4(r, stage_b + (b_lane + jj * 16 * Cfg::kBLd + kk) * 2);
        } else {
          LdMatrixX4Trans(r, stage_b + (b_lane + kk * Cfg::kBLd + jj * 16) * 2);
        }
        frag_b[2 * jj][0] = r[0];
        frag_b[2 * jj][1] = r[1];
        frag_b[2 * jj + 1][0] = r[2];
        frag_b[2 * jj + 1][1] = r[3];
      }
#pragma unroll
      for (int i = 0; i < Cfg::kMmaM; ++i) {
#pragma unroll
        for (int j = 0; j < Cfg::kMmaN; ++j) Mma16816(acc[i][j], frag_a[i], frag_b[j]);
      }
    }
  }
  CpAsyncWait<0>();  // only empty groups remain; leave nothing in flight

  // Epilogue straight from the accumulators: c[0..1] at (row g, cols 2t..2t+1), c[2..3] at
  // row g+8. Each quad of lanes writes 32 contiguous bytes of a row.
  const int group = lane >> 2;
  const int pair_col = (lane & 3) * 2;
#pragma unroll
  for (int i = 0; i < Cfg::kMmaM; ++i) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = block_row + warp_row0 + i * 16 + half * 8 + group;
      if (row >= m) continue;
      float* const out_row = c + static_cast<int64_t>(row) * ldc;
#pragma unroll
      for (int j = 0; j < Cfg::kMmaN; ++j) {
        const int col = block_col + warp_col0 + j * 8 + pair_col;
        float v0 = alpha * acc[i][j][half * 2];
        float v1 = alpha * acc[i][j][half * 2 + 1];
        float* const out = out_row + col;
        if (col + 1 < n && (reinterpret_cast<uintptr_t>(out) & 7u) == 0) {
          if (beta != 0.0f) {  // beta == 0 must not read C (it may hold NaNs)
            const float2 old = *reinterpret_cast<const float2*>(out);
            v0 += beta * old.x;
            v1 += beta * old.y;
          }
          *reinterpret_cast<float2*>(out) = make_float2(v0, v1);
        } else {
          if (col < n) out[0] = (beta != 0.0f) ? v0 + beta * out[0] : v0;
          if (col + 1 < n) out[1] = (beta != 0.0f) ? v1 + beta * out[1] : v1;
        }
      }
    }
  }
}

template <class Cfg>
Status LaunchBf16(cudaStream_t stream, int m, int n, int k, float alpha, const Bf16* a, int lda,
                  const Bf16* b, int ldb, float beta, float* c, int ldc) {
  const unsigned int tiles_m = static_cast<unsigned int>((m + Cfg::kTileM - 1) / Cfg::kTileM);
  const unsigned int tiles_n = static_cast<unsigned int>((n + Cfg::kTileN - 1) / Cfg::kTileN);
  if (tiles_m > 65535u) return InvalidArgument("cuda::GemmBf16: m too large for the grid");
  auto* kernel = &GemmBf16Kernel<Cfg>;
  // Over 48 KiB of dynamic shared memory must be asked for; prefer shared memory over L1 so
  // kMinBlocks blocks fit on a multiprocessor (cp.async.cg bypasses L1 anyway). Once per
  // device and kernel: one bit per device.
  static std::atomic<uint64_t> configured_devices{0};
  const int device = internal::CurrentDevice();
  const uint64_t device_bit =
      (device >= 0 && device < internal::kMaxCachedDevices) ? uint64_t{1} << device : 0;
  if (device_bit == 0 || (configured_devices.load(std::memory_order_relaxed) & device_bit) == 0) {
    RS_RETURN_IF_ERROR(internal::FromCudaError(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             Cfg::kSmemBytes),
        "cuda::GemmBf16: cudaFuncSetAttribute(MaxDynamicSharedMemorySize)"));
    RS_RETURN_IF_ERROR(internal::FromCudaError(
        cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                             cudaSharedmemCarveoutMaxShared),
        "cuda::GemmBf16: cudaFuncSetAttribute(PreferredSharedMemoryCarveout)"));
    configured_devices.fetch_or(device_bit, std::memory_order_relaxed);
  }
  const bool a_vector_ok = internal::IsAligned16(a) && lda % kChunk == 0;
  const bool b_vector_ok = internal::IsAligned16(b) && ldb % kChunk == 0;
  const dim3 grid(tiles_n, tiles_m);
  kernel<<<grid, Cfg::kThreads, Cfg::kSmemBytes, stream>>>(m, n, k, alpha, a, lda, a_vector_ok,
                                                           b, ldb, b_vector_ok, beta, c, ldc);
  return internal::CheckLaunch("cuda::GemmBf16 launch");
}

// Two tile shapes, 4 warps each: 128×128 with 64×64 warp tiles (32 MMAs per 8 ldmatrix.x4;
// 2 blocks = 8 warps per multiprocessor) for large problems, and 64×64 with 32×32 warp tiles
// (4 blocks per multiprocessor) when the large tiles would leave multiprocessors idle.
template <bool kATrans, bool kBTrans>
Status DispatchTile(cudaStream_t stream, int m, int n, int k, float alpha, const Bf16* a, int lda,
                    const Bf16* b, int ldb, float beta, float* c, int ldc) {
  const int64_t big_tiles = static_cast<int64_t>((m + 127) / 128) * ((n + 127) / 128);
  if (big_tiles >= internal::MultiprocessorCount()) {
    return LaunchBf16<Bf16Config<128, 128, 2, 2, 2, kATrans, kBTrans>>(stream, m, n, k, alpha, a,
                                                                      lda, b, ldb, beta, c, ldc);
  }
  return LaunchBf16<Bf16Config<64, 64, 2, 2, 4, kATrans, kBTrans>>(stream, m, n, k, alpha, a, lda,
                                                                  b, ldb, beta, c, ldc);
}

__global__ void CastToBf16Kernel(size_t n, const float* __restrict__ in, Bf16* __restrict__ out) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    out[i] = __float2bfloat16_rn(in[i]);
  }
}

}  // namespace

Status GemmBf16(cudaStream_t stream, Transpose transpose_a, Transpose transpose_b, int m, int n,
                int k, float alpha, const __nv_bfloat16* a, int lda, const __nv_bfloat16* b,
                int ldb, float beta, float* c, int ldc) {
  const bool trans_a = transpose_a == Transpose::kYes;
  const bool trans_b = transpose_b == Transpose::kYes;
  RS_RETURN_IF_ERROR(internal::ValidateGemm("cuda::GemmBf16", trans_a, trans_b, m, n, k, a, lda,
                                            b, ldb, c, ldc));
  if (m == 0 || n == 0) return Status::Ok();
  // alpha == 0: C = beta·C without reading A or B (BLAS semantics); k = 0 does exactly that.
  const int k_used = (alpha == 0.0f) ? 0 : k;
  internal::ClearStaleError();
  if (!trans_a && !trans_b) {
    return DispatchTile<false, false>(stream, m, n, k_used, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  if (!trans_a && trans_b) {
    return DispatchTile<false, true>(stream, m, n, k_used, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  if (trans_a && !trans_b) {
    return DispatchTile<true, false>(stream, m, n, k_used, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  return DispatchTile<true, true>(stream, m, n, k_used, alpha, a, lda, b, ldb, beta, c, ldc);
}

Status CastToBf16(cudaStream_t stream, size_t n, const float* in, __nv_bfloat16* out) {
  RS_RETURN_IF_ERROR(internal::CheckPointer("cuda::CastToBf16", "in", in, n));
  RS_RETURN_IF_ERROR(internal::CheckPointer("cuda::CastToBf16", "out", out, n));
  if (n == 0) return Status::Ok();
  internal::ClearStaleError();
  CastToBf16Kernel<<<internal::ElementwiseBlocks(n), internal::kElementwiseThreads, 0, stream>>>(
      n, in, out);
  return internal::CheckLaunch("cuda::CastToBf16 launch");
}

}  // namespace rankscope::kernels::cuda
