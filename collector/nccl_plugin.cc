#include "collector/nccl_plugin.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include <fmt/format.h>

#include "collector/recorder.h"

namespace rankscope::collector {
namespace {

using nccl_abi::EventType;

std::atomic<Recorder*> g_recorder{nullptr};
std::atomic<uint64_t> g_next_comm{1};
std::atomic<uint64_t> g_next_thread{1};
std::atomic<bool> g_meta_written{false};

// A handle: thread serial (24 bits) | per-thread count (36 bits) | event kind (4 bits).
constexpr int kKindBits = 4;
constexpr int kSerialShift = 40;

struct HandleSlot {
  uint64_t serial;
  uint64_t count;
};
thread_local HandleSlot tls_handles __attribute__((tls_model("initial-exec")));

uint64_t NewHandle(NcclEventKind kind) {
  if (tls_handles.serial == 0) tls_handles.serial = g_next_thread.fetch_add(1, std::memory_order_relaxed);
  const uint64_t count = ++tls_handles.count & ((uint64_t{1} << (kSerialShift - kKindBits)) - 1);
  return (tls_handles.serial << kSerialShift) | (count << kKindBits) | static_cast<uint64_t>(kind);
}

struct Comm {
  uint64_t id;
};

// "func\0datatype\0algo\0proto\0comm_name", cut to fit; null strings are empty. Only
// version 3 names the communicator in the operation (its lane takes that name).
class OperationText {
 public:
  OperationText(const char* func, const char* datatype, const char* algo, const char* proto,
                const char* comm_name = nullptr) {
    for (const char* part : {func, datatype, algo, proto, comm_name}) {
      const std::string_view text = part != nullptr ? std::string_view(part).substr(0, kPartMax) : std::string_view();
      if (!text.empty()) std::memcpy(buffer_ + size_, text.data(), text.size());  // null for ""
      size_ += text.size();
      buffer_[size_++] = '\0';
    }
  }
  std::string_view view() const { return {buffer_, size_}; }

 private:
  static constexpr size_t kPartMax = 63;
  char buffer_[5 * (kPartMax + 1)];
  size_t size_ = 0;
};

Recorder* ActiveRecorder() {
  Recorder* recorder = g_recorder.load(std::memory_order_acquire);
  return recorder != nullptr && recorder->recording() ? recorder : nullptr;
}

// NCCL_VERSION_CODE of the NCCL in this process, or 0 when there is none to ask.
int NcclVersion() {
  using GetVersion = int (*)(int*);
  auto get_version = reinterpret_cast<GetVersion>(dlsym(RTLD_DEFAULT, "ncclGetVersion"));
  int version = 0;
  return get_version != nullptr && get_version(&version) == 0 ? version : 0;
}

nccl_abi::Result Init(void** context, int* activation_mask, uint8_t api_version, int first_nccl, uint64_t comm_hash,
                      const char* comm_name, int ranks, int rank) {
  *context = nullptr;
  Recorder* recorder = ActiveRecorder();
  // A failed init makes NCCL leave this communicator unprofiled, at no further cost.
  if (recorder == nullptr || !recorder->config().trace.nccl) return nccl_abi::kInternalError;
  const int nccl_version = NcclVersion();
  if (nccl_version != 0 && nccl_version < first_nccl) {
    recorder->SetMeta("nccl.profiler", fmt::format("off: NCCL {} offered interface v{}, which it does not have",
                                                   nccl_version, api_version));
    return nccl_abi::kInternalError;
  }
  if (!g_meta_written.exchange(true)) {
    recorder->SetMeta("nccl.profiler", fmt::format("v{}", api_version));
    if (nccl_version != 0) recorder->SetMeta("nccl.version", std::to_string(nccl_version));
  }
  auto* comm = new Comm{g_next_comm.fetch_add(1)};
  NcclRecord record;
  record.kind = NcclRecordKind::kComm;
  record.id = comm->id;
  record.comm = comm->id;
  record.comm_hash = comm_hash;
  record.rank = rank;
  record.ranks = ranks;
  record.api_version = api_version;
  recorder->RecordNccl(record, comm_name != nullptr ? comm_name : "");
  *activation_mask = NcclActivationMask();
  *context = comm;
  return nccl_abi::kSuccess;
}

// Fills the fields every version shares, records the start and hands NCCL its handle.
void Start(void* context, void** handle, int rank, NcclRecord& record, std::string_view text) {
  Recorder* recorder = ActiveRecorder();
  if (recorder == nullptr || context == nullptr || record.event == NcclEventKind::kNone) return;
  record.kind = NcclRecordKind::kStart;
  record.comm = static_cast<Comm*>(context)->id;
  record.rank = rank;
  record.id = NewHandle(record.event);
  // Without its start record the event's stop would mean nothing: leave it untracked.
  if (recorder->RecordNccl(record, text)) *handle = reinterpret_cast<void*>(record.id);
}

uint64_t ParentOf(void* parent) { return reinterpret_cast<uint64_t>(parent); }

// Proxy work done for another process (PXN) names a parent of that process.
uint64_t LocalParent(void* parent, pid_t pid) {
  Recorder* recorder = g_recorder.load(std::memory_order_relaxed);
  return recorder != nullptr && pid == recorder->pid() ? ParentOf(parent) : 0;
}

void RecordState(void* handle, int state, uint64_t value) {
  Recorder* recorder = ActiveRecorder();
  if (recorder == nullptr) return;
  NcclRecord record;
  record.kind = NcclRecordKind::kState;
  record.id = reinterpret_cast<uint64_t>(handle);
  record.event = NcclHandleKind(handle);
  record.state = state;
  record.value = value;
  recorder->RecordNccl(record, {});
}

void StartProxyOp(void* context, void** handle, int rank, void* parent, const nccl_abi::ProxyOpDescr& op) {
  NcclRecord record;
  record.event = NcclEventKind::kProxyOp;
  record.parent = LocalParent(parent, op.pid);
  record.channel = op.channel;
  record.peer = op.peer;
  record.step = op.steps;
  record.is_send = op.is_send != 0;
  Start(context, handle, rank, record, {});
}

void StartProxyStep(void* context, void** handle, int rank, void* parent, const nccl_abi::ProxyStepDescr& step) {
  NcclRecord record;
  record.event = NcclEventKind::kProxyStep;
  record.parent = ParentOf(parent);
  record.step = step.step;
  Start(context, handle, rank, record, {});
}

}  // namespace

void SetNcclRecorder(Recorder* recorder) {
  // Each recorder's file says which interface NCCL chose: the first init after this writes it.
  g_meta_written.store(false);
  g_recorder.store(recorder, std::memory_order_release);
}

int NcclActivationMask() {
  int mask = nccl_abi::kColl | nccl_abi::kP2p | nccl_abi::kProxyOp | nccl_abi::kKernelCh;
  const char* steps = std::getenv("RANKSCOPE_NCCL_PROXY_STEPS");
  if (steps == nullptr || std::string_view(steps) != "0") mask |= nccl_abi::kProxyStep;
  return mask;
}

NcclEventKind NcclHandleKind(const void* handle) {
  const auto value = reinterpret_cast<uint64_t>(handle);
  const auto kind = static_cast<uint8_t>(value & ((1u << kKindBits) - 1));
  if (value == 0 || kind > static_cast<uint8_t>(NcclEventKind::kKernelChannel)) return NcclEventKind::kNone;
  return static_cast<NcclEventKind>(kind);
}

nccl_abi::Result NcclInitV5(void** context, uint64_t comm_id, int* activation_mask, const char* comm_name, int,
                            int ranks, int rank, nccl_abi::Logger) {
  return Init(context, activation_mask, 5, kNcclVersionForV5, comm_id, comm_name, ranks, rank);
}

nccl_abi::Result NcclInitV4(void** context, int* activation_mask, const char* comm_name, uint64_t comm_hash, int,
                            int ranks, int rank, nccl_abi::Logger) {
  return Init(context, activation_mask, 4, kNcclVersionForV4, comm_hash, comm_name, ranks, rank);
}

nccl_abi::Result NcclInitV3(void** context, int* activation_mask) {
  // Version 3 names the communicator in each operation's descriptor instead.
  return Init(context, activation_mask, 3, kNcclVersionForV3, 0, nullptr, 0, -1);
}

namespace {

// Versions 5 and 4 name every field the plugin reads alike (5 adds types it does not ask for).
template <typename Descr>
void StartEvent(void* context, void** handle, const Descr& d) {
  NcclRecord record;
  record.parent = ParentOf(d.parent);
  switch (d.type) {
    case nccl_abi::kColl:
      record.event = NcclEventKind::kColl;
      record.sequence = d.coll.seq_number;
      record.count = d.coll.count;
      record.root = d.coll.root;
      record.channels = d.coll.channels;
      Start(context, handle, d.rank, record, OperationText(d.coll.func, d.coll.datatype, d.coll.algo, d.coll.proto).view());
      break;
    case nccl_abi::kP2p:
      record.event = NcclEventKind::kP2p;
      record.count = d.p2p.count;
      record.peer = d.p2p.peer;
      record.channels = d.p2p.channels;
      Start(context, handle, d.rank, record, OperationText(d.p2p.func, d.p2p.datatype, nullptr, nullptr).view());
      break;
    case nccl_abi::kProxyOp:
      StartProxyOp(context, handle, d.rank, d.parent, d.proxy_op);
      break;
    case nccl_abi::kProxyStep:
      StartProxyStep(context, handle, d.rank, d.parent, d.proxy_step);
      break;
    case nccl_abi::kKernelCh:
      record.event = NcclEventKind::kKernelChannel;
      record.channel = d.kernel_ch.channel;
      record.value = d.kernel_ch.gpu_timer;
      Start(context, handle, d.rank, record, {});
      break;
    default: break;  // not asked for
  }
}

}  // namespace

nccl_abi::Result NcclStartEventV5(void* context, void** handle, nccl_abi::EventDescrV5* d) {
  *handle = nullptr;
  if (d != nullptr) StartEvent(context, handle, *d);
  return nccl_abi::kSuccess;
}

nccl_abi::Result NcclStartEventV4(void* context, void** handle, nccl_abi::EventDescrV4* d) {
  *handle = nullptr;
  if (d != nullptr) StartEvent(context, handle, *d);
  return nccl_abi::kSuccess;
}

nccl_abi::Result NcclStartEventV3(void* context, void** handle, nccl_abi::EventDescrV3* d) {
  *handle = nullptr;
  if (d == nullptr) return nccl_abi::kSuccess;
  NcclRecord record;
  record.parent = ParentOf(d->parent);
  switch (d->type) {
    case nccl_abi::kColl:
      record.event = NcclEventKind::kColl;
      record.comm_hash = d->coll.comm_hash;
      record.sequence = d->coll.seq_number;
      record.count = d->coll.count;
      record.root = d->coll.root;
      record.channels = d->coll.max_channels;
      Start(context, handle, d->rank, record,
            OperationText(d->coll.func, d->coll.datatype, d->coll.algo, d->coll.proto, d->coll.comm_name).view());
      break;
    case nccl_abi::kP2p:
      record.event = NcclEventKind::kP2p;
      record.comm_hash = d->p2p.comm_hash;
      record.count = d->p2p.count;
      record.peer = d->p2p.peer;
      Start(context, handle, d->rank, record,
            OperationText(d->p2p.func, d->p2p.datatype, nullptr, nullptr, d->p2p.comm_name).view());
      break;
    case nccl_abi::kProxyOp:
      StartProxyOp(context, handle, d->rank, d->parent, d->proxy_op);
      break;
    case nccl_abi::kProxyStep:
      StartProxyStep(context, handle, d->rank, d->parent, d->proxy_step);
      break;
    case nccl_abi::kKernelCh:
      record.event = NcclEventKind::kKernelChannel;
      record.channel = d->kernel_ch.channel;
      Start(context, handle, d->rank, record, {});
      break;
    default: break;
  }
  return nccl_abi::kSuccess;
}

nccl_abi::Result NcclStopEvent(void* handle) {
  Recorder* recorder = ActiveRecorder();
  if (recorder == nullptr || NcclHandleKind(handle) == NcclEventKind::kNone) return nccl_abi::kSuccess;
  NcclRecord record;
  record.kind = NcclRecordKind::kStop;
  record.id = reinterpret_cast<uint64_t>(handle);
  record.event = NcclHandleKind(handle);
  recorder->RecordNccl(record, {});
  return nccl_abi::kSuccess;
}

nccl_abi::Result NcclRecordEventStateV5(void* handle, int state, nccl_abi::StateArgsV5* args) {
  if (args == nullptr) return nccl_abi::kSuccess;
  const NcclEventKind kind = NcclHandleKind(handle);
  // Only what the rank file keeps: a channel's GPU stop time and the bytes a step moved.
  if (kind == NcclEventKind::kKernelChannel && state == nccl_abi::kKernelChStop) {
    RecordState(handle, state, args->kernel_ch.gpu_timer);
  } else if (kind == NcclEventKind::kProxyStep && args->proxy_step.trans_size > 0) {
    RecordState(handle, state, args->proxy_step.trans_size);
  }
  return nccl_abi::kSuccess;
}

nccl_abi::Result NcclRecordEventStateV3(void* handle, int state, nccl_abi::StateArgsV3* args) {
  // Version 3 reports the bytes a proxy operation moved so far.
  if (args != nullptr && NcclHandleKind(handle) == NcclEventKind::kProxyOp && args->proxy_op.trans_size > 0) {
    RecordState(handle, state, args->proxy_op.trans_size);
  }
  return nccl_abi::kSuccess;
}

nccl_abi::Result NcclFinalize(void* context) {
  delete static_cast<Comm*>(context);
  return nccl_abi::kSuccess;
}

}  // namespace rankscope::collector
