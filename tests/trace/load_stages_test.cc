// TraceReader::LoadAll's stages where earlier tests leave them uncovered: planning chunks
// over the row ids, and a load with nothing to plan.
#include <gtest/gtest.h>

#include "trace/reader.h"
#include "trace_test_util.h"

namespace rankscope::trace {
namespace {

using testing::MakeIdentity;
using testing::TempDir;

Result<RankTrace> Load(const std::filesystem::path& path, int threads) {
  RS_ASSIGN_OR_RETURN(std::unique_ptr<TraceReader> reader, TraceReader::Open(path));
  return reader->LoadAll(LoadOptions{threads});
}

TEST(LoadStages, RowIdBelowOneIsRefusedNamingTheTable) {
  TempDir dir;
  const auto path = dir / "rank-0.sqlite";
  testing::WriteRankFile(path, MakeIdentity("r", 0, 1));
  for (const char* sql : {"UPDATE kernels SET id = 0 WHERE id = 1", "UPDATE kernels SET id = -7 WHERE id = 0"}) {
    testing::ExecSql(path, sql);
    Result<RankTrace> trace = Load(path, 2);
    ASSERT_FALSE(trace.ok()) << sql;
    EXPECT_EQ(trace.status().code(), StatusCode::kCorrupt);
    EXPECT_NE(trace.status().message().find(path.string()), std::string::npos) << trace.status().message();
    EXPECT_NE(trace.status().message().find("table 'kernels' has row id"), std::string::npos)
        << trace.status().message();
  }
}

TEST(LoadStages, SparseRowIdsAcrossManyBlocksLoadWhole) {
  TempDir dir;
  const auto path = dir / "rank-0.sqlite";
  testing::WriteRankFile(path, MakeIdentity("r", 0, 1), 10);
  // One row per block, a million ids apart, in reverse time order: the directory no longer
  // describes any block, so every block is counted, and the lane is sorted by time.
  testing::ExecSql(path, "UPDATE kernels SET id = (11 - id) * 1000000007");
  for (int threads : {1, 3}) {
    Result<RankTrace> trace = Load(path, threads);
    ASSERT_TRUE(trace.ok()) << trace.status().message();
    ASSERT_EQ(trace->events.kernels.size(), 10u);
    for (size_t i = 0; i < 10; ++i) EXPECT_EQ(trace->events.kernels[i].start_ns, 1000 * static_cast<int64_t>(i));
  }
}

TEST(LoadStages, FileWithoutEventsLoadsEmptyTables) {
  TempDir dir;
  const auto path = dir / "rank-0.sqlite";
  testing::WriteRankFile(path, MakeIdentity("r", 0, 1), 0);
  Result<RankTrace> trace = Load(path, 8);
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  EXPECT_TRUE(trace->events.empty());
  EXPECT_EQ(trace->lanes.size(), 1u);
  ASSERT_FALSE(trace->strings.empty());
  EXPECT_EQ(trace->strings[0], "");
  EXPECT_EQ(trace->meta.rank, 0);
}

}  // namespace
}  // namespace rankscope::trace
