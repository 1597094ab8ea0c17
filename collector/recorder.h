// The recorder: what NVTX handlers (and later CUPTI and the NCCL plugin) call on the
// application's threads, and the drain thread that turns raw per-thread records into trace
// events and hands them to the rank's TraceWriter.
//
// Application threads only copy a record into their own buffer (no locks, no I/O, no
// allocation after the first event of a thread). Everything else happens on the drain
// thread: clock conversion, range matching, string interning, payload decoding, and
// creating the rank file, which happens at the first event (or at exit, for a ranked
// process that recorded nothing), so launchers and shells that record nothing leave no
// files behind.
#pragma once

#include <atomic>
#include <chrono>
#include <cstring>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "base/status.h"
#include "collector/device_tracer.h"
#include "collector/fast_clock.h"
#include "collector/hook_events.h"
#include "collector/nccl_events.h"
#include "collector/nvtx_registry.h"
#include "collector/payload_decoder.h"
#include "collector/rank_env.h"
#include "collector/record_codec.h"
#include "collector/thread_buffer.h"
#include "collector/thread_slot.h"
#include "trace/events.h"

namespace rankscope::trace {
class RecordingLock;
class TraceWriter;
}

namespace rankscope::collector {

// What a handler knows about one event. Text and payload bytes are borrowed: Record
// copies them before returning.
struct EventDraft {
  RecordKind kind = RecordKind::kMark;
  const NvtxDomain* domain = nullptr;
  std::string_view text{};                // inline message (ASCII or UTF-8)
  const NvtxString* registered = nullptr; // registered-string message
  uint32_t category = 0;
  uint32_t color = 0;                     // ARGB; 0 = none
  trace::PayloadKind payload_kind = trace::PayloadKind::kNone;
  uint64_t payload_bits = 0;              // scalar payload, by bit pattern
  uint64_t value = 0;                     // range id (start/end), tid (thread name)
  std::span<const PayloadPiece> pieces{}; // extended payloads
};

struct RecorderOptions {
  CollectorConfig config;
  std::string host;
  int64_t pid = 0;
  std::string command_line;
  std::chrono::milliseconds drain_interval{50};
  // How long Close waits for the final drain and the file's close before it lets the
  // process go on (exit or exec) without them; what was committed stays.
  std::chrono::milliseconds close_timeout{30'000};
};

struct RecorderStats {
  uint64_t records = 0;         // records drained
  uint64_t buffer_drops = 0;    // records refused: the buffer budget was spent
  uint64_t unmatched_ends = 0;  // pops/ends without their push/start
  uint64_t unfinished = 0;      // ranges still open at close
  uint64_t hook_refused = 0;    // hook records that ended before they started
};

class Recorder {
 public:
  enum class EndReason { kExit, kExec, kSignal };

  // Starts the drain thread. The rank file is created later (see the file comment).
  explicit Recorder(RecorderOptions options);
  ~Recorder();  // closes with kExit if Close was not called
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  // ---- application threads (lock-free after a thread's first event) ----
  bool recording() const { return recording_.load(std::memory_order_relaxed); }
  // Push returns the 0-based level of the new range; Pop the level of the range it ends,
  // or -1 when the thread has no open range in that domain.
  int Push(const EventDraft& draft);
  int Pop(const NvtxDomain* domain, std::span<const PayloadPiece> pieces);
  uint64_t Start(const EventDraft& draft);  // returns the range id
  void End(const NvtxDomain* domain, uint64_t range_id, std::span<const PayloadPiece> pieces);
  void Mark(const EventDraft& draft);
  // The common NVTX ranges, fast: a push whose only attributes are a message (ASCII text
  // or a registered string), a category and a colour, and a pop without payload. The same
  // records as Push and Pop of the equivalent draft; in steady state (not the thread's
  // first event, no device tracer tagging ranges) they take no lock, allocate nothing and
  // make no system call.
  struct PlainAttributes {
    const char* message = nullptr;
    const NvtxString* registered = nullptr;
    uint32_t category = 0;
    uint32_t color = 0;
  };
  int PushPlain(const NvtxDomain* domain, const PlainAttributes& attributes);
  int PopPlain(const NvtxDomain* domain);
  void NameThread(int64_t tid, std::string_view name);
  // An NCCL profiler-plugin callback. False when it was not recorded (off, or the buffer
  // budget is spent).
  bool RecordNccl(const NcclRecord& record, std::string_view text);
  // A language hook's finished range or collective (collector/hook_events.h), timed by the
  // hook; `text` holds the strings the body lists. False when it was not recorded.
  bool RecordHookRange(const HookRangeBody& body, std::string_view text);
  bool RecordHookCollective(const HookCollectiveBody& body, std::string_view text);
  bool RecordHookCollectiveBegin(const HookCollectiveBody& body, std::string_view text);

  NvtxRegistry& registry() { return registry_; }
  const CollectorConfig& config() const { return options_.config; }
  int64_t pid() const { return options_.pid; }
  ClockSource clock_source() const { return clock_source_; }
  // "rank 3" or "pid 1234", for messages.
  std::string describe_process() const;

  // ---- device activity (CUPTI) ----
  // Attaches the device tracer once it runs: NVTX push/pop ranges then tag the device work
  // launched inside them, and the drain thread converts its records. Once per recorder.
  void AttachDeviceTracer(std::unique_ptr<DeviceTracer> tracer);
  bool has_device_tracer() const { return device_tracer_.load(std::memory_order_acquire) != nullptr; }
  // Has the drain thread give the device tracer its final flush now, while CUDA still works
  // (from an atexit handler, before the CUDA runtime tears down); waits up to `timeout`.
  void FinishDeviceTracing(std::chrono::milliseconds timeout);

  // A meta row for the rank file: written with the next drain, or when the file is created.
  void SetMeta(std::string key, std::string value);

  // ---- flush points ----
  // Drains every buffer and commits it; blocks up to `timeout`.
  Status Flush(std::chrono::milliseconds timeout);
  // Final drain, end-of-run meta, and close. Idempotent; recording stops. Waits at most
  // `close_timeout` (RecorderOptions): then it returns Unavailable, says so on stderr, and
  // leaves the drain thread to finish if the process lives on.
  Status Close(EndReason reason, int signal_number = 0);
  // From a signal handler: asks the drain thread to flush (or close) and waits up to
  // `timeout` with nanosleep. Async-signal-safe on the calling side.
  void FlushFromSignal(bool close, int signal_number, std::chrono::milliseconds timeout);
  // From a signal handler, before a signal's default action ends the process: while the
  // rank file is being closed (after an earlier signal, or on the exit path), waits up to
  // `timeout` for the close to finish, so that a second Ctrl-C or a SIGTERM cannot cut it
  // short and leave a hot journal. Async-signal-safe: polls atomics with nanosleep.
  void WaitForCloseFromSignal(std::chrono::milliseconds timeout) const;
  // In a forked child: stop without touching the parent's file or threads, and let go of
  // the child's copy of the run directory's recording lock.
  void AbandonAfterFork();

  // The rank file, once created (empty before).
  std::filesystem::path file_path();
  RecorderStats stats();

 private:
  struct DrainState;
  ThreadBuffer* BufferForThisThread();
  // The general paths of PushPlain and PopPlain, out of line so that their fast paths stay
  // small leaf code.
  // (Scalars, not the struct: nothing of the caller's escapes, so constants fold.)
  [[gnu::noinline]] int PushAsDraft(const NvtxDomain* domain, const char* message, const NvtxString* registered,
                                    uint32_t category, uint32_t color);
  [[gnu::noinline]] int PopWithoutPayload(const NvtxDomain* domain);
  bool Append(const EventDraft& draft, RecordKind kind, uint32_t depth);
  // Appends a record with a fixed-size body (record_codec.h) to this thread's buffer.
  template <typename Body>
  bool AppendWithBody(RecordKind kind, const Body& body, std::string_view text);
  // Names the hook domain's categories, once, at the first hook record.
  void NameHookCategories();
  // While a device tracer records: puts a new range id on its correlation stack for this
  // thread, so the device work launched until the pop carries it; returns the id (0 when
  // there is no tracer, or the range is nested too deep to tag).
  uint64_t TagDeviceWork(const NvtxDomain* domain, uint32_t depth);
  // Takes the range (and deeper ranges of its domain) off the correlation stack.
  void PopCorrelation(const NvtxDomain* domain, uint32_t depth);
  void DrainLoop();
  // Keeps the pool's reserve of ready chunks ahead of what the threads take (drain thread).
  void TopUpReserve();
  // Drains into the writer. Leaves records in the thread buffers while the writer is
  // behind (memory is bounded by the buffer budget), except when `final`, which waits for
  // the writer instead and drains everything.
  void DrainPass(bool final);
  size_t DrainOnce(size_t max_records);
  // Hands what DrainOnce collected (and the NCCL operations now complete, and new drop
  // counts) to the writer.
  void SubmitDrained();
  // Hands the in-flight state to the writer and rewrites the rank's progress file
  // (<rank file>.progress) when something changed since the last time, or with `force`.
  void SubmitInFlight(bool force);
  // Whether the writer can take more now; with `wait`, waits (up to a minute) until it can.
  bool WriterCanTake(bool wait);
  // Converts what the device tracer delivered; `flush` asks it for held records first.
  void DrainDevice(bool flush, bool final);
  // Meta rows set since the last call, and the NVTX categories named since: written before
  // the events that use them, so that a file cut off at any commit can be interpreted.
  void WritePendingMeta();
  // The run directory's recording lock (trace/recording_lock.h), held from before the rank
  // file is created until it is closed, so that `profile --force` never deletes it mid-run.
  void HoldRecordingLock();
  void ReleaseRecordingLock();
  std::string ThreadName(int64_t tid);
  // The rank file's lanes, strings and clock, for the device tracer and the NCCL assembler.
  DeviceEventSink Sink();
  // Creates the rank file. A taken rank name falls back to rank-unknown only when there
  // are events to keep.
  void EnsureWriter(bool has_events);
  Status Finish(EndReason reason, int signal_number);

  const RecorderOptions options_;
  const uint64_t generation_;  // tells this recorder's thread slots from an earlier one's
  NvtxRegistry registry_;
  BufferRegistry buffers_;
  ClockSource clock_source_;
  std::atomic<bool> recording_{true};
  std::atomic<bool> writer_stopped_{false};  // the writer stopped recording (on_failure ran)
  std::atomic<bool> finishing_{false}, finished_{false};  // the final close began, ended
  std::atomic<DeviceTracer*> device_tracer_{nullptr};
  // NVTX ranges tag device work only while the tracer records: not after its final flush.
  std::atomic<bool> correlating_{false};
  std::unique_ptr<DeviceTracer> device_tracer_owner_;  // set once, under mutex_
  bool abandoned_ = false;  // forked child: never touch the drain thread or the file
  std::atomic<uint64_t> next_range_id_{1};
  const NvtxDomain* const default_domain_;  // its records store no domain word
  const NvtxDomain* const hook_domain_;
  std::once_flag hook_categories_named_;

  std::mutex mutex_;  // guards the requests below and file_path_
  std::condition_variable wake_;
  bool close_requested_ = false;
  EndReason close_reason_ = EndReason::kExit;
  int close_signal_ = 0;
  uint64_t flush_requested_ = 0, flush_done_ = 0;
  uint64_t device_finish_requested_ = 0, device_finish_done_ = 0;
  std::vector<std::pair<std::string, std::string>> pending_meta_;
  bool device_status_known_ = false;  // cupti.status was set or a tracer attached
  std::condition_variable flushed_;
  Status close_status_;
  bool closed_ = false;
  bool close_gave_up_ = false;  // a Close timed out: later calls do not wait again
  std::filesystem::path file_path_;

  // Signal-handler requests: plain atomics, polled by the drain thread.
  std::atomic<int> signal_request_{0};  // 0 none, 1 flush, 2 close
  std::atomic<int> signal_number_{0};
  std::atomic<uint64_t> signal_request_seq_{0}, signal_done_seq_{0};

  // The drain thread's recording lock, for a forked child to close its copy; null when none.
  std::atomic<trace::RecordingLock*> held_lock_{nullptr};

  std::unique_ptr<DrainState> drain_;  // drain thread only
  std::thread drain_thread_;
};

// ---- the fast paths, inline so an NVTX handler records with no call but ReserveInNextChunk
// (once per chunk) and the text's length ----

[[gnu::always_inline]] inline int Recorder::PushPlain(const NvtxDomain* domain, const PlainAttributes& attributes) {
  const char* const message = attributes.message;
  const NvtxString* const registered = attributes.registered;
  const uint32_t category = attributes.category;
  const uint32_t color = attributes.color;
  const ThreadSlot& slot = tls_slot;
  if (slot.generation != generation_ || slot.buffer == nullptr) [[unlikely]] {
    return PushAsDraft(domain, message, registered, category, color);
  }
  if (!recording()) return -1;
  uint32_t& depth = DepthOf(domain);
  const uint32_t level = depth++;
  const size_t text_size = message != nullptr ? strnlen(message, kMaxTextBytes) : 0;
  PlainRecord record{RecordKind::kPush, depth, domain != default_domain_ ? domain : nullptr, registered, category,
                     color, 0};
  // CUPTI's correlation: one flag read when no device tracer runs.
  if (correlating_.load(std::memory_order_relaxed)) [[unlikely]] record.value = TagDeviceWork(domain, depth);
  const size_t size = PlainRecordSize(record, text_size);
  if (std::byte* out = slot.buffer->Reserve(size); out != nullptr) [[likely]] {
    EncodePlainRecord(out, size, record, ReadTicks(clock_source_), message, text_size);
    slot.buffer->Commit(size);
  }
  return static_cast<int>(level);
}

[[gnu::always_inline]] inline int Recorder::PopPlain(const NvtxDomain* domain) {
  const ThreadSlot& slot = tls_slot;
  if (slot.generation != generation_ || slot.buffer == nullptr) [[unlikely]] return PopWithoutPayload(domain);
  if (!recording()) return -1;
  uint32_t& depth = DepthOf(domain);
  if (depth == 0) return -1;
  if (correlating_.load(std::memory_order_relaxed)) [[unlikely]] PopCorrelation(domain, depth);
  PlainRecord record;
  record.kind = RecordKind::kPop;
  record.depth = depth;
  record.domain = domain != default_domain_ ? domain : nullptr;
  const size_t size = PlainRecordSize(record, 0);
  if (std::byte* out = slot.buffer->Reserve(size); out != nullptr) [[likely]] {
    EncodePlainRecord(out, size, record, ReadTicks(clock_source_), nullptr, 0);
    slot.buffer->Commit(size);
  }
  return static_cast<int>(--depth);
}

}  // namespace rankscope::collector
