#include "analyzer/scaling.h"

#include <fmt/format.h>

#include <algorithm>

namespace rankscope::analyzer {
namespace {

std::optional<double> MetricMedian(const Report& report, const char* name) {
  for (const RunMetric& metric : report.summary.metrics) {
    if (metric.name == name) return metric.median;
  }
  return std::nullopt;
}

int WorldSize(const Report& report) {
  if (report.run.world_size) return *report.run.world_size;
  if (report.workload.world_size) return static_cast<int>(*report.workload.world_size);
  return static_cast<int>(report.run.ranks.size());
}

// Every run states the value, and they are all equal.
bool AllEqual(const std::vector<std::optional<int64_t>>& values) {
  if (values.empty() || !values.front()) return false;
  return std::all_of(values.begin(), values.end(), [&](const std::optional<int64_t>& v) { return v == values.front(); });
}

}  // namespace

const char* ScalingModeName(ScalingMode mode) { return mode == ScalingMode::kWeak ? "weak" : "strong"; }

Result<ScalingTable> ComputeScaling(const std::vector<const Report*>& reports) {
  if (reports.size() < 2) return InvalidArgument("scaling needs runs at two or more world sizes");
  std::vector<const Report*> runs = reports;
  std::sort(runs.begin(), runs.end(), [](const Report* a, const Report* b) { return WorldSize(*a) < WorldSize(*b); });
  for (size_t i = 0; i < runs.size(); ++i) {
    if (WorldSize(*runs[i]) <= 0) return InvalidArgument(fmt::format("{}: no world size", runs[i]->run.directory));
    if (!runs[i]->summary.step_time_ns || *runs[i]->summary.step_time_ns <= 0) {
      return InvalidArgument(fmt::format("{}: no step time to scale", runs[i]->run.directory));
    }
    if (i > 0 && WorldSize(*runs[i]) == WorldSize(*runs[i - 1])) {
      return Inconsistent(fmt::format("{} and {} both ran {} ranks", runs[i - 1]->run.directory, runs[i]->run.directory,
                                      WorldSize(*runs[i])));
    }
  }
  std::vector<std::optional<int64_t>> per_rank, global;
  for (const Report* run : runs) {
    per_rank.push_back(run->workload.batch_per_rank);
    global.push_back(run->workload.global_batch);
  }
  ScalingTable table;
  if (AllEqual(per_rank)) {
    table.mode = ScalingMode::kWeak;
    table.mode_reason = fmt::format("weak scaling: every run has {} samples per rank", *per_rank.front());
  } else if (AllEqual(global)) {
    table.mode = ScalingMode::kStrong;
    table.mode_reason = fmt::format("strong scaling: every run has a global batch of {}", *global.front());
  } else if (std::none_of(per_rank.begin(), per_rank.end(), [](const auto& v) { return v.has_value(); }) &&
             std::none_of(global.begin(), global.end(), [](const auto& v) { return v.has_value(); })) {
    // DDP keeps the per-rank batch; without any batch information assume it did.
    table.mode = ScalingMode::kWeak;
    table.mode_reason = "weak scaling assumed: the runs record no batch sizes";
    table.warnings.push_back("no run records its batch size: efficiency is from step times, T(N0) / T(N)");
  } else {
    return Inconsistent("the runs differ in both per-rank and global batch: not one workload");
  }

  const Report& base = *runs.front();
  const double n0 = WorldSize(base);
  const double t0 = *base.summary.step_time_ns;
  for (const Report* run : runs) {
    ScalingPoint point;
    point.world_size = WorldSize(*run);
    point.run = run->run.directory;
    point.global_batch = run->workload.global_batch;
    point.throughput = run->summary.throughput;
    point.step_time_ns = run->summary.step_time_ns;
    const double n = point.world_size;
    const double t = *point.step_time_ns;
    if (table.mode == ScalingMode::kWeak) {
      // X(N) / (N/N0 · X(N0)); with a fixed per-rank batch, X = N · b / T, so it is T(N0) / T(N).
      if (point.throughput && base.summary.throughput) {
        point.ideal_throughput = n / n0 * *base.summary.throughput;
        point.efficiency = *point.throughput / *point.ideal_throughput;
      } else {
        point.efficiency = t0 / t;
      }
    } else {
      point.efficiency = n0 * t0 / (n * t);
      if (base.summary.throughput) point.ideal_throughput = n / n0 * *base.summary.throughput;
    }
    point.comm_compute_ratio = MetricMedian(*run, "comm_compute_ratio");
    point.exposed_comm_ns = MetricMedian(*run, "exposed_comm_ns");
    point.overlap_pct = MetricMedian(*run, "overlap_pct");
    point.wait_ns = MetricMedian(*run, "wait_ns");
    table.points.push_back(std::move(point));
  }
  return table;
}

}  // namespace rankscope::analyzer
