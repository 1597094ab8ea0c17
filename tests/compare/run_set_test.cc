// compare/run_set.h: what a path given to scale or compare holds, read on hand-written rank
// files: a run directory, a sweep of n<N>/ runs, JSON reports read back, and the paths that
// are none of these (one error line each).
#include "compare/run_set.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "analyzer/analyze.h"
#include "compare/scaling.h"
#include "report/report_writers.h"
#include "report/scaling_report.h"
#include "tests/rank_file_writer.h"
#include "tests/temp_dir.h"
#include "tests/trace_builder.h"
#include "trace/run_dir.h"

namespace rankscope::compare {
namespace {

namespace fs = std::filesystem;
using analyzer::testing::kCommCategory;
using analyzer::testing::kComputeCategory;
using analyzer::testing::TraceBuilder;
using rankscope::testing::TempDir;
using rankscope::testing::WriteRankTraceFile;

constexpr int64_t kMs = 1'000'000;
constexpr int kSteps = 6;

// One rank as the CPU backend records it: a step range per step on the main thread with 8
// samples per rank, compute and an all-reduce on their own threads.
trace::RankTrace MakeRank(const std::string& run_id, int rank, int world_size, int64_t step_ms) {
  TraceBuilder builder(rank, world_size);
  builder.RunId(run_id);
  builder.CommandLine("trainer --steps 6");
  builder.CpuBackendCategories();
  const trace::LaneId main = builder.CpuThread("main");
  const trace::LaneId compute = builder.CpuThread("compute");
  const trace::LaneId comm = builder.CpuThread("comm");
  for (int step = 0; step < kSteps; ++step) {
    const int64_t start = 1'000'000'000 + step * step_ms * kMs, tenth = step_ms * kMs / 10;
    builder.Step(main, step, start, start + step_ms * kMs, 8);
    builder.Range(compute, "rankscope", kComputeCategory, "linear_forward", start, start + 6 * tenth);
    builder.Range(comm, "rankscope", kCommCategory, "allreduce", start + 4 * tenth, start + 8 * tenth,
                  R"({"bucket":0,"bytes":4000000})");
  }
  return builder.Build();
}

// A run of `files` rank files out of `world_size` ranks.
void WriteRun(const fs::path& dir, int world_size, int64_t step_ms, int files = -1) {
  fs::create_directories(dir);
  for (int rank = 0; rank < (files < 0 ? world_size : files); ++rank) {
    WriteRankTraceFile(MakeRank("run-n" + std::to_string(world_size), rank, world_size, step_ms),
                       dir / trace::RankFileName(rank));
  }
}

void WriteText(const fs::path& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

const ComparableMetric* Metric(const ComparableRun& run, const std::string& name) { return run.Find(name); }

TEST(SweepRunDir, IsNPrefixed) { EXPECT_EQ(SweepRunDir("/sweeps/a", 8), fs::path("/sweeps/a/n8")); }

TEST(SweepRuns, TheNDirectoriesWithRankFilesSmallestFirst) {
  TempDir dir;
  WriteRun(dir / "n4", 4, 12);
  WriteRun(dir / "n1", 1, 10);
  fs::create_directory(dir / "n2");  // no rank files: not a run
  fs::create_directory(dir / "nx");
  fs::create_directory(dir / "n0");
  WriteRun(dir / "plots", 1, 10);
  std::ofstream(dir / "n8") << "a file, not a run";
  const std::vector<SweepRun> runs = SweepRuns(dir.path());
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].world_size, 1);
  EXPECT_EQ(runs[0].directory, dir / "n1");
  EXPECT_EQ(runs[1].world_size, 4);
  EXPECT_EQ(runs[1].directory, dir / "n4");
  EXPECT_TRUE(SweepRuns(dir / "n1").empty());
  EXPECT_TRUE(SweepRuns(dir / "missing").empty());
}

TEST(LoadComparableSet, ASweepDirectoryIsItsRunsWithEfficiency) {
  TempDir dir;
  WriteRun(dir / "sweep" / "n1", 1, 10);
  WriteRun(dir / "sweep" / "n2", 2, 12);
  std::vector<std::string> warnings;
  bool partial = false;
  const Result<ComparableSet> set = LoadComparableSet(dir / "sweep", {}, &warnings, &partial);
  ASSERT_TRUE(set.ok()) << set.status().message();
  EXPECT_TRUE(set->sweep);
  EXPECT_EQ(set->source, (dir / "sweep").string());
  EXPECT_FALSE(partial);
  ASSERT_EQ(set->runs.size(), 2u);
  EXPECT_EQ(set->runs[0].workload.world_size, 1);
  EXPECT_EQ(set->runs[1].workload.world_size, 2);
  EXPECT_EQ(set->runs[1].source, (dir / "sweep" / "n2").string());
  // Weak scaling (8 samples per rank): E(2) = T(1) / T(2) = 10 / 12.
  const ComparableMetric* efficiency = Metric(set->runs[1], "efficiency");
  ASSERT_NE(efficiency, nullptr);
  EXPECT_NEAR(efficiency->value, 10.0 / 12.0, 1e-6);
  const ComparableMetric* step = Metric(set->runs[1], "step_time_ns");
  ASSERT_NE(step, nullptr);
  EXPECT_NEAR(step->value, 12.0 * kMs, 1e-3 * kMs);
}

TEST(LoadComparableSet, ASweepOfOneSizeHasNoEfficiency) {
  TempDir dir;
  WriteRun(dir / "sweep" / "n2", 2, 12);
  std::vector<std::string> warnings;
  const Result<ComparableSet> set = LoadComparableSet(dir / "sweep", {}, &warnings, nullptr);
  ASSERT_TRUE(set.ok()) << set.status().message();
  EXPECT_TRUE(set->sweep);
  ASSERT_EQ(set->runs.size(), 1u);
  EXPECT_EQ(Metric(set->runs[0], "efficiency"), nullptr);
}

TEST(LoadComparableSet, ARunDirectoryAndARankFileAreOneRunEach) {
  TempDir dir;
  WriteRun(dir / "run", 2, 11);
  // A sweep-like subdirectory inside a run does not make the run a sweep.
  WriteRun(dir / "run" / "n1", 1, 10);
  std::vector<std::string> warnings;
  bool partial = false;
  const Result<ComparableSet> run = LoadComparableSet(dir / "run", {}, &warnings, &partial);
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_FALSE(run->sweep);
  ASSERT_EQ(run->runs.size(), 1u);
  EXPECT_EQ(run->runs[0].workload.world_size, 2);
  EXPECT_EQ(run->runs[0].source, (dir / "run").string());
  EXPECT_EQ(Metric(run->runs[0], "efficiency"), nullptr);

  const fs::path file = dir / "run" / trace::RankFileName(1);
  const Result<ComparableSet> one = LoadComparableSet(file, {}, &warnings, &partial);
  ASSERT_TRUE(one.ok()) << one.status().message();
  ASSERT_EQ(one->runs.size(), 1u);
  EXPECT_EQ(one->runs[0].source, file.string());
}

TEST(LoadComparableSet, APartialRunIsMarkedAndWarnedAbout) {
  TempDir dir;
  WriteRun(dir / "run", 3, 10, /*files=*/2);
  std::vector<std::string> warnings;
  bool partial = false;
  const Result<ComparableSet> set = LoadComparableSet(dir / "run", {}, &warnings, &partial);
  ASSERT_TRUE(set.ok()) << set.status().message();
  EXPECT_TRUE(partial);
  ASSERT_FALSE(warnings.empty());
  EXPECT_EQ(warnings[0].rfind((dir / "run").string() + ": ", 0), 0u) << warnings[0];
  // Without a place to say so, the same run still loads.
  std::vector<std::string> more;
  EXPECT_TRUE(LoadComparableSet(dir / "run", {}, &more, nullptr).ok());
}

TEST(LoadComparableSet, JsonReportsAreReadBack) {
  TempDir dir;
  WriteRun(dir / "sweep" / "n1", 1, 10);
  WriteRun(dir / "sweep" / "n2", 2, 12);
  std::vector<std::string> warnings;
  Result<ComparableSet> sweep = LoadComparableSet(dir / "sweep", {}, &warnings, nullptr);
  ASSERT_TRUE(sweep.ok()) << sweep.status().message();
  const Result<ScalingTable> table = ComputeScalingOfRuns(sweep->runs);
  ASSERT_TRUE(table.ok()) << table.status().message();
  const fs::path scaling = dir / "scaling.json";
  WriteText(scaling, report::ScalingToJson(*table, "test"));

  const Result<ComparableSet> read = LoadComparableSet(scaling, {}, &warnings, nullptr);
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_TRUE(read->sweep);
  EXPECT_EQ(read->source, scaling.string());
  ASSERT_EQ(read->runs.size(), 2u);
  const ComparableMetric* efficiency = Metric(read->runs[1], "efficiency");
  ASSERT_NE(efficiency, nullptr);
  EXPECT_NEAR(efficiency->value, 10.0 / 12.0, 1e-6);

  // An analysis report is a set of one run.
  const Result<analyzer::Report> analysis = analyzer::AnalyzeRun(dir / "sweep" / "n2", {});
  ASSERT_TRUE(analysis.ok()) << analysis.status().message();
  const fs::path analysis_json = dir / "n2.json";
  WriteText(analysis_json, report::ReportToJson(*analysis));
  const Result<ComparableSet> one = LoadComparableSet(analysis_json, {}, &warnings, nullptr);
  ASSERT_TRUE(one.ok()) << one.status().message();
  EXPECT_FALSE(one->sweep);
  ASSERT_EQ(one->runs.size(), 1u);
  EXPECT_EQ(one->runs[0].workload.world_size, 2);
}

TEST(LoadComparableSet, AMissingPathIsOneLineNamingIt) {
  TempDir dir;
  std::vector<std::string> warnings;
  const Result<ComparableSet> set = LoadComparableSet(dir / "missing", {}, &warnings, nullptr);
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.status().code(), StatusCode::kNotFound);
  EXPECT_NE(set.status().message().find((dir / "missing").string()), std::string::npos);
  EXPECT_NE(set.status().message().find("no such file or directory"), std::string::npos);
  EXPECT_EQ(set.status().message().find('\n'), std::string::npos);
  EXPECT_TRUE(warnings.empty());
}

TEST(LoadComparableSet, ADirectoryThatIsNeitherRunNorSweepIsOneLine) {
  TempDir dir;
  fs::create_directories(dir / "other" / "n2");  // an n<N> directory without rank files
  std::ofstream(dir / "other" / "rank-0.sqlite.bak") << "not a rank file";
  std::ofstream(dir / "other" / "notes.txt") << "notes";
  std::vector<std::string> warnings;
  const Result<ComparableSet> set = LoadComparableSet(dir / "other", {}, &warnings, nullptr);
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(set.status().message().find("neither a run"), std::string::npos) << set.status().message();
  EXPECT_NE(set.status().message().find((dir / "other").string()), std::string::npos);
  EXPECT_EQ(set.status().message().find('\n'), std::string::npos);
}

TEST(LoadComparableSet, AFileInNoKnownFormatIsRefused) {
  TempDir dir;
  WriteText(dir / "notes.txt", "hello, not a trace");
  std::vector<std::string> warnings;
  const Result<ComparableSet> set = LoadComparableSet(dir / "notes.txt", {}, &warnings, nullptr);
  ASSERT_FALSE(set.ok());
  EXPECT_NE(set.status().message().find("notes.txt"), std::string::npos) << set.status().message();
  EXPECT_EQ(set.status().message().find('\n'), std::string::npos);
}

}  // namespace
}  // namespace rankscope::compare
