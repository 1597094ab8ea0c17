#include "report/plot_canvas.h"

#include <cairo.h>
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <numbers>
#include <system_error>
#include <utility>

#include "report/report_format.h"

namespace rankscope::report {
namespace {

constexpr char kFontFamily[] = "DejaVu Sans";

bool Finite(PlotPoint point) { return std::isfinite(point.x) && std::isfinite(point.y); }

bool FiniteBox(PlotPoint top_left, double width, double height) {
  return Finite(top_left) && std::isfinite(width) && std::isfinite(height) && width > 0 && height > 0;
}

// Coordinates with one decimal: enough for the eye, short to write.
std::string Px(double value) { return fmt::format("{:.1f}", value); }

std::string StrokeAttributes(const PlotStroke& stroke) {
  std::string out = fmt::format(" stroke=\"{}\" stroke-width=\"{}\"", PlotColorHex(stroke.color), Px(stroke.width));
  if (stroke.dash > 0) {
    out += fmt::format(" stroke-dasharray=\"{} {}\"", Px(stroke.dash), Px(stroke.gap > 0 ? stroke.gap : stroke.dash));
  }
  return out;
}

std::string RectAttributes(PlotPoint top_left, double width, double height) {
  return fmt::format(" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"", Px(top_left.x), Px(top_left.y), Px(width),
                     Px(height));
}

std::string ShapeAttributes(const PlotShapeStyle& style) {
  std::string out = fmt::format(" fill=\"{}\"", style.fill ? PlotColorHex(*style.fill) : "none");
  if (style.stroke) out += StrokeAttributes(*style.stroke);
  return out;
}

// Cairo puts its context into an error state on invalid UTF-8, which would lose the whole
// picture over one odd byte in a label; such bytes (and NUL, which would end the C string)
// become '?'.
std::string ValidUtf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const auto lead = static_cast<unsigned char>(text[i]);
    const size_t length = lead < 0x80           ? 1
                          : (lead >> 5) == 0x6  ? 2
                          : (lead >> 4) == 0xe  ? 3
                          : (lead >> 3) == 0x1e ? 4
                                                : 0;
    bool valid = length > 0 && i + length <= text.size() && lead != 0;
    char32_t code = length == 1 ? lead : length == 2 ? lead & 0x1f : length == 3 ? lead & 0x0f : lead & 0x07;
    for (size_t k = 1; valid && k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      valid = (next & 0xc0) == 0x80;
      code = (code << 6) | (next & 0x3f);
    }
    // Overlong forms, UTF-16 surrogates and values past U+10FFFF are not characters either.
    static constexpr char32_t kSmallest[] = {0, 0, 0x80, 0x800, 0x10000};
    valid = valid && code >= kSmallest[length] && (code < 0xd800 || code > 0xdfff) && code <= 0x10ffff;
    if (valid) {
      out.append(text.substr(i, length));
      i += length;
    } else {
      out += '?';
      ++i;
    }
  }
  return out;
}

std::string ErrnoMessage(int error) { return std::error_code(error, std::generic_category()).message(); }

}  // namespace

std::string PlotColorHex(PlotColor color) {
  return fmt::format("#{:02x}{:02x}{:02x}", color.red, color.green, color.blue);
}

PlotColor PlotColorFromHsl(double hue_degrees, double saturation, double lightness) {
  // The CSS Color 4 conversion (hslToRgb), rounded to the nearest level.
  const double hue = std::isfinite(hue_degrees) ? std::fmod(std::fmod(hue_degrees, 360.0) + 360.0, 360.0) : 0.0;
  const double s = std::isfinite(saturation) ? std::clamp(saturation, 0.0, 1.0) : 0.0;
  const double l = std::isfinite(lightness) ? std::clamp(lightness, 0.0, 1.0) : 0.0;
  auto channel = [&](double n) {
    const double k = std::fmod(n + hue / 30.0, 12.0);
    const double a = s * std::min(l, 1 - l);
    const double value = l - a * std::max(-1.0, std::min({k - 3, 9 - k, 1.0}));
    return static_cast<uint8_t>(std::lround(255 * value));
  };
  return {channel(0), channel(8), channel(4)};
}

// --- SvgCanvas ---

SvgCanvas::SvgCanvas(double width, double height, std::string_view aria_label)
    : header_(fmt::format("<svg viewBox=\"0 0 {0} {1}\" width=\"{0}\" height=\"{1}\" role=\"img\" aria-label=\"{2}\">\n",
                          Px(width), Px(height), format::HtmlEscape(aria_label))) {}

void SvgCanvas::BeginGroup(std::string_view role) {
  body_ += fmt::format("<g data-role=\"{}\">\n", format::HtmlEscape(role));
  ++open_groups_;
}

void SvgCanvas::EndGroup() {
  if (open_groups_ == 0) return;  // unbalanced call: keep the element well formed
  body_ += "</g>\n";
  --open_groups_;
}

void SvgCanvas::Line(PlotPoint from, PlotPoint to, const PlotStroke& stroke) {
  if (!Finite(from) || !Finite(to)) return;
  body_ += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"{}/>\n", Px(from.x), Px(from.y), Px(to.x),
                       Px(to.y), StrokeAttributes(stroke));
}

void SvgCanvas::Polyline(std::span<const PlotPoint> points, const PlotStroke& stroke, std::string_view tooltip) {
  if (points.size() < 2) return;
  std::string coordinates;
  for (const PlotPoint& point : points) {
    if (!Finite(point)) return;
    if (!coordinates.empty()) coordinates += ' ';
    coordinates += fmt::format("{},{}", Px(point.x), Px(point.y));
  }
  AppendElement("polyline", fmt::format(" points=\"{}\" fill=\"none\"{}", coordinates, StrokeAttributes(stroke)),
                tooltip);
}

void SvgCanvas::Circle(PlotPoint center, double radius, const PlotShapeStyle& style, std::string_view tooltip) {
  if (!Finite(center) || !std::isfinite(radius) || radius <= 0) return;
  AppendElement("circle",
                fmt::format(" cx=\"{}\" cy=\"{}\" r=\"{}\"{}", Px(center.x), Px(center.y), Px(radius), ShapeAttributes(style)),
                tooltip);
}

void SvgCanvas::Rect(PlotPoint top_left, double width, double height, const PlotShapeStyle& style,
                     std::string_view tooltip) {
  if (!FiniteBox(top_left, width, height)) return;
  AppendElement("rect", RectAttributes(top_left, width, height) + ShapeAttributes(style), tooltip);
}

void SvgCanvas::GradientRect(PlotPoint top_left, double width, double height, std::span<const PlotColor> colors,
                             const std::optional<PlotStroke>& outline, std::string_view tooltip) {
  if (!FiniteBox(top_left, width, height) || colors.size() < 2) return;
  // Named after its colours: a page with two such scales either has distinct ids or two
  // identical definitions, so a reference never picks up another chart's colours.
  std::string id = "rankscope-scale";
  std::string stops;
  for (size_t i = 0; i < colors.size(); ++i) {
    const std::string hex = PlotColorHex(colors[i]);
    id += "-" + hex.substr(1);
    stops += fmt::format("<stop offset=\"{:.3f}\" stop-color=\"{}\"/>", static_cast<double>(i) / (colors.size() - 1.0),
                         hex);
  }
  body_ += fmt::format("<defs><linearGradient id=\"{}\" x1=\"0\" x2=\"1\" y1=\"0\" y2=\"0\">{}</linearGradient></defs>\n", id,
                       stops);
  std::string attributes = RectAttributes(top_left, width, height) + fmt::format(" fill=\"url(#{})\"", id);
  if (outline) attributes += StrokeAttributes(*outline);
  AppendElement("rect", attributes, tooltip);
}

void SvgCanvas::AppendElement(std::string_view name, std::string_view attributes, std::string_view tooltip) {
  if (tooltip.empty()) {
    body_ += fmt::format("<{}{}/>\n", name, attributes);
  } else {
    body_ += fmt::format("<{0}{1}><title>{2}</title></{0}>\n", name, attributes, format::HtmlEscape(tooltip));
  }
}

void SvgCanvas::Text(PlotPoint anchor, std::string_view text, const PlotTextStyle& style) {
  if (!Finite(anchor) || !std::isfinite(style.size) || style.size <= 0) return;
  static constexpr std::string_view kAnchors[] = {"start", "middle", "end"};
  // Font and colour go in `style`: the report's stylesheet sets `svg text { font; fill }`,
  // which would override presentation attributes but not an inline style.
  std::string attributes =
      fmt::format(" text-anchor=\"{}\" style=\"font-family:&#39;{}&#39;,sans-serif;font-size:{}px;{}fill:{}\"",
                  kAnchors[static_cast<int>(style.anchor)], kFontFamily, Px(style.size),
                  style.bold ? "font-weight:bold;" : "", PlotColorHex(style.color));
  if (style.vertical) attributes += fmt::format(" transform=\"rotate(-90 {} {})\"", Px(anchor.x), Px(anchor.y));
  body_ +=
      fmt::format("<text x=\"{}\" y=\"{}\"{}>{}</text>\n", Px(anchor.x), Px(anchor.y), attributes, format::HtmlEscape(text));
}

std::string SvgCanvas::Finish() const {
  std::string out = header_ + body_;
  for (int i = 0; i < open_groups_; ++i) out += "</g>\n";
  out += "</svg>\n";
  return out;
}

// --- CairoCanvas ---

struct CairoCanvas::Cairo {
  cairo_surface_t* surface = nullptr;
  cairo_t* context = nullptr;

  Cairo() = default;
  Cairo(const Cairo&) = delete;
  Cairo& operator=(const Cairo&) = delete;
  ~Cairo() {
    // Both accept cairo's inert error objects; the context holds a reference to the surface.
    if (context != nullptr) cairo_destroy(context);
    if (surface != nullptr) cairo_surface_destroy(surface);
  }

  void SetSource(PlotColor color) const {
    cairo_set_source_rgb(context, color.red / 255.0, color.green / 255.0, color.blue / 255.0);
  }

  void SetStroke(const PlotStroke& stroke) const {
    SetSource(stroke.color);
    cairo_set_line_width(context, stroke.width);
    if (stroke.dash > 0) {
      const double pattern[2] = {stroke.dash, stroke.gap > 0 ? stroke.gap : stroke.dash};
      cairo_set_dash(context, pattern, 2, 0);
    } else {
      cairo_set_dash(context, nullptr, 0, 0);
    }
  }

  // Fills and outlines the current path per `style`, then clears it.
  void FillAndStroke(const PlotShapeStyle& style) const {
    if (style.fill) {
      SetSource(*style.fill);
      cairo_fill_preserve(context);
    }
    if (style.stroke) {
      SetStroke(*style.stroke);
      cairo_stroke_preserve(context);
    }
    cairo_new_path(context);
  }
};

CairoCanvas::CairoCanvas(std::unique_ptr<Cairo> cairo) : cairo_(std::move(cairo)) {}
CairoCanvas::~CairoCanvas() = default;

Result<std::unique_ptr<CairoCanvas>> CairoCanvas::Create(int width, int height) {
  // Cairo's image surfaces are limited to 32767 pixels a side.
  if (width <= 0 || height <= 0 || width > 32767 || height > 32767) {
    return InvalidArgument(fmt::format("cannot make a {}x{} pixel image", width, height));
  }
  auto cairo = std::make_unique<Cairo>();
  cairo->surface = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, width, height);
  if (const cairo_status_t status = cairo_surface_status(cairo->surface); status != CAIRO_STATUS_SUCCESS) {
    return InternalError(
        fmt::format("cannot make a {}x{} pixel image: {}", width, height, cairo_status_to_string(status)));
  }
  cairo->context = cairo_create(cairo->surface);
  if (const cairo_status_t status = cairo_status(cairo->context); status != CAIRO_STATUS_SUCCESS) {
    return InternalError(fmt::format("cannot draw on an image: {}", cairo_status_to_string(status)));
  }
  cairo_t* context = cairo->context;
  cairo_set_source_rgb(context, 1, 1, 1);
  cairo_paint(context);
  cairo_set_antialias(context, CAIRO_ANTIALIAS_GRAY);
  cairo_font_options_t* options = cairo_font_options_create();
  // Grey antialiasing (subpixel colour fringes look wrong in an image file) and unhinted
  // metrics, so text widths scale smoothly as in a browser.
  cairo_font_options_set_antialias(options, CAIRO_ANTIALIAS_GRAY);
  cairo_font_options_set_hint_metrics(options, CAIRO_HINT_METRICS_OFF);
  const cairo_status_t options_status = cairo_font_options_status(options);
  if (options_status == CAIRO_STATUS_SUCCESS) cairo_set_font_options(context, options);
  cairo_font_options_destroy(options);
  if (options_status != CAIRO_STATUS_SUCCESS) {
    return InternalError(fmt::format("cannot set font options: {}", cairo_status_to_string(options_status)));
  }
  return std::unique_ptr<CairoCanvas>(new CairoCanvas(std::move(cairo)));
}

// Groups only structure the SVG; a raster has nothing to record.
void CairoCanvas::BeginGroup(std::string_view /*role*/) {}
void CairoCanvas::EndGroup() {}

void CairoCanvas::Line(PlotPoint from, PlotPoint to, const PlotStroke& stroke) {
  if (!Finite(from) || !Finite(to)) return;
  cairo_t* context = cairo_->context;
  cairo_new_path(context);
  cairo_move_to(context, from.x, from.y);
  cairo_line_to(context, to.x, to.y);
  cairo_->SetStroke(stroke);
  cairo_stroke(context);
}

void CairoCanvas::Polyline(std::span<const PlotPoint> points, const PlotStroke& stroke, std::string_view /*tooltip*/) {
  if (points.size() < 2) return;
  for (const PlotPoint& point : points) {
    if (!Finite(point)) return;
  }
  cairo_t* context = cairo_->context;
  cairo_new_path(context);
  cairo_move_to(context, points[0].x, points[0].y);
  for (const PlotPoint& point : points.subspan(1)) cairo_line_to(context, point.x, point.y);
  cairo_->SetStroke(stroke);
  cairo_stroke(context);
}

void CairoCanvas::Circle(PlotPoint center, double radius, const PlotShapeStyle& style, std::string_view /*tooltip*/) {
  if (!Finite(center) || !std::isfinite(radius) || radius <= 0) return;
  cairo_t* context = cairo_->context;
  cairo_new_path(context);
  cairo_arc(context, center.x, center.y, radius, 0, 2 * std::numbers::pi);
  cairo_close_path(context);
  cairo_->FillAndStroke(style);
}

void CairoCanvas::Rect(PlotPoint top_left, double width, double height, const PlotShapeStyle& style,
                       std::string_view /*tooltip*/) {
  if (!FiniteBox(top_left, width, height)) return;
  cairo_t* context = cairo_->context;
  cairo_new_path(context);
  cairo_rectangle(context, top_left.x, top_left.y, width, height);
  cairo_->FillAndStroke(style);
}

void CairoCanvas::GradientRect(PlotPoint top_left, double width, double height, std::span<const PlotColor> colors,
                               const std::optional<PlotStroke>& outline, std::string_view /*tooltip*/) {
  if (!FiniteBox(top_left, width, height) || colors.size() < 2) return;
  cairo_t* context = cairo_->context;
  cairo_pattern_t* gradient = cairo_pattern_create_linear(top_left.x, 0, top_left.x + width, 0);
  for (size_t i = 0; i < colors.size(); ++i) {
    cairo_pattern_add_color_stop_rgb(gradient, static_cast<double>(i) / (colors.size() - 1.0), colors[i].red / 255.0,
                                     colors[i].green / 255.0, colors[i].blue / 255.0);
  }
  cairo_new_path(context);
  cairo_rectangle(context, top_left.x, top_left.y, width, height);
  // A pattern in an error state draws nothing and leaves the context usable.
  cairo_set_source(context, gradient);
  cairo_pattern_destroy(gradient);
  cairo_fill_preserve(context);
  if (outline) {
    cairo_->SetStroke(*outline);
    cairo_stroke_preserve(context);
  }
  cairo_new_path(context);
}

void CairoCanvas::Text(PlotPoint anchor, std::string_view text, const PlotTextStyle& style) {
  if (!Finite(anchor) || !std::isfinite(style.size) || style.size <= 0 || text.empty()) return;
  cairo_t* context = cairo_->context;
  const std::string utf8 = ValidUtf8(text);
  cairo_select_font_face(context, kFontFamily, CAIRO_FONT_SLANT_NORMAL,
                         style.bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(context, style.size);
  cairo_text_extents_t extents;
  cairo_text_extents(context, utf8.c_str(), &extents);
  // SVG's text-anchor aligns by the advance, not the ink: do the same.
  const double offset = style.anchor == TextAnchor::kStart    ? 0.0
                        : style.anchor == TextAnchor::kMiddle ? -extents.x_advance / 2
                                                              : -extents.x_advance;
  cairo_save(context);
  cairo_translate(context, anchor.x, anchor.y);
  if (style.vertical) cairo_rotate(context, -std::numbers::pi / 2);
  cairo_new_path(context);
  cairo_move_to(context, offset, 0);
  cairo_->SetSource(style.color);
  cairo_show_text(context, utf8.c_str());
  cairo_new_path(context);
  cairo_restore(context);
}

namespace {

// Where the PNG encoder's bytes go, and the first write error.
struct PngSink {
  std::FILE* file = nullptr;
  int error = 0;
};

cairo_status_t WritePngChunk(void* closure, const unsigned char* data, unsigned int length) {
  auto* sink = static_cast<PngSink*>(closure);
  if (std::fwrite(data, 1, length, sink->file) != length) {
    sink->error = errno != 0 ? errno : EIO;
    return CAIRO_STATUS_WRITE_ERROR;
  }
  return CAIRO_STATUS_SUCCESS;
}

}  // namespace

Status CairoCanvas::WritePng(const std::filesystem::path& file) {
  cairo_surface_flush(cairo_->surface);
  // A failed drawing call leaves its error on the context (later calls did nothing).
  if (const cairo_status_t status = cairo_status(cairo_->context); status != CAIRO_STATUS_SUCCESS) {
    return InternalError(fmt::format("drawing failed: {}", cairo_status_to_string(status)));
  }
  if (const cairo_status_t status = cairo_surface_status(cairo_->surface); status != CAIRO_STATUS_SUCCESS) {
    return InternalError(fmt::format("drawing failed: {}", cairo_status_to_string(status)));
  }
  // The stream form of cairo_surface_write_to_png, with our own file, so that an error says
  // what the system said (cairo reduces it to "error while writing to output stream").
  errno = 0;
  std::FILE* out = std::fopen(file.c_str(), "wb");
  if (out == nullptr) return IoError(ErrnoMessage(errno != 0 ? errno : EIO));
  PngSink sink{out, 0};
  const cairo_status_t written = cairo_surface_write_to_png_stream(cairo_->surface, &WritePngChunk, &sink);
  errno = 0;
  // fclose flushes the buffer: a full disk may only show here.
  const int close_error = std::fclose(out) == 0 ? 0 : (errno != 0 ? errno : EIO);
  if (written != CAIRO_STATUS_SUCCESS) {
    return IoError(sink.error != 0 ? ErrnoMessage(sink.error) : cairo_status_to_string(written));
  }
  if (close_error != 0) return IoError(ErrnoMessage(close_error));
  return Status::Ok();
}

// --- building blocks ---

double EstimatedTextWidth(std::string_view text, double size, bool bold) {
  const auto characters = std::count_if(text.begin(), text.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xc0) != 0x80;  // UTF-8 lead bytes only
  });
  return static_cast<double>(characters) * size * (bold ? 0.66 : 0.6);
}

void DrawHorizontalStackedBars(PlotCanvas& canvas, std::span<const HorizontalBar> bars,
                               const HorizontalBarsLayout& layout) {
  PlotTextStyle label_style = layout.label_style;
  label_style.anchor = TextAnchor::kEnd;
  PlotTextStyle note_style = layout.label_style;
  note_style.anchor = TextAnchor::kStart;
  const double bar_right = layout.plot_left + layout.plot_width;
  // A baseline this far below the bar's middle centres lower-case text on it.
  const double baseline_offset = 0.36 * layout.label_style.size;
  for (size_t i = 0; i < bars.size(); ++i) {
    const HorizontalBar& bar = bars[i];
    const double top = layout.plot_top + layout.row_height * static_cast<double>(i) +
                       (layout.row_height - layout.bar_height) / 2;
    const double baseline = top + layout.bar_height / 2 + baseline_offset;
    canvas.Text({layout.plot_left - 6, baseline}, bar.label, label_style);
    if (!(bar.full_scale > 0) || !std::isfinite(bar.full_scale)) {
      canvas.Text({layout.plot_left + 4, baseline}, bar.empty_note, note_style);
      continue;
    }
    double x = layout.plot_left;
    for (const BarSegment& segment : bar.segments) {
      const double share = std::isfinite(segment.value) ? segment.value / bar.full_scale : 0.0;
      const double width = std::clamp(layout.plot_width * share, 0.0, bar_right - x);
      canvas.Rect({x, top}, width, layout.bar_height, PlotShapeStyle{segment.color, std::nullopt}, segment.tooltip);
      x += width;
    }
  }
}

namespace {
constexpr double kLegendEntryWidth = 150, kLegendRowHeight = 16, kLegendSwatch = 10;

size_t LegendEntriesPerRow(double width) {
  return std::max<size_t>(1, std::isfinite(width) && width > 0 ? static_cast<size_t>(width / kLegendEntryWidth) : 1);
}
}  // namespace

double SwatchLegendHeight(size_t entries, double width) {
  const size_t per_row = LegendEntriesPerRow(width);
  return static_cast<double>((entries + per_row - 1) / per_row) * kLegendRowHeight;
}

void DrawSwatchLegend(PlotCanvas& canvas, std::span<const SwatchLegendEntry> entries, PlotPoint top_left,
                      double width, const PlotTextStyle& text_style) {
  const size_t per_row = LegendEntriesPerRow(width);
  PlotTextStyle label_style = text_style;
  label_style.anchor = TextAnchor::kStart;
  canvas.BeginGroup("legend");
  for (size_t i = 0; i < entries.size(); ++i) {
    const double x = top_left.x + static_cast<double>(i % per_row) * kLegendEntryWidth;
    const double y = top_left.y + static_cast<double>(i / per_row) * kLegendRowHeight;
    const SwatchLegendEntry& entry = entries[i];
    const PlotShapeStyle swatch{entry.hollow ? PlotColor{0xff, 0xff, 0xff} : entry.color, PlotStroke{entry.color, 1}};
    canvas.Rect({x, y}, kLegendSwatch, kLegendSwatch, swatch, "");
    canvas.Text({x + kLegendSwatch + 4, y + kLegendSwatch - 1}, entry.label, label_style);
  }
  canvas.EndGroup();
}

}  // namespace rankscope::report
