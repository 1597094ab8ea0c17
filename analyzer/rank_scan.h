// One rank's events reduced, in one streaming pass, to what the metrics need: merged
// activity per device and class (docs/metrics.md §1), step windows (§2), the collectives that
// cross-rank matching uses (§4), time per activity name, and the workload mark (§5). Only
// the ranges the CPU-side rule (§1) may class are held until the rank ends.
// Files stream in through TraceReader::Stream; in-memory traces through FeedRankTrace, so
// both take the same path.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analyzer/classify.h"
#include "analyzer/memory_series.h"
#include "analyzer/path_events.h"
#include "analyzer/report.h"
#include "base/status.h"
#include "trace/reader.h"

namespace rankscope::analyzer {

struct ScanOptions {
  ClassifyOptions classify;
  std::vector<std::string> step_names;  // compared without case; ProfilerStep#N always counts
  // Keep every event for the critical path (RankActivity::path); the stream must carry host
  // calls (trace::StreamOptions::host_calls) for launches and syncs.
  bool path_events = false;
  // With path_events: keep only the events of the steps the critical path follows,
  // PathStepsKept(steps, path_most_steps) (0: every step's).
  size_t path_most_steps = 0;
  // The stream sends the NVTX ranges before its other rows (trace::StreamOptions::ranges_first):
  // the steps are then known before the other rows, and those outside the kept steps are
  // never stored. Without it they are stored until the rank ends.
  bool ranges_first = false;
};

struct StepRange {
  int64_t number = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int64_t samples = 0;  // from the step payload; 0 when unknown
};

// The step numbers the critical path follows when it follows at most `most` (0: every step):
// every stride-th by number, after dividing the numbers by their common spacing, the stride
// the smallest power of two that leaves at most `most`. Ranks with the same steps keep the
// same; ranks whose strides differ keep nested sets, so every rank keeps the steps of the
// largest stride. Empty when every step is kept.
std::vector<int64_t> PathStepsKept(const std::vector<StepRange>& steps, size_t most);

// Where a rank's collectives come from (docs/metrics.md §4): the `collectives` table, written
// by NCCL's profiler plugin (kPlugin) or by the PyTorch hook of `profile --pytorch` (kHook:
// the rank's meta says the hook recorded collectives and NCCL's plugin did not run); both
// carry sequence numbers shared across ranks. Else NCCL's kernels, else comm ranges.
enum class CollectiveSource : uint8_t { kNone, kPlugin, kKernels, kRanges, kHook };
const char* CollectiveSourceName(CollectiveSource source);

struct CollectiveRecord {
  uint32_t kind = 0;       // index into RankActivity::collective_kinds
  int32_t comm_size = 0;   // 0 when unknown
  uint64_t comm_hash = 0;  // plugin records only
  uint64_t sequence = 0;   // plugin: the record's; otherwise the n-th of its kind
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint64_t bytes = 0;
  int32_t label = -1;      // the range's `bucket` payload field (DDP bucket, FSDP layer), else -1
  trace::CollectiveOp op = trace::CollectiveOp::kUnknown;
  // An all-gather's or reduce-scatter's bytes are one rank's part (NCCL's count argument;
  // the `rankscope collective` convention): nccl-tests' size is bytes × ranks.
  bool per_rank_bytes = false;
  // Ordered so that the record stays 56 bytes: millions of them wait for the cross-rank pass.
};

// A point-to-point message as one side recorded it (docs/metrics.md §4 "Point to point"):
// NCCL's profiler plugin's send and receive records, or a comm range with the `rankscope
// collective` payload and a peer. Matched across ranks in cross-rank analysis.
struct MessageRecord {
  bool send = true;
  uint64_t comm_hash = 0;
  int32_t comm_rank = -1;  // this side's rank in the communicator
  int32_t peer = -1;       // the other side's
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint64_t bytes = 0;
  int64_t label = -1;  // the payload's `bucket` (a pipeline's micro-batch), else -1
};

// A pipeline pass: a "forward" or "backward" range whose payload has the `rankscope
// micro-batch` fields (stage, stages, micro_batch, micro_batches).
struct PipelinePass {
  bool forward = true;
  int64_t stage = 0;
  int64_t stages = 0;
  int64_t micro_batch = 0;
  int64_t micro_batches = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
};

struct WorkloadMark {
  std::optional<int64_t> world_size, batch, accum, steps, parameters;
  std::optional<int64_t> parallel, stages, micro_batches;  // 0 ddp, 1 fsdp, 2 pipeline
};

struct RankActivity {
  int rank = -1;  // -1: the file names no rank
  trace::RankMeta meta;
  std::vector<DeviceActivity> devices;  // with any activity, sorted by device
  // Measured by the CPU-side rule (§1): no device activity, but CPU operators or
  // gloo/nccl/c10d ranges (or user patterns) gave it some on device -1.
  bool cpu_side = false;
  std::vector<StepRange> steps;         // sorted by start; empty: no step ranges
  std::string step_source;              // e.g. "NVTX ranges 'step'"; empty without steps
  CollectiveSource collective_source = CollectiveSource::kNone;
  std::vector<std::string> collective_kinds;
  std::vector<CollectiveRecord> collectives;  // sorted by start
  std::vector<MessageRecord> messages;        // sorted by start
  std::vector<PipelinePass> passes;           // sorted by start
  std::vector<MemorySeries> memory;           // by source (memory_series.h)
  std::vector<ActivitySummary> activities;    // every name with device time
  RankPathEvents path;                        // with ScanOptions::path_events only
  std::optional<WorkloadMark> workload;
  int64_t events = 0;
  int64_t invalid_events = 0;
  int64_t dropped_events = 0;
};

// The CollectiveOp a collective's name suggests ("ncclDevKernel_AllReduce_Sum_f32",
// "allreduce", "AllGather" ...), any case.
trace::CollectiveOp OpFromName(const std::string& name);
const char* CollectiveOpName(trace::CollectiveOp op);

class RankScanner final : public trace::SpanVisitor {
 public:
  explicit RankScanner(ScanOptions options);
  ~RankScanner() override;
  RankScanner(const RankScanner&) = delete;
  RankScanner& operator=(const RankScanner&) = delete;

  Status OnHeader(trace::StreamHeader header) override;
  Status OnSpans(trace::SpanTable table, std::span<const trace::SpanRow> rows) override;
  Status OnMoreNames(std::span<const std::string> strings, std::span<const trace::Lane> lanes) override;
  Status OnTrailer(trace::StreamTrailer trailer) override;
  // The rank's activity; fails when the header never came.
  Result<RankActivity> Finish();

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// Streams an in-memory trace into `visitor` as TraceReader::Stream would stream its file.
Status FeedRankTrace(const trace::RankTrace& trace, trace::SpanVisitor& visitor, trace::StreamOptions options = {});
// The rows of `events` (kernels, copies, sets and NVTX ranges; API calls and syncs with
// options.host_calls) as TraceReader::Stream streams a file's, table by table; marks and
// collectives, which a file's header carries, are not sent.
Status FeedEventTables(const trace::EventTables& events, trace::SpanVisitor& visitor,
                       trace::StreamOptions options = {});

}  // namespace rankscope::analyzer
