#include "analyzer/rank_scan.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <map>
#include <numeric>
#include <unordered_map>

#include "analyzer/args_internal.h"
#include "analyzer/event_ids_internal.h"
#include "analyzer/span_classifier.h"

namespace rankscope::analyzer {
namespace {

constexpr size_t kClassCount = 3;
constexpr int8_t kNoClass = -1;



struct StepCandidate {
  trace::LaneId lane = trace::kNoLane;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  trace::StringId name = trace::kEmptyString;
  trace::StringId args = trace::kEmptyString;
  uint32_t payload_kind = 0;
  int64_t payload_int = 0;
};

// What the scanner keeps of a range the CPU-side rule may class: 32 bytes, not a SpanRow.
struct DeferredRange {
  trace::LaneId lane = trace::kNoLane;
  trace::StringId name = trace::kEmptyString;
  trace::StringId args = trace::kEmptyString;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
};

struct NameTotal {
  int64_t count = 0;
  int64_t total_ns = 0;
  int8_t activity_class = kNoClass;
};

// Intervals of one lane and class, merged as they arrive: rows of one lane come in time
// order from files rankscope wrote, so each one extends the last interval or follows it,
// and no raw copy is kept. Rows out of order (other tools' files) wait aside and are
// sorted once at the end.
class LaneClassIntervals {
 public:
  // Called once per row: inlined into the scanner's loops.
  [[gnu::always_inline]] void Add(Interval interval) {
    if (merged_.empty()) {
      merged_.push_back(interval);
    } else if (Interval& last = merged_.back(); interval.start >= last.start) {
      if (interval.start <= last.end) {
        last.end = std::max(last.end, interval.end);
      } else {
        merged_.push_back(interval);
      }
    } else {
      out_of_order_.push_back(interval);
    }
  }
  bool empty() const { return merged_.empty(); }
  // The merged set; leaves this empty.
  IntervalSet Take() {
    IntervalSet in_order = IntervalSet::FromSortedByStart(std::move(merged_));
    if (out_of_order_.empty()) return in_order;
    IntervalSet late = IntervalSet::FromUnsorted(std::move(out_of_order_));
    return Union(in_order, late);
  }

 private:
  std::vector<Interval> merged_;
  std::vector<Interval> out_of_order_;
};

struct LaneIntervals {
  std::array<LaneClassIntervals, kClassCount> by_class;
};

}  // namespace

std::vector<int64_t> PathStepsKept(const std::vector<StepRange>& steps, size_t most) {
  if (most == 0 || steps.size() <= most) return {};
  // Numbers 0, 10, 20, ... count as 0, 1, 2: the stride is in steps, not in numbers.
  uint64_t spacing = 0;
  for (size_t i = 1; i < steps.size(); ++i) {
    const int64_t difference = steps[i].number - steps[i - 1].number;
    if (difference > 0) spacing = std::gcd(spacing, static_cast<uint64_t>(difference));
  }
  const auto unit = static_cast<int64_t>(std::max<uint64_t>(spacing, 1));
  int64_t stride = 1;
  while (steps.size() > most * static_cast<size_t>(stride)) stride *= 2;
  std::vector<int64_t> kept;
  for (const StepRange& step : steps) {
    const int64_t index = step.number / unit;  // its place in the spacing: 1, 3, 5 (spacing 2) are 0, 1, 2
    if (index % stride == 0) kept.push_back(step.number);
  }
  if (kept.empty()) kept.push_back(steps.front().number);  // numbers that never meet the stride
  std::sort(kept.begin(), kept.end());
  kept.erase(std::unique(kept.begin(), kept.end()), kept.end());
  return kept;
}

const char* CollectiveSourceName(CollectiveSource source) {
  switch (source) {
    case CollectiveSource::kNone: return "";
    case CollectiveSource::kPlugin: return "NCCL profiler plugin";
    case CollectiveSource::kKernels: return "NCCL kernels";
    case CollectiveSource::kRanges: return "comm ranges";
    case CollectiveSource::kHook: return "PyTorch hook";
  }
  return "";
}

trace::CollectiveOp OpFromName(const std::string& name) { return trace::CollectiveOpFromName(name); }

const char* CollectiveOpName(trace::CollectiveOp op) {
  using trace::CollectiveOp;
  switch (op) {
    case CollectiveOp::kUnknown: return "unknown";
    case CollectiveOp::kAllReduce: return "allreduce";
    case CollectiveOp::kAllGather: return "allgather";
    case CollectiveOp::kReduceScatter: return "reducescatter";
    case CollectiveOp::kBroadcast: return "broadcast";
    case CollectiveOp::kReduce: return "reduce";
    case CollectiveOp::kAllToAll: return "alltoall";
    case CollectiveOp::kSend: return "send";
    case CollectiveOp::kRecv: return "recv";
    case CollectiveOp::kBarrier: return "barrier";
    case CollectiveOp::kGather: return "gather";
    case CollectiveOp::kScatter: return "scatter";
  }
  return "unknown";
}

class RankScanner::Impl {
 public:
  explicit Impl(ScanOptions options)
      : options_(std::move(options)), classifier_(options_.classify, options_.step_names) {}

  Status OnHeader(trace::StreamHeader header);
  Status OnSpans(trace::SpanTable table, std::span<const trace::SpanRow> rows);
  Status OnMoreNames(std::span<const std::string> strings, std::span<const trace::Lane> lanes);
  Status OnTrailer(trace::StreamTrailer trailer);
  Result<RankActivity> Finish();

 private:
  const std::string& Str(trace::StringId id) const {
    static const std::string kEmpty;
    return id < header_.strings.size() ? header_.strings[id] : kEmpty;
  }
  uint32_t KindIndex(const std::string& kind);
  void DropC10dCallsOfBackendCollectives(std::vector<CollectiveRecord>& records) const;
  void CountName(trace::StringId name, int8_t activity_class, int64_t duration);
  // A range classed device work: its lane's intervals, its name's total, and with comm a
  // collective record (docs/metrics.md §4, "comm ranges").
  void AddRange(const trace::SpanRow& row, ActivityClass activity_class);
  void AddCommRecord(std::vector<CollectiveRecord>& records, const trace::SpanRow& row, uint64_t bytes);
  void ChooseSteps(RankActivity& activity);
  void AddPipelinePass(const trace::SpanRow& row);
  const CommRangeArgs& CommArgs(trace::StringId args);
  void ChooseCollectives(RankActivity& activity);

  ScanOptions options_;
  SpanClassifier classifier_;
  bool have_header_ = false;
  trace::StreamHeader header_;
  // Indexed by lane id (slot 0 stays empty: rows on lanes the file lacks are invalid).
  std::vector<LaneIntervals> device_lanes_;  // kernels, copies, sets: the lane's device
  std::vector<LaneIntervals> range_lanes_;   // CPU-backend ranges: device -1
  // Ranges the CPU-side rule may class, held until the rank ends (SpanClassifier).
  std::vector<DeferredRange> deferred_ranges_;
  // Per StringId of the file's table, never sized by an id from an event.
  std::vector<NameTotal> name_totals_;
  NameTotal memcpy_total_, memset_total_;
  std::vector<StepCandidate> step_candidates_;
  std::vector<CollectiveRecord> kernel_records_, range_records_;
  std::vector<std::string> kinds_;
  std::map<std::string, uint32_t> kind_index_;
  std::vector<MessageRecord> messages_;
  std::vector<PipelinePass> passes_;
  // Per args string: ranges of one collective often share their args.
  std::unordered_map<trace::StringId, CommRangeArgs> comm_args_;
  // With ScanOptions::path_events; names as the file's ids until Finish.
  RankPathEvents path_events_;
  std::vector<RankPathEvents::Ref> deferred_path_events_;  // per deferred range: its path event
  // The windows of the steps kept for the path, sorted, once the steps are known (with
  // ScanOptions::ranges_first, when the first row after the ranges comes; else at the end);
  // none when the rank has no steps, and then every event is kept.
  bool path_steps_known_ = false;
  std::vector<StepRange> path_windows_;
  RankPathEvents::Ref AddPathEvent(PathEvent::Kind kind, const trace::SpanRow& row, int8_t activity_class) {
    return path_events_.Add({kind, activity_class, row.lane, row.name, row.start_ns, row.end_ns, row.correlation_id});
  }
  // Ranges are kept until the steps are known; other rows only when they start in a kept step.
  void AddPathRow(PathEvent::Kind kind, const trace::SpanRow& row, int8_t activity_class) {
    if (!path_steps_known_ || InPathWindow(row.start_ns)) AddPathEvent(kind, row, activity_class);
  }
  bool InPathWindow(int64_t start_ns) const {
    if (path_windows_.empty()) return true;  // no steps: the whole trace is one (cross-rank stage)
    const auto after = std::upper_bound(path_windows_.begin(), path_windows_.end(), start_ns,
                                        [](int64_t t, const StepRange& s) { return t < s.start_ns; });
    return after != path_windows_.begin() && start_ns < std::prev(after)->end_ns;
  }
  void KnowPathSteps(const std::vector<StepRange>& steps);
  RankPathEvents TakePathEvents(const std::vector<std::optional<ActivityClass>>& deferred_classes,
                                const std::vector<StepRange>& steps);
  int64_t events_ = 0;
  int64_t invalid_events_ = 0;
};

void RankScanner::Impl::KnowPathSteps(const std::vector<StepRange>& steps) {
  path_steps_known_ = true;
  path_events_.kept_steps = PathStepsKept(steps, options_.path_most_steps);
  const std::vector<int64_t>& kept = path_events_.kept_steps;
  path_windows_.clear();
  for (const StepRange& step : steps) {
    if (kept.empty() || std::binary_search(kept.begin(), kept.end(), step.number)) path_windows_.push_back(step);
  }
}

RankPathEvents RankScanner::Impl::TakePathEvents(const std::vector<std::optional<ActivityClass>>& deferred_classes,
                                                 const std::vector<StepRange>& steps) {
  for (size_t i = 0; i < deferred_path_events_.size() && i < deferred_classes.size(); ++i) {
    if (deferred_classes[i]) path_events_.at(deferred_path_events_[i]).activity_class = static_cast<int8_t>(*deferred_classes[i]);
  }
  std::vector<RankPathEvents::Ref>().swap(deferred_path_events_);
  if (!path_steps_known_) KnowPathSteps(steps);
  path_events_.Retain([this](const PathEvent& e) { return InPathWindow(e.start_ns); });
  path_events_.Seal();
  // Only the names the events use, renumbered.
  RankPathEvents out = std::move(path_events_);
  std::vector<uint32_t> renumbered(header_.strings.size() + 1, UINT32_MAX);  // the last: ids beyond
  out.ForEach([&](PathEvent& event) {
    uint32_t& id = renumbered[std::min<size_t>(event.name, renumbered.size() - 1)];
    if (id == UINT32_MAX) {
      id = static_cast<uint32_t>(out.names.size());
      out.names.push_back(Str(event.name));
    }
    event.name = id;
  });
  return out;
}

Status RankScanner::Impl::OnHeader(trace::StreamHeader header) {
  if (have_header_) return InternalError("rank stream sent its header twice");
  have_header_ = true;
  header_ = std::move(header);
  const size_t lanes = header_.lanes.size() + 1;
  device_lanes_.resize(lanes);
  range_lanes_.resize(lanes);
  const size_t strings = header_.strings.size();
  classifier_.Reset(&header_);
  name_totals_.resize(strings);
  events_ += static_cast<int64_t>(header_.marks.size() + header_.collectives.size() + header_.counters.size());
  return Status::Ok();
}

// Lanes are numbered 1..N in the order they come: an added lane must take the next id.
static Status CheckLaneIds(const std::vector<trace::Lane>& lanes) {
  for (size_t i = 0; i < lanes.size(); ++i) {
    if (lanes[i].id != i + 1) {
      return InternalError(fmt::format("rank stream numbered a lane {} where {} was due", lanes[i].id, i + 1));
    }
  }
  return Status::Ok();
}

Status RankScanner::Impl::OnMoreNames(std::span<const std::string> strings, std::span<const trace::Lane> lanes) {
  if (!have_header_) return InternalError("rank stream sent names before its header");
  header_.strings.insert(header_.strings.end(), strings.begin(), strings.end());
  header_.lanes.insert(header_.lanes.end(), lanes.begin(), lanes.end());
  RS_RETURN_IF_ERROR(CheckLaneIds(header_.lanes));
  device_lanes_.resize(header_.lanes.size() + 1);
  range_lanes_.resize(header_.lanes.size() + 1);
  name_totals_.resize(header_.strings.size());
  classifier_.HeaderGrew();
  return Status::Ok();
}

Status RankScanner::Impl::OnTrailer(trace::StreamTrailer trailer) {
  if (!have_header_) return InternalError("rank stream sent its trailer before its header");
  if (trailer.lanes.size() < header_.lanes.size()) {
    return InternalError("rank stream's trailer holds fewer lanes than its rows used");
  }
  RS_RETURN_IF_ERROR(CheckLaneIds(trailer.lanes));
  header_.meta = std::move(trailer.meta);
  header_.lanes = std::move(trailer.lanes);
  events_ += static_cast<int64_t>(trailer.marks.size() + trailer.collectives.size() + trailer.counters.size());
  header_.counters.insert(header_.counters.end(), trailer.counters.begin(), trailer.counters.end());
  header_.drops.insert(header_.drops.end(), trailer.drops.begin(), trailer.drops.end());
  header_.marks.insert(header_.marks.end(), trailer.marks.begin(), trailer.marks.end());
  header_.collectives.insert(header_.collectives.end(), trailer.collectives.begin(), trailer.collectives.end());
  device_lanes_.resize(header_.lanes.size() + 1);
  range_lanes_.resize(header_.lanes.size() + 1);
  classifier_.HeaderGrew();
  return Status::Ok();
}

uint32_t RankScanner::Impl::KindIndex(const std::string& kind) {
  auto [it, inserted] = kind_index_.try_emplace(kind, static_cast<uint32_t>(kinds_.size()));
  if (inserted) kinds_.push_back(kind);
  return it->second;
}

// `name` is known (KnownIds): below the size of the string table.
void RankScanner::Impl::CountName(trace::StringId name, int8_t activity_class, int64_t duration) {
  NameTotal& total = name_totals_[name];
  ++total.count;
  total.total_ns += duration;
  total.activity_class = activity_class;
}

void RankScanner::Impl::AddRange(const trace::SpanRow& row, ActivityClass activity_class) {
  const auto index = static_cast<size_t>(activity_class);
  range_lanes_[row.lane].by_class[index].Add({row.start_ns, row.end_ns});
  CountName(row.name, static_cast<int8_t>(index), row.end_ns - row.start_ns);
  if (activity_class == ActivityClass::kComm && header_.collectives.empty()) {
    const CommRangeArgs args = CommArgs(row.args);
    const trace::CollectiveOp op = OpFromName(Str(row.name));
    // A send or receive under the `rankscope collective` convention is a message between
    // two ranks, matched with its other side (docs/metrics.md §4 "Point to point").
    if ((op == trace::CollectiveOp::kSend || op == trace::CollectiveOp::kRecv) && args.peer >= 0 &&
        args.comm_rank >= 0 && args.comm) {
      messages_.push_back({op == trace::CollectiveOp::kSend, *args.comm, args.comm_rank, args.peer, row.start_ns,
                           row.end_ns, args.bytes, args.label});
      return;
    }
    AddCommRecord(range_records_, row, args.bytes);
    CollectiveRecord& record = range_records_.back();
    record.label = args.label >= INT32_MIN && args.label <= INT32_MAX ? static_cast<int32_t>(args.label) : -1;
    record.per_rank_bytes =
        args.comm && (op == trace::CollectiveOp::kAllGather || op == trace::CollectiveOp::kReduceScatter);
  }
}

const CommRangeArgs& RankScanner::Impl::CommArgs(trace::StringId args) {
  auto [it, inserted] = comm_args_.try_emplace(args);
  if (inserted && args != trace::kEmptyString) it->second = ReadCommRangeArgs(Str(args));
  return it->second;
}

void RankScanner::Impl::AddPipelinePass(const trace::SpanRow& row) {
  const std::string& name = Str(row.name);
  if (name != "forward" && name != "backward") return;
  const Json args = ParseObject(Str(row.args));
  const std::optional<int64_t> stage = IntField(args, "stage");
  const std::optional<int64_t> stages = IntField(args, "stages");
  const std::optional<int64_t> micro_batch = IntField(args, "micro_batch");
  const std::optional<int64_t> micro_batches = IntField(args, "micro_batches");
  // Bounded so that a damaged payload cannot overflow the bubble's arithmetic.
  constexpr int64_t kMost = int64_t{1} << 20;
  if (!stage || !stages || !micro_batch || !micro_batches || *stage < 0 || *stage >= *stages || *micro_batch < 0 ||
      *micro_batch >= *micro_batches || *stages > kMost || *micro_batches > kMost) {
    return;
  }
  passes_.push_back({name == "forward", *stage, *stages, *micro_batch, *micro_batches, row.start_ns, row.end_ns});
}

void RankScanner::Impl::AddCommRecord(std::vector<CollectiveRecord>& records, const trace::SpanRow& row,
                                      uint64_t bytes) {
  const std::string& name = Str(row.name);
  CollectiveRecord record;
  record.kind = KindIndex(name.empty() ? "collective" : name);
  record.op = OpFromName(name);
  record.start_ns = row.start_ns;
  record.end_ns = row.end_ns;
  record.bytes = bytes;
  records.push_back(record);
}

Status RankScanner::Impl::OnSpans(trace::SpanTable table, std::span<const trace::SpanRow> rows) {
  if (!have_header_) return InternalError("rank stream sent events before its header");
  events_ += static_cast<int64_t>(rows.size());
  if (options_.path_events && options_.ranges_first && !path_steps_known_ && table != trace::SpanTable::kNvtxRanges) {
    RankActivity ranges_only;  // the steps, from the ranges (all of them came first)
    ChooseSteps(ranges_only);
    KnowPathSteps(ranges_only.steps);
  }
  // One loop per table, so that the per-row work is only what that table needs.
  auto each_valid_row = [&](auto&& visit) {
    for (const trace::SpanRow& row : rows) {
      const std::optional<int64_t> duration = trace::CheckedDuration(row.start_ns, row.end_ns);
      if (!duration || !KnownIds(row, header_)) {
        ++invalid_events_;
        continue;
      }
      visit(row, *duration);
    }
  };
  switch (table) {
    case trace::SpanTable::kKernels: {
      const bool kernels_are_collectives = header_.collectives.empty();
      each_valid_row([&](const trace::SpanRow& row, int64_t duration) {
        const auto activity_class = static_cast<int8_t>(classifier_.DeviceRowClass(table, row));
        device_lanes_[row.lane].by_class[static_cast<size_t>(activity_class)].Add({row.start_ns, row.end_ns});
        if (options_.path_events) AddPathRow(PathEvent::Kind::kKernel, row, activity_class);
        CountName(row.name, activity_class, duration);
        if (activity_class == static_cast<int8_t>(ActivityClass::kComm) && kernels_are_collectives) {
          AddCommRecord(kernel_records_, row, 0);
        }
      });
      break;
    }
    case trace::SpanTable::kMemcpys:
    case trace::SpanTable::kMemsets: {
      NameTotal& total = table == trace::SpanTable::kMemcpys ? memcpy_total_ : memset_total_;
      each_valid_row([&](const trace::SpanRow& row, int64_t duration) {
        classifier_.DeviceRowClass(table, row);  // device activity: the CPU-side rule is off
        if (options_.path_events) {
          AddPathRow(PathEvent::Kind::kCopy, row, static_cast<int8_t>(ActivityClass::kMemory));
        }
        device_lanes_[row.lane].by_class[static_cast<size_t>(ActivityClass::kMemory)].Add(
            {row.start_ns, row.end_ns});
        ++total.count;
        total.total_ns += duration;
        total.activity_class = static_cast<int8_t>(ActivityClass::kMemory);
      });
      break;
    }
    case trace::SpanTable::kNvtxRanges:
      each_valid_row([&](const trace::SpanRow& row, int64_t) {
        if (classifier_.IsStep(row.name)) {
          step_candidates_.push_back(
              {row.lane, row.start_ns, row.end_ns, row.name, row.args, row.payload_kind, row.payload_int});
          return;
        }
        if (row.args != trace::kEmptyString) AddPipelinePass(row);
        const RangeVerdict verdict = classifier_.ClassifyRange(row);
        if (options_.path_events) {
          const RankPathEvents::Ref added = AddPathEvent(
              PathEvent::Kind::kRange, row, verdict.activity_class ? static_cast<int8_t>(*verdict.activity_class) : -1);
          if (verdict.deferred) deferred_path_events_.push_back(added);
        }
        if (verdict.deferred) {
          deferred_ranges_.push_back({row.lane, row.name, row.args, row.start_ns, row.end_ns});
        } else if (verdict.activity_class) {
          AddRange(row, *verdict.activity_class);
        }
      });
      break;
    case trace::SpanTable::kApiCalls:
    case trace::SpanTable::kSyncs:
      // Host calls are never device time; the critical path keeps them.
      each_valid_row([&](const trace::SpanRow& row, int64_t) {
        if (options_.path_events) {
          AddPathRow(table == trace::SpanTable::kSyncs ? PathEvent::Kind::kSync : PathEvent::Kind::kApiCall, row, -1);
        }
      });
      break;
  }
  return Status::Ok();
}

void RankScanner::Impl::ChooseSteps(RankActivity& activity) {
  if (step_candidates_.empty()) return;
  // The lane with the most step ranges: the training loop's thread.
  std::map<trace::LaneId, size_t> per_lane;
  for (const StepCandidate& candidate : step_candidates_) ++per_lane[candidate.lane];
  const trace::LaneId lane =
      std::max_element(per_lane.begin(), per_lane.end(), [](const auto& a, const auto& b) { return a.second < b.second; })
          ->first;
  std::vector<StepCandidate> chosen;
  for (const StepCandidate& candidate : step_candidates_) {
    if (candidate.lane == lane) chosen.push_back(candidate);
  }
  std::sort(chosen.begin(), chosen.end(), [](const StepCandidate& a, const StepCandidate& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.end_ns > b.end_ns;
  });
  std::vector<trace::StringId> names;
  bool numbers_usable = true;
  for (const StepCandidate& candidate : chosen) {
    // Outermost ranges only: a step nested in (or overlapping) the previous one is a phase.
    if (!activity.steps.empty() && candidate.start_ns < activity.steps.back().end_ns) continue;
    const Json args = ParseObject(Str(candidate.args));
    // A step the run ended inside (the collector closed it at the end, or a hang was stopped)
    // never finished: its length measures the end of the run, not a step.
    if (const auto unfinished = args.find("rankscope.unfinished");
        unfinished != args.end() && unfinished->is_boolean() && unfinished->get<bool>()) {
      continue;
    }
    StepRange step;
    step.start_ns = candidate.start_ns;
    step.end_ns = candidate.end_ns;
    step.samples = IntField(args, "samples").value_or(0);
    if (const std::optional<int64_t> number = StepNumberOf(IntField(args, "step"), Str(candidate.name),
                                                            candidate.payload_kind, candidate.payload_int)) {
      step.number = *number;
    } else {
      numbers_usable = false;
    }
    if (!activity.steps.empty() && step.number <= activity.steps.back().number) numbers_usable = false;
    activity.steps.push_back(step);
    if (std::find(names.begin(), names.end(), candidate.name) == names.end()) names.push_back(candidate.name);
  }
  // Numbers that do not increase cannot identify steps across ranks: use the index.
  if (!numbers_usable) {
    for (size_t i = 0; i < activity.steps.size(); ++i) activity.steps[i].number = static_cast<int64_t>(i);
  }
  activity.step_source = "NVTX ranges";
  for (size_t i = 0; i < names.size() && i < 3; ++i) activity.step_source += (i == 0 ? " '" : ", '") + Str(names[i]) + "'";
}

// PyTorch's `c10d::allreduce_` (and its kin) is the call that hands a collective to the
// process group, on the calling thread; `gloo:all_reduce` / `nccl:all_reduce` is the same
// collective as the backend ran it. Both are comm time (§1), but one collective: when the
// rank has the backend's ranges, the c10d calls are not collectives of their own.
void RankScanner::Impl::DropC10dCallsOfBackendCollectives(std::vector<CollectiveRecord>& records) const {
  const auto named = [this](const CollectiveRecord& record, std::string_view prefix) {
    return kinds_[record.kind].starts_with(prefix);
  };
  const bool backend_ranges = std::any_of(records.begin(), records.end(), [&](const CollectiveRecord& record) {
    return named(record, "gloo:") || named(record, "nccl:");
  });
  if (!backend_ranges) return;
  std::erase_if(records, [&](const CollectiveRecord& record) { return named(record, "c10d::"); });
}

void RankScanner::Impl::ChooseCollectives(RankActivity& activity) {
  std::vector<CollectiveRecord> records;
  if (!header_.collectives.empty()) {
    records.reserve(header_.collectives.size());
    // Records of one name come in long runs: the last name's kind is looked up once.
    trace::StringId last_name = trace::kEmptyString;
    trace::CollectiveOp last_op = trace::CollectiveOp::kUnknown;
    std::optional<uint32_t> last_kind;
    const auto& meta = header_.meta.entries;
    const auto entry_starts = [&meta](const char* key, std::string_view prefix) {
      const auto found = meta.find(key);
      return found != meta.end() && found->second.starts_with(prefix);
    };
    activity.collective_source = entry_starts("pytorch.collectives", "on") && !entry_starts("nccl.profiler", "v")
                                     ? CollectiveSource::kHook
                                     : CollectiveSource::kPlugin;
    for (const trace::CollectiveEvent& event : header_.collectives) {
      // Damaged records are counted in Finish.
      if (!trace::CheckedDuration(event.start_ns, event.end_ns) || !KnownIds(event, header_)) continue;
      const std::string& name = Str(event.name);
      CollectiveRecord record;
      record.op = event.op != trace::CollectiveOp::kUnknown ? event.op : OpFromName(name);
      // A send or receive involves two ranks, not the communicator, and NCCL gives it no
      // sequence number shared across ranks: it is a message, matched with its other side.
      if (record.op == trace::CollectiveOp::kSend || record.op == trace::CollectiveOp::kRecv) {
        if (event.peer >= 0 && event.comm_rank >= 0) {
          messages_.push_back({record.op == trace::CollectiveOp::kSend, event.comm_hash, event.comm_rank, event.peer,
                               event.start_ns, event.end_ns, event.bytes, -1});
        }
        continue;
      }
      if (!last_kind || event.name != last_name || (name.empty() && record.op != last_op)) {
        last_kind = KindIndex(!name.empty() ? name : CollectiveOpName(record.op));
        last_name = event.name;
        last_op = record.op;
      }
      record.kind = *last_kind;
      record.comm_size = event.comm_size;
      record.comm_hash = event.comm_hash;
      record.sequence = event.sequence;
      record.start_ns = event.start_ns;
      record.end_ns = event.end_ns;
      record.bytes = event.bytes;
      record.per_rank_bytes = activity.collective_source == CollectiveSource::kPlugin &&
                              (record.op == trace::CollectiveOp::kAllGather ||
                               record.op == trace::CollectiveOp::kReduceScatter);
      records.push_back(record);
    }
  } else {
    const bool kernels = !kernel_records_.empty();
    activity.collective_source = kernels ? CollectiveSource::kKernels
                                 : range_records_.empty() ? CollectiveSource::kNone
                                                          : CollectiveSource::kRanges;
    records = kernels ? std::move(kernel_records_) : std::move(range_records_);
    if (!kernels) DropC10dCallsOfBackendCollectives(records);
  }
  const auto by_start = [](const CollectiveRecord& a, const CollectiveRecord& b) { return a.start_ns < b.start_ns; };
  // Usually in order already (the writer receives them so): checking is linear, sorting not.
  if (!std::is_sorted(records.begin(), records.end(), by_start)) {
    std::stable_sort(records.begin(), records.end(), by_start);
  }
  if (activity.collective_source != CollectiveSource::kPlugin && activity.collective_source != CollectiveSource::kHook) {
    // The n-th of each kind: the identity that matches it across ranks.
    std::vector<uint64_t> next(kinds_.size(), 0);
    for (CollectiveRecord& record : records) record.sequence = next[record.kind]++;
  }
  activity.collectives = std::move(records);
  activity.collective_kinds = kinds_;
  const auto message_by_start = [](const MessageRecord& a, const MessageRecord& b) { return a.start_ns < b.start_ns; };
  std::stable_sort(messages_.begin(), messages_.end(), message_by_start);
  activity.messages = std::move(messages_);
  const auto pass_by_start = [](const PipelinePass& a, const PipelinePass& b) { return a.start_ns < b.start_ns; };
  std::stable_sort(passes_.begin(), passes_.end(), pass_by_start);
  activity.passes = std::move(passes_);
}

Result<RankActivity> RankScanner::Impl::Finish() {
  if (!have_header_) return InternalError("rank stream ended without its header");
  RankActivity activity;
  activity.rank = header_.meta.rank.value_or(-1);

  // The CPU-side rule (§1): decided now that every row has been seen.
  const bool cpu_side = classifier_.CpuSideRuleApplies();
  const std::vector<std::optional<ActivityClass>> deferred_classes = classifier_.ResolveDeferred();
  for (size_t i = 0; i < deferred_ranges_.size(); ++i) {
    if (!deferred_classes[i]) continue;
    const DeferredRange& range = deferred_ranges_[i];
    trace::SpanRow row;
    row.lane = range.lane;
    row.name = range.name;
    row.args = range.args;
    row.start_ns = range.start_ns;
    row.end_ns = range.end_ns;
    AddRange(row, *deferred_classes[i]);
  }
  std::vector<DeferredRange>().swap(deferred_ranges_);

  // Merge each lane, then unite the lanes of each device.
  std::map<int, std::array<IntervalSet, kClassCount>> per_device;
  auto add_lanes = [&](std::vector<LaneIntervals>& lanes, bool ranges) {
    constexpr auto kCompute = static_cast<size_t>(ActivityClass::kCompute);
    constexpr auto kComm = static_cast<size_t>(ActivityClass::kComm);
    for (size_t slot = 0; slot < lanes.size(); ++slot) {
      int device = kCpuDevice;
      if (!ranges && slot >= 1 && slot <= header_.lanes.size()) device = header_.lanes[slot - 1].device;
      std::array<IntervalSet, kClassCount> merged;
      for (size_t c = 0; c < kClassCount; ++c) {
        if (!lanes[slot].by_class[c].empty()) merged[c] = lanes[slot].by_class[c].Take();
      }
      // Under the CPU-side rule a thread inside a comm range is not computing, even
      // within the CPU operator that holds the range.
      if (ranges && cpu_side && !merged[kCompute].empty() && !merged[kComm].empty()) {
        merged[kCompute] = Difference(merged[kCompute], merged[kComm]);
      }
      for (size_t c = 0; c < kClassCount; ++c) {
        if (merged[c].empty()) continue;
        IntervalSet& into = per_device[device][c];
        into = into.empty() ? std::move(merged[c]) : Union(into, merged[c]);
      }
    }
    std::vector<LaneIntervals>().swap(lanes);
  };
  add_lanes(device_lanes_, false);
  add_lanes(range_lanes_, true);
  for (auto& [device, sets] : per_device) {
    DeviceActivity device_activity;
    device_activity.device = device;
    device_activity.compute = std::move(sets[static_cast<size_t>(ActivityClass::kCompute)]);
    device_activity.comm = std::move(sets[static_cast<size_t>(ActivityClass::kComm)]);
    device_activity.memory = std::move(sets[static_cast<size_t>(ActivityClass::kMemory)]);
    if (device_activity.compute.empty() && device_activity.comm.empty() && device_activity.memory.empty()) continue;
    activity.devices.push_back(std::move(device_activity));
  }
  activity.cpu_side = cpu_side && !activity.devices.empty();

  ChooseSteps(activity);
  ChooseCollectives(activity);
  if (options_.path_events) activity.path = TakePathEvents(deferred_classes, activity.steps);

  for (size_t id = 0; id < name_totals_.size(); ++id) {
    const NameTotal& total = name_totals_[id];
    if (total.count == 0) continue;
    activity.activities.push_back({Str(static_cast<trace::StringId>(id)),
                                   static_cast<ActivityClass>(total.activity_class), total.count, total.total_ns});
  }
  for (const auto& [name, total] : {std::pair<const char*, const NameTotal&>{"[memcpy]", memcpy_total_},
                                    std::pair<const char*, const NameTotal&>{"[memset]", memset_total_}}) {
    if (total.count > 0) activity.activities.push_back({name, ActivityClass::kMemory, total.count, total.total_ns});
  }

  MemorySeriesBuilder memory;
  for (const trace::NvtxMarkEvent& mark : header_.marks) {
    if (!KnownIds(mark, header_)) {
      ++invalid_events_;
      continue;
    }
    const std::string& name = Str(mark.name);
    if (memory.AddMark(name, Str(mark.args), mark.start_ns)) continue;
    if (activity.workload || name != "workload") continue;
    const Json args = ParseObject(Str(mark.args));
    if (!args.is_object()) continue;
    activity.workload = WorkloadMark{IntField(args, "world_size"),   IntField(args, "batch"),
                                     IntField(args, "accum"),        IntField(args, "steps"),
                                     IntField(args, "parameters"),   IntField(args, "parallel"),
                                     IntField(args, "stages"),       IntField(args, "micro_batches")};
  }
  memory.AddCounters(header_.lanes, header_.counters);
  activity.memory = memory.Finish();
  for (const trace::CollectiveEvent& event : header_.collectives) {
    if (!trace::CheckedDuration(event.start_ns, event.end_ns) || !KnownIds(event, header_)) ++invalid_events_;
  }
  for (const trace::DropRecord& drop : header_.drops) {
    activity.dropped_events += static_cast<int64_t>(std::min<uint64_t>(drop.count, INT64_MAX / 2));
  }
  activity.events = events_;
  activity.invalid_events = invalid_events_;
  activity.meta = std::move(header_.meta);
  return activity;
}

RankScanner::RankScanner(ScanOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
RankScanner::~RankScanner() = default;
Status RankScanner::OnHeader(trace::StreamHeader header) { return impl_->OnHeader(std::move(header)); }
Status RankScanner::OnSpans(trace::SpanTable table, std::span<const trace::SpanRow> rows) {
  return impl_->OnSpans(table, rows);
}
Status RankScanner::OnMoreNames(std::span<const std::string> strings, std::span<const trace::Lane> lanes) {
  return impl_->OnMoreNames(strings, lanes);
}
Status RankScanner::OnTrailer(trace::StreamTrailer trailer) { return impl_->OnTrailer(std::move(trailer)); }
Result<RankActivity> RankScanner::Finish() { return impl_->Finish(); }

Status FeedRankTrace(const trace::RankTrace& trace, trace::SpanVisitor& visitor, trace::StreamOptions options) {
  trace::StreamHeader header;
  header.meta = trace.meta;
  header.strings = trace.strings;
  header.lanes = trace.lanes;
  header.drops = trace.drops;
  header.marks = trace.events.nvtx_marks;
  header.collectives = trace.events.collectives;
  header.counters = trace.events.counter_samples;
  RS_RETURN_IF_ERROR(visitor.OnHeader(std::move(header)));
  return FeedEventTables(trace.events, visitor, options);
}

Status FeedEventTables(const trace::EventTables& events, trace::SpanVisitor& visitor, trace::StreamOptions options) {
  constexpr size_t kBatch = 4096;
  std::vector<trace::SpanRow> batch;
  batch.reserve(kBatch);
  auto flush = [&](trace::SpanTable table) -> Status {
    if (batch.empty()) return Status::Ok();
    Status status = visitor.OnSpans(table, batch);
    batch.clear();
    return status;
  };
  auto feed = [&](trace::SpanTable table, const auto& rows_of_table, auto to_row) -> Status {
    for (const auto& event : rows_of_table) {
      batch.push_back(to_row(event));
      if (batch.size() == kBatch) RS_RETURN_IF_ERROR(flush(table));
    }
    return flush(table);
  };
  auto common = [&](const trace::EventCommon& e, trace::StringId name) {
    trace::SpanRow row;
    row.lane = e.lane;
    row.name = name;
    row.start_ns = e.start_ns;
    row.end_ns = e.end_ns;
    if (options.host_calls) row.correlation_id = e.correlation_id;
    return row;
  };
  auto feed_ranges = [&] {
    return feed(trace::SpanTable::kNvtxRanges, events.nvtx_ranges, [&](const trace::NvtxRangeEvent& e) {
      trace::SpanRow row = common(e, e.name);
      row.correlation_id = 0;
      row.domain = e.domain;
      row.category = e.category;
      row.args = e.args;
      row.payload_kind = static_cast<uint32_t>(e.payload.kind);
      row.payload_int = e.payload.int_value;
      return row;
    });
  };
  if (options.ranges_first) RS_RETURN_IF_ERROR(feed_ranges());
  RS_RETURN_IF_ERROR(feed(trace::SpanTable::kKernels, events.kernels,
                          [&](const trace::KernelEvent& e) { return common(e, e.name); }));
  RS_RETURN_IF_ERROR(feed(trace::SpanTable::kMemcpys, events.memcpys, [&](const trace::MemcpyEvent& e) {
    trace::SpanRow row = common(e, trace::kEmptyString);
    if (options.host_calls) {
      row.category = static_cast<uint32_t>(e.copy_kind);
      row.payload_int = static_cast<int64_t>(e.bytes);
    }
    return row;
  }));
  RS_RETURN_IF_ERROR(feed(trace::SpanTable::kMemsets, events.memsets, [&](const trace::MemsetEvent& e) {
    trace::SpanRow row = common(e, trace::kEmptyString);
    if (options.host_calls) row.payload_int = static_cast<int64_t>(e.bytes);
    return row;
  }));
  if (!options.ranges_first) RS_RETURN_IF_ERROR(feed_ranges());
  if (!options.host_calls) return Status::Ok();
  RS_RETURN_IF_ERROR(feed(trace::SpanTable::kApiCalls, events.api_calls,
                          [&](const trace::ApiCallEvent& e) { return common(e, e.name); }));
  return feed(trace::SpanTable::kSyncs, events.syncs,
              [&](const trace::SyncEvent& e) { return common(e, e.name); });
}

}  // namespace rankscope::analyzer
