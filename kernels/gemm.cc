// Cache-blocked SGEMM in the Goto/BLIS style. For each kNc-wide column block of C and each
// kKc-deep slice of k, a B panel is packed into kNr-wide micro-panels; for each kMc-tall row
// block the A block is packed into kMr-tall micro-panels; a register-blocked micro-kernel then
// computes every kMr × kNr tile from the packed data. Transposes are absorbed by packing.
//
// Threads split C into a fixed grid of rectangles (on micro-tile boundaries) and each runs
// the serial algorithm on its own with its own packing buffers. The k slicing depends only
// on k, and each element of C is produced by the same micro-kernel steps whatever rectangle
// it falls in, so results are bit-identical run to run and even across thread counts.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "kernels/cpu_kernels.h"
#include "kernels/gemm_internal.h"

namespace rankscope::kernels {
namespace internal {
namespace {

constexpr int kIsaUnset = -1;
std::atomic<int> active_isa{kIsaUnset};

GemmIsaKind DetectIsa() {
  const char* forced = std::getenv("RANKSCOPE_GEMM_ISA");
  if (forced != nullptr && std::string_view(forced) == "portable") return GemmIsaKind::kPortable;
  return CpuHasAvx2Fma() ? GemmIsaKind::kAvx2Fma : GemmIsaKind::kPortable;
}

}  // namespace

bool CpuHasAvx2Fma() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

GemmIsaKind ActiveGemmIsa() {
  int isa = active_isa.load(std::memory_order_acquire);
  if (isa == kIsaUnset) {
    // Decided once: a racing first call computes the same answer, the first store wins.
    int expected = kIsaUnset;
    active_isa.compare_exchange_strong(expected, static_cast<int>(DetectIsa()),
                                       std::memory_order_acq_rel);
    isa = active_isa.load(std::memory_order_acquire);
  }
  return static_cast<GemmIsaKind>(isa);
}

bool ForceGemmIsa(GemmIsaKind isa) {
  if (isa == GemmIsaKind::kAvx2Fma && !CpuHasAvx2Fma()) return false;
  active_isa.store(static_cast<int>(isa), std::memory_order_release);
  return true;
}

// Plain loops over a local tile; at baseline x86-64 the compiler vectorizes the j loops with
// SSE. Copying the B row into a local array and unrolling fully lets it keep the tile in
// registers where it can (without them GCC vectorizes across rows instead, ten times
// slower).
void MicroKernelPortable(int kc, const float* a, const float* b, float* c, int ldc, float alpha,
                         float beta, int rows, int cols) {
  float acc[kMr][kNr] = {};
  for (int p = 0; p < kc; ++p) {
    float b_row[kNr];
    for (int j = 0; j < kNr; ++j) b_row[j] = b[static_cast<ptrdiff_t>(p) * kNr + j];
#pragma GCC unroll 6
    for (int i = 0; i < kMr; ++i) {
      const float a_value = a[static_cast<ptrdiff_t>(p) * kMr + i];
#pragma GCC unroll 16
      for (int j = 0; j < kNr; ++j) acc[i][j] += a_value * b_row[j];
    }
  }
  for (int i = 0; i < rows; ++i) {
    float* c_row = c + static_cast<ptrdiff_t>(i) * ldc;
    if (beta == 0.0f) {
      for (int j = 0; j < cols; ++j) c_row[j] = alpha * acc[i][j];
    } else {
      for (int j = 0; j < cols; ++j) c_row[j] = alpha * acc[i][j] + beta * c_row[j];
    }
  }
}

}  // namespace internal

namespace {

using internal::kKc;
using internal::kMc;
using internal::kMr;
using internal::kNc;
using internal::kNr;

// Below this many multiply-adds per thread, waking workers costs more than it saves.
constexpr int64_t kMinMacsPerTask = int64_t{1} << 18;

constexpr int CeilDiv(int a, int b) { return (a + b - 1) / b; }
constexpr int RoundUp(int a, int b) { return CeilDiv(a, b) * b; }

// Splits `total` into blocks of at most `max_block`, all but the last of equal size (a
// multiple of `granule`), so no block is left much smaller than the others.
int BalancedBlock(int total, int max_block, int granule) {
  const int blocks = CeilDiv(total, max_block);
  return std::min(max_block, RoundUp(CeilDiv(total, blocks), granule));
}

// Packing buffers, one set per thread, grown on demand and kept for later calls.
class PackBuffer {
 public:
  PackBuffer() = default;
  PackBuffer(const PackBuffer&) = delete;
  PackBuffer& operator=(const PackBuffer&) = delete;
  ~PackBuffer() { std::free(data_); }

  // At least `floats` floats, 64-byte aligned; nullptr if memory ran out.
  float* Reserve(size_t floats) {
    if (floats > capacity_) {
      std::free(data_);
      const size_t bytes = RoundUpBytes(floats * sizeof(float));
      data_ = static_cast<float*>(std::aligned_alloc(64, bytes));
      capacity_ = data_ == nullptr ? 0 : floats;
    }
    return data_;
  }

 private:
  static size_t RoundUpBytes(size_t bytes) { return (bytes + 63) / 64 * 64; }
  float* data_ = nullptr;
  size_t capacity_ = 0;
};

thread_local PackBuffer a_buffer;
thread_local PackBuffer b_buffer;

struct Matrix {
  const float* data;
  int ld;
  bool transposed;
  // Element (row, col) of op(M).
  const float* At(int row, int col) const {
    return transposed ? data + static_cast<ptrdiff_t>(col) * ld + row
                      : data + static_cast<ptrdiff_t>(row) * ld + col;
  }
};

// Packs op(A)[row0 : row0 + rows, p0 : p0 + kc] as kMr-tall micro-panels: panel q holds
// kc columns of kMr values, rows past the edge zero.
void PackA(const Matrix& a, int row0, int rows, int p0, int kc, bool use_avx2, float* dst) {
  for (int panel_row = 0; panel_row < rows; panel_row += kMr) {
    const int valid = std::min(kMr, rows - panel_row);
    float* panel = dst + static_cast<ptrdiff_t>(panel_row) * kc;
    if (a.transposed) {
      // op(A)'s column p is a contiguous run of A's row p.
      for (int p = 0; p < kc; ++p) {
        const float* src = a.At(row0 + panel_row, p0 + p);
        float* out = panel + static_cast<ptrdiff_t>(p) * kMr;
        for (int r = 0; r < valid; ++r) out[r] = src[r];
        for (int r = valid; r < kMr; ++r) out[r] = 0.0f;
      }
    } else if (valid == kMr && use_avx2) {
      internal::PackRowsAsColumnsAvx2(a.At(row0 + panel_row, p0), a.ld, kc, kMr, panel);
    } else {
      for (int r = 0; r < valid; ++r) {
        const float* src = a.At(row0 + panel_row + r, p0);
        for (int p = 0; p < kc; ++p) panel[static_cast<ptrdiff_t>(p) * kMr + r] = src[p];
      }
      for (int r = valid; r < kMr; ++r) {
        for (int p = 0; p < kc; ++p) panel[static_cast<ptrdiff_t>(p) * kMr + r] = 0.0f;
      }
    }
  }
}

// Packs op(B)[p0 : p0 + kc, col0 : col0 + cols] as kNr-wide micro-panels: panel q holds kc
// rows of kNr values, columns past the edge zero.
void PackB(const Matrix& b, int p0, int kc, int col0, int cols, bool use_avx2, float* dst) {
  for (int panel_col = 0; panel_col < cols; panel_col += kNr) {
    const int valid = std::min(kNr, cols - panel_col);
    float* panel = dst + static_cast<ptrdiff_t>(panel_col) * kc;
    if (!b.transposed) {
      // op(B)'s row p is a contiguous run of B's row p.
      for (int p = 0; p < kc; ++p) {
        const float* src = b.At(p0 + p, col0 + panel_col);
        float* out = panel + static_cast<ptrdiff_t>(p) * kNr;
        if (valid == kNr) {
          std::memcpy(out, src, sizeof(float) * kNr);
        } else {
          for (int j = 0; j < valid; ++j) out[j] = src[j];
          for (int j = valid; j < kNr; ++j) out[j] = 0.0f;
        }
      }
    } else if (valid == kNr && use_avx2) {
      internal::PackRowsAsColumnsAvx2(b.At(p0, col0 + panel_col), b.ld, kc, kNr, panel);
    } else {
      // op(B)'s column j is a contiguous run of B's row j: read rows, scatter by kNr.
      for (int j = 0; j < valid; ++j) {
        const float* src = b.At(p0, col0 + panel_col + j);
        for (int p = 0; p < kc; ++p) panel[static_cast<ptrdiff_t>(p) * kNr + j] = src[p];
      }
      for (int j = valid; j < kNr; ++j) {
        for (int p = 0; p < kc; ++p) panel[static_cast<ptrdiff_t>(p) * kNr + j] = 0.0f;
      }
    }
  }
}

// C = beta · C, with beta == 0 clearing C (k == 0 or alpha == 0).
void ScaleC(int m, int n, float beta, float* c, int ldc) {
  for (int i = 0; i < m; ++i) {
    float* row = c + static_cast<ptrdiff_t>(i) * ldc;
    if (beta == 0.0f) {
      std::fill(row, row + n, 0.0f);
    } else if (beta != 1.0f) {
      for (int j = 0; j < n; ++j) row[j] *= beta;
    }
  }
}

struct Problem {
  Matrix a;
  Matrix b;
  int k;
  float alpha;
  float beta;
  float* c;
  int ldc;
  internal::MicroKernel kernel;
  bool avx2;  // the kernel and the transposing packers may use AVX2+FMA
};

// Without packing buffers (out of memory): a plain loop, slow but still right.
void GemmBlockUnpacked(const Problem& problem, int row0, int rows, int col0, int cols) {
  for (int i = row0; i < row0 + rows; ++i) {
    float* c_row = problem.c + static_cast<ptrdiff_t>(i) * problem.ldc;
    for (int j = col0; j < col0 + cols; ++j) {
      float sum = 0.0f;
      for (int p = 0; p < problem.k; ++p) sum += *problem.a.At(i, p) * *problem.b.At(p, j);
      c_row[j] = problem.beta == 0.0f ? problem.alpha * sum
                                      : problem.alpha * sum + problem.beta * c_row[j];
    }
  }
}

// The serial blocked algorithm on C[row0 : row0 + rows, col0 : col0 + cols]. Returns false
// if the packing buffers could not be allocated.
bool GemmBlock(const Problem& problem, int row0, int rows, int col0, int cols) {
  const int k = problem.k;
  const int kc_step = BalancedBlock(k, kKc, 1);
  const int mc_step = BalancedBlock(rows, kMc, kMr);
  const int nc_step = BalancedBlock(cols, kNc, kNr);
  float* packed_a = a_buffer.Reserve(static_cast<size_t>(mc_step) * kc_step);
  float* packed_b = b_buffer.Reserve(static_cast<size_t>(RoundUp(nc_step, kNr)) * kc_step);
  if (packed_a == nullptr || packed_b == nullptr) return false;

  for (int jc = 0; jc < cols; jc += nc_step) {
    const int nc = std::min(nc_step, cols - jc);
    for (int pc = 0; pc < k; pc += kc_step) {
      const int kc = std::min(kc_step, k - pc);
      PackB(problem.b, pc, kc, col0 + jc, nc, problem.avx2, packed_b);
      // The first k slice applies the caller's beta; later slices add to what it left.
      const float beta = pc == 0 ? problem.beta : 1.0f;
      for (int ic = 0; ic < rows; ic += mc_step) {
        const int mc = std::min(mc_step, rows - ic);
        PackA(problem.a, row0 + ic, mc, pc, kc, problem.avx2, packed_a);
        for (int jr = 0; jr < nc; jr += kNr) {
          const float* b_panel = packed_b + static_cast<ptrdiff_t>(jr) * kc;
          for (int ir = 0; ir < mc; ir += kMr) {
            float* c_tile =
                problem.c + static_cast<ptrdiff_t>(row0 + ic + ir) * problem.ldc + (col0 + jc + jr);
            problem.kernel(kc, packed_a + static_cast<ptrdiff_t>(ir) * kc, b_panel, c_tile,
                           problem.ldc, problem.alpha, beta, std::min(kMr, mc - ir),
                           std::min(kNr, nc - jr));
          }
        }
      }
    }
  }
  return true;
}

// A grid of tasks over C: row_parts × col_parts rectangles on micro-tile boundaries.
struct TaskGrid {
  int row_parts = 1;
  int col_parts = 1;
};

// Picks the grid with at most `max_tasks` cells that minimizes the busiest task's work:
// its micro-tiles plus a term for the panels it packs.
TaskGrid ChooseGrid(int m, int n, int max_tasks) {
  const int row_tiles = CeilDiv(m, kMr);
  const int col_tiles = CeilDiv(n, kNr);
  TaskGrid best;
  int64_t best_cost = INT64_MAX;
  for (int row_parts = 1; row_parts <= std::min(max_tasks, row_tiles); ++row_parts) {
    const int col_parts = std::min(max_tasks / row_parts, col_tiles);
    const int64_t task_rows = int64_t{CeilDiv(row_tiles, row_parts)} * kMr;
    const int64_t task_cols = int64_t{CeilDiv(col_tiles, col_parts)} * kNr;
    // Per unit of k: the multiply-adds, plus packing (a few times dearer per element).
    const int64_t cost = task_rows * task_cols + 4 * (task_rows + task_cols);
    if (cost < best_cost) {
      best_cost = cost;
      best = {row_parts, col_parts};
    }
  }
  return best;
}

// Start of part `part` of `parts` when `tiles` micro-tiles of `tile` elements, covering
// `total` elements, are shared out as evenly as possible.
int PartStart(int part, int parts, int tiles, int tile, int total) {
  return std::min(total, static_cast<int>(int64_t{tiles} * part / parts) * tile);
}

}  // namespace

const char* GemmIsa() {
  return internal::ActiveGemmIsa() == internal::GemmIsaKind::kAvx2Fma ? "avx2+fma" : "portable";
}

void Gemm(ThreadPool& pool, Transpose transpose_a, Transpose transpose_b, int m, int n, int k,
          float alpha, const float* a, int lda, const float* b, int ldb, float beta, float* c,
          int ldc) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0 || alpha == 0.0f) {
    ScaleC(m, n, beta, c, ldc);
    return;
  }
  const bool avx2 = internal::ActiveGemmIsa() == internal::GemmIsaKind::kAvx2Fma;
  const Problem problem{
      .a = {a, lda, transpose_a == Transpose::kYes},
      .b = {b, ldb, transpose_b == Transpose::kYes},
      .k = k,
      .alpha = alpha,
      .beta = beta,
      .c = c,
      .ldc = ldc,
      .kernel = avx2 ? internal::MicroKernelAvx2Fma : internal::MicroKernelPortable,
      .avx2 = avx2,
  };

  const int64_t macs = int64_t{m} * n * k;
  const int max_tasks =
      static_cast<int>(std::clamp<int64_t>(macs / kMinMacsPerTask, 1, pool.size()));
  const TaskGrid grid = ChooseGrid(m, n, max_tasks);
  const int tasks = grid.row_parts * grid.col_parts;
  const int row_tiles = CeilDiv(m, kMr);
  const int col_tiles = CeilDiv(n, kNr);
  auto run_task = [&](int task) {
    const int row_part = task / grid.col_parts;
    const int col_part = task % grid.col_parts;
    const int row0 = PartStart(row_part, grid.row_parts, row_tiles, kMr, m);
    const int row1 = PartStart(row_part + 1, grid.row_parts, row_tiles, kMr, m);
    const int col0 = PartStart(col_part, grid.col_parts, col_tiles, kNr, n);
    const int col1 = PartStart(col_part + 1, grid.col_parts, col_tiles, kNr, n);
    if (row1 <= row0 || col1 <= col0) return;
    if (!GemmBlock(problem, row0, row1 - row0, col0, col1 - col0)) {
      GemmBlockUnpacked(problem, row0, row1 - row0, col0, col1 - col0);
    }
  };
  if (tasks == 1) {
    run_task(0);
  } else {
    pool.ParallelFor(tasks, run_task);
  }
}

void LinearForward(ThreadPool& pool, int batch, int in, int out, const float* x, const float* w,
                   float* y) {
  Gemm(pool, Transpose::kNo, Transpose::kYes, batch, out, in, 1.0f, x, in, w, in, 0.0f, y, out);
}

void LinearBackwardData(ThreadPool& pool, int batch, int in, int out, const float* dy,
                        const float* w, float* dx) {
  Gemm(pool, Transpose::kNo, Transpose::kNo, batch, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in);
}

void LinearBackwardWeight(ThreadPool& pool, int batch, int in, int out, const float* dy,
                          const float* x, float* dw, bool accumulate) {
  Gemm(pool, Transpose::kYes, Transpose::kNo, out, in, batch, 1.0f, dy, out, x, in,
       accumulate ? 1.0f : 0.0f, dw, in);
}

}  // namespace rankscope::kernels
