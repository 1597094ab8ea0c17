// The "Scaling" tab (two or more runs open): docs/metrics.md §6 via compare::ComputeScaling,
// as charts (efficiency against world size with the ideal 1.0; throughput against the
// ideal) and a table of the points.
#pragma once

#include <QString>
#include <QWidget>

#include <vector>

#include "analyzer/report.h"
#include "compare/scaling.h"

class QLabel;
class QTableWidget;

QT_BEGIN_NAMESPACE
class QChartView;
QT_END_NAMESPACE

namespace rankscope::gui {

class ScalingPanel : public QWidget {
  Q_OBJECT

 public:
  explicit ScalingPanel(QWidget* parent = nullptr);

  // Computes the scaling table over `reports` (not kept). Fewer than two reports, or an
  // error from ComputeScaling, shows the error text instead of the charts.
  void setReports(const std::vector<const analyzer::Report*>& reports);

  bool hasTable() const { return has_table_; }
  const compare::ScalingTable& table() const { return table_; }
  QString errorText() const { return error_; }

 private:
  void ShowError(const QString& message);

  QLabel* message_ = nullptr;
  QChartView* efficiency_ = nullptr;
  QChartView* throughput_ = nullptr;
  QTableWidget* points_ = nullptr;
  compare::ScalingTable table_;
  bool has_table_ = false;
  QString error_;
};

}  // namespace rankscope::gui
