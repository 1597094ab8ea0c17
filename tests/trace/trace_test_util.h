// Helpers shared by the trace/ tests: temporary directories and fully populated events.
#pragma once

#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "tests/temp_dir.h"
#include "trace/events.h"
#include "trace/rank_meta.h"
#include "trace/reader.h"
#include "trace/writer.h"

namespace rankscope::trace::testing {

using rankscope::testing::TempDir;

// Counts the kernels a Stream delivers.
class KernelCounter : public SpanVisitor {
 public:
  Status OnHeader(StreamHeader) override { return Status::Ok(); }
  Status OnSpans(SpanTable table, std::span<const SpanRow> rows) override {
    if (table == SpanTable::kKernels) kernels += rows.size();
    return Status::Ok();
  }
  size_t kernels = 0;
};


inline RankIdentity MakeIdentity(std::string run_id, std::optional<int> rank, std::optional<int> world_size) {
  RankIdentity id;
  id.run_id = std::move(run_id);
  id.rank = rank;
  id.world_size = world_size;
  id.local_rank = rank;
  id.host = "testhost";
  id.pid = getpid();
  id.command_line = "trainer --steps 3";
  id.backend = "gloo";
  return id;
}

inline std::unique_ptr<TraceWriter> MustCreate(const std::filesystem::path& path,
                                               const RankIdentity& identity,
                                               WriterOptions options = {}) {
  auto writer = TraceWriter::Create(path, identity, std::move(options));
  EXPECT_TRUE(writer.ok()) << writer.status().message();
  return writer.ok() ? std::move(writer).value() : nullptr;
}

// Runs SQL on a database as another tool would (read-write, its own connection).
inline void ExecSql(const std::filesystem::path& path, const char* sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_busy_timeout(db, 5000);
  EXPECT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  sqlite3_close(db);
}

// Writes a closed rank file holding `events` kernels on one GPU lane.
inline void WriteRankFile(const std::filesystem::path& path, const RankIdentity& identity,
                          int events = 10) {
  auto writer = MustCreate(path, identity);
  ASSERT_NE(writer, nullptr);
  Lane lane;
  lane.kind = LaneKind::kGpuStream;
  lane.device = 0;
  lane.stream = 7;
  const LaneId id = writer->AddLane(lane);
  EventTables batch;
  for (int i = 0; i < events; ++i) {
    KernelEvent k;
    k.lane = id;
    k.start_ns = 1000 * i;
    k.end_ns = 1000 * i + 500;
    k.name = writer->Intern("gemm");
    batch.kernels.push_back(k);
  }
  ASSERT_TRUE(writer->Submit(std::move(batch)));
  ASSERT_TRUE(writer->Close().ok());
}

// `n` kernels on `lane`, 10 ns apart from `t0`, each tagged with `tag` as correlation id.
inline EventTables KernelBatch(LaneId lane, size_t n, TimestampNs t0 = 0, uint64_t tag = 0) {
  EventTables batch;
  for (size_t i = 0; i < n; ++i) {
    KernelEvent k;
    k.lane = lane;
    k.start_ns = t0 + static_cast<TimestampNs>(i) * 10;
    k.end_ns = k.start_ns + 5;
    k.correlation_id = tag;
    batch.kernels.push_back(k);
  }
  return batch;
}

inline LaneId AddGpuLane(TraceWriter& writer) {
  Lane lane;
  lane.kind = LaneKind::kGpuStream;
  lane.device = 0;
  lane.stream = 7;
  return writer.AddLane(lane);
}

// The names of the entries of `dir`.
inline std::set<std::string> FilesIn(const std::filesystem::path& dir) {
  std::set<std::string> names;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    names.insert(it->path().filename().string());
  }
  return names;
}

// Points TMPDIR (where readers make their private copies) at `dir` for the scope.
class ScopedTmpdir {
 public:
  explicit ScopedTmpdir(const std::filesystem::path& dir) {
    if (const char* old = std::getenv("TMPDIR")) old_ = old;
    setenv("TMPDIR", dir.c_str(), 1);
  }
  ~ScopedTmpdir() {
    if (old_) setenv("TMPDIR", old_->c_str(), 1);
    else unsetenv("TMPDIR");
  }
  ScopedTmpdir(const ScopedTmpdir&) = delete;
  ScopedTmpdir& operator=(const ScopedTmpdir&) = delete;

 private:
  std::optional<std::string> old_;
};

// Waits for child `pid`; after 30 s (a hang, not a timing verdict) kills it. Returns the
// wait status, or nullopt when it had to be killed.
inline std::optional<int> WaitForChild(pid_t pid) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return std::nullopt;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return status;
}

}  // namespace rankscope::trace::testing
