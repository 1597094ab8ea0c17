// Golden imports: a small trace of each format in, the rank files the import writes out as
// canonical text (tests/rank_file_dump.h), compared with tests/interop/golden/<name>.txt.
// RANKSCOPE_UPDATE_GOLDEN=1 rewrites the expected files (tests/golden.h). The inputs live next
// to their goldens: two Kineto traces (kineto_ddp_rank*.json) and an nsys export written as
// SQL (nsys_ddp.sql); the Chrome trace is exported from a run built here. What differs on
// every import (run id, the time the files were written, this build's version) is masked by
// the dump; the test's temporary paths become "<input>" and "<run>" (ExpectImportMatchesGolden).
#include <sqlite3.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "interop/interop.h"
#include "tests/golden.h"
#include "tests/interop/import_test_util.h"
#include "tests/rank_file_dump.h"
#include "tests/rank_file_writer.h"
#include "tests/shared_data.h"
#include "tests/temp_dir.h"
#include "tests/trace_builder.h"
#include "trace/run_dir.h"

namespace rankscope::interop {
namespace {

namespace fs = std::filesystem;
using analyzer::testing::TraceBuilder;
using rankscope::testing::DumpRankFiles;
using rankscope::testing::ExpectMatchesGolden;
using rankscope::testing::GoldenPath;
using rankscope::testing::TempDir;
using testing::AllNotes;
using testing::Load;

const fs::path kGoldenDir = GoldenPath("tests/interop/golden");

// Imports `inputs` (files in `dir`, so that notes name them as "<input>/<file>" wherever the
// checkout is) into `dir`/run with a fixed run id, then compares the dump of the rank files
// (after the import's notes) with golden `name`.txt. Returns what was imported.
ImportResult ExpectImportMatchesGolden(const std::vector<fs::path>& inputs, const TempDir& dir,
                                       const std::string& name) {
  ImportOptions options;
  options.run_id = "golden-import";
  Result<ImportResult> imported = ImportTraces(inputs, dir / "run", options);
  EXPECT_TRUE(imported.ok()) << imported.status().message();
  if (!imported.ok()) return {};
  Result<std::string> dump =
      DumpRankFiles(imported->rank_files, imported->notes, {{dir / "run", "<run>"}, {dir.path(), "<input>"}});
  EXPECT_TRUE(dump.ok()) << dump.status().message();
  if (dump.ok()) ExpectMatchesGolden(kGoldenDir / (name + ".txt"), *dump);
  return std::move(imported).value();
}

// ---- Kineto JSON ---------------------------------------------------------------------------------
//
// kineto_ddp_rank{0,1}.json: one profiler step of ranks 0 and 1 (distributedInfo), each on its
// own GPU (device 0, 1), baseTimeNanoseconds 1.7e18: a copy, a set, a gemm of 300 µs on rank 0
// and 450 µs on rank 1 from ts 1100 µs, then the NCCL all-reduce kernel until ts 1800 µs, the
// runtime calls that launched them (flows 11 and 12), CPU ops, a GPU annotation, a stream sync,
// a [memory] event (samples of the GPU's "pytorch allocated" and "pytorch reserved" memory
// counters), an instant event (a mark) and a counter event, which the importer leaves out with
// a note.
TEST(ImportGolden, KinetoTwoRanks) {
  TempDir dir;
  for (const char* input : {"kineto_ddp_rank0.json", "kineto_ddp_rank1.json"}) {
    fs::copy_file(kGoldenDir / input, dir / input);
  }
  const ImportResult imported =
      ExpectImportMatchesGolden({dir / "kineto_ddp_rank0.json", dir / "kineto_ddp_rank1.json"}, dir, "kineto_ddp");
  ASSERT_EQ(imported.rank_files.size(), 2u) << AllNotes(imported);
  // ts 1100 µs after the base: 1.7e18 + 1'100'000 ns; rank 1's gemm lasts 450 µs.
  const trace::RankTrace rank1 = Load(imported.rank_files[1]);
  EXPECT_EQ(rank1.meta.rank, 1);
  ASSERT_EQ(rank1.events.kernels.size(), 2u);
  bool found_gemm = false;
  for (const trace::KernelEvent& kernel : rank1.events.kernels) {
    if (kernel.correlation_id != 11) continue;
    found_gemm = true;
    EXPECT_EQ(kernel.start_ns, 1'700'000'000'001'100'000);
    EXPECT_EQ(kernel.end_ns, 1'700'000'000'001'550'000);
  }
  EXPECT_TRUE(found_gemm);
}

// The TensorBoard plugin's two NCCL workers (old Kineto format: "cat": "Kernel",
// "tid": "stream 16"), from the shared real traces; skipped without them.
TEST(ImportGolden, KinetoTensorBoardPluginNcclWorkers) {
  const fs::path folder = rankscope::testing::SharedDataDir() / "kineto" / "tb_plugin_distributed";
  const fs::path worker0 = folder / "test_distributed_nccl_worker0.json";
  const fs::path worker1 = folder / "test_distributed_nccl_worker1.json";
  RANKSCOPE_REQUIRE_SHARED_DATA(worker0);
  RANKSCOPE_REQUIRE_SHARED_DATA(worker1);
  TempDir dir;
  fs::copy_file(worker0, dir / worker0.filename());
  fs::copy_file(worker1, dir / worker1.filename());
  const ImportResult imported =
      ExpectImportMatchesGolden({dir / worker0.filename(), dir / worker1.filename()}, dir, "kineto_tb_plugin_nccl");
  EXPECT_EQ(imported.rank_files.size(), 2u) << AllNotes(imported);
}

// The older PyTorch profiler format (tests/interop/data/torch_legacy/, its README says what it
// holds): 2 ranks of DDP over Gloo, ranks from the file names, times from each profiler's start.
TEST(ImportGolden, TorchProfilerWithoutKinetoTwoGlooRanks) {
  TempDir dir;
  for (const char* input : {"ddp_gloo_rank0.json.gz", "ddp_gloo_rank1.json.gz"}) {
    fs::copy_file(GoldenPath("tests/interop/data/torch_legacy") / input, dir / input);
  }
  const ImportResult imported = ExpectImportMatchesGolden(
      {dir / "ddp_gloo_rank0.json.gz", dir / "ddp_gloo_rank1.json.gz"}, dir, "torch_legacy_ddp_gloo");
  EXPECT_EQ(imported.rank_files.size(), 2u) << AllNotes(imported);
}

// ---- nsys SQLite -----------------------------------------------------------------------------------
//
// nsys_ddp.sql (its header says what it holds): two processes with CUDA activity, so two
// ranks by process order, a third with NVTX only, left out, and a kernel ending before it
// starts, skipped; session times become wall clock as 1.7e18 + ts - 1e6.
TEST(ImportGolden, NsysTwoProcesses) {
  TempDir dir;
  const fs::path export_file = dir / "nsys_ddp.sqlite";
  {
    std::ifstream in(kGoldenDir / "nsys_ddp.sql", std::ios::binary);
    ASSERT_TRUE(in.good()) << kGoldenDir / "nsys_ddp.sql";
    std::stringstream sql;
    sql << in.rdbuf();
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(export_file.c_str(), &db), SQLITE_OK);
    char* error = nullptr;
    const int rc = sqlite3_exec(db, sql.str().c_str(), nullptr, nullptr, &error);
    EXPECT_EQ(rc, SQLITE_OK) << (error != nullptr ? error : "");
    sqlite3_free(error);
    sqlite3_close(db);
    ASSERT_EQ(rc, SQLITE_OK);
  }
  const ImportResult imported = ExpectImportMatchesGolden({export_file}, dir, "nsys_ddp");
  ASSERT_EQ(imported.rank_files.size(), 2u) << AllNotes(imported);
  // pid 500's gemm at ts 1'100'000: 1.7e18 + 1'100'000 - 1'000'000; pid 600 keeps 2 of its 3 kernels.
  const trace::RankTrace rank0 = Load(imported.rank_files[0]);
  EXPECT_EQ(rank0.meta.pid, 500);
  ASSERT_EQ(rank0.events.kernels.size(), 2u);
  EXPECT_EQ(rank0.events.kernels[0].start_ns, 1'700'000'000'000'100'000);
  const trace::RankTrace rank1 = Load(imported.rank_files[1]);
  EXPECT_EQ(rank1.meta.pid, 600);
  EXPECT_EQ(rank1.events.kernels.size(), 2u);
}

// ---- Chrome trace (our export, imported back) --------------------------------------------------
//
// Two ranks of one step, each: a step range and a launch call on "main" (correlation 1), the
// gemm it launched [1000, 3000) ns after t0 (+ 500 ns on rank 1), the NCCL kernel to 4000 ns,
// the plugin's all-reduce record, a copy, and a mark. Exported with ExportChromeTrace,
// imported with ImportTraces: the dump is the run as the round trip gives it back.
constexpr int64_t kT0 = 1'712'345'678'901'234'567;
constexpr uint64_t kWorld = 0xC0FFEE;

trace::RankTrace ChromeRank(int rank) {
  TraceBuilder b(rank, 2);
  b.RunId("chrome-golden");
  b.Host("node-a");
  b.CommandLine("python3 train.py");
  b.Backend("nccl");
  const trace::LaneId main = b.CpuThread("main");
  const trace::LaneId compute = b.GpuStream(0, trace::LaneRole::kCompute);
  const trace::LaneId comm = b.GpuStream(0, trace::LaneRole::kComm);
  const trace::LaneId world = b.Communicator(kWorld, "world");
  const int64_t late = 500 * rank;
  const trace::StringId launch_name = b.Str("cudaLaunchKernel");
  b.Step(main, 1, kT0, kT0 + 5000, 32);
  b.Mark(main, "app", "checkpoint", kT0 + 4500);
  b.Kernel(compute, "gemm", kT0 + 1000, kT0 + 3000 + late);
  b.Kernel(comm, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", kT0 + 3000 + late, kT0 + 4000);
  b.Collective(world, "AllReduce", kT0 + 3000 + late, kT0 + 4000, kWorld, 0, trace::CollectiveOp::kAllReduce, 4096,
               2);
  b.Copy(compute, kT0 + 200, kT0 + 600, 1 << 20);
  trace::RankTrace built = b.Build();
  trace::ApiCallEvent launch;
  launch.lane = main;
  launch.name = launch_name;
  launch.start_ns = kT0 + 100;
  launch.end_ns = kT0 + 150;
  launch.correlation_id = 1;
  launch.domain = trace::ApiDomain::kRuntime;
  launch.callback_id = 211;
  built.events.api_calls.push_back(launch);
  built.events.kernels[0].correlation_id = 1;  // the gemm: the first kernel on the lowest lane
  return built;
}

TEST(ImportGolden, ChromeExportImportedBack) {
  TempDir dir;
  const fs::path original = dir / "original";
  fs::create_directories(original);
  for (int rank = 0; rank < 2; ++rank) {
    rankscope::testing::WriteRankTraceFile(ChromeRank(rank), original / trace::RankFileName(rank));
  }
  Result<ChromeExportResult> exported = ExportChromeTrace(original, dir / "trace.json");
  ASSERT_TRUE(exported.ok()) << exported.status().message();
  const ImportResult imported = ExpectImportMatchesGolden({dir / "trace.json"}, dir, "chrome_roundtrip");
  ASSERT_EQ(imported.rank_files.size(), 2u) << AllNotes(imported);
  // The gemm keeps its exact nanoseconds and its launch's correlation.
  const trace::RankTrace rank1 = Load(imported.rank_files[1]);
  bool found_gemm = false;
  for (const trace::KernelEvent& kernel : rank1.events.kernels) {
    if (rank1.str(kernel.name) != "gemm") continue;
    found_gemm = true;
    EXPECT_EQ(kernel.start_ns, kT0 + 1000);
    EXPECT_EQ(kernel.end_ns, kT0 + 3500);
    EXPECT_EQ(kernel.correlation_id, 1u);
  }
  EXPECT_TRUE(found_gemm);
}

}  // namespace
}  // namespace rankscope::interop
