// The report for a terminal: one screen, at most kMaxColumns wide, no colour codes.
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "analyzer/report_format.h"
#include "analyzer/report_writers.h"

namespace rankscope::analyzer {
namespace {

using format::DisplayWidth;
using format::Table;
using format::TruncateToWidth;

constexpr size_t kMaxColumns = 100;
// Enough to see where the time goes while the report still fits one screen.
constexpr size_t kTopActivities = 8;
constexpr std::string_view kColumnGap = "  ";

std::string Pad(std::string_view text, size_t width, bool right_aligned) {
  const size_t used = DisplayWidth(text);
  const std::string padding(width > used ? width - used : 0, ' ');
  return right_aligned ? padding + std::string(text) : std::string(text) + padding;
}

void TrimTrailingSpaces(std::string& line) {
  while (!line.empty() && line.back() == ' ') line.pop_back();
}

// Aligned columns; when too wide, the flexible column (names) is cut to fit.
void AppendTable(const Table& table, std::string& out) {
  const size_t columns = table.header.size();
  std::vector<size_t> widths(columns, 0);
  for (size_t c = 0; c < columns; ++c) widths[c] = DisplayWidth(table.header[c]);
  for (const auto& row : table.rows) {
    for (size_t c = 0; c < columns && c < row.size(); ++c) widths[c] = std::max(widths[c], DisplayWidth(row[c]));
  }
  size_t total = columns > 0 ? kColumnGap.size() * (columns - 1) : 0;
  for (const size_t width : widths) total += width;
  if (total > kMaxColumns && table.flexible_column && *table.flexible_column < columns) {
    size_t& flexible = widths[*table.flexible_column];
    constexpr size_t kMinFlexibleWidth = 12;
    flexible -= std::min(total - kMaxColumns, flexible > kMinFlexibleWidth ? flexible - kMinFlexibleWidth : 0);
  }
  auto append_row = [&](const std::vector<std::string>& cells) {
    std::string line;
    for (size_t c = 0; c < columns; ++c) {
      if (c > 0) line += kColumnGap;
      const std::string cell = TruncateToWidth(c < cells.size() ? cells[c] : "", widths[c]);
      line += Pad(cell, widths[c], c < table.numeric.size() && table.numeric[c]);
    }
    TrimTrailingSpaces(line);
    out += line + '\n';
  };
  append_row(table.header);
  for (const auto& row : table.rows) append_row(row);
  for (const std::string& note : table.notes) out += note + '\n';
}

// Breaks `text` at spaces into lines of at most kMaxColumns; continuation lines are
// indented. A word longer than a line is cut later, by the final clamp.
void AppendWrapped(std::string_view text, std::string_view indent, std::string& out) {
  std::string line;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(' ', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view word = text.substr(start, end - start);
    if (!line.empty() && line != indent && DisplayWidth(line) + 1 + DisplayWidth(word) > kMaxColumns) {
      out += line + '\n';
      line = std::string(indent);
    }
    if (!line.empty() && line != indent) line += ' ';
    line += word;
    start = end + 1;
  }
  TrimTrailingSpaces(line);
  if (!line.empty()) out += line + '\n';
}

// Guarantees the width limit for anything the layout did not foresee (e.g. long paths).
std::string ClampLines(std::string_view text) {
  std::string out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    out += TruncateToWidth(text.substr(start, end - start), kMaxColumns);
    out += '\n';
    start = end + 1;
  }
  return out;
}

// `text` cut from the start to at most `width` columns, "..." first when it was cut.
std::string KeepEnd(std::string_view text, size_t width) {
  const size_t columns = DisplayWidth(text);
  if (columns <= width || width < 3) return std::string(text);
  size_t to_skip = columns - (width - 3);
  size_t begin = 0;
  for (; begin < text.size(); ++begin) {
    if ((static_cast<unsigned char>(text[begin]) & 0xC0) != 0x80) {
      if (to_skip == 0) break;
      --to_skip;
    }
  }
  return "..." + std::string(text.substr(begin));
}

void AppendSummary(const Report& report, std::string& out) {
  out += report.tool_version.empty() ? "rankscope report\n"
                                     : fmt::format("rankscope {} report\n", report.tool_version);
  const auto items = format::SummaryItems(report);
  size_t label_width = 0;
  for (const auto& [label, value] : items) label_width = std::max(label_width, label.size());
  for (const auto& [label, value] : items) {
    // Paths are most useful by their end: cut the start of a long run directory.
    std::string shown = value;
    const size_t room = kMaxColumns - 2 - label_width - 2;
    if (label == "run") shown = KeepEnd(shown, room);
    out += fmt::format("  {}  {}\n", Pad(label, label_width, false), shown);
  }
}

void AppendRanks(const Report& report, std::string& out) {
  const Table table = format::RankTable(report, /*with_host=*/false);
  out +=
      "\nper rank: medians over aggregated steps (exposed = comm not hidden by compute,\n"
      "overlap = share of comm hidden, util = busy share of the step)\n";
  if (table.rows.empty()) {
    out += "  no rank with device activity\n";
    return;
  }
  AppendTable(table, out);
}

void AppendTopActivities(const Report& report, std::string& out) {
  const Table table = format::TopActivityTable(report, kTopActivities);
  if (table.rows.empty()) return;
  out += fmt::format("\ntop activities (share of the summed compute + comm + memory time, {} of {})\n",
                     table.rows.size(), report.top_activities.size());
  AppendTable(table, out);
}

void AppendCollectives(const Report& report, std::string& out) {
  const std::string source = format::CollectiveSourceLine(report);
  const Table table = format::CollectiveTable(report);
  if (source.empty() && table.rows.empty()) return;
  out += '\n';
  if (!source.empty()) out += source + '\n';
  if (!table.rows.empty()) AppendTable(table, out);
}

}  // namespace

std::string ReportToText(const Report& report) {
  std::string out;
  AppendSummary(report, out);
  AppendRanks(report, out);
  AppendTopActivities(report, out);
  AppendCollectives(report, out);
  out += '\n';
  if (const std::string clock = format::ClockLine(report); !clock.empty()) AppendWrapped(clock, "  ", out);
  AppendWrapped(format::StragglerLine(report), "  ", out);
  for (const std::string& warning : report.warnings) AppendWrapped("warning: " + warning, "  ", out);
  return ClampLines(out);
}

}  // namespace rankscope::analyzer
