// Internal to analyzer/ and its tests: the stages that turn measured ranks into a Report
// (analyze.cc), in the order BuildReport runs them. Warnings are appended in that order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "analyzer/analyze.h"
#include "analyzer/cross_rank.h"
#include "analyzer/intervals.h"
#include "analyzer/rank_scan.h"
#include "analyzer/report.h"
#include "base/status.h"

namespace rankscope::analyzer {

// One rank after its own metrics: what is left once its interval sets are gone.
struct RankResult {
  RankActivity activity;  // devices emptied
  std::vector<DeviceReport> devices;
  // The rank's compute, its devices united: kept only for a pipeline's passes or FSDP's
  // labelled all-gathers and reduce-scatters (docs/metrics.md §4 "Parallel strategies").
  IntervalSet compute;
  bool gpu = false;  // some of its activity is on a GPU (device ≥ 0)
};

// 1. Adds each rank, its event counts and whether it had device activity to `run`.
void CountRankEvents(const std::vector<RankResult>& ranks, RunInfo& run);

// 2. Fails when no rank has device activity (saying why CUPTI recorded nothing where the
// files tell); else appends the warnings about ranks without activity, invalid events and
// lost events.
Status CheckDeviceActivity(const std::vector<RankResult>& ranks, const RunInfo& run,
                           std::vector<std::string>& warnings);

// 3. Steps across the ranks with activity (docs/metrics.md §2).
struct StepsAcrossRanks {
  StepSelection selection;
  std::set<int64_t> aggregated_numbers;      // step numbers some rank aggregates
  std::map<int64_t, double> median_step_ns;  // per step number: median duration over ranks
};
// Fails when --steps selects nothing; warns when some rank has no step in the selection.
Result<StepsAcrossRanks> SelectSteps(const std::vector<RankResult>& ranks, const AnalyzeOptions& options,
                                     std::vector<std::string>& warnings);

// 4. docs/metrics.md §4 over the ranks with activity, in `ranks` order.
CrossRankResult MeasureAcrossRanks(const std::vector<RankResult>& ranks, const StepsAcrossRanks& steps);

// 5. The report's device rows, sorted by (rank, device): each device of a rank with
// activity, with the rank's waits from `cross` (per step, totals and their stats). Moves
// the rows out of `ranks`.
std::vector<DeviceReport> DeviceReportsWithWaits(std::vector<RankResult>& ranks, const CrossRankResult& cross);

// The strategy's figures (docs/metrics.md §4 "Parallel strategies"): messages matched,
// a pipeline's bubble, FSDP's exposed all-gathers; each rank on the reference clock.
Parallelism MeasureParallelism(const std::vector<RankResult>& ranks, const ClockAlignment& clock,
                               const StepsAcrossRanks& steps, std::vector<std::string>& warnings);

// 6. max / median over devices of their median `field` per step; nullopt with fewer than
// two devices or a median <= 0.
std::optional<double> SpreadAcrossDevices(const std::vector<DeviceReport>& devices, const Stats StepStats::*field);

// 7. Per run (docs/metrics.md §5).
// The workload from the first rank's meta and the first workload mark, else the step
// payload's samples.
Workload MakeWorkload(const std::vector<RankResult>& ranks, std::optional<int> world_size);
// The median over devices of their median `field`, and the worst device.
RunMetric MakeRunMetric(const std::vector<DeviceReport>& devices, const char* name, bool higher_is_better,
                        const Stats StepStats::*field);
// Ranks, steps, every run metric, the median step time and the throughput; warns when the
// batch size is unknown.
RunSummary SummarizeRun(const std::vector<DeviceReport>& devices, const RunInfo& run, int64_t steps_aggregated,
                        const Workload& workload, std::vector<std::string>& warnings);

// 8. Activities summed over ranks by (name, class), longest first, at most `top`.
std::vector<ActivitySummary> SumTopActivities(const std::vector<RankResult>& ranks, size_t top);

}  // namespace rankscope::analyzer
