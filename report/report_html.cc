// The report as one self-contained HTML page: inline style, inline SVG charts (drawn through
// plot_canvas.h, like the scaling charts), no scripts and nothing fetched from elsewhere, so
// it can be attached to a ticket or opened offline.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <functional>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "report/plot_canvas.h"
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

// The report's palette: the charts' (plot_canvas.h).
constexpr PlotColor kTextColor = kChartTextColor;
constexpr PlotColor kAxisColor = kChartAxisColor;
constexpr PlotColor kGridColor = kChartGridColor;
constexpr PlotColor kWhite = kChartWhite;
constexpr PlotStroke kAxisStroke{kAxisColor, 1};
constexpr double kFontSize = kChartFontSize;
constexpr double kAxisTitleSize = 12;

PlotTextStyle TextStyle(TextAnchor anchor = TextAnchor::kStart, double size = kFontSize, bool bold = false) {
  return ChartTextStyle(anchor, size, bold);
}

// An axis title set above the labels it names ("rank, device").
PlotTextStyle AxisTitleStyle() { return TextStyle(TextAnchor::kEnd, kAxisTitleSize, true); }

void AppendTable(const Table& table, std::string& out, bool name_first_column = false) {
  out += TableToHtml(table, name_first_column);
}

// Series colours: a qualitative palette while it lasts, then evenly spaced hues.
PlotColor SeriesColor(size_t index, size_t count) {
  static constexpr std::array<PlotColor, 10> kPalette = {{{0x4e, 0x79, 0xa7},
                                                          {0xf2, 0x8e, 0x2b},
                                                          {0xe1, 0x57, 0x59},
                                                          {0x76, 0xb7, 0xb2},
                                                          {0x59, 0xa1, 0x4f},
                                                          {0xed, 0xc9, 0x48},
                                                          {0xb0, 0x7a, 0xa1},
                                                          {0xff, 0x9d, 0xa7},
                                                          {0x9c, 0x75, 0x5f},
                                                          {0xba, 0xb0, 0xac}}};
  if (count <= kPalette.size()) return kPalette[index];
  // 300 of the 360 degrees, so that the last series does not come back to the first's red.
  return PlotColorFromHsl(300.0 * static_cast<double>(index) / static_cast<double>(count), 0.65, 0.45);
}

// Horizontal stacked bars, one row each, over an x axis of five ticks at 0, 1/4, ..., 1 of
// the full scale (labelled by `tick`), its title under it, the rows' title above them, and
// the legend below: the breakdown and memory charts.
std::string StackedBarChart(const std::vector<HorizontalBar>& bars, const std::vector<SwatchLegendEntry>& legend,
                            const std::string& title, const std::function<std::string(int quarter)>& tick,
                            const std::string& axis_title, const std::string& rows_title) {
  const size_t bar_count = bars.size();
  const double row = bar_count <= 16 ? 22 : bar_count <= 32 ? 14 : 10;
  constexpr double kLeft = 120, kTop = 24, kRight = 20;
  const double plot_width = kChartWidth - kLeft - kRight;
  const double axis_y = kTop + row * static_cast<double>(bar_count);
  const double legend_top = axis_y + 44;
  SvgCanvas canvas(kChartWidth, legend_top + SwatchLegendHeight(legend.size(), plot_width) + 6, title);
  canvas.BeginGroup("bars");
  DrawHorizontalStackedBars(canvas, bars,
                            {.plot_left = kLeft,
                             .plot_top = kTop,
                             .plot_width = plot_width,
                             .row_height = row,
                             .bar_height = row - 4,
                             .label_style = TextStyle(TextAnchor::kEnd, bar_count > 32 ? 8 : kFontSize)});
  canvas.EndGroup();
  canvas.BeginGroup("axes");
  canvas.Line({kLeft, axis_y}, {kLeft + plot_width, axis_y}, kAxisStroke);
  for (int quarter = 0; quarter <= 4; ++quarter) {
    const double x = kLeft + plot_width * (25 * quarter) / 100.0;
    canvas.Line({x, axis_y}, {x, axis_y + 4}, kAxisStroke);
    canvas.Text({x, axis_y + 16}, tick(quarter), TextStyle(TextAnchor::kMiddle));
  }
  canvas.Text({kLeft + plot_width / 2, axis_y + 32}, axis_title, TextStyle(TextAnchor::kMiddle));
  // The rows' title sits above the row labels: a chart of one bar is too short for it.
  canvas.Text({kLeft - 6, kTop - 8}, rows_title, AxisTitleStyle());
  canvas.EndGroup();
  DrawSwatchLegend(canvas, legend, {kLeft, legend_top}, plot_width, TextStyle());
  return canvas.Finish();
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
    PlotColor color;
    int64_t Breakdown::*field;
  };
  static constexpr std::array<Segment, 5> kSegments = {{
      {"compute only", {0x4e, 0x79, 0xa7}, &Breakdown::compute_only_ns},
      {"overlapped", {0x59, 0xa1, 0x4f}, &Breakdown::overlap_ns},
      {"comm only", {0xe1, 0x57, 0x59}, &Breakdown::comm_only_ns},
      {"memory only", {0xed, 0xc9, 0x48}, &Breakdown::memory_only_ns},
      {"idle", {0xd0, 0xd7, 0xde}, &Breakdown::idle_ns},
  }};
  std::vector<HorizontalBar> bars;
  for (const DeviceReport& device : report.ranks) {
    HorizontalBar bar;
    bar.label = DeviceLabel(device.rank, device.device);
    bar.full_scale = static_cast<double>(device.totals.window_ns);
    bar.empty_note = "no activity";
    for (const Segment& segment : kSegments) {
      const double ns = static_cast<double>(device.totals.*segment.field);
      bar.segments.push_back({ns, segment.color,
                              fmt::format("{}: {} {} ({})", bar.label, segment.label,
                                          FormatPercent(100.0 * ns / bar.full_scale), FormatDuration(ns))});
    }
    bars.push_back(std::move(bar));
  }
  std::vector<SwatchLegendEntry> legend;
  for (const Segment& segment : kSegments) legend.push_back({segment.label, segment.color});

  out +=
      "<p class=\"caption\">Whole-trace totals per device: the five parts partition the window from the "
      "first to the last device activity.</p>\n";
  out += StackedBarChart(bars, legend, "time breakdown per rank and device",
                         [](int quarter) { return fmt::format("{}%", 25 * quarter); },
                         "share of the device's trace window (%)", "rank, device");
}

// Per source of memory counters: each rank's bytes at its peak, stacked by category, on one
// scale (the largest peak), then the table. Only for ranks with counters of the source.
void AppendMemoryCharts(const Report& report, std::string& out) {
  const std::vector<std::string> sources = MemorySources(report);
  if (sources.empty()) return;
  out += "<h2>Memory</h2>\n";
  for (const std::string& source : sources) {
    const std::string title = MemorySourceTitle(source);
    const std::vector<std::string> categories = MemoryCategories(report, source);
    std::vector<PlotColor> colors;
    for (size_t c = 0; c < categories.size(); ++c) {
      colors.push_back(
          PlotColorFromHsl(360.0 * static_cast<double>(c) / static_cast<double>(categories.size()), 0.45, 0.55));
    }
    double largest = 0;
    for (const analyzer::RankMemory& rank : report.memory) {
      if (rank.source == source) largest = std::max(largest, static_cast<double>(rank.peak_bytes));
    }
    std::vector<HorizontalBar> bars;
    for (const analyzer::RankMemory& rank : report.memory) {
      if (rank.source != source) continue;
      HorizontalBar bar;
      bar.label = fmt::format("rank {}", rank.rank);
      bar.full_scale = largest;
      bar.empty_note = "nothing allocated";
      for (size_t c = 0; c < categories.size(); ++c) {
        double bytes = 0;
        for (const analyzer::MemoryCategoryBytes& entry : rank.at_peak) {
          if (entry.category == categories[c]) bytes = static_cast<double>(entry.bytes);
        }
        bar.segments.push_back(
            {bytes, colors[c], fmt::format("{}: {} {}", bar.label, categories[c], format::FormatBytes(bytes))});
      }
      bars.push_back(std::move(bar));
    }
    std::vector<SwatchLegendEntry> legend;
    for (size_t c = 0; c < categories.size(); ++c) legend.push_back({categories[c], colors[c]});
    out += "<p class=\"caption\">" + HtmlEscape(fmt::format("{}: what each rank's counters held when their total was "
                                                            "largest.", title)) + "</p>\n";
    out += StackedBarChart(bars, legend, fmt::format("memory per rank at its peak, by category: {}", title),
                           [largest](int quarter) { return format::FormatBytes(largest * quarter / 4.0); },
                           "bytes held at the rank's peak", "rank");
    AppendTable(MemoryTable(report, source), out);
  }
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

  const size_t series = report.ranks.size();
  std::vector<SwatchLegendEntry> legend;
  for (size_t i = 0; i < series; ++i) {
    legend.push_back({DeviceLabel(report.ranks[i].rank, report.ranks[i].device), SeriesColor(i, series)});
  }
  legend.push_back({"warm-up / not aggregated", kAxisColor, /*hollow=*/true});
  const double legend_top = axis_y + 44;
  SvgCanvas canvas(kChartWidth, legend_top + SwatchLegendHeight(legend.size(), plot_width) + 6,
                   "step time per step and rank");

  // Axes, grid and ticks.
  canvas.BeginGroup("axes");
  for (double tick = 0; tick <= y_max + y_step / 2; tick += y_step) {
    canvas.Line({kLeft, y_of(tick)}, {kLeft + plot_width, y_of(tick)}, PlotStroke{kGridColor, 1});
    canvas.Text({kLeft - 6, y_of(tick) + 4}, fmt::format("{:g}", tick), TextStyle(TextAnchor::kEnd));
  }
  canvas.Line({kLeft, kTop}, {kLeft, axis_y}, kAxisStroke);
  canvas.Line({kLeft, axis_y}, {kLeft + plot_width, axis_y}, kAxisStroke);
  const double x_step = std::max(1.0, std::ceil(NiceStep(x_max - x_min, 10)));
  for (double tick = std::ceil(x_min / x_step) * x_step; tick <= x_max; tick += x_step) {
    canvas.Line({x_of(tick), axis_y}, {x_of(tick), axis_y + 4}, kAxisStroke);
    canvas.Text({x_of(tick), axis_y + 16}, fmt::format("{:.0f}", tick), TextStyle(TextAnchor::kMiddle));
  }
  canvas.Text({kLeft + plot_width / 2, axis_y + 32}, "step number", TextStyle(TextAnchor::kMiddle));
  PlotTextStyle vertical = TextStyle(TextAnchor::kMiddle);
  vertical.vertical = true;
  canvas.Text({16, kTop + kPlotHeight / 2}, "step time (ms)", vertical);
  canvas.EndGroup();

  const double radius = series > 16 ? 2 : 3;
  // A point (with its tooltip) per step and device while the page stays small; beyond
  // that, lines only, each with one tooltip.
  constexpr size_t kMaxPoints = 2000;
  size_t points_total = 0;
  for (const DeviceReport& device : report.ranks) points_total += device.steps.size();
  const bool draw_points = points_total <= kMaxPoints;
  canvas.BeginGroup("series");
  for (size_t i = 0; i < series; ++i) {
    const DeviceReport& device = report.ranks[i];
    const PlotColor color = legend[i].color;
    const std::string& label = legend[i].label;
    if (device.steps.empty()) continue;
    if (device.steps.size() > 1) {
      std::vector<PlotPoint> line;
      for (const StepMetrics& step : device.steps) {
        line.push_back({x_of(static_cast<double>(step.number)), y_of(static_cast<double>(step.breakdown.window_ns) / 1e6)});
      }
      canvas.Polyline(line, PlotStroke{color, 1.2}, label);
    }
    if (!draw_points && device.steps.size() > 1) continue;
    for (const StepMetrics& step : device.steps) {
      const double ns = static_cast<double>(step.breakdown.window_ns);
      const std::string tooltip = fmt::format("{}, step {}: {}{}", label, step.number, FormatDuration(ns),
                                              step.aggregated ? "" : " (not aggregated)");
      canvas.Circle({x_of(static_cast<double>(step.number)), y_of(ns / 1e6)}, radius,
                    PlotShapeStyle{step.aggregated ? color : kWhite, PlotStroke{color, 1}}, tooltip);
    }
  }
  canvas.EndGroup();
  DrawSwatchLegend(canvas, legend, {kLeft, legend_top}, plot_width, TextStyle());

  out +=
      "<p class=\"caption\">Step time (end - start of each step range) per rank and device; hollow points "
      "are steps left out of the aggregates.";
  if (!draw_points) out += fmt::format(" With more than {} steps in all, only the lines are drawn.", kMaxPoints);
  out += "</p>\n";
  out += canvas.Finish();
}

// The wait colour scale: pale yellow (no wait) through orange to dark red (most wait).
PlotColor WaitColor(double fraction) {
  struct Rgb {
    double r, g, b;
  };
  static constexpr std::array<Rgb, 3> kStops = {{{255, 255, 204}, {253, 141, 60}, {128, 0, 38}}};
  const double t = std::clamp(std::isfinite(fraction) ? fraction : 0.0, 0.0, 1.0);
  const size_t low = t < 0.5 ? 0 : 1;
  const double local = (t - 0.5 * static_cast<double>(low)) / 0.5;
  const Rgb& a = kStops[low];
  const Rgb& b = kStops[low + 1];
  auto mix = [&](double x, double y) { return static_cast<uint8_t>(std::lround(x + (y - x) * local)); };
  return {mix(a.r, b.r), mix(a.g, b.g), mix(a.b, b.b)};
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
    out += "<p>No cross-rank steps to show: " + HtmlEscape(NoHeatmapReason(report)) +
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
  const double axis_y = kTop + plot_height;
  const double legend_y = axis_y + 46;
  int64_t max_wait = 0;
  for (const StepWait& step : cross_rank.steps) {
    for (const int64_t wait : step.wait_ns) max_wait = std::max(max_wait, wait);
  }
  auto fraction = [&](int64_t wait) {
    return max_wait > 0 ? static_cast<double>(wait) / static_cast<double>(max_wait) : 0.0;
  };
  SvgCanvas canvas(kChartWidth, legend_y + 32, "collective wait per rank and step");

  canvas.BeginGroup("cells");
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
                                                FormatDuration(static_cast<double>(wait)))
                                  : fmt::format("rank {}, step {}: no data", rank, step.step);
      if (caused_most) tooltip += "; the others waited most for this rank";
      PlotShapeStyle style{known ? WaitColor(fraction(wait)) : kGridColor, std::nullopt};
      if (caused_most) style.stroke = PlotStroke{kTextColor, 1};
      canvas.Rect({x, y}, cell_width, cell_height, style, tooltip);
    }
  }
  canvas.EndGroup();

  // Labels: every row and column while they fit, else every k-th.
  canvas.BeginGroup("axes");
  const size_t row_every = static_cast<size_t>(std::ceil(11.0 / cell_height));
  for (size_t row = 0; row < rows; row += row_every) {
    canvas.Text({kLeft - 6, kTop + cell_height * (static_cast<double>(row) + 0.5) + 4},
                fmt::format("rank {}", cross_rank.ranks[row]), TextStyle(TextAnchor::kEnd));
  }
  const size_t column_every = static_cast<size_t>(std::ceil(28.0 / cell_width));
  for (size_t column = 0; column < columns; column += column_every) {
    canvas.Text({kLeft + cell_width * (static_cast<double>(column) + 0.5), axis_y + 14},
                std::to_string(cross_rank.steps[column].step), TextStyle(TextAnchor::kMiddle));
  }
  canvas.Text({kLeft + plot_width / 2, axis_y + 30}, "step", TextStyle(TextAnchor::kMiddle));
  canvas.Text({kLeft - 6, kTop - 8}, "rank", AxisTitleStyle());
  canvas.EndGroup();

  // The colour-scale legend: a gradient from no wait to the largest wait.
  constexpr double kScaleWidth = 200, kScaleHeight = 10;
  std::vector<PlotColor> scale;
  for (const double stop : {0.0, 0.25, 0.5, 0.75, 1.0}) scale.push_back(WaitColor(stop));
  const std::string max_text = FormatDuration(static_cast<double>(max_wait));
  const double scale_x = kLeft + 40;
  canvas.BeginGroup("legend");
  canvas.Text({kLeft, legend_y + 9}, "wait:", TextStyle());
  canvas.GradientRect({scale_x, legend_y}, kScaleWidth, kScaleHeight, scale, kAxisStroke,
                      fmt::format("wait per rank and step, 0 to {}", max_text));
  canvas.Text({scale_x, legend_y + 24}, "0", TextStyle(TextAnchor::kMiddle));
  canvas.Text({scale_x + kScaleWidth, legend_y + 24}, max_text, TextStyle(TextAnchor::kMiddle));
  canvas.Rect({scale_x + kScaleWidth + 50, legend_y}, 10, 10, PlotShapeStyle{kWhite, PlotStroke{kTextColor, 1}}, "");
  canvas.Text({scale_x + kScaleWidth + 64, legend_y + 9}, "outlined: the rank the others waited for", TextStyle());
  canvas.EndGroup();

  out += "<p class=\"caption\">Time each rank waited at collectives for the last rank to arrive, per step.</p>\n";
  out += canvas.Finish();
}

void AppendRunEnd(const analyzer::HangReport& end, std::string& out) {
  out += "<h2>" + HtmlEscape(RunEndHeading(end)) + "</h2>\n<p>" + HtmlEscape(end.summary) + "</p>\n";
  const std::vector<const analyzer::CommunicatorEnd*> shown = CommunicatorsToShow(end);
  for (const analyzer::CommunicatorEnd* comm : shown) {
    out += "<p>" + HtmlEscape(CommunicatorLine(*comm)) + "</p>\n";
    if (HasCollectives(*comm)) AppendTable(CommunicatorTable(*comm), out);
    if (const Table streams = PeerStreamTable(*comm); !streams.rows.empty()) AppendTable(streams, out);
    for (const std::string& line : MismatchLines(*comm)) out += "<p>" + HtmlEscape(line) + "</p>\n";
  }
  if (const size_t quiet = end.communicators.size() - shown.size(); quiet > 0) {
    out += fmt::format("<p>{} other communicator(s): nothing stalled or in flight.</p>\n", quiet);
  }
  const std::vector<std::string> culprits = CulpritLines(end);
  if (!culprits.empty()) {
    out += "<p>Culprits (what their threads were inside, open for):</p>\n<ul>\n";
    for (const std::string& line : culprits) out += "<li>" + HtmlEscape(line) + "</li>\n";
    out += "</ul>\n";
  }
  out += "<p>" + HtmlEscape(RankEndsLine(end)) + "</p>\n";
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
  if (report.did_not_finish) AppendRunEnd(*report.did_not_finish, out);

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
  if (const std::string strategy = StrategyLine(report); !strategy.empty()) {
    out += "<h2>Parallelism</h2>\n<p>" + format::HtmlEscape(strategy) + "</p>\n";
    if (const std::string pipeline = PipelineLine(report); !pipeline.empty()) {
      out += "<p>" + format::HtmlEscape(pipeline) + "</p>\n";
    }
    for (const Table& table : {PipelineTable(report), FsdpLayerTable(report), PointToPointTable(report)}) {
      if (!table.rows.empty()) AppendTable(table, out);
    }
  }
  AppendMemoryCharts(report, out);
  if (const std::string path = CriticalPathLine(report); !path.empty()) {
    out += "<h2>Critical path</h2>\n<p>" + format::HtmlEscape(path) + "</p>\n";
    for (const Table& table : {CriticalPathTable(report), PathWaitTable(report), WhatIfTable(report)}) {
      if (!table.rows.empty()) AppendTable(table, out);
    }
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
