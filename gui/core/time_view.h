// Time <-> pixel mapping, zoom and pan, the zoom history, and axis ticks: the maths under
// every timeline interaction, without Qt.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace rankscope::gui {

// The visible range [start_ns, end_ns) of the common clock, drawn across [0, width) pixels.
class TimeView {
 public:
  static constexpr int64_t kMinDurationNs = 100;  // the deepest zoom: 100 ns across the view

  TimeView() = default;
  TimeView(int64_t start_ns, int64_t end_ns, double width_px);

  int64_t start_ns() const { return start_ns_; }
  int64_t end_ns() const { return end_ns_; }
  int64_t duration_ns() const { return end_ns_ - start_ns_; }
  double width_px() const { return width_px_; }
  double NsPerPixel() const;

  double ToX(int64_t time_ns) const;
  int64_t ToTime(double x) const;

  void SetWidth(double width_px);
  void SetRange(int64_t start_ns, int64_t end_ns);  // widened to kMinDurationNs if narrower
  // factor > 1 zooms in, < 1 out; the time under `x` stays under `x`.
  void ZoomAt(double x, double factor);
  // Moves the view by `dx` pixels of time (positive: later).
  void PanPixels(double dx);
  // Keeps the view inside [lo, hi) when it fits, else shows all of it.
  void ClampTo(int64_t lo_ns, int64_t hi_ns);

  bool operator==(const TimeView&) const = default;

 private:
  int64_t start_ns_ = 0;
  int64_t end_ns_ = 1;
  double width_px_ = 1;
};

// Ranges visited, for Backspace.
class ZoomHistory {
 public:
  void Push(int64_t start_ns, int64_t end_ns);
  // The most recent range, removed; nullopt when empty.
  std::optional<std::pair<int64_t, int64_t>> Pop();
  bool empty() const { return ranges_.empty(); }
  size_t size() const { return ranges_.size(); }

 private:
  static constexpr size_t kLimit = 256;
  std::vector<std::pair<int64_t, int64_t>> ranges_;
};

struct Tick {
  int64_t time_ns = 0;  // on the common clock
  double x = 0;
  std::string label;    // relative to the origin, e.g. "1.5 ms"
};

// Ticks every 1, 2 or 5 × 10^k ns, the smallest step at least `min_spacing_px` apart;
// labels are relative to `origin_ns` (the run's start), in the unit the step suits.
std::vector<Tick> ComputeTicks(const TimeView& view, int64_t origin_ns, double min_spacing_px);
int64_t TickStepNs(double ns_per_px, double min_spacing_px);

// A tick label at a multiple of `step_ns`: "0", "250 us", "1.5 ms", with as many decimals as
// the step needs for consecutive ticks to differ (format::FormatDuration's fixed three digits
// would write 1.0000 ms and 1.0002 ms alike). The unit names are format::kDurationUnits';
// every other duration the viewer shows is format::FormatDuration's.
std::string FormatTickLabel(int64_t offset_ns, int64_t step_ns);

// "t0..t1" with units ns, us (or µs), ms, s (a bare number is seconds), relative to the run's
// start: "120ms..180ms", "1.5..2". Errors name what is wrong.
struct RelativeRange {
  int64_t start_ns = 0, end_ns = 0;
};
std::optional<RelativeRange> ParseRelativeRange(const std::string& text, std::string* error);

}  // namespace rankscope::gui
