// The collector's timestamp clock. Application threads read a raw tick (TSC where it is
// invariant and the kernel trusts it, else CLOCK_REALTIME nanoseconds); the drain thread
// converts ticks to CLOCK_REALTIME by interpolating between calibration samples it takes
// on every pass, so the conversion follows NTP slewing and never needs a global rate.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif
#include <time.h>

namespace rankscope::collector {

enum class ClockSource : uint8_t { kRealtime = 0, kTsc = 1 };

std::string_view ClockSourceName(ClockSource source);

// Chooses TSC when the CPU says it is constant and non-stop and the kernel's clocksource
// is "tsc"; `override_name` ("tsc", "realtime", or empty) comes from RANKSCOPE_CLOCK.
ClockSource ChooseClockSource(std::string_view override_name);

inline int64_t RealtimeNowNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// One raw reading of `source`. Inline: this is the hot path of every event.
inline uint64_t ReadTicks(ClockSource source) {
#if defined(__x86_64__)
  if (source == ClockSource::kTsc) return __rdtsc();
#endif
  (void)source;
  return static_cast<uint64_t>(RealtimeNowNs());
}

struct CalibrationPoint {
  uint64_t ticks = 0;
  int64_t realtime_ns = 0;
};

// Maps ticks to realtime. Not thread-safe: the drain thread owns it.
class TickConverter {
 public:
  explicit TickConverter(ClockSource source);

  ClockSource source() const { return source_; }
  // Reads both clocks together (the tightest of a few tries) and remembers the pair.
  CalibrationPoint Calibrate();
  // For tests: adds a known pair. Points must come in increasing tick order.
  void AddPoint(CalibrationPoint point);
  int64_t ToRealtimeNs(uint64_t ticks) const;
  // Ticks per second over the whole calibrated span; 1e9 for kRealtime; 0 before two points.
  double TicksPerSecond() const;
  size_t point_count() const { return points_.size(); }

 private:
  static constexpr size_t kMaxPoints = 4096;
  ClockSource source_;
  std::vector<CalibrationPoint> points_;
};

}  // namespace rankscope::collector
