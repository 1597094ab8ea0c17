// docs/metrics.md §5 "Memory": one source's memory counters of a rank (RankActivity::memory)
// as their peak total, what held the peak, each category's own peak, and the peak within
// each aggregated step. Linear in the samples and the steps.
#pragma once

#include <cstdint>
#include <optional>
#include <set>

#include "analyzer/rank_scan.h"
#include "analyzer/report.h"

namespace rankscope::analyzer {

// nullopt for a series without samples.
std::optional<RankMemory> MeasureMemory(const RankActivity& activity, const MemorySeries& series,
                                        const std::set<int64_t>& aggregated_steps);

}  // namespace rankscope::analyzer
