// Rank files whose id columns hold ids the file does not have (-1, 987654321, 2^31,
// 2^63-1): the analysis and the viewer's stream finish, quickly and without sizing anything
// by those ids, with each such row counted invalid and the rest measured.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "analyzer/analyze.h"
#include "analyzer/run_events.h"
#include "tests/analyzer/hostile_rank_file.h"
#include "tests/temp_dir.h"
#include "tests/trace_builder.h"

namespace rankscope::analyzer {
namespace {

namespace fs = std::filesystem;
using rankscope::testing::IdColumn;
using rankscope::testing::TempDir;

class HostileIdsTest : public ::testing::TestWithParam<IdColumn> {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    rankscope::testing::WriteSoundRankFile(Sound());
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static fs::path Sound() { return *dir_ / "sound.sqlite"; }

  // A copy of the sound file with GetParam()'s column damaged.
  fs::path Damaged() {
    const IdColumn& column = GetParam();
    const fs::path path = *dir_ / (std::string(column.table) + "." + column.column + ".sqlite");
    fs::copy_file(Sound(), path, fs::copy_options::overwrite_existing);
    rankscope::testing::DamageIdColumn(path, column);
    return path;
  }

  static TempDir* dir_;
};

TempDir* HostileIdsTest::dir_ = nullptr;

TEST_P(HostileIdsTest, AnalysisCountsTheRowsInvalid) {
  const fs::path path = Damaged();
  AnalyzeOptions options;
  options.threads = 1;
  const Result<Report> report = AnalyzeRun(path, options);
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_EQ(report->run.events, rankscope::testing::kAnalyzedRows);
  const int64_t damaged = GetParam().analyzed ? 4 : 0;
  EXPECT_EQ(report->run.invalid_events, damaged);
  const bool warned = std::any_of(report->warnings.begin(), report->warnings.end(), [](const std::string& warning) {
    return warning.find("4 damaged event(s)") != std::string::npos;
  });
  EXPECT_EQ(warned, damaged > 0);
}

// Keeps what the stream sends, checking every id against the rank's tables.
class CheckingSink final : public ViewEventSink {
 public:
  Status OnRank(size_t, ViewRank rank) override {
    strings_ = rank.strings.size();
    lanes_ = rank.lanes.size();
    return Status::Ok();
  }
  Status OnEvents(size_t, std::span<const ViewEvent> events) override {
    for (const ViewEvent& event : events) {
      EXPECT_GE(event.lane, 1u);
      EXPECT_LE(event.lane, lanes_);
      EXPECT_LT(event.name, strings_);
    }
    events_ += static_cast<int64_t>(events.size());
    return Status::Ok();
  }
  Status OnRankDone(size_t) override { return Status::Ok(); }
  int64_t events() const { return events_; }

 private:
  size_t strings_ = 0, lanes_ = 0;
  int64_t events_ = 0;
};

TEST_P(HostileIdsTest, ViewerStreamSkipsAndCountsTheRows) {
  const fs::path path = Damaged();
  CheckingSink sink;
  ViewLoadOptions options;
  options.threads = 1;
  const Result<ViewRun> run = StreamRunEvents(path, options, sink);
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(run->invalid_events, 4);
  EXPECT_EQ(sink.events(), rankscope::testing::kAllRows - 4);
}

std::string ColumnName(const ::testing::TestParamInfo<IdColumn>& info) {
  return std::string(info.param.table) + "_" + info.param.column;
}

INSTANTIATE_TEST_SUITE_P(EveryIdColumn, HostileIdsTest, ::testing::ValuesIn(rankscope::testing::IdColumns()),
                         ColumnName);

TEST(HostileIdsTest, SoundFileHasNothingInvalid) {
  TempDir dir;
  rankscope::testing::WriteSoundRankFile(dir / "rank-0.sqlite");
  const Result<Report> report = AnalyzeRun(dir / "rank-0.sqlite", AnalyzeOptions{});
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_EQ(report->run.events, rankscope::testing::kAnalyzedRows);
  EXPECT_EQ(report->run.invalid_events, 0);
}

// Traces in memory (AnalyzeTraces, the importers' and tests' path) get the same checks.
TEST(HostileIdsTest, InMemoryTraceIdsOutOfRangeAreInvalid) {
  testing::TraceBuilder b(0, 1);
  const trace::LaneId gpu = b.GpuStream(0);
  for (int i = 0; i < 6; ++i) b.Kernel(gpu, "gemm", 1000 * i, 1000 * i + 400);
  trace::RankTrace trace = b.Build();
  trace.events.kernels[0].name = 0xFFFFFFFFu;
  trace.events.kernels[1].name = 987654321u;
  trace.events.kernels[2].lane = 0x80000000u;
  trace.events.kernels[3].lane = trace::kNoLane;
  const Result<Report> report = AnalyzeTraces({trace}, AnalyzeOptions{});
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_EQ(report->run.invalid_events, 4);
  ASSERT_EQ(report->ranks.size(), 1u);
  EXPECT_EQ(report->ranks[0].totals.compute_ns, 800);  // the two sound kernels
}

// A workload mark's numbers come from the file too: a global batch that would overflow int64
// is unknown, not a wrapped product.
TEST(HostileIdsTest, AWorkloadMarkOfHugeNumbersGivesNoGlobalBatch) {
  testing::TraceBuilder b(0, 1);
  const trace::LaneId gpu = b.GpuStream(0);
  const trace::LaneId main = b.CpuThread("main");
  b.Mark(main, "rankscope", "workload", 0,
         "{\"world_size\": 4, \"batch\": 4611686018427387904, \"accum\": 8, \"steps\": 1}");
  b.Kernel(gpu, "gemm", 100, 500);
  const Result<Report> report = AnalyzeTraces({b.Build()}, AnalyzeOptions{});
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_EQ(report->workload.batch_per_rank, int64_t{4611686018427387904});
  EXPECT_FALSE(report->workload.global_batch.has_value()) << *report->workload.global_batch;
}

}  // namespace
}  // namespace rankscope::analyzer
