// Trace store throughput (issue: writer >= 1M events/s and >= 70% of a bare prepared-insert
// loop over the same rows; reader >= 5M events/s into memory). Run through
// bench/trace_bench.py, which interleaves repetitions and reports the ratios.
#include <benchmark/benchmark.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "trace/event_codec.h"
#include "trace/reader.h"
#include "trace/run_dir.h"
#include "trace/schema.h"
#include "trace/writer.h"

namespace rankscope::trace {
namespace {
namespace fs = std::filesystem;

constexpr size_t kBatch = 4096;

fs::path BenchDir() {
  const char* dir = std::getenv("RANKSCOPE_BENCH_DIR");
  fs::path path = dir ? fs::path(dir) : fs::temp_directory_path() / ("rankscope-bench-" + std::to_string(getpid()));
  fs::create_directories(path);
  return path;
}

void Remove(const fs::path& path) {
  fs::remove(path);
  for (const fs::path& companion : RankFileCompanions(path)) fs::remove(companion);
}

// A GPU-trace-like mix: every kernel has its launch call; a few copies and NVTX ranges.
// Lanes 1-4 are GPU streams, 5-6 CPU threads.
EventTables MakeEvents(size_t n, TimestampNs t0) {
  EventTables t;
  for (size_t i = 0; i < n; ++i) {
    const TimestampNs ts = t0 + static_cast<TimestampNs>(i) * 700;
    switch (i % 20) {
      case 0: {
        MemcpyEvent c;
        c.lane = 1 + i % 4; c.start_ns = ts; c.end_ns = ts + 2000; c.name = 3;
        c.correlation_id = i; c.bytes = 1 << 20; c.copy_kind = CopyKind::kHostToDevice;
        c.src_kind = MemoryKind::kPinned; c.dst_kind = MemoryKind::kDevice;
        t.memcpys.push_back(c);
        break;
      }
      case 1: {
        NvtxRangeEvent r;
        r.lane = 5; r.start_ns = ts; r.end_ns = ts + 50000; r.name = 4; r.domain = 5;
        r.payload = {PayloadKind::kUint64, static_cast<int64_t>(i), 0};
        t.nvtx_ranges.push_back(r);
        break;
      }
      default:
        if (i % 2 == 0) {
          KernelEvent k;
          k.lane = 1 + i % 4; k.start_ns = ts; k.end_ns = ts + 5000 + i % 977; k.name = 1 + i % 2;
          k.correlation_id = i; k.grid = {1024, 1, 1}; k.block = {256, 1, 1};
          k.registers_per_thread = 64; k.static_shared_bytes = 16384;
          t.kernels.push_back(k);
        } else {
          ApiCallEvent a;
          a.lane = 6; a.start_ns = ts; a.end_ns = ts + 3000; a.name = 6;
          a.correlation_id = i - 1; a.domain = ApiDomain::kRuntime; a.callback_id = 211;
          t.api_calls.push_back(a);
        }
    }
  }
  return t;
}

// `n` events (rounded up to whole batches) as kBatch-event batches.
std::vector<EventTables> MakeBatches(size_t n) {
  std::vector<EventTables> batches;
  for (size_t i = 0; i < n; i += kBatch) batches.push_back(MakeEvents(kBatch, static_cast<TimestampNs>(i) * 700));
  return batches;
}

void SetUpLanesAndStrings(TraceWriter& w) {
  for (uint64_t s = 1; s <= 4; ++s) {
    Lane lane;
    lane.kind = LaneKind::kGpuStream;
    lane.stream = s;
    w.AddLane(lane);
  }
  for (int64_t tid = 1; tid <= 2; ++tid) {
    Lane lane;
    lane.kind = LaneKind::kCpuThread;
    lane.tid = tid;
    w.AddLane(lane);
  }
  for (const char* s : {"gemm_bf16", "gelu_fwd", "Memcpy HtoD", "rankscope.step", "rankscope",
                        "cudaLaunchKernel"}) {
    w.Intern(s);
  }
}

RankIdentity Identity() {
  RankIdentity id;
  id.run_id = "bench";
  id.rank = 0;
  id.world_size = 1;
  return id;
}

// The writer, end to end: Submit batches from the caller's thread, Close (so every event
// is committed and the WAL checkpointed). Events/s of durable rows.
void BM_Writer(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const fs::path path = BenchDir() / "writer.sqlite";
  const std::vector<EventTables> batches = MakeBatches(n);
  for (auto _ : state) {
    state.PauseTiming();
    Remove(path);
    std::vector<EventTables> copy = batches;
    state.ResumeTiming();
    auto writer = TraceWriter::Create(path, Identity());
    if (!writer.ok()) return state.SkipWithError(writer.status().message().c_str());
    SetUpLanesAndStrings(**writer);
    for (EventTables& batch : copy) {
      if (!(*writer)->Submit(std::move(batch))) return state.SkipWithError("writer dropped a batch");
    }
    if (Status s = (*writer)->Close(); !s.ok()) return state.SkipWithError(s.message().c_str());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * batches.size() * kBatch));
  Remove(path);
}

// SQLite's own limit for the same rows: one thread, the same connection flags, schema,
// pragmas and binding code, prepared INSERTs committed every 64K rows, then the same index
// build, checkpoint and close.
void BM_BareInsert(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const fs::path path = BenchDir() / "bare.sqlite";
  const std::vector<EventTables> batches = MakeBatches(n);
  for (auto _ : state) {
    state.PauseTiming();
    Remove(path);
    state.ResumeTiming();
    sqlite3* db = nullptr;
    sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                    nullptr);
    const std::string pragmas = "PRAGMA page_size=" + std::to_string(kPageSize) + "; " + kWriterPragmas;
    sqlite3_exec(db, pragmas.c_str(), nullptr, nullptr, nullptr);
    sqlite3_exec(db, SchemaDdl().c_str(), nullptr, nullptr, nullptr);
    std::vector<sql::Statement> inserts;
    codec::ForEachTable(batches[0], [&](std::string_view name, const auto&) {
      inserts.push_back(std::move(sql::Statement::Prepare(db, FindTable(name)->InsertSql())).value());
    });
    size_t in_txn = 0;
    sqlite3_exec(db, "BEGIN", nullptr, nullptr, nullptr);
    for (const EventTables& batch : batches) {
      int index = 0;
      codec::ForEachTable(batch, [&](std::string_view, const auto& table) {
        sql::Statement& stmt = inserts[index++];
        for (const auto& row : table) {
          codec::Bind(stmt, row);
          sqlite3_step(stmt.get());
          sqlite3_reset(stmt.get());
          if (++in_txn == 65536) {
            sqlite3_exec(db, "COMMIT; BEGIN", nullptr, nullptr, nullptr);
            in_txn = 0;
          }
        }
      });
    }
    sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr);
    sqlite3_exec(db, IndexDdl().c_str(), nullptr, nullptr, nullptr);
    sqlite3_exec(db, "PRAGMA wal_checkpoint(TRUNCATE); PRAGMA journal_mode=DELETE;", nullptr, nullptr,
                 nullptr);
    inserts.clear();
    sqlite3_close(db);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * batches.size() * kBatch));
  Remove(path);
}

// Whole rank into memory: strings, lanes, every table, sorted by (lane, start).
void BM_ReaderLoadAll(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const fs::path path = BenchDir() / "reader.sqlite";
  Remove(path);
  {
    auto writer = TraceWriter::Create(path, Identity());
    if (!writer.ok()) return state.SkipWithError(writer.status().message().c_str());
    SetUpLanesAndStrings(**writer);
    for (EventTables& batch : MakeBatches(n)) (*writer)->Submit(std::move(batch));
    if (!(*writer)->Close().ok()) return state.SkipWithError("writing the input failed");
  }
  size_t events = 0;
  for (auto _ : state) {
    auto reader = TraceReader::Open(path);
    if (!reader.ok()) return state.SkipWithError(reader.status().message().c_str());
    auto trace = (*reader)->LoadAll();
    if (!trace.ok()) return state.SkipWithError(trace.status().message().c_str());
    events = trace->events.size();
    benchmark::DoNotOptimize(trace->events.kernels.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * events));
  Remove(path);
}

}  // namespace
}  // namespace rankscope::trace

// `--events=N` sets the events per run (default 1M; the ctest smoke run uses a few
// thousand). Every other flag goes to Google Benchmark.
int main(int argc, char** argv) {
  int64_t events = int64_t{1} << 20;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--events=", 0) == 0) {
      events = std::atoll(arg.c_str() + 9);
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  using namespace rankscope::trace;
  for (auto [name, fn] : {std::pair{"BM_Writer", &BM_Writer}, std::pair{"BM_BareInsert", &BM_BareInsert},
                          std::pair{"BM_ReaderLoadAll", &BM_ReaderLoadAll}}) {
    benchmark::RegisterBenchmark(name, fn)->Arg(events)->Unit(benchmark::kMillisecond)->UseRealTime();
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
