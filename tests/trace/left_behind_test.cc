// Every rank file a writer can leave behind opens, and reading it writes nothing beside it:
// a hot rollback journal's, a file left in WAL mode, and a closed file, which is read in place. Private
// copies go to TMPDIR and go with the reader; without room for one, the error says how to
// recover the file.
#include <chrono>
#include <fstream>
#include <map>
#include <set>
#include <span>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "trace/reader.h"
#include "trace_test_util.h"

namespace rankscope::trace {
namespace {

using namespace std::chrono_literals;
using testing::AddGpuLane;
using testing::FilesIn;
using testing::KernelBatch;
using testing::MakeIdentity;
using testing::MustCreate;
using testing::ScopedTmpdir;
using testing::TempDir;

std::string FileBytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The bytes of every file in `dir`, by name.
std::map<std::string, std::string> Contents(const std::filesystem::path& dir) {
  std::map<std::string, std::string> contents;
  for (const std::string& name : FilesIn(dir)) contents[name] = FileBytes(dir / name);
  return contents;
}

class KernelCounter : public SpanVisitor {
 public:
  Status OnHeader(StreamHeader) override { return Status::Ok(); }
  Status OnSpans(SpanTable table, std::span<const SpanRow> rows) override {
    if (table == SpanTable::kKernels) kernels += rows.size();
    return Status::Ok();
  }
  size_t kernels = 0;
};

// Kernels in the file by LoadAll, checked against Stream; SIZE_MAX when reading fails.
size_t ReadKernels(const std::filesystem::path& path, bool* closed_cleanly = nullptr) {
  auto reader = TraceReader::Open(path);
  EXPECT_TRUE(reader.ok()) << reader.status().message();
  if (!reader.ok()) return SIZE_MAX;
  if (closed_cleanly != nullptr) *closed_cleanly = (*reader)->meta().closed_cleanly;
  auto trace = (*reader)->LoadAll(LoadOptions{2});
  EXPECT_TRUE(trace.ok()) << trace.status().message();
  KernelCounter counter;
  const Status streamed = (*reader)->Stream(counter);
  EXPECT_TRUE(streamed.ok()) << streamed.message();
  if (!trace.ok() || !streamed.ok()) return SIZE_MAX;
  EXPECT_EQ(counter.kernels, trace->events.kernels.size());
  return trace->events.kernels.size();
}

TEST(LeftBehind, HotJournalIsRolledBack) {
  TempDir dir, tmp, work;
  const auto original = work / "rank-0.sqlite";
  testing::WriteRankFile(original, MakeIdentity("r", 0, 1), 20000);
  // Another tool deletes every kernel; its cache is too small to hold the change, so SQLite
  // writes changed pages into the file mid-transaction, with the old ones in a hot journal.
  // A copy of both taken then is what a kill at that moment leaves behind.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(original.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "PRAGMA cache_size=2; BEGIN; DELETE FROM kernels; DELETE FROM lane_blocks",
                         nullptr, nullptr, nullptr),
            SQLITE_OK)
      << sqlite3_errmsg(db);
  const auto path = dir / "rank-0.sqlite";
  std::filesystem::copy_file(original, path);
  std::filesystem::copy_file(original.string() + "-journal", path.string() + "-journal");
  sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  ASSERT_NE(FileBytes(path), FileBytes(original)) << "SQLite wrote nothing mid-transaction";

  const auto before = Contents(dir.path());
  ScopedTmpdir private_copies(tmp.path());
  EXPECT_EQ(ReadKernels(path), 20000u);
  EXPECT_EQ(Contents(dir.path()), before);
  EXPECT_EQ(FilesIn(tmp.path()), std::set<std::string>{});
}

TEST(LeftBehind, FileLeftInWalModeCreatesNothingBesideIt) {
  TempDir dir, tmp;
  const auto path = dir / "rank-0.sqlite";
  testing::WriteRankFile(path, MakeIdentity("r", 0, 1), 100);
  testing::ExecSql(path, "PRAGMA journal_mode=WAL");  // as a writer that died while closing
  ASSERT_EQ(FilesIn(dir.path()), std::set<std::string>{"rank-0.sqlite"});
  const auto before = Contents(dir.path());
  ScopedTmpdir private_copies(tmp.path());
  EXPECT_EQ(ReadKernels(path), 100u);
  EXPECT_EQ(Contents(dir.path()), before);
}

TEST(LeftBehind, ClosedFileIsReadInPlaceWithNothingBesideIt) {
  TempDir dir, tmp;
  const auto path = dir / "rank-0.sqlite";
  testing::WriteRankFile(path, MakeIdentity("r", 0, 1), 100);
  const auto before = Contents(dir.path());
  ScopedTmpdir private_copies(tmp.path());
  auto reader = TraceReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  EXPECT_EQ(FilesIn(tmp.path()), std::set<std::string>{});  // no private copy
  ASSERT_TRUE((*reader)->LoadAll().ok());
  KernelCounter counter;
  ASSERT_TRUE((*reader)->Stream(counter).ok());
  ASSERT_TRUE((*reader)->ReadLaneRange(1, 0, 1'000'000).ok());
  EXPECT_EQ(FilesIn(dir.path()), std::set<std::string>{"rank-0.sqlite"});  // while open, too
  reader->reset();
  EXPECT_EQ(Contents(dir.path()), before);
}

TEST(LeftBehind, WithoutRoomForACopyTheErrorSaysHowToRecover) {
  TempDir dir;
  const auto path = dir / "rank-0.sqlite";
  auto writer = MustCreate(path, MakeIdentity("r", 0, 1));
  ASSERT_NE(writer, nullptr);
  ASSERT_TRUE(writer->Submit(KernelBatch(AddGpuLane(*writer), 10)));
  ASSERT_TRUE(writer->Flush(10s).ok());
  {
    ScopedTmpdir nowhere(dir / "no-such-directory");
    auto reader = TraceReader::Open(path);
    ASSERT_FALSE(reader.ok());
    const std::string message = reader.status().message();
    EXPECT_EQ(message.rfind(path.string() + ": was not closed by its writer", 0), 0u) << message;
    EXPECT_NE(message.find("no-such-directory"), std::string::npos) << message;
    EXPECT_NE(message.find("PRAGMA journal_mode=DELETE"), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
  ASSERT_TRUE(writer->Close().ok());
  ScopedTmpdir nowhere(dir / "no-such-directory");  // a closed file needs no copy
  EXPECT_EQ(ReadKernels(path), 10u);
}

}  // namespace
}  // namespace rankscope::trace
