#include "collector/fast_clock.h"

#include <gtest/gtest.h>

namespace rankscope::collector {
namespace {

TEST(TickConverter, InterpolatesBetweenCalibrationPoints) {
  TickConverter converter(ClockSource::kTsc);
  converter.AddPoint({1000, 5'000'000'000});
  converter.AddPoint({3000, 5'000'001'000});  // 2 ticks per ns
  converter.AddPoint({5000, 5'000'003'000});  // 1 tick per ns: the rate changed
  EXPECT_EQ(converter.ToRealtimeNs(1000), 5'000'000'000);
  EXPECT_EQ(converter.ToRealtimeNs(2000), 5'000'000'500);
  EXPECT_EQ(converter.ToRealtimeNs(4000), 5'000'002'000);
  // Outside the points: the nearest segment's rate.
  EXPECT_EQ(converter.ToRealtimeNs(6000), 5'000'004'000);
  EXPECT_EQ(converter.ToRealtimeNs(0), 4'999'999'500);
  EXPECT_DOUBLE_EQ(converter.TicksPerSecond(), 4000.0 * 1e9 / 3000.0);
}

TEST(TickConverter, IgnoresPointsThatGoBackwards) {
  TickConverter converter(ClockSource::kTsc);
  converter.AddPoint({1000, 100});
  converter.AddPoint({900, 200});
  EXPECT_EQ(converter.point_count(), 1u);
}

TEST(TickConverter, ThinsOldPointsButKeepsTheSpan) {
  TickConverter converter(ClockSource::kTsc);
  for (uint64_t i = 0; i < 10000; ++i) converter.AddPoint({1000 + i * 10, static_cast<int64_t>(i * 10)});
  EXPECT_LE(converter.point_count(), 4096u);
  EXPECT_EQ(converter.ToRealtimeNs(1000), 0);
  EXPECT_EQ(converter.ToRealtimeNs(1000 + 9999 * 10), 99990);
  EXPECT_EQ(converter.ToRealtimeNs(1000 + 5000 * 10 + 5), 50005);
}

TEST(TickConverter, RealtimeTicksAreNanoseconds) {
  TickConverter converter(ClockSource::kRealtime);
  converter.Calibrate();
  EXPECT_EQ(converter.ToRealtimeNs(123456789), 123456789);
  EXPECT_DOUBLE_EQ(converter.TicksPerSecond(), 1e9);
}

TEST(TickConverter, CalibratedClockTracksRealtime) {
  ClockSource source = ChooseClockSource("");
  TickConverter converter(source);
  converter.Calibrate();
  timespec pause{0, 20'000'000};
  nanosleep(&pause, nullptr);
  converter.Calibrate();
  int64_t converted = converter.ToRealtimeNs(ReadTicks(source));
  int64_t now = RealtimeNowNs();
  // Extrapolated 0-ms past the last point: well within a millisecond on any machine.
  EXPECT_LT(std::abs(converted - now), 1'000'000) << ClockSourceName(source);
}

TEST(ClockSource, OverrideWins) {
  EXPECT_EQ(ChooseClockSource("realtime"), ClockSource::kRealtime);
#if defined(__x86_64__)
  EXPECT_EQ(ChooseClockSource("tsc"), ClockSource::kTsc);
#endif
}

}  // namespace
}  // namespace rankscope::collector
