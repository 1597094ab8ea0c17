// Clock readings for calibration pairs: every rank file records (realtime, monotonic, TSC)
// sampled together at start and at close, so later tools can map between the clocks.
#pragma once

#include <cstdint>

namespace rankscope::trace {

struct ClockSample {
  int64_t realtime_ns = 0;   // CLOCK_REALTIME, the trace's timestamp clock
  int64_t monotonic_ns = 0;  // CLOCK_MONOTONIC
  uint64_t tsc = 0;          // time-stamp counter (x86 rdtsc, arm64 cntvct); 0 where absent

  bool operator==(const ClockSample&) const = default;
};

int64_t RealtimeNs();
int64_t MonotonicNs();
uint64_t ReadTsc();  // 0 on architectures without a readable counter

// Reads the three clocks back to back; realtime is read twice and averaged so the pair
// brackets the other readings.
ClockSample SampleClocks();

}  // namespace rankscope::trace
