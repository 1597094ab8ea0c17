#include "base/format.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <string>
#include <string_view>

namespace rankscope::format {
namespace {

struct Unit {
  double scale;
  std::string_view name;
};

// `value` in the largest unit it reaches, with three significant digits. A value that
// would round up to 1000 of one unit moves to the next ("999.7 us" -> "1.00 ms").
std::string FormatScaled(double value, const Unit* units, size_t unit_count, bool integer_base) {
  if (!std::isfinite(value)) return "-";
  const double magnitude = std::fabs(value);
  if (magnitude < (integer_base ? 0.5 : 0.0005)) return fmt::format("0 {}", units[0].name);
  size_t unit = 0;
  while (unit + 1 < unit_count && magnitude >= units[unit + 1].scale * 0.9995) ++unit;
  const double scaled = value / units[unit].scale;
  const double scaled_magnitude = std::fabs(scaled);
  int decimals = 0;
  if (!(unit == 0 && integer_base)) decimals = scaled_magnitude < 9.995 ? 2 : scaled_magnitude < 99.95 ? 1 : 0;
  return fmt::format("{:.{}f} {}", scaled, decimals, units[unit].name);
}

bool EndsWith(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

}  // namespace

std::string FormatCount(long long count) {
  static constexpr Unit kUnits[] = {{1, ""}, {1e3, "K"}, {1e6, "M"}, {1e9, "G"}, {1e12, "T"}};
  if (std::llabs(count) < 1000) return std::to_string(count);
  std::string text = FormatScaled(static_cast<double>(count), kUnits, std::size(kUnits), true);
  text.erase(std::remove(text.begin(), text.end(), ' '), text.end());
  return text;
}

std::string FormatDuration(double ns) {
  static constexpr auto kUnits = [] {
    std::array<Unit, std::size(kDurationUnits)> units{};
    for (size_t i = 0; i < units.size(); ++i) units[i] = {static_cast<double>(kDurationUnits[i].ns), kDurationUnits[i].name};
    return units;
  }();
  return FormatScaled(ns, kUnits.data(), kUnits.size(), true);
}

std::string FormatExactSeconds(int64_t ns) {
  // In unsigned arithmetic, so that INT64_MIN has a magnitude too.
  const bool negative = ns < 0;
  const uint64_t magnitude = negative ? 0 - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
  return fmt::format("{}{}.{:09d} s", negative ? "-" : "", magnitude / 1'000'000'000, magnitude % 1'000'000'000);
}

std::string FormatBytes(double bytes) {
  static constexpr Unit kUnits[] = {{1, "B"},
                                    {1024.0, "KiB"},
                                    {1024.0 * 1024, "MiB"},
                                    {1024.0 * 1024 * 1024, "GiB"},
                                    {1024.0 * 1024 * 1024 * 1024, "TiB"}};
  return FormatScaled(bytes, kUnits, std::size(kUnits), true);
}

std::string FormatPercent(double percent) {
  if (!std::isfinite(percent)) return "-";
  return fmt::format("{:.1f}%", percent);
}

std::string FormatNumber(double value, int decimals) {
  if (!std::isfinite(value)) return "-";
  return fmt::format("{:.{}f}", value, decimals);
}

std::string RanksText(int world_size) { return fmt::format("{} rank{}", world_size, world_size == 1 ? "" : "s"); }

std::string FormatMetricValue(std::string_view metric_name, double value) {
  if (EndsWith(metric_name, "_ns")) return FormatDuration(value);
  if (EndsWith(metric_name, "_pct")) return FormatPercent(value);
  if (metric_name == "throughput") return FormatNumber(value, 1) + " samples/s";
  if (metric_name == "efficiency") return FormatPercent(100.0 * value);
  return FormatNumber(value, 2);
}

std::string HtmlEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      case '\t':
      case '\n':
      case '\r': out += c; break;
      default:
        // Other control characters are not allowed in XML 1.0 (SVG, JUnit) at all, even escaped.
        out += static_cast<unsigned char>(c) < 0x20 ? '?' : c;
    }
  }
  return out;
}

std::string MarkdownEscape(std::string_view text) {
  static constexpr std::string_view kSpecial = "|\\`*_<>[]~&";
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    if (c == '\n' || c == '\r') {
      out += ' ';
      continue;
    }
    if (kSpecial.find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

size_t DisplayWidth(std::string_view text) {
  return static_cast<size_t>(std::count_if(text.begin(), text.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;  // not a UTF-8 continuation byte
  }));
}

std::string TruncateToWidth(std::string_view text, size_t width) {
  if (DisplayWidth(text) <= width) return std::string(text);
  const std::string_view ellipsis = width >= 3 ? "..." : "";
  const size_t keep = width - ellipsis.size();
  size_t columns = 0;
  size_t end = 0;
  for (; end < text.size(); ++end) {
    if ((static_cast<unsigned char>(text[end]) & 0xC0) != 0x80) {
      if (columns == keep) break;
      ++columns;
    }
  }
  return std::string(text.substr(0, end)) + std::string(ellipsis);
}

}  // namespace rankscope::format
