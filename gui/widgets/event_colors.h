// The viewer's palette: one color per EventClass, shared by the timeline, the overview,
// the legend and the breakdown bars, so a class looks the same everywhere.
#pragma once

#include <QColor>
#include <QWidget>

class QPainter;

#include "analyzer/classify.h"

namespace rankscope::gui {

// The fill of a single event of `event_class`.
QColor EventClassColor(analyzer::EventClass event_class);
// The fill of a folded item (many sub-pixel events): same hue, paler, so it reads as
// "lots of small things here" rather than one long event.
QColor FoldedClassColor(analyzer::EventClass event_class);
// The outline drawn around a folded item, darker than its fill.
QColor FoldedOutlineColor(analyzer::EventClass event_class);
// Black or white, whichever reads better on `fill`.
QColor TextColorOn(const QColor& fill);

// The "open at end" style of a collective in flight or a range open when its rank's file
// ended: a pale red fill under red diagonal hatching, outlined red. Unlike any class color,
// so it reads as "unfinished" whatever the class beneath.
QColor OpenAtEndFill();
QColor OpenAtEndColor();  // the hatching, the outline, the label and the "state at" marker
void PaintOpenAtEnd(QPainter& p, const QRect& rect);

// Colors of the breakdown parts that are not a single class.
QColor OverlapColor();  // compute and comm at once
QColor IdleColor();

// A one-line legend: a swatch and the class name for each EventClass, plus "folded" and
// "open at end".
class LegendStrip : public QWidget {
 public:
  explicit LegendStrip(QWidget* parent = nullptr);
  QSize sizeHint() const override;
  QSize minimumSizeHint() const override;

 protected:
  void paintEvent(QPaintEvent* event) override;
};

}  // namespace rankscope::gui
