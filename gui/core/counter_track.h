// A rank's memory counters of one source (analyzer/memory_series.h) as the viewer draws
// them: a lane under the rank's tracks with the total held over time as a step area, and
// what each category held at the time under the pointer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analyzer/memory_series.h"

namespace rankscope::gui {

struct CounterTrack {
  std::string source;                   // "nvtx", "cuda", "pytorch allocated", ...
  std::string label;                    // "memory · cuda"
  std::vector<std::string> categories;
  // One entry per change, sorted by time (the rank's own clock): the category that changed,
  // its new value and the total after it.
  std::vector<int64_t> ts;
  std::vector<uint32_t> category;
  std::vector<int64_t> bytes;
  std::vector<int64_t> total;
  int64_t peak = 0;  // the largest total

  size_t size() const { return ts.size(); }
  // The total held at `t`: after the last change at or before it, 0 before the first.
  // O(log n).
  int64_t TotalAt(int64_t t) const;
  // What each category held at `t`, by index into `categories`. O(changes up to t).
  std::vector<int64_t> CategoriesAt(int64_t t) const;
  size_t MemoryBytes() const;
};

// O(samples).
CounterTrack MakeCounterTrack(const analyzer::MemorySeries& series);

// For drawing `width` pixel columns from `t0` (own clock) at `ns_per_px`: each column's
// largest total held at any time inside it (the total carried in from before the column
// counts). O(width · log n + changes in the range).
std::vector<int64_t> CounterColumns(const CounterTrack& track, int64_t t0, double ns_per_px, int width);

}  // namespace rankscope::gui
