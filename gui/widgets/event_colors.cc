#include "gui/widgets/event_colors.h"

#include <QPainter>

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

QColor FoldedClassColor(EventClass event_class) {
  // Halfway to white: clearly the same class, clearly not one solid event.
  const QColor c = EventClassColor(event_class);
  return QColor((c.red() + 255) / 2, (c.green() + 255) / 2, (c.blue() + 255) / 2);
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
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
  setToolTip(tr("Event colors by class; folded items hold many events narrower than a pixel; hatched red: a "
                "collective in flight or a range open when its rank's file ended"));
}

namespace {

constexpr int kSwatch = 10;
constexpr int kItemGap = 14;

}  // namespace

QSize LegendStrip::sizeHint() const {
  const QFontMetrics fm(font());
  int width = 0;
  for (int c = 0; c < analyzer::kEventClassCount; ++c) {
    width += kSwatch + 4 + fm.horizontalAdvance(analyzer::EventClassName(static_cast<EventClass>(c))) + kItemGap;
  }
  width += kSwatch + 4 + fm.horizontalAdvance(tr("folded")) + kItemGap;
  width += kSwatch + 4 + fm.horizontalAdvance(tr("open at end"));
  return {width + 8, fm.height() + 6};
}

QSize LegendStrip::minimumSizeHint() const { return {60, QFontMetrics(font()).height() + 6}; }

void LegendStrip::paintEvent(QPaintEvent*) {
  QPainter p(this);
  const QFontMetrics fm(font());
  const int swatch_y = (height() - kSwatch) / 2;
  int x = 4;
  auto item = [&](const QColor& fill, const QColor& outline, const QString& label) {
    p.fillRect(x, swatch_y, kSwatch, kSwatch, fill);
    p.setPen(outline);
    p.drawRect(x, swatch_y, kSwatch - 1, kSwatch - 1);
    x += kSwatch + 4;
    p.setPen(palette().color(QPalette::WindowText));
    p.drawText(QRect(x, 0, width() - x, height()), Qt::AlignVCenter | Qt::AlignLeft, label);
    x += fm.horizontalAdvance(label) + kItemGap;
  };
  for (int c = 0; c < analyzer::kEventClassCount; ++c) {
    const auto event_class = static_cast<EventClass>(c);
    item(EventClassColor(event_class), EventClassColor(event_class).darker(130),
         QString::fromUtf8(analyzer::EventClassName(event_class)));
  }
  item(FoldedClassColor(EventClass::kCompute), FoldedOutlineColor(EventClass::kCompute), tr("folded"));
  PaintOpenAtEnd(p, QRect(x, swatch_y, kSwatch, kSwatch));
  x += kSwatch + 4;
  p.setPen(palette().color(QPalette::WindowText));
  p.drawText(QRect(x, 0, width() - x, height()), Qt::AlignVCenter | Qt::AlignLeft, tr("open at end"));
}

}  // namespace rankscope::gui
