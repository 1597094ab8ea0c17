#include "trace/clock.h"

#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

namespace rankscope::trace {
namespace {
int64_t ReadClock(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}
}  // namespace

int64_t RealtimeNs() { return ReadClock(CLOCK_REALTIME); }
int64_t MonotonicNs() { return ReadClock(CLOCK_MONOTONIC); }

uint64_t ReadTsc() {
#if defined(__x86_64__) || defined(__i386__)
  return __rdtsc();
#elif defined(__aarch64__)
  uint64_t value;
  asm volatile("mrs %0, cntvct_el0" : "=r"(value));
  return value;
#else
  return 0;
#endif
}

ClockSample SampleClocks() {
  ClockSample sample;
  const int64_t before = RealtimeNs();
  sample.monotonic_ns = MonotonicNs();
  sample.tsc = ReadTsc();
  const int64_t after = RealtimeNs();
  sample.realtime_ns = before + (after - before) / 2;
  return sample;
}

}  // namespace rankscope::trace
