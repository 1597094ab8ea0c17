// The overview above the timeline: each rank's activity over the whole run, squeezed into
// ~400 buckets (busy time per class), with the timeline's visible range drawn on top.
// Clicking centers the timeline there; dragging selects the window the timeline shows.
#pragma once

#include <QPixmap>
#include <QWidget>

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "gui/core/timeline_model.h"

namespace rankscope::gui {

// Busy time per class and bucket, for each rank, on the common clock.
struct OverviewData {
  int64_t start_ns = 0, end_ns = 0;
  int buckets = 0;
  struct Rank {
    int rank = -1;
    // busy[class][bucket]: the class's busy share of the bucket, summed over the rank's
    // rows (may pass 1 where rows overlap).
    std::array<std::vector<float>, analyzer::kEventClassCount> busy;
    bool has_device_activity = false;
  };
  std::vector<Rank> ranks;
};

// One pass over every event: O(events + ranks · buckets). Safe on a worker thread.
OverviewData ComputeOverview(const TimelineModel& model, int buckets = 400);

class OverviewStrip : public QWidget {
  Q_OBJECT

 public:
  explicit OverviewStrip(QWidget* parent = nullptr);

  void setData(OverviewData data);
  const OverviewData& data() const { return data_; }
  void clear();
  // The timeline's visible range (common clock), drawn as a rectangle.
  void setViewRange(int64_t t0, int64_t t1);
  // The width of the label part on the left: the timeline's label column, so the two line up.
  void setLabelWidth(int px);

  QSize sizeHint() const override;
  QSize minimumSizeHint() const override;

 signals:
  void centerRequested(qint64 time_ns);
  // A window dragged on the strip (at least kMinDragPx wide): the timeline shows [t0, t1).
  void windowRequested(qint64 t0_ns, qint64 t1_ns);

 protected:
  void paintEvent(QPaintEvent* event) override;
  void resizeEvent(QResizeEvent* event) override;
  void mousePressEvent(QMouseEvent* event) override;
  void mouseMoveEvent(QMouseEvent* event) override;
  void mouseReleaseEvent(QMouseEvent* event) override;

 private:
  void RenderDensity();
  int64_t TimeAt(double x) const;
  double XAt(int64_t t) const;

  OverviewData data_;
  QPixmap density_;
  int64_t view_t0_ = 0, view_t1_ = 0;
  int left_px_ = 200;
  static constexpr int kMinDragPx = 3;
  std::optional<double> press_x_;     // a left press on the bands
  std::optional<double> drag_to_x_;  // where a window drag is now
};

}  // namespace rankscope::gui
