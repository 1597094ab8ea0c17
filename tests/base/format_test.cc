#include "base/format.h"

#include <limits>

#include <gtest/gtest.h>

namespace rankscope::format {
namespace {

TEST(FormatTest, DurationsKeepThreeSignificantDigits) {
  EXPECT_EQ(FormatDuration(0), "0 ns");
  EXPECT_EQ(FormatDuration(850), "850 ns");
  EXPECT_EQ(FormatDuration(850'000), "850 us");
  EXPECT_EQ(FormatDuration(12'345'678), "12.3 ms");
  EXPECT_EQ(FormatDuration(1'200'000'000), "1.20 s");
  EXPECT_EQ(FormatDuration(-1'250'000), "-1.25 ms");
  EXPECT_EQ(FormatDuration(3600e9), "3600 s");
}

TEST(FormatTest, ExactSecondsKeepEveryNanosecond) {
  EXPECT_EQ(FormatExactSeconds(0), "0.000000000 s");
  EXPECT_EQ(FormatExactSeconds(42'912'345'678), "42.912345678 s");
  EXPECT_EQ(FormatExactSeconds(193'456), "0.000193456 s");
  EXPECT_EQ(FormatExactSeconds(-100), "-0.000000100 s");
  EXPECT_EQ(FormatExactSeconds(1'732'650'042'912'345'678), "1732650042.912345678 s");
  EXPECT_EQ(FormatExactSeconds(std::numeric_limits<int64_t>::min()), "-9223372036.854775808 s");
}

TEST(FormatTest, ARoundingThatReachesAThousandMovesToTheNextUnit) {
  EXPECT_EQ(FormatDuration(999'700), "1.00 ms");
  EXPECT_EQ(FormatDuration(999'400), "999 us");
  EXPECT_EQ(FormatBytes(1023.9), "1.00 KiB");
}

TEST(FormatTest, NotANumberIsADash) {
  EXPECT_EQ(FormatDuration(std::numeric_limits<double>::quiet_NaN()), "-");
  EXPECT_EQ(FormatBytes(std::numeric_limits<double>::infinity()), "-");
  EXPECT_EQ(FormatPercent(std::numeric_limits<double>::quiet_NaN()), "-");
  EXPECT_EQ(FormatNumber(-std::numeric_limits<double>::infinity(), 2), "-");
}

TEST(FormatTest, BytesUseBinaryUnits) {
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(1536), "1.50 KiB");
  EXPECT_EQ(FormatBytes(4.0 * 1024 * 1024), "4.00 MiB");
  EXPECT_EQ(FormatBytes(25.0 * 1024 * 1024), "25.0 MiB");
}

TEST(FormatTest, CountsPercentagesAndWorldSizes) {
  EXPECT_EQ(FormatCount(999), "999");
  EXPECT_EQ(FormatCount(25'600'000), "25.6M");
  EXPECT_EQ(FormatCount(-1500), "-1.50K");
  EXPECT_EQ(FormatPercent(45.25), "45.2%");
  EXPECT_EQ(FormatNumber(3.14159, 3), "3.142");
  EXPECT_EQ(RanksText(1), "1 rank");
  EXPECT_EQ(RanksText(4), "4 ranks");
}

TEST(FormatTest, AMetricIsWrittenInTheUnitItsNameImplies) {
  EXPECT_EQ(FormatMetricValue("step_time_ns", 12'345'678), "12.3 ms");
  EXPECT_EQ(FormatMetricValue("utilization_pct", 75), "75.0%");
  EXPECT_EQ(FormatMetricValue("throughput", 1234.56), "1234.6 samples/s");
  EXPECT_EQ(FormatMetricValue("efficiency", 0.875), "87.5%");
  EXPECT_EQ(FormatMetricValue("comm_compute_ratio", 0.5), "0.50");
}

TEST(FormatTest, Escaping) {
  EXPECT_EQ(HtmlEscape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&#39;");
  EXPECT_EQ(HtmlEscape("tab\tok\x01"), "tab\tok?");
  EXPECT_EQ(MarkdownEscape("fwd|bwd*"), "fwd\\|bwd\\*");
  EXPECT_EQ(MarkdownEscape("two\nlines"), "two lines");
}

TEST(FormatTest, WidthsCountCodePointsAndNeverSplitOne) {
  EXPECT_EQ(DisplayWidth("\xc3\xa9t\xc3\xa9"), 3u);
  EXPECT_EQ(TruncateToWidth("abcdefgh", 6), "abc...");
  EXPECT_EQ(TruncateToWidth("abc", 3), "abc");
  EXPECT_EQ(TruncateToWidth("\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", 4), "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9");
  EXPECT_EQ(TruncateToWidth("\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", 4), "\xc3\xa9...");
}

}  // namespace
}  // namespace rankscope::format
