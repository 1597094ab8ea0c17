#include "collector/recorder.h"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cstdio>
#include <fcntl.h>
#include <cstring>
#include <map>
#include <optional>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "collector/nccl_assembler.h"
#include "collector/no_throw.h"
#include "collector/proc_files.h"
#include "collector/record_codec.h"
#include "collector/stderr_line.h"
#include "collector/thread_slot.h"
#include "trace/rank_meta.h"
#include "trace/recording_lock.h"
#include "trace/run_dir.h"
#include "trace/writer.h"

namespace rankscope::collector {

__thread ThreadSlot tls_slot __attribute__((tls_model("initial-exec")));

namespace {

// Why CUPTI never started in a process that allowed it. The driver loads CUPTI from cuInit
// (CUDA_INJECTION64_PATH), so the question is whether the driver was ever there.
const char* CudaNotStartedReason() {
  void* libcuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (libcuda == nullptr) {
    return "not started: the process never loaded the CUDA driver (libcuda.so.1): no NVIDIA driver on this "
           "machine, or the program does not use CUDA";
  }
  dlclose(libcuda);
  return "not started: the process loaded the CUDA driver but did not initialize CUDA";
}

// Events handed to the writer but not yet committed, beyond which the drain thread leaves
// records in the thread buffers (whose memory is budgeted); some 50 ms of the writer's
// work, well within its queue, so Submit never refuses.
constexpr uint64_t kMaxWriterBacklog = 128 * 1024;
// Records converted per batch: bounds the drain's own memory.
constexpr size_t kMaxRecordsPerPass = 64 * 1024;
constexpr int kWriterPageCacheKib = 8 * 1024;
// The drain thread looks at the chunk reserve this often while it converts records.
constexpr size_t kRecordsBetweenReserveLooks = 16 * 1024;
// The pool's reserve of ready chunks: at least this many, looked at this often.
constexpr size_t kMinReadyChunks = 4;
constexpr std::chrono::milliseconds kReserveInterval{10};
constexpr size_t kIdleLooksBeforeRelease = 100;  // a second

// A range id: the thread's buffer serial above, a per-thread count below.
constexpr int kRangeSerialShift = 40;

std::atomic<uint64_t> g_recorder_generation{0};

pthread_key_t g_exit_key;
pthread_once_t g_exit_key_once = PTHREAD_ONCE_INIT;
void MarkBufferExited(void* buffer) { static_cast<ThreadBuffer*>(buffer)->MarkExited(); }
void CreateExitKey() { pthread_key_create(&g_exit_key, &MarkBufferExited); }

int64_t CurrentTid() { return static_cast<int64_t>(syscall(SYS_gettid)); }

// The name the thread had at its first event; "thread <tid>" if it had none.
std::string ThreadNameOf(const ThreadBuffer& buffer) {
  std::string name = buffer.name();
  return name.empty() ? fmt::format("thread {}", buffer.tid()) : name;
}

trace::Payload ToPayload(trace::PayloadKind kind, uint64_t bits) {
  trace::Payload payload;
  payload.kind = kind;
  switch (kind) {
    case trace::PayloadKind::kDouble: payload.real_value = std::bit_cast<double>(bits); break;
    case trace::PayloadKind::kFloat:
      payload.real_value = std::bit_cast<float>(static_cast<uint32_t>(bits));
      break;
    case trace::PayloadKind::kInt32:
      payload.int_value = static_cast<int32_t>(static_cast<uint32_t>(bits));
      break;
    case trace::PayloadKind::kUint32: payload.int_value = static_cast<uint32_t>(bits); break;
    default: payload.int_value = static_cast<int64_t>(bits); break;
  }
  return payload;
}

}  // namespace

// ---- drain-thread state ----------------------------------------------------------------

// Payload pieces copied out of a record: (schema id, bytes).
using OwnedPieces = std::vector<std::pair<uint64_t, std::vector<std::byte>>>;

namespace {
OwnedPieces ReadPieces(const RecordReader& record) {
  OwnedPieces pieces;
  record.ForEachPiece([&](uint64_t schema_id, std::span<const std::byte> bytes) {
    pieces.emplace_back(schema_id, std::vector<std::byte>(bytes.begin(), bytes.end()));
  });
  return pieces;
}
}  // namespace

struct OpenRange {
  int64_t start_ns = 0;
  uint64_t correlation_id = 0;  // push/pop ranges opened while a device tracer ran
  uint32_t depth = 0;
  trace::LaneId lane = trace::kNoLane;
  trace::StringId name = trace::kEmptyString;
  const NvtxDomain* domain = nullptr;
  uint32_t category = 0;
  uint32_t color = 0;
  trace::Payload payload;
  OwnedPieces pieces;
  std::string text;  // the name, for the in-flight state
  bool step = false;  // a training step: its end is progress
  std::optional<trace::FlightCollective> collective;  // a `rankscope collective` range
};

// The drain thread's state, and the stages DrainOnce runs each record through: it finds
// the record's thread lane, then matches push/pop and start/end into ranges, or writes a
// mark or a thread name, into `batch`.
struct Recorder::DrainState {
  DrainState(ClockSource source, int64_t process_id, NvtxRegistry& nvtx, const NvtxDomain* hook)
      : clock(source), nccl(process_id), pid(process_id), registry(nvtx), hook_domain(hook) {
    nccl.SetFlightRecorder(&flight);
  }
  TickConverter clock;
  FlightRecorder flight;
  NcclAssembler nccl;
  const int64_t pid;
  NvtxRegistry& registry;
  const NvtxDomain* const hook_domain;
  std::unique_ptr<trace::TraceWriter> writer;
  bool writer_failed = false;
  std::optional<trace::RecordingLock> recording_lock;
  size_t categories_written = 0;  // NVTX category names already handed to the writer
  trace::EventTables batch;
  struct ThreadState {
    int64_t tid = 0;
    trace::LaneId lane = trace::kNoLane;
    std::map<const NvtxDomain*, std::vector<OpenRange>> stacks;
  };
  std::unordered_map<uint64_t, ThreadState> threads;  // by buffer serial
  std::unordered_map<uint64_t, OpenRange> started;     // start/end ranges by id
  struct PendingEnd {
    int64_t end_ns;
    trace::LaneId lane;
    OwnedPieces pieces;
  };
  std::unordered_map<uint64_t, PendingEnd> pending_ends;  // ends drained before their start
  std::unordered_map<int64_t, std::string> thread_names;  // from nvtxNameOsThread
  std::unordered_map<const NvtxString*, trace::StringId> registered_ids;
  std::unordered_map<const NvtxDomain*, trace::StringId> domain_ids;
  std::unordered_map<uint64_t, trace::LaneId> hook_comm_lanes;  // by communicator hash
  RecorderStats stats;
  uint64_t reported_drops = 0;
  bool open_ranges_changed = false;  // since the last in-flight state handed to the writer
  bool has_open_ranges = false;      // in that state
  int64_t in_flight_written_ns = 0;  // when it was taken
  std::string progress_written;      // the progress file's content as last written
  // The pool's reserve of ready chunks (TopUpReserve): what it aims at, and the chunks
  // taken when it last looked.
  size_t reserve_target = 0;
  uint64_t chunks_taken_seen = 0;
  size_t idle_looks = 0;  // looks in a row that found no chunk taken

  // ---- stages of one record; the writer exists ----
  // An NCCL plugin callback: NCCL's threads (its proxy) get no thread lane, what they
  // report is communicator work.
  void AddNccl(const RecordReader& record);
  // The buffer's thread with its lane, created at the thread's first record.
  ThreadState& ThreadOf(const ThreadBuffer& buffer);
  // Any other record, on its thread's lane.
  void AddThreadRecord(const RecordReader& record, ThreadState& thread);
  void AddPush(const RecordReader& record, int64_t ts, ThreadState& thread);
  void AddPop(const RecordReader& record, int64_t ts, ThreadState& thread);
  void AddStart(const RecordReader& record, int64_t ts, const ThreadState& thread);
  void AddEnd(const RecordReader& record, int64_t ts, const ThreadState& thread);
  void AddMark(const RecordReader& record, int64_t ts, const ThreadState& thread);
  void AddThreadName(const RecordReader& record);
  void AddHookRange(const RecordReader& record, const ThreadState& thread);
  void AddHookCollective(const RecordReader& record, const ThreadState& thread);
  void AddHookCollectiveBegin(const RecordReader& record, const ThreadState& thread);
  void AddHookRangeEvent(const ThreadState& thread, int64_t start_ns, int64_t end_ns, trace::StringId name,
                         HookRole role, std::string_view args);

  // ---- what the stages share ----
  // The record's domain; records of the default domain store none.
  const NvtxDomain* DomainOf(const RecordHeader& header) const {
    return header.domain != nullptr ? header.domain : registry.DefaultDomain();
  }
  trace::StringId InternDomain(const NvtxDomain* domain);
  trace::StringId NameOf(const RecordReader& record);  // registered string or inline text
  trace::StringId ArgsOf(const NvtxDomain* domain, const OwnedPieces& pieces, bool unfinished);
  OpenRange OpenRangeOf(const RecordReader& record, int64_t ts, const ThreadState& thread);
  // Writes a finished range; `end_lane` is the lane that ended it (start/end ranges may end
  // on another thread).
  void EmitRange(OpenRange& range, int64_t end_ns, trace::LaneId end_lane, trace::NvtxRangeStyle style,
                 bool unfinished);
  // The flight recorder's state and every open range, for the rank file.
  trace::InFlightState InFlight(int64_t as_of_ns);
};

namespace {
// What the collector counts as a completed training step for progress: a range named as
// the analyzer's default step names, or PyTorch's ProfilerStep#N.
bool IsStepName(std::string_view name) {
  // Without a copy: the drain asks for every range it opens.
  const auto equal_without_case = [](std::string_view text, std::string_view lower) {
    if (text.size() != lower.size()) return false;
    for (size_t i = 0; i < text.size(); ++i) {
      if (std::tolower(static_cast<unsigned char>(text[i])) != lower[i]) return false;
    }
    return true;
  };
  constexpr std::string_view kProfilerStep = "profilerstep#";
  return equal_without_case(name, "step") || equal_without_case(name, "train_step") ||
         (name.size() > kProfilerStep.size() && equal_without_case(name.substr(0, kProfilerStep.size()), kProfilerStep));
}
}  // namespace

trace::InFlightState Recorder::DrainState::InFlight(int64_t as_of_ns) {
  trace::InFlightState state = flight.Snapshot(as_of_ns);
  const auto add = [&](const OpenRange& range) {
    trace::OpenRange open;
    open.lane = range.lane;
    open.depth = range.depth > 0 ? range.depth - 1 : 0;
    open.start_ns = range.start_ns;
    open.name = range.text;
    open.domain = range.domain != nullptr ? range.domain->name : std::string();
    open.category = range.category;
    std::vector<PayloadPiece> views;
    for (const auto& [schema, bytes] : range.pieces) views.push_back({schema, bytes});
    open.args = PayloadsToJson(registry, range.domain, views, false);
    state.open_ranges.push_back(std::move(open));
  };
  for (const auto& [serial, thread] : threads) {
    for (const auto& [domain, stack] : thread.stacks) {
      for (const OpenRange& range : stack) add(range);
    }
  }
  for (const auto& [id, range] : started) add(range);
  open_ranges_changed = false;
  has_open_ranges = !state.open_ranges.empty();
  return state;
}

void Recorder::DrainState::AddNccl(const RecordReader& record) {
  const std::optional<NcclRecord> body = record.body<NcclRecord>();
  if (!body) return;
  nccl.Add(*body, record.text(), clock.ToRealtimeNs(record.header().ticks));
}

Recorder::DrainState::ThreadState& Recorder::DrainState::ThreadOf(const ThreadBuffer& buffer) {
  ThreadState& thread = threads[buffer.serial()];
  if (thread.lane == trace::kNoLane) {
    thread.tid = buffer.tid();
    auto named = thread_names.find(thread.tid);
    trace::Lane lane;
    lane.kind = trace::LaneKind::kCpuThread;
    lane.pid = pid;
    lane.tid = thread.tid;
    lane.name = named != thread_names.end() ? named->second : ThreadNameOf(buffer);
    thread.lane = writer->AddLane(lane);
  }
  return thread;
}

void Recorder::DrainState::AddThreadRecord(const RecordReader& record, ThreadState& thread) {
  const int64_t ts = clock.ToRealtimeNs(record.header().ticks);
  switch (record.header().kind) {
    case RecordKind::kPush: AddPush(record, ts, thread); break;
    case RecordKind::kPop: AddPop(record, ts, thread); break;
    case RecordKind::kStart: AddStart(record, ts, thread); break;
    case RecordKind::kEnd: AddEnd(record, ts, thread); break;
    case RecordKind::kMark: AddMark(record, ts, thread); break;
    case RecordKind::kNameThread: AddThreadName(record); break;
    case RecordKind::kNccl: break;  // AddNccl, without a thread lane
    case RecordKind::kHookRange: AddHookRange(record, thread); break;
    case RecordKind::kHookCollective: AddHookCollective(record, thread); break;
    case RecordKind::kHookCollectiveBegin: AddHookCollectiveBegin(record, thread); break;
  }
}

void Recorder::DrainState::AddPush(const RecordReader& record, int64_t ts, ThreadState& thread) {
  OpenRange range = OpenRangeOf(record, ts, thread);
  range.correlation_id = record.header().value;
  open_ranges_changed = true;
  auto& stack = thread.stacks[range.domain];
  // Ranges at or above the pushed level lost their pops (dropped records): end them here.
  while (!stack.empty() && stack.back().depth >= range.depth) {
    EmitRange(stack.back(), ts, thread.lane, trace::NvtxRangeStyle::kPushPop, true);
    stack.pop_back();
  }
  stack.push_back(std::move(range));
}

void Recorder::DrainState::AddPop(const RecordReader& record, int64_t ts, ThreadState& thread) {
  const RecordHeader& header = record.header();
  open_ranges_changed = true;
  auto& stack = thread.stacks[DomainOf(header)];
  // Ranges above the popped level lost their pops (full buffer): end them here.
  while (!stack.empty() && stack.back().depth > header.depth) {
    EmitRange(stack.back(), ts, thread.lane, trace::NvtxRangeStyle::kPushPop, true);
    stack.pop_back();
  }
  if (stack.empty() || stack.back().depth != header.depth) {
    ++stats.unmatched_ends;  // its push was lost
    return;
  }
  OpenRange& range = stack.back();
  for (auto& piece : ReadPieces(record)) range.pieces.push_back(std::move(piece));
  EmitRange(range, ts, thread.lane, trace::NvtxRangeStyle::kPushPop, false);
  stack.pop_back();
}

void Recorder::DrainState::AddStart(const RecordReader& record, int64_t ts, const ThreadState& thread) {
  OpenRange range = OpenRangeOf(record, ts, thread);
  open_ranges_changed = true;
  auto ended = pending_ends.find(record.header().value);
  if (ended != pending_ends.end()) {
    for (auto& piece : ended->second.pieces) range.pieces.push_back(std::move(piece));
    EmitRange(range, ended->second.end_ns, ended->second.lane, trace::NvtxRangeStyle::kStartEnd, false);
    pending_ends.erase(ended);
  } else {
    started.emplace(record.header().value, std::move(range));
  }
}

void Recorder::DrainState::AddEnd(const RecordReader& record, int64_t ts, const ThreadState& thread) {
  auto start = started.find(record.header().value);
  open_ranges_changed = true;
  if (start == started.end()) {
    pending_ends[record.header().value] = {ts, thread.lane, ReadPieces(record)};
    return;
  }
  for (auto& piece : ReadPieces(record)) start->second.pieces.push_back(std::move(piece));
  EmitRange(start->second, ts, thread.lane, trace::NvtxRangeStyle::kStartEnd, false);
  started.erase(start);
}

void Recorder::DrainState::AddMark(const RecordReader& record, int64_t ts, const ThreadState& thread) {
  const RecordHeader& header = record.header();
  trace::NvtxMarkEvent mark;
  mark.lane = thread.lane;
  mark.start_ns = mark.end_ns = ts;
  mark.name = NameOf(record);
  mark.domain = InternDomain(DomainOf(header));
  mark.category = header.category;
  mark.color = header.color;
  mark.payload = ToPayload(header.payload_kind, header.payload_bits);
  mark.args = ArgsOf(DomainOf(header), ReadPieces(record), false);
  batch.nvtx_marks.push_back(mark);
}

void Recorder::DrainState::AddThreadName(const RecordReader& record) {
  const auto tid = static_cast<int64_t>(record.header().value);
  const std::string_view name = record.text();
  thread_names[tid] = std::string(name);
  for (auto& [serial, state] : threads) {
    if (state.tid != tid || state.lane == trace::kNoLane) continue;
    trace::Lane lane;
    lane.kind = trace::LaneKind::kCpuThread;
    lane.pid = pid;
    lane.tid = tid;
    lane.name = std::string(name);
    writer->AddLane(lane);
  }
}

namespace {
// The next `size` bytes of `text`, or what is left of it.
std::string_view TakeText(std::string_view& text, size_t size) {
  const std::string_view piece = text.substr(0, std::min(size, text.size()));
  text.remove_prefix(piece.size());
  return piece;
}
}  // namespace

namespace {
// A hook's collective as the flight recorder keeps it, entered at the body's start.
trace::FlightCollective FlightCollectiveOf(const HookCollectiveBody& body, std::string_view name, trace::LaneId lane) {
  trace::FlightCollective collective;
  collective.comm_hash = body.comm_hash;
  collective.sequence = body.sequence;
  collective.op = body.op;
  collective.name = std::string(name);
  collective.bytes = body.bytes;
  collective.root = body.root;
  collective.peer = body.peer;
  collective.comm_rank = body.comm_rank;
  collective.comm_size = body.comm_size;
  collective.lane = lane;
  collective.start_ns = body.start_ns;
  return collective;
}
}  // namespace

void Recorder::DrainState::AddHookRange(const RecordReader& record, const ThreadState& thread) {
  const std::optional<HookRangeBody> body = record.body<HookRangeBody>();
  if (!body || body->end_ns < body->start_ns) {
    ++stats.hook_refused;
    return;
  }
  std::string_view text = record.text();
  const std::string_view name = TakeText(text, body->name_size);
  AddHookRangeEvent(thread, body->start_ns, body->end_ns, writer->Intern(name), body->role, text);
  if (body->role != HookRole::kComm && IsStepName(name)) flight.CompleteStep(body->end_ns);
}

void Recorder::DrainState::AddHookRangeEvent(const ThreadState& thread, int64_t start_ns, int64_t end_ns,
                                             trace::StringId name, HookRole role, std::string_view args) {
  trace::NvtxRangeEvent event;
  event.lane = thread.lane;
  event.start_ns = start_ns;
  event.end_ns = end_ns;
  event.name = name;
  event.domain = InternDomain(hook_domain);
  event.category = static_cast<uint32_t>(role);
  event.args = args.empty() ? trace::kEmptyString : writer->Intern(args);
  event.style = trace::NvtxRangeStyle::kStartEnd;
  batch.nvtx_ranges.push_back(event);
}

void Recorder::DrainState::AddHookCollective(const RecordReader& record, const ThreadState& thread) {
  const std::optional<HookCollectiveBody> body = record.body<HookCollectiveBody>();
  if (!body || body->end_ns < body->start_ns) {
    ++stats.hook_refused;
    return;
  }
  std::string_view text = record.text();
  const std::string_view name = TakeText(text, body->name_size);
  const std::string_view comm_name = TakeText(text, body->comm_name_size);
  auto [lane, added] = hook_comm_lanes.try_emplace(body->comm_hash, trace::kNoLane);
  if (added) {
    trace::Lane comm_lane;
    comm_lane.kind = trace::LaneKind::kCommunicator;
    comm_lane.pid = pid;
    comm_lane.comm_hash = body->comm_hash;
    comm_lane.name = comm_name.empty() ? fmt::format("communicator {:016x}", body->comm_hash) : std::string(comm_name);
    lane->second = writer->AddLane(comm_lane);
  }
  trace::CollectiveEvent collective;
  collective.lane = lane->second;
  collective.start_ns = body->start_ns;
  collective.end_ns = body->end_ns;
  collective.name = writer->Intern(name);
  collective.comm_hash = body->comm_hash;
  collective.sequence = body->sequence;
  collective.op = body->op;
  collective.reduce_op = body->reduce_op;
  collective.datatype = body->datatype;
  collective.bytes = body->bytes;
  collective.root = body->root;
  collective.peer = body->peer;
  collective.comm_rank = body->comm_rank;
  collective.comm_size = body->comm_size;
  batch.collectives.push_back(collective);
  flight.Complete(FlightCollectiveOf(*body, name, thread.lane), body->end_ns);
  // The time it took, as communication on the thread that completed it.
  AddHookRangeEvent(thread, body->start_ns, body->end_ns, collective.name, HookRole::kComm, text);
}

void Recorder::DrainState::AddHookCollectiveBegin(const RecordReader& record, const ThreadState& thread) {
  const std::optional<HookCollectiveBody> body = record.body<HookCollectiveBody>();
  if (!body) return;
  std::string_view text = record.text();
  flight.Enter(FlightCollectiveOf(*body, TakeText(text, body->name_size), thread.lane));
}

trace::StringId Recorder::DrainState::InternDomain(const NvtxDomain* domain) {
  if (domain == nullptr || domain->name.empty()) return trace::kEmptyString;
  auto [it, added] = domain_ids.try_emplace(domain, trace::kEmptyString);
  if (added) it->second = writer->Intern(domain->name);
  return it->second;
}

trace::StringId Recorder::DrainState::NameOf(const RecordReader& record) {
  if (const NvtxString* registered = record.header().registered; registered != nullptr) {
    auto [it, added] = registered_ids.try_emplace(registered, trace::kEmptyString);
    if (added) it->second = writer->Intern(registered->text);
    return it->second;
  }
  return writer->Intern(record.text());
}

trace::StringId Recorder::DrainState::ArgsOf(const NvtxDomain* domain, const OwnedPieces& pieces, bool unfinished) {
  std::vector<PayloadPiece> views;
  for (const auto& [schema, bytes] : pieces) views.push_back({schema, bytes});
  std::string json = PayloadsToJson(registry, domain, views, unfinished);
  return json.empty() ? trace::kEmptyString : writer->Intern(json);
}

OpenRange Recorder::DrainState::OpenRangeOf(const RecordReader& record, int64_t ts, const ThreadState& thread) {
  const RecordHeader& header = record.header();
  OpenRange range;
  range.start_ns = ts;
  range.depth = header.depth;
  range.lane = thread.lane;
  range.name = NameOf(record);
  range.domain = DomainOf(header);
  range.category = header.category;
  range.color = header.color;
  range.payload = ToPayload(header.payload_kind, header.payload_bits);
  range.pieces = ReadPieces(record);
  range.text = header.registered != nullptr ? header.registered->text : std::string(record.text());
  range.step = IsStepName(range.text);
  if (!range.pieces.empty()) {
    std::vector<PayloadPiece> views;
    for (const auto& [schema, bytes] : range.pieces) views.push_back({schema, bytes});
    if (std::optional<CollectivePayload> payload = ReadCollectivePayload(registry, range.domain, views)) {
      trace::FlightCollective entered;
      entered.comm_hash = payload->comm_hash;
      entered.sequence = payload->sequence;
      entered.op = trace::CollectiveOpFromName(range.text);
      entered.name = range.text;
      entered.bytes = payload->bytes;
      entered.root = payload->root;
      entered.peer = payload->peer;
      entered.comm_rank = payload->comm_rank;
      entered.comm_size = payload->comm_size;
      entered.lane = thread.lane;
      entered.start_ns = ts;
      flight.Enter(entered);
      range.collective = std::move(entered);
    }
  }
  return range;
}

void Recorder::DrainState::EmitRange(OpenRange& range, int64_t end_ns, trace::LaneId end_lane,
                                     trace::NvtxRangeStyle style, bool unfinished) {
  trace::NvtxRangeEvent event;
  event.lane = range.lane;
  event.start_ns = range.start_ns;
  event.end_ns = std::max(end_ns, range.start_ns);
  event.name = range.name;
  event.domain = InternDomain(range.domain);
  event.category = range.category;
  event.color = range.color;
  event.payload = range.payload;
  event.args = ArgsOf(range.domain, range.pieces, unfinished);
  event.style = style;
  event.correlation_id = range.correlation_id;
  event.end_lane = end_lane != range.lane ? end_lane : trace::kNoLane;
  batch.nvtx_ranges.push_back(event);
  if (unfinished) ++stats.unfinished;
  // Ended during the run (its pop, or a later push or pop where the pop was lost): done.
  if (range.collective) flight.Complete(*range.collective, event.end_ns);
  if (range.step && !unfinished) flight.CompleteStep(event.end_ns);
}

Recorder::Recorder(RecorderOptions options)
    : options_(std::move(options)),
      generation_(g_recorder_generation.fetch_add(1) + 1),
      registry_(options_.config.trace),
      buffers_(options_.config.buffer_bytes),
      clock_source_(ChooseClockSource(options_.config.clock_override)),
      default_domain_(registry_.DefaultDomain()),
      hook_domain_(registry_.CreateDomain(kHookDomainName)),
      drain_(std::make_unique<DrainState>(clock_source_, options_.pid, registry_, hook_domain_)) {
  pthread_once(&g_exit_key_once, &CreateExitKey);
  drain_->clock.Calibrate();
  drain_thread_ = std::thread([this] {
    // Process-directed signals must reach an application thread, whose handler then
    // waits for this one.
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, nullptr);
    try {
      DrainLoop();
    } catch (...) {
      // An exception here must not end the process: recording stops, what was committed stays.
      NoteCollectorFault();
      recording_.store(false);
      std::lock_guard lock(mutex_);
      close_status_ = InternalError("the collector's drain thread failed; recording stopped");
      closed_ = true;
      flush_done_ = flush_requested_;
      device_finish_done_ = device_finish_requested_;
      flushed_.notify_all();
      signal_done_seq_.store(signal_request_seq_.load());
    }
  });
}

Recorder::~Recorder() {
  if (abandoned_) return;
  (void)Close(EndReason::kExit);
  // A scoped recorder cannot go while its drain thread still uses it.
  if (drain_thread_.joinable() && drain_thread_.get_id() != std::this_thread::get_id()) drain_thread_.join();
  // The buffers go with us; this thread's exit must not mark a freed one. (The injected
  // recorder is never destroyed; this is for recorders with a scope, as in tests.)
  if (tls_slot.generation == generation_) {
    pthread_setspecific(g_exit_key, nullptr);
    tls_slot = ThreadSlot{};
  }
}

// ---- application threads ---------------------------------------------------------------

ThreadBuffer* Recorder::BufferForThisThread() {
  if (tls_slot.generation == generation_) return tls_slot.buffer;
  char name[16] = {};
  prctl(PR_GET_NAME, name);  // now: the thread may be gone when the drain thread looks
  ThreadBuffer* buffer = buffers_.Register(CurrentTid(), name);
  tls_slot = ThreadSlot{generation_, buffer, {}, 0, 0, {}};
  if (buffer != nullptr) pthread_setspecific(g_exit_key, buffer);
  return buffer;
}

bool Recorder::Append(const EventDraft& draft, RecordKind kind, uint32_t depth) {
  ThreadBuffer* buffer = BufferForThisThread();
  if (buffer == nullptr) return false;
  const std::string_view text = draft.text.substr(0, kMaxTextBytes);
  const std::span<const PayloadPiece> pieces = draft.pieces.first(std::min(draft.pieces.size(), kMaxRecordPieces));
  RecordHeader header;
  header.kind = kind;
  header.payload_kind = draft.payload_kind;
  header.depth = depth;
  header.category = draft.category;
  header.color = draft.color;
  header.domain = draft.domain != default_domain_ ? draft.domain : nullptr;  // no word stored
  header.registered = draft.registered;
  header.payload_bits = draft.payload_bits;
  header.value = draft.value;
  const size_t size = FrameRecord(header, text, pieces);
  std::byte* out = buffer->Reserve(size);
  if (out == nullptr) return false;
  header.ticks = ReadTicks(clock_source_);
  EncodeRecord(out, header, text, pieces);
  buffer->Commit(size);
  return true;
}

int Recorder::Push(const EventDraft& draft) {
  if (!recording()) return -1;
  ThreadBuffer* buffer = BufferForThisThread();  // a thread's first event resets its slot
  uint32_t& depth = DepthOf(draft.domain);
  uint32_t level = depth++;
  if (buffer == nullptr || !correlating_.load(std::memory_order_acquire)) {
    Append(draft, RecordKind::kPush, depth);
    return static_cast<int>(level);
  }
  EventDraft tagged = draft;
  tagged.value = TagDeviceWork(draft.domain, depth);
  Append(tagged, RecordKind::kPush, depth);
  return static_cast<int>(level);
}

uint64_t Recorder::TagDeviceWork(const NvtxDomain* domain, uint32_t depth) {
  DeviceTracer* tracer = correlating_.load(std::memory_order_acquire) ? device_tracer_.load() : nullptr;
  ThreadSlot& slot = tls_slot;
  if (tracer == nullptr || slot.buffer == nullptr || slot.correlated_count == kMaxCorrelatedRanges) return 0;
  // The range's id goes on CUPTI's stack for this thread: API calls until the pop carry it.
  const uint64_t id = (slot.buffer->serial() << kRangeSerialShift) | ++slot.ranges_started;
  tracer->PushCorrelation(id);
  slot.correlated[slot.correlated_count++] = {domain, depth, id};
  return id;
}

void Recorder::PopCorrelation(const NvtxDomain* domain, uint32_t depth) {
  DeviceTracer* tracer = correlating_.load(std::memory_order_acquire) ? device_tracer_.load() : nullptr;
  if (tracer == nullptr || tls_slot.correlated_count == 0) return;
  // This range and the deeper ranges of its domain (whose pops were lost) leave CUPTI's
  // stack; ranges of other domains above them, popped out of order, go back on it.
  CorrelatedRange* ranges = tls_slot.correlated;
  uint32_t count = tls_slot.correlated_count;
  uint32_t lowest = count;
  for (uint32_t i = 0; i < count; ++i) {
    if (ranges[i].domain == domain && ranges[i].depth >= depth) {
      lowest = i;
      break;
    }
  }
  if (lowest == count) return;
  for (uint32_t i = count; i > lowest; --i) tracer->PopCorrelation();
  uint32_t kept = lowest;
  for (uint32_t i = lowest; i < count; ++i) {
    if (ranges[i].domain == domain && ranges[i].depth >= depth) continue;
    tracer->PushCorrelation(ranges[i].id);
    ranges[kept++] = ranges[i];
  }
  tls_slot.correlated_count = kept;
}

int Recorder::Pop(const NvtxDomain* domain, std::span<const PayloadPiece> pieces) {
  if (!recording()) return -1;
  BufferForThisThread();
  uint32_t& depth = DepthOf(domain);
  if (depth == 0) return -1;
  PopCorrelation(domain, depth);
  EventDraft draft;
  draft.domain = domain;
  draft.pieces = pieces;
  Append(draft, RecordKind::kPop, depth);
  return static_cast<int>(--depth);
}

int Recorder::PushAsDraft(const NvtxDomain* domain, const char* message, const NvtxString* registered,
                          uint32_t category, uint32_t color) {
  EventDraft draft;
  draft.domain = domain;
  if (message != nullptr) draft.text = message;
  draft.registered = registered;
  draft.category = category;
  draft.color = color;
  return Push(draft);
}

int Recorder::PopWithoutPayload(const NvtxDomain* domain) { return Pop(domain, {}); }

uint64_t Recorder::Start(const EventDraft& draft) {
  uint64_t id = next_range_id_.fetch_add(1, std::memory_order_relaxed);
  if (!recording()) return id;
  EventDraft copy = draft;
  copy.value = id;
  Append(copy, RecordKind::kStart, 0);
  return id;
}

void Recorder::End(const NvtxDomain* domain, uint64_t range_id,
                   std::span<const PayloadPiece> pieces) {
  if (!recording()) return;
  EventDraft draft;
  draft.domain = domain;
  draft.value = range_id;
  draft.pieces = pieces;
  Append(draft, RecordKind::kEnd, 0);
}

void Recorder::Mark(const EventDraft& draft) {
  if (recording()) Append(draft, RecordKind::kMark, 0);
}

template <typename Body>
bool Recorder::AppendWithBody(RecordKind kind, const Body& body, std::string_view text) {
  if (!recording()) return false;
  ThreadBuffer* buffer = BufferForThisThread();
  if (buffer == nullptr) return false;
  text = text.substr(0, kMaxTextBytes);
  RecordHeader header;
  header.kind = kind;
  const size_t size = FrameRecordWithBody<Body>(header, text);
  std::byte* out = buffer->Reserve(size);
  if (out == nullptr) return false;
  header.ticks = ReadTicks(clock_source_);
  EncodeRecordWithBody(out, header, text, body);
  buffer->Commit(size);
  return true;
}

bool Recorder::RecordNccl(const NcclRecord& nccl, std::string_view text) {
  return AppendWithBody(RecordKind::kNccl, nccl, text);
}

void Recorder::NameHookCategories() {
  std::call_once(hook_categories_named_, [this] {
    registry_.NameCategory(hook_domain_, static_cast<uint32_t>(HookRole::kCompute), "compute");
    registry_.NameCategory(hook_domain_, static_cast<uint32_t>(HookRole::kComm), "comm");
  });
}

bool Recorder::RecordHookRange(const HookRangeBody& body, std::string_view text) {
  if (!recording()) return false;
  if (body.role != HookRole::kAnnotation) NameHookCategories();
  return AppendWithBody(RecordKind::kHookRange, body, text);
}

bool Recorder::RecordHookCollectiveBegin(const HookCollectiveBody& body, std::string_view text) {
  if (!recording()) return false;
  return AppendWithBody(RecordKind::kHookCollectiveBegin, body, text);
}

bool Recorder::RecordHookCollective(const HookCollectiveBody& body, std::string_view text) {
  if (!recording()) return false;
  NameHookCategories();
  return AppendWithBody(RecordKind::kHookCollective, body, text);
}

void Recorder::NameThread(int64_t tid, std::string_view name) {
  if (!recording()) return;
  EventDraft draft;
  draft.text = name;
  draft.value = static_cast<uint64_t>(tid);
  Append(draft, RecordKind::kNameThread, 0);
}

// ---- drain thread ----------------------------------------------------------------------

void Recorder::TopUpReserve() {
  DrainState& d = *drain_;
  ChunkPool& pool = buffers_.pool();
  const size_t minimum = std::min<size_t>(kMinReadyChunks, pool.chunk_count());
  const uint64_t taken = pool.taken();
  const auto recently = static_cast<size_t>(taken - d.chunks_taken_seen);
  d.chunks_taken_seen = taken;
  d.idle_looks = recently > 0 ? 0 : d.idle_looks + 1;
  // Twice what the threads took since the last look, doubled when one found nothing ready;
  // it shrinks, and memory goes back to the kernel, only after a second without any taken,
  // so that periodic bursts (training steps) find their memory ready.
  size_t target = std::max({minimum, 2 * recently, d.reserve_target});
  if (pool.TakeStarved()) target = std::max(target, 2 * d.reserve_target);
  const bool idle = d.idle_looks >= kIdleLooksBeforeRelease;
  if (idle) target = minimum;
  d.reserve_target = std::min(target, std::max<size_t>(minimum, pool.chunk_count() / 2));
  pool.Prepare(d.reserve_target);
  if (idle) pool.Release(d.reserve_target);
}

void Recorder::DrainLoop() {
  std::unique_lock lock(mutex_);
  auto requested = [&] {
    return close_requested_ || flush_requested_ > flush_done_ || device_finish_requested_ > device_finish_done_;
  };
  for (;;) {
    // The reserve is looked at more often than the buffers are drained: a thread that
    // records fast must find prepared memory, or it drops.
    const auto drain_at = std::chrono::steady_clock::now() + options_.drain_interval;
    for (;;) {
      lock.unlock();
      TopUpReserve();
      lock.lock();
      const auto now = std::chrono::steady_clock::now();
      if (requested() || now >= drain_at) break;
      wake_.wait_until(lock, std::min(drain_at, now + kReserveInterval), requested);
      if (requested()) break;
    }
    bool closing = close_requested_;
    EndReason reason = close_reason_;
    int close_signal = close_signal_;
    uint64_t flush_ticket = flush_requested_;
    uint64_t device_finish_ticket = device_finish_requested_;
    int signal_request = signal_request_.exchange(0);
    uint64_t signal_seq = signal_request_seq_.load();
    lock.unlock();

    if (closing || signal_request == 2) {
      Status status = signal_request == 2 && !closing ? Finish(EndReason::kSignal, signal_number_.load())
                                                      : Finish(reason, close_signal);
      lock.lock();
      close_status_ = status;
      closed_ = true;
      flush_done_ = flush_requested_;
      device_finish_done_ = device_finish_requested_;
      flushed_.notify_all();
      lock.unlock();
      signal_done_seq_.store(signal_seq);
      return;
    }
    const bool flush = flush_ticket > flush_done_ || signal_request == 1;
    DrainPass(/*final=*/false);
    DrainDevice(flush, /*final=*/device_finish_ticket > device_finish_done_);
    if (flush && drain_->writer) (void)drain_->writer->Flush(std::chrono::seconds(10));
    if (signal_request != 0) signal_done_seq_.store(signal_seq);
    lock.lock();
    flush_done_ = flush_ticket;
    device_finish_done_ = device_finish_ticket;
    flushed_.notify_all();
  }
}

void Recorder::EnsureWriter(bool has_events) {
  DrainState& d = *drain_;
  if (d.writer || d.writer_failed) return;
  const CollectorConfig& config = options_.config;
  trace::RankIdentity identity;
  identity.run_id = config.run_id;
  identity.rank = config.rank.rank;
  identity.world_size = config.rank.world_size;
  identity.local_rank = config.rank.local_rank;
  identity.host = options_.host;
  identity.pid = options_.pid;
  identity.command_line = options_.command_line;
  std::filesystem::path dir(config.run_dir);
  std::filesystem::path path = identity.rank ? dir / trace::RankFileName(*identity.rank)
                                             : dir / trace::UnknownRankFileName(options_.pid);
  // A file created at exit only to be closed at once (has_events false) needs no lock.
  if (has_events) HoldRecordingLock();
  trace::WriterOptions writer_options;
  // The injected writer's own memory beside the buffer budget: a small page cache (rows
  // arrive in time order, so inserts touch few pages) and a queue the drain keeps short.
  writer_options.page_cache_kib = kWriterPageCacheKib;
  // Once, on the writer thread, when recording stops for good (a full disk, a removed
  // file): the handlers stop buffering what can no longer be kept, and the job goes on.
  writer_options.on_failure = [this, who = describe_process()](const Status& status) {
    recording_.store(false);
    writer_stopped_.store(true);
    WriteStderrLine(fmt::format("rankscope: {}: {}; training goes on", who, status.message()));
  };
  auto created = trace::TraceWriter::Create(path, identity, writer_options);
  if (!created.ok() && identity.rank && created.status().code() == StatusCode::kAlreadyExists) {
    // With nothing to record (a wrapper such as a shell or perf exiting after its child
    // claimed the rank), there is nothing to keep: no file, no message.
    if (!has_events) {
      d.writer_failed = true;
      return;
    }
    // Another process of this rank (a wrapper's child, a subprocess) claimed the file first.
    WriteStderrLine(fmt::format("rankscope: {} is taken; pid {} records as rank-unknown", path.filename().string(),
                                options_.pid));
    identity.rank.reset();
    identity.world_size.reset();
    identity.local_rank.reset();
    path = dir / trace::UnknownRankFileName(options_.pid);
    created = trace::TraceWriter::Create(path, identity, writer_options);
    if (created.ok()) (*created)->SetMeta("collector.claimed_rank", std::to_string(*config.rank.rank));
  }
  if (!created.ok()) {
    WriteStderrLine("rankscope: recording off: " + created.status().message());
    d.writer_failed = true;
    recording_.store(false);
    ReleaseRecordingLock();
    return;
  }
  d.writer = std::move(*created);
  d.writer->SetMeta("collector.clock", ClockSourceName(clock_source_));
  d.writer->SetMeta("collector.rank_source", config.rank.source.empty() ? "none" : config.rank.source);
  d.writer->SetMeta("collector.trace", config.trace.ToList());
  std::lock_guard lock(mutex_);
  file_path_ = path;
}

bool Recorder::WriterCanTake(bool wait) {
  DrainState& d = *drain_;
  auto backlogged = [&] {
    if (!d.writer) return false;
    trace::WriterStats stats = d.writer->stats();
    return stats.events_submitted - stats.events_committed > kMaxWriterBacklog;
  };
  if (!backlogged()) return true;
  if (!wait) return false;
  auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (backlogged() && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

void Recorder::DrainPass(bool final) {
  for (;;) {
    if (!WriterCanTake(/*wait=*/final)) return;
    size_t drained = DrainOnce(kMaxRecordsPerPass);
    if (drained < kMaxRecordsPerPass) return;
  }
}

void Recorder::DrainDevice(bool flush, bool final) {
  DeviceTracer* tracer = device_tracer_.load(std::memory_order_acquire);
  if (tracer == nullptr || tracer->finished()) return;
  DrainState& d = *drain_;
  EnsureWriter(/*has_events=*/true);
  if (!d.writer) return;
  WritePendingMeta();
  tracer->Drain(
      Sink(),
      [&](trace::EventTables& events) {
        if (events.empty()) return true;
        if (!WriterCanTake(/*wait=*/final)) return false;
        d.writer->Submit(std::move(events));
        events = trace::EventTables{};
        return true;
      },
      flush, final);
  for (const trace::DropRecord& drop : tracer->TakeDrops()) d.writer->AddDrops(drop);
  if (tracer->finished()) correlating_.store(false, std::memory_order_release);
  if (final) {
    for (const auto& [key, value] : tracer->Meta()) d.writer->SetMeta(key, value);
  }
}

DeviceEventSink Recorder::Sink() {
  DrainState& d = *drain_;
  return DeviceEventSink{
      .add_lane = [&d](const trace::Lane& lane) { return d.writer->AddLane(lane); },
      .intern = [&d](std::string_view text) { return d.writer->Intern(text); },
      .to_realtime_ns = [&d](uint64_t ticks) { return d.clock.ToRealtimeNs(ticks); },
      .thread_name = [this](int64_t tid) { return ThreadName(tid); },
  };
}

std::string Recorder::ThreadName(int64_t tid) {
  if (auto named = drain_->thread_names.find(tid); named != drain_->thread_names.end()) return named->second;
  std::string comm = ReadSmallFile(fmt::format("/proc/self/task/{}/comm", tid).c_str(), 64);
  while (!comm.empty() && (comm.back() == '\n' || comm.back() == '\0')) comm.pop_back();
  return comm.empty() ? fmt::format("thread {}", tid) : comm;
}

void Recorder::WritePendingMeta() {
  DrainState& d = *drain_;
  if (!d.writer) return;
  std::vector<std::pair<std::string, std::string>> rows;
  {
    std::lock_guard lock(mutex_);
    rows.swap(pending_meta_);
  }
  for (const auto& [key, value] : rows) d.writer->SetMeta(key, value);
  // A category is named before the ranges that use it are recorded, so the names drained
  // by now cover every range of this pass; the writer commits them no later than the ranges
  // (TraceWriter::SetMeta), and a rank killed at any instant keeps them (the analyzer
  // classifies CPU-backend ranges by these names).
  for (const auto& [domain, category, name] : registry_.CategoriesFrom(d.categories_written)) {
    d.writer->SetMeta(fmt::format("nvtx.category.{}.{}", domain, category), name);
    ++d.categories_written;
  }
}

void Recorder::HoldRecordingLock() {
  DrainState& d = *drain_;
  if (d.recording_lock) return;
  // Never blocks the drain for long: a RunIsRecording probe holds the lock exclusively for
  // microseconds; any other failure (read-only directory, odd file system) only costs the
  // safeguard, never the recording.
  for (int attempt = 0; attempt < 50; ++attempt) {
    Result<trace::RecordingLock> lock = trace::RecordingLock::Acquire(options_.config.run_dir);
    if (lock.ok()) {
      d.recording_lock.emplace(std::move(lock).value());
      held_lock_.store(&*d.recording_lock, std::memory_order_release);
      return;
    }
    if (lock.status().code() != StatusCode::kUnavailable) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void Recorder::ReleaseRecordingLock() {
  held_lock_.store(nullptr, std::memory_order_release);  // a later fork has nothing to close
  drain_->recording_lock.reset();
}

size_t Recorder::DrainOnce(size_t max_records) {
  DrainState& d = *drain_;
  size_t drained = 0;
  d.clock.Calibrate();
  std::vector<ThreadBuffer*> exited;
  for (ThreadBuffer* buffer : buffers_.Snapshot()) {
    bool was_exited = buffer->exited();
    d.stats.buffer_drops += buffer->TakeDrops();
    DrainState::ThreadState* thread = nullptr;  // looked up at the buffer's first thread record
    if (drained == max_records) break;
    drained += buffer->Drain([&](std::span<const std::byte> bytes) {
      if (++d.stats.records % kRecordsBetweenReserveLooks == 0) TopUpReserve();
      const std::optional<RecordReader> record = RecordReader::Open(bytes);
      if (!record) return;
      EnsureWriter(/*has_events=*/true);
      if (!d.writer) return;
      if (record->header().kind == RecordKind::kNccl) {
        d.AddNccl(*record);
        return;
      }
      if (thread == nullptr) thread = &d.ThreadOf(*buffer);
      d.AddThreadRecord(*record, *thread);
    }, max_records - drained);
    // An exited thread's buffer goes once it was seen exited before a drain that emptied it.
    if (was_exited && drained < max_records) exited.push_back(buffer);
  }
  buffers_.Remove(exited);
  // Records dropped before any was kept still make the file: the drops say what was lost.
  if (d.stats.buffer_drops > d.reported_drops) EnsureWriter(/*has_events=*/true);
  WritePendingMeta();
  SubmitDrained();
  return drained;
}

void Recorder::SubmitDrained() {
  DrainState& d = *drain_;
  if (!d.writer) return;
  if (!d.nccl.empty()) d.nccl.Emit(Sink(), d.batch, RealtimeNowNs(), /*final=*/false);
  if (d.stats.buffer_drops > d.reported_drops) {
    d.writer->AddDrops(trace::DropRecord{"collector", "thread buffer full", -1, 0, 0,
                                         d.stats.buffer_drops - d.reported_drops});
    d.reported_drops = d.stats.buffer_drops;
  }

  if (!d.batch.empty()) {
    d.writer->Submit(std::move(d.batch));
    d.batch = trace::EventTables{};
  }
  SubmitInFlight(/*force=*/false);
}

void Recorder::SubmitInFlight(bool force) {
  DrainState& d = *drain_;
  if (!d.writer) return;
  const int64_t now = RealtimeNowNs();
  // While something is open or in flight, the state's time moves on about once a second, so
  // a rank killed while waiting says how long it had waited.
  const bool waiting = d.flight.in_flight() > 0 || d.has_open_ranges;
  const bool stale = waiting && now - d.in_flight_written_ns >= 1'000'000'000;
  if (!force && !stale && !d.flight.changed() && !d.open_ranges_changed) return;
  d.in_flight_written_ns = now;
  d.writer->ReplaceInFlight(d.InFlight(now));
  if (!options_.config.progress_file) return;
  // The progress file `rankscope profile --hang-timeout` watches: rewritten (a new file
  // renamed over the old, so a reader never sees half of one) only when a count changed.
  // The rank its file records: one that found its rank's file taken records as rank-unknown,
  // and its progress must not pass for that rank's.
  const std::optional<int>& rank = options_.config.rank.rank;
  const bool records_rank = rank && d.writer->path().filename() == trace::RankFileName(*rank);
  std::string progress = fmt::format(
      "rankscope-progress 1\nrun_id {}\nrank {}\npid {}\ncollectives {}\nsteps {}\nlast_progress_ns {}\n",
      options_.config.run_id, records_rank ? std::to_string(*rank) : "unknown", options_.pid,
      d.flight.completed_collectives(), d.flight.completed_steps(), d.flight.last_progress_ns());
  if (progress == d.progress_written) return;
  std::filesystem::path path = d.writer->path();
  path.replace_extension(".progress");
  const std::string temporary = path.string() + ".new";
  const int fd = open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;  // only the hang watch loses its input; the rank file is unharmed
  const bool written = write(fd, progress.data(), progress.size()) == static_cast<ssize_t>(progress.size());
  close(fd);
  if (written && std::rename(temporary.c_str(), path.c_str()) == 0) {
    d.progress_written = std::move(progress);
  } else {
    unlink(temporary.c_str());
  }
}

Status Recorder::Finish(EndReason reason, int signal_number) {
  finishing_.store(true);
  recording_.store(false);
  DrainState& d = *drain_;
  DrainPass(/*final=*/true);
  DrainDevice(/*flush=*/true, /*final=*/true);  // unless FinishDeviceTracing did it at exit
  // A ranked process leaves its file even when it recorded nothing; a process about to
  // exec leaves the claim to its next image instead.
  if (!d.writer && options_.config.rank.rank && reason != EndReason::kExec) {
    EnsureWriter(/*has_events=*/false);
  }
  Status status;
  if (d.writer) {
    WritePendingMeta();
    bool status_known = has_device_tracer();
    {
      std::lock_guard lock(mutex_);
      status_known = status_known || device_status_known_;
    }
    if (!status_known) {
      d.writer->SetMeta("cupti.status",
                        options_.config.trace.cuda ? CudaNotStartedReason() : "off: not selected (--trace)");
    }
    int64_t now = RealtimeNowNs();
    // Ranges still open: written with the close time as their end, flagged unfinished.
    trace::EventTables tail;
    std::swap(tail, d.batch);
    auto flush_open = [&](OpenRange& range, trace::NvtxRangeStyle style) {
      trace::NvtxRangeEvent event;
      event.lane = range.lane;
      event.start_ns = range.start_ns;
      event.end_ns = std::max(now, range.start_ns);
      event.name = range.name;
      event.domain = range.domain == nullptr || range.domain->name.empty()
                         ? trace::kEmptyString
                         : d.writer->Intern(range.domain->name);
      event.category = range.category;
      event.color = range.color;
      event.payload = range.payload;
      std::vector<PayloadPiece> views;
      for (const auto& [schema, bytes] : range.pieces) views.push_back({schema, bytes});
      event.args = d.writer->Intern(PayloadsToJson(registry_, range.domain, views, true));
      event.style = style;
      event.correlation_id = range.correlation_id;
      tail.nvtx_ranges.push_back(event);
      ++d.stats.unfinished;
    };
    for (auto& [serial, thread] : d.threads) {
      for (auto& [domain, stack] : thread.stacks) {
        for (OpenRange& range : stack) flush_open(range, trace::NvtxRangeStyle::kPushPop);
      }
    }
    for (auto& [id, range] : d.started) flush_open(range, trace::NvtxRangeStyle::kStartEnd);
    if (!d.nccl.empty()) d.nccl.Emit(Sink(), tail, now, /*final=*/true);
    d.stats.unmatched_ends += d.pending_ends.size();
    WritePendingMeta();  // and categories named since the last drain
    if (!tail.empty()) d.writer->Submit(std::move(tail));
    SubmitInFlight(/*force=*/true);  // what was open and in flight at the end
    std::string ended_by = reason == EndReason::kExec     ? "exec"
                           : reason == EndReason::kSignal ? fmt::format("signal {}", signal_number)
                                                          : "exit";
    d.writer->SetMeta("collector.ended_by", ended_by);
    d.writer->SetMeta("collector.records", std::to_string(d.stats.records));
    if (const uint64_t faults = CollectorFaults(); faults > 0) {
      d.writer->SetMeta("collector.faults", std::to_string(faults));
    }
    d.writer->SetMeta("collector.unmatched_ends", std::to_string(d.stats.unmatched_ends));
    d.writer->SetMeta("collector.unfinished_ranges", std::to_string(d.stats.unfinished));
    // Buffer chunks application threads faulted in because they outran the prepared reserve:
    // none in steady state.
    d.writer->SetMeta("collector.chunks_faulted_by_threads", std::to_string(buffers_.pool().faulted_by_threads()));
    if (d.stats.hook_refused > 0) d.writer->SetMeta("collector.hook_refused", std::to_string(d.stats.hook_refused));
    d.writer->SetMeta("collector.tsc_hz", fmt::format("{:.0f}", d.clock.TicksPerSecond()));
    const NcclAssemblerStats& nccl = d.nccl.stats();
    if (nccl.operations + nccl.parts + nccl.orphan_parts + nccl.unmatched_stops > 0) {
      d.writer->SetMeta("nccl.operations", std::to_string(nccl.operations));
      d.writer->SetMeta("nccl.parts", std::to_string(nccl.parts));
      d.writer->SetMeta("nccl.orphan_parts", std::to_string(nccl.orphan_parts));
      d.writer->SetMeta("nccl.unmatched_stops", std::to_string(nccl.unmatched_stops));
      if (std::optional<int64_t> offset = d.nccl.gpu_clock_offset_ns()) {
        d.writer->SetMeta("nccl.gpu_clock_offset_ns", std::to_string(*offset));
      }
    }
    status = d.writer->Close();
    // A writer that stopped recording said so when it stopped (on_failure).
    if (!status.ok() && !writer_stopped_.load()) WriteStderrLine("rankscope: closing the trace: " + status.message());
  }
  ReleaseRecordingLock();
  finished_.store(true);
  return status;
}

void Recorder::WaitForCloseFromSignal(std::chrono::milliseconds timeout) const {
  if (!finishing_.load() || finished_.load()) return;
  const timespec tick{0, 2'000'000};  // 2 ms
  for (auto waited = std::chrono::milliseconds(0); waited < timeout && !finished_.load();
       waited += std::chrono::milliseconds(2)) {
    nanosleep(&tick, nullptr);
  }
}

// ---- device activity and meta ----------------------------------------------------------

std::string Recorder::describe_process() const {
  const std::optional<int>& rank = options_.config.rank.rank;
  return rank ? fmt::format("rank {}", *rank) : fmt::format("pid {}", options_.pid);
}

void Recorder::AttachDeviceTracer(std::unique_ptr<DeviceTracer> tracer) {
  std::lock_guard lock(mutex_);
  if (device_tracer_owner_ || close_requested_ || closed_) return;  // the tracer stops as it goes
  for (auto& row : tracer->Meta()) pending_meta_.push_back(std::move(row));
  device_status_known_ = true;
  device_tracer_owner_ = std::move(tracer);
  device_tracer_.store(device_tracer_owner_.get(), std::memory_order_release);
  correlating_.store(true, std::memory_order_release);
}

void Recorder::FinishDeviceTracing(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  if (!device_tracer_owner_ || closed_) return;
  const uint64_t ticket = ++device_finish_requested_;
  wake_.notify_one();
  flushed_.wait_for(lock, timeout, [&] { return device_finish_done_ >= ticket || closed_; });
}

void Recorder::SetMeta(std::string key, std::string value) {
  std::lock_guard lock(mutex_);
  if (key == "cupti.status") device_status_known_ = true;
  pending_meta_.emplace_back(std::move(key), std::move(value));
}

// ---- flush points ----------------------------------------------------------------------

Status Recorder::Flush(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  if (closed_) return Unavailable("the recorder is closed");
  uint64_t ticket = ++flush_requested_;
  wake_.notify_one();
  if (!flushed_.wait_for(lock, timeout, [&] { return flush_done_ >= ticket || closed_; })) {
    return Unavailable(fmt::format("flush did not finish within {} ms", timeout.count()));
  }
  return Status::Ok();
}

Status Recorder::Close(EndReason reason, int signal_number) {
  {
    std::lock_guard lock(mutex_);
    if (!close_requested_) {
      close_requested_ = true;
      close_reason_ = reason;
      close_signal_ = signal_number;
    }
    wake_.notify_one();
  }
  if (!drain_thread_.joinable() || drain_thread_.get_id() == std::this_thread::get_id()) {
    std::lock_guard lock(mutex_);
    return close_status_;
  }
  {
    // A drain stuck in CUPTI or a slow disk must not hold the process at exit forever.
    std::unique_lock lock(mutex_);
    const std::string message = fmt::format(
        "the rank file did not finish closing within {} ms; going on without it (what was committed is kept)",
        options_.close_timeout.count());
    if (close_gave_up_ && !closed_) return Unavailable(message);
    if (!flushed_.wait_for(lock, options_.close_timeout, [&] { return closed_; })) {
      close_gave_up_ = true;
      lock.unlock();
      WriteStderrLine(fmt::format("rankscope: {}: {}", describe_process(), message));
      return Unavailable(message);
    }
  }
  drain_thread_.join();
  std::lock_guard lock(mutex_);
  return close_status_;
}

void Recorder::FlushFromSignal(bool close, int signal_number, std::chrono::milliseconds timeout) {
  uint64_t seq = signal_request_seq_.fetch_add(1) + 1;
  signal_number_.store(signal_number);
  int expected = 0;
  if (!signal_request_.compare_exchange_strong(expected, close ? 2 : 1) && close) {
    signal_request_.store(2);
  }
  // No notify: condition variables are not async-signal-safe. The drain thread polls at
  // its interval.
  timespec pause{0, 1'000'000};
  for (auto waited = std::chrono::milliseconds(0); waited < timeout; waited += std::chrono::milliseconds(1)) {
    if (signal_done_seq_.load() >= seq) return;
    nanosleep(&pause, nullptr);
  }
}

void Recorder::AbandonAfterFork() {
  recording_.store(false);
  abandoned_ = true;
  // The child's copy of the lock's descriptor would keep the run "recording" as long as the
  // child lives (a data-loader worker, a daemon), though it records nothing.
  if (trace::RecordingLock* lock = held_lock_.exchange(nullptr)) lock->CloseInForkedChild();
  // The drain thread does not exist in the child. Forget its handle without destroying
  // it (a joinable std::thread would terminate); the parent owns the file.
  new (&drain_thread_) std::thread();
}

std::filesystem::path Recorder::file_path() {
  std::lock_guard lock(mutex_);
  return file_path_;
}

RecorderStats Recorder::stats() {
  std::lock_guard lock(mutex_);
  return closed_ ? drain_->stats : RecorderStats{};
}

}  // namespace rankscope::collector
