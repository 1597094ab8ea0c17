#include "gui/widgets/event_colors.h"

#include <QPainter>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace rankscope::gui {

using analyzer::EventClass;

QColor EventClassColor(EventClass event_class) {
  switch (event_class) {
    case EventClass::kCompute: return QColor(0x4a, 0x7f, 0xcf);     // blue
    case EventClass::kComm: return QColor(0xe4, 0x5c, 0x3a);        // orange-red
    case EventClass::kMemory: return QColor(0x3f, 0xa8, 0x5a);      // green
    case EventClass::kAnnotation: return QColor(0xa5, 0x9c, 0xc8);  // grey-violet
    case EventClass::kApiCall: return QColor(0xcf, 0xcf, 0xcf);     // light grey
    case EventClass::kSync: return QColor(0xe8, 0xc5, 0x2a);        // yellow
    case EventClass::kCollective: return QColor(0xc0, 0x5a, 0x00);  // dark orange
    case EventClass::kMark: return QColor(0x20, 0x20, 0x20);        // black
  }
  return QColor(0x80, 0x80, 0x80);
}

uint32_t NameColorHash(std::string_view name) {
  uint32_t hash = 2166136261u;
  for (const char c : name) {
    hash ^= static_cast<uint8_t>(c);
    hash *= 16777619u;
  }
  return hash;
}

int ColorSlot(EventClass event_class, uint32_t name_hash, bool by_name) {
  const int own = static_cast<int>(event_class);
  if (!by_name) return own;
  switch (event_class) {
    case EventClass::kCompute: return analyzer::kEventClassCount + static_cast<int>(name_hash % kComputeNameColors);
    case EventClass::kAnnotation:
      return analyzer::kEventClassCount + kComputeNameColors + static_cast<int>(name_hash % kRangeNameColors);
    default: return own;
  }
}

QColor SlotColor(int slot) {
  // Compute: blues, teals and violets, away from comm's orange and memory's green.
  static const QColor kCompute[kComputeNameColors] = {
      {0x4a, 0x7f, 0xcf}, {0x2f, 0x5f, 0xa8}, {0x6c, 0x9b, 0xe0}, {0x1f, 0x8a, 0x9e}, {0x4f, 0xb0, 0xc0},
      {0x3b, 0x6e, 0x8f}, {0x7a, 0x6f, 0xd0}, {0x5a, 0x4a, 0xa8}, {0x93, 0x86, 0xdc}, {0x2b, 0x4c, 0x7e},
      {0x58, 0x8c, 0xb8}, {0x36, 0x9a, 0xc4}};
  // Ranges: muted pastels around the annotation class's grey-violet.
  static const QColor kRanges[kRangeNameColors] = {{0xa5, 0x9c, 0xc8}, {0xb8, 0xc4, 0xd6}, {0xc9, 0xb3, 0xc9},
                                                   {0xb3, 0xc7, 0xb8}, {0xd4, 0xc5, 0xa8}, {0xa8, 0xb8, 0xd0},
                                                   {0xc4, 0xae, 0xb4}, {0xb6, 0xb0, 0xa0}};
  if (slot < analyzer::kEventClassCount) return EventClassColor(static_cast<EventClass>(std::max(slot, 0)));
  slot -= analyzer::kEventClassCount;
  if (slot < kComputeNameColors) return kCompute[slot];
  slot -= kComputeNameColors;
  return kRanges[std::min(slot, kRangeNameColors - 1)];
}


int DensityLevel(float busy) {
  return std::clamp(static_cast<int>(busy * kDensityLevels), 0, kDensityLevels - 1);
}

QColor FoldedDensityColor(EventClass event_class, int level) {
  // From a fifth of the way to the class color (a few short events in a wide span) to most
  // of the way (covered): always paler than a single event, so a fold still reads as one.
  static constexpr double kShare[kDensityLevels] = {0.22, 0.42, 0.62, 0.82};
  const QColor c = EventClassColor(event_class);
  const double share = kShare[std::clamp(level, 0, kDensityLevels - 1)];
  auto mix = [&](int channel) { return static_cast<int>(std::lround(255 + (channel - 255) * share)); };
  return QColor(mix(c.red()), mix(c.green()), mix(c.blue()));
}

QColor FoldedOutlineColor(EventClass event_class) { return EventClassColor(event_class).darker(125); }

QColor TextColorOn(const QColor& fill) {
  // Perceived luminance (ITU-R BT.601 weights).
  const int luma = (299 * fill.red() + 587 * fill.green() + 114 * fill.blue()) / 1000;
  return luma > 140 ? QColor(0x10, 0x10, 0x10) : QColor(Qt::white);
}

QColor OpenAtEndFill() { return QColor(0xfb, 0xe3, 0xe3); }
QColor OpenAtEndColor() { return QColor(0xc6, 0x28, 0x28); }

void PaintOpenAtEnd(QPainter& p, const QRect& rect) {
  p.fillRect(rect, OpenAtEndFill());
  p.fillRect(rect, QBrush(OpenAtEndColor(), Qt::BDiagPattern));
  p.setPen(OpenAtEndColor());
  p.setBrush(Qt::NoBrush);
  p.drawRect(rect.adjusted(0, 0, -1, -1));
}

QColor OverlapColor() { return QColor(0x8e, 0x5b, 0xb5); }
QColor IdleColor() { return QColor(0xe6, 0xe6, 0xe6); }

LegendStrip::LegendStrip(QWidget* parent) : QWidget(parent) {
  QSizePolicy policy(QSizePolicy::Expanding, QSizePolicy::Preferred);
  policy.setHeightForWidth(true);  // as many lines as the width needs
  setSizePolicy(policy);
  setToolTip(tr("Event colors by class (compute kernels and ranges by name within their class's hues, unless "
                "View > Color by Name is off); folded items hold many events narrower than a pixel; hatched red: "
                "a collective in flight or a range open when its rank's file ended"));
}

namespace {

constexpr int kSwatch = 10;
constexpr int kItemGap = 14;
constexpr int kMargin = 4;

// One legend entry: what its swatch shows and its label.
struct LegendEntry {
  enum class Swatch { kClass, kFolded, kOpenAtEnd } swatch;
  EventClass event_class = EventClass::kCompute;
  int first_slot = -1;  // >= 0: three stripes of the class's by-name family from this slot
  QString label;
};

std::vector<LegendEntry> LegendEntries(bool by_name) {
  std::vector<LegendEntry> entries;
  for (int c = 0; c < analyzer::kEventClassCount; ++c) {
    const auto event_class = static_cast<EventClass>(c);
    int first_slot = -1;
    if (by_name && event_class == EventClass::kCompute) first_slot = analyzer::kEventClassCount;
    if (by_name && event_class == EventClass::kAnnotation) first_slot = analyzer::kEventClassCount + kComputeNameColors;
    const QString name = QString::fromUtf8(analyzer::EventClassName(event_class));
    entries.push_back({LegendEntry::Swatch::kClass, event_class, first_slot,
                       first_slot >= 0 ? LegendStrip::tr("%1 (by name)").arg(name) : name});
  }
  entries.push_back({LegendEntry::Swatch::kFolded, EventClass::kCompute, -1, LegendStrip::tr("folded (darker: busier)")});
  entries.push_back({LegendEntry::Swatch::kOpenAtEnd, EventClass::kCompute, -1, LegendStrip::tr("open at end")});
  return entries;
}

// Each entry's top-left corner when laid out left to right in `width`, a new line where an
// entry would cross the right edge; `lines` gets the number of lines.
std::vector<QPoint> LegendPositions(const std::vector<LegendEntry>& entries, const QFontMetrics& fm, int width,
                                    int* lines) {
  const int line_height = fm.height() + 6;
  std::vector<QPoint> positions;
  int x = kMargin;
  int y = 0;
  for (const LegendEntry& entry : entries) {
    const int entry_width = kSwatch + 4 + fm.horizontalAdvance(entry.label);
    if (x > kMargin && x + entry_width > width - kMargin) {
      x = kMargin;
      y += line_height;
    }
    positions.emplace_back(x, y);
    x += entry_width + kItemGap;
  }
  *lines = y / line_height + 1;
  return positions;
}

}  // namespace

QSize LegendStrip::sizeHint() const {
  const QFontMetrics fm(font());
  int lines = 0;
  const std::vector<LegendEntry> entries = LegendEntries(by_name_);
  const std::vector<QPoint> one_line = LegendPositions(entries, fm, std::numeric_limits<int>::max() / 2, &lines);
  const int width = one_line.back().x() + kSwatch + 4 + fm.horizontalAdvance(entries.back().label) + kMargin;
  return {width, fm.height() + 6};
}

int LegendStrip::heightForWidth(int width) const {
  const QFontMetrics fm(font());
  int lines = 0;
  LegendPositions(LegendEntries(by_name_), fm, width, &lines);
  return lines * (fm.height() + 6);
}

void LegendStrip::setColorByName(bool by_name) {
  by_name_ = by_name;
  updateGeometry();
  update();
}

QSize LegendStrip::minimumSizeHint() const { return {60, QFontMetrics(font()).height() + 6}; }

void LegendStrip::paintEvent(QPaintEvent*) {
  QPainter p(this);
  const QFontMetrics fm(font());
  const int line_height = fm.height() + 6;
  const std::vector<LegendEntry> entries = LegendEntries(by_name_);
  int lines = 0;
  const std::vector<QPoint> positions = LegendPositions(entries, fm, width(), &lines);
  for (size_t i = 0; i < entries.size(); ++i) {
    const LegendEntry& entry = entries[i];
    const QRect swatch(positions[i].x(), positions[i].y() + (line_height - kSwatch) / 2, kSwatch, kSwatch);
    switch (entry.swatch) {
      case LegendEntry::Swatch::kClass: {
        const QColor fill = EventClassColor(entry.event_class);
        p.fillRect(swatch, fill);
        if (entry.first_slot >= 0) {
          for (int k = 0; k < 3; ++k) {
            p.fillRect(swatch.x() + k * kSwatch / 3, swatch.y(), kSwatch / 3 + 1, kSwatch, SlotColor(entry.first_slot + k));
          }
        }
        p.setPen(fill.darker(130));
        p.drawRect(swatch.adjusted(0, 0, -1, -1));
        break;
      }
      case LegendEntry::Swatch::kFolded: {  // its density levels side by side, sparse to covered
        const int stripe = std::max(1, kSwatch / kDensityLevels);
        p.fillRect(swatch, FoldedDensityColor(EventClass::kCompute, 0));
        for (int level = 0; level < kDensityLevels; ++level) {
          p.fillRect(swatch.x() + level * stripe, swatch.y(), stripe, kSwatch, FoldedDensityColor(EventClass::kCompute, level));
        }
        p.setPen(FoldedOutlineColor(EventClass::kCompute));
        p.drawRect(swatch.adjusted(0, 0, -1, -1));
        break;
      }
      case LegendEntry::Swatch::kOpenAtEnd:
        PaintOpenAtEnd(p, swatch);
        break;
    }
    p.setPen(palette().color(QPalette::WindowText));
    const int text_x = swatch.right() + 5;
    p.drawText(QRect(text_x, positions[i].y(), width() - text_x, line_height), Qt::AlignVCenter | Qt::AlignLeft,
               entry.label);
  }
}

}  // namespace rankscope::gui
