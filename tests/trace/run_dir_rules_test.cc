// The run-directory rules every command shares (trace/run_dir.h): which files are rank
// files, which are their SQLite companions, and what replacing a run's rank files removes.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "trace/run_dir.h"
#include "trace_test_util.h"

namespace rankscope::trace {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

void Touch(const fs::path& path) { std::ofstream(path) << "x"; }

// The entry names under `dir`, subdirectories' entries as "sub/name".
std::set<std::string> Entries(const fs::path& dir) {
  std::set<std::string> names;
  for (const fs::directory_entry& entry : fs::recursive_directory_iterator(dir)) {
    names.insert(fs::relative(entry.path(), dir).string());
  }
  return names;
}

std::vector<std::string> FileNames(const std::vector<fs::path>& paths) {
  std::vector<std::string> names;
  for (const fs::path& path : paths) names.push_back(path.filename().string());
  return names;
}

TEST(RunDirRules, CompanionsAreTheWalTheShmTheJournalAndTheReserve) {
  EXPECT_EQ(RankFileCompanions("/run/rank-3.sqlite"),
            (std::vector<fs::path>{"/run/rank-3.sqlite-wal", "/run/rank-3.sqlite-shm", "/run/rank-3.sqlite-journal",
                                   "/run/rank-3.sqlite-reserve"}));
  EXPECT_EQ(RankFileCompanions("rank-unknown-77.sqlite"),
            (std::vector<fs::path>{"rank-unknown-77.sqlite-wal", "rank-unknown-77.sqlite-shm",
                                   "rank-unknown-77.sqlite-journal", "rank-unknown-77.sqlite-reserve"}));
}

TEST(RunDirRules, RankFilesAndCompanionsAndLookAlikes) {
  for (const char* name : {"rank-0.sqlite", "rank-17.sqlite-wal", "rank-3.sqlite-shm", "rank-3.sqlite-journal",
                           "rank-3.sqlite-reserve", "rank-unknown-42.sqlite", "rank-unknown-42.sqlite-wal", "rank-unknown-42.sqlite-journal"}) {
    EXPECT_TRUE(IsRankFileOrCompanion(name)) << name;
  }
  for (const char* name : {"notes.txt", "rank-1.sqlite.bak", "rank-x.sqlite", "rank-00.sqlite", "rank-x.sqlite-wal",
                           "rank-0.sqlite-wal-shm", "rank-0.sqlite-journal-wal", "my-rank-0.sqlite", "rank-0.db",
                           "rank-unknown-.sqlite-wal", "rank-0.sqlite-", "-wal"}) {
    EXPECT_FALSE(IsRankFileOrCompanion(name)) << name;
  }
}

TEST(RunDirRules, ListsRankFilesOnlySortedAndNotInSubdirectories) {
  TempDir dir;
  for (const char* name : {"rank-1.sqlite", "rank-0.sqlite", "rank-unknown-9.sqlite", "rank-0.sqlite-wal",
                           "rank-1.sqlite.bak", "rank-x.sqlite", "report.json"}) {
    Touch(dir / name);
  }
  fs::create_directory(dir / "n2");
  Touch(dir / "n2" / "rank-5.sqlite");
  const Result<std::vector<fs::path>> files = ListRankFiles(dir.path());
  ASSERT_TRUE(files.ok()) << files.status().message();
  EXPECT_EQ(FileNames(*files), (std::vector<std::string>{"rank-0.sqlite", "rank-1.sqlite", "rank-unknown-9.sqlite"}));
  EXPECT_EQ(files->front().parent_path(), dir.path());
  EXPECT_TRUE(HasRankFiles(dir.path()));
}

TEST(RunDirRules, NoRankFilesAndMissingDirectories) {
  TempDir dir;
  for (const char* name : {"rank-1.sqlite.bak", "rank-x.sqlite", "rank-0.sqlite-wal", "notes.txt"}) Touch(dir / name);
  fs::create_directory(dir / "sub");
  Touch(dir / "sub" / "rank-0.sqlite");
  EXPECT_FALSE(HasRankFiles(dir.path()));
  const Result<std::vector<fs::path>> none = ListRankFiles(dir.path());
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_TRUE(none->empty());

  EXPECT_FALSE(HasRankFiles(dir / "missing"));
  const Result<std::vector<fs::path>> missing = ListRankFiles(dir / "missing");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("missing"), std::string::npos);
  EXPECT_EQ(missing.status().message().find('\n'), std::string::npos);
}

TEST(RunDirRules, RemoveTakesRankFilesWithTheirCompanionsAndKeepsTheRest) {
  TempDir dir;
  const std::vector<std::string> doomed = {"rank-0.sqlite",          "rank-0.sqlite-wal",
                                           "rank-0.sqlite-shm",      "rank-0.sqlite-journal",
                                           "rank-1.sqlite",          "rank-2.sqlite-journal",  // its rank file is gone
                                           "rank-unknown-77.sqlite", "rank-unknown-77.sqlite-wal"};
  for (const std::string& name : doomed) Touch(dir / name);
  for (const char* kept : {"rank-1.sqlite.bak", "rank-x.sqlite", "rank-x.sqlite-wal", "notes.txt", "scaling.json"}) {
    Touch(dir / kept);
  }
  fs::create_directory(dir / "plots");
  Touch(dir / "plots" / "rank-0.sqlite");

  const Result<std::vector<fs::path>> removed = RemoveRankFiles(dir.path());
  ASSERT_TRUE(removed.ok()) << removed.status().message();
  std::vector<std::string> sorted = doomed;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(FileNames(*removed), sorted);
  EXPECT_EQ(Entries(dir.path()), (std::set<std::string>{"rank-1.sqlite.bak", "rank-x.sqlite", "rank-x.sqlite-wal",
                                                        "notes.txt", "scaling.json", "plots", "plots/rank-0.sqlite"}));
  EXPECT_FALSE(HasRankFiles(dir.path()));
}

TEST(RunDirRules, RemoveOnADirectoryWithoutRankFilesRemovesNothing) {
  TempDir dir;
  Touch(dir / "notes.txt");
  const Result<std::vector<fs::path>> removed = RemoveRankFiles(dir.path());
  ASSERT_TRUE(removed.ok()) << removed.status().message();
  EXPECT_TRUE(removed->empty());
  EXPECT_EQ(Entries(dir.path()), (std::set<std::string>{"notes.txt"}));
}

TEST(RunDirRules, RemoveRefusesARankNamedDirectoryBeforeRemovingAnything) {
  TempDir dir;
  Touch(dir / "rank-0.sqlite");
  Touch(dir / "rank-0.sqlite-wal");
  fs::create_directory(dir / "rank-1.sqlite-journal");
  const std::set<std::string> before = Entries(dir.path());
  const Result<std::vector<fs::path>> removed = RemoveRankFiles(dir.path());
  ASSERT_FALSE(removed.ok());
  EXPECT_EQ(removed.status().code(), StatusCode::kAlreadyExists);
  EXPECT_NE(removed.status().message().find("rank-1.sqlite-journal"), std::string::npos);
  EXPECT_EQ(Entries(dir.path()), before);
}

TEST(RunDirRules, RemoveOnAMissingDirectoryIsAnError) {
  TempDir dir;
  const Result<std::vector<fs::path>> removed = RemoveRankFiles(dir / "missing");
  ASSERT_FALSE(removed.ok());
  EXPECT_EQ(removed.status().code(), StatusCode::kIo);
  EXPECT_EQ(removed.status().message().find('\n'), std::string::npos);
}

// OpenRun finds a run's files by the same rule: companions and look-alikes are not ranks.
TEST(RunDirRules, OpenRunIgnoresCompanionsAndLookAlikes) {
  TempDir dir;
  testing::WriteRankFile(dir / RankFileName(0), testing::MakeIdentity("run1", 0, 1));
  for (const char* name : {"rank-1.sqlite-wal", "rank-1.sqlite.bak", "rank-x.sqlite"}) Touch(dir / name);
  const Result<trace::Run> run = OpenRun(dir.path());
  ASSERT_TRUE(run.ok()) << run.status().message();
  ASSERT_EQ(run->ranks.size(), 1u);
  EXPECT_TRUE(run->unranked.empty());
  EXPECT_TRUE(run->complete());
}

}  // namespace
}  // namespace rankscope::trace
