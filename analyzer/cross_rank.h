// docs/metrics.md §4: matching collectives across ranks, clock alignment between hosts, wait vs.
// transfer, stragglers and bus bandwidth.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "analyzer/rank_scan.h"
#include "analyzer/report.h"

namespace rankscope::analyzer {

// What the cross-rank analysis needs of one rank (pointers into its RankActivity).
struct RankCollectives {
  int rank = 0;
  std::string host;
  CollectiveSource source = CollectiveSource::kNone;
  const std::vector<StepRange>* steps = nullptr;
  const std::vector<std::string>* kinds = nullptr;
  const std::vector<CollectiveRecord>* records = nullptr;
};

struct CrossRankResult {
  CrossRank cross_rank;
  // Per input rank (same order), per step of its `steps`: its wait at collectives that
  // started inside that step's window.
  std::vector<std::vector<int64_t>> step_wait_ns;
  std::vector<std::string> warnings;
};

// `aggregated_steps`: the step numbers in the aggregates; `median_step_ns`: per step
// number, the median step time across ranks (for the straggler threshold).
CrossRankResult AnalyzeCrossRank(const std::vector<RankCollectives>& ranks, const std::set<int64_t>& aggregated_steps,
                                 const std::map<int64_t, double>& median_step_ns);

// nccl-tests' bus-bandwidth factor for `op` on `ranks` ranks.
double BusBandwidthFactor(trace::CollectiveOp op, int ranks);

}  // namespace rankscope::analyzer
