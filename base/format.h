// How every front end writes a number or a piece of text: the text, Markdown, HTML and JSON
// reports, the CLI's messages and the viewer (every tab, tooltip and status line), so that
// all of them show the same value the same way. Each function is O(length of its output).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace rankscope::format {

// The units a duration is written in, smallest first. The microsecond is spelled "us", in
// ASCII, everywhere rankscope writes one (reports, CLI, the viewer's text and axis ticks):
// the same bytes in a terminal, a CSV cell, a JSON string and a grep pattern. Readers of
// durations typed by people (the viewer's --range) accept "µs" as well.
struct DurationUnit {
  int64_t ns;
  std::string_view name;
};
inline constexpr DurationUnit kDurationUnits[] = {{1, "ns"}, {1'000, "us"}, {1'000'000, "ms"}, {1'000'000'000, "s"}};

// "0 ns", "850 ns", "850 us", "12.3 ms", "1.20 s": three significant digits (trailing zeros
// kept, so a column of durations lines up), in the largest of kDurationUnits the value
// reaches; negative values keep their sign; "-" for NaN or infinity. The one way every
// front end writes a duration.
std::string FormatDuration(double ns);
// "42.912345678 s", "-0.000000100 s": a time or duration to the nanosecond, exactly, in
// seconds with all nine decimals (the viewer's Details tab: copyable, comparable by eye).
std::string FormatExactSeconds(int64_t ns);
// "0 B", "512 B", "1.50 KiB", "25.0 MiB" (binary units); three significant digits.
std::string FormatBytes(double bytes);
// "25.6M": a count with an SI prefix and three significant digits; exact below 1000.
std::string FormatCount(long long count);
// "45.2%"; "-" for NaN or infinity.
std::string FormatPercent(double percent);
// A plain number with `decimals` digits after the point; "-" for NaN or infinity.
std::string FormatNumber(double value, int decimals);
// "1 rank", "4 ranks": a world size in charts and messages.
std::string RanksText(int world_size);
// A metric's value in the unit its name implies (docs/metrics.md): *_ns a duration, *_pct a
// percentage, throughput in samples/s, efficiency (a fraction) as a percentage, else a ratio
// with two decimals.
std::string FormatMetricValue(std::string_view metric_name, double value);

// Text for HTML, SVG and XML (JUnit) content and attribute values: & < > " ' become
// entities, control characters other than tab and newlines become '?'.
std::string HtmlEscape(std::string_view text);
// Text for a GitHub-flavoured Markdown table cell: backslash before the characters that
// would end the cell or start markup (| \ ` * _ < > [ ] ~ &), newlines become spaces.
std::string MarkdownEscape(std::string_view text);

// Terminal columns taken by UTF-8 `text` (one per code point; wide glyphs are rare here).
size_t DisplayWidth(std::string_view text);
// `text` cut to at most `width` columns, ending in "..." when it was cut; never splits a
// UTF-8 sequence.
std::string TruncateToWidth(std::string_view text, size_t width);

}  // namespace rankscope::format
