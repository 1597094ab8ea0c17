#include "gui/widgets/scaling_panel.h"

#include <QHeaderView>
#include <QLabel>
#include <QTableWidget>
#include <QVBoxLayout>

#include <optional>
#include <string>
#include <utility>

#include "base/format.h"
#include "gui/widgets/svg_chart_view.h"
#include "report/scaling_plot.h"

namespace rankscope::gui {
namespace {

QString Str(const std::string& text) { return QString::fromStdString(text); }

QTableWidgetItem* Cell(const QString& text) {
  auto* item = new QTableWidgetItem(text);
  item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
  return item;
}

QString OptionalText(const std::optional<double>& value, std::string (*format)(double)) {
  return value ? Str(format(*value)) : QStringLiteral("-");
}

std::string Throughput(double samples_per_second) { return format::FormatNumber(samples_per_second, 1); }
std::string Efficiency(double efficiency) { return format::FormatPercent(100 * efficiency); }

}  // namespace

ScalingPanel::ScalingPanel(QWidget* parent)
    : QWidget(parent),
      message_(new QLabel(this)),
      chart_(new SvgChartView(this)),
      points_(new QTableWidget(0, 5, this)) {
  auto* layout = new QVBoxLayout(this);
  message_->setWordWrap(true);
  message_->setTextFormat(Qt::RichText);  // the mode in bold; every text from elsewhere escaped
  message_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  layout->addWidget(message_);
  layout->addWidget(chart_, 2);
  points_->setHorizontalHeaderLabels(
      {tr("GPUs"), tr("Batch Size"), tr("Samples/sec"), tr("Scaling Efficiency"), tr("Run")});
  points_->verticalHeader()->hide();
  points_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  points_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  points_->horizontalHeader()->setStretchLastSection(true);
  layout->addWidget(points_, 1);
  ShowError(tr("Open two or more runs of one workload at different world sizes to compare their scaling."));
}

void ScalingPanel::ShowError(const QString& message) {
  has_table_ = false;
  error_ = message;
  message_->setText(message.toHtmlEscaped());
  message_->setStyleSheet(QStringLiteral("color: #b00020;"));
  chart_->clear();
  chart_->hide();
  points_->hide();
}

void ScalingPanel::setReports(const std::vector<const analyzer::Report*>& reports) {
  if (reports.size() < 2) {
    ShowError(tr("Scaling needs two or more analyzed runs (%1 now).").arg(reports.size()));
    return;
  }
  auto table = compare::ComputeScaling(reports);
  if (!table.ok()) {
    ShowError(tr("Scaling: %1").arg(Str(table.status().message())));
    return;
  }
  setTable(std::move(table).value());
}

void ScalingPanel::setTable(compare::ScalingTable table) {
  table_ = std::move(table);
  has_table_ = true;
  error_.clear();
  QString text = tr("<b>Mode</b> (%1): %2")
                     .arg(QString::fromUtf8(compare::ScalingModeName(table_.mode)),
                          Str(format::HtmlEscape(table_.mode_reason)));
  for (const std::string& warning : table_.warnings) text += QStringLiteral("<br>• %1").arg(Str(format::HtmlEscape(warning)));
  message_->setText(text);
  message_->setStyleSheet(QString());

  // The reports' chart, byte for byte; it says itself why there is no projection.
  chart_->setSvg(QByteArray::fromStdString(report::ScalingPlotSvg(table_)));
  chart_->show();

  const size_t projected = table_.projection ? table_.projection->points.size() : 0;
  points_->setRowCount(static_cast<int>(table_.points.size() + projected));
  int row = 0;
  for (const compare::ScalingPoint& point : table_.points) {
    points_->setItem(row, 0, Cell(QString::number(point.world_size)));
    points_->setItem(row, 1, Cell(point.global_batch ? QString::number(*point.global_batch) : QStringLiteral("-")));
    points_->setItem(row, 2, Cell(OptionalText(point.throughput, Throughput)));
    points_->setItem(row, 3, Cell(OptionalText(point.efficiency, Efficiency)));
    auto* run = new QTableWidgetItem(Str(point.run));
    run->setToolTip(run->text());
    points_->setItem(row, 4, run);
    ++row;
  }
  for (size_t i = 0; i < projected; ++i) {
    const compare::ProjectedPoint& point = table_.projection->points[i];
    points_->setItem(row, 0, Cell(QString::number(point.world_size)));
    points_->setItem(row, 1, Cell(QStringLiteral("-")));
    points_->setItem(row, 2, Cell(OptionalText(point.throughput, Throughput)));
    points_->setItem(row, 3, Cell(Str(Efficiency(point.efficiency))));
    auto* run = new QTableWidgetItem(tr("projected (model fit)"));
    run->setForeground(QColor(0x57, 0x60, 0x6a));
    points_->setItem(row, 4, run);
    ++row;
  }
  points_->show();
}

}  // namespace rankscope::gui
