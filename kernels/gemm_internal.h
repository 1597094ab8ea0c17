// Internals of the CPU GEMM shared by gemm.cc, gemm_avx2.cc and the tests: the blocking
// constants, the packed-panel layout, the micro-kernels and a switch to force an ISA.
#pragma once

#include <cstdint>

namespace rankscope::kernels::internal {

// Register tile of the micro-kernel: kMr rows of C by kNr columns (6 × 16 floats: twelve
// 8-wide accumulators with AVX2, leaving registers for two B vectors and a broadcast).
inline constexpr int kMr = 6;
inline constexpr int kNr = 16;
// Cache blocking: a kKc-deep B micro-panel (kKc × kNr, 16 KiB) stays in L1 while the A block
// (kMc × kKc, ~150 KiB) sits in L2 and the B panel (kKc × kNc) in L3.
inline constexpr int kKc = 256;
inline constexpr int kMc = 144;   // a multiple of kMr
inline constexpr int kNc = 3072;  // a multiple of kNr

static_assert(kMc % kMr == 0 && kNc % kNr == 0);

// Computes one kMr × kNr tile of C from packed panels:
//   a: kc steps of kMr values (column p of the A micro-panel), zero-padded past the edge;
//   b: kc steps of kNr values (row p of the B micro-panel), zero-padded past the edge.
// Then c[i][j] = alpha · acc[i][j] + beta · c[i][j] for i < rows, j < cols (rows ≤ kMr,
// cols ≤ kNr); beta == 0 writes alpha · acc without reading c.
using MicroKernel = void (*)(int kc, const float* a, const float* b, float* c, int ldc, float alpha,
                             float beta, int rows, int cols);

void MicroKernelPortable(int kc, const float* a, const float* b, float* c, int ldc, float alpha,
                         float beta, int rows, int cols);
// Needs AVX2 and FMA (the file is compiled with -mavx2 -mfma); call only after checking.
void MicroKernelAvx2Fma(int kc, const float* a, const float* b, float* c, int ldc, float alpha,
                        float beta, int rows, int cols);

// Packing with AVX2 transposes: `width` (kMr or kNr) rows of `src`, each read from column 0
// to kc − 1, become kc packed columns of `width` values: panel[p·width + r] = src[r·ld + p].
// Needs AVX2, like the kernel above.
void PackRowsAsColumnsAvx2(const float* src, int ld, int kc, int width, float* panel);

enum class GemmIsaKind : uint8_t { kPortable, kAvx2Fma };

// True when this CPU can run the AVX2+FMA micro-kernel.
bool CpuHasAvx2Fma();
// The micro-kernel in use: chosen once from the CPU and RANKSCOPE_GEMM_ISA=portable unless
// forced below.
GemmIsaKind ActiveGemmIsa();
// For tests: makes every later Gemm use `isa`. Returns false (and changes nothing) when the
// CPU cannot run it. Not to be called while a Gemm is running.
bool ForceGemmIsa(GemmIsaKind isa);

}  // namespace rankscope::kernels::internal
