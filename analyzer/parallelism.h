// docs/metrics.md §4 "Parallel strategies": which strategy a run used, its point-to-point
// messages matched send with receive, a pipeline's bubble per stage and where the bubble
// beyond the schedule's ideal comes from, and FSDP's all-gather time not hidden behind
// compute, per layer. Costs: the messages sorted once; then linear in the passes, steps and
// collectives, with a logarithmic lookup per collective and per measured window.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "analyzer/intervals.h"
#include "analyzer/rank_scan.h"
#include "analyzer/report.h"

namespace rankscope::analyzer {

struct RankParallelInput {
  int rank = 0;
  int64_t clock_offset_ns = 0;           // added to the rank's times: the reference clock (§4)
  const RankActivity* activity = nullptr;  // messages, passes, collectives, steps, workload
  const IntervalSet* compute = nullptr;    // the rank's compute, all devices united; may be null
  bool gpu = false;                        // its activity is on GPUs (not the CPU backend)
};

Parallelism AnalyzeParallelism(const std::vector<RankParallelInput>& ranks, const std::set<int64_t>& aggregated_steps,
                               std::vector<std::string>* warnings);

}  // namespace rankscope::analyzer
