#include "gui/widgets/svg_chart_view.h"

#include <QPainter>
#include <QSvgRenderer>

#include <algorithm>

namespace rankscope::gui {

SvgChartView::SvgChartView(QWidget* parent) : QWidget(parent), renderer_(new QSvgRenderer(this)) {
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Expanding);
}

bool SvgChartView::setSvg(const QByteArray& svg) {
  svg_ = svg;
  const bool loaded = renderer_->load(svg_);
  if (!loaded) renderer_->load(QByteArray());  // no stale picture from an earlier call
  updateGeometry();
  update();
  return loaded;
}

void SvgChartView::clear() { setSvg(QByteArray()); }

bool SvgChartView::hasPicture() const { return renderer_->isValid() && !pictureSize().isEmpty(); }

QSizeF SvgChartView::pictureSize() const { return renderer_->isValid() ? renderer_->viewBoxF().size() : QSizeF(); }

QRectF SvgChartView::pictureRect(const QSize& size) const {
  const QSizeF picture = pictureSize();
  if (picture.isEmpty() || size.isEmpty()) return {};
  const QSizeF fitted = picture.scaled(QSizeF(size), Qt::KeepAspectRatio);
  return {(size.width() - fitted.width()) / 2, (size.height() - fitted.height()) / 2, fitted.width(),
          fitted.height()};
}

QSize SvgChartView::sizeHint() const {
  const QSizeF picture = pictureSize();
  return picture.isEmpty() ? QSize(480, 200) : picture.toSize();
}

// A quarter of the picture's size: smaller, its labels could not be read; larger, it would
// keep the side panel from being narrowed.
QSize SvgChartView::minimumSizeHint() const {
  const QSizeF picture = pictureSize();
  return picture.isEmpty() ? QSize(160, 80) : (picture / 4).toSize();
}

void SvgChartView::paintEvent(QPaintEvent* /*event*/) {
  if (!hasPicture()) return;
  QPainter painter(this);
  const QRectF where = pictureRect(size());
  painter.fillRect(where, Qt::white);  // the charts are drawn for a white page
  painter.setRenderHint(QPainter::Antialiasing);
  painter.setRenderHint(QPainter::TextAntialiasing);
  renderer_->render(&painter, where);
}

}  // namespace rankscope::gui
