#include "gui/widgets/scaling_panel.h"

#include <QChart>
#include <QChartView>
#include <QHeaderView>
#include <QLabel>
#include <QLegend>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QScatterSeries>
#include <QTableWidget>
#include <QVBoxLayout>
#include <QValueAxis>

#include <algorithm>
#include <cmath>
#include <utility>

#include "gui/widgets/event_colors.h"

namespace rankscope::gui {
namespace {

QChartView* MakeChartView(QWidget* parent) {
  auto* view = new QChartView(parent);
  view->setRenderHint(QPainter::Antialiasing);
  view->setMinimumHeight(220);
  return view;
}

// setChart releases the previous chart without deleting it.
void ReplaceChart(QChartView* view, QChart* chart) {
  QChart* previous = view->chart();
  view->setChart(chart);
  delete previous;
}

QTableWidgetItem* Cell(const QString& text) {
  auto* item = new QTableWidgetItem(text);
  item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
  return item;
}

// A chart over world sizes on a log2 axis (1, 2, 4, 8...: how runs usually scale), with a
// y axis from 0 to `y_max` in `y_ticks` steps.
QChart* MakeChart(const QString& title, const QString& y_title, double x_min, double x_max, double y_max, int y_ticks,
                  const char* y_format, const std::vector<QLineSeries*>& series) {
  auto* chart = new QChart();
  chart->setTitle(title);
  chart->legend()->setAlignment(Qt::AlignBottom);
  auto* x = new QLogValueAxis(chart);
  x->setBase(2);
  x->setTitleText(QObject::tr("GPUs (world size)"));
  x->setLabelFormat(QStringLiteral("%d"));
  x->setRange(std::max(0.5, x_min / 1.3), x_max * 1.3);
  x->setMinorTickCount(-1);
  auto* y = new QValueAxis(chart);
  y->setTitleText(y_title);
  y->setRange(0, y_max);
  y->setTickCount(y_ticks);
  y->setLabelFormat(QString::fromLatin1(y_format));
  chart->addAxis(x, Qt::AlignBottom);
  chart->addAxis(y, Qt::AlignLeft);
  for (QLineSeries* s : series) {
    chart->addSeries(s);
    s->attachAxis(x);
    s->attachAxis(y);
  }
  return chart;
}

// A round axis maximum above `value` with about five steps: 1, 2 or 5 times a power of ten.
std::pair<double, int> NiceAxis(double value) {
  if (!(value > 0)) return {1.0, 6};
  const double raw_step = value / 5;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw_step)));
  double step = magnitude;
  for (const double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    step = m * magnitude;
    if (step >= raw_step) break;
  }
  const int steps = static_cast<int>(std::ceil(value / step - 1e-9));
  return {steps * step, steps + 1};
}

}  // namespace

ScalingPanel::ScalingPanel(QWidget* parent)
    : QWidget(parent),
      message_(new QLabel(this)),
      efficiency_(MakeChartView(this)),
      throughput_(MakeChartView(this)),
      points_(new QTableWidget(0, 5, this)) {
  auto* layout = new QVBoxLayout(this);
  message_->setWordWrap(true);
  message_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  layout->addWidget(message_);
  layout->addWidget(efficiency_, 1);
  layout->addWidget(throughput_, 1);
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
  message_->setText(message);
  message_->setStyleSheet(QStringLiteral("color: #b00020;"));
  efficiency_->hide();
  throughput_->hide();
  points_->hide();
}

void ScalingPanel::setReports(const std::vector<const analyzer::Report*>& reports) {
  if (reports.size() < 2) {
    ShowError(tr("Scaling needs two or more analyzed runs (%1 now).").arg(reports.size()));
    return;
  }
  auto table = compare::ComputeScaling(reports);
  if (!table.ok()) {
    ShowError(tr("Scaling: %1").arg(QString::fromStdString(table.status().message())));
    return;
  }
  table_ = std::move(table).value();
  has_table_ = true;
  error_.clear();
  QString text = tr("<b>Mode</b> (%1): %2")
                     .arg(QString::fromUtf8(compare::ScalingModeName(table_.mode)),
                          QString::fromStdString(table_.mode_reason).toHtmlEscaped());
  for (const std::string& w : table_.warnings)
    text += QStringLiteral("<br>• %1").arg(QString::fromStdString(w).toHtmlEscaped());
  message_->setText(text);
  message_->setStyleSheet(QString());

  auto* efficiency = new QLineSeries();
  efficiency->setName(tr("efficiency"));
  efficiency->setPointsVisible(true);
  efficiency->setPen(QPen(EventClassColor(analyzer::EventClass::kCompute), 2.5));
  auto* ideal = new QLineSeries();
  ideal->setName(tr("ideal (1.0)"));
  ideal->setPen(QPen(Qt::gray, 1.5, Qt::DashLine));
  auto* throughput = new QLineSeries();
  throughput->setName(tr("samples/s"));
  throughput->setPointsVisible(true);
  throughput->setPen(QPen(EventClassColor(analyzer::EventClass::kCompute), 2.5));
  auto* ideal_throughput = new QLineSeries();
  ideal_throughput->setName(tr("ideal samples/s"));
  ideal_throughput->setPen(QPen(Qt::gray, 1.5, Qt::DashLine));

  double x_min = table_.points.empty() ? 0 : table_.points.front().world_size;
  double x_max = x_min;
  double eff_max = 1.0, thr_max = 0;
  points_->setRowCount(static_cast<int>(table_.points.size()));
  for (size_t i = 0; i < table_.points.size(); ++i) {
    const compare::ScalingPoint& point = table_.points[i];
    const double n = point.world_size;
    x_min = std::min(x_min, n);
    x_max = std::max(x_max, n);
    if (point.efficiency) {
      efficiency->append(n, *point.efficiency);
      eff_max = std::max(eff_max, *point.efficiency);
    }
    if (point.throughput) {
      throughput->append(n, *point.throughput);
      thr_max = std::max(thr_max, *point.throughput);
    }
    if (point.ideal_throughput) {
      ideal_throughput->append(n, *point.ideal_throughput);
      thr_max = std::max(thr_max, *point.ideal_throughput);
    }
    const int r = static_cast<int>(i);
    points_->setItem(r, 0, Cell(QString::number(point.world_size)));
    points_->setItem(r, 1, Cell(point.global_batch ? QString::number(*point.global_batch) : QStringLiteral("-")));
    points_->setItem(r, 2, Cell(point.throughput ? QString::number(*point.throughput, 'f', 1) : QStringLiteral("-")));
    points_->setItem(
        r, 3,
        Cell(point.efficiency ? QStringLiteral("%1%").arg(*point.efficiency * 100, 0, 'f', 1) : QStringLiteral("-")));
    auto* run = new QTableWidgetItem(QString::fromStdString(point.run));
    run->setToolTip(run->text());
    points_->setItem(r, 4, run);
  }
  ideal->append(x_min, 1.0);
  ideal->append(x_max, 1.0);

  // Efficiency from 0 to a little above the ideal 1.0 (or the best point), in steps of 0.2.
  const double eff_top = std::max(1.2, std::ceil(eff_max * 5 + 0.5) / 5);
  ReplaceChart(efficiency_, MakeChart(tr("Scaling efficiency"), tr("efficiency"), x_min, x_max, eff_top,
                                      static_cast<int>(std::lround(eff_top / 0.2)) + 1, "%.1f", {ideal, efficiency}));
  if (throughput->count() > 0) {
    const auto [thr_top, thr_ticks] = NiceAxis(thr_max * 1.05);
    ReplaceChart(throughput_, MakeChart(tr("Throughput against ideal"), tr("samples/s"), x_min, x_max, thr_top,
                                        thr_ticks, "%.0f", {ideal_throughput, throughput}));
    throughput_->show();
  } else {
    // Without a batch size there is no throughput: say so rather than draw empty axes.
    delete throughput;
    delete ideal_throughput;
    throughput_->hide();
    message_->setText(message_->text() + tr("<br>No throughput chart: the runs do not record their batch size."));
  }
  efficiency_->show();
  points_->show();
}

}  // namespace rankscope::gui
