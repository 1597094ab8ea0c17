// The critical path's tables and headline (docs/metrics.md §10), shared by every writer.
#include <fmt/format.h>

#include "base/format.h"
#include "report/report_format.h"

namespace rankscope::report {

using analyzer::Report;

std::string CriticalPathLine(const Report& report) {
  if (!report.critical_path) return {};
  const analyzer::CriticalPathSummary& path = *report.critical_path;
  if (path.steps == 0) {
    return "critical path: no aggregated step had events to follow (the graph needs each rank's events "
           "inside its step ranges, on windows that overlap across ranks)" +
           (path.notes.empty() ? std::string() : "; " + path.notes.front());
  }
  std::string shares;
  for (const auto& [category, share] : path.categories) {
    if (share < 0.005) continue;
    shares += fmt::format("{}{} {}", shares.empty() ? "" : ", ", category, format::FormatPercent(share * 100));
  }
  const std::string of = path.steps_aggregated > path.steps ? fmt::format(" of {}, evenly spread", path.steps_aggregated)
                                                            : std::string();
  return fmt::format("critical path: {} (median of {}{} step(s), from the first rank's step start to the last "
                     "rank's step end); {}",
                     format::FormatDuration(static_cast<double>(path.path_ns)), path.steps, of, shares);
}

Table CriticalPathTable(const Report& report) {
  Table table;
  if (!report.critical_path || report.critical_path->top.empty()) return table;
  table.header = {"on the path", "rank", "name", "per step", "share"};
  table.numeric = {false, true, false, true, true};
  table.flexible_column = 2;
  for (const analyzer::PathContribution& c : report.critical_path->top) {
    const bool gap = c.category.ends_with("gap") || c.category == "idle";
    std::string name = c.name.empty() ? "-" : c.name;
    if (gap && !c.name.empty() && c.name.front() != '(') name = "before " + c.name;
    table.rows.push_back({c.category, std::to_string(c.rank), name,
                          format::FormatDuration(static_cast<double>(c.ns_per_step)),
                          format::FormatPercent(c.share * 100)});
  }
  table.notes.push_back("the critical path's time by what ran on it: mean per step over the measured steps");
  return table;
}

Table PathWaitTable(const Report& report) {
  Table table;
  if (!report.critical_path || report.critical_path->waits.empty()) return table;
  table.header = {"rank", "waited for", "at", "which was doing", "per step", "steps"};
  table.numeric = {true, true, false, false, true, true};
  table.flexible_column = 3;
  for (const analyzer::PathWaitSummary& w : report.critical_path->waits) {
    table.rows.push_back({std::to_string(w.waiting_rank), std::to_string(w.late_rank), w.collective.empty() ? "-" : w.collective,
                          w.late_doing.empty() ? "(a gap)" : w.late_doing,
                          format::FormatDuration(static_cast<double>(w.ns_per_step)), std::to_string(w.steps)});
  }
  table.notes.push_back("waits on the critical path: while a rank waited in a collective, the path followed the rank "
                        "that arrived last");
  return table;
}

Table WhatIfTable(const Report& report) {
  Table table;
  if (!report.critical_path || report.critical_path->what_ifs.empty()) return table;
  const analyzer::CriticalPathSummary& path = *report.critical_path;
  table.header = {"what if", "step time", "saved"};
  table.numeric = {false, true, true};
  table.flexible_column = 0;
  for (const analyzer::WhatIfSummary& w : path.what_ifs) {
    table.rows.push_back({w.label, format::FormatDuration(static_cast<double>(w.projected_step_ns)),
                          format::FormatPercent(w.gain * 100)});
  }
  table.notes.push_back(fmt::format("the step's graph re-evaluated with one change (measured: {}); nothing is "
                                    "reordered (docs/metrics.md §10)",
                                    format::FormatDuration(static_cast<double>(path.measured_step_ns))));
  return table;
}

}  // namespace rankscope::report
