// Which device activity is compute, communication or memory (docs/metrics.md §1), per device.
//   GPU: kernels whose name contains "nccl" (any case) are comm, kernels with "Memcpy" or
//        "Memset" in the name and copy/set records are memory, other kernels compute.
//   CPU backend: NVTX ranges in a category named "compute" or "comm" (any domain), or on a
//        lane whose role says so, are compute or comm work of device -1 ("cpu").
//   CPU-side traces (a rank with none of the above): ranges named gloo:*, nccl:* or c10d::*
//        are comm, each thread's outermost CPU operators (domain cpu_op) compute, minus the
//        comm ranges on the same thread (span_classifier.h, rank_scan.h).
// User patterns (--comm-pattern, --compute-pattern: case-insensitive substrings) come first
// for kernels and for every NVTX range but steps; comm patterns win over compute ones.
// Everything else (API calls, plain NVTX ranges) is an annotation and never device time.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analyzer/intervals.h"
#include "trace/reader.h"

namespace rankscope::analyzer {

enum class ActivityClass : uint8_t { kCompute, kComm, kMemory };
const char* ActivityClassName(ActivityClass activity_class);

// What the viewer shows an event as: the three device classes (same values), then the
// host-side kinds, which are never device time.
enum class EventClass : uint8_t {
  kCompute = 0, kComm = 1, kMemory = 2,
  kAnnotation = 3,  // NVTX ranges that are not device work
  kApiCall = 4,     // CUDA runtime/driver calls
  kSync = 5,        // synchronizations
  kCollective = 6,  // NCCL profiler-plugin records (collectives as NCCL saw them)
  kMark = 7,        // NVTX instants
};
inline constexpr int kEventClassCount = 8;
const char* EventClassName(EventClass event_class);
inline EventClass ToEventClass(ActivityClass activity_class) { return static_cast<EventClass>(activity_class); }
// The device class of an event class; nullopt for host-side kinds.
std::optional<ActivityClass> DeviceClassOf(EventClass event_class);

struct ClassifyOptions {
  std::vector<std::string> comm_patterns;
  std::vector<std::string> compute_patterns;
};

inline constexpr int kCpuDevice = -1;

// The step names every analysis knows (docs/metrics.md §2), besides ProfilerStep#N.
inline std::vector<std::string> DefaultStepNames() { return {"step", "train_step"}; }

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
