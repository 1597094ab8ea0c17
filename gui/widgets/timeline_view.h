// The timeline: one custom-painted widget for every rank's tracks, with the time axis on
// top, a fixed label column on the left and a vertical scroll bar on the right. Painting
// follows gui_style.md A.4: rows outside the viewport are culled by LaneLayout, each
// visible row asks the core's LOD (BuildRowGeometry) for a few items per pixel, rects
// are batched by color with antialiasing off, and the built geometry is cached on
// (view range, width, layout, scroll) so a selection or hover repaint does not rebuild it.
// A rank's end marks (RankEndState: collectives in flight, ranges open when its file ended)
// are drawn over their events, hatched red with their label, and a dashed "state at" line
// marks when its in-flight state was taken.
#pragma once

#include <QElapsedTimer>
#include <QPoint>
#include <QString>
#include <QWidget>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gui/core/lane_layout.h"
#include "gui/core/lod.h"
#include "gui/core/path_marks.h"
#include "gui/core/time_view.h"
#include "gui/core/search.h"
#include "gui/widgets/event_colors.h"
#include "gui/core/timeline_model.h"

class QScrollBar;

namespace rankscope::gui {

class TimelineView : public QWidget {
  Q_OBJECT

 public:
  // The label column: its width is the user's (drag its right edge), within these bounds.
  static constexpr int kDefaultLabelColumnPx = 200;
  static constexpr int kMinLabelColumnPx = 80;
  static constexpr int kMaxLabelColumnPx = 800;
  static constexpr int kAxisPx = 26;
  static constexpr int kLabelMinWidthPx = 40;  // events at least this wide get their name
  static constexpr double kPickTolerancePx = 2;
  static constexpr int kMaxRowPx = 26;  // rows grow up to this when the ranks leave room

  explicit TimelineView(QWidget* parent = nullptr);
  ~TimelineView() override;

  // The model is not owned and must outlive the view (or be replaced first). Resets the
  // layout, the selection and the search matches, and fits the whole run. nullptr clears.
  void setModel(const TimelineModel* model);
  const TimelineModel* model() const { return model_; }
  // The model's times moved (ApplyClockAlignment): drops cached geometry, keeps the range.
  void modelTimesChanged();

  // The visible range of the common clock, across timeAreaWidth() pixels.
  const TimeView& view() const;
  // Shows [t0, t1) (common clock), with no zoom-history entry.
  void setTimeRange(int64_t t0, int64_t t1);
  // Shows [t0, t1), remembering the current range for Backspace.
  void zoomToRange(int64_t t0, int64_t t1);
  void fitAll();           // F
  bool zoomToSelection();  // Z: false when nothing is selected
  bool goBack();           // Backspace: false when history is empty
  // Zooms by `factor` (> 1: in) around widget x `anchor_x` (the center when nullopt).
  void zoomBy(double factor, std::optional<double> anchor_x = std::nullopt);
  void panByFraction(double fraction);  // A/D: +0.1 is 10% of the width later
  void centerOn(int64_t time_ns);       // keeps the zoom

  std::optional<EventRef> selectedEvent() const { return selected_; }
  // Selects `ref` (emits eventSelected); with `reveal`, scrolls and zooms until it shows.
  void selectEvent(const EventRef& ref, bool reveal = false);
  // Makes `ref` visible: expands its rank, scrolls to its row, and pans (or zooms so it
  // is a reasonable width) when it is off screen or too narrow to see.
  void revealEvent(const EventRef& ref);
  // The API call or device work correlated with the selected event, if any (the flow
  // arrow's other end).
  std::optional<EventRef> flowPeer() const { return flow_peer_; }
  std::optional<std::pair<int64_t, int64_t>> selectedRange() const { return range_; }
  // Selects [t0, t1) (common clock) and emits rangeSelected.
  void setSelectedRange(int64_t t0, int64_t t1);
  void clearSelection();  // Esc: the event and the range

  // Vertical layout of ranks and rows, in content pixels (row y 0 = just below the axis).
  const LaneLayout& layout() const { return layout_; }
  int timeAreaLeft() const { return label_column_px_; }
  // Sets the label column's width (clamped to [kMinLabelColumnPx, min(kMaxLabelColumnPx,
  // half the widget)]); the view keeps its time range over the new time area.
  void setLabelColumnWidth(int px);
  int labelColumnWidth() const { return label_column_px_; }
  int timeAreaWidth() const;
  int axisHeight() const { return kAxisPx; }
  int verticalOffset() const;
  void setVerticalOffset(int offset);
  // Widget y of content y.
  int contentToWidgetY(int content_y) const { return content_y - verticalOffset() + axisHeight(); }

  bool isRankCollapsed(size_t rank_index) const;
  void setRankCollapsed(size_t rank_index, bool collapsed);
  void toggleRankCollapsed(size_t rank_index);
  // Scrolls so the header of the rank numbered `rank` is at the top (expanding it).
  // False when the model has no such rank.
  bool scrollToRank(int rank);

  // Ranks (RankTimeline::rank numbers) whose headers get the straggler mark.
  void setStragglers(const std::vector<int>& ranks);
  const std::vector<int>& stragglers() const { return stragglers_; }
  // Ranks the run's end diagnosis names as culprits (HangReport::culprits): their headers
  // get the "culprit" mark.
  void setCulprits(const std::vector<int>& ranks);
  const std::vector<int>& culprits() const { return culprits_; }
  // Search results to outline (every match of the model shown; null clears). Drawn as
  // outlines in the time area, adjacent matches of a row merged into one outline per run of
  // pixels, so dense matches stay outlines and the lane labels stay clear.
  void setSearchMatches(std::shared_ptr<const SearchMatches> matches);
  // A step's critical path to draw over the tracks (path_marks.h); empty clears. Work is
  // outlined on its track's first row, gaps dashed, and each move to another track joined.
  void setPathMarks(std::vector<PathMark> marks);
  const std::vector<PathMark>& pathMarks() const { return path_marks_; }
  const SearchMatches* searchMatches() const { return matches_.get(); }

  double timeToX(int64_t time_ns) const;  // widget x
  int64_t xToTime(double x) const;
  // The event under a widget point (EventAt with a 2-pixel tolerance).
  std::optional<EventRef> eventAt(const QPoint& pos) const;
  // The rank index whose header is at a widget point.
  std::optional<size_t> rankHeaderAt(const QPoint& pos) const;
  // The tooltip at a widget point: an event, a track's or header's label, a counter's value.
  QString toolTipAt(const QPoint& pos) const;

  // What the last geometry build did; for the benchmark and tests.
  struct FrameStats {
    size_t rows = 0;   // visible rows built
    size_t items = 0;  // draw items (single + folded)
    size_t folded = 0;
    size_t labels = 0;
    size_t end_marks = 0;      // end marks drawn
    size_t state_markers = 0;  // "state at" lines drawn
    double build_ms = 0;  // BuildRowGeometry and batching
    uint64_t builds = 0;  // geometry builds since the model was set
  };
  const FrameStats& frameStats() const { return stats_; }
  // Drops the cached geometry so the next paint rebuilds it (benchmarks).
  void invalidateGeometry();
  // Compute kernels and annotation ranges colored by name (the default), or every event by
  // its class (event_colors.h).
  void setColorByName(bool by_name);
  // What the empty timeline says (e.g. "Loading run…"); empty: how to open a run.
  void setPlaceholder(const QString& text);
  bool colorByName() const { return color_by_name_; }

  QSize sizeHint() const override;
  QSize minimumSizeHint() const override;

 signals:
  void eventSelected(const rankscope::gui::EventRef& ref);
  void selectionCleared();
  void rangeSelected(qint64 t0, qint64 t1);
  void rangeCleared();
  // The visible time range or the vertical scroll changed.
  void viewChanged();
  void helpRequested();

 protected:
  void paintEvent(QPaintEvent* event) override;
  void resizeEvent(QResizeEvent* event) override;
  void mousePressEvent(QMouseEvent* event) override;
  void mouseMoveEvent(QMouseEvent* event) override;
  void mouseReleaseEvent(QMouseEvent* event) override;
  void wheelEvent(QWheelEvent* event) override;
  void keyPressEvent(QKeyEvent* event) override;
  bool event(QEvent* event) override;

 private:
  enum class Drag : uint8_t { kNone, kPending, kPan, kRange, kLabelColumn };
  // Within this many pixels of the label column's edge, a press resizes the column.
  static constexpr int kColumnGripPx = 3;
  bool OnColumnEdge(const QPoint& pos) const {
    return pos.y() >= 0 && std::abs(pos.x() - (label_column_px_ - 1)) <= kColumnGripPx;
  }

  struct Label {
    QRect rect;
    QString text;
    QColor color;
  };
  struct VisibleHeader {
    uint32_t rank = 0;
    int y = 0, height = 0;
  };
  struct VisibleRow {
    uint32_t rank = 0, track = 0, row = 0;
    int y = 0, height = 0;
    bool first_row_of_track = false;
  };
  // A counter's lane as drawn: its band, the step area of its total (scaled to the peak of
  // the counter), and its label.
  struct CounterItem {
    uint32_t rank = 0, counter = 0;
    int y = 0, height = 0;
    QPolygon area;
  };
  struct EndMarkItem {
    QRect rect;
    QString label;  // elided to the rect; empty when it does not fit
  };
  struct StateMarker {
    int x = 0, top = 0, bottom = 0;  // the rank's visible rows, header included
    int header_y = 0, header_height = 0;  // 0 height: the header is off screen
    QString text;  // "state at 12.4 s"
  };
  struct GeometryKey {
    int64_t start_ns = 0, end_ns = 0;
    int width = 0, height = 0;
    int vertical_offset = 0;
    uint64_t layout_version = 0;
    uint64_t model_version = 0;
    bool operator==(const GeometryKey&) const = default;
  };
  // Everything paintEvent draws for the rows, built once per key.
  struct Geometry {
    bool valid = false;
    GeometryKey key;
    std::array<std::vector<QRect>, kColorSlots> solid;  // by color slot (event_colors.h)
    // Folds by class and density level (event_colors.h), and their bands by class.
    std::array<std::array<std::vector<QRect>, kDensityLevels>, analyzer::kEventClassCount> folded;
    std::array<std::vector<QRect>, analyzer::kEventClassCount> folded_band;
    std::vector<Label> labels;
    std::vector<EndMarkItem> end_marks;
    std::vector<StateMarker> state_markers;
    std::vector<VisibleHeader> headers;
    std::vector<VisibleRow> rows;
    std::vector<CounterItem> counters;
    std::unordered_map<uint64_t, size_t> row_index;  // RowKey -> index in `rows`
  };

  static uint64_t RowKey(uint32_t rank, uint32_t track, uint32_t row) {
    return (uint64_t{rank} << 44) | (uint64_t{track} << 22) | row;
  }

  GeometryKey CurrentKey() const;
  void EnsureGeometry();
  void BuildGeometry(const GeometryKey& key);
  CounterItem CounterGeometry(const LayoutEntry& entry, int y, int left, int width) const;
  void RebuildLayout();
  // Row height: the core's default, taller (up to kMaxRowPx) when every rank expanded
  // still leaves room, so a small run fills the view.
  LayoutStyle ChooseStyle() const;
  void UpdateScrollBar() const;
  // Brings the scroll bar and the view's width up to date with the widget's size, which a
  // hidden widget changes without resize events (tests drive unshown views).
  void SyncGeometry() const;
  void ViewRangeChanged();
  void ClampView();
  void PushHistory();
  // Widget y of a row's center; its rank header's when the rank is collapsed.
  std::optional<int> RowCenterY(const EventRef& ref) const;
  int RowsAreaHeight() const;

  void PaintAxis(QPainter& p, const std::vector<Tick>& ticks);
  void PaintLabels(QPainter& p);
  void PaintRows(QPainter& p, const std::vector<Tick>& ticks);
  void PaintMatches(QPainter& p);
  void PaintPath(QPainter& p);
  void PaintSelection(QPainter& p);
  void PaintFlow(QPainter& p);
  void PaintRange(QPainter& p);
  void PaintEndMarks(QPainter& p);
  void PaintEmpty(QPainter& p);
  QString HeaderText(uint32_t rank_index) const;
  // A counter's label-column and time-area tooltips: its peak; the total and categories at x.
  QString CounterToolTip(const LayoutEntry& entry, std::optional<int> x) const;

  const TimelineModel* model_ = nullptr;
  uint64_t model_version_ = 0;
  bool color_by_name_ = true;
  QString placeholder_;
  int label_column_px_ = kDefaultLabelColumnPx;
  // Per rank, per StringId: NameColorHash of the name, computed once per model.
  std::vector<std::vector<uint32_t>> name_hashes_;
  mutable TimeView view_;
  mutable QSize synced_size_;
  ZoomHistory history_;
  LaneLayout layout_;
  LayoutStyle style_;
  uint64_t layout_version_ = 0;
  std::vector<bool> collapsed_;
  std::vector<int> stragglers_;
  std::vector<int> culprits_;
  std::shared_ptr<const SearchMatches> matches_;
  std::vector<PathMark> path_marks_;

  std::optional<EventRef> selected_;
  std::optional<EventRef> flow_peer_;
  std::optional<std::pair<int64_t, int64_t>> range_;

  Drag drag_ = Drag::kNone;
  Qt::MouseButton drag_button_ = Qt::NoButton;
  QPoint press_pos_, last_pos_;
  int64_t range_anchor_ns_ = 0;
  QElapsedTimer last_wheel_zoom_;

  QScrollBar* scroll_ = nullptr;
  Geometry geometry_;
  FrameStats stats_;
  std::vector<DrawItem> items_scratch_;
};

}  // namespace rankscope::gui
