// docs/metrics.md §6: efficiency across runs of one workload at different world sizes, and the
// projection of efficiency beyond the largest measured size.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "compare/comparable.h"
#include "analyzer/report.h"
#include "base/status.h"

namespace rankscope::compare {

enum class ScalingMode { kWeak, kStrong };
const char* ScalingModeName(ScalingMode mode);

struct ScalingPoint {
  int world_size = 0;
  std::string run;                     // the run's directory (or JSON file)
  std::optional<int64_t> global_batch;
  std::optional<double> throughput;    // samples/s
  std::optional<double> step_time_ns;  // median step time (RunSummary::step_time_ns)
  std::optional<double> efficiency;    // 1.0 = ideal
  std::optional<double> ideal_throughput;  // N/N0 · X(N0) (weak) or X(N0) · N/N0 (strong)
  // Medians over devices of the per-step medians (RunSummary::metrics).
  std::optional<double> comm_compute_ratio, exposed_comm_ns, overlap_pct, wait_ns;
};

// The step-time model of docs/metrics.md §6, fitted to the measured runs:
//   T(N) = T_c(N) + max(0, R(N) − H),  R(N) = 2(N−1)·α + 2(N−1)/N · S/B
// T_c(N) is the compute part (constant in weak scaling, T_c·N0/N in strong scaling), R(N)
// a ring all-reduce of the S bytes each rank all-reduces per step, and H the
// communication hidden behind compute (overlapped comm per step) at the largest run.
// T_c, α and 1/B are fitted by non-negative least squares on relative residuals.
// Which communication the projection's terms follow (docs/metrics.md §6 "Projection
// model"), from the runs' strategy.
enum class CommModel {
  kRingAllReduce,     // DDP: a ring all-reduce of S bytes, 2(N−1) hops, 2(N−1)/N · S
  kFsdp,              // FSDP: all-gather twice and reduce-scatter once, 3(N−1) hops, 3(N−1)/N · S
  kReplicaAllReduce,  // pipelines of a fixed S stages: their replicas' ring all-reduce, D = N/S
  kPipeline,          // one pipeline of N stages: compute (M+N−1)/(N·M), 2(M+N−2) messages
};
const char* CommModelName(CommModel model);

struct ModelShape {
  CommModel comm = CommModel::kRingAllReduce;
  int stages = 1;         // kReplicaAllReduce's S
  int micro_batches = 1;  // kPipeline's M
};

struct ScalingFit {
  ModelShape shape;
  double compute_ns = 0;                    // T_c at the smallest world size N0
  double latency_ns = 0;                    // α, per ring hop
  double transfer_ns = 0;                   // S/B: moving S bytes at the bus bandwidth
  double bytes_per_step = 0;                // S; 0 when the runs record no all-reduce sizes
  std::optional<double> bus_bandwidth_bps;  // B in bytes/s, when S and S/B are both known
  double hidden_comm_ns = 0;                // H
  std::vector<double> fitted_step_ns;       // the model at each measured point (ScalingTable::points)
  double rms_error_pct = 0;                 // over the measured points: 100 |fit − measured| / measured
  double max_error_pct = 0;
};

struct ProjectedPoint {
  int world_size = 0;
  double step_time_ns = 0;
  double efficiency = 0;
  std::optional<double> throughput;  // when the runs record their batch
};

struct ScalingProjection {
  ScalingFit fit;
  std::vector<ProjectedPoint> points;  // at 2× and 4× the largest measured world size
};

inline constexpr int kMinSizesToProject = 3;

struct ScalingTable {
  ScalingMode mode = ScalingMode::kWeak;
  std::string mode_reason;           // why this mode, in words
  std::vector<ScalingPoint> points;  // by world size, smallest first
  std::optional<ScalingProjection> projection;
  std::string projection_note;       // why there is no projection, or what limits it
  ModelShape model;                  // the communication the projection follows
  std::string model_note;            // which strategy it modelled, and why, in words
  // The runs, in `points` order, each with an "efficiency" metric added (per-step samples:
  // that step's efficiency against the smallest run's median), for compare.
  std::vector<ComparableRun> runs;
  std::vector<std::string> warnings;
};

// Weak scaling when every run has the same per-rank batch (E = X(N) / (N/N0 · X(N0)), or
// T(N0)/T(N) without a batch), strong when the global batch is the same
// (E = N0 · T(N0) / (N · T(N))). Errors: fewer than two runs, two runs of one world size,
// runs whose batches fit neither mode, a run without a step time.
Result<ScalingTable> ComputeScalingOfRuns(std::vector<ComparableRun> runs);
Result<ScalingTable> ComputeScaling(const std::vector<const analyzer::Report*>& reports);

// The model above: least squares over `points` (world size, step time), projected to
// `project_to`. Exposed for tests; ComputeScaling calls it with three or more sizes.
struct ScalingModelInput {
  ScalingMode mode = ScalingMode::kWeak;
  ModelShape shape;
  std::vector<int> world_sizes;
  std::vector<double> step_time_ns;
  double bytes_per_step = 0;
  double hidden_comm_ns = 0;
};
Result<ScalingFit> FitScalingModel(const ScalingModelInput& input);
double ModelStepTime(const ScalingFit& fit, ScalingMode mode, int smallest_world_size, int world_size);

}  // namespace rankscope::compare
