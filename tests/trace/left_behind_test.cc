// Every rank file a writer can leave behind opens, and reading it writes nothing beside it:
// a killed writer's (WAL beside it), a live writer's (a consistent snapshot), a hot rollback
// journal's, a file left in WAL mode, and a closed file, which is read in place. Private
// copies go to TMPDIR and go with the reader; without room for one, the error says how to
// recover the file.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "trace/reader.h"
#include "trace_test_util.h"

namespace rankscope::trace {
namespace {

using namespace std::chrono_literals;
using testing::AddGpuLane;
using testing::FilesIn;
using testing::KernelCounter;
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

// Runs in the forked child: commits three batches, starts a fourth that it never commits,
// says so on `ready_fd`, and waits to be killed.
[[noreturn]] void RecordAndWaitForTheKill(const std::filesystem::path& path, int ready_fd) {
  WriterOptions options;
  options.commit_interval = std::chrono::hours(1);  // commits only when flushed
  auto writer = TraceWriter::Create(path, MakeIdentity("killed", 0, 1), options);
  if (!writer.ok()) _exit(10);
  const LaneId lane = AddGpuLane(**writer);
  for (uint64_t batch = 0; batch < 3; ++batch) {
    if (!(*writer)->Submit(KernelBatch(lane, 1000, static_cast<TimestampNs>(batch) * 100000, batch))) _exit(11);
    if (!(*writer)->Flush(std::chrono::hours(1)).ok()) _exit(12);
  }
  if (!(*writer)->Submit(KernelBatch(lane, 1000, 900000, 3))) _exit(13);  // never committed
  const char ready = 'r';
  if (write(ready_fd, &ready, 1) != 1) _exit(14);
  for (;;) pause();
}

TEST(LeftBehind, KilledWriterReadsExactlyTheCommittedEvents) {
  TempDir dir, tmp;
  const auto path = dir / "rank-0.sqlite";
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(fds[0]);
    RecordAndWaitForTheKill(path, fds[1]);
  }
  close(fds[1]);
  char ready = 0;
  const ssize_t got = read(fds[0], &ready, 1);
  close(fds[0]);
  kill(pid, SIGKILL);
  const std::optional<int> status = testing::WaitForChild(pid);
  ASSERT_EQ(got, 1) << "the child failed before it was ready";
  ASSERT_TRUE(status && WIFSIGNALED(*status) && WTERMSIG(*status) == SIGKILL);

  EXPECT_EQ(FilesIn(dir.path()), (std::set<std::string>{"rank-0.sqlite", "rank-0.sqlite-reserve", "rank-0.sqlite-wal"}));
  const auto before = Contents(dir.path());
  ScopedTmpdir private_copies(tmp.path());
  bool closed_cleanly = true;
  EXPECT_EQ(ReadKernels(path, &closed_cleanly), 3000u);
  EXPECT_FALSE(closed_cleanly);
  EXPECT_EQ(Contents(dir.path()), before);  // read through a private copy, untouched
  EXPECT_EQ(FilesIn(tmp.path()), std::set<std::string>{});  // the copy went with the reader

  // The way to recover in place that the error without room for a copy gives.
  testing::ExecSql(path, "PRAGMA journal_mode=DELETE");
  // The killed writer's reserve stays behind (RemoveRankFiles takes it with the file).
  EXPECT_EQ(FilesIn(dir.path()), (std::set<std::string>{"rank-0.sqlite", "rank-0.sqlite-reserve"}));
  ScopedTmpdir nowhere(dir / "no-such-directory");
  EXPECT_EQ(ReadKernels(path), 3000u);
}

// With the default checkpoint threshold the database does not change while these commits
// are read; with a threshold of 2 pages nearly every commit checkpoints, so reads overlap
// checkpoints and must copy again rather than pair a database with a WAL of another moment.
class LiveWriter : public ::testing::TestWithParam<int> {};

TEST_P(LiveWriter, ReadsAsAConsistentSnapshot) {
  TempDir dir, tmp;
  ScopedTmpdir private_copies(tmp.path());
  const auto path = dir / "rank-0.sqlite";
  WriterOptions options;
  options.wal_checkpoint_pages = GetParam();
  auto writer = MustCreate(path, MakeIdentity("live", 0, 1), options);
  ASSERT_NE(writer, nullptr);
  const LaneId lane = AddGpuLane(*writer);
  constexpr size_t kBatch = 100;
  std::atomic<bool> done{false};
  std::atomic<size_t> flushed_batches{0};
  std::thread producer([&] {
    for (uint64_t batch = 0; !done && batch < 400; ++batch) {
      if (!writer->Submit(KernelBatch(lane, kBatch, static_cast<TimestampNs>(batch) * 10000, batch))) break;
      if (!writer->Flush(10s).ok()) break;
      flushed_batches = batch + 1;
      // A breath between commits: a reader gives up after 5 copies that each overlapped a
      // checkpoint (trace/reader.h), which back-to-back commits on a loaded machine can cause.
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  // Each read sees whole commits (whole batches here) and never fewer than were flushed
  // before it started.
  size_t last = 0;
  for (int read = 0; read < 8; ++read) {
    const size_t flushed = flushed_batches * kBatch;
    bool closed_cleanly = true;
    const size_t kernels = ReadKernels(path, &closed_cleanly);
    ASSERT_NE(kernels, SIZE_MAX);
    EXPECT_EQ(kernels % kBatch, 0u) << kernels;
    EXPECT_GE(kernels, std::max(flushed, last));
    EXPECT_FALSE(closed_cleanly);
    last = kernels;
  }
  done = true;
  producer.join();
  EXPECT_EQ(FilesIn(dir.path()), (std::set<std::string>{"rank-0.sqlite", "rank-0.sqlite-reserve", "rank-0.sqlite-wal"}));
  ASSERT_TRUE(writer->Close().ok());
  bool closed_cleanly = false;
  EXPECT_EQ(ReadKernels(path, &closed_cleanly), flushed_batches * kBatch);
  EXPECT_TRUE(closed_cleanly);
  EXPECT_EQ(FilesIn(tmp.path()), std::set<std::string>{});
}

INSTANTIATE_TEST_SUITE_P(CheckpointThresholds, LiveWriter, ::testing::Values(4096, 2),
                         [](const ::testing::TestParamInfo<int>& threshold) {
                           return "CheckpointEvery" + std::to_string(threshold.param) + "Pages";
                         });

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
