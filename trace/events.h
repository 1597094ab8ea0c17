// The trace event model: lanes, the typed event records, and the per-kind tables that
// carry them between the collector, the SQLite store and the analyzer.
//
// All records are plain fixed-size structs (names are interned StringIds), so a batch of
// a million events is a few contiguous arrays, not a million allocations.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rankscope::trace {

using TimestampNs = int64_t;  // CLOCK_REALTIME nanoseconds of the recording process
using StringId = uint32_t;    // index into the rank's string table; 0 is the empty string
using LaneId = uint32_t;      // 1-based id of a lane in its rank file; 0 means "none"

inline constexpr StringId kEmptyString = 0;
inline constexpr LaneId kNoLane = 0;
// What a lane or string id column that cannot hold an id (negative, or above 2^32 - 1: a
// damaged or edited file) reads as: it names no lane or string, so the row is counted
// invalid rather than aliasing a real id or sizing anything.
inline constexpr uint32_t kUnreadableId = UINT32_MAX;
inline constexpr uint32_t IdFromColumn(int64_t value) {
  return value >= 0 && value < int64_t{kUnreadableId} ? static_cast<uint32_t>(value) : kUnreadableId;
}

// ---- Lanes -----------------------------------------------------------------------------

enum class LaneKind : uint8_t {
  kGpuStream = 1,     // one (device, context, stream): kernels, copies, memsets
  kCpuThread = 2,     // one OS thread: API calls, NVTX ranges and marks, CPU-backend work
  kCommunicator = 3,  // one communicator (NCCL or Gloo): collectives and point-to-point
  kCounter = 4,       // one counter time series; the lane's name names the counter
};

// What device activity on a lane counts as when its events do not say so themselves
// (docs/metrics.md §1, CPU backend: "a range on a compute lane / on a communication lane").
enum class LaneRole : uint8_t { kNone = 0, kCompute = 1, kComm = 2, kMemory = 3 };

struct Lane {
  LaneId id = kNoLane;
  LaneKind kind = LaneKind::kCpuThread;
  LaneRole role = LaneRole::kNone;
  int32_t device = -1;      // GPU ordinal; -1 for host lanes
  uint32_t context = 0;     // CUDA context id
  uint64_t stream = 0;      // CUDA stream id
  int64_t pid = 0;
  int64_t tid = 0;          // OS thread id (CPU lanes)
  uint64_t comm_hash = 0;   // communicator hash (communicator lanes)
  std::string name{};       // thread name, "stream 7", communicator or counter name
  // Longest event ever recorded on the lane; bounds the index scan of range queries.
  int64_t max_duration_ns = 0;

  // Two lane descriptions denote the same lane when these fields agree (name excluded:
  // threads get named after they start; but a counter's name is its identity).
  bool SameIdentity(const Lane& other) const;
};

// ---- Enumerations stored as integers (their names live in the `enums` table) ------------

enum class CopyKind : uint8_t {
  kUnknown = 0, kHostToDevice = 1, kDeviceToHost = 2, kHostToArray = 3, kArrayToHost = 4,
  kArrayToArray = 5, kArrayToDevice = 6, kDeviceToArray = 7, kDeviceToDevice = 8,
  kHostToHost = 9, kPeerToPeer = 10,
};

enum class MemoryKind : uint8_t {
  kUnknown = 0, kPageable = 1, kPinned = 2, kDevice = 3, kArray = 4, kManaged = 5,
  kDeviceStatic = 6, kManagedStatic = 7,
};

enum class ApiDomain : uint8_t { kUnknown = 0, kRuntime = 1, kDriver = 2 };

enum class SyncKind : uint8_t {
  kUnknown = 0, kEventSynchronize = 1, kStreamWaitEvent = 2, kStreamSynchronize = 3,
  kContextSynchronize = 4,
};

enum class NvtxRangeStyle : uint8_t { kPushPop = 1, kStartEnd = 2 };

enum class PayloadKind : uint8_t {
  kNone = 0, kUint64 = 1, kInt64 = 2, kDouble = 3, kUint32 = 4, kInt32 = 5, kFloat = 6,
};

enum class CollectiveOp : uint8_t {
  kUnknown = 0, kAllReduce = 1, kAllGather = 2, kReduceScatter = 3, kBroadcast = 4,
  kReduce = 5, kAllToAll = 6, kSend = 7, kRecv = 8, kBarrier = 9, kGather = 10,
  kScatter = 11,
};

enum class ReduceOp : uint8_t {
  kNone = 0, kSum = 1, kProd = 2, kMax = 3, kMin = 4, kAvg = 5,
};

enum class DataType : uint8_t {
  kUnknown = 0, kInt8 = 1, kUint8 = 2, kInt32 = 3, kUint32 = 4, kInt64 = 5, kUint64 = 6,
  kFloat16 = 7, kFloat32 = 8, kFloat64 = 9, kBfloat16 = 10, kFloat8E4M3 = 11,
  kFloat8E5M2 = 12,
};

// What a profiler overhead interval was spent on (CUPTI's overhead kinds, renumbered densely).
enum class OverheadKind : uint8_t {
  kUnknown = 0, kDriverCompiler = 1, kCuptiBufferFlush = 2, kCuptiInstrumentation = 3,
  kCuptiResource = 4, kRuntimeTriggeredModuleLoading = 5, kLazyFunctionLoading = 6,
  kCommandBufferFull = 7, kActivityBufferRequest = 8, kUvmActivityInit = 9,
};

// The names a record of each kind gets when its source gives none, as Nsight Systems shows
// them ("Memcpy HtoD", "Stream synchronize", "CUPTI buffer flush"): the collector and the
// importers name the same events alike.
std::string_view DefaultName(CopyKind kind);
std::string_view DefaultName(SyncKind kind);
std::string_view DefaultName(OverheadKind kind);

// Memory counters (docs/metrics.md §5 "Memory"): a kCounter lane named
// "<source> memory: <category>" holds the bytes live in that category, a sample per change.
// The categories of one source add up to what that source holds; sources overlap (CUDA's
// allocations hold PyTorch's reserved memory), so they are never added together.
inline constexpr std::string_view kCudaMemorySource = "cuda";  // CUPTI memory activity, nsys
inline constexpr std::string_view kPytorchAllocatedSource = "pytorch allocated";  // Kineto [memory]
inline constexpr std::string_view kPytorchReservedSource = "pytorch reserved";
std::string MemoryCounterName(std::string_view source, std::string_view category);
// The category of CUDA allocations of one memory kind: "device (gpu 0)", "pinned (gpu 1)";
// without " (gpu N)" when `device` < 0.
std::string CudaMemoryCategory(MemoryKind kind, int32_t device);
struct MemoryCounter {
  std::string_view source, category;  // views into the parsed name
};
// nullopt when `name` is not "<source> memory: <category>" with both parts non-empty.
std::optional<MemoryCounter> ParseMemoryCounterName(std::string_view name);

// "cudaLaunchKernel_v7000" -> "cudaLaunchKernel": CUPTI's callback names, and the API rows of
// Nsight Systems exports, carry the API version the call was introduced in; rankscope stores
// the call's plain name.
std::string_view WithoutApiVersion(std::string_view name);

// The op a collective's name says ("AllReduce", "allreduce", "gloo:all_reduce",
// "ncclKernel_ReduceScatter_..."), compared without case, '_', '-' and ' '; kUnknown if none.
CollectiveOp CollectiveOpFromName(std::string_view name);

// Pieces of one collective or point-to-point operation that the NCCL profiler plugin times.
enum class CollectivePartKind : uint8_t {
  kUnknown = 0,
  kKernelChannel = 1,  // one channel of the operation's kernel, on the GPU
  kProxySend = 2,      // the proxy thread's network send work for one channel and peer
  kProxyRecv = 3,      // ... its receive work
  kProxySendStep = 4,  // one network transfer (step) of a proxy send
  kProxyRecvStep = 5,  // one network transfer (step) of a proxy receive
};

// ---- Events ------------------------------------------------------------------------------

// end - start when end >= start and the difference fits in int64; nullopt otherwise (the
// writer refuses such events, so only damaged or foreign files hold them).
inline std::optional<TimestampNs> CheckedDuration(TimestampNs start, TimestampNs end) {
  TimestampNs duration = 0;
  if (__builtin_sub_overflow(end, start, &duration) || duration < 0) return std::nullopt;
  return duration;
}

// Fields every event has. Intervals are half-open: [start_ns, end_ns).
struct EventCommon {
  LaneId lane = kNoLane;
  TimestampNs start_ns = 0;
  TimestampNs end_ns = 0;
  StringId name = kEmptyString;
  uint64_t correlation_id = 0;  // CUPTI correlation id (API call <-> device work); 0 if none

  TimestampNs duration_ns() const { return CheckedDuration(start_ns, end_ns).value_or(0); }
};

struct Dim3 {
  uint32_t x = 0, y = 0, z = 0;
  bool operator==(const Dim3&) const = default;
};

struct KernelEvent : EventCommon {
  Dim3 grid;
  Dim3 block;
  uint32_t registers_per_thread = 0;
  uint32_t static_shared_bytes = 0;
  uint32_t dynamic_shared_bytes = 0;
};

struct MemcpyEvent : EventCommon {
  uint64_t bytes = 0;
  CopyKind copy_kind = CopyKind::kUnknown;
  MemoryKind src_kind = MemoryKind::kUnknown;
  MemoryKind dst_kind = MemoryKind::kUnknown;
  int32_t src_device = -1;  // for peer copies; -1 when not applicable
  int32_t dst_device = -1;
};

struct MemsetEvent : EventCommon {
  uint64_t bytes = 0;
  uint32_t value = 0;
  MemoryKind memory_kind = MemoryKind::kUnknown;
};

struct ApiCallEvent : EventCommon {
  ApiDomain domain = ApiDomain::kUnknown;
  uint32_t callback_id = 0;  // CUPTI cbid
  int32_t return_code = 0;   // cudaError_t / CUresult
  // The correlation id of the innermost NVTX push/pop range open on the thread when the
  // call was made (NvtxRangeEvent::correlation_id); 0 if none. Joins ranges to the device
  // work launched inside them.
  uint64_t external_id = 0;
};

struct SyncEvent : EventCommon {
  SyncKind sync_kind = SyncKind::kUnknown;
  uint32_t context = 0;
  uint64_t stream = 0;         // stream waited on, when the kind has one
  uint64_t cuda_event_id = 0;  // event waited on, when the kind has one
};

// An NVTX payload: one typed scalar. Unsigned and signed integers share `int_value`
// (unsigned values are stored by bit pattern); floating values use `real_value`.
struct Payload {
  PayloadKind kind = PayloadKind::kNone;
  int64_t int_value = 0;
  double real_value = 0.0;

  bool operator==(const Payload&) const = default;
};

struct NvtxAttributes {
  StringId domain = kEmptyString;  // empty = the default domain
  uint32_t category = 0;
  uint32_t color = 0;              // ARGB; 0 = no color given
  Payload payload;
  StringId args = kEmptyString;    // decoded extended payload as a JSON object, if any
};

struct NvtxRangeEvent : EventCommon, NvtxAttributes {
  NvtxRangeStyle style = NvtxRangeStyle::kPushPop;
  LaneId end_lane = kNoLane;  // start/end ranges may end on another thread; 0 = same lane
};

struct NvtxMarkEvent : EventCommon, NvtxAttributes {};  // an instant: end_ns == start_ns

struct CollectiveEvent : EventCommon {
  uint64_t comm_hash = 0;
  uint64_t sequence = 0;  // per-communicator sequence number, identical on every rank
  CollectiveOp op = CollectiveOp::kUnknown;
  ReduceOp reduce_op = ReduceOp::kNone;
  DataType datatype = DataType::kUnknown;
  uint64_t bytes = 0;     // message size in bytes (count * type size)
  int32_t root = -1;      // broadcast/reduce root; -1 when not applicable
  int32_t peer = -1;      // send/recv peer; -1 when not applicable
  int32_t comm_rank = -1; // this rank's index in the communicator
  int32_t comm_size = 0;  // ranks in the communicator; 0 if unknown
  uint32_t channels = 0;  // 0 if unknown
  StringId algorithm = kEmptyString;  // "RING", "TREE", ... when known
  StringId protocol = kEmptyString;   // "LL", "LL128", "SIMPLE" when known
};

// One piece of a collective (CollectivePartKind), on the operation's communicator lane.
// (comm_hash, sequence) are the parent operation's.
struct CollectivePartEvent : EventCommon {
  uint64_t comm_hash = 0;
  uint64_t sequence = 0;
  CollectivePartKind part_kind = CollectivePartKind::kUnknown;
  int32_t channel = -1;  // -1 if unknown
  int32_t peer = -1;     // proxy work: the remote rank; -1 otherwise
  int32_t step = -1;     // proxy steps: the step number; -1 otherwise
  uint64_t bytes = 0;    // bytes moved, when known
};

// Time the profiler itself cost (CUPTI overhead records), on the lane of the thread or
// stream it was spent on.
struct OverheadEvent : EventCommon {
  OverheadKind overhead_kind = OverheadKind::kUnknown;
};

struct CounterSample {
  LaneId lane = kNoLane;  // a kCounter lane
  TimestampNs ts_ns = 0;
  double value = 0.0;
};

// ---- Tables ------------------------------------------------------------------------------

// One vector per event kind. The same type is a writer batch, a range-query answer and a
// whole rank loaded into memory.
struct EventTables {
  std::vector<KernelEvent> kernels;
  std::vector<MemcpyEvent> memcpys;
  std::vector<MemsetEvent> memsets;
  std::vector<ApiCallEvent> api_calls;
  std::vector<SyncEvent> syncs;
  std::vector<NvtxRangeEvent> nvtx_ranges;
  std::vector<NvtxMarkEvent> nvtx_marks;
  std::vector<CollectiveEvent> collectives;
  std::vector<CounterSample> counter_samples;
  std::vector<CollectivePartEvent> collective_parts;
  std::vector<OverheadEvent> overheads;

  size_t size() const;
  bool empty() const { return size() == 0; }
  void clear();
  void reserve_each(size_t n);
  // Sorts every table by (lane, start); a no-op for tables already in that order.
  void SortByLaneAndTime();
};

// Events lost before they reached the file, and why.
struct DropRecord {
  std::string source;   // "writer", "cupti", "nvtx", ...
  std::string reason;   // "queue full", "buffer overflow", ...
  int32_t device = -1;
  uint32_t context = 0;
  uint64_t stream = 0;
  uint64_t count = 0;
};

}  // namespace rankscope::trace
