#include "gui/widgets/overview_strip.h"

#include <QMouseEvent>
#include <QPainter>

#include <algorithm>
#include <cmath>

#include "gui/widgets/event_colors.h"

namespace rankscope::gui {
namespace {

using analyzer::EventClass;

constexpr int kHeightPx = 52;

// Drawn bottom-up in this order. Host-side kinds only show for a rank without device
// activity (e.g. a trace of annotations only), so they never hide the device picture.
constexpr EventClass kDeviceClasses[] = {EventClass::kCompute, EventClass::kComm, EventClass::kMemory};
constexpr EventClass kHostClasses[] = {EventClass::kCollective, EventClass::kAnnotation, EventClass::kApiCall,
                                       EventClass::kSync};

}  // namespace

OverviewData ComputeOverview(const TimelineModel& model, int buckets) {
  OverviewData data;
  data.start_ns = model.start_ns();
  data.end_ns = std::max(model.end_ns(), model.start_ns() + 1);
  data.buckets = std::max(1, buckets);
  const double bucket_ns = static_cast<double>(data.end_ns - data.start_ns) / data.buckets;
  for (const RankTimeline& rank : model.ranks()) {
    OverviewData::Rank out;
    out.rank = rank.rank;
    for (auto& busy : out.busy) busy.assign(data.buckets, 0.f);
    for (const Track& track : rank.tracks) {
      for (size_t r = 0; r < track.rows.size(); ++r) {
        const EventRow& row = track.rows[r];
        for (size_t i = 0; i < row.size(); ++i) {
          const uint8_t c = row.event_class[i];
          if (c >= analyzer::kEventClassCount) continue;
          // Nested host ranges would count the same time once per depth: outermost only.
          if (r > 0 && !analyzer::DeviceClassOf(static_cast<EventClass>(c))) continue;
          std::vector<float>& busy = out.busy[c];
          const double a = (row.start[i] + rank.clock_offset_ns - data.start_ns) / bucket_ns;
          const double b = (row.end[i] + rank.clock_offset_ns - data.start_ns) / bucket_ns;
          if (b <= 0 || a >= data.buckets) continue;
          const int first = std::max(0, static_cast<int>(a));
          const int last = std::min(data.buckets - 1, static_cast<int>(b));
          if (first == last) {
            busy[first] += static_cast<float>(b - a);
            continue;
          }
          busy[first] += static_cast<float>(first + 1 - std::max(a, 0.0));
          for (int k = first + 1; k < last; ++k) busy[k] += 1.f;
          busy[last] += static_cast<float>(std::min(b, static_cast<double>(data.buckets)) - last);
        }
      }
    }
    for (const EventClass c : kDeviceClasses) {
      const auto& busy = out.busy[static_cast<int>(c)];
      out.has_device_activity |= std::any_of(busy.begin(), busy.end(), [](float v) { return v > 0; });
    }
    data.ranks.push_back(std::move(out));
  }
  return data;
}

OverviewStrip::OverviewStrip(QWidget* parent) : QWidget(parent) {
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
  setToolTip(tr("Each rank's activity over the whole run; the box is the visible range. Click to center."));
  setCursor(Qt::PointingHandCursor);
}

QSize OverviewStrip::sizeHint() const { return {800, kHeightPx}; }
QSize OverviewStrip::minimumSizeHint() const { return {left_px_ + 100, kHeightPx}; }

void OverviewStrip::setData(OverviewData data) {
  data_ = std::move(data);
  RenderDensity();
  update();
}

void OverviewStrip::clear() { setData(OverviewData()); }

void OverviewStrip::setViewRange(int64_t t0, int64_t t1) {
  view_t0_ = t0;
  view_t1_ = t1;
  update();
}

void OverviewStrip::resizeEvent(QResizeEvent*) { RenderDensity(); }

double OverviewStrip::XAt(int64_t t) const {
  const double span = static_cast<double>(data_.end_ns - data_.start_ns);
  if (span <= 0) return left_px_;
  return left_px_ + (t - data_.start_ns) / span * std::max(1, width() - left_px_);
}

int64_t OverviewStrip::TimeAt(double x) const {
  const double span = static_cast<double>(data_.end_ns - data_.start_ns);
  return data_.start_ns + static_cast<int64_t>((x - left_px_) / std::max(1, width() - left_px_) * span);
}

// The per-rank bands, drawn once per size or data change.
void OverviewStrip::RenderDensity() {
  const int w = std::max(1, width() - left_px_);
  const int h = std::max(1, height() - 4);
  density_ = QPixmap(w, h);
  density_.fill(Qt::white);
  if (data_.ranks.empty() || data_.buckets <= 0) return;
  QPainter p(&density_);
  const double band = static_cast<double>(h) / data_.ranks.size();
  const double bucket_px = static_cast<double>(w) / data_.buckets;
  for (size_t r = 0; r < data_.ranks.size(); ++r) {
    const OverviewData::Rank& rank = data_.ranks[r];
    const double band_top = r * band;
    const double band_bottom = band_top + band - (band >= 4 ? 1 : 0);  // a pixel between ranks
    std::vector<EventClass> classes;
    if (rank.has_device_activity) {
      classes.assign(std::begin(kDeviceClasses), std::end(kDeviceClasses));
    } else {
      classes.assign(std::begin(kHostClasses), std::end(kHostClasses));
    }
    for (int b = 0; b < data_.buckets; ++b) {
      float total = 0;
      for (const EventClass c : classes) total += rank.busy[static_cast<int>(c)][b];
      if (total <= 0) continue;
      // Stacked shares of the band; overlapping work is scaled to fit.
      const double scale = total > 1 ? 1.0 / total : 1.0;
      const int x0 = static_cast<int>(std::floor(b * bucket_px));
      const int x1 = std::max(x0 + 1, static_cast<int>(std::floor((b + 1) * bucket_px)));
      double y = band_bottom;
      for (const EventClass c : classes) {
        const double share = rank.busy[static_cast<int>(c)][b] * scale;
        if (share <= 0) continue;
        const double top = y - share * (band_bottom - band_top);
        const int iy0 = static_cast<int>(std::floor(top));
        const int iy1 = std::max(iy0 + 1, static_cast<int>(std::ceil(y)));
        p.fillRect(QRect(x0, iy0, x1 - x0, iy1 - iy0), EventClassColor(c));
        y = top;
      }
    }
  }
}

void OverviewStrip::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), QColor(0xfa, 0xfa, 0xfa));
  p.setPen(palette().color(QPalette::WindowText));
  p.drawText(QRect(6, 0, left_px_ - 12, height()), Qt::AlignVCenter | Qt::AlignLeft,
             data_.ranks.empty() ? tr("overview") : tr("overview · %n rank(s)", "", int(data_.ranks.size())));
  p.drawPixmap(left_px_, 2, density_);
  p.setPen(QColor(0xb8, 0xb8, 0xb8));
  p.drawRect(left_px_, 1, width() - left_px_ - 1, height() - 3);
  if (data_.ranks.empty() || view_t1_ <= view_t0_) return;
  // The visible range: shade what is outside it, outline what is inside.
  const int x0 = static_cast<int>(std::clamp(XAt(view_t0_), double(left_px_), double(width() - 1)));
  const int x1 = std::max(x0 + 2, static_cast<int>(std::clamp(XAt(view_t1_), double(left_px_), double(width()))));
  const QColor shade(0, 0, 0, 0x28);
  p.fillRect(QRect(left_px_, 2, x0 - left_px_, height() - 4), shade);
  p.fillRect(QRect(x1, 2, width() - x1, height() - 4), shade);
  p.setPen(QPen(QColor(0x20, 0x40, 0x90), 2));
  p.setBrush(Qt::NoBrush);
  p.drawRect(QRect(x0, 2, x1 - x0 - 1, height() - 5));
  if (press_x_ && drag_to_x_) {  // the window being dragged
    const int a = static_cast<int>(std::min(*press_x_, *drag_to_x_));
    const int b = static_cast<int>(std::max(*press_x_, *drag_to_x_));
    p.fillRect(QRect(a, 2, std::max(1, b - a), height() - 4), QColor(0x20, 0x40, 0x90, 0x30));
  }
}

void OverviewStrip::setLabelWidth(int px) {
  if (px == left_px_) return;
  left_px_ = px;
  RenderDensity();
  updateGeometry();
  update();
}

void OverviewStrip::mousePressEvent(QMouseEvent* event) {
  if (event->button() != Qt::LeftButton || data_.ranks.empty()) return;
  if (event->position().x() < left_px_) return;
  press_x_ = event->position().x();
  drag_to_x_.reset();
}

void OverviewStrip::mouseMoveEvent(QMouseEvent* event) {
  if (!press_x_ || !(event->buttons() & Qt::LeftButton)) return;
  const double x = std::clamp<double>(event->position().x(), left_px_, width());
  if (drag_to_x_ || std::abs(x - *press_x_) >= kMinDragPx) {
    drag_to_x_ = x;
    update();
  }
}

void OverviewStrip::mouseReleaseEvent(QMouseEvent* event) {
  if (event->button() != Qt::LeftButton || !press_x_) return;
  const double from = *press_x_;
  const std::optional<double> to = drag_to_x_;
  press_x_.reset();
  drag_to_x_.reset();
  update();
  if (to && std::abs(*to - from) >= kMinDragPx) {
    emit windowRequested(TimeAt(std::min(from, *to)), TimeAt(std::max(from, *to)));
  } else {
    emit centerRequested(TimeAt(from));
  }
}

}  // namespace rankscope::gui
