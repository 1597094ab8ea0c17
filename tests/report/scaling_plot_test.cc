#include "report/scaling_plot.h"

#include <cairo.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "report/plot_canvas.h"
#include "report/report_format.h"
#include "tests/temp_dir.h"

// Fontconfig (under cairo's toy font API) keeps its configuration and font patterns for the
// life of the process, linked through offset-encoded pointers that LeakSanitizer cannot follow,
// so it reports them as leaked at exit. They are made once per process, not per plot (the
// report stays at 1016 bytes however many PNGs are drawn; cairo_debug_reset_static_data()
// with FcFini() at exit frees them all). Only allocations with fontconfig on their stack are
// suppressed: a cairo object left undestroyed by the plot code is still reported.
extern "C" const char* __lsan_default_suppressions() { return "leak:libfontconfig.so\n"; }

namespace rankscope::report {

using compare::ProjectedPoint;
using compare::ScalingMode;
using compare::ScalingPoint;
using compare::ScalingProjection;
using compare::ScalingTable;
namespace {

namespace fs = std::filesystem;

ScalingPoint Point(int world_size, std::optional<double> efficiency, std::optional<double> throughput,
                   std::optional<double> ideal_throughput, double step_ms) {
  ScalingPoint point;
  point.world_size = world_size;
  point.run = fmt::format("runs/ws{}", world_size);
  point.efficiency = efficiency;
  point.throughput = throughput;
  point.ideal_throughput = ideal_throughput;
  point.step_time_ns = step_ms * 1e6;
  return point;
}

// Weak scaling over 1, 2 and 4 ranks, projected to 8 and 16.
ScalingTable WeakTable(bool with_projection = true) {
  ScalingTable table;
  table.mode = ScalingMode::kWeak;
  table.points = {Point(1, 1.0, 1000, 1000, 64.0), Point(2, 0.91, 1820, 2000, 70.3), Point(4, 0.83, 3320, 4000, 77.1)};
  if (with_projection) {
    ScalingProjection projection;
    projection.points = {{8, 86.5e6, 0.74, 5920.0}, {16, 103.2e6, 0.62, 9920.0}};
    table.projection = projection;
  } else {
    table.projection_note = "no projection: needs runs at 3 world sizes";
  }
  return table;
}

size_t Count(std::string_view text, std::string_view needle) {
  size_t count = 0;
  for (size_t at = text.find(needle); at != std::string_view::npos; at = text.find(needle, at + needle.size())) {
    ++count;
  }
  return count;
}

// The SVG group for `role` (the drawing does not nest groups), empty when there is none.
std::string Group(const std::string& svg, std::string_view role) {
  const size_t begin = svg.find(fmt::format("<g data-role=\"{}\">", role));
  if (begin == std::string::npos) return "";
  const size_t end = svg.find("</g>", begin);
  return end == std::string::npos ? "" : svg.substr(begin, end - begin);
}

// "" when every tag is closed in order and every '&' starts an entity; else the first problem.
std::string MarkupProblem(std::string_view svg) {
  std::vector<std::string> open;
  for (size_t at = svg.find('<'); at != std::string_view::npos; at = svg.find('<', at + 1)) {
    const size_t end = svg.find('>', at);
    if (end == std::string_view::npos) return "unterminated tag";
    const std::string_view tag = svg.substr(at + 1, end - at - 1);
    if (tag.find('<') != std::string_view::npos) return fmt::format("'<' inside tag at {}", at);
    if (tag.starts_with('/')) {
      if (open.empty() || open.back() != tag.substr(1)) return fmt::format("unexpected <{}>", tag);
      open.pop_back();
      continue;
    }
    const std::string name(tag.substr(0, tag.find_first_of(" /")));
    if (!tag.ends_with('/')) open.push_back(name);
  }
  if (!open.empty()) return fmt::format("<{}> not closed", open.back());
  for (size_t at = svg.find('&'); at != std::string_view::npos; at = svg.find('&', at + 1)) {
    const std::string_view rest = svg.substr(at);
    if (!rest.starts_with("&amp;") && !rest.starts_with("&lt;") && !rest.starts_with("&gt;") &&
        !rest.starts_with("&quot;") && !rest.starts_with("&#39;")) {
      return fmt::format("'&' that starts no entity at {}", at);
    }
  }
  return "";
}

TEST(ScalingPlotSvg, IsOneWellFormedSvgElement) {
  const std::string svg = ScalingPlotSvg(WeakTable());
  EXPECT_TRUE(svg.starts_with("<svg viewBox=\"0 0 960.0 400.0\" width=\"960.0\" height=\"400.0\" role=\"img\""));
  EXPECT_TRUE(svg.ends_with("</svg>\n"));
  EXPECT_EQ(MarkupProblem(svg), "");
  EXPECT_EQ(Count(svg, "<svg "), 1u);
  EXPECT_EQ(Count(svg, "</svg>"), 1u);
  EXPECT_EQ(Count(svg, "<text "), Count(svg, "</text>"));
  EXPECT_EQ(Count(svg, "<g "), Count(svg, "</g>"));
  EXPECT_EQ(Count(svg, "<title>"), Count(svg, "</title>"));
  EXPECT_EQ(Count(svg, "<circle "), Count(svg, "</circle>") + Count(Group(svg, "legend"), "<circle "));
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(svg.find("inf"), std::string::npos);
  EXPECT_EQ(svg.find("http"), std::string::npos);  // inline in a page that fetches nothing
}

TEST(ScalingPlotSvg, HasTitlesAndAxes) {
  const std::string svg = ScalingPlotSvg(WeakTable());
  EXPECT_NE(svg.find(">Scaling efficiency, weak scaling</text>"), std::string::npos);
  EXPECT_NE(svg.find(">Scaling efficiency</text>"), std::string::npos);
  EXPECT_NE(svg.find(">Throughput</text>"), std::string::npos);
  EXPECT_EQ(Count(svg, ">world size (ranks)</text>"), 2u);
  EXPECT_NE(svg.find(">efficiency (%)</text>"), std::string::npos);
  EXPECT_NE(svg.find(">throughput (samples/s)</text>"), std::string::npos);
  EXPECT_NE(svg.find("transform=\"rotate(-90 "), std::string::npos);
  // A tick per world size, measured and projected, on both panels.
  for (const int size : {1, 2, 4, 8, 16}) {
    EXPECT_EQ(Count(svg, fmt::format(" text-anchor=\"middle\" style=\"font-family:&#39;DejaVu Sans&#39;,sans-serif;"
                                     "font-size:11.0px;fill:#1f2328\">{}</text>",
                                     size)),
              2u)
        << size;
  }
  ScalingTable strong = WeakTable();
  strong.mode = ScalingMode::kStrong;
  EXPECT_NE(ScalingPlotSvg(strong).find(">Scaling efficiency, strong scaling</text>"), std::string::npos);
}

TEST(ScalingPlotSvg, OneMarkerAndLabelPerMeasuredPoint) {
  const std::string svg = ScalingPlotSvg(WeakTable());
  const std::string efficiency = Group(svg, "efficiency-measured");
  EXPECT_EQ(Count(efficiency, "<circle "), 3u);
  EXPECT_EQ(Count(efficiency, "fill=\"#4e79a7\""), 3u);
  EXPECT_EQ(Count(efficiency, "<polyline "), 1u);
  EXPECT_EQ(Count(efficiency, "<text "), 3u);
  for (const char* label : {">100.0%</text>", ">91.0%</text>", ">83.0%</text>"}) {
    EXPECT_NE(efficiency.find(label), std::string::npos) << label;
  }
  const std::string throughput = Group(svg, "throughput-measured");
  EXPECT_EQ(Count(throughput, "<circle "), 3u);
  EXPECT_EQ(Count(throughput, "<text "), 3u);
  for (const char* label : {">1000</text>", ">1820</text>", ">3320</text>"}) {
    EXPECT_NE(throughput.find(label), std::string::npos) << label;
  }
  EXPECT_NE(throughput.find("<title>2 ranks: 1820 samples/s (runs/ws2)</title>"), std::string::npos);
  // The ideal: a horizontal dashed line at 100% on the left, a dashed polyline on the right.
  EXPECT_EQ(Count(Group(svg, "efficiency-ideal"), "stroke=\"#57606a\" stroke-width=\"1.5\" stroke-dasharray"), 1u);
  EXPECT_EQ(Count(Group(svg, "throughput-ideal"), "<polyline "), 1u);
}

TEST(ScalingPlotSvg, ProjectionIsDashedWithHollowMarkers) {
  const std::string svg = ScalingPlotSvg(WeakTable());
  for (const char* role : {"efficiency-projected", "throughput-projected"}) {
    const std::string projected = Group(svg, role);
    ASSERT_FALSE(projected.empty()) << role;
    EXPECT_EQ(Count(projected, "<polyline "), 1u) << role;
    EXPECT_EQ(Count(projected, "stroke=\"#f28e2b\" stroke-width=\"2.0\" stroke-dasharray"), 1u) << role;
    EXPECT_EQ(Count(projected, "<circle "), 2u) << role;
    EXPECT_EQ(Count(projected, "fill=\"#ffffff\" stroke=\"#f28e2b\""), 2u) << role;
    // From the last measured point (4 ranks) on: three points.
    const size_t points_at = projected.find("points=\"");
    ASSERT_NE(points_at, std::string::npos);
    const std::string points = projected.substr(points_at, projected.find('"', points_at + 8) - points_at);
    EXPECT_EQ(Count(points, ","), 3u) << points;
  }
  EXPECT_NE(Group(svg, "efficiency-projected").find(">74.0%</text>"), std::string::npos);
  EXPECT_NE(Group(svg, "efficiency-projected").find(">62.0%</text>"), std::string::npos);
  EXPECT_NE(Group(svg, "legend").find(">projected</text>"), std::string::npos);
}

TEST(ScalingPlotSvg, NoProjectionNoDashedProjection) {
  const std::string svg = ScalingPlotSvg(WeakTable(/*with_projection=*/false));
  EXPECT_EQ(MarkupProblem(svg), "");
  EXPECT_EQ(svg.find("-projected\""), std::string::npos);
  EXPECT_EQ(svg.find("#f28e2b"), std::string::npos);
  EXPECT_EQ(svg.find(">projected</text>"), std::string::npos);
  EXPECT_NE(svg.find(">no projection: needs runs at 3 world sizes</text>"), std::string::npos);
  // Dashes are left for the ideal only.
  EXPECT_EQ(Count(svg, "stroke-dasharray"), Count(svg, "stroke=\"#57606a\" stroke-width=\"1.5\" stroke-dasharray"));
  // The x axis ends at the largest measured size.
  EXPECT_EQ(svg.find(">16</text>"), std::string::npos);
}

// Whether `text` is well-formed UTF-8 (an XML document must be).
bool IsUtf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const auto lead = static_cast<unsigned char>(text[i]);
    const size_t length = lead < 0x80           ? 1
                          : (lead >> 5) == 0x6  ? 2
                          : (lead >> 4) == 0xe  ? 3
                          : (lead >> 3) == 0x1e ? 4
                                                : 0;
    if (length == 0 || i + length > text.size()) return false;
    for (size_t k = 1; k < length; ++k) {
      if ((static_cast<unsigned char>(text[i + k]) & 0xc0) != 0x80) return false;
    }
    i += length;
  }
  return true;
}

TEST(ScalingPlotSvg, LongProjectionNoteIsShortenedWholeCharacters) {
  ScalingTable table = WeakTable(/*with_projection=*/false);
  table.projection_note = "no projection: ";
  for (int i = 0; i < 200; ++i) table.projection_note += "é";
  const std::string svg = ScalingPlotSvg(table);
  EXPECT_TRUE(IsUtf8(svg));
  const size_t note = svg.find(">no projection: é");
  ASSERT_NE(note, std::string::npos);
  const std::string shown = svg.substr(note + 1, svg.find("</text>", note) - note - 1);
  EXPECT_TRUE(shown.ends_with("é...")) << shown;
  EXPECT_LT(shown.size(), table.projection_note.size());
}

TEST(ScalingPlotSvg, EscapesText) {
  ScalingTable table = WeakTable();
  table.points[1].run = "runs/<a&b>\"q'";
  const std::string svg = ScalingPlotSvg(table);
  EXPECT_EQ(MarkupProblem(svg), "");
  EXPECT_NE(svg.find("(runs/&lt;a&amp;b&gt;&quot;q&#39;)</title>"), std::string::npos);
  EXPECT_NE(svg.find("aria-label=\"scaling efficiency against world size, weak scaling\""), std::string::npos);
  EXPECT_EQ(svg.find("<a&b>"), std::string::npos);

  SvgCanvas canvas(100, 50, "a \"label\" & <more>");
  canvas.Text({1, 2}, "x < y & z > 'w'", PlotTextStyle{});
  canvas.BeginGroup("r&d");
  const std::string out = canvas.Finish();  // closes the group left open
  EXPECT_EQ(MarkupProblem(out), "");
  EXPECT_NE(out.find("aria-label=\"a &quot;label&quot; &amp; &lt;more&gt;\""), std::string::npos);
  EXPECT_NE(out.find(">x &lt; y &amp; z &gt; &#39;w&#39;</text>"), std::string::npos);
  EXPECT_NE(out.find("<g data-role=\"r&amp;d\">"), std::string::npos);
  EXPECT_EQ(format::HtmlEscape(std::string("a\x01z", 3)), "a?z");
}

TEST(ScalingPlotSvg, StepTimeWhenNoRunHasThroughput) {
  ScalingTable table = WeakTable();
  for (ScalingPoint& point : table.points) point.throughput = point.ideal_throughput = std::nullopt;
  for (ProjectedPoint& point : table.projection->points) point.throughput = std::nullopt;
  const std::string svg = ScalingPlotSvg(table);
  EXPECT_EQ(MarkupProblem(svg), "");
  EXPECT_EQ(svg.find(">Throughput</text>"), std::string::npos);
  EXPECT_NE(svg.find(">Median step time</text>"), std::string::npos);
  EXPECT_NE(svg.find("no batch size"), std::string::npos);
  EXPECT_NE(svg.find(">median step time (ms)</text>"), std::string::npos);
  const std::string measured = Group(svg, "step-time-measured");
  EXPECT_EQ(Count(measured, "<circle "), 3u);
  EXPECT_NE(measured.find(">70.3 ms</text>"), std::string::npos);
  EXPECT_NE(measured.find("<title>2 ranks: 70.3 ms (runs/ws2)</title>"), std::string::npos);
  EXPECT_NE(Group(svg, "step-time-projected").find("<title>8 ranks: 86.5 ms, projected</title>"), std::string::npos);
  EXPECT_EQ(Count(Group(svg, "step-time-projected"), "<circle "), 2u);
  // Ideal step time T·E: 64 ms at every size in weak scaling, so a flat polyline.
  EXPECT_EQ(Count(Group(svg, "step-time-ideal"), "<polyline "), 1u);
}

TEST(ScalingPlotSvg, SkipsMissingAndNonFiniteValues) {
  ScalingTable table;
  table.points = {Point(1, 1.0, 1000, 1000, 64), Point(2, std::nullopt, std::nullopt, 2000, 70),
                  Point(4, std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(), 4000, 77),
                  Point(8, 0.8, 6400, 8000, 80)};
  ScalingProjection projection;
  projection.points = {{16, 90e6, std::numeric_limits<double>::quiet_NaN(), std::nullopt}, {32, 100e6, 0.6, 19200.0}};
  table.projection = projection;
  const std::string svg = ScalingPlotSvg(table);
  EXPECT_EQ(MarkupProblem(svg), "");
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(svg.find("inf"), std::string::npos);
  EXPECT_EQ(Count(Group(svg, "efficiency-measured"), "<circle "), 2u);
  EXPECT_EQ(Count(Group(svg, "throughput-measured"), "<circle "), 2u);
  EXPECT_EQ(Count(Group(svg, "efficiency-projected"), "<circle "), 1u);
  EXPECT_EQ(Count(Group(svg, "throughput-projected"), "<circle "), 1u);
  // Still a tick for each world size present.
  for (const int size : {1, 2, 4, 8, 16, 32}) {
    EXPECT_NE(svg.find(fmt::format(">{}</text>", size)), std::string::npos) << size;
  }
}

TEST(ScalingPlotSvg, SinglePoint) {
  ScalingTable table;
  table.points = {Point(4, 1.0, 4000, 4000, 64)};
  const std::string svg = ScalingPlotSvg(table);
  EXPECT_EQ(MarkupProblem(svg), "");
  const std::string measured = Group(svg, "efficiency-measured");
  EXPECT_EQ(Count(measured, "<circle "), 1u);
  EXPECT_EQ(Count(measured, "<polyline "), 0u);
  EXPECT_NE(measured.find(">100.0%</text>"), std::string::npos);
}

TEST(ScalingPlotSvg, EmptyTable) {
  const std::string svg = ScalingPlotSvg(ScalingTable{});
  EXPECT_EQ(MarkupProblem(svg), "");
  EXPECT_EQ(Count(svg, ">no values to plot</text>"), 2u);
  EXPECT_EQ(svg.find("<circle cx=\"0"), std::string::npos);
}

// The markers' centres in a group, in order.
std::vector<PlotPoint> MarkerCentres(const std::string& group) {
  std::vector<PlotPoint> centres;
  constexpr std::string_view kOpen = "<circle cx=\"";
  for (size_t at = group.find(kOpen); at != std::string::npos; at = group.find(kOpen, at + 1)) {
    PlotPoint centre;
    const bool parsed = std::sscanf(group.c_str() + at, "<circle cx=\"%lf\" cy=\"%lf\"", &centre.x, &centre.y) == 2;
    EXPECT_TRUE(parsed) << group.substr(at, 40);
    if (parsed) centres.push_back(centre);
  }
  return centres;
}

TEST(ScalingPlotSvg, SuperlinearEfficiencyStaysInsideThePlot) {
  ScalingTable table;
  table.points = {Point(1, 1.0, 1000, 1000, 64), Point(2, 1.25, 2500, 2000, 51)};
  const std::string svg = ScalingPlotSvg(table);
  const std::string measured = Group(svg, "efficiency-measured");
  EXPECT_NE(measured.find(">125.0%</text>"), std::string::npos);
  EXPECT_NE(svg.find(">150</text>"), std::string::npos);  // y axis up to the next nice tick
  for (const PlotPoint& centre : MarkerCentres(measured)) {
    EXPECT_GT(centre.y, 64.0);
    EXPECT_LT(centre.y, 312.0);
  }
}

TEST(ScalingPlotSvg, LogScaleFromAFactorOfEight) {
  ScalingTable doubling;
  doubling.points = {Point(1, 1, 100, 100, 1), Point(2, 1, 200, 200, 1), Point(4, 1, 400, 400, 1),
                     Point(8, 1, 800, 800, 1)};
  const std::vector<PlotPoint> log = MarkerCentres(Group(ScalingPlotSvg(doubling), "efficiency-measured"));
  ASSERT_EQ(log.size(), 4u);
  EXPECT_NEAR(log[1].x - log[0].x, log[3].x - log[2].x, 0.2);

  ScalingTable narrow;
  narrow.points = {Point(4, 1, 100, 100, 1), Point(6, 1, 150, 150, 1), Point(12, 1, 300, 300, 1)};
  const std::vector<PlotPoint> linear = MarkerCentres(Group(ScalingPlotSvg(narrow), "efficiency-measured"));
  ASSERT_EQ(linear.size(), 3u);
  EXPECT_NEAR((linear[2].x - linear[1].x) / (linear[1].x - linear[0].x), 3.0, 0.01);
}

// --- PNG ---

class ScalingPlotPngTest : public ::testing::Test {
 protected:
  std::vector<std::string> FileNames() const {
    std::vector<std::string> names;
    for (const fs::directory_entry& entry : fs::directory_iterator(directory_.path())) {
      names.push_back(entry.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  }

  rankscope::testing::TempDir directory_;
};

std::string ReadFile(const fs::path& path) {
  std::string bytes;
  if (std::FILE* file = std::fopen(path.c_str(), "rb")) {
    char buffer[4096];
    for (size_t read; (read = std::fread(buffer, 1, sizeof buffer, file)) > 0;) bytes.append(buffer, read);
    std::fclose(file);
  }
  return bytes;
}

uint32_t BigEndian32(std::string_view bytes, size_t at) {
  uint32_t value = 0;
  for (size_t i = 0; i < 4; ++i) value = (value << 8) | static_cast<unsigned char>(bytes[at + i]);
  return value;
}

struct PixelCounts {
  int non_white = 0;
  int measured_colour = 0;  // within a few levels of #4e79a7
};

// Counts pixels of the PNG in columns [left, right) and rows [top, bottom).
PixelCounts CountPixels(const fs::path& png, int left, int right, int top, int bottom) {
  PixelCounts counts;
  cairo_surface_t* surface = cairo_image_surface_create_from_png(png.c_str());
  EXPECT_EQ(cairo_surface_status(surface), CAIRO_STATUS_SUCCESS);
  if (cairo_surface_status(surface) == CAIRO_STATUS_SUCCESS) {
    cairo_surface_flush(surface);
    const unsigned char* data = cairo_image_surface_get_data(surface);
    const int stride = cairo_image_surface_get_stride(surface);
    for (int y = top; y < bottom; ++y) {
      for (int x = left; x < right; ++x) {
        uint32_t pixel;  // ARGB in native byte order; opaque, so not premultiplied
        std::memcpy(&pixel, data + static_cast<ptrdiff_t>(y) * stride + 4 * x, sizeof pixel);
        const int red = (pixel >> 16) & 0xff, green = (pixel >> 8) & 0xff, blue = pixel & 0xff;
        if ((pixel & 0xffffff) != 0xffffff) ++counts.non_white;
        if (std::abs(red - 0x4e) <= 6 && std::abs(green - 0x79) <= 6 && std::abs(blue - 0xa7) <= 6) {
          ++counts.measured_colour;
        }
      }
    }
  }
  cairo_surface_destroy(surface);
  return counts;
}

TEST_F(ScalingPlotPngTest, WritesAPngOfTheDeclaredSize) {
  const fs::path png = directory_.path() / "scaling.png";
  const Status status = WriteScalingPlotPng(WeakTable(), png);
  ASSERT_TRUE(status.ok()) << status.ToString();
  EXPECT_EQ(FileNames(), std::vector<std::string>{"scaling.png"});  // no temporary left

  const std::string bytes = ReadFile(png);
  ASSERT_GE(bytes.size(), 33u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_EQ(bytes.substr(12, 4), "IHDR");
  EXPECT_EQ(BigEndian32(bytes, 16), static_cast<uint32_t>(kScalingPlotWidth));
  EXPECT_EQ(BigEndian32(bytes, 20), static_cast<uint32_t>(kScalingPlotHeight));

  // Both panels' plot areas have the measured series drawn in them.
  const int half = kScalingPlotWidth / 2;
  for (const int left : {0, half}) {
    const PixelCounts counts = CountPixels(png, left + 70, left + half - 20, 66, 310);
    EXPECT_GT(counts.non_white, 500) << left;
    EXPECT_GT(counts.measured_colour, 50) << left;
  }
  // The margin right of the last panel's plot stays blank.
  EXPECT_EQ(CountPixels(png, kScalingPlotWidth - 8, kScalingPlotWidth, 0, kScalingPlotHeight).non_white, 0);
}

TEST_F(ScalingPlotPngTest, ReplacesAnExistingFile) {
  const fs::path png = directory_.path() / "scaling.png";
  std::ofstream(png) << "old";
  ASSERT_TRUE(WriteScalingPlotPng(WeakTable(/*with_projection=*/false), png).ok());
  EXPECT_TRUE(ReadFile(png).starts_with("\x89PNG"));
  EXPECT_EQ(FileNames(), std::vector<std::string>{"scaling.png"});
}

TEST_F(ScalingPlotPngTest, MissingDirectoryIsAnIoErrorAndWritesNothing) {
  const fs::path png = directory_.path() / "missing" / "scaling.png";
  const Status status = WriteScalingPlotPng(WeakTable(), png);
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(status.code(), StatusCode::kIo);
  EXPECT_EQ(status.message(), fmt::format("cannot write {}: No such file or directory", png.string()));
  EXPECT_FALSE(fs::exists(png));
  EXPECT_TRUE(FileNames().empty());
}

TEST_F(ScalingPlotPngTest, FailureToWriteTheTemporaryLeavesTheFileIntact) {
  const fs::path png = directory_.path() / "scaling.png";
  std::ofstream(png) << "earlier plot";
  // A directory where the temporary goes makes opening it fail.
  const fs::path blocker = png.string() + fmt::format(".tmp-{}", ::getpid());
  fs::create_directory(blocker);
  const Status status = WriteScalingPlotPng(WeakTable(), png);
  EXPECT_EQ(status.code(), StatusCode::kIo);
  EXPECT_TRUE(status.message().starts_with(fmt::format("cannot write {}: ", png.string()))) << status.message();
  EXPECT_EQ(ReadFile(png), "earlier plot");
  EXPECT_TRUE(fs::is_directory(blocker));  // not ours to remove
}

TEST_F(ScalingPlotPngTest, FailureToRenameRemovesTheTemporary) {
  // A non-empty directory at the path: the PNG is written, but cannot replace it.
  const fs::path png = directory_.path() / "scaling.png";
  fs::create_directories(png / "inside");
  const Status status = WriteScalingPlotPng(WeakTable(), png);
  EXPECT_EQ(status.code(), StatusCode::kIo);
  EXPECT_TRUE(status.message().starts_with(fmt::format("cannot write {}: ", png.string()))) << status.message();
  EXPECT_EQ(FileNames(), std::vector<std::string>{"scaling.png"});
  EXPECT_TRUE(fs::is_directory(png / "inside"));
}

// --- the canvas's other shapes and building blocks (the HTML report's charts) ---

TEST(SvgCanvas, ShapesCarryTooltipsWhenGiven) {
  SvgCanvas canvas(100, 50, "shapes");
  const std::vector<PlotPoint> line = {{0, 0}, {10, 5}, {20, 0}};
  canvas.Polyline(line, PlotStroke{{1, 2, 3}, 1.2}, "rank <1>");
  canvas.Polyline(line, PlotStroke{}, "");
  canvas.Rect({1, 2}, 3, 4, PlotShapeStyle{PlotColor{0xe1, 0x57, 0x59}, std::nullopt}, "comm & wait");
  canvas.Rect({1, 2}, 3, 4, PlotShapeStyle{}, "");
  canvas.Rect({1, 2}, 0, 4, PlotShapeStyle{}, "no width");
  canvas.Rect({1, 2}, 3, std::nan(""), PlotShapeStyle{}, "no height");
  const std::string svg = canvas.Finish();
  EXPECT_EQ(MarkupProblem(svg), "");
  EXPECT_NE(svg.find("<polyline points=\"0.0,0.0 10.0,5.0 20.0,0.0\" fill=\"none\" stroke=\"#010203\" "
                     "stroke-width=\"1.2\"><title>rank &lt;1&gt;</title></polyline>"),
            std::string::npos)
      << svg;
  EXPECT_NE(svg.find("<rect x=\"1.0\" y=\"2.0\" width=\"3.0\" height=\"4.0\" fill=\"#e15759\"><title>comm &amp; "
                     "wait</title></rect>"),
            std::string::npos)
      << svg;
  EXPECT_EQ(Count(svg, "<polyline "), 2u);
  EXPECT_EQ(Count(svg, "<rect "), 2u);  // the empty ones are left out
  EXPECT_EQ(Count(svg, "<title>"), 2u);
}

TEST(SvgCanvas, GradientRectDefinesItsScaleOnce) {
  SvgCanvas canvas(300, 40, "scale");
  const std::vector<PlotColor> colors = {{0xff, 0xff, 0xcc}, {0xfd, 0x8d, 0x3c}, {0x80, 0x00, 0x26}};
  canvas.GradientRect({10, 5}, 200, 10, colors, PlotStroke{{0x57, 0x60, 0x6a}, 1}, "0 to 10.0 ms");
  canvas.GradientRect({10, 5}, 200, 10, std::span(colors).first(1), std::nullopt, "one colour is no scale");
  canvas.GradientRect({10, 5}, -1, 10, colors, std::nullopt, "no width");
  const std::string svg = canvas.Finish();
  EXPECT_EQ(MarkupProblem(svg), "");
  EXPECT_EQ(Count(svg, "<linearGradient "), 1u);
  EXPECT_EQ(Count(svg, "<rect "), 1u);
  const std::string id = "rankscope-scale-ffffcc-fd8d3c-800026";
  EXPECT_NE(svg.find("<linearGradient id=\"" + id + "\" x1=\"0\" x2=\"1\" y1=\"0\" y2=\"0\">"
                     "<stop offset=\"0.000\" stop-color=\"#ffffcc\"/><stop offset=\"0.500\" stop-color=\"#fd8d3c\"/>"
                     "<stop offset=\"1.000\" stop-color=\"#800026\"/></linearGradient>"),
            std::string::npos)
      << svg;
  EXPECT_NE(svg.find("fill=\"url(#" + id + ")\" stroke=\"#57606a\" stroke-width=\"1.0\"><title>0 to 10.0 ms</title>"),
            std::string::npos)
      << svg;
}

TEST(PlotColorFromHsl, MatchesCss) {
  EXPECT_EQ(PlotColorHex(PlotColorFromHsl(0, 1, 0.5)), "#ff0000");
  EXPECT_EQ(PlotColorHex(PlotColorFromHsl(120, 1, 0.25)), "#008000");
  EXPECT_EQ(PlotColorHex(PlotColorFromHsl(240, 1, 0.5)), "#0000ff");
  EXPECT_EQ(PlotColorHex(PlotColorFromHsl(600, 1, 0.5)), "#0000ff");  // hues wrap
  EXPECT_EQ(PlotColorHex(PlotColorFromHsl(-120, 1, 0.5)), "#0000ff");
  EXPECT_EQ(PlotColorHex(PlotColorFromHsl(77, 0, 0.5)), "#808080");   // no saturation: grey
  EXPECT_EQ(PlotColorHex(PlotColorFromHsl(30, 0.65, 0.45)), "#bd7328");  // the report's 12th series
  EXPECT_EQ(PlotColorHex(PlotColorFromHsl(std::nan(""), 2, -1)), "#000000");
}

// The rectangles' x and width, in order, from an SVG.
std::vector<std::pair<double, double>> RectSpans(const std::string& svg) {
  std::vector<std::pair<double, double>> spans;
  constexpr std::string_view kOpen = "<rect x=\"";
  for (size_t at = svg.find(kOpen); at != std::string::npos; at = svg.find(kOpen, at + 1)) {
    double x = 0, y = 0, width = 0;
    if (std::sscanf(svg.c_str() + at, "<rect x=\"%lf\" y=\"%lf\" width=\"%lf\"", &x, &y, &width) == 3) {
      spans.emplace_back(x, width);
    }
  }
  return spans;
}

TEST(HorizontalStackedBars, SegmentsAreSharesOfTheBarLaidEndToEnd) {
  const PlotColor blue{0x4e, 0x79, 0xa7}, red{0xe1, 0x57, 0x59}, grey{0xd0, 0xd7, 0xde};
  std::vector<HorizontalBar> bars(3);
  bars[0] = {"rank 0", 100, {{50, blue, "compute"}, {0, red, "comm"}, {25, grey, "idle"}}, ""};
  bars[1] = {"rank 1", 100, {{80, blue, "compute"}, {60, red, "too much"}}, ""};  // past the end: cut
  bars[2] = {"rank 2", 0, {{10, blue, "never drawn"}}, "no activity"};
  PlotTextStyle labels;
  labels.size = 8;
  SvgCanvas canvas(400, 100, "bars");
  DrawHorizontalStackedBars(canvas, bars, {.plot_left = 100, .plot_top = 10, .plot_width = 200, .row_height = 20,
                                           .bar_height = 16, .label_style = labels});
  const std::string svg = canvas.Finish();
  EXPECT_EQ(MarkupProblem(svg), "");
  const std::vector<std::pair<double, double>> expected = {{100, 100}, {200, 50}, {100, 160}, {260, 40}};
  EXPECT_EQ(RectSpans(svg), expected) << svg;
  EXPECT_EQ(svg.find("never drawn"), std::string::npos);
  EXPECT_NE(svg.find("<title>too much</title>"), std::string::npos);
  // Labels end left of the bars, one row apart, at the style's size; the empty bar says why.
  // (bar top 12 = 10 + (20 - 16) / 2; baseline 12 + 16 / 2 + 0.36 * 8 = 22.88)
  EXPECT_NE(svg.find("<text x=\"94.0\" y=\"22.9\" text-anchor=\"end\""), std::string::npos) << svg;
  EXPECT_NE(svg.find("<text x=\"94.0\" y=\"42.9\" text-anchor=\"end\""), std::string::npos) << svg;
  EXPECT_NE(svg.find("font-size:8.0px"), std::string::npos);
  EXPECT_NE(svg.find("text-anchor=\"start\" style=\"font-family:&#39;DejaVu Sans&#39;,sans-serif;font-size:8.0px;"
                     "fill:#000000\">no activity</text>"),
            std::string::npos)
      << svg;
  // The second bar one row below the first.
  EXPECT_NE(svg.find("<rect x=\"100.0\" y=\"32.0\" width=\"160.0\" height=\"16.0\" fill=\"#4e79a7\">"),
            std::string::npos)
      << svg;
}

TEST(SwatchLegend, RowsOfEntriesAcrossTheWidth) {
  EXPECT_EQ(SwatchLegendHeight(0, 600), 0);
  EXPECT_EQ(SwatchLegendHeight(4, 600), 16);  // four 150-px entries in one row
  EXPECT_EQ(SwatchLegendHeight(5, 600), 32);
  EXPECT_EQ(SwatchLegendHeight(3, 10), 48);   // narrower than an entry: one per row
  const std::vector<SwatchLegendEntry> entries = {
      {"compute", {0x4e, 0x79, 0xa7}}, {"warm-up", {0x57, 0x60, 0x6a}, true}, {"idle", {0xd0, 0xd7, 0xde}}};
  SvgCanvas canvas(400, 100, "legend");
  DrawSwatchLegend(canvas, entries, {20, 30}, 300, PlotTextStyle{});
  const std::string svg = canvas.Finish();
  EXPECT_EQ(MarkupProblem(svg), "");
  const std::string legend = Group(svg, "legend");
  EXPECT_NE(legend.find("<rect x=\"20.0\" y=\"30.0\" width=\"10.0\" height=\"10.0\" fill=\"#4e79a7\" stroke=\"#4e79a7\""),
            std::string::npos)
      << legend;
  // Hollow: white inside its colour's outline.
  EXPECT_NE(legend.find("<rect x=\"170.0\" y=\"30.0\" width=\"10.0\" height=\"10.0\" fill=\"#ffffff\" stroke=\"#57606a\""),
            std::string::npos)
      << legend;
  // Two entries of 150 px fit in 300 px: the third starts the next row.
  EXPECT_NE(legend.find("<rect x=\"20.0\" y=\"46.0\""), std::string::npos) << legend;
  EXPECT_NE(legend.find(">warm-up</text>"), std::string::npos);
}

TEST(EstimatedTextWidth, CountsCharactersNotBytes) {
  EXPECT_DOUBLE_EQ(EstimatedTextWidth("abcd", 10), 24);
  EXPECT_DOUBLE_EQ(EstimatedTextWidth("é", 10), 6);  // two bytes, one character
  EXPECT_DOUBLE_EQ(EstimatedTextWidth("ab", 10, /*bold=*/true), 13.2);
}

TEST(CairoCanvas, GradientRectRunsFromTheFirstColourToTheLast) {
  Result<std::unique_ptr<CairoCanvas>> canvas = CairoCanvas::Create(120, 20);
  ASSERT_TRUE(canvas.ok());
  const std::vector<PlotColor> colors = {{0xff, 0x00, 0x00}, {0x00, 0x00, 0xff}};
  (*canvas)->GradientRect({10, 5}, 100, 10, colors, std::nullopt, "");
  const rankscope::testing::TempDir directory;
  const fs::path png = directory.path() / "gradient.png";
  ASSERT_TRUE((*canvas)->WritePng(png).ok());
  cairo_surface_t* surface = cairo_image_surface_create_from_png(png.c_str());
  ASSERT_EQ(cairo_surface_status(surface), CAIRO_STATUS_SUCCESS);
  cairo_surface_flush(surface);
  auto pixel = [&](int x, int y) {
    uint32_t value;
    std::memcpy(&value, cairo_image_surface_get_data(surface) + static_cast<ptrdiff_t>(y) * cairo_image_surface_get_stride(surface) + 4 * x,
                sizeof value);
    return value & 0xffffff;
  };
  const uint32_t left = pixel(11, 10), middle = pixel(60, 10), right = pixel(108, 10);
  EXPECT_GT((left >> 16) & 0xff, 0xf0u);  // red
  EXPECT_LT(left & 0xff, 0x10u);
  EXPECT_LT((right >> 16) & 0xff, 0x10u);  // blue
  EXPECT_GT(right & 0xff, 0xf0u);
  EXPECT_NEAR(static_cast<double>((middle >> 16) & 0xff), 128, 12);  // half way: purple
  EXPECT_NEAR(static_cast<double>(middle & 0xff), 128, 12);
  EXPECT_EQ(pixel(5, 10), 0xffffffu);  // outside: still white
  cairo_surface_destroy(surface);
}

TEST(CairoCanvas, RejectsSizesCairoCannotMake) {
  EXPECT_EQ(CairoCanvas::Create(0, 10).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CairoCanvas::Create(10, 40000).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(CairoCanvas::Create(1, 1).ok());
}

TEST(CairoCanvas, InvalidUtf8AndNonFiniteInputsDoNotBreakThePicture) {
  Result<std::unique_ptr<CairoCanvas>> canvas = CairoCanvas::Create(40, 20);
  ASSERT_TRUE(canvas.ok());
  (*canvas)->Text({2, 12}, "bad \xff\xfe byte", PlotTextStyle{});
  (*canvas)->Text({2, 12}, "overlong \xc0\xaf, surrogate \xed\xa0\x80, cut \xe2\x82", PlotTextStyle{});
  (*canvas)->Text({2, 12}, std::string("nul \0 inside", 13), PlotTextStyle{});
  (*canvas)->Line({0, std::nan("")}, {10, 10}, PlotStroke{});
  (*canvas)->Circle({5, 5}, std::numeric_limits<double>::infinity(), PlotShapeStyle{}, "");
  const rankscope::testing::TempDir directory;
  const Status written = (*canvas)->WritePng(directory.path() / "canvas.png");
  EXPECT_TRUE(written.ok()) << written.ToString();
}

}  // namespace
}  // namespace rankscope::report
