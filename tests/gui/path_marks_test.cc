// The critical path's marks: which step a time falls in, and its segments on the tracks.
#include "gui/core/path_marks.h"

#include <gtest/gtest.h>

#include "tests/gui/model_builder.h"

namespace rankscope::gui {
namespace {

analyzer::StepPath Path(int64_t step, int64_t start, int64_t end, std::vector<analyzer::StepPathSegment> segments) {
  return {step, start, end, std::move(segments)};
}

TEST(PathMarksTest, PathAtFindsTheStepHoldingATime) {
  const std::vector<analyzer::StepPath> paths = {Path(1, 100, 200, {}), Path(2, 200, 300, {}), Path(3, 350, 400, {})};
  EXPECT_EQ(PathAt(paths, 100), 0u);
  EXPECT_EQ(PathAt(paths, 199), 0u);
  EXPECT_EQ(PathAt(paths, 200), 1u);  // half-open spans
  EXPECT_EQ(PathAt(paths, 320), std::nullopt);  // between steps
  EXPECT_EQ(PathAt(paths, 399), 2u);
  EXPECT_EQ(PathAt(paths, 50), std::nullopt);
  EXPECT_EQ(PathAt(paths, 400), std::nullopt);
  EXPECT_EQ(PathAt({}, 5), std::nullopt);
}

TEST(PathMarksTest, SegmentsLandOnTheirRanksTracksByLane) {
  testing::RankBuilder rank0(0, "a"), rank1(1, "a");
  rank0.AddTrack(trace::LaneKind::kCpuThread, -1, "compute");  // lane 1
  rank0.AddTrack(trace::LaneKind::kCpuThread, -1, "comm");     // lane 2
  rank1.AddTrack(trace::LaneKind::kCpuThread, -1, "compute");  // lane 1
  // The model lists rank 1 first: indices, not rank numbers, address it.
  const TimelineModel model("run", {rank1.Build(), rank0.Build()});
  const analyzer::StepPath path =
      Path(0, 0, 100, {{1, 1, false, 0, 10}, {1, 1, true, 10, 40}, {0, 2, true, 40, 90}, {0, 9, true, 90, 95},
                       {5, 1, true, 95, 100}});
  const std::vector<PathMark> marks = PathMarks(model, path);
  ASSERT_EQ(marks.size(), 3u);  // lane 9 and rank 5 are not in the model
  EXPECT_EQ(marks[0].rank, 0u);  // rank 1, listed first
  EXPECT_EQ(marks[0].track, 0u);
  EXPECT_FALSE(marks[0].work);
  EXPECT_TRUE(marks[1].work);
  EXPECT_EQ(marks[2].rank, 1u);  // rank 0
  EXPECT_EQ(marks[2].track, 1u);  // its lane 2
  EXPECT_EQ(marks[2].start_ns, 40);
  EXPECT_EQ(marks[2].end_ns, 90);
}

}  // namespace
}  // namespace rankscope::gui
