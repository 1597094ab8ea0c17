// Turns CUPTI activity buffers into trace events: kernels, copies, sets, runtime and driver
// API calls, synchronizations and overhead records, on lanes per (device, context, stream)
// and per thread; memory allocations and releases, as the bytes live per (device, memory
// kind) on counter lanes. It runs on the collector's drain thread, never on an application
// thread.
//
// Correlation kept here:
// - a kernel, copy or set and the API call that launched it share `correlation_id`;
// - an API call carries `external_id`, the NVTX push/pop range open on its thread at the
//   time (from the EXTERNAL_CORRELATION records CUPTI writes before the API record);
// - a synchronization has no thread in CUPTI's record: it goes on the thread of the API
//   call with the same correlation id, once that call is seen.
#pragma once

#include <cupti.h>

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "collector/cupti_api.h"
#include "collector/device_tracer.h"
#include "trace/events.h"

namespace rankscope::collector {

struct CuptiConversionStats {
  uint64_t records = 0;             // records read from buffers
  uint64_t invalid_timestamps = 0;  // device records CUPTI left without times (dropped)
  uint64_t unknown_kinds = 0;       // kinds the collector does not convert (skipped)
  uint64_t unfinished_buffers = 0;  // buffers that ended in an invalid or partial record
  // Releases of more bytes than were live in their (device, memory kind): memory allocated
  // before tracing began. The count stops at 0 instead.
  uint64_t memory_releases_clamped = 0;
};

// Demangles an Itanium C++ symbol; returns `name` unchanged when it is not one.
std::string DemangledKernelName(const char* name);

// A map from correlation ids that forgets its oldest entries in bulk: entries are needed for
// a short while (the next few records), but with RUNTIME or DRIVER recording off nothing
// would ever claim them.
template <typename Value>
class AgingMap {
 public:
  static constexpr size_t kGenerationSize = 1 << 16;
  void Put(uint32_t key, Value value) {
    if (current_.size() >= kGenerationSize) {
      current_.swap(previous_);
      current_.clear();
    }
    current_[key] = value;
  }
  // Finds and removes `key`.
  std::optional<Value> Take(uint32_t key) {
    for (auto* generation : {&current_, &previous_}) {
      if (auto it = generation->find(key); it != generation->end()) {
        Value value = it->second;
        generation->erase(it);
        return value;
      }
    }
    return std::nullopt;
  }

 private:
  std::unordered_map<uint32_t, Value> current_, previous_;
};

class CuptiConverter {
 public:
  // Lanes and strings go to one rank file: every call must pass a sink of the same file.
  CuptiConverter(const CuptiApi& api, int64_t pid);

  // Converts the `valid_bytes` of a buffer CUPTI completed (records walked with
  // cuptiActivityGetNextRecord) into `out`.
  void ConvertBuffer(const DeviceEventSink& sink, uint8_t* buffer, size_t valid_bytes, trace::EventTables& out);
  // Places synchronizations still waiting for their API call on a lane of their own
  // (RUNTIME and DRIVER recording off, or the call's record lost). Call at the end.
  void FlushPendingSyncs(const DeviceEventSink& sink, trace::EventTables& out);

  const CuptiConversionStats& stats() const { return stats_; }

 private:
  void Convert(const CUpti_Activity* record, trace::EventTables& out);
  bool Times(uint64_t start, uint64_t end, trace::EventCommon* event);
  // The fields every copy record has (Memcpy6, MemcpyPtoP4); false without valid times.
  template <typename CopyRecord>
  bool ConvertCopy(const CopyRecord& record, trace::MemcpyEvent* event);
  void ConvertMemory(const CUpti_ActivityMemory4& record, trace::EventTables& out);
  trace::LaneId StreamLane(uint32_t device, uint32_t context, uint32_t stream);
  trace::LaneId ThreadLane(int64_t tid);
  trace::StringId KernelName(const char* name);
  trace::StringId ApiName(trace::ApiDomain domain, uint32_t cbid);
  trace::StringId StaticName(std::string_view text);  // `text` must outlive the converter

  const CuptiApi& api_;
  const DeviceEventSink* sink_ = nullptr;  // during ConvertBuffer and FlushPendingSyncs
  int64_t pid_;
  CuptiConversionStats stats_;
  std::map<std::tuple<uint32_t, uint32_t, uint32_t>, trace::LaneId> stream_lanes_;
  std::unordered_map<int64_t, trace::LaneId> thread_lanes_;
  // The bytes live per (device, memory kind), and its counter lane once it has a sample.
  struct MemoryCounter {
    uint64_t live_bytes = 0;
    trace::LaneId lane = trace::kNoLane;
  };
  std::map<std::pair<uint32_t, trace::MemoryKind>, MemoryCounter> memory_counters_;
  // CUPTI shares one name pointer among all records of a kernel; the text is kept to catch a
  // pointer reused for another kernel after a module unload.
  std::unordered_map<const char*, std::pair<std::string, trace::StringId>> kernel_names_;
  std::map<std::pair<trace::ApiDomain, uint32_t>, trace::StringId> api_names_;
  std::unordered_map<std::string_view, trace::StringId> static_names_;
  // Correlation id -> NVTX range id, from the record before the API call's own.
  AgingMap<uint64_t> external_ids_;
  // Correlation id -> thread lane of API calls seen, for synchronizations.
  AgingMap<trace::LaneId> call_threads_;
  std::vector<trace::SyncEvent> pending_syncs_;  // lane unknown yet
};

}  // namespace rankscope::collector
