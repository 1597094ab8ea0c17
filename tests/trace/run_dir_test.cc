// Run directories: rank files are found, checked to belong to one run, and gaps reported.
#include <fstream>

#include <gtest/gtest.h>

#include "trace/run_dir.h"
#include "trace_test_util.h"

namespace rankscope::trace {
namespace {

using testing::MakeIdentity;
using testing::TempDir;
using testing::WriteRankFile;

TEST(RunDir, FileNames) {
  EXPECT_EQ(RankFileName(12), "rank-12.sqlite");
  EXPECT_EQ(UnknownRankFileName(4711), "rank-unknown-4711.sqlite");
  EXPECT_EQ(ParseRankFileName("rank-12.sqlite").rank, 12);
  EXPECT_TRUE(ParseRankFileName("rank-unknown-4711.sqlite").is_rank_file);
  EXPECT_FALSE(ParseRankFileName("rank-unknown-4711.sqlite").rank.has_value());
  for (const char* other : {"rank-.sqlite", "rank-1.sqlite-wal", "rank-x.sqlite", "rank--1.sqlite", "rank-00.sqlite",
                            "rank-07.sqlite", "rank-unknown-012.sqlite",
                            "report.json", "rank-99999999999.sqlite", "rank-unknown-.sqlite"}) {
    EXPECT_FALSE(ParseRankFileName(other).is_rank_file) << other;
  }
}

TEST(RunDir, RunIdsAreRandomHex) {
  const std::string a = GenerateRunId(), b = GenerateRunId();
  EXPECT_TRUE(IsValidRunId(a));
  EXPECT_FALSE(IsValidRunId(""));
  EXPECT_FALSE(IsValidRunId("has space"));
  EXPECT_FALSE(IsValidRunId(std::string(129, 'a')));
  EXPECT_EQ(a.size(), 32u);
  EXPECT_NE(a, b);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos);
}

TEST(RunDir, CompleteRun) {
  TempDir dir;
  for (int r = 2; r >= 0; --r) WriteRankFile(dir / RankFileName(r), MakeIdentity("run1", r, 3));
  WriteRankFile(dir / UnknownRankFileName(99), MakeIdentity("run1", std::nullopt, std::nullopt));
  std::ofstream(dir / "notes.txt") << "ignored";
  auto run = OpenRun(dir.path());
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(run->run_id, "run1");
  EXPECT_EQ(run->world_size, 3);
  ASSERT_EQ(run->ranks.size(), 3u);
  for (int r = 0; r < 3; ++r) EXPECT_EQ(run->ranks[r].meta.rank, r);
  EXPECT_EQ(run->unranked.size(), 1u);
  EXPECT_TRUE(run->complete());
  EXPECT_TRUE(run->Warnings().empty());
}

TEST(RunDir, MissingAndExtraRanksAreReported) {
  TempDir dir;
  WriteRankFile(dir / RankFileName(0), MakeIdentity("run1", 0, 4));
  WriteRankFile(dir / RankFileName(2), MakeIdentity("run1", 2, 4));
  auto run = OpenRun(dir.path());
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(run->missing_ranks, (std::vector<int>{1, 3}));
  EXPECT_FALSE(run->complete());
  ASSERT_EQ(run->Warnings().size(), 1u);
  EXPECT_NE(run->Warnings()[0].find("missing rank files for rank(s) 1, 3 of world size 4"),
            std::string::npos)
      << run->Warnings()[0];
}

TEST(RunDir, ManyMissingRanksAreReportedAsRanges) {
  TempDir dir;
  WriteRankFile(dir / RankFileName(5), MakeIdentity("run1", 5, 1000));
  auto run = OpenRun(dir.path());
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(run->missing_ranks.size(), 999u);
  ASSERT_EQ(run->Warnings().size(), 1u);
  EXPECT_NE(run->Warnings()[0].find("rank(s) 0-4, 6-999 of world size 1000"), std::string::npos)
      << run->Warnings()[0];
}

TEST(RunDir, SingleFileIsARunOfOne) {
  TempDir dir;
  WriteRankFile(dir / RankFileName(1), MakeIdentity("run1", 1, 2));
  auto run = OpenRun(dir / RankFileName(1));
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(run->ranks.size(), 1u);
  EXPECT_EQ(run->missing_ranks, (std::vector<int>{0}));
}

void ExpectRunError(const std::filesystem::path& path, StatusCode code, const std::string& words) {
  auto run = OpenRun(path);
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), code) << run.status().message();
  EXPECT_NE(run.status().message().find(words), std::string::npos) << run.status().message();
  EXPECT_EQ(run.status().message().find('\n'), std::string::npos);
}

TEST(RunDir, MissingDirectory) {
  TempDir dir;
  ExpectRunError(dir / "nope", StatusCode::kNotFound, "no such run directory");
}

TEST(RunDir, EmptyDirectory) {
  TempDir dir;
  std::ofstream(dir / "rank-0.sqlite-wal") << "";
  ExpectRunError(dir.path(), StatusCode::kNotFound, "no rank files");
}

TEST(RunDir, FilesOfTwoRuns) {
  TempDir dir;
  WriteRankFile(dir / RankFileName(0), MakeIdentity("run-a", 0, 2));
  WriteRankFile(dir / RankFileName(1), MakeIdentity("run-b", 1, 2));
  ExpectRunError(dir.path(), StatusCode::kInconsistent, "rank files of two different runs");
  ExpectRunError(dir.path(), StatusCode::kInconsistent, "rank-1.sqlite: belongs to run 'run-b'");
}

TEST(RunDir, FileNameDisagreesWithRecordedRank) {
  TempDir dir;
  WriteRankFile(dir / RankFileName(0), MakeIdentity("run1", 1, 2));
  ExpectRunError(dir.path(), StatusCode::kInconsistent, "file name says rank 0 but the file records rank 1");
}

TEST(RunDir, DisagreeingWorldSizes) {
  TempDir dir;
  WriteRankFile(dir / RankFileName(0), MakeIdentity("run1", 0, 2));
  WriteRankFile(dir / RankFileName(1), MakeIdentity("run1", 1, 4));
  ExpectRunError(dir.path(), StatusCode::kInconsistent, "records world size 4");
}

TEST(RunDir, CorruptRankFileIsNamed) {
  TempDir dir;
  WriteRankFile(dir / RankFileName(0), MakeIdentity("run1", 0, 2));
  std::ofstream(dir / RankFileName(1)) << "garbage that is not sqlite, padded to be long enough";
  ExpectRunError(dir.path(), StatusCode::kCorrupt, "rank-1.sqlite: not an SQLite database");
}

}  // namespace
}  // namespace rankscope::trace
