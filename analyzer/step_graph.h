// A run's steps as dependency graphs (critical_path.h) built from the ranks' events, and the
// critical path measured over the aggregated steps (docs/metrics.md §10 "From a run's
// events"). Internal to analyzer/: AnalyzeRun calls it with AnalyzeOptions::critical_path.
// Costs per step: O(lanes × runs × log E) per rank to find its events (path_events.h), then
// O(n log n) for the step's n events.
#pragma once

#include <cstdint>
#include <set>
#include <vector>

#include "analyzer/critical_path.h"
#include "analyzer/rank_scan.h"
#include "analyzer/report.h"

namespace rankscope::analyzer {

struct RankPathInput {
  int rank = 0;
  const RankPathEvents* events = nullptr;
  const std::vector<StepRange>* steps = nullptr;
  const std::vector<CollectiveRecord>* collectives = nullptr;
  int64_t clock_offset_ns = 0;  // added to the rank's times (§4 clock alignment)
  // Point-to-point messages (sorted by start) and, per message, its instance id (its send and
  // its receive share one; -1: unmatched): MatchMessageInstances.
  const std::vector<MessageRecord>* messages = nullptr;
  const std::vector<int64_t>* message_instances = nullptr;
};

// Which collective instance each of a rank's records belongs to: per input rank, per record
// (in `collectives` order), an instance id ≥ 0 or -1 (unmatched).
using InstanceIds = std::vector<std::vector<int64_t>>;

// Each message's instance, ids from `first_id` on: a send and the receive that matches it
// (§4 "Point to point": the n-th message from sender to receiver on a communicator) share
// one, so the receive's end waits for the send's start and the send's for the receive's.
InstanceIds MatchMessageInstances(const std::vector<RankPathInput>& ranks, int64_t first_id);

// The graph of step number `step` over the ranks that have it.
StepGraph BuildStepGraph(const std::vector<RankPathInput>& ranks, const InstanceIds& instances, int64_t step);

// The critical path of every step in `steps` (the aggregated ones), blamed and projected.
// `faster`: extra what-ifs, work whose name contains the text (any case) that many times faster;
// `bandwidth`: communication bandwidth that many times higher (×2 is always projected).
// Only steps whose events every rank that has them kept (RankPathEvents::kept_steps) are
// measured; `most_steps`: then the most measured, evenly spread (0: every one).
CriticalPathSummary MeasureCriticalPaths(const std::vector<RankPathInput>& ranks, const InstanceIds& instances,
                                         const std::set<int64_t>& steps, size_t top,
                                         const std::vector<std::pair<std::string, double>>& faster = {},
                                         size_t most_steps = 0, const std::vector<double>& bandwidth = {});

}  // namespace rankscope::analyzer
