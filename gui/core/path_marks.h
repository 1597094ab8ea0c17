// A step's critical path (analyzer::StepPath, docs/metrics.md §10) as marks on the
// timeline's tracks: which step a time falls in, and each segment's rank and track.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "analyzer/report.h"
#include "gui/core/timeline_model.h"

namespace rankscope::gui {

struct PathMark {
  uint32_t rank = 0;   // index into TimelineModel::ranks()
  uint32_t track = 0;  // index into that rank's tracks
  bool work = true;    // false: a gap the path waited through
  int64_t start_ns = 0;  // common clock
  int64_t end_ns = 0;
};

// The path whose step span holds `time_ns` (common clock); of spans that overlap there (ranks'
// skew), the one that started last. O(log paths): `paths` are sorted by start and end
// (CriticalPathSummary::paths).
std::optional<size_t> PathAt(const std::vector<analyzer::StepPath>& paths, int64_t time_ns);

// The segments of `path` on the model's tracks; a segment whose rank or lane the model does
// not show is left out. O(segments + tracks).
std::vector<PathMark> PathMarks(const TimelineModel& model, const analyzer::StepPath& path);

}  // namespace rankscope::gui
