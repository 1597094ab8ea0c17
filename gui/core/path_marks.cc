#include "gui/core/path_marks.h"

#include <algorithm>
#include <map>
#include <utility>

namespace rankscope::gui {

std::optional<size_t> PathAt(const std::vector<analyzer::StepPath>& paths, int64_t time_ns) {
  // The first path starting after `time_ns`; the one before it may hold it.
  const auto after = std::upper_bound(paths.begin(), paths.end(), time_ns,
                                      [](int64_t t, const analyzer::StepPath& p) { return t < p.start_ns; });
  for (auto it = after; it != paths.begin();) {
    --it;
    if (time_ns < it->end_ns) return static_cast<size_t>(it - paths.begin());
    if (it->end_ns <= time_ns) break;  // an earlier span ends sooner still
  }
  return std::nullopt;
}

std::vector<PathMark> PathMarks(const TimelineModel& model, const analyzer::StepPath& path) {
  std::map<std::pair<int, uint32_t>, std::pair<uint32_t, uint32_t>> tracks;  // (rank, lane) → indices
  const std::vector<RankTimeline>& ranks = model.ranks();
  for (uint32_t r = 0; r < ranks.size(); ++r) {
    for (uint32_t t = 0; t < ranks[r].tracks.size(); ++t) {
      tracks.emplace(std::make_pair(ranks[r].rank, ranks[r].tracks[t].lane), std::make_pair(r, t));
    }
  }
  std::vector<PathMark> marks;
  for (const analyzer::StepPathSegment& s : path.segments) {
    const auto found = tracks.find({s.rank, s.lane});
    if (found == tracks.end()) continue;
    marks.push_back({found->second.first, found->second.second, s.work, s.start_ns, s.end_ns});
  }
  return marks;
}

}  // namespace rankscope::gui
