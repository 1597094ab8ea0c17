#include "collector/nccl_assembler.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

namespace rankscope::collector {
namespace {

constexpr size_t kOffsetWindow = 256;
// A GPU time further than this from the host time of its callback is not a clock reading.
constexpr int64_t kMaxPlausibleOffsetNs = int64_t{3600} * 1'000'000'000;

trace::CollectivePartKind PartKind(const NcclEventKind kind, bool is_send) {
  switch (kind) {
    case NcclEventKind::kKernelChannel: return trace::CollectivePartKind::kKernelChannel;
    case NcclEventKind::kProxyOp:
      return is_send ? trace::CollectivePartKind::kProxySend : trace::CollectivePartKind::kProxyRecv;
    case NcclEventKind::kProxyStep:
      return is_send ? trace::CollectivePartKind::kProxySendStep : trace::CollectivePartKind::kProxyRecvStep;
    default: return trace::CollectivePartKind::kUnknown;
  }
}

// The operation's names (func, datatype, algo, proto and, from version 3, the
// communicator's), as OperationText in the plugin joined them.
std::vector<std::string_view> SplitText(std::string_view text) {
  std::vector<std::string_view> parts;
  while (!text.empty() && parts.size() < 5) {
    const size_t end = text.find('\0');
    parts.push_back(text.substr(0, end));
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  parts.resize(5);
  return parts;
}

// Whether the op has a root (unknown ops may); NCCL passes root 0 for the others, which the
// row shows as -1, "not applicable".
bool HasRoot(trace::CollectiveOp op) {
  using trace::CollectiveOp;
  return op == CollectiveOp::kBroadcast || op == CollectiveOp::kReduce || op == CollectiveOp::kGather ||
         op == CollectiveOp::kScatter || op == CollectiveOp::kUnknown;
}

}  // namespace

trace::CollectiveOp NcclCollectiveOp(std::string_view func) {
  using trace::CollectiveOp;
  static constexpr std::pair<std::string_view, CollectiveOp> kOps[] = {
      {"AllReduce", CollectiveOp::kAllReduce}, {"AllGather", CollectiveOp::kAllGather},
      {"ReduceScatter", CollectiveOp::kReduceScatter}, {"Broadcast", CollectiveOp::kBroadcast},
      {"Reduce", CollectiveOp::kReduce}, {"AlltoAll", CollectiveOp::kAllToAll},
      {"AllToAll", CollectiveOp::kAllToAll}, {"Send", CollectiveOp::kSend},
      {"Recv", CollectiveOp::kRecv}, {"Gather", CollectiveOp::kGather},
      {"Scatter", CollectiveOp::kScatter}};
  for (const auto& [name, op] : kOps) {
    if (func == name) return op;
  }
  return CollectiveOp::kUnknown;
}

trace::DataType NcclDataType(std::string_view datatype) {
  using trace::DataType;
  static constexpr std::pair<std::string_view, DataType> kTypes[] = {
      {"ncclInt8", DataType::kInt8},         {"ncclUint8", DataType::kUint8},
      {"ncclInt32", DataType::kInt32},       {"ncclUint32", DataType::kUint32},
      {"ncclInt64", DataType::kInt64},       {"ncclUint64", DataType::kUint64},
      {"ncclFloat16", DataType::kFloat16},   {"ncclFloat32", DataType::kFloat32},
      {"ncclFloat64", DataType::kFloat64},   {"ncclBfloat16", DataType::kBfloat16},
      {"ncclFloat8e4m3", DataType::kFloat8E4M3}, {"ncclFloat8e5m2", DataType::kFloat8E5M2}};
  for (const auto& [name, type] : kTypes) {
    if (datatype == name) return type;
  }
  return DataType::kUnknown;
}

int NcclTypeSize(trace::DataType type) {
  using trace::DataType;
  switch (type) {
    case DataType::kInt8:
    case DataType::kUint8:
    case DataType::kFloat8E4M3:
    case DataType::kFloat8E5M2: return 1;
    case DataType::kFloat16:
    case DataType::kBfloat16: return 2;
    case DataType::kInt32:
    case DataType::kUint32:
    case DataType::kFloat32: return 4;
    case DataType::kInt64:
    case DataType::kUint64:
    case DataType::kFloat64: return 8;
    case DataType::kUnknown: break;
  }
  return 0;
}

void NcclAssembler::Add(const NcclRecord& record, std::string_view text, int64_t ts_ns) {
  switch (record.kind) {
    case NcclRecordKind::kComm: {
      Comm& comm = comms_[record.id];
      comm.hash = record.comm_hash;
      comm.rank = record.rank;
      comm.ranks = record.ranks;
      comm.name = std::string(text);
      return;
    }
    case NcclRecordKind::kStart: {
      if (record.event == NcclEventKind::kColl || record.event == NcclEventKind::kP2p) {
        Operation& operation = operations_[record.id];
        operation.kind = record.event;
        operation.comm = record.comm;
        operation.comm_hash = record.comm_hash;
        operation.count = record.count;
        operation.root = record.root;
        operation.peer = record.peer;
        operation.channels = record.channels;
        operation.rank = record.rank;
        operation.start_ns = operation.last_ns = ts_ns;
        const std::vector<std::string_view> names = SplitText(text);
        operation.func = std::string(names[0]);
        operation.datatype = std::string(names[1]);
        operation.algo = std::string(names[2]);
        operation.proto = std::string(names[3]);
        operation.comm_name = std::string(names[4]);
        if (record.event == NcclEventKind::kColl) {
          operation.sequence = record.sequence;
        } else {
          // NCCL numbers no point-to-point operation: the n-th to the same peer, per direction.
          // Counted per plugin context (and, in version 3, the operation's communicator), not
          // by the context's hash: its init record may be drained after the operation.
          operation.sequence = p2p_sequences_[{record.comm, record.comm_hash, operation.func, record.peer}]++;
        }
        if (flight_ != nullptr) {
          trace::FlightCollective& entered = operation.flight;
          entered.comm_hash = CommHash(operation.comm, operation.comm_hash);
          entered.sequence = operation.sequence;
          entered.op = NcclCollectiveOp(operation.func);
          entered.name = operation.func.empty() ? "NCCL operation" : operation.func;
          entered.bytes = operation.count * static_cast<uint64_t>(NcclTypeSize(NcclDataType(operation.datatype)));
          entered.root = record.event == NcclEventKind::kColl && HasRoot(entered.op) ? operation.root : -1;
          entered.peer = record.event == NcclEventKind::kP2p ? operation.peer : -1;
          entered.comm_rank = operation.rank;
          if (auto comm = comms_.find(operation.comm); comm != comms_.end()) {
            entered.comm_rank = comm->second.rank;
            entered.comm_size = comm->second.ranks;
          }
          entered.start_ns = ts_ns;
          flight_->Enter(entered);
        }
        return;
      }
      Part& part = parts_[record.id];
      part.kind = record.event;
      part.parent = record.parent;
      part.comm = record.comm;
      part.channel = record.channel;
      part.peer = record.peer;
      part.step = record.event == NcclEventKind::kProxyStep ? record.step : -1;
      part.is_send = record.is_send != 0;
      part.start_ns = part.last_ns = ts_ns;
      if (record.event == NcclEventKind::kKernelChannel && record.value != 0) {
        part.gpu_start = record.value;
        ObserveOffset(ts_ns, record.value);
      }
      unlinked_.push_back(record.id);
      return;
    }
    case NcclRecordKind::kStop: {
      if (auto operation = operations_.find(record.id); operation != operations_.end()) {
        operation->second.stopped = true;
        operation->second.stop_ns = operation->second.last_ns = ts_ns;
      } else if (auto part = parts_.find(record.id); part != parts_.end()) {
        part->second.stopped = true;
        part->second.stop_ns = part->second.last_ns = ts_ns;
      } else {
        ++stats_.unmatched_stops;
      }
      return;
    }
    case NcclRecordKind::kState: {
      auto part = parts_.find(record.id);
      if (part == parts_.end()) {
        ++stats_.unmatched_stops;
        return;
      }
      part->second.last_ns = ts_ns;
      if (part->second.kind == NcclEventKind::kKernelChannel) {
        if (record.value != 0) {
          part->second.gpu_stop = record.value;
          ObserveOffset(ts_ns, record.value);
        }
      } else {
        part->second.bytes = std::max(part->second.bytes, record.value);  // "moved so far" or a step's size
      }
      return;
    }
  }
}

void NcclAssembler::ObserveOffset(int64_t host_ns, uint64_t gpu) {
  if (gpu > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return;
  const int64_t offset = host_ns - static_cast<int64_t>(gpu);
  if (offset > kMaxPlausibleOffsetNs || offset < -kMaxPlausibleOffsetNs) return;
  offsets_.push_back(offset);
  if (offsets_.size() > kOffsetWindow) offsets_.pop_front();
}

std::optional<int64_t> NcclAssembler::gpu_clock_offset_ns() const {
  if (offsets_.empty()) return std::nullopt;
  return *std::min_element(offsets_.begin(), offsets_.end());
}

std::optional<int64_t> NcclAssembler::GpuToHost(uint64_t gpu) const {
  const std::optional<int64_t> offset = gpu_clock_offset_ns();
  if (!offset || gpu == 0 || gpu > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
  const int64_t host = static_cast<int64_t>(gpu) + *offset;
  return host;
}

void NcclAssembler::Link() {
  std::vector<uint64_t> still;
  for (uint64_t id : unlinked_) {
    auto part = parts_.find(id);
    if (part == parts_.end()) continue;
    uint64_t parent = part->second.parent;
    // A proxy step hangs from a proxy operation, which hangs from the operation.
    if (part->second.kind == NcclEventKind::kProxyStep) {
      auto proxy = parts_.find(parent);
      if (proxy == parts_.end()) {
        still.push_back(id);
        continue;
      }
      part->second.is_send = proxy->second.is_send;
      part->second.peer = proxy->second.peer;
      part->second.channel = proxy->second.channel;
      parent = proxy->second.parent;
    }
    auto operation = operations_.find(parent);
    if (operation == operations_.end()) {
      still.push_back(id);
      continue;
    }
    operation->second.parts.push_back(id);
  }
  unlinked_ = std::move(still);
}

bool NcclAssembler::Ready(const Operation& operation, int64_t now_ns) const {
  if (!operation.stopped) return false;
  int64_t last = operation.last_ns;
  int32_t channels_stopped = 0;
  bool part_running = false;
  for (uint64_t id : operation.parts) {
    const Part& part = parts_.at(id);
    last = std::max(last, part.last_ns);
    if (!part.stopped) {
      part_running = true;
    } else if (part.kind == NcclEventKind::kKernelChannel) {
      ++channels_stopped;
    }
  }
  if (!part_running && operation.channels > 0 && channels_stopped >= operation.channels) return true;
  return now_ns - last >= (part_running ? stall_limit_ns_ : idle_limit_ns_);
}

void NcclAssembler::Emit(const DeviceEventSink& sink, trace::EventTables& out, int64_t now_ns, bool final) {
  Link();
  std::vector<uint64_t> ready;
  for (auto& [id, operation] : operations_) {
    if (final || Ready(operation, now_ns)) ready.push_back(id);
  }
  std::sort(ready.begin(), ready.end());  // handles count up per thread: start order
  for (uint64_t id : ready) {
    auto it = operations_.find(id);
    Write(sink, out, it->second);
    operations_.erase(it);
  }
  // Parts whose operation never showed (lost records, or PXN work for another process) go
  // out on their own once they are over.
  std::erase_if(unlinked_, [&](uint64_t id) {
    auto part = parts_.find(id);
    if (part == parts_.end()) return true;
    const int64_t quiet_ns = now_ns - part->second.last_ns;
    const bool over = part->second.stopped ? quiet_ns >= idle_limit_ns_ : quiet_ns >= stall_limit_ns_;
    if (!final && !over) return false;
    WritePart(sink, out, part->second, CommHash(part->second.comm, 0), 0, CommLane(sink, part->second.comm, 0, {}));
    ++stats_.orphan_parts;
    parts_.erase(part);
    return true;
  });
  if (final) parts_.clear();
}

uint64_t NcclAssembler::CommHash(uint64_t comm, uint64_t hash_override) const {
  if (hash_override != 0) return hash_override;
  auto it = comms_.find(comm);
  return it != comms_.end() ? it->second.hash : 0;
}

trace::LaneId NcclAssembler::CommLane(const DeviceEventSink& sink, uint64_t comm, uint64_t hash_override,
                                      std::string_view name_override) {
  auto known = comms_.find(comm);
  const uint64_t hash = CommHash(comm, hash_override);
  // Version 3 shares one context among communicators: its lanes go by hash.
  const bool by_hash = hash_override != 0 || known == comms_.end();
  if (!by_hash && known->second.lane != trace::kNoLane) return known->second.lane;
  if (by_hash) {
    if (auto lane = hash_lanes_.find(hash); lane != hash_lanes_.end()) return lane->second;
  }
  trace::Lane lane;
  lane.kind = trace::LaneKind::kCommunicator;
  lane.pid = pid_;
  lane.comm_hash = hash;
  std::string name = !name_override.empty() ? std::string(name_override)
                     : known != comms_.end() ? known->second.name
                                             : std::string();
  if (name.empty()) name = fmt::format("NCCL {:016x}", hash);
  if (known != comms_.end() && known->second.ranks > 0) {
    name += fmt::format(" (rank {} of {})", known->second.rank, known->second.ranks);
  }
  lane.name = name;
  const trace::LaneId id = sink.add_lane(lane);
  if (by_hash) {
    hash_lanes_[hash] = id;
  } else {
    known->second.lane = id;
  }
  return id;
}

void NcclAssembler::Write(const DeviceEventSink& sink, trace::EventTables& out, Operation& operation) {
  trace::CollectiveEvent event;
  event.comm_hash = CommHash(operation.comm, operation.comm_hash);
  event.lane = CommLane(sink, operation.comm, operation.comm_hash, operation.comm_name);
  event.name = sink.intern(operation.func.empty() ? "NCCL operation" : operation.func);
  event.sequence = operation.sequence;
  event.op = NcclCollectiveOp(operation.func);
  event.datatype = NcclDataType(operation.datatype);
  event.bytes = operation.count * static_cast<uint64_t>(NcclTypeSize(event.datatype));
  event.root = operation.kind == NcclEventKind::kColl && HasRoot(event.op) ? operation.root : -1;
  event.peer = operation.kind == NcclEventKind::kP2p ? operation.peer : -1;
  if (auto comm = comms_.find(operation.comm); comm != comms_.end()) {
    event.comm_rank = comm->second.rank;
    event.comm_size = comm->second.ranks;
  }
  if (event.comm_rank < 0) event.comm_rank = operation.rank;
  event.channels = operation.channels > 0 ? static_cast<uint32_t>(operation.channels) : 0;
  if (!operation.algo.empty()) event.algorithm = sink.intern(operation.algo);
  if (!operation.proto.empty()) event.protocol = sink.intern(operation.proto);

  // Host times: from the enqueue to the last stop of the operation or its parts. Kernel
  // channels with GPU times replace both ends with what the GPU did.
  int64_t host_end = operation.stopped ? operation.stop_ns : operation.last_ns;
  std::optional<int64_t> gpu_start, gpu_end;
  for (uint64_t part_id : operation.parts) {
    const Part& part = parts_.at(part_id);
    host_end = std::max(host_end, part.stopped ? part.stop_ns : part.last_ns);
    if (part.kind != NcclEventKind::kKernelChannel) continue;
    if (std::optional<int64_t> start = GpuToHost(part.gpu_start)) gpu_start = std::min(gpu_start.value_or(*start), *start);
    if (std::optional<int64_t> stop = GpuToHost(part.gpu_stop)) gpu_end = std::max(gpu_end.value_or(*stop), *stop);
  }
  if (gpu_start && gpu_end && *gpu_end >= *gpu_start) {
    event.start_ns = *gpu_start;
    event.end_ns = *gpu_end;
  } else {
    event.start_ns = operation.start_ns;
    event.end_ns = std::max(host_end, operation.start_ns);
  }
  out.collectives.push_back(event);
  ++stats_.operations;
  if (flight_ != nullptr) {
    bool part_running = false;
    int32_t channels_stopped = 0;
    for (uint64_t part_id : operation.parts) {
      const Part& part = parts_.at(part_id);
      if (!part.stopped) part_running = true;
      else if (part.kind == NcclEventKind::kKernelChannel) ++channels_stopped;
    }
    const bool completed =
        operation.stopped && !part_running && (operation.channels <= 0 || channels_stopped >= operation.channels);
    if (completed) flight_->Complete(operation.flight, std::max(event.end_ns, host_end));
  }
  // Versions 4 and 5 give bytes per proxy step only: a proxy operation moved its steps' sum.
  std::unordered_map<uint64_t, uint64_t> step_bytes;
  for (uint64_t part_id : operation.parts) {
    const Part& part = parts_.at(part_id);
    if (part.kind == NcclEventKind::kProxyStep) step_bytes[part.parent] += part.bytes;
  }
  for (uint64_t part_id : operation.parts) {
    auto part = parts_.find(part_id);
    if (part->second.kind == NcclEventKind::kProxyOp && part->second.bytes == 0) {
      if (auto sum = step_bytes.find(part_id); sum != step_bytes.end()) part->second.bytes = sum->second;
    }
    WritePart(sink, out, part->second, event.comm_hash, event.sequence, event.lane);
    parts_.erase(part);
  }
}

void NcclAssembler::WritePart(const DeviceEventSink& sink, trace::EventTables& out, const Part& part,
                              uint64_t comm_hash, uint64_t sequence, trace::LaneId lane) {
  trace::CollectivePartEvent event;
  event.lane = lane;
  event.comm_hash = comm_hash;
  event.sequence = sequence;
  event.part_kind = PartKind(part.kind, part.is_send);
  event.channel = part.channel;
  event.peer = part.kind == NcclEventKind::kKernelChannel ? -1 : part.peer;
  event.step = part.step;
  event.bytes = part.bytes;
  event.start_ns = part.start_ns;
  event.end_ns = std::max(part.stopped ? part.stop_ns : part.last_ns, part.start_ns);
  if (part.kind == NcclEventKind::kKernelChannel) {
    const std::optional<int64_t> start = GpuToHost(part.gpu_start);
    const std::optional<int64_t> stop = GpuToHost(part.gpu_stop);
    if (start && stop && *stop >= *start) {
      event.start_ns = *start;
      event.end_ns = *stop;
    }
    event.name = sink.intern(fmt::format("channel {}", part.channel));
  } else if (part.kind == NcclEventKind::kProxyOp) {
    event.name = sink.intern(fmt::format("{} peer {} · channel {}", part.is_send ? "send to" : "recv from", part.peer,
                                         part.channel));
  } else {
    event.name = sink.intern(fmt::format("{} step {}", part.is_send ? "send" : "recv", part.step));
  }
  out.collective_parts.push_back(event);
  ++stats_.parts;
}

}  // namespace rankscope::collector
