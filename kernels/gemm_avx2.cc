// The AVX2+FMA micro-kernel: a 6 × 16 tile of C held in twelve ymm accumulators. Each step
// of k loads one 16-wide row of the packed B micro-panel (two vectors), broadcasts the six
// values of the packed A column and issues twelve independent FMAs, which covers the FMA
// latency × throughput of current x86 cores. This file alone is compiled with -mavx2 -mfma;
// gemm.cc calls it only after checking the CPU.
#include <immintrin.h>

#include <cmath>

#include "kernels/gemm_internal.h"

namespace rankscope::kernels::internal {
namespace {

static_assert(kMr == 6 && kNr == 16, "the AVX2 kernel is written for a 6 x 16 tile");

// Lanes j < valid set (all bits), the rest clear: the mask for vmaskmovps.
inline __m256i FirstLanes(int valid) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(valid), lane);
}

// c = alpha · acc + beta · c for one 8-wide slice, `valid` lanes of it (1..8).
inline void UpdateSlice(float* c, __m256 acc, __m256 alpha, __m256 beta, bool read_c, int valid) {
  __m256 result = _mm256_mul_ps(alpha, acc);
  if (valid == 8) {
    if (read_c) result = _mm256_fmadd_ps(beta, _mm256_loadu_ps(c), result);
    _mm256_storeu_ps(c, result);
  } else {
    const __m256i mask = FirstLanes(valid);
    if (read_c) result = _mm256_fmadd_ps(beta, _mm256_maskload_ps(c, mask), result);
    _mm256_maskstore_ps(c, mask, result);
  }
}

// Transposes the 8×8 block rows[0..7] in place: afterwards rows[c] holds column c.
inline void Transpose8x8(__m256 rows[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(rows[0], rows[1]);
  const __m256 t1 = _mm256_unpackhi_ps(rows[0], rows[1]);
  const __m256 t2 = _mm256_unpacklo_ps(rows[2], rows[3]);
  const __m256 t3 = _mm256_unpackhi_ps(rows[2], rows[3]);
  const __m256 t4 = _mm256_unpacklo_ps(rows[4], rows[5]);
  const __m256 t5 = _mm256_unpackhi_ps(rows[4], rows[5]);
  const __m256 t6 = _mm256_unpacklo_ps(rows[6], rows[7]);
  const __m256 t7 = _mm256_unpackhi_ps(rows[6], rows[7]);
  // Columns c and c + 4 of rows 0–3 (s0–s3) and of rows 4–7 (s4–s7).
  const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44);
  const __m256 s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44);
  const __m256 s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44);
  const __m256 s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44);
  const __m256 s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  rows[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
  rows[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
  rows[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
  rows[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
  rows[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
  rows[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
  rows[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
  rows[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

}  // namespace

void PackRowsAsColumnsAvx2(const float* src, int ld, int kc, int width, float* panel) {
  const int step = width;  // floats per packed column p
  int p = 0;
  for (; p + 8 <= kc; p += 8) {
    for (int group = 0; group < width; group += 8) {
      const int rows_in_group = width - group < 8 ? width - group : 8;
      __m256 block[8];
      for (int r = 0; r < 8; ++r) {
        block[r] = r < rows_in_group
                       ? _mm256_loadu_ps(src + static_cast<ptrdiff_t>(group + r) * ld + p)
                       : _mm256_setzero_ps();
      }
      Transpose8x8(block);
      float* out = panel + static_cast<ptrdiff_t>(p) * step + group;
      if (rows_in_group == 8) {
        for (int c = 0; c < 8; ++c) _mm256_storeu_ps(out + c * step, block[c]);
      } else {
        // A narrow panel (width < 8, so one group and step == rows_in_group): each full
        // store spills zeros into the next column's slots, which the next store overwrites;
        // only the last one is masked. Cheaper than masking all eight.
        for (int c = 0; c < 7; ++c) _mm256_storeu_ps(out + c * step, block[c]);
        _mm256_maskstore_ps(out + 7 * step, FirstLanes(rows_in_group), block[7]);
      }
    }
  }
  for (; p < kc; ++p) {
    for (int r = 0; r < width; ++r) {
      panel[static_cast<ptrdiff_t>(p) * step + r] = src[static_cast<ptrdiff_t>(r) * ld + p];
    }
  }
}

void MicroKernelAvx2Fma(int kc, const float* a, const float* b, float* c, int ldc, float alpha,
                        float beta, int rows, int cols) {
  __m256 acc00 = _mm256_setzero_ps(), acc01 = _mm256_setzero_ps();
  __m256 acc10 = _mm256_setzero_ps(), acc11 = _mm256_setzero_ps();
  __m256 acc20 = _mm256_setzero_ps(), acc21 = _mm256_setzero_ps();
  __m256 acc30 = _mm256_setzero_ps(), acc31 = _mm256_setzero_ps();
  __m256 acc40 = _mm256_setzero_ps(), acc41 = _mm256_setzero_ps();
  __m256 acc50 = _mm256_setzero_ps(), acc51 = _mm256_setzero_ps();

  // Bring the C tile towards L1 while the k loop runs.
  for (int i = 0; i < rows; ++i) {
    _mm_prefetch(reinterpret_cast<const char*>(c + static_cast<ptrdiff_t>(i) * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(c + static_cast<ptrdiff_t>(i) * ldc + kNr - 1),
                 _MM_HINT_T0);
  }

#pragma GCC unroll 4
  for (int p = 0; p < kc; ++p) {
    const __m256 b0 = _mm256_loadu_ps(b);
    const __m256 b1 = _mm256_loadu_ps(b + 8);
    __m256 a_value = _mm256_broadcast_ss(a + 0);
    acc00 = _mm256_fmadd_ps(a_value, b0, acc00);
    acc01 = _mm256_fmadd_ps(a_value, b1, acc01);
    a_value = _mm256_broadcast_ss(a + 1);
    acc10 = _mm256_fmadd_ps(a_value, b0, acc10);
    acc11 = _mm256_fmadd_ps(a_value, b1, acc11);
    a_value = _mm256_broadcast_ss(a + 2);
    acc20 = _mm256_fmadd_ps(a_value, b0, acc20);
    acc21 = _mm256_fmadd_ps(a_value, b1, acc21);
    a_value = _mm256_broadcast_ss(a + 3);
    acc30 = _mm256_fmadd_ps(a_value, b0, acc30);
    acc31 = _mm256_fmadd_ps(a_value, b1, acc31);
    a_value = _mm256_broadcast_ss(a + 4);
    acc40 = _mm256_fmadd_ps(a_value, b0, acc40);
    acc41 = _mm256_fmadd_ps(a_value, b1, acc41);
    a_value = _mm256_broadcast_ss(a + 5);
    acc50 = _mm256_fmadd_ps(a_value, b0, acc50);
    acc51 = _mm256_fmadd_ps(a_value, b1, acc51);
    a += kMr;
    b += kNr;
  }

  const __m256 alpha_v = _mm256_set1_ps(alpha);
  const __m256 beta_v = _mm256_set1_ps(beta);
  const bool read_c = beta != 0.0f;
  const __m256 acc[kMr][2] = {{acc00, acc01}, {acc10, acc11}, {acc20, acc21},
                              {acc30, acc31}, {acc40, acc41}, {acc50, acc51}};
  const int low_lanes = cols < 8 ? cols : 8;
  const int high_lanes = cols - low_lanes;
  for (int i = 0; i < rows; ++i) {
    float* c_row = c + static_cast<ptrdiff_t>(i) * ldc;
    UpdateSlice(c_row, acc[i][0], alpha_v, beta_v, read_c, low_lanes);
    if (high_lanes > 0) UpdateSlice(c_row + 8, acc[i][1], alpha_v, beta_v, read_c, high_lanes);
  }
}

}  // namespace rankscope::kernels::internal
