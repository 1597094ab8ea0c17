// A small drawing interface for charts, so one drawing function can produce both the inline
// SVG of the HTML report and a PNG (through cairo) of the same picture. Coordinates are in
// pixels, origin top left, y down; an element with a non-finite coordinate or size is left
// out by both canvases. Cairo stays out of this header: CairoCanvas keeps its surface behind
// a pointer to an incomplete type.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "base/status.h"

namespace rankscope::report {

struct PlotColor {
  uint8_t red = 0, green = 0, blue = 0;
};

// "#rrggbb", lower case.
std::string PlotColorHex(PlotColor color);

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

class PlotCanvas {
 public:
  virtual ~PlotCanvas() = default;

  // A named group of elements (a series, a panel): `<g data-role=...>` in SVG, nothing in a
  // raster. Groups nest; each BeginGroup needs its EndGroup.
  virtual void BeginGroup(std::string_view role) = 0;
  virtual void EndGroup() = 0;

  virtual void Line(PlotPoint from, PlotPoint to, const PlotStroke& stroke) = 0;
  // Nothing for fewer than two points.
  virtual void Polyline(std::span<const PlotPoint> points, const PlotStroke& stroke) = 0;
  // `tooltip` is shown on hover where the output supports it (SVG); empty: none.
  virtual void Circle(PlotPoint center, double radius, const PlotShapeStyle& style, std::string_view tooltip) = 0;
  virtual void Rect(PlotPoint top_left, double width, double height, const PlotShapeStyle& style) = 0;
  // `anchor` is on the text's baseline: its start, middle or end per the style.
  virtual void Text(PlotPoint anchor, std::string_view text, const PlotTextStyle& style) = 0;
};

// Builds one <svg> element as a string.
class SvgCanvas final : public PlotCanvas {
 public:
  SvgCanvas(double width, double height, std::string_view aria_label);

  void BeginGroup(std::string_view role) override;
  void EndGroup() override;
  void Line(PlotPoint from, PlotPoint to, const PlotStroke& stroke) override;
  void Polyline(std::span<const PlotPoint> points, const PlotStroke& stroke) override;
  void Circle(PlotPoint center, double radius, const PlotShapeStyle& style, std::string_view tooltip) override;
  void Rect(PlotPoint top_left, double width, double height, const PlotShapeStyle& style) override;
  void Text(PlotPoint anchor, std::string_view text, const PlotTextStyle& style) override;

  // The element so far, with any groups still open closed, ending in "</svg>\n".
  std::string Finish() const;

 private:
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
  void Polyline(std::span<const PlotPoint> points, const PlotStroke& stroke) override;
  void Circle(PlotPoint center, double radius, const PlotShapeStyle& style, std::string_view tooltip) override;
  void Rect(PlotPoint top_left, double width, double height, const PlotShapeStyle& style) override;
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

}  // namespace rankscope::report
