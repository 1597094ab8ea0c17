// The viewer's palette: one color per EventClass, shared by the timeline, the overview,
// the legend and the breakdown bars, so a class looks the same everywhere; and, by default,
// colors by name for compute kernels and annotation ranges (as Nsight Systems and Perfetto
// color them), each from its class's own family of hues, so a repeating kernel stands out
// and its class still shows (compute: blues, teals and violets; ranges: muted pastels).
#pragma once

#include <QColor>
#include <QWidget>

#include <cstdint>
#include <string_view>

class QPainter;

#include "analyzer/classify.h"

namespace rankscope::gui {

// The fill of a single event of `event_class`.
QColor EventClassColor(analyzer::EventClass event_class);
// A folded item shaded by how busy it is: `level` 0..kDensityLevels-1 from sparse (pale) to
// covered (near the class's own color), so a zoomed-out lane shows where the work is.
inline constexpr int kDensityLevels = 4;
int DensityLevel(float busy);  // busy share 0..1 -> level
QColor FoldedDensityColor(analyzer::EventClass event_class, int level);
// The outline drawn around a folded item, darker than its fill.
QColor FoldedOutlineColor(analyzer::EventClass event_class);
// Color slots: the single color of each class (slot == class), then the by-name families.
// O(1); the same name gets the same color in every run, rank and session (a stable hash of
// its text, not of its id).
inline constexpr int kComputeNameColors = 12;
inline constexpr int kRangeNameColors = 8;
inline constexpr int kColorSlots = analyzer::kEventClassCount + kComputeNameColors + kRangeNameColors;
// FNV-1a of the name's bytes: what picks its color.
uint32_t NameColorHash(std::string_view name);
// The slot of an event of `event_class` named with hash `name_hash`: by name for compute and
// annotation when `by_name`, else the class's own slot.
int ColorSlot(analyzer::EventClass event_class, uint32_t name_hash, bool by_name);
QColor SlotColor(int slot);
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

// The legend: a swatch and the class name for each EventClass, plus "folded" and "open at
// end", on one line where the width allows and wrapped onto more where it does not.
class LegendStrip : public QWidget {
 public:
  explicit LegendStrip(QWidget* parent = nullptr);
  // Compute and annotation swatches show a few of their by-name colors.
  void setColorByName(bool by_name);
  QSize sizeHint() const override;  // one line
  QSize minimumSizeHint() const override;
  bool hasHeightForWidth() const override { return true; }
  int heightForWidth(int width) const override;

 protected:
  void paintEvent(QPaintEvent* event) override;

 private:
  bool by_name_ = true;
};

}  // namespace rankscope::gui
