// The "Range" tab: docs/metrics.md §3 over the selected time range, per rank and device
// (compute, comm, overlap, idle, utilization), and the range's top activities, from
// core MeasureDisplayRange. Large ranges are measured on a worker thread.
#pragma once

#include <QFutureWatcher>
#include <QWidget>

#include <cstdint>
#include <memory>
#include <vector>

#include "analyzer/range_stats.h"
#include "gui/core/timeline_model.h"

class QLabel;
class QTableWidget;

namespace rankscope::gui {

class RangeStatsPanel : public QWidget {
  Q_OBJECT

 public:
  // Ranges estimated to hold more events than this are measured off the UI thread.
  static constexpr size_t kSyncEventLimit = 200000;
  static constexpr size_t kTopActivities = 10;

  explicit RangeStatsPanel(QWidget* parent = nullptr);
  ~RangeStatsPanel() override;

  // Measures [t0, t1) (common clock) of `model`. The model is shared so that a measurement
  // still running keeps it alive; the caller must not change its clock (ApplyClockAlignment)
  // before waitForIdle().
  void setRange(std::shared_ptr<const TimelineModel> model, int64_t t0, int64_t t1);
  void clear();
  // Blocks until a measurement in flight has been shown.
  void waitForIdle();
  bool busy() const;

  // The last statistics shown (empty before the first range or after clear()).
  const std::vector<analyzer::RangeDeviceStats>& stats() const { return stats_; }
  int64_t rangeStart() const { return t0_; }
  int64_t rangeEnd() const { return t1_; }

 signals:
  // The table now shows the statistics of [t0, t1).
  void statsReady(qint64 t0, qint64 t1);

 private:
  void Show(std::vector<analyzer::RangeDeviceStats> stats);

  QLabel* title_ = nullptr;
  QTableWidget* devices_ = nullptr;
  QTableWidget* top_ = nullptr;
  QFutureWatcher<std::vector<analyzer::RangeDeviceStats>>* watcher_ = nullptr;
  std::shared_ptr<const TimelineModel> model_;
  int64_t t0_ = 0, t1_ = 0;
  uint64_t generation_ = 0;  // drops results of ranges that were replaced meanwhile
  uint64_t watched_generation_ = 0;
  bool pending_ = false;  // a measurement runs for the current range
  QString span_text_;
  std::vector<analyzer::RangeDeviceStats> stats_;
};

}  // namespace rankscope::gui
