// METRICS.md §6: efficiency across runs of one workload at different world sizes.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "analyzer/report.h"
#include "base/status.h"

namespace rankscope::analyzer {

enum class ScalingMode { kWeak, kStrong };
const char* ScalingModeName(ScalingMode mode);

struct ScalingPoint {
  int world_size = 0;
  std::string run;                     // the run's directory
  std::optional<int64_t> global_batch;
  std::optional<double> throughput;    // samples/s
  std::optional<double> step_time_ns;  // median step time (RunSummary::step_time_ns)
  std::optional<double> efficiency;    // 1.0 = ideal
  std::optional<double> ideal_throughput;  // N/N0 · X(N0) (weak) or X(N0) · N/N0 (strong)
  // Medians over devices of the per-step medians (RunSummary::metrics).
  std::optional<double> comm_compute_ratio, exposed_comm_ns, overlap_pct, wait_ns;
};

struct ScalingTable {
  ScalingMode mode = ScalingMode::kWeak;
  std::string mode_reason;           // why this mode, in words
  std::vector<ScalingPoint> points;  // by world size, smallest first
  std::vector<std::string> warnings;
};

// Weak scaling when every run has the same per-rank batch (E = X(N) / (N/N0 · X(N0)), or
// T(N0)/T(N) without a batch), strong when the global batch is the same
// (E = N0 · T(N0) / (N · T(N))). Errors: fewer than two runs, two runs of one world size,
// runs whose batches fit neither mode, a run without a step time.
Result<ScalingTable> ComputeScaling(const std::vector<const Report*>& reports);

}  // namespace rankscope::analyzer
