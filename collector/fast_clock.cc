#include "collector/fast_clock.h"

#include <algorithm>
#include <limits>
#include <string>

#include "collector/proc_files.h"

namespace rankscope::collector {
namespace {

bool CpuFlagsSayInvariantTsc() {
  std::string cpuinfo = ReadSmallFile("/proc/cpuinfo", 1 << 20);
  size_t flags = cpuinfo.find("\nflags");
  if (flags == std::string::npos) return false;
  std::string line = cpuinfo.substr(flags + 1, cpuinfo.find('\n', flags + 1) - flags - 1) + " ";
  return line.find(" constant_tsc ") != std::string::npos &&
         line.find(" nonstop_tsc ") != std::string::npos;
}

}  // namespace

std::string_view ClockSourceName(ClockSource source) {
  return source == ClockSource::kTsc ? "tsc" : "realtime";
}

ClockSource ChooseClockSource(std::string_view override_name) {
#if defined(__x86_64__)
  if (override_name == "realtime") return ClockSource::kRealtime;
  if (override_name == "tsc") return ClockSource::kTsc;
  std::string clocksource =
      ReadSmallFile("/sys/devices/system/clocksource/clocksource0/current_clocksource");
  bool kernel_uses_tsc = clocksource.rfind("tsc", 0) == 0;
  return kernel_uses_tsc && CpuFlagsSayInvariantTsc() ? ClockSource::kTsc
                                                      : ClockSource::kRealtime;
#else
  (void)override_name;
  return ClockSource::kRealtime;
#endif
}

TickConverter::TickConverter(ClockSource source) : source_(source) {}

CalibrationPoint TickConverter::Calibrate() {
  CalibrationPoint best;
  if (source_ == ClockSource::kRealtime) {
    int64_t now = RealtimeNowNs();
    best = {static_cast<uint64_t>(now), now};
  } else {
    uint64_t best_gap = std::numeric_limits<uint64_t>::max();
    for (int attempt = 0; attempt < 5; ++attempt) {
      uint64_t before = ReadTicks(source_);
      int64_t realtime = RealtimeNowNs();
      uint64_t after = ReadTicks(source_);
      if (after - before < best_gap) {
        best_gap = after - before;
        best = {before + (after - before) / 2, realtime};
      }
    }
  }
  AddPoint(best);
  return best;
}

void TickConverter::AddPoint(CalibrationPoint point) {
  if (!points_.empty() && point.ticks <= points_.back().ticks) return;
  if (points_.size() == kMaxPoints) {
    // Keep the first and every other point: the span stays covered at half resolution.
    std::vector<CalibrationPoint> thinned;
    thinned.reserve(kMaxPoints / 2 + 1);
    for (size_t i = 0; i < points_.size(); i += 2) thinned.push_back(points_[i]);
    points_ = std::move(thinned);
  }
  points_.push_back(point);
}

int64_t TickConverter::ToRealtimeNs(uint64_t ticks) const {
  if (source_ == ClockSource::kRealtime || points_.empty()) return static_cast<int64_t>(ticks);
  if (points_.size() == 1) {
    // No rate yet: one tick counts as one ns. The drain thread calibrates before converting.
    return points_[0].realtime_ns + static_cast<int64_t>(ticks - points_[0].ticks);
  }
  // The segment [lo, hi] containing ticks, or the first/last one to extrapolate from.
  auto upper = std::upper_bound(points_.begin(), points_.end(), ticks,
                                [](uint64_t t, const CalibrationPoint& p) { return t < p.ticks; });
  size_t hi = static_cast<size_t>(std::distance(points_.begin(), upper));
  hi = std::clamp<size_t>(hi, 1, points_.size() - 1);
  const CalibrationPoint& a = points_[hi - 1];
  const CalibrationPoint& b = points_[hi];
  double ns_per_tick = static_cast<double>(b.realtime_ns - a.realtime_ns) /
                       static_cast<double>(b.ticks - a.ticks);
  double offset_ticks = ticks >= a.ticks ? static_cast<double>(ticks - a.ticks)
                                         : -static_cast<double>(a.ticks - ticks);
  return a.realtime_ns + static_cast<int64_t>(offset_ticks * ns_per_tick);
}

double TickConverter::TicksPerSecond() const {
  if (source_ == ClockSource::kRealtime) return 1e9;
  if (points_.size() < 2) return 0;
  const CalibrationPoint& a = points_.front();
  const CalibrationPoint& b = points_.back();
  if (b.realtime_ns <= a.realtime_ns) return 0;
  return static_cast<double>(b.ticks - a.ticks) * 1e9 /
         static_cast<double>(b.realtime_ns - a.realtime_ns);
}

}  // namespace rankscope::collector
