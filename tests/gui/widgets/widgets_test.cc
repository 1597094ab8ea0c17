// The viewer's widgets under QTest on the offscreen platform: keys and clicks do what the
// README says, range statistics are the analyzer's numbers, bad files leave a usable window,
// values read as the reports write them, the Scaling tab shows the reports' chart, and a
// hung run leads the Run tab with its diagnosis and marks what was in flight.
#include <QApplication>
#include <QImage>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QStatusBar>
#include <QTableWidget>
#include <QScrollArea>
#include <QScrollBar>
#include <QSplitter>
#include <QTabWidget>
#include <QTextBrowser>
#include <QSignalSpy>
#include <QTest>
#include <QTimer>
#include <QToolButton>
#include <QWheelEvent>

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstring>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>

#include "analyzer/analyze.h"
#include "base/format.h"
#include "interop/interop.h"
#include "gui/core/lod.h"
#include "gui/widgets/details_panel.h"
#include "gui/widgets/event_colors.h"
#include "gui/widgets/main_window.h"
#include "gui/widgets/overview_strip.h"
#include "gui/widgets/range_stats_panel.h"
#include "gui/widgets/run_panel.h"
#include "gui/widgets/scaling_panel.h"
#include "gui/widgets/search_bar.h"
#include "gui/widgets/screenshot.h"
#include "gui/widgets/svg_chart_view.h"
#include "gui/widgets/timeline_view.h"
#include "report/scaling_plot.h"
#include "tests/analyzer/breakdown_expect.h"
#include "tests/gui/model_builder.h"
#include "tests/trace_builder.h"
#include "tests/rank_file_writer.h"
#include "tests/temp_dir.h"
#include "trace/run_dir.h"

namespace rankscope::gui {
namespace {

using analyzer::testing::kCommCategory;
using analyzer::testing::kComputeCategory;
using analyzer::testing::TraceBuilder;

constexpr int64_t kStepNs = 1'000'000;  // 1 ms steps
constexpr int kSteps = 4;

// A 2-rank CPU-backend run: per step, compute ranges [0, 600 us) and [700, 900 us) on a
// compute lane, an all-reduce [400, 800 us) on a comm lane; rank 1 is shifted by 50 us.
void WriteRun(const std::filesystem::path& dir) {
  for (int rank = 0; rank < 2; ++rank) {
    TraceBuilder b(rank, 2);
    b.RunId("29c3f1c948315e27369b64240452b3dc");  // as long as the ids rankscope makes
    b.CpuBackendCategories();
    const trace::LaneId main = b.CpuThread("main");
    const trace::LaneId compute = b.CpuThread("compute", trace::LaneRole::kCompute);
    const trace::LaneId comm = b.CpuThread("comm", trace::LaneRole::kComm);
    const int64_t base = 1'000'000'000 + rank * 50'000;
    b.Workload(main, base, 2, 8, 1, kSteps, 1000);
    for (int s = 0; s < kSteps; ++s) {
      const int64_t t = base + s * kStepNs;
      b.Step(main, s, t, t + kStepNs, 16);
      b.Range(compute, "rankscope", kComputeCategory, "forward", t, t + 600'000);
      b.Range(compute, "rankscope", kComputeCategory, "backward", t + 700'000, t + 900'000);
      b.Range(comm, "rankscope", kCommCategory, "allreduce", t + 400'000, t + 800'000, "{\"bytes\":4096}");
    }
    rankscope::testing::WriteRankTraceFile(b.Build(), dir / trace::RankFileName(rank));
  }
}

class WidgetsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteRun(dir_.path());
    window_.setShowErrorDialogs(false);
    window_.setRecordRecentFiles(false);
    window_.resize(1400, 800);
    window_.show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(&window_));
    ASSERT_TRUE(window_.openRunBlocking(QString::fromStdString(dir_.path().string())));
    ASSERT_TRUE(window_.waitUntilIdle());
    view_ = window_.timelineView();
    ASSERT_NE(view_->model(), nullptr);
    QCursor::setPos(-1000, -1000);  // keys zoom around the center, not a stray cursor
  }

  rankscope::testing::TempDir dir_;
  MainWindow window_;
  TimelineView* view_ = nullptr;
};

TEST_F(WidgetsTest, WAndSZoomByTheDocumentedFactorAroundTheCenter) {
  const int64_t t0 = view_->model()->start_ns();
  view_->setTimeRange(t0, t0 + 2'000'000);
  const TimeView before = view_->view();
  const double center = (static_cast<double>(before.start_ns()) + static_cast<double>(before.end_ns())) / 2;
  view_->setFocus();
  QTest::keyClick(view_, Qt::Key_W);
  const TimeView zoomed = view_->view();
  // 2 ms / 1.4 = 1.428571 ms, centered where the view was.
  EXPECT_NEAR(static_cast<double>(zoomed.duration_ns()), 2'000'000 / 1.4, 2);
  EXPECT_NEAR((static_cast<double>(zoomed.start_ns()) + static_cast<double>(zoomed.end_ns())) / 2, center, 2);
  QTest::keyClick(view_, Qt::Key_S);
  EXPECT_NEAR(static_cast<double>(view_->view().duration_ns()), 2'000'000, 4);
}

TEST_F(WidgetsTest, AAndDPanATenthOfTheViewAndBackspaceReturns) {
  const int64_t t0 = view_->model()->start_ns();
  view_->setTimeRange(t0 + 1'000'000, t0 + 2'000'000);
  view_->setFocus();
  QTest::keyClick(view_, Qt::Key_D);
  EXPECT_NEAR(static_cast<double>(view_->view().start_ns() - (t0 + 1'000'000)), 100'000, 2);
  QTest::keyClick(view_, Qt::Key_A);
  EXPECT_NEAR(static_cast<double>(view_->view().start_ns() - (t0 + 1'000'000)), 0, 2);
  QTest::keyClick(view_, Qt::Key_W);  // zooms: remembered
  QTest::keyClick(view_, Qt::Key_Backspace);
  EXPECT_NEAR(static_cast<double>(view_->view().duration_ns()), 1'000'000, 2);
}

TEST_F(WidgetsTest, FFitsTheRunAndCtrlWheelZoomsAtTheCursor) {
  const TimelineModel& model = *view_->model();
  view_->setTimeRange(model.start_ns(), model.start_ns() + 1000);
  view_->setFocus();
  QTest::keyClick(view_, Qt::Key_F);
  EXPECT_LE(view_->view().start_ns(), model.start_ns());
  EXPECT_GE(view_->view().end_ns(), model.end_ns());

  const int64_t span = 4'000'000;
  view_->setTimeRange(model.start_ns(), model.start_ns() + span);
  const double x = view_->timeAreaLeft() + view_->timeAreaWidth() / 4.0;
  const int64_t under_cursor = view_->xToTime(x);
  QWheelEvent wheel(QPointF(x, 100), view_->mapToGlobal(QPointF(x, 100)), QPoint(), QPoint(0, 120), Qt::NoButton,
                    Qt::ControlModifier, Qt::NoScrollPhase, false);
  QApplication::sendEvent(view_, &wheel);
  // One notch: 1.2× in, and the time under the cursor stays under it.
  EXPECT_NEAR(static_cast<double>(view_->view().duration_ns()), span / 1.2, 2);
  EXPECT_NEAR(static_cast<double>(view_->xToTime(x)), static_cast<double>(under_cursor), view_->view().NsPerPixel() + 1);
}

TEST_F(WidgetsTest, ClickingAnEventsComputedPixelSelectsIt) {
  const TimelineModel& model = *view_->model();
  // Show step 1 of the run; click the middle of rank 1's "backward" range.
  view_->setTimeRange(model.start_ns() + kStepNs, model.start_ns() + 2 * kStepNs + 100'000);
  std::optional<EventRef> target;
  for (uint32_t t = 0; t < model.ranks()[1].tracks.size() && !target; ++t) {
    const Track& track = model.ranks()[1].tracks[t];
    for (uint32_t w = 0; w < track.rows.size() && !target; ++w) {
      for (uint32_t i = 0; i < track.rows[w].size(); ++i) {
        const EventRef ref{1, t, w, i};
        if (model.Name(ref) == "backward" && model.DisplayStart(ref) > view_->view().start_ns()) {
          target = ref;
          break;
        }
      }
    }
  }
  ASSERT_TRUE(target.has_value());
  const LayoutEntry* entry = view_->layout().RowEntry(target->rank, target->track, target->row);
  ASSERT_NE(entry, nullptr);
  view_->setVerticalOffset(std::max(0, entry->y - 50));
  const int64_t middle = (model.DisplayStart(*target) + model.DisplayEnd(*target)) / 2;
  const QPoint pixel(static_cast<int>(std::lround(view_->timeToX(middle))),
                     view_->contentToWidgetY(entry->y + entry->height / 2));
  QTest::mouseClick(view_, Qt::LeftButton, Qt::NoModifier, pixel);
  ASSERT_TRUE(view_->selectedEvent().has_value());
  EXPECT_EQ(*view_->selectedEvent(), *target);
  // The details panel names it.
  EXPECT_EQ(view_->selectedEvent() ? model.Name(*view_->selectedEvent()) : "", "backward");
}

TEST_F(WidgetsTest, RangeStatisticsAreTheAnalyzersNumbersForAStep) {
  analyzer::AnalyzeOptions options;
  options.skip_steps = 0;
  Result<analyzer::Report> report = analyzer::AnalyzeRun(dir_.path(), options);
  ASSERT_TRUE(report.ok()) << report.status().message();
  const TimelineModel& model = *view_->model();
  for (const analyzer::DeviceReport& device : report->ranks) {
    for (const analyzer::StepMetrics& step : device.steps) {
      // The step's window on the common clock (no host offsets here: one host).
      int64_t offset = 0;
      for (const RankTimeline& rank : model.ranks()) {
        if (rank.rank == device.rank) offset = rank.clock_offset_ns;
      }
      view_->setSelectedRange(step.start_ns + offset, step.end_ns + offset);
      window_.rangeStatsPanel()->waitForIdle();
      const std::vector<analyzer::RangeDeviceStats>& stats = window_.rangeStatsPanel()->stats();
      const analyzer::RangeDeviceStats* mine = nullptr;
      for (const analyzer::RangeDeviceStats& s : stats) {
        if (s.rank == device.rank && s.device == device.device) mine = &s;
      }
      ASSERT_NE(mine, nullptr) << "rank " << device.rank << " step " << step.number;
      const analyzer::Breakdown& got = mine->breakdown;
      analyzer::testing::ExpectSameBreakdown(got, step.breakdown);
      // Per step: compute [0, 600) + [700, 900) us = 800 us; comm [400, 800) us overlaps
      // it in [400, 600) + [700, 800) = 300 us.
      EXPECT_EQ(got.compute_ns, 800'000);
      EXPECT_EQ(got.overlap_ns, 300'000);
      ASSERT_FALSE(mine->top.empty());
      EXPECT_EQ(mine->top.front().name, "forward");  // 600 us, the longest
    }
  }
}

TEST_F(WidgetsTest, ACorruptFileShowsOneErrorAndTheWindowStaysUsable) {
  const std::filesystem::path bad = dir_.path() / "not-a-trace.sqlite";
  std::ofstream(bad) << "this is not SQLite";
  window_.setShowErrorDialogs(true);
  QString dialog_text;
  // The dialog is modal: read and close it from the event loop once it shows.
  QTimer::singleShot(0, [&] {
    for (int tries = 0; tries < 200 && dialog_text.isEmpty(); ++tries) {
      for (QWidget* widget : QApplication::topLevelWidgets()) {
        if (auto* box = qobject_cast<QMessageBox*>(widget); box && box->isVisible()) {
          dialog_text = box->text();
          box->accept();
        }
      }
      if (dialog_text.isEmpty()) QTest::qWait(10);
    }
  });
  EXPECT_FALSE(window_.openRunBlocking(QString::fromStdString(bad.string())));
  QTest::qWait(50);
  EXPECT_TRUE(dialog_text.contains("not-a-trace.sqlite")) << dialog_text.toStdString();
  // The run already open is still shown and still answers keys.
  EXPECT_EQ(window_.runCount(), 1);
  ASSERT_NE(view_->model(), nullptr);
  const int64_t before = view_->view().duration_ns();
  view_->setFocus();
  QTest::keyClick(view_, Qt::Key_W);
  EXPECT_LT(view_->view().duration_ns(), before);
}

// Another tool's trace opens straight into the model and its analysis, writing nothing; the
// first event whose fields are asked for imports it once into TMPDIR (the Details tab says
// so meanwhile), and closing the run removes that import.
TEST_F(WidgetsTest, OpensAnotherToolsTraceDirectlyAndImportsItOnlyForItsEventsFields) {
  rankscope::testing::TempDir other;
  const std::filesystem::path exported = other / "run.json.gz";
  ASSERT_TRUE(interop::ExportChromeTrace(dir_.path(), exported).ok());
  const std::filesystem::path tmp = other / "tmp";
  std::filesystem::create_directories(tmp);
  const bool had_tmpdir = qEnvironmentVariableIsSet("TMPDIR");
  const QByteArray old_tmpdir = qgetenv("TMPDIR");
  qputenv("TMPDIR", QByteArray::fromStdString(tmp.string()));
  struct RestoreTmpdir {
    bool had;
    QByteArray old;
    // An empty TMPDIR is not an unset one: the later tests of this process need /tmp again.
    ~RestoreTmpdir() { had ? (void)qputenv("TMPDIR", old) : (void)qunsetenv("TMPDIR"); }
  } restore{had_tmpdir, old_tmpdir};
  ASSERT_TRUE(window_.openRunBlocking(QString::fromStdString(exported.string())));
  ASSERT_TRUE(window_.waitUntilIdle());
  ASSERT_EQ(window_.runCount(), 2);
  EXPECT_TRUE(std::filesystem::is_empty(tmp)) << "opening another tool's trace wrote a temporary run";
  const TimelineModel* direct = window_.currentModel();
  ASSERT_NE(direct, nullptr);
  ASSERT_EQ(direct->ranks().size(), 2u);
  EXPECT_FALSE(direct->ranks()[1].rank_file);
  // The same events as the run it came from, and the report names the file opened.
  window_.setCurrentRun(0);
  const size_t original_tracks = window_.currentModel()->ranks()[1].tracks.size();
  const size_t original_events = window_.currentModel()->events();
  const analyzer::Report* original = window_.currentReport();
  ASSERT_NE(original, nullptr);
  const int64_t original_step = original->ranks[1].totals.window_ns;
  window_.setCurrentRun(1);
  EXPECT_EQ(window_.currentModel()->ranks()[1].tracks.size(), original_tracks);
  EXPECT_EQ(window_.currentModel()->events(), original_events);
  const analyzer::Report* report = window_.currentReport();
  ASSERT_NE(report, nullptr);
  EXPECT_EQ(report->run.directory, exported.string());
  EXPECT_EQ(report->ranks[1].totals.window_ns, original_step);

  // An all-reduce range's fields: "reading…" first, then its args, from the one import.
  std::optional<EventRef> allreduce;
  const RankTimeline& rank = direct->ranks()[1];
  for (uint32_t t = 0; t < rank.tracks.size() && !allreduce; ++t) {
    const EventRow& row = rank.tracks[t].rows[0];
    for (uint32_t i = 0; i < row.size() && !allreduce; ++i) {
      if (rank.Str(row.name[i]) == "allreduce") allreduce = EventRef{1, t, 0, i};
    }
  }
  ASSERT_TRUE(allreduce.has_value());
  view_->selectEvent(*allreduce, /*reveal=*/true);
  EXPECT_TRUE(window_.detailsPanel()->text().contains("once for its events' fields"))
      << window_.detailsPanel()->text().toStdString();
  QTRY_VERIFY_WITH_TIMEOUT(window_.detailsPanel()->text().contains("{\"bytes\":4096}"), 30000);
  EXPECT_FALSE(std::filesystem::is_empty(tmp)) << "the fields were imported elsewhere";
  // Another event of the run reads the same import: nothing more appears in TMPDIR.
  const auto entries = [&] { return std::distance(std::filesystem::directory_iterator(tmp), {}); };
  const auto imports = entries();
  view_->selectEvent(EventRef{0, 0, 0, 0}, /*reveal=*/true);
  EXPECT_FALSE(window_.detailsPanel()->text().contains("once for its events' fields"));
  EXPECT_EQ(entries(), imports);
  window_.closeRun(1);
  EXPECT_TRUE(std::filesystem::is_empty(tmp)) << "the temporary import outlived its run";
}

// A foreign trace's import notes (what was left out, how the rank and the times were chosen)
// are where the user sees them: in the Run tab, whether or not the analysis succeeds, and
// counted in the status bar with the lines as its tooltip. A rankscope run has none.
TEST_F(WidgetsTest, AnImportedTracesNotesShowInTheRunTabAndTheStatusBar) {
  EXPECT_TRUE(window_.runPanel()->importNotesText().isEmpty());
  EXPECT_FALSE(window_.statusText().contains("import note"));
  rankscope::testing::TempDir other;
  // The older PyTorch profiler format, with an event of a kind no importer reads.
  const std::filesystem::path legacy = other / "job_rank1.json";
  std::ofstream(legacy) << R"([
    {"name": "ProfilerStep#0", "ph": "X", "ts": 10, "dur": 90, "tid": 1, "pid": "CPU functions", "args": {}},
    {"name": "aten::mm", "ph": "X", "ts": 20, "dur": 30, "tid": 1, "pid": "CPU functions", "args": {}},
    {"name": "memory", "ph": "C", "ts": 60, "pid": 1, "args": {}}])";
  ASSERT_TRUE(window_.openRunBlocking(QString::fromStdString(legacy.string())));
  ASSERT_TRUE(window_.waitUntilIdle());
  ASSERT_EQ(window_.currentRun(), 1);
  const QString notes = window_.runPanel()->importNotesText();
  const QString file = QString::fromStdString(legacy.string());
  EXPECT_TRUE(notes.contains(file + "': left out 1 event of kinds rankscope does not import ('ph C' 1)"))
      << notes.toStdString();
  EXPECT_TRUE(notes.contains(file + "': no rank recorded; imported as rank 1, from its file name")) << notes.toStdString();
  EXPECT_TRUE(notes.contains(file + "': the older PyTorch profiler format")) << notes.toStdString();
  auto* shown = window_.runPanel()->findChild<QLabel*>(QStringLiteral("importNotes"));
  ASSERT_NE(shown, nullptr);
  EXPECT_TRUE(shown->isVisible());
  EXPECT_TRUE(shown->text().contains("left out 1 event")) << shown->text().toStdString();
  const int count = static_cast<int>(notes.count(QLatin1Char('\n')));
  EXPECT_TRUE(window_.statusText().contains(QStringLiteral("%1 import notes in the Run tab").arg(count)))
      << window_.statusText().toStdString();
  QString tooltip;
  for (const QLabel* label : window_.statusBar()->findChildren<QLabel*>()) {
    if (label->text() == window_.statusText()) tooltip = label->toolTip();
  }
  EXPECT_EQ(tooltip + QLatin1Char('\n'), notes);

  // Back on the rankscope run: no notes; the imported run's come back with it.
  window_.setCurrentRun(0);
  EXPECT_TRUE(window_.runPanel()->importNotesText().isEmpty());
  EXPECT_FALSE(shown->isVisible());
  EXPECT_FALSE(window_.statusText().contains("import note"));
  window_.setCurrentRun(1);
  EXPECT_EQ(window_.runPanel()->importNotesText(), notes);
}

// A trace with nothing rankscope imports does not open: one error line saying what was left out.
TEST_F(WidgetsTest, ATraceWithNothingToImportFailsWithWhatWasLeftOut) {
  rankscope::testing::TempDir other;
  const std::filesystem::path counters = other / "counters.json";
  std::ofstream(counters) << R"([{"name": "memory", "ph": "C", "ts": 1, "pid": 1, "args": {"bytes": 4}}])";
  QString error;
  QObject::connect(&window_, &MainWindow::loadFailed, [&](const QString& message) { error = message; });
  EXPECT_FALSE(window_.openRunBlocking(QString::fromStdString(counters.string())));
  EXPECT_EQ(error.toStdString(), "no events rankscope imports: '" + counters.string() +
                                     "': left out 1 event of kinds rankscope does not import ('ph C' 1)");
  EXPECT_EQ(window_.runCount(), 1);
}

TEST_F(WidgetsTest, EveryRanksRowsHaveContentInTheWindowsGrab) {
  view_->fitAll();
  const QImage image = window_.grab().toImage();
  ASSERT_FALSE(image.isNull());
  const QColor background = image.pixelColor(view_->mapTo(&window_, QPoint(view_->width() - 30, view_->height() - 3)));
  for (const LayoutEntry& entry : view_->layout().entries()) {
    // Each track's first row holds its ranges; deeper rows may hold only an instant mark.
    if (entry.kind != LayoutEntry::Kind::kRow || entry.row != 0) continue;
    const int y = view_->contentToWidgetY(entry.y + entry.height / 2);
    if (y < view_->axisHeight() || y >= view_->height()) continue;
    int painted = 0;
    for (int x = view_->timeAreaLeft() + 2; x < view_->timeAreaLeft() + view_->timeAreaWidth() - 2; ++x) {
      if (image.pixelColor(view_->mapTo(&window_, QPoint(x, y))) != background) ++painted;
    }
    EXPECT_GT(painted, view_->timeAreaWidth() / 4) << "rank " << entry.rank << " track " << entry.track;
  }
}


// One duration, one text: the Details tab (an event's duration) and the Run tab (the median
// step time) both write a 1 ms step as base/format.h does.
// A click in a side panel (Details, Run, Range) does not take the timeline's single-key
// shortcuts away: W still zooms, A still pans, F still fits; the search field keeps its typing.
TEST_F(WidgetsTest, SingleKeyShortcutsWorkAfterClickingAPanel) {
  view_->fitAll();
  view_->selectEvent(EventRef{0, 0, 0, 0});
  auto* browser = window_.detailsPanel()->findChild<QTextBrowser*>();
  ASSERT_NE(browser, nullptr);
  if (browser->isVisible()) QTest::mouseClick(browser->viewport(), Qt::LeftButton, {}, QPoint(20, 20));
  browser->setFocus();
  ASSERT_FALSE(view_->hasFocus());
  const int64_t whole = view_->view().duration_ns();
  QTest::keyClick(browser, Qt::Key_W);
  EXPECT_LT(view_->view().duration_ns(), whole) << "W after a click in Details";
  const int64_t zoomed_start = view_->view().start_ns();
  QTest::keyClick(browser, Qt::Key_A);
  EXPECT_LT(view_->view().start_ns(), zoomed_start) << "A after a click in Details";
  QTest::keyClick(window_.runPanel(), Qt::Key_F);
  EXPECT_EQ(view_->view().duration_ns(), whole) << "F in the Run tab";
  // Typing in the search field stays typing.
  window_.searchBar()->lineEdit()->setFocus();
  QTest::keyClicks(window_.searchBar()->lineEdit(), QStringLiteral("wasd"));
  EXPECT_EQ(window_.searchBar()->lineEdit()->text(), QStringLiteral("wasd"));
  EXPECT_EQ(view_->view().duration_ns(), whole);
}

// Cancel stops a load in flight: no run is added, no error is reported, the status bar says
// so; while it loads with nothing shown, the timeline says what is loading.
// What an 800x500 window shows: the window is that wide, the search bar's parts and the
// status bar's texts sit side by side, the Range tab's table fits without scrolling, the
// legend wraps onto lines it has room for, and the time axis still labels ticks.
TEST_F(WidgetsTest, AnEightHundredByFiveHundredWindowOverlapsAndCutsNothing) {
  window_.resize(800, 500);
  QApplication::processEvents();
  EXPECT_EQ(window_.width(), 800);
  EXPECT_LE(window_.minimumSizeHint().width(), 800);

  auto expect_side_by_side = [](const QWidget* parent, const char* what) {
    std::vector<QRect> shown;
    for (const QWidget* child : parent->findChildren<QWidget*>(QString(), Qt::FindDirectChildrenOnly)) {
      if (child->isVisible() && child->width() > 0) shown.push_back(child->geometry());
    }
    ASSERT_GE(shown.size(), 2u) << what;
    for (size_t a = 0; a < shown.size(); ++a) {
      for (size_t b = a + 1; b < shown.size(); ++b) {
        EXPECT_FALSE(shown[a].intersects(shown[b]))
            << what << ": " << shown[a].x() << "+" << shown[a].width() << " and " << shown[b].x() << "+" << shown[b].width();
      }
    }
  };
  SearchBar* search = window_.searchBar();
  auto* field = search->findChild<QLineEdit*>();
  ASSERT_NE(field, nullptr);
  // The status is as wide as its text, a 10M-event count included; an error is short beside
  // the field (whole in errorText and the tooltips). The window stays 800 wide throughout.
  auto settle = [] {
    for (int i = 0; i < 5; ++i) QApplication::processEvents();  // nested layouts relayout in turn
  };
  field->setText(QStringLiteral("forward|backward|allreduce"));
  search->search();
  settle();
  EXPECT_EQ(search->statusText(), QStringLiteral("24 matches"));
  expect_side_by_side(search, "search bar with a count");
  field->setText(QStringLiteral("(unclosed"));
  search->search();
  settle();
  EXPECT_EQ(search->statusText(), QStringLiteral("invalid regex"));
  EXPECT_TRUE(search->errorText().startsWith(QStringLiteral("invalid regex: "))) << search->errorText().toStdString();
  expect_side_by_side(search, "search bar with an error");
  auto* status_label = search->findChild<QLabel*>();
  ASSERT_NE(status_label, nullptr);
  status_label->setText(QStringLiteral("9,999,999 of 9,999,999"));
  status_label->setFixedWidth(status_label->fontMetrics().horizontalAdvance(status_label->text()) + 6);
  settle();
  expect_side_by_side(search, "search bar with a 10M-event count");
  EXPECT_EQ(window_.width(), 800);

  QLabel* status = nullptr;
  for (QLabel* label : window_.statusBar()->findChildren<QLabel*>()) {
    if (label->text() == window_.statusText()) status = label;
  }
  ASSERT_NE(status, nullptr);
  for (const QLabel* label : window_.statusBar()->findChildren<QLabel*>()) {
    if (label != status && label->isVisible()) {
      EXPECT_FALSE(label->geometry().intersects(status->geometry()));
    }
  }

  const TimelineModel& model = *view_->model();
  view_->setSelectedRange(model.start_ns(), model.start_ns() + 2'000'000);
  window_.rangeStatsPanel()->waitForIdle();
  auto* tabs = window_.findChild<QTabWidget*>();
  ASSERT_NE(tabs, nullptr);
  tabs->setCurrentWidget(window_.rangeStatsPanel());
  auto* splitter = window_.findChild<QSplitter*>();
  ASSERT_NE(splitter, nullptr);
  splitter->setSizes({10'000, 1});  // the side panel at its narrowest
  settle();
  EXPECT_EQ(tabs->width(), tabs->minimumWidth());
  const QTableWidget* devices = nullptr;
  for (const QTableWidget* table : window_.rangeStatsPanel()->findChildren<QTableWidget*>()) {
    if (table->columnCount() == 6) devices = table;
  }
  ASSERT_NE(devices, nullptr);
  ASSERT_EQ(devices->rowCount(), 2);
  EXPECT_EQ(devices->horizontalScrollBar()->maximum(), 0) << "the device table scrolls sideways";
  tabs->setCurrentWidget(window_.runPanel());
  settle();
  const auto* run_scroll = window_.runPanel()->findChild<QScrollArea*>();
  ASSERT_NE(run_scroll, nullptr);
  EXPECT_EQ(run_scroll->horizontalScrollBar()->maximum(), 0) << "the Run tab scrolls sideways";
  tabs->setCurrentWidget(window_.rangeStatsPanel());
  settle();
  const QFontMetrics cell_metrics(devices->font());
  for (int r = 0; r < devices->rowCount(); ++r) {
    for (int c = 0; c < devices->columnCount(); ++c) {
      for (const QString& text_line : devices->item(r, c)->text().split(QLatin1Char('\n'))) {
        EXPECT_LE(cell_metrics.horizontalAdvance(text_line) + 6, devices->columnWidth(c))
            << "cut: " << text_line.toStdString();
      }
    }
  }
  EXPECT_EQ(devices->item(0, 1)->text(), QStringLiteral("1.60 ms\n80.0%"));

  const auto* legend = dynamic_cast<const LegendStrip*>(window_.findChild<QWidget*>(QStringLiteral("legend")));
  ASSERT_NE(legend, nullptr);
  const int line = legend->minimumSizeHint().height();
  EXPECT_GT(legend->heightForWidth(legend->width()), line) << "the legend does not fit one line at this width";
  EXPECT_GE(legend->height(), legend->heightForWidth(legend->width()));
  EXPECT_EQ(legend->heightForWidth(legend->sizeHint().width()), line);

  // 4 ms in a narrow time area: ticks every 1 or 2 ms, not one label for the whole view.
  QImage axis = view_->grab(QRect(TimelineView::kMinLabelColumnPx, 0, view_->width(), 20)).toImage();
  EXPECT_GE(view_->view().width_px(), 100);
  int dark_columns = 0;
  for (int x = 0; x < axis.width(); ++x) {
    for (int y = 0; y < axis.height(); ++y) {
      if (qGray(axis.pixel(x, y)) < 100) {
        ++dark_columns;
        break;
      }
    }
  }
  EXPECT_GT(dark_columns, 20) << "too little axis text for two or more tick labels";
}

// A message raised while the window is not shown yet (a run's warnings when it is opened
// from the command line) is part of the one status text, not QStatusBar's temporary
// message, which would be drawn over that text.
TEST(StatusTest, AWarningBeforeTheWindowIsShownIsPartOfTheOneStatusText) {
  rankscope::testing::TempDir dir;
  WriteRun(dir.path());
  std::filesystem::remove(dir.path() / trace::RankFileName(1));
  MainWindow window;
  window.setShowErrorDialogs(false);
  window.setRecordRecentFiles(false);
  ASSERT_TRUE(window.openRunBlocking(QString::fromStdString(dir.path().string())));
  ASSERT_TRUE(window.waitUntilIdle());
  ASSERT_FALSE(window.currentModel()->warnings().empty());
  window.resize(1200, 700);
  window.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&window));
  const QString warning = QString::fromStdString(window.currentModel()->warnings().front());
  EXPECT_TRUE(window.statusText().contains(warning)) << window.statusText().toStdString();
  EXPECT_TRUE(window.statusText().contains(QStringLiteral("1 rank(s)"))) << window.statusText().toStdString();
  EXPECT_TRUE(window.statusBar()->currentMessage().isEmpty());
}

TEST(LoadingTest, CancelStopsALoadAndReportsNoError) {
  rankscope::testing::TempDir dir;
  WriteRun(dir.path());
  MainWindow window;
  window.setShowErrorDialogs(false);
  window.setRecordRecentFiles(false);
  window.resize(1200, 700);
  window.show();
  QString failure;
  QObject::connect(&window, &MainWindow::loadFailed, [&](const QString& message) { failure = message; });
  window.openRun(QString::fromStdString(dir.path().string()));
  auto* cancel = window.findChild<QToolButton*>(QStringLiteral("cancelLoading"));
  ASSERT_NE(cancel, nullptr);
  EXPECT_TRUE(cancel->isVisible());
  cancel->click();
  ASSERT_TRUE(window.waitUntilIdle());
  EXPECT_EQ(window.runCount(), 0);
  EXPECT_TRUE(failure.isEmpty()) << failure.toStdString();
  EXPECT_FALSE(cancel->isVisible());
  EXPECT_TRUE(window.statusText().contains(QStringLiteral("cancelled"))) << window.statusText().toStdString();
  // Opened again, it loads.
  window.openRun(QString::fromStdString(dir.path().string()));
  ASSERT_TRUE(window.waitUntilIdle());
  EXPECT_EQ(window.runCount(), 1);
}

// Dragging on the overview selects the window the timeline shows; a click centers.
TEST_F(WidgetsTest, DraggingOnTheOverviewSelectsTheWindow) {
  OverviewStrip* overview = window_.overviewStrip();
  view_->fitAll();
  const int y = overview->height() / 2;
  const int a = overview->width() / 2, b = overview->width() * 3 / 4;
  QTest::mousePress(overview, Qt::LeftButton, {}, QPoint(a, y));
  QTest::mouseMove(overview, QPoint(b, y));
  QTest::mouseRelease(overview, Qt::LeftButton, {}, QPoint(b, y));
  const int64_t whole = view_->model()->end_ns() - view_->model()->start_ns();
  EXPECT_LT(view_->view().duration_ns(), whole / 2);
  EXPECT_GT(view_->view().duration_ns(), whole / 8);
  EXPECT_GT(view_->view().start_ns(), view_->model()->start_ns());
  // A click keeps the span and centers it.
  const int64_t span = view_->view().duration_ns();
  QTest::mouseClick(overview, Qt::LeftButton, {}, QPoint(overview->width() - 40, y));
  EXPECT_EQ(view_->view().duration_ns(), span);
}

// A collapsed rank's header is a summary of it: its time area is drawn with the rank's
// activity, not left empty.
TEST_F(WidgetsTest, ACollapsedRanksHeaderSummarizesItsActivity) {
  view_->fitAll();
  // The header's middle line across the time area.
  auto header_line = [&] {
    const LayoutEntry* header = view_->layout().RankHeader(0);
    EXPECT_NE(header, nullptr);
    const QImage image = view_->grab().toImage();
    const int y = view_->contentToWidgetY(header->y + header->height / 2);
    std::vector<QRgb> line;
    for (int x = view_->timeAreaLeft() + 2; x < view_->timeAreaLeft() + view_->timeAreaWidth() - 2; ++x) {
      line.push_back(image.pixel(x, y));
    }
    return line;
  };
  // Expanded, the header's time area is its fill (and a few grid lines): its commonest color.
  const std::vector<QRgb> expanded = header_line();
  std::map<QRgb, int> counts;
  for (QRgb c : expanded) ++counts[c];
  const QRgb fill = std::max_element(counts.begin(), counts.end(), [](const auto& a, const auto& b) {
                      return a.second < b.second;
                    })->first;
  view_->setRankCollapsed(0, true);
  const std::vector<QRgb> collapsed = header_line();
  const auto painted = std::count_if(collapsed.begin(), collapsed.end(), [&](QRgb c) { return c != fill; });
  EXPECT_GT(painted, static_cast<long>(collapsed.size() / 4));
}

// A selected range's duration is written just under the axis, inside the range, on a light
// backing: the axis and its tick labels stay as they are (only tinted).
TEST_F(WidgetsTest, TheRangeLabelSitsUnderTheAxisNotOverItsTicks) {
  view_->fitAll();
  const int64_t start = view_->model()->start_ns(), span = view_->model()->end_ns() - start;
  view_->setSelectedRange(start + span / 4, start + span * 3 / 4);
  const QImage image = view_->grab().toImage();
  const int center = static_cast<int>((view_->timeToX(start + span / 4) + view_->timeToX(start + span * 3 / 4)) / 2);
  auto light = [](const QColor& c) { return c.red() > 235 && c.green() > 235 && c.blue() > 235; };
  // The label's backing under the axis, around the text's middle line.
  int backed = 0;
  for (int dx = -12; dx <= 12; ++dx) backed += light(image.pixelColor(center + dx, view_->axisHeight() + 3)) ? 1 : 0;
  EXPECT_GT(backed, 12);
  // The axis's top, where tick labels' ascenders are, is the tinted band, not a backing.
  int tinted = 0;
  for (int dx = -12; dx <= 12; ++dx) tinted += light(image.pixelColor(center + dx, 3)) ? 0 : 1;
  EXPECT_GT(tinted, 20);
}

// Opening a run that is already open shows it: it is not listed twice.
TEST_F(WidgetsTest, OpeningAnOpenRunAgainShowsItOnce) {
  ASSERT_EQ(window_.runCount(), 1);
  ASSERT_TRUE(window_.openRunBlocking(QString::fromStdString((dir_.path() / ".").string())));
  EXPECT_EQ(window_.runCount(), 1);
  EXPECT_EQ(window_.currentRun(), 0);
}

// The label column is as wide as the user drags its edge, within bounds; the view keeps its
// time range over the time area that is left.
TEST_F(WidgetsTest, TheLabelColumnResizesByDraggingItsEdge) {
  view_->fitAll();
  const int64_t start = view_->view().start_ns(), end = view_->view().end_ns();
  const int edge = view_->labelColumnWidth() - 1;
  const int y = view_->axisHeight() + 30;
  QTest::mousePress(view_, Qt::LeftButton, {}, QPoint(edge, y));
  QTest::mouseMove(view_, QPoint(edge + 100, y));
  QTest::mouseRelease(view_, Qt::LeftButton, {}, QPoint(edge + 100, y));
  EXPECT_EQ(view_->labelColumnWidth(), TimelineView::kDefaultLabelColumnPx + 100);
  EXPECT_EQ(view_->timeAreaLeft(), view_->labelColumnWidth());
  EXPECT_EQ(view_->view().start_ns(), start);
  EXPECT_EQ(view_->view().end_ns(), end);
  view_->setLabelColumnWidth(5);
  EXPECT_EQ(view_->labelColumnWidth(), TimelineView::kMinLabelColumnPx);
  view_->setLabelColumnWidth(100000);
  EXPECT_LE(view_->labelColumnWidth(), view_->width() / 2);
}

TEST_F(WidgetsTest, DetailsAndRunTabWriteTheSameDurationTheSameWay) {
  const TimelineModel& model = *view_->model();
  std::optional<EventRef> step;
  for (uint32_t t = 0; t < model.ranks()[0].tracks.size() && !step; ++t) {
    const EventRow& row = model.ranks()[0].tracks[t].rows[0];
    for (uint32_t i = 0; i < row.size(); ++i) {
      const EventRef ref{0, t, 0, i};
      if (model.Name(ref).starts_with("step ") && model.DisplayEnd(ref) - model.DisplayStart(ref) == kStepNs) {
        step = ref;
        break;
      }
    }
  }
  ASSERT_TRUE(step.has_value());
  view_->selectEvent(*step);
  const QString expected = QString::fromStdString(format::FormatDuration(static_cast<double>(kStepNs)));
  ASSERT_EQ(expected, QStringLiteral("1.00 ms"));
  const QString details = window_.detailsPanel()->text();
  const QString run = window_.runPanel()->summaryText();
  // "duration" and "step time" are each followed by their value in the panels' text.
  const qsizetype duration_at = details.indexOf(QStringLiteral("duration"));
  ASSERT_GE(duration_at, 0) << details.toStdString();
  EXPECT_EQ(details.mid(duration_at + 8).trimmed().section(QLatin1Char('\n'), 0, 0),
            expected + QStringLiteral(" (%L1 ns)").arg(kStepNs))
      << details.toStdString();
  // Start and end to the nanosecond, from the run's start and on the common clock.
  const int64_t start = model.DisplayStart(*step);
  EXPECT_TRUE(details.contains(QString::fromStdString(format::FormatExactSeconds(start - model.start_ns())) +
                               " from the run's start"))
      << details.toStdString();
  EXPECT_TRUE(details.contains(QString::fromStdString(format::FormatExactSeconds(start + kStepNs)) +
                               " on the common clock"))
      << details.toStdString();
  const qsizetype step_time_at = run.indexOf(QStringLiteral("step time"));
  ASSERT_GE(step_time_at, 0) << run.toStdString();
  EXPECT_TRUE(run.mid(step_time_at + 9).trimmed().startsWith(expected + QStringLiteral(" (median")))
      << run.toStdString();
}

// Weak scaling over 1, 2 and 4 ranks, projected to 8 and 16 (as in report's chart tests).
compare::ScalingTable WeakScalingTable() {
  compare::ScalingTable table;
  table.mode = compare::ScalingMode::kWeak;
  table.mode_reason = "every run has a per-rank batch of 16";
  const double efficiency[] = {1.0, 0.91, 0.83};
  const double throughput[] = {1000, 1820, 3320};
  for (int i = 0; i < 3; ++i) {
    compare::ScalingPoint point;
    point.world_size = 1 << i;
    point.run = "runs/ws" + std::to_string(point.world_size);
    point.global_batch = 16 * point.world_size;
    point.efficiency = efficiency[i];
    point.throughput = throughput[i];
    point.ideal_throughput = 1000.0 * point.world_size;
    point.step_time_ns = 16e9 * point.world_size / throughput[i];
    table.points.push_back(point);
  }
  compare::ScalingProjection projection;
  projection.points = {{8, 86.5e6, 0.74, 5920.0}, {16, 103.2e6, 0.62, 9920.0}};
  table.projection = projection;
  return table;
}

struct PixelCounts {
  int non_white = 0;
  int measured = 0;   // the measured series' blue, #4e79a7
  int projected = 0;  // the projection's orange, #f28e2b
};

PixelCounts CountPixels(const QImage& image, const QRect& area) {
  PixelCounts counts;
  auto near = [](const QColor& color, int red, int green, int blue) {
    return std::abs(color.red() - red) <= 8 && std::abs(color.green() - green) <= 8 && std::abs(color.blue() - blue) <= 8;
  };
  for (int y = area.top(); y <= area.bottom(); ++y) {
    for (int x = area.left(); x <= area.right(); ++x) {
      const QColor color = image.pixelColor(x, y);
      if (color != QColor(Qt::white)) ++counts.non_white;
      if (near(color, 0x4e, 0x79, 0xa7)) ++counts.measured;
      if (near(color, 0xf2, 0x8e, 0x2b)) ++counts.projected;
    }
  }
  return counts;
}

// Files this process writes may grow to `bytes` at most while it lives; a write past that
// fails (EFBIG) instead of raising SIGXFSZ.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    previous_handler_ = std::signal(SIGXFSZ, SIG_IGN);
    EXPECT_EQ(::getrlimit(RLIMIT_FSIZE, &saved_), 0);
    rlimit lowered = saved_;
    lowered.rlim_cur = bytes;
    EXPECT_EQ(::setrlimit(RLIMIT_FSIZE, &lowered), 0) << std::strerror(errno);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &saved_);
    std::signal(SIGXFSZ, previous_handler_);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  rlimit saved_{};
  void (*previous_handler_)(int) = SIG_DFL;
};

std::string ReadBytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

// A screenshot that cannot be written whole (here: files may not pass 4 KiB, as on a full
// disk) fails with one line and leaves the earlier picture as it was, with no truncated PNG
// or temporary file beside it; written, it replaces the picture whole.
TEST(ScreenshotTest, AFailedWriteLeavesTheEarlierPictureWhole) {
  rankscope::testing::TempDir run;
  WriteRun(run.path());
  rankscope::testing::TempDir out;
  const std::filesystem::path png = out / "timeline.png";
  { std::ofstream(png, std::ios::binary) << "the earlier picture"; }
  ScreenshotRequest request;
  request.runs = {QString::fromStdString(run.path().string())};
  request.output = QString::fromStdString(png.string());
  Status status;
  {
    FileSizeLimit limit(4096);
    status = RenderScreenshot(request);
  }
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("cannot write " + png.string()), std::string::npos) << status.message();
  EXPECT_EQ(status.message().find('\n'), std::string::npos) << status.message();
  EXPECT_TRUE(ReadBytes(png) == "the earlier picture") << "the earlier picture was overwritten";
  size_t files = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(out.path())) ++files;
  EXPECT_EQ(files, 1u) << "no temporary left beside it";

  const Status written = RenderScreenshot(request);
  ASSERT_TRUE(written.ok()) << written.message();
  QImage image;
  ASSERT_TRUE(image.load(request.output, "PNG"));
  EXPECT_EQ(image.size(), request.size);
}

TEST(ScalingPanelTest, ShowsTheReportsChartAtAnySize) {
  const compare::ScalingTable table = WeakScalingTable();
  ScalingPanel panel;
  panel.resize(1100, 900);
  panel.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&panel));
  panel.setTable(table);
  ASSERT_TRUE(panel.hasTable());
  SvgChartView* chart = panel.chartView();
  ASSERT_TRUE(chart->isVisible());
  // The very chart the reports draw, byte for byte, and Qt reads it.
  EXPECT_EQ(chart->svg(), QByteArray::fromStdString(report::ScalingPlotSvg(table)));
  ASSERT_TRUE(chart->hasPicture());
  EXPECT_EQ(chart->pictureSize(), QSizeF(report::kScalingPlotWidth, report::kScalingPlotHeight));

  for (const QSize size : {QSize(1100, 900), QSize(620, 700), QSize(1600, 1000)}) {
    panel.resize(size);
    QApplication::processEvents();
    const QRectF where = chart->pictureRect(chart->size());
    // Scaled to the widget, the picture's shape kept: as wide as the widget or as tall.
    EXPECT_TRUE(std::abs(where.width() - chart->width()) < 1 || std::abs(where.height() - chart->height()) < 1)
        << where.width() << "x" << where.height() << " in " << chart->width() << "x" << chart->height();
    EXPECT_NEAR(where.width() / where.height(), 960.0 / 400.0, 0.01);
    const QImage image = chart->grab().toImage();
    ASSERT_FALSE(image.isNull());
    const double scale = where.width() / report::kScalingPlotWidth;
    // Both panels (efficiency left, throughput right) have the measured line and markers,
    // and the projection, drawn in their plot areas.
    for (const double panel_left : {0.0, report::kScalingPlotWidth / 2.0}) {
      const QRect plot = QRectF(where.left() + (panel_left + 66) * scale, where.top() + 64 * scale, (480 - 88) * scale,
                                (312 - 64) * scale)
                             .toRect();
      const PixelCounts counts = CountPixels(image, plot);
      EXPECT_GT(counts.non_white, 400 * scale * scale) << size.width() << "x" << size.height() << " at " << panel_left;
      EXPECT_GT(counts.measured, 40 * scale * scale) << size.width() << "x" << size.height() << " at " << panel_left;
      EXPECT_GT(counts.projected, 20 * scale * scale) << size.width() << "x" << size.height() << " at " << panel_left;
    }
  }
}

TEST(ScalingPanelTest, TableListsEveryRunAndTheProjection) {
  ScalingPanel panel;
  panel.setTable(WeakScalingTable());
  const QTableWidget* points = panel.pointsTable();
  ASSERT_EQ(points->rowCount(), 5);
  const QStringList world_sizes = {"1", "2", "4", "8", "16"};
  const QStringList efficiencies = {"100.0%", "91.0%", "83.0%", "74.0%", "62.0%"};
  const QStringList runs = {"runs/ws1", "runs/ws2", "runs/ws4", "projected (model fit)", "projected (model fit)"};
  for (int row = 0; row < 5; ++row) {
    EXPECT_EQ(points->item(row, 0)->text(), world_sizes[row]) << row;
    EXPECT_EQ(points->item(row, 3)->text(), efficiencies[row]) << row;
    EXPECT_EQ(points->item(row, 4)->text(), runs[row]) << row;
  }
  EXPECT_EQ(points->item(1, 2)->text(), QStringLiteral("1820.0"));
}

// The search has no cap: on a model with 150,000 matches among 300,000 events the count is
// exact, stepping back from the start reaches the very last match ("150,000 of 150,000"),
// and forward from it wraps to the first. The timeline outlines matches in its time area
// only: the lane labels stay clear however dense they are.
TEST(SearchBarTest, CountsAndReachesEveryOneOfManyMatches) {
  constexpr int kEvents = 300'000;
  testing::RankBuilder rank(0, "host");
  const uint32_t track = rank.AddTrack(trace::LaneKind::kGpuStream, 0, "GPU 0 · stream 7");
  std::vector<testing::NamedEvent> events;
  events.reserve(kEvents);
  for (int i = 0; i < kEvents; ++i) {
    events.push_back({i * 100, i * 100 + 60, i % 2 == 0 ? "ncclAllReduce" : "fmha_fwd", EventClass::kCompute,
                      EventSource::kKernel, 0});
  }
  rank.AddRow(track, events);
  const TimelineModel model("many", {rank.Build()});
  SearchBar bar;
  bar.setModel(&model);
  bar.lineEdit()->setText(QStringLiteral("allreduce"));
  bar.search();
  EXPECT_EQ(bar.matches()->size(), static_cast<size_t>(kEvents / 2));
  EXPECT_EQ(bar.statusText(), QStringLiteral("%L1 matches").arg(kEvents / 2));
  const auto last = bar.step(model.start_ns(), /*forward=*/false);  // before the first: wraps to the last
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(model.DisplayStart(*last), (kEvents - 2) * 100);
  EXPECT_EQ(bar.statusText(), QStringLiteral("%L1 of %L1").arg(kEvents / 2));
  const auto first = bar.stepFrom(*last, /*forward=*/true);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(model.DisplayStart(*first), 0);
  EXPECT_EQ(bar.statusText(), QStringLiteral("1 of %L1").arg(kEvents / 2));
  const auto second = bar.stepFrom(*first, /*forward=*/true);
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(model.DisplayStart(*second), 200);

  // Zoomed out over all of them: outlines inside the time area, none over the labels.
  TimelineView view;
  view.resize(900, 300);
  view.setModel(&model);
  view.setSearchMatches(bar.matches());
  view.fitAll();
  const QImage with = view.grab().toImage();
  view.setSearchMatches(nullptr);
  const QImage without = view.grab().toImage();
  int changed_in_labels = 0, changed_in_time = 0;
  for (int y = view.axisHeight(); y < with.height(); ++y) {
    for (int x = 0; x < with.width(); ++x) {
      if (with.pixel(x, y) == without.pixel(x, y)) continue;
      (x < view.timeAreaLeft() - 1 ? changed_in_labels : changed_in_time)++;
    }
  }
  EXPECT_EQ(changed_in_labels, 0);
  EXPECT_GT(changed_in_time, 0);
}

// Compute kernels are colored by name by default: the same name has the same color on every
// rank (a stable hash of its text, not its id), within the compute family; View > Color by
// Name off paints every kernel in the compute class's one color.
TEST(TimelineColorsTest, KernelsAreColoredByNameStablyAndByClassOnRequest) {
  auto make_rank = [](int number, const std::vector<std::string>& names) {
    testing::RankBuilder rank(number, "host");
    const uint32_t track = rank.AddTrack(trace::LaneKind::kGpuStream, 0, "GPU 0 · stream 7");
    std::vector<testing::NamedEvent> events;
    for (size_t i = 0; i < names.size(); ++i) {
      events.push_back({static_cast<int64_t>(i) * 1000, static_cast<int64_t>(i) * 1000 + 900, names[i],
                        EventClass::kCompute, EventSource::kKernel, 0});
    }
    rank.AddRow(track, events);
    return rank.Build();
  };
  // The names in another order on rank 1: their string ids differ, their colors must not.
  const TimelineModel model("colors", {make_rank(0, {"gemm_a", "softmax_b"}), make_rank(1, {"softmax_b", "gemm_a"})});
  TimelineView view;
  view.resize(900, 300);
  view.setModel(&model);
  view.fitAll();
  auto pixel_of = [&](const QImage& image, uint32_t rank, uint32_t index) {
    const LayoutEntry* entry = view.layout().RowEntry(rank, 0, 0);
    EXPECT_NE(entry, nullptr);
    const EventRef ref{rank, 0, 0, index};
    const int x = static_cast<int>((view.timeToX(model.DisplayStart(ref)) + view.timeToX(model.DisplayEnd(ref))) / 2);
    return image.pixelColor(x, view.contentToWidgetY(entry->y + entry->height / 2));
  };
  const QImage by_name = view.grab().toImage();
  const QColor gemm = SlotColor(ColorSlot(EventClass::kCompute, NameColorHash("gemm_a"), true));
  const QColor softmax = SlotColor(ColorSlot(EventClass::kCompute, NameColorHash("softmax_b"), true));
  EXPECT_EQ(pixel_of(by_name, 0, 0), gemm);
  EXPECT_EQ(pixel_of(by_name, 1, 1), gemm);
  EXPECT_EQ(pixel_of(by_name, 0, 1), softmax);
  EXPECT_EQ(pixel_of(by_name, 1, 0), softmax);
  EXPECT_EQ(NameColorHash("gemm_a"), NameColorHash(std::string("gemm_") + "a")) << "a hash of the text";
  // Every by-name color of compute is none of the other classes' colors.
  for (int k = 0; k < kComputeNameColors; ++k) {
    const QColor c = SlotColor(analyzer::kEventClassCount + k);
    for (int other = 0; other < analyzer::kEventClassCount; ++other) {
      if (other != static_cast<int>(EventClass::kCompute)) {
        EXPECT_NE(c, EventClassColor(static_cast<EventClass>(other)));
      }
    }
  }
  view.setColorByName(false);
  const QImage by_class = view.grab().toImage();
  EXPECT_EQ(pixel_of(by_class, 0, 0), EventClassColor(EventClass::kCompute));
  EXPECT_EQ(pixel_of(by_class, 1, 0), EventClassColor(EventClass::kCompute));
}

// A step's critical path is outlined in orange over its work, dashed over its gaps, on the
// first row of each segment's track; nothing is drawn once it is cleared.
TEST(TimelinePathTest, MarksAreDrawnOverTheirTracksAndCleared) {
  testing::RankBuilder builder(0, "host");
  const uint32_t compute = builder.AddTrack(trace::LaneKind::kCpuThread, -1, "compute");
  const uint32_t comm = builder.AddTrack(trace::LaneKind::kCpuThread, -1, "comm");
  builder.AddRow(compute, {{0, 4000, "matmul", EventClass::kCompute, EventSource::kNvtxRange, 0}});
  builder.AddRow(comm, {{5000, 10000, "allreduce", EventClass::kComm, EventSource::kNvtxRange, 0}});
  const TimelineModel model("path", {builder.Build()});
  TimelineView view;
  view.resize(900, 300);
  view.setModel(&model);
  view.fitAll();
  const QColor orange(0xff, 0x8c, 0x00);
  auto orange_pixels = [&](uint32_t track, int64_t t0, int64_t t1) {
    const QImage image = view.grab().toImage();
    const LayoutEntry* entry = view.layout().RowEntry(0, track, 0);
    int count = 0;
    for (int y = view.contentToWidgetY(entry->y); y < view.contentToWidgetY(entry->y + entry->height); ++y) {
      for (int x = static_cast<int>(view.timeToX(t0)); x < static_cast<int>(view.timeToX(t1)); ++x) {
        count += image.pixelColor(x, y) == orange ? 1 : 0;
      }
    }
    return count;
  };
  EXPECT_EQ(orange_pixels(compute, 0, 4000), 0);
  view.setPathMarks({{0, compute, true, 0, 4000}, {0, comm, false, 4000, 5000}, {0, comm, true, 5000, 10000}});
  EXPECT_GT(orange_pixels(compute, 0, 4000), 20);      // the outline of matmul
  EXPECT_GT(orange_pixels(comm, 4000, 5000), 5);       // the dashed gap
  EXPECT_GT(orange_pixels(comm, 5000, 10000), 20);     // the outline of allreduce
  view.setPathMarks({});
  EXPECT_EQ(orange_pixels(comm, 5000, 10000), 0);
}

// A memory counter is a lane under its rank's tracks: a filled step area as high as the total
// (full height at the counter's peak, nothing before its first change), a label with the
// peak, and a tooltip with the total and each category at the pointer.
TEST(TimelineCounterTest, MemoryLaneDrawsTheTotalAndTellsItsCategories) {
  testing::RankBuilder builder(0, "host");
  const uint32_t track = builder.AddTrack(trace::LaneKind::kGpuStream, 0, "GPU 0 · stream 7");
  builder.AddRow(track, {{0, 10000, "gemm", EventClass::kCompute, EventSource::kKernel, 0}});
  RankTimeline rank = builder.Build();
  analyzer::MemorySeries series;
  series.source = "nvtx";
  series.categories = {"parameters", "activations"};
  series.samples = {{0, 5000, 3 << 20}, {1, 7500, 1 << 20}};  // 3 MiB from t=5000, 4 MiB from 7500
  rank.counters.push_back(MakeCounterTrack(series));
  const TimelineModel model("memory", {std::move(rank)});
  TimelineView view;
  view.resize(900, 300);
  view.setModel(&model);
  view.fitAll();
  const LayoutEntry* lane = nullptr;
  for (const LayoutEntry& entry : view.layout().entries()) {
    if (entry.kind == LayoutEntry::Kind::kCounter) lane = &entry;
  }
  ASSERT_NE(lane, nullptr);
  const QImage image = view.grab().toImage();
  const int top = view.contentToWidgetY(lane->y);
  auto x_at = [&](int64_t t) { return static_cast<int>(view.timeToX(t)); };
  // Near the lane's top: filled only where the peak (4 MiB) is held.
  const QColor early = image.pixelColor(x_at(2500), top + 3);
  const QColor peak = image.pixelColor(x_at(9000), top + 3);
  EXPECT_NE(early, peak);
  // Near its bottom: filled wherever anything is held (3 MiB at t=6000), not before.
  const int bottom = top + lane->height - 3;
  EXPECT_EQ(image.pixelColor(x_at(6000), bottom), peak);
  EXPECT_EQ(image.pixelColor(x_at(2500), bottom), early);

  const QString label = view.toolTipAt(QPoint(20, top + lane->height / 2));
  EXPECT_TRUE(label.contains(QStringLiteral("memory · nvtx"))) << label.toStdString();
  EXPECT_TRUE(label.contains(QStringLiteral("peak 4.00 MiB"))) << label.toStdString();
  const QString at = view.toolTipAt(QPoint(x_at(6000), top + lane->height / 2));
  EXPECT_TRUE(at.contains(QStringLiteral("3.00 MiB"))) << at.toStdString();
  EXPECT_TRUE(at.contains(QStringLiteral("parameters: 3.00 MiB"))) << at.toStdString();
  EXPECT_FALSE(at.contains(QStringLiteral("activations"))) << at.toStdString();  // nothing held yet
  EXPECT_FALSE(view.eventAt(QPoint(x_at(6000), top + lane->height / 2)).has_value());
}

// The Run tab names the strategy and each memory source's peak, as the text report does.
TEST(RunPanelTest, SummaryNamesTheStrategyAndTheMemoryPeaks) {
  auto report = std::make_shared<analyzer::Report>();
  report->parallelism.strategy = "fsdp";
  report->parallelism.strategy_source = "workload mark";
  analyzer::RankMemory memory;
  memory.source = "cuda";
  memory.peak_bytes = 3 << 20;
  memory.at_peak = {{"device (gpu 0)", 3 << 20}};
  report->memory.push_back(memory);
  RunPanel panel;
  panel.setReport(report);
  const QString summary = panel.summaryText();
  EXPECT_TRUE(summary.contains(QStringLiteral("parallelism"))) << summary.toStdString();
  EXPECT_TRUE(summary.contains(QStringLiteral("fsdp (from the workload mark)"))) << summary.toStdString();
  EXPECT_TRUE(summary.contains(QStringLiteral("memory · cuda"))) << summary.toStdString();
  EXPECT_TRUE(summary.contains(QStringLiteral("peak 3.00 MiB on rank 0"))) << summary.toStdString();
}

TEST(ScalingPanelTest, FewerThanTwoRunsShowWhyInsteadOfAChart) {
  ScalingPanel panel;
  panel.setTable(WeakScalingTable());
  panel.setReports({});
  EXPECT_FALSE(panel.hasTable());
  EXPECT_TRUE(panel.errorText().contains(QStringLiteral("two or more"))) << panel.errorText().toStdString();
  EXPECT_FALSE(panel.chartView()->isVisibleTo(&panel));
  EXPECT_FALSE(panel.chartView()->hasPicture());
}

// A GPU run: a launch call on the host thread and the kernel it launched, tied by their
// correlation id.
TEST(WidgetsGpuTest, SelectingAKernelLinksItsLaunchCallWithAFlow) {
  rankscope::testing::TempDir dir;
  TraceBuilder b(0, 1);
  const trace::LaneId thread = b.CpuThread("main");
  const trace::LaneId stream = b.GpuStream(0);
  b.Kernel(stream, "gemm_kernel", 2'000'000, 3'000'000);
  b.Kernel(stream, "relu_kernel", 3'100'000, 3'200'000);
  trace::RankTrace t = b.Build();
  t.events.kernels[0].correlation_id = 41;
  t.events.kernels[1].correlation_id = 42;
  for (auto [start, correlation] : {std::pair<int64_t, uint64_t>{1'000'000, 41}, {1'100'000, 42}}) {
    trace::ApiCallEvent call;
    call.lane = thread;
    call.name = b.Str("cudaLaunchKernel");
    call.start_ns = start;
    call.end_ns = start + 50'000;
    call.correlation_id = correlation;
    call.domain = trace::ApiDomain::kRuntime;
    t.events.api_calls.push_back(call);
  }
  t.strings = b.Build().strings;
  rankscope::testing::WriteRankTraceFile(t, dir / trace::RankFileName(0));

  MainWindow window;
  window.setShowErrorDialogs(false);
  window.setRecordRecentFiles(false);
  window.resize(1400, 800);
  window.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&window));
  ASSERT_TRUE(window.openRunBlocking(QString::fromStdString(dir.path().string())));
  ASSERT_TRUE(window.waitUntilIdle());
  TimelineView* view = window.timelineView();
  const TimelineModel& model = *view->model();
  std::optional<EventRef> kernel, launch;
  for (uint32_t k = 0; k < model.ranks()[0].tracks.size(); ++k) {
    const EventRow& row = model.ranks()[0].tracks[k].rows[0];
    for (uint32_t i = 0; i < row.size(); ++i) {
      const EventRef ref{0, k, 0, i};
      if (model.Name(ref) == "gemm_kernel") kernel = ref;
      if (model.Name(ref) == "cudaLaunchKernel" && model.DisplayStart(ref) == 1'000'000) launch = ref;
    }
  }
  ASSERT_TRUE(kernel && launch);
  view->selectEvent(*kernel);
  ASSERT_TRUE(view->flowPeer().has_value());
  EXPECT_EQ(*view->flowPeer(), *launch);  // the arrow runs from the call with id 41
  ASSERT_TRUE(window.detailsPanel()->linkedEvent().has_value());
  EXPECT_EQ(*window.detailsPanel()->linkedEvent(), *launch);
  EXPECT_TRUE(window.detailsPanel()->text().contains("gemm_kernel"));
  // The relation is labelled: the latency from the call's start to the kernel's start.
  const QString latency =
      QString::fromStdString(format::FormatDuration(static_cast<double>(model.DisplayStart(*kernel) - 1'000'000)));
  EXPECT_TRUE(window.detailsPanel()->text().contains(latency + QStringLiteral(" (the call's start → this one's start)")))
      << window.detailsPanel()->text().toStdString();
  // And back: the call's peer is the kernel it launched.
  view->selectEvent(*launch);
  ASSERT_TRUE(view->flowPeer().has_value());
  EXPECT_EQ(*view->flowPeer(), *kernel);
  EXPECT_TRUE(window.detailsPanel()->text().contains(latency + QStringLiteral(" (this call's start → the work's start)")))
      << window.detailsPanel()->text().toStdString();
}

// ---- A run that did not finish ----------------------------------------------------------

using testing::EndRunAt;

// Two ranks stopped by SIGTERM at 9.5 s: rank 0 waits in AllReduce #5 (entered at 3 s) inside
// an open "step", rank 1 never entered it and is inside "step" › "load".
void WriteHungRun(const std::filesystem::path& dir, bool kernels) {
  for (int rank = 0; rank < 2; ++rank) {
    trace::InFlightState state;
    state.as_of_ns = EndRunAt(9.5);
    for (uint64_t sequence = 4; sequence <= 5; ++sequence) {
      trace::FlightCollective c;
      c.comm_hash = testing::kEndRunComm;
      c.sequence = sequence;
      c.op = trace::CollectiveOp::kAllReduce;
      c.name = "AllReduce";
      c.bytes = 8 << 20;
      c.comm_rank = rank;
      c.comm_size = 2;
      c.start_ns = EndRunAt(sequence == 4 ? 2.5 : 3.0);
      if (sequence == 4) c.end_ns = EndRunAt(2.6);
      if (sequence == 5 && rank == 1) continue;
      state.collectives.push_back(c);
      state.completed_collectives += sequence == 4 ? 1 : 0;
    }
    auto open = [&](uint32_t depth, double start_s, std::string name) {
      trace::OpenRange range;
      range.lane = 1;  // main
      range.depth = depth;
      range.start_ns = EndRunAt(start_s);
      range.name = std::move(name);
      state.open_ranges.push_back(std::move(range));
    };
    open(0, 2.0, "step");
    if (rank == 1) open(1, 2.7, "load");
    testing::WriteEndedRankFile(dir, {.rank = rank, .ended_by = "signal 15", .state = state, .kernel = kernels});
  }
}

class HungRunTest : public ::testing::Test {
 protected:
  void Open(bool kernels) {
    WriteHungRun(dir_.path(), kernels);
    window_.setShowErrorDialogs(false);
    window_.setRecordRecentFiles(false);
    window_.resize(1400, 800);
    window_.show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(&window_));
    ASSERT_TRUE(window_.openRunBlocking(QString::fromStdString(dir_.path().string())));
    ASSERT_TRUE(window_.waitUntilIdle());
  }

  rankscope::testing::TempDir dir_;
  MainWindow window_;
};

TEST_F(HungRunTest, TheRunTabLeadsWithTheDiagnosisAndItsCulpritsLinkToTheirRanks) {
  Open(/*kernels=*/true);
  const analyzer::Report* report = window_.currentReport();
  ASSERT_NE(report, nullptr);
  ASSERT_TRUE(report->did_not_finish.has_value());
  EXPECT_EQ(report->did_not_finish->verdict, analyzer::RunEndVerdict::kHang);
  RunPanel* panel = window_.runPanel();
  EXPECT_TRUE(panel->diagnosis() != nullptr);
  auto* label = panel->findChild<QLabel*>(QStringLiteral("runEndDiagnosis"));
  ASSERT_NE(label, nullptr);
  EXPECT_TRUE(label->isVisible());
  const QString text = panel->diagnosisText();
  EXPECT_TRUE(text.startsWith(QStringLiteral("Did not finish: hang"))) << text.toStdString();
  EXPECT_TRUE(text.contains(QString::fromStdString(report->did_not_finish->summary))) << text.toStdString();
  EXPECT_TRUE(text.contains(QStringLiteral("Rank 1 never entered AllReduce #5"))) << text.toStdString();
  EXPECT_TRUE(label->text().contains(QStringLiteral("<a href='rank:1'>rank 1</a>")));
  EXPECT_TRUE(window_.statusText().contains(QStringLiteral("did not finish: hang")));
  EXPECT_EQ(window_.timelineView()->culprits(), std::vector<int>{1});

  // The culprit's link shows its rank: collapsed, it opens again.
  window_.timelineView()->setRankCollapsed(1, true);
  QSignalSpy clicked(panel, &RunPanel::rankClicked);
  emit label->linkActivated(QStringLiteral("rank:1"));
  ASSERT_EQ(clicked.count(), 1);
  EXPECT_EQ(clicked.front().front().toInt(), 1);
  EXPECT_FALSE(window_.timelineView()->isRankCollapsed(1));
}

TEST_F(HungRunTest, ClickingAnInFlightMarkFillsTheDetails) {
  Open(/*kernels=*/true);
  TimelineView* view = window_.timelineView();
  const TimelineModel& model = *view->model();
  const RankTimeline& rank0 = model.ranks()[0];
  const auto collective = std::find_if(rank0.end.marks.begin(), rank0.end.marks.end(),
                                       [](const EndMark& m) { return m.kind == EndMarkKind::kCollective; });
  ASSERT_NE(collective, rank0.end.marks.end());
  const EventRef ref{0, collective->track, collective->row, collective->index};
  view->fitAll();
  EXPECT_EQ(view->view().end_ns(), model.end_ns());
  EXPECT_EQ(model.end_ns(), EndRunAt(9.5) + rank0.clock_offset_ns);
  // Drawn: every rank's marks (rank 0: the collective and step, rank 1: step and load) and
  // both "state at" lines.
  window_.grab();
  EXPECT_EQ(view->frameStats().end_marks, 4u);
  EXPECT_EQ(view->frameStats().state_markers, 2u);

  const LayoutEntry* entry = view->layout().RowEntry(ref.rank, ref.track, ref.row);
  ASSERT_NE(entry, nullptr);
  const int64_t middle = (model.DisplayStart(ref) + model.DisplayEnd(ref)) / 2;
  const QPoint at(static_cast<int>(std::lround(view->timeToX(middle))),
                  view->contentToWidgetY(entry->y + entry->height / 2));
  QTest::mouseClick(view, Qt::LeftButton, Qt::NoModifier, at);
  ASSERT_TRUE(view->selectedEvent().has_value());
  EXPECT_EQ(*view->selectedEvent(), ref);
  EXPECT_EQ(window_.sidePanel()->currentWidget(), window_.detailsPanel());
  const QString details = window_.detailsPanel()->text();
  EXPECT_TRUE(details.contains(QStringLiteral("AllReduce #5 in flight (6.50 s)"))) << details.toStdString();
  EXPECT_TRUE(details.contains(QStringLiteral("3f2a11c09e4b7d21"))) << details.toStdString();
  EXPECT_TRUE(details.contains(QStringLiteral("in flight for\n6.50 s when the state was taken"))) << details.toStdString();
  EXPECT_TRUE(details.contains(QStringLiteral("ended by signal 15"))) << details.toStdString();
}

// Nothing measurable (no kernels): the analysis fails, the diagnosis still heads the Run tab.
TEST_F(HungRunTest, ARunThatHungBeforeAnythingMeasurableStillShowsItsDiagnosis) {
  Open(/*kernels=*/false);
  RunPanel* panel = window_.runPanel();
  EXPECT_EQ(window_.currentReport(), nullptr);
  EXPECT_FALSE(panel->errorText().isEmpty());
  EXPECT_TRUE(panel->diagnosis() != nullptr);
  EXPECT_TRUE(panel->diagnosisText().contains(QStringLiteral("Rank 1 never entered AllReduce #5")))
      << panel->diagnosisText().toStdString();
  EXPECT_EQ(window_.timelineView()->culprits(), std::vector<int>{1});
}

}  // namespace
}  // namespace rankscope::gui

int main(int argc, char** argv) {
  qputenv("QT_QPA_PLATFORM", qgetenv("QT_QPA_PLATFORM").isEmpty() ? QByteArray("offscreen") : qgetenv("QT_QPA_PLATFORM"));
  QApplication app(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
