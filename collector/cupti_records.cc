#include "collector/cupti_records.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

namespace rankscope::collector {
namespace {

// Beyond this many synchronizations waiting for their API call, they are placed on a lane of
// their own: RUNTIME or DRIVER recording may be off, and nothing would ever claim them.
constexpr size_t kMaxPendingSyncs = 1 << 16;

trace::CopyKind CopyKindOf(uint8_t kind) {
  return kind <= static_cast<uint8_t>(trace::CopyKind::kPeerToPeer) ? static_cast<trace::CopyKind>(kind)
                                                                    : trace::CopyKind::kUnknown;
}

trace::MemoryKind MemoryKindOf(uint32_t kind) {
  return kind <= static_cast<uint32_t>(trace::MemoryKind::kManagedStatic) ? static_cast<trace::MemoryKind>(kind)
                                                                          : trace::MemoryKind::kUnknown;
}

trace::SyncKind SyncKindOf(CUpti_ActivitySynchronizationType type) {
  switch (type) {
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE: return trace::SyncKind::kEventSynchronize;
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT: return trace::SyncKind::kStreamWaitEvent;
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE: return trace::SyncKind::kStreamSynchronize;
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE: return trace::SyncKind::kContextSynchronize;
    default: return trace::SyncKind::kUnknown;
  }
}

trace::OverheadKind OverheadKindOf(CUpti_ActivityOverheadKind kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_OVERHEAD_DRIVER_COMPILER: return trace::OverheadKind::kDriverCompiler;
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH: return trace::OverheadKind::kCuptiBufferFlush;
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_INSTRUMENTATION: return trace::OverheadKind::kCuptiInstrumentation;
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_RESOURCE: return trace::OverheadKind::kCuptiResource;
    case CUPTI_ACTIVITY_OVERHEAD_RUNTIME_TRIGGERED_MODULE_LOADING:
      return trace::OverheadKind::kRuntimeTriggeredModuleLoading;
    case CUPTI_ACTIVITY_OVERHEAD_LAZY_FUNCTION_LOADING: return trace::OverheadKind::kLazyFunctionLoading;
    case CUPTI_ACTIVITY_OVERHEAD_COMMAND_BUFFER_FULL: return trace::OverheadKind::kCommandBufferFull;
    case CUPTI_ACTIVITY_OVERHEAD_ACTIVITY_BUFFER_REQUEST: return trace::OverheadKind::kActivityBufferRequest;
    case CUPTI_ACTIVITY_OVERHEAD_UVM_ACTIVITY_INIT: return trace::OverheadKind::kUvmActivityInit;
    default: return trace::OverheadKind::kUnknown;
  }
}

// CUPTI's "not applicable" for a synchronization's stream or event becomes the schema's 0.
uint64_t Applicable(uint32_t value) { return value == CUPTI_SYNCHRONIZATION_INVALID_VALUE ? 0 : value; }

}  // namespace


std::string DemangledKernelName(const char* name) {
  if (name == nullptr) return {};
  if (std::strncmp(name, "_Z", 2) != 0) return name;
  int status = 0;
  char* demangled = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (status != 0 || demangled == nullptr) {
    std::free(demangled);
    return name;
  }
  std::string out(demangled);
  std::free(demangled);
  return out;
}

CuptiConverter::CuptiConverter(const CuptiApi& api, int64_t pid) : api_(api), pid_(pid) {}

void CuptiConverter::ConvertBuffer(const DeviceEventSink& sink, uint8_t* buffer, size_t valid_bytes,
                                   trace::EventTables& out) {
  sink_ = &sink;
  CUpti_Activity* record = nullptr;
  for (;;) {
    const CUptiResult result = api_.ActivityGetNextRecord(buffer, valid_bytes, &record);
    if (result != CUPTI_SUCCESS) {
      // MAX_LIMIT_REACHED is the normal end; INVALID_KIND marks an incomplete record.
      if (result != CUPTI_ERROR_MAX_LIMIT_REACHED) ++stats_.unfinished_buffers;
      break;
    }
    ++stats_.records;
    Convert(record, out);
  }
  // Synchronizations whose API call came in this buffer (after them) can be placed now.
  std::erase_if(pending_syncs_, [&](trace::SyncEvent& sync) {
    std::optional<trace::LaneId> thread = call_threads_.Take(static_cast<uint32_t>(sync.correlation_id));
    if (!thread) return false;
    sync.lane = *thread;
    out.syncs.push_back(sync);
    return true;
  });
  if (pending_syncs_.size() > kMaxPendingSyncs) FlushPendingSyncs(sink, out);
  sink_ = nullptr;
}

void CuptiConverter::FlushPendingSyncs(const DeviceEventSink& sink, trace::EventTables& out) {
  if (pending_syncs_.empty()) return;
  trace::Lane lane;
  lane.kind = trace::LaneKind::kCpuThread;
  lane.pid = pid_;
  lane.tid = 0;
  lane.name = "CUDA synchronization (thread unknown)";
  const trace::LaneId id = sink.add_lane(lane);
  for (trace::SyncEvent& sync : pending_syncs_) {
    sync.lane = id;
    out.syncs.push_back(sync);
  }
  pending_syncs_.clear();
}

bool CuptiConverter::Times(uint64_t start, uint64_t end, trace::EventCommon* event) {
  // CUPTI leaves 0 in device records it could not time (too little device buffer memory).
  if (start == 0 || end < start) {
    ++stats_.invalid_timestamps;
    return false;
  }
  event->start_ns = sink_->to_realtime_ns(start);
  event->end_ns = std::max(sink_->to_realtime_ns(end), event->start_ns);
  return true;
}

trace::LaneId CuptiConverter::StreamLane(uint32_t device, uint32_t context, uint32_t stream) {
  auto [it, added] = stream_lanes_.try_emplace({device, context, stream}, trace::kNoLane);
  if (added) {
    trace::Lane lane;
    lane.kind = trace::LaneKind::kGpuStream;
    lane.device = static_cast<int32_t>(device);
    lane.context = context;
    lane.stream = stream;
    lane.pid = pid_;
    lane.name = fmt::format("stream {}", stream);
    it->second = sink_->add_lane(lane);
  }
  return it->second;
}

trace::LaneId CuptiConverter::ThreadLane(int64_t tid) {
  auto [it, added] = thread_lanes_.try_emplace(tid, trace::kNoLane);
  if (added) {
    trace::Lane lane;
    lane.kind = trace::LaneKind::kCpuThread;
    lane.pid = pid_;
    lane.tid = tid;
    lane.name = sink_->thread_name(tid);
    it->second = sink_->add_lane(lane);
  }
  return it->second;
}

trace::StringId CuptiConverter::KernelName(const char* name) {
  if (name == nullptr) return StaticName("[unnamed kernel]");
  auto it = kernel_names_.find(name);
  if (it != kernel_names_.end() && it->second.first == name) return it->second.second;
  const trace::StringId id = sink_->intern(DemangledKernelName(name));
  kernel_names_[name] = {name, id};
  return id;
}

trace::StringId CuptiConverter::ApiName(trace::ApiDomain domain, uint32_t cbid) {
  auto [it, added] = api_names_.try_emplace({domain, cbid}, trace::kEmptyString);
  if (added) {
    const char* name = nullptr;
    const CUpti_CallbackDomain cupti_domain =
        domain == trace::ApiDomain::kRuntime ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API;
    if (api_.GetCallbackName(cupti_domain, cbid, &name) == CUPTI_SUCCESS && name != nullptr) {
      it->second = sink_->intern(trace::WithoutApiVersion(name));
    } else {
      it->second = sink_->intern(fmt::format("{} API {}", domain == trace::ApiDomain::kRuntime ? "runtime" : "driver", cbid));
    }
  }
  return it->second;
}

trace::StringId CuptiConverter::StaticName(std::string_view text) {
  auto [it, added] = static_names_.try_emplace(text, trace::kEmptyString);
  if (added) it->second = sink_->intern(text);
  return it->second;
}

template <typename CopyRecord>
bool CuptiConverter::ConvertCopy(const CopyRecord& m, trace::MemcpyEvent* e) {
  if (!Times(m.start, m.end, e)) return false;
  e->lane = StreamLane(m.deviceId, m.contextId, m.streamId);
  e->copy_kind = CopyKindOf(m.copyKind);
  e->name = StaticName(trace::DefaultName(e->copy_kind));
  e->correlation_id = m.correlationId;
  e->bytes = m.bytes;
  e->src_kind = MemoryKindOf(m.srcKind);
  e->dst_kind = MemoryKindOf(m.dstKind);
  return true;
}

void CuptiConverter::ConvertMemory(const CUpti_ActivityMemory4& m, trace::EventTables& out) {
  const bool allocation = m.memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
  if (!allocation && m.memoryOperationType != CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE) {
    ++stats_.unknown_kinds;
    return;
  }
  const trace::MemoryKind kind = MemoryKindOf(m.memoryKind);
  MemoryCounter& counter = memory_counters_[{m.deviceId, kind}];
  // The change counts even without a time, so that later samples stay right.
  if (allocation) {
    counter.live_bytes += std::min(m.bytes, UINT64_MAX - counter.live_bytes);
  } else if (m.bytes > counter.live_bytes) {
    ++stats_.memory_releases_clamped;
    counter.live_bytes = 0;
  } else {
    counter.live_bytes -= m.bytes;
  }
  if (m.timestamp == 0) {
    ++stats_.invalid_timestamps;
    return;
  }
  if (counter.lane == trace::kNoLane) {
    const auto device = static_cast<int32_t>(m.deviceId);
    trace::Lane lane;
    lane.kind = trace::LaneKind::kCounter;
    lane.device = device;
    lane.pid = pid_;
    lane.name = trace::MemoryCounterName(trace::kCudaMemorySource, trace::CudaMemoryCategory(kind, device));
    counter.lane = sink_->add_lane(lane);
  }
  trace::CounterSample sample;
  sample.lane = counter.lane;
  sample.ts_ns = sink_->to_realtime_ns(m.timestamp);
  sample.value = static_cast<double>(counter.live_bytes);
  out.counter_samples.push_back(sample);
}

void CuptiConverter::Convert(const CUpti_Activity* record, trace::EventTables& out) {
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      trace::KernelEvent e;
      if (!Times(k->start, k->end, &e)) return;
      e.lane = StreamLane(k->deviceId, k->contextId, k->streamId);
      e.name = KernelName(k->name);
      e.correlation_id = k->correlationId;
      e.grid = {static_cast<uint32_t>(k->gridX), static_cast<uint32_t>(k->gridY), static_cast<uint32_t>(k->gridZ)};
      e.block = {static_cast<uint32_t>(k->blockX), static_cast<uint32_t>(k->blockY), static_cast<uint32_t>(k->blockZ)};
      e.registers_per_thread = k->registersPerThread;
      e.static_shared_bytes = static_cast<uint32_t>(k->staticSharedMemory);
      e.dynamic_shared_bytes = static_cast<uint32_t>(k->dynamicSharedMemory);
      out.kernels.push_back(e);
      return;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      trace::MemcpyEvent e;
      if (ConvertCopy(*reinterpret_cast<const CUpti_ActivityMemcpy6*>(record), &e)) out.memcpys.push_back(e);
      return;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY2: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpyPtoP4*>(record);
      trace::MemcpyEvent e;
      if (!ConvertCopy(*m, &e)) return;
      e.src_device = static_cast<int32_t>(m->srcDeviceId);
      e.dst_device = static_cast<int32_t>(m->dstDeviceId);
      out.memcpys.push_back(e);
      return;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
      trace::MemsetEvent e;
      if (!Times(m->start, m->end, &e)) return;
      e.lane = StreamLane(m->deviceId, m->contextId, m->streamId);
      e.name = StaticName("Memset");
      e.correlation_id = m->correlationId;
      e.bytes = m->bytes;
      e.value = m->value;
      e.memory_kind = MemoryKindOf(m->memoryKind);
      out.memsets.push_back(e);
      return;
    }
    case CUPTI_ACTIVITY_KIND_MEMORY2:
      ConvertMemory(*reinterpret_cast<const CUpti_ActivityMemory4*>(record), out);
      return;
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
      const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(record);
      trace::ApiCallEvent e;
      // Host calls: a zero start is a real (if odd) clock value, not a missing one.
      if (a->end < a->start) {
        ++stats_.invalid_timestamps;
        return;
      }
      e.start_ns = sink_->to_realtime_ns(a->start);
      e.end_ns = std::max(sink_->to_realtime_ns(a->end), e.start_ns);
      e.domain = record->kind == CUPTI_ACTIVITY_KIND_RUNTIME ? trace::ApiDomain::kRuntime : trace::ApiDomain::kDriver;
      e.lane = ThreadLane(a->threadId);
      e.name = ApiName(e.domain, a->cbid);
      e.correlation_id = a->correlationId;
      e.callback_id = a->cbid;
      e.return_code = static_cast<int32_t>(a->returnValue);
      e.external_id = external_ids_.Take(a->correlationId).value_or(0);
      call_threads_.Put(a->correlationId, e.lane);
      out.api_calls.push_back(e);
      return;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
      const auto* s = reinterpret_cast<const CUpti_ActivitySynchronization2*>(record);
      trace::SyncEvent e;
      if (!Times(s->start, s->end, &e)) return;
      e.sync_kind = SyncKindOf(s->type);
      e.name = StaticName(trace::DefaultName(e.sync_kind));
      e.correlation_id = s->correlationId;
      e.context = s->contextId == CUPTI_INVALID_CONTEXT_ID ? 0 : s->contextId;
      e.stream = Applicable(s->streamId);
      e.cuda_event_id = Applicable(s->cudaEventId);
      if (std::optional<trace::LaneId> thread = call_threads_.Take(s->correlationId)) {
        e.lane = *thread;
        out.syncs.push_back(e);
      } else {
        pending_syncs_.push_back(e);
      }
      return;
    }
    case CUPTI_ACTIVITY_KIND_OVERHEAD: {
      const auto* o = reinterpret_cast<const CUpti_ActivityOverhead3*>(record);
      trace::OverheadEvent e;
      if (!Times(o->start, o->end, &e)) return;
      e.overhead_kind = OverheadKindOf(o->overheadKind);
      e.name = StaticName(trace::DefaultName(e.overhead_kind));
      e.correlation_id = o->correlationId;
      switch (o->objectKind) {
        case CUPTI_ACTIVITY_OBJECT_THREAD: e.lane = ThreadLane(o->objectId.pt.threadId); break;
        case CUPTI_ACTIVITY_OBJECT_DEVICE:
          e.lane = StreamLane(o->objectId.dcs.deviceId, 0, 0);
          break;
        case CUPTI_ACTIVITY_OBJECT_CONTEXT:
          e.lane = StreamLane(o->objectId.dcs.deviceId, o->objectId.dcs.contextId, 0);
          break;
        case CUPTI_ACTIVITY_OBJECT_STREAM:
          e.lane = StreamLane(o->objectId.dcs.deviceId, o->objectId.dcs.contextId, o->objectId.dcs.streamId);
          break;
        default: e.lane = ThreadLane(pid_); break;  // the process: its main thread
      }
      out.overheads.push_back(e);
      return;
    }
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
      const auto* x = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(record);
      if (x->externalKind == kNvtxCorrelationKind) external_ids_.Put(x->correlationId, x->externalId);
      return;
    }
    default: ++stats_.unknown_kinds; return;
  }
}

}  // namespace rankscope::collector
