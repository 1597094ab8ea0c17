#include "bench/spin_kernel.h"

namespace {

__device__ __forceinline__ uint64_t GlobalTimerNs() {
  uint64_t ns;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
  return ns;
}

}  // namespace

// extern "C": a plain name in CUPTI's records, whatever the demangler does.
extern "C" __global__ void rankscope_timing_spin(uint64_t spin_ns, uint64_t* measured_ns) {
  const uint64_t start = GlobalTimerNs();
  uint64_t now = start;
  while (now - start < spin_ns) now = GlobalTimerNs();
  if (blockIdx.x == 0 && threadIdx.x == 0) *measured_ns = now - start;
}

namespace rankscope::bench {

cudaError_t LaunchSpin(cudaStream_t stream, int blocks, uint64_t spin_ns, uint64_t* measured_ns) {
  (void)cudaGetLastError();  // report this launch's error, not an earlier call's
  rankscope_timing_spin<<<blocks, 32, 0, stream>>>(spin_ns, measured_ns);
  return cudaGetLastError();
}

}  // namespace rankscope::bench
