#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "report/report_format.h"

namespace rankscope::report {

using analyzer::ActivityClassName;
using analyzer::ActivitySummary;
using analyzer::Breakdown;
using analyzer::ClockAlignment;
using analyzer::CollectiveKindSummary;
using analyzer::CrossRank;
using analyzer::DeviceReport;
using analyzer::HostClock;
using analyzer::RankWait;
using analyzer::Report;
using analyzer::RunInfo;
using analyzer::RunMetric;
using analyzer::StepSelection;
using analyzer::StepStats;
using analyzer::Workload;
using analyzer::kCpuDevice;
namespace {

std::string JoinInts(const std::vector<int>& values) {
  std::string out;
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(values[i]);
  }
  return out;
}

std::string SignedDuration(int64_t ns) { return (ns > 0 ? "+" : "") + format::FormatDuration(static_cast<double>(ns)); }

const RankWait* FindRankWait(const CrossRank& cross_rank, int rank) {
  for (const RankWait& wait : cross_rank.waits) {
    if (wait.rank == rank) return &wait;
  }
  return nullptr;
}

}  // namespace

std::string DeviceName(int device) { return device == kCpuDevice ? "cpu" : fmt::format("gpu {}", device); }

std::string DeviceLabel(int rank, int device) { return fmt::format("rank {} {}", rank, DeviceName(device)); }

double NiceStep(double span, int ticks) {
  if (!(span > 0) || !std::isfinite(span)) return 1;
  const double raw = span / ticks;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  const double fraction = raw / power;
  const double nice = fraction <= 1 ? 1 : fraction <= 2 ? 2 : fraction <= 5 ? 5 : 10;
  return nice * power;
}

std::vector<std::pair<std::string, std::string>> SummaryItems(const Report& report) {
  std::vector<std::pair<std::string, std::string>> items;
  const RunInfo& run = report.run;

  std::string run_text = run.directory.empty() ? "-" : run.directory;
  if (!run.run_id.empty()) run_text += fmt::format(" (run {})", run.run_id);
  if (run.live) run_text += "; live: still recording, read as committed so far";
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
  // Only when it left something out: a run of one step, or no steps, aggregates all it has.
  if (steps.skip_steps > 0 && steps.steps_aggregated < steps.steps_found) {
    steps_text += fmt::format("; first {} skipped as warm-up", steps.skip_steps);
  }
  if (steps.first || steps.last) {
    steps_text += fmt::format("; --steps {}..{}", steps.first ? std::to_string(*steps.first) : "",
                              steps.last ? std::to_string(*steps.last) : "");
  }
  items.emplace_back("steps", steps_text);

  items.emplace_back("step time", report.summary.step_time_ns
                                      ? format::FormatDuration(*report.summary.step_time_ns) + " (median over ranks)"
                                      : "-");
  items.emplace_back("throughput", report.summary.throughput
                                       ? format::FormatNumber(*report.summary.throughput, 1) + " samples/s"
                                       : "- (needs the global batch and a step time)");

  const Workload& workload = report.workload;
  std::string batch_text = workload.global_batch ? std::to_string(*workload.global_batch) : "unknown";
  if (workload.batch_per_rank && workload.world_size && workload.stages && workload.global_batch &&
      *workload.world_size % *workload.stages == 0) {
    // A pipeline: each replica of `stages` ranks takes one batch per micro-batch.
    batch_text += fmt::format(" = {} x {} x {} (batch x replicas x micro-batches; {} ranks in {} stages)",
                              *workload.batch_per_rank, *workload.world_size / *workload.stages,
                              workload.micro_batches.value_or(1) * workload.accumulation.value_or(1),
                              *workload.world_size, *workload.stages);
  } else if (workload.batch_per_rank && workload.world_size && workload.accumulation) {
    batch_text += fmt::format(" = {} x {} x {} (batch x world x {})", *workload.batch_per_rank, *workload.world_size,
                              *workload.accumulation * workload.micro_batches.value_or(1),
                              workload.micro_batches ? "micro-batches" : "accumulation");
  }
  items.emplace_back("global batch", batch_text);

  std::vector<std::string> workload_parts;
  if (!workload.command.empty()) workload_parts.push_back(workload.command);
  if (!workload.backend.empty()) workload_parts.push_back("backend " + workload.backend);
  if (workload.parameters) workload_parts.push_back(format::FormatCount(*workload.parameters) + " parameters");
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
      row.push_back(format::FormatDuration(stats.step_ns.median));
      row.push_back(format::FormatDuration(stats.compute_ns.median));
      row.push_back(format::FormatDuration(stats.comm_ns.median));
      row.push_back(format::FormatDuration(stats.exposed_comm_ns.median));
      row.push_back(format::FormatPercent(stats.overlap_pct.median));
      row.push_back(stats.comm_compute_ratio.count > 0 ? format::FormatNumber(stats.comm_compute_ratio.median, 2) : "-");
      row.push_back(format::FormatPercent(stats.utilization_pct.median));
      row.push_back(format::FormatDuration(stats.wait_ns.median));
    } else {
      // No aggregated step on this device: its whole-trace totals stand in.
      any_totals = true;
      const Breakdown& totals = device.totals;
      row.push_back(format::FormatDuration(static_cast<double>(totals.window_ns)) + "*");
      row.push_back(format::FormatDuration(static_cast<double>(totals.compute_ns)));
      row.push_back(format::FormatDuration(static_cast<double>(totals.comm_ns)));
      row.push_back(format::FormatDuration(static_cast<double>(totals.exposed_comm_ns)));
      row.push_back(format::FormatPercent(totals.overlap_pct));
      row.push_back(totals.comm_compute_ratio ? format::FormatNumber(*totals.comm_compute_ratio, 2) : "-");
      row.push_back(format::FormatPercent(totals.utilization_pct));
      row.push_back(format::FormatDuration(static_cast<double>(device.wait_ns)));
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
        {metric.name, format::FormatMetricValue(metric.name, metric.median), format::FormatMetricValue(metric.name, metric.worst),
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
            ? format::FormatPercent(100.0 * static_cast<double>(activity.total_ns) / static_cast<double>(device_time))
            : "-";
    table.rows.push_back({activity.name, ActivityClassName(activity.activity_class),
                          std::to_string(activity.count), format::FormatDuration(static_cast<double>(activity.total_ns)),
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
        kind.count > 0 ? format::FormatBytes(static_cast<double>(kind.total_bytes) / static_cast<double>(kind.count)) : "-";
    table.rows.push_back({kind.kind, kind.op.empty() ? "unknown" : kind.op, std::to_string(kind.count),
                          bytes_per_op, kind.busbw_gbps ? format::FormatNumber(kind.busbw_gbps->median, 1) : "-",
                          format::FormatDuration(static_cast<double>(kind.wait_ns)),
                          format::FormatDuration(static_cast<double>(kind.transfer_ns))});
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
    line += fmt::format("; residual spread median {}, max {}", format::FormatDuration(clock.residual_ns->median),
                        format::FormatDuration(clock.residual_ns->max));
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
                          format::FormatDuration(static_cast<double>(wait->wait_caused_ns)));
    }
  }
  if (!spread.empty()) line += "; " + spread;
  return line;
}

}  // namespace rankscope::report
