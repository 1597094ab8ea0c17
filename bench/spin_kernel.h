// A kernel that runs for a chosen time: cupti_timing's yardstick for CUPTI's kernel times.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

namespace rankscope::bench {

// The kernel's name in rank files, for bench/cupti_timing_check.py to find it by.
inline constexpr const char* kSpinKernelName = "rankscope_timing_spin";

// Launches `blocks` blocks of one warp on `stream`; each spins on the GPU's global
// nanosecond timer until `spin_ns` have passed, and block 0 stores the time it measured in
// `*measured_ns` (device memory). Returns the launch's error.
cudaError_t LaunchSpin(cudaStream_t stream, int blocks, uint64_t spin_ns, uint64_t* measured_ns);

}  // namespace rankscope::bench
