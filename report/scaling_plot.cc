#include "report/scaling_plot.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <iterator>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "report/plot_canvas.h"
#include "report/report_format.h"

namespace rankscope::report {

using compare::ProjectedPoint;
using compare::ScalingModeName;
using compare::ScalingPoint;
using compare::ScalingTable;
namespace {

using format::RanksText;

// The HTML report's palette (report_html.cc), so the charts sit well beside the others.
constexpr PlotColor kMeasuredColor{0x4e, 0x79, 0xa7};
constexpr PlotColor kIdealColor = kChartAxisColor;
constexpr PlotColor kProjectedColor{0xf2, 0x8e, 0x2b};
constexpr PlotColor kGridColor = kChartGridColor;
constexpr PlotColor kTextColor = kChartTextColor;
constexpr PlotColor kAxisColor = kIdealColor;
constexpr PlotColor kNoteColor = kIdealColor;  // the report's captions are this grey
constexpr PlotColor kWhite = kChartWhite;

// Layout, in pixels of the kScalingPlotWidth × kScalingPlotHeight picture.
constexpr double kPanelWidth = kScalingPlotWidth / 2.0;
constexpr double kTitleBaseline = 24;
constexpr double kPanelTitleBaseline = 50;
constexpr double kPlotTop = 64;
constexpr double kPlotBottom = 312;
constexpr double kPlotLeftInset = 66;  // room for tick labels and the rotated y title
constexpr double kPlotRightInset = 22;
constexpr double kXTickLabelBaseline = kPlotBottom + 17;
constexpr double kXTitleBaseline = kPlotBottom + 36;
constexpr double kLegendMiddle = kScalingPlotHeight - 22.0;

constexpr double kFontSize = kChartFontSize;
constexpr double kPanelTitleSize = 13;
constexpr double kTitleSize = 15;
constexpr double kMarkerRadius = 4;
constexpr double kDash = 6, kGap = 4;

constexpr PlotStroke kMeasuredStroke{kMeasuredColor, 2};
constexpr PlotStroke kIdealStroke{kIdealColor, 1.5, kDash, kGap};
constexpr PlotStroke kProjectedStroke{kProjectedColor, 2, kDash, kGap};
constexpr PlotShapeStyle kMeasuredMarker{kMeasuredColor, PlotStroke{kWhite, 1}};
constexpr PlotShapeStyle kProjectedMarker{kWhite, PlotStroke{kProjectedColor, 2}};

PlotTextStyle TextStyle(TextAnchor anchor = TextAnchor::kStart, double size = kFontSize, bool bold = false,
                        PlotColor color = kTextColor) {
  return ChartTextStyle(anchor, size, bold, color);
}

// `text` cut to `max_characters` characters, the last three of them "...", never inside a
// UTF-8 sequence.
std::string Shortened(std::string_view text, size_t max_characters) {
  std::vector<size_t> starts;  // where each character begins
  for (size_t i = 0; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xc0) != 0x80) starts.push_back(i);
  }
  if (starts.size() <= max_characters) return std::string(text);
  if (max_characters < 3) return "";
  return std::string(text.substr(0, starts[max_characters - 3])) + "...";
}

// Values that cannot be drawn on an axis from 0 (missing, NaN, infinite, negative) are left out.
std::optional<double> Plottable(std::optional<double> value) {
  if (!value || !std::isfinite(*value) || *value < 0) return std::nullopt;
  return value;
}

// About three significant digits, short enough to sit over a marker.
std::string FormatCompact(double value) {
  const double magnitude = std::fabs(value);
  if (magnitude >= 1e6) return fmt::format("{:.2f}M", value / 1e6);
  if (magnitude >= 1e4) return fmt::format("{:.1f}k", value / 1e3);
  if (magnitude >= 100) return fmt::format("{:.0f}", value);
  if (magnitude >= 10) return fmt::format("{:.1f}", value);
  return fmt::format("{:.2f}", value);
}

std::string FormatMilliseconds(double ms) { return FormatCompact(ms) + " ms"; }

// A 1-pixel line on a pixel boundary is smeared over two pixels; half a pixel off is sharp.
double Crisp(double coordinate) { return std::floor(coordinate) + 0.5; }

struct SeriesValue {
  int world_size = 0;
  double value = 0;
  std::string tooltip;
};

struct Panel {
  std::string role;  // names the panel's SVG groups, e.g. "efficiency-measured"
  std::string title;
  std::string note;  // beside the title, in grey
  std::string y_title;
  std::vector<SeriesValue> measured, ideal, projected;
  std::optional<double> ideal_level;  // the ideal as a horizontal line instead of points
  std::string (*format_value)(double) = FormatCompact;
};

Panel EfficiencyPanel(const std::vector<ScalingPoint>& points, const std::vector<ProjectedPoint>& projected) {
  Panel panel;
  panel.role = "efficiency";
  panel.title = "Scaling efficiency";
  panel.y_title = "efficiency (%)";
  panel.format_value = format::FormatPercent;
  panel.ideal_level = 100;
  for (const ScalingPoint& point : points) {
    if (const auto efficiency = Plottable(point.efficiency)) {
      const double percent = 100 * *efficiency;
      panel.measured.push_back(
          {point.world_size, percent,
           fmt::format("{}: {} ({})", RanksText(point.world_size), format::FormatPercent(percent), point.run)});
    }
  }
  for (const ProjectedPoint& point : projected) {
    if (const auto efficiency = Plottable(point.efficiency)) {
      const double percent = 100 * *efficiency;
      panel.projected.push_back(
          {point.world_size, percent,
           fmt::format("{}: {}, projected", RanksText(point.world_size), format::FormatPercent(percent))});
    }
  }
  return panel;
}

Panel ThroughputPanel(const std::vector<ScalingPoint>& points, const std::vector<ProjectedPoint>& projected) {
  Panel panel;
  panel.role = "throughput";
  panel.title = "Throughput";
  panel.y_title = "throughput (samples/s)";
  for (const ScalingPoint& point : points) {
    if (const auto throughput = Plottable(point.throughput)) {
      panel.measured.push_back(
          {point.world_size, *throughput,
           fmt::format("{}: {} samples/s ({})", RanksText(point.world_size), FormatCompact(*throughput), point.run)});
    }
    if (const auto ideal = Plottable(point.ideal_throughput)) {
      panel.ideal.push_back({point.world_size, *ideal, ""});
    }
  }
  // The ideal grows in proportion to the world size in both modes (N/N0 · X(N0)), so it
  // extends from the largest measured ideal to the projected sizes.
  const SeriesValue* reference = nullptr;
  for (const SeriesValue& ideal : panel.ideal) {
    if (reference == nullptr || ideal.world_size > reference->world_size) reference = &ideal;
  }
  const std::optional<SeriesValue> last_ideal =
      reference != nullptr ? std::optional<SeriesValue>(*reference) : std::nullopt;
  for (const ProjectedPoint& point : projected) {
    if (const auto throughput = Plottable(point.throughput)) {
      panel.projected.push_back(
          {point.world_size, *throughput,
           fmt::format("{}: {} samples/s, projected", RanksText(point.world_size), FormatCompact(*throughput))});
    }
    if (last_ideal && last_ideal->world_size > 0 && point.world_size > last_ideal->world_size) {
      panel.ideal.push_back({point.world_size, last_ideal->value * point.world_size / last_ideal->world_size, ""});
    }
  }
  return panel;
}

// Without a batch size there is no throughput; the step time shows the same scaling
// (lower is better). Its ideal is T(N)·E(N): T(N0) in weak scaling, T(N0)·N0/N in strong.
Panel StepTimePanel(const std::vector<ScalingPoint>& points, const std::vector<ProjectedPoint>& projected) {
  Panel panel;
  panel.role = "step-time";
  panel.title = "Median step time";
  panel.note = "(no batch size, so no throughput)";
  panel.y_title = "median step time (ms)";
  panel.format_value = FormatMilliseconds;
  auto add = [&](int world_size, std::optional<double> step_ns, std::optional<double> efficiency,
                 std::vector<SeriesValue>& series, std::string tooltip_suffix) {
    const auto ms = Plottable(step_ns ? std::optional<double>(*step_ns / 1e6) : std::nullopt);
    if (!ms) return;
    series.push_back({world_size, *ms, RanksText(world_size) + ": " + FormatMilliseconds(*ms) + tooltip_suffix});
    if (const auto e = Plottable(efficiency)) panel.ideal.push_back({world_size, *ms * *e, ""});
  };
  for (const ScalingPoint& point : points) {
    add(point.world_size, point.step_time_ns, point.efficiency, panel.measured, fmt::format(" ({})", point.run));
  }
  for (const ProjectedPoint& point : projected) {
    add(point.world_size, point.step_time_ns, point.efficiency, panel.projected, ", projected");
  }
  return panel;
}

// World sizes along x: log2 when they span a factor of 8 or more (1, 2, 4, … 64 would crowd
// the left edge of a linear axis), linear otherwise.
class XScale {
 public:
  XScale(const std::set<int>& sizes, double left, double right) : left_(left), right_(right) {
    if (sizes.empty()) return;
    const int smallest = *sizes.begin(), largest = *sizes.rbegin();
    log2_ = largest >= 8 * static_cast<double>(smallest);
    low_ = Transform(smallest);
    high_ = Transform(largest);
    const double span = high_ - low_;
    // Room at both ends for the markers and their centred labels.
    const double padding = span > 0 ? 0.07 * span : std::max(1.0, 0.5 * smallest);
    low_ -= padding;
    high_ += padding;
  }

  double Of(int world_size) const { return left_ + (right_ - left_) * (Transform(world_size) - low_) / (high_ - low_); }

 private:
  double Transform(double world_size) const { return log2_ ? std::log2(world_size) : world_size; }

  double left_, right_;
  bool log2_ = false;
  double low_ = 0, high_ = 2;
};

class YScale {
 public:
  explicit YScale(double highest) {
    if (!(highest > 0) || !std::isfinite(highest)) highest = 1;
    step_ = NiceStep(highest, 5);
    max_ = std::ceil(highest / step_) * step_;
    // A point at the very top would have its label above the plot: keep some headroom.
    if (max_ - highest < 0.08 * max_) max_ += step_;
    // Ticks of thousands or millions read better with a unit.
    if (max_ >= 1e6) {
      unit_ = 1e6, suffix_ = "M";
    } else if (max_ >= 1e4) {
      unit_ = 1e3, suffix_ = "k";
    }
  }

  double Of(double value) const { return kPlotBottom - (kPlotBottom - kPlotTop) * value / max_; }
  int TickCount() const { return static_cast<int>(std::lround(max_ / step_)) + 1; }
  double Tick(int index) const { return step_ * index; }
  std::string TickLabel(int index) const {
    return fmt::format("{:g}{}", Tick(index) / unit_, Tick(index) > 0 ? suffix_ : "");
  }

 private:
  double step_ = 1, max_ = 1, unit_ = 1;
  std::string_view suffix_;
};

struct Box {
  double left, top, right, bottom;
  bool Overlaps(const Box& other) const {
    return left < other.right && other.left < right && top < other.bottom && other.top < bottom;
  }
  // Whether the segment from `a` to `b` passes through the box (Liang-Barsky clipping).
  bool Crosses(PlotPoint a, PlotPoint b) const {
    const double dx = b.x - a.x, dy = b.y - a.y;
    const std::array<double, 4> direction = {-dx, dx, -dy, dy};
    const std::array<double, 4> distance = {a.x - left, right - a.x, a.y - top, bottom - a.y};
    double enter = 0, leave = 1;
    for (size_t i = 0; i < 4; ++i) {
      if (direction[i] == 0) {
        if (distance[i] < 0) return false;  // parallel to this edge and outside it
        continue;
      }
      const double t = distance[i] / direction[i];
      if (direction[i] < 0) {
        enter = std::max(enter, t);
      } else {
        leave = std::min(leave, t);
      }
      if (enter > leave) return false;
    }
    return true;
  }
};

// Places value labels over or under their markers, inside the plot, so that they cover no
// other label or marker and, where there is room, no line; a label with no place is left out.
class LabelPlacer {
 public:
  LabelPlacer(double plot_left, double plot_right) : plot_left_(plot_left), plot_right_(plot_right) {}

  void AddMarker(PlotPoint center) {
    taken_.push_back({center.x - kMarkerRadius - 1, center.y - kMarkerRadius - 1, center.x + kMarkerRadius + 1,
                      center.y + kMarkerRadius + 1});
  }

  void AddLine(std::span<const PlotPoint> points) {
    for (size_t i = 1; i < points.size(); ++i) segments_.push_back({points[i - 1], points[i]});
  }

  // The baseline's middle for `text` at `marker`, preferring above or below.
  std::optional<PlotPoint> Place(PlotPoint marker, std::string_view text, bool prefer_above) {
    const double half_width = EstimatedTextWidth(text, kFontSize) / 2;
    const double above = marker.y - kMarkerRadius - 4;
    const double below = marker.y + kMarkerRadius + 3 + 0.75 * kFontSize;
    // Near the axes a label slides sideways to stay inside the plot, off centre.
    const double middle =
        std::clamp(marker.x, plot_left_ + 2 + half_width,
                   std::max(plot_left_ + 2 + half_width, plot_right_ + kPlotRightInset - 2 - half_width));
    // A line through a label still leaves it legible; a label over a label does not.
    for (const bool avoid_lines : {true, false}) {
      for (const double baseline : prefer_above ? std::array{above, below} : std::array{below, above}) {
        const Box box{middle - half_width, baseline - 0.75 * kFontSize, middle + half_width,
                      baseline + 0.25 * kFontSize};
        if (box.top < kPlotTop || box.bottom > kPlotBottom - 1) continue;
        if (std::any_of(taken_.begin(), taken_.end(), [&](const Box& other) { return box.Overlaps(other); })) {
          continue;
        }
        if (avoid_lines && std::any_of(segments_.begin(), segments_.end(),
                                       [&](const Segment& segment) { return box.Crosses(segment.from, segment.to); })) {
          continue;
        }
        taken_.push_back(box);
        return PlotPoint{middle, baseline};
      }
    }
    return std::nullopt;
  }

 private:
  struct Segment {
    PlotPoint from, to;
  };
  double plot_left_, plot_right_;
  std::vector<Box> taken_;
  std::vector<Segment> segments_;
};

struct PlacedValue {
  PlotPoint marker;
  std::string tooltip;
  std::optional<PlotPoint> label_at;
  std::string label;
};

void DrawAxes(const Panel& panel, const std::set<int>& world_sizes, const XScale& x, const YScale& y, double panel_left,
              double plot_left, double plot_right, PlotCanvas& canvas) {
  canvas.BeginGroup(panel.role + "-axes");
  canvas.Text({plot_left, kPanelTitleBaseline}, panel.title, TextStyle(TextAnchor::kStart, kPanelTitleSize, true));
  if (!panel.note.empty()) {
    canvas.Text({plot_left + EstimatedTextWidth(panel.title, kPanelTitleSize, true) + 8, kPanelTitleBaseline},
                panel.note, TextStyle(TextAnchor::kStart, kFontSize, false, kNoteColor));
  }
  const PlotStroke grid{kGridColor, 1};
  const PlotStroke axis{kAxisColor, 1};
  for (int i = 0; i < y.TickCount(); ++i) {
    const double tick_y = Crisp(y.Of(y.Tick(i)));
    if (i > 0) canvas.Line({plot_left, tick_y}, {plot_right, tick_y}, grid);
    canvas.Line({plot_left - 4, tick_y}, {plot_left, tick_y}, axis);
    canvas.Text({plot_left - 7, tick_y + 4}, y.TickLabel(i), TextStyle(TextAnchor::kEnd));
  }
  for (const int world_size : world_sizes) {
    const double tick_x = Crisp(x.Of(world_size));
    canvas.Line({tick_x, kPlotTop}, {tick_x, kPlotBottom}, grid);
    canvas.Line({tick_x, kPlotBottom}, {tick_x, kPlotBottom + 4}, axis);
  }
  // Where sizes are too close for all their labels (48 and 64 on a log axis), the powers of
  // two, which most runs use, are labelled first, then the others that still fit.
  std::vector<int> by_priority(world_sizes.begin(), world_sizes.end());
  std::stable_partition(by_priority.begin(), by_priority.end(),
                        [](int world_size) { return std::has_single_bit(static_cast<unsigned>(world_size)); });
  std::vector<Box> labelled;
  for (const int world_size : by_priority) {
    const double tick_x = Crisp(x.Of(world_size));
    const std::string label = fmt::format("{}", world_size);
    const double half_width = EstimatedTextWidth(label, kFontSize) / 2 + 2;
    const Box box{tick_x - half_width, 0, tick_x + half_width, 1};
    if (std::any_of(labelled.begin(), labelled.end(), [&](const Box& other) { return box.Overlaps(other); })) {
      continue;
    }
    labelled.push_back(box);
    canvas.Text({tick_x, kXTickLabelBaseline}, label, TextStyle(TextAnchor::kMiddle));
  }
  canvas.Line({Crisp(plot_left), kPlotTop}, {Crisp(plot_left), Crisp(kPlotBottom)}, axis);
  canvas.Line({plot_left, Crisp(kPlotBottom)}, {plot_right, Crisp(kPlotBottom)}, axis);
  canvas.Text({(plot_left + plot_right) / 2, kXTitleBaseline}, "world size (ranks)", TextStyle(TextAnchor::kMiddle));
  PlotTextStyle vertical = TextStyle(TextAnchor::kMiddle);
  vertical.vertical = true;
  canvas.Text({panel_left + 18, (kPlotTop + kPlotBottom) / 2}, panel.y_title, vertical);
  if (panel.measured.empty() && panel.projected.empty()) {
    canvas.Text({(plot_left + plot_right) / 2, (kPlotTop + kPlotBottom) / 2}, "no values to plot",
                TextStyle(TextAnchor::kMiddle, kFontSize, false, kNoteColor));
  }
  canvas.EndGroup();
}

std::vector<SeriesValue> ByWorldSize(std::vector<SeriesValue> series) {
  std::stable_sort(series.begin(), series.end(),
                   [](const SeriesValue& a, const SeriesValue& b) { return a.world_size < b.world_size; });
  return series;
}

void DrawPanel(const Panel& panel, const std::set<int>& world_sizes, double panel_left, PlotCanvas& canvas) {
  const double plot_left = panel_left + kPlotLeftInset;
  const double plot_right = panel_left + kPanelWidth - kPlotRightInset;
  const std::vector<SeriesValue> measured = ByWorldSize(panel.measured);
  const std::vector<SeriesValue> ideal = ByWorldSize(panel.ideal);
  const std::vector<SeriesValue> projected = ByWorldSize(panel.projected);

  double highest = panel.ideal_level.value_or(0);
  for (const auto* series : {&measured, &ideal, &projected}) {
    for (const SeriesValue& value : *series) highest = std::max(highest, value.value);
  }
  const XScale x(world_sizes, plot_left, plot_right);
  const YScale y(highest);
  auto at = [&](const SeriesValue& value) { return PlotPoint{x.Of(value.world_size), y.Of(value.value)}; };
  DrawAxes(panel, world_sizes, x, y, panel_left, plot_left, plot_right, canvas);

  // Labels go on the side away from the ideal, where the ideal line does not run through them.
  auto ideal_at = [&](int world_size) -> std::optional<double> {
    if (panel.ideal_level) return panel.ideal_level;
    for (const SeriesValue& value : ideal) {
      if (value.world_size == world_size) return value.value;
    }
    return std::nullopt;
  };
  std::vector<PlotPoint> ideal_line;
  if (panel.ideal_level) {
    ideal_line = {{plot_left, y.Of(*panel.ideal_level)}, {plot_right, y.Of(*panel.ideal_level)}};
  } else {
    for (const SeriesValue& value : ideal) ideal_line.push_back(at(value));
  }
  std::vector<PlotPoint> measured_line;
  for (const SeriesValue& value : measured) measured_line.push_back(at(value));
  std::vector<PlotPoint> projected_line;
  if (!measured.empty() && !projected.empty())
    projected_line.push_back(at(measured.back()));  // goes on from the last run
  for (const SeriesValue& value : projected) projected_line.push_back(at(value));

  LabelPlacer labels(plot_left, plot_right);
  for (const auto* series : {&measured, &projected}) {
    for (const SeriesValue& value : *series) labels.AddMarker(at(value));
  }
  for (const auto* line : {&ideal_line, &measured_line, &projected_line}) labels.AddLine(*line);
  auto place = [&](const std::vector<SeriesValue>& series) {
    std::vector<PlacedValue> placed;
    for (const SeriesValue& value : series) {
      const std::string label = panel.format_value(value.value);
      const bool above = value.value >= ideal_at(value.world_size).value_or(0);
      placed.push_back({at(value), value.tooltip, labels.Place(at(value), label, above), label});
    }
    return placed;
  };
  const std::vector<PlacedValue> measured_placed = place(measured);
  const std::vector<PlacedValue> projected_placed = place(projected);
  auto draw_labels = [&](const std::vector<PlacedValue>& placed) {
    for (const PlacedValue& value : placed) {
      if (value.label_at) canvas.Text(*value.label_at, value.label, TextStyle(TextAnchor::kMiddle));
    }
  };

  canvas.BeginGroup(panel.role + "-ideal");
  if (panel.ideal_level) {
    canvas.Line(ideal_line[0], ideal_line[1], kIdealStroke);
  } else {
    canvas.Polyline(ideal_line, kIdealStroke, "");
  }
  canvas.EndGroup();

  if (!projected.empty()) {
    canvas.BeginGroup(panel.role + "-projected");
    canvas.Polyline(projected_line, kProjectedStroke, "");
    for (const PlacedValue& value : projected_placed) {
      canvas.Circle(value.marker, kMarkerRadius, kProjectedMarker, value.tooltip);
    }
    draw_labels(projected_placed);
    canvas.EndGroup();
  }

  canvas.BeginGroup(panel.role + "-measured");
  canvas.Polyline(measured_line, kMeasuredStroke, "");
  for (const PlacedValue& value : measured_placed) {
    canvas.Circle(value.marker, kMarkerRadius + 0.5, kMeasuredMarker, value.tooltip);
  }
  draw_labels(measured_placed);
  canvas.EndGroup();
}

// One legend entry's sample: a short line with a marker in its middle.
struct LegendEntry {
  std::string label;
  PlotStroke stroke;
  std::optional<PlotShapeStyle> marker;
};

void DrawLegend(const std::vector<LegendEntry>& entries, const std::string& note, PlotCanvas& canvas) {
  constexpr double kSampleWidth = 28, kSampleGap = 6, kEntryGap = 22;
  double width = 0;
  for (const LegendEntry& entry : entries) {
    width += kSampleWidth + kSampleGap + EstimatedTextWidth(entry.label, kFontSize) + kEntryGap;
  }
  // The note is cut to what fits in one line beside the entries.
  const double room = kScalingPlotWidth - 40 - width;
  const std::string shown_note = Shortened(note, static_cast<size_t>(std::max(0.0, room / (0.6 * kFontSize))));
  width += EstimatedTextWidth(shown_note, kFontSize);
  double x = std::max(20.0, (kScalingPlotWidth - width) / 2);
  canvas.BeginGroup("legend");
  for (const LegendEntry& entry : entries) {
    canvas.Line({x, kLegendMiddle}, {x + kSampleWidth, kLegendMiddle}, entry.stroke);
    if (entry.marker) canvas.Circle({x + kSampleWidth / 2, kLegendMiddle}, kMarkerRadius, *entry.marker, "");
    x += kSampleWidth + kSampleGap;
    canvas.Text({x, kLegendMiddle + 4}, entry.label, TextStyle());
    x += EstimatedTextWidth(entry.label, kFontSize) + kEntryGap;
  }
  if (!shown_note.empty()) {
    canvas.Text({x, kLegendMiddle + 4}, shown_note, TextStyle(TextAnchor::kStart, kFontSize, false, kNoteColor));
  }
  canvas.EndGroup();
}

// The one picture behind both the SVG and the PNG.
void DrawScalingPlot(const ScalingTable& table, PlotCanvas& canvas) {
  static const std::vector<ProjectedPoint> kNoProjection;
  const std::vector<ProjectedPoint>& projected = table.projection ? table.projection->points : kNoProjection;
  // World sizes below 1 are not a run's; they have no place on the axis (nor on a log one).
  std::set<int> world_sizes;
  for (const ScalingPoint& point : table.points) {
    if (point.world_size > 0) world_sizes.insert(point.world_size);
  }
  for (const ProjectedPoint& point : projected) {
    if (point.world_size > 0) world_sizes.insert(point.world_size);
  }
  std::vector<ScalingPoint> points;
  std::copy_if(table.points.begin(), table.points.end(), std::back_inserter(points),
               [](const ScalingPoint& point) { return point.world_size > 0; });
  std::vector<ProjectedPoint> projected_points;
  std::copy_if(projected.begin(), projected.end(), std::back_inserter(projected_points),
               [](const ProjectedPoint& point) { return point.world_size > 0; });

  canvas.Text({16, kTitleBaseline}, fmt::format("Scaling efficiency, {} scaling", ScalingModeName(table.mode)),
              TextStyle(TextAnchor::kStart, kTitleSize, true));

  const bool any_throughput =
      std::any_of(points.begin(), points.end(), [](const ScalingPoint& point) { return Plottable(point.throughput); });
  const Panel efficiency = EfficiencyPanel(points, projected_points);
  const Panel second =
      any_throughput ? ThroughputPanel(points, projected_points) : StepTimePanel(points, projected_points);
  DrawPanel(efficiency, world_sizes, 0, canvas);
  DrawPanel(second, world_sizes, kPanelWidth, canvas);

  std::vector<LegendEntry> legend = {{"measured", kMeasuredStroke, kMeasuredMarker}, {"ideal", kIdealStroke, {}}};
  const bool any_projected = !efficiency.projected.empty() || !second.projected.empty();
  if (any_projected) legend.push_back({"projected", kProjectedStroke, kProjectedMarker});
  std::string note;
  if (!any_projected) note = table.projection_note;  // says why there is none
  DrawLegend(legend, note, canvas);
}

std::string AriaLabel(const ScalingTable& table) {
  return fmt::format("scaling efficiency against world size, {} scaling", ScalingModeName(table.mode));
}

}  // namespace

std::string ScalingPlotSvg(const ScalingTable& table) {
  SvgCanvas canvas(kScalingPlotWidth, kScalingPlotHeight, AriaLabel(table));
  DrawScalingPlot(table, canvas);
  return canvas.Finish();
}

Status WriteScalingPlotPng(const ScalingTable& table, const std::filesystem::path& path) {
  auto failure = [&](std::string_view reason) {
    return IoError(fmt::format("cannot write {}: {}", path.string(), reason));
  };
  Result<std::unique_ptr<CairoCanvas>> canvas = CairoCanvas::Create(kScalingPlotWidth, kScalingPlotHeight);
  if (!canvas.ok()) return failure(canvas.status().message());
  DrawScalingPlot(table, **canvas);

  // Written beside the target and renamed over it, so that a reader never sees half a PNG
  // and a failure leaves an earlier file as it was.
  const std::filesystem::path temporary = path.string() + fmt::format(".tmp-{}", ::getpid());
  auto remove_temporary = [&] {
    // Only a plain file: a directory or link of that name is not ours to remove.
    std::error_code ignored;
    if (std::filesystem::symlink_status(temporary, ignored).type() == std::filesystem::file_type::regular) {
      std::filesystem::remove(temporary, ignored);
    }
  };
  if (const Status written = (*canvas)->WritePng(temporary); !written.ok()) {
    remove_temporary();
    return failure(written.message());
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error) {
    remove_temporary();
    return failure(error.message());
  }
  return Status::Ok();
}

}  // namespace rankscope::report
