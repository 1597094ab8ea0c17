// Formatting shared by every front end of a Report: the text, Markdown and HTML writers and
// the viewer's Run tab, so that all of them show the same numbers the same way.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "analyzer/memory_series.h"
#include "analyzer/report.h"
#include "base/format.h"

namespace rankscope::report {

// "cpu" for the CPU backend (device -1), else "gpu N".
std::string DeviceName(int device);
// "rank 3 gpu 0" / "rank 3 cpu": one DeviceReport in charts and messages.
std::string DeviceLabel(int rank, int device);

// A "nice" chart tick spacing (1, 2 or 5 times a power of ten) giving about `ticks`
// ticks over [0, span]; 1 for an empty span.
double NiceStep(double span, int ticks);

// One table of the report, as already-formatted cells; each writer only lays it out.
struct Table {
  std::vector<std::string> header;
  std::vector<bool> numeric;  // per column: right-aligned
  std::vector<std::vector<std::string>> rows;
  // The column that gives up width first when a terminal table is too wide (names).
  std::optional<size_t> flexible_column;
  std::vector<std::string> notes;  // footnotes to print under the table
};

// "label: value" lines of the run summary: run, ranks, steps, step time, throughput,
// workload, events, collectives.
std::vector<std::pair<std::string, std::string>> SummaryItems(const analyzer::Report& report);
// One row per DeviceReport: medians over the aggregated steps (StepStats), or the
// whole-trace totals for a device without aggregated steps (marked and noted).
Table RankTable(const analyzer::Report& report, bool with_host);
// RunSummary::metrics: median over ranks and the worst rank.
Table RunMetricTable(const analyzer::Report& report);
// The first `limit` top activities, with their share of the summed device time.
Table TopActivityTable(const analyzer::Report& report, size_t limit);
// One row per collective kind: count, bytes per op, median busbw, wait, transfer.
Table CollectiveTable(const analyzer::Report& report);
// "collectives: NCCL kernels, 120 matched, 0 unmatched"; empty when none were seen.
std::string CollectiveSourceLine(const analyzer::Report& report);
// "clock: ..." when the ranks ran on more than one host; empty otherwise.
std::string ClockLine(const analyzer::Report& report);
// "stragglers: rank 3 (last in 7 of 8 steps, caused 412 ms of wait)" or
// "stragglers: none (max/median step time 1.02)".
std::string StragglerLine(const analyzer::Report& report);

// ---- parallel strategies: Report::parallelism (parallelism_format.cc) -----------------
// "parallelism: pipeline (workload mark), 4 stages x 1 replica, 8 micro-batches" or
// "parallelism: fsdp (workload mark), all-gathers 12.3 ms per rank and step, 41.2% of it
// exposed"; empty when the strategy is unknown and nothing was measured.
std::string StrategyLine(const analyzer::Report& report);
// One row per (sender, receiver): messages, bytes, who waited for whom, transfer,
// bandwidth; empty without matched messages.
Table PointToPointTable(const analyzer::Report& report);
// One row per pipeline stage: window, busy, bubble against the ideal, where the idle time
// went; empty without a pipeline.
Table PipelineTable(const analyzer::Report& report);
// "bubble 31.2% (ideal 27.3% for 4 stages, 8 micro-batches): <diagnosis>"; empty without a
// pipeline.
std::string PipelineLine(const analyzer::Report& report);
// One row per FSDP layer: all-gathers, their time and the exposed part, reduce-scatters;
// empty without FSDP figures.
Table FsdpLayerTable(const analyzer::Report& report);

// The sources of the report's memory counters ("nvtx", "cuda", ...), in first-seen order.
std::vector<std::string> MemorySources(const analyzer::Report& report);
using analyzer::MemorySourceTitle;  // what a source's counters measure (memory_series.h)
// One row per rank with counters of `source`: its peak, what each category held then, and
// the median over aggregated steps of each step's peak; empty without such counters.
Table MemoryTable(const analyzer::Report& report, const std::string& source);
// The critical path (Report::critical_path, docs/metrics.md §10): its headline (empty without
// one), its largest contributors, the waits on it, and the what-if projections.
std::string CriticalPathLine(const analyzer::Report& report);
Table CriticalPathTable(const analyzer::Report& report);
Table PathWaitTable(const analyzer::Report& report);
Table WhatIfTable(const analyzer::Report& report);
// "memory · <source>: peak X on rank R (what the source measures); ranks A to B": one line per
// source, for summaries (the viewer's Run tab).
std::vector<std::string> MemoryLines(const analyzer::Report& report);
// The categories of every rank's counters of `source`, in first-seen order.
std::vector<std::string> MemoryCategories(const analyzer::Report& report, const std::string& source);

// ---- a run that did not finish: Report::did_not_finish (run_end_format.cc) -------------

// "Did not finish: hang".
std::string RunEndHeading(const analyzer::HangReport& report);
// The communicators with something to show (a stalled collective, a mismatch, a send or
// receive in flight), the clearest finding first: a collective some rank never entered, a
// send or receive never matched, a mismatch, then the rest. Writers show these and count
// the others.
std::vector<const analyzer::CommunicatorEnd*> CommunicatorsToShow(const analyzer::HangReport& report);
// Whether the communicator ran collectives (not only sends and receives): its members table
// then says something.
bool HasCollectives(const analyzer::CommunicatorEnd& comm);
// "communicator 3f2a11c09e4b7d21, 4 ranks: AllReduce #5 of 8.00 MiB stalled, waited in for
// 12.4 s by ranks 0, 1, 3; never entered by rank 2".
std::string CommunicatorLine(const analyzer::CommunicatorEnd& comm);
// Its members: ranks, state, last entered, last completed, in flight for; members whose
// other cells agree share one row ("0-2, 5").
Table CommunicatorTable(const analyzer::CommunicatorEnd& comm);
// Its sends and receives in flight, with how far the peer got on the matching stream.
Table PeerStreamTable(const analyzer::CommunicatorEnd& comm);
// "mismatch in op and root at #5: ranks 0, 1, 3 AllReduce of 8.00 MiB; rank 2 ...".
std::vector<std::string> MismatchLines(const analyzer::CommunicatorEnd& comm);
// "rank 2 (missing): main: step › backward (12.5 s); pin_memory: fetch (400 ms)".
std::vector<std::string> CulpritLines(const analyzer::HangReport& report);
// "files: ranks 0, 1, 3: ended by signal 15; rank 2: never closed".
std::string RankEndsLine(const analyzer::HangReport& report);

// ---- layouts shared by every report writer (table_layout.cc) --------------------------

// Terminal reports are at most this wide.
inline constexpr size_t kMaxTextColumns = 100;
// `text` padded with spaces to `width` columns, on the left when right-aligned.
std::string Pad(std::string_view text, size_t width, bool right_aligned);
// Aligned columns, header first, then the notes; when wider than kMaxTextColumns the
// flexible column (names) is cut to fit.
std::string TableToText(const Table& table);
// Breaks `text` at spaces into lines of at most kMaxTextColumns; continuation lines are
// indented by `indent`, the first line by `first_indent`. A word longer than a line is cut
// later, by ClampLines.
void AppendWrapped(std::string_view text, std::string_view indent, std::string& out,
                   std::string_view first_indent = "");
// Every line cut to kMaxTextColumns: the width limit for what a layout did not foresee.
std::string ClampLines(std::string_view text);
// A GitHub-flavoured Markdown table, then the notes in italics.
std::string TableToMarkdown(const Table& table);
// An HTML table (numeric columns right-aligned), then the notes; `name_first_column` sets
// the first column in a narrow monospace style for long names.
std::string TableToHtml(const Table& table, bool name_first_column = false);
// The start of a self-contained page (inline style, no scripts), up to its <h1>, and its end.
std::string HtmlPageStart(std::string_view title, std::string_view tool_version);
std::string HtmlPageEnd();

}  // namespace rankscope::report
