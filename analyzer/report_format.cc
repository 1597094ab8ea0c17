#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "analyzer/report_format.h"

namespace rankscope::analyzer::format {
namespace {

struct Unit {
  double scale;
  const char* name;
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

std::string JoinInts(const std::vector<int>& values) {
  std::string out;
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(values[i]);
  }
  return out;
}

bool EndsWith(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

// "25.6M": parameter counts are easier to read with SI prefixes.
std::string FormatCount(int64_t count) {
  static constexpr Unit kUnits[] = {{1, ""}, {1e3, "K"}, {1e6, "M"}, {1e9, "G"}, {1e12, "T"}};
  if (std::llabs(count) < 1000) return std::to_string(count);
  std::string text = FormatScaled(static_cast<double>(count), kUnits, std::size(kUnits), true);
  text.erase(std::remove(text.begin(), text.end(), ' '), text.end());
  return text;
}

std::string SignedDuration(int64_t ns) { return (ns > 0 ? "+" : "") + FormatDuration(static_cast<double>(ns)); }

const RankWait* FindRankWait(const CrossRank& cross_rank, int rank) {
  for (const RankWait& wait : cross_rank.waits) {
    if (wait.rank == rank) return &wait;
  }
  return nullptr;
}

}  // namespace

std::string FormatDuration(double ns) {
  static constexpr Unit kUnits[] = {{1, "ns"}, {1e3, "us"}, {1e6, "ms"}, {1e9, "s"}};
  return FormatScaled(ns, kUnits, std::size(kUnits), true);
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

std::string RanksText(int world_size) { return fmt::format("{} rank{}", world_size, world_size == 1 ? "" : "s"); }

std::string FormatNumber(double value, int decimals) {
  if (!std::isfinite(value)) return "-";
  return fmt::format("{:.{}f}", value, decimals);
}

std::string DeviceName(int device) { return device == kCpuDevice ? "cpu" : fmt::format("gpu {}", device); }

std::string DeviceLabel(int rank, int device) { return fmt::format("rank {} {}", rank, DeviceName(device)); }

std::string FormatMetricValue(std::string_view metric_name, double value) {
  if (EndsWith(metric_name, "_ns")) return FormatDuration(value);
  if (EndsWith(metric_name, "_pct")) return FormatPercent(value);
  if (metric_name == "throughput") return FormatNumber(value, 1) + " samples/s";
  if (metric_name == "efficiency") return FormatPercent(100.0 * value);
  return FormatNumber(value, 2);
}

double NiceStep(double span, int ticks) {
  if (!(span > 0) || !std::isfinite(span)) return 1;
  const double raw = span / ticks;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  const double fraction = raw / power;
  const double nice = fraction <= 1 ? 1 : fraction <= 2 ? 2 : fraction <= 5 ? 5 : 10;
  return nice * power;
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

std::vector<std::pair<std::string, std::string>> SummaryItems(const Report& report) {
  std::vector<std::pair<std::string, std::string>> items;
  const RunInfo& run = report.run;

  std::string run_text = run.directory.empty() ? "-" : run.directory;
  if (!run.run_id.empty()) run_text += fmt::format(" (run {})", run.run_id);
  items.emplace_back("run", run_text);

  std::string ranks_text = run.world_size ? fmt::format("{} of {} analyzed", run.ranks.size(), *run.world_size)
                                          : fmt::format("{} analyzed", run.ranks.size());
  if (!run.missing_ranks.empty()) ranks_text += "; missing: " + JoinInts(run.missing_ranks);
  if (!run.ranks_without_activity.empty()) {
    ranks_text += "; without device activity: " + JoinInts(run.ranks_without_activity);
  }
  if (!run.unfinished_files.empty())
    ranks_text += fmt::format("; {} unfinished file(s)", run.unfinished_files.size());
  items.emplace_back("ranks", ranks_text);

  const StepSelection& steps = report.steps;
  std::string steps_text = fmt::format("{} found, {} aggregated", steps.steps_found, steps.steps_aggregated);
  if (!steps.source.empty()) steps_text += ", from " + steps.source;
  if (steps.skip_steps > 0) steps_text += fmt::format("; first {} skipped as warm-up", steps.skip_steps);
  if (steps.first || steps.last) {
    steps_text += fmt::format("; --steps {}..{}", steps.first ? std::to_string(*steps.first) : "",
                              steps.last ? std::to_string(*steps.last) : "");
  }
  items.emplace_back("steps", steps_text);

  items.emplace_back("step time", report.summary.step_time_ns
                                      ? FormatDuration(*report.summary.step_time_ns) + " (median over ranks)"
                                      : "-");
  items.emplace_back("throughput", report.summary.throughput
                                       ? FormatNumber(*report.summary.throughput, 1) + " samples/s"
                                       : "- (needs the global batch and a step time)");

  const Workload& workload = report.workload;
  std::string batch_text = workload.global_batch ? std::to_string(*workload.global_batch) : "unknown";
  if (workload.batch_per_rank && workload.world_size && workload.accumulation) {
    batch_text += fmt::format(" = {} x {} x {} (batch x world x accumulation)", *workload.batch_per_rank,
                              *workload.world_size, *workload.accumulation);
  }
  items.emplace_back("global batch", batch_text);

  std::vector<std::string> workload_parts;
  if (!workload.command.empty()) workload_parts.push_back(workload.command);
  if (!workload.backend.empty()) workload_parts.push_back("backend " + workload.backend);
  if (workload.parameters) workload_parts.push_back(FormatCount(*workload.parameters) + " parameters");
  if (workload.steps) workload_parts.push_back(fmt::format("{} steps planned", *workload.steps));
  std::string workload_text;
  for (size_t i = 0; i < workload_parts.size(); ++i) workload_text += (i > 0 ? ", " : "") + workload_parts[i];
  if (workload_text.empty()) workload_text = "unknown";
  if (!workload.source.empty()) workload_text += " (from " + workload.source + ")";
  items.emplace_back("workload", workload_text);

  items.emplace_back("events", fmt::format("{} read, {} invalid, {} dropped", run.events, run.invalid_events,
                                           run.dropped_events));
  return items;
}

Table RankTable(const Report& report, bool with_host) {
  Table table;
  table.header = {"rank", "device"};
  table.numeric = {true, false};
  if (with_host) {
    table.header.push_back("host");
    table.numeric.push_back(false);
  }
  for (const char* column : {"step", "compute", "comm", "exposed", "overlap", "comm/comp", "util", "wait"}) {
    table.header.push_back(column);
    table.numeric.push_back(true);
  }
  bool any_totals = false;
  for (const DeviceReport& device : report.ranks) {
    std::vector<std::string> row = {std::to_string(device.rank), DeviceName(device.device)};
    if (with_host) row.push_back(device.host.empty() ? "-" : device.host);
    const StepStats& stats = device.step_stats;
    if (stats.step_ns.count > 0) {
      row.push_back(FormatDuration(stats.step_ns.median));
      row.push_back(FormatDuration(stats.compute_ns.median));
      row.push_back(FormatDuration(stats.comm_ns.median));
      row.push_back(FormatDuration(stats.exposed_comm_ns.median));
      row.push_back(FormatPercent(stats.overlap_pct.median));
      row.push_back(stats.comm_compute_ratio.count > 0 ? FormatNumber(stats.comm_compute_ratio.median, 2) : "-");
      row.push_back(FormatPercent(stats.utilization_pct.median));
      row.push_back(FormatDuration(stats.wait_ns.median));
    } else {
      // No aggregated step on this device: its whole-trace totals stand in.
      any_totals = true;
      const Breakdown& totals = device.totals;
      row.push_back(FormatDuration(static_cast<double>(totals.window_ns)) + "*");
      row.push_back(FormatDuration(static_cast<double>(totals.compute_ns)));
      row.push_back(FormatDuration(static_cast<double>(totals.comm_ns)));
      row.push_back(FormatDuration(static_cast<double>(totals.exposed_comm_ns)));
      row.push_back(FormatPercent(totals.overlap_pct));
      row.push_back(totals.comm_compute_ratio ? FormatNumber(*totals.comm_compute_ratio, 2) : "-");
      row.push_back(FormatPercent(totals.utilization_pct));
      row.push_back(FormatDuration(static_cast<double>(device.wait_ns)));
    }
    table.rows.push_back(std::move(row));
  }
  if (any_totals) table.notes.push_back("* whole trace: the device has no aggregated step");
  return table;
}

Table RunMetricTable(const Report& report) {
  Table table;
  table.header = {"metric", "median", "worst", "worst device", "better"};
  table.numeric = {false, true, true, false, false};
  for (const RunMetric& metric : report.summary.metrics) {
    table.rows.push_back(
        {metric.name, FormatMetricValue(metric.name, metric.median), FormatMetricValue(metric.name, metric.worst),
         DeviceLabel(metric.worst_rank, metric.worst_device), metric.higher_is_better ? "higher" : "lower"});
  }
  return table;
}

Table TopActivityTable(const Report& report, size_t limit) {
  Table table;
  table.header = {"name", "class", "count", "total", "share"};
  table.numeric = {false, false, true, true, true};
  table.flexible_column = 0;
  int64_t device_time = 0;
  for (const DeviceReport& device : report.ranks) {
    device_time += device.totals.compute_ns + device.totals.comm_ns + device.totals.memory_ns;
  }
  const size_t shown = std::min(limit, report.top_activities.size());
  for (size_t i = 0; i < shown; ++i) {
    const ActivitySummary& activity = report.top_activities[i];
    const std::string share =
        device_time > 0
            ? FormatPercent(100.0 * static_cast<double>(activity.total_ns) / static_cast<double>(device_time))
            : "-";
    table.rows.push_back({activity.name, ActivityClassName(activity.activity_class),
                          std::to_string(activity.count), FormatDuration(static_cast<double>(activity.total_ns)),
                          share});
  }
  return table;
}

Table CollectiveTable(const Report& report) {
  Table table;
  table.header = {"kind", "op", "count", "bytes/op", "busbw GB/s", "wait", "transfer"};
  table.numeric = {false, false, true, true, true, true, true};
  table.flexible_column = 0;
  for (const CollectiveKindSummary& kind : report.cross_rank.kinds) {
    const std::string bytes_per_op =
        kind.count > 0 ? FormatBytes(static_cast<double>(kind.total_bytes) / static_cast<double>(kind.count)) : "-";
    table.rows.push_back({kind.kind, kind.op.empty() ? "unknown" : kind.op, std::to_string(kind.count),
                          bytes_per_op, kind.busbw_gbps ? FormatNumber(kind.busbw_gbps->median, 1) : "-",
                          FormatDuration(static_cast<double>(kind.wait_ns)),
                          FormatDuration(static_cast<double>(kind.transfer_ns))});
  }
  if (!table.rows.empty()) {
    table.notes.push_back("busbw: median over instances (nccl-tests); wait, transfer: summed over ranks");
  }
  return table;
}

std::string CollectiveSourceLine(const Report& report) {
  const CrossRank& cross_rank = report.cross_rank;
  if (cross_rank.collective_source.empty() && cross_rank.matched == 0 && cross_rank.unmatched == 0) return "";
  return fmt::format("collectives: {}, {} matched across ranks, {} unmatched",
                     cross_rank.collective_source.empty() ? "unknown source" : cross_rank.collective_source,
                     cross_rank.matched, cross_rank.unmatched);
}

std::string ClockLine(const Report& report) {
  const ClockAlignment& clock = report.cross_rank.clock;
  if (clock.hosts.size() <= 1) return "";
  std::string line = "clock: ";
  for (size_t i = 0; i < clock.hosts.size(); ++i) {
    const HostClock& host = clock.hosts[i];
    if (i > 0) line += ", ";
    if (i == 0) {
      line += host.host + " (reference)";
    } else {
      line +=
          fmt::format("{} {} ({} collectives)", host.host, SignedDuration(host.offset_ns), host.collectives_used);
    }
  }
  line += clock.applied ? "; offsets applied" : "; no offset applied";
  if (clock.residual_ns) {
    line += fmt::format("; residual spread median {}, max {}", FormatDuration(clock.residual_ns->median),
                        FormatDuration(clock.residual_ns->max));
  }
  return line;
}

std::string StragglerLine(const Report& report) {
  const CrossRank& cross_rank = report.cross_rank;
  std::string spread;
  if (cross_rank.step_time_spread) {
    spread = fmt::format("max/median step time {:.2f}", *cross_rank.step_time_spread);
    if (cross_rank.compute_time_spread) {
      spread += fmt::format(", compute time {:.2f}", *cross_rank.compute_time_spread);
    }
  }
  if (cross_rank.stragglers.empty()) {
    if (!spread.empty()) return "stragglers: none (" + spread + ")";
    if (report.ranks.empty()) return "stragglers: none (no rank analyzed)";
    return report.ranks.size() == 1 ? "stragglers: none (one rank)" : "stragglers: none";
  }
  // steps_most_wait counts aggregated steps, so the aggregated steps are the denominator.
  const int64_t steps = report.steps.steps_aggregated > 0 ? report.steps.steps_aggregated
                                                          : static_cast<int64_t>(cross_rank.steps.size());
  std::string line = "stragglers: ";
  for (size_t i = 0; i < cross_rank.stragglers.size(); ++i) {
    const int rank = cross_rank.stragglers[i];
    if (i > 0) line += ", ";
    line += fmt::format("rank {}", rank);
    if (const RankWait* wait = FindRankWait(cross_rank, rank)) {
      line += fmt::format(" (last in {} of {} steps, caused {} of wait)", wait->steps_most_wait, steps,
                          FormatDuration(static_cast<double>(wait->wait_caused_ns)));
    }
  }
  if (!spread.empty()) line += "; " + spread;
  return line;
}

}  // namespace rankscope::analyzer::format
