// The viewer's window: menus, the run selector, the overview and timeline, the side panel
// (Run, Range, Details, Scaling), loading in the background, errors, recent files and
// drag and drop.
//
// Loading: openRun() reads the model on a worker thread (TimelineModel::Load, then the
// overview), shows the timeline, then runs analyzer::AnalyzeRun on another worker; when
// the report arrives the model gets the report's clock alignment and the side panel its
// numbers. openRunBlocking() does the same on the calling thread (tests, screenshots).
// When the analysis fails, analyzer::DiagnoseRun still tells the Run tab why a run that did
// not finish stopped; a diagnosis's culprits are marked in the timeline's rank headers.
//
// Errors: a run that cannot be opened emits loadFailed(message) and, unless
// setShowErrorDialogs(false), opens a critical QMessageBox (objectName
// "loadErrorDialog", text = the one-line error) with QDialog::open(): window-modal but
// not blocking, so the caller (and a test) keeps running and can find and close it.
// Runs already open stay open.
#pragma once

#include <QMainWindow>
#include <QString>
#include <QStringList>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "analyzer/analyze.h"
#include "analyzer/report.h"
#include "gui/core/timeline_model.h"
#include "interop/interop.h"

class QComboBox;
class QLabel;
class QMenu;
class QProgressBar;
class QSplitter;
class QTabWidget;
class QTimer;

class QToolButton;

namespace rankscope::gui {

class DetailsPanel;
struct LoadedRun;    // main_window.cc: what a load produces
struct RunAnalysis;  // main_window.cc: what an analysis produces
class LegendStrip;
class OverviewStrip;
class RangeStatsPanel;
class RunPanel;
class ScalingPanel;
class SearchBar;
class TimelineView;

// The options of the analysis behind the Run tab (and of screenshots).
analyzer::AnalyzeOptions ViewerAnalyzeOptions();

// The viewer's model of what the user opened (a run, a rank file, other tools' traces:
// interop::ViewInputs), and in `viewed` what the reading said (for other tools' traces, the
// analysis of the same pass). `progress` as interop::ViewOptions::progress.
Result<std::unique_ptr<TimelineModel>> LoadViewerModel(const std::filesystem::path& input,
                                                       interop::ViewedInputs& viewed,
                                                       std::function<void(int, int)> progress = nullptr,
                                                       const std::atomic<bool>* cancel = nullptr);

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  static constexpr int kMaxRecentFiles = 10;

  explicit MainWindow(QWidget* parent = nullptr);
  ~MainWindow() override;

  // Opens a run directory or one rank file in the background; the window stays responsive
  // (Cancel in the status bar stops it). Other tools' traces (PyTorch profiler JSON, Nsight
  // Systems SQLite, a Chrome export) are read straight into the model and its analysis;
  // their events' fields come from one import on first use (ImportedDetails). A run already
  // open is shown instead of being opened twice.
  void openRun(const QString& path);
  // Opens, analyzes and shows a run before returning; false (after loadFailed and the
  // dialog) when the model cannot be loaded. A failed analysis still returns true: the
  // Run tab shows the error and the timeline works.
  bool openRunBlocking(const QString& path);
  // Closes run `index` (the current one when -1).
  void closeRun(int index = -1);

  int runCount() const { return static_cast<int>(runs_.size()); }
  int currentRun() const { return current_; }
  void setCurrentRun(int index);
  // Stops every load in flight at its next batch (Cancel in the status bar); runs already
  // open stay, and nothing is reported but a status message.
  void cancelLoading();
  QString runPath(int index) const;
  const TimelineModel* currentModel() const;
  const analyzer::Report* currentReport() const;
  // Loads or analyses still running.
  bool isBusy() const { return pending_loads_ + pending_analyses_ > 0; }
  // Processes events until nothing is loading or analyzing; false on timeout.
  bool waitUntilIdle(int timeout_ms = 60000);

  TimelineView* timelineView() const { return timeline_; }
  OverviewStrip* overviewStrip() const { return overview_; }
  RangeStatsPanel* rangeStatsPanel() const { return range_panel_; }
  DetailsPanel* detailsPanel() const { return details_; }
  RunPanel* runPanel() const { return run_panel_; }
  ScalingPanel* scalingPanel() const { return scaling_panel_; }
  SearchBar* searchBar() const { return search_; }
  QTabWidget* sidePanel() const { return tabs_; }
  QComboBox* runSelector() const { return run_selector_; }
  // The status bar's text: the shown run's size, its analysis, and for another tool's trace
  // how many notes its import left (their lines are the text's tooltip and in the Run tab).
  QString statusText() const;

  // Critical message boxes on load errors (default on). loadFailed is emitted either way.
  void setShowErrorDialogs(bool show) { show_error_dialogs_ = show; }
  bool showErrorDialogs() const { return show_error_dialogs_; }
  // Whether opened runs go into the recent-files list (QSettings "rankscope"/"rankscope-gui").
  void setRecordRecentFiles(bool record) { record_recent_ = record; }
  static QStringList recentFiles();

  // The keyboard shortcuts, as an HTML table (Help > Keyboard Shortcuts, README).
  static QString shortcutsHtml();

 signals:
  void runLoaded(int index);  // the timeline can show it
  void analysisFinished(int index, bool ok);
  void loadFailed(const QString& message);

 protected:
  // The timeline's single-key shortcuts (W A S D F Z ?) keep working after a click in a side
  // panel: pressed there, they go to the timeline (text fields keep their typing).
  bool eventFilter(QObject* watched, QEvent* event) override;
  void showEvent(QShowEvent* event) override;
  void dragEnterEvent(QDragEnterEvent* event) override;
  void dropEvent(QDropEvent* event) override;

 private:
  struct Run;
  struct LoadProgress;

  // The index of the open run read from `path` (same file or directory), or -1.
  int OpenIndexOf(const QString& path) const;

  void BuildMenus();
  void BuildLayout();
  void ConnectSignals();
  int AddRun(const QString& path, LoadedRun loaded);
  void StartAnalysis(uint64_t id);
  void ApplyAnalysis(uint64_t id, RunAnalysis analysis);
  void ReportLoadError(const QString& path, const QString& message);
  void AddRecentFile(const QString& path);
  void RebuildRecentMenu();
  void ShowRun(int index);
  // Draws the critical path of the step that holds the event (when the analysis has paths).
  void ShowPathOfStepAt(const EventRef& ref);
  void SaveViewState();
  void UpdateScalingTab();
  // Shows `text` before the status text for `ms` milliseconds.
  void ShowMessage(const QString& text, int ms);
  void UpdateStatus();
  void UpdateProgress();
  void UpdateTitle();
  void StepSearch(bool forward);
  void ShowShortcuts();
  void OpenDirectoryDialog();
  void OpenFileDialog();
  Run* FindRun(uint64_t id);

  std::vector<std::unique_ptr<Run>> runs_;
  int current_ = -1;
  uint64_t next_id_ = 1;
  int pending_loads_ = 0;
  int pending_analyses_ = 0;
  std::vector<std::shared_ptr<LoadProgress>> progress_;
  bool show_error_dialogs_ = true;
  bool record_recent_ = true;

  TimelineView* timeline_ = nullptr;
  OverviewStrip* overview_ = nullptr;
  LegendStrip* legend_ = nullptr;
  QToolButton* cancel_button_ = nullptr;
  SearchBar* search_ = nullptr;
  QComboBox* run_selector_ = nullptr;
  QTabWidget* tabs_ = nullptr;
  RunPanel* run_panel_ = nullptr;
  RangeStatsPanel* range_panel_ = nullptr;
  DetailsPanel* details_ = nullptr;
  ScalingPanel* scaling_panel_ = nullptr;
  QMenu* recent_menu_ = nullptr;
  QLabel* status_label_ = nullptr;
  QLabel* view_label_ = nullptr;
  QProgressBar* progress_bar_ = nullptr;
  QTimer* progress_timer_ = nullptr;
  QSplitter* splitter_ = nullptr;
  bool split_set_ = false;  // the first show sizes the side panel to the window
  // A message shown for a while before the status text (ShowMessage). Not QStatusBar's
  // temporary message: one set before the window is first shown is drawn over the text.
  QString message_;
  QTimer* message_timer_ = nullptr;
};

}  // namespace rankscope::gui
