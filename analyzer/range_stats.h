// docs/metrics.md §3 over any time range the viewer selects, with the range's top activities:
// the same classification, interval algebra and window measure as `rankscope analyze`,
// applied to the events the viewer already holds.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "analyzer/intervals.h"
#include "analyzer/report.h"

namespace rankscope::analyzer {

// One row of events: sorted by start, not overlapping (so ends are sorted too). Columns
// are parallel; event_class holds EventClass values (host-side classes are skipped).
struct SpanColumns {
  std::span<const int64_t> start;
  std::span<const int64_t> end;
  std::span<const uint32_t> name;
  std::span<const uint8_t> event_class;
};

// One rank's device: every row holding its activity, and the window on the rank's own
// clock.
struct DeviceRows {
  int rank = 0;
  int device = kCpuDevice;
  const std::vector<std::string>* strings = nullptr;  // names of the rows' StringIds
  std::vector<SpanColumns> rows;
  Interval window;
};

struct RangeDeviceStats {
  int rank = 0;
  int device = kCpuDevice;
  Breakdown breakdown;
  std::vector<ActivitySummary> top;  // device time inside the window per name, longest first
};

// Each device's breakdown of its window and its `top` longest activities there.
std::vector<RangeDeviceStats> MeasureRange(std::span<const DeviceRows> devices, size_t top);

}  // namespace rankscope::analyzer
