// What `rankscope scale` and `rankscope compare` need of one run: its workload and its
// run-level figures with the per-step samples behind them. Made from a Report, or read back
// from the "comparable" object of a JSON report (docs/report-json.md), so that a baseline
// saved as JSON and a run analyzed now are compared by the same code.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analyzer/report.h"
#include "base/status.h"

namespace rankscope::compare {

// One run-level figure and the samples it summarizes.
struct ComparableMetric {
  std::string name;       // "step_time_ns", "throughput", "efficiency", ... (MetricInfo)
  double value = 0;       // the figure the reports print (a median)
  // One per aggregated step: the median over devices of that step's value. Empty when the
  // figure has no per-step samples.
  std::vector<double> samples;
};

// What identifies a workload: runs that differ here are not comparable (compare refuses
// them without --force). The command line itself is kept for the record but not compared:
// options such as --no-overlap change how a workload runs, not which workload it is.
struct WorkloadIdentity {
  std::string program;  // the executable's base name; for python, "python3 train.py"
  std::string backend;
  int world_size = 0;
  std::optional<int64_t> batch_per_rank, accumulation, global_batch, parameters;
  // How the run was parallelized (analyzer::Parallelism::strategy: "ddp", "fsdp", "pipeline"
  // or "unknown"), and a pipeline's stages and micro-batches per step.
  std::string strategy = "unknown";
  std::optional<int64_t> stages, micro_batches;
};

struct ComparableRun {
  std::string source;        // the run directory or JSON file it came from
  std::string command;       // the full command line, for the record
  WorkloadIdentity workload;
  int64_t steps = 0;         // aggregated steps
  // Bytes all-reduced per rank per step (from the matched all-reduce collectives); the
  // scaling projection's S. Empty for a single rank or a run without collective sizes.
  std::optional<double> allreduce_bytes_per_step;
  // The bytes per step of the strategy's communication model, its S (docs/metrics.md §6):
  // DDP the bytes all-reduced; FSDP the parameter bytes, a third of its all-gathers' and
  // reduce-scatters' sizes (everything is gathered twice and reduce-scattered once); a
  // pipeline the bytes sent between stages. Empty when unknown.
  std::optional<double> model_bytes_per_step;
  std::vector<ComparableMetric> metrics;

  const ComparableMetric* Find(std::string_view name) const;
};

// What a metric name means: its direction and its unit, for verdicts and formatting.
struct MetricInfo {
  std::string_view name;
  std::string_view label;   // for tables: "step time", "samples/s", ...
  bool higher_is_better = false;
  bool gated_by_default = false;  // checked by compare when no --metric is given
};
// Every metric a ComparableRun can hold, in report order.
const std::vector<MetricInfo>& ComparableMetrics();
const MetricInfo* FindMetricInfo(std::string_view name);

// "trainer", "python3 train.py": the program part of a command line (WorkloadIdentity).
std::string ProgramOf(std::string_view command_line);

// The run's figures: step time, throughput and the RunSummary metrics, with samples.
ComparableRun MakeComparable(const analyzer::Report& report);

// One side of a comparison: a single run (an analysis report) or a sweep (a scaling report).
struct ComparableSet {
  std::string source;  // what was read: a run or sweep directory, or a JSON file
  bool sweep = false;
  std::vector<ComparableRun> runs;  // by world size, one each
};

// Puts `set.runs` in world-size order (stable).
void SortByWorldSize(ComparableSet& set);

inline constexpr const char* kScalingFormat = "rankscope.scaling";
inline constexpr int kScalingReportVersion = 1;

// Reads the runs back from a JSON report: the "comparable" object of an analysis report
// (format "rankscope.report") or the "runs" of a scaling report ("rankscope.scaling").
// Errors (one line, naming `source`): not JSON, another format, another version, a report
// written before it carried comparable figures, a value of the wrong type.
Result<ComparableSet> ParseComparableJson(std::string_view text, const std::string& source);

}  // namespace rankscope::compare
