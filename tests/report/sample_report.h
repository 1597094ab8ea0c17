// Hand-filled Reports for the writer tests: numbers chosen by hand, consistent with each
// other (the breakdowns partition their windows, the stats are those of the steps), so the
// writers can be checked without running the analysis.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analyzer/metrics.h"
#include "analyzer/report.h"

namespace rankscope::report::testing {

inline constexpr int64_t kMs = 1'000'000;

// A Breakdown from the five parts that partition its window.
inline analyzer::Breakdown MakeBreakdown(int64_t compute_only_ns, int64_t overlap_ns, int64_t comm_only_ns,
                               int64_t memory_only_ns, int64_t idle_ns) {
  analyzer::Breakdown breakdown;
  breakdown.compute_only_ns = compute_only_ns;
  breakdown.overlap_ns = overlap_ns;
  breakdown.comm_only_ns = comm_only_ns;
  breakdown.memory_only_ns = memory_only_ns;
  breakdown.idle_ns = idle_ns;
  breakdown.window_ns = compute_only_ns + overlap_ns + comm_only_ns + memory_only_ns + idle_ns;
  breakdown.compute_ns = compute_only_ns + overlap_ns;
  breakdown.comm_ns = comm_only_ns + overlap_ns;
  breakdown.memory_ns = memory_only_ns;  // no memory activity under compute or comm here
  breakdown.exposed_comm_ns = comm_only_ns;
  breakdown.busy_ns = breakdown.window_ns - idle_ns;
  analyzer::FillRatios(breakdown);
  return breakdown;
}

// Median, min, max and p90 of `samples`: the analyzer's own statistics, which the golden
// tests check independently.
inline analyzer::Stats StatsOf(std::vector<double> samples) { return analyzer::ComputeStats(std::move(samples)); }

// One device's report from its steps: totals sum the steps (they are back to back) and
// the stats cover the aggregated steps.
inline analyzer::DeviceReport MakeDevice(int rank, const std::string& host, const std::vector<analyzer::StepMetrics>& steps) {
  analyzer::DeviceReport device;
  device.rank = rank;
  device.device = analyzer::kCpuDevice;
  device.host = host;
  device.steps = steps;
  int64_t compute_only = 0, overlap = 0, comm_only = 0, memory_only = 0, idle = 0;
  std::vector<double> step_ns, compute_ns, comm_ns, memory_ns, overlap_ns, exposed_ns, busy_ns, idle_ns;
  std::vector<double> overlap_pct, ratio, utilization, wait_ns;
  for (const analyzer::StepMetrics& step : steps) {
    const analyzer::Breakdown& b = step.breakdown;
    compute_only += b.compute_only_ns;
    overlap += b.overlap_ns;
    comm_only += b.comm_only_ns;
    memory_only += b.memory_only_ns;
    idle += b.idle_ns;
    device.wait_ns += step.wait_ns;
    device.transfer_ns += 2 * kMs;
    if (!step.aggregated) continue;
    step_ns.push_back(static_cast<double>(b.window_ns));
    compute_ns.push_back(static_cast<double>(b.compute_ns));
    comm_ns.push_back(static_cast<double>(b.comm_ns));
    memory_ns.push_back(static_cast<double>(b.memory_ns));
    overlap_ns.push_back(static_cast<double>(b.overlap_ns));
    exposed_ns.push_back(static_cast<double>(b.exposed_comm_ns));
    busy_ns.push_back(static_cast<double>(b.busy_ns));
    idle_ns.push_back(static_cast<double>(b.idle_ns));
    overlap_pct.push_back(b.overlap_pct);
    if (b.comm_compute_ratio) ratio.push_back(*b.comm_compute_ratio);
    utilization.push_back(b.utilization_pct);
    wait_ns.push_back(static_cast<double>(step.wait_ns));
  }
  device.totals = MakeBreakdown(compute_only, overlap, comm_only, memory_only, idle);
  analyzer::StepStats& stats = device.step_stats;
  stats.step_ns = StatsOf(step_ns);
  stats.compute_ns = StatsOf(compute_ns);
  stats.comm_ns = StatsOf(comm_ns);
  stats.memory_ns = StatsOf(memory_ns);
  stats.overlap_ns = StatsOf(overlap_ns);
  stats.exposed_comm_ns = StatsOf(exposed_ns);
  stats.busy_ns = StatsOf(busy_ns);
  stats.idle_ns = StatsOf(idle_ns);
  stats.overlap_pct = StatsOf(overlap_pct);
  stats.comm_compute_ratio = StatsOf(ratio);
  stats.utilization_pct = StatsOf(utilization);
  stats.wait_ns = StatsOf(wait_ns);
  return device;
}

inline analyzer::StepMetrics MakeStep(int64_t number, int64_t start_ns, bool aggregated, analyzer::Breakdown breakdown,
                            int64_t wait_ns) {
  analyzer::StepMetrics step;
  step.number = number;
  step.start_ns = start_ns;
  step.end_ns = start_ns + breakdown.window_ns;
  step.aggregated = aggregated;
  step.breakdown = breakdown;
  step.wait_ns = wait_ns;
  return step;
}

// Two ranks of the CPU backend on two hosts, three steps (step 0 is warm-up), one
// all-reduce kind; rank 1 is slow, so rank 0 waits for it and rank 1 is the straggler.
inline analyzer::Report SampleReport() {
  analyzer::Report report;
  report.tool_version = "0.1.0-test";

  report.run.directory = "/runs/sample";
  report.run.run_id = "sample-1";
  report.run.world_size = 2;
  report.run.ranks = {0, 1};
  report.run.events = 1234;
  report.run.dropped_events = 12;

  report.workload.command = "rankscope-train";
  report.workload.backend = "gloo";
  report.workload.world_size = 2;
  report.workload.batch_per_rank = 16;
  report.workload.accumulation = 2;
  report.workload.global_batch = 64;
  report.workload.steps = 3;
  report.workload.source = "workload mark";  // parameters stays unknown: JSON null

  report.steps.source = "NVTX ranges 'step'";
  report.steps.skip_steps = 1;
  report.steps.steps_found = 3;
  report.steps.steps_aggregated = 2;
  report.compute_patterns = {"gemm"};

  const int64_t t0 = 1'700'000'000'000'000'000;
  report.ranks.push_back(MakeDevice(
      0, "node-a",
      {MakeStep(0, t0, false, MakeBreakdown(60 * kMs, 10 * kMs, 8 * kMs, 2 * kMs, 20 * kMs), 3 * kMs),
       MakeStep(1, t0 + 100 * kMs, true, MakeBreakdown(30 * kMs, 8 * kMs, 6 * kMs, 1 * kMs, 5 * kMs), 4 * kMs),
       MakeStep(2, t0 + 150 * kMs, true, MakeBreakdown(31 * kMs, 8 * kMs, 7 * kMs, 1 * kMs, 5 * kMs), 5 * kMs)}));
  report.ranks.push_back(MakeDevice(
      1, "node-b",
      {MakeStep(0, t0, false, MakeBreakdown(66 * kMs, 10 * kMs, 4 * kMs, 2 * kMs, 18 * kMs), 0),
       MakeStep(1, t0 + 100 * kMs, true, MakeBreakdown(36 * kMs, 8 * kMs, 2 * kMs, 1 * kMs, 4 * kMs), 0),
       MakeStep(2, t0 + 151 * kMs, true, MakeBreakdown(37 * kMs, 8 * kMs, 2 * kMs, 1 * kMs, 5 * kMs), 0)}));

  report.summary.ranks = 2;
  report.summary.steps = 2;
  report.summary.step_time_ns = 51.5 * kMs;  // medians 51 and 52 ms
  report.summary.throughput = 64 / 0.0515;
  report.summary.metrics = {
      {"step_ns", 51.5 * kMs, 52.0 * kMs, 1, analyzer::kCpuDevice, false},
      {"overlap_pct", 64.5, 57.1, 0, analyzer::kCpuDevice, true},
      {"comm_compute_ratio", 0.35, 0.38, 0, analyzer::kCpuDevice, false},
  };

  report.top_activities = {
      {"gemm_kernel", analyzer::ActivityClass::kCompute, 6, 310 * kMs},
      {"allreduce", analyzer::ActivityClass::kComm, 6, 87 * kMs},
      {"memcpy", analyzer::ActivityClass::kMemory, 6, 8 * kMs},
  };

  analyzer::CrossRank& cross_rank = report.cross_rank;
  cross_rank.collective_source = "comm ranges";
  cross_rank.matched = 3;
  analyzer::CollectiveKindSummary all_reduce;
  all_reduce.kind = "allreduce";
  all_reduce.op = "allreduce";
  all_reduce.count = 3;
  all_reduce.total_bytes = 3ull * 4 * 1024 * 1024;
  all_reduce.wait_ns = 12 * kMs;
  all_reduce.transfer_ns = 12 * kMs;
  all_reduce.busbw_gbps = StatsOf({1.2, 1.5, 1.8});
  cross_rank.kinds = {all_reduce};
  cross_rank.clock.hosts = {{"node-a", {0}, 0, 0}, {"node-b", {1}, 1'250'000, 3}};
  cross_rank.clock.applied = true;
  cross_rank.clock.residual_ns = StatsOf({1000, 2000, 4000});
  cross_rank.ranks = {0, 1};
  cross_rank.waits = {{0, 12 * kMs, 6 * kMs, 0, 0, 0, false}, {1, 0, 6 * kMs, 3, 12 * kMs, 2, true}};
  cross_rank.steps = {{0, false, {3 * kMs, 0}, 1}, {1, true, {4 * kMs, 0}, 1}, {2, true, {5 * kMs, 0}, 1}};
  cross_rank.stragglers = {1};
  cross_rank.step_time_spread = 1.02;
  cross_rank.compute_time_spread = 1.11;

  report.warnings = {"rank 1: 12 events were dropped before they reached the file"};
  return report;
}

// No ranks and no steps: what the writers get when nothing could be analyzed.
inline analyzer::Report EmptyReport() {
  analyzer::Report report;
  report.tool_version = "0.1.0-test";
  report.run.directory = "/runs/empty";
  report.steps.source = "whole trace (no step ranges)";
  return report;
}

}  // namespace rankscope::report::testing
