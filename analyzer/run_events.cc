#include "analyzer/run_events.h"

#include <fmt/format.h>

#include <optional>
#include <tuple>

#include "analyzer/args_internal.h"
#include "analyzer/event_ids_internal.h"
#include "analyzer/parallel_internal.h"
#include "base/format.h"
#include "analyzer/span_classifier.h"
#include "trace/run_dir.h"
#include "trace/schema.h"

namespace rankscope::analyzer {
namespace {

EventSource SourceOf(trace::SpanTable table) {
  switch (table) {
    case trace::SpanTable::kKernels: return EventSource::kKernel;
    case trace::SpanTable::kMemcpys: return EventSource::kMemcpy;
    case trace::SpanTable::kMemsets: return EventSource::kMemset;
    case trace::SpanTable::kNvtxRanges: return EventSource::kNvtxRange;
    case trace::SpanTable::kApiCalls: return EventSource::kApiCall;
    case trace::SpanTable::kSyncs: return EventSource::kSync;
  }
  return EventSource::kKernel;
}

// Classifies one rank's rows into ViewEvents and hands them on in batches.
class RankEventStream : public trace::SpanVisitor {
 public:
  // `rank_file`: `file` is a rank file (TraceReader::Stream); else another tool's trace,
  // streamed with names as they come and a trailer.
  RankEventStream(size_t index, std::filesystem::path file, bool rank_file, const ClassifyOptions& classify,
                  ViewEventSink& sink)
      : index_(index), file_(std::move(file)), rank_file_(rank_file), classifier_(classify), sink_(sink) {}

  Status OnHeader(trace::StreamHeader header) override {
    if (have_header_) return InternalError("rank stream sent its header twice");
    have_header_ = true;
    header_ = std::move(header);
    classifier_.Reset(&header_);
    ViewRank rank{file_, rank_file_, header_.meta, header_.strings, header_.lanes, header_.lane_rows};
    RS_RETURN_IF_ERROR(sink_.OnRank(index_, std::move(rank)));
    // Marks, the plugin's collective records and counters come whole with a file's header.
    return SendWhole(header_.marks, header_.collectives, header_.counters);
  }

  Status OnMoreNames(std::span<const std::string> strings, std::span<const trace::Lane> lanes) override {
    if (!have_header_) return InternalError("rank stream sent names before its header");
    header_.strings.insert(header_.strings.end(), strings.begin(), strings.end());
    header_.lanes.insert(header_.lanes.end(), lanes.begin(), lanes.end());
    classifier_.HeaderGrew();
    return sink_.OnMoreNames(index_, strings, lanes);
  }

  // A stream's end: its final meta and lanes, then its marks and collectives.
  Status OnTrailer(trace::StreamTrailer trailer) override {
    if (!have_header_) return InternalError("rank stream sent its trailer before its header");
    if (trailer.lanes.size() < header_.lanes.size()) {
      return InternalError("rank stream's trailer holds fewer lanes than its rows used");
    }
    header_.meta = std::move(trailer.meta);
    header_.lanes = std::move(trailer.lanes);
    classifier_.HeaderGrew();
    have_trailer_ = true;
    RS_RETURN_IF_ERROR(sink_.OnRankEnd(index_, header_.meta, header_.lanes));
    return SendWhole(trailer.marks, trailer.collectives, trailer.counters);
  }

  bool have_trailer() const { return have_trailer_; }
  const std::filesystem::path& file() const { return file_; }

  Status OnSpans(trace::SpanTable table, std::span<const trace::SpanRow> rows) override {
    batch_.clear();
    const EventSource source = SourceOf(table);
    for (const trace::SpanRow& row : rows) {
      if (!Valid(trace::CheckedDuration(row.start_ns, row.end_ns) && KnownIds(row, header_))) continue;
      ViewEvent event{row.start_ns, row.end_ns, row.correlation_id, row.lane, row.name, EventClass::kAnnotation, source};
      switch (table) {
        case trace::SpanTable::kMemcpys:
          event.copy_kind = static_cast<uint8_t>(std::min<uint32_t>(row.category, 255));
          [[fallthrough]];
        case trace::SpanTable::kMemsets:
        case trace::SpanTable::kKernels:
          event.event_class = ToEventClass(classifier_.DeviceRowClass(table, row));
          break;
        case trace::SpanTable::kNvtxRanges: {
          if (classifier_.IsStep(row.name)) {  // steps are annotations, with their number
            event.step = StepTitleNumber(row);
            break;
          }
          const RangeVerdict verdict = classifier_.ClassifyRange(row);
          if (verdict.deferred) {
            deferred_.push_back(event);
            continue;
          }
          if (verdict.activity_class) event.event_class = ToEventClass(*verdict.activity_class);
          break;
        }
        case trace::SpanTable::kApiCalls: event.event_class = EventClass::kApiCall; break;
        case trace::SpanTable::kSyncs: event.event_class = EventClass::kSync; break;
      }
      batch_.push_back(event);
    }
    return batch_.empty() ? Status::Ok() : sink_.OnEvents(index_, batch_);
  }

  // After the rank's last row: the ranges held back for the CPU-side rule, classed.
  Status Finish() {
    const std::vector<std::optional<ActivityClass>> classes = classifier_.ResolveDeferred();
    for (size_t i = 0; i < deferred_.size(); ++i) {
      if (classes[i]) deferred_[i].event_class = ToEventClass(*classes[i]);
    }
    const Status status = deferred_.empty() ? Status::Ok() : sink_.OnEvents(index_, deferred_);
    std::vector<ViewEvent>().swap(deferred_);
    return status;
  }

  int64_t invalid_events() const { return invalid_events_; }

 private:
  // The number a step range is titled with, + 1: the analyzer's rule (StepNumberOf); 0 when
  // it has none, or its name already says it (ProfilerStep#N).
  uint32_t StepTitleNumber(const trace::SpanRow& row) const {
    const std::string& name = header_.strings[row.name];
    if (ProfilerStepNumber(name)) return 0;
    static const std::string kNoArgs;
    const std::string& args = row.args < header_.strings.size() ? header_.strings[row.args] : kNoArgs;
    const std::optional<int64_t> number =
        StepNumberOf(IntField(ParseObject(args), "step"), name, row.payload_kind, row.payload_int);
    if (!number || *number < 0 || *number >= static_cast<int64_t>(UINT32_MAX)) return 0;
    return static_cast<uint32_t>(*number + 1);
  }

  Status SendWhole(const std::vector<trace::NvtxMarkEvent>& marks, const std::vector<trace::CollectiveEvent>& collectives,
                   const std::vector<trace::CounterSample>& counters) {
    std::vector<ViewEvent> events;
    events.reserve(marks.size() + collectives.size());
    MemorySeriesBuilder memory;
    for (const trace::NvtxMarkEvent& mark : marks) {
      if (!Valid(KnownIds(mark, header_))) continue;
      events.push_back({mark.start_ns, mark.start_ns, 0, mark.lane, mark.name, EventClass::kMark, EventSource::kMark});
      memory.AddMark(header_.strings[mark.name], header_.strings[mark.args], mark.start_ns);
    }
    memory.AddCounters(header_.lanes, counters);
    for (const trace::CollectiveEvent& collective : collectives) {
      if (!Valid(trace::CheckedDuration(collective.start_ns, collective.end_ns) && KnownIds(collective, header_))) {
        continue;
      }
      events.push_back({collective.start_ns, collective.end_ns, collective.correlation_id, collective.lane,
                        collective.name, EventClass::kCollective, EventSource::kCollective});
    }
    if (!events.empty()) RS_RETURN_IF_ERROR(sink_.OnEvents(index_, events));
    std::vector<MemorySeries> series = memory.Finish();
    return series.empty() ? Status::Ok() : sink_.OnMemory(index_, std::move(series));
  }

  // Counts the damaged: rows ending before they start or naming ids the file lacks.
  bool Valid(bool sound) {
    if (!sound) ++invalid_events_;
    return sound;
  }

  size_t index_;
  std::filesystem::path file_;
  bool rank_file_ = true;
  bool have_header_ = false, have_trailer_ = false;
  SpanClassifier classifier_;
  ViewEventSink& sink_;
  trace::StreamHeader header_;
  std::vector<ViewEvent> batch_;
  std::vector<ViewEvent> deferred_;  // the CPU-side rule's candidates (span_classifier.h)
  int64_t invalid_events_ = 0;
};

// After a rank's last row: its held-back ranges, then OnRankDone.
Status FinishRank(size_t index, RankEventStream& stream, ViewEventSink& sink, int64_t& invalid) {
  RS_RETURN_IF_ERROR(stream.Finish());
  invalid = stream.invalid_events();
  return sink.OnRankDone(index);
}

void CountInvalid(const std::vector<int64_t>& invalid, ViewRun& result) {
  for (int64_t count : invalid) result.invalid_events += count;
  if (result.invalid_events > 0) {
    result.warnings.push_back(fmt::format("{} damaged event(s) (ending before they start, or naming a string or lane "
                                          "the file does not hold) were skipped",
                                          result.invalid_events));
  }
}

// Whether `text` holds `number` as a whole number (no digit just before or after it).
bool HoldsNumber(std::string_view text, std::string_view number) {
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  for (size_t at = text.find(number); at != std::string_view::npos; at = text.find(number, at + 1)) {
    const bool alone_before = at == 0 || !digit(text[at - 1]);
    const size_t after = at + number.size();
    if (alone_before && (after == text.size() || !digit(text[after]))) return true;
  }
  return false;
}

std::string Dim(const trace::Dim3& dim) { return fmt::format("{} × {} × {}", dim.x, dim.y, dim.z); }

std::string EnumName(std::string_view type, int value) {
  for (const trace::EnumValue& entry : trace::EnumValues()) {
    if (entry.type == type && entry.value == value) return std::string(entry.name);
  }
  return fmt::format("{}", value);
}

// "512", or "1048576 (1 MiB)": the exact count, then the report's readable form.
std::string Bytes(uint64_t bytes) {
  if (bytes < 1024) return fmt::format("{}", bytes);
  return fmt::format("{} ({})", bytes, format::FormatBytes(static_cast<double>(bytes)));
}

// "12.5 GiB/s": bytes over the event's duration; none for an instant or no bytes.
std::optional<std::string> Throughput(uint64_t bytes, int64_t duration_ns) {
  if (bytes == 0 || duration_ns <= 0) return std::nullopt;
  return format::FormatBytes(static_cast<double>(bytes) * 1e9 / static_cast<double>(duration_ns)) + "/s";
}

using Fields = std::vector<std::pair<std::string, std::string>>;

void AddPayload(const trace::RankTrace& strings, const trace::NvtxAttributes& attributes, Fields& fields) {
  if (attributes.domain != trace::kEmptyString) fields.emplace_back("domain", strings.str(attributes.domain));
  if (attributes.category != 0) fields.emplace_back("category", fmt::format("{}", attributes.category));
  if (attributes.color != 0) fields.emplace_back("color", fmt::format("#{:08x}", attributes.color));
  switch (attributes.payload.kind) {
    case trace::PayloadKind::kNone: break;
    case trace::PayloadKind::kUint64:
    case trace::PayloadKind::kUint32:
      fields.emplace_back("payload", fmt::format("{}", static_cast<uint64_t>(attributes.payload.int_value)));
      break;
    case trace::PayloadKind::kInt64:
    case trace::PayloadKind::kInt32:
      fields.emplace_back("payload", fmt::format("{}", attributes.payload.int_value));
      break;
    case trace::PayloadKind::kDouble:
    case trace::PayloadKind::kFloat:
      fields.emplace_back("payload", fmt::format("{}", attributes.payload.real_value));
      break;
  }
  if (attributes.args != trace::kEmptyString) fields.emplace_back("args", strings.str(attributes.args));
}

template <typename Event>
const Event* FindExact(const std::vector<Event>& events, trace::LaneId lane, int64_t start_ns, int64_t end_ns) {
  for (const Event& event : events) {
    if (event.lane == lane && event.start_ns == start_ns && event.end_ns == end_ns) return &event;
  }
  return nullptr;
}

}  // namespace

std::string LaneLabel(const trace::Lane& lane) {
  switch (lane.kind) {
    case trace::LaneKind::kGpuStream: return fmt::format("GPU {} · stream {}", lane.device, lane.stream);
    case trace::LaneKind::kCommunicator:
      return lane.name.empty() ? fmt::format("communicator {:#x}", lane.comm_hash) : lane.name;
    case trace::LaneKind::kCounter: return lane.name.empty() ? fmt::format("counter {}", lane.id) : lane.name;
    case trace::LaneKind::kCpuThread: {
      // A name that already holds the thread id (Kineto's "thread 4515 (python3.8)") is not
      // followed by it again.
      const std::string tid = fmt::format("{}", lane.tid);
      std::string label = lane.name.empty()               ? "thread " + tid
                          : HoldsNumber(lane.name, tid) ? lane.name
                                                         : fmt::format("{} ({})", lane.name, tid);
      if (lane.role == trace::LaneRole::kCompute) label += " · compute";
      if (lane.role == trace::LaneRole::kComm) label += " · comm";
      if (lane.role == trace::LaneRole::kMemory) label += " · memory";
      return label;
    }
  }
  return lane.name.empty() ? fmt::format("lane {}", lane.id) : lane.name;
}

bool LaneShownBefore(const trace::Lane& a, const trace::Lane& b) {
  auto key = [](const trace::Lane& lane) {
    int kind_order = 4;
    switch (lane.kind) {
      case trace::LaneKind::kGpuStream: kind_order = 0; break;
      case trace::LaneKind::kCommunicator: kind_order = 1; break;
      case trace::LaneKind::kCpuThread: kind_order = 2; break;
      case trace::LaneKind::kCounter: kind_order = 3; break;
    }
    return std::make_tuple(kind_order, lane.device, lane.stream, lane.tid, lane.id);
  };
  return key(a) < key(b);
}

std::string_view UnnamedCopyName(EventSource source, uint8_t copy_kind) {
  if (source == EventSource::kMemset) return "Memset";
  return trace::DefaultName(static_cast<trace::CopyKind>(copy_kind));
}

const char* EventSourceName(EventSource source) {
  switch (source) {
    case EventSource::kKernel: return "kernel";
    case EventSource::kMemcpy: return "memcpy";
    case EventSource::kMemset: return "memset";
    case EventSource::kNvtxRange: return "NVTX range";
    case EventSource::kApiCall: return "API call";
    case EventSource::kSync: return "synchronization";
    case EventSource::kCollective: return "collective";
    case EventSource::kMark: return "NVTX mark";
  }
  return "?";
}

Result<ViewRun> StreamRunEvents(const std::filesystem::path& path, const ViewLoadOptions& options,
                                ViewEventSink& sink) {
  RS_ASSIGN_OR_RETURN(trace::Run run, trace::OpenRun(path));
  ViewRun result;
  result.directory = run.directory;
  result.run_id = run.run_id;
  result.warnings = run.Warnings();
  if (run.ranks.empty()) {
    return InvalidArgument(fmt::format("{}: no rank files (rank-<N>.sqlite) to show", path.string()));
  }
  if (!run.unranked.empty()) {
    result.warnings.push_back(
        fmt::format("{} file(s) without a rank (e.g. data-loader processes) are not shown", run.unranked.size()));
  }
  result.ranks = run.ranks.size();
  std::vector<int64_t> invalid(run.ranks.size(), 0);
  auto stream_rank = [&](size_t i) -> Status {
    RS_ASSIGN_OR_RETURN(std::unique_ptr<trace::TraceReader> reader, trace::TraceReader::Open(run.ranks[i].path));
    RankEventStream stream(i, run.ranks[i].path, /*rank_file=*/true, options.classify, sink);
    RS_RETURN_IF_ERROR(reader->Stream(stream, trace::StreamOptions{.host_calls = true}));
    return FinishRank(i, stream, sink, invalid[i]);
  };
  RS_RETURN_IF_ERROR(ParallelFor(run.ranks.size(), options.threads, stream_rank, options.progress));
  CountInvalid(invalid, result);
  return result;
}

Status ViewEventSink::OnMoreNames(size_t, std::span<const std::string>, std::span<const trace::Lane>) {
  return InternalError("this view sink reads rank files only: a stream sent more names");
}

Status ViewEventSink::OnRankEnd(size_t, trace::RankMeta, std::vector<trace::Lane>) {
  return InternalError("this view sink reads rank files only: a stream sent its end");
}

Status ViewEventSink::OnMemory(size_t, std::vector<MemorySeries>) { return Status::Ok(); }

class StreamedRunEvents::RankStream : public RankEventStream {
  using RankEventStream::RankEventStream;
};

StreamedRunEvents::StreamedRunEvents(ClassifyOptions classify, ViewEventSink& sink)
    : classify_(std::move(classify)), sink_(sink) {}
StreamedRunEvents::~StreamedRunEvents() = default;

trace::SpanVisitor& StreamedRunEvents::AddRank(std::filesystem::path source) {
  std::lock_guard<std::mutex> lock(mutex_);
  const size_t index = ranks_.size();
  ranks_.push_back(std::make_unique<RankStream>(index, std::move(source), /*rank_file=*/false, classify_, sink_));
  return *ranks_.back();
}

Result<ViewRun> StreamedRunEvents::Finish(int threads) {
  std::lock_guard<std::mutex> lock(mutex_);
  ViewRun result;
  result.ranks = ranks_.size();
  for (const auto& rank : ranks_) {
    if (!rank->have_trailer()) {
      return InternalError(fmt::format("{}: a rank streamed without its end", rank->file().string()));
    }
  }
  std::vector<int64_t> invalid(ranks_.size(), 0);
  RS_RETURN_IF_ERROR(ParallelFor(
      ranks_.size(), threads, [&](size_t i) { return FinishRank(i, *ranks_[i], sink_, invalid[i]); }, nullptr));
  CountInvalid(invalid, result);
  ranks_.clear();
  return result;
}

Result<EventDetails> ReadEventDetails(const std::filesystem::path& file, EventSource source, trace::LaneId lane,
                                      int64_t start_ns, int64_t end_ns) {
  RS_ASSIGN_OR_RETURN(std::unique_ptr<trace::TraceReader> reader, trace::TraceReader::Open(file));
  // Everything on the lane around the event; instants need the window to reach before them.
  trace::RankTrace found;
  // Saturating: a damaged file's times may sit at the ends of int64.
  const int64_t before = start_ns > INT64_MIN ? start_ns - 1 : start_ns;
  const int64_t after = start_ns < INT64_MAX ? start_ns + 1 : start_ns;
  RS_ASSIGN_OR_RETURN(found.events, reader->ReadLaneRange(lane, before, after));
  RS_ASSIGN_OR_RETURN(found.strings, reader->ReadStrings());
  EventDetails details;
  Fields& fields = details.fields;
  auto common = [&](const trace::EventCommon& event) {
    details.correlation_id = event.correlation_id;
    if (event.correlation_id != 0) fields.emplace_back("correlation id", fmt::format("{}", event.correlation_id));
  };
  auto missing = [&]() {
    return NotFound(fmt::format("{}: no {} on lane {} at {}..{} ns", file.string(), EventSourceName(source), lane,
                                start_ns, end_ns));
  };
  switch (source) {
    case EventSource::kKernel: {
      const trace::KernelEvent* kernel = FindExact(found.events.kernels, lane, start_ns, end_ns);
      if (kernel == nullptr) return missing();
      fields.emplace_back("grid", Dim(kernel->grid));
      fields.emplace_back("block", Dim(kernel->block));
      fields.emplace_back("registers per thread", fmt::format("{}", kernel->registers_per_thread));
      fields.emplace_back("shared memory", fmt::format("{} B static, {} B dynamic", kernel->static_shared_bytes,
                                                       kernel->dynamic_shared_bytes));
      common(*kernel);
      break;
    }
    case EventSource::kMemcpy: {
      const trace::MemcpyEvent* copy = FindExact(found.events.memcpys, lane, start_ns, end_ns);
      if (copy == nullptr) return missing();
      fields.emplace_back("bytes", Bytes(copy->bytes));
      if (const auto rate = Throughput(copy->bytes, end_ns - start_ns)) fields.emplace_back("throughput", *rate);
      fields.emplace_back("copy kind", EnumName("copy_kind", static_cast<int>(copy->copy_kind)));
      fields.emplace_back("source memory", EnumName("memory_kind", static_cast<int>(copy->src_kind)));
      fields.emplace_back("destination memory", EnumName("memory_kind", static_cast<int>(copy->dst_kind)));
      if (copy->src_device >= 0) fields.emplace_back("source device", fmt::format("{}", copy->src_device));
      if (copy->dst_device >= 0) fields.emplace_back("destination device", fmt::format("{}", copy->dst_device));
      common(*copy);
      break;
    }
    case EventSource::kMemset: {
      const trace::MemsetEvent* set = FindExact(found.events.memsets, lane, start_ns, end_ns);
      if (set == nullptr) return missing();
      fields.emplace_back("bytes", Bytes(set->bytes));
      if (const auto rate = Throughput(set->bytes, end_ns - start_ns)) fields.emplace_back("throughput", *rate);
      fields.emplace_back("value", fmt::format("{}", set->value));
      fields.emplace_back("memory", EnumName("memory_kind", static_cast<int>(set->memory_kind)));
      common(*set);
      break;
    }
    case EventSource::kApiCall: {
      const trace::ApiCallEvent* call = FindExact(found.events.api_calls, lane, start_ns, end_ns);
      if (call == nullptr) return missing();
      fields.emplace_back("API", EnumName("api_domain", static_cast<int>(call->domain)));
      fields.emplace_back("callback id", fmt::format("{}", call->callback_id));
      fields.emplace_back("return code", fmt::format("{}", call->return_code));
      common(*call);
      break;
    }
    case EventSource::kSync: {
      const trace::SyncEvent* sync = FindExact(found.events.syncs, lane, start_ns, end_ns);
      if (sync == nullptr) return missing();
      fields.emplace_back("kind", EnumName("sync_kind", static_cast<int>(sync->sync_kind)));
      if (sync->stream != 0) fields.emplace_back("stream", fmt::format("{}", sync->stream));
      if (sync->cuda_event_id != 0) fields.emplace_back("CUDA event", fmt::format("{}", sync->cuda_event_id));
      common(*sync);
      break;
    }
    case EventSource::kNvtxRange: {
      const trace::NvtxRangeEvent* range = FindExact(found.events.nvtx_ranges, lane, start_ns, end_ns);
      if (range == nullptr) return missing();
      fields.emplace_back("style", range->style == trace::NvtxRangeStyle::kPushPop ? "push/pop" : "start/end");
      AddPayload(found, *range, fields);
      break;
    }
    case EventSource::kMark: {
      const trace::NvtxMarkEvent* mark = FindExact(found.events.nvtx_marks, lane, start_ns, end_ns);
      if (mark == nullptr) return missing();
      AddPayload(found, *mark, fields);
      break;
    }
    case EventSource::kCollective: {
      const trace::CollectiveEvent* collective = FindExact(found.events.collectives, lane, start_ns, end_ns);
      if (collective == nullptr) return missing();
      fields.emplace_back("op", EnumName("collective_op", static_cast<int>(collective->op)));
      fields.emplace_back("bytes", Bytes(collective->bytes));
      fields.emplace_back("datatype", EnumName("datatype", static_cast<int>(collective->datatype)));
      fields.emplace_back("communicator", fmt::format("{:#x}", collective->comm_hash));
      fields.emplace_back("sequence", fmt::format("{}", collective->sequence));
      if (collective->comm_rank >= 0) {
        fields.emplace_back("rank in communicator", fmt::format("{} of {}", collective->comm_rank, collective->comm_size));
      }
      if (collective->root >= 0) fields.emplace_back("root", fmt::format("{}", collective->root));
      if (collective->peer >= 0) fields.emplace_back("peer", fmt::format("{}", collective->peer));
      if (collective->algorithm != trace::kEmptyString) fields.emplace_back("algorithm", found.str(collective->algorithm));
      if (collective->protocol != trace::kEmptyString) fields.emplace_back("protocol", found.str(collective->protocol));
      if (collective->channels != 0) fields.emplace_back("channels", fmt::format("{}", collective->channels));
      common(*collective);
      break;
    }
  }
  return details;
}

}  // namespace rankscope::analyzer
