// The Nsight Systems SQLite importer (interop/import_nsys.cc): the real exports in
// ../shared/data/nsys/ against the independent reference values of ../shared/data/README.md,
// hand-made nsys-like files for exact row checks and rank selection, and every kind of bad
// input. Expected counts on the real files are derived from the files themselves with SQL,
// not from the importer.
#include <sqlite3.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "analyzer/analyze.h"
#include "interop/import_internal.h"
#include "interop/interop.h"
#include "tests/interop/import_test_util.h"
#include "tests/shared_data.h"
#include "tests/temp_dir.h"
#include "trace/reader.h"

namespace rankscope::interop {

using analyzer::AnalyzeOptions;
using analyzer::AnalyzeRun;
using analyzer::Breakdown;
using analyzer::DeviceReport;
using analyzer::Report;
namespace {

using testing::AllNotes;
using testing::HasNote;
using testing::Load;

namespace fs = std::filesystem;
using rankscope::testing::TempDir;

const fs::path kSourceDir = RANKSCOPE_SOURCE_DIR;
const fs::path kRealExports = rankscope::testing::SharedDataDir() / "nsys";
const fs::path kTorchrun = kRealExports / "torchrun_2gpu_nccl.sqlite";
const fs::path kSaxpy = kRealExports / "saxpy_mpi_cuda_schema2.sqlite";
const fs::path kBadSeeds = kSourceDir / "tests" / "interop" / "data" / "nsys";

// ---- helpers -----------------------------------------------------------------------------

// nsys's serialized ids: <hw:8><vm:8><pid:24><tid:24>; VM 1 as in the real exports.
constexpr uint64_t kVm = uint64_t{1} << 48;
constexpr int64_t GlobalTid(int64_t pid, int64_t tid) { return static_cast<int64_t>(kVm | uint64_t(pid) << 24 | uint64_t(tid)); }
constexpr int64_t GlobalPid(int64_t pid) { return GlobalTid(pid, 0); }

// Session clock -> wall clock of the hand-made files: utcEpochNs + (ts - systemClockNs).
constexpr int64_t kUtcEpochNs = 1'700'000'000'000'000'000;
constexpr int64_t kSystemClockNs = 1'000'000;
constexpr int64_t Wall(int64_t ts) { return kUtcEpochNs + (ts - kSystemClockNs); }

Result<ImportResult> Import(const fs::path& input, const TempDir& dir) {
  return ImportTraces({input}, dir / "run");
}

ImportResult ImportOk(const fs::path& input, const TempDir& dir) {
  Result<ImportResult> imported = Import(input, dir);
  EXPECT_TRUE(imported.ok()) << imported.status().message();
  return imported.ok() ? std::move(imported).value() : ImportResult{};
}


// The imported ranks, by the pid each came from.
std::map<int64_t, trace::RankTrace> LoadByPid(const ImportResult& result) {
  std::map<int64_t, trace::RankTrace> by_pid;
  for (const fs::path& file : result.rank_files) {
    trace::RankTrace rank = Load(file);
    by_pid[rank.meta.pid] = std::move(rank);
  }
  return by_pid;
}


const trace::Lane* ThreadLane(const trace::RankTrace& rank, int64_t tid) {
  for (const trace::Lane& lane : rank.lanes) {
    if (lane.kind == trace::LaneKind::kCpuThread && lane.tid == tid) return &lane;
  }
  return nullptr;
}

// One integer from an SQL query on an export: expected values come from the file itself.
int64_t QueryInt(const fs::path& file, const std::string& query) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open_v2(file.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* statement = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, query.c_str(), -1, &statement, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  int64_t value = -1;
  if (statement != nullptr && sqlite3_step(statement) == SQLITE_ROW) value = sqlite3_column_int64(statement, 0);
  sqlite3_finalize(statement);
  sqlite3_close(db);
  return value;
}

// A hand-made nsys-like export: the metadata table with a schema version, then whatever
// tables a test creates.
class NsysFile {
 public:
  explicit NsysFile(const fs::path& path, const std::string& version = "3.25.0",
                    const std::string& meta_table = "META_DATA_EXPORT") {
    EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr), SQLITE_OK);
    Exec("PRAGMA page_size = 512");
    Exec("CREATE TABLE " + meta_table + " (name TEXT, value TEXT)");
    Exec("INSERT INTO " + meta_table + " VALUES ('EXPORT_PRODUCT_VERSION', '2026.2.1.210'), "
         "('EXPORT_SCHEMA_VERSION', '" + version + "')");
  }
  ~NsysFile() { sqlite3_close(db_); }
  NsysFile(const NsysFile&) = delete;
  NsysFile& operator=(const NsysFile&) = delete;

  void Exec(const std::string& sql) {
    char* error = nullptr;
    EXPECT_EQ(sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error), SQLITE_OK) << (error ? error : "") << "\n" << sql;
    sqlite3_free(error);
  }
  // An NVTX row whose binaryData is a BLOB.
  void NvtxBlob(int64_t start, int64_t end, int64_t global_tid, int64_t domain, const std::string& text,
                const std::string& blob) {
    sqlite3_stmt* statement = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db_,
                                 "INSERT INTO NVTX_EVENTS (start, \"end\", eventType, globalTid, domainId, text, "
                                 "binaryData) VALUES (?, ?, 59, ?, ?, ?, ?)",
                                 -1, &statement, nullptr),
              SQLITE_OK);
    sqlite3_bind_int64(statement, 1, start);
    sqlite3_bind_int64(statement, 2, end);
    sqlite3_bind_int64(statement, 3, global_tid);
    sqlite3_bind_int64(statement, 4, domain);
    sqlite3_bind_text(statement, 5, text.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_blob(statement, 6, blob.data(), static_cast<int>(blob.size()), SQLITE_TRANSIENT);
    EXPECT_EQ(sqlite3_step(statement), SQLITE_DONE);
    sqlite3_finalize(statement);
  }

 private:
  sqlite3* db_ = nullptr;
};

// The tables of schema 3.25 the tests use, with the columns the importer reads.
constexpr const char* kStringIdsDdl = "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL)";
constexpr const char* kProcessesDdl = "CREATE TABLE PROCESSES (globalPid INTEGER, pid INTEGER, name TEXT)";
constexpr const char* kKernelDdl =
    "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, \"end\" INTEGER NOT NULL, deviceId INTEGER, "
    "contextId INTEGER, greenContextId INTEGER, streamId INTEGER, correlationId INTEGER, globalPid INTEGER, "
    "demangledName INTEGER, shortName INTEGER, gridX INTEGER, gridY INTEGER, gridZ INTEGER, blockX INTEGER, "
    "blockY INTEGER, blockZ INTEGER, registersPerThread INTEGER, staticSharedMemory INTEGER, "
    "dynamicSharedMemory INTEGER)";
constexpr const char* kRuntimeDdl =
    "CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER, \"end\" INTEGER, eventClass INTEGER, "
    "globalTid INTEGER, correlationId INTEGER, nameId INTEGER, returnValue INTEGER)";
constexpr const char* kNvtxDdl =
    "CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, \"end\" INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER, "
    "category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER, "
    "domainId INTEGER, uint64Value INTEGER, int64Value INTEGER, doubleValue REAL, uint32Value INTEGER, "
    "int32Value INTEGER, floatValue REAL, jsonTextId INTEGER, jsonText TEXT, binaryData TEXT)";

// One kernel of `pid` on device 0, stream 7, at session time [start, end).
std::string KernelRow(int64_t pid, int64_t start, int64_t end, int64_t name_id, int64_t correlation = 1) {
  return "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, \"end\", deviceId, contextId, streamId, correlationId, "
         "globalPid, demangledName, shortName) VALUES (" +
         std::to_string(start) + ", " + std::to_string(end) + ", 0, 1, 7, " + std::to_string(correlation) + ", " +
         std::to_string(GlobalPid(pid)) + ", " + std::to_string(name_id) + ", " + std::to_string(name_id) + ")";
}

// The smallest export that imports: one process with one kernel.
void WriteMinimalExport(NsysFile& file) {
  file.Exec(kStringIdsDdl);
  file.Exec("INSERT INTO StringIds VALUES (1, 'gemm')");
  file.Exec(kKernelDdl);
  file.Exec(KernelRow(77, 1'000, 2'000, 1));
}

// The message of a failed import: one line that names the file.
void ExpectOneLineError(const Status& status, const fs::path& file, const std::string& problem) {
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(status.message().find('\n'), std::string::npos) << status.message();
  EXPECT_NE(status.message().find(file.filename().string()), std::string::npos) << status.message();
  EXPECT_NE(status.message().find(problem), std::string::npos) << status.message();
}

// ---- the real exports against the reference values --------------------------------------

struct Reference {
  int64_t pid;
  int device;
  int64_t window_ns, compute_ns, comm_ns, overlap_ns;
  double overlap_pct, comm_compute_ratio, utilization_pct;
};

// ../shared/data/README.md, "Reference values: whole-trace metrics".
constexpr Reference kTorchrun144 = {144, 0, 299848812, 253690832, 17172652, 0, 0.00, 0.067691, 91.32};
constexpr Reference kTorchrun145 = {145, 1, 298661551, 256095624, 8229100, 0, 0.00, 0.032133, 89.49};
constexpr Reference kSaxpy1230493 = {1230493, 0, 1097327843, 88573480, 0, 0, 0.00, 0.0, 34.02};

// Times within 0.01%, percentages within ±0.05 points; the ratio to the table's 6 decimals.
void ExpectTotalsMatch(const Report& report, const std::map<int64_t, trace::RankTrace>& ranks, const Reference& ref) {
  SCOPED_TRACE("pid " + std::to_string(ref.pid) + ", device " + std::to_string(ref.device));
  ASSERT_TRUE(ranks.contains(ref.pid));
  const int rank = ranks.at(ref.pid).meta.rank.value_or(-1);
  const DeviceReport* found = nullptr;
  for (const DeviceReport& device : report.ranks) {
    if (device.rank == rank && device.device == ref.device) found = &device;
  }
  ASSERT_NE(found, nullptr);
  const Breakdown& totals = found->totals;
  const auto near_time = [](int64_t ours, int64_t theirs) {
    return std::abs(static_cast<double>(ours - theirs)) <= 1e-4 * static_cast<double>(theirs);
  };
  EXPECT_TRUE(near_time(totals.window_ns, ref.window_ns)) << totals.window_ns << " vs " << ref.window_ns;
  EXPECT_TRUE(near_time(totals.compute_ns, ref.compute_ns)) << totals.compute_ns << " vs " << ref.compute_ns;
  EXPECT_TRUE(near_time(totals.comm_ns, ref.comm_ns)) << totals.comm_ns << " vs " << ref.comm_ns;
  EXPECT_TRUE(near_time(totals.overlap_ns, ref.overlap_ns)) << totals.overlap_ns << " vs " << ref.overlap_ns;
  EXPECT_NEAR(totals.overlap_pct, ref.overlap_pct, 0.05);
  EXPECT_NEAR(totals.utilization_pct, ref.utilization_pct, 0.05);
  ASSERT_TRUE(totals.comm_compute_ratio.has_value());
  EXPECT_NEAR(*totals.comm_compute_ratio, ref.comm_compute_ratio, 5e-7);
}

TEST(NsysImportTest, TorchrunMatchesReferenceTotals) {
  RANKSCOPE_REQUIRE_SHARED_DATA(kRealExports);
  TempDir dir;
  const ImportResult imported = ImportOk(kTorchrun, dir);
  ASSERT_EQ(imported.rank_files.size(), 2u) << AllNotes(imported);
  Result<Report> report = AnalyzeRun(dir / "run", AnalyzeOptions{});
  ASSERT_TRUE(report.ok()) << report.status().message();
  const std::map<int64_t, trace::RankTrace> ranks = LoadByPid(imported);
  ExpectTotalsMatch(*report, ranks, kTorchrun144);
  ExpectTotalsMatch(*report, ranks, kTorchrun145);
  // One GPU per process: no other device of either rank has activity.
  EXPECT_EQ(report->ranks.size(), 2u);
}

TEST(NsysImportTest, SaxpySchema2MatchesReferenceTotals) {
  RANKSCOPE_REQUIRE_SHARED_DATA(kRealExports);
  TempDir dir;
  const ImportResult imported = ImportOk(kSaxpy, dir);
  ASSERT_EQ(imported.rank_files.size(), 1u) << AllNotes(imported);
  Result<Report> report = AnalyzeRun(dir / "run", AnalyzeOptions{});
  ASSERT_TRUE(report.ok()) << report.status().message();
  ExpectTotalsMatch(*report, LoadByPid(imported), kSaxpy1230493);
}

// ---- the real exports: ranks, lanes, rows ------------------------------------------------

TEST(NsysImportTest, TorchrunRanksByProcessOrderWithNote) {
  RANKSCOPE_REQUIRE_SHARED_DATA(kRealExports);
  TempDir dir;
  const ImportResult imported = ImportOk(kTorchrun, dir);
  EXPECT_TRUE(HasNote(imported, "torchrun_2gpu_nccl.sqlite: ranks by process order (pid 144 = rank 0, "
                                "pid 145 = rank 1): the export has no NCCL init payloads (nsys export "
                                "--include-blobs=true keeps them)"))
      << AllNotes(imported);
  // The NCCL domain has no name row in this time-windowed export.
  EXPECT_TRUE(HasNote(imported, "NVTX domain 1 has no name in the export")) << AllNotes(imported);
  // 15 other processes (torchrun, nsys, bash, ...) hold none of the events imported here.
  EXPECT_FALSE(HasNote(imported, "left out")) << AllNotes(imported);
  const std::map<int64_t, trace::RankTrace> ranks = LoadByPid(imported);
  ASSERT_EQ(ranks.size(), 2u);
  for (const auto& [pid, rank] : ranks) {
    SCOPED_TRACE(pid);
    EXPECT_EQ(rank.meta.rank, pid == 144 ? 0 : 1);
    EXPECT_EQ(rank.meta.world_size, 2);
    EXPECT_EQ(rank.meta.host, "modal");
    EXPECT_EQ(rank.meta.command_line, "python3");
    EXPECT_EQ(rank.meta.backend, "nccl");
    EXPECT_EQ(rank.meta.entries.at("import.rank_source"), "process order");
    EXPECT_EQ(rank.meta.entries.at("nsys.schema_version"), "3.25.0");
    EXPECT_EQ(rank.meta.entries.at("nsys.launch_command"),
              "torchrun --nnodes=1 --nproc_per_node=2 --master_port=29506 /tmp/fv_mfu_training.py");
  }
}

TEST(NsysImportTest, TorchrunTimesAreWallClock) {
  RANKSCOPE_REQUIRE_SHARED_DATA(kRealExports);
  TempDir dir;
  const std::map<int64_t, trace::RankTrace> ranks = LoadByPid(ImportOk(kTorchrun, dir));
  ASSERT_TRUE(ranks.contains(144));
  const trace::RankTrace& rank = ranks.at(144);
  ASSERT_FALSE(rank.events.kernels.empty());
  int64_t first = INT64_MAX;
  for (const trace::KernelEvent& kernel : rank.events.kernels) first = std::min(first, kernel.start_ns);
  const int64_t session_first =
      QueryInt(kTorchrun, "SELECT min(start) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE globalPid / 16777216 % 16777216 = 144");
  const int64_t utc = QueryInt(kTorchrun, "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME");
  const int64_t system_clock = QueryInt(kTorchrun, "SELECT systemClockNs FROM TARGET_INFO_SESSION_START_TIME");
  EXPECT_EQ(first, utc + (session_first - system_clock));
  EXPECT_EQ(rank.meta.entries.at("nsys.time_anchor"), "utcEpochNs + (timestamp - systemClockNs)");
}

TEST(NsysImportTest, TorchrunRowCountsMatchTheExport) {
  RANKSCOPE_REQUIRE_SHARED_DATA(kRealExports);
  TempDir dir;
  const std::map<int64_t, trace::RankTrace> ranks = LoadByPid(ImportOk(kTorchrun, dir));
  for (int64_t pid : {144, 145}) {
    SCOPED_TRACE(pid);
    ASSERT_TRUE(ranks.contains(pid));
    const trace::EventTables& events = ranks.at(pid).events;
    const std::string of_pid = " WHERE globalPid / 16777216 % 16777216 = " + std::to_string(pid);
    const std::string of_tid = " WHERE globalTid / 16777216 % 16777216 = " + std::to_string(pid);
    EXPECT_EQ(static_cast<int64_t>(events.kernels.size()),
              QueryInt(kTorchrun, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL" + of_pid));
    EXPECT_EQ(static_cast<int64_t>(events.memcpys.size()),
              QueryInt(kTorchrun, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY" + of_pid));
    EXPECT_EQ(static_cast<int64_t>(events.memsets.size()),
              QueryInt(kTorchrun, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMSET" + of_pid));
    EXPECT_EQ(static_cast<int64_t>(events.api_calls.size()),
              QueryInt(kTorchrun, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME" + of_tid));
    EXPECT_EQ(static_cast<int64_t>(events.syncs.size()),
              QueryInt(kTorchrun, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION" + of_pid));
    EXPECT_EQ(static_cast<int64_t>(events.nvtx_ranges.size()),
              QueryInt(kTorchrun, "SELECT count(*) FROM NVTX_EVENTS" + of_tid + " AND eventType = 59"));
    // Kernels run on one stream lane of the process's one device, named after the stream.
    std::set<trace::LaneId> lanes;
    for (const trace::KernelEvent& kernel : events.kernels) lanes.insert(kernel.lane);
    ASSERT_EQ(lanes.size(), 1u);
    const trace::Lane* lane = ranks.at(pid).lane(*lanes.begin());
    ASSERT_NE(lane, nullptr);
    EXPECT_EQ(lane->kind, trace::LaneKind::kGpuStream);
    EXPECT_EQ(lane->device, pid == 144 ? 0 : 1);
    EXPECT_EQ(lane->pid, pid);
    const int64_t stream = QueryInt(kTorchrun, "SELECT min(streamId) FROM CUPTI_ACTIVITY_KIND_KERNEL" + of_pid);
    EXPECT_EQ(lane->stream, static_cast<uint64_t>(stream));
    EXPECT_EQ(lane->name, "stream " + std::to_string(stream));
  }
}

TEST(NsysImportTest, TorchrunThreadNamesAndNcclRanges) {
  RANKSCOPE_REQUIRE_SHARED_DATA(kRealExports);
  TempDir dir;
  const std::map<int64_t, trace::RankTrace> ranks = LoadByPid(ImportOk(kTorchrun, dir));
  for (int64_t pid : {144, 145}) {
    SCOPED_TRACE(pid);
    ASSERT_TRUE(ranks.contains(pid));
    const trace::RankTrace& rank = ranks.at(pid);
    // ThreadNames: the main thread (tid == pid) is "python3".
    const trace::Lane* main = ThreadLane(rank, pid);
    ASSERT_NE(main, nullptr);
    EXPECT_EQ(main->name, "python3");
    EXPECT_EQ(main->pid, pid);
    // NCCL's API ranges, in domain NCCL, on the thread that called NCCL.
    int64_t nccl = 0;
    std::set<std::string> names;
    for (const trace::NvtxRangeEvent& range : rank.events.nvtx_ranges) {
      if (rank.str(range.domain) != "NCCL") continue;
      ++nccl;
      names.insert(rank.str(range.name));
      EXPECT_EQ(range.style, trace::NvtxRangeStyle::kPushPop);
    }
    EXPECT_EQ(nccl, QueryInt(kTorchrun, "SELECT count(*) FROM NVTX_EVENTS WHERE domainId = 1 AND "
                                        "globalTid / 16777216 % 16777216 = " + std::to_string(pid)));
    EXPECT_EQ(names, (std::set<std::string>{"ncclCommCount", "ncclGroupEnd", "ncclGroupStart", "ncclRecv", "ncclSend"}));
    // The default domain's ranges (aten ops) stay in the default domain.
    const bool aten = std::any_of(rank.events.nvtx_ranges.begin(), rank.events.nvtx_ranges.end(),
                                  [&](const trace::NvtxRangeEvent& range) {
                                    return range.domain == trace::kEmptyString &&
                                           rank.str(range.name).starts_with("aten::");
                                  });
    EXPECT_TRUE(aten);
  }
}

TEST(NsysImportTest, TorchrunKernelRuntimeCorrelation) {
  RANKSCOPE_REQUIRE_SHARED_DATA(kRealExports);
  TempDir dir;
  const std::map<int64_t, trace::RankTrace> ranks = LoadByPid(ImportOk(kTorchrun, dir));
  for (int64_t pid : {144, 145}) {
    SCOPED_TRACE(pid);
    ASSERT_TRUE(ranks.contains(pid));
    const trace::RankTrace& rank = ranks.at(pid);
    std::map<uint64_t, const trace::ApiCallEvent*> calls;
    for (const trace::ApiCallEvent& call : rank.events.api_calls) calls[call.correlation_id] = &call;
    int64_t launched = 0;
    for (const trace::KernelEvent& kernel : rank.events.kernels) {
      auto call = calls.find(kernel.correlation_id);
      if (call == calls.end()) continue;
      ++launched;
      const std::string& name = rank.str(call->second->name);
      EXPECT_TRUE(name == "cudaLaunchKernel" || name == "cuLaunchKernelEx") << name;
      EXPECT_LE(call->second->start_ns, kernel.start_ns);
      EXPECT_EQ(call->second->domain, name == "cudaLaunchKernel" ? trace::ApiDomain::kRuntime : trace::ApiDomain::kDriver);
    }
    // The export was cut to a time window: a few kernels' launches fell outside it.
    EXPECT_EQ(launched, QueryInt(kTorchrun, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN "
                                            "CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId AND "
                                            "r.globalTid / 16777216 = k.globalPid / 16777216 WHERE "
                                            "k.globalPid / 16777216 % 16777216 = " + std::to_string(pid)));
    EXPECT_GT(launched, 1900);
  }
}

TEST(NsysImportTest, TorchrunSchema3Columns) {
  RANKSCOPE_REQUIRE_SHARED_DATA(kRealExports);
  TempDir dir;
  const std::map<int64_t, trace::RankTrace> ranks = LoadByPid(ImportOk(kTorchrun, dir));
  ASSERT_TRUE(ranks.contains(144));
  const trace::RankTrace& rank = ranks.at(144);
  // syncType (3.x; deprecatedSyncType is NULL): kinds by ENUM_CUPTI_SYNC_TYPE.
  std::map<trace::SyncKind, int64_t> kinds;
  for (const trace::SyncEvent& sync : rank.events.syncs) {
    ++kinds[sync.sync_kind];
    // CUPTI's "not applicable" (0xFFFFFFFF) becomes 0; every sync was made by a runtime call.
    EXPECT_NE(sync.stream, 0xFFFFFFFFu);
    EXPECT_NE(sync.cuda_event_id, 0xFFFFFFFFu);
    const trace::Lane* lane = rank.lane(sync.lane);
    ASSERT_NE(lane, nullptr);
    EXPECT_NE(lane->tid, 0);
  }
  const std::string of_pid = " AND globalPid / 16777216 % 16777216 = 144";
  EXPECT_EQ(kinds[trace::SyncKind::kEventSynchronize],
            QueryInt(kTorchrun, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION WHERE syncType = 1" + of_pid));
  EXPECT_EQ(kinds[trace::SyncKind::kStreamWaitEvent],
            QueryInt(kTorchrun, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION WHERE syncType = 2" + of_pid));
  EXPECT_EQ(kinds[trace::SyncKind::kStreamSynchronize],
            QueryInt(kTorchrun, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION WHERE syncType = 3" + of_pid));
  // Memory kinds by ENUM_CUDA_MEM_KIND: device-to-device copies between device memory.
  int64_t dtod = 0;
  for (const trace::MemcpyEvent& copy : rank.events.memcpys) {
    if (copy.copy_kind != trace::CopyKind::kDeviceToDevice) continue;
    ++dtod;
    EXPECT_EQ(copy.src_kind, trace::MemoryKind::kDevice);
    EXPECT_EQ(copy.dst_kind, trace::MemoryKind::kDevice);
    EXPECT_EQ(rank.str(copy.name), "Memcpy DtoD");
  }
  EXPECT_EQ(dtod, QueryInt(kTorchrun, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE copyKind = 8" + of_pid));
  for (const trace::MemsetEvent& set : rank.events.memsets) EXPECT_EQ(set.memory_kind, trace::MemoryKind::kDevice);
}

TEST(NsysImportTest, SaxpySchema2Columns) {
  RANKSCOPE_REQUIRE_SHARED_DATA(kRealExports);
  TempDir dir;
  const ImportResult imported = ImportOk(kSaxpy, dir);
  // No systemClockNs in 2022 exports: the anchor is approximate, and the note says so.
  EXPECT_TRUE(HasNote(imported, "saxpy_mpi_cuda_schema2.sqlite: the export has no systemClockNs")) << AllNotes(imported);
  // nsys's MPI trace named the thread "MPI Rank 0".
  EXPECT_TRUE(HasNote(imported, "saxpy_mpi_cuda_schema2.sqlite: ranks from nsys's MPI trace, thread 'MPI Rank 0' "
                                "(pid 1230493 = rank 0)"))
      << AllNotes(imported);
  const std::map<int64_t, trace::RankTrace> ranks = LoadByPid(imported);
  ASSERT_TRUE(ranks.contains(1230493));
  const trace::RankTrace& rank = ranks.at(1230493);
  EXPECT_EQ(rank.meta.rank, 0);
  EXPECT_EQ(rank.meta.host, "nid001608");
  EXPECT_EQ(rank.meta.command_line, "./saxpy-mpi-cuda");
  EXPECT_EQ(rank.meta.entries.at("nsys.schema_version"), "2.9.1");
  EXPECT_EQ(rank.meta.entries.at("import.rank_source"), "nsys mpi trace");
  EXPECT_EQ(rank.meta.backend, "");
  // Times: utcEpochNs + timestamp.
  const int64_t utc = QueryInt(kSaxpy, "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME");
  const int64_t first = QueryInt(kSaxpy, "SELECT min(start) FROM CUPTI_ACTIVITY_KIND_KERNEL");
  ASSERT_EQ(rank.events.kernels.size(), 5u);
  int64_t ours = INT64_MAX;
  for (const trace::KernelEvent& kernel : rank.events.kernels) ours = std::min(ours, kernel.start_ns);
  EXPECT_EQ(ours, utc + first);
  // Kernel columns of schema 2.9.1.
  for (const trace::KernelEvent& kernel : rank.events.kernels) {
    EXPECT_EQ(kernel.grid, (trace::Dim3{2, 1, 1}));
    EXPECT_EQ(kernel.block, (trace::Dim3{512, 1, 1}));
    EXPECT_EQ(kernel.registers_per_thread, 26u);
  }
  // Schema 2 has no ENUM tables: memory kinds by nsys's documented numbers (0 pageable,
  // 2 device), which differ from rankscope's.
  ASSERT_EQ(rank.events.memcpys.size(), 15u);
  int64_t htod = 0;
  for (const trace::MemcpyEvent& copy : rank.events.memcpys) {
    EXPECT_EQ(copy.bytes, 262144000u);
    if (copy.copy_kind != trace::CopyKind::kHostToDevice) continue;
    ++htod;
    EXPECT_EQ(copy.src_kind, trace::MemoryKind::kPageable);
    EXPECT_EQ(copy.dst_kind, trace::MemoryKind::kDevice);
  }
  EXPECT_EQ(htod, QueryInt(kSaxpy, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE copyKind = 1"));
  // API names lose their "_v4000" suffix; runtime (eventClass 0) and driver (1) calls.
  std::set<std::string> api;
  for (const trace::ApiCallEvent& call : rank.events.api_calls) api.insert(rank.str(call.name));
  EXPECT_TRUE(api.contains("cudaHostRegister"));
  EXPECT_TRUE(api.contains("cuModuleGetLoadingMode"));
  EXPECT_FALSE(std::any_of(api.begin(), api.end(), [](const std::string& name) { return name.ends_with("_v4000"); }));
  EXPECT_EQ(static_cast<int64_t>(rank.events.api_calls.size()),
            QueryInt(kSaxpy, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME"));
  // NVTX: the MPI domain (named by its eventType 75 row) and registered strings (textId).
  int64_t mpi = 0;
  for (const trace::NvtxRangeEvent& range : rank.events.nvtx_ranges) {
    if (rank.str(range.domain) != "MPI") continue;
    ++mpi;
    EXPECT_TRUE(rank.str(range.name).starts_with("MPI_")) << rank.str(range.name);
  }
  EXPECT_EQ(mpi, QueryInt(kSaxpy, "SELECT count(*) FROM NVTX_EVENTS WHERE eventType = 59 AND domainId = 1"));
  const trace::Lane* main = ThreadLane(rank, 1230493);
  ASSERT_NE(main, nullptr);
  EXPECT_EQ(main->name, "MPI Rank 0");
}

// ---- hand-made exports: exact rows ---------------------------------------------------------

// One process (pid 500, threads 500 and 501) with one row of every kind the importer reads,
// plus rows it must skip, and a process (pid 600) with NVTX only, which is no rank.
void WriteEveryKindExport(NsysFile& f) {
  f.Exec(kStringIdsDdl);
  f.Exec("INSERT INTO StringIds VALUES (1, 'void gemm<float>(float*)'), (2, 'gemm'), "
         "(3, 'ncclDevKernel_AllReduce_Sum_f32_RING_LL'), (10, 'cudaLaunchKernel_v7000'), (11, 'cuLaunchKernelEx'), "
         "(12, 'cudaStreamSynchronize_v3020'), (20, 'forward'), (30, 'trainer-main'), (31, 'worker')");
  f.Exec(kProcessesDdl);
  f.Exec("INSERT INTO PROCESSES VALUES (" + std::to_string(GlobalPid(500)) + ", 500, 'python3'), (" +
         std::to_string(GlobalPid(600)) + ", 600, 'helper')");
  f.Exec("CREATE TABLE ThreadNames (nameId INTEGER NOT NULL, priority INTEGER, globalTid INTEGER)");
  f.Exec("INSERT INTO ThreadNames VALUES (30, 0, " + std::to_string(GlobalTid(500, 500)) + "), (31, 0, " +
         std::to_string(GlobalTid(500, 501)) + ")");
  f.Exec("CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT, localTime TEXT, "
         "systemClockNs INTEGER)");
  f.Exec("INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (" + std::to_string(kUtcEpochNs) + ", '', '', " +
         std::to_string(kSystemClockNs) + ")");
  f.Exec("CREATE TABLE TARGET_INFO_SYSTEM_ENV (globalVid INTEGER, devStateName TEXT NOT NULL, name TEXT NOT NULL, "
         "nameEnum INTEGER NOT NULL, value TEXT NOT NULL)");
  f.Exec("INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (" + std::to_string(kVm) + ", 'Local', 'Hostname', 1, 'node17')");
  // Memory kinds by name: id 5 is MANAGED here, not DEVICE_STATIC as documented.
  f.Exec("CREATE TABLE ENUM_CUDA_MEM_KIND (id INTEGER PRIMARY KEY, name TEXT, label TEXT)");
  f.Exec("INSERT INTO ENUM_CUDA_MEM_KIND VALUES (0, 'CUDA_MEMOPR_MEMORY_KIND_PAGEABLE', ''), "
         "(1, 'CUDA_MEMOPR_MEMORY_KIND_PINNED', ''), (2, 'CUDA_MEMOPR_MEMORY_KIND_DEVICE', ''), "
         "(5, 'CUDA_MEMOPR_MEMORY_KIND_MANAGED', '')");

  const std::string p500 = std::to_string(GlobalPid(500));
  f.Exec(kKernelDdl);
  f.Exec("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES "
         "(1001000, 1003000, 0, 1, 0, 7, 11, " + p500 + ", 1, 2, 4, 2, 1, 256, 1, 1, 32, 1024, 2048), "
         "(1002000, 1004000, 0, 1, 0, 13, 12, " + p500 + ", 3, 3, 8, 1, 1, 512, 1, 1, 96, 0, 4096), "
         "(1005000, 1004000, 0, 1, 0, 7, 15, " + p500 + ", 1, 2, 1, 1, 1, 1, 1, 1, 1, 0, 0)");  // ends first
  f.Exec("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, \"end\", deviceId, streamId, globalPid, demangledName) "
         "VALUES (1006000, 1007000, 0, NULL, " + p500 + ", 1)");  // no stream
  f.Exec("CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, \"end\" INTEGER NOT NULL, "
         "deviceId INTEGER, contextId INTEGER, streamId INTEGER, correlationId INTEGER, globalPid INTEGER, "
         "bytes INTEGER, copyKind INTEGER, srcKind INTEGER, dstKind INTEGER, srcDeviceId INTEGER, dstDeviceId INTEGER)");
  f.Exec("INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES "
         "(1000100, 1000600, 0, 1, 7, 13, " + p500 + ", 4096, 1, 0, 2, NULL, NULL), "
         "(1000700, 1000800, 0, 1, 7, 16, " + p500 + ", 8192, 10, 2, 5, 0, 1), "
         "(1000900, 1000950, 0, 1, 7, 17, " + p500 + ", 64, 11, 4, 4, NULL, NULL)");
  f.Exec("CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER NOT NULL, \"end\" INTEGER NOT NULL, "
         "deviceId INTEGER, contextId INTEGER, streamId INTEGER, correlationId INTEGER, globalPid INTEGER, "
         "value INTEGER, bytes INTEGER, memKind INTEGER)");
  f.Exec("INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES (1004000, 1004500, 0, 1, 7, 18, " + p500 + ", 255, 512, 5)");
  f.Exec(kRuntimeDdl);
  f.Exec("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES "
         "(1000500, 1000900, 0, " + std::to_string(GlobalTid(500, 500)) + ", 11, 10, 0), "
         "(1001500, 1001600, 1, " + std::to_string(GlobalTid(500, 501)) + ", 12, 11, 0), "
         "(1005000, 1006000, 0, " + std::to_string(GlobalTid(500, 501)) + ", 14, 12, 700), "
         "(1006100, 1006200, 0, NULL, 19, 10, 0)");  // no thread
  f.Exec("CREATE TABLE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (start INTEGER NOT NULL, \"end\" INTEGER NOT NULL, "
         "deviceId INTEGER, contextId INTEGER, streamId INTEGER, correlationId INTEGER, globalPid INTEGER, "
         "deprecatedSyncType INTEGER, syncType INTEGER, eventId INTEGER)");
  f.Exec("INSERT INTO CUPTI_ACTIVITY_KIND_SYNCHRONIZATION VALUES "
         "(1005100, 1005900, 0, 1, 7, 14, " + p500 + ", NULL, 3, 4294967295), "
         "(1006300, 1006400, 0, 1, 4294967295, 99, " + p500 + ", NULL, 4, 4294967295), "
         "(1006500, 1006600, 0, 1, 7, 98, " + p500 + ", NULL, 1, 42)");
  f.Exec("CREATE TABLE CUPTI_ACTIVITY_KIND_OVERHEAD (start INTEGER NOT NULL, \"end\" INTEGER NOT NULL, "
         "eventClass INTEGER, globalTid INTEGER, correlationId INTEGER, nameId INTEGER, overheadType INTEGER)");
  f.Exec("INSERT INTO CUPTI_ACTIVITY_KIND_OVERHEAD VALUES (1000010, 1000020, 0, " +
         std::to_string(GlobalTid(500, 500)) + ", 0, NULL, 3)");

  const std::string t500 = std::to_string(GlobalTid(500, 500));
  const std::string t501 = std::to_string(GlobalTid(500, 501));
  f.Exec(kNvtxDdl);
  f.Exec("INSERT INTO NVTX_EVENTS (start, \"end\", eventType, text, globalTid, domainId) VALUES "
         "(999000, NULL, 75, 'MyDomain', " + t500 + ", 5)");
  f.Exec("INSERT INTO NVTX_EVENTS (start, eventType, category, text, globalTid, domainId) VALUES "
         "(999100, 33, 3, 'io', " + t500 + ", 5)");
  f.Exec("INSERT INTO NVTX_EVENTS (start, \"end\", eventType, category, color, text, globalTid, domainId, int64Value) "
         "VALUES (1000000, 1007000, 59, 3, 4278255360, 'train_step', " + t500 + ", 5, -42)");
  f.Exec("INSERT INTO NVTX_EVENTS (start, \"end\", eventType, textId, globalTid, domainId, jsonText) VALUES "
         "(1000200, 1000800, 59, 20, " + t500 + ", 0, '{\"bytes\": 128}')");
  f.Exec("INSERT INTO NVTX_EVENTS (start, \"end\", eventType, text, globalTid, endGlobalTid, domainId, doubleValue) "
         "VALUES (1001000, 1006000, 60, 'async', " + t500 + ", " + t501 + ", 0, 2.5)");
  f.Exec("INSERT INTO NVTX_EVENTS (start, eventType, text, globalTid, domainId, uint32Value) VALUES "
         "(1002500, 34, 'checkpoint', " + t501 + ", 0, 7)");
  f.Exec("INSERT INTO NVTX_EVENTS (start, \"end\", eventType, text, globalTid, domainId) VALUES "
         "(1003000, NULL, 59, 'never ends', " + t500 + ", 0)");
  f.Exec("INSERT INTO NVTX_EVENTS (start, \"end\", eventType, text, globalTid, domainId) VALUES "
         "(1003000, 1003500, 59, 'elsewhere', " + std::to_string(GlobalTid(600, 600)) + ", 0)");
}

TEST(NsysImportTest, HandMadeExportRowsExactly) {
  TempDir dir;
  const fs::path path = dir / "every_kind.sqlite";
  {
    NsysFile file(path);
    WriteEveryKindExport(file);
  }
  const ImportResult imported = ImportOk(path, dir);
  ASSERT_EQ(imported.rank_files.size(), 1u);
  EXPECT_TRUE(HasNote(imported, "every_kind.sqlite: ranks by process order (pid 500 = rank 0)")) << AllNotes(imported);
  // Damaged rows: counted on their rank, or on the file when they name no process.
  const std::string damaged_kernels =
      "left out 2 kernel events: 1 with end before start, 1 without a valid deviceId/streamId (first: "
      "CUPTI_ACTIVITY_KIND_KERNEL: start 1005000, end 1004000)";
  const std::string unended = "left out 1 NVTX range event that never ended (no end) (first: NVTX_EVENTS: end is NULL)";
  EXPECT_TRUE(HasNote(imported, "every_kind.sqlite (pid 500): " + damaged_kernels)) << AllNotes(imported);
  EXPECT_TRUE(HasNote(imported, "every_kind.sqlite (pid 500): " + unended)) << AllNotes(imported);
  EXPECT_TRUE(HasNote(imported, "every_kind.sqlite: left out 1 CUDA API call event without a valid globalTid (first: "
                                "CUPTI_ACTIVITY_KIND_RUNTIME: globalTid is NULL)"))
      << AllNotes(imported);
  EXPECT_TRUE(HasNote(imported, "every_kind.sqlite: left out 1 events of 1 processes without CUDA activity or API "
                                "calls (pid 600 'helper')"))
      << AllNotes(imported);
  const trace::RankTrace rank = Load(imported.rank_files[0]);
  EXPECT_EQ(rank.meta.rank, 0);
  EXPECT_EQ(rank.meta.world_size, 1);
  EXPECT_EQ(rank.meta.pid, 500);
  EXPECT_EQ(rank.meta.host, "node17");
  EXPECT_EQ(rank.meta.command_line, "python3");
  EXPECT_EQ(rank.meta.backend, "nccl");
  EXPECT_EQ(rank.meta.entries.at("nvtx.category.MyDomain.3"), "io");
  EXPECT_EQ(rank.meta.entries.at("import.left_out.kernel"), damaged_kernels);
  EXPECT_EQ(rank.meta.entries.at("import.left_out.nvtx_range"), unended);
  EXPECT_FALSE(rank.meta.entries.contains("import.left_out.cuda_api_call"));  // of no rank
  const trace::EventTables& e = rank.events;

  // Kernels: wall-clock times, names, dims, lanes per stream.
  ASSERT_EQ(e.kernels.size(), 2u);
  const trace::KernelEvent& gemm = e.kernels[0].correlation_id == 11 ? e.kernels[0] : e.kernels[1];
  const trace::KernelEvent& nccl = e.kernels[0].correlation_id == 11 ? e.kernels[1] : e.kernels[0];
  EXPECT_EQ(gemm.start_ns, Wall(1001000));
  EXPECT_EQ(gemm.end_ns, Wall(1003000));
  EXPECT_EQ(rank.str(gemm.name), "void gemm<float>(float*)");
  EXPECT_EQ(gemm.grid, (trace::Dim3{4, 2, 1}));
  EXPECT_EQ(gemm.block, (trace::Dim3{256, 1, 1}));
  EXPECT_EQ(gemm.registers_per_thread, 32u);
  EXPECT_EQ(gemm.static_shared_bytes, 1024u);
  EXPECT_EQ(gemm.dynamic_shared_bytes, 2048u);
  EXPECT_EQ(rank.str(nccl.name), "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
  EXPECT_EQ(nccl.correlation_id, 12u);
  const trace::Lane* gemm_lane = rank.lane(gemm.lane);
  const trace::Lane* nccl_lane = rank.lane(nccl.lane);
  ASSERT_NE(gemm_lane, nullptr);
  ASSERT_NE(nccl_lane, nullptr);
  EXPECT_EQ(gemm_lane->kind, trace::LaneKind::kGpuStream);
  EXPECT_EQ(gemm_lane->device, 0);
  EXPECT_EQ(gemm_lane->context, 1u);
  EXPECT_EQ(gemm_lane->stream, 7u);
  EXPECT_EQ(gemm_lane->name, "stream 7");
  EXPECT_EQ(nccl_lane->stream, 13u);

  // Copies: kinds 1:1 up to 10, memory kinds by ENUM_CUDA_MEM_KIND names, peer devices.
  ASSERT_EQ(e.memcpys.size(), 3u);
  std::map<uint64_t, const trace::MemcpyEvent*> copies;
  for (const trace::MemcpyEvent& copy : e.memcpys) copies[copy.correlation_id] = &copy;
  const trace::MemcpyEvent& htod = *copies.at(13);
  EXPECT_EQ(htod.start_ns, Wall(1000100));
  EXPECT_EQ(htod.end_ns, Wall(1000600));
  EXPECT_EQ(htod.bytes, 4096u);
  EXPECT_EQ(htod.copy_kind, trace::CopyKind::kHostToDevice);
  EXPECT_EQ(htod.src_kind, trace::MemoryKind::kPageable);
  EXPECT_EQ(htod.dst_kind, trace::MemoryKind::kDevice);
  EXPECT_EQ(htod.src_device, -1);
  EXPECT_EQ(rank.str(htod.name), "Memcpy HtoD");
  EXPECT_EQ(htod.lane, gemm.lane);
  const trace::MemcpyEvent& peer = *copies.at(16);
  EXPECT_EQ(peer.copy_kind, trace::CopyKind::kPeerToPeer);
  EXPECT_EQ(peer.src_kind, trace::MemoryKind::kDevice);
  EXPECT_EQ(peer.dst_kind, trace::MemoryKind::kManaged);
  EXPECT_EQ(peer.src_device, 0);
  EXPECT_EQ(peer.dst_device, 1);
  const trace::MemcpyEvent& uvm = *copies.at(17);
  EXPECT_EQ(uvm.copy_kind, trace::CopyKind::kUnknown);
  EXPECT_EQ(uvm.src_kind, trace::MemoryKind::kUnknown);  // id 4: not in this ENUM table
  EXPECT_EQ(rank.str(uvm.name), "Memcpy UVM HtoD");

  ASSERT_EQ(e.memsets.size(), 1u);
  EXPECT_EQ(e.memsets[0].start_ns, Wall(1004000));
  EXPECT_EQ(e.memsets[0].bytes, 512u);
  EXPECT_EQ(e.memsets[0].value, 255u);
  EXPECT_EQ(e.memsets[0].memory_kind, trace::MemoryKind::kManaged);
  EXPECT_EQ(e.memsets[0].correlation_id, 18u);

  // API calls on their threads, named by ThreadNames.
  ASSERT_EQ(e.api_calls.size(), 3u);
  std::map<uint64_t, const trace::ApiCallEvent*> calls;
  for (const trace::ApiCallEvent& call : e.api_calls) calls[call.correlation_id] = &call;
  const trace::ApiCallEvent& launch = *calls.at(11);
  EXPECT_EQ(rank.str(launch.name), "cudaLaunchKernel");
  EXPECT_EQ(launch.domain, trace::ApiDomain::kRuntime);
  EXPECT_EQ(launch.start_ns, Wall(1000500));
  EXPECT_EQ(launch.end_ns, Wall(1000900));
  const trace::Lane* main = rank.lane(launch.lane);
  ASSERT_NE(main, nullptr);
  EXPECT_EQ(main->kind, trace::LaneKind::kCpuThread);
  EXPECT_EQ(main->tid, 500);
  EXPECT_EQ(main->pid, 500);
  EXPECT_EQ(main->name, "trainer-main");
  const trace::ApiCallEvent& driver = *calls.at(12);
  EXPECT_EQ(rank.str(driver.name), "cuLaunchKernelEx");
  EXPECT_EQ(driver.domain, trace::ApiDomain::kDriver);
  const trace::Lane* worker = rank.lane(driver.lane);
  ASSERT_NE(worker, nullptr);
  EXPECT_EQ(worker->tid, 501);
  EXPECT_EQ(worker->name, "worker");
  EXPECT_EQ(calls.at(14)->return_code, 700);
  EXPECT_EQ(rank.str(calls.at(14)->name), "cudaStreamSynchronize");

  // Synchronizations: on the thread of their API call, else a lane of their own.
  ASSERT_EQ(e.syncs.size(), 3u);
  std::map<uint64_t, const trace::SyncEvent*> syncs;
  for (const trace::SyncEvent& sync : e.syncs) syncs[sync.correlation_id] = &sync;
  const trace::SyncEvent& stream_sync = *syncs.at(14);
  EXPECT_EQ(stream_sync.sync_kind, trace::SyncKind::kStreamSynchronize);
  EXPECT_EQ(stream_sync.lane, driver.lane);
  EXPECT_EQ(stream_sync.stream, 7u);
  EXPECT_EQ(stream_sync.cuda_event_id, 0u);
  EXPECT_EQ(stream_sync.context, 1u);
  EXPECT_EQ(stream_sync.start_ns, Wall(1005100));
  EXPECT_EQ(rank.str(stream_sync.name), "Stream synchronize");
  const trace::SyncEvent& context_sync = *syncs.at(99);
  EXPECT_EQ(context_sync.sync_kind, trace::SyncKind::kContextSynchronize);
  EXPECT_EQ(context_sync.stream, 0u);
  const trace::Lane* unknown = rank.lane(context_sync.lane);
  ASSERT_NE(unknown, nullptr);
  EXPECT_EQ(unknown->tid, 0);
  EXPECT_EQ(unknown->name, "CUDA synchronization (thread unknown)");
  EXPECT_EQ(syncs.at(98)->sync_kind, trace::SyncKind::kEventSynchronize);
  EXPECT_EQ(syncs.at(98)->cuda_event_id, 42u);

  // Overheads: nsys's numbering (3 = buffer flush) without ENUM_CUPTI_OVERHEAD_TYPE.
  ASSERT_EQ(e.overheads.size(), 1u);
  EXPECT_EQ(e.overheads[0].overhead_kind, trace::OverheadKind::kCuptiBufferFlush);
  EXPECT_EQ(rank.str(e.overheads[0].name), "CUPTI buffer flush");
  EXPECT_EQ(e.overheads[0].lane, launch.lane);

  // NVTX: domain names, categories, colors, payloads, registered strings, cross-thread ends.
  ASSERT_EQ(e.nvtx_ranges.size(), 3u);
  std::map<std::string, const trace::NvtxRangeEvent*> ranges;
  for (const trace::NvtxRangeEvent& range : e.nvtx_ranges) ranges[rank.str(range.name)] = &range;
  const trace::NvtxRangeEvent& step = *ranges.at("train_step");
  EXPECT_EQ(rank.str(step.domain), "MyDomain");
  EXPECT_EQ(step.category, 3u);
  EXPECT_EQ(step.color, 0xFF00FF00u);
  EXPECT_EQ(step.payload, (trace::Payload{trace::PayloadKind::kInt64, -42, 0.0}));
  EXPECT_EQ(step.style, trace::NvtxRangeStyle::kPushPop);
  EXPECT_EQ(step.start_ns, Wall(1000000));
  EXPECT_EQ(step.end_ns, Wall(1007000));
  EXPECT_EQ(step.lane, launch.lane);
  const trace::NvtxRangeEvent& forward = *ranges.at("forward");
  EXPECT_EQ(forward.domain, trace::kEmptyString);
  EXPECT_EQ(rank.str(forward.args), "{\"bytes\": 128}");
  EXPECT_EQ(forward.payload.kind, trace::PayloadKind::kNone);
  const trace::NvtxRangeEvent& async = *ranges.at("async");
  EXPECT_EQ(async.style, trace::NvtxRangeStyle::kStartEnd);
  EXPECT_EQ(async.lane, launch.lane);
  EXPECT_EQ(async.end_lane, driver.lane);
  EXPECT_EQ(async.payload, (trace::Payload{trace::PayloadKind::kDouble, 0, 2.5}));
  ASSERT_EQ(e.nvtx_marks.size(), 1u);
  EXPECT_EQ(rank.str(e.nvtx_marks[0].name), "checkpoint");
  EXPECT_EQ(e.nvtx_marks[0].start_ns, Wall(1002500));
  EXPECT_EQ(e.nvtx_marks[0].end_ns, Wall(1002500));
  EXPECT_EQ(e.nvtx_marks[0].lane, driver.lane);
  EXPECT_EQ(e.nvtx_marks[0].payload, (trace::Payload{trace::PayloadKind::kUint32, 7, 0.0}));
}

// ---- CUDA memory usage (nsys --cuda-memory-usage=true) --------------------------------------

constexpr const char* kMemoryUsageDdl =
    "CREATE TABLE CUDA_GPU_MEMORY_USAGE_EVENTS (start INTEGER NOT NULL, globalPid INTEGER NOT NULL, deviceId INTEGER "
    "NOT NULL, contextId INTEGER NOT NULL, address INTEGER NOT NULL, pc INTEGER NOT NULL, bytes INTEGER, memKind "
    "INTEGER NOT NULL, memoryOperationType INTEGER, name TEXT, correlationId INTEGER)";

// A row of CUDA_GPU_MEMORY_USAGE_EVENTS: `operation` 0 allocates, 1 releases; memKind as
// nsys numbers it (1 pinned, 2 device).
std::string MemoryUsageRow(int64_t start, int64_t pid, int64_t device, const std::string& bytes, int64_t kind,
                           const std::string& operation) {
  return "INSERT INTO CUDA_GPU_MEMORY_USAGE_EVENTS VALUES (" + std::to_string(start) + ", " +
         std::to_string(GlobalPid(pid)) + ", " + std::to_string(device) + ", 1, " + std::to_string(start * 16) +
         ", 0, " + bytes + ", " + std::to_string(kind) + ", " + operation + ", NULL, 0)";
}

// The samples of the counter lane `name`, in time order, as (ts, value); the lane's device in
// `device`.
std::vector<std::pair<int64_t, double>> CounterSamples(const trace::RankTrace& rank, const std::string& name,
                                                       int32_t* device = nullptr) {
  trace::LaneId id = trace::kNoLane;
  for (const trace::Lane& lane : rank.lanes) {
    if (lane.kind != trace::LaneKind::kCounter || lane.name != name) continue;
    id = lane.id;
    if (device != nullptr) *device = lane.device;
    EXPECT_EQ(lane.pid, rank.meta.pid) << name;
  }
  EXPECT_NE(id, trace::kNoLane) << "no counter lane '" << name << "'";
  std::vector<std::pair<int64_t, double>> samples;
  for (const trace::CounterSample& sample : rank.events.counter_samples) {
    if (sample.lane == id) samples.emplace_back(sample.ts_ns, sample.value);
  }
  std::stable_sort(samples.begin(), samples.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return samples;
}

// Per process, device and memory kind, the bytes live after each row: allocations add,
// releases subtract, never below zero. Rows out of time order are taken in time order; the
// operation's numbers come from ENUM_CUDA_DEV_MEM_EVENT_OPER, else nsys's documented ones.
TEST(NsysImportTest, CudaMemoryUsageRowsAreRunningTotalsPerDeviceAndKind) {
  for (const bool with_enum : {true, false}) {
    SCOPED_TRACE(with_enum ? "with ENUM_CUDA_DEV_MEM_EVENT_OPER" : "without it");
    TempDir dir;
    const fs::path path = dir / "memory.sqlite";
    {
      NsysFile f(path);
      WriteMinimalExport(f);
      f.Exec("CREATE TABLE ENUM_CUDA_MEM_KIND (id INTEGER PRIMARY KEY, name TEXT, label TEXT)");
      f.Exec("INSERT INTO ENUM_CUDA_MEM_KIND VALUES (0, 'CUDA_MEMOPR_MEMORY_KIND_PAGEABLE', 'Pageable'), "
             "(1, 'CUDA_MEMOPR_MEMORY_KIND_PINNED', 'Pinned'), (2, 'CUDA_MEMOPR_MEMORY_KIND_DEVICE', 'Device')");
      if (with_enum) {
        f.Exec("CREATE TABLE ENUM_CUDA_DEV_MEM_EVENT_OPER (id INTEGER PRIMARY KEY, name TEXT, label TEXT)");
        f.Exec("INSERT INTO ENUM_CUDA_DEV_MEM_EVENT_OPER VALUES (0, 'CUDA_DEV_MEM_EVENT_OPR_ALLOCATION', "
               "'Allocation'), (1, 'CUDA_DEV_MEM_EVENT_OPR_DEALLOCATION', 'Deallocation')");
      }
      f.Exec(kMemoryUsageDdl);
      for (const std::string& row : {
               MemoryUsageRow(1000, 77, 0, "4096", 2, "0"),  MemoryUsageRow(1100, 77, 0, "1024", 2, "0"),
               MemoryUsageRow(1200, 77, 0, "512", 1, "0"),   MemoryUsageRow(1300, 77, 1, "2048", 2, "0"),
               MemoryUsageRow(1400, 77, 0, "4096", 2, "1"),  MemoryUsageRow(1500, 77, 0, "8192", 2, "1"),
               MemoryUsageRow(1600, 77, 0, "100", 2, "0"),   MemoryUsageRow(1050, 77, 0, "10", 2, "0"),
               MemoryUsageRow(1700, 88, 0, "64", 2, "0"),    // a process without CUDA activity
               MemoryUsageRow(1800, 77, 0, "NULL", 2, "0"),  MemoryUsageRow(1900, 77, 0, "64", 2, "7"),
           }) {
        f.Exec(row);
      }
    }
    const ImportResult imported = ImportOk(path, dir);
    ASSERT_EQ(imported.rank_files.size(), 1u);
    EXPECT_TRUE(HasNote(imported, "memory.sqlite: 1 CUDA memory release of CUDA_GPU_MEMORY_USAGE_EVENTS freed more "
                                  "than the counter held"))
        << AllNotes(imported);
    EXPECT_TRUE(HasNote(imported, "memory.sqlite (pid 77): left out 2 CUDA memory usage events: 1 without a valid "
                                  "bytes, 1 without a valid memoryOperationType"))
        << AllNotes(imported);
    EXPECT_TRUE(HasNote(imported, "memory.sqlite: left out 1 events of 1 processes without CUDA activity or API "
                                  "calls (pid 88)"))
        << AllNotes(imported);
    const trace::RankTrace rank = Load(imported.rank_files[0]);
    EXPECT_EQ(rank.meta.pid, 77);
    using Series = std::vector<std::pair<int64_t, double>>;
    int32_t device = -2;
    EXPECT_EQ(CounterSamples(rank, "cuda memory: device (gpu 0)", &device),
              (Series{{1000, 4096}, {1050, 4106}, {1100, 5130}, {1400, 1034}, {1500, 0}, {1600, 100}}));
    EXPECT_EQ(device, 0);
    EXPECT_EQ(CounterSamples(rank, "cuda memory: pinned (gpu 0)", &device), (Series{{1200, 512}}));
    EXPECT_EQ(device, 0);
    EXPECT_EQ(CounterSamples(rank, "cuda memory: device (gpu 1)", &device), (Series{{1300, 2048}}));
    EXPECT_EQ(device, 1);
    EXPECT_EQ(rank.events.counter_samples.size(), 8u);
    const auto counters = std::count_if(rank.lanes.begin(), rank.lanes.end(), [](const trace::Lane& lane) {
      return lane.kind == trace::LaneKind::kCounter;
    });
    EXPECT_EQ(counters, 3);
    EXPECT_TRUE(rank.meta.entries.contains("import.left_out.cuda_memory_usage"));
  }
}

// Most exports have no memory usage table: nothing changes. One without the columns read is
// set aside with a note.
TEST(NsysImportTest, WithoutAUsableMemoryUsageTableNoCounters) {
  for (const bool with_table : {false, true}) {
    TempDir dir;
    const fs::path path = dir / "no_memory.sqlite";
    {
      NsysFile f(path);
      WriteMinimalExport(f);
      if (with_table) f.Exec("CREATE TABLE CUDA_GPU_MEMORY_USAGE_EVENTS (start INTEGER, globalPid INTEGER)");
    }
    const ImportResult imported = ImportOk(path, dir);
    ASSERT_EQ(imported.rank_files.size(), 1u);
    EXPECT_EQ(HasNote(imported, "no_memory.sqlite: table CUDA_GPU_MEMORY_USAGE_EVENTS lacks a column rankscope "
                                "reads"),
              with_table)
        << AllNotes(imported);
    const trace::RankTrace rank = Load(imported.rank_files[0]);
    EXPECT_TRUE(rank.events.counter_samples.empty());
    EXPECT_EQ(rank.lanes.size(), 1u);  // the kernel's stream
  }
}

// ---- ranks -----------------------------------------------------------------------------------

// NCCL's legacy init payload schema (nsys.md §2.4): communicator id, rank count, rank, device.
void WriteNcclPayloadSchema(NsysFile& f, int64_t domain, int64_t schema) {
  f.Exec("CREATE TABLE IF NOT EXISTS NVTX_PAYLOAD_SCHEMA_ENTRIES (domainId INTEGER NOT NULL, schemaId INTEGER NOT NULL, "
         "idx INTEGER NOT NULL, flags INTEGER, type INTEGER, name TEXT, description TEXT, arrayOrUnionDetail INTEGER, "
         "offset INTEGER)");
  const std::string key = std::to_string(domain) + ", " + std::to_string(schema);
  f.Exec("INSERT INTO NVTX_PAYLOAD_SCHEMA_ENTRIES VALUES (" + key + ", 0, NULL, 18, 'NCCL communicator ID', NULL, NULL, "
         "NULL), (" + key + ", 1, NULL, 5, 'No. of ranks', NULL, NULL, 8), (" + key + ", 2, NULL, 5, 'Rank', NULL, "
         "NULL, 12), (" + key + ", 3, NULL, 5, 'CUDA device', NULL, NULL, 16)");
}

void Put64(std::string& out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out += static_cast<char>((value >> (8 * i)) & 0xFF);
}
void Put32(std::string& out, uint32_t value) {
  for (int i = 0; i < 4; ++i) out += static_cast<char>((value >> (8 * i)) & 0xFF);
}

// A binaryData blob: [domainId][schemaId][payloadSize][payloadOffset], then the payload.
std::string InitBlob(int64_t domain, int64_t schema, uint64_t comm, int ranks, int rank, int device) {
  std::string payload;
  Put64(payload, comm);
  Put32(payload, static_cast<uint32_t>(ranks));
  Put32(payload, static_cast<uint32_t>(rank));
  Put32(payload, static_cast<uint32_t>(device));
  Put32(payload, 0);
  std::string blob;
  Put64(blob, static_cast<uint64_t>(domain));
  Put64(blob, static_cast<uint64_t>(schema));
  Put64(blob, payload.size());
  Put64(blob, 32);
  return blob + payload;
}

std::string Hex(const std::string& bytes) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  for (char c : bytes) {
    out += kDigits[(static_cast<unsigned char>(c) >> 4) & 0xF];
    out += kDigits[static_cast<unsigned char>(c) & 0xF];
  }
  return out;
}

TEST(NsysImportTest, NcclInitPayloadDecidesRank) {
  TempDir dir;
  const fs::path path = dir / "nccl_init.sqlite";
  constexpr int64_t kDomain = 7;
  constexpr int64_t kSchema = 0x1000002;
  {
    NsysFile f(path);
    f.Exec(kStringIdsDdl);
    f.Exec("INSERT INTO StringIds VALUES (1, 'gemm'), (2, 'ncclCommInitRank')");
    f.Exec(kKernelDdl);
    f.Exec(KernelRow(200, 1'000, 2'000, 1));
    f.Exec(KernelRow(300, 1'000, 3'000, 1));
    f.Exec(kNvtxDdl);
    WriteNcclPayloadSchema(f, kDomain, kSchema);
    for (int64_t pid : {200, 300}) {
      f.Exec("INSERT INTO NVTX_EVENTS (start, eventType, text, globalTid, domainId) VALUES (10, 75, 'NCCL', " +
             std::to_string(GlobalTid(pid, pid)) + ", 7)");
    }
    // pid 300: a one-rank communicator first (hex text, as some exports store blobs), then the
    // world communicator, where it is rank 0 of 2; pid 200 (lower pid) is rank 1, in JSON.
    f.Exec("INSERT INTO NVTX_EVENTS (start, \"end\", eventType, textId, globalTid, domainId, binaryData) VALUES "
           "(100, 200, 59, 2, " + std::to_string(GlobalTid(300, 300)) + ", 7, '" +
           Hex(InitBlob(kDomain, kSchema, 0xAB, 1, 0, 0)) + "')");
    f.NvtxBlob(300, 400, GlobalTid(300, 300), kDomain, "ncclCommInitRank", InitBlob(kDomain, kSchema, 0xCD, 2, 0, 1));
    f.Exec("INSERT INTO NVTX_EVENTS (start, \"end\", eventType, textId, globalTid, domainId, jsonText) VALUES "
           "(300, 400, 59, 2, " + std::to_string(GlobalTid(200, 200)) + ", 7, '{\"No. of ranks\": 2, \"Rank\": 1}')");
  }
  const ImportResult imported = ImportOk(path, dir);
  EXPECT_TRUE(HasNote(imported, "nccl_init.sqlite: ranks from NCCL's ncclCommInitRank payloads (pid 200 = rank 1, "
                                "pid 300 = rank 0)"))
      << AllNotes(imported);
  const std::map<int64_t, trace::RankTrace> ranks = LoadByPid(imported);
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_EQ(ranks.at(300).meta.rank, 0);
  EXPECT_EQ(ranks.at(200).meta.rank, 1);
  EXPECT_EQ(ranks.at(300).meta.world_size, 2);
  EXPECT_EQ(ranks.at(200).meta.world_size, 2);
  EXPECT_EQ(ranks.at(300).meta.backend, "nccl");
  EXPECT_EQ(ranks.at(300).meta.entries.at("import.rank_source"), "nccl init payload");
  EXPECT_EQ(imported.rank_files[0].filename(), "rank-0.sqlite");
  // The decoded payload is the range's args.
  const trace::RankTrace& rank0 = ranks.at(300);
  ASSERT_EQ(rank0.events.nvtx_ranges.size(), 2u);
  std::set<std::string> args;
  for (const trace::NvtxRangeEvent& range : rank0.events.nvtx_ranges) {
    EXPECT_EQ(rank0.str(range.domain), "NCCL");
    args.insert(rank0.str(range.args));
  }
  EXPECT_TRUE(args.contains(
      "{\"CUDA device\":1,\"NCCL communicator ID\":205,\"No. of ranks\":2,\"Rank\":0}"))
      << *args.begin();
}

TEST(NsysImportTest, NcclPayloadsGivingOneRankTwiceFallBackToProcessOrder) {
  TempDir dir;
  const fs::path path = dir / "same_rank.sqlite";
  {
    NsysFile f(path);
    f.Exec(kStringIdsDdl);
    f.Exec("INSERT INTO StringIds VALUES (1, 'gemm')");
    f.Exec(kKernelDdl);
    f.Exec(KernelRow(200, 1'000, 2'000, 1));
    f.Exec(KernelRow(300, 1'000, 3'000, 1));
    f.Exec(kNvtxDdl);
    for (int64_t pid : {200, 300}) {
      const std::string tid = std::to_string(GlobalTid(pid, pid));
      f.Exec("INSERT INTO NVTX_EVENTS (start, eventType, text, globalTid, domainId) VALUES (10, 75, 'NCCL', " + tid +
             ", 7)");
      f.Exec("INSERT INTO NVTX_EVENTS (start, \"end\", eventType, text, globalTid, domainId, jsonText) VALUES "
             "(300, 400, 59, 'ncclCommInitRank', " + tid + ", 7, '{\"No. of ranks\": 2, \"Rank\": 0}')");
    }
  }
  const ImportResult imported = ImportOk(path, dir);
  EXPECT_TRUE(HasNote(imported, "same_rank.sqlite: ranks by process order (pid 200 = rank 0, pid 300 = rank 1): NCCL "
                                "init payloads give two processes the same rank"))
      << AllNotes(imported);
}

TEST(NsysImportTest, ProcessesWithoutNcclPayloadTakeTheRanksLeft) {
  TempDir dir;
  const fs::path path = dir / "partial.sqlite";
  {
    NsysFile f(path);
    f.Exec(kStringIdsDdl);
    f.Exec("INSERT INTO StringIds VALUES (1, 'gemm')");
    f.Exec(kKernelDdl);
    f.Exec(KernelRow(200, 1'000, 2'000, 1));
    f.Exec(KernelRow(300, 1'000, 3'000, 1));
    f.Exec(kNvtxDdl);
    const std::string tid = std::to_string(GlobalTid(200, 200));
    f.Exec("INSERT INTO NVTX_EVENTS (start, eventType, text, globalTid, domainId) VALUES (10, 75, 'NCCL', " + tid + ", 7)");
    f.Exec("INSERT INTO NVTX_EVENTS (start, \"end\", eventType, text, globalTid, domainId, jsonText) VALUES "
           "(300, 400, 59, 'ncclCommInitRank', " + tid + ", 7, '{\"No. of ranks\": 2, \"Rank\": 0}')");
  }
  const ImportResult imported = ImportOk(path, dir);
  EXPECT_TRUE(HasNote(imported, "partial.sqlite: ranks from NCCL's ncclCommInitRank payloads (pid 200 = rank 0, "
                                "pid 300 = rank 1); the others by process order"))
      << AllNotes(imported);
  const std::map<int64_t, trace::RankTrace> ranks = LoadByPid(imported);
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_EQ(ranks.at(200).meta.entries.at("import.rank_source"), "nccl init payload");
  EXPECT_EQ(ranks.at(300).meta.entries.at("import.rank_source"), "process order");
  // Both carry the world communicator's size.
  EXPECT_EQ(ranks.at(200).meta.world_size, 2);
  EXPECT_EQ(ranks.at(300).meta.world_size, 2);
}

TEST(NsysImportTest, LaunchEnvironmentGivesTheRankOfASingleProcess) {
  TempDir dir;
  const fs::path path = dir / "env.sqlite";
  {
    NsysFile f(path);
    WriteMinimalExport(f);
    f.Exec("CREATE TABLE META_DATA_CAPTURE (name TEXT, value TEXT)");
    f.Exec("INSERT INTO META_DATA_CAPTURE VALUES ('PROCESS_0:COMMAND', 'train'), ('PROCESS_0:ARGUMENT_0', '--fast'), "
           "('PROCESS_0:ENVIRONMENT_VARIABLE', 'RANK=\"3\"'), ('PROCESS_0:ENVIRONMENT_VARIABLE', 'WORLD_SIZE=\"4\"'), "
           "('PROCESS_0:ENVIRONMENT_VARIABLE', 'LOCAL_RANK=\"1\"')");
    f.Exec(kProcessesDdl);
    f.Exec("INSERT INTO PROCESSES VALUES (" + std::to_string(GlobalPid(77)) + ", 77, 'train')");
  }
  const ImportResult imported = ImportOk(path, dir);
  EXPECT_TRUE(HasNote(imported, "env.sqlite: rank from the launch environment's torchrun variables (pid 77 = rank 3)"))
      << AllNotes(imported);
  ASSERT_EQ(imported.rank_files.size(), 1u);
  EXPECT_EQ(imported.rank_files[0].filename(), "rank-3.sqlite");
  const trace::RankTrace rank = Load(imported.rank_files[0]);
  EXPECT_EQ(rank.meta.rank, 3);
  EXPECT_EQ(rank.meta.world_size, 4);
  EXPECT_EQ(rank.meta.local_rank, 1);
  // The launched process itself: its full command line.
  EXPECT_EQ(rank.meta.command_line, "train --fast");
}

TEST(NsysImportTest, WithoutSessionStartTimesAreTheSessionClock) {
  TempDir dir;
  const fs::path path = dir / "no_start.sqlite";
  {
    NsysFile f(path, "2.9.1", "EXPORT_META_DATA");
    WriteMinimalExport(f);
  }
  const ImportResult imported = ImportOk(path, dir);
  EXPECT_TRUE(HasNote(imported, "no_start.sqlite: the export has no TARGET_INFO_SESSION_START_TIME")) << AllNotes(imported);
  const trace::RankTrace rank = Load(imported.rank_files.at(0));
  ASSERT_EQ(rank.events.kernels.size(), 1u);
  EXPECT_EQ(rank.events.kernels[0].start_ns, 1'000);
  EXPECT_EQ(rank.events.kernels[0].end_ns, 2'000);
}

// ---- bad input -----------------------------------------------------------------------------

TEST(NsysImportTest, MissingFile) {
  TempDir dir;
  const fs::path path = dir / "missing.sqlite";
  import::RunSink sink(dir / "run", "run");
  ExpectOneLineError(import::ImportNsys(path, sink), path, "no such file");
}

TEST(NsysImportTest, NotSqlite) {
  TempDir dir;
  const fs::path path = dir / "text.sqlite";
  std::ofstream(path) << "this is not a database, just some text that is long enough to fill a header.......\n"
                         "and a second line to make it longer than one hundred bytes in total...............\n";
  ExpectOneLineError(Import(path, dir).status(), path, "not a trace rankscope reads");
  import::RunSink sink(dir / "run2", "run");
  ExpectOneLineError(import::ImportNsys(path, sink), path, "not an SQLite database");
}

TEST(NsysImportTest, TruncatedExport) {
  TempDir dir;
  const fs::path whole = dir / "whole.sqlite";
  {
    NsysFile f(whole);
    WriteEveryKindExport(f);
  }
  const fs::path cut = dir / "cut.sqlite";
  fs::copy_file(whole, cut);
  fs::resize_file(cut, fs::file_size(whole) / 2);
  ExpectOneLineError(Import(cut, dir).status(), cut, "truncated");
  import::RunSink sink(dir / "run2", "run");
  ExpectOneLineError(import::ImportNsys(cut, sink), cut, "truncated");
}

TEST(NsysImportTest, DamagedPagesFailWithoutCrashing) {
  TempDir dir;
  const fs::path path = dir / "damaged.sqlite";
  {
    NsysFile f(path);
    WriteEveryKindExport(f);
  }
  // Overwrite every page after the first two (the schema stays readable) with garbage.
  const uintmax_t size = fs::file_size(path);
  {
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    for (uintmax_t at = 1024; at < size; ++at) {
      file.seekp(static_cast<std::streamoff>(at));
      file.put(static_cast<char>((at * 131) & 0xFF));
    }
  }
  import::RunSink sink(dir / "run", "run");
  const Status status = import::ImportNsys(path, sink);
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(status.message().find('\n'), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("damaged.sqlite"), std::string::npos) << status.message();
}

TEST(NsysImportTest, AnotherSqliteDatabase) {
  TempDir dir;
  const fs::path path = dir / "other.sqlite";
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE customers (id INTEGER, name TEXT)", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  ExpectOneLineError(Import(path, dir).status(), path, "neither a rankscope rank file nor an Nsight Systems export");
  import::RunSink sink(dir / "run2", "run");
  ExpectOneLineError(import::ImportNsys(path, sink), path, "not an Nsight Systems export");
}

TEST(NsysImportTest, SchemaMajor4IsRefused) {
  TempDir dir;
  const fs::path path = dir / "schema4.sqlite";
  {
    NsysFile f(path, "4.0.0");
    WriteMinimalExport(f);
  }
  const Status status = Import(path, dir).status();
  ExpectOneLineError(status, path, "Nsight Systems export schema 4.0.0 is not supported; rankscope reads 2.x and 3.x");
  EXPECT_EQ(status.code(), StatusCode::kUnsupported);
  EXPECT_FALSE(fs::exists(dir / "run" / "rank-0.sqlite"));
}

TEST(NsysImportTest, KernelTableWithoutStart) {
  TempDir dir;
  const fs::path path = dir / "no_start_column.sqlite";
  {
    NsysFile f(path);
    f.Exec("CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (\"end\" INTEGER, deviceId INTEGER, streamId INTEGER, "
           "globalPid INTEGER, demangledName INTEGER)");
    f.Exec("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (2000, 0, 7, " + std::to_string(GlobalPid(5)) + ", 1)");
  }
  ExpectOneLineError(Import(path, dir).status(), path, "table CUPTI_ACTIVITY_KIND_KERNEL has no column 'start'");
}

// Names are ids into StringIds: without the table an NCCL kernel would pass for compute.
TEST(NsysImportTest, KernelsWithoutStringIdsAreAnError) {
  TempDir dir;
  const fs::path path = dir / "no_strings.sqlite";
  {
    NsysFile f(path);
    f.Exec(kKernelDdl);  // and no kStringIdsDdl
    f.Exec("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, \"end\", deviceId, streamId, globalPid, demangledName) "
           "VALUES (1000, 2000, 0, 7, " + std::to_string(GlobalPid(5)) + ", 1)");
  }
  ExpectOneLineError(Import(path, dir).status(), path, "no StringIds table");
  EXPECT_FALSE(fs::exists(dir / "run" / "rank-0.sqlite"));
}

TEST(NsysImportTest, NoUsableTables) {
  TempDir dir;
  const fs::path path = dir / "empty_export.sqlite";
  {
    NsysFile f(path);
    f.Exec(kStringIdsDdl);
    f.Exec(kProcessesDdl);
  }
  ExpectOneLineError(Import(path, dir).status(), path, "nothing to import");
}

TEST(NsysImportTest, OnlyNullRowsIsAnError) {
  TempDir dir;
  const fs::path path = dir / "null_rows.sqlite";
  {
    NsysFile f(path);
    f.Exec("CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, \"end\" INTEGER, deviceId INTEGER, "
           "streamId INTEGER, globalPid INTEGER, demangledName INTEGER)");
    f.Exec("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (NULL, 2000, 0, 7, " + std::to_string(GlobalPid(5)) +
           ", 1), (1000, 2000, 0, 7, NULL, 1), (1000, 'later', 0, 7, " + std::to_string(GlobalPid(5)) + ", 1)");
  }
  const Status status = Import(path, dir).status();
  ExpectOneLineError(status, path, "nothing usable to import: all 3 rows");
  EXPECT_EQ(status.code(), StatusCode::kCorrupt);
}

TEST(NsysImportTest, OnlyNvtxIsNothingToImport) {
  TempDir dir;
  const fs::path path = dir / "nvtx_only.sqlite";
  {
    NsysFile f(path);
    f.Exec(kNvtxDdl);
    f.Exec("INSERT INTO NVTX_EVENTS (start, \"end\", eventType, text, globalTid) VALUES (1, 2, 59, 'x', " +
           std::to_string(GlobalTid(5, 5)) + ")");
  }
  ExpectOneLineError(Import(path, dir).status(), path, "no process has CUDA activity or CUDA API calls");
}

// The seeds of the importer's fuzzer whose structure is damaged (kernel_without_start.sqlite
// lacks the start column, not a start value): each fails with one line naming the file.
TEST(NsysImportTest, StoredBadInputsFail) {
  const std::map<std::string, std::string> expected = {
      {"not_sqlite.sqlite", "not a trace rankscope reads"},
      {"truncated.sqlite", "truncated"},
      {"schema4.sqlite", "schema 4.0.0 is not supported"},
      {"kernel_without_start.sqlite", "has no column 'start'"},
      {"no_tables.sqlite", "nothing to import"},
      {"null_rows.sqlite", "nothing usable to import"},
  };
  for (const auto& [name, problem] : expected) {
    SCOPED_TRACE(name);
    TempDir dir;
    const fs::path path = kBadSeeds / name;
    ASSERT_TRUE(fs::exists(path));
    ExpectOneLineError(Import(path, dir).status(), path, problem);
  }
}

// A seed of the fuzzer with one damaged row among sound ones: the row is left out, counted
// and noted, and the rest imports.
TEST(NsysImportTest, StoredExportWithADamagedRowImports) {
  TempDir dir;
  const fs::path path = kBadSeeds / "kernel_row_without_start.sqlite";
  ASSERT_TRUE(fs::exists(path));
  const ImportResult imported = ImportOk(path, dir);
  ASSERT_EQ(imported.rank_files.size(), 1u);
  const std::string note =
      "left out 1 kernel event without a valid start/end (first: CUPTI_ACTIVITY_KIND_KERNEL: start is NULL)";
  EXPECT_TRUE(HasNote(imported, "kernel_row_without_start.sqlite (pid 77): " + note)) << AllNotes(imported);
  const trace::RankTrace rank = Load(imported.rank_files[0]);
  ASSERT_EQ(rank.events.kernels.size(), 2u);
  for (const trace::KernelEvent& kernel : rank.events.kernels) EXPECT_NE(kernel.correlation_id, 2u);
  EXPECT_EQ(rank.meta.entries.at("import.left_out.kernel"), note);
}

// Rows of every event table with what they need missing or wrong, next to a sound kernel:
// each is left out and counted on its rank under its kind; nothing fails.
TEST(NsysImportTest, DamagedRowsOfEveryTableAreLeftOut) {
  TempDir dir;
  const fs::path path = dir / "damaged_rows.sqlite";
  const std::string p77 = std::to_string(GlobalPid(77)), t77 = std::to_string(GlobalTid(77, 77));
  {
    NsysFile f(path);
    WriteMinimalExport(f);
    f.Exec("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, \"end\", deviceId, streamId, globalPid, demangledName) "
           "VALUES (3000, 4000, 'gpu0', 7, " + p77 + ", 1), (3000, 4000, 4294967296000, 7, " + p77 + ", 1)");
    f.Exec("CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER, \"end\" INTEGER, deviceId INTEGER, "
           "contextId INTEGER, streamId INTEGER, correlationId INTEGER, globalPid INTEGER, value INTEGER, "
           "bytes INTEGER, memKind INTEGER)");
    f.Exec("INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES (5000, 4000, 0, 1, 7, 3, " + p77 + ", 0, 8, 0)");
    f.Exec(kRuntimeDdl);
    f.Exec("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (1000, 1500, 0, " + t77 + ", 1, NULL, 0), "
           "(1000, 2.5, 0, " + t77 + ", 2, NULL, 0)");
    f.Exec(kNvtxDdl);
    f.Exec("INSERT INTO NVTX_EVENTS (start, \"end\", eventType, text, globalTid) VALUES "
           "(1000, NULL, 59, 'open', " + t77 + "), (1000, NULL, 60, 'open too', " + t77 + "), "
           "(1000, NULL, 34, 'a mark needs no end', " + t77 + ")");
  }
  const ImportResult imported = ImportOk(path, dir);
  ASSERT_EQ(imported.rank_files.size(), 1u);
  const std::string source = "damaged_rows.sqlite (pid 77): ";
  EXPECT_TRUE(HasNote(imported, source + "left out 2 kernel events without a valid deviceId/streamId (first: "
                                         "CUPTI_ACTIVITY_KIND_KERNEL: deviceId is text 'gpu0')"))
      << AllNotes(imported);
  EXPECT_TRUE(HasNote(imported, source + "left out 1 memset event with end before start (first: "
                                         "CUPTI_ACTIVITY_KIND_MEMSET: start 5000, end 4000)"))
      << AllNotes(imported);
  EXPECT_TRUE(HasNote(imported, source + "left out 1 CUDA API call event without a valid start/end (first: "
                                         "CUPTI_ACTIVITY_KIND_RUNTIME: end is a real number)"))
      << AllNotes(imported);
  EXPECT_TRUE(HasNote(imported, source + "left out 2 NVTX range events that never ended (no end)"))
      << AllNotes(imported);
  const trace::RankTrace rank = Load(imported.rank_files[0]);
  EXPECT_EQ(rank.events.kernels.size(), 1u);
  EXPECT_TRUE(rank.events.memsets.empty());
  EXPECT_EQ(rank.events.api_calls.size(), 1u);
  EXPECT_TRUE(rank.events.nvtx_ranges.empty());
  EXPECT_EQ(rank.events.nvtx_marks.size(), 1u);
  for (const char* kind : {"kernel", "memset", "cuda_api_call", "nvtx_range"}) {
    EXPECT_TRUE(rank.meta.entries.contains(std::string("import.left_out.") + kind)) << kind;
  }
  EXPECT_FALSE(rank.meta.entries.contains("import.left_out.nvtx_mark"));
}

}  // namespace
}  // namespace rankscope::interop
