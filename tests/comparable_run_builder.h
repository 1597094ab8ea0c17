// Weak-scaling runs built by hand for the scaling and comparison tests: what `rankscope
// sweep` would load from a run of `world_size` ranks, with the step times given.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "compare/comparable.h"

namespace rankscope::testing {

struct WeakRunSpec {
  int world_size = 1;
  std::vector<double> step_ms;          // each aggregated step's time; the run's is their median
  std::string program;                  // WorkloadIdentity::program
  std::string command;
  std::string backend;                  // for world_size > 1; a single rank has none
  int batch_per_rank = 32;
  double allreduce_bytes = 4e6;         // per step, for world_size > 1
  double exposed_ms_per_extra_rank = 0; // exposed comm = this · (world_size − 1), every step
  double comm_compute_per_extra_rank = 0;
};

inline compare::ComparableRun MakeWeakRun(const WeakRunSpec& spec) {
  constexpr double kMs = 1e6;
  const int n = spec.world_size;
  compare::ComparableRun run;
  run.source = "sweep/n" + std::to_string(n);
  run.command = spec.command;
  run.workload.program = spec.program;
  run.workload.backend = n > 1 ? spec.backend : "";
  run.workload.world_size = n;
  run.workload.batch_per_rank = spec.batch_per_rank;
  run.workload.accumulation = 1;
  run.workload.global_batch = spec.batch_per_rank * n;
  run.steps = static_cast<int64_t>(spec.step_ms.size());
  run.workload.strategy = "ddp";
  if (n > 1) run.allreduce_bytes_per_step = spec.allreduce_bytes;
  run.model_bytes_per_step = run.allreduce_bytes_per_step;
  const double samples = static_cast<double>(spec.batch_per_rank) * n;
  const double exposed = (n - 1) * spec.exposed_ms_per_extra_rank * kMs;
  std::vector<double> steps, throughput;
  for (double ms : spec.step_ms) {
    steps.push_back(ms * kMs);
    throughput.push_back(samples / (steps.back() / 1e9));
  }
  std::vector<double> sorted = steps;
  std::sort(sorted.begin(), sorted.end());
  const size_t mid = sorted.size() / 2;
  const double median = sorted.size() % 2 == 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
  run.metrics = {
      {"throughput", samples / (median / 1e9), throughput},
      {"step_time_ns", median, steps},
      {"exposed_comm_ns", exposed, std::vector<double>(steps.size(), exposed)},
      {"comm_compute_ratio", spec.comm_compute_per_extra_rank * (n - 1), {}},
  };
  return run;
}

}  // namespace rankscope::testing
