#include "gui/widgets/run_panel.h"

#include <QFontDatabase>
#include <QHeaderView>
#include <QHelpEvent>
#include <QLabel>
#include <QMouseEvent>
#include <QPainter>
#include <QPlainTextEdit>
#include <QScrollArea>
#include <QTableWidget>
#include <QTextDocument>
#include <QToolButton>
#include <QToolTip>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "report/report_format.h"
#include "report/report_writers.h"
#include "gui/widgets/event_colors.h"
#include "gui/widgets/value_text.h"

namespace rankscope::gui {
namespace {

using analyzer::EventClass;

constexpr int kBarGapPx = 4;
constexpr int kLegendPx = 20;

QString Str(const std::string& text) { return QString::fromStdString(text); }

// Metric keys as words: "exposed_comm_ns" -> "exposed comm".
QString MetricTitle(const std::string& name) {
  QString title = Str(name);
  for (const char* suffix : {"_ns", "_pct"}) {
    if (title.endsWith(QLatin1String(suffix))) title.chop(static_cast<int>(std::strlen(suffix)));
  }
  title.replace(QLatin1Char('_'), QLatin1Char(' '));
  if (Str(name).endsWith(QLatin1String("_pct"))) title += QStringLiteral(" %");
  if (title == QLatin1String("step")) title = QStringLiteral("step time");
  return title;
}

struct Part {
  int64_t ns;
  QColor color;
  const char* name;
};

std::vector<Part> Parts(const analyzer::Breakdown& b) {
  return {{b.compute_only_ns, EventClassColor(EventClass::kCompute), "compute only"},
          {b.overlap_ns, OverlapColor(), "overlap"},
          {b.comm_only_ns, EventClassColor(EventClass::kComm), "comm only"},
          {b.memory_only_ns, EventClassColor(EventClass::kMemory), "memory only"},
          {b.idle_ns, IdleColor(), "idle"}};
}

}  // namespace


// ---- BreakdownBars ---------------------------------------------------------------------

BreakdownBars::BreakdownBars(QWidget* parent) : QWidget(parent) {
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
  setMouseTracking(true);
}

void BreakdownBars::setReport(const analyzer::Report* report) {
  report_ = report;
  updateGeometry();
  update();
}

int BreakdownBars::barCount() const { return report_ ? static_cast<int>(report_->ranks.size()) : 0; }

QSize BreakdownBars::sizeHint() const { return {360, barCount() * (kBarPx + kBarGapPx) + kLegendPx + 4}; }
QSize BreakdownBars::minimumSizeHint() const { return {kLabelPx + 80, sizeHint().height()}; }

// The bar leaves room on its right for the utilization text, so the text never covers it.
int BreakdownBars::UtilizationPx() const { return QFontMetrics(font()).horizontalAdvance(tr("100.0% busy")) + 8; }

QRect BreakdownBars::barRect(int index) const {
  return {kLabelPx, index * (kBarPx + kBarGapPx), std::max(10, width() - kLabelPx - 4 - UtilizationPx()), kBarPx};
}

bool BreakdownBars::IsStraggler(int rank) const {
  const auto& s = report_->cross_rank.stragglers;
  return std::find(s.begin(), s.end(), rank) != s.end();
}

int BreakdownBars::IndexAt(const QPoint& pos) const {
  for (int i = 0; i < barCount(); ++i) {
    const QRect bar = barRect(i);
    if (pos.y() >= bar.top() && pos.y() <= bar.bottom() + kBarGapPx) return i;
  }
  return -1;
}

void BreakdownBars::paintEvent(QPaintEvent*) {
  QPainter p(this);
  if (!report_) return;
  const QFontMetrics fm(font());
  for (int i = 0; i < barCount(); ++i) {
    const analyzer::DeviceReport& device = report_->ranks[i];
    const QRect bar = barRect(i);
    const bool straggler = IsStraggler(device.rank);
    QFont label_font = font();
    label_font.setBold(straggler);
    p.setFont(label_font);
    p.setPen(straggler ? QColor(0xc6, 0x28, 0x28) : palette().color(QPalette::WindowText));
    const QString label = Str(report::DeviceLabel(device.rank, device.device)) + (straggler ? tr("  straggler") : QString());
    p.drawText(QRect(2, bar.top(), kLabelPx - 6, bar.height()), Qt::AlignVCenter | Qt::AlignLeft,
               QFontMetrics(label_font).elidedText(label, Qt::ElideRight, kLabelPx - 6));
    const int64_t window = std::max<int64_t>(device.totals.window_ns, 1);
    double x = bar.left();
    for (const Part& part : Parts(device.totals)) {
      const double w = static_cast<double>(part.ns) / window * bar.width();
      const int x0 = static_cast<int>(std::lround(x));
      const int x1 = static_cast<int>(std::lround(x + w));
      if (x1 > x0) p.fillRect(QRect(x0, bar.top(), x1 - x0, bar.height()), part.color);
      x += w;
    }
    p.setPen(straggler ? QColor(0xc6, 0x28, 0x28) : QColor(0xa0, 0xa0, 0xa0));
    p.drawRect(bar.adjusted(0, 0, -1, -1));
    // Utilization beside the bar's right end, in its own column.
    const QString util = tr("%1 busy").arg(PercentText(device.totals.utilization_pct));
    p.setFont(font());
    p.setPen(QColor(0x30, 0x30, 0x30));
    p.drawText(QRect(bar.right() + 6, bar.top(), UtilizationPx() - 2, bar.height()), Qt::AlignVCenter | Qt::AlignLeft,
               util);
  }
  // Legend.
  int x = 2;
  const int y = barCount() * (kBarPx + kBarGapPx) + 4;
  p.setFont(font());
  for (const Part& part : Parts(analyzer::Breakdown())) {
    p.fillRect(QRect(x, y + 3, 10, 10), part.color);
    x += 14;
    const QString name = tr(part.name);
    p.setPen(palette().color(QPalette::WindowText));
    p.drawText(QRect(x, y, fm.horizontalAdvance(name) + 2, 16), Qt::AlignVCenter, name);
    x += fm.horizontalAdvance(name) + 12;
  }
}

void BreakdownBars::mousePressEvent(QMouseEvent* event) {
  const int index = IndexAt(event->position().toPoint());
  if (event->button() == Qt::LeftButton && index >= 0) emit rankClicked(report_->ranks[index].rank);
}

bool BreakdownBars::event(QEvent* event) {
  if (event->type() == QEvent::ToolTip && report_) {
    auto* help = static_cast<QHelpEvent*>(event);
    const int index = IndexAt(help->pos());
    if (index < 0) {
      QToolTip::hideText();
      return true;
    }
    const analyzer::DeviceReport& device = report_->ranks[index];
    QString text = Str(report::DeviceLabel(device.rank, device.device)) +
                   tr(" — whole trace, %1").arg(DurationText(device.totals.window_ns));
    const int64_t window = std::max<int64_t>(device.totals.window_ns, 1);
    for (const Part& part : Parts(device.totals)) {
      text += QStringLiteral("\n%1: %2 (%3)")
                  .arg(tr(part.name), DurationText(part.ns),
                       PercentText(100.0 * static_cast<double>(part.ns) / static_cast<double>(window)));
    }
    text += tr("\nclick: show this rank in the timeline");
    QToolTip::showText(help->globalPos(), text, this);
    return true;
  }
  return QWidget::event(event);
}

// ---- The run's end ----------------------------------------------------------------------

QString RunEndHtml(const analyzer::HangReport& diagnosis) {
  QString html = QStringLiteral("<p style='margin:0 0 4px 0'><b style='color:#b71c1c; font-size:large'>%1</b>%2</p>")
                     .arg(HtmlText(report::RunEndHeading(diagnosis)),
                          diagnosis.live ? QObject::tr(" (read while a process still recorded)") : QString());
  html += QStringLiteral("<p style='margin:0 0 4px 0'>%1</p>").arg(HtmlText(diagnosis.summary));
  if (!diagnosis.culprits.empty()) {
    QStringList culprits;
    for (const analyzer::Culprit& culprit : diagnosis.culprits) {
      QStringList reasons;
      for (const std::string& reason : culprit.reasons) reasons << HtmlText(reason);
      culprits << QStringLiteral("<a href='rank:%1'>rank %1</a> (%2)").arg(culprit.rank).arg(reasons.join(QStringLiteral(", ")));
    }
    html += QObject::tr("<p style='margin:0 0 4px 0'><b>Culprits</b> (click to show in the timeline): %1</p>")
                .arg(culprits.join(QStringLiteral(" · ")));
  }
  QString details;
  for (const analyzer::CommunicatorEnd* comm : report::CommunicatorsToShow(diagnosis)) {
    details += QStringLiteral("• %1<br>").arg(HtmlText(report::CommunicatorLine(*comm)));
  }
  details += QStringLiteral("• %1").arg(HtmlText(report::RankEndsLine(diagnosis)));
  return html + QStringLiteral("<p style='margin:0; color:#555'>%1</p>").arg(details);
}

// ---- RunPanel --------------------------------------------------------------------------

RunPanel::RunPanel(QWidget* parent) : QWidget(parent) {
  auto* outer = new QVBoxLayout(this);
  outer->setContentsMargins(0, 0, 0, 0);
  auto* scroll = new QScrollArea(this);
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  outer->addWidget(scroll);
  auto* content = new QWidget(scroll);
  scroll->setWidget(content);
  auto* layout = new QVBoxLayout(content);
  layout->setContentsMargins(6, 6, 6, 6);  // the side panel's narrowest fits a 32-digit run id

  diagnosis_label_ = new QLabel(content);
  diagnosis_label_->setObjectName(QStringLiteral("runEndDiagnosis"));
  diagnosis_label_->setWordWrap(true);
  diagnosis_label_->setTextFormat(Qt::RichText);
  diagnosis_label_->setTextInteractionFlags(Qt::TextBrowserInteraction);
  diagnosis_label_->setOpenExternalLinks(false);
  diagnosis_label_->setStyleSheet(QStringLiteral(
      "QLabel#runEndDiagnosis { background: #fdecea; border: 1px solid #e3a3a3; border-radius: 3px; padding: 6px; }"));
  diagnosis_label_->hide();
  connect(diagnosis_label_, &QLabel::linkActivated, this, [this](const QString& link) {
    bool ok = false;
    const int rank = link.startsWith(QLatin1String("rank:")) ? link.mid(5).toInt(&ok) : 0;
    if (ok) emit rankClicked(rank);
  });
  status_ = new QLabel(content);
  status_->setWordWrap(true);
  status_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  import_notes_ = new QLabel(content);
  import_notes_->setObjectName(QStringLiteral("importNotes"));
  import_notes_->setWordWrap(true);
  import_notes_->setTextFormat(Qt::RichText);
  import_notes_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  import_notes_->hide();
  summary_ = new QLabel(content);
  summary_->setWordWrap(true);
  summary_->setTextFormat(Qt::RichText);
  summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  metrics_ = new QTableWidget(0, 4, content);
  metrics_->setHorizontalHeaderLabels({tr("Metric (per step)"), tr("Median"), tr("Worst"), tr("Worst rank")});
  metrics_->verticalHeader()->hide();
  metrics_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  metrics_->setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  metrics_->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  metrics_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  metrics_->horizontalHeader()->setSectionResizeMode(0, QHeaderView::Stretch);
  metrics_->setAlternatingRowColors(true);
  metrics_->verticalHeader()->setDefaultSectionSize(QFontMetrics(font()).height() + 6);
  bars_title_ = new QLabel(tr("<b>Where the time went</b> (whole trace, per rank and device; click a bar to show "
                              "the rank)"),
                           content);
  bars_title_->setWordWrap(true);
  bars_ = new BreakdownBars(content);
  warnings_ = new QLabel(content);
  warnings_->setWordWrap(true);
  warnings_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  text_toggle_ = new QToolButton(content);
  text_toggle_->setText(tr("Show the text report"));
  text_toggle_->setCheckable(true);
  text_report_ = new QPlainTextEdit(content);
  text_report_->setReadOnly(true);
  text_report_->setLineWrapMode(QPlainTextEdit::NoWrap);
  text_report_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  text_report_->setMinimumHeight(300);
  text_report_->hide();
  connect(text_toggle_, &QToolButton::toggled, this, [this](bool on) {
    text_report_->setVisible(on);
    text_toggle_->setText(on ? tr("Hide the text report") : tr("Show the text report"));
  });
  connect(bars_, &BreakdownBars::rankClicked, this, &RunPanel::rankClicked);

  layout->addWidget(diagnosis_label_);
  layout->addWidget(import_notes_);
  layout->addWidget(status_);
  layout->addWidget(summary_);
  layout->addWidget(metrics_);
  layout->addWidget(bars_title_);
  layout->addWidget(bars_);
  layout->addWidget(warnings_);
  layout->addWidget(text_toggle_, 0, Qt::AlignLeft);
  layout->addWidget(text_report_);
  layout->addStretch(1);
  clear();
}

void RunPanel::clear() {
  setImportNotes({});
  report_.reset();
  diagnosis_.reset();
  error_.clear();
  status_->setText(tr("No run open."));
  status_->setStyleSheet(QString());
  status_->show();
  Fill();
}

void RunPanel::setImportNotes(const std::vector<std::string>& notes) {
  notes_ = notes;
  QString html = tr("<b>Imported</b>: what the importer noted<br>");
  for (const std::string& note : notes_) html += QStringLiteral("• %1<br>").arg(HtmlText(note));
  import_notes_->setText(notes_.empty() ? QString() : html);
  import_notes_->setVisible(!notes_.empty());
}

QString RunPanel::importNotesText() const {
  QString text;
  for (const std::string& note : notes_) text += Str(note) + QLatin1Char('\n');
  return text;
}

void RunPanel::setAnalyzing() {
  report_.reset();
  diagnosis_.reset();
  error_.clear();
  status_->setText(tr("Analyzing the run…"));
  status_->setStyleSheet(QString());
  status_->show();
  Fill();
}

void RunPanel::setError(const QString& message, std::optional<analyzer::HangReport> diagnosis) {
  report_.reset();
  diagnosis_ = std::move(diagnosis);
  error_ = message;
  status_->setText(tr("Analysis failed: %1\nThe timeline stays usable.").arg(message));
  status_->setStyleSheet(QStringLiteral("color: #b00020;"));
  status_->show();
  Fill();
}

void RunPanel::setReport(std::shared_ptr<const analyzer::Report> report) {
  report_ = std::move(report);
  diagnosis_ = report_ ? report_->did_not_finish : std::nullopt;
  error_.clear();
  status_->setStyleSheet(QString());
  status_->setVisible(false);
  Fill();
}

void RunPanel::ShowDiagnosis() {
  diagnosis_label_->setText(diagnosis_ ? RunEndHtml(*diagnosis_) : QString());
  diagnosis_label_->setVisible(diagnosis_.has_value());
}

QString RunPanel::diagnosisText() const {
  if (!diagnosis_) return {};
  QTextDocument doc;
  doc.setHtml(diagnosis_label_->text());
  return doc.toPlainText();
}

void RunPanel::Fill() {
  ShowDiagnosis();
  const analyzer::Report* report = report_.get();
  const bool has = report != nullptr;
  summary_->setVisible(has);
  metrics_->setVisible(has);
  bars_title_->setVisible(has && !report->ranks.empty());
  bars_->setVisible(has && !report->ranks.empty());
  warnings_->setVisible(has && !report->warnings.empty());
  text_toggle_->setVisible(has);
  text_report_->setVisible(has && text_toggle_->isChecked());
  bars_->setReport(report);
  if (!has) {
    metrics_->setRowCount(0);
    text_report_->clear();
    return;
  }

  // Every line and cell comes from the analyzer's formatting (report/report_format.h), so
  // the Run tab reads exactly as `rankscope analyze` prints.
  auto row = [](const QString& label, const QString& value_html) {
    return QStringLiteral(
               "<tr><td style='color:#555; padding-right:10px; white-space:nowrap'>%1</td>"
               "<td>%2</td></tr>")
        .arg(label.toHtmlEscaped(), value_html);
  };
  auto line_row = [&](const std::string& line, bool alert) {  // "label: value" lines
    const size_t colon = line.find(": ");
    if (line.empty() || colon == std::string::npos) return QString();
    QString value = HtmlText(line.substr(colon + 2));
    if (alert) value = QStringLiteral("<span style='color:#c62828; font-weight:bold'>%1</span>").arg(value);
    return row(Str(line.substr(0, colon)), value);
  };
  QString html = QStringLiteral("<table cellspacing='1'>");
  for (const auto& [label, value] : report::SummaryItems(*report)) {
    const bool headline = label == "step time" || label == "throughput";
    const QString escaped = HtmlText(value);
    html += row(Str(label), headline ? QStringLiteral("<b>%1</b>").arg(escaped) : escaped);
  }
  html += line_row(report::CollectiveSourceLine(*report), false);
  html += line_row(report::ClockLine(*report), false);
  html += line_row(report::StragglerLine(*report), !report->cross_rank.stragglers.empty());
  html += line_row(report::StrategyLine(*report), false);
  if (const auto& pipeline = report->parallelism.pipeline) {
    html += row(tr("pipeline bubble"),
                HtmlText(fmt::format("{} (ideal {}): {}", format::FormatPercent(pipeline->bubble_pct),
                                     format::FormatPercent(pipeline->ideal_bubble_pct), pipeline->diagnosis)));
  }
  for (const std::string& line : report::MemoryLines(*report)) html += line_row(line, false);
  if (const std::string path = report::CriticalPathLine(*report); !path.empty()) {
    html += line_row(path + " (select an event to see its step's path)", false);
  }
  html += QStringLiteral("</table>");
  summary_->setText(html);

  const report::Table table = report::RunMetricTable(*report);
  const analyzer::RunSummary& summary = report->summary;
  metrics_->setRowCount(static_cast<int>(table.rows.size()));
  for (size_t i = 0; i < table.rows.size(); ++i) {
    const std::vector<std::string>& cells = table.rows[i];
    const int r = static_cast<int>(i);
    auto cell = [](const QString& text, bool numeric) {
      auto* item = new QTableWidgetItem(text);
      if (numeric) item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
      return item;
    };
    auto* name = cell(MetricTitle(summary.metrics[i].name), false);
    name->setToolTip(Str(summary.metrics[i].name) +
                     (summary.metrics[i].higher_is_better ? tr(" (higher is better)") : tr(" (lower is better)")));
    metrics_->setItem(r, 0, name);
    for (int c = 1; c <= 3; ++c) metrics_->setItem(r, c, cell(Str(cells[static_cast<size_t>(c)]), table.numeric[static_cast<size_t>(c)]));
  }
  // No inner scrolling: the table is as tall as its rows.
  int height = metrics_->horizontalHeader()->height() + 4;
  for (int r = 0; r < metrics_->rowCount(); ++r) height += metrics_->rowHeight(r);
  metrics_->setFixedHeight(height);

  QString warnings;
  for (const std::string& w : report->warnings) warnings += QStringLiteral("• %1<br>").arg(HtmlText(w));
  warnings_->setText(tr("<b>Warnings</b><br>") + warnings);
  text_report_->setPlainText(Str(report::ReportToText(*report)));
}

QString RunPanel::summaryText() const {
  QString text;
  if (status_->isVisibleTo(this)) text += status_->text() + QLatin1Char('\n');
  if (report_) {
    QTextDocument doc;
    doc.setHtml(summary_->text());
    text += doc.toPlainText() + QLatin1Char('\n');
    for (int r = 0; r < metrics_->rowCount(); ++r) {
      QStringList cells;
      for (int c = 0; c < metrics_->columnCount(); ++c) cells << metrics_->item(r, c)->text();
      text += cells.join(QStringLiteral("  ")) + QLatin1Char('\n');
    }
  }
  return text;
}

}  // namespace rankscope::gui
