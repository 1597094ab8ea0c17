// The result model: every number `rankscope analyze` prints, as plain data. The analysis
// (analyze.h) fills it; the writers (report_writers.h) and the viewer only format it.
// Field names match the JSON keys of docs/report-json.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "analyzer/classify.h"

namespace rankscope::analyzer {

inline constexpr int kReportVersion = 1;
inline constexpr const char* kReportFormat = "rankscope.report";

// docs/metrics.md §3 over one window of one device. The *_only fields, overlap_ns and idle_ns
// partition the window: compute_only + overlap + comm_only + memory_only + idle = window.
struct Breakdown {
  int64_t window_ns = 0;        // t1 - t0
  int64_t compute_ns = 0;       // |C|
  int64_t comm_ns = 0;          // |M|
  int64_t memory_ns = 0;        // |Y|
  int64_t overlap_ns = 0;       // |C ∩ M|
  int64_t exposed_comm_ns = 0;  // |M \ C|
  int64_t busy_ns = 0;          // |C ∪ M ∪ Y|
  int64_t idle_ns = 0;          // window - busy
  int64_t compute_only_ns = 0;  // |C \ M|
  int64_t comm_only_ns = 0;     // |M \ C| (equals exposed_comm_ns)
  int64_t memory_only_ns = 0;   // |Y \ (C ∪ M)|
  double overlap_pct = 0;       // 100 |C ∩ M| / |M|; 0 when |M| = 0
  // |M| / |C|; nullopt when |C| = 0 (JSON null), 0 when both are 0.
  std::optional<double> comm_compute_ratio = 0.0;
  double utilization_pct = 0;   // 100 busy / window; 0 for an empty window
};

// Median, minimum, maximum and 90th percentile (linear interpolation) of some samples.
struct Stats {
  int64_t count = 0;
  double median = 0, min = 0, max = 0, p90 = 0;
};

struct StepMetrics {
  int64_t number = 0;      // the step's own number (payload, ProfilerStep#N) or its index
  int64_t start_ns = 0;    // on the rank's own clock (no host offset applied)
  int64_t end_ns = 0;
  bool aggregated = true;  // false: warm-up (--skip-steps) or outside --steps
  Breakdown breakdown;
  int64_t wait_ns = 0;     // this rank's wait at collectives that started in the step (§4)
};

// Per-step aggregates of one device: over the aggregated steps only.
struct StepStats {
  Stats step_ns, compute_ns, comm_ns, memory_ns, overlap_ns, exposed_comm_ns, busy_ns, idle_ns;
  Stats overlap_pct, comm_compute_ratio, utilization_pct, wait_ns;
};

// One entry of the top-N tables: kernels, or compute/comm ranges on the CPU backend.
struct ActivitySummary {
  std::string name;
  ActivityClass activity_class = ActivityClass::kCompute;
  int64_t count = 0;
  int64_t total_ns = 0;
};

// One rank and device: the top-level `ranks` array of the JSON report.
struct DeviceReport {
  int rank = 0;
  int device = kCpuDevice;  // -1: the CPU backend's compute and comm lanes
  std::string host;
  Breakdown totals;         // whole trace: [first device activity start, last end)
  std::vector<StepMetrics> steps;
  StepStats step_stats;
  int64_t wait_ns = 0;      // the rank's total wait at matched collectives
  int64_t transfer_ns = 0;  // and its total transfer time there
};

// The run's shape, from the trainer's "workload" mark or the run metadata.
struct Workload {
  std::string command;
  std::string backend;
  std::optional<int64_t> world_size;
  std::optional<int64_t> batch_per_rank;
  std::optional<int64_t> accumulation;
  // batch_per_rank · world_size · accumulation; a pipeline's: batch_per_rank · (world_size /
  // stages) · accumulation · micro_batches
  std::optional<int64_t> global_batch;
  std::optional<int64_t> steps;
  std::optional<int64_t> parameters;    // the model's (a pipeline's stages summed)
  std::optional<int64_t> stages;        // a pipeline's, when more than 1
  std::optional<int64_t> micro_batches; // a pipeline's per step, when more than 1
  std::string source;  // "workload mark", "step payload" or "" when unknown
};

struct RunInfo {
  std::string directory;
  std::string run_id;
  std::optional<int> world_size;
  std::vector<int> ranks;          // ranks analyzed
  std::vector<int> missing_ranks;  // below world_size, without a file
  std::vector<int> ranks_without_activity;
  std::vector<std::string> unfinished_files;  // writers that never closed (killed ranks)
  bool live = false;               // a process still recorded into the run when it was read
  int64_t events = 0;              // rows read
  // Damaged rows skipped: they end before they start, or name a string or lane id the file
  // does not hold.
  int64_t invalid_events = 0;
  int64_t dropped_events = 0;      // lost before they reached the files (drops table)
};

struct StepSelection {
  std::string source;  // e.g. "NVTX ranges 'step'", or "whole trace (no step ranges)"
  int skip_steps = 0;
  std::optional<int64_t> first, last;  // --steps A..B, inclusive
  int64_t steps_found = 0;             // most steps any rank has
  int64_t steps_aggregated = 0;        // steps in the aggregates (fewest over ranks)
};

// One rank's time in the matched instances of a collective kind, split the way PyTorch's
// TensorBoard plugin splits it (docs/metrics.md §4, "End-aligned split"): on the rank's own
// clock, with d_min the instance's shortest record over ranks.
struct CollectiveKindOnRank {
  int rank = 0;
  int64_t time_ns = 0;                  // |∪ [s, e)| over the rank's records
  int64_t end_aligned_transfer_ns = 0;  // |∪ [e − d_min, e)|
  int64_t end_aligned_wait_ns = 0;      // time_ns − end_aligned_transfer_ns
};

// Collectives of one kind (e.g. all-reduce), over the matched instances.
struct CollectiveKindSummary {
  std::string kind;  // the collective's name
  std::string op;    // "allreduce", "allgather", ... or "unknown"
  int64_t count = 0;                 // matched instances
  uint64_t total_bytes = 0;          // each instance's message size, summed over instances
  int64_t wait_ns = 0;               // summed over ranks and instances
  int64_t transfer_ns = 0;           // summed over ranks and instances
  std::optional<Stats> busbw_gbps;   // nccl-tests busbw in GB/s (1e9 bytes/s) per instance
  std::vector<CollectiveKindOnRank> per_rank;  // in CrossRank::ranks order
};

struct HostClock {
  std::string host;
  std::vector<int> ranks;
  int64_t offset_ns = 0;        // added to this host's times to align them with the reference
  int64_t collectives_used = 0;
};

struct ClockAlignment {
  std::vector<HostClock> hosts;  // the reference host first, offset 0
  bool applied = false;          // some host got a non-zero offset
  // Spread (max - min) of matched collectives' end times across ranks, after alignment.
  std::optional<Stats> residual_ns;
};

struct RankWait {
  int rank = 0;
  int64_t wait_ns = 0;            // time it waited for others
  int64_t transfer_ns = 0;
  int64_t times_last = 0;         // collectives where it arrived last
  int64_t wait_caused_ns = 0;     // others' wait at those collectives
  int64_t steps_most_wait = 0;    // aggregated steps where it caused the most wait
  bool straggler = false;
};

// One step of the wait heatmap: each rank's wait in that step, in `ranks` order.
struct StepWait {
  int64_t step = 0;
  bool aggregated = false;       // the step is in the aggregates (not warm-up, in --steps)
  std::vector<int64_t> wait_ns;  // parallel to CrossRank::ranks
  std::optional<int> last_rank;  // caused the most wait in the step
};

struct CrossRank {
  std::string collective_source;  // "NCCL profiler plugin", "PyTorch hook", "NCCL kernels", "comm ranges" or ""
  int64_t matched = 0;            // collective instances seen on every rank
  int64_t unmatched = 0;          // instances missing on some rank
  std::vector<CollectiveKindSummary> kinds;
  ClockAlignment clock;
  std::vector<int> ranks;         // the ranks of `waits` and of each StepWait, in order
  std::vector<RankWait> waits;
  std::vector<StepWait> steps;
  std::vector<int> stragglers;
  // max / median across ranks of the per-rank median step (compute) time.
  std::optional<double> step_time_spread, compute_time_spread;
};

// A run-level figure: the median over devices of their per-step medians, and the worst.
struct RunMetric {
  std::string name;  // a StepStats / JSON key, e.g. "overlap_pct"
  double median = 0;
  double worst = 0;
  int worst_rank = 0;
  int worst_device = kCpuDevice;
  bool higher_is_better = false;
};

struct RunSummary {
  int ranks = 0;
  int64_t steps = 0;                       // aggregated steps
  std::optional<double> step_time_ns;      // median over ranks of their median step time
  std::optional<double> throughput;        // samples/s: global batch / step_time_ns
  std::vector<RunMetric> metrics;
};

// ---- A run that did not finish (analyzer/hang.h) -----------------------------------------
// Read from every rank file's in-flight state (trace/in_flight.h): which collectives each rank
// had entered and completed when its file ended, and what its threads were inside. Times are
// each rank's own clock; "waited" is always one rank's state time minus that rank's own
// entry time, so no two hosts' clocks are ever compared.

enum class RunEndVerdict : uint8_t {
  kFinished,    // every file closed by exit or exec, nothing in flight: no diagnosis
  kHang,        // ranks wait in a collective (or send/receive) that some never entered
  kMismatch,    // ranks entered the same collective with a different op, size or root
  kKilled,      // files ended without being closed and nobody waits on another rank
  kUnfinished,  // open work when the files ended, but no cross-rank problem found
};
const char* RunEndVerdictName(RunEndVerdict verdict);  // "finished", "hang", ...

// How one rank's file ended.
struct RankEndInfo {
  int rank = 0;
  bool has_file = false;   // false: below world_size, but the run has no file for it
  bool has_state = false;  // the file holds an in-flight state (schema v3 and a drain)
  std::string host;
  int64_t pid = 0;
  bool closed_cleanly = false;
  std::string ended_by;    // meta collector.ended_by: "exit", "exec", "signal 15", "" (never closed)
  int64_t as_of_ns = 0;    // when the state was taken; 0 without one
  uint64_t completed_collectives = 0;
  uint64_t completed_steps = 0;
  int64_t last_progress_ns = 0;
  int64_t in_flight = 0;   // collectives, sends and receives entered and not completed
};

// One member of a communicator at the end of the run.
struct CommMemberEnd {
  std::optional<int> rank;  // nullopt: a communicator rank that no file holds an entry for
  int comm_rank = -1;       // -1: unknown (the rank entered nothing on this communicator)
  // "waiting" (inside `stalled`), "missing" (never entered it), "passed" (completed it),
  // "idle" (nothing stalled on this communicator), "no state" (no file, or no state in it)
  std::string state;
  std::optional<uint64_t> last_entered;    // highest collective sequence entered
  std::optional<uint64_t> last_completed;  // highest collective sequence completed
  std::optional<int64_t> in_flight_since_ns;  // entry of its oldest collective in flight here
  std::optional<int64_t> waited_ns;           // its state time minus that entry
};

// The collective the others wait in: the lowest sequence in flight on any member.
struct StalledCollective {
  uint64_t sequence = 0;
  std::string op;     // CollectiveOpName: "allreduce", ... "unknown"
  std::string name;   // as the first waiting rank recorded it
  uint64_t bytes = 0;
  int root = -1;
  std::vector<int> waiting;  // entered it, not completed
  std::vector<int> missing;  // their last entered sequence is below it (or none): the culprits
  std::vector<int> passed;   // completed it
  std::vector<int> no_state_ranks;       // members whose file is missing or holds no state
  std::vector<int> no_state_comm_ranks;  // communicator ranks no file holds an entry for
  int64_t since_ns = 0;   // the earliest entry among the waiting ranks
  int64_t waited_ns = 0;  // the longest wait among them (CommMemberEnd::waited_ns)
};

// What one group of ranks entered at a sequence where ranks disagree.
struct CollectiveVersion {
  std::string op;
  std::string name;
  uint64_t bytes = 0;
  int root = -1;
  std::vector<int> ranks;
};

struct CollectiveMismatch {
  uint64_t sequence = 0;
  std::vector<std::string> fields;         // what differs: "op", "bytes", "root"
  std::vector<CollectiveVersion> versions;  // most ranks first
};

// One rank's sends to, or receives from, one peer.
struct PeerStream {
  int rank = 0;
  std::string direction;  // "send" or "recv"
  int peer_comm_rank = -1;
  std::optional<int> peer_rank;  // nullopt when no file maps that communicator rank
  std::optional<uint64_t> last_entered, last_completed;
  std::optional<uint64_t> in_flight_sequence;  // its oldest in flight
  std::optional<int64_t> in_flight_since_ns;
  std::optional<int64_t> waited_ns;
  // For one in flight: how far the peer got on the matching stream (its receives from, or
  // sends to, this rank); nullopt when it entered none there, or has no state.
  std::optional<uint64_t> peer_last_entered;
  bool peer_has_state = false;  // the peer is known (peer_rank) and its file holds a state
  bool unmatched = false;  // in flight, and the peer has state and never entered the match
};

struct CommunicatorEnd {
  uint64_t comm_hash = 0;
  std::string comm;   // comm_hash as 16 hex digits, as the report writes it
  int comm_size = 0;  // 0 when unknown
  std::vector<CommMemberEnd> members;  // by rank, then communicator rank
  std::optional<StalledCollective> stalled;
  std::vector<CollectiveMismatch> mismatches;  // by sequence
  std::vector<PeerStream> peer_streams;        // by (rank, direction, peer)
};

// A thread's open ranges, outermost first.
struct OpenThread {
  std::string thread;               // the lane's name, or "lane N"
  std::vector<std::string> ranges;  // outermost -> innermost
  int64_t innermost_start_ns = 0;
  int64_t innermost_open_ns = 0;    // the rank's state time minus that start
};

// A rank the others wait for, and what it was doing.
struct Culprit {
  int rank = 0;
  // "missing" (never entered a collective others wait in), "mismatch" (entered another
  // version of it), "unmatched p2p" (never posted a peer's send/receive), "not closed" (its
  // file ended without being closed while others wait)
  std::vector<std::string> reasons;
  std::vector<OpenThread> threads;  // by lane
};

struct HangReport {
  RunEndVerdict verdict = RunEndVerdict::kFinished;
  std::string summary;  // a short paragraph for an incident: who, which collective, since when
  std::optional<int> world_size;
  bool live = false;  // read while a process still recorded: unclosed files are snapshots
  std::vector<RankEndInfo> ranks;            // by rank
  std::vector<CommunicatorEnd> communicators;  // by comm_hash
  std::vector<Culprit> culprits;             // by rank
};

// Point-to-point messages from one rank to another, send matched with receive
// (docs/metrics.md §4 "Point to point").
struct MessageRoute {
  int from_rank = 0;
  int to_rank = 0;
  int64_t count = 0;
  uint64_t total_bytes = 0;
  int64_t receiver_wait_ns = 0;  // Σ max(0, send start − receive start): receiver waited for the sender
  int64_t sender_wait_ns = 0;    // Σ max(0, receive start − send start): sender waited for the receiver
  int64_t transfer_ns = 0;       // Σ max(0, receive end − the later start)
  std::optional<Stats> bandwidth_gbps;  // per message: bytes / its transfer (GB/s)
};

struct PointToPoint {
  int64_t matched = 0;
  int64_t unmatched = 0;              // messages whose other side no rank recorded
  std::vector<MessageRoute> routes;   // by (from, to)
};

// One pipeline stage (a rank) over the aggregated steps (docs/metrics.md §4 "Pipeline
// bubble"); durations are medians over those steps.
struct PipelineStageFigures {
  int rank = 0;
  int stage = 0;
  int replica = 0;
  int64_t steps = 0;               // aggregated steps with a pipeline window
  int64_t window_ns = 0;           // the replica's window: first pass of any stage to last
  int64_t busy_ns = 0;             // this rank's compute inside it
  double bubble_pct = 0;           // 100 · (window − busy) / window, median over steps
  int64_t neighbour_wait_ns = 0;   // in a send or receive before its other side arrived
  int64_t transfer_ns = 0;         // in a send or receive after it did
  int64_t other_idle_ns = 0;       // window − busy − the two above, at least 0
  double busy_vs_mean = 0;         // busy / the mean busy of its replica's stages
};

struct PipelineFigures {
  int stages = 0;
  int micro_batches = 0;
  int replicas = 0;
  double ideal_bubble_pct = 0;  // 100 · (S − 1) / (M + S − 1)
  double bubble_pct = 0;        // median over the stage rows
  // The window split: medians over (replica, step) of the window W, of what balanced stages
  // without communication would take (mean busy · (M + S − 1) / M), and of what the slowest
  // stage adds to that ((max busy − mean busy) · (M − 1) / M: with t_s = busy_s / M per
  // micro-batch, a pipeline takes Σ t_s + (M − 1) · max t_s); then the rest of the median
  // W (waiting for neighbours, transfers, anything else), at least 0.
  int64_t window_ns = 0;
  int64_t balanced_window_ns = 0;
  int64_t imbalance_ns = 0;
  int64_t communication_ns = 0;
  std::vector<PipelineStageFigures> stage_rows;  // by (replica, stage)
  std::string diagnosis;        // where the bubble beyond the ideal comes from
};

// One FSDP layer's all-gathers and reduce-scatters, per rank and aggregated step (means).
struct FsdpLayerFigures {
  int64_t layer = 0;
  double all_gathers = 0;
  double gather_ns = 0;
  double exposed_gather_ns = 0;  // not overlapped by the rank's compute
  double reduce_scatter_ns = 0;
  double exposed_reduce_scatter_ns = 0;
};

struct FsdpFigures {
  std::vector<FsdpLayerFigures> layers;  // by layer
  double gather_ns = 0;                  // summed over layers
  double exposed_gather_ns = 0;
  std::optional<double> exposed_gather_pct;  // 100 · exposed / gather
};

// One rank's memory counters of one source (docs/metrics.md §5 "Memory"): what the trainer's
// allocations ("nvtx"), CUDA's ("cuda") or PyTorch's allocator ("pytorch allocated",
// "pytorch reserved") hold, per category.
struct MemoryCategoryBytes {
  std::string category;
  int64_t bytes = 0;
};

struct RankMemory {
  int rank = 0;
  std::string source;         // memory_series.h: "nvtx", "cuda", "pytorch allocated", ...
  int64_t peak_bytes = 0;     // the largest total over the run
  int64_t peak_at_ns = 0;     // when it was first reached (the rank's clock)
  std::vector<MemoryCategoryBytes> at_peak;      // each category's bytes then, in first-seen order
  std::vector<MemoryCategoryBytes> category_peaks;  // each category's own largest value
  std::optional<Stats> step_peak_bytes;          // over aggregated steps: the largest total in each
};

// How the run was parallelized and what that costs (docs/metrics.md §4, §6).
struct Parallelism {
  std::string strategy = "unknown";  // "ddp", "fsdp", "pipeline" or "unknown"
  std::string strategy_source;       // "workload mark", "collectives", or empty
  std::optional<PointToPoint> point_to_point;
  std::optional<PipelineFigures> pipeline;
  std::optional<FsdpFigures> fsdp;
};

// What set the step time (docs/metrics.md §10), over the aggregated steps whose graph could
// be built. Per-step figures are medians over those steps; contributions are means per step.
struct PathContribution {
  std::string category;  // PathCategoryName: "compute", "communication transfer", "host gap", ...
  int rank = 0;
  std::string name;      // the node's (a gap's: the node it preceded)
  int64_t ns_per_step = 0;
  double share = 0;      // of the path's length, over all steps
};
struct PathWaitSummary {
  int waiting_rank = 0;
  int late_rank = 0;
  std::string collective;
  std::string late_doing;  // empty: the late rank was in a gap
  int64_t ns_per_step = 0;
  int64_t steps = 0;       // steps whose path has this wait
};
struct WhatIfSummary {
  std::string label;
  int64_t projected_step_ns = 0;  // median over steps
  double gain = 0;                // 1 − median(projected / measured): the share of the step saved
};
// One step's path as the viewer draws it: segments on the aligned clock (the viewer's common
// clock once the model has the report's clock alignment).
struct StepPathSegment {
  int rank = 0;
  uint32_t lane = 0;      // the rank's trace lane id
  bool work = true;       // false: a gap (host gap, launch gap, idle)
  int64_t start_ns = 0;
  int64_t end_ns = 0;
};
struct StepPath {
  int64_t step = 0;
  int64_t start_ns = 0;  // the step's aligned span: earliest rank's start
  int64_t end_ns = 0;    // latest rank's end
  std::vector<StepPathSegment> segments;  // in time order
};

struct CriticalPathSummary {
  int64_t steps = 0;               // steps measured
  int64_t steps_aggregated = 0;    // of which they were chosen (AnalyzeOptions::critical_path_steps)
  int64_t measured_step_ns = 0;    // median of (latest rank's end − earliest rank's start)
  int64_t path_ns = 0;             // median path length
  int64_t max_mismatch_ns = 0;     // max |path − measured| over the steps (0 by construction)
  std::vector<std::pair<std::string, double>> categories;  // share per category, largest first
  std::vector<PathContribution> top;                       // largest first
  std::vector<PathWaitSummary> waits;                      // largest first
  std::vector<WhatIfSummary> what_ifs;
  std::vector<std::string> notes;  // what the graph could not follow
  std::vector<StepPath> paths;     // per measured step, by start (the viewer's; not in JSON)
};

struct Report {
  int version = kReportVersion;
  std::string tool_version;
  RunInfo run;
  Workload workload;
  StepSelection steps;
  std::vector<std::string> comm_patterns, compute_patterns;
  RunSummary summary;
  std::vector<DeviceReport> ranks;           // sorted by (rank, device)
  std::vector<ActivitySummary> top_activities;  // summed over ranks, longest first
  CrossRank cross_rank;
  Parallelism parallelism;
  std::vector<RankMemory> memory;            // ranks with memory counters, by rank, then source
  std::vector<std::string> warnings;         // what is missing or doubtful, one line each
  // Filled when the run did not finish (a hang, a mismatch, killed ranks, open work).
  std::optional<HangReport> did_not_finish;
  // With AnalyzeOptions::critical_path.
  std::optional<CriticalPathSummary> critical_path;
};

}  // namespace rankscope::analyzer
