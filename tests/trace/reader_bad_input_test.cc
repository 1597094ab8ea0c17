// Each kind of bad rank file gives one clear error naming the file, never a crash or a hang,
// and reading never changes the file.
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <mutex>
#include <span>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "trace/reader.h"
#include "trace/schema.h"
#include "trace_test_util.h"

namespace rankscope::trace {
namespace {

using testing::KernelCounter;
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
  ExpectError(dir.path(), StatusCode::kInvalidArgument, "not a regular file (a directory)");
}

// Opening a FIFO for reading blocks until someone writes to it: the reader must refuse it
// without opening it. Should it open it anyway, the guard keeps opening the writing end
// after 10 s, so the test fails instead of hanging.
class FifoGuard {
 public:
  explicit FifoGuard(std::filesystem::path fifo) : fifo_(std::move(fifo)), thread_([this] { Run(); }) {}
  ~FifoGuard() {
    {
      std::lock_guard lock(mu_);
      done_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }
  bool rescued() const { return rescued_; }

 private:
  void Run() {
    std::unique_lock lock(mu_);
    if (cv_.wait_for(lock, std::chrono::seconds(10), [this] { return done_; })) return;
    rescued_ = true;
    while (!cv_.wait_for(lock, std::chrono::milliseconds(50), [this] { return done_; })) {
      const int fd = open(fifo_.c_str(), O_WRONLY | O_NONBLOCK);
      if (fd >= 0) close(fd);
    }
  }

  std::filesystem::path fifo_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::atomic<bool> rescued_{false};
  std::thread thread_;
};

TEST(ReaderBadInput, FifoIsRefusedWithoutOpeningIt) {
  TempDir dir;
  const auto path = dir / "rank-0.sqlite";
  ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
  bool rescued = false;
  {
    FifoGuard guard(path);
    ExpectError(path, StatusCode::kInvalidArgument, "not a regular file (a FIFO)");
    rescued = guard.rescued();
  }
  EXPECT_FALSE(rescued) << "the reader opened the FIFO and hung until the guard wrote to it";
}

TEST(ReaderBadInput, FifoBesideTheFileIsRefusedWithoutOpeningIt) {
  TempDir dir;
  const auto path = dir / "rank-0.sqlite";
  testing::WriteRankFile(path, MakeIdentity("r", 0, 1));
  const std::filesystem::path wal = path.string() + "-wal";
  ASSERT_EQ(mkfifo(wal.c_str(), 0600), 0);
  bool rescued = false;
  {
    FifoGuard guard(wal);
    ExpectError(path, StatusCode::kInvalidArgument, "its -wal file: not a regular file (a FIFO)");
    rescued = guard.rescued();
  }
  EXPECT_FALSE(rescued) << "the reader opened the FIFO and hung until the guard wrote to it";
}

TEST(ReaderBadInput, DeviceIsRefused) {
  ExpectError("/dev/null", StatusCode::kInvalidArgument, "not a regular file (a character device)");
}

TEST(ReaderBadInput, SocketIsRefused) {
  TempDir dir;
  const auto path = dir / "rank-0.sqlite";
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  ASSERT_LT(path.string().size(), sizeof address.sun_path);
  std::strcpy(address.sun_path, path.c_str());
  ASSERT_EQ(bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address), 0);
  ExpectError(path, StatusCode::kInvalidArgument, "not a regular file (a socket)");
  close(fd);
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


// Every way of reading the events fails with one line naming the file and `words`.
void ExpectEveryReadFails(const std::filesystem::path& path, const std::string& words) {
  auto reader = TraceReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  KernelCounter counter;
  const Status statuses[] = {(*reader)->LoadAll(LoadOptions{2}).status(), (*reader)->LoadAll(LoadOptions{1}).status(),
                             (*reader)->Stream(counter), (*reader)->ReadLaneRange(1, 0, INT64_MAX).status()};
  for (const Status& status : statuses) {
    EXPECT_EQ(status.code(), StatusCode::kCorrupt) << status.message();
    EXPECT_EQ(status.message().rfind(path.string() + ": ", 0), 0u) << status.message();
    EXPECT_NE(status.message().find(words), std::string::npos) << status.message();
    EXPECT_EQ(status.message().find('\n'), std::string::npos) << status.message();
  }
}

// The pages of `table` of the kind `pagetype` ('leaf', 'internal'), in file order.
std::vector<int64_t> PagesOf(const std::filesystem::path& path, const char* table, const char* pagetype) {
  std::vector<int64_t> pages;
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, "SELECT pageno FROM dbstat WHERE name = ?1 AND pagetype = ?2 ORDER BY pageno", -1,
                               &stmt, nullptr),
            SQLITE_OK)
      << sqlite3_errmsg(db);
  sqlite3_bind_text(stmt, 1, table, -1, SQLITE_STATIC);
  sqlite3_bind_text(stmt, 2, pagetype, -1, SQLITE_STATIC);
  while (sqlite3_step(stmt) == SQLITE_ROW) pages.push_back(sqlite3_column_int64(stmt, 0));
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return pages;
}

void ZeroPage(const std::filesystem::path& path, int64_t page) {
  std::string bytes = ReadBytes(path);
  bytes.replace(static_cast<size_t>(page - 1) * kPageSize, kPageSize, kPageSize, '\0');
  WriteBytes(path, bytes);
}

// A page of zeros in the middle of the kernels table is damage, never fewer kernels.
TEST(ReaderBadInput, ZeroedPageIsAnErrorNotFewerRows) {
  TempDir dir;
  const auto path = dir / "rank-0.sqlite";
  testing::WriteRankFile(path, MakeIdentity("r", 0, 1), 20000);
  const std::vector<int64_t> leaves = PagesOf(path, "kernels", "leaf");
  ASSERT_GE(leaves.size(), 10u);
  ZeroPage(path, leaves[leaves.size() / 2]);
  ExpectEveryReadFails(path, "reading table 'kernels': the database is damaged");
}

// The same for a table without rows, whose only page is its root: not an empty table.
TEST(ReaderBadInput, ZeroedPageOfAnEmptyTableIsAnError) {
  TempDir dir;
  const auto path = dir / "rank-0.sqlite";
  testing::WriteRankFile(path, MakeIdentity("r", 0, 1));
  const std::vector<int64_t> root = PagesOf(path, "syncs", "leaf");
  ASSERT_EQ(root.size(), 1u);
  ZeroPage(path, root[0]);
  auto reader = TraceReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  const Status loaded = (*reader)->LoadAll().status();
  EXPECT_EQ(loaded.code(), StatusCode::kCorrupt);
  EXPECT_NE(loaded.message().find("table 'syncs': the database is damaged"), std::string::npos) << loaded.message();
}

// A lane or string id that does not fit 32 bits would alias another one: an error naming
// the table and the column.
// An id column that cannot hold an id reads as kUnreadableId, which names nothing: the row
// is kept for the analysis to count invalid, and aliases no real string or lane.
TEST(ReaderBadInput, IdsOutOfRangeReadAsNamingNothing) {
  TempDir dir;
  const auto path = dir / "rank-0.sqlite";
  testing::WriteRankFile(path, MakeIdentity("r", 0, 1));
  testing::ExecSql(path, "UPDATE kernels SET name = 4294967297 WHERE id = 3; UPDATE kernels SET lane = -1 WHERE id = 5");
  auto reader = TraceReader::Open(path);
  ASSERT_TRUE(reader.ok());
  for (int threads : {1, 2}) {
    Result<RankTrace> trace = (*reader)->LoadAll(LoadOptions{threads});
    ASSERT_TRUE(trace.ok()) << trace.status().message();
    ASSERT_EQ(trace->events.kernels.size(), 10u);
    int unreadable_names = 0, unreadable_lanes = 0;
    for (const KernelEvent& k : trace->events.kernels) {
      unreadable_names += k.name == kUnreadableId;
      unreadable_lanes += k.lane == kUnreadableId;
    }
    EXPECT_EQ(unreadable_names, 1);
    EXPECT_EQ(unreadable_lanes, 1);
    EXPECT_EQ(trace->str(kUnreadableId), "");
    EXPECT_EQ(trace->lane(kUnreadableId), nullptr);
  }
  KernelCounter counter;
  EXPECT_TRUE((*reader)->Stream(counter).ok());
  EXPECT_EQ(counter.kernels, 10u);
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

// A valid rank file edited by another tool into each kind of bad file.
struct EditCase {
  const char* name;
  const char* sql;
  StatusCode code;
  const char* words;
};

class EditedRankFile : public ::testing::TestWithParam<EditCase> {};

TEST_P(EditedRankFile, IsRefusedWithOneLine) {
  TempDir dir;
  const auto path = dir / "rank-0.sqlite";
  testing::WriteRankFile(path, MakeIdentity("r", 0, 1));
  testing::ExecSql(path, GetParam().sql);
  ExpectError(path, GetParam().code, GetParam().words);
}

INSTANTIATE_TEST_SUITE_P(
    ReaderBadInput, EditedRankFile,
    ::testing::Values(
        EditCase{"NewerSchema", "PRAGMA user_version=4", StatusCode::kUnsupported, "schema version 4 is newer"},
        EditCase{"SchemaVersionZero", "PRAGMA user_version=0", StatusCode::kCorrupt,
                 "invalid trace schema version 0"},
        EditCase{"MissingTable", "DROP TABLE memsets", StatusCode::kCorrupt,
                 "table 'memsets' is missing or malformed"},
        // A version 2 file must have what version 2 added.
        EditCase{"MissingOverheadsTable", "DROP TABLE overheads", StatusCode::kCorrupt,
                 "table 'overheads' is missing or malformed"},
        EditCase{"MissingCollectivePartsTable", "DROP TABLE collective_parts", StatusCode::kCorrupt,
                 "table 'collective_parts' is missing or malformed"},
        EditCase{"ApiCallsWithoutExternalId", "ALTER TABLE api_calls DROP COLUMN external_id",
                 StatusCode::kCorrupt, "table 'api_calls' is missing or malformed"},
        EditCase{"OverheadsReplacedByView",
                 "DROP TABLE overheads; CREATE VIEW overheads AS SELECT id, lane, start_ns, end_ns, name, "
                 "correlation_id, 0 AS overhead_kind FROM kernels",
                 StatusCode::kCorrupt, "table 'overheads' is missing or malformed"},
        EditCase{"MissingStringsTable", "DROP TABLE strings", StatusCode::kCorrupt,
                 "table 'strings' is missing or malformed"},
        EditCase{"LaneBlocksWithoutColumn", "ALTER TABLE lane_blocks DROP COLUMN rows", StatusCode::kCorrupt,
                 "table 'lane_blocks' is missing or malformed"},
        EditCase{"TableReplacedByView",
                 "ALTER TABLE meta RENAME TO meta0; CREATE VIEW meta AS WITH RECURSIVE c(i) AS "
                 "(SELECT 1 UNION ALL SELECT i + 1 FROM c) SELECT m.key, m.value FROM c, meta0 m",
                 StatusCode::kCorrupt, "table 'meta' is missing or malformed"},
        EditCase{"SparseStringIds", "UPDATE strings SET id = 4000000000 WHERE id = 1", StatusCode::kCorrupt,
                 "string ids are not 1..N"},
        EditCase{"HugeLaneId", "UPDATE lanes SET id = 4294967297 WHERE id = 1", StatusCode::kCorrupt,
                 "lane ids are not 1..N"},
        EditCase{"MetaWithoutRunId", "DELETE FROM meta WHERE key='run_id'", StatusCode::kCorrupt, "no run_id"},
        EditCase{"MalformedMetaNumber", "UPDATE meta SET value='zero' WHERE key='rank'", StatusCode::kCorrupt,
                 "meta key 'rank' is not a number"},
        EditCase{"NegativeWorldSize", "UPDATE meta SET value='-2' WHERE key='world_size'", StatusCode::kCorrupt,
                 "world_size -2 is out of range"},
        EditCase{"HugeWorldSize", "UPDATE meta SET value='2147483647' WHERE key='world_size'",
                 StatusCode::kCorrupt, "world_size 2147483647 is out of range"},
        // The file's text is escaped, so the message stays on one line.
        EditCase{"MultiLineMetaValue", "UPDATE meta SET value='1' || char(10) || '2' WHERE key='rank'",
                 StatusCode::kCorrupt, "meta key 'rank' is not a number: '1\\x0a2'"}),
    [](const ::testing::TestParamInfo<EditCase>& param) { return param.param.name; });

TEST(ReaderBadInput, ForeignSqliteDatabase) {
  TempDir dir;
  const auto path = dir / "report.sqlite";
  testing::ExecSql(path, "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL(start INTEGER, end INTEGER)");
  ExpectError(path, StatusCode::kCorrupt, "not a rankscope trace");
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

namespace rankscope::trace {
namespace {

// Hostile files that stay loadable: the reader must neither crash nor allocate far more
// than the file's size, and must return exactly the rows the file holds.
size_t LoadedKernels(const std::filesystem::path& path) {
  auto reader = TraceReader::Open(path);
  EXPECT_TRUE(reader.ok()) << reader.status().message();
  if (!reader.ok()) return SIZE_MAX;
  auto trace = (*reader)->LoadAll(LoadOptions{2});
  EXPECT_TRUE(trace.ok()) << trace.status().message();
  return trace.ok() ? trace->events.kernels.size() : SIZE_MAX;
}

TEST(HostileFile, AbsurdBlockCountsAreNotTrusted) {
  TempDir dir;
  const auto path = dir / "rank-0.sqlite";
  testing::WriteRankFile(path, MakeIdentity("r", 0, 1), 100);
  testing::ExecSql(path, "UPDATE lane_blocks SET rows = 1000000000000");
  EXPECT_EQ(LoadedKernels(path), 100u);
  testing::ExecSql(path, "UPDATE lane_blocks SET rows = -5");
  EXPECT_EQ(LoadedKernels(path), 100u);
}

TEST(HostileFile, ClaimsBeyondTheFileSizeAreNotTrusted) {
  TempDir dir;
  const auto path = dir / "rank-0.sqlite";
  testing::WriteRankFile(path, MakeIdentity("r", 0, 1), 10);
  // Rows at both ends of 2000 blocks: each block's claim of 65536 rows fits its id span, but
  // together they claim 131M rows from a file of a few hundred KB.
  const std::string columns =
      "(id, lane, start_ns, end_ns, name, correlation_id, grid_x, grid_y, grid_z, block_x, block_y, "
      "block_z, registers_per_thread, static_shared_bytes, dynamic_shared_bytes)";
  for (const char* offset : {"1", "65536"}) {
    const std::string sql =
        "WITH RECURSIVE b(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM b WHERE i < 2000) INSERT INTO kernels" +
        columns + " SELECT i * 65536 + " + offset + ", 1, i, i + 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 FROM b";
    testing::ExecSql(path, sql.c_str());
  }
  testing::ExecSql(path,
                   "WITH RECURSIVE b(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM b WHERE i < 2000) "
                   "INSERT INTO lane_blocks SELECT 'kernels', i, 1, 65536 FROM b");
  EXPECT_EQ(LoadedKernels(path), 4010u);
}

TEST(HostileFile, RowIdAtTheTopOfTheRange) {
  TempDir dir;
  const auto path = dir / "rank-0.sqlite";
  testing::WriteRankFile(path, MakeIdentity("r", 0, 1), 10);
  testing::ExecSql(path, "UPDATE kernels SET id = 9223372036854775807 WHERE id = 10");
  EXPECT_EQ(LoadedKernels(path), 10u);
}

TEST(HostileFile, ManyLanesAndBogusDirectoryRows) {
  TempDir dir;
  const auto path = dir / "rank-0.sqlite";
  testing::WriteRankFile(path, MakeIdentity("r", 0, 1), 10);
  testing::ExecSql(path,
                   "WITH RECURSIVE n(i) AS (SELECT 2 UNION ALL SELECT i + 1 FROM n WHERE i < 100000) "
                   "INSERT INTO lanes SELECT i, 2, 0, -1, 0, 0, 0, i, 0, '', 0 FROM n; "
                   "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 50000) "
                   "INSERT INTO lane_blocks SELECT 'bogus', i, i, 1 FROM n");
  EXPECT_EQ(LoadedKernels(path), 10u);
}

}  // namespace
}  // namespace rankscope::trace
