// The report as one self-contained HTML page: inline style, inline SVG charts, no scripts
// and nothing fetched from elsewhere, so it can be attached to a ticket or opened offline.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "report/report_format.h"
#include "report/report_writers.h"

namespace rankscope::report {

using analyzer::Breakdown;
using analyzer::CrossRank;
using analyzer::DeviceReport;
using analyzer::Report;
using analyzer::StepMetrics;
using analyzer::StepWait;
namespace {

using format::FormatDuration;
using format::FormatPercent;
using format::HtmlEscape;

constexpr size_t kTopActivities = 10;
constexpr double kChartWidth = 760;  // SVG user units; the page scales it down if narrower

// Coordinates with one decimal: enough for the eye, short to write.
std::string Px(double value) { return fmt::format("{:.1f}", std::isfinite(value) ? value : 0.0); }

void AppendTable(const Table& table, std::string& out, bool name_first_column = false) {
  out += TableToHtml(table, name_first_column);
}

std::string OpenSvg(double width, double height, std::string_view label) {
  return fmt::format(
      "<svg viewBox=\"0 0 {0} {1}\" width=\"{0}\" height=\"{1}\" role=\"img\" aria-label=\"{2}\">\n", Px(width),
      Px(height), format::HtmlEscape(label));
}

std::string SvgText(double x, double y, std::string_view text, std::string_view anchor = "start",
                    std::string_view extra = "") {
  return fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"{}\"{}>{}</text>\n", Px(x), Px(y), anchor, extra,
                     format::HtmlEscape(text));
}

// A y-axis title, rotated to run along the axis.
std::string SvgVerticalTitle(double x, double y, std::string_view text) {
  return fmt::format(
      "<text x=\"{0}\" y=\"{1}\" text-anchor=\"middle\" transform=\"rotate(-90 {0} {1})\">{2}</text>\n", Px(x),
      Px(y), format::HtmlEscape(text));
}

std::string SvgLine(double x1, double y1, double x2, double y2, std::string_view stroke = "#57606a") {
  return fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\"/>\n", Px(x1), Px(y1), Px(x2),
                     Px(y2), stroke);
}

// A rectangle with a hover tooltip.
std::string SvgRect(double x, double y, double width, double height, std::string_view fill,
                    std::string_view tooltip, std::string_view extra = "") {
  return fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"{}><title>{}</title></rect>\n",
                     Px(x), Px(y), Px(std::max(0.0, width)), Px(std::max(0.0, height)), fill, extra,
                     format::HtmlEscape(tooltip));
}


// Series colours: a qualitative palette while it lasts, then evenly spaced hues.
std::string SeriesColor(size_t index, size_t count) {
  static constexpr std::array<std::string_view, 10> kPalette = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2",
                                                                "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
                                                                "#9c755f", "#bab0ac"};
  if (count <= kPalette.size()) return std::string(kPalette[index]);
  // 300 of the 360 degrees, so that the last series does not come back to the first's red.
  const double hue = 300.0 * static_cast<double>(index) / static_cast<double>(count);
  return fmt::format("hsl({:.0f},65%,45%)", hue);
}

// Legend entries laid out in rows across the chart width; returns the height used.
struct LegendEntry {
  std::string label;
  std::string color;
  bool hollow = false;
};

double AppendLegend(const std::vector<LegendEntry>& entries, double left, double top, double width,
                    std::string& out) {
  constexpr double kEntryWidth = 150, kRowHeight = 16, kSwatch = 10;
  const size_t per_row = std::max<size_t>(1, static_cast<size_t>(width / kEntryWidth));
  for (size_t i = 0; i < entries.size(); ++i) {
    const double x = left + static_cast<double>(i % per_row) * kEntryWidth;
    const double y = top + static_cast<double>(i / per_row) * kRowHeight;
    const LegendEntry& entry = entries[i];
    const std::string fill = entry.hollow ? "#ffffff" : entry.color;
    out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\" stroke=\"{}\"/>\n", Px(x),
                       Px(y), Px(kSwatch), Px(kSwatch), fill, entry.color);
    out += SvgText(x + kSwatch + 4, y + kSwatch - 1, entry.label);
  }
  const size_t rows = (entries.size() + per_row - 1) / per_row;
  return static_cast<double>(rows) * kRowHeight;
}

// Chart 1: each device's trace window split into compute only / overlapped / comm only /
// memory only / idle (docs/metrics.md §3), which partition the window.
void AppendBreakdownChart(const Report& report, std::string& out) {
  out += "<h2>Where the time goes</h2>\n";
  if (report.ranks.empty()) {
    out += "<p>No device activity to chart: no rank has compute, communication or memory activity.</p>\n";
    return;
  }
  struct Segment {
    const char* label;
    const char* color;
    int64_t Breakdown::*field;
  };
  static constexpr std::array<Segment, 5> kSegments = {{
      {"compute only", "#4e79a7", &Breakdown::compute_only_ns},
      {"overlapped", "#59a14f", &Breakdown::overlap_ns},
      {"comm only", "#e15759", &Breakdown::comm_only_ns},
      {"memory only", "#edc948", &Breakdown::memory_only_ns},
      {"idle", "#d0d7de", &Breakdown::idle_ns},
  }};
  const size_t bars = report.ranks.size();
  const double row = bars <= 16 ? 22 : bars <= 32 ? 14 : 10;
  const double bar = row - 4;
  constexpr double kLeft = 120, kTop = 24, kRight = 20;
  const double plot_width = kChartWidth - kLeft - kRight;
  const double plot_height = row * static_cast<double>(bars);
  const double axis_y = kTop + plot_height;
  const double legend_top = axis_y + 44;
  std::string body;
  for (size_t i = 0; i < bars; ++i) {
    const DeviceReport& device = report.ranks[i];
    const std::string label = DeviceLabel(device.rank, device.device);
    const double y = kTop + row * static_cast<double>(i) + (row - bar) / 2;
    body += SvgText(kLeft - 6, y + bar / 2 + 4, label, "end", bars > 32 ? " style=\"font-size:8px\"" : "");
    const double window = static_cast<double>(device.totals.window_ns);
    if (!(window > 0)) {
      body += SvgText(kLeft + 4, y + bar / 2 + 4, "no activity");
      continue;
    }
    double x = kLeft;
    for (const Segment& segment : kSegments) {
      const double ns = static_cast<double>(device.totals.*segment.field);
      const double width = std::clamp(plot_width * ns / window, 0.0, kLeft + plot_width - x);
      const std::string tooltip = fmt::format("{}: {} {} ({})", label, segment.label,
                                              format::FormatPercent(100.0 * ns / window), format::FormatDuration(ns));
      body += SvgRect(x, y, width, bar, segment.color, tooltip);
      x += width;
    }
  }
  // The x axis: share of the window.
  body += SvgLine(kLeft, axis_y, kLeft + plot_width, axis_y);
  for (int percent = 0; percent <= 100; percent += 25) {
    const double x = kLeft + plot_width * percent / 100.0;
    body += SvgLine(x, axis_y, x, axis_y + 4);
    body += SvgText(x, axis_y + 16, fmt::format("{}%", percent), "middle");
  }
  body += SvgText(kLeft + plot_width / 2, axis_y + 32, "share of the device's trace window (%)", "middle");
  // The y axis title sits above the row labels: a chart of one bar is too short for it.
  body += SvgText(kLeft - 6, kTop - 8, "rank, device", "end", " class=\"title\"");
  std::vector<LegendEntry> legend;
  for (const Segment& segment : kSegments) legend.push_back({segment.label, segment.color});
  const double legend_height = AppendLegend(legend, kLeft, legend_top, plot_width, body);
  out +=
      "<p class=\"caption\">Whole-trace totals per device: the five parts partition the window from the "
      "first to the last device activity.</p>\n";
  out += OpenSvg(kChartWidth, legend_top + legend_height + 6, "time breakdown per rank and device");
  out += body;
  out += "</svg>\n";
}

// Chart 2: step time of every step, one series per device; warm-up steps hollow.
void AppendStepTimeChart(const Report& report, std::string& out) {
  out += "<h2>Step time</h2>\n";
  bool any_step = false;
  int64_t first_step = 0, last_step = 0;
  double max_ms = 0;
  for (const DeviceReport& device : report.ranks) {
    for (const StepMetrics& step : device.steps) {
      first_step = any_step ? std::min(first_step, step.number) : step.number;
      last_step = any_step ? std::max(last_step, step.number) : step.number;
      max_ms = std::max(max_ms, static_cast<double>(step.breakdown.window_ns) / 1e6);
      any_step = true;
    }
  }
  if (!any_step) {
    out += "<p>No steps to chart: no device has step ranges.</p>\n";
    return;
  }
  constexpr double kLeft = 70, kTop = 12, kRight = 20, kPlotHeight = 260;
  const double plot_width = kChartWidth - kLeft - kRight;
  const double axis_y = kTop + kPlotHeight;
  // One step (or all steps at one number) sits in the middle of a three-step span.
  const double x_min =
      first_step == last_step ? static_cast<double>(first_step) - 1 : static_cast<double>(first_step);
  const double x_max =
      first_step == last_step ? static_cast<double>(last_step) + 1 : static_cast<double>(last_step);
  const double y_step = NiceStep(max_ms > 0 ? max_ms : 1, 5);
  const double y_max = std::max(y_step, std::ceil((max_ms > 0 ? max_ms : 1) / y_step) * y_step);
  auto x_of = [&](double number) { return kLeft + plot_width * (number - x_min) / (x_max - x_min); };
  auto y_of = [&](double ms) { return axis_y - kPlotHeight * ms / y_max; };

  std::string body;
  // Axes, grid and ticks.
  for (double tick = 0; tick <= y_max + y_step / 2; tick += y_step) {
    body += SvgLine(kLeft, y_of(tick), kLeft + plot_width, y_of(tick), "#eaeef2");
    body += SvgText(kLeft - 6, y_of(tick) + 4, fmt::format("{:g}", tick), "end");
  }
  body += SvgLine(kLeft, kTop, kLeft, axis_y);
  body += SvgLine(kLeft, axis_y, kLeft + plot_width, axis_y);
  const double x_step = std::max(1.0, std::ceil(NiceStep(x_max - x_min, 10)));
  for (double tick = std::ceil(x_min / x_step) * x_step; tick <= x_max; tick += x_step) {
    body += SvgLine(x_of(tick), axis_y, x_of(tick), axis_y + 4);
    body += SvgText(x_of(tick), axis_y + 16, fmt::format("{:.0f}", tick), "middle");
  }
  body += SvgText(kLeft + plot_width / 2, axis_y + 32, "step number", "middle");
  body += SvgVerticalTitle(16, kTop + kPlotHeight / 2, "step time (ms)");

  std::vector<LegendEntry> legend;
  const size_t series = report.ranks.size();
  const double radius = series > 16 ? 2 : 3;
  // A point (with its tooltip) per step and device while the page stays small; beyond
  // that, lines only, each with one tooltip.
  constexpr size_t kMaxPoints = 2000;
  size_t points_total = 0;
  for (const DeviceReport& device : report.ranks) points_total += device.steps.size();
  const bool draw_points = points_total <= kMaxPoints;
  for (size_t i = 0; i < series; ++i) {
    const DeviceReport& device = report.ranks[i];
    const std::string color = SeriesColor(i, series);
    const std::string label = DeviceLabel(device.rank, device.device);
    legend.push_back({label, color});
    if (device.steps.empty()) continue;
    if (device.steps.size() > 1) {
      std::string points;
      for (const StepMetrics& step : device.steps) {
        points += fmt::format("{},{} ", Px(x_of(static_cast<double>(step.number))),
                              Px(y_of(static_cast<double>(step.breakdown.window_ns) / 1e6)));
      }
      body += fmt::format(
          "<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.2\"><title>{}</title>"
          "</polyline>\n",
          points, color, format::HtmlEscape(label));
    }
    if (!draw_points && device.steps.size() > 1) continue;
    for (const StepMetrics& step : device.steps) {
      const double ms = static_cast<double>(step.breakdown.window_ns) / 1e6;
      const std::string tooltip = fmt::format("{}, step {}: {}{}", label, step.number,
                                              format::FormatDuration(static_cast<double>(step.breakdown.window_ns)),
                                              step.aggregated ? "" : " (not aggregated)");
      body += fmt::format(
          "<circle cx=\"{}\" cy=\"{}\" r=\"{}\" fill=\"{}\" stroke=\"{}\"><title>{}</title></circle>\n",
          Px(x_of(static_cast<double>(step.number))), Px(y_of(ms)), Px(radius),
          step.aggregated ? color : std::string("#ffffff"), color, format::HtmlEscape(tooltip));
    }
  }
  legend.push_back({"warm-up / not aggregated", "#57606a", true});
  const double legend_top = axis_y + 44;
  const double legend_height = AppendLegend(legend, kLeft, legend_top, plot_width, body);
  out +=
      "<p class=\"caption\">Step time (end - start of each step range) per rank and device; hollow points "
      "are steps left out of the aggregates.";
  if (!draw_points) out += fmt::format(" With more than {} steps in all, only the lines are drawn.", kMaxPoints);
  out += "</p>\n";
  out += OpenSvg(kChartWidth, legend_top + legend_height + 6, "step time per step and rank");
  out += body;
  out += "</svg>\n";
}

// The wait colour scale: pale yellow (no wait) through orange to dark red (most wait).
std::string WaitColor(double fraction) {
  struct Rgb {
    double r, g, b;
  };
  static constexpr std::array<Rgb, 3> kStops = {{{255, 255, 204}, {253, 141, 60}, {128, 0, 38}}};
  const double t = std::clamp(std::isfinite(fraction) ? fraction : 0.0, 0.0, 1.0);
  const size_t low = t < 0.5 ? 0 : 1;
  const double local = (t - 0.5 * static_cast<double>(low)) / 0.5;
  const Rgb& a = kStops[low];
  const Rgb& b = kStops[low + 1];
  auto mix = [&](double x, double y) { return static_cast<int>(std::lround(x + (y - x) * local)); };
  return fmt::format("#{:02x}{:02x}{:02x}", mix(a.r, b.r), mix(a.g, b.g), mix(a.b, b.b));
}

std::string NoHeatmapReason(const Report& report) {
  const CrossRank& cross_rank = report.cross_rank;
  if (report.ranks.empty()) return "no rank was analyzed";
  if (cross_rank.ranks.size() < 2 && report.run.ranks.size() < 2) return "only one rank was analyzed";
  if (cross_rank.matched == 0) return "no collective was matched across ranks";
  return "the matched collectives could not be assigned to steps";
}

// Chart 3: each rank's wait at collectives, per step (docs/metrics.md §4).
void AppendWaitHeatmap(const Report& report, std::string& out) {
  out += "<h2>Collective wait per rank and step</h2>\n";
  const CrossRank& cross_rank = report.cross_rank;
  if (cross_rank.steps.empty() || cross_rank.ranks.empty()) {
    out += "<p>No cross-rank steps to show: " + format::HtmlEscape(NoHeatmapReason(report)) +
           ", so there is no wait heatmap.</p>\n";
    return;
  }
  const size_t rows = cross_rank.ranks.size();
  const size_t columns = cross_rank.steps.size();
  constexpr double kLeft = 80, kTop = 24, kRight = 20;
  const double plot_width_max = kChartWidth - kLeft - kRight;
  const double cell_width = std::min(40.0, plot_width_max / static_cast<double>(columns));
  const double cell_height = std::clamp(480.0 / static_cast<double>(rows), 6.0, 24.0);
  const double plot_width = cell_width * static_cast<double>(columns);
  const double plot_height = cell_height * static_cast<double>(rows);
  int64_t max_wait = 0;
  for (const StepWait& step : cross_rank.steps) {
    for (const int64_t wait : step.wait_ns) max_wait = std::max(max_wait, wait);
  }
  auto fraction = [&](int64_t wait) {
    return max_wait > 0 ? static_cast<double>(wait) / static_cast<double>(max_wait) : 0.0;
  };

  std::string body;
  for (size_t column = 0; column < columns; ++column) {
    const StepWait& step = cross_rank.steps[column];
    const double x = kLeft + cell_width * static_cast<double>(column);
    for (size_t row = 0; row < rows; ++row) {
      const int rank = cross_rank.ranks[row];
      const double y = kTop + cell_height * static_cast<double>(row);
      const bool known = row < step.wait_ns.size();
      const int64_t wait = known ? step.wait_ns[row] : 0;
      const bool caused_most = step.last_rank && *step.last_rank == rank;
      std::string tooltip = known ? fmt::format("rank {}, step {}: waited {}", rank, step.step,
                                                format::FormatDuration(static_cast<double>(wait)))
                                  : fmt::format("rank {}, step {}: no data", rank, step.step);
      if (caused_most) tooltip += "; the others waited most for this rank";
      const std::string outline = caused_most ? " stroke=\"#1f2328\" stroke-width=\"1\"" : "";
      body +=
          SvgRect(x, y, cell_width, cell_height, known ? WaitColor(fraction(wait)) : "#eaeef2", tooltip, outline);
    }
  }
  // Labels: every row and column while they fit, else every k-th.
  const size_t row_every = static_cast<size_t>(std::ceil(11.0 / cell_height));
  for (size_t row = 0; row < rows; row += row_every) {
    body += SvgText(kLeft - 6, kTop + cell_height * (static_cast<double>(row) + 0.5) + 4,
                    fmt::format("rank {}", cross_rank.ranks[row]), "end");
  }
  const double axis_y = kTop + plot_height;
  const size_t column_every = static_cast<size_t>(std::ceil(28.0 / cell_width));
  for (size_t column = 0; column < columns; column += column_every) {
    body += SvgText(kLeft + cell_width * (static_cast<double>(column) + 0.5), axis_y + 14,
                    std::to_string(cross_rank.steps[column].step), "middle");
  }
  body += SvgText(kLeft + plot_width / 2, axis_y + 30, "step", "middle");
  body += SvgText(kLeft - 6, kTop - 8, "rank", "end", " class=\"title\"");

  // The colour-scale legend: a gradient from no wait to the largest wait.
  const double legend_y = axis_y + 46;
  constexpr double kScaleWidth = 200, kScaleHeight = 10;
  body += "<defs><linearGradient id=\"rankscope-wait-scale\" x1=\"0\" x2=\"1\" y1=\"0\" y2=\"0\">";
  for (const double stop : {0.0, 0.25, 0.5, 0.75, 1.0}) {
    body += fmt::format("<stop offset=\"{}\" stop-color=\"{}\"/>", stop, WaitColor(stop));
  }
  body += "</linearGradient></defs>\n";
  body += SvgText(kLeft, legend_y + 9, "wait:");
  const double scale_x = kLeft + 40;
  body += SvgRect(scale_x, legend_y, kScaleWidth, kScaleHeight, "url(#rankscope-wait-scale)",
                  fmt::format("wait per rank and step, 0 to {}", format::FormatDuration(static_cast<double>(max_wait))),
                  " stroke=\"#57606a\"");
  body += SvgText(scale_x, legend_y + 24, "0", "middle");
  body += SvgText(scale_x + kScaleWidth, legend_y + 24, format::FormatDuration(static_cast<double>(max_wait)), "middle");
  body += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"#ffffff\" stroke=\"#1f2328\"/>\n",
                      Px(scale_x + kScaleWidth + 50), Px(legend_y));
  body += SvgText(scale_x + kScaleWidth + 64, legend_y + 9, "outlined: the rank the others waited for");

  out += "<p class=\"caption\">Time each rank waited at collectives for the last rank to arrive, per step.</p>\n";
  out += OpenSvg(kChartWidth, legend_y + 32, "collective wait per rank and step");
  out += body;
  out += "</svg>\n";
}

}  // namespace

std::string ReportToHtml(const Report& report) {
  const std::string title =
      report.run.directory.empty() ? std::string("rankscope report") : "rankscope report: " + report.run.directory;
  std::string out = HtmlPageStart(title, report.tool_version);

  Table summary;
  summary.header = {"", ""};
  summary.numeric = {false, false};
  for (auto& [label, value] : SummaryItems(report)) summary.rows.push_back({label, value});
  AppendTable(summary, out);

  out +=
      "<h2>Per rank</h2>\n<p class=\"caption\">Medians over the aggregated steps. exposed: communication "
      "not hidden by compute; overlap: share of communication hidden; util: busy share of the step.</p>\n";
  const Table ranks = RankTable(report, /*with_host=*/true);
  if (ranks.rows.empty()) {
    out += "<p>No rank with device activity.</p>\n";
  } else {
    AppendTable(ranks, out);
  }
  if (const Table metrics = RunMetricTable(report); !metrics.rows.empty()) {
    out +=
        "<h2>Run metrics</h2>\n<p class=\"caption\">Median over ranks of the per-rank medians, and the worst "
        "rank.</p>\n";
    AppendTable(metrics, out);
  }

  AppendBreakdownChart(report, out);
  AppendStepTimeChart(report, out);
  AppendWaitHeatmap(report, out);

  if (const Table activities = TopActivityTable(report, kTopActivities); !activities.rows.empty()) {
    out +=
        "<h2>Top activities</h2>\n<p class=\"caption\">Summed over ranks; share is of the summed compute + "
        "comm + memory time.</p>\n";
    AppendTable(activities, out, /*name_first_column=*/true);
  }
  const std::string source = CollectiveSourceLine(report);
  const Table collectives = CollectiveTable(report);
  if (!source.empty() || !collectives.rows.empty()) {
    out += "<h2>Collectives</h2>\n";
    if (!source.empty()) out += "<p>" + format::HtmlEscape(source) + "</p>\n";
    if (!collectives.rows.empty()) AppendTable(collectives, out, /*name_first_column=*/true);
  }
  out += "<h2>Stragglers</h2>\n<p>" + format::HtmlEscape(StragglerLine(report)) + "</p>\n";
  if (const std::string clock = ClockLine(report); !clock.empty()) {
    out += "<p>" + format::HtmlEscape(clock) + "</p>\n";
  }
  if (!report.warnings.empty()) {
    out += "<h2>Warnings</h2>\n<ul class=\"warnings\">\n";
    for (const std::string& warning : report.warnings) out += "<li>" + format::HtmlEscape(warning) + "</li>\n";
    out += "</ul>\n";
  }
  out += HtmlPageEnd();
  return out;
}

}  // namespace rankscope::report
