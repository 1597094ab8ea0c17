// The "Run" tab: the numbers `rankscope analyze` prints, from the analyzer's Report (run
// summary, run metrics with their worst rank, stragglers, warnings), with one stacked
// bar per rank and device of where its time went; clicking a bar asks the timeline to
// scroll to that rank. The full text report is one click away. Above it all, for another
// tool's trace, the importer's notes (what it left out, how it chose ranks and times),
// whether or not the analysis succeeds. Above everything, for a run that did not finish
// (a hang, a mismatch, killed ranks), the diagnosis: its verdict, its paragraph and its
// culprits, each a link to its rank in the timeline.
#pragma once

#include <QWidget>

#include <memory>
#include <optional>
#include <vector>

#include "analyzer/report.h"

class QLabel;
class QPlainTextEdit;
class QTableWidget;
class QToolButton;

namespace rankscope::gui {

// One horizontal bar per DeviceReport: compute only, overlap, comm only, memory only and
// idle as shares of its window (Breakdown::window_ns). Straggler ranks are labelled red.
class BreakdownBars : public QWidget {
  Q_OBJECT

 public:
  static constexpr int kBarPx = 18;
  static constexpr int kLabelPx = 180;

  explicit BreakdownBars(QWidget* parent = nullptr);
  // Not owned: must stay alive until the next call.
  void setReport(const analyzer::Report* report);
  // The bar's rectangle for DeviceReport `index` (for tests and hit-testing).
  QRect barRect(int index) const;
  int UtilizationPx() const;  // the column of "97.0% busy" right of the bars
  int barCount() const;

  QSize sizeHint() const override;
  QSize minimumSizeHint() const override;

 signals:
  void rankClicked(int rank);

 protected:
  void paintEvent(QPaintEvent* event) override;
  void mousePressEvent(QMouseEvent* event) override;
  bool event(QEvent* event) override;

 private:
  int IndexAt(const QPoint& pos) const;
  bool IsStraggler(int rank) const;

  const analyzer::Report* report_ = nullptr;
};

// The heading, paragraph, culprits (as "rank:N" links), communicators and file ends of a
// diagnosis, as rich text: what the Run tab shows of a run that did not finish.
QString RunEndHtml(const analyzer::HangReport& diagnosis);

class RunPanel : public QWidget {
  Q_OBJECT

 public:
  explicit RunPanel(QWidget* parent = nullptr);

  // "Analyzing…" while the report is computed.
  void setAnalyzing();
  void setReport(std::shared_ptr<const analyzer::Report> report);
  // The analysis failed: the error line instead of the numbers, under the diagnosis of the
  // run's end when there is one (analyzer::DiagnoseRun: a run that hung before anything
  // measurable).
  void setError(const QString& message, std::optional<analyzer::HangReport> diagnosis = std::nullopt);
  void clear();
  // The notes of the import the run was read through (interop::ViewedInputs::notes); none
  // for a rankscope run. Kept until the next call or clear().
  void setImportNotes(const std::vector<std::string>& notes);
  // The notes shown, one line each ("" when none).
  QString importNotesText() const;

  const analyzer::Report* report() const { return report_.get(); }
  QString errorText() const { return error_; }
  // The run's end diagnosis shown (Report::did_not_finish, or setError's); nullptr when none.
  const analyzer::HangReport* diagnosis() const { return diagnosis_ ? &*diagnosis_ : nullptr; }
  // Its text as shown ("" when none); the label's objectName is "runEndDiagnosis", and its
  // culprit links are "rank:N".
  QString diagnosisText() const;
  // The summary and metrics as plain text (what the tab shows, for tests).
  QString summaryText() const;
  BreakdownBars* breakdownBars() const { return bars_; }

 signals:
  void rankClicked(int rank);

 private:
  void Fill();
  void ShowDiagnosis();

  std::shared_ptr<const analyzer::Report> report_;
  QString error_;
  std::optional<analyzer::HangReport> diagnosis_;
  QLabel* diagnosis_label_ = nullptr;
  QLabel* status_ = nullptr;
  QLabel* import_notes_ = nullptr;
  std::vector<std::string> notes_;
  QLabel* summary_ = nullptr;
  QTableWidget* metrics_ = nullptr;
  QLabel* bars_title_ = nullptr;
  BreakdownBars* bars_ = nullptr;
  QLabel* warnings_ = nullptr;
  QToolButton* text_toggle_ = nullptr;
  QPlainTextEdit* text_report_ = nullptr;
};

}  // namespace rankscope::gui
