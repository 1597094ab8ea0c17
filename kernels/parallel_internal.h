// Helpers shared by the element-wise kernels: contiguous ranges over the pool.
#pragma once

#include <algorithm>
#include <cstddef>

#include "kernels/cpu_kernels.h"

namespace rankscope::kernels::internal {

// For ranges of floats: boundaries on multiples of 16 elements (64 bytes), so neighbouring
// tasks never write the same cache line.
inline constexpr size_t kFloatAlignment = 16;

// Start of range `part` of `parts` over [0, n), rounded down to a multiple of `alignment`.
inline size_t RangeStart(size_t part, size_t parts, size_t n, size_t alignment) {
  if (part >= parts) return n;
  // floor(n · part / parts) without overflow.
  const size_t exact = n / parts * part + n % parts * part / parts;
  return exact / alignment * alignment;
}

// Calls fn(begin, end) on contiguous ranges covering [0, n): one range per task, as many
// tasks as the pool has threads but none with fewer than `min_per_task` elements; range
// boundaries are multiples of `alignment`. Small inputs run on the calling thread without
// waking the pool.
template <typename Fn>
void ParallelRanges(ThreadPool& pool, size_t n, size_t min_per_task, size_t alignment,
                    const Fn& fn) {
  if (n == 0) return;
  const size_t tasks = std::clamp<size_t>(n / std::max<size_t>(1, min_per_task), 1,
                                          static_cast<size_t>(pool.size()));
  if (tasks == 1) {
    fn(size_t{0}, n);
    return;
  }
  pool.ParallelFor(static_cast<int>(tasks), [&](int task) {
    const size_t begin = RangeStart(static_cast<size_t>(task), tasks, n, alignment);
    const size_t end = RangeStart(static_cast<size_t>(task) + 1, tasks, n, alignment);
    if (begin < end) fn(begin, end);
  });
}

}  // namespace rankscope::kernels::internal
