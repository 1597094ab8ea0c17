// The "Scaling" tab (two or more runs open): docs/metrics.md §6 via compare::ComputeScaling,
// as the very chart the reports draw (report::ScalingPlotSvg: efficiency and throughput
// against world size beside the ideal, the projection dashed), and a table of the points,
// measured and projected, with their runs.
#pragma once

#include <QString>
#include <QWidget>

#include <vector>

#include "analyzer/report.h"
#include "compare/scaling.h"

class QLabel;
class QTableWidget;

namespace rankscope::gui {

class SvgChartView;

class ScalingPanel : public QWidget {
  Q_OBJECT

 public:
  explicit ScalingPanel(QWidget* parent = nullptr);

  // Computes the scaling table over `reports` (not kept). Fewer than two reports, or an
  // error from ComputeScaling, shows the error text instead of the chart.
  void setReports(const std::vector<const analyzer::Report*>& reports);
  // Shows a table already computed.
  void setTable(compare::ScalingTable table);

  bool hasTable() const { return has_table_; }
  const compare::ScalingTable& table() const { return table_; }
  QString errorText() const { return error_; }
  // The chart (hidden while there is no table) and the points' table, for tests.
  SvgChartView* chartView() const { return chart_; }
  QTableWidget* pointsTable() const { return points_; }

 private:
  void ShowError(const QString& message);

  QLabel* message_ = nullptr;
  SvgChartView* chart_ = nullptr;
  QTableWidget* points_ = nullptr;
  compare::ScalingTable table_;
  bool has_table_ = false;
  QString error_;
};

}  // namespace rankscope::gui
