#include "report/ab_report.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/format.h"
#include "report/report_format.h"

namespace rankscope::report {
namespace {

using compare::AbRow;
using compare::AbVerdict;

std::string Change(double ratio) { return fmt::format("{:+.1f}%", 100.0 * (ratio - 1.0)); }

Table AbTable(const AbSummary& summary) {
  Table table;
  table.header = {"ranks", "metric", "pairs", "B/A", fmt::format("{:.4g}% interval", 100 * summary.confidence), "p",
                  "verdict"};
  table.numeric = {true, false, true, true, true, true, false};
  for (const AbRow& row : summary.rows) {
    table.rows.push_back({std::to_string(row.world_size), row.metric, std::to_string(row.pairs), Change(row.ratio),
                          row.low ? fmt::format("[{}, {}]", Change(*row.low), Change(*row.high)) : "-",
                          fmt::format("{:.2g}", row.p_value), compare::AbVerdictName(row.verdict)});
  }
  return table;
}

std::string VerdictLine(const AbSummary& summary) {
  const bool regressed = compare::AnyRegressed(summary.rows);
  std::string line = regressed ? "regression: B is worse than A beyond the tolerance" : "no regression";
  if (!compare::AllDecided(summary.rows)) {
    line += "; some metrics could not be decided in these pairs (more --pairs or --budget would tell)";
  }
  return line;
}

}  // namespace

std::string AbToText(const AbSummary& summary) {
  std::string out = fmt::format("rankscope ab: B against A, {} ({:.0f} s)\n  A: {}\n  B: {}\n\n", summary.stopped,
                                summary.seconds, summary.a, summary.b);
  out += TableToText(AbTable(summary));
  for (const AbRow& row : summary.rows) {
    if (row.verdict == AbVerdict::kUnchanged) continue;
    out += fmt::format("  {} ranks, {}: {}\n", row.world_size, row.metric, row.reason);
  }
  out += '\n' + VerdictLine(summary) + '\n';
  return out;
}

std::string AbToMarkdown(const AbSummary& summary) {
  std::string out = fmt::format("## rankscope ab: {}\n\n", compare::AnyRegressed(summary.rows) ? "regression" : "no regression");
  out += fmt::format("B `{}` against A `{}`: {}.\n\n", summary.b, summary.a, format::MarkdownEscape(summary.stopped));
  out += TableToMarkdown(AbTable(summary));
  std::string bullets;
  for (const AbRow& row : summary.rows) {
    if (row.verdict == AbVerdict::kUnchanged) continue;
    bullets += fmt::format("- **{} ranks, {}**: {}\n", row.world_size, format::MarkdownEscape(row.metric),
                           format::MarkdownEscape(row.reason));
  }
  if (!bullets.empty()) out += '\n' + bullets;
  out += '\n' + format::MarkdownEscape(VerdictLine(summary)) + '\n';
  return out;
}

std::string AbToJUnit(const AbSummary& summary) {
  const auto count = [&](AbVerdict verdict) {
    return std::count_if(summary.rows.begin(), summary.rows.end(), [&](const AbRow& row) { return row.verdict == verdict; });
  };
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += fmt::format("<testsuites name=\"rankscope ab\" tests=\"{0}\" failures=\"{1}\">\n"
                     "  <testsuite name=\"rankscope.ab\" tests=\"{0}\" failures=\"{1}\" errors=\"0\" skipped=\"{2}\">\n",
                     summary.rows.size(), count(AbVerdict::kRegressed), count(AbVerdict::kCannotTell));
  for (const AbRow& row : summary.rows) {
    out += fmt::format("    <testcase classname=\"rankscope.ab.n{}\" name=\"{}\">\n", row.world_size,
                       format::HtmlEscape(row.metric));
    const std::string detail = fmt::format("{} pairs: {}", row.pairs, row.reason);
    if (row.verdict == AbVerdict::kRegressed) {
      out += fmt::format("      <failure message=\"{}\" type=\"regression\">{}</failure>\n",
                         format::HtmlEscape(fmt::format("{} regressed {}", row.metric, Change(row.ratio))),
                         format::HtmlEscape(detail));
    } else if (row.verdict == AbVerdict::kCannotTell) {
      out += fmt::format("      <skipped message=\"{}\"/>\n", format::HtmlEscape("can't tell: " + row.reason));
    }
    out += fmt::format("      <system-out>{}</system-out>\n    </testcase>\n", format::HtmlEscape(detail));
  }
  out += "  </testsuite>\n</testsuites>\n";
  return out;
}

}  // namespace rankscope::report
