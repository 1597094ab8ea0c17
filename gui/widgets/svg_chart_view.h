// One SVG picture (a chart drawn by report/, e.g. report::ScalingPlotSvg) shown in a widget:
// scaled to fit with its aspect ratio kept, centred, on white. QSvgRenderer draws the vectors
// at whatever size the widget has, so the chart stays sharp as the window is resized.
#pragma once

#include <QByteArray>
#include <QRectF>
#include <QWidget>

QT_BEGIN_NAMESPACE
class QSvgRenderer;
QT_END_NAMESPACE

namespace rankscope::gui {

class SvgChartView : public QWidget {
  Q_OBJECT

 public:
  explicit SvgChartView(QWidget* parent = nullptr);

  // Replaces the picture. False, and nothing drawn, when Qt cannot read `svg`.
  bool setSvg(const QByteArray& svg);
  void clear();

  // The SVG shown, as given.
  const QByteArray& svg() const { return svg_; }
  bool hasPicture() const;
  // The picture's own size (its viewBox); empty without one.
  QSizeF pictureSize() const;
  // Where the picture lands in a widget of `size`: the largest rectangle of the picture's
  // shape that fits, centred.
  QRectF pictureRect(const QSize& size) const;

  QSize sizeHint() const override;
  QSize minimumSizeHint() const override;

 protected:
  void paintEvent(QPaintEvent* event) override;

 private:
  QSvgRenderer* renderer_ = nullptr;
  QByteArray svg_;
};

}  // namespace rankscope::gui
