#include "gui/core/time_view.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cctype>
#include <cstdlib>

#include "base/format.h"

namespace rankscope::gui {

TimeView::TimeView(int64_t start_ns, int64_t end_ns, double width_px) {
  SetWidth(width_px);
  SetRange(start_ns, end_ns);
}

double TimeView::NsPerPixel() const { return static_cast<double>(duration_ns()) / width_px_; }

double TimeView::ToX(int64_t time_ns) const {
  return static_cast<double>(time_ns - start_ns_) / NsPerPixel();
}

int64_t TimeView::ToTime(double x) const { return start_ns_ + std::llround(x * NsPerPixel()); }

void TimeView::SetWidth(double width_px) { width_px_ = std::max(1.0, width_px); }

void TimeView::SetRange(int64_t start_ns, int64_t end_ns) {
  if (end_ns < start_ns) std::swap(start_ns, end_ns);
  if (end_ns - start_ns < kMinDurationNs) {
    const int64_t middle = start_ns + (end_ns - start_ns) / 2;
    start_ns = middle - kMinDurationNs / 2;
    end_ns = start_ns + kMinDurationNs;
  }
  start_ns_ = start_ns;
  end_ns_ = end_ns;
}

void TimeView::ZoomAt(double x, double factor) {
  if (!(factor > 0) || !std::isfinite(factor)) return;
  const int64_t anchor = ToTime(x);
  const double anchor_fraction = std::clamp(x / width_px_, 0.0, 1.0);
  double duration = static_cast<double>(duration_ns()) / factor;
  duration = std::clamp(duration, static_cast<double>(kMinDurationNs), 4.0e18);
  const int64_t new_duration = std::llround(duration);
  const int64_t start = anchor - std::llround(anchor_fraction * static_cast<double>(new_duration));
  start_ns_ = start;
  end_ns_ = start + new_duration;
}

void TimeView::PanPixels(double dx) {
  const int64_t shift = std::llround(dx * NsPerPixel());
  start_ns_ += shift;
  end_ns_ += shift;
}

void TimeView::ClampTo(int64_t lo_ns, int64_t hi_ns) {
  if (hi_ns - lo_ns <= duration_ns()) {
    SetRange(lo_ns, hi_ns);  // zoomed out past the whole extent: show exactly all of it
    return;
  }
  const int64_t duration = duration_ns();
  if (start_ns_ < lo_ns) start_ns_ = lo_ns;
  if (start_ns_ + duration > hi_ns) start_ns_ = hi_ns - duration;
  end_ns_ = start_ns_ + duration;
}

void ZoomHistory::Push(int64_t start_ns, int64_t end_ns) {
  if (!ranges_.empty() && ranges_.back() == std::make_pair(start_ns, end_ns)) return;
  if (ranges_.size() == kLimit) ranges_.erase(ranges_.begin());
  ranges_.emplace_back(start_ns, end_ns);
}

std::optional<std::pair<int64_t, int64_t>> ZoomHistory::Pop() {
  if (ranges_.empty()) return std::nullopt;
  std::pair<int64_t, int64_t> last = ranges_.back();
  ranges_.pop_back();
  return last;
}

int64_t TickStepNs(double ns_per_px, double min_spacing_px) {
  const double wanted = std::max(1.0, ns_per_px * min_spacing_px);
  int64_t decade = 1;
  while (true) {
    for (int64_t mantissa : {1, 2, 5}) {
      const int64_t step = mantissa * decade;
      if (static_cast<double>(step) >= wanted) return step;
    }
    if (decade > INT64_MAX / 100) return decade * 10;
    decade *= 10;
  }
}

std::vector<Tick> ComputeTicks(const TimeView& view, int64_t origin_ns, double min_spacing_px) {
  std::vector<Tick> ticks;
  const int64_t step = TickStepNs(view.NsPerPixel(), min_spacing_px);
  // First multiple of `step` (relative to the origin) at or after the view start.
  const int64_t relative_start = view.start_ns() - origin_ns;
  int64_t k = relative_start / step;
  if (k * step < relative_start) ++k;
  for (int64_t offset = k * step; origin_ns + offset <= view.end_ns(); offset += step) {
    const int64_t time = origin_ns + offset;
    ticks.push_back({time, view.ToX(time), FormatTickLabel(offset, step)});
    if (ticks.size() > 10000) break;  // a degenerate spacing; never expected
  }
  return ticks;
}

namespace {

// The largest of format::kDurationUnits that `magnitude` reaches (ns below 1 ns).
const format::DurationUnit& UnitFor(int64_t magnitude) {
  const format::DurationUnit* chosen = &format::kDurationUnits[0];
  for (const format::DurationUnit& unit : format::kDurationUnits) {
    if (magnitude >= unit.ns) chosen = &unit;
  }
  return *chosen;
}

}  // namespace

std::string FormatTickLabel(int64_t offset_ns, int64_t step_ns) {
  if (offset_ns == 0) return "0";
  const int64_t magnitude = std::max(offset_ns < 0 ? -offset_ns : offset_ns, step_ns);
  const format::DurationUnit& unit = UnitFor(magnitude);
  // Enough decimals that consecutive ticks differ: the step's digits below the unit.
  int decimals = 0;
  for (int64_t scale = unit.ns; scale > step_ns && decimals < 9; scale /= 10) ++decimals;
  const double value = static_cast<double>(offset_ns) / static_cast<double>(unit.ns);
  return fmt::format("{:.{}f} {}", value, decimals, unit.name);
}

namespace {

std::optional<int64_t> ParseTime(std::string text, std::string* error) {
  auto trim = [](std::string& s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.erase(s.begin());
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  };
  trim(text);
  const std::string typed = text;
  struct Suffix {
    const char* text;
    double ns;
  };
  // format::kDurationUnits' names, and "µs" for people who type it; "s" last, as the others end in it.
  static constexpr Suffix kSuffixes[] = {{"ns", 1}, {"us", 1e3}, {"µs", 1e3}, {"ms", 1e6}, {"s", 1e9}};
  double scale = 1e9;
  for (const Suffix& suffix : kSuffixes) {
    const std::string_view s(suffix.text);
    if (text.size() > s.size() && text.compare(text.size() - s.size(), s.size(), s) == 0) {
      text.resize(text.size() - s.size());
      scale = suffix.ns;
      break;
    }
  }
  trim(text);
  if (text.empty()) {
    *error = "a time is missing";
    return std::nullopt;
  }
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0' || !std::isfinite(value) || value < 0) {
    *error = fmt::format("'{}' is not a time (use e.g. 120ms, 1.5s, 300us)", typed);
    return std::nullopt;
  }
  const double ns = value * scale;
  if (ns > 9.0e18) {
    *error = fmt::format("'{}' is too large", typed);
    return std::nullopt;
  }
  return std::llround(ns);
}

}  // namespace

std::optional<RelativeRange> ParseRelativeRange(const std::string& text, std::string* error) {
  const size_t dots = text.find("..");
  if (dots == std::string::npos) {
    *error = fmt::format("range '{}' is not of the form t0..t1 (e.g. 120ms..180ms)", text);
    return std::nullopt;
  }
  std::optional<int64_t> start = ParseTime(text.substr(0, dots), error);
  if (!start) return std::nullopt;
  std::optional<int64_t> end = ParseTime(text.substr(dots + 2), error);
  if (!end) return std::nullopt;
  if (*end <= *start) {
    *error = fmt::format("range '{}' ends before it starts", text);
    return std::nullopt;
  }
  return RelativeRange{*start, *end};
}

}  // namespace rankscope::gui
