// Assembles NCCL profiler-plugin records into operations on the drain thread: one
// `collectives` row per collective or point-to-point operation, and `collective_parts` rows
// for its kernel channels, proxy operations and proxy steps, all on the communicator's lane.
//
// NCCL reports a collective's stop when it is enqueued, not when it completes (its plugin
// README). An operation is written once it is enqueued and its parts have stopped, and
// either all the kernel channels it announced have stopped or nothing has happened to it for
// `idle_limit` (graph-captured work, or parts NCCL never reports); at the end, whatever is
// left. An operation with a part still running (a long send) waits longer, up to
// `stall_limit` without news; past that, a part NCCL never stops (a lost record, an aborted
// communicator) no longer holds its operation, nor does an unattached one stay open. Its
// times are its kernel channels' GPU times when NCCL gives them, else its host times
// (start, and the last stop of it or its parts).
//
// GPU times come from %globaltimer. The offset to the host clock is estimated as the
// smallest (host time of the callback - GPU time it reports) over the recent kernel channel
// callbacks: the proxy thread sees a channel start or stop after it happened, never before.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "collector/device_tracer.h"
#include "collector/flight_recorder.h"
#include "collector/nccl_events.h"
#include "trace/events.h"

namespace rankscope::collector {

struct NcclAssemblerStats {
  uint64_t operations = 0;      // collectives rows written
  uint64_t parts = 0;           // collective_parts rows written
  uint64_t orphan_parts = 0;    // parts whose operation never appeared (written unattached)
  uint64_t unmatched_stops = 0; // stops or states of events never started
};

class NcclAssembler {
 public:
  explicit NcclAssembler(int64_t pid, int64_t idle_limit_ns = 2'000'000'000, int64_t stall_limit_ns = 60'000'000'000)
      : pid_(pid), idle_limit_ns_(idle_limit_ns), stall_limit_ns_(stall_limit_ns) {}

  // One record as drained, `ts_ns` its host (realtime) time; `text` as the plugin wrote it.
  void Add(const NcclRecord& record, std::string_view text, int64_t ts_ns);
  // Writes operations that are complete, or idle since before `now_ns - idle_limit`; with
  // `final`, everything still open.
  void Emit(const DeviceEventSink& sink, trace::EventTables& out, int64_t now_ns, bool final);

  const NcclAssemblerStats& stats() const { return stats_; }
  // Tells `flight` when an operation starts and when it completed (its kernel channels all
  // stopped, or, without channels, it went quiet after its enqueue); an operation written
  // only because it stalled or the run ended stays in flight there.
  void SetFlightRecorder(FlightRecorder* flight) { flight_ = flight; }
  // The host-minus-GPU clock offset in use, once a kernel channel gave one.
  std::optional<int64_t> gpu_clock_offset_ns() const;
  bool empty() const { return operations_.empty() && parts_.empty(); }

 private:
  struct Comm {
    uint64_t hash = 0;
    int32_t rank = -1;
    int32_t ranks = 0;
    std::string name;
    trace::LaneId lane = trace::kNoLane;
  };
  struct Part {
    NcclEventKind kind = NcclEventKind::kNone;
    uint64_t parent = 0;  // an operation, or (proxy steps) a proxy operation
    uint64_t comm = 0;
    int32_t channel = -1, peer = -1, step = -1;
    bool is_send = false;
    bool stopped = false;
    int64_t start_ns = 0, stop_ns = 0, last_ns = 0;
    uint64_t gpu_start = 0, gpu_stop = 0;
    uint64_t bytes = 0;
  };
  struct Operation {
    NcclEventKind kind = NcclEventKind::kNone;
    uint64_t comm = 0;
    uint64_t comm_hash = 0;  // version 3 names it per operation
    uint64_t sequence = 0;
    std::string func, datatype, algo, proto;
    std::string comm_name;  // version 3 names it per operation
    uint64_t count = 0;
    int32_t root = -1, peer = -1, channels = 0;
    int32_t rank = -1;  // as the descriptor gave it (version 3 has no init to say)
    bool stopped = false;
    int64_t start_ns = 0, stop_ns = 0, last_ns = 0;
    std::vector<uint64_t> parts;
    int32_t channels_stopped = 0;
    trace::FlightCollective flight;  // as entered into the flight recorder
  };

  void Link();
  bool Ready(const Operation& operation, int64_t now_ns) const;
  void Write(const DeviceEventSink& sink, trace::EventTables& out, Operation& operation);
  void WritePart(const DeviceEventSink& sink, trace::EventTables& out, const Part& part, uint64_t comm_hash,
                 uint64_t sequence, trace::LaneId lane);
  trace::LaneId CommLane(const DeviceEventSink& sink, uint64_t comm, uint64_t hash_override,
                         std::string_view name_override);
  uint64_t CommHash(uint64_t comm, uint64_t hash_override) const;
  void ObserveOffset(int64_t host_ns, uint64_t gpu);
  // A kernel channel's GPU time on the host clock; nullopt without a usable one.
  std::optional<int64_t> GpuToHost(uint64_t gpu) const;

  const int64_t pid_;
  const int64_t idle_limit_ns_;
  const int64_t stall_limit_ns_;
  NcclAssemblerStats stats_;
  std::unordered_map<uint64_t, Comm> comms_;
  std::map<uint64_t, trace::LaneId> hash_lanes_;  // version 3: lanes by hash
  std::unordered_map<uint64_t, Operation> operations_;
  std::unordered_map<uint64_t, Part> parts_;
  std::vector<uint64_t> unlinked_;  // parts whose parent was not seen yet
  // Point-to-point counters by (context, version 3's communicator hash, func, peer).
  std::map<std::tuple<uint64_t, uint64_t, std::string, int32_t>, uint64_t> p2p_sequences_;
  std::deque<int64_t> offsets_;  // recent host - GPU observations
  FlightRecorder* flight_ = nullptr;
};

// NCCL's names, as its plugin passes them ("AllReduce", "ncclBfloat16").
trace::CollectiveOp NcclCollectiveOp(std::string_view func);
trace::DataType NcclDataType(std::string_view datatype);
int NcclTypeSize(trace::DataType type);  // bytes per element; 0 unknown

}  // namespace rankscope::collector
