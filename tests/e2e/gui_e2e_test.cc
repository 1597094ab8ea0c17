// End to end for the viewer: the reference trainer runs as 2 CPU ranks under the real
// collector, then `rankscope-gui RUN --screenshot` renders it headlessly; the picture must
// show content in every rank's rows, and bad requests must fail with one line, writing
// nothing.
#include <QApplication>
#include <QImage>
#include <QLineEdit>

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>

#include "gui/widgets/main_window.h"
#include "gui/widgets/search_bar.h"
#include "gui/widgets/timeline_view.h"
#include "tests/e2e/e2e_process.h"
#include "tests/temp_dir.h"

namespace rankscope {
namespace {

using testing::ProcessResult;
using testing::TempDir;

using testing::RunProcess;

class ViewerEndToEnd : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    const ProcessResult result =
        RunProcess({RANKSCOPE_CLI, "profile", "-n", "2", "-o", Run().string(), "--", TRAINER_BINARY, "--steps", "6",
                    "--width", "256", "--depth", "2", "--bucket-mb", "0.25", "--first-bucket-mb", "0.25"});
    ASSERT_EQ(result.exit_code, 0) << result.err;
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::filesystem::path Run() { return dir_->path() / "run"; }
  // Shows `window` at 1400x800 with the run opened and analyzed.
  static void OpenRun(gui::MainWindow& window) {
    window.setShowErrorDialogs(false);
    window.setRecordRecentFiles(false);
    window.resize(1400, 800);
    window.show();
    ASSERT_TRUE(window.openRunBlocking(QString::fromStdString(Run().string())));
    ASSERT_TRUE(window.waitUntilIdle());
  }
  static TempDir* dir_;
};
TempDir* ViewerEndToEnd::dir_ = nullptr;

TEST_F(ViewerEndToEnd, TheScreenshotShowsEveryRanksRows) {
  const std::string png = (dir_->path() / "demo.png").string();
  const ProcessResult result = RunProcess({GUI_BINARY, Run().string(), "--screenshot", png, "--size", "1400x800"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find(png), std::string::npos) << result.out;  // it says where the picture is
  const QImage image(QString::fromStdString(png));
  ASSERT_FALSE(image.isNull());
  EXPECT_EQ(image.size(), QSize(1400, 800));

  // The same window in this process tells where each rank's rows are in that picture.
  gui::MainWindow window;
  ASSERT_NO_FATAL_FAILURE(OpenRun(window));
  const gui::TimelineView* view = window.timelineView();
  ASSERT_EQ(view->model()->ranks().size(), 2u);
  const QImage mine = window.grab().toImage();
  std::vector<int> painted_rows(2, 0);
  for (const gui::LayoutEntry& entry : view->layout().entries()) {
    if (entry.kind != gui::LayoutEntry::Kind::kRow || entry.row != 0) continue;
    const int y = view->contentToWidgetY(entry.y + entry.height / 2);
    if (y < view->axisHeight() || y >= view->height()) continue;
    const QPoint left = view->mapTo(&window, QPoint(view->timeAreaLeft(), y));
    const QColor background = mine.pixelColor(view->mapTo(&window, QPoint(view->width() - 30, view->height() - 3)));
    int painted = 0;
    for (int x = 2; x < view->timeAreaWidth() - 2; ++x) {
      if (image.pixelColor(left.x() + x, left.y()) != background) ++painted;
    }
    if (painted > view->timeAreaWidth() / 20) ++painted_rows[entry.rank];
  }
  EXPECT_GE(painted_rows[0], 2) << "rank 0: compute and comm rows at least";
  EXPECT_GE(painted_rows[1], 2) << "rank 1: compute and comm rows at least";

  // The trainer's memory counters are each rank's "memory · nvtx" lane: what it allocated
  // (parameters, gradients, optimizer state, ...) held until the end.
  for (const gui::RankTimeline& rank : view->model()->ranks()) {
    ASSERT_EQ(rank.counters.size(), 1u) << "rank " << rank.rank;
    const gui::CounterTrack& memory = rank.counters[0];
    EXPECT_EQ(memory.label, "memory · nvtx");
    EXPECT_GT(memory.peak, 0);
    EXPECT_NE(std::find(memory.categories.begin(), memory.categories.end(), "parameters"), memory.categories.end());
    EXPECT_EQ(memory.TotalAt(rank.last_ns), memory.total.back());
  }
  int lanes = 0;
  for (const gui::LayoutEntry& entry : view->layout().entries()) lanes += entry.kind == gui::LayoutEntry::Kind::kCounter;
  EXPECT_EQ(lanes, 2);
}

// The analysis behind the Run tab follows each step's critical path (a small run); selecting
// an event shows its step's path over the tracks; clearing the selection hides it.
TEST_F(ViewerEndToEnd, SelectingAnEventShowsItsStepsCriticalPath) {
  gui::MainWindow window;
  ASSERT_NO_FATAL_FAILURE(OpenRun(window));
  gui::TimelineView* view = window.timelineView();
  const gui::TimelineModel* model = view->model();
  const analyzer::Report* report = window.currentReport();
  ASSERT_NE(report, nullptr);
  ASSERT_TRUE(report->critical_path.has_value());
  ASSERT_GE(report->critical_path->paths.size(), 2u);
  // An event of rank 0 that starts in the middle of the second measured step.
  const analyzer::StepPath& step = report->critical_path->paths[1];
  const int64_t middle = (step.start_ns + step.end_ns) / 2;
  std::optional<gui::EventRef> picked;
  const gui::RankTimeline& rank = model->ranks()[0];
  for (uint32_t t = 0; t < rank.tracks.size() && !picked; ++t) {
    for (uint32_t r = 0; r < rank.tracks[t].rows.size() && !picked; ++r) {
      for (uint32_t i = 0; i < rank.tracks[t].rows[r].size(); ++i) {
        const gui::EventRef candidate{0, t, r, i};
        if (model->DisplayStart(candidate) >= middle && model->DisplayStart(candidate) < step.end_ns) {
          picked = candidate;
          break;
        }
      }
    }
  }
  ASSERT_TRUE(picked.has_value());
  const gui::EventRef ref = *picked;
  view->selectEvent(ref);
  const std::vector<gui::PathMark>& marks = view->pathMarks();
  ASSERT_FALSE(marks.empty());
  bool work = false;
  for (const gui::PathMark& mark : marks) work |= mark.work;
  EXPECT_TRUE(work);
  // The step that holds the event holds the path.
  const int64_t at = model->DisplayStart(ref);
  EXPECT_LE(marks.front().start_ns, at);
  EXPECT_GE(marks.back().end_ns, at);
  // The marks tile the step: each starts where the previous ended.
  for (size_t i = 1; i < marks.size(); ++i) EXPECT_EQ(marks[i].start_ns, marks[i - 1].end_ns) << i;
  view->clearSelection();
  EXPECT_TRUE(view->pathMarks().empty());
}

TEST_F(ViewerEndToEnd, BadScreenshotRequestsFailWithOneLineAndWriteNothing) {
  const std::filesystem::path png = dir_->path() / "never.png";
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{Run().string(), "--screenshot", png.string(), "--size", "12x"}, "size"},
      {{Run().string(), "--screenshot", png.string(), "--range", "5ms..1ms"}, "range"},
      {{Run().string(), "--screenshot", png.string(), "--range", "5000s..6000s"}, "after the run's end"},
      {{(dir_->path() / "missing").string(), "--screenshot", png.string()}, "missing"},
      {{Run().string(), "--screenshot", (dir_->path() / "no-such-dir" / "x.png").string()}, "no-such-dir"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> argv = {GUI_BINARY};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    const ProcessResult result = RunProcess(argv);
    EXPECT_EQ(result.exit_code, 2) << c.says;
    EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
    EXPECT_NE(result.err.find("rankscope-gui: error:"), std::string::npos) << result.err;
    EXPECT_NE(result.err.find(c.says), std::string::npos) << result.err;
    EXPECT_FALSE(std::filesystem::exists(png));
  }
}

// --search alone prints the exact number of matching events (the viewer's own count of the
// same run, case-insensitive); bad patterns and runs fail with one line.
TEST_F(ViewerEndToEnd, SearchPrintsTheExactMatchCount) {
  gui::MainWindow window;
  window.setShowErrorDialogs(false);
  window.setRecordRecentFiles(false);
  ASSERT_TRUE(window.openRunBlocking(QString::fromStdString(Run().string())));
  window.searchBar()->lineEdit()->setText(QStringLiteral("allreduce|FORWARD"));
  window.searchBar()->search();
  const size_t expected = window.searchBar()->matches()->size();
  ASSERT_GT(expected, 0u);

  const ProcessResult counted = RunProcess({GUI_BINARY, Run().string(), "--search", "allreduce|FORWARD"});
  ASSERT_EQ(counted.exit_code, 0) << counted.err;
  EXPECT_EQ(counted.out, std::to_string(expected) + "\n");
  const ProcessResult none = RunProcess({GUI_BINARY, Run().string(), "--search", "^no such event$"});
  ASSERT_EQ(none.exit_code, 0) << none.err;
  EXPECT_EQ(none.out, "0\n");

  for (const std::vector<std::string>& args : {std::vector<std::string>{Run().string(), "--search", "(unclosed"},
                                               std::vector<std::string>{(dir_->path() / "missing").string(), "--search", "x"},
                                               std::vector<std::string>{"--search", "x"}}) {
    std::vector<std::string> argv = {GUI_BINARY};
    argv.insert(argv.end(), args.begin(), args.end());
    const ProcessResult result = RunProcess(argv);
    EXPECT_EQ(result.exit_code, 2) << args[0];
    EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
    EXPECT_NE(result.err.find("rankscope-gui: error:"), std::string::npos) << result.err;
    EXPECT_TRUE(result.out.empty()) << result.out;
  }
}

}  // namespace
}  // namespace rankscope

int main(int argc, char** argv) {
  qputenv("QT_QPA_PLATFORM", "offscreen");
  QApplication app(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
