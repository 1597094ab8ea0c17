// A run as Chrome trace-event JSON (ExportChromeTrace, interop/interop.h), shaped like
// Kineto's traces where the fields are the same, so that Perfetto UI, chrome://tracing and
// Kineto-aware tools recognise kernels, runtime calls and launch flows; the args and the
// top-level "rankscope" object carry everything else, so that import::ImportRankscopeChrome
// (import_chrome.cc) restores every rank exactly.
//
// The format ("rankscope-chrome-trace", version 1) is described field by field in
// docs/chrome-export.md; keep the two in step.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "interop/interop.h"
#include "analyzer/run_events.h"
#include "base/launch_env.h"
#include "base/text.h"
#include "trace/reader.h"
#include "trace/run_dir.h"
#include "trace/schema.h"

namespace rankscope::interop {

using analyzer::LaneLabel;
using analyzer::LaneShownBefore;
namespace fs = std::filesystem;

namespace {

using Json = nlohmann::ordered_json;

// What import_chrome.cc accepts: the same name, this version or older.
constexpr std::string_view kFormatName = "rankscope-chrome-trace";
constexpr int kFormatVersion = 1;
// Chrome pids of processes without a rank: above every rank.
constexpr int64_t kUnrankedPidBase = kMaxWorldSize;
constexpr size_t kWriteChunk = size_t{1} << 20;
constexpr int64_t kNsPerSecond = 1'000'000'000;

// ---- the output file ----------------------------------------------------------------------

// A temporary file beside `out`, plain or gzip, renamed over `out` by Commit. Until then
// `out` is untouched; the destructor removes an uncommitted temporary.
class OutputFile {
 public:
  static Result<std::unique_ptr<OutputFile>> Create(const fs::path& out) {
    std::error_code ec;
    if (fs::is_directory(out, ec)) {
      return InvalidArgument(fmt::format("cannot write {}: it is a directory", Quoted(out)));
    }
    std::string pattern = out.string() + ".tmp-XXXXXX";
    const int fd = ::mkstemp(pattern.data());
    if (fd < 0) return IoError(fmt::format("cannot write {}: {}", Quoted(out), std::strerror(errno)));
    std::unique_ptr<OutputFile> file(new OutputFile(out, pattern));
    ::fchmod(fd, 0644);  // mkstemp's 0600 is for secrets; a trace is an ordinary file
    const bool gzip = out.string().ends_with(".gz");
    if (gzip) {
      file->gz_ = ::gzdopen(fd, "wb");
      if (file->gz_ == nullptr) {
        ::close(fd);
        return IoError(fmt::format("cannot write {}: zlib cannot open a gzip stream", Quoted(out)));
      }
    } else {
      file->plain_ = ::fdopen(fd, "wb");
      if (file->plain_ == nullptr) {
        const int error = errno;
        ::close(fd);
        return IoError(fmt::format("cannot write {}: {}", Quoted(out), std::strerror(error)));
      }
    }
    return file;
  }

  ~OutputFile() {
    CloseHandles();
    if (!committed_) ::unlink(temporary_.c_str());
  }
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  Status Write(std::string_view text) {
    buffer_.append(text);
    return buffer_.size() >= kWriteChunk ? Drain() : Status::Ok();
  }

  // Everything written, the file closed and renamed over `out`.
  Status Commit() {
    RS_RETURN_IF_ERROR(Drain());
    if (gz_ != nullptr) {
      const int rc = ::gzclose(gz_);
      gz_ = nullptr;
      if (rc != Z_OK) return Failure(rc == Z_ERRNO ? std::strerror(errno) : fmt::format("zlib error {}", rc));
    }
    if (plain_ != nullptr) {
      const int rc = std::fclose(plain_);
      plain_ = nullptr;
      if (rc != 0) return Failure(std::strerror(errno));
    }
    if (::rename(temporary_.c_str(), out_.c_str()) != 0) return Failure(std::strerror(errno));
    committed_ = true;
    return Status::Ok();
  }

 private:
  OutputFile(fs::path out, fs::path temporary) : out_(std::move(out)), temporary_(std::move(temporary)) {}

  Status Failure(std::string_view reason) const {
    return IoError(fmt::format("cannot write {}: {}", Quoted(out_), reason));
  }

  Status Drain() {
    if (buffer_.empty()) return Status::Ok();
    if (gz_ != nullptr) {
      size_t done = 0;
      while (done < buffer_.size()) {
        const auto chunk = static_cast<unsigned>(std::min(buffer_.size() - done, kWriteChunk));
        const int written = ::gzwrite(gz_, buffer_.data() + done, chunk);
        if (written <= 0) {
          int code = Z_OK;
          const char* message = ::gzerror(gz_, &code);
          return Failure(code == Z_ERRNO ? std::strerror(errno) : std::string(message != nullptr ? message : "zlib"));
        }
        done += static_cast<size_t>(written);
      }
    } else if (std::fwrite(buffer_.data(), 1, buffer_.size(), plain_) != buffer_.size()) {
      return Failure(std::strerror(errno));
    }
    buffer_.clear();
    return Status::Ok();
  }

  void CloseHandles() {
    if (gz_ != nullptr) ::gzclose(gz_);
    if (plain_ != nullptr) std::fclose(plain_);
    gz_ = nullptr;
    plain_ = nullptr;
  }

  fs::path out_;
  fs::path temporary_;
  gzFile gz_ = nullptr;
  std::FILE* plain_ = nullptr;
  std::string buffer_;
  bool committed_ = false;
};

// ---- values ------------------------------------------------------------------------------

// The schema's enumeration names (trace/schema.h EnumValues), by type and value.
class EnumNames {
 public:
  static const EnumNames& Get() {
    static const EnumNames names;
    return names;
  }
  // The name of `value`, or the value itself when it has none (a damaged or newer file).
  Json Of(std::string_view type, int value) const {
    auto it = names_.find(type);
    if (it != names_.end()) {
      auto name = it->second.find(value);
      if (name != it->second.end()) return std::string(name->second);
    }
    return value;
  }

 private:
  EnumNames() {
    for (const trace::EnumValue& e : trace::EnumValues()) names_[e.type][e.value] = e.name;
  }
  std::map<std::string_view, std::map<int, std::string_view>, std::less<>> names_;
};

Json EnumName(std::string_view type, auto value) { return EnumNames::Get().Of(type, static_cast<int>(value)); }

// A double as JSON: a number, or "NaN" / "Infinity" / "-Infinity", which JSON numbers
// cannot be.
Json Real(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
  return value;
}

// The importer's reading of a µs value as ns (import_chrome.cc does the same).
std::optional<int64_t> MicrosToNs(double us) {
  const double ns = std::nearbyint(us * 1000.0);
  if (!std::isfinite(ns) || ns < -9.2e18 || ns > 9.2e18) return std::nullopt;
  return static_cast<int64_t>(ns);
}

// `offset_ns` in µs, and whether reading it back gives the same ns.
std::pair<double, bool> Micros(int64_t offset_ns) {
  const double us = static_cast<double>(offset_ns) / 1000.0;
  return {us, MicrosToNs(us) == offset_ns};
}


std::string_view MemoryLabel(trace::MemoryKind kind) {
  switch (kind) {
    case trace::MemoryKind::kPageable: return "Pageable";
    case trace::MemoryKind::kPinned: return "Pinned";
    case trace::MemoryKind::kDevice: return "Device";
    case trace::MemoryKind::kArray: return "Array";
    case trace::MemoryKind::kManaged: return "Managed";
    case trace::MemoryKind::kDeviceStatic: return "Device Static";
    case trace::MemoryKind::kManagedStatic: return "Managed Static";
    case trace::MemoryKind::kUnknown: break;
  }
  return "Unknown";
}

std::string_view SyncLabel(trace::SyncKind kind) {
  switch (kind) {
    case trace::SyncKind::kEventSynchronize: return "Event Sync";
    case trace::SyncKind::kStreamWaitEvent: return "Stream Wait Event";
    case trace::SyncKind::kStreamSynchronize: return "Stream Sync";
    case trace::SyncKind::kContextSynchronize: return "Context Sync";
    case trace::SyncKind::kUnknown: break;
  }
  return "Sync";
}

std::string EnumLabel(std::string_view type, auto value, std::string_view fallback) {
  const Json name = EnumName(type, value);
  return name.is_string() ? name.get<std::string>() : std::string(fallback);
}

// ---- the exporter ------------------------------------------------------------------------

// What the "rankscope" object needs of a rank once its events are written.
struct RankInfo {
  int64_t pid = 0;
  fs::path path;
  trace::RankMeta meta;
  std::vector<trace::Lane> lanes;
  std::vector<trace::DropRecord> drops;
};

// Whole seconds at or below the run's first event, so that no event gets a negative ts
// (Perfetto drops those). With no events anywhere, the first rank's clock start.
Result<int64_t> ExportBaseTime(const std::vector<fs::path>& ranks) {
  std::optional<int64_t> first, clock_start;
  for (const fs::path& path : ranks) {
    RS_ASSIGN_OR_RETURN(std::unique_ptr<trace::TraceReader> reader, trace::TraceReader::Open(path));
    RS_ASSIGN_OR_RETURN(std::optional<int64_t> t, reader->FirstEventTime());
    if (t) first = first ? std::min(*first, *t) : *t;
    if (!clock_start && reader->meta().clock_start) clock_start = reader->meta().clock_start->realtime_ns;
  }
  const int64_t t = first ? *first : clock_start.value_or(0);
  // Floor division: toward minus infinity for times before 1970 too.
  return (t / kNsPerSecond - (t % kNsPerSecond < 0 ? 1 : 0)) * kNsPerSecond;
}

class Exporter {
 public:
  Exporter(OutputFile& out, std::string run_id, int64_t base_ns)
      : out_(out), run_id_(std::move(run_id)), base_(base_ns) {}

  Status Begin() { return out_.Write("{\"traceEvents\":["); }

  // Reads one rank file and writes its events.
  Status AddRank(const fs::path& path, int64_t pid) {
    RS_ASSIGN_OR_RETURN(std::unique_ptr<trace::TraceReader> reader, trace::TraceReader::Open(path));
    RS_ASSIGN_OR_RETURN(trace::RankTrace rank, reader->LoadAll());
    trace_ = &rank;
    pid_ = pid;
    RS_RETURN_IF_ERROR(WriteProcess());
    RS_RETURN_IF_ERROR(WriteEvents());
    infos_.push_back(RankInfo{pid, path, std::move(rank.meta), std::move(rank.lanes), std::move(rank.drops)});
    trace_ = nullptr;
    return Status::Ok();
  }

  // The rest of the file: the base time and the "rankscope" object, each rank's strings read
  // again from its file (so that only one rank's strings are ever in memory).
  Status Finish() {
    const Json header = {{"format", kFormatName}, {"version", kFormatVersion}, {"run_id", run_id_}};
    std::string head = header.dump(-1, ' ', false, Json::error_handler_t::replace);
    head.pop_back();  // the closing brace: "ranks" follows
    RS_RETURN_IF_ERROR(out_.Write(fmt::format(
        "\n],\"displayTimeUnit\":\"ns\",\"baseTimeNanoseconds\":{},\"rankscope\":{},\"ranks\":[", base_,
        head)));
    for (size_t i = 0; i < infos_.size(); ++i) {
      RS_ASSIGN_OR_RETURN(std::unique_ptr<trace::TraceReader> reader, trace::TraceReader::Open(infos_[i].path));
      RS_ASSIGN_OR_RETURN(std::vector<std::string> strings, reader->ReadStrings());
      RS_RETURN_IF_ERROR(out_.Write(i == 0 ? "\n" : ",\n"));
      RS_RETURN_IF_ERROR(out_.Write(Dump(RankObject(infos_[i], strings))));
    }
    return out_.Write("\n]}}\n");
  }

  const ChromeExportResult& result() const { return result_; }

 private:
  static std::string Dump(const Json& value) { return value.dump(-1, ' ', false, Json::error_handler_t::replace); }

  Status Emit(const Json& event) {
    RS_RETURN_IF_ERROR(out_.Write(first_event_ ? "\n" : ",\n"));
    first_event_ = false;
    ++result_.events;
    return out_.Write(Dump(event));
  }

  const std::string& Str(trace::StringId id) const { return trace_->str(id); }

  // An event's start: `ts`, and whether `ts` gives it back exactly.
  std::pair<double, bool> Ts(int64_t ns) const {
    int64_t offset = 0;
    if (__builtin_sub_overflow(ns, base_, &offset)) return {0.0, false};
    return Micros(offset);
  }

  // The common fields of an event of phase `ph` on `lane`, starting at `start`. `exact`
  // says whether its times read back exactly (cleared here when `ts` does not).
  Json Event(std::string_view ph, std::string_view cat, std::string name, trace::LaneId lane, int64_t start,
             bool* exact) const {
    Json event;
    event["ph"] = ph;
    if (!cat.empty()) event["cat"] = cat;
    event["name"] = std::move(name);
    event["pid"] = pid_;
    event["tid"] = lane;
    const auto [ts, ts_exact] = Ts(start);
    event["ts"] = ts;
    *exact = *exact && ts_exact;
    return event;
  }

  // An `X` event: `args` go last, as in Kineto's files; exact times where `ts`/`dur` fall short.
  Json Complete(std::string_view cat, std::string name, const trace::EventCommon& e, Json args) const {
    bool exact = true;
    Json event = Event("X", cat, std::move(name), e.lane, e.start_ns, &exact);
    int64_t duration = 0;
    bool dur_exact = !__builtin_sub_overflow(e.end_ns, e.start_ns, &duration);
    const auto [dur, dur_back] = Micros(dur_exact ? duration : 0);
    event["dur"] = dur;
    if (!(exact && dur_exact && dur_back)) ExactTimes(event, e.start_ns, e.end_ns);
    event["args"] = std::move(args);
    return event;
  }

  static void ExactTimes(Json& event, int64_t start, int64_t end) {
    event["start_ns"] = start;
    event["end_ns"] = end;
  }

  // Display name: the stored one, else `fallback` with "unnamed" in the args.
  std::string Named(trace::StringId name, std::string fallback, Json& args) const {
    const std::string& text = Str(name);
    if (!text.empty()) return text;
    args["unnamed"] = true;
    return fallback;
  }

  const trace::Lane* LaneOf(trace::LaneId id) const { return trace_->lane(id); }

  // Kineto's identification of device work: device, context, stream (from the lane).
  void DeviceArgs(trace::LaneId lane_id, Json& args) const {
    const trace::Lane* lane = LaneOf(lane_id);
    args["device"] = lane != nullptr ? lane->device : -1;
    args["context"] = lane != nullptr ? lane->context : 0u;
    args["stream"] = lane != nullptr ? lane->stream : uint64_t{0};
  }

  // The API call that launched device work with correlation id `correlation` (nullptr: none).
  const trace::ApiCallEvent* Launcher(uint64_t correlation) const {
    if (correlation == 0) return nullptr;
    auto it = launchers_.find(correlation);
    return it == launchers_.end() ? nullptr : &trace_->events.api_calls[it->second];
  }

  // The args every kernel, copy and set carries: its correlation, the NVTX range its launch
  // ran in (Kineto's "External id"), its device and stream; copies and sets add their bytes.
  template <typename Record>
  Json DeviceWorkArgs(const Record& e, std::optional<uint64_t> bytes = std::nullopt) const {
    Json args;
    args["correlation"] = e.correlation_id;
    if (const trace::ApiCallEvent* call = Launcher(e.correlation_id); call != nullptr && call->external_id != 0) {
      args["External id"] = call->external_id;
    }
    DeviceArgs(e.lane, args);
    if (bytes) {
      args["bytes"] = *bytes;
      Bandwidth(e, *bytes, args);
    }
    return args;
  }

  Status WriteProcess() {
    const trace::RankMeta& meta = trace_->meta;
    // Imported traces may not name their host.
    const std::string host = meta.host.empty() ? "" : meta.host + ", ";
    const std::string name = meta.rank ? fmt::format("rank {} ({}pid {})", *meta.rank, host, meta.pid)
                                       : fmt::format("pid {} ({}no rank)", meta.pid, host);
    std::set<int32_t> devices;
    for (const trace::Lane& lane : trace_->lanes) {
      if (lane.kind == trace::LaneKind::kGpuStream) devices.insert(lane.device);
    }
    std::vector<std::string> labels;
    if (meta.world_size) labels.push_back(fmt::format("world size {}", *meta.world_size));
    if (!meta.backend.empty()) labels.push_back(meta.backend);
    for (int32_t device : devices) labels.push_back(fmt::format("GPU {}", device));
    if (devices.empty()) labels.emplace_back("CPU");
    auto metadata = [&](std::string_view what, std::optional<trace::LaneId> tid, Json args) {
      Json event;
      event["ph"] = "M";
      event["name"] = what;
      event["pid"] = pid_;
      if (tid) event["tid"] = *tid;
      event["args"] = std::move(args);
      return Emit(event);
    };
    RS_RETURN_IF_ERROR(metadata("process_name", std::nullopt, {{"name", name}}));
    RS_RETURN_IF_ERROR(
        metadata("process_labels", std::nullopt, {{"labels", fmt::format("{}", fmt::join(labels, ", "))}}));
    RS_RETURN_IF_ERROR(metadata("process_sort_index", std::nullopt, {{"sort_index", pid_}}));
    std::vector<const trace::Lane*> order;
    for (const trace::Lane& lane : trace_->lanes) order.push_back(&lane);
    std::stable_sort(order.begin(), order.end(),
                     [](const trace::Lane* a, const trace::Lane* b) { return LaneShownBefore(*a, *b); });
    for (size_t i = 0; i < order.size(); ++i) {
      RS_RETURN_IF_ERROR(metadata("thread_name", order[i]->id, {{"name", LaneLabel(*order[i])}}));
      RS_RETURN_IF_ERROR(metadata("thread_sort_index", order[i]->id, {{"sort_index", i}}));
    }
    return Status::Ok();
  }

  Status WriteEvents() {
    const trace::EventTables& events = trace_->events;
    launchers_.clear();
    for (size_t i = 0; i < events.api_calls.size(); ++i) {
      if (events.api_calls[i].correlation_id != 0) launchers_.emplace(events.api_calls[i].correlation_id, i);
    }

    for (const trace::KernelEvent& k : events.kernels) {
      Json args = DeviceWorkArgs(k);
      args["grid"] = {k.grid.x, k.grid.y, k.grid.z};
      args["block"] = {k.block.x, k.block.y, k.block.z};
      args["registers per thread"] = k.registers_per_thread;
      args["shared memory"] = uint64_t{k.static_shared_bytes} + k.dynamic_shared_bytes;
      args["static shared memory"] = k.static_shared_bytes;
      args["dynamic shared memory"] = k.dynamic_shared_bytes;
      std::string name = Named(k.name, "kernel", args);
      RS_RETURN_IF_ERROR(Emit(Complete("kernel", std::move(name), k, std::move(args))));
    }
    for (const trace::MemcpyEvent& c : events.memcpys) {
      Json args = DeviceWorkArgs(c, c.bytes);
      args["copy kind"] = EnumName("copy_kind", c.copy_kind);
      args["src kind"] = EnumName("memory_kind", c.src_kind);
      args["dst kind"] = EnumName("memory_kind", c.dst_kind);
      args["src device"] = c.src_device;
      args["dst device"] = c.dst_device;
      std::string name = Named(c.name,
                               fmt::format("Memcpy {} ({} -> {})", EnumLabel("copy_kind", c.copy_kind, "unknown"),
                                           MemoryLabel(c.src_kind), MemoryLabel(c.dst_kind)),
                               args);
      RS_RETURN_IF_ERROR(Emit(Complete("gpu_memcpy", std::move(name), c, std::move(args))));
    }
    for (const trace::MemsetEvent& s : events.memsets) {
      Json args = DeviceWorkArgs(s, s.bytes);
      args["value"] = s.value;
      args["memory kind"] = EnumName("memory_kind", s.memory_kind);
      std::string name = Named(s.name, fmt::format("Memset ({})", MemoryLabel(s.memory_kind)), args);
      RS_RETURN_IF_ERROR(Emit(Complete("gpu_memset", std::move(name), s, std::move(args))));
    }
    for (const trace::ApiCallEvent& a : events.api_calls) {
      Json args;
      args["correlation"] = a.correlation_id;
      args["External id"] = a.external_id;
      args["cbid"] = a.callback_id;
      args["return code"] = a.return_code;
      args["domain"] = EnumName("api_domain", a.domain);
      const std::string_view cat = a.domain == trace::ApiDomain::kRuntime  ? "cuda_runtime"
                                   : a.domain == trace::ApiDomain::kDriver ? "cuda_driver"
                                                                           : "cuda_api";
      std::string name = Named(a.name, fmt::format("CUDA API call (cbid {})", a.callback_id), args);
      RS_RETURN_IF_ERROR(Emit(Complete(cat, std::move(name), a, std::move(args))));
    }
    for (const trace::SyncEvent& y : events.syncs) {
      Json args;
      args["correlation"] = y.correlation_id;
      args["sync kind"] = EnumName("sync_kind", y.sync_kind);
      args["context"] = y.context;
      args["stream"] = y.stream;
      args["cuda event"] = y.cuda_event_id;
      std::string name = Named(y.name, std::string(SyncLabel(y.sync_kind)), args);
      RS_RETURN_IF_ERROR(Emit(Complete("cuda_sync", std::move(name), y, std::move(args))));
    }
    for (const trace::NvtxRangeEvent& r : events.nvtx_ranges) RS_RETURN_IF_ERROR(WriteRange(r));
    for (const trace::NvtxMarkEvent& m : events.nvtx_marks) {
      Json args = NvtxArgs(m, m);
      std::string name = Named(m.name, "NVTX mark", args);
      bool exact = true;
      Json event = Event("i", "user_annotation", std::move(name), m.lane, m.start_ns, &exact);
      event["s"] = "t";
      if (!exact || m.end_ns != m.start_ns) ExactTimes(event, m.start_ns, m.end_ns);
      event["args"] = std::move(args);
      RS_RETURN_IF_ERROR(Emit(event));
    }
    for (const trace::CollectiveEvent& c : events.collectives) {
      Json args;
      args["correlation"] = c.correlation_id;
      args["comm hash"] = c.comm_hash;
      args["sequence"] = c.sequence;
      args["op"] = EnumName("collective_op", c.op);
      args["reduce op"] = EnumName("reduce_op", c.reduce_op);
      args["dtype"] = EnumName("datatype", c.datatype);
      args["bytes"] = c.bytes;
      args["root"] = c.root;
      args["peer"] = c.peer;
      args["comm rank"] = c.comm_rank;
      args["comm size"] = c.comm_size;
      args["channels"] = c.channels;
      args["algorithm"] = Str(c.algorithm);
      args["protocol"] = Str(c.protocol);
      std::string name = Named(c.name, EnumLabel("collective_op", c.op, "collective"), args);
      RS_RETURN_IF_ERROR(Emit(Complete("collective", std::move(name), c, std::move(args))));
    }
    for (const trace::CounterSample& s : events.counter_samples) {
      const trace::Lane* lane = LaneOf(s.lane);
      bool exact = true;
      Json event = Event("C", "", lane != nullptr ? LaneLabel(*lane) : fmt::format("counter {}", s.lane), s.lane,
                         s.ts_ns, &exact);
      if (!exact) ExactTimes(event, s.ts_ns, s.ts_ns);
      event["args"] = {{"value", Real(s.value)}};
      RS_RETURN_IF_ERROR(Emit(event));
    }
    for (const trace::CollectivePartEvent& p : events.collective_parts) {
      Json args;
      args["correlation"] = p.correlation_id;
      args["comm hash"] = p.comm_hash;
      args["sequence"] = p.sequence;
      args["part kind"] = EnumName("collective_part_kind", p.part_kind);
      args["channel"] = p.channel;
      args["peer"] = p.peer;
      args["step"] = p.step;
      args["bytes"] = p.bytes;
      std::string name = Named(p.name, EnumLabel("collective_part_kind", p.part_kind, "collective part"), args);
      RS_RETURN_IF_ERROR(Emit(Complete("collective_part", std::move(name), p, std::move(args))));
    }
    for (const trace::OverheadEvent& o : events.overheads) {
      Json args;
      args["correlation"] = o.correlation_id;
      args["overhead kind"] = EnumName("overhead_kind", o.overhead_kind);
      std::string name = Named(o.name, EnumLabel("overhead_kind", o.overhead_kind, "overhead"), args);
      RS_RETURN_IF_ERROR(Emit(Complete("overhead", std::move(name), o, std::move(args))));
    }
    return WriteFlows();
  }

  template <typename Record>
  static void Bandwidth(const Record& e, uint64_t bytes, Json& args) {
    const int64_t duration = e.duration_ns();
    if (duration > 0) args["memory bandwidth (GB/s)"] = static_cast<double>(bytes) / static_cast<double>(duration);
  }

  // The fields NVTX ranges and marks share.
  Json NvtxArgs(const trace::EventCommon& e, const trace::NvtxAttributes& a) const {
    Json args;
    args["External id"] = e.correlation_id;
    args["domain"] = Str(a.domain);
    args["category"] = a.category;
    args["color"] = a.color;
    args["payload kind"] = EnumName("payload_kind", a.payload.kind);
    switch (a.payload.kind) {
      case trace::PayloadKind::kUint64:
      case trace::PayloadKind::kUint32: args["payload"] = static_cast<uint64_t>(a.payload.int_value); break;
      case trace::PayloadKind::kInt64:
      case trace::PayloadKind::kInt32: args["payload"] = a.payload.int_value; break;
      case trace::PayloadKind::kDouble:
      case trace::PayloadKind::kFloat: args["payload"] = Real(a.payload.real_value); break;
      case trace::PayloadKind::kNone: break;
    }
    args["payload args"] = Str(a.args);
    return args;
  }

  Status WriteRange(const trace::NvtxRangeEvent& r) {
    Json args = NvtxArgs(r, r);
    if (r.end_lane != trace::kNoLane || r.style != trace::NvtxRangeStyle::kPushPop) args["end lane"] = r.end_lane;
    std::string name = Named(r.name, "NVTX range", args);
    if (r.style == trace::NvtxRangeStyle::kPushPop) {
      return Emit(Complete("user_annotation", std::move(name), r, std::move(args)));
    }
    if (r.style != trace::NvtxRangeStyle::kStartEnd) args["style"] = static_cast<int>(r.style);
    // A start/end range: an async pair, its end on the thread where it ended.
    const uint64_t id = next_id_++;
    bool exact = true;
    Json begin = Event("b", "user_annotation", name, r.lane, r.start_ns, &exact);
    const trace::LaneId end_lane = r.end_lane != trace::kNoLane ? r.end_lane : r.lane;
    Json end = Event("e", "user_annotation", name, end_lane, r.end_ns, &exact);
    begin["id"] = id;
    end["id"] = id;
    if (!exact) ExactTimes(begin, r.start_ns, r.end_ns);
    begin["args"] = std::move(args);
    RS_RETURN_IF_ERROR(Emit(begin));
    return Emit(end);
  }

  // ac2g flows, Kineto's way: from each launching call to the device work it launched.
  Status WriteFlows() {
    auto flows = [&](const auto& table) -> Status {
      for (const auto& work : table) {
        const trace::ApiCallEvent* call = Launcher(work.correlation_id);
        if (call == nullptr) continue;
        const uint64_t id = next_id_++;
        bool exact = true;
        Json start = Event("s", "ac2g", "ac2g", call->lane, call->start_ns, &exact);
        start["id"] = id;
        RS_RETURN_IF_ERROR(Emit(start));
        Json finish = Event("f", "ac2g", "ac2g", work.lane, work.start_ns, &exact);
        finish["id"] = id;
        finish["bp"] = "e";
        RS_RETURN_IF_ERROR(Emit(finish));
      }
      return Status::Ok();
    };
    RS_RETURN_IF_ERROR(flows(trace_->events.kernels));
    RS_RETURN_IF_ERROR(flows(trace_->events.memcpys));
    return flows(trace_->events.memsets);
  }

  static Json RankObject(const RankInfo& info, const std::vector<std::string>& strings) {
    Json rank;
    rank["pid"] = info.pid;
    rank["file"] = info.path.filename().string();
    Json meta = Json::object();
    for (const auto& [key, value] : info.meta.entries) meta[key] = value;
    rank["meta"] = std::move(meta);
    Json lanes = Json::array();
    for (const trace::Lane& lane : info.lanes) {
      lanes.push_back({{"id", lane.id},
                       {"kind", EnumName("lane_kind", lane.kind)},
                       {"role", EnumName("lane_role", lane.role)},
                       {"device", lane.device},
                       {"context", lane.context},
                       {"stream", lane.stream},
                       {"pid", lane.pid},
                       {"tid", lane.tid},
                       {"comm_hash", lane.comm_hash},
                       {"name", lane.name},
                       {"max_duration_ns", lane.max_duration_ns}});
    }
    rank["lanes"] = std::move(lanes);
    // strings[0] is the empty string, which every rank file has without storing it.
    rank["strings"] = strings.size() > 1 ? Json(std::vector<std::string>(strings.begin() + 1, strings.end()))
                                         : Json::array();
    Json drops = Json::array();
    for (const trace::DropRecord& drop : info.drops) {
      drops.push_back({{"source", drop.source},
                       {"reason", drop.reason},
                       {"device", drop.device},
                       {"context", drop.context},
                       {"stream", drop.stream},
                       {"count", drop.count}});
    }
    rank["drops"] = std::move(drops);
    return rank;
  }

  OutputFile& out_;
  std::string run_id_;
  const int64_t base_;  // the file's baseTimeNanoseconds; every ts is relative to it
  bool first_event_ = true;
  uint64_t next_id_ = 1;
  ChromeExportResult result_;
  std::vector<RankInfo> infos_;
  // The rank being written.
  const trace::RankTrace* trace_ = nullptr;
  int64_t pid_ = 0;
  std::unordered_map<uint64_t, size_t> launchers_;  // correlation id -> index in api_calls
};

}  // namespace

Result<ChromeExportResult> ExportChromeTrace(const fs::path& run, const fs::path& out) {
  RS_ASSIGN_OR_RETURN(trace::Run opened, trace::OpenRun(run));
  std::vector<fs::path> paths;
  for (const trace::RunFile& rank : opened.ranks) paths.push_back(rank.path);
  for (const trace::RunFile& unranked : opened.unranked) paths.push_back(unranked.path);
  RS_ASSIGN_OR_RETURN(const int64_t base_ns, ExportBaseTime(paths));
  RS_ASSIGN_OR_RETURN(std::unique_ptr<OutputFile> file, OutputFile::Create(out));
  Exporter exporter(*file, opened.run_id, base_ns);
  RS_RETURN_IF_ERROR(exporter.Begin());
  int ranks = 0;
  for (const trace::RunFile& rank : opened.ranks) {
    RS_RETURN_IF_ERROR(exporter.AddRank(rank.path, *rank.meta.rank));
    ++ranks;
  }
  for (size_t i = 0; i < opened.unranked.size(); ++i) {
    RS_RETURN_IF_ERROR(exporter.AddRank(opened.unranked[i].path, kUnrankedPidBase + static_cast<int64_t>(i)));
    ++ranks;
  }
  RS_RETURN_IF_ERROR(exporter.Finish());
  RS_RETURN_IF_ERROR(file->Commit());
  ChromeExportResult result = exporter.result();
  result.ranks = ranks;
  return result;
}

}  // namespace rankscope::interop
