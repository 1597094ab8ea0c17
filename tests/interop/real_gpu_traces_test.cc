// Real traces from the first GPU checks (an H200, 2026-11-26; bench/results/gpu-2026-11-26-2.md,
// tests/data/gpu/README.md): what the collector recorded there, and torch.profiler's traces of
// the same jobs. The files never change, so what rankscope reads from them must not drift:
// - every rank file reads back with the rows the check counted when it came back;
// - `analyze` of each run gives the report in tests/interop/golden/gpu_*.txt
//   (RANKSCOPE_UPDATE_GOLDEN=1 rewrites them, tests/golden.h);
// - torch.profiler's trace of the 1-rank DDP job, read by the Kineto importer, holds the same
//   kernels, name for name, as the collector's trace of the same job (torch_compare.py's
//   comparison on the GPU: the two cannot share a process, so the job ran twice, same seed).
#include <zlib.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "analyzer/analyze.h"
#include "interop/interop.h"
#include "report/report_writers.h"
#include "tests/golden.h"
#include "tests/temp_dir.h"
#include "trace/reader.h"

namespace rankscope::interop {
namespace {

namespace fs = std::filesystem;
using rankscope::testing::ExpectMatchesGolden;
using rankscope::testing::GoldenPath;
using rankscope::testing::TempDir;

const fs::path kData = GoldenPath("tests/data/gpu");

// Writes the gzip file `gz` decompressed to `out`.
void Gunzip(const fs::path& gz, const fs::path& out) {
  gzFile in = gzopen(gz.c_str(), "rb");
  ASSERT_NE(in, nullptr) << gz;
  std::ofstream file(out, std::ios::binary);
  char buffer[1 << 16];
  int read = 0;
  while ((read = gzread(in, buffer, sizeof buffer)) > 0) file.write(buffer, read);
  EXPECT_EQ(read, 0) << "gzread failed on " << gz;
  gzclose(in);
  ASSERT_TRUE(file.good()) << out;
}

// `dir`/rank-<r>.sqlite for each of the gzipped rank files `names` (rank r = position).
void UnpackRun(const std::vector<std::string>& names, const fs::path& dir) {
  fs::create_directories(dir);
  for (size_t rank = 0; rank < names.size(); ++rank) {
    Gunzip(kData / names[rank], dir / ("rank-" + std::to_string(rank) + ".sqlite"));
  }
}

trace::RankTrace Load(const fs::path& rank_file) {
  Result<std::unique_ptr<trace::TraceReader>> reader = trace::TraceReader::Open(rank_file);
  EXPECT_TRUE(reader.ok()) << reader.status().message();
  if (!reader.ok()) return {};
  Result<trace::RankTrace> loaded = (*reader)->LoadAll();
  EXPECT_TRUE(loaded.ok()) << loaded.status().message();
  return loaded.ok() ? std::move(loaded).value() : trace::RankTrace{};
}

std::string Meta(const trace::RankTrace& rank, const std::string& key) {
  auto it = rank.meta.entries.find(key);
  return it == rank.meta.entries.end() ? "" : it->second;
}

// ---- The rank files read back whole ---------------------------------------------------------

struct RecordedRank {
  const char* file;
  size_t kernels, memcpys, memsets, api_calls, syncs, nvtx_ranges;
  const char* nccl_profiler;  // meta nccl.profiler: "" where NCCL never loaded the plugin
};

// The rows sqlite3 counted in each file when it came back from the GPU machine.
const RecordedRank kRecorded[] = {
    {"rankscope-trainer-nccl-1rank-rank0.sqlite.gz", 1450, 1331, 316, 12391, 534, 404, "v5"},
    {"rankscope-ddp-nccl-1rank-rank0.sqlite.gz", 2033, 510, 369, 15524, 682, 108, "v5"},
    {"rankscope-ddp-gloo-cuda-2rank-rank0.sqlite.gz", 1337, 360, 115, 7878, 439, 21, ""},
    {"rankscope-ddp-gloo-cuda-2rank-rank1.sqlite.gz", 1337, 356, 115, 7866, 435, 21, ""},
    {"rankscope-cupti-timing-rank0.sqlite.gz", 19, 1, 0, 279, 19, 0, ""},
};

TEST(RealGpuTraces, EveryRankFileReadsBackWithTheRowsRecordedOnTheGpu) {
  TempDir dir;
  for (const RecordedRank& expected : kRecorded) {
    SCOPED_TRACE(expected.file);
    const fs::path file = dir / "rank.sqlite";
    Gunzip(kData / expected.file, file);
    const trace::RankTrace rank = Load(file);
    EXPECT_EQ(rank.events.kernels.size(), expected.kernels);
    EXPECT_EQ(rank.events.memcpys.size(), expected.memcpys);
    EXPECT_EQ(rank.events.memsets.size(), expected.memsets);
    EXPECT_EQ(rank.events.api_calls.size(), expected.api_calls);
    EXPECT_EQ(rank.events.syncs.size(), expected.syncs);
    EXPECT_EQ(rank.events.nvtx_ranges.size(), expected.nvtx_ranges);
    EXPECT_TRUE(rank.drops.empty());
    EXPECT_EQ(Meta(rank, "cupti.status"), "on");
    EXPECT_EQ(Meta(rank, "cupti.version"), "130001");  // CUPTI 13.0.1, CUDA 13 on driver 580
    EXPECT_EQ(Meta(rank, "nccl.profiler"), expected.nccl_profiler);
    // Every kernel was launched by an API call the file holds (the viewer's flows).
    std::map<uint64_t, int> launches;
    for (const trace::ApiCallEvent& call : rank.events.api_calls) ++launches[call.correlation_id];
    size_t unlaunched = 0;
    for (const trace::KernelEvent& kernel : rank.events.kernels) unlaunched += launches.count(kernel.correlation_id) == 0;
    EXPECT_EQ(unlaunched, 0u);
    fs::remove(file);
  }
}

// ---- analyze: the reports must not drift -----------------------------------------------------

analyzer::Report Analyze(const fs::path& run) {
  analyzer::AnalyzeOptions options;
  options.tool_version = "golden";
  Result<analyzer::Report> report = analyzer::AnalyzeRun(run, options);
  EXPECT_TRUE(report.ok()) << report.status().message();
  if (!report.ok()) return {};
  report->run.directory = "<run>";  // a temporary folder
  return std::move(report).value();
}

TEST(RealGpuTraces, TheTrainerOnOneGpuAnalyzesToItsGoldenReport) {
  TempDir dir;
  UnpackRun({"rankscope-trainer-nccl-1rank-rank0.sqlite.gz"}, dir / "run");
  const analyzer::Report report = Analyze(dir / "run");
  // 50 NVTX 'step' ranges, the first one warm-up; the trainer's batch of 64 on one rank.
  EXPECT_EQ(report.steps.steps_found, 50);
  EXPECT_EQ(report.steps.steps_aggregated, 49);
  ExpectMatchesGolden(GoldenPath("tests/interop/golden/gpu_trainer_nccl_1rank.txt"), report::ReportToText(report));
}

TEST(RealGpuTraces, TwoPyTorchRanksOnOneGpuAnalyzeToTheirGoldenReport) {
  TempDir dir;
  UnpackRun({"rankscope-ddp-gloo-cuda-2rank-rank0.sqlite.gz", "rankscope-ddp-gloo-cuda-2rank-rank1.sqlite.gz"},
            dir / "run");
  const analyzer::Report report = Analyze(dir / "run");
  EXPECT_EQ(report.run.ranks, (std::vector<int>{0, 1}));
  EXPECT_EQ(report.steps.steps_found, 20);  // ddp_train.py --steps 20
  ExpectMatchesGolden(GoldenPath("tests/interop/golden/gpu_ddp_gloo_cuda_2rank.txt"), report::ReportToText(report));
}

TEST(RealGpuTraces, TorchProfilerTracesOfTheSameJobAnalyzeToTheirGoldenReport) {
  Result<std::unique_ptr<ResolvedRun>> run =
      ResolveRun({kData / "torch-profiler-ddp-gloo-cuda-2rank-rank0.json.gz",
                  kData / "torch-profiler-ddp-gloo-cuda-2rank-rank1.json.gz"});
  ASSERT_TRUE(run.ok()) << run.status().message();
  analyzer::Report report = Analyze((*run)->path());
  report.run.run_id = "<imported>";  // each import makes a new one
  EXPECT_EQ(report.run.ranks, (std::vector<int>{0, 1}));
  EXPECT_EQ(report.steps.steps_found, 20);  // ProfilerStep#0..19
  ExpectMatchesGolden(GoldenPath("tests/interop/golden/gpu_torch_profiler_ddp_gloo_cuda_2rank.txt"),
                      report::ReportToText(report));
}

// ---- The collector and torch.profiler saw the same kernels -----------------------------------

struct KernelTally {
  std::map<std::string, int> count_by_name;
  int64_t total_ns = 0;
};

// The collector's side, as torch_compare.py counts it: kernels whose launching API call
// started inside the NVTX range 'measured' (autograd's thread launches the backward kernels,
// outside the range's thread, so the launch time decides).
KernelTally MeasuredKernels(const trace::RankTrace& rank) {
  trace::TimestampNs t0 = 0, t1 = 0;
  for (const trace::NvtxRangeEvent& range : rank.events.nvtx_ranges) {
    if (rank.str(range.name) == "measured") t0 = range.start_ns, t1 = range.end_ns;
  }
  EXPECT_LT(t0, t1) << "no NVTX range 'measured'";
  std::map<uint64_t, bool> launched_inside;
  for (const trace::ApiCallEvent& call : rank.events.api_calls) {
    if (call.start_ns >= t0 && call.start_ns < t1) launched_inside[call.correlation_id] = true;
  }
  KernelTally tally;
  for (const trace::KernelEvent& kernel : rank.events.kernels) {
    if (!launched_inside.count(kernel.correlation_id)) continue;
    ++tally.count_by_name[rank.str(kernel.name)];
    tally.total_ns += kernel.duration_ns();
  }
  return tally;
}

KernelTally AllKernels(const trace::RankTrace& rank) {
  KernelTally tally;
  for (const trace::KernelEvent& kernel : rank.events.kernels) {
    ++tally.count_by_name[rank.str(kernel.name)];
    tally.total_ns += kernel.duration_ns();
  }
  return tally;
}

TEST(RealGpuTraces, TheCollectorAndTorchProfilerSawTheSameKernelsOfTheSameJob) {
  TempDir dir;
  Gunzip(kData / "rankscope-ddp-nccl-1rank-rank0.sqlite.gz", dir / "ours.sqlite");
  const KernelTally ours = MeasuredKernels(Load(dir / "ours.sqlite"));

  Result<ImportResult> imported = ImportTraces({kData / "torch-profiler-ddp-nccl-1rank.json.gz"}, dir / "torch");
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  ASSERT_EQ(imported->rank_files.size(), 1u);
  const KernelTally theirs = AllKernels(Load(imported->rank_files[0]));

  // On the GPU: 1740 kernels of 17 names each side, 7.501 ms against 7.544 ms.
  int ours_count = 0;
  for (const auto& [name, count] : ours.count_by_name) ours_count += count;
  EXPECT_EQ(ours_count, 1740);
  EXPECT_EQ(ours.count_by_name.size(), 17u);
  EXPECT_EQ(ours.count_by_name, theirs.count_by_name);
  ASSERT_GT(theirs.total_ns, 0);
  const double difference = 100.0 * (static_cast<double>(ours.total_ns) / static_cast<double>(theirs.total_ns) - 1.0);
  EXPECT_LT(std::abs(difference), 2.0) << ours.total_ns << " ns against " << theirs.total_ns << " ns";
}

}  // namespace
}  // namespace rankscope::interop
