// The Nsight Systems importer: an `nsys export --type sqlite` file (export schema 2.x or
// 3.x) becomes one rank file per process that has CUDA activity or CUDA API calls. The
// format facts used here are collected in ../shared/design/research/nsys.md §1 and §2.4.
//
// Order of work: check the file and its schema version, probe which tables and columns it
// has (nsys creates tables lazily and adds columns between versions), find the processes
// that become ranks, decide their ranks (NCCL init payloads, MPI, the launch environment,
// else process order; ChooseNsysRanks decides from the evidence alone), then stream each
// event table once into the rank files. A row that lacks a value it needs, or ends before it
// starts, is damaged: left out and counted on its rank (the policy of import_internal.h). What
// was left out, and how ranks and times were chosen, ends up in the import's notes; missing
// tables or columns, or a schema version not read here, fail the import.
#include <algorithm>
#include <bit>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "interop/import_internal.h"
#include "base/file_check.h"
#include "base/launch_env.h"
#include "base/text.h"
#include "trace/schema.h"
#include "trace/sqlite_util.h"

namespace rankscope::interop::import {
namespace {

namespace fs = std::filesystem;
namespace sql = trace::sql;
using Json = nlohmann::json;

// ---- nsys format constants (nsys.md §1) ----------------------------------------------------

// globalTid = <hw:8><vm:8><pid:24><tid:24>; globalPid is the same with the tid bits zero.
constexpr uint64_t kTidMask = 0xFFFFFF;
uint64_t ProcessKey(uint64_t global_id) { return global_id & ~kTidMask; }
int64_t PidOf(uint64_t global_id) { return static_cast<int64_t>((global_id >> 24) & kTidMask); }
int64_t TidOf(uint64_t global_id) { return static_cast<int64_t>(global_id & kTidMask); }
uint64_t VmKey(uint64_t global_id) { return global_id & 0xFFFF000000000000ULL; }

// NVTX_EVENTS.eventType
constexpr int64_t kNvtxCategory = 33;
constexpr int64_t kNvtxMark = 34;
constexpr int64_t kNvtxThreadName = 39;
constexpr int64_t kNvtxPushPop = 59;
constexpr int64_t kNvtxStartEnd = 60;
constexpr int64_t kNvtxDomainCreate = 75;

// CUPTI's "not applicable" for ids in synchronization records.
constexpr int64_t kCuptiInvalid = 0xFFFFFFFF;

// NVTX extended payload blobs (NVTX_EVENTS.binaryData): a header of four little-endian u64,
// [domainId][schemaId][payloadSize][payloadOffset], then the payload laid out per
// NVTX_PAYLOAD_SCHEMA_ENTRIES.
constexpr size_t kBlobHeaderBytes = 32;

constexpr std::string_view kKernelTable = "CUPTI_ACTIVITY_KIND_KERNEL";
constexpr std::string_view kMemcpyTable = "CUPTI_ACTIVITY_KIND_MEMCPY";
constexpr std::string_view kMemsetTable = "CUPTI_ACTIVITY_KIND_MEMSET";
constexpr std::string_view kRuntimeTable = "CUPTI_ACTIVITY_KIND_RUNTIME";
constexpr std::string_view kSyncTable = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION";
constexpr std::string_view kOverheadTable = "CUPTI_ACTIVITY_KIND_OVERHEAD";
constexpr std::string_view kMemoryUsageTable = "CUDA_GPU_MEMORY_USAGE_EVENTS";  // nsys --cuda-memory-usage=true
constexpr std::string_view kNvtxTable = "NVTX_EVENTS";
constexpr std::string_view kStringTable = "StringIds";
constexpr std::string_view kThreadNamesTable = "ThreadNames";
constexpr std::string_view kProcessesTable = "PROCESSES";
constexpr std::string_view kSessionStartTable = "TARGET_INFO_SESSION_START_TIME";
constexpr std::string_view kSystemEnvTable = "TARGET_INFO_SYSTEM_ENV";
constexpr std::string_view kCaptureTable = "META_DATA_CAPTURE";
constexpr std::string_view kMemKindEnum = "ENUM_CUDA_MEM_KIND";
constexpr std::string_view kSyncTypeEnum = "ENUM_CUPTI_SYNC_TYPE";
constexpr std::string_view kOverheadTypeEnum = "ENUM_CUPTI_OVERHEAD_TYPE";
constexpr std::string_view kMemoryOperationEnum = "ENUM_CUDA_DEV_MEM_EVENT_OPER";
constexpr std::string_view kPayloadEntriesTable = "NVTX_PAYLOAD_SCHEMA_ENTRIES";
constexpr std::string_view kMpiRanksTable = "MPI_RANKS";

// The tables this importer reads, with the columns each must have to be read at all.
struct TableSpec {
  std::string_view name;
  std::vector<std::string_view> required;
  bool essential;  // missing required columns: an error (else the table is ignored)
};

const std::vector<TableSpec>& TableSpecs() {
  static const std::vector<TableSpec> kSpecs = {
      {kKernelTable, {"start", "end", "globalPid", "deviceId", "streamId"}, true},
      {kMemcpyTable, {"start", "end", "globalPid", "deviceId", "streamId"}, true},
      {kMemsetTable, {"start", "end", "globalPid", "deviceId", "streamId"}, true},
      {kRuntimeTable, {"start", "end", "globalTid"}, true},
      {kSyncTable, {"start", "end", "globalPid"}, true},
      {kOverheadTable, {"start", "end", "globalTid"}, true},
      {kNvtxTable, {"start", "end", "eventType", "globalTid"}, true},
      {kStringTable, {"id", "value"}, true},
      {kThreadNamesTable, {"nameId", "globalTid"}, true},
      {kProcessesTable, {"globalPid"}, true},
      {kSessionStartTable, {"utcEpochNs"}, false},
      {kSystemEnvTable, {"name", "value"}, false},
      {kCaptureTable, {"name", "value"}, false},
      {kMemKindEnum, {"id", "name"}, false},
      {kSyncTypeEnum, {"id", "name"}, false},
      {kOverheadTypeEnum, {"id", "name"}, false},
      {kMemoryOperationEnum, {"id", "name"}, false},
      {kMemoryUsageTable, {"start", "globalPid", "deviceId", "bytes", "memKind", "memoryOperationType"}, false},
      {kPayloadEntriesTable, {"domainId", "schemaId", "idx", "type", "name"}, false},
      {kMpiRanksTable, {"globalTid", "rank"}, false},
  };
  return kSpecs;
}

// ---- small helpers ---------------------------------------------------------------------------

// A name from the file, safe on one line and without the quotes Printable adds.
std::string Label(std::string_view text, size_t max_chars = 200) {
  std::string printable = Printable(text, max_chars);
  if (printable.size() >= 2 && printable.front() == '\'') {
    const size_t close = printable.rfind('\'');
    printable = printable.substr(1, close - 1) + printable.substr(close + 1);
  }
  return printable;
}


// SQLite's messages may quote bytes of a damaged file: control bytes become \xNN.
std::string OneLine(std::string_view text) {
  std::string out;
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) {
      out += fmt::format("\\x{:02x}", byte);
    } else {
      out += c;
    }
  }
  return out;
}

std::string Ident(std::string_view name) { return fmt::format("\"{}\"", name); }

std::optional<int64_t> Int(const sql::Statement& statement, int column) {
  if (sqlite3_column_type(statement.get(), column) != SQLITE_INTEGER) return std::nullopt;
  return statement.ColumnInt(column);
}

std::optional<double> Real(const sql::Statement& statement, int column) {
  const int type = sqlite3_column_type(statement.get(), column);
  if (type != SQLITE_FLOAT && type != SQLITE_INTEGER) return std::nullopt;
  return statement.ColumnReal(column);
}

std::optional<std::string> Text(const sql::Statement& statement, int column) {
  if (sqlite3_column_type(statement.get(), column) == SQLITE_NULL) return std::nullopt;
  return statement.ColumnText(column);
}

uint32_t ClampU32(std::optional<int64_t> value) {
  if (!value || *value < 0) return 0;
  return static_cast<uint32_t>(std::min<int64_t>(*value, UINT32_MAX));
}

// Letters and digits only, lower case: "No. of ranks" -> "noofranks".
std::string NormalizedKey(std::string_view key) {
  std::string out;
  for (char c : key) {
    if (std::isalnum(static_cast<unsigned char>(c))) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

bool StartsWith(std::string_view text, std::string_view prefix) { return text.substr(0, prefix.size()) == prefix; }


// An NCCL API call's name as NCCL's NVTX ranges spell it: "ncclAllReduce", "ncclSend".
bool IsNcclApiName(std::string_view name) {
  return name.size() > 4 && StartsWith(name, "nccl") && std::isupper(static_cast<unsigned char>(name[4]));
}

// nsys's copy kinds 11-13 are UVM migrations that CUPTI's memcpy kinds lack; the rest are
// CUPTI's.
std::string_view CopyName(int64_t copy_kind) {
  static constexpr std::string_view kUvmNames[] = {"Memcpy UVM HtoD", "Memcpy UVM DtoH", "Memcpy UVM DtoD"};
  constexpr int64_t kFirstUvm = 11;
  if (copy_kind >= kFirstUvm && copy_kind < kFirstUvm + static_cast<int64_t>(std::size(kUvmNames))) {
    return kUvmNames[copy_kind - kFirstUvm];
  }
  const bool cupti_kind = copy_kind >= 0 && copy_kind <= static_cast<int64_t>(trace::CopyKind::kPeerToPeer);
  return trace::DefaultName(cupti_kind ? static_cast<trace::CopyKind>(copy_kind) : trace::CopyKind::kUnknown);
}

// nsys numbers memory kinds 0 PAGEABLE .. 6 MANAGED_STATIC, 7 UNKNOWN (nsys.md §1.2);
// rankscope's are CUPTI's, with UNKNOWN first.
trace::MemoryKind MemoryKindFromName(std::string_view name) {
  const size_t marker = name.rfind("MEMORY_KIND_");
  if (marker != std::string_view::npos) name = name.substr(marker + std::string_view("MEMORY_KIND_").size());
  static const std::pair<std::string_view, trace::MemoryKind> kNames[] = {
      {"PAGEABLE", trace::MemoryKind::kPageable},          {"PINNED", trace::MemoryKind::kPinned},
      {"DEVICE", trace::MemoryKind::kDevice},              {"ARRAY", trace::MemoryKind::kArray},
      {"MANAGED", trace::MemoryKind::kManaged},            {"DEVICE_STATIC", trace::MemoryKind::kDeviceStatic},
      {"MANAGED_STATIC", trace::MemoryKind::kManagedStatic}};
  for (const auto& [text, kind] : kNames) {
    if (name == text) return kind;
  }
  return trace::MemoryKind::kUnknown;
}

trace::MemoryKind DocumentedMemoryKind(int64_t id) {
  static constexpr trace::MemoryKind kKinds[] = {
      trace::MemoryKind::kPageable, trace::MemoryKind::kPinned,       trace::MemoryKind::kDevice,
      trace::MemoryKind::kArray,    trace::MemoryKind::kManaged,      trace::MemoryKind::kDeviceStatic,
      trace::MemoryKind::kManagedStatic};
  if (id < 0 || id >= static_cast<int64_t>(std::size(kKinds))) return trace::MemoryKind::kUnknown;
  return kKinds[id];
}

trace::SyncKind SyncKindFromName(std::string_view name) {
  if (name.ends_with("EVENT_SYNCHRONIZE")) return trace::SyncKind::kEventSynchronize;
  if (name.ends_with("STREAM_WAIT_EVENT")) return trace::SyncKind::kStreamWaitEvent;
  if (name.ends_with("STREAM_SYNCHRONIZE")) return trace::SyncKind::kStreamSynchronize;
  if (name.ends_with("CONTEXT_SYNCHRONIZE")) return trace::SyncKind::kContextSynchronize;
  return trace::SyncKind::kUnknown;
}

// What a CUDA_GPU_MEMORY_USAGE_EVENTS row does to the bytes live.
enum class MemoryOperation : uint8_t { kUnknown, kAllocation, kRelease };

MemoryOperation MemoryOperationFromName(std::string_view name) {
  if (name.ends_with("DEALLOCATION")) return MemoryOperation::kRelease;
  if (name.ends_with("ALLOCATION")) return MemoryOperation::kAllocation;
  return MemoryOperation::kUnknown;
}

// nsys's ENUM_CUDA_DEV_MEM_EVENT_OPER: 0 allocation, 1 deallocation.
MemoryOperation DocumentedMemoryOperation(int64_t id) {
  if (id == 0) return MemoryOperation::kAllocation;
  if (id == 1) return MemoryOperation::kRelease;
  return MemoryOperation::kUnknown;
}

// CUpti_ActivitySynchronizationType: 1 event sync, 2 stream wait event, 3 stream sync,
// 4 context sync; the same numbers as rankscope's.
trace::SyncKind DocumentedSyncKind(int64_t id) {
  if (id < 1 || id > 4) return trace::SyncKind::kUnknown;
  return static_cast<trace::SyncKind>(id);
}

trace::OverheadKind OverheadKindFromName(std::string_view name) {
  if (StartsWith(name, "OVERHEAD_")) name = name.substr(std::string_view("OVERHEAD_").size());
  static const std::pair<std::string_view, trace::OverheadKind> kNames[] = {
      {"DRIVER_COMPILER", trace::OverheadKind::kDriverCompiler},
      {"CUPTI_BUFFER_FLUSH", trace::OverheadKind::kCuptiBufferFlush},
      {"CUPTI_INSTRUMENTATION", trace::OverheadKind::kCuptiInstrumentation},
      {"CUPTI_RESOURCE", trace::OverheadKind::kCuptiResource},
      {"RUNTIME_TRIGGERED_MODULE_LOADING", trace::OverheadKind::kRuntimeTriggeredModuleLoading},
      {"LAZY_FUNCTION_LOADING", trace::OverheadKind::kLazyFunctionLoading},
      {"COMMAND_BUFFER_FULL", trace::OverheadKind::kCommandBufferFull},
      {"ACTIVITY_BUFFER_REQUEST", trace::OverheadKind::kActivityBufferRequest},
      {"UVM_ACTIVITY_INIT", trace::OverheadKind::kUvmActivityInit}};
  for (const auto& [text, kind] : kNames) {
    if (name == text) return kind;
  }
  return trace::OverheadKind::kUnknown;
}

// nsys's ENUM_CUPTI_OVERHEAD_TYPE: 0 undefined, 1 unknown, 2 driver compiler, 3 buffer
// flush, 4 instrumentation, 5 resource, 6 module loading, 7 lazy loading, 8 command buffer.
trace::OverheadKind DocumentedOverheadKind(int64_t id) {
  if (id < 2 || id > 8) return trace::OverheadKind::kUnknown;
  return static_cast<trace::OverheadKind>(id - 1);
}

// ---- NVTX extended payloads ------------------------------------------------------------------

struct PayloadEntry {
  int64_t index = 0;
  std::string name;
  int64_t type = 0;
  std::optional<int64_t> offset;
};

// Size of an NVTX payload entry type (nvToolsExtPayload.h, LP64); nullopt for types this
// importer does not decode (arrays, strings, nested schemas, enums).
std::optional<size_t> EntrySize(int64_t type) {
  switch (type) {
    case 1: case 2: case 11: case 12: return 1;            // char, uchar, int8, uint8
    case 3: case 4: case 13: case 14: return 2;            // short, ushort, int16, uint16
    case 5: case 6: case 15: case 16: case 19: return 4;   // int, uint, int32, uint32, float
    case 7: case 8: case 9: case 10: case 17: case 18:     // long .. uint64
    case 20: case 22: case 23: return 8;                   // double, size_t, address
    default: return std::nullopt;
  }
}

bool EntrySigned(int64_t type) {
  return type == 1 || type == 3 || type == 5 || type == 7 || type == 9 || type == 11 || type == 13 || type == 15 ||
         type == 17;
}

uint64_t LittleEndian(const unsigned char* bytes, size_t size) {
  uint64_t value = 0;
  for (size_t i = size; i-- > 0;) value = (value << 8) | bytes[i];
  return value;
}

// A blob as bytes: BLOB values as they are; TEXT values that are hex digits decoded.
std::string BlobBytes(const sql::Statement& statement, int column) {
  const int type = sqlite3_column_type(statement.get(), column);
  if (type == SQLITE_NULL) return {};
  const auto* data = static_cast<const char*>(sqlite3_column_blob(statement.get(), column));
  const int size = sqlite3_column_bytes(statement.get(), column);
  std::string raw = data != nullptr && size > 0 ? std::string(data, static_cast<size_t>(size)) : std::string();
  if (type != SQLITE_TEXT || raw.size() % 2 != 0) return raw;
  const bool hex = std::all_of(raw.begin(), raw.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
  if (!hex) return raw;
  std::string bytes(raw.size() / 2, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) {
    unsigned value = 0;
    std::from_chars(raw.data() + 2 * i, raw.data() + 2 * i + 2, value, 16);
    bytes[i] = static_cast<char>(value);
  }
  return bytes;
}

// The payload's scalar entries as a JSON object keyed by entry name; nullopt when the blob
// is malformed or its schema unknown.
std::optional<Json> DecodeBlob(std::string_view blob,
                               const std::map<std::pair<int64_t, int64_t>, std::vector<PayloadEntry>>& schemas) {
  if (blob.size() < kBlobHeaderBytes) return std::nullopt;
  const auto* bytes = reinterpret_cast<const unsigned char*>(blob.data());
  const uint64_t domain = LittleEndian(bytes, 8);
  const uint64_t schema = LittleEndian(bytes + 8, 8);
  const uint64_t size = LittleEndian(bytes + 16, 8);
  const uint64_t offset = LittleEndian(bytes + 24, 8);
  if (offset < kBlobHeaderBytes || offset > blob.size() || size > blob.size() - offset) return std::nullopt;
  if (domain > INT64_MAX || schema > INT64_MAX) return std::nullopt;
  const auto found = schemas.find({static_cast<int64_t>(domain), static_cast<int64_t>(schema)});
  if (found == schemas.end()) return std::nullopt;
  const unsigned char* payload = bytes + offset;
  Json out = Json::object();
  std::optional<size_t> next;  // where an entry without an offset starts
  for (const PayloadEntry& entry : found->second) {
    const std::optional<size_t> entry_size = EntrySize(entry.type);
    std::optional<size_t> at;
    if (entry.offset && *entry.offset >= 0) {
      at = static_cast<size_t>(*entry.offset);
    } else if (entry.index == 0) {
      at = 0;
    } else if (next && entry_size) {
      at = (*next + *entry_size - 1) / *entry_size * *entry_size;  // natural alignment
    }
    next = at && entry_size ? std::optional<size_t>(*at + *entry_size) : std::nullopt;
    if (!at || !entry_size || *at > size || *entry_size > size - *at) continue;
    const uint64_t bits = LittleEndian(payload + *at, *entry_size);
    if (entry.type == 19) {
      out[entry.name] = std::bit_cast<float>(static_cast<uint32_t>(bits));
    } else if (entry.type == 20) {
      out[entry.name] = std::bit_cast<double>(bits);
    } else if (EntrySigned(entry.type)) {
      const unsigned shift = static_cast<unsigned>(64 - 8 * *entry_size);
      out[entry.name] = static_cast<int64_t>(bits << shift) >> shift;
    } else {
      out[entry.name] = bits;
    }
  }
  return out;
}

std::optional<int64_t> JsonInt(const Json& value) {
  if (value.is_number_unsigned()) {
    const uint64_t v = value.get<uint64_t>();
    return v <= static_cast<uint64_t>(INT64_MAX) ? std::optional<int64_t>(static_cast<int64_t>(v)) : std::nullopt;
  }
  if (value.is_number_integer()) return value.get<int64_t>();
  return std::nullopt;
}

// (rank, rank count) of a decoded ncclCommInitRank payload: entries "Rank" and "No. of
// ranks" in NCCL's schema; "rank"/"myrank" and "nranks" in JSON.
std::optional<std::pair<int, int>> RankFromPayload(const Json& object) {
  if (!object.is_object()) return std::nullopt;
  std::optional<int64_t> rank, ranks;
  for (const auto& [key, value] : object.items()) {
    const std::string normalized = NormalizedKey(key);
    if (normalized == "rank" || normalized == "myrank" || normalized == "commrank") rank = JsonInt(value);
    if (normalized == "noofranks" || normalized == "nranks" || normalized == "commsize") ranks = JsonInt(value);
  }
  if (!rank || !ranks || *rank < 0 || *ranks < 1 || *rank >= *ranks || *ranks > kMaxWorldSize) return std::nullopt;
  return std::pair<int, int>{static_cast<int>(*rank), static_cast<int>(*ranks)};
}

// ---- the importer ----------------------------------------------------------------------------

struct TableInfo {
  bool present = false;
  std::set<std::string, std::less<>> columns;
};

// An event table as its damaged rows are counted: the kind of event it holds, and the column
// of the process (or thread) that the rows belong to.
struct EventTable {
  std::string_view name;
  std::string_view kind;
  std::string_view owner_column;
};

constexpr EventTable kKernels = {kKernelTable, "kernel", "globalPid"};
constexpr EventTable kMemcpys = {kMemcpyTable, "memcpy", "globalPid"};
constexpr EventTable kMemsets = {kMemsetTable, "memset", "globalPid"};
constexpr EventTable kRuntimeCalls = {kRuntimeTable, "CUDA API call", "globalTid"};
constexpr EventTable kSyncs = {kSyncTable, "sync", "globalPid"};
constexpr EventTable kOverheads = {kOverheadTable, "CUPTI overhead", "globalTid"};
constexpr EventTable kMemoryUsage = {kMemoryUsageTable, "CUDA memory usage", "globalPid"};

// What is wrong with a value a row needs: "streamId is NULL", "end is text 'later'".
std::string ValueProblem(const sql::Statement& row, int column, std::string_view name) {
  switch (sqlite3_column_type(row.get(), column)) {
    case SQLITE_NULL: return fmt::format("{} is NULL", name);
    case SQLITE_TEXT: return fmt::format("{} is text {}", name, Printable(row.ColumnText(column), 40));
    case SQLITE_FLOAT: return fmt::format("{} is a real number", name);
    case SQLITE_BLOB: return fmt::format("{} is a blob", name);
    default: return fmt::format("{} is {}, out of range", name, row.ColumnInt(column));
  }
}

struct Process {
  uint64_t key = 0;  // globalPid: the process's global id with the thread bits zero
  int64_t pid = 0;
  std::string name;
  // Rank evidence.
  std::optional<std::pair<int, int>> payload_rank;  // (rank, rank count) from ncclCommInitRank
  int64_t payload_start = 0;
  std::optional<int> mpi_rank;
  std::string mpi_evidence;
  // The rank file and its lanes and strings.
  RankFileBuilder* builder = nullptr;
  bool nccl = false;
  std::map<std::tuple<int32_t, uint32_t, uint64_t>, trace::LaneId> stream_lanes;
  std::unordered_map<int64_t, trace::LaneId> thread_lanes;  // by OS tid
  std::unordered_map<int64_t, trace::StringId> strings;      // by nsys StringIds id
  std::unordered_map<int64_t, trace::StringId> api_names;    // the same, "_v7000" suffixes cut
  std::map<int64_t, trace::StringId> domains;                // by NVTX domainId
  // Synchronizations wait here for the API call (same correlation id) that made them.
  std::vector<trace::SyncEvent> pending_syncs;
  std::unordered_map<uint64_t, trace::LaneId> sync_call_lanes;  // correlation id -> thread lane
  // CUDA memory counters by (device, memory kind): the lane and the bytes live.
  std::map<std::pair<int32_t, trace::MemoryKind>, std::pair<trace::LaneId, int64_t>> memory_counters;
};

// An event's start and end on the wall clock, in ns.
using WallSpan = std::pair<int64_t, int64_t>;

// What an event table's rows need besides start, end and a global id (columns 0-2).
enum class AlsoNeeds {
  kNothing,
  kDeviceAndStream,  // the GPU activity tables: deviceId (column 3) and streamId (column 5)
};

// What is wrong with a GPU activity row's deviceId (column 3: an integer that fits a lane's
// int32) or streamId (column 5: an integer); nullopt when nothing is.
std::optional<std::string> DeviceOrStreamProblem(const sql::Statement& row) {
  const std::optional<int64_t> device = Int(row, 3);
  if (!device || *device < INT32_MIN || *device > INT32_MAX) return ValueProblem(row, 3, "deviceId");
  if (!Int(row, 5)) return ValueProblem(row, 5, "streamId");
  return std::nullopt;
}

struct NcclInitCandidate {
  uint64_t process = 0;
  int64_t domain = 0;
  int64_t start = 0;
  std::optional<Json> payload;
};

class NsysImporter {
 public:
  NsysImporter(const fs::path& file, RunSink& sink)
      : file_(file), sink_(sink), name_(Label(file.filename().string())), path_label_(Label(file.string())) {}

  Status Run();

 private:
  Status Fail(Status status) const {
    return Status(status.code(), fmt::format("{}: {}", path_label_, OneLine(status.message())));
  }
  Status Error(StatusCode code, std::string message) const { return Fail(Status(code, std::move(message))); }
  void Note(std::string line) { notes_.push_back(fmt::format("{}: {}", name_, line)); }

  bool Has(std::string_view table) const;
  bool HasColumn(std::string_view table, std::string_view column) const;
  // The column's quoted name when the table has it, else NULL: fixed SELECT positions.
  std::string Col(std::string_view table, std::string_view column) const;
  template <typename OnRow>
  Status ForEachRow(const std::string& query, OnRow&& on_row);
  // The checks every event row goes through, in order. First the rank the row belongs to,
  // by its process (or thread) id in `column`; nullptr for a row without one (counted as
  // damaged, of no rank) or of a process that is no rank (counted with that process's rows).
  Process* RowOwner(const sql::Statement& row, int column, const EventTable& table);
  // The row's times on the wall clock; nullopt when they end before they start or do not
  // fit (the row is counted as damaged on its rank).
  std::optional<WallSpan> RowTimes(Process& process, const EventTable& table, int64_t start, int64_t end);
  // Streams an event table whose query selects start, end and globalPid or globalTid as
  // columns 0-2 (and what `also` names): a damaged row is counted and left out (the policy of
  // import_internal.h). `convert(process, times, global_id, row)` adds the row's event;
  // flushing happens here.
  template <typename Convert>
  Status ForEachEvent(const EventTable& table, const std::string& query, AlsoNeeds also, Convert&& convert);

  Status OpenAndCheckVersion();
  Status ProbeTables();
  Status ReadClock();
  Status ReadEnums();
  Status FindRankProcesses();
  Status ReadProcessInfo();
  Status ScanNvtxMetadata();
  Status ReadMpiRanks();
  // Hosts, the launched command and its environment: what rank files say, and evidence.
  Status ReadLaunchInfo();
  NsysRankEvidence RankEvidence() const;
  // One rank file per process, with the ranks `choice` gives.
  Status CreateRankFiles(const NsysRankChoice& choice);

  Status ImportKernels();
  Status ImportMemcpys();
  Status ImportMemsets();
  Status CollectSyncs();
  Status ImportRuntime();
  void EmitSyncs();
  Status ImportNvtx();
  Status ImportOverheads();
  Status ImportMemoryUsage();
  void WriteNotes();

  Result<const std::string*> String(int64_t id);
  // A text column's value, else the StringIds string its id column names; nullopt when
  // both are NULL.
  Result<std::optional<std::string>> TextOrString(const sql::Statement& row, int text_column, int id_column);
  Result<trace::StringId> StringFor(Process& process, std::optional<int64_t> id, std::string_view fallback);
  std::optional<WallSpan> WallTimes(int64_t start, int64_t end) const;
  trace::MemoryKind MemoryKindOf(std::optional<int64_t> id) const;
  trace::SyncKind SyncKindOf(int64_t id) const;
  trace::OverheadKind OverheadKindOf(int64_t id) const;
  MemoryOperation MemoryOperationOf(int64_t id) const;
  Process* RankProcess(uint64_t global_id);
  trace::LaneId StreamLane(Process& process, int64_t device, int64_t context, int64_t stream);
  // The stream lane of a GPU activity row without a DeviceOrStreamProblem (context: column 4).
  trace::LaneId GpuLane(Process& process, const sql::Statement& row);
  trace::LaneId ThreadLane(Process& process, int64_t tid);
  std::string DomainName(uint64_t process_key, int64_t domain) const;
  trace::StringId DomainFor(Process& process, int64_t domain);

  const fs::path& file_;
  RunSink& sink_;
  std::string name_;        // the file name, for notes
  std::string path_label_;  // the path, for errors
  std::vector<std::string> notes_;

  sql::DbHandle db_;
  std::string meta_table_;
  std::string schema_version_;
  std::map<std::string, std::string> export_meta_;
  std::map<std::string, TableInfo, std::less<>> tables_;
  sql::Statement string_lookup_;
  std::unordered_map<int64_t, std::string> string_cache_;

  int64_t clock_offset_ = 0;
  std::string time_anchor_;

  std::map<int64_t, trace::MemoryKind> memory_kinds_;
  std::map<int64_t, trace::SyncKind> sync_kinds_;
  std::map<int64_t, trace::OverheadKind> overhead_kinds_;
  std::map<int64_t, MemoryOperation> memory_operations_;

  std::map<uint64_t, Process> processes_;  // the processes that become ranks, by key
  struct LaunchInfo {
    std::map<uint64_t, std::string> hosts;  // by VM, when the export has several
    std::set<std::string> any_host;
    std::string command;  // the launched process's command line
    std::map<std::string, std::string> environment;
  };
  LaunchInfo launch_;
  std::map<uint64_t, std::string> process_names_;  // PROCESSES.name of every process
  uint64_t last_key_ = 0;
  Process* last_process_ = nullptr;

  // NVTX metadata.
  std::map<std::pair<uint64_t, int64_t>, std::string> domain_names_;  // (process, domainId)
  std::map<int64_t, std::set<std::string>> domain_names_any_;         // domainId -> names in any process
  std::map<int64_t, bool> unnamed_domain_nccl_;  // domainId -> all its range names are NCCL API names
  std::set<int64_t> nccl_named_domains_;         // unnamed domains imported as "NCCL"
  std::map<std::tuple<uint64_t, int64_t, int64_t>, std::string> categories_;  // (process, domain, category)
  std::unordered_map<uint64_t, std::string> nvtx_thread_names_;             // globalTid -> name
  std::unordered_map<uint64_t, std::string> thread_names_;                  // globalTid -> ThreadNames
  std::vector<NcclInitCandidate> nccl_inits_;
  std::map<std::pair<int64_t, int64_t>, std::vector<PayloadEntry>> payload_schemas_;

  DamagedEvents damaged_without_process_;  // rows that name no process: of no rank
  std::map<uint64_t, uint64_t> other_process_events_;  // process key -> rows left out
};

bool NsysImporter::Has(std::string_view table) const {
  const auto found = tables_.find(table);
  return found != tables_.end() && found->second.present;
}

bool NsysImporter::HasColumn(std::string_view table, std::string_view column) const {
  const auto found = tables_.find(table);
  return found != tables_.end() && found->second.present && found->second.columns.contains(column);
}

std::string NsysImporter::Col(std::string_view table, std::string_view column) const {
  return HasColumn(table, column) ? Ident(column) : std::string("NULL");
}

template <typename OnRow>
Status NsysImporter::ForEachRow(const std::string& query, OnRow&& on_row) {
  Result<sql::Statement> prepared = sql::Statement::Prepare(db_.get(), query);
  if (!prepared.ok()) return Fail(prepared.status());
  sql::Statement& statement = *prepared;
  for (;;) {
    const int rc = sqlite3_step(statement.get());
    if (rc == SQLITE_DONE) return Status::Ok();
    if (rc != SQLITE_ROW) return Fail(sql::FromSqlite(db_.get(), rc, "reading the export"));
    Status row = on_row(statement);
    if (!row.ok()) return row;
  }
}

// ---- version, tables, clock ------------------------------------------------------------------

Status NsysImporter::OpenAndCheckVersion() {
  // Its own line names the file: not prefixed again.
  RS_RETURN_IF_ERROR(CheckRegularFile(file_));
  if (Status header = sql::CheckFileHeader(file_); !header.ok()) return Fail(header);
  Result<sql::DbHandle> opened = sql::OpenReadOnly(file_);
  if (!opened.ok()) return Fail(opened.status());
  db_ = std::move(opened).value();

  // Every table, so that lazily created ones are known to be absent.
  RS_RETURN_IF_ERROR(ForEachRow("SELECT name FROM sqlite_schema WHERE type = 'table'", [&](const sql::Statement& row) {
    tables_[row.ColumnText(0)].present = true;
    return Status::Ok();
  }));
  if (Has("META_DATA_EXPORT")) {
    meta_table_ = "META_DATA_EXPORT";  // schema 3.x
  } else if (Has("EXPORT_META_DATA")) {
    meta_table_ = "EXPORT_META_DATA";  // schema 2.x
  } else {
    return Error(StatusCode::kUnsupported,
                 "an SQLite database, but not an Nsight Systems export (no META_DATA_EXPORT or EXPORT_META_DATA table)");
  }
  std::set<std::string> meta_columns;
  RS_RETURN_IF_ERROR(ForEachRow(fmt::format("PRAGMA table_info({})", Ident(meta_table_)),
                                [&](const sql::Statement& row) {
                                  meta_columns.insert(row.ColumnText(1));
                                  return Status::Ok();
                                }));
  if (!meta_columns.contains("name") || !meta_columns.contains("value")) {
    return Error(StatusCode::kCorrupt, fmt::format("table {} has no name and value columns", meta_table_));
  }
  static const std::set<std::string, std::less<>> kWanted = {
      "EXPORT_SCHEMA_VERSION", "EXPORT_PRODUCT_VERSION", "EXPORT_PARAM_TIME_NORMALIZE", "EXPORT_PARAM_INCLUDE_BLOBS"};
  RS_RETURN_IF_ERROR(ForEachRow(fmt::format("SELECT name, value FROM {}", Ident(meta_table_)),
                                [&](const sql::Statement& row) {
                                  std::string key = row.ColumnText(0);
                                  if (kWanted.contains(key)) export_meta_.emplace(std::move(key), row.ColumnText(1));
                                  return Status::Ok();
                                }));
  const auto version = export_meta_.find("EXPORT_SCHEMA_VERSION");
  if (version == export_meta_.end()) {
    return Error(StatusCode::kCorrupt, fmt::format("no EXPORT_SCHEMA_VERSION row in {}", meta_table_));
  }
  schema_version_ = version->second;
  int major = 0;
  const char* first = schema_version_.data();
  const char* last = first + schema_version_.size();
  const auto [end, ec] = std::from_chars(first, last, major);
  if (ec != std::errc() || (end != last && *end != '.')) {
    return Error(StatusCode::kCorrupt,
                 fmt::format("EXPORT_SCHEMA_VERSION {} is not a version number", Printable(schema_version_)));
  }
  if (major != 2 && major != 3) {
    return Error(StatusCode::kUnsupported,
                 fmt::format("Nsight Systems export schema {} is not supported; rankscope reads 2.x and 3.x",
                             Label(schema_version_, 40)));
  }
  return Status::Ok();
}

Status NsysImporter::ProbeTables() {
  for (const TableSpec& spec : TableSpecs()) {
    if (!Has(spec.name)) continue;
    TableInfo& info = tables_[std::string(spec.name)];
    RS_RETURN_IF_ERROR(ForEachRow(fmt::format("PRAGMA table_info({})", Ident(spec.name)),
                                  [&](const sql::Statement& row) {
                                    info.columns.insert(row.ColumnText(1));
                                    return Status::Ok();
                                  }));
    for (std::string_view column : spec.required) {
      if (info.columns.contains(column)) continue;
      if (!spec.essential) {
        info.present = false;  // auxiliary: read as if absent
        break;
      }
      return Error(StatusCode::kCorrupt, fmt::format("table {} has no column '{}', which rankscope needs to read it",
                                                     spec.name, column));
    }
  }
  if (Has(kKernelTable) && !HasColumn(kKernelTable, "demangledName") && !HasColumn(kKernelTable, "shortName")) {
    return Error(StatusCode::kCorrupt,
                 fmt::format("table {} has neither a demangledName nor a shortName column", kKernelTable));
  }
  const bool any = Has(kKernelTable) || Has(kMemcpyTable) || Has(kMemsetTable) || Has(kRuntimeTable) ||
                   Has(kSyncTable) || Has(kNvtxTable);
  if (!any) {
    return Error(StatusCode::kInvalidArgument,
                 "nothing to import: the export has no CUDA activity, CUDA API or NVTX tables "
                 "(record with nsys profile -t cuda,nvtx)");
  }
  if (Has(kStringTable)) {
    Result<sql::Statement> lookup = sql::Statement::Prepare(db_.get(), "SELECT value FROM StringIds WHERE id = ?");
    if (!lookup.ok()) return Fail(lookup.status());
    string_lookup_ = std::move(lookup).value();
  }
  return Status::Ok();
}

Status NsysImporter::ReadClock() {
  const auto normalized = export_meta_.find("EXPORT_PARAM_TIME_NORMALIZE");
  if (normalized != export_meta_.end() && normalized->second == "true") {
    time_anchor_ = "exported with --ts-normalize: timestamps are UTC already";
    return Status::Ok();
  }
  if (!Has(kSessionStartTable)) {
    time_anchor_ = "no session start time: times are the capture's session clock, not wall-clock time";
    Note("the export has no TARGET_INFO_SESSION_START_TIME; times are nsys's session clock, not wall-clock time "
         "(durations are exact)");
    return Status::Ok();
  }
  std::optional<int64_t> utc, system_clock;
  RS_RETURN_IF_ERROR(ForEachRow(fmt::format("SELECT utcEpochNs, {} FROM {} LIMIT 1",
                                            Col(kSessionStartTable, "systemClockNs"), kSessionStartTable),
                                [&](const sql::Statement& row) {
                                  utc = Int(row, 0);
                                  system_clock = Int(row, 1);
                                  return Status::Ok();
                                }));
  if (!utc) {
    time_anchor_ = "no session start time: times are the capture's session clock, not wall-clock time";
    Note("TARGET_INFO_SESSION_START_TIME holds no UTC time; times are nsys's session clock, not wall-clock time "
         "(durations are exact)");
    return Status::Ok();
  }
  if (system_clock) {
    if (__builtin_sub_overflow(*utc, *system_clock, &clock_offset_)) {
      return Error(StatusCode::kCorrupt, "TARGET_INFO_SESSION_START_TIME holds times out of range");
    }
    time_anchor_ = "utcEpochNs + (timestamp - systemClockNs)";
    return Status::Ok();
  }
  clock_offset_ = *utc;
  time_anchor_ = "utcEpochNs + timestamp (approximate)";
  Note("the export has no systemClockNs (older nsys): wall-clock times are utcEpochNs + timestamp, an "
       "approximate anchor that may be off by the session's start offset; durations are exact");
  return Status::Ok();
}

Status NsysImporter::ReadEnums() {
  // id -> kind, by the names in an ENUM table.
  const auto read_enum = [&](std::string_view table, auto& kinds, auto kind_from_name) -> Status {
    if (!Has(table)) return Status::Ok();
    return ForEachRow(fmt::format("SELECT id, name FROM {}", table), [&](const sql::Statement& row) {
      if (std::optional<int64_t> id = Int(row, 0)) kinds[*id] = kind_from_name(row.ColumnText(1));
      return Status::Ok();
    });
  };
  RS_RETURN_IF_ERROR(read_enum(kMemKindEnum, memory_kinds_, MemoryKindFromName));
  RS_RETURN_IF_ERROR(read_enum(kSyncTypeEnum, sync_kinds_, SyncKindFromName));
  RS_RETURN_IF_ERROR(read_enum(kOverheadTypeEnum, overhead_kinds_, OverheadKindFromName));
  RS_RETURN_IF_ERROR(read_enum(kMemoryOperationEnum, memory_operations_, MemoryOperationFromName));
  if (Has(kPayloadEntriesTable)) {
    std::set<std::tuple<int64_t, int64_t, int64_t>> seen;  // one process's copy of each entry
    RS_RETURN_IF_ERROR(ForEachRow(
        fmt::format("SELECT domainId, schemaId, idx, type, name, {} FROM NVTX_PAYLOAD_SCHEMA_ENTRIES",
                    Col(kPayloadEntriesTable, "offset")),
        [&](const sql::Statement& row) {
          const std::optional<int64_t> domain = Int(row, 0), schema = Int(row, 1), index = Int(row, 2);
          if (!domain || !schema || !index || !seen.insert({*domain, *schema, *index}).second) return Status::Ok();
          PayloadEntry entry;
          entry.index = *index;
          entry.type = Int(row, 3).value_or(0);
          entry.name = row.ColumnText(4);
          entry.offset = Int(row, 5);
          payload_schemas_[{*domain, *schema}].push_back(std::move(entry));
          return Status::Ok();
        }));
    for (auto& [key, entries] : payload_schemas_) {
      std::sort(entries.begin(), entries.end(),
                [](const PayloadEntry& a, const PayloadEntry& b) { return a.index < b.index; });
    }
  }
  return Status::Ok();
}

// ---- processes and ranks ---------------------------------------------------------------------

Status NsysImporter::FindRankProcesses() {
  // A process becomes a rank when it has a usable row of device activity or CUDA API calls:
  // the same conditions the import applies row by row.
  const auto add_process = [&](const sql::Statement& row) {
    const uint64_t key = ProcessKey(row.ColumnUint(0));
    Process& process = processes_[key];
    process.key = key;
    process.pid = PidOf(key);
    return Status::Ok();
  };
  for (std::string_view table : {kKernelTable, kMemcpyTable, kMemsetTable}) {
    if (!Has(table)) continue;
    RS_RETURN_IF_ERROR(ForEachRow(
        fmt::format("SELECT globalPid FROM {} WHERE typeof(start) = 'integer' AND typeof(\"end\") = 'integer' "
                    "AND typeof(globalPid) = 'integer' AND typeof(deviceId) = 'integer' "
                    "AND typeof(streamId) = 'integer' AND \"end\" >= start GROUP BY globalPid",
                    Ident(table)),
        add_process));
  }
  if (Has(kRuntimeTable)) {
    RS_RETURN_IF_ERROR(ForEachRow(
        "SELECT globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE typeof(start) = 'integer' "
        "AND typeof(\"end\") = 'integer' AND typeof(globalTid) = 'integer' AND \"end\" >= start GROUP BY globalTid",
        add_process));
  }
  if (!processes_.empty()) return Status::Ok();

  // Why not: say which rows were there but unusable.
  uint64_t rows = 0;
  for (std::string_view table : {kKernelTable, kMemcpyTable, kMemsetTable, kRuntimeTable}) {
    if (!Has(table)) continue;
    RS_RETURN_IF_ERROR(ForEachRow(fmt::format("SELECT count(*) FROM {}", Ident(table)), [&](const sql::Statement& row) {
      rows += row.ColumnUint(0);
      return Status::Ok();
    }));
  }
  if (rows > 0) {
    return Error(StatusCode::kCorrupt,
                 fmt::format("nothing usable to import: all {} rows of CUDA activity and API calls lack a start, end, "
                             "process, device or stream, or end before they start",
                             rows));
  }
  return Error(StatusCode::kInvalidArgument,
               "nothing to import: no process has CUDA activity or CUDA API calls (record with nsys profile -t cuda)");
}

Status NsysImporter::ReadProcessInfo() {
  if (Has(kProcessesTable)) {
    RS_RETURN_IF_ERROR(ForEachRow(fmt::format("SELECT globalPid, {} FROM PROCESSES", Col(kProcessesTable, "name")),
                                  [&](const sql::Statement& row) {
                                    if (std::optional<int64_t> global_pid = Int(row, 0)) {
                                      process_names_[ProcessKey(static_cast<uint64_t>(*global_pid))] = row.ColumnText(1);
                                    }
                                    return Status::Ok();
                                  }));
  }
  for (auto& [key, process] : processes_) {
    if (auto found = process_names_.find(key); found != process_names_.end()) process.name = found->second;
  }
  if (Has(kThreadNamesTable)) {
    std::vector<std::pair<uint64_t, int64_t>> named;
    RS_RETURN_IF_ERROR(ForEachRow("SELECT globalTid, nameId FROM ThreadNames", [&](const sql::Statement& row) {
      const std::optional<int64_t> tid = Int(row, 0), name = Int(row, 1);
      if (tid && name && processes_.contains(ProcessKey(static_cast<uint64_t>(*tid)))) {
        named.emplace_back(static_cast<uint64_t>(*tid), *name);
      }
      return Status::Ok();
    }));
    for (const auto& [global_tid, name_id] : named) {
      Result<const std::string*> text = String(name_id);
      if (!text.ok()) return text.status();
      if (!(*text)->empty()) thread_names_[global_tid] = **text;
    }
  }
  return Status::Ok();
}

Status NsysImporter::ScanNvtxMetadata() {
  if (!Has(kNvtxTable)) return Status::Ok();
  const std::string query = fmt::format(
      "SELECT eventType, globalTid, {domain}, {category}, {text}, {text_id}, {json}, {json_id}, {binary}, start "
      "FROM NVTX_EVENTS WHERE eventType IN ({cat}, {thread}, {create}) OR (eventType IN ({mark}, {push}, {startend}) "
      "AND {domain} IS NOT NULL AND {domain} != 0)",
      fmt::arg("domain", Col(kNvtxTable, "domainId")), fmt::arg("category", Col(kNvtxTable, "category")),
      fmt::arg("text", Col(kNvtxTable, "text")), fmt::arg("text_id", Col(kNvtxTable, "textId")),
      fmt::arg("json", Col(kNvtxTable, "jsonText")), fmt::arg("json_id", Col(kNvtxTable, "jsonTextId")),
      fmt::arg("binary", Col(kNvtxTable, "binaryData")), fmt::arg("cat", kNvtxCategory),
      fmt::arg("thread", kNvtxThreadName), fmt::arg("create", kNvtxDomainCreate), fmt::arg("mark", kNvtxMark),
      fmt::arg("push", kNvtxPushPop), fmt::arg("startend", kNvtxStartEnd));
  struct RangeName {
    int64_t domain;
    std::string name;
  };
  RS_RETURN_IF_ERROR(ForEachRow(query, [&](const sql::Statement& row) -> Status {
    const std::optional<int64_t> type = Int(row, 0), global_tid = Int(row, 1);
    if (!type || !global_tid) return Status::Ok();
    const uint64_t tid = static_cast<uint64_t>(*global_tid);
    const int64_t domain = Int(row, 2).value_or(0);
    RS_ASSIGN_OR_RETURN(const std::optional<std::string> text, TextOrString(row, 4, 5));
    const std::string name = text.value_or("");
    switch (*type) {
      case kNvtxDomainCreate:
        if (!name.empty()) {
          domain_names_[{ProcessKey(tid), domain}] = name;
          domain_names_any_[domain].insert(name);
        }
        return Status::Ok();
      case kNvtxCategory:
        if (std::optional<int64_t> category = Int(row, 3); category && !name.empty()) {
          categories_[{ProcessKey(tid), domain, *category}] = name;
        }
        return Status::Ok();
      case kNvtxThreadName:
        if (!name.empty()) nvtx_thread_names_[tid] = name;
        return Status::Ok();
      default: break;
    }
    // A range or mark in a named or unnamed non-default domain.
    auto [it, inserted] = unnamed_domain_nccl_.try_emplace(domain, true);
    it->second = it->second && IsNcclApiName(name);
    if (!StartsWith(name, "ncclCommInit") || *type == kNvtxMark) return Status::Ok();
    NcclInitCandidate candidate;
    candidate.process = ProcessKey(tid);
    candidate.domain = domain;
    candidate.start = Int(row, 9).value_or(0);
    RS_ASSIGN_OR_RETURN(const std::optional<std::string> json, TextOrString(row, 6, 7));
    if (json) {
      Json parsed = Json::parse(*json, nullptr, /*allow_exceptions=*/false);
      if (parsed.is_object()) candidate.payload = std::move(parsed);
    }
    if (!candidate.payload) candidate.payload = DecodeBlob(BlobBytes(row, 8), payload_schemas_);
    nccl_inits_.push_back(std::move(candidate));
    return Status::Ok();
  }));

  // Domains without a name row (a time-windowed export drops them) whose ranges are all
  // NCCL API calls are NCCL's.
  std::vector<std::string> inferred;
  for (const auto& [domain, all_nccl] : unnamed_domain_nccl_) {
    if (domain_names_any_.contains(domain)) continue;
    if (all_nccl) {
      nccl_named_domains_.insert(domain);
      inferred.push_back(std::to_string(domain));
    }
  }
  if (!inferred.empty()) {
    Note(fmt::format("NVTX domain {} has no name in the export, and its ranges are NCCL API calls (ncclSend, "
                     "ncclAllReduce, ...): imported as domain 'NCCL'",
                     fmt::join(inferred, ", ")));
  }

  // NCCL's init payloads: (rank, rank count) per process, the world communicator's (the
  // most ranks) when a process has several.
  for (const NcclInitCandidate& candidate : nccl_inits_) {
    if (DomainName(candidate.process, candidate.domain) != "NCCL" || !candidate.payload) continue;
    const std::optional<std::pair<int, int>> rank = RankFromPayload(*candidate.payload);
    if (!rank) continue;
    auto found = processes_.find(candidate.process);
    if (found == processes_.end()) continue;
    Process& process = found->second;
    if (!process.payload_rank || rank->second > process.payload_rank->second ||
        (rank->second == process.payload_rank->second && candidate.start < process.payload_start)) {
      process.payload_rank = rank;
      process.payload_start = candidate.start;
    }
  }
  return Status::Ok();
}

Status NsysImporter::ReadMpiRanks() {
  if (Has(kMpiRanksTable)) {
    RS_RETURN_IF_ERROR(ForEachRow("SELECT globalTid, rank FROM MPI_RANKS", [&](const sql::Statement& row) {
      const std::optional<int64_t> tid = Int(row, 0), rank = Int(row, 1);
      if (!tid || !rank || *rank < 0 || *rank >= kMaxWorldSize) return Status::Ok();
      auto found = processes_.find(ProcessKey(static_cast<uint64_t>(*tid)));
      if (found != processes_.end() && !found->second.mpi_rank) {
        found->second.mpi_rank = static_cast<int>(*rank);
        found->second.mpi_evidence = "MPI_RANKS";
      }
      return Status::Ok();
    }));
  }
  // nsys's MPI trace names the thread that initialized MPI "MPI Rank <N>".
  auto from_thread_names = [&](const std::unordered_map<uint64_t, std::string>& names) {
    for (const auto& [tid, name] : names) {
      constexpr std::string_view kPrefix = "MPI Rank ";
      if (!StartsWith(name, kPrefix)) continue;
      int rank = -1;
      const char* first = name.data() + kPrefix.size();
      const char* last = name.data() + name.size();
      const auto [end, ec] = std::from_chars(first, last, rank);
      if (ec != std::errc() || end != last || rank < 0 || rank >= kMaxWorldSize) continue;
      auto found = processes_.find(ProcessKey(tid));
      if (found != processes_.end() && !found->second.mpi_rank) {
        found->second.mpi_rank = rank;
        found->second.mpi_evidence = fmt::format("thread {}", Printable(name));
      }
    }
  };
  from_thread_names(nvtx_thread_names_);
  from_thread_names(thread_names_);
  return Status::Ok();
}

Status NsysImporter::ReadLaunchInfo() {
  std::map<std::string, std::string> device_environment;
  if (Has(kSystemEnvTable)) {
    RS_RETURN_IF_ERROR(ForEachRow(
        fmt::format("SELECT {}, name, value FROM TARGET_INFO_SYSTEM_ENV WHERE name IN ('Hostname', 'DeviceEnvironment')",
                    Col(kSystemEnvTable, "globalVid")),
        [&](const sql::Statement& row) {
          const std::string key = row.ColumnText(1);
          std::string value = row.ColumnText(2);
          if (key == "Hostname" && !value.empty()) {
            if (std::optional<int64_t> vm = Int(row, 0)) launch_.hosts[VmKey(static_cast<uint64_t>(*vm))] = value;
            launch_.any_host.insert(value);
          } else if (key == "DeviceEnvironment") {
            // NAME=value pairs separated by ';'.
            size_t at = 0;
            while (at <= value.size()) {
              const size_t next = std::min(value.find(';', at), value.size());
              const std::string_view pair = std::string_view(value).substr(at, next - at);
              if (const size_t equals = pair.find('='); equals != std::string_view::npos && equals > 0) {
                device_environment.emplace(std::string(pair.substr(0, equals)), std::string(pair.substr(equals + 1)));
              }
              at = next + 1;
            }
          }
          return Status::Ok();
        }));
  }
  // The launched process's command line and environment (schema 3: META_DATA_CAPTURE).
  if (Has(kCaptureTable)) {
    std::vector<std::string> arguments;
    RS_RETURN_IF_ERROR(ForEachRow(
        "SELECT name, value FROM META_DATA_CAPTURE WHERE name LIKE 'PROCESS\\_0:%' ESCAPE '\\'",
        [&](const sql::Statement& row) {
          const std::string key = row.ColumnText(0);
          std::string value = row.ColumnText(1);
          if (key == "PROCESS_0:COMMAND") {
            launch_.command = value;
          } else if (StartsWith(key, "PROCESS_0:ARGUMENT_")) {
            arguments.push_back(value);
          } else if (key == "PROCESS_0:ENVIRONMENT_VARIABLE") {
            if (const size_t equals = value.find('='); equals != std::string::npos && equals > 0) {
              std::string text = value.substr(equals + 1);
              if (text.size() >= 2 && text.front() == '"' && text.back() == '"') text = text.substr(1, text.size() - 2);
              launch_.environment.emplace(value.substr(0, equals), std::move(text));
            }
          }
          return Status::Ok();
        }));
    for (const std::string& argument : arguments) launch_.command += " " + argument;
  }
  launch_.environment.insert(device_environment.begin(), device_environment.end());  // the capture's rows win
  return Status::Ok();
}

NsysRankEvidence NsysImporter::RankEvidence() const {
  NsysRankEvidence evidence;
  for (const auto& [key, process] : processes_) {
    NsysProcessEvidence& one = evidence.processes.emplace_back();
    one.pid = process.pid;
    one.nccl_rank = process.payload_rank;
    one.mpi_rank = process.mpi_rank;
    one.mpi_evidence = process.mpi_evidence;
  }
  evidence.launch_environment = launch_.environment;
  const auto blobs = export_meta_.find("EXPORT_PARAM_INCLUDE_BLOBS");
  evidence.blobs_exported = blobs != export_meta_.end() && blobs->second == "true";
  const std::vector<int> taken = sink_.ranks_taken();
  evidence.ranks_taken.insert(taken.begin(), taken.end());
  return evidence;
}

Status NsysImporter::CreateRankFiles(const NsysRankChoice& choice) {
  std::map<int64_t, Process*> by_pid;
  for (auto& [key, process] : processes_) by_pid.emplace(process.pid, &process);
  for (const NsysRankAssignment& assigned : choice.ranks) {
    Process* process = by_pid.at(assigned.pid);
    trace::RankIdentity who;
    who.pid = process->pid;
    who.rank = assigned.rank;
    who.world_size = assigned.world_size;
    who.local_rank = assigned.local_rank;
    who.command_line = process->name;
    const bool launched = !launch_.command.empty() && !process->name.empty() && processes_.size() == 1 &&
                          fs::path(launch_.command.substr(0, launch_.command.find(' '))).filename() ==
                              fs::path(process->name).filename();
    if (launched) who.command_line = launch_.command;
    if (auto host = launch_.hosts.find(VmKey(process->key)); host != launch_.hosts.end()) {
      who.host = host->second;
    } else if (launch_.any_host.size() == 1) {
      who.host = *launch_.any_host.begin();
    }
    // The choice's notes explain the ranks, not one note per process.
    Result<RankFileBuilder*> builder =
        sink_.Rank(who, fmt::format("{} (pid {})", name_, process->pid), /*note_assignment=*/false);
    if (!builder.ok()) return builder.status();
    process->builder = *builder;
    RankFileBuilder& b = **builder;
    b.SetMeta("import.format", "nsys-sqlite");
    b.SetMeta("import.source", name_);
    b.SetMeta("import.rank_source",
              NsysRankSourceName(assigned.from_evidence ? choice.source : NsysRankSource::kProcessOrder));
    b.SetMeta("nsys.schema_version", schema_version_);
    if (auto product = export_meta_.find("EXPORT_PRODUCT_VERSION"); product != export_meta_.end()) {
      b.SetMeta("nsys.product_version", product->second);
    }
    b.SetMeta("nsys.global_pid", std::to_string(process->key));
    b.SetMeta("nsys.time_anchor", time_anchor_);
    if (!launch_.command.empty()) b.SetMeta("nsys.launch_command", launch_.command);
    for (const auto& [key, name] : categories_) {
      const auto& [category_process, domain, category] = key;
      if (category_process != process->key) continue;
      b.SetMeta(fmt::format("nvtx.category.{}.{}", DomainName(category_process, domain), category), name);
    }
  }
  sink_.DoneClaiming();  // inputs read beside this one may claim theirs now
  return Status::Ok();
}

// ---- strings, lanes, times -------------------------------------------------------------------

Result<const std::string*> NsysImporter::String(int64_t id) {
  auto found = string_cache_.find(id);
  if (found != string_cache_.end()) return &found->second;
  // Kernel, API and NVTX names are ids into StringIds: without it, NCCL kernels would pass
  // for compute, so a name that cannot be read is an error, not an empty name.
  if (!string_lookup_) {
    return Error(StatusCode::kCorrupt, "the export has no StringIds table, so its kernel, API and NVTX names "
                                       "cannot be read");
  }
  std::string value;
  string_lookup_.BindInt(1, id);
  const int rc = sqlite3_step(string_lookup_.get());
  if (rc == SQLITE_ROW) {
    value = string_lookup_.ColumnText(0);
  } else if (rc != SQLITE_DONE) {
    Status status = sql::FromSqlite(db_.get(), rc, "reading StringIds");
    string_lookup_.Reset();
    return Fail(status);
  }
  string_lookup_.Reset();
  return &string_cache_.emplace(id, std::move(value)).first->second;
}

Result<trace::StringId> NsysImporter::StringFor(Process& process, std::optional<int64_t> id, std::string_view fallback) {
  if (!id) return process.builder->Intern(fallback);
  auto found = process.strings.find(*id);
  if (found != process.strings.end()) return found->second;
  Result<const std::string*> text = String(*id);
  if (!text.ok()) return text.status();
  const trace::StringId interned = process.builder->Intern((*text)->empty() ? fallback : std::string_view(**text));
  process.strings.emplace(*id, interned);
  return interned;
}

Result<std::optional<std::string>> NsysImporter::TextOrString(const sql::Statement& row, int text_column,
                                                              int id_column) {
  if (std::optional<std::string> text = Text(row, text_column)) return text;
  const std::optional<int64_t> id = Int(row, id_column);
  if (!id) return std::optional<std::string>();
  RS_ASSIGN_OR_RETURN(const std::string* registered, String(*id));
  return std::optional<std::string>(*registered);
}

// Kinds by the names of the export's ENUM table when it has one (an id it lacks is
// unknown), else by nsys's documented numbers.
trace::MemoryKind NsysImporter::MemoryKindOf(std::optional<int64_t> id) const {
  if (!id) return trace::MemoryKind::kUnknown;
  if (memory_kinds_.empty()) return DocumentedMemoryKind(*id);
  auto named = memory_kinds_.find(*id);
  return named != memory_kinds_.end() ? named->second : trace::MemoryKind::kUnknown;
}

trace::SyncKind NsysImporter::SyncKindOf(int64_t id) const {
  if (sync_kinds_.empty()) return DocumentedSyncKind(id);
  auto named = sync_kinds_.find(id);
  return named != sync_kinds_.end() ? named->second : trace::SyncKind::kUnknown;
}

trace::OverheadKind NsysImporter::OverheadKindOf(int64_t id) const {
  if (overhead_kinds_.empty()) return DocumentedOverheadKind(id);
  auto named = overhead_kinds_.find(id);
  return named != overhead_kinds_.end() ? named->second : trace::OverheadKind::kUnknown;
}

MemoryOperation NsysImporter::MemoryOperationOf(int64_t id) const {
  if (memory_operations_.empty()) return DocumentedMemoryOperation(id);
  auto named = memory_operations_.find(id);
  return named != memory_operations_.end() ? named->second : MemoryOperation::kUnknown;
}

std::optional<WallSpan> NsysImporter::WallTimes(int64_t start, int64_t end) const {
  if (!trace::CheckedDuration(start, end)) return std::nullopt;
  int64_t wall_start = 0, wall_end = 0;
  if (__builtin_add_overflow(start, clock_offset_, &wall_start) || __builtin_add_overflow(end, clock_offset_, &wall_end)) {
    return std::nullopt;
  }
  return WallSpan{wall_start, wall_end};
}

Process* NsysImporter::RankProcess(uint64_t global_id) {
  const uint64_t key = ProcessKey(global_id);
  if (last_process_ != nullptr && key == last_key_) return last_process_;
  auto found = processes_.find(key);
  if (found == processes_.end() || found->second.builder == nullptr) return nullptr;
  last_key_ = key;
  last_process_ = &found->second;
  return last_process_;
}

trace::LaneId NsysImporter::StreamLane(Process& process, int64_t device, int64_t context, int64_t stream) {
  const auto key = std::make_tuple(static_cast<int32_t>(device), static_cast<uint32_t>(context), static_cast<uint64_t>(stream));
  auto [it, inserted] = process.stream_lanes.try_emplace(key, trace::kNoLane);
  if (inserted) {
    trace::Lane lane;
    lane.kind = trace::LaneKind::kGpuStream;
    lane.device = std::get<0>(key);
    lane.context = std::get<1>(key);
    lane.stream = std::get<2>(key);
    lane.pid = process.pid;
    lane.name = fmt::format("stream {}", lane.stream);
    it->second = process.builder->Lane(lane);
  }
  return it->second;
}

trace::LaneId NsysImporter::GpuLane(Process& process, const sql::Statement& row) {
  return StreamLane(process, row.ColumnInt(3), Int(row, 4).value_or(0), row.ColumnInt(5));
}

trace::LaneId NsysImporter::ThreadLane(Process& process, int64_t tid) {
  auto [it, inserted] = process.thread_lanes.try_emplace(tid, trace::kNoLane);
  if (inserted) {
    trace::Lane lane;
    lane.kind = trace::LaneKind::kCpuThread;
    lane.pid = process.pid;
    lane.tid = tid;
    const uint64_t global_tid = process.key | static_cast<uint64_t>(tid);
    if (auto named = nvtx_thread_names_.find(global_tid); named != nvtx_thread_names_.end()) {
      lane.name = named->second;
    } else if (auto os = thread_names_.find(global_tid); os != thread_names_.end()) {
      lane.name = os->second;
    } else {
      lane.name = fmt::format("thread {}", tid);
    }
    it->second = process.builder->Lane(lane);
  }
  return it->second;
}

std::string NsysImporter::DomainName(uint64_t process_key, int64_t domain) const {
  if (auto named = domain_names_.find({process_key, domain}); named != domain_names_.end()) return named->second;
  if (auto any = domain_names_any_.find(domain); any != domain_names_any_.end() && any->second.size() == 1) {
    return *any->second.begin();
  }
  if (nccl_named_domains_.contains(domain)) return "NCCL";
  if (domain == 0) return "";
  return fmt::format("domain {}", domain);
}

trace::StringId NsysImporter::DomainFor(Process& process, int64_t domain) {
  auto [it, inserted] = process.domains.try_emplace(domain, trace::kEmptyString);
  if (inserted) {
    const std::string name = DomainName(process.key, domain);
    if (name == "NCCL") process.nccl = true;
    it->second = process.builder->Intern(name);
  }
  return it->second;
}

// ---- event tables ----------------------------------------------------------------------------

Process* NsysImporter::RowOwner(const sql::Statement& row, int column, const EventTable& table) {
  const std::optional<int64_t> global_id = Int(row, column);
  if (!global_id) {
    damaged_without_process_.Count(table.kind, fmt::format("without a valid {}", table.owner_column),
                                   fmt::format("{}: {}", table.name, ValueProblem(row, column, table.owner_column)));
    return nullptr;
  }
  Process* process = RankProcess(static_cast<uint64_t>(*global_id));
  if (process == nullptr) ++other_process_events_[ProcessKey(static_cast<uint64_t>(*global_id))];
  return process;
}

std::optional<WallSpan> NsysImporter::RowTimes(Process& process, const EventTable& table, int64_t start,
                                               int64_t end) {
  if (!trace::CheckedDuration(start, end)) {
    process.builder->damaged().Count(table.kind, "with end before start",
                                     fmt::format("{}: start {}, end {}", table.name, start, end));
    return std::nullopt;
  }
  const std::optional<WallSpan> times = WallTimes(start, end);
  if (!times) {
    process.builder->damaged().Count(table.kind, "with times out of range on the wall clock",
                                     fmt::format("{}: start {}, end {}", table.name, start, end));
  }
  return times;
}

template <typename Convert>
Status NsysImporter::ForEachEvent(const EventTable& table, const std::string& query, AlsoNeeds also,
                                  Convert&& convert) {
  return ForEachRow(query, [&](const sql::Statement& row) -> Status {
    Process* process = RowOwner(row, 2, table);
    if (process == nullptr) return Status::Ok();
    const std::optional<int64_t> start = Int(row, 0), end = Int(row, 1);
    if (!start || !end) {
      process->builder->damaged().Count(
          table.kind, "without a valid start/end",
          fmt::format("{}: {}", table.name, start ? ValueProblem(row, 1, "end") : ValueProblem(row, 0, "start")));
      return Status::Ok();
    }
    if (also == AlsoNeeds::kDeviceAndStream) {
      if (const std::optional<std::string> problem = DeviceOrStreamProblem(row)) {
        process->builder->damaged().Count(table.kind, "without a valid deviceId/streamId",
                                          fmt::format("{}: {}", table.name, *problem));
        return Status::Ok();
      }
    }
    const std::optional<WallSpan> times = RowTimes(*process, table, *start, *end);
    if (!times) return Status::Ok();
    RS_RETURN_IF_ERROR(convert(*process, *times, static_cast<uint64_t>(row.ColumnInt(2)), row));
    // Syncs wait in pending_syncs, not in the batch: for them this flush has nothing to send.
    process->builder->Flush();
    return Status::Ok();
  });
}

Status NsysImporter::ImportKernels() {
  if (!Has(kKernelTable)) return Status::Ok();
  const std::string_view t = kKernelTable;
  const std::string query = fmt::format(
      "SELECT start, \"end\", globalPid, deviceId, {}, streamId, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {} FROM {}",
      Col(t, "contextId"), Col(t, "correlationId"), Col(t, "demangledName"), Col(t, "shortName"), Col(t, "gridX"),
      Col(t, "gridY"), Col(t, "gridZ"), Col(t, "blockX"), Col(t, "blockY"), Col(t, "blockZ"),
      Col(t, "registersPerThread"), Col(t, "staticSharedMemory"), Col(t, "dynamicSharedMemory"), Ident(t));
  const auto add_kernel = [&](Process& process, WallSpan times, uint64_t, const sql::Statement& row) -> Status {
    trace::KernelEvent e;
    e.lane = GpuLane(process, row);
    e.start_ns = times.first;
    e.end_ns = times.second;
    // The demangled name, else the short one.
    std::optional<int64_t> name_id;
    const std::string* name_text = nullptr;
    for (int column : {7, 8}) {
      const std::optional<int64_t> id = Int(row, column);
      if (!id) continue;
      RS_ASSIGN_OR_RETURN(const std::string* text, String(*id));
      if (text->empty()) continue;
      name_id = id;
      name_text = text;
      break;
    }
    if (name_id) {
      auto [it, inserted] = process.strings.try_emplace(*name_id, trace::kEmptyString);
      if (inserted) {
        it->second = process.builder->Intern(*name_text);
        if (NormalizedKey(*name_text).find("nccl") != std::string::npos) process.nccl = true;
      }
      e.name = it->second;
    } else {
      e.name = process.builder->Intern("[unnamed kernel]");
    }
    e.correlation_id = static_cast<uint64_t>(Int(row, 6).value_or(0));
    e.grid = {ClampU32(Int(row, 9)), ClampU32(Int(row, 10)), ClampU32(Int(row, 11))};
    e.block = {ClampU32(Int(row, 12)), ClampU32(Int(row, 13)), ClampU32(Int(row, 14))};
    e.registers_per_thread = ClampU32(Int(row, 15));
    e.static_shared_bytes = ClampU32(Int(row, 16));
    e.dynamic_shared_bytes = ClampU32(Int(row, 17));
    process.builder->events().kernels.push_back(e);
    return Status::Ok();
  };
  return ForEachEvent(kKernels, query, AlsoNeeds::kDeviceAndStream, add_kernel);
}

Status NsysImporter::ImportMemcpys() {
  if (!Has(kMemcpyTable)) return Status::Ok();
  const std::string_view t = kMemcpyTable;
  const std::string query =
      fmt::format("SELECT start, \"end\", globalPid, deviceId, {}, streamId, {}, {}, {}, {}, {}, {}, {} FROM {}",
                  Col(t, "contextId"), Col(t, "correlationId"), Col(t, "bytes"), Col(t, "copyKind"), Col(t, "srcKind"),
                  Col(t, "dstKind"), Col(t, "srcDeviceId"), Col(t, "dstDeviceId"), Ident(t));
  const auto device_id = [](std::optional<int64_t> id) {
    return id && *id >= 0 && *id <= INT32_MAX ? static_cast<int32_t>(*id) : -1;
  };
  const auto add_memcpy = [&](Process& process, WallSpan times, uint64_t, const sql::Statement& row) -> Status {
    trace::MemcpyEvent e;
    e.lane = GpuLane(process, row);
    e.start_ns = times.first;
    e.end_ns = times.second;
    e.correlation_id = static_cast<uint64_t>(Int(row, 6).value_or(0));
    e.bytes = static_cast<uint64_t>(Int(row, 7).value_or(0));
    const int64_t copy_kind = Int(row, 8).value_or(0);
    e.copy_kind = copy_kind >= 0 && copy_kind <= static_cast<int64_t>(trace::CopyKind::kPeerToPeer)
                      ? static_cast<trace::CopyKind>(copy_kind)
                      : trace::CopyKind::kUnknown;
    e.name = process.builder->Intern(CopyName(copy_kind));
    e.src_kind = MemoryKindOf(Int(row, 9));
    e.dst_kind = MemoryKindOf(Int(row, 10));
    e.src_device = device_id(Int(row, 11));
    e.dst_device = device_id(Int(row, 12));
    process.builder->events().memcpys.push_back(e);
    return Status::Ok();
  };
  return ForEachEvent(kMemcpys, query, AlsoNeeds::kDeviceAndStream, add_memcpy);
}

Status NsysImporter::ImportMemsets() {
  if (!Has(kMemsetTable)) return Status::Ok();
  const std::string_view t = kMemsetTable;
  const std::string query = fmt::format("SELECT start, \"end\", globalPid, deviceId, {}, streamId, {}, {}, {}, {} FROM {}",
                                        Col(t, "contextId"), Col(t, "correlationId"), Col(t, "bytes"), Col(t, "value"),
                                        Col(t, "memKind"), Ident(t));
  const auto add_memset = [&](Process& process, WallSpan times, uint64_t, const sql::Statement& row) -> Status {
    trace::MemsetEvent e;
    e.lane = GpuLane(process, row);
    e.start_ns = times.first;
    e.end_ns = times.second;
    e.name = process.builder->Intern("Memset");
    e.correlation_id = static_cast<uint64_t>(Int(row, 6).value_or(0));
    e.bytes = static_cast<uint64_t>(Int(row, 7).value_or(0));
    e.value = static_cast<uint32_t>(Int(row, 8).value_or(0));
    e.memory_kind = MemoryKindOf(Int(row, 9));
    process.builder->events().memsets.push_back(e);
    return Status::Ok();
  };
  return ForEachEvent(kMemsets, query, AlsoNeeds::kDeviceAndStream, add_memset);
}

// Synchronizations go on the thread whose API call made them (the runtime row with the same
// correlation id), so they wait until the runtime table has been read.
Status NsysImporter::CollectSyncs() {
  if (!Has(kSyncTable)) return Status::Ok();
  const std::string_view t = kSyncTable;
  // Schema 3.x keeps the old column as deprecatedSyncType next to syncType.
  const std::string type = HasColumn(t, "syncType") && HasColumn(t, "deprecatedSyncType")
                               ? "COALESCE(syncType, deprecatedSyncType)"
                               : HasColumn(t, "syncType") ? "syncType" : Col(t, "deprecatedSyncType");
  const std::string query = fmt::format("SELECT start, \"end\", globalPid, {}, {}, {}, {}, {} FROM {}",
                                        Col(t, "contextId"), Col(t, "streamId"), Col(t, "correlationId"), type,
                                        Col(t, "eventId"), Ident(t));
  const auto applicable = [](std::optional<int64_t> value) -> uint64_t {
    return value && *value != kCuptiInvalid && *value >= 0 ? static_cast<uint64_t>(*value) : 0;
  };
  const auto collect_sync = [&](Process& process, WallSpan times, uint64_t, const sql::Statement& row) -> Status {
    trace::SyncEvent e;
    e.start_ns = times.first;
    e.end_ns = times.second;
    e.context = static_cast<uint32_t>(applicable(Int(row, 3)));
    e.stream = applicable(Int(row, 4));
    e.correlation_id = static_cast<uint64_t>(Int(row, 5).value_or(0));
    if (std::optional<int64_t> kind = Int(row, 6)) e.sync_kind = SyncKindOf(*kind);
    e.cuda_event_id = applicable(Int(row, 7));
    e.name = process.builder->Intern(trace::DefaultName(e.sync_kind));
    process.pending_syncs.push_back(e);
    if (e.correlation_id != 0) process.sync_call_lanes.emplace(e.correlation_id, trace::kNoLane);
    return Status::Ok();
  };
  return ForEachEvent(kSyncs, query, AlsoNeeds::kNothing, collect_sync);
}

Status NsysImporter::ImportRuntime() {
  if (!Has(kRuntimeTable)) return Status::Ok();
  const std::string_view t = kRuntimeTable;
  const std::string query = fmt::format("SELECT start, \"end\", globalTid, {}, {}, {}, {}, {} FROM {}",
                                        Col(t, "eventClass"), Col(t, "correlationId"), Col(t, "nameId"),
                                        Col(t, "name"), Col(t, "returnValue"), Ident(t));
  const auto add_call = [&](Process& process, WallSpan times, uint64_t global_tid,
                            const sql::Statement& row) -> Status {
    trace::ApiCallEvent e;
    e.lane = ThreadLane(process, TidOf(global_tid));
    e.start_ns = times.first;
    e.end_ns = times.second;
    const int64_t event_class = Int(row, 3).value_or(-1);
    e.domain = event_class == 0   ? trace::ApiDomain::kRuntime
               : event_class == 1 ? trace::ApiDomain::kDriver
                                  : trace::ApiDomain::kUnknown;
    e.correlation_id = static_cast<uint64_t>(Int(row, 4).value_or(0));
    // API names are few: intern each StringIds id once, without its "_v7000" suffix.
    const std::optional<int64_t> name_id = Int(row, 5);
    auto cached = name_id ? process.api_names.find(*name_id) : process.api_names.end();
    if (cached != process.api_names.end()) {
      e.name = cached->second;
    } else {
      std::string name;
      if (name_id) {
        Result<const std::string*> text = String(*name_id);
        if (!text.ok()) return text.status();
        name = **text;
      }
      if (name.empty()) name = Text(row, 6).value_or("");
      e.name =
          process.builder->Intern(name.empty() ? std::string_view("[unnamed API call]") : trace::WithoutApiVersion(name));
      if (name_id) process.api_names.emplace(*name_id, e.name);
    }
    e.return_code = static_cast<int32_t>(Int(row, 7).value_or(0));
    if (e.correlation_id != 0) {
      if (auto waiting = process.sync_call_lanes.find(e.correlation_id); waiting != process.sync_call_lanes.end()) {
        waiting->second = e.lane;
      }
    }
    process.builder->events().api_calls.push_back(e);
    return Status::Ok();
  };
  return ForEachEvent(kRuntimeCalls, query, AlsoNeeds::kNothing, add_call);
}

void NsysImporter::EmitSyncs() {
  for (auto& [key, process] : processes_) {
    if (process.builder == nullptr) continue;
    trace::LaneId unknown = trace::kNoLane;
    for (trace::SyncEvent& sync : process.pending_syncs) {
      auto call = process.sync_call_lanes.find(sync.correlation_id);
      sync.lane = call != process.sync_call_lanes.end() ? call->second : trace::kNoLane;
      if (sync.lane == trace::kNoLane) {
        if (unknown == trace::kNoLane) {
          trace::Lane lane;
          lane.kind = trace::LaneKind::kCpuThread;
          lane.pid = process.pid;
          lane.tid = 0;
          lane.name = "CUDA synchronization (thread unknown)";
          unknown = process.builder->Lane(lane);
        }
        sync.lane = unknown;
      }
      process.builder->events().syncs.push_back(sync);
      process.builder->Flush();
    }
    std::vector<trace::SyncEvent>().swap(process.pending_syncs);
    process.sync_call_lanes.clear();
  }
}

// NVTX rows do not fit ForEachEvent: globalTid is column 3, and only ranges need an end (a
// range without one never ended). The checks are the other tables', in the same order.
Status NsysImporter::ImportNvtx() {
  if (!Has(kNvtxTable)) return Status::Ok();
  const std::string_view t = kNvtxTable;
  const std::string query = fmt::format(
      "SELECT start, \"end\", eventType, globalTid, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {} "
      "FROM NVTX_EVENTS WHERE eventType IN ({}, {}, {})",
      Col(t, "endGlobalTid"), Col(t, "text"), Col(t, "textId"), Col(t, "domainId"), Col(t, "category"),
      Col(t, "color"), Col(t, "uint64Value"), Col(t, "int64Value"), Col(t, "doubleValue"), Col(t, "uint32Value"),
      Col(t, "int32Value"), Col(t, "floatValue"), Col(t, "jsonText"), Col(t, "jsonTextId"), Col(t, "binaryData"),
      kNvtxMark, kNvtxPushPop, kNvtxStartEnd);
  constexpr EventTable kMarks = {kNvtxTable, "NVTX mark", "globalTid"};
  constexpr EventTable kRanges = {kNvtxTable, "NVTX range", "globalTid"};
  return ForEachRow(query, [&](const sql::Statement& row) -> Status {
    // The query's eventType filter leaves marks and ranges only.
    const bool mark = Int(row, 2) == kNvtxMark;
    const EventTable& table = mark ? kMarks : kRanges;
    Process* process = RowOwner(row, 3, table);
    if (process == nullptr) return Status::Ok();
    const std::optional<int64_t> start = Int(row, 0), end = Int(row, 1);
    const int64_t global_tid = row.ColumnInt(3);  // RowOwner found it an integer
    if (!start) {
      process->builder->damaged().Count(table.kind, "without a valid start",
                                        fmt::format("{}: {}", t, ValueProblem(row, 0, "start")));
      return Status::Ok();
    }
    if (!mark && !end) {
      process->builder->damaged().Count(table.kind, "that never ended (no end)",
                                        fmt::format("{}: {}", t, ValueProblem(row, 1, "end")));
      return Status::Ok();
    }
    const std::optional<WallSpan> wall = RowTimes(*process, table, *start, mark ? *start : *end);
    if (!wall) return Status::Ok();
    const WallSpan& times = *wall;
    trace::NvtxAttributes attributes;
    const int64_t domain = Int(row, 7).value_or(0);
    attributes.domain = DomainFor(*process, domain);
    attributes.category = ClampU32(Int(row, 8));
    attributes.color = static_cast<uint32_t>(Int(row, 9).value_or(0));
    static constexpr trace::PayloadKind kScalarKinds[] = {trace::PayloadKind::kUint64, trace::PayloadKind::kInt64,
                                                          trace::PayloadKind::kDouble, trace::PayloadKind::kUint32,
                                                          trace::PayloadKind::kInt32,  trace::PayloadKind::kFloat};
    for (int i = 0; i < 6; ++i) {
      const trace::PayloadKind kind = kScalarKinds[i];
      const bool real = kind == trace::PayloadKind::kDouble || kind == trace::PayloadKind::kFloat;
      if (real) {
        if (std::optional<double> value = Real(row, 10 + i)) {
          attributes.payload = {kind, 0, *value};
          break;
        }
      } else if (std::optional<int64_t> value = Int(row, 10 + i)) {
        attributes.payload = {kind, *value, 0.0};
        break;
      }
    }
    RS_ASSIGN_OR_RETURN(const std::optional<std::string> json, TextOrString(row, 16, 17));
    if (json && !json->empty()) {
      attributes.args =
          process->builder->Intern(json->front() == '{' ? *json : Json{{"json", *json}}.dump(-1, ' ', false,
                                                                                                Json::error_handler_t::replace));
    } else if (sqlite3_column_type(row.get(), 18) != SQLITE_NULL) {
      if (std::optional<Json> decoded = DecodeBlob(BlobBytes(row, 18), payload_schemas_)) {
        attributes.args = process->builder->Intern(decoded->dump(-1, ' ', false, Json::error_handler_t::replace));
      }
    }
    std::optional<std::string> text = Text(row, 5);
    trace::StringId name = trace::kEmptyString;
    if (text) {
      name = process->builder->Intern(*text);
    } else {
      RS_ASSIGN_OR_RETURN(name, StringFor(*process, Int(row, 6), ""));
    }
    const trace::LaneId lane = ThreadLane(*process, TidOf(static_cast<uint64_t>(global_tid)));
    if (mark) {
      trace::NvtxMarkEvent e;
      static_cast<trace::NvtxAttributes&>(e) = attributes;
      e.lane = lane;
      e.start_ns = e.end_ns = times.first;
      e.name = name;
      process->builder->events().nvtx_marks.push_back(e);
    } else {
      trace::NvtxRangeEvent e;
      static_cast<trace::NvtxAttributes&>(e) = attributes;
      e.lane = lane;
      e.start_ns = times.first;
      e.end_ns = times.second;
      e.name = name;
      e.style = Int(row, 2) == kNvtxStartEnd ? trace::NvtxRangeStyle::kStartEnd : trace::NvtxRangeStyle::kPushPop;
      if (e.style == trace::NvtxRangeStyle::kStartEnd) {
        const std::optional<int64_t> end_tid = Int(row, 4);
        if (end_tid && *end_tid != global_tid && ProcessKey(static_cast<uint64_t>(*end_tid)) == process->key) {
          e.end_lane = ThreadLane(*process, TidOf(static_cast<uint64_t>(*end_tid)));
        }
      }
      process->builder->events().nvtx_ranges.push_back(e);
    }
    process->builder->Flush();
    return Status::Ok();
  });
}

Status NsysImporter::ImportOverheads() {
  if (!Has(kOverheadTable)) return Status::Ok();
  const std::string_view t = kOverheadTable;
  const std::string query = fmt::format("SELECT start, \"end\", globalTid, {}, {}, {} FROM {}", Col(t, "overheadType"),
                                        Col(t, "nameId"), Col(t, "correlationId"), Ident(t));
  const auto add_overhead = [&](Process& process, WallSpan times, uint64_t global_tid,
                                const sql::Statement& row) -> Status {
    trace::OverheadEvent e;
    e.lane = ThreadLane(process, TidOf(global_tid));
    e.start_ns = times.first;
    e.end_ns = times.second;
    if (std::optional<int64_t> kind = Int(row, 3)) e.overhead_kind = OverheadKindOf(*kind);
    RS_ASSIGN_OR_RETURN(e.name, StringFor(process, Int(row, 4), trace::DefaultName(e.overhead_kind)));
    e.correlation_id = static_cast<uint64_t>(Int(row, 5).value_or(0));
    process.builder->events().overheads.push_back(e);
    return Status::Ok();
  };
  return ForEachEvent(kOverheads, query, AlsoNeeds::kNothing, add_overhead);
}

// CUDA's allocations and releases (nsys --cuda-memory-usage=true): per process, device and
// memory kind, the bytes live after each row, on counter lanes "cuda memory: device (gpu 0)".
Status NsysImporter::ImportMemoryUsage() {
  const std::string_view t = kMemoryUsageTable;
  if (!Has(t)) {
    // Present without the columns it needs (ProbeTables set it aside): say so, once.
    if (auto found = tables_.find(t); found != tables_.end() && !found->second.columns.empty()) {
      Note(fmt::format("table {} lacks a column rankscope reads (start, globalPid, deviceId, bytes, memKind, "
                       "memoryOperationType): its CUDA memory counters are not imported",
                       t));
    }
    return Status::Ok();
  }
  // Time order, so that each sample is the bytes live then; rowid keeps the export's order
  // among rows of one instant.
  const std::string query = fmt::format(
      "SELECT start, globalPid, deviceId, bytes, memKind, memoryOperationType FROM {} ORDER BY start, rowid", Ident(t));
  uint64_t clamped = 0;
  RS_RETURN_IF_ERROR(ForEachRow(query, [&](const sql::Statement& row) -> Status {
    Process* process = RowOwner(row, 1, kMemoryUsage);
    if (process == nullptr) return Status::Ok();
    // Left out: the row's value in `column` is missing or out of range.
    const auto damaged = [&](int column, std::string_view name) {
      process->builder->damaged().Count(kMemoryUsage.kind, fmt::format("without a valid {}", name),
                                        fmt::format("{}: {}", t, ValueProblem(row, column, name)));
      return Status::Ok();
    };
    const std::optional<int64_t> start = Int(row, 0);
    if (!start) return damaged(0, "start");
    const std::optional<int64_t> device = Int(row, 2);
    if (!device || *device < 0 || *device > INT32_MAX) return damaged(2, "deviceId");
    const std::optional<int64_t> bytes = Int(row, 3);
    if (!bytes || *bytes < 0) return damaged(3, "bytes");
    const std::optional<int64_t> operation_id = Int(row, 5);
    const MemoryOperation operation = operation_id ? MemoryOperationOf(*operation_id) : MemoryOperation::kUnknown;
    if (!operation_id) return damaged(5, "memoryOperationType");
    if (operation == MemoryOperation::kUnknown) {
      process->builder->damaged().Count(
          kMemoryUsage.kind, "without a valid memoryOperationType",
          fmt::format("{}: memoryOperationType {} is neither allocation nor release", t, *operation_id));
      return Status::Ok();
    }
    const std::optional<WallSpan> times = RowTimes(*process, kMemoryUsage, *start, *start);
    if (!times) return Status::Ok();
    const trace::MemoryKind kind = MemoryKindOf(Int(row, 4));
    const auto key = std::make_pair(static_cast<int32_t>(*device), kind);
    auto [counter, added] = process->memory_counters.try_emplace(key, trace::kNoLane, 0);
    auto& [lane, live] = counter->second;
    if (added) {
      trace::Lane counter_lane;
      counter_lane.kind = trace::LaneKind::kCounter;
      counter_lane.device = key.first;
      counter_lane.pid = process->pid;
      counter_lane.name =
          trace::MemoryCounterName(trace::kCudaMemorySource, trace::CudaMemoryCategory(kind, key.first));
      lane = process->builder->Lane(counter_lane);
    }
    if (operation == MemoryOperation::kAllocation) {
      live = *bytes > INT64_MAX - live ? INT64_MAX : live + *bytes;
    } else if (*bytes > live) {
      ++clamped;  // memory allocated before the capture began
      live = 0;
    } else {
      live -= *bytes;
    }
    process->builder->events().counter_samples.push_back({lane, times->first, static_cast<double>(live)});
    process->builder->Flush();
    return Status::Ok();
  }));
  if (clamped > 0) {
    Note(fmt::format("{} CUDA memory release{} of {} freed more than the counter held (memory allocated before the "
                     "capture began): the bytes live stay at 0 there",
                     clamped, clamped == 1 ? "" : "s", t));
  }
  return Status::Ok();
}

// Damaged rows of a rank are noted with the rank (RunSink::Finish); these are the rest.
void NsysImporter::WriteNotes() {
  if (!other_process_events_.empty()) {
    uint64_t events = 0;
    std::vector<std::string> examples;
    for (const auto& [key, count] : other_process_events_) {
      events += count;
      if (examples.size() < 4) {
        auto name = process_names_.find(key);
        examples.push_back(name != process_names_.end() && !name->second.empty()
                               ? fmt::format("pid {} {}", PidOf(key), Printable(name->second))
                               : fmt::format("pid {}", PidOf(key)));
      }
    }
    if (other_process_events_.size() > examples.size()) {
      examples.push_back(fmt::format("{} more", other_process_events_.size() - examples.size()));
    }
    Note(fmt::format("left out {} events of {} processes without CUDA activity or API calls ({})", events,
                     other_process_events_.size(), fmt::join(examples, ", ")));
  }
  for (std::string& note : notes_) sink_.Note(std::move(note));
  notes_.clear();
  sink_.NoteDamaged(name_, damaged_without_process_);
}

Status NsysImporter::Run() {
  RS_RETURN_IF_ERROR(OpenAndCheckVersion());
  RS_RETURN_IF_ERROR(ProbeTables());
  RS_RETURN_IF_ERROR(ReadClock());
  RS_RETURN_IF_ERROR(ReadEnums());
  RS_RETURN_IF_ERROR(FindRankProcesses());
  RS_RETURN_IF_ERROR(ReadProcessInfo());
  RS_RETURN_IF_ERROR(ScanNvtxMetadata());
  RS_RETURN_IF_ERROR(ReadMpiRanks());
  RS_RETURN_IF_ERROR(ReadLaunchInfo());
  Result<NsysRankChoice> ranks = ChooseNsysRanks(RankEvidence());
  if (!ranks.ok()) return Fail(ranks.status());
  for (const std::string& note : ranks->notes) Note(note);
  RS_RETURN_IF_ERROR(CreateRankFiles(*ranks));
  RS_RETURN_IF_ERROR(ImportKernels());
  RS_RETURN_IF_ERROR(ImportMemcpys());
  RS_RETURN_IF_ERROR(ImportMemsets());
  RS_RETURN_IF_ERROR(CollectSyncs());
  RS_RETURN_IF_ERROR(ImportRuntime());
  EmitSyncs();
  RS_RETURN_IF_ERROR(ImportNvtx());
  RS_RETURN_IF_ERROR(ImportOverheads());
  RS_RETURN_IF_ERROR(ImportMemoryUsage());
  for (auto& [key, process] : processes_) {
    if (process.builder == nullptr) continue;
    if (process.nccl) process.builder->SetMeta(trace::meta_key::kBackend, "nccl");
    process.builder->Flush(/*force=*/true);
  }
  WriteNotes();
  return Status::Ok();
}

}  // namespace

// ---- which process is which rank ---------------------------------------------------------------

std::string_view NsysRankSourceName(NsysRankSource source) {
  switch (source) {
    case NsysRankSource::kNcclPayload: return "nccl init payload";
    case NsysRankSource::kMpi: return "nsys mpi trace";
    case NsysRankSource::kEnvironment: return "launch environment";
    case NsysRankSource::kProcessOrder: break;
  }
  return "process order";
}

Result<NsysRankChoice> ChooseNsysRanks(const NsysRankEvidence& evidence) {
  if (evidence.processes.empty()) return InvalidArgument("no process to give a rank");
  std::vector<const NsysProcessEvidence*> order;
  for (const NsysProcessEvidence& process : evidence.processes) order.push_back(&process);
  std::stable_sort(order.begin(), order.end(),
                   [](const NsysProcessEvidence* a, const NsysProcessEvidence* b) { return a->pid < b->pid; });
  for (size_t i = 1; i < order.size(); ++i) {
    if (order[i]->pid == order[i - 1]->pid) {
      return InvalidArgument(fmt::format("pid {} is listed twice", order[i]->pid));
    }
  }

  // Evidence of one kind counts when some process has it and no two processes share a rank.
  const auto count = [&](auto rank_of) {
    return std::count_if(order.begin(), order.end(),
                         [&](const NsysProcessEvidence* p) { return rank_of(*p).has_value(); });
  };
  const auto distinct = [&](auto rank_of) {
    std::set<int> seen;
    for (const NsysProcessEvidence* process : order) {
      if (std::optional<int> rank = rank_of(*process); rank && !seen.insert(*rank).second) return false;
    }
    return true;
  };
  const auto nccl_rank = [](const NsysProcessEvidence& p) -> std::optional<int> {
    return p.nccl_rank ? std::optional<int>(p.nccl_rank->first) : std::nullopt;
  };
  const auto mpi_rank = [](const NsysProcessEvidence& p) { return p.mpi_rank; };

  NsysRankChoice choice;
  std::vector<std::string> conflicts;
  if (count(nccl_rank) > 0) {
    if (distinct(nccl_rank)) {
      choice.source = NsysRankSource::kNcclPayload;
    } else {
      conflicts.push_back("NCCL init payloads give two processes the same rank");
    }
  }
  if (choice.source == NsysRankSource::kProcessOrder && count(mpi_rank) > 0) {
    if (distinct(mpi_rank)) {
      choice.source = NsysRankSource::kMpi;
    } else {
      conflicts.push_back("nsys's MPI trace gives two processes the same rank");
    }
  }
  std::optional<RankEnv> env_rank;
  if (choice.source == NsysRankSource::kProcessOrder && order.size() == 1 && !evidence.launch_environment.empty()) {
    Result<RankEnv> detected = DetectRank([&](const char* key) -> const char* {
      const auto found = evidence.launch_environment.find(key);
      return found == evidence.launch_environment.end() ? nullptr : found->second.c_str();
    });
    if (!detected.ok()) {
      choice.notes.push_back(
          fmt::format("the launch environment's rank variables are not usable ({})", detected.status().message()));
    } else if (detected->rank) {
      env_rank = *detected;
      choice.source = NsysRankSource::kEnvironment;
    }
  }

  // The world communicator's size, for every process when some lack a payload.
  std::optional<int> nccl_world;
  if (choice.source == NsysRankSource::kNcclPayload) {
    for (const NsysProcessEvidence* process : order) {
      if (process->nccl_rank) nccl_world = std::max(nccl_world.value_or(0), process->nccl_rank->second);
    }
  }
  // Ranks from evidence first; the others take the lowest ranks left, by pid.
  std::set<int> taken = evidence.ranks_taken;
  std::vector<NsysRankAssignment> assigned(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    const NsysProcessEvidence& process = *order[i];
    NsysRankAssignment& a = assigned[i];
    a.pid = process.pid;
    switch (choice.source) {
      case NsysRankSource::kNcclPayload:
        if (process.nccl_rank) {
          a.rank = process.nccl_rank->first;
          a.from_evidence = true;
        }
        a.world_size = nccl_world;
        break;
      case NsysRankSource::kMpi:
        if (process.mpi_rank) {
          a.rank = *process.mpi_rank;
          a.from_evidence = true;
        }
        break;
      case NsysRankSource::kEnvironment:
        a.rank = *env_rank->rank;
        a.from_evidence = true;
        a.world_size = env_rank->world_size;
        a.local_rank = env_rank->local_rank;
        break;
      case NsysRankSource::kProcessOrder: break;
    }
    if (a.from_evidence) taken.insert(a.rank);
  }
  int next_free = 0;
  for (NsysRankAssignment& a : assigned) {
    if (a.from_evidence) continue;
    while (taken.contains(next_free)) ++next_free;
    a.rank = next_free;
    taken.insert(next_free);
  }
  choice.ranks = std::move(assigned);

  // How ranks were chosen.
  std::vector<std::string> list;
  for (const NsysRankAssignment& a : choice.ranks) {
    if (list.size() == 8) {
      list.push_back(fmt::format("... {} more", choice.ranks.size() - 8));
      break;
    }
    list.push_back(fmt::format("pid {} = rank {}", a.pid, a.rank));
  }
  const std::string ranks = fmt::format("{}", fmt::join(list, ", "));
  const bool all_from_evidence = std::all_of(choice.ranks.begin(), choice.ranks.end(),
                                             [](const NsysRankAssignment& a) { return a.from_evidence; });
  const std::string partial = all_from_evidence ? "" : "; the others by process order";
  const std::string passed_over = conflicts.empty() ? "" : fmt::format(" ({})", fmt::join(conflicts, "; "));
  switch (choice.source) {
    case NsysRankSource::kNcclPayload:
      choice.notes.push_back(fmt::format("ranks from NCCL's ncclCommInitRank payloads ({}){}", ranks, partial));
      break;
    case NsysRankSource::kMpi: {
      // Where the first process with an MPI rank (there is one) had it from.
      const auto first = std::find_if(order.begin(), order.end(),
                                      [](const NsysProcessEvidence* p) { return p->mpi_rank.has_value(); });
      choice.notes.push_back(fmt::format("ranks from nsys's MPI trace, {} ({}){}{}", (*first)->mpi_evidence, ranks,
                                         partial, passed_over));
      break;
    }
    case NsysRankSource::kEnvironment:
      choice.notes.push_back(
          fmt::format("rank from the launch environment's {} variables ({})", env_rank->source, ranks));
      break;
    case NsysRankSource::kProcessOrder: {
      std::string why = conflicts.empty() ? std::string("the export has no NCCL init payloads")
                                          : fmt::format("{}", fmt::join(conflicts, "; "));
      if (conflicts.empty() && !evidence.blobs_exported) why += " (nsys export --include-blobs=true keeps them)";
      choice.notes.push_back(fmt::format("ranks by process order ({}): {}", ranks, why));
      break;
    }
  }
  return choice;
}

Status ImportNsys(const fs::path& file, RunSink& sink) {
  NsysImporter importer(file, sink);
  return importer.Run();
}

}  // namespace rankscope::interop::import
