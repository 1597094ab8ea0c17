// What a run records: the `--trace` items of `rankscope profile`, carried to the collector
// in RANKSCOPE_TRACE and stored in each rank file's meta (`collector.trace`).
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace rankscope::trace {

struct TraceSelection {
  bool nvtx = false;  // NVTX ranges and marks of every domain except NCCL's
  bool cuda = false;  // CUDA activity through CUPTI (not collected yet)
  bool nccl = false;  // NCCL's own NVTX ranges (and later its profiler plugin)

  static TraceSelection All() { return {.nvtx = true, .cuda = true, .nccl = true}; }
  // The selected names in canonical order ("nvtx,cuda,nccl").
  std::string ToList() const;
};

inline constexpr std::string_view kDefaultTraceList = "nvtx,cuda,nccl";
inline constexpr std::string_view kValidTraceItems = "nvtx, cuda, nccl";

// Parses a comma list such as "nvtx,nccl". Blanks around items and repeated items are
// accepted; an empty list, an empty item or an unknown item is an error naming it.
Result<TraceSelection> ParseTraceList(std::string_view list);

}  // namespace rankscope::trace
