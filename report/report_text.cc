// The report for a terminal: one screen, at most kMaxColumns wide, no colour codes.
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "report/report_format.h"
#include "report/report_writers.h"

namespace rankscope::report {

using analyzer::Report;
namespace {

using format::DisplayWidth;
using format::TruncateToWidth;


constexpr size_t kMaxColumns = kMaxTextColumns;
// Enough to see where the time goes while the report still fits one screen.
constexpr size_t kTopActivities = 8;

void AppendTable(const Table& table, std::string& out) { out += TableToText(table); }

// `text` cut from the start to at most `width` columns, "..." first when it was cut.
std::string KeepEnd(std::string_view text, size_t width) {
  const size_t columns = format::DisplayWidth(text);
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
  const auto items = SummaryItems(report);
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
  const Table table = RankTable(report, /*with_host=*/false);
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
  const Table table = TopActivityTable(report, kTopActivities);
  if (table.rows.empty()) return;
  out += fmt::format("\ntop activities (share of the summed compute + comm + memory time, {} of {})\n",
                     table.rows.size(), report.top_activities.size());
  AppendTable(table, out);
}

void AppendCollectives(const Report& report, std::string& out) {
  const std::string source = CollectiveSourceLine(report);
  const Table table = CollectiveTable(report);
  if (source.empty() && table.rows.empty()) return;
  out += '\n';
  if (!source.empty()) out += source + '\n';
  if (!table.rows.empty()) AppendTable(table, out);
}

void AppendRunEnd(const analyzer::HangReport& end, std::string& out) {
  out += RunEndHeading(end) + '\n';
  AppendWrapped(end.summary, "  ", out, "  ");
  const std::vector<const analyzer::CommunicatorEnd*> shown = CommunicatorsToShow(end);
  for (const analyzer::CommunicatorEnd* comm : shown) {
    out += '\n';
    AppendWrapped(CommunicatorLine(*comm), "  ", out);
    if (HasCollectives(*comm)) AppendTable(CommunicatorTable(*comm), out);
    if (const Table streams = PeerStreamTable(*comm); !streams.rows.empty()) AppendTable(streams, out);
    for (const std::string& line : MismatchLines(*comm)) AppendWrapped(line, "  ", out);
  }
  if (const size_t quiet = end.communicators.size() - shown.size(); quiet > 0) {
    out += fmt::format("\n{} other communicator(s): nothing stalled or in flight\n", quiet);
  }
  const std::vector<std::string> culprits = CulpritLines(end);
  if (!culprits.empty()) out += "\nculprits (what their threads were inside, open for):\n";
  for (const std::string& line : culprits) AppendWrapped(line, "    ", out, "  ");
  out += '\n';
  AppendWrapped(RankEndsLine(end), "  ", out);
}

}  // namespace

std::string HangReportToText(const analyzer::HangReport& report) {
  std::string out;
  AppendRunEnd(report, out);
  return ClampLines(out);
}

std::string ReportToText(const Report& report) {
  std::string out;
  AppendSummary(report, out);
  if (report.did_not_finish) {
    out += '\n';
    AppendRunEnd(*report.did_not_finish, out);
  }
  AppendRanks(report, out);
  AppendTopActivities(report, out);
  AppendCollectives(report, out);
  if (const std::string strategy = StrategyLine(report); !strategy.empty()) {
    out += '\n';
    AppendWrapped(strategy, "  ", out);
    if (const std::string pipeline = PipelineLine(report); !pipeline.empty()) AppendWrapped(pipeline, "  ", out);
    for (const Table& table : {PipelineTable(report), FsdpLayerTable(report), PointToPointTable(report)}) {
      if (!table.rows.empty()) AppendTable(table, out);
    }
  }
  for (const std::string& source : MemorySources(report)) {
    out += fmt::format("\nmemory: {} (bytes held, by category)\n", MemorySourceTitle(source));
    AppendTable(MemoryTable(report, source), out);
  }
  if (const std::string path = CriticalPathLine(report); !path.empty()) {
    out += '\n';
    AppendWrapped(path, "  ", out);
    for (const Table& table : {CriticalPathTable(report), PathWaitTable(report), WhatIfTable(report)}) {
      if (!table.rows.empty()) AppendTable(table, out);
    }
  }
  out += '\n';
  if (const std::string clock = ClockLine(report); !clock.empty()) AppendWrapped(clock, "  ", out);
  AppendWrapped(StragglerLine(report), "  ", out);
  for (const std::string& warning : report.warnings) AppendWrapped("warning: " + warning, "  ", out);
  return ClampLines(out);
}

}  // namespace rankscope::report
