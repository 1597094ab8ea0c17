// Which device activity is compute, communication or memory (METRICS.md §1), per device.
//   GPU: kernels whose name contains "nccl" (any case) are comm, kernels with "Memcpy" or
//        "Memset" in the name and copy/set records are memory, other kernels compute.
//   CPU backend: NVTX ranges in a category named "compute" or "comm" (any domain), or on a
//        lane whose role says so, are compute or comm work of device -1 ("cpu").
// User patterns (--comm-pattern, --compute-pattern: case-insensitive substrings) override
// the name rules for kernels and categorized ranges; comm patterns win over compute ones.
// Everything else (API calls, plain NVTX ranges) is an annotation and never device time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analyzer/intervals.h"
#include "trace/reader.h"

namespace rankscope::analyzer {

enum class ActivityClass : uint8_t { kCompute, kComm, kMemory };
const char* ActivityClassName(ActivityClass activity_class);

struct ClassifyOptions {
  std::vector<std::string> comm_patterns;
  std::vector<std::string> compute_patterns;
};

inline constexpr int kCpuDevice = -1;

// One device's merged activity.
struct DeviceActivity {
  int device = kCpuDevice;
  IntervalSet compute;
  IntervalSet comm;
  IntervalSet memory;
  // Union of all three: the device's busy time.
  IntervalSet Busy() const;
  // [first start, last end) of any activity; {0, 0} when there is none.
  Interval Extent() const;
};

// One entry per device that has any activity, sorted by device (CPU first).
std::vector<DeviceActivity> ClassifyRank(const trace::RankTrace& trace, const ClassifyOptions& options);

// The class a kernel name gets by the rules above.
ActivityClass ClassifyKernelName(const std::string& name, const ClassifyOptions& options);

}  // namespace rankscope::analyzer
