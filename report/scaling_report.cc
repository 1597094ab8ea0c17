// The scaling study and the baseline comparison, in every output format. Tables are built
// once as Table and laid out by the shared layouts (table_layout.cc).
#include "report/scaling_report.h"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "compare/comparable_json.h"
#include "report/report_format.h"
#include "report/scaling_plot.h"

namespace rankscope::report {

using compare::kScalingFormat;
using format::RanksText;
using compare::ComparableRun;
using compare::ComparableRunToJson;
using compare::Comparison;
using compare::MetricComparison;
using compare::ProjectedPoint;
using compare::ScalingFit;
using compare::ScalingMode;
using compare::ScalingModeName;
using compare::ScalingPoint;
using compare::ScalingProjection;
using compare::ScalingTable;
using compare::Verdict;
using compare::VerdictName;
using compare::kScalingReportVersion;
namespace {

using format::FormatDuration;
using format::FormatNumber;
using format::FormatPercent;
using format::HtmlEscape;
using format::MarkdownEscape;
using Json = nlohmann::ordered_json;

std::string Or(const std::optional<double>& value, std::string (*formatter)(double)) {
  return value ? formatter(*value) : "-";
}
std::string Duration(double ns) { return format::FormatDuration(ns); }
std::string Percent(double pct) { return format::FormatPercent(pct); }
std::string EfficiencyText(double efficiency) { return format::FormatPercent(100.0 * efficiency); }
std::string Rate(double samples_per_s) { return format::FormatNumber(samples_per_s, 1); }
std::string Ratio(double ratio) { return format::FormatNumber(ratio, 2); }

// Every run on a CPU backend; a run whose backend is unknown may have used GPUs.
bool OnCpu(const ScalingTable& table) {
  for (const ComparableRun& run : table.runs) {
    if (run.workload.backend != "cpu" && run.workload.backend != "gloo") return false;
  }
  return !table.runs.empty();
}

// The shape practitioners publish (e.g. NVIDIA's and Horovod's scaling tables).
Table PublishedTable(const ScalingTable& table) {
  Table out;
  out.header = {"GPUs", "Batch Size", "Samples/sec", "Scaling Efficiency"};
  out.numeric = {true, true, true, true};
  for (const ScalingPoint& p : table.points) {
    out.rows.push_back({std::to_string(p.world_size), p.global_batch ? std::to_string(*p.global_batch) : "-",
                        Or(p.throughput, Rate), Or(p.efficiency, EfficiencyText)});
  }
  if (OnCpu(table)) out.notes.push_back("(CPU backend: GPUs counts ranks)");
  return out;
}

// The columns that explain where efficiency goes (docs/metrics.md §6).
Table DetailTable(const ScalingTable& table) {
  Table out;
  out.header = {"ranks", "global batch", "samples/s", "efficiency", "step time", "comm/compute", "exposed comm",
                "overlap", "wait"};
  out.numeric = {true, true, true, true, true, true, true, true, true};
  for (const ScalingPoint& p : table.points) {
    out.rows.push_back({std::to_string(p.world_size), p.global_batch ? std::to_string(*p.global_batch) : "-",
                        Or(p.throughput, Rate), Or(p.efficiency, EfficiencyText), Or(p.step_time_ns, Duration),
                        Or(p.comm_compute_ratio, Ratio), Or(p.exposed_comm_ns, Duration), Or(p.overlap_pct, Percent),
                        Or(p.wait_ns, Duration)});
  }
  return out;
}

std::string FitLine(const ScalingFit& fit, ScalingMode mode) {
  std::string bandwidth = "B not known (no communication sizes)";
  if (fit.bus_bandwidth_bps) {
    bandwidth = fmt::format("B = {} GB/s", format::FormatNumber(*fit.bus_bandwidth_bps / 1e9, 2));
  } else if (fit.bytes_per_step > 0) {
    bandwidth = "no bandwidth term";
  }
  // Strong scaling splits the fixed global batch: compute shrinks as N0/N.
  const char* compute = mode == ScalingMode::kStrong ? "T_c·N0/N" : "T_c";
  const std::string errors = fmt::format("error on the measured points: rms {}, max {}",
                                         format::FormatPercent(fit.rms_error_pct), format::FormatPercent(fit.max_error_pct));
  switch (fit.shape.comm) {
    case compare::CommModel::kPipeline:
      return fmt::format(
          "model T(N) = T_c·((M+N-1)/(N·M)) / ((M+N0-1)/(N0·M)) + 2(M+N-2)·a, M = {}: T_c = {}, a = {} per message on "
          "the critical path; {}",
          fit.shape.micro_batches, format::FormatDuration(fit.compute_ns), format::FormatDuration(fit.latency_ns),
          errors);
    case compare::CommModel::kFsdp:
      return fmt::format(
          "model T(N) = {} + max(0, 3(N-1)·a + 3(N-1)/N·S/B - H): T_c = {}, a = {} per hop, S = {} of parameters per "
          "step, {}, H = {} hidden; {}",
          compute, format::FormatDuration(fit.compute_ns), format::FormatDuration(fit.latency_ns),
          format::FormatBytes(fit.bytes_per_step), bandwidth, format::FormatDuration(fit.hidden_comm_ns), errors);
    case compare::CommModel::kReplicaAllReduce:
      return fmt::format(
          "model T(N) = {} + max(0, 2(D-1)·a + 2(D-1)/D·S/B - H), D = N/{} replicas: T_c = {}, a = {} per hop, S = {} "
          "per step, {}, H = {} hidden; {}",
          compute, fit.shape.stages, format::FormatDuration(fit.compute_ns), format::FormatDuration(fit.latency_ns),
          format::FormatBytes(fit.bytes_per_step), bandwidth, format::FormatDuration(fit.hidden_comm_ns), errors);
    case compare::CommModel::kRingAllReduce:
      break;
  }
  return fmt::format(
      "model T(N) = {} + max(0, 2(N-1)·a + 2(N-1)/N·S/B - H): T_c = {}, a = {} per hop, S = {} per step, {}, "
      "H = {} hidden; {}",
      compute, format::FormatDuration(fit.compute_ns), format::FormatDuration(fit.latency_ns), format::FormatBytes(fit.bytes_per_step),
      bandwidth, format::FormatDuration(fit.hidden_comm_ns), errors);
}

Table ProjectionTable(const ScalingProjection& projection) {
  Table out;
  out.header = {"ranks", "projected efficiency", "projected samples/s", "projected step time"};
  out.numeric = {true, true, true, true};
  for (const ProjectedPoint& p : projection.points) {
    out.rows.push_back({std::to_string(p.world_size), EfficiencyText(p.efficiency), Or(p.throughput, Rate),
                        format::FormatDuration(p.step_time_ns)});
  }
  return out;
}

Table RunTable(const ScalingTable& table) {
  Table out;
  out.header = {"ranks", "run", "steps"};
  out.numeric = {true, false, true};
  out.flexible_column = 1;
  for (const ComparableRun& run : table.runs) {
    out.rows.push_back({std::to_string(run.workload.world_size), run.source, std::to_string(run.steps)});
  }
  return out;
}

std::string Title(const ScalingTable& table) {
  return fmt::format("rankscope scaling, {} ranks", [&] {
    std::string sizes;
    for (const ScalingPoint& p : table.points) sizes += (sizes.empty() ? "" : ", ") + std::to_string(p.world_size);
    return sizes;
  }());
}

Json OptionalNumber(const std::optional<double>& value) {
  return value && std::isfinite(*value) ? Json(*value) : Json(nullptr);
}

Json PointToJson(const ScalingPoint& p) {
  Json o = Json::object();
  o["world_size"] = p.world_size;
  o["run"] = p.run;
  o["global_batch"] = p.global_batch ? Json(*p.global_batch) : Json(nullptr);
  o["throughput"] = OptionalNumber(p.throughput);
  o["step_time_ns"] = OptionalNumber(p.step_time_ns);
  o["efficiency"] = OptionalNumber(p.efficiency);
  o["ideal_throughput"] = OptionalNumber(p.ideal_throughput);
  o["comm_compute_ratio"] = OptionalNumber(p.comm_compute_ratio);
  o["exposed_comm_ns"] = OptionalNumber(p.exposed_comm_ns);
  o["overlap_pct"] = OptionalNumber(p.overlap_pct);
  o["wait_ns"] = OptionalNumber(p.wait_ns);
  return o;
}

Json ProjectionToJson(const ScalingProjection& projection) {
  const ScalingFit& fit = projection.fit;
  Json f = Json::object();
  f["compute_ns"] = fit.compute_ns;
  f["latency_ns"] = fit.latency_ns;
  f["transfer_ns"] = fit.transfer_ns;
  f["bytes_per_step"] = fit.bytes_per_step;
  f["bus_bandwidth_bps"] = OptionalNumber(fit.bus_bandwidth_bps);
  f["hidden_comm_ns"] = fit.hidden_comm_ns;
  f["fitted_step_ns"] = fit.fitted_step_ns;
  f["rms_error_pct"] = fit.rms_error_pct;
  f["max_error_pct"] = fit.max_error_pct;
  Json points = Json::array();
  for (const ProjectedPoint& p : projection.points) {
    Json o = Json::object();
    o["world_size"] = p.world_size;
    o["step_time_ns"] = p.step_time_ns;
    o["efficiency"] = p.efficiency;
    o["throughput"] = OptionalNumber(p.throughput);
    points.push_back(std::move(o));
  }
  return Json{{"fit", std::move(f)}, {"points", std::move(points)}};
}

// ---- the comparison --------------------------------------------------------------------

std::string ChangeText(const MetricComparison& row) {
  if (std::isinf(row.change)) return row.change > 0 ? "+inf" : "-inf";
  return (row.change > 0 ? "+" : "") + format::FormatPercent(100.0 * row.change);
}

Table ComparisonTable(const Comparison& comparison) {
  Table out;
  out.header = {"ranks", "metric", "baseline", "current", "change", "tolerance", "p", "verdict"};
  out.numeric = {true, false, true, true, true, true, true, false};
  for (const MetricComparison& row : comparison.rows) {
    out.rows.push_back({std::to_string(row.world_size), row.metric,
                        format::FormatMetricValue(row.metric, row.baseline),
                        format::FormatMetricValue(row.metric, row.current), ChangeText(row),
                        format::FormatPercent(100.0 * row.tolerance), row.p_value ? fmt::format("{:.2g}", *row.p_value) : "-",
                        VerdictName(row.verdict)});
  }
  return out;
}

std::string VerdictLine(const Comparison& comparison) {
  size_t regressed = 0, improved = 0;
  for (const MetricComparison& row : comparison.rows) {
    regressed += row.verdict == Verdict::kRegressed;
    improved += row.verdict == Verdict::kImproved;
  }
  if (regressed > 0) return fmt::format("REGRESSION: {} of {} checks regressed", regressed, comparison.rows.size());
  return fmt::format("no regression: {} checks, {} improved", comparison.rows.size(), improved);
}

// Rows whose verdict a reader would not guess from the table: every verdict but
// "unchanged", and unchanged rows beyond the tolerance (too small in absolute terms).
bool NeedsExplaining(const MetricComparison& row) {
  return row.verdict != Verdict::kUnchanged || std::abs(row.change) > row.tolerance;
}

}  // namespace

std::string ScalingToText(const ScalingTable& table, const std::string& tool_version) {
  std::string out = tool_version.empty() ? "rankscope scaling\n" : fmt::format("rankscope {} scaling\n", tool_version);
  AppendWrapped(table.mode_reason, "  ", out);
  AppendWrapped("model: " + table.model_note, "  ", out);
  out += '\n';
  // The published shape, with the pipes people paste into papers and READMEs.
  const Table published = PublishedTable(table);
  std::string line = "|";
  for (const std::string& h : published.header) line += " " + h + " |";
  std::vector<size_t> widths;
  for (const std::string& h : published.header) widths.push_back(format::DisplayWidth(h));
  out += line + '\n' + "|";
  for (const size_t w : widths) out += std::string(w + 1, '-') + ":|";
  out += '\n';
  for (const auto& row : published.rows) {
    out += "|";
    for (size_t c = 0; c < row.size(); ++c) out += " " + Pad(row[c], widths[c], true) + " |";
    out += '\n';
  }
  for (const std::string& note : published.notes) out += note + '\n';
  out += '\n' + TableToText(DetailTable(table));
  out += '\n';
  if (table.projection) {
    out += "projection\n" + TableToText(ProjectionTable(*table.projection));
    AppendWrapped(FitLine(table.projection->fit, table.mode), "  ", out);
  }
  if (!table.projection_note.empty()) AppendWrapped(table.projection_note, "  ", out);
  out += '\n' + TableToText(RunTable(table));
  for (const std::string& warning : table.warnings) AppendWrapped("warning: " + warning, "  ", out);
  return ClampLines(out);
}

std::string ScalingToJson(const ScalingTable& table, const std::string& tool_version) {
  Json points = Json::array();
  for (const ScalingPoint& p : table.points) points.push_back(PointToJson(p));
  Json runs = Json::array();
  for (const ComparableRun& run : table.runs) runs.push_back(ComparableRunToJson(run));
  Json warnings = Json::array();
  for (const std::string& w : table.warnings) warnings.push_back(w);
  Json o = Json::object();
  o["format"] = kScalingFormat;
  o["version"] = kScalingReportVersion;
  o["tool_version"] = tool_version;
  o["mode"] = ScalingModeName(table.mode);
  o["mode_reason"] = table.mode_reason;
  o["points"] = std::move(points);
  o["projection"] = table.projection ? ProjectionToJson(*table.projection) : Json(nullptr);
  o["projection_note"] = table.projection_note;
  o["model"] = {{"comm", compare::CommModelName(table.model.comm)},
                {"stages", table.model.stages},
                {"micro_batches", table.model.micro_batches},
                {"note", table.model_note}};
  o["runs"] = std::move(runs);
  o["warnings"] = std::move(warnings);
  return o.dump(2, ' ', false, Json::error_handler_t::replace) + '\n';
}

std::string ScalingToMarkdown(const ScalingTable& table) {
  std::string out = "## " + format::MarkdownEscape(Title(table)) + "\n\n" + format::MarkdownEscape(table.mode_reason) +
                    "\n\nModel: " + format::MarkdownEscape(table.model_note) + "\n\n";
  out += TableToMarkdown(PublishedTable(table));
  out += "\n### Where efficiency goes\n\n" + TableToMarkdown(DetailTable(table));
  out += "\n### Projection\n\n";
  if (table.projection) {
    out += TableToMarkdown(ProjectionTable(*table.projection));
    out += '\n' + format::MarkdownEscape(FitLine(table.projection->fit, table.mode)) + "\n";
  }
  if (!table.projection_note.empty()) out += '\n' + format::MarkdownEscape(table.projection_note) + "\n";
  if (!table.warnings.empty()) {
    out += "\n### Warnings\n\n";
    for (const std::string& w : table.warnings) out += "- " + format::MarkdownEscape(w) + '\n';
  }
  return out;
}

std::string ScalingToHtml(const ScalingTable& table, const std::string& tool_version) {
  std::string out = HtmlPageStart(Title(table), tool_version);
  out += "<p>" + format::HtmlEscape(table.mode_reason) + "</p>\n";
  out += "<p>Model: " + format::HtmlEscape(table.model_note) + "</p>\n";
  out += TableToHtml(PublishedTable(table));
  out += ScalingPlotSvg(table);
  out += "<h2>Where efficiency goes</h2>\n";
  out +=
      "<p class=\"caption\">Run-level medians. exposed comm: communication not hidden by compute; overlap: "
      "share of communication hidden; wait: time spent waiting for the slowest rank at collectives.</p>\n";
  out += TableToHtml(DetailTable(table));
  out += "<h2>Projection</h2>\n";
  if (table.projection) {
    out += TableToHtml(ProjectionTable(*table.projection));
    out += "<p class=\"note\">" + format::HtmlEscape(FitLine(table.projection->fit, table.mode)) + "</p>\n";
  }
  if (!table.projection_note.empty()) out += "<p>" + format::HtmlEscape(table.projection_note) + "</p>\n";
  out += "<h2>Runs</h2>\n" + TableToHtml(RunTable(table), /*name_first_column=*/false);
  if (!table.warnings.empty()) {
    out += "<h2>Warnings</h2>\n<ul class=\"warnings\">\n";
    for (const std::string& w : table.warnings) out += "<li>" + format::HtmlEscape(w) + "</li>\n";
    out += "</ul>\n";
  }
  out += HtmlPageEnd();
  return out;
}

std::string ComparisonToText(const Comparison& comparison) {
  std::string out = fmt::format("rankscope compare: {} against the baseline {}\n", comparison.current_source,
                                comparison.baseline_source);
  out += TableToText(ComparisonTable(comparison));
  for (const MetricComparison& row : comparison.rows) {
    if (!NeedsExplaining(row)) continue;
    AppendWrapped(fmt::format("{}, {}: {}", RanksText(row.world_size), row.metric, row.reason), "  ",
                          out);
  }
  for (const std::string& note : comparison.notes) AppendWrapped("note: " + note, "  ", out);
  out += VerdictLine(comparison) + '\n';
  return out;
}

std::string ComparisonToMarkdown(const Comparison& comparison) {
  std::string out =
      fmt::format("## rankscope compare: {}\n\n", comparison.Regressed() ? "regression" : "no regression");
  out += fmt::format("`{}` against the baseline `{}`.\n\n", comparison.current_source, comparison.baseline_source);
  out += TableToMarkdown(ComparisonTable(comparison));
  std::string bullets;
  for (const MetricComparison& row : comparison.rows) {
    if (!NeedsExplaining(row)) continue;
    bullets += fmt::format("- **{} ranks, {}**: {}\n", row.world_size, format::MarkdownEscape(row.metric), format::MarkdownEscape(row.reason));
  }
  for (const std::string& note : comparison.notes) bullets += "- _note_: " + format::MarkdownEscape(note) + '\n';
  if (!bullets.empty()) out += '\n' + bullets;
  out += '\n' + format::MarkdownEscape(VerdictLine(comparison)) + '\n';
  return out;
}

std::string ComparisonToJUnit(const Comparison& comparison) {
  size_t failures = 0;
  for (const MetricComparison& row : comparison.rows) failures += row.verdict == Verdict::kRegressed;
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += fmt::format("<testsuites name=\"rankscope compare\" tests=\"{0}\" failures=\"{1}\">\n"
                     "  <testsuite name=\"rankscope.compare\" tests=\"{0}\" failures=\"{1}\" errors=\"0\" skipped=\"0\">\n",
                     comparison.rows.size(), failures);
  for (const MetricComparison& row : comparison.rows) {
    out += fmt::format("    <testcase classname=\"rankscope.compare.n{}\" name=\"{}\">\n", row.world_size,
                       format::HtmlEscape(row.metric));
    const std::string detail = fmt::format("baseline {}, current {}, change {}: {}",
                                           format::FormatMetricValue(row.metric, row.baseline),
                                           format::FormatMetricValue(row.metric, row.current), ChangeText(row),
                                           row.reason);
    if (row.verdict == Verdict::kRegressed) {
      out += fmt::format("      <failure message=\"{}\" type=\"regression\">{}</failure>\n",
                         format::HtmlEscape(fmt::format("{} regressed {}", row.metric, ChangeText(row))), format::HtmlEscape(detail));
    }
    out += fmt::format("      <system-out>{}</system-out>\n    </testcase>\n", format::HtmlEscape(detail));
  }
  out += "  </testsuite>\n</testsuites>\n";
  return out;
}

}  // namespace rankscope::report
