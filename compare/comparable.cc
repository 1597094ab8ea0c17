#include "compare/comparable.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "analyzer/metrics.h"

namespace rankscope::compare {

using analyzer::CollectiveKindSummary;
using analyzer::ComputeStats;
using analyzer::DeviceReport;
using analyzer::Report;
using analyzer::RunMetric;
using analyzer::StepMetrics;
namespace {

// A per-step value of one device, or nothing when the step does not define it.
using StepValue = std::optional<double> (*)(const StepMetrics&);

struct StepMetricSource {
  std::string_view name;
  std::string_view run_metric;  // RunSummary::metrics name holding the figure
  StepValue value;
};

const std::vector<StepMetricSource>& StepMetricSources() {
  static const std::vector<StepMetricSource> kSources = {
      {"compute_ns", "compute_ns", [](const StepMetrics& s) -> std::optional<double> {
         return static_cast<double>(s.breakdown.compute_ns);
       }},
      {"comm_ns", "comm_ns", [](const StepMetrics& s) -> std::optional<double> {
         return static_cast<double>(s.breakdown.comm_ns);
       }},
      {"exposed_comm_ns", "exposed_comm_ns", [](const StepMetrics& s) -> std::optional<double> {
         return static_cast<double>(s.breakdown.exposed_comm_ns);
       }},
      {"overlap_ns", "", [](const StepMetrics& s) -> std::optional<double> {
         return static_cast<double>(s.breakdown.overlap_ns);
       }},
      {"overlap_pct", "overlap_pct", [](const StepMetrics& s) -> std::optional<double> {
         return s.breakdown.overlap_pct;
       }},
      {"comm_compute_ratio", "comm_compute_ratio",
       [](const StepMetrics& s) -> std::optional<double> { return s.breakdown.comm_compute_ratio; }},
      {"utilization_pct", "utilization_pct", [](const StepMetrics& s) -> std::optional<double> {
         return s.breakdown.utilization_pct;
       }},
      {"wait_ns", "wait_ns", [](const StepMetrics& s) -> std::optional<double> {
         return static_cast<double>(s.wait_ns);
       }},
  };
  return kSources;
}

std::optional<double> RunMetricMedian(const Report& report, std::string_view name) {
  for (const RunMetric& metric : report.summary.metrics) {
    if (metric.name == name) return metric.median;
  }
  return std::nullopt;
}

// Per aggregated step number, the median over devices of `value`; steps in number order.
std::vector<double> StepSamples(const Report& report, StepValue value) {
  std::map<int64_t, std::vector<double>> by_step;
  for (const DeviceReport& device : report.ranks) {
    for (const StepMetrics& step : device.steps) {
      if (!step.aggregated) continue;
      if (std::optional<double> v = value(step); v && std::isfinite(*v)) by_step[step.number].push_back(*v);
    }
  }
  std::vector<double> samples;
  samples.reserve(by_step.size());
  for (auto& [number, values] : by_step) samples.push_back(ComputeStats(std::move(values)).median);
  return samples;
}

int WorldSizeOf(const Report& report) {
  if (report.run.world_size) return *report.run.world_size;
  if (report.workload.world_size) return static_cast<int>(*report.workload.world_size);
  return static_cast<int>(report.run.ranks.size());
}

std::optional<double> AllReduceBytesPerStep(const Report& report) {
  uint64_t bytes = 0;
  for (const CollectiveKindSummary& kind : report.cross_rank.kinds) {
    if (kind.op == "allreduce") bytes += kind.total_bytes;
  }
  if (bytes == 0 || report.steps.steps_found <= 0) return std::nullopt;
  return static_cast<double>(bytes) / static_cast<double>(report.steps.steps_found);
}

std::optional<double> ModelBytesPerStep(const Report& report) {
  if (report.steps.steps_found <= 0) return std::nullopt;
  const auto per_step = [&](double bytes) -> std::optional<double> {
    if (!(bytes > 0)) return std::nullopt;
    return bytes / static_cast<double>(report.steps.steps_found);
  };
  const std::string& strategy = report.parallelism.strategy;
  if (strategy == "fsdp") {
    double bytes = 0;
    for (const CollectiveKindSummary& kind : report.cross_rank.kinds) {
      if (kind.op == "allgather" || kind.op == "reducescatter") bytes += static_cast<double>(kind.total_bytes);
    }
    return per_step(bytes / 3.0);
  }
  if (strategy == "pipeline") {
    double bytes = 0;
    if (const auto& p2p = report.parallelism.point_to_point) {
      for (const analyzer::MessageRoute& route : p2p->routes) bytes += static_cast<double>(route.total_bytes);
    }
    return per_step(bytes);
  }
  return AllReduceBytesPerStep(report);
}

}  // namespace

const std::vector<MetricInfo>& ComparableMetrics() {
  static const std::vector<MetricInfo> kMetrics = {
      {"throughput", "throughput (samples/s)", true, true},
      {"step_time_ns", "step time", false, true},
      {"efficiency", "scaling efficiency", true, true},
      {"exposed_comm_ns", "exposed comm", false, true},
      {"comm_compute_ratio", "comm/compute ratio", false, true},
      {"overlap_pct", "overlap", true, false},
      {"utilization_pct", "utilization", true, false},
      {"compute_ns", "compute", false, false},
      {"comm_ns", "comm", false, false},
      {"overlap_ns", "overlapped comm", true, false},
      {"wait_ns", "wait", false, false},
  };
  return kMetrics;
}

const MetricInfo* FindMetricInfo(std::string_view name) {
  for (const MetricInfo& info : ComparableMetrics()) {
    if (info.name == name) return &info;
  }
  return nullptr;
}

const ComparableMetric* ComparableRun::Find(std::string_view name) const {
  for (const ComparableMetric& metric : metrics) {
    if (metric.name == name) return &metric;
  }
  return nullptr;
}

std::string ProgramOf(std::string_view command_line) {
  std::vector<std::string_view> words;
  size_t at = 0;
  while (at < command_line.size()) {
    const size_t start = command_line.find_first_not_of(' ', at);
    if (start == std::string_view::npos) break;
    const size_t end = std::min(command_line.find(' ', start), command_line.size());
    words.push_back(command_line.substr(start, end - start));
    at = end;
  }
  auto base_name = [](std::string_view path) {
    const size_t slash = path.rfind('/');
    return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
  };
  if (words.empty()) return "";
  std::string program = base_name(words.front());
  // An interpreter runs many workloads: the script names the workload.
  if (program.rfind("python", 0) == 0) {
    for (size_t i = 1; i < words.size(); ++i) {
      if (words[i] == "-m" && i + 1 < words.size()) return program + " -m " + std::string(words[i + 1]);
      if (!words[i].empty() && words[i].front() != '-') return program + " " + base_name(words[i]);
    }
  }
  return program;
}

ComparableRun MakeComparable(const Report& report) {
  ComparableRun run;
  run.source = report.run.directory;
  run.command = report.workload.command;
  run.workload.program = ProgramOf(report.workload.command);
  run.workload.backend = report.workload.backend;
  run.workload.world_size = WorldSizeOf(report);
  run.workload.batch_per_rank = report.workload.batch_per_rank;
  run.workload.accumulation = report.workload.accumulation;
  run.workload.global_batch = report.workload.global_batch;
  run.workload.parameters = report.workload.parameters;
  run.steps = report.summary.steps;
  run.allreduce_bytes_per_step = AllReduceBytesPerStep(report);
  run.model_bytes_per_step = ModelBytesPerStep(report);
  run.workload.strategy = report.parallelism.strategy;
  run.workload.stages = report.workload.stages;
  run.workload.micro_batches = report.workload.micro_batches;

  const std::vector<double> step_times = StepSamples(report, [](const StepMetrics& s) -> std::optional<double> {
    return static_cast<double>(s.breakdown.window_ns);
  });
  if (report.summary.throughput && report.workload.global_batch) {
    std::vector<double> throughput;
    for (const double ns : step_times) {
      if (ns > 0) throughput.push_back(static_cast<double>(*report.workload.global_batch) / (ns / 1e9));
    }
    run.metrics.push_back({"throughput", *report.summary.throughput, std::move(throughput)});
  }
  if (report.summary.step_time_ns) run.metrics.push_back({"step_time_ns", *report.summary.step_time_ns, step_times});
  for (const StepMetricSource& source : StepMetricSources()) {
    std::vector<double> samples = StepSamples(report, source.value);
    std::optional<double> value =
        source.run_metric.empty() ? std::nullopt : RunMetricMedian(report, source.run_metric);
    // A figure the summary does not carry is the median of its per-step samples.
    if (!value && !samples.empty()) value = ComputeStats(samples).median;
    if (value) run.metrics.push_back({std::string(source.name), *value, std::move(samples)});
  }
  return run;
}

void SortByWorldSize(ComparableSet& set) {
  std::stable_sort(set.runs.begin(), set.runs.end(), [](const ComparableRun& a, const ComparableRun& b) {
    return a.workload.world_size < b.workload.world_size;
  });
}

}  // namespace rankscope::compare
