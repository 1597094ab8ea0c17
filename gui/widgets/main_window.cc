#include "gui/widgets/main_window.h"

#include <QAbstractSpinBox>
#include <QAction>
#include <QApplication>
#include <QComboBox>
#include <QDeadlineTimer>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QFutureWatcher>
#include <QHBoxLayout>
#include <QKeyEvent>
#include <QKeySequence>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QProgressBar>
#include <QSettings>
#include <QSplitter>
#include <QStatusBar>
#include <QTabWidget>
#include <QTextEdit>
#include <QThread>
#include <QTimer>
#include <QToolButton>
#include <QUrl>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrentRun>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>

#include "analyzer/analyze.h"
#include "analyzer/hang.h"
#include "interop/interop.h"
#include "gui/widgets/details_panel.h"
#include "gui/widgets/event_colors.h"
#include "gui/widgets/overview_strip.h"
#include "gui/widgets/range_stats_panel.h"
#include "gui/widgets/run_panel.h"
#include "gui/widgets/scaling_panel.h"
#include "gui/widgets/search_bar.h"
#include "gui/widgets/timeline_view.h"
#include "gui/widgets/value_text.h"

namespace rankscope::gui {

// Progress of one background load, written by the worker, polled by the UI timer.
struct MainWindow::LoadProgress {
  QString path;
  std::atomic<int> done{0};
  std::atomic<int> total{0};
  std::atomic<bool> cancel{false};  // set by Cancel: the load stops at its next batch
};

// What a run was read from.
struct RunSource {
  std::filesystem::path run;  // a rankscope run: its directory or rank file
  // Other tools' traces, read straight into the model (interop::ViewInputs) and analyzed in
  // the same pass; the input opened is the model's source().
  bool foreign = false;
  std::vector<std::string> notes;  // the reading's: what was left out, how ranks were chosen
};

struct RunAnalysis {
  std::shared_ptr<const analyzer::Report> report;
  QString error;
  // When the analysis failed: why the run did not finish, if it did not (a run that hung
  // before anything measurable).
  std::optional<analyzer::HangReport> diagnosis;
};

// What a load produces on its worker thread.
struct LoadedRun {
  // What the path resolved to: the run itself, or another tool's traces imported into a
  std::shared_ptr<const RunSource> source;
  std::optional<RunAnalysis> analysis;  // read in the same pass (other tools' traces)
  std::shared_ptr<TimelineModel> model;
  OverviewData overview;
  QString error;
  double seconds = 0;
};

struct MainWindow::Run {
  uint64_t id = 0;
  QString path;
  std::shared_ptr<const RunSource> source;
  std::optional<RunAnalysis> ready_analysis;  // read with the model, applied once shown
  // Another tool's trace: its events' fields, through one import on first use.
  std::unique_ptr<ImportedDetails> imported_details;
  std::shared_ptr<TimelineModel> model;
  OverviewData overview;
  double load_seconds = 0;
  std::shared_ptr<const analyzer::Report> report;
  QString analysis_error;
  std::optional<analyzer::HangReport> failed_diagnosis;  // with analysis_error
  bool analyzing = false;
  // The view when another run was shown, restored when this one comes back.
  std::optional<std::pair<int64_t, int64_t>> saved_range;
  int saved_scroll = 0;
};

namespace {

constexpr const char* kSettingsOrganization = "rankscope";
constexpr const char* kSettingsApplication = "rankscope-gui";
constexpr const char* kRecentKey = "recentFiles";
constexpr int kSidePanelPx = 500;
// The side panel's narrowest: the Run tab's rows (a 32-digit run id) and the Range tab's
// device table (two-line cells) still fit.
constexpr int kSidePanelMinPx = 360;

}  // namespace

analyzer::AnalyzeOptions ViewerAnalyzeOptions() {
  analyzer::AnalyzeOptions options;
  options.tool_version = RANKSCOPE_GUI_TOOL_VERSION;
  // The timeline already holds the run in memory: one rank at a time keeps the analysis's
  // own peak (its per-rank interval sets) small, at the cost of a slower Run tab.
  options.threads = 1;
  return options;
}

Result<std::unique_ptr<TimelineModel>> LoadViewerModel(const std::filesystem::path& input,
                                                       interop::ViewedInputs& viewed,
                                                       std::function<void(int, int)> progress,
                                                       const std::atomic<bool>* cancel) {
  interop::ViewOptions options;
  options.analyze = ViewerAnalyzeOptions();
  options.progress = std::move(progress);
  return TimelineModel::Build(
      input,
      [&](analyzer::ViewEventSink& sink) -> Result<std::vector<std::string>> {
        RS_ASSIGN_OR_RETURN(viewed, interop::ViewInputs({input}, options, sink));
        return std::move(viewed.warnings);
      },
      cancel);
}

namespace {

// Reads the model and its overview; `done`/`total` (may be null) receive the progress and
// must outlive the call. Other tools' traces are analyzed in the same pass.
LoadedRun LoadModel(const QString& path, std::atomic<int>* done, std::atomic<int>* total,
                    const std::atomic<bool>* cancel = nullptr) {
  LoadedRun loaded;
  const auto started = std::chrono::steady_clock::now();
  std::function<void(int, int)> progress;
  if (done && total) {
    progress = [done, total](int read, int all) {
      done->store(read);
      total->store(all);
    };
  }
  interop::ViewedInputs viewed;
  auto model = LoadViewerModel(std::filesystem::path(path.toStdString()), viewed, std::move(progress), cancel);
  if (!model.ok()) {
    loaded.error = QString::fromStdString(model.status().message());
    return loaded;
  }
  auto source = std::make_shared<RunSource>();
  source->run = viewed.run;
  source->foreign = viewed.foreign;
  source->notes = std::move(viewed.notes);
  loaded.source = std::move(source);
  if (viewed.foreign) {
    loaded.analysis = RunAnalysis{viewed.report, QString::fromStdString(viewed.analysis_error), std::nullopt};
  }
  loaded.model = std::shared_ptr<TimelineModel>(std::move(model).value());
  loaded.overview = ComputeOverview(*loaded.model);
  loaded.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return loaded;
}

// Runs of at most this many events get the critical path with their analysis: it keeps
// every event (40 bytes each) while it runs, beside the timeline's own copy.
constexpr size_t kCriticalPathEventLimit = 4'000'000;

bool WantsCriticalPath(const TimelineModel& model) {
  size_t events = 0;
  for (const RankTimeline& rank : model.ranks()) events += rank.events;
  return events <= kCriticalPathEventLimit;
}

// A rankscope run's analysis, from its files (another tool's trace has its own already).
RunAnalysis Analyze(const RunSource& source, bool critical_path) {
  RunAnalysis analysis;
  analyzer::AnalyzeOptions options = ViewerAnalyzeOptions();
  options.critical_path = critical_path;
  options.critical_path_steps = 0;  // every step: any may be selected
  auto report = analyzer::AnalyzeRun(source.run, options);
  if (report.ok()) {
    analysis.report = std::make_shared<const analyzer::Report>(std::move(report).value());
  } else {
    analysis.error = QString::fromStdString(report.status().message());
    // A run that hung before anything measurable still says who waited for whom, as
    // `rankscope analyze` does.
    Result<std::optional<analyzer::HangReport>> end = analyzer::DiagnoseRun(source.run);
    if (end.ok() && end->has_value()) analysis.diagnosis = std::move(**end);
  }
  return analysis;
}

// The culprits of a run's end diagnosis, for the timeline's rank headers.
std::vector<int> CulpritRanks(const analyzer::HangReport* diagnosis) {
  std::vector<int> ranks;
  if (diagnosis) {
    for (const analyzer::Culprit& culprit : diagnosis->culprits) ranks.push_back(culprit.rank);
  }
  return ranks;
}

QString DisplayName(const QString& path) {
  const QFileInfo info(path);
  const QString name = info.fileName().isEmpty() ? QFileInfo(info.absolutePath()).fileName() : info.fileName();
  return name.isEmpty() ? path : name;
}

// Each rank's clock offset, to tell whether an alignment moved anything.
std::vector<int64_t> Offsets(const TimelineModel& model) {
  std::vector<int64_t> offsets;
  for (const RankTimeline& rank : model.ranks()) offsets.push_back(rank.clock_offset_ns);
  return offsets;
}

}  // namespace

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
  qRegisterMetaType<rankscope::gui::EventRef>();
  setAcceptDrops(true);
  BuildLayout();
  BuildMenus();
  ConnectSignals();
  UpdateTitle();
  UpdateStatus();
  resize(1600, 900);
}

MainWindow::~MainWindow() {
  // Measurements in flight hold their own reference to the model; wait so none outlives
  // the process's Qt objects.
  range_panel_->waitForIdle();
}

void MainWindow::showEvent(QShowEvent* event) {
  QMainWindow::showEvent(event);
  if (split_set_) return;
  split_set_ = true;
  // A third of a small window, up to the usual width in a large one; later resizes go to
  // the timeline, and the user's drags stay.
  const int total = splitter_->width();
  const int side = std::clamp(total / 3, kSidePanelMinPx, kSidePanelPx);
  splitter_->setSizes({std::max(0, total - side), side});
}

// ---- Construction ----------------------------------------------------------------------

void MainWindow::BuildLayout() {
  // The run selector and the search across the top, over the timeline and the side panel:
  // neither's narrowest width then adds to the other's.
  auto* central = new QWidget(this);
  auto* central_layout = new QVBoxLayout(central);
  central_layout->setContentsMargins(0, 0, 0, 0);
  central_layout->setSpacing(0);
  auto* bar = new QHBoxLayout();
  bar->setContentsMargins(4, 4, 4, 2);
  auto* run_label = new QLabel(tr("Run:"), central);
  run_selector_ = new QComboBox(central);
  // A fixed width of 10 characters (the whole path in the tooltip): a long run name must not
  // widen the window past a small screen.
  run_selector_->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  run_selector_->setMinimumContentsLength(10);
  run_selector_->setToolTip(tr("The run the timeline shows"));
  run_label->setBuddy(run_selector_);
  search_ = new SearchBar(central);
  bar->addWidget(run_label);
  bar->addWidget(run_selector_);
  bar->addSpacing(8);
  bar->addWidget(search_, 1);
  central_layout->addLayout(bar);

  auto* splitter = new QSplitter(Qt::Horizontal, central);
  splitter_ = splitter;
  splitter->setChildrenCollapsible(false);
  central_layout->addWidget(splitter, 1);
  auto* left = new QWidget(splitter);
  auto* left_layout = new QVBoxLayout(left);
  left_layout->setContentsMargins(4, 4, 0, 2);
  left_layout->setSpacing(3);
  overview_ = new OverviewStrip(left);
  left_layout->addWidget(overview_);
  timeline_ = new TimelineView(left);
  left_layout->addWidget(timeline_, 1);
  legend_ = new LegendStrip(left);
  legend_->setObjectName(QStringLiteral("legend"));
  left_layout->addWidget(legend_);

  tabs_ = new QTabWidget(splitter);
  QApplication::instance()->installEventFilter(this);
  run_panel_ = new RunPanel(tabs_);
  range_panel_ = new RangeStatsPanel(tabs_);
  details_ = new DetailsPanel(tabs_);
  scaling_panel_ = new ScalingPanel(tabs_);
  tabs_->addTab(run_panel_, tr("Run"));
  tabs_->addTab(range_panel_, tr("Range"));
  tabs_->addTab(details_, tr("Details"));
  scaling_panel_->hide();  // a tab only while two or more runs are open
  tabs_->setMinimumWidth(kSidePanelMinPx);

  splitter->addWidget(left);
  splitter->addWidget(tabs_);
  splitter->setStretchFactor(0, 1);
  splitter->setStretchFactor(1, 0);
  splitter->setSizes({1600 - kSidePanelPx, kSidePanelPx});
  setCentralWidget(central);

  status_label_ = new QLabel(this);
  // Long texts are cut rather than squeezing the permanent widgets.
  status_label_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  view_label_ = new QLabel(this);
  view_label_->setMinimumWidth(
      QFontMetrics(view_label_->font()).horizontalAdvance(QStringLiteral("view 999 ms from +999 ms  ")));
  progress_bar_ = new QProgressBar(this);
  progress_bar_->setMaximumWidth(220);
  progress_bar_->setTextVisible(true);
  progress_bar_->hide();
  cancel_button_ = new QToolButton(this);
  cancel_button_->setObjectName(QStringLiteral("cancelLoading"));
  cancel_button_->setText(tr("Cancel"));
  cancel_button_->setToolTip(tr("Stop loading (the runs already open stay)"));
  cancel_button_->hide();
  connect(cancel_button_, &QToolButton::clicked, this, &MainWindow::cancelLoading);
  statusBar()->addWidget(status_label_, 1);
  statusBar()->addPermanentWidget(view_label_);
  statusBar()->addPermanentWidget(progress_bar_);
  statusBar()->addPermanentWidget(cancel_button_);
  message_timer_ = new QTimer(this);
  message_timer_->setSingleShot(true);
  connect(message_timer_, &QTimer::timeout, this, [this] {
    message_.clear();
    UpdateStatus();
  });
  progress_timer_ = new QTimer(this);
  progress_timer_->setInterval(100);
  connect(progress_timer_, &QTimer::timeout, this, &MainWindow::UpdateProgress);
}

void MainWindow::BuildMenus() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  QAction* open_dir = file->addAction(tr("&Open Run Directory…"), this, &MainWindow::OpenDirectoryDialog);
  open_dir->setShortcut(QKeySequence::Open);
  QAction* open_file = file->addAction(tr("Open Rank &File…"), this, &MainWindow::OpenFileDialog);
  open_file->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_O));
  recent_menu_ = file->addMenu(tr("Open &Recent"));
  connect(recent_menu_, &QMenu::aboutToShow, this, &MainWindow::RebuildRecentMenu);
  QAction* close = file->addAction(tr("&Close Run"), this, [this] { closeRun(); });
  close->setShortcut(QKeySequence::Close);
  file->addSeparator();
  QAction* quit = file->addAction(tr("&Quit"), this, &QWidget::close);
  quit->setShortcut(QKeySequence::Quit);

  QMenu* find = menuBar()->addMenu(tr("&Search"));
  QAction* focus = find->addAction(tr("&Find Events…"), this, [this] { search_->focusSearch(); });
  focus->setShortcut(QKeySequence::Find);
  QAction* next = find->addAction(tr("Find &Next"), this, [this] { StepSearch(true); });
  next->setShortcut(QKeySequence(Qt::Key_F3));
  QAction* previous = find->addAction(tr("Find &Previous"), this, [this] { StepSearch(false); });
  previous->setShortcut(QKeySequence(Qt::SHIFT | Qt::Key_F3));

  // Single keys (W, F, Z...) belong to the timeline while it has the focus, so that they
  // never steal typing from the search field: the menu only shows them ("\t").
  QMenu* view = menuBar()->addMenu(tr("&View"));
  view->addAction(tr("&Fit Whole Run\tF"), this, [this] { timeline_->fitAll(); });
  view->addAction(tr("&Zoom to Selection\tZ"), this, [this] { timeline_->zoomToSelection(); });
  view->addAction(tr("Zoom &In\tW"), this, [this] { timeline_->zoomBy(1.4); });
  view->addAction(tr("Zoom &Out\tS"), this, [this] { timeline_->zoomBy(1 / 1.4); });
  view->addAction(tr("&Back\tBackspace"), this, [this] { timeline_->goBack(); });
  view->addSeparator();
  QAction* by_name = view->addAction(tr("Color by &Name"));
  by_name->setObjectName(QStringLiteral("colorByName"));
  by_name->setCheckable(true);
  by_name->setChecked(timeline_->colorByName());
  by_name->setToolTip(tr("Compute kernels and ranges in a color of their name (within their class's hues); off: "
                         "every event in its class's color"));
  connect(by_name, &QAction::toggled, this, [this](bool on) {
    timeline_->setColorByName(on);
    legend_->setColorByName(on);
  });
  view->addSeparator();
  view->addAction(tr("&Collapse All Ranks"), this, [this] {
    if (const TimelineModel* model = currentModel()) {
      for (size_t i = 0; i < model->ranks().size(); ++i) timeline_->setRankCollapsed(i, true);
    }
  });
  view->addAction(tr("&Expand All Ranks"), this, [this] {
    if (const TimelineModel* model = currentModel()) {
      for (size_t i = 0; i < model->ranks().size(); ++i) timeline_->setRankCollapsed(i, false);
    }
  });
  view->addAction(tr("Clear &Selection\tEsc"), this, [this] { timeline_->clearSelection(); });

  QMenu* help = menuBar()->addMenu(tr("&Help"));
  QAction* keys = help->addAction(tr("&Keyboard Shortcuts"), this, &MainWindow::ShowShortcuts);
  keys->setShortcut(QKeySequence::HelpContents);
  help->addAction(tr("&About rankscope-gui"), this, [this] {
    QMessageBox::about(this, tr("About rankscope-gui"),
                       tr("<b>rankscope-gui</b> %1<br>The timeline viewer of rankscope, a profiler for "
                          "distributed training.")
                           .arg(QStringLiteral(RANKSCOPE_GUI_TOOL_VERSION)));
  });
}

void MainWindow::ConnectSignals() {
  connect(run_selector_, qOverload<int>(&QComboBox::activated), this, &MainWindow::setCurrentRun);
  connect(timeline_, &TimelineView::eventSelected, this, [this](const EventRef& ref) {
    details_->setEvent(currentModel(), ref);
    tabs_->setCurrentWidget(details_);
    ShowPathOfStepAt(ref);
  });
  connect(timeline_, &TimelineView::selectionCleared, this, [this] {
    details_->clear();
    timeline_->setPathMarks({});
  });
  connect(timeline_, &TimelineView::rangeSelected, this, [this](qint64 t0, qint64 t1) {
    if (current_ < 0) return;
    range_panel_->setRange(runs_[current_]->model, t0, t1);
    tabs_->setCurrentWidget(range_panel_);
  });
  connect(timeline_, &TimelineView::rangeCleared, this, [this] { range_panel_->clear(); });
  connect(timeline_, &TimelineView::viewChanged, this, [this] {
    overview_->setLabelWidth(timeline_->labelColumnWidth());
    overview_->setViewRange(timeline_->view().start_ns(), timeline_->view().end_ns());
    if (const TimelineModel* model = currentModel()) {
      const int64_t offset = timeline_->view().start_ns() - model->start_ns();
      view_label_->setText(tr("view %1 from %2%3")
                               .arg(DurationText(timeline_->view().duration_ns()),
                                    offset < 0 ? QStringLiteral("-") : QStringLiteral("+"),
                                    DurationText(offset < 0 ? -offset : offset)));
    }
  });
  connect(timeline_, &TimelineView::helpRequested, this, &MainWindow::ShowShortcuts);
  connect(details_, &DetailsPanel::eventActivated, this,
          [this](const EventRef& ref) { timeline_->selectEvent(ref, /*reveal=*/true); });
  connect(overview_, &OverviewStrip::centerRequested, this, [this](qint64 t) { timeline_->centerOn(t); });
  connect(overview_, &OverviewStrip::windowRequested, this,
          [this](qint64 t0, qint64 t1) { timeline_->setTimeRange(t0, t1); });
  connect(run_panel_, &RunPanel::rankClicked, this, [this](int rank) {
    timeline_->scrollToRank(rank);
    timeline_->setFocus();
  });
  connect(search_, &SearchBar::matchesChanged, this, [this] { timeline_->setSearchMatches(search_->matches()); });
  connect(search_, &SearchBar::stepRequested, this, &MainWindow::StepSearch);
  connect(search_, &SearchBar::matchActivated, this,
          [this](const EventRef& ref) { timeline_->selectEvent(ref, /*reveal=*/true); });
  connect(search_, &SearchBar::dismissed, this, [this] { timeline_->setFocus(); });
}

// ---- Opening runs ----------------------------------------------------------------------

int MainWindow::OpenIndexOf(const QString& path) const {
  const QString wanted = QFileInfo(path).canonicalFilePath();
  if (wanted.isEmpty()) return -1;
  for (int i = 0; i < runCount(); ++i) {
    if (QFileInfo(runs_[i]->path).canonicalFilePath() == wanted) return i;
  }
  return -1;
}

void MainWindow::openRun(const QString& path) {
  // A run already open is shown, not listed twice.
  if (const int open = OpenIndexOf(path); open >= 0) {
    setCurrentRun(open);
    return;
  }
  auto progress = std::make_shared<LoadProgress>();
  progress->path = path;
  progress_.push_back(progress);
  ++pending_loads_;
  UpdateProgress();
  progress_timer_->start();
  auto* watcher = new QFutureWatcher<LoadedRun>(this);
  connect(watcher, &QFutureWatcherBase::finished, this, [this, watcher, path, progress] {
    watcher->deleteLater();
    --pending_loads_;
    progress_.erase(std::remove(progress_.begin(), progress_.end(), progress), progress_.end());
    UpdateProgress();
    LoadedRun loaded = watcher->future().result();
    if (progress->cancel.load()) {
      ShowMessage(tr("Loading %1 cancelled").arg(DisplayName(path)), 8000);
      return;
    }
    if (!loaded.error.isEmpty()) {
      ReportLoadError(path, loaded.error);
      return;
    }
    const int index = AddRun(path, std::move(loaded));
    StartAnalysis(runs_[index]->id);
  });
  watcher->setFuture(
      QtConcurrent::run([path, progress] {
        return LoadModel(path, &progress->done, &progress->total, &progress->cancel);
      }));
}

bool MainWindow::openRunBlocking(const QString& path) {
  if (const int open = OpenIndexOf(path); open >= 0) {
    setCurrentRun(open);
    return true;
  }
  LoadedRun loaded = LoadModel(path, nullptr, nullptr);
  if (!loaded.error.isEmpty()) {
    ReportLoadError(path, loaded.error);
    return false;
  }
  const int index = AddRun(path, std::move(loaded));
  const uint64_t id = runs_[index]->id;
  if (runs_[index]->ready_analysis) {
    StartAnalysis(id);  // applies it at once
    return true;
  }
  runs_[index]->analyzing = true;
  ++pending_analyses_;
  ApplyAnalysis(id, Analyze(*runs_[index]->source, WantsCriticalPath(*runs_[index]->model)));
  return true;
}

int MainWindow::AddRun(const QString& path, LoadedRun loaded) {
  SaveViewState();
  auto run = std::make_unique<Run>();
  run->id = next_id_++;
  run->path = path;
  run->source = std::move(loaded.source);
  run->ready_analysis = std::move(loaded.analysis);
  run->model = std::move(loaded.model);
  if (run->source->foreign) {
    run->imported_details = std::make_unique<ImportedDetails>(std::vector<std::filesystem::path>{run->model->source()});
  }
  run->overview = std::move(loaded.overview);
  run->load_seconds = loaded.seconds;
  QStringList warnings;
  for (const std::string& warning : run->model->warnings()) warnings << QString::fromStdString(warning);
  if (!warnings.isEmpty()) ShowMessage(warnings.join(QStringLiteral("; ")), 8000);
  runs_.push_back(std::move(run));
  const int index = runCount() - 1;
  run_selector_->addItem(DisplayName(path), path);
  run_selector_->setItemData(index, path, Qt::ToolTipRole);
  if (record_recent_) AddRecentFile(path);
  ShowRun(index);
  UpdateScalingTab();
  emit runLoaded(index);
  return index;
}

void MainWindow::StartAnalysis(uint64_t id) {
  Run* run = FindRun(id);
  if (!run) return;
  run->analyzing = true;
  ++pending_analyses_;
  if (run->ready_analysis) {  // read with the model
    RunAnalysis analysis = std::move(*run->ready_analysis);
    run->ready_analysis.reset();
    ApplyAnalysis(id, std::move(analysis));
    return;
  }
  if (current_ >= 0 && runs_[current_]->id == id) run_panel_->setAnalyzing();
  UpdateProgress();
  progress_timer_->start();
  auto* watcher = new QFutureWatcher<RunAnalysis>(this);
  connect(watcher, &QFutureWatcherBase::finished, this, [this, watcher, id] {
    watcher->deleteLater();
    ApplyAnalysis(id, watcher->future().result());
  });
  // The analysis holds the source too: the run may be closed while it works.
  const bool critical_path = WantsCriticalPath(*run->model);
  watcher->setFuture(
      QtConcurrent::run([source = run->source, critical_path] { return Analyze(*source, critical_path); }));
}

void MainWindow::ApplyAnalysis(uint64_t id, RunAnalysis analysis) {
  --pending_analyses_;
  UpdateProgress();
  Run* run = FindRun(id);
  if (!run) return;  // closed meanwhile
  run->analyzing = false;
  const bool ok = analysis.report != nullptr;
  const bool is_current = current_ >= 0 && runs_[current_]->id == id;
  if (ok) {
    run->report = analysis.report;
    run->analysis_error.clear();
    run->failed_diagnosis.reset();
    // No measurement may read the model while its clocks move.
    range_panel_->waitForIdle();
    const std::vector<int64_t> before = Offsets(*run->model);
    run->model->ApplyClockAlignment(run->report->cross_rank.clock);
    if (Offsets(*run->model) != before) {
      run->overview = ComputeOverview(*run->model);
      if (is_current) {
        overview_->setData(run->overview);
        timeline_->modelTimesChanged();
        search_->search();  // matches are ordered on the common clock
        if (const auto range = timeline_->selectedRange())
          range_panel_->setRange(run->model, range->first, range->second);
        if (const auto selected = timeline_->selectedEvent()) details_->setEvent(run->model.get(), *selected);
      }
    }
  } else {
    run->analysis_error = analysis.error;
    run->failed_diagnosis = std::move(analysis.diagnosis);
  }
  if (is_current) {
    if (ok) {
      run_panel_->setReport(run->report);
      timeline_->setStragglers(run->report->cross_rank.stragglers);
    } else {
      run_panel_->setError(run->analysis_error, run->failed_diagnosis);
    }
    timeline_->setCulprits(CulpritRanks(run_panel_->diagnosis()));
  }
  UpdateScalingTab();
  UpdateStatus();
  const int index = static_cast<int>(
      std::find_if(runs_.begin(), runs_.end(), [id](const auto& r) { return r->id == id; }) - runs_.begin());
  emit analysisFinished(index, ok);
}

void MainWindow::ReportLoadError(const QString& path, const QString& message) {
  const QString line = message.isEmpty() ? tr("%1: cannot open").arg(path) : message;
  ShowMessage(tr("Could not open %1").arg(path), 10000);
  emit loadFailed(line);
  if (!show_error_dialogs_) return;
  auto* box = new QMessageBox(QMessageBox::Critical, tr("Cannot open run"), line, QMessageBox::Ok, this);
  box->setObjectName(QStringLiteral("loadErrorDialog"));
  box->setInformativeText(tr("Runs already open are unaffected."));
  box->setAttribute(Qt::WA_DeleteOnClose);
  box->open();
}

void MainWindow::closeRun(int index) {
  if (index < 0) index = current_;
  if (index < 0 || index >= runCount()) return;
  range_panel_->waitForIdle();
  const bool was_current = index == current_;
  if (was_current) {
    // Nothing may keep pointing into the model being dropped.
    timeline_->setModel(nullptr);
    details_->clear();
    details_->setImportedDetails(nullptr);
    range_panel_->clear();
    search_->setModel(nullptr);
    current_ = -1;
  } else if (index < current_) {
    --current_;
  }
  runs_.erase(runs_.begin() + index);
  run_selector_->removeItem(index);
  if (was_current) {
    if (!runs_.empty()) {
      ShowRun(std::min(index, runCount() - 1));
    } else {
      overview_->clear();
      run_panel_->clear();
      timeline_->setStragglers({});
      timeline_->setCulprits({});
    }
  } else {
    run_selector_->setCurrentIndex(current_);
  }
  UpdateScalingTab();
  UpdateTitle();
  UpdateStatus();
}

void MainWindow::setCurrentRun(int index) {
  if (index < 0 || index >= runCount() || index == current_) return;
  SaveViewState();
  ShowRun(index);
}

QString MainWindow::runPath(int index) const {
  return index >= 0 && index < runCount() ? runs_[index]->path : QString();
}

const TimelineModel* MainWindow::currentModel() const { return current_ >= 0 ? runs_[current_]->model.get() : nullptr; }

const analyzer::Report* MainWindow::currentReport() const {
  return current_ >= 0 ? runs_[current_]->report.get() : nullptr;
}

MainWindow::Run* MainWindow::FindRun(uint64_t id) {
  for (auto& run : runs_) {
    if (run->id == id) return run.get();
  }
  return nullptr;
}

void MainWindow::SaveViewState() {
  if (current_ < 0) return;
  Run& run = *runs_[current_];
  run.saved_range = std::make_pair(timeline_->view().start_ns(), timeline_->view().end_ns());
  run.saved_scroll = timeline_->verticalOffset();
}

void MainWindow::ShowPathOfStepAt(const EventRef& ref) {
  const TimelineModel* model = currentModel();
  const analyzer::Report* report = current_ >= 0 ? runs_[current_]->report.get() : nullptr;
  if (!model || !report || !report->critical_path || !model->Contains(ref)) {
    timeline_->setPathMarks({});
    return;
  }
  const std::vector<analyzer::StepPath>& paths = report->critical_path->paths;
  const std::optional<size_t> step = PathAt(paths, model->DisplayStart(ref));
  timeline_->setPathMarks(step ? PathMarks(*model, paths[*step]) : std::vector<PathMark>{});
}

void MainWindow::ShowRun(int index) {
  range_panel_->waitForIdle();
  current_ = index;
  Run& run = *runs_[index];
  run_selector_->setCurrentIndex(index);
  details_->clear();
  details_->setImportedDetails(run.imported_details.get());
  range_panel_->clear();
  timeline_->setModel(run.model.get());
  if (run.saved_range) {
    timeline_->setTimeRange(run.saved_range->first, run.saved_range->second);
    timeline_->setVerticalOffset(run.saved_scroll);
  }
  timeline_->setStragglers(run.report ? run.report->cross_rank.stragglers : std::vector<int>());
  overview_->setData(run.overview);
  overview_->setViewRange(timeline_->view().start_ns(), timeline_->view().end_ns());
  search_->setModel(run.model.get());
  run_panel_->setImportNotes(run.source->notes);
  if (run.report) {
    run_panel_->setReport(run.report);
  } else if (!run.analysis_error.isEmpty()) {
    run_panel_->setError(run.analysis_error, run.failed_diagnosis);
  } else {
    run_panel_->setAnalyzing();
  }
  timeline_->setCulprits(CulpritRanks(run_panel_->diagnosis()));
  UpdateTitle();
  UpdateStatus();
  timeline_->setFocus();
}

void MainWindow::UpdateScalingTab() {
  const int tab = tabs_->indexOf(scaling_panel_);
  if (runCount() < 2) {
    if (tab >= 0) tabs_->removeTab(tab);
    scaling_panel_->hide();
    return;
  }
  if (tab < 0) tabs_->addTab(scaling_panel_, tr("Scaling"));
  std::vector<const analyzer::Report*> reports;
  for (const auto& run : runs_) {
    if (run->report) reports.push_back(run->report.get());
  }
  scaling_panel_->setReports(reports);
}

bool MainWindow::waitUntilIdle(int timeout_ms) {
  QDeadlineTimer deadline(timeout_ms);
  while (isBusy()) {
    if (deadline.hasExpired()) return false;
    QCoreApplication::processEvents(QEventLoop::AllEvents, 50);
    QThread::msleep(5);
  }
  QCoreApplication::processEvents();
  return true;
}

// ---- Status, title, progress -----------------------------------------------------------

void MainWindow::UpdateTitle() {
  setWindowTitle(current_ >= 0 ? tr("%1 — rankscope-gui").arg(DisplayName(runs_[current_]->path))
                               : tr("rankscope-gui"));
}

void MainWindow::ShowMessage(const QString& text, int ms) {
  message_ = text;
  message_timer_->start(ms);
  UpdateStatus();
}

void MainWindow::UpdateStatus() {
  const QString message = message_.isEmpty() ? QString() : message_ + QStringLiteral(" · ");
  if (current_ < 0) {
    status_label_->setText(message +
                           tr("Open a run directory (Ctrl+O) or a rank file (Ctrl+Shift+O), or drop one here."));
    status_label_->setToolTip(QString());
    view_label_->clear();
    return;
  }
  const Run& run = *runs_[current_];
  QString text = tr("%n rank(s)", "", static_cast<int>(run.model->ranks().size())) +
                 tr(" · %L1 events · %2 · loaded in %3")
                     .arg(run.model->events())
                     .arg(BytesText(static_cast<double>(run.model->MemoryBytes())),
                          DurationText(std::llround(run.load_seconds * 1e9)));
  if (run.analyzing) text += tr(" · analyzing…");
  if (!run.analysis_error.isEmpty()) text += tr(" · analysis failed");
  const analyzer::HangReport* end =
      run.report && run.report->did_not_finish ? &*run.report->did_not_finish
                                              : (run.failed_diagnosis ? &*run.failed_diagnosis : nullptr);
  if (end) text += tr(" · did not finish: %1 (Run tab)").arg(QString::fromUtf8(analyzer::RunEndVerdictName(end->verdict)));
  // An imported trace: what the importer left out or assumed, in full in the Run tab.
  const std::vector<std::string>& notes = run.source->notes;
  QString notes_tip;
  if (!notes.empty()) {
    text += notes.size() == 1 ? tr(" · 1 import note in the Run tab")
                              : tr(" · %1 import notes in the Run tab").arg(notes.size());
    QStringList lines;
    for (const std::string& note : notes) lines << QString::fromStdString(note);
    notes_tip = lines.join(QLatin1Char('\n'));
  }
  status_label_->setText(message + text);
  status_label_->setToolTip(notes_tip);
}

QString MainWindow::statusText() const { return status_label_->text(); }

void MainWindow::cancelLoading() {
  for (const auto& p : progress_) p->cancel.store(true);
  UpdateProgress();
}

void MainWindow::UpdateProgress() {
  cancel_button_->setVisible(pending_loads_ > 0);
  if (!isBusy()) {
    progress_bar_->hide();
    progress_timer_->stop();
    timeline_->setPlaceholder(QString());
    UpdateStatus();
    return;
  }
  progress_bar_->show();
  int done = 0, total = 0;
  QStringList loading;
  for (const auto& p : progress_) {
    done += p->done.load();
    total += p->total.load();
    loading << DisplayName(p->path);
  }
  const bool cancelling = std::any_of(progress_.begin(), progress_.end(), [](const auto& p) { return p->cancel.load(); });
  if (pending_loads_ > 0 && total > 0) {
    progress_bar_->setRange(0, total);
    progress_bar_->setValue(done);
    progress_bar_->setFormat(tr("loading: %v of %m read"));
  } else {
    progress_bar_->setRange(0, 0);  // busy indicator
    progress_bar_->setFormat(pending_loads_ > 0 ? tr("loading…") : tr("analyzing…"));
  }
  // Nothing shown yet: the timeline says what is loading and how far it is.
  if (pending_loads_ > 0 && current_ < 0) {
    QString text = cancelling ? tr("Cancelling the load of %1…").arg(loading.join(QStringLiteral(", ")))
                              : tr("Loading %1…").arg(loading.join(QStringLiteral(", ")));
    if (!cancelling && total > 0) text += tr("\n%1 of %2 ranks or files read").arg(done).arg(total);
    timeline_->setPlaceholder(text);
  } else {
    timeline_->setPlaceholder(QString());
  }
}

bool MainWindow::eventFilter(QObject* watched, QEvent* event) {
  if (event->type() != QEvent::KeyPress || !watched->isWidgetType()) return QMainWindow::eventFilter(watched, event);
  auto* widget = static_cast<QWidget*>(watched);
  if (!tabs_->isAncestorOf(widget)) return QMainWindow::eventFilter(watched, event);
  // Widgets that take typing keep it.
  if (qobject_cast<QLineEdit*>(widget) || qobject_cast<QAbstractSpinBox*>(widget)) return false;
  if (const auto* text = qobject_cast<QTextEdit*>(widget); text && !text->isReadOnly()) return false;
  const auto* key = static_cast<QKeyEvent*>(event);
  if (key->modifiers() & ~(Qt::ShiftModifier | Qt::KeypadModifier)) return false;
  switch (key->key()) {
    case Qt::Key_W:
    case Qt::Key_A:
    case Qt::Key_S:
    case Qt::Key_D:
    case Qt::Key_F:
    case Qt::Key_Z:
    case Qt::Key_Question: {
      QKeyEvent copy(QEvent::KeyPress, key->key(), key->modifiers(), key->text());
      QCoreApplication::sendEvent(timeline_, &copy);
      return true;
    }
    default: return false;
  }
}

// ---- Search, help ----------------------------------------------------------------------

void MainWindow::StepSearch(bool forward) {
  const TimelineModel* model = currentModel();
  if (!model) return;
  if (search_->matches()->empty()) search_->search();
  if (const auto selected = timeline_->selectedEvent(); selected && model->Contains(*selected)) {
    search_->stepFrom(*selected, forward);
    return;
  }
  search_->step(forward ? timeline_->view().start_ns() - 1 : timeline_->view().end_ns(), forward);
}

QString MainWindow::shortcutsHtml() {
  const char* rows[][2] = {
      {"W / S", "zoom in / out (around the mouse when it is over the timeline)"},
      {"Ctrl + wheel", "zoom at the mouse"},
      {"A / D", "pan left / right by 10% of the view"},
      {"wheel, Up / Down, PgUp / PgDn", "scroll ranks and rows"},
      {"Shift + wheel", "pan"},
      {"drag (left on empty space, or middle)", "pan"},
      {"F", "fit the whole run"},
      {"Shift + drag, or drag on the time axis", "select a time range (statistics in the Range tab)"},
      {"Z", "zoom to the selected range (or event)"},
      {"Backspace", "back to the previous zoom"},
      {"click an event", "select it (Details tab, flow arrow to its launch)"},
      {"click a rank header", "collapse / expand the rank"},
      {"Esc", "clear the selection and the range"},
      {"Ctrl + F", "search event names (regular expression)"},
      {"Enter / F3", "next match"},
      {"Shift + Enter / Shift + F3", "previous match"},
      {"Ctrl + O / Ctrl + Shift + O", "open a run directory / a rank file"},
      {"Ctrl + W", "close the run"},
      {"? / F1", "this list"},
  };
  QString html = QStringLiteral("<table cellspacing='4'>");
  for (const auto& row : rows) {
    html += QStringLiteral("<tr><td><b>%1</b></td><td>%2</td></tr>")
                .arg(QString::fromUtf8(row[0]).toHtmlEscaped(), QString::fromUtf8(row[1]).toHtmlEscaped());
  }
  return html + QStringLiteral("</table>");
}

void MainWindow::ShowShortcuts() {
  if (auto* existing = findChild<QMessageBox*>(QStringLiteral("shortcutsDialog"))) {
    existing->raise();
    return;
  }
  auto* box = new QMessageBox(QMessageBox::NoIcon, tr("Keyboard shortcuts"), shortcutsHtml(), QMessageBox::Close, this);
  box->setObjectName(QStringLiteral("shortcutsDialog"));
  box->setTextFormat(Qt::RichText);
  box->setStyleSheet(QStringLiteral("QLabel { min-width: 620px; }"));  // one line per shortcut
  box->setAttribute(Qt::WA_DeleteOnClose);
  box->setModal(false);
  box->show();
}

// ---- Files, recent files, drag and drop ------------------------------------------------

void MainWindow::OpenDirectoryDialog() {
  const QString dir = QFileDialog::getExistingDirectory(this, tr("Open run directory"));
  if (!dir.isEmpty()) openRun(dir);
}

void MainWindow::OpenFileDialog() {
  const QStringList files = QFileDialog::getOpenFileNames(
      this, tr("Open trace"), QString(),
      tr("Traces (*.sqlite *.json *.json.gz);;rankscope rank files (*.sqlite);;PyTorch profiler traces (*.json "
         "*.json.gz);;Nsight Systems SQLite exports (*.sqlite);;All files (*)"));
  for (const QString& file : files) openRun(file);
}

QStringList MainWindow::recentFiles() {
  QSettings settings(QString::fromLatin1(kSettingsOrganization), QString::fromLatin1(kSettingsApplication));
  return settings.value(QString::fromLatin1(kRecentKey)).toStringList();
}

void MainWindow::AddRecentFile(const QString& path) {
  const QString absolute = QFileInfo(path).absoluteFilePath();
  QSettings settings(QString::fromLatin1(kSettingsOrganization), QString::fromLatin1(kSettingsApplication));
  QStringList recent = settings.value(QString::fromLatin1(kRecentKey)).toStringList();
  recent.removeAll(absolute);
  recent.prepend(absolute);
  while (recent.size() > kMaxRecentFiles) recent.removeLast();
  settings.setValue(QString::fromLatin1(kRecentKey), recent);
}

void MainWindow::RebuildRecentMenu() {
  recent_menu_->clear();
  const QStringList recent = recentFiles();
  if (recent.isEmpty()) {
    recent_menu_->addAction(tr("(none)"))->setEnabled(false);
    return;
  }
  for (const QString& path : recent) {
    recent_menu_->addAction(path, this, [this, path] { openRun(path); });
  }
  recent_menu_->addSeparator();
  recent_menu_->addAction(tr("Clear List"), this, [] {
    QSettings settings(QString::fromLatin1(kSettingsOrganization), QString::fromLatin1(kSettingsApplication));
    settings.remove(QString::fromLatin1(kRecentKey));
  });
}

void MainWindow::dragEnterEvent(QDragEnterEvent* event) {
  const QMimeData* mime = event->mimeData();
  if (!mime->hasUrls()) return;
  for (const QUrl& url : mime->urls()) {
    if (!url.isLocalFile()) return;
  }
  event->acceptProposedAction();
}

void MainWindow::dropEvent(QDropEvent* event) {
  const QMimeData* mime = event->mimeData();
  if (!mime->hasUrls()) return;
  // A directory is one run; each rank file dropped alone is one run.
  for (const QUrl& url : mime->urls()) {
    if (url.isLocalFile()) openRun(url.toLocalFile());
  }
  event->acceptProposedAction();
}

}  // namespace rankscope::gui
