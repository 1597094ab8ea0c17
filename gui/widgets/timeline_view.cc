#include "gui/widgets/timeline_view.h"

#include <QKeyEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QPainterPath>
#include <QScrollBar>
#include <QToolTip>
#include <QWheelEvent>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <span>
#include <tuple>

#include "gui/core/queries.h"
#include "gui/widgets/event_colors.h"
#include "gui/widgets/value_text.h"

namespace rankscope::gui {
namespace {

using analyzer::EventClass;

constexpr double kTickSpacingPx = 90;
// In a narrow time area ticks come closer (a quarter of it, down to this), so that a
// small window still has labelled ticks to read times from.
constexpr double kNarrowTickSpacingPx = 50;
constexpr double kKeyZoomFactor = 1.4;
constexpr double kWheelZoomBase = 1.2;  // per notch of 120 eighths of a degree
constexpr int kWheelZoomCoalesceMs = 600;
constexpr int kDragThresholdPx = 3;
constexpr int kWheelScrollPx = 54;  // three rows per notch
constexpr int64_t kMinRevealSpanNs = 2000;

const QColor kBackground(0xff, 0xff, 0xff);
const QColor kTrackShade(0xf5, 0xf6, 0xf8);
const QColor kHeaderFill(0xe4, 0xe8, 0xee);
const QColor kGridLine(0xe2, 0xe2, 0xe2);
// Memory counters: a pale band, the area in a muted teal apart from every event class.
const QColor kCounterBackground(0xf2, 0xf7, 0xf6);
const QColor kCounterFill(0x7f, 0xb8, 0xad);
const QColor kCounterLine(0x2f, 0x7d, 0x6f);
const QColor kAxisFill(0xf0, 0xf0, 0xf0);
const QColor kSeparator(0xb8, 0xb8, 0xb8);
const QColor kStragglerRed(0xc6, 0x28, 0x28);
const QColor kMatchOutline(0xff, 0x1e, 0xc8);
const QColor kRangeFill(0x33, 0x66, 0xcc, 0x30);
const QColor kRangeEdge(0x33, 0x66, 0xcc);
const QColor kFlowColor(0x20, 0x20, 0x20);
const QColor kPathColor(0xff, 0x8c, 0x00);  // the critical path: orange, unlike any class color

// Pixel columns [left, right) covering [x0, x1), at least one column.
std::pair<int, int> PixelSpan(double x0, double x1) {
  const int left = static_cast<int>(std::floor(x0));
  const int right = std::max(left + 1, static_cast<int>(std::ceil(x1)));
  return {left, right};
}

// Appends `rect`, or widens the last one when `rect` continues it on the same band: a
// zoomed-out row of like folds paints as a few long rects, not one per fold.
void AppendMerged(std::vector<QRect>& rects, const QRect& rect) {
  if (!rects.empty()) {
    QRect& last = rects.back();
    if (last.top() == rect.top() && last.height() == rect.height() && last.right() + 1 >= rect.left() &&
        last.left() <= rect.left()) {
      last.setRight(std::max(last.right(), rect.right()));
      return;
    }
  }
  rects.push_back(rect);
}

// An LOD item's pixels within the time area [left, right) (item x is relative to `left`),
// and its class; nullopt when no pixel is inside.
struct ItemPixels {
  int x0 = 0, x1 = 0;
  size_t event_class = 0;
};
std::optional<ItemPixels> PixelsOf(const DrawItem& item, int left, int right) {
  auto [x0, x1] = PixelSpan(item.x0, item.x1);
  x0 = std::max(x0 + left, left);
  x1 = std::min(x1 + left, right);
  if (x1 <= x0) return std::nullopt;
  return ItemPixels{x0, x1, std::min<size_t>(item.event_class, analyzer::kEventClassCount - 1)};
}

}  // namespace

TimelineView::TimelineView(QWidget* parent) : QWidget(parent), scroll_(new QScrollBar(Qt::Vertical, this)) {
  qRegisterMetaType<rankscope::gui::EventRef>();
  setFocusPolicy(Qt::StrongFocus);
  setMouseTracking(true);
  setAttribute(Qt::WA_OpaquePaintEvent);
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Expanding);
  scroll_->setSingleStep(18);
  scroll_->hide();
  connect(scroll_, &QScrollBar::valueChanged, this, [this] {
    update();
    emit viewChanged();
  });
  view_.SetWidth(std::max(1, timeAreaWidth()));
}

TimelineView::~TimelineView() = default;

QSize TimelineView::sizeHint() const { return {1000, 600}; }
QSize TimelineView::minimumSizeHint() const { return {kMinLabelColumnPx + 120, kAxisPx + 60}; }

int TimelineView::timeAreaWidth() const {
  const int bar = scroll_->isHidden() ? 0 : scroll_->width();
  return std::max(1, width() - label_column_px_ - bar);
}

int TimelineView::RowsAreaHeight() const { return std::max(0, height() - kAxisPx); }

int TimelineView::verticalOffset() const { return scroll_->value(); }

void TimelineView::setVerticalOffset(int offset) { scroll_->setValue(offset); }

void TimelineView::setModel(const TimelineModel* model) {
  model_ = model;
  ++model_version_;
  name_hashes_.clear();
  path_marks_.clear();
  if (model_) {
    for (const RankTimeline& rank : model_->ranks()) {
      std::vector<uint32_t>& hashes = name_hashes_.emplace_back();
      hashes.reserve(rank.strings.size());
      for (const std::string& name : rank.strings) hashes.push_back(NameColorHash(name));
    }
  }
  SyncGeometry();
  collapsed_.assign(model_ ? model_->ranks().size() : 0, false);
  selected_.reset();
  flow_peer_.reset();
  range_.reset();
  matches_.reset();
  history_ = ZoomHistory();
  drag_ = Drag::kNone;
  stats_ = FrameStats();
  RebuildLayout();
  scroll_->setValue(0);
  if (model_ && model_->end_ns() > model_->start_ns()) {
    view_.SetRange(model_->start_ns(), model_->end_ns());
  } else {
    view_.SetRange(0, 1000000);
  }
  ViewRangeChanged();
}

void TimelineView::modelTimesChanged() {
  ++model_version_;
  update();
  emit viewChanged();
}

LayoutStyle TimelineView::ChooseStyle() const {
  LayoutStyle style;
  if (!model_) return style;
  int fixed = 0;
  size_t rows = 0;
  for (const RankTimeline& rank : model_->ranks()) {
    fixed += style.rank_header_px;
    for (const Track& track : rank.tracks) {
      fixed += style.track_gap_px;
      rows += track.rows.size();
    }
    fixed += style.track_gap_px * static_cast<int>(rank.counters.size());
    rows += rank.counters.size() * static_cast<size_t>(style.counter_rows);
  }
  if (rows == 0) return style;
  const int room = (RowsAreaHeight() - fixed) / static_cast<int>(rows);
  style.row_px = std::clamp(room, style.row_px, kMaxRowPx);
  return style;
}

void TimelineView::RebuildLayout() {
  if (model_) {
    style_ = ChooseStyle();
    layout_.Build(*model_, collapsed_, style_);
  } else {
    layout_ = LaneLayout();
  }
  ++layout_version_;
  UpdateScrollBar();
  update();
}

void TimelineView::UpdateScrollBar() const {
  const int maximum = std::max(0, layout_.total_height() - RowsAreaHeight());
  scroll_->setRange(0, maximum);
  scroll_->setPageStep(std::max(1, RowsAreaHeight()));
  scroll_->setGeometry(width() - scroll_->sizeHint().width(), kAxisPx, scroll_->sizeHint().width(), RowsAreaHeight());
  scroll_->setHidden(maximum == 0);
  // The time area may have changed width: keep the range, spread over the new width.
  view_.SetWidth(timeAreaWidth());
}

void TimelineView::SyncGeometry() const {
  if (synced_size_ == size()) return;
  synced_size_ = size();
  UpdateScrollBar();
}

const TimeView& TimelineView::view() const {
  SyncGeometry();
  return view_;
}

void TimelineView::resizeEvent(QResizeEvent*) {
  synced_size_ = size();
  if (model_ && ChooseStyle().row_px != style_.row_px) RebuildLayout();
  UpdateScrollBar();
  emit viewChanged();
}

void TimelineView::ClampView() {
  if (model_ && model_->end_ns() > model_->start_ns()) view_.ClampTo(model_->start_ns(), model_->end_ns());
}

void TimelineView::ViewRangeChanged() {
  update();
  emit viewChanged();
}

void TimelineView::PushHistory() { history_.Push(view_.start_ns(), view_.end_ns()); }

void TimelineView::setTimeRange(int64_t t0, int64_t t1) {
  SyncGeometry();
  if (t1 < t0) std::swap(t0, t1);
  view_.SetRange(t0, t1);
  ViewRangeChanged();
}

void TimelineView::zoomToRange(int64_t t0, int64_t t1) {
  PushHistory();
  setTimeRange(t0, t1);
}

void TimelineView::fitAll() {
  if (!model_) return;
  zoomToRange(model_->start_ns(), std::max(model_->end_ns(), model_->start_ns() + TimeView::kMinDurationNs));
}

bool TimelineView::zoomToSelection() {
  if (range_) {
    zoomToRange(range_->first, range_->second);
    return true;
  }
  if (selected_ && model_ && model_->Contains(*selected_)) {
    const int64_t start = model_->DisplayStart(*selected_);
    const int64_t duration = std::max<int64_t>(model_->DisplayEnd(*selected_) - start, TimeView::kMinDurationNs);
    // A little context on both sides of the event.
    zoomToRange(start - duration / 10, start + duration + duration / 10);
    return true;
  }
  return false;
}

bool TimelineView::goBack() {
  const auto previous = history_.Pop();
  if (!previous) return false;
  setTimeRange(previous->first, previous->second);
  return true;
}

void TimelineView::zoomBy(double factor, std::optional<double> anchor_x) {
  SyncGeometry();
  PushHistory();
  const double x = anchor_x ? *anchor_x - timeAreaLeft() : timeAreaWidth() / 2.0;
  view_.ZoomAt(std::clamp(x, 0.0, static_cast<double>(timeAreaWidth())), factor);
  ClampView();
  ViewRangeChanged();
}

void TimelineView::panByFraction(double fraction) {
  SyncGeometry();
  view_.PanPixels(fraction * timeAreaWidth());
  ClampView();
  ViewRangeChanged();
}

void TimelineView::centerOn(int64_t time_ns) {
  SyncGeometry();
  const int64_t half = view_.duration_ns() / 2;
  view_.SetRange(time_ns - half, time_ns - half + view_.duration_ns());
  ClampView();
  ViewRangeChanged();
}

void TimelineView::selectEvent(const EventRef& ref, bool reveal) {
  if (!model_ || !model_->Contains(ref)) return;
  selected_ = ref;
  flow_peer_ = CorrelatedEvent(*model_, ref);
  if (reveal) revealEvent(ref);
  update();
  emit eventSelected(ref);
}

void TimelineView::revealEvent(const EventRef& ref) {
  SyncGeometry();
  if (!model_ || !model_->Contains(ref)) return;
  if (ref.rank < collapsed_.size() && collapsed_[ref.rank]) setRankCollapsed(ref.rank, false);
  if (const LayoutEntry* entry = layout_.RowEntry(ref.rank, ref.track, ref.row)) {
    const int top = verticalOffset();
    if (entry->y < top || entry->y + entry->height > top + RowsAreaHeight()) {
      setVerticalOffset(entry->y - RowsAreaHeight() / 2);
    }
  }
  const int64_t start = model_->DisplayStart(ref);
  const int64_t end = model_->DisplayEnd(ref);
  const double width_px = (end - start) / view_.NsPerPixel();
  const bool inside = start >= view_.start_ns() && end <= view_.end_ns();
  if (width_px >= 4 && width_px <= timeAreaWidth()) {
    if (!inside) centerOn(start + (end - start) / 2);
    return;
  }
  // Too narrow to see or wider than the view: about a third of the view.
  const int64_t span = std::max<int64_t>(3 * (end - start), kMinRevealSpanNs);
  const int64_t center = start + (end - start) / 2;
  PushHistory();
  view_.SetRange(center - span / 2, center - span / 2 + span);
  ClampView();
  ViewRangeChanged();
}

void TimelineView::setSelectedRange(int64_t t0, int64_t t1) {
  if (t1 < t0) std::swap(t0, t1);
  range_ = std::make_pair(t0, t1);
  update();
  emit rangeSelected(t0, t1);
}

void TimelineView::clearSelection() {
  const bool had_event = selected_.has_value();
  const bool had_range = range_.has_value();
  selected_.reset();
  flow_peer_.reset();
  range_.reset();
  update();
  if (had_event) emit selectionCleared();
  if (had_range) emit rangeCleared();
}

bool TimelineView::isRankCollapsed(size_t rank_index) const {
  return rank_index < collapsed_.size() && collapsed_[rank_index];
}

void TimelineView::setRankCollapsed(size_t rank_index, bool collapsed) {
  if (rank_index >= collapsed_.size() || collapsed_[rank_index] == collapsed) return;
  collapsed_[rank_index] = collapsed;
  RebuildLayout();
  emit viewChanged();
}

void TimelineView::toggleRankCollapsed(size_t rank_index) {
  setRankCollapsed(rank_index, !isRankCollapsed(rank_index));
}

bool TimelineView::scrollToRank(int rank) {
  if (!model_) return false;
  const auto& ranks = model_->ranks();
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i].rank != rank) continue;
    setRankCollapsed(i, false);
    if (const LayoutEntry* header = layout_.RankHeader(static_cast<uint32_t>(i))) setVerticalOffset(header->y);
    return true;
  }
  return false;
}

void TimelineView::setStragglers(const std::vector<int>& ranks) {
  stragglers_ = ranks;
  update();
}

void TimelineView::setCulprits(const std::vector<int>& ranks) {
  culprits_ = ranks;
  update();
}

void TimelineView::setSearchMatches(std::shared_ptr<const SearchMatches> matches) {
  matches_ = std::move(matches);
  update();
}

double TimelineView::timeToX(int64_t time_ns) const { return timeAreaLeft() + view().ToX(time_ns); }

int64_t TimelineView::xToTime(double x) const { return view().ToTime(x - timeAreaLeft()); }

std::optional<EventRef> TimelineView::eventAt(const QPoint& pos) const {
  SyncGeometry();
  if (!model_ || pos.x() < timeAreaLeft() || pos.x() >= timeAreaLeft() + timeAreaWidth() || pos.y() < kAxisPx) {
    return std::nullopt;
  }
  const LayoutEntry* entry = layout_.EntryAt(pos.y() - kAxisPx + verticalOffset());
  if (!entry || entry->kind != LayoutEntry::Kind::kRow) return std::nullopt;
  const RankTimeline& rank = model_->ranks()[entry->rank];
  const EventRow& row = rank.tracks[entry->track].rows[entry->row];
  const auto tolerance = static_cast<int64_t>(std::ceil(kPickTolerancePx * view_.NsPerPixel()));
  const auto index = EventAt(row, xToTime(pos.x()) - rank.clock_offset_ns, tolerance);
  if (!index) return std::nullopt;
  return EventRef{entry->rank, entry->track, entry->row, *index};
}

std::optional<size_t> TimelineView::rankHeaderAt(const QPoint& pos) const {
  if (!model_ || pos.y() < kAxisPx) return std::nullopt;
  const LayoutEntry* entry = layout_.EntryAt(pos.y() - kAxisPx + verticalOffset());
  if (!entry || entry->kind != LayoutEntry::Kind::kRankHeader) return std::nullopt;
  return entry->rank;
}

std::optional<int> TimelineView::RowCenterY(const EventRef& ref) const {
  if (const LayoutEntry* entry = layout_.RowEntry(ref.rank, ref.track, ref.row)) {
    return contentToWidgetY(entry->y + entry->height / 2);
  }
  if (const LayoutEntry* header = layout_.RankHeader(ref.rank)) {
    return contentToWidgetY(header->y + header->height / 2);
  }
  return std::nullopt;
}

// ---- Geometry --------------------------------------------------------------------------

TimelineView::GeometryKey TimelineView::CurrentKey() const {
  return GeometryKey{view_.start_ns(), view_.end_ns(),  timeAreaWidth(), height(),
                     verticalOffset(), layout_version_, model_version_};
}

void TimelineView::invalidateGeometry() {
  geometry_.valid = false;
  update();
}

void TimelineView::setLabelColumnWidth(int px) {
  const int upper = std::max(kMinLabelColumnPx, std::min(kMaxLabelColumnPx, width() / 2));
  const int clamped = std::clamp(px, kMinLabelColumnPx, upper);
  if (clamped == label_column_px_) return;
  label_column_px_ = clamped;
  UpdateScrollBar();  // the time area's new width, the same range over it
  invalidateGeometry();
  emit viewChanged();
}

void TimelineView::setColorByName(bool by_name) {
  if (by_name == color_by_name_) return;
  color_by_name_ = by_name;
  invalidateGeometry();
}

TimelineView::CounterItem TimelineView::CounterGeometry(const LayoutEntry& entry, int y, int left, int width) const {
  const RankTimeline& rank = model_->ranks()[entry.rank];
  const CounterTrack& counter = rank.counters[entry.track];
  CounterItem item{entry.rank, entry.track, y, entry.height, {}};
  const std::vector<int64_t> columns =
      CounterColumns(counter, view_.start_ns() - rank.clock_offset_ns, view_.NsPerPixel(), width);
  // The area under each column's largest total, scaled so the peak fills the lane (less a
  // pixel of air at the top).
  const int bottom = y + entry.height - 1;
  const double scale = counter.peak > 0 ? (entry.height - 2) / static_cast<double>(counter.peak) : 0.0;
  item.area << QPoint(left, bottom);
  int previous = bottom;
  for (size_t x = 0; x < columns.size(); ++x) {
    const int top = bottom - static_cast<int>(std::lround(static_cast<double>(columns[x]) * scale));
    if (top != previous || x == 0) {
      item.area << QPoint(left + static_cast<int>(x), previous) << QPoint(left + static_cast<int>(x), top);
      previous = top;
    }
  }
  item.area << QPoint(left + width, previous) << QPoint(left + width, bottom);
  return item;
}

void TimelineView::EnsureGeometry() {
  SyncGeometry();
  const GeometryKey key = CurrentKey();
  if (geometry_.valid && geometry_.key == key) return;
  BuildGeometry(key);
}

void TimelineView::BuildGeometry(const GeometryKey& key) {
  const auto started = std::chrono::steady_clock::now();
  Geometry& g = geometry_;
  for (auto& rects : g.solid) rects.clear();
  for (auto& levels : g.folded) {
    for (auto& rects : levels) rects.clear();
  }
  for (auto& rects : g.folded_band) rects.clear();
  g.labels.clear();
  g.end_marks.clear();
  g.state_markers.clear();
  g.headers.clear();
  g.rows.clear();
  g.counters.clear();
  g.row_index.clear();
  g.key = key;
  g.valid = true;
  stats_.rows = stats_.items = stats_.folded = stats_.labels = stats_.end_marks = stats_.state_markers = 0;
  if (!model_) return;

  const double ns_per_px = view_.NsPerPixel();
  const double width = key.width;
  const int left = timeAreaLeft();
  const int right = left + key.width;
  const QFontMetrics fm(font());
  const LodOptions options;
  const auto [first, last] = layout_.VisibleEntries(key.vertical_offset, key.vertical_offset + RowsAreaHeight());
  const auto& entries = layout_.entries();
  // Each rank's visible span, for its "state at" marker.
  struct RankSpan {
    int top = 0, bottom = 0, header_y = 0, header_height = 0;
    bool seen = false;
  };
  std::vector<RankSpan> spans(model_->ranks().size());
  for (size_t e = first; e < last && e < entries.size(); ++e) {
    const LayoutEntry& entry = entries[e];
    const int y = contentToWidgetY(entry.y);
    RankSpan& span = spans[entry.rank];
    span.top = span.seen ? std::min(span.top, y) : y;
    span.bottom = span.seen ? std::max(span.bottom, y + entry.height) : y + entry.height;
    span.seen = true;
    if (entry.kind == LayoutEntry::Kind::kRankHeader) {
      g.headers.push_back({entry.rank, y, entry.height});
      span.header_y = y;
      span.header_height = entry.height;
      if (isRankCollapsed(entry.rank)) {
        // A collapsed rank's header summarizes it: its device streams' outermost rows (its
        // threads' when it has no device lanes) laid over each other, folds by density.
        const RankTimeline& rank = model_->ranks()[entry.rank];
        const bool has_device = std::any_of(rank.tracks.begin(), rank.tracks.end(),
                                            [](const Track& t) { return t.kind == trace::LaneKind::kGpuStream; });
        const int top = y + 3, h = std::max(2, entry.height - 6);
        for (const Track& track : rank.tracks) {
          if (track.rows.empty() || (has_device && track.kind != trace::LaneKind::kGpuStream)) continue;
          items_scratch_.clear();
          BuildRowGeometry(track.rows[0], view_.start_ns() - rank.clock_offset_ns, ns_per_px, width, options,
                           &items_scratch_);
          for (const DrawItem& item : items_scratch_) {
            const std::optional<ItemPixels> px = PixelsOf(item, left, right);
            if (!px) continue;
            const QRect rect(px->x0, top, px->x1 - px->x0, h);
            if (item.count > 1) {
              AppendMerged(g.folded[px->event_class][static_cast<size_t>(DensityLevel(item.busy))], rect);
            } else {
              g.solid[px->event_class].push_back(rect);
            }
          }
        }
      }
      continue;
    }
    if (entry.kind == LayoutEntry::Kind::kCounter) {
      g.counters.push_back(CounterGeometry(entry, y, left, key.width));
      continue;
    }
    g.rows.push_back({entry.rank, entry.track, entry.row, y, entry.height, entry.first_row_of_track});
    g.row_index[RowKey(entry.rank, entry.track, entry.row)] = g.rows.size() - 1;
    ++stats_.rows;

    const RankTimeline& rank = model_->ranks()[entry.rank];
    const EventRow& row = rank.tracks[entry.track].rows[entry.row];
    const std::vector<uint32_t>& hashes = name_hashes_[entry.rank];
    items_scratch_.clear();
    BuildRowGeometry(row, view_.start_ns() - rank.clock_offset_ns, ns_per_px, width, options, &items_scratch_);
    const int top = y + 1;
    const int h = std::max(1, entry.height - 2);
    // The row's end marks (sorted by track, row, index): they carry their own labels.
    const std::vector<EndMark>& marks = rank.end.marks;
    const auto marks_begin = std::partition_point(marks.begin(), marks.end(), [&](const EndMark& m) {
      return std::tie(m.track, m.row) < std::tie(entry.track, entry.row);
    });
    const auto marks_end = std::partition_point(
        marks_begin, marks.end(), [&](const EndMark& m) { return m.track == entry.track && m.row == entry.row; });
    auto is_mark = [&](uint32_t index) {
      return std::any_of(marks_begin, marks_end, [&](const EndMark& m) { return m.index == index; });
    };
    for (const DrawItem& item : items_scratch_) {
      const std::optional<ItemPixels> px = PixelsOf(item, left, right);
      if (!px) continue;
      const int x0 = px->x0, x1 = px->x1;
      const size_t c = px->event_class;
      const uint32_t name_id = item.count == 1 ? row.name[item.index] : 0;
      const int slot = item.count > 1 ? static_cast<int>(c)
                                      : ColorSlot(static_cast<EventClass>(c),
                                                  name_id < hashes.size() ? hashes[name_id] : 0, color_by_name_);
      ++stats_.items;
      if (item.count > 1) {
        ++stats_.folded;
        AppendMerged(g.folded[c][static_cast<size_t>(DensityLevel(item.busy))], QRect(x0, top, x1 - x0, h));
        AppendMerged(g.folded_band[c], QRect(x0, top + h - std::max(2, h / 5), x1 - x0, std::max(2, h / 5)));
      } else {
        // A one-pixel gap before the pixel where the event ends keeps back-to-back
        // neighbours apart (the next one starts in that pixel at the earliest).
        const int end_px = std::min(static_cast<int>(std::floor(item.x1)) + left, right);
        const int w = end_px - x0 >= 4 ? end_px - x0 - 1 : x1 - x0;
        if (c == static_cast<size_t>(EventClass::kMark)) {
          g.solid[slot].emplace_back(x0 - 1, top, 3, h);  // an instant: a tick wide enough to see
        } else {
          g.solid[slot].emplace_back(x0, top, w, h);
        }
      }
      if (x1 - x0 >= kLabelMinWidthPx && !(item.count == 1 && is_mark(item.index))) {
        // A fold says how many events and how much of its span they cover.
        const QString name = item.count > 1 ? tr("%L1 events · %2% busy")
                                                  .arg(item.count)
                                                  .arg(static_cast<int>(std::lround(item.busy * 100)))
                                            : QString::fromStdString(rank.Str(row.name[item.index]));
        const QRect text_rect(x0 + 3, top, x1 - x0 - 6, h);
        const QString elided = fm.elidedText(name, Qt::ElideRight, text_rect.width());
        if (elided.isEmpty() || elided == QStringLiteral("…")) continue;
        const QColor fill = item.count > 1 ? FoldedDensityColor(static_cast<EventClass>(c), DensityLevel(item.busy))
                                           : SlotColor(slot);
        g.labels.push_back({text_rect, elided, TextColorOn(fill)});
        ++stats_.labels;
      }
    }
    for (auto mark = marks_begin; mark != marks_end; ++mark) {
      const double x0 = view_.ToX(row.start[mark->index] + rank.clock_offset_ns);
      const double x1 = view_.ToX(row.end[mark->index] + rank.clock_offset_ns);
      if (x1 < 0 || x0 > width) continue;
      auto [a, b] = PixelSpan(std::max(x0, -2.0), std::min(x1, width + 2.0));
      a = std::max(a + left, left);
      b = std::min(b + left, right);
      if (b - a < 3) a = std::max(left, b - 3);  // however short, wide enough to see and click
      const QRect rect(a, top, std::max(3, b - a), h);
      QString label = fm.elidedText(QString::fromStdString(mark->label), Qt::ElideRight, rect.width() - 6);
      if (label == QStringLiteral("…")) label.clear();
      g.end_marks.push_back({rect, label});
      ++stats_.end_marks;
    }
  }
  for (size_t r = 0; r < spans.size(); ++r) {
    const RankTimeline& rank = model_->ranks()[r];
    if (!spans[r].seen || !rank.end.show_marker) continue;
    const int64_t at = rank.end.as_of_ns + rank.clock_offset_ns;
    const double x = view_.ToX(at);
    if (x < 0 || x > width) continue;
    g.state_markers.push_back({left + static_cast<int>(std::lround(x)), spans[r].top, spans[r].bottom,
                               spans[r].header_y, spans[r].header_height,
                               tr("state at %1").arg(DurationText(at - model_->start_ns()))});
    ++stats_.state_markers;
  }
  ++stats_.builds;
  stats_.build_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
}

// ---- Painting --------------------------------------------------------------------------

void TimelineView::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.setRenderHint(QPainter::Antialiasing, false);
  p.fillRect(rect(), kBackground);
  if (!model_) {
    PaintEmpty(p);
    return;
  }
  EnsureGeometry();
  const double tick_spacing = std::clamp(view_.width_px() / 4.0, kNarrowTickSpacingPx, kTickSpacingPx);
  const std::vector<Tick> ticks = ComputeTicks(view_, model_->start_ns(), tick_spacing);
  p.save();
  p.setClipRect(QRect(0, kAxisPx, width(), RowsAreaHeight()));
  PaintRows(p, ticks);
  PaintRange(p);
  PaintMatches(p);
  PaintPath(p);
  PaintSelection(p);
  PaintFlow(p);
  PaintLabels(p);
  p.restore();
  PaintAxis(p, ticks);
}

void TimelineView::setPlaceholder(const QString& text) {
  if (text == placeholder_) return;
  placeholder_ = text;
  if (!model_) update();
}

void TimelineView::PaintEmpty(QPainter& p) {
  if (!placeholder_.isEmpty()) {
    QFont big = font();
    big.setPointSizeF(big.pointSizeF() * 1.3);
    p.setFont(big);
    p.setPen(palette().color(QPalette::WindowText));
    p.drawText(rect(), Qt::AlignCenter, placeholder_);
    p.setFont(font());
    return;
  }
  p.setPen(palette().color(QPalette::PlaceholderText));
  p.drawText(rect(), Qt::AlignCenter,
             tr("Open a run: File > Open (Ctrl+O), or drop a run directory or rank files here."));
}

void TimelineView::PaintRows(QPainter& p, const std::vector<Tick>& ticks) {
  const Geometry& g = geometry_;
  const int left = timeAreaLeft();
  const int right = left + timeAreaWidth();
  // Alternate shading per track so a track's rows read as one band.
  for (const VisibleRow& row : g.rows) {
    if (row.track % 2 == 1) p.fillRect(QRect(0, row.y, right, row.height), kTrackShade);
  }
  for (const VisibleHeader& header : g.headers) p.fillRect(QRect(0, header.y, right, header.height), kHeaderFill);
  for (const CounterItem& counter : g.counters) {
    p.fillRect(QRect(left, counter.y, right - left, counter.height), kCounterBackground);
  }
  p.setPen(kGridLine);
  for (const Tick& tick : ticks) {
    const int x = left + static_cast<int>(std::lround(tick.x));
    if (x >= left && x < right) p.drawLine(x, kAxisPx, x, height());
  }
  for (int c = 0; c < analyzer::kEventClassCount; ++c) {
    const auto event_class = static_cast<EventClass>(c);
    for (int level = 0; level < kDensityLevels; ++level) {
      const QColor fill = FoldedDensityColor(event_class, level);
      for (const QRect& r : g.folded[c][static_cast<size_t>(level)]) p.fillRect(r, fill);
    }
    const QColor band = FoldedOutlineColor(event_class);
    for (const QRect& r : g.folded_band[c]) p.fillRect(r, band);
  }
  for (int slot = 0; slot < kColorSlots; ++slot) {
    const QColor solid = SlotColor(slot);
    for (const QRect& r : g.solid[slot]) p.fillRect(r, solid);
  }
  for (const CounterItem& counter : g.counters) {
    p.setPen(kCounterLine);
    p.setBrush(kCounterFill);
    p.drawPolygon(counter.area);
    p.setBrush(Qt::NoBrush);
  }
  for (const Label& label : g.labels) {
    p.setPen(label.color);
    p.drawText(label.rect, Qt::AlignVCenter | Qt::AlignLeft, label.text);
  }
  PaintEndMarks(p);
  // Header bands carry a thin rule under them.
  p.setPen(kSeparator);
  for (const VisibleHeader& header : g.headers) {
    p.drawLine(0, header.y + header.height - 1, right, header.y + header.height - 1);
  }
}

void TimelineView::PaintEndMarks(QPainter& p) {
  const Geometry& g = geometry_;
  const QFontMetrics fm(font());
  const QColor text = OpenAtEndColor().darker(140);
  for (const EndMarkItem& mark : g.end_marks) {
    PaintOpenAtEnd(p, mark.rect);
    if (mark.label.isEmpty()) continue;
    // On a pale backing, so the hatching does not cross the letters.
    const QRect text_rect = mark.rect.adjusted(3, 0, -3, 0);
    const QRect ink = fm.boundingRect(text_rect, Qt::AlignVCenter | Qt::AlignLeft, mark.label);
    p.fillRect(ink.adjusted(-2, 1, 2, -1).intersected(mark.rect.adjusted(1, 1, -1, -1)), QColor(255, 255, 255, 225));
    p.setPen(text);
    p.drawText(text_rect, Qt::AlignVCenter | Qt::AlignLeft, mark.label);
  }
  const int right = timeAreaLeft() + timeAreaWidth();
  for (const StateMarker& marker : g.state_markers) {
    p.setPen(QPen(OpenAtEndColor(), 1, Qt::DashLine));
    p.drawLine(marker.x, marker.top, marker.x, marker.bottom - 1);
    if (marker.header_height == 0) continue;
    const int w = fm.horizontalAdvance(marker.text);
    // Right of the line, or left of it near the view's right edge.
    const int x = marker.x + 4 + w <= right ? marker.x + 4 : marker.x - 4 - w;
    p.setPen(OpenAtEndColor());
    p.drawText(QRect(x, marker.header_y, w + 1, marker.header_height), Qt::AlignVCenter | Qt::AlignLeft, marker.text);
  }
}

QString TimelineView::HeaderText(uint32_t rank_index) const {
  const RankTimeline& rank = model_->ranks()[rank_index];
  const QString arrow = isRankCollapsed(rank_index) ? QStringLiteral("▶ ") : QStringLiteral("▼ ");
  return arrow + QString::fromStdString(rank.Label());
}

void TimelineView::PaintLabels(QPainter& p) {
  const Geometry& g = geometry_;
  const QRect column(0, kAxisPx, label_column_px_, RowsAreaHeight());
  p.fillRect(column, QColor(0xfa, 0xfa, 0xfa));
  for (const VisibleRow& row : g.rows) {
    if (row.track % 2 == 1) p.fillRect(QRect(0, row.y, label_column_px_, row.height), kTrackShade);
  }
  const QFontMetrics fm(font());
  for (const VisibleRow& row : g.rows) {
    if (!row.first_row_of_track) continue;
    const Track& track = model_->ranks()[row.rank].tracks[row.track];
    const QString text = QString::fromStdString(track.label);
    p.setPen(palette().color(QPalette::WindowText));
    const QRect r(16, row.y, label_column_px_ - 22, row.height);
    // Cut at the end, as a name is read: its start says what it is.
    p.drawText(r, Qt::AlignVCenter | Qt::AlignLeft, fm.elidedText(text, Qt::ElideRight, r.width()));
  }
  for (const CounterItem& counter : g.counters) {
    const CounterTrack& track = model_->ranks()[counter.rank].counters[counter.counter];
    // The name, and the peak under it when the lane has room for two lines.
    const QString name = QString::fromStdString(track.label);
    const QString peak = tr("peak %1").arg(BytesText(static_cast<double>(track.peak)));
    const QRect r(16, counter.y, label_column_px_ - 22, counter.height);
    p.setPen(palette().color(QPalette::WindowText));
    if (counter.height >= 2 * fm.height()) {
      const QRect upper(r.x(), r.y(), r.width(), r.height() / 2);
      const QRect lower(r.x(), r.y() + r.height() / 2, r.width(), r.height() - r.height() / 2);
      p.drawText(upper, Qt::AlignBottom | Qt::AlignLeft, fm.elidedText(name, Qt::ElideRight, r.width()));
      p.setPen(palette().color(QPalette::PlaceholderText));
      p.drawText(lower, Qt::AlignTop | Qt::AlignLeft, fm.elidedText(peak, Qt::ElideRight, r.width()));
    } else {
      p.drawText(r, Qt::AlignVCenter | Qt::AlignLeft,
                 fm.elidedText(name + QStringLiteral(" · ") + peak, Qt::ElideRight, r.width()));
    }
  }
  QFont bold = font();
  bold.setBold(true);
  const QFontMetrics bold_fm(bold);
  for (const VisibleHeader& header : g.headers) {
    p.fillRect(QRect(0, header.y, label_column_px_, header.height), kHeaderFill);
    const RankTimeline& rank = model_->ranks()[header.rank];
    const bool straggler = std::find(stragglers_.begin(), stragglers_.end(), rank.rank) != stragglers_.end();
    const bool culprit = std::find(culprits_.begin(), culprits_.end(), rank.rank) != culprits_.end();
    p.setFont(bold);
    QRect r(4, header.y, label_column_px_ - 8, header.height);
    QString text = HeaderText(header.rank);
    if (straggler || culprit) {
      // Why the run did not finish outranks how fast it ran.
      const QString mark = culprit ? tr("culprit") : tr("straggler");
      const int mark_width = bold_fm.horizontalAdvance(mark) + 6;
      p.setPen(kStragglerRed);
      p.drawText(r, Qt::AlignVCenter | Qt::AlignRight, mark);
      r.setWidth(r.width() - mark_width);
    }
    p.setPen(straggler || culprit ? kStragglerRed : palette().color(QPalette::WindowText));
    p.drawText(r, Qt::AlignVCenter | Qt::AlignLeft, bold_fm.elidedText(text, Qt::ElideRight, r.width()));
    p.setFont(font());
    p.setPen(kSeparator);
    p.drawLine(0, header.y + header.height - 1, label_column_px_, header.y + header.height - 1);
  }
  p.setPen(kSeparator);
  p.drawLine(label_column_px_ - 1, kAxisPx, label_column_px_ - 1, height());
}

void TimelineView::PaintAxis(QPainter& p, const std::vector<Tick>& ticks) {
  const int left = timeAreaLeft();
  const int right = left + timeAreaWidth();
  p.fillRect(QRect(0, 0, width(), kAxisPx), kAxisFill);
  p.setPen(palette().color(QPalette::WindowText));
  // The label column's corner: the visible span.
  p.drawText(QRect(6, 0, label_column_px_ - 12, kAxisPx), Qt::AlignVCenter | Qt::AlignLeft,
             tr("view %1").arg(DurationText(view_.duration_ns())));
  p.save();
  p.setClipRect(QRect(left, 0, right - left, kAxisPx));
  for (const Tick& tick : ticks) {
    const int x = left + static_cast<int>(std::lround(tick.x));
    p.setPen(kSeparator);
    p.drawLine(x, kAxisPx - 7, x, kAxisPx - 1);
    p.setPen(palette().color(QPalette::WindowText));
    const QString label = QString::fromStdString(tick.label);
    p.drawText(x + 3, kAxisPx - 8, label);
  }
  if (range_) {
    const double x0 = std::max<double>(timeToX(range_->first), left);
    const double x1 = std::min<double>(timeToX(range_->second), right);
    if (x1 > x0) {
      const QRect band(static_cast<int>(x0), 0, std::max(1, static_cast<int>(x1 - x0)), kAxisPx);
      p.fillRect(band, QColor(kRangeEdge.red(), kRangeEdge.green(), kRangeEdge.blue(), 0x60));
    }
  }
  p.restore();
  p.setPen(kSeparator);
  p.drawLine(0, kAxisPx - 1, width(), kAxisPx - 1);
  p.drawLine(label_column_px_ - 1, 0, label_column_px_ - 1, kAxisPx);
}

void TimelineView::PaintRange(QPainter& p) {
  if (!range_) return;
  const int left = timeAreaLeft();
  const int right = left + timeAreaWidth();
  const double x0 = timeToX(range_->first);
  const double x1 = timeToX(range_->second);
  if (x1 < left || x0 > right) return;
  const int a = static_cast<int>(std::max<double>(x0, left));
  const int b = static_cast<int>(std::min<double>(x1, right));
  p.fillRect(QRect(a, kAxisPx, std::max(1, b - a), RowsAreaHeight()), kRangeFill);
  p.setPen(kRangeEdge);
  if (x0 >= left) p.drawLine(static_cast<int>(x0), kAxisPx, static_cast<int>(x0), height());
  if (x1 <= right) p.drawLine(static_cast<int>(x1), kAxisPx, static_cast<int>(x1), height());
  // Its duration just under the axis, inside the range, so it never covers the tick labels.
  const QFontMetrics fm(font());
  const QString text = DurationText(range_->second - range_->first);
  const int text_width = fm.horizontalAdvance(text);
  if (text_width + 8 < b - a) {
    const QRect backing((a + b) / 2 - text_width / 2 - 3, kAxisPx + 2, text_width + 6, fm.height());
    p.fillRect(backing, QColor(255, 255, 255, 230));
    p.setPen(kRangeEdge.darker(150));
    p.drawText(backing, Qt::AlignCenter, text);
  }
}

void TimelineView::PaintMatches(QPainter& p) {
  if (!matches_ || matches_->empty()) return;
  const int left = timeAreaLeft();
  const int right = left + timeAreaWidth();
  p.save();
  p.setClipRect(QRect(left, kAxisPx, right - left, RowsAreaHeight()));
  p.setPen(QPen(kMatchOutline, 1));
  p.setBrush(Qt::NoBrush);
  const int64_t view_start = view_.start_ns(), view_end = view_.end_ns();
  for (const VisibleRow& row : geometry_.rows) {
    const std::span<const uint32_t> found = matches_->InRow(row.rank, row.track, row.row);
    if (found.empty()) continue;
    const EventRow& events = model_->ranks()[row.rank].tracks[row.track].rows[row.row];
    const int64_t offset = model_->ranks()[row.rank].clock_offset_ns;
    // Starts and ends ascend along a row: the first match ending in the view, then runs of
    // matches merged per pixel, jumping past each run with a binary search, so a view of
    // millions of matches draws a few rects per pixel column at most.
    auto it = std::partition_point(found.begin(), found.end(),
                                   [&](uint32_t i) { return events.end[i] + offset < view_start; });
    std::optional<std::pair<int, int>> run;
    auto flush = [&] {
      if (run) p.drawRect(run->first - 1, row.y, std::max(2, run->second - run->first) + 1, row.height - 1);
    };
    while (it != found.end()) {
      const int64_t start = events.start[*it] + offset;
      if (start > view_end) break;
      auto [x0, x1] = PixelSpan(timeToX(start), timeToX(events.end[*it] + offset));
      x0 = std::max(x0, left - 1);
      x1 = std::min(x1, right + 1);
      if (run && x0 <= run->second + 1) {
        run->second = std::max(run->second, x1);
      } else {
        flush();
        run = std::make_pair(x0, x1);
      }
      // The next match that starts past this run's last pixel.
      const int64_t past = xToTime(run->second + 1) - offset;
      auto next = std::next(it);
      if (next != found.end() && events.start[*next] < past) {
        next = std::partition_point(next, found.end(), [&](uint32_t i) { return events.start[i] < past; });
        // Whatever starts inside the run's last pixel is inside the run.
        const int64_t last_end = events.end[*std::prev(next)] + offset;
        run->second = std::max(run->second, std::min(static_cast<int>(std::ceil(timeToX(last_end))), right + 1));
      }
      it = next;
    }
    flush();
  }
  p.restore();
}

void TimelineView::setPathMarks(std::vector<PathMark> marks) {
  path_marks_ = std::move(marks);
  update();
}

void TimelineView::PaintPath(QPainter& p) {
  if (path_marks_.empty() || !model_) return;
  const int left = timeAreaLeft();
  const int right = left + timeAreaWidth();
  p.save();
  p.setClipRect(QRect(left, kAxisPx, right - left, RowsAreaHeight()));
  std::optional<QPoint> previous_end;  // where the last mark ended: joined to the next one
  for (const PathMark& mark : path_marks_) {
    if (mark.rank >= model_->ranks().size() || mark.track >= model_->ranks()[mark.rank].tracks.size()) continue;
    const LayoutEntry* entry = layout_.RowEntry(mark.rank, mark.track, 0);
    if (!entry) {  // a collapsed rank
      previous_end.reset();
      continue;
    }
    const int y = contentToWidgetY(entry->y);
    const int h = std::max(3, entry->height - 1);
    auto [x0, x1] = PixelSpan(timeToX(mark.start_ns), timeToX(mark.end_ns));
    x0 = std::max(x0, left - 3);
    x1 = std::min(x1, right + 3);
    if (previous_end && previous_end->y() != y + h / 2) {
      p.setPen(QPen(kPathColor, 1, Qt::DotLine));
      p.drawLine(*previous_end, QPoint(x0, y + h / 2));
    }
    if (mark.work) {
      p.setBrush(Qt::NoBrush);
      p.setPen(QPen(kPathColor, 2));
      p.drawRect(QRect(x0, y + 1, std::max(2, x1 - x0), h - 2));
    } else {
      p.setPen(QPen(kPathColor, 2, Qt::DashLine));
      p.drawLine(x0, y + h / 2, std::max(x0 + 1, x1), y + h / 2);
    }
    previous_end = QPoint(std::max(x0 + 1, x1), y + h / 2);
  }
  p.restore();
}

void TimelineView::PaintSelection(QPainter& p) {
  if (!selected_ || !model_->Contains(*selected_)) return;
  const EventRef& ref = *selected_;
  const LayoutEntry* entry = layout_.RowEntry(ref.rank, ref.track, ref.row);
  if (!entry) return;
  const int y = contentToWidgetY(entry->y);
  auto [x0, x1] = PixelSpan(timeToX(model_->DisplayStart(ref)), timeToX(model_->DisplayEnd(ref)));
  x0 = std::max(x0, timeAreaLeft() - 2);
  x1 = std::min(x1, timeAreaLeft() + timeAreaWidth() + 2);
  if (x1 < timeAreaLeft() || x0 > timeAreaLeft() + timeAreaWidth()) return;
  const QRect r(x0 - 1, y, std::max(3, x1 - x0 + 1), entry->height - 1);
  p.setBrush(Qt::NoBrush);
  p.setPen(QPen(Qt::white, 1));
  p.drawRect(r.adjusted(1, 1, -1, -1));
  p.setPen(QPen(QColor(0x10, 0x10, 0x10), 2));
  p.drawRect(r);
}

void TimelineView::PaintFlow(QPainter& p) {
  if (!selected_ || !flow_peer_ || !model_->Contains(*flow_peer_)) return;
  // From the launching API call to the device work it launched.
  EventRef from = *flow_peer_, to = *selected_;
  if (model_->SourceOf(*selected_) == analyzer::EventSource::kApiCall) std::swap(from, to);
  const auto y0 = RowCenterY(from);
  const auto y1 = RowCenterY(to);
  if (!y0 || !y1) return;
  const int64_t from_ns = model_->DisplayStart(from), to_ns = model_->DisplayStart(to);
  // An end off screen is drawn at the edge, with a marker saying where it is, so the arrow
  // never seems to come from whatever kernel sits at the edge.
  const double left = timeAreaLeft() + 8, right = timeAreaLeft() + timeAreaWidth() - 8;
  const double xa = timeToX(from_ns), xb = timeToX(to_ns);
  const bool a_off = xa < left - 8 || xa > right + 8, b_off = xb < left - 8 || xb > right + 8;
  const QPointF a(std::clamp(xa, left, right), *y0);
  const QPointF b(std::clamp(xb, left, right), *y1);
  p.save();
  p.setClipRect(QRect(timeAreaLeft(), kAxisPx, timeAreaWidth(), RowsAreaHeight()));
  p.setRenderHint(QPainter::Antialiasing, true);
  QPainterPath path(a);
  const double bend = std::max(30.0, std::abs(b.y() - a.y()) / 2);
  path.cubicTo(a + QPointF(bend, 0), b - QPointF(bend, 0), b);
  p.setBrush(Qt::NoBrush);
  // A light halo under the line keeps it readable over the boxes it crosses.
  p.setPen(QPen(QColor(255, 255, 255, 210), 5, Qt::SolidLine, Qt::RoundCap));
  p.drawPath(path);
  p.setPen(QPen(kFlowColor, 2, Qt::SolidLine, Qt::RoundCap));
  p.drawPath(path);
  // Arrow head along the curve's final direction (horizontal, by construction).
  QPolygonF head;
  head << b << b + QPointF(-9, -5) << b + QPointF(-9, 5);
  p.setBrush(kFlowColor);
  p.drawPolygon(head);
  p.setBrush(Qt::white);
  p.drawEllipse(a, 3.5, 3.5);
  auto off_screen = [&](const QPointF& at, double x, const QString& what) {
    // A chevron at the edge, pointing where the end is, and how far in time.
    const double dir = x < at.x() ? -1 : 1;
    QPolygonF chevron;
    chevron << at + QPointF(dir * 7, 0) << at + QPointF(-dir * 2, -6) << at + QPointF(-dir * 2, 6);
    p.setBrush(kFlowColor);
    p.setPen(Qt::NoPen);
    p.drawPolygon(chevron);
    const QString text = tr("%1 %2 %3").arg(what, DurationText(std::abs(to_ns - from_ns)),
                                             dir < 0 ? tr("before") : tr("after"));
    const QFontMetrics fm(font());
    const QRectF box(dir < 0 ? at.x() + 6 : at.x() - 6 - fm.horizontalAdvance(text) - 6, at.y() - fm.height() - 6,
                     fm.horizontalAdvance(text) + 6, fm.height() + 2);
    p.fillRect(box, QColor(255, 255, 255, 225));
    p.setPen(kFlowColor.darker(130));
    p.drawText(box, Qt::AlignCenter, text);
  };
  if (a_off) off_screen(a, xa, tr("launch:"));
  if (b_off) off_screen(b, xb, tr("device work:"));
  p.restore();
}

// ---- Interaction -----------------------------------------------------------------------

void TimelineView::mousePressEvent(QMouseEvent* event) {
  SyncGeometry();
  const QPoint pos = event->position().toPoint();
  press_pos_ = last_pos_ = pos;
  drag_button_ = event->button();
  setFocus(Qt::MouseFocusReason);
  if (!model_) return;
  if (event->button() == Qt::MiddleButton) {
    drag_ = Drag::kPan;
    setCursor(Qt::ClosedHandCursor);
    return;
  }
  if (event->button() != Qt::LeftButton) return;
  if (OnColumnEdge(pos)) {
    drag_ = Drag::kLabelColumn;
    return;
  }
  const bool in_time_area = pos.x() >= timeAreaLeft() && pos.x() < timeAreaLeft() + timeAreaWidth();
  if (in_time_area && (pos.y() < kAxisPx || (event->modifiers() & Qt::ShiftModifier))) {
    drag_ = Drag::kRange;
    range_anchor_ns_ = xToTime(pos.x());
    return;
  }
  drag_ = Drag::kPending;
}

void TimelineView::mouseMoveEvent(QMouseEvent* event) {
  const QPoint pos = event->position().toPoint();
  if (drag_ == Drag::kPending && (pos - press_pos_).manhattanLength() > kDragThresholdPx) {
    drag_ = Drag::kPan;
    setCursor(Qt::ClosedHandCursor);
  }
  if (drag_ == Drag::kNone) {
    // The column's edge says it can be dragged.
    if (OnColumnEdge(pos)) {
      setCursor(Qt::SplitHCursor);
    } else if (cursor().shape() == Qt::SplitHCursor) {
      unsetCursor();
    }
  }
  if (drag_ == Drag::kLabelColumn) {
    setLabelColumnWidth(pos.x() + 1);
  } else if (drag_ == Drag::kPan) {
    const QPoint delta = pos - last_pos_;
    view_.PanPixels(-delta.x());
    ClampView();
    setVerticalOffset(verticalOffset() - delta.y());
    ViewRangeChanged();
  } else if (drag_ == Drag::kRange) {
    const int x = std::clamp(pos.x(), timeAreaLeft(), timeAreaLeft() + timeAreaWidth());
    const int64_t t = xToTime(x);
    range_ = std::make_pair(std::min(range_anchor_ns_, t), std::max(range_anchor_ns_, t));
    update();
  }
  last_pos_ = pos;
}

void TimelineView::mouseReleaseEvent(QMouseEvent* event) {
  if (event->button() != drag_button_) return;
  const QPoint pos = event->position().toPoint();
  const Drag drag = drag_;
  drag_ = Drag::kNone;
  drag_button_ = Qt::NoButton;
  unsetCursor();
  if (!model_ || drag == Drag::kLabelColumn) return;
  if (drag == Drag::kRange) {
    if (range_ && std::abs(pos.x() - press_pos_.x()) >= kDragThresholdPx) {
      setSelectedRange(range_->first, range_->second);
    } else {
      const bool had_range = range_.has_value();
      range_.reset();
      update();
      if (had_range) emit rangeCleared();
    }
    return;
  }
  if (drag != Drag::kPending) return;
  // A click without a drag.
  if (const auto rank = rankHeaderAt(pos)) {
    toggleRankCollapsed(*rank);
    return;
  }
  if (const auto ref = eventAt(pos)) {
    selectEvent(*ref);
  } else if (selected_) {
    selected_.reset();
    flow_peer_.reset();
    update();
    emit selectionCleared();
  }
}

void TimelineView::wheelEvent(QWheelEvent* event) {
  SyncGeometry();
  if (!model_) return;
  const QPoint delta = event->angleDelta();
  if (event->modifiers() & Qt::ControlModifier) {
    // One history entry per wheel gesture, not one per notch.
    if (!last_wheel_zoom_.isValid() || last_wheel_zoom_.elapsed() > kWheelZoomCoalesceMs) PushHistory();
    last_wheel_zoom_.start();
    const double factor = std::pow(kWheelZoomBase, delta.y() / 120.0);
    const double x = event->position().x() - timeAreaLeft();
    view_.ZoomAt(std::clamp(x, 0.0, static_cast<double>(timeAreaWidth())), factor);
    ClampView();
    ViewRangeChanged();
  } else if ((event->modifiers() & Qt::ShiftModifier) || delta.x() != 0) {
    const int d = delta.x() != 0 ? delta.x() : delta.y();
    panByFraction(-0.1 * d / 120.0);
  } else {
    setVerticalOffset(verticalOffset() - delta.y() * kWheelScrollPx / 120);
  }
  event->accept();
}

void TimelineView::keyPressEvent(QKeyEvent* event) {
  SyncGeometry();
  const QPoint cursor = mapFromGlobal(QCursor::pos());
  const bool cursor_inside = rect().contains(cursor) && cursor.x() >= timeAreaLeft();
  const std::optional<double> anchor = cursor_inside ? std::optional<double>(cursor.x()) : std::nullopt;
  switch (event->key()) {
    case Qt::Key_W: zoomBy(kKeyZoomFactor, anchor); break;
    case Qt::Key_S: zoomBy(1 / kKeyZoomFactor, anchor); break;
    case Qt::Key_A: panByFraction(-0.1); break;
    case Qt::Key_D: panByFraction(0.1); break;
    case Qt::Key_F: fitAll(); break;
    case Qt::Key_Z: zoomToSelection(); break;
    case Qt::Key_Backspace: goBack(); break;
    case Qt::Key_Escape: clearSelection(); break;
    case Qt::Key_Up: setVerticalOffset(verticalOffset() - scroll_->singleStep()); break;
    case Qt::Key_Down: setVerticalOffset(verticalOffset() + scroll_->singleStep()); break;
    case Qt::Key_PageUp: setVerticalOffset(verticalOffset() - scroll_->pageStep()); break;
    case Qt::Key_PageDown: setVerticalOffset(verticalOffset() + scroll_->pageStep()); break;
    case Qt::Key_Home: setVerticalOffset(0); break;
    case Qt::Key_End: setVerticalOffset(scroll_->maximum()); break;
    case Qt::Key_Question:
    case Qt::Key_F1: emit helpRequested(); break;
    default: QWidget::keyPressEvent(event); return;
  }
  event->accept();
}

QString TimelineView::toolTipAt(const QPoint& pos) const {
  if (!model_) return {};
  if (pos.x() < timeAreaLeft()) {
    const LayoutEntry* entry = layout_.EntryAt(pos.y() - kAxisPx + verticalOffset());
    if (!entry || pos.y() < kAxisPx) return {};
    const RankTimeline& rank = model_->ranks()[entry->rank];
    if (entry->kind == LayoutEntry::Kind::kRankHeader) {
      return tr("%1\n%2\n%L3 events — click to collapse or expand")
          .arg(QString::fromStdString(rank.Label()), QString::fromStdString(rank.file.string()))
          .arg(rank.events);
    }
    if (entry->kind == LayoutEntry::Kind::kCounter) return CounterToolTip(*entry, std::nullopt);
    const Track& track = rank.tracks[entry->track];
    return tr("%1\n%L2 events in %3 rows")
        .arg(QString::fromStdString(track.label))
        .arg(track.events)
        .arg(track.rows.size());
  }
  if (pos.y() >= kAxisPx) {
    const LayoutEntry* entry = layout_.EntryAt(pos.y() - kAxisPx + verticalOffset());
    if (entry && entry->kind == LayoutEntry::Kind::kCounter) return CounterToolTip(*entry, pos.x());
  }
  const auto ref = eventAt(pos);
  if (!ref) return {};
  const int64_t start = model_->DisplayStart(*ref);
  if (const EndMark* mark = model_->FindEndMark(*ref)) {
    return tr("%1\n%2 at %3 · click for details")
        .arg(QString::fromStdString(mark->label),
             mark->kind == EndMarkKind::kCollective ? tr("entered") : tr("opened"),
             DurationText(mark->start_ns + model_->rank(*ref).clock_offset_ns - model_->start_ns()));
  }
  return tr("%1\n%2 · %3 at %4")
      .arg(QString::fromStdString(model_->Name(*ref)),
           QString::fromUtf8(analyzer::EventClassName(model_->ClassOf(*ref))),
           DurationText(model_->DisplayEnd(*ref) - start),
           DurationText(start - model_->start_ns()));
}

QString TimelineView::CounterToolTip(const LayoutEntry& entry, std::optional<int> x) const {
  const RankTimeline& rank = model_->ranks()[entry.rank];
  const CounterTrack& counter = rank.counters[entry.track];
  if (!x) {
    return tr("%1: %2\npeak %3 · %L4 changes")
        .arg(QString::fromStdString(counter.label),
             QString::fromStdString(analyzer::MemorySourceTitle(counter.source)),
             BytesText(static_cast<double>(counter.peak)))
        .arg(counter.size());
  }
  const int64_t t = xToTime(*x);
  QString text = tr("%1 at %2: %3")
                     .arg(QString::fromStdString(counter.label), DurationText(t - model_->start_ns()),
                          BytesText(static_cast<double>(counter.TotalAt(t - rank.clock_offset_ns))));
  const std::vector<int64_t> held = counter.CategoriesAt(t - rank.clock_offset_ns);
  for (size_t c = 0; c < held.size(); ++c) {
    if (held[c] == 0) continue;
    text += tr("\n  %1: %2").arg(QString::fromStdString(counter.categories[c]), BytesText(static_cast<double>(held[c])));
  }
  return text;
}

bool TimelineView::event(QEvent* event) {
  if (event->type() == QEvent::ToolTip) {
    auto* help = static_cast<QHelpEvent*>(event);
    const QString text = toolTipAt(help->pos());
    if (text.isEmpty()) {
      QToolTip::hideText();
      event->ignore();
    } else {
      QToolTip::showText(help->globalPos(), text, this);
    }
    return true;
  }
  return QWidget::event(event);
}

}  // namespace rankscope::gui
