// A small drawing interface for charts, so one drawing function can produce both the inline
// SVG of the HTML report and a PNG (through cairo) of the same picture. Coordinates are in
// pixels, origin top left, y down; an element with a non-finite coordinate or size is left
// out by both canvases. Cairo stays out of this header: CairoCanvas keeps its surface behind
// a pointer to an incomplete type. The reports' charts and the viewer's Scaling tab are all
// drawn through it; the same input always gives the same SVG bytes.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace rankscope::report {

struct PlotColor {
  uint8_t red = 0, green = 0, blue = 0;
};

// "#rrggbb", lower case.
std::string PlotColorHex(PlotColor color);
// A colour from hue (degrees, any value: taken modulo 360), saturation and lightness (0 to 1).
PlotColor PlotColorFromHsl(double hue_degrees, double saturation, double lightness);

struct PlotPoint {
  double x = 0, y = 0;
};

struct PlotStroke {
  PlotColor color;
  double width = 1;
  // Dash and gap lengths in pixels; a zero dash draws a solid line.
  double dash = 0, gap = 0;
};

struct PlotShapeStyle {
  std::optional<PlotColor> fill;     // none: not filled
  std::optional<PlotStroke> stroke;  // none: no outline
};

enum class TextAnchor { kStart, kMiddle, kEnd };

struct PlotTextStyle {
  PlotColor color;
  double size = 11;  // pixels
  bool bold = false;
  TextAnchor anchor = TextAnchor::kStart;
  // Rotated by -90° around the anchor point, reading bottom to top (a y-axis title).
  bool vertical = false;
};

// The reports' chart palette and type, shared by every chart so they sit well together.
inline constexpr PlotColor kChartTextColor{0x1f, 0x23, 0x28};
inline constexpr PlotColor kChartAxisColor{0x57, 0x60, 0x6a};
inline constexpr PlotColor kChartGridColor{0xea, 0xee, 0xf2};
inline constexpr PlotColor kChartWhite{0xff, 0xff, 0xff};
inline constexpr double kChartFontSize = 11;

// A text style in the charts' type: `anchor`, `size` pixels, `bold`, `color`.
inline PlotTextStyle ChartTextStyle(TextAnchor anchor = TextAnchor::kStart, double size = kChartFontSize,
                                    bool bold = false, PlotColor color = kChartTextColor) {
  PlotTextStyle style;
  style.color = color;
  style.size = size;
  style.bold = bold;
  style.anchor = anchor;
  return style;
}

class PlotCanvas {
 public:
  virtual ~PlotCanvas() = default;

  // A named group of elements (a series, a panel): `<g data-role=...>` in SVG, nothing in a
  // raster. Groups nest; each BeginGroup needs its EndGroup.
  virtual void BeginGroup(std::string_view role) = 0;
  virtual void EndGroup() = 0;

  // `tooltip`, on the shapes that take one, is shown on hover where the output supports it
  // (SVG); empty: none.
  virtual void Line(PlotPoint from, PlotPoint to, const PlotStroke& stroke) = 0;
  // Nothing for fewer than two points.
  virtual void Polyline(std::span<const PlotPoint> points, const PlotStroke& stroke, std::string_view tooltip) = 0;
  virtual void Circle(PlotPoint center, double radius, const PlotShapeStyle& style, std::string_view tooltip) = 0;
  // Nothing for a width or height that is not positive.
  virtual void Rect(PlotPoint top_left, double width, double height, const PlotShapeStyle& style,
                    std::string_view tooltip) = 0;
  // A rectangle filled with `colors` spread evenly from its left edge to its right (a colour
  // scale); nothing for fewer than two colours.
  virtual void GradientRect(PlotPoint top_left, double width, double height, std::span<const PlotColor> colors,
                            const std::optional<PlotStroke>& outline, std::string_view tooltip) = 0;
  // `anchor` is on the text's baseline: its start, middle or end per the style.
  virtual void Text(PlotPoint anchor, std::string_view text, const PlotTextStyle& style) = 0;
};

// Builds one <svg> element as a string, for an HTML page: no namespace declaration (the HTML
// parser supplies it, and a report stays free of URLs); Qt SVG reads it as it is.
class SvgCanvas final : public PlotCanvas {
 public:
  SvgCanvas(double width, double height, std::string_view aria_label);

  void BeginGroup(std::string_view role) override;
  void EndGroup() override;
  void Line(PlotPoint from, PlotPoint to, const PlotStroke& stroke) override;
  void Polyline(std::span<const PlotPoint> points, const PlotStroke& stroke, std::string_view tooltip) override;
  void Circle(PlotPoint center, double radius, const PlotShapeStyle& style, std::string_view tooltip) override;
  void Rect(PlotPoint top_left, double width, double height, const PlotShapeStyle& style,
            std::string_view tooltip) override;
  void GradientRect(PlotPoint top_left, double width, double height, std::span<const PlotColor> colors,
                    const std::optional<PlotStroke>& outline, std::string_view tooltip) override;
  void Text(PlotPoint anchor, std::string_view text, const PlotTextStyle& style) override;

  // The element so far, with any groups still open closed, ending in "</svg>\n".
  std::string Finish() const;

 private:
  // `<name attributes/>`, or with a <title> child holding the tooltip.
  void AppendElement(std::string_view name, std::string_view attributes, std::string_view tooltip);

  std::string header_;
  std::string body_;
  int open_groups_ = 0;
};

// Draws onto an ARGB32 image surface, white to begin with, antialiased, text in DejaVu Sans
// (cairo's toy font API; fontconfig picks the default sans-serif when it is missing). Drawing
// calls on a canvas in an error state do nothing; WritePng reports the error.
class CairoCanvas final : public PlotCanvas {
 public:
  // Errors: InvalidArgument for a size cairo cannot make, InternalError when cairo fails.
  static Result<std::unique_ptr<CairoCanvas>> Create(int width, int height);
  ~CairoCanvas() override;
  CairoCanvas(const CairoCanvas&) = delete;
  CairoCanvas& operator=(const CairoCanvas&) = delete;

  void BeginGroup(std::string_view role) override;
  void EndGroup() override;
  void Line(PlotPoint from, PlotPoint to, const PlotStroke& stroke) override;
  void Polyline(std::span<const PlotPoint> points, const PlotStroke& stroke, std::string_view tooltip) override;
  void Circle(PlotPoint center, double radius, const PlotShapeStyle& style, std::string_view tooltip) override;
  void Rect(PlotPoint top_left, double width, double height, const PlotShapeStyle& style,
            std::string_view tooltip) override;
  void GradientRect(PlotPoint top_left, double width, double height, std::span<const PlotColor> colors,
                    const std::optional<PlotStroke>& outline, std::string_view tooltip) override;
  void Text(PlotPoint anchor, std::string_view text, const PlotTextStyle& style) override;

  // Encodes the picture as PNG into `file`, created or truncated. On failure the message is
  // the reason alone (the caller names the file); a file this call created may be left
  // behind, partly written.
  Status WritePng(const std::filesystem::path& file);

 private:
  struct Cairo;  // the surface and context; defined in plot_canvas.cc
  explicit CairoCanvas(std::unique_ptr<Cairo> cairo);
  std::unique_ptr<Cairo> cairo_;
};

// ---- building blocks: chart parts drawn through any canvas ------------------------------

// Layout is decided before drawing and must be the same for SVG and PNG, so text widths are
// estimated rather than measured: DejaVu Sans averages about 0.6 em a character (0.66 bold).
double EstimatedTextWidth(std::string_view text, double size, bool bold = false);

// One part of a horizontal stacked bar.
struct BarSegment {
  double value = 0;  // in the bar's unit; segments are laid end to end from the left
  PlotColor color;
  std::string tooltip;
};

struct HorizontalBar {
  std::string label;       // left of the bar, right-aligned
  double full_scale = 0;   // the value the whole bar width stands for
  std::vector<BarSegment> segments;
  std::string empty_note;  // shown instead of the segments when full_scale is not positive
};

struct HorizontalBarsLayout {
  double plot_left = 0, plot_top = 0, plot_width = 0;  // the bars' area; labels go left of it
  double row_height = 22;  // from one bar's top to the next
  double bar_height = 18;  // centred in its row
  PlotTextStyle label_style;  // its anchor is ignored: labels end 6 px left of the bars
};

// One bar per row, top to bottom, each segment a rectangle with its tooltip; a segment
// never reaches past the bar's end, and segments of no width are left out.
void DrawHorizontalStackedBars(PlotCanvas& canvas, std::span<const HorizontalBar> bars,
                               const HorizontalBarsLayout& layout);

// A legend of colour swatches with labels, in rows of 150-px entries across `width`.
struct SwatchLegendEntry {
  std::string label;
  PlotColor color;
  bool hollow = false;  // an outline only, white inside
};
// The height DrawSwatchLegend takes for `entries` entries across `width`.
double SwatchLegendHeight(size_t entries, double width);
void DrawSwatchLegend(PlotCanvas& canvas, std::span<const SwatchLegendEntry> entries, PlotPoint top_left,
                      double width, const PlotTextStyle& text_style);

}  // namespace rankscope::report
