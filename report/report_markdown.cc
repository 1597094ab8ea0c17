// The report as GitHub-flavoured Markdown, for a pull-request comment.
#include <fmt/format.h>

#include <string>
#include <vector>

#include "report/report_format.h"
#include "report/report_writers.h"

namespace rankscope::report {

using analyzer::Report;
namespace {

using format::MarkdownEscape;

// A comment is read in full, so it lists more activities than the terminal does.
constexpr size_t kTopActivities = 10;

void AppendTable(const Table& table, std::string& out) { out += TableToMarkdown(table); }

void AppendSection(const std::string& title, std::string& out) { out += "\n### " + title + "\n\n"; }

void AppendRunEnd(const analyzer::HangReport& end, std::string& out) {
  AppendSection(RunEndHeading(end), out);
  out += MarkdownEscape(end.summary) + "\n";
  const std::vector<const analyzer::CommunicatorEnd*> shown = CommunicatorsToShow(end);
  for (const analyzer::CommunicatorEnd* comm : shown) {
    out += "\n" + MarkdownEscape(CommunicatorLine(*comm)) + "\n";
    if (HasCollectives(*comm)) {
      out += '\n';
      AppendTable(CommunicatorTable(*comm), out);
    }
    if (const Table streams = PeerStreamTable(*comm); !streams.rows.empty()) {
      out += '\n';
      AppendTable(streams, out);
    }
    for (const std::string& line : MismatchLines(*comm)) out += "\n" + MarkdownEscape(line) + "\n";
  }
  if (const size_t quiet = end.communicators.size() - shown.size(); quiet > 0) {
    out += fmt::format("\n{} other communicator(s): nothing stalled or in flight.\n", quiet);
  }
  const std::vector<std::string> culprits = CulpritLines(end);
  if (!culprits.empty()) out += "\nCulprits (what their threads were inside, open for):\n\n";
  for (const std::string& line : culprits) out += "- " + MarkdownEscape(line) + '\n';
  out += "\n" + MarkdownEscape(RankEndsLine(end)) + "\n";
}

}  // namespace

std::string ReportToMarkdown(const Report& report) {
  std::string out = "## rankscope report";
  if (!report.run.directory.empty()) out += ": " + format::MarkdownEscape(report.run.directory);
  out += "\n\n";

  Table summary;
  summary.header = {"", ""};
  summary.numeric = {false, false};
  for (auto& [label, value] : SummaryItems(report)) summary.rows.push_back({label, value});
  AppendTable(summary, out);

  if (report.did_not_finish) AppendRunEnd(*report.did_not_finish, out);

  AppendSection("Per rank", out);
  out +=
      "Medians over the aggregated steps. _exposed_: communication not hidden by compute; "
      "_overlap_: share of communication hidden; _util_: busy share of the step.\n\n";
  const Table ranks = RankTable(report, /*with_host=*/true);
  if (ranks.rows.empty()) {
    out += "No rank with device activity.\n";
  } else {
    AppendTable(ranks, out);
  }

  if (const Table metrics = RunMetricTable(report); !metrics.rows.empty()) {
    AppendSection("Run metrics", out);
    out += "Median over ranks of the per-rank medians, and the worst rank.\n\n";
    AppendTable(metrics, out);
  }

  if (const Table activities = TopActivityTable(report, kTopActivities); !activities.rows.empty()) {
    AppendSection("Top activities", out);
    out += "Summed over ranks; _share_ is of the summed compute + comm + memory time.\n\n";
    AppendTable(activities, out);
  }

  const std::string source = CollectiveSourceLine(report);
  const Table collectives = CollectiveTable(report);
  if (!source.empty() || !collectives.rows.empty()) {
    AppendSection("Collectives", out);
    if (!source.empty()) out += format::MarkdownEscape(source) + "\n\n";
    if (!collectives.rows.empty()) AppendTable(collectives, out);
  }

  if (const std::string strategy = StrategyLine(report); !strategy.empty()) {
    AppendSection("Parallelism", out);
    out += format::MarkdownEscape(strategy) + "\n\n";
    if (const std::string pipeline = PipelineLine(report); !pipeline.empty()) {
      out += format::MarkdownEscape(pipeline) + "\n\n";
    }
    for (const Table& table : {PipelineTable(report), FsdpLayerTable(report), PointToPointTable(report)}) {
      if (!table.rows.empty()) AppendTable(table, out);
    }
  }

  for (const std::string& memory_source : MemorySources(report)) {
    AppendSection("Memory: " + MemorySourceTitle(memory_source), out);
    AppendTable(MemoryTable(report, memory_source), out);
  }

  if (const std::string path = CriticalPathLine(report); !path.empty()) {
    AppendSection("Critical path", out);
    out += format::MarkdownEscape(path) + "\n";
    for (const Table& table : {CriticalPathTable(report), PathWaitTable(report), WhatIfTable(report)}) {
      if (!table.rows.empty()) AppendTable(table, out);
    }
  }

  AppendSection("Stragglers", out);
  out += format::MarkdownEscape(StragglerLine(report)) + "\n";
  if (const std::string clock = ClockLine(report); !clock.empty()) {
    out += '\n' + format::MarkdownEscape(clock) + "\n";
  }

  if (!report.warnings.empty()) {
    AppendSection("Warnings", out);
    for (const std::string& warning : report.warnings) out += "- " + format::MarkdownEscape(warning) + '\n';
  }
  return out;
}

}  // namespace rankscope::report
