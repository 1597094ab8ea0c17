// The report in each output format. Every number comes from the Report; the writers only
// format (no metric is computed here).
#pragma once

#include <string>

#include "analyzer/report.h"

namespace rankscope::report {

// The result model as JSON (docs/report-json.md), pretty-printed, ending in a newline.
std::string ReportToJson(const analyzer::Report& report);

// One terminal screen: run summary, per-rank table, top activities and collectives, the
// straggler line, and the warnings.
std::string ReportToText(const analyzer::Report& report);

// Tables for a pull-request comment (GitHub-flavoured Markdown).
std::string ReportToMarkdown(const analyzer::Report& report);

// One self-contained HTML page (no external resources) with inline SVG charts.
std::string ReportToHtml(const analyzer::Report& report);

// The diagnosis of a run that did not finish alone (what `profile --hang-timeout` prints
// after it stopped a job): the text report's "Did not finish" section, and the JSON
// object of the report's `did_not_finish` key (docs/report-json.md).
std::string HangReportToText(const analyzer::HangReport& report);
std::string HangReportToJson(const analyzer::HangReport& report);

}  // namespace rankscope::report
