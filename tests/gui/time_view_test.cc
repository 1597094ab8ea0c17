// gui/core/time_view.h: time <-> pixel mapping, zoom, pan, clamping, the zoom history,
// axis ticks (in base/format.h's unit names) and relative-range parsing.
#include "gui/core/time_view.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/format.h"

namespace rankscope::gui {
namespace {

constexpr int64_t kUs = 1000;
constexpr int64_t kMs = 1000 * kUs;
constexpr int64_t kS = 1000 * kMs;

// ---- TimeView: mapping ------------------------------------------------------------------

TEST(TimeView, MapsTimeToPixelsLinearly) {
  const TimeView view(1000, 2000, 100);
  EXPECT_EQ(view.start_ns(), 1000);
  EXPECT_EQ(view.end_ns(), 2000);
  EXPECT_EQ(view.duration_ns(), 1000);
  EXPECT_DOUBLE_EQ(view.width_px(), 100);
  EXPECT_DOUBLE_EQ(view.NsPerPixel(), 10.0);  // 1000 ns / 100 px
  EXPECT_DOUBLE_EQ(view.ToX(1000), 0.0);
  EXPECT_DOUBLE_EQ(view.ToX(1500), 50.0);     // (1500 - 1000) / 10
  EXPECT_DOUBLE_EQ(view.ToX(2000), 100.0);
  EXPECT_DOUBLE_EQ(view.ToX(900), -10.0);     // outside the view the map is still linear
  EXPECT_EQ(view.ToTime(0), 1000);
  EXPECT_EQ(view.ToTime(50), 1500);           // 1000 + 50 · 10
  EXPECT_EQ(view.ToTime(100), 2000);
  EXPECT_EQ(view.ToTime(12.5), 1125);         // 1000 + 12.5 · 10
}

TEST(TimeView, ToTimeInvertsToXWithinOneNanosecond) {
  const int64_t start = 123'456'789;
  const TimeView view(start, start + 7'777'777, 1333);
  for (int64_t t = start; t <= view.end_ns(); t += 12'345) {
    EXPECT_LE(std::llabs(view.ToTime(view.ToX(t)) - t), 1) << t;
  }
  for (double x = 0; x <= 1333; x += 7.25) {
    EXPECT_NEAR(view.ToX(view.ToTime(x)), x, 1.0 / view.NsPerPixel() + 1e-9) << x;
  }
}

TEST(TimeView, SetWidthKeepsTheRangeAndRescales) {
  TimeView view(0, 1'000'000, 1000);
  view.SetWidth(500);
  EXPECT_EQ(view.start_ns(), 0);
  EXPECT_EQ(view.end_ns(), 1'000'000);
  EXPECT_DOUBLE_EQ(view.NsPerPixel(), 2000.0);  // 1e6 ns / 500 px
  EXPECT_DOUBLE_EQ(view.ToX(500'000), 250.0);
}

TEST(TimeView, SetRangeKeepsRangesOfAtLeastTheMinimumDuration) {
  TimeView view(0, 1000, 100);
  view.SetRange(5000, 5100);  // exactly kMinDurationNs: kept as is
  EXPECT_EQ(view.start_ns(), 5000);
  EXPECT_EQ(view.end_ns(), 5100);
  view.SetRange(-300, 900);
  EXPECT_EQ(view.start_ns(), -300);
  EXPECT_EQ(view.end_ns(), 900);
}

TEST(TimeView, SetRangeWidensNarrowRangesToTheMinimumDuration) {
  static_assert(TimeView::kMinDurationNs == 100);
  TimeView view(0, 1000, 100);
  view.SetRange(5000, 5020);  // 20 ns: widened to 100 ns around it
  EXPECT_EQ(view.duration_ns(), TimeView::kMinDurationNs);
  EXPECT_LE(view.start_ns(), 5000);
  EXPECT_GE(view.end_ns(), 5020);
  view.SetRange(7000, 7000);  // empty
  EXPECT_EQ(view.duration_ns(), TimeView::kMinDurationNs);
  EXPECT_LE(view.start_ns(), 7000);
  EXPECT_GE(view.end_ns(), 7000);
}

TEST(TimeView, EqualityComparesRangeAndWidth) {
  EXPECT_EQ(TimeView(0, 1000, 100), TimeView(0, 1000, 100));
  EXPECT_NE(TimeView(0, 1000, 100), TimeView(0, 1000, 200));
  EXPECT_NE(TimeView(0, 1000, 100), TimeView(1, 1000, 100));
}

// ---- TimeView: zoom, pan, clamp -----------------------------------------------------------

TEST(TimeView, ZoomByTwoHalvesTheDurationAroundTheCursor) {
  TimeView view(0, 1'000'000, 1000);
  view.ZoomAt(250, 2.0);
  // The time under x = 250 is 250 µs; the new duration 500 µs puts 250 px · 500 ns/px =
  // 125 µs before it: [125 µs, 625 µs).
  EXPECT_NEAR(static_cast<double>(view.start_ns()), 125'000, 1);
  EXPECT_NEAR(static_cast<double>(view.end_ns()), 625'000, 1);
  EXPECT_NEAR(static_cast<double>(view.duration_ns()), 500'000, 1);
  EXPECT_NEAR(static_cast<double>(view.ToTime(250)), 250'000, 1);
  EXPECT_DOUBLE_EQ(view.width_px(), 1000);

  // And back out: factor 0.5 doubles it again, still around the cursor.
  view.ZoomAt(250, 0.5);
  EXPECT_NEAR(static_cast<double>(view.start_ns()), 0, 2);
  EXPECT_NEAR(static_cast<double>(view.end_ns()), 1'000'000, 2);
}

TEST(TimeView, ZoomAtKeepsTheTimeUnderTheCursorFixed) {
  const std::vector<double> factors = {2.0, 0.5, 1.25, 0.8, 10.0, 0.1, 3.7};
  const std::vector<double> cursors = {0.0, 1.0, 123.4, 500.0, 777.7, 999.0, 1000.0};
  for (double factor : factors) {
    for (double x : cursors) {
      TimeView view(1'000'000'000, 1'000'000'000 + 40 * kMs, 1000);
      const int64_t before = view.ToTime(x);
      const double duration = static_cast<double>(view.duration_ns());
      view.ZoomAt(x, factor);
      EXPECT_LE(std::llabs(view.ToTime(x) - before), 1) << "factor " << factor << " x " << x;
      EXPECT_NEAR(static_cast<double>(view.duration_ns()), duration / factor, 1.0)
          << "factor " << factor << " x " << x;
    }
  }
}

TEST(TimeView, RepeatedZoomStopsAtTheMinimumDuration) {
  TimeView view(0, 10 * kUs, 1000);
  const int64_t under_cursor = view.ToTime(400);  // 4 µs
  for (int i = 0; i < 20; ++i) view.ZoomAt(400, 2.0);  // 10 µs / 2^20 would be ~0.01 ns
  EXPECT_GE(view.duration_ns(), TimeView::kMinDurationNs);
  EXPECT_LE(view.duration_ns(), TimeView::kMinDurationNs + 1);
  // The clamped range still holds the time that was under the cursor.
  EXPECT_LE(view.start_ns(), under_cursor);
  EXPECT_GE(view.end_ns(), under_cursor);
}

TEST(TimeView, PanPixelsMovesByDxTimesNsPerPixel) {
  TimeView view(0, 1'000'000, 1000);  // 1000 ns per pixel
  view.PanPixels(100);                // +100 px · 1000 ns = +100 µs
  EXPECT_EQ(view.start_ns(), 100'000);
  EXPECT_EQ(view.end_ns(), 1'100'000);
  view.PanPixels(-250);               // -250 µs
  EXPECT_EQ(view.start_ns(), -150'000);
  EXPECT_EQ(view.end_ns(), 850'000);
  view.PanPixels(0.5);                // half a pixel: +500 ns
  EXPECT_EQ(view.start_ns(), -149'500);
  EXPECT_EQ(view.end_ns(), 850'500);
  EXPECT_EQ(view.duration_ns(), 1'000'000);
}

TEST(TimeView, ClampToMovesAViewThatFitsBackInside) {
  TimeView before(-500, 500, 100);
  before.ClampTo(0, 10'000);
  EXPECT_EQ(before.start_ns(), 0);   // shifted right by 500, duration kept
  EXPECT_EQ(before.end_ns(), 1000);

  TimeView after(9'500, 10'500, 100);
  after.ClampTo(0, 10'000);
  EXPECT_EQ(after.start_ns(), 9'000);  // shifted left by 500
  EXPECT_EQ(after.end_ns(), 10'000);

  TimeView inside(2'000, 3'000, 100);
  inside.ClampTo(0, 10'000);
  EXPECT_EQ(inside, TimeView(2'000, 3'000, 100));
}

TEST(TimeView, ClampToShowsAllOfARangeNarrowerThanTheView) {
  TimeView wide(-100, 20'000, 100);
  wide.ClampTo(0, 10'000);
  EXPECT_EQ(wide.start_ns(), 0);
  EXPECT_EQ(wide.end_ns(), 10'000);

  TimeView elsewhere(50'000, 80'000, 100);
  elsewhere.ClampTo(0, 10'000);
  EXPECT_EQ(elsewhere.start_ns(), 0);
  EXPECT_EQ(elsewhere.end_ns(), 10'000);
}

// ---- ZoomHistory --------------------------------------------------------------------------

TEST(ZoomHistory, PopsTheMostRecentRangeFirst) {
  ZoomHistory history;
  EXPECT_TRUE(history.empty());
  EXPECT_EQ(history.Pop(), std::nullopt);
  history.Push(0, 100);
  history.Push(10, 50);
  history.Push(20, 30);
  EXPECT_EQ(history.size(), 3u);
  EXPECT_EQ(history.Pop(), std::make_optional(std::make_pair(int64_t{20}, int64_t{30})));
  EXPECT_EQ(history.Pop(), std::make_optional(std::make_pair(int64_t{10}, int64_t{50})));
  history.Push(1, 2);
  EXPECT_EQ(history.Pop(), std::make_optional(std::make_pair(int64_t{1}, int64_t{2})));
  EXPECT_EQ(history.Pop(), std::make_optional(std::make_pair(int64_t{0}, int64_t{100})));
  EXPECT_TRUE(history.empty());
  EXPECT_EQ(history.Pop(), std::nullopt);
}

TEST(ZoomHistory, KeepsOnlyTheNewest256Ranges) {
  ZoomHistory history;
  for (int64_t i = 0; i < 300; ++i) history.Push(i, i + 1);
  EXPECT_EQ(history.size(), 256u);
  // The newest 256 are 299 down to 44 (300 - 256); the oldest 44 were forgotten.
  for (int64_t i = 299; i >= 44; --i) {
    const auto popped = history.Pop();
    ASSERT_TRUE(popped.has_value()) << i;
    EXPECT_EQ(popped->first, i);
    EXPECT_EQ(popped->second, i + 1);
  }
  EXPECT_EQ(history.Pop(), std::nullopt);
}

// ---- Ticks --------------------------------------------------------------------------------

bool IsOneTwoFiveStep(int64_t step) {
  if (step <= 0) return false;
  while (step % 10 == 0) step /= 10;
  return step == 1 || step == 2 || step == 5;
}

// The 1-2-5 step below `step`: 1 → 0 (none), 2 → 1, 5 → 2, 10 → 5, 20 → 10, ...
int64_t PreviousStep(int64_t step) {
  int64_t scale = 1;
  while (step % 10 == 0 && step > 1) {
    step /= 10;
    scale *= 10;
  }
  if (step == 1) return scale == 1 ? 0 : 5 * scale / 10;
  if (step == 2) return scale;
  return 2 * scale;  // step == 5
}

TEST(TickStepNs, PicksTheSmallestOneTwoFiveStepAtLeastMinSpacingApart) {
  EXPECT_EQ(TickStepNs(1000, 80), 100'000);       // 50 µs would be 50 px < 80; 100 µs is 100 px
  EXPECT_EQ(TickStepNs(1000, 50), 50'000);        // 50 µs is exactly 50 px: "at least" admits it
  EXPECT_EQ(TickStepNs(1000, 101), 200'000);      // 100 px < 101; 200 px
  EXPECT_EQ(TickStepNs(1000, 201), 500'000);      // 200 px < 201; 500 px
  EXPECT_EQ(TickStepNs(0.1, 80), 10);             // 5 ns = 50 px < 80; 10 ns = 100 px
  EXPECT_EQ(TickStepNs(0.01, 50), 1);             // 1 ns = 100 px: nothing smaller than 1 ns
  EXPECT_EQ(TickStepNs(3.7e6, 80), 500'000'000);  // 200 ms = 54 px < 80; 500 ms = 135 px
  EXPECT_EQ(TickStepNs(1e9, 100), 100 * kS);      // 50 s = 50 px < 100; 100 s = 100 px
}

TEST(TickStepNs, StepIsMinimalOverAWideSweep) {
  for (double exponent = -2; exponent <= 9.5; exponent += 0.05) {
    const double ns_per_px = std::pow(10.0, exponent);
    for (double min_spacing : {40.0, 75.0, 100.0}) {
      const int64_t step = TickStepNs(ns_per_px, min_spacing);
      ASSERT_TRUE(IsOneTwoFiveStep(step)) << step << " at " << ns_per_px << " ns/px";
      EXPECT_GE(static_cast<double>(step) / ns_per_px, min_spacing * (1 - 1e-9))
          << "step " << step << " at " << ns_per_px << " ns/px";
      const int64_t previous = PreviousStep(step);
      if (previous > 0) {
        EXPECT_LT(static_cast<double>(previous) / ns_per_px, min_spacing * (1 + 1e-9))
            << "step " << step << " is not the smallest at " << ns_per_px << " ns/px";
      }
    }
  }
}

// Reads a label back into nanoseconds: "0", or a number, one space and ns, us, ms or s (the
// reports' spelling: a "µs" label is unreadable here).
std::optional<double> LabelNs(const std::string& label) {
  if (label == "0") return 0.0;
  const size_t space = label.find(' ');
  if (space == std::string::npos) return std::nullopt;
  const std::string number = label.substr(0, space);
  const std::string unit = label.substr(space + 1);
  char* end = nullptr;
  const double value = std::strtod(number.c_str(), &end);
  if (end != number.c_str() + number.size()) return std::nullopt;
  if (unit == "ns") return value;
  if (unit == "us") return value * kUs;
  if (unit == "ms") return value * kMs;
  if (unit == "s") return value * kS;
  return std::nullopt;
}

TEST(FormatTickLabel, ShowsEveryMultipleOfTheStepExactly) {
  struct Case {
    int64_t step;
    int64_t multiples;
  };
  // Steps from 1 ns to 50 s; labels must carry enough decimals to name the offset exactly.
  const std::vector<Case> cases = {{1, 1500},     {2, 800},          {5, 500},           {20, 300},
                                   {500, 300},    {2 * kUs, 700},    {50 * kUs, 300},    {200 * kUs, 60},
                                   {kMs, 40},     {20 * kMs, 120},   {500 * kMs, 30},    {5 * kS, 20},
                                   {50 * kS, 5}};
  for (const Case& c : cases) {
    for (int64_t k = 0; k <= c.multiples; ++k) {
      const int64_t offset = k * c.step;
      const std::string label = FormatTickLabel(offset, c.step);
      const std::optional<double> ns = LabelNs(label);
      ASSERT_TRUE(ns.has_value()) << "unreadable label '" << label << "' for " << offset;
      // Exact to far below a nanosecond: the decimals the step needs are all there.
      EXPECT_NEAR(*ns, static_cast<double>(offset), 1e-3 + 1e-12 * static_cast<double>(offset))
          << "label '" << label << "' for offset " << offset << " step " << c.step;
    }
  }
  EXPECT_EQ(LabelNs(FormatTickLabel(0, 100 * kUs)), 0.0);
}

TEST(ComputeTicks, TicksAtStepMultiplesFromTheOriginLabelledRelativeToIt) {
  const int64_t origin = 123'456'789;  // not a multiple of any step below
  // 2 ms over 1000 px: 2000 ns/px; 80 px needs 160 µs, so the step is 200 µs (100 px).
  const TimeView view(origin + 1'000'037, origin + 3'000'037, 1000);
  const std::vector<Tick> ticks = ComputeTicks(view, origin, 80);
  const int64_t step = 200 * kUs;
  EXPECT_EQ(TickStepNs(view.NsPerPixel(), 80), step);

  // Every multiple of the step inside the view: offsets 1.2 ms, 1.4 ms, ..., 3.0 ms (10).
  std::vector<int64_t> inside;
  for (const Tick& tick : ticks) {
    const int64_t offset = tick.time_ns - origin;
    EXPECT_EQ(offset % step, 0) << "tick at offset " << offset;
    EXPECT_GE(tick.time_ns, view.start_ns() - step) << "far outside the view";
    EXPECT_LE(tick.time_ns, view.end_ns() + step) << "far outside the view";
    EXPECT_NEAR(tick.x, view.ToX(tick.time_ns), 1e-6);
    EXPECT_EQ(tick.label, FormatTickLabel(offset, step));
    const std::optional<double> ns = LabelNs(tick.label);
    ASSERT_TRUE(ns.has_value()) << tick.label;
    EXPECT_NEAR(*ns, static_cast<double>(offset), 1e-3) << tick.label;
    if (tick.time_ns >= view.start_ns() && tick.time_ns < view.end_ns()) inside.push_back(offset);
  }
  std::vector<int64_t> expected;
  for (int64_t offset = 1'200'000; offset <= 3'000'000; offset += step) expected.push_back(offset);
  EXPECT_EQ(inside, expected);
  for (size_t i = 1; i < ticks.size(); ++i) {
    EXPECT_EQ(ticks[i].time_ns - ticks[i - 1].time_ns, step);
    EXPECT_GE(ticks[i].x - ticks[i - 1].x, 80.0);  // 100 px apart
  }
}

TEST(ComputeTicks, SpacingNeverBelowMinimumAtAnyZoom) {
  const int64_t origin = 1'000'000'007;
  for (int64_t duration : {int64_t{100}, int64_t{999}, 37 * kUs, 5 * kMs, 123 * kMs, 17 * kS, 3600 * kS}) {
    for (double width : {300.0, 1000.0, 2560.0}) {
      const TimeView view(origin + 12'345, origin + 12'345 + duration, width);
      const std::vector<Tick> ticks = ComputeTicks(view, origin, 60);
      ASSERT_GE(ticks.size(), 2u) << duration << " ns over " << width << " px";
      const int64_t step = ticks[1].time_ns - ticks[0].time_ns;
      EXPECT_TRUE(IsOneTwoFiveStep(step)) << step;
      EXPECT_EQ(step, TickStepNs(view.NsPerPixel(), 60));
      for (size_t i = 1; i < ticks.size(); ++i) {
        EXPECT_GE(ticks[i].x - ticks[i - 1].x, 60.0 * (1 - 1e-9));
        EXPECT_EQ((ticks[i].time_ns - origin) % step, 0);
      }
    }
  }
}

// ---- one spelling of durations ------------------------------------------------------------

// The unit after the space: "250 us" -> "us".
std::string UnitOf(const std::string& text) { return text.substr(text.find(' ') + 1); }

TEST(FormatTickLabel, SpellsUnitsAsTheReportsDo) {
  // A tick and format::FormatDuration (the Details tab, the reports) name the same unit for
  // the same time, whatever decimals each needs.
  for (const int64_t ns : {int64_t{7}, int64_t{850}, 250 * kUs, 12 * kMs + 500 * kUs, 3 * kS}) {
    const std::string tick = FormatTickLabel(ns, ns);
    EXPECT_EQ(UnitOf(tick), UnitOf(format::FormatDuration(static_cast<double>(ns)))) << tick;
    EXPECT_EQ(tick.find("\u00b5"), std::string::npos) << tick;
  }
  EXPECT_EQ(FormatTickLabel(250 * kUs, 50 * kUs), "250 us");
  EXPECT_EQ(FormatTickLabel(1'500 * kUs, 100 * kUs), "1.5 ms");
  EXPECT_EQ(FormatTickLabel(-2 * kS, kS), "-2 s");
}

TEST(ParseRelativeRange, ReadsBackWhatTheViewerWrites) {
  // A range typed from what the viewer shows (format::FormatDuration, tick labels) parses.
  for (const int64_t ns : {int64_t{850}, 250 * kUs, 12'345 * kUs, 1'500 * kMs}) {
    const std::string shown = format::FormatDuration(static_cast<double>(ns));
    std::string error;
    const std::optional<RelativeRange> range = ParseRelativeRange("0.." + shown, &error);
    ASSERT_TRUE(range.has_value()) << shown << ": " << error;
    EXPECT_NEAR(static_cast<double>(range->end_ns), static_cast<double>(ns), 0.005 * static_cast<double>(ns))
        << shown;
    const std::string tick = FormatTickLabel(ns, ns);
    ASSERT_TRUE(ParseRelativeRange("0.." + tick, &error).has_value()) << tick << ": " << error;
  }
}

// ---- ParseRelativeRange -------------------------------------------------------------------

TEST(ParseRelativeRange, ReadsEveryUnit) {
  struct Case {
    std::string text;
    int64_t start, end;
  };
  const std::vector<Case> cases = {
      {"120ms..180ms", 120 * kMs, 180 * kMs},
      {"1.5..2", 1'500'000'000, 2 * kS},          // bare numbers are seconds
      {"100ns..200ns", 100, 200},
      {"250us..1.25ms", 250 * kUs, 1'250'000},
      {"250µs..300µs", 250 * kUs, 300 * kUs},
      {"0..10ns", 0, 10},
      {"2s..2.5s", 2 * kS, 2'500'000'000},
  };
  for (const Case& c : cases) {
    std::string error;
    const std::optional<RelativeRange> range = ParseRelativeRange(c.text, &error);
    ASSERT_TRUE(range.has_value()) << c.text << ": " << error;
    EXPECT_EQ(range->start_ns, c.start) << c.text;
    EXPECT_EQ(range->end_ns, c.end) << c.text;
  }
}

TEST(ParseRelativeRange, RejectsMalformedRangesWithAReason) {
  for (const char* text : {"", "120ms", "abc..2ms", "1ms..", "..2ms", "5ms..2ms"}) {
    std::string error;
    EXPECT_EQ(ParseRelativeRange(text, &error).has_value(), false) << "'" << text << "'";
    EXPECT_FALSE(error.empty()) << "'" << text << "' without a reason";
  }
  std::string error;
  EXPECT_FALSE(ParseRelativeRange("1xs..2ms", &error).has_value());
  EXPECT_NE(error.find("xs"), std::string::npos) << "the error should name the bad unit: " << error;
}

}  // namespace
}  // namespace rankscope::gui
