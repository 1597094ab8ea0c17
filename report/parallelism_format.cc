// The parallel strategy's lines and tables (Report::parallelism), shared by every writer.
#include <fmt/format.h>

#include <algorithm>

#include "report/report_format.h"

namespace rankscope::report {

using analyzer::Report;

namespace {

std::string Duration(double ns) { return format::FormatDuration(ns); }

}  // namespace

std::string StrategyLine(const Report& report) {
  const analyzer::Parallelism& parallelism = report.parallelism;
  if (parallelism.strategy == "unknown" && !parallelism.point_to_point && !parallelism.pipeline && !parallelism.fsdp) {
    return "";
  }
  std::string line = fmt::format("parallelism: {}", parallelism.strategy);
  if (!parallelism.strategy_source.empty()) line += fmt::format(" (from the {})", parallelism.strategy_source);
  if (const auto& pipeline = parallelism.pipeline) {
    line += fmt::format(", {} stages x {} replica(s), {} micro-batches", pipeline->stages, pipeline->replicas,
                        pipeline->micro_batches);
  }
  if (const auto& fsdp = parallelism.fsdp) {
    line += fmt::format(", all-gathers {} per rank and step", Duration(fsdp->gather_ns));
    if (fsdp->exposed_gather_pct) {
      line += fmt::format(", {} of it exposed (not hidden by compute)", format::FormatPercent(*fsdp->exposed_gather_pct));
    }
  }
  if (const auto& p2p = parallelism.point_to_point) {
    line += fmt::format("; {} point-to-point message(s) matched, {} unmatched", p2p->matched, p2p->unmatched);
  }
  return line;
}

Table PointToPointTable(const Report& report) {
  Table table;
  const auto& p2p = report.parallelism.point_to_point;
  if (!p2p || p2p->routes.empty()) return table;
  table.header = {"from", "to", "messages", "bytes/msg", "receiver wait", "sender wait", "transfer", "GB/s"};
  table.numeric = {true, true, true, true, true, true, true, true};
  for (const analyzer::MessageRoute& route : p2p->routes) {
    const double per_message = route.count > 0 ? static_cast<double>(route.total_bytes) / static_cast<double>(route.count) : 0;
    table.rows.push_back({std::to_string(route.from_rank), std::to_string(route.to_rank), std::to_string(route.count),
                          format::FormatBytes(per_message), Duration(static_cast<double>(route.receiver_wait_ns)),
                          Duration(static_cast<double>(route.sender_wait_ns)),
                          Duration(static_cast<double>(route.transfer_ns)),
                          route.bandwidth_gbps ? format::FormatNumber(route.bandwidth_gbps->median, 2) : "-"});
  }
  table.notes.push_back(
      "point to point: send matched with receive; waits and transfer summed over messages, GB/s the median message's");
  return table;
}

Table PipelineTable(const Report& report) {
  Table table;
  const auto& pipeline = report.parallelism.pipeline;
  if (!pipeline) return table;
  table.header = {"replica", "stage", "rank", "window", "busy", "bubble", "neighbour wait", "transfer", "other idle",
                  "busy/mean"};
  table.numeric = std::vector<bool>(table.header.size(), true);
  for (const analyzer::PipelineStageFigures& row : pipeline->stage_rows) {
    table.rows.push_back({std::to_string(row.replica), std::to_string(row.stage), std::to_string(row.rank),
                          Duration(static_cast<double>(row.window_ns)), Duration(static_cast<double>(row.busy_ns)),
                          format::FormatPercent(row.bubble_pct), Duration(static_cast<double>(row.neighbour_wait_ns)),
                          Duration(static_cast<double>(row.transfer_ns)),
                          Duration(static_cast<double>(row.other_idle_ns)), format::FormatNumber(row.busy_vs_mean, 2)});
  }
  table.notes.push_back("medians over aggregated steps; window: the replica's first to last micro-batch pass; "
                        "bubble: idle share of the window");
  return table;
}

std::string PipelineLine(const Report& report) {
  const auto& pipeline = report.parallelism.pipeline;
  if (!pipeline) return "";
  return fmt::format("pipeline bubble {} (ideal {} for {} stages, {} micro-batches): {}",
                     format::FormatPercent(pipeline->bubble_pct), format::FormatPercent(pipeline->ideal_bubble_pct),
                     pipeline->stages, pipeline->micro_batches, pipeline->diagnosis);
}

Table FsdpLayerTable(const Report& report) {
  Table table;
  const auto& fsdp = report.parallelism.fsdp;
  if (!fsdp) return table;
  table.header = {"layer", "all-gathers", "gather", "exposed", "exposed %", "reduce-scatter", "exposed"};
  table.numeric = std::vector<bool>(table.header.size(), true);
  for (const analyzer::FsdpLayerFigures& layer : fsdp->layers) {
    table.rows.push_back({std::to_string(layer.layer), format::FormatNumber(layer.all_gathers, 1),
                          Duration(layer.gather_ns), Duration(layer.exposed_gather_ns),
                          layer.gather_ns > 0 ? format::FormatPercent(100.0 * layer.exposed_gather_ns / layer.gather_ns)
                                              : "-",
                          Duration(layer.reduce_scatter_ns), Duration(layer.exposed_reduce_scatter_ns)});
  }
  table.notes.push_back("FSDP per layer: means per rank and aggregated step; exposed: not overlapped by compute");
  return table;
}

std::vector<std::string> MemorySources(const Report& report) {
  std::vector<std::string> sources;
  for (const analyzer::RankMemory& rank : report.memory) {
    if (std::find(sources.begin(), sources.end(), rank.source) == sources.end()) sources.push_back(rank.source);
  }
  return sources;
}

std::vector<std::string> MemoryLines(const Report& report) {
  std::vector<std::string> lines;
  for (const std::string& source : MemorySources(report)) {
    const analyzer::RankMemory* highest = nullptr;
    int64_t lowest = 0;
    for (const analyzer::RankMemory& rank : report.memory) {
      if (rank.source != source) continue;
      lowest = highest == nullptr ? rank.peak_bytes : std::min(lowest, rank.peak_bytes);
      if (highest == nullptr || rank.peak_bytes > highest->peak_bytes) highest = &rank;
    }
    std::string line = fmt::format("memory · {}: peak {} on rank {} ({})", source,
                                   format::FormatBytes(static_cast<double>(highest->peak_bytes)), highest->rank,
                                   MemorySourceTitle(source));
    if (lowest != highest->peak_bytes) {
      line += fmt::format("; ranks' peaks {} to {}", format::FormatBytes(static_cast<double>(lowest)),
                          format::FormatBytes(static_cast<double>(highest->peak_bytes)));
    }
    lines.push_back(std::move(line));
  }
  return lines;
}

std::vector<std::string> MemoryCategories(const Report& report, const std::string& source) {
  std::vector<std::string> categories;
  for (const analyzer::RankMemory& rank : report.memory) {
    if (rank.source != source) continue;
    for (const analyzer::MemoryCategoryBytes& entry : rank.at_peak) {
      if (std::find(categories.begin(), categories.end(), entry.category) == categories.end()) {
        categories.push_back(entry.category);
      }
    }
  }
  return categories;
}

Table MemoryTable(const Report& report, const std::string& source) {
  Table table;
  const std::vector<std::string> categories = MemoryCategories(report, source);
  if (categories.empty()) return table;
  table.header = {"rank", "peak"};
  table.header.insert(table.header.end(), categories.begin(), categories.end());
  table.header.push_back("step peak");
  table.numeric = std::vector<bool>(table.header.size(), true);
  for (const analyzer::RankMemory& rank : report.memory) {
    if (rank.source != source) continue;
    std::vector<std::string> row = {std::to_string(rank.rank), format::FormatBytes(static_cast<double>(rank.peak_bytes))};
    for (const std::string& category : categories) {
      std::string cell = "-";
      for (const analyzer::MemoryCategoryBytes& entry : rank.at_peak) {
        if (entry.category == category) cell = format::FormatBytes(static_cast<double>(entry.bytes));
      }
      row.push_back(cell);
    }
    row.push_back(rank.step_peak_bytes ? format::FormatBytes(rank.step_peak_bytes->median) : "-");
    table.rows.push_back(std::move(row));
  }
  table.notes.push_back("memory counters: the categories at each rank's peak; step peak: median over aggregated "
                        "steps of each step's largest total");
  return table;
}

}  // namespace rankscope::report
