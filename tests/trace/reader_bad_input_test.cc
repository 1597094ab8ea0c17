// Each kind of bad rank file gives one clear error naming the file, never a crash, and
// reading never changes the file.
#include <sqlite3.h>

#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "trace/reader.h"
#include "trace_test_util.h"

namespace rankscope::trace {
namespace {

using testing::MakeIdentity;
using testing::TempDir;

void WriteBytes(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string ReadBytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void ExecOn(const std::filesystem::path& path, const char* sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  sqlite3_close(db);
}

// Opening (and loading, when opening succeeds) must fail with `code` and a one-line
// message that names the file and contains `words`.
void ExpectError(const std::filesystem::path& path, StatusCode code, const std::string& words) {
  auto reader = TraceReader::Open(path);
  Status status = reader.status();
  if (reader.ok()) status = (*reader)->LoadAll().status();
  ASSERT_FALSE(status.ok()) << path;
  EXPECT_EQ(status.code(), code) << status.message();
  EXPECT_NE(status.message().find(path.string()), std::string::npos) << status.message();
  EXPECT_NE(status.message().find(words), std::string::npos) << status.message();
  EXPECT_EQ(status.message().find('\n'), std::string::npos) << status.message();
}

TEST(ReaderBadInput, MissingFile) {
  TempDir dir;
  ExpectError(dir / "rank-0.sqlite", StatusCode::kNotFound, "no such file");
}

TEST(ReaderBadInput, Directory) {
  TempDir dir;
  ExpectError(dir.path(), StatusCode::kInvalidArgument, "is a directory");
}

TEST(ReaderBadInput, EmptyFile) {
  TempDir dir;
  WriteBytes(dir / "rank-0.sqlite", "");
  ExpectError(dir / "rank-0.sqlite", StatusCode::kCorrupt, "empty file");
}

TEST(ReaderBadInput, NotSqlite) {
  TempDir dir;
  const auto path = dir / "rank-0.sqlite";
  WriteBytes(path, "{\"traceEvents\": []}\n" + std::string(4096, 'x'));
  ExpectError(path, StatusCode::kCorrupt, "not an SQLite database");
  EXPECT_EQ(ReadBytes(path).substr(0, 16), "{\"traceEvents\": ");  // untouched
}

TEST(ReaderBadInput, TruncatedFile) {
  TempDir dir;
  const auto path = dir / "rank-0.sqlite";
  testing::WriteRankFile(path, MakeIdentity("r", 0, 1), 20000);
  const std::string bytes = ReadBytes(path);
  ASSERT_GT(bytes.size(), 100000u);
  WriteBytes(path, bytes.substr(0, bytes.size() / 2));
  ExpectError(path, StatusCode::kCorrupt, "truncated");
}

TEST(ReaderBadInput, TruncatedInsideTheHeader) {
  TempDir dir;
  const auto path = dir / "rank-0.sqlite";
  testing::WriteRankFile(path, MakeIdentity("r", 0, 1));
  WriteBytes(path, ReadBytes(path).substr(0, 60));
  ExpectError(path, StatusCode::kCorrupt, "truncated");
}

TEST(ReaderBadInput, DamagedPages) {
  TempDir dir;
  const auto path = dir / "rank-0.sqlite";
  testing::WriteRankFile(path, MakeIdentity("r", 0, 1), 20000);
  std::string bytes = ReadBytes(path);
  for (size_t i = 8192 * 3; i < bytes.size(); i += 8192) bytes.replace(i, 64, std::string(64, '\xa5'));
  WriteBytes(path, bytes);
  ExpectError(path, StatusCode::kCorrupt, "damaged");
}

TEST(ReaderBadInput, NewerSchema) {
  TempDir dir;
  const auto path = dir / "rank-0.sqlite";
  testing::WriteRankFile(path, MakeIdentity("r", 0, 1));
  ExecOn(path, "PRAGMA user_version=2");
  ExpectError(path, StatusCode::kUnsupported, "schema version 2 is newer");
}

TEST(ReaderBadInput, ForeignSqliteDatabase) {
  TempDir dir;
  const auto path = dir / "report.sqlite";
  ExecOn(path, "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL(start INTEGER, end INTEGER)");
  ExpectError(path, StatusCode::kCorrupt, "not a rankscope trace");
}

TEST(ReaderBadInput, MissingTable) {
  TempDir dir;
  const auto path = dir / "rank-0.sqlite";
  testing::WriteRankFile(path, MakeIdentity("r", 0, 1));
  ExecOn(path, "DROP TABLE memsets");
  ExpectError(path, StatusCode::kCorrupt, "table 'memsets' is missing or malformed");
}

TEST(ReaderBadInput, MetaWithoutRunId) {
  TempDir dir;
  const auto path = dir / "rank-0.sqlite";
  testing::WriteRankFile(path, MakeIdentity("r", 0, 1));
  ExecOn(path, "DELETE FROM meta WHERE key='run_id'");
  ExpectError(path, StatusCode::kCorrupt, "no run_id");
}

TEST(ReaderBadInput, MalformedMetaNumber) {
  TempDir dir;
  const auto path = dir / "rank-0.sqlite";
  testing::WriteRankFile(path, MakeIdentity("r", 0, 1));
  ExecOn(path, "UPDATE meta SET value='zero' WHERE key='rank'");
  ExpectError(path, StatusCode::kCorrupt, "meta key 'rank' is not a number");
}

TEST(ReaderBadInput, ReadingDoesNotModifyTheFile) {
  TempDir dir;
  const auto path = dir / "rank-0.sqlite";
  testing::WriteRankFile(path, MakeIdentity("r", 0, 1), 1000);
  const std::string before = ReadBytes(path);
  auto reader = TraceReader::Open(path);
  ASSERT_TRUE(reader.ok());
  ASSERT_TRUE((*reader)->LoadAll().ok());
  ASSERT_TRUE((*reader)->ReadLaneRange(1, 0, 100000).ok());
  reader->reset();
  EXPECT_EQ(ReadBytes(path), before);
  EXPECT_FALSE(std::filesystem::exists(path.string() + "-wal"));
}

}  // namespace
}  // namespace rankscope::trace
