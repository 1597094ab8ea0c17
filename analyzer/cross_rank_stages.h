// Internal to analyzer/ and its tests: the stages of AnalyzeCrossRank (docs/metrics.md §4),
// in the order it runs them. Rank indexes are positions in the RankCollectives input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "analyzer/cross_rank.h"
#include "analyzer/rank_scan.h"
#include "analyzer/report.h"

namespace rankscope::analyzer {

// One rank's record of a collective instance.
struct CollectiveArrival {
  size_t rank_index = 0;
  const CollectiveRecord* record = nullptr;
};

// One collective as every rank of its communicator saw it (an instance, §4 "Collectives and
// matching").
struct CollectiveInstance {
  std::string kind;
  std::vector<CollectiveArrival> arrivals;  // one per rank, by rank index
};

// 1. Matching.
struct CollectiveMatch {
  std::string collective_source;              // CrossRank::collective_source
  std::vector<CollectiveInstance> matched;    // by identity
  int64_t unmatched = 0;
  std::vector<std::string> warnings;          // mixed sources, unmatched instances
};
CollectiveMatch MatchCollectives(const std::vector<RankCollectives>& ranks);

// 2. Clock alignment (§4 "Clock alignment").
struct HostClocks {
  ClockAlignment clock;         // per host, reference first; the residual over `matched`
  std::vector<size_t> host_of;  // per rank index: its host's index in clock.hosts
  std::vector<std::string> warnings;  // hosts sharing no matched instance with the reference

  // `t` of rank `rank_index` on the reference host's clock.
  int64_t Aligned(size_t rank_index, int64_t t) const { return t + clock.hosts[host_of[rank_index]].offset_ns; }
};
HostClocks AlignHostClocks(const std::vector<RankCollectives>& ranks, const std::vector<CollectiveInstance>& matched);

// 3. Wait and transfer (§4 "Wait and transfer").
struct InstanceWait {
  size_t last_rank_index = 0;      // the arrival that started last (the lowest rank on a tie)
  int64_t wait_ns = 0;             // Σ_r wait_r: the wait the last rank caused
  int64_t transfer_ns = 0;         // Σ_r transfer_r
  int64_t median_transfer_ns = 0;  // median over ranks of transfer_r, rounded
};
struct WaitAttribution {
  std::vector<InstanceWait> instances;  // parallel to the matched instances
  // Per rank index: rank, wait_ns, transfer_ns, times_last, wait_caused_ns (the rest is
  // filled by later stages).
  std::vector<RankWait> waits;
  // Per rank index, per step of its `steps`: its wait at instances it started in that
  // step's window (own, unaligned clock).
  std::vector<std::vector<int64_t>> step_wait_ns;
  // Per step number: per rank index, the wait it caused as the last rank of the instances
  // of that step (the last rank's step window that holds its start).
  std::map<int64_t, std::vector<int64_t>> caused_by_step;
};
WaitAttribution AttributeWaits(const std::vector<RankCollectives>& ranks,
                               const std::vector<CollectiveInstance>& matched, const HostClocks& clocks);

// The index of the step whose window [start, end) holds `t`; nullopt when none does.
// `steps` are sorted by start and disjoint.
std::optional<size_t> StepIndexAt(const std::vector<StepRange>& steps, int64_t t);

// 4. Per collective kind, with nccl-tests' bus bandwidth (§4 "Bus bandwidth") and each
// rank's end-aligned split (§4 "End-aligned split"); largest wait + transfer first.
std::vector<CollectiveKindSummary> SummarizeKinds(const std::vector<RankCollectives>& ranks,
                                                  const std::vector<CollectiveInstance>& matched,
                                                  const std::vector<InstanceWait>& waits);

// 5. The heatmap rows, one per step number of any rank, with the rank that caused the most
// wait in each (§4 "Stragglers").
struct StepRows {
  std::vector<StepWait> rows;
  std::vector<int64_t> steps_most_wait;  // per rank index: aggregated rows where it is last_rank
};
StepRows BuildStepRows(const std::vector<RankCollectives>& ranks, const WaitAttribution& waits,
                       const std::set<int64_t>& aggregated_steps, const std::map<int64_t, double>& median_step_ns);

// 6. Sets `straggler` on each wait whose rank caused the most wait in at least half of the
// `aggregated_steps` step numbers; returns their ranks.
std::vector<int> MarkStragglers(size_t aggregated_steps, std::vector<RankWait>& waits);

}  // namespace rankscope::analyzer
