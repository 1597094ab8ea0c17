#include "analyzer/analyze.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "analyzer/analyze_stages.h"
#include "analyzer/cross_rank.h"
#include "analyzer/cross_rank_stages.h"
#include "analyzer/parallelism.h"
#include "analyzer/hang.h"
#include "analyzer/memory.h"
#include "analyzer/metrics.h"
#include "analyzer/parallel_internal.h"
#include "analyzer/rank_scan.h"
#include "analyzer/step_graph.h"
#include "trace/run_dir.h"

namespace rankscope::analyzer {
namespace {

std::string JoinRanks(const std::vector<int>& ranks) {
  return fmt::format("{}", fmt::join(ranks, ", "));
}

// Which of a rank's steps enter the aggregates (docs/metrics.md §2).
std::vector<bool> AggregatedSteps(const std::vector<StepRange>& steps, const AnalyzeOptions& options,
                                  bool* skipped_everything) {
  std::vector<bool> aggregated(steps.size());
  auto in_range = [&](int64_t number) {
    return (!options.first_step || number >= *options.first_step) &&
           (!options.last_step || number <= *options.last_step);
  };
  for (size_t i = 0; i < steps.size(); ++i) {
    aggregated[i] = static_cast<int64_t>(i) >= options.skip_steps && in_range(steps[i].number);
  }
  // A run shorter than its warm-up: aggregate its steps anyway rather than report nothing.
  *skipped_everything = false;
  if (!steps.empty() && std::none_of(aggregated.begin(), aggregated.end(), [](bool b) { return b; }) &&
      !options.first_step && !options.last_step) {
    *skipped_everything = true;
    aggregated.assign(steps.size(), true);
  }
  return aggregated;
}

RankResult MeasureRank(RankActivity activity, const AnalyzeOptions& options, std::vector<std::string>* warnings) {
  RankResult result;
  const bool whole_trace = activity.steps.empty();
  if (whole_trace && !activity.devices.empty()) {
    // No step ranges: the whole trace is one step (never skipped).
    Interval extent = activity.devices.front().Extent();
    for (const DeviceActivity& device : activity.devices) {
      extent = {std::min(extent.start, device.Extent().start), std::max(extent.end, device.Extent().end)};
    }
    activity.steps.push_back({0, extent.start, extent.end, 0});
  }
  bool skipped_everything = false;
  const std::vector<bool> aggregated =
      whole_trace ? std::vector<bool>(activity.steps.size(), true)
                  : AggregatedSteps(activity.steps, options, &skipped_everything);
  if (skipped_everything) {
    warnings->push_back(fmt::format("rank {}: all {} step(s) fall within --skip-steps {}; aggregating them anyway",
                                    activity.rank, activity.steps.size(), options.skip_steps));
  }
  const bool strategy_needs_compute =
      !activity.passes.empty() || std::any_of(activity.collectives.begin(), activity.collectives.end(),
                                              [](const CollectiveRecord& record) {
                                                return record.label >= 0 &&
                                                       (record.op == trace::CollectiveOp::kAllGather ||
                                                        record.op == trace::CollectiveOp::kReduceScatter);
                                              });
  result.gpu = std::any_of(activity.devices.begin(), activity.devices.end(),
                           [](const DeviceActivity& device) { return device.device >= 0; });
  if (strategy_needs_compute) {
    for (const DeviceActivity& device : activity.devices) {
      result.compute = result.compute.empty() ? device.compute : Union(result.compute, device.compute);
    }
  }
  for (DeviceActivity& device : activity.devices) {
    DeviceReport report;
    report.rank = activity.rank;
    report.device = device.device;
    report.host = activity.meta.host;
    const DeviceTimeline timeline(std::move(device));
    for (size_t i = 0; i < activity.steps.size(); ++i) {
      const StepRange& step = activity.steps[i];
      StepMetrics metrics;
      metrics.number = step.number;
      metrics.start_ns = step.start_ns;
      metrics.end_ns = step.end_ns;
      metrics.aggregated = aggregated[i];
      metrics.breakdown = timeline.Measure({step.start_ns, step.end_ns});
      report.steps.push_back(metrics);
    }
    // The whole trace, reusing the steps' breakdowns (they are sorted and disjoint).
    report.totals = MeasureCovering(timeline, timeline.Extent(), report.steps);
    // Everything but the wait statistics, here on the worker; waits need every rank.
    report.step_stats = ComputeStepStats(report.steps);
    result.devices.push_back(std::move(report));
  }
  activity.devices.clear();
  result.activity = std::move(activity);
  return result;
}

// A file's end state (hang.h), read through the reader that streams it, so that an unclosed
// file is not recovered a second time; an error only costs the diagnosis.
using RankEndRead = std::optional<Result<RankEnd>>;

template <typename Source>
Result<RankActivity> ScanRank(const Source& source, const AnalyzeOptions& options, RankEndRead* end) {
  // The critical path follows launches and syncs (it needs no copy kinds or bytes) in the
  // steps it follows, known from the ranges when they come first.
  RankScanner scanner(ScanOptions{.classify = options.classify,
                                  .step_names = options.step_names,
                                  .path_events = options.critical_path,
                                  .path_most_steps = options.critical_path_steps,
                                  .ranges_first = options.critical_path});
  const trace::StreamOptions stream{
      .host_calls = options.critical_path, .launch_links_only = true, .ranges_first = options.critical_path};
  if constexpr (std::is_same_v<Source, trace::RankTrace>) {
    RS_RETURN_IF_ERROR(FeedRankTrace(source, scanner, stream));
  } else {
    RS_ASSIGN_OR_RETURN(std::unique_ptr<trace::TraceReader> reader, trace::TraceReader::Open(source));
    // Before the stream, not after: the end state lives until the report is built, and
    // allocated after the scan's large buffers it would sit above them in this thread's
    // malloc arena and keep their memory from being reused (8 bytes more per event at peak).
    *end = ReadRankEnd(*reader);
    RS_RETURN_IF_ERROR(reader->Stream(scanner, stream));
  }
  return scanner.Finish();
}

// Scans and measures every source on worker threads; reports progress on this thread.
// `ends` gets each file's end state (none for traces in memory).
template <typename Source>
Result<std::vector<RankResult>> MeasureAll(const std::vector<Source>& sources, const AnalyzeOptions& options,
                                           std::vector<std::string>* warnings, std::vector<RankEndRead>* ends) {
  const size_t count = sources.size();
  std::vector<std::optional<RankResult>> results(count);
  std::vector<std::vector<std::string>> rank_warnings(count);
  ends->assign(count, std::nullopt);
  auto measure = [&](size_t i) -> Status {
    RS_ASSIGN_OR_RETURN(RankActivity activity, ScanRank(sources[i], options, &(*ends)[i]));
    results[i] = MeasureRank(std::move(activity), options, &rank_warnings[i]);
    return Status::Ok();
  };
  RS_RETURN_IF_ERROR(ParallelFor(count, options.threads, measure, options.progress));
  std::vector<RankResult> out;
  for (size_t i = 0; i < count; ++i) {
    warnings->insert(warnings->end(), rank_warnings[i].begin(), rank_warnings[i].end());
    out.push_back(std::move(*results[i]));
  }
  return out;
}

// Report::did_not_finish from the files' end states, when the run did not finish; a state
// that could not be read is a warning.
void DiagnoseEnd(std::vector<RankEndRead> reads, std::optional<int> world_size, Report& report) {
  std::vector<RankEnd> ends;
  for (RankEndRead& read : reads) {
    if (!read) continue;
    if (!read->ok()) {
      report.warnings.push_back("a rank's in-flight state could not be read (" + read->status().message() +
                                "): the diagnosis of how the run ended leaves it out");
      continue;
    }
    ends.push_back(std::move(**read));
  }
  HangReport end = DiagnoseRunEnd(ends, world_size);
  if (end.verdict != RunEndVerdict::kFinished) report.did_not_finish = std::move(end);
}

// The communication backend when the rank files do not name one (the collector cannot
// always tell): NCCL when its plugin or its kernels recorded collectives, "cpu" when every
// device is the CPU backend's (docs/metrics.md §1), else unknown.
std::string InferBackend(const std::vector<RankResult>& ranks) {
  bool any_device = false;
  bool only_cpu = true;
  for (const RankResult& rank : ranks) {
    const CollectiveSource source = rank.activity.collective_source;
    if (source == CollectiveSource::kPlugin || source == CollectiveSource::kKernels) return "nccl";
    for (const DeviceReport& device : rank.devices) {
      any_device = true;
      only_cpu = only_cpu && device.device == kCpuDevice;
    }
  }
  return any_device && only_cpu ? "cpu" : "";
}

// Why the collector recorded no CUDA activity on ranks without device activity, when CUPTI
// tried and could not ("off: <why>" in meta cupti.status; not when the user left `cuda`
// out): ", CUDA activity was not recorded: <why> (rank 0, 1)". "" when none says.
std::string CuptiOffNote(const std::vector<RankResult>& ranks) {
  std::map<std::string, std::vector<int>> reasons;
  for (const RankResult& rank : ranks) {
    if (!rank.devices.empty()) continue;
    auto status = rank.activity.meta.entries.find("cupti.status");
    if (status == rank.activity.meta.entries.end() || !status->second.starts_with("off: ") ||
        status->second.starts_with("off: not selected")) {
      continue;
    }
    reasons[status->second.substr(5)].push_back(rank.activity.rank);
  }
  if (reasons.empty()) return "";
  const auto& [reason, with_it] = *reasons.begin();
  return fmt::format("; CUDA activity was not recorded: {} (rank(s) {}{})", reason, JoinRanks(with_it),
                     reasons.size() > 1 ? fmt::format("; {} other reason(s) on other ranks", reasons.size() - 1) : "");
}

}  // namespace

void CountRankEvents(const std::vector<RankResult>& ranks, RunInfo& run) {
  for (const RankResult& rank : ranks) {
    run.ranks.push_back(rank.activity.rank);
    run.events += rank.activity.events;
    run.invalid_events += rank.activity.invalid_events;
    run.dropped_events += rank.activity.dropped_events;
    if (rank.devices.empty()) run.ranks_without_activity.push_back(rank.activity.rank);
  }
}

Status CheckDeviceActivity(const std::vector<RankResult>& ranks, const RunInfo& run,
                           std::vector<std::string>& warnings) {
  if (!ranks.empty() && run.ranks_without_activity.size() == ranks.size()) {
    const std::string cupti = CuptiOffNote(ranks);
    return InvalidArgument(fmt::format(
        "no rank has device activity (kernels, copies, ranges in a compute or comm category, CPU operators or "
        "gloo/nccl/c10d ranges): nothing to measure{}",
        cupti.empty() ? "; was the program annotated, or run on a GPU with CUDA tracing on?" : cupti));
  }
  if (!run.ranks_without_activity.empty()) {
    warnings.push_back(fmt::format("rank(s) {} recorded no device activity and are left out of the metrics{}",
                                   JoinRanks(run.ranks_without_activity), CuptiOffNote(ranks)));
  }
  std::vector<int> cpu_side;
  for (const RankResult& rank : ranks) {
    if (rank.activity.cpu_side) cpu_side.push_back(rank.activity.rank);
  }
  if (!cpu_side.empty()) {
    warnings.push_back(fmt::format("rank(s) {} recorded no device activity: measured from their CPU operators and "
                                   "gloo/nccl/c10d ranges instead (CPU-side rule, docs/metrics.md §1)",
                                   JoinRanks(cpu_side)));
  }
  if (run.invalid_events > 0) {
    warnings.push_back(fmt::format("{} damaged event(s) (ending before they start, or naming a string or lane the "
                                   "file does not hold) were skipped",
                                   run.invalid_events));
  }
  if (run.dropped_events > 0) {
    warnings.push_back(fmt::format("{} event(s) were lost while recording (see the files' drops tables); "
                                   "times may be understated", run.dropped_events));
  }
  return Status::Ok();
}

Result<StepsAcrossRanks> SelectSteps(const std::vector<RankResult>& ranks, const AnalyzeOptions& options,
                                     std::vector<std::string>& warnings) {
  StepsAcrossRanks out;
  StepSelection& selection = out.selection;
  selection.skip_steps = options.skip_steps;
  selection.first = options.first_step;
  selection.last = options.last_step;
  std::map<int64_t, std::vector<double>> step_times;
  int64_t fewest_aggregated = -1;
  bool any_step_ranges = false;
  for (const RankResult& rank : ranks) {
    if (rank.devices.empty()) continue;
    if (!rank.activity.step_source.empty()) {
      any_step_ranges = true;
      if (selection.source.empty()) selection.source = rank.activity.step_source;
    }
    const std::vector<StepMetrics>& steps = rank.devices.front().steps;
    selection.steps_found = std::max<int64_t>(selection.steps_found, static_cast<int64_t>(steps.size()));
    int64_t aggregated = 0;
    for (const StepMetrics& step : steps) {
      step_times[step.number].push_back(static_cast<double>(step.end_ns - step.start_ns));
      if (!step.aggregated) continue;
      ++aggregated;
      out.aggregated_numbers.insert(step.number);
    }
    fewest_aggregated = fewest_aggregated < 0 ? aggregated : std::min(fewest_aggregated, aggregated);
  }
  if (selection.source.empty()) selection.source = "whole trace (no step ranges)";
  selection.steps_aggregated = std::max<int64_t>(fewest_aggregated, 0);
  if ((options.first_step || options.last_step) && !any_step_ranges) {
    return InvalidArgument("--steps: the run has no step ranges (NVTX ranges named 'step', 'train_step' or "
                           "'ProfilerStep#N'), so no step can be selected");
  }
  if ((options.first_step || options.last_step) && out.aggregated_numbers.empty()) {
    int64_t lowest = INT64_MAX, highest = INT64_MIN;
    for (const auto& [number, times] : step_times) {
      lowest = std::min(lowest, number);
      highest = std::max(highest, number);
    }
    return InvalidArgument(fmt::format("--steps {}..{} selects no step after --skip-steps {}; the run has steps {}..{}",
                                       options.first_step ? fmt::format("{}", *options.first_step) : "",
                                       options.last_step ? fmt::format("{}", *options.last_step) : "",
                                       options.skip_steps, lowest, highest));
  }
  if (fewest_aggregated == 0 && !out.aggregated_numbers.empty()) {
    warnings.push_back("some ranks have no step in the selection; their aggregates are empty");
  }
  for (auto& [number, times] : step_times) out.median_step_ns[number] = ComputeStats(times).median;
  return out;
}

CrossRankResult MeasureAcrossRanks(const std::vector<RankResult>& ranks, const StepsAcrossRanks& steps) {
  // Each rank's steps are the windows it was measured in (MeasureRank added the
  // whole-trace step where there were no step ranges).
  std::vector<RankCollectives> inputs;
  for (const RankResult& rank : ranks) {
    if (rank.devices.empty()) continue;
    inputs.push_back({rank.activity.rank, rank.activity.meta.host, rank.activity.collective_source,
                      &rank.activity.steps, &rank.activity.collective_kinds, &rank.activity.collectives});
  }
  return AnalyzeCrossRank(inputs, steps.aggregated_numbers, steps.median_step_ns);
}

// Each aggregated step's critical path (§10) over the measured ranks, on the clocks §4 aligned.
CriticalPathSummary MeasurePaths(const std::vector<RankResult>& ranks, const StepsAcrossRanks& steps,
                                 const ClockAlignment& clock, const AnalyzeOptions& options) {
  std::vector<RankCollectives> collectives;
  std::vector<RankPathInput> inputs;
  for (const RankResult& rank : ranks) {
    if (rank.devices.empty()) continue;
    const RankActivity& a = rank.activity;
    collectives.push_back({a.rank, a.meta.host, a.collective_source, &a.steps, &a.collective_kinds, &a.collectives});
    RankPathInput input{a.rank, &a.path, &a.steps, &a.collectives, 0, &a.messages, nullptr};
    for (const HostClock& host : clock.hosts) {
      if (std::find(host.ranks.begin(), host.ranks.end(), a.rank) != host.ranks.end()) input.clock_offset_ns = host.offset_ns;
    }
    inputs.push_back(input);
  }
  // Each record's instance, from §4's matching.
  const CollectiveMatch match = MatchCollectives(collectives);
  InstanceIds ids(inputs.size());
  for (size_t r = 0; r < inputs.size(); ++r) ids[r].assign(inputs[r].collectives->size(), -1);
  for (size_t i = 0; i < match.matched.size(); ++i) {
    for (const CollectiveArrival& arrival : match.matched[i].arrivals) {
      const std::vector<CollectiveRecord>& records = *inputs[arrival.rank_index].collectives;
      const auto index = static_cast<size_t>(arrival.record - records.data());
      if (index < records.size()) ids[arrival.rank_index][index] = static_cast<int64_t>(i);
    }
  }
  // Messages: instances after the collectives'.
  const InstanceIds message_ids = MatchMessageInstances(inputs, static_cast<int64_t>(match.matched.size()));
  for (size_t r = 0; r < inputs.size(); ++r) inputs[r].message_instances = &message_ids[r];
  std::vector<std::pair<std::string, double>> faster;
  for (const AnalyzeOptions::FasterWorkWhatIf& w : options.what_ifs) faster.emplace_back(w.text, w.factor);
  return MeasureCriticalPaths(inputs, ids, steps.aggregated_numbers, options.top, faster,
                              options.critical_path_steps, options.bandwidth_what_ifs);
}

Parallelism MeasureParallelism(const std::vector<RankResult>& ranks, const ClockAlignment& clock,
                               const StepsAcrossRanks& steps, std::vector<std::string>& warnings) {
  std::vector<RankParallelInput> inputs;
  for (const RankResult& rank : ranks) {
    RankParallelInput input;
    input.rank = rank.activity.rank;
    for (const HostClock& host : clock.hosts) {
      if (std::find(host.ranks.begin(), host.ranks.end(), rank.activity.rank) != host.ranks.end()) {
        input.clock_offset_ns = host.offset_ns;
      }
    }
    input.activity = &rank.activity;
    input.compute = rank.compute.empty() ? nullptr : &rank.compute;
    input.gpu = rank.gpu;
    inputs.push_back(input);
  }
  return AnalyzeParallelism(inputs, steps.aggregated_numbers, &warnings);
}

std::vector<DeviceReport> DeviceReportsWithWaits(std::vector<RankResult>& ranks, const CrossRankResult& cross) {
  std::vector<DeviceReport> rows;
  size_t input = 0;  // the rank's place among MeasureAcrossRanks' inputs
  for (RankResult& rank : ranks) {
    if (rank.devices.empty()) continue;
    for (DeviceReport& device : rank.devices) {
      for (size_t i = 0; i < device.steps.size(); ++i) device.steps[i].wait_ns = cross.step_wait_ns[input][i];
      device.wait_ns = cross.cross_rank.waits[input].wait_ns;
      device.transfer_ns = cross.cross_rank.waits[input].transfer_ns;
      device.step_stats.wait_ns = ComputeWaitStats(device.steps);
      rows.push_back(std::move(device));
    }
    ++input;
  }
  std::sort(rows.begin(), rows.end(), [](const DeviceReport& a, const DeviceReport& b) {
    return a.rank != b.rank ? a.rank < b.rank : a.device < b.device;
  });
  return rows;
}

std::optional<double> SpreadAcrossDevices(const std::vector<DeviceReport>& devices, const Stats StepStats::*field) {
  std::vector<double> medians;
  for (const DeviceReport& device : devices) {
    if ((device.step_stats.*field).count > 0) medians.push_back((device.step_stats.*field).median);
  }
  if (medians.size() < 2) return std::nullopt;
  const Stats stats = ComputeStats(medians);
  if (stats.median <= 0) return std::nullopt;
  return stats.max / stats.median;
}

namespace {

// a · b · c; nullopt when it overflows int64 (a damaged workload mark may hold any integer).
std::optional<int64_t> CheckedProduct(int64_t a, int64_t b, int64_t c = 1) {
  int64_t ab = 0, abc = 0;
  if (__builtin_mul_overflow(a, b, &ab) || __builtin_mul_overflow(ab, c, &abc)) return std::nullopt;
  return abc;
}

}  // namespace

Workload MakeWorkload(const std::vector<RankResult>& ranks, std::optional<int> world_size) {
  Workload workload;
  if (ranks.empty()) return workload;
  const RankActivity& first = ranks.front().activity;
  workload.command = first.meta.command_line;
  workload.backend = first.meta.backend.empty() ? InferBackend(ranks) : first.meta.backend;
  if (world_size) workload.world_size = *world_size;
  for (const RankResult& rank : ranks) {
    if (!rank.activity.workload) continue;
    const WorkloadMark& mark = *rank.activity.workload;
    if (mark.world_size) workload.world_size = *mark.world_size;
    workload.batch_per_rank = mark.batch;
    workload.accumulation = mark.accum;
    workload.steps = mark.steps;
    workload.parameters = mark.parameters;
    workload.source = "workload mark";
    if (mark.stages && *mark.stages > 1) workload.stages = mark.stages;
    if (mark.micro_batches && *mark.micro_batches > 1) workload.micro_batches = mark.micro_batches;
    break;
  }
  // A pipeline's ranks each hold a stage: the model is their parameters over one replica,
  // and the data-parallel replicas are world / stages.
  int64_t replicas = workload.world_size.value_or(0);
  if (workload.stages && workload.world_size && *workload.world_size % *workload.stages == 0) {
    replicas = *workload.world_size / *workload.stages;
    int64_t parameters = 0;
    for (const RankResult& rank : ranks) {
      if (rank.activity.workload && rank.activity.workload->parameters) parameters += *rank.activity.workload->parameters;
    }
    if (replicas > 0 && static_cast<int64_t>(ranks.size()) == *workload.world_size) workload.parameters = parameters / replicas;
  }
  if (workload.batch_per_rank && workload.world_size && replicas > 0) {
    const std::optional<int64_t> steps_per_replica =
        CheckedProduct(workload.accumulation.value_or(1), workload.micro_batches.value_or(1));
    if (steps_per_replica) workload.global_batch = CheckedProduct(*workload.batch_per_rank, replicas, *steps_per_replica);
    return workload;
  }
  // Else the step payload: samples per rank per step (batch · accumulation).
  std::vector<double> samples;
  for (const StepRange& step : first.steps) {
    if (step.samples > 0) samples.push_back(static_cast<double>(step.samples));
  }
  const double median_samples = samples.empty() ? 0.0 : ComputeStats(samples).median;
  // Below 2^62: converts to int64 exactly enough, and a larger count is no batch.
  if (!samples.empty() && workload.world_size && median_samples < 4.6e18) {
    workload.global_batch = CheckedProduct(static_cast<int64_t>(median_samples), *workload.world_size);
    workload.source = "step payload";
  }
  return workload;
}

RunMetric MakeRunMetric(const std::vector<DeviceReport>& devices, const char* name, bool higher_is_better,
                        const Stats StepStats::*field) {
  RunMetric metric;
  metric.name = name;
  metric.higher_is_better = higher_is_better;
  std::vector<double> medians;
  bool first = true;
  for (const DeviceReport& device : devices) {
    const Stats& stats = device.step_stats.*field;
    if (stats.count == 0) continue;
    medians.push_back(stats.median);
    const bool worse = higher_is_better ? stats.median < metric.worst : stats.median > metric.worst;
    if (first || worse) {
      metric.worst = stats.median;
      metric.worst_rank = device.rank;
      metric.worst_device = device.device;
      first = false;
    }
  }
  metric.median = ComputeStats(std::move(medians)).median;
  return metric;
}

RunSummary SummarizeRun(const std::vector<DeviceReport>& devices, const RunInfo& run, int64_t steps_aggregated,
                        const Workload& workload, std::vector<std::string>& warnings) {
  RunSummary summary;
  summary.ranks = static_cast<int>(run.ranks.size() - run.ranks_without_activity.size());
  summary.steps = steps_aggregated;
  summary.metrics = {
      MakeRunMetric(devices, "step_ns", false, &StepStats::step_ns),
      MakeRunMetric(devices, "compute_ns", false, &StepStats::compute_ns),
      MakeRunMetric(devices, "comm_ns", false, &StepStats::comm_ns),
      MakeRunMetric(devices, "exposed_comm_ns", false, &StepStats::exposed_comm_ns),
      MakeRunMetric(devices, "overlap_pct", true, &StepStats::overlap_pct),
      MakeRunMetric(devices, "comm_compute_ratio", false, &StepStats::comm_compute_ratio),
      MakeRunMetric(devices, "utilization_pct", true, &StepStats::utilization_pct),
      MakeRunMetric(devices, "wait_ns", false, &StepStats::wait_ns),
  };
  std::vector<double> step_medians;
  for (const DeviceReport& device : devices) {
    if (device.step_stats.step_ns.count > 0) step_medians.push_back(device.step_stats.step_ns.median);
  }
  if (!step_medians.empty()) summary.step_time_ns = ComputeStats(step_medians).median;
  if (summary.step_time_ns && *summary.step_time_ns > 0 && workload.global_batch) {
    summary.throughput = static_cast<double>(*workload.global_batch) / (*summary.step_time_ns / 1e9);
  } else if (!workload.global_batch) {
    warnings.push_back("throughput unknown: the trace does not say the batch size (no 'workload' mark or step "
                       "payload with 'samples')");
  }
  return summary;
}

std::vector<ActivitySummary> SumTopActivities(const std::vector<RankResult>& ranks, size_t top) {
  std::map<std::pair<std::string, ActivityClass>, ActivitySummary> totals;
  for (const RankResult& rank : ranks) {
    for (const ActivitySummary& activity : rank.activity.activities) {
      ActivitySummary& total = totals[{activity.name, activity.activity_class}];
      total.name = activity.name;
      total.activity_class = activity.activity_class;
      total.count += activity.count;
      total.total_ns += activity.total_ns;
    }
  }
  std::vector<ActivitySummary> out;
  for (auto& [key, total] : totals) out.push_back(std::move(total));
  std::sort(out.begin(), out.end(), [](const ActivitySummary& a, const ActivitySummary& b) {
    return a.total_ns != b.total_ns ? a.total_ns > b.total_ns : a.name < b.name;
  });
  if (out.size() > top) out.resize(top);
  return out;
}

namespace {

Result<Report> BuildReport(std::vector<RankResult> ranks, RunInfo run, std::vector<std::string> warnings,
                           const AnalyzeOptions& options) {
  Report report;
  report.tool_version = options.tool_version;
  report.comm_patterns = options.classify.comm_patterns;
  report.compute_patterns = options.classify.compute_patterns;
  std::sort(ranks.begin(), ranks.end(),
            [](const RankResult& a, const RankResult& b) { return a.activity.rank < b.activity.rank; });

  CountRankEvents(ranks, run);
  RS_RETURN_IF_ERROR(CheckDeviceActivity(ranks, run, warnings));
  RS_ASSIGN_OR_RETURN(StepsAcrossRanks steps, SelectSteps(ranks, options, warnings));
  report.steps = steps.selection;

  CrossRankResult cross = MeasureAcrossRanks(ranks, steps);
  warnings.insert(warnings.end(), cross.warnings.begin(), cross.warnings.end());
  // Before the device rows move out: the measured ranks are those with devices.
  if (options.critical_path) report.critical_path = MeasurePaths(ranks, steps, cross.cross_rank.clock, options);
  report.workload = MakeWorkload(ranks, run.world_size);  // before the device rows move out
  report.ranks = DeviceReportsWithWaits(ranks, cross);
  report.cross_rank = std::move(cross.cross_rank);
  report.cross_rank.step_time_spread = SpreadAcrossDevices(report.ranks, &StepStats::step_ns);
  report.cross_rank.compute_time_spread = SpreadAcrossDevices(report.ranks, &StepStats::compute_ns);

  report.parallelism = MeasureParallelism(ranks, report.cross_rank.clock, steps, warnings);
  for (const RankResult& rank : ranks) {
    for (const MemorySeries& series : rank.activity.memory) {
      if (std::optional<RankMemory> memory = MeasureMemory(rank.activity, series, steps.aggregated_numbers)) {
        report.memory.push_back(std::move(*memory));
      }
    }
  }
  report.summary = SummarizeRun(report.ranks, run, steps.selection.steps_aggregated, report.workload, warnings);
  report.top_activities = SumTopActivities(ranks, options.top);
  report.run = std::move(run);
  report.warnings = std::move(warnings);
  return report;
}

}  // namespace

Result<Report> AnalyzeRun(const std::filesystem::path& path, const AnalyzeOptions& options) {
  RS_ASSIGN_OR_RETURN(trace::Run run, trace::OpenRun(path));
  RunInfo info;
  info.directory = run.directory.string();
  info.run_id = run.run_id;
  info.world_size = run.world_size;
  info.missing_ranks = run.missing_ranks;
  info.unfinished_files = run.crashed;
  info.live = run.recording;
  std::vector<std::string> warnings = run.Warnings();
  if (!run.unranked.empty()) {
    warnings.push_back(fmt::format("{} file(s) without a rank (e.g. data-loader processes) are not analyzed",
                                   run.unranked.size()));
  }
  if (run.ranks.empty()) {
    return InvalidArgument(fmt::format("{}: no rank files (rank-<N>.sqlite) to analyze", path.string()));
  }
  std::vector<std::filesystem::path> files;
  for (const trace::RunFile& file : run.ranks) files.push_back(file.path);
  std::vector<RankEndRead> ends;
  RS_ASSIGN_OR_RETURN(std::vector<RankResult> ranks, MeasureAll(files, options, &warnings, &ends));
  RS_ASSIGN_OR_RETURN(Report report, BuildReport(std::move(ranks), std::move(info), std::move(warnings), options));
  // Why the run did not finish, when it did not: from the files' in-flight state. A run
  // still recording has not ended: work in flight there is progress, not a hang.
  if (!run.recording) DiagnoseEnd(std::move(ends), run.world_size, report);
  return report;
}

Result<Report> AnalyzeTraces(const std::vector<trace::RankTrace>& traces, const AnalyzeOptions& options) {
  if (traces.empty()) return InvalidArgument("no rank traces to analyze");
  RunInfo info;
  std::set<int> seen;
  for (const trace::RankTrace& trace : traces) {
    if (!trace.meta.rank) return InvalidArgument("a rank trace does not say which rank wrote it");
    if (!seen.insert(*trace.meta.rank).second) {
      return Inconsistent(fmt::format("two traces claim rank {}", *trace.meta.rank));
    }
    if (trace.meta.world_size) info.world_size = *trace.meta.world_size;
    if (info.run_id.empty()) info.run_id = trace.meta.run_id;
  }
  std::vector<std::string> warnings;
  if (info.world_size) {
    for (int r = 0; r < *info.world_size; ++r) {
      if (!seen.contains(r)) info.missing_ranks.push_back(r);
    }
    if (!info.missing_ranks.empty()) {
      warnings.push_back(fmt::format("rank(s) {} of world size {} are missing: cross-rank figures cover the others only",
                                     JoinRanks(info.missing_ranks), *info.world_size));
    }
  }
  std::vector<RankEndRead> no_ends;  // traces in memory hold no in-flight state
  RS_ASSIGN_OR_RETURN(std::vector<RankResult> ranks, MeasureAll(traces, options, &warnings, &no_ends));
  return BuildReport(std::move(ranks), std::move(info), std::move(warnings), options);
}

struct StreamedRunAnalysis::Rank {
  Rank(std::filesystem::path from, const AnalyzeOptions& options)
      : source(std::move(from)), scanner(ScanOptions{.classify = options.classify,
                                                  .step_names = options.step_names,
                                                  .path_events = options.critical_path,
                                                  .path_most_steps = options.critical_path_steps}) {}
  std::filesystem::path source;
  RankScanner scanner;
};

StreamedRunAnalysis::StreamedRunAnalysis(AnalyzeOptions options) : options_(std::move(options)) {}
StreamedRunAnalysis::~StreamedRunAnalysis() = default;

trace::SpanVisitor& StreamedRunAnalysis::AddRank(std::filesystem::path source) {
  std::lock_guard<std::mutex> lock(mutex_);
  ranks_.push_back(std::make_unique<Rank>(std::move(source), options_));
  return ranks_.back()->scanner;
}

Result<Report> StreamedRunAnalysis::Finish(const std::filesystem::path& display) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (ranks_.empty()) return InvalidArgument(fmt::format("{}: no ranks to analyze", display.string()));
  const size_t count = ranks_.size();
  std::vector<std::optional<RankActivity>> activities(count);
  RS_RETURN_IF_ERROR(ParallelFor(count, options_.threads, [&](size_t i) -> Status {
    RS_ASSIGN_OR_RETURN(RankActivity activity, ranks_[i]->scanner.Finish());
    if (activity.rank < 0) {
      return InternalError(fmt::format("{}: a rank streamed without saying which rank it is",
                                       ranks_[i]->source.string()));
    }
    activities[i] = std::move(activity);
    return Status::Ok();
  }, nullptr));
  // The run as OpenRun would describe the same ranks written to files: one world size, the
  // ranks missing from it.
  std::vector<trace::RunFile> files;
  for (size_t i = 0; i < count; ++i) files.push_back({ranks_[i]->source, activities[i]->meta});
  RS_ASSIGN_OR_RETURN(trace::Run run, trace::RunOfFiles(display, std::move(files)));
  RunInfo info;
  info.directory = display.string();
  info.run_id = run.run_id;
  info.world_size = run.world_size;
  info.missing_ranks = run.missing_ranks;
  info.unfinished_files = run.crashed;
  std::vector<std::string> warnings = run.Warnings();

  // Measured in rank order, as AnalyzeRun measures the files, so warnings come in one order.
  std::vector<size_t> order(count);
  for (size_t i = 0; i < count; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return activities[a]->rank < activities[b]->rank; });
  std::vector<std::optional<RankResult>> results(count);
  std::vector<std::vector<std::string>> rank_warnings(count);
  RS_RETURN_IF_ERROR(ParallelFor(count, options_.threads, [&](size_t i) -> Status {
    results[i] = MeasureRank(std::move(*activities[order[i]]), options_, &rank_warnings[i]);
    return Status::Ok();
  }, options_.progress));
  std::vector<RankResult> ranks;
  for (size_t i = 0; i < count; ++i) {
    warnings.insert(warnings.end(), rank_warnings[i].begin(), rank_warnings[i].end());
    ranks.push_back(std::move(*results[i]));
  }
  ranks_.clear();
  return BuildReport(std::move(ranks), std::move(info), std::move(warnings), options_);
}

}  // namespace rankscope::analyzer
