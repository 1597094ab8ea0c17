// The layouts of a Table and the page frames every report writer shares: the
// analysis report, the scaling report and the comparison.
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "report/report_format.h"

namespace rankscope::report {
namespace {

constexpr std::string_view kColumnGap = "  ";

void TrimTrailingSpaces(std::string& line) {
  while (!line.empty() && line.back() == ' ') line.pop_back();
}

constexpr std::string_view kStyle = R"(
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px auto;
       max-width: 1000px; padding: 0 16px; color: #1f2328; }
h1 { font-size: 22px; margin-bottom: 4px; }
h2 { font-size: 17px; margin-top: 28px; border-bottom: 1px solid #d0d7de; padding-bottom: 4px; }
table { border-collapse: collapse; margin: 8px 0; }
th, td { border: 1px solid #d0d7de; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f6f8fa; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.name { max-width: 480px; overflow-wrap: anywhere; font-family: ui-monospace, monospace; font-size: 12px; }
p.note, p.caption { color: #57606a; font-size: 13px; }
ul.warnings li { color: #9a6700; }
svg { max-width: 100%; height: auto; display: block; margin: 8px 0; }
svg text { font: 11px sans-serif; fill: #1f2328; }
)";

}  // namespace

std::string Pad(std::string_view text, size_t width, bool right_aligned) {
  const size_t used = format::DisplayWidth(text);
  const std::string padding(width > used ? width - used : 0, ' ');
  return right_aligned ? padding + std::string(text) : std::string(text) + padding;
}

std::string TableToText(const Table& table) {
  std::string out;
  const size_t columns = table.header.size();
  std::vector<size_t> widths(columns, 0);
  for (size_t c = 0; c < columns; ++c) widths[c] = format::DisplayWidth(table.header[c]);
  for (const auto& row : table.rows) {
    for (size_t c = 0; c < columns && c < row.size(); ++c) widths[c] = std::max(widths[c], format::DisplayWidth(row[c]));
  }
  size_t total = columns > 0 ? kColumnGap.size() * (columns - 1) : 0;
  for (const size_t width : widths) total += width;
  if (total > kMaxTextColumns && table.flexible_column && *table.flexible_column < columns) {
    size_t& flexible = widths[*table.flexible_column];
    constexpr size_t kMinFlexibleWidth = 12;
    flexible -= std::min(total - kMaxTextColumns, flexible > kMinFlexibleWidth ? flexible - kMinFlexibleWidth : 0);
  }
  auto append_row = [&](const std::vector<std::string>& cells) {
    std::string line;
    for (size_t c = 0; c < columns; ++c) {
      if (c > 0) line += kColumnGap;
      const std::string cell = format::TruncateToWidth(c < cells.size() ? cells[c] : "", widths[c]);
      line += Pad(cell, widths[c], c < table.numeric.size() && table.numeric[c]);
    }
    TrimTrailingSpaces(line);
    out += line + '\n';
  };
  append_row(table.header);
  for (const auto& row : table.rows) append_row(row);
  for (const std::string& note : table.notes) out += note + '\n';
  return out;
}

void AppendWrapped(std::string_view text, std::string_view indent, std::string& out, std::string_view first_indent) {
  std::string line(first_indent);
  bool has_words = false;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(' ', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view word = text.substr(start, end - start);
    if (has_words && format::DisplayWidth(line) + 1 + format::DisplayWidth(word) > kMaxTextColumns) {
      out += line + '\n';
      line = std::string(indent);
      has_words = false;
    }
    if (has_words) line += ' ';
    line += word;
    has_words = has_words || !word.empty();
    start = end + 1;
  }
  TrimTrailingSpaces(line);
  if (!line.empty()) out += line + '\n';
}

std::string ClampLines(std::string_view text) {
  std::string out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    out += format::TruncateToWidth(text.substr(start, end - start), kMaxTextColumns);
    out += '\n';
    start = end + 1;
  }
  return out;
}

std::string TableToMarkdown(const Table& table) {
  std::string out;
  auto append_row = [&](const std::vector<std::string>& cells) {
    out += '|';
    for (size_t c = 0; c < table.header.size(); ++c) {
      out += ' ' + format::MarkdownEscape(c < cells.size() ? cells[c] : "") + " |";
    }
    out += '\n';
  };
  append_row(table.header);
  out += '|';
  for (size_t c = 0; c < table.header.size(); ++c) {
    out += c < table.numeric.size() && table.numeric[c] ? "---:|" : "---|";
  }
  out += '\n';
  for (const auto& row : table.rows) append_row(row);
  if (!table.notes.empty()) {
    out += '\n';
    for (const std::string& note : table.notes) out += '_' + format::MarkdownEscape(note) + "_  \n";
  }
  return out;
}

std::string TableToHtml(const Table& table, bool name_first_column) {
  std::string out;
  auto cell_class = [&](size_t column) -> std::string_view {
    if (column < table.numeric.size() && table.numeric[column]) return " class=\"num\"";
    if (name_first_column && column == 0) return " class=\"name\"";
    return "";
  };
  out += "<table>\n";
  // A label/value table (the summary) has no header worth showing.
  const bool has_header =
      std::any_of(table.header.begin(), table.header.end(), [](const std::string& name) { return !name.empty(); });
  if (has_header) {
    out += "<thead><tr>";
    for (size_t c = 0; c < table.header.size(); ++c) {
      out += fmt::format("<th{}>{}</th>", cell_class(c), format::HtmlEscape(table.header[c]));
    }
    out += "</tr></thead>\n";
  }
  out += "<tbody>\n";
  for (const auto& row : table.rows) {
    out += "<tr>";
    for (size_t c = 0; c < table.header.size(); ++c) {
      out += fmt::format("<td{}>{}</td>", cell_class(c), format::HtmlEscape(c < row.size() ? row[c] : ""));
    }
    out += "</tr>\n";
  }
  out += "</tbody>\n</table>\n";
  for (const std::string& note : table.notes) out += "<p class=\"note\">" + format::HtmlEscape(note) + "</p>\n";
  return out;
}

std::string HtmlPageStart(std::string_view title, std::string_view tool_version) {
  std::string out = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  out += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  out += "<title>" + format::HtmlEscape(title) + "</title>\n<style>" + std::string(kStyle) + "</style>\n</head>\n<body>\n";
  out += "<h1>" + format::HtmlEscape(title) + "</h1>\n";
  if (!tool_version.empty()) out += "<p class=\"note\">rankscope " + format::HtmlEscape(tool_version) + "</p>\n";
  return out;
}

std::string HtmlPageEnd() { return "</body>\n</html>\n"; }

}  // namespace rankscope::report
