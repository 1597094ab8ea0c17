// A rank trace assembled in memory, for analyzer tests: identity, lanes and events, with
// helpers for what the reference trainer records (step ranges, the workload mark, the CPU
// backend's compute/comm categories).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "trace/events.h"
#include "trace/reader.h"

namespace rankscope::analyzer::testing {

// The CPU backend's NVTX categories in domain "rankscope" (meta "nvtx.category.rankscope.<id>").
inline constexpr uint32_t kComputeCategory = 1;
inline constexpr uint32_t kCommCategory = 2;

class TraceBuilder {
 public:
  explicit TraceBuilder(int rank = 0, int world_size = 1) {
    trace_.strings = {""};
    trace_.meta.rank = rank;
    trace_.meta.world_size = world_size;
    trace_.meta.host = "host";
    trace_.meta.run_id = "run";
    trace_.meta.closed_cleanly = true;
  }

  // ---- Identity (RankMeta fields) and meta entries ----
  TraceBuilder& Rank(int rank) { trace_.meta.rank = rank; return *this; }
  TraceBuilder& WorldSize(int world_size) { trace_.meta.world_size = world_size; return *this; }
  TraceBuilder& Host(std::string host) { trace_.meta.host = std::move(host); return *this; }
  TraceBuilder& RunId(std::string run_id) { trace_.meta.run_id = std::move(run_id); return *this; }
  TraceBuilder& CommandLine(std::string command) { trace_.meta.command_line = std::move(command); return *this; }
  TraceBuilder& Backend(std::string backend) { trace_.meta.backend = std::move(backend); return *this; }
  void Meta(const std::string& key, const std::string& value) { trace_.meta.entries[key] = value; }
  // The CPU backend's convention: category 1 of domain "rankscope" is compute, 2 is comm.
  void CpuBackendCategories() {
    Meta("nvtx.category.rankscope.1", "compute");
    Meta("nvtx.category.rankscope.2", "comm");
  }

  trace::StringId Str(const std::string& text) {
    for (size_t i = 0; i < trace_.strings.size(); ++i) {
      if (trace_.strings[i] == text) return static_cast<trace::StringId>(i);
    }
    trace_.strings.push_back(text);
    return static_cast<trace::StringId>(trace_.strings.size() - 1);
  }

  // ---- Lanes ----
  trace::LaneId Lane(trace::LaneKind kind, int device, trace::LaneRole role = trace::LaneRole::kNone) {
    trace::Lane lane;
    lane.id = static_cast<trace::LaneId>(trace_.lanes.size() + 1);
    lane.kind = kind;
    lane.device = device;
    lane.role = role;
    lane.pid = 1000 + trace_.meta.rank.value_or(0);
    trace_.lanes.push_back(lane);
    return lane.id;
  }
  // A GPU stream of `device`; each call makes a new stream.
  trace::LaneId GpuStream(int device, trace::LaneRole role = trace::LaneRole::kNone) {
    const trace::LaneId id = Lane(trace::LaneKind::kGpuStream, device, role);
    trace_.lanes[id - 1].stream = id;
    trace_.lanes[id - 1].name = "stream " + std::to_string(id);
    return id;
  }
  trace::LaneId CpuThread(const std::string& name, trace::LaneRole role = trace::LaneRole::kNone) {
    const trace::LaneId id = Lane(trace::LaneKind::kCpuThread, -1, role);
    trace_.lanes[id - 1].tid = 2000 + id;
    trace_.lanes[id - 1].name = name;
    return id;
  }
  trace::LaneId Communicator(uint64_t comm_hash, const std::string& name = "world") {
    const trace::LaneId id = Lane(trace::LaneKind::kCommunicator, -1);
    trace_.lanes[id - 1].comm_hash = comm_hash;
    trace_.lanes[id - 1].name = name;
    return id;
  }

  // ---- Device activity ----
  void Kernel(trace::LaneId lane, const std::string& name, int64_t start, int64_t end) {
    trace::KernelEvent kernel;
    kernel.lane = lane;
    kernel.name = Str(name);
    kernel.start_ns = start;
    kernel.end_ns = end;
    trace_.events.kernels.push_back(kernel);
  }
  void Copy(trace::LaneId lane, int64_t start, int64_t end, uint64_t bytes = 0) {
    trace::MemcpyEvent copy;
    copy.lane = lane;
    copy.start_ns = start;
    copy.end_ns = end;
    copy.bytes = bytes;
    trace_.events.memcpys.push_back(copy);
  }
  void Memset(trace::LaneId lane, int64_t start, int64_t end, uint64_t bytes = 0) {
    trace::MemsetEvent set;
    set.lane = lane;
    set.start_ns = start;
    set.end_ns = end;
    set.bytes = bytes;
    trace_.events.memsets.push_back(set);
  }

  // ---- NVTX ----
  void Range(trace::LaneId lane, const std::string& domain, uint32_t category, const std::string& name,
             int64_t start, int64_t end, const std::string& args = "", trace::Payload payload = {}) {
    trace::NvtxRangeEvent range;
    range.lane = lane;
    range.domain = Str(domain);
    range.category = category;
    range.name = Str(name);
    range.start_ns = start;
    range.end_ns = end;
    range.args = args.empty() ? trace::kEmptyString : Str(args);
    range.payload = payload;
    trace_.events.nvtx_ranges.push_back(range);
  }
  void Mark(trace::LaneId lane, const std::string& domain, const std::string& name, int64_t at,
            const std::string& args = "", trace::Payload payload = {}) {
    trace::NvtxMarkEvent mark;
    mark.lane = lane;
    mark.domain = Str(domain);
    mark.name = Str(name);
    mark.start_ns = at;
    mark.end_ns = at;
    mark.args = args.empty() ? trace::kEmptyString : Str(args);
    mark.payload = payload;
    trace_.events.nvtx_marks.push_back(mark);
  }
  // A counter lane named `name` (e.g. "cuda memory: device (gpu 0)") and its samples.
  trace::LaneId Counter(const std::string& name, int device, const std::vector<std::pair<int64_t, double>>& samples) {
    const trace::LaneId lane = Lane(trace::LaneKind::kCounter, device);
    trace_.lanes.back().name = name;
    for (const auto& [at, value] : samples) trace_.events.counter_samples.push_back({lane, at, value});
    return lane;
  }
  // The reference trainer's step range: domain "rankscope", args {"step":N,"samples":S}.
  void Step(trace::LaneId lane, int64_t number, int64_t start, int64_t end, int64_t samples) {
    Range(lane, "rankscope", 0, "step", start, end,
          "{\"step\":" + std::to_string(number) + ",\"samples\":" + std::to_string(samples) + "}");
  }
  // The reference trainer's workload mark (domain "rankscope", name "workload").
  void Workload(trace::LaneId lane, int64_t at, int world_size, int batch, int accum, int steps, int64_t parameters) {
    Mark(lane, "rankscope", "workload", at,
         "{\"world_size\":" + std::to_string(world_size) + ",\"batch\":" + std::to_string(batch) +
             ",\"accum\":" + std::to_string(accum) + ",\"steps\":" + std::to_string(steps) +
             ",\"parameters\":" + std::to_string(parameters) + "}");
  }

  // ---- Collectives (NCCL profiler-plugin records) ----
  void Collective(trace::LaneId lane, const std::string& name, int64_t start, int64_t end, uint64_t comm_hash,
                  uint64_t sequence, trace::CollectiveOp op, uint64_t bytes, int comm_size) {
    trace::CollectiveEvent collective;
    collective.lane = lane;
    collective.name = Str(name);
    collective.start_ns = start;
    collective.end_ns = end;
    collective.comm_hash = comm_hash;
    collective.sequence = sequence;
    collective.op = op;
    collective.bytes = bytes;
    collective.comm_size = comm_size;
    collective.comm_rank = trace_.meta.rank.value_or(-1);
    trace_.events.collectives.push_back(collective);
  }

  // The trace with its tables sorted by (lane, start), as RankTrace promises.
  const trace::RankTrace& trace() {
    trace_.events.SortByLaneAndTime();
    for (trace::Lane& lane : trace_.lanes) lane.max_duration_ns = 0;
    auto longest = [&](const auto& table) {
      for (const auto& event : table) {
        if (event.lane == trace::kNoLane || event.lane > trace_.lanes.size()) continue;
        trace::Lane& lane = trace_.lanes[event.lane - 1];
        lane.max_duration_ns = std::max(lane.max_duration_ns, event.duration_ns());
      }
    };
    longest(trace_.events.kernels);
    longest(trace_.events.memcpys);
    longest(trace_.events.memsets);
    longest(trace_.events.nvtx_ranges);
    longest(trace_.events.collectives);
    return trace_;
  }
  trace::RankTrace Build() { return trace(); }

 private:
  trace::RankTrace trace_;
};

}  // namespace rankscope::analyzer::testing
