// Helpers shared by the CUDA kernel files: CUDA errors as Status, launch checks, grid
// sizes for element-wise loops. Private to kernels/cuda/.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include <cuda_runtime_api.h>

#include "base/status.h"

namespace rankscope::kernels::cuda::internal {

// No GPU or no driver is a missing facility (Unavailable); anything else is our bug.
inline Status FromCudaError(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return Status::Ok();
  std::string message = std::string(what) + ": " + cudaGetErrorName(error) + " (" +
                        cudaGetErrorString(error) + ")";
  switch (error) {
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorDevicesUnavailable:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
    case cudaErrorNoKernelImageForDevice:
      return Unavailable(std::move(message));
    default:
      return InternalError(std::move(message));
  }
}

// Clears an error left by an earlier runtime call (its caller already got it as a return
// value), so that CheckLaunch below reports only what the launch itself did.
inline void ClearStaleError() { (void)cudaGetLastError(); }

inline Status CheckLaunch(const char* what) { return FromCudaError(cudaGetLastError(), what); }

inline Status CheckSize(const char* what, int64_t size) {
  if (size < 0) return InvalidArgument(std::string(what) + ": negative size " + std::to_string(size));
  return Status::Ok();
}

inline Status CheckPointer(const char* what, const char* name, const void* pointer,
                           size_t elements) {
  if (pointer == nullptr && elements > 0) {
    return InvalidArgument(std::string(what) + ": " + name + " is null but has " +
                           std::to_string(elements) + " elements");
  }
  return Status::Ok();
}

// Element-wise kernels use grid-stride loops; the cap only bounds the grid, never the work.
constexpr int kElementwiseThreads = 256;
constexpr size_t kMaxElementwiseBlocks = size_t{1} << 20;

inline unsigned int ElementwiseBlocks(size_t n) {
  size_t blocks = (n + kElementwiseThreads - 1) / kElementwiseThreads;
  if (blocks > kMaxElementwiseBlocks) blocks = kMaxElementwiseBlocks;
  if (blocks == 0) blocks = 1;
  return static_cast<unsigned int>(blocks);
}

// Per-device facts are cached for devices 0..kMaxCachedDevices-1 (others ask every time):
// a small GEMM takes a few microseconds, comparable to a few driver calls.
constexpr int kMaxCachedDevices = 64;

// The current device, or -1 if there is none.
inline int CurrentDevice() {
  int device = 0;
  return cudaGetDevice(&device) == cudaSuccess ? device : -1;
}

// Streaming multiprocessors of the current device (1 if it cannot be asked; the launch that
// follows then reports the real error).
inline int MultiprocessorCount() {
  static std::atomic<int> cached[kMaxCachedDevices];  // 0: not asked yet
  const int device = CurrentDevice();
  if (device < 0) return 1;
  const bool cacheable = device < kMaxCachedDevices;
  if (cacheable) {
    const int known = cached[device].load(std::memory_order_relaxed);
    if (known > 0) return known;
  }
  int count = 0;
  if (cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      count <= 0) {
    return 1;
  }
  if (cacheable) cached[device].store(count, std::memory_order_relaxed);
  return count;
}

inline bool IsAligned16(const void* pointer) {
  return (reinterpret_cast<uintptr_t>(pointer) & 15u) == 0;
}

// Shared by the fp32 and bf16 GEMMs: shapes, leading dimensions and pointers.
// A is stored m×k (or k×m when transposed), B k×n (or n×k); ld is the stored row stride.
inline Status ValidateGemm(const char* what, bool transpose_a, bool transpose_b, int m, int n,
                           int k, const void* a, int lda, const void* b, int ldb, const void* c,
                           int ldc) {
  if (m < 0 || n < 0 || k < 0) {
    return InvalidArgument(std::string(what) + ": negative size m=" + std::to_string(m) +
                           " n=" + std::to_string(n) + " k=" + std::to_string(k));
  }
  const int a_cols = transpose_a ? m : k;
  const int b_cols = transpose_b ? k : n;
  if (lda < a_cols || ldb < b_cols || ldc < n) {
    return InvalidArgument(std::string(what) + ": leading dimension too small (lda=" +
                           std::to_string(lda) + " ldb=" + std::to_string(ldb) +
                           " ldc=" + std::to_string(ldc) + ")");
  }
  const size_t c_elements = static_cast<size_t>(m) * static_cast<size_t>(n);
  const size_t ab_used = (k > 0) ? c_elements : 0;  // A and B are read only when k > 0
  RS_RETURN_IF_ERROR(CheckPointer(what, "c", c, c_elements));
  RS_RETURN_IF_ERROR(CheckPointer(what, "a", a, ab_used));
  RS_RETURN_IF_ERROR(CheckPointer(what, "b", b, ab_used));
  return Status::Ok();
}

}  // namespace rankscope::kernels::cuda::internal
