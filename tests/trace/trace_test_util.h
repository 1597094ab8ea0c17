// Helpers shared by the trace/ tests: temporary directories and fully populated events.
#pragma once

#include <sqlite3.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "tests/temp_dir.h"
#include "trace/events.h"
#include "trace/rank_meta.h"
#include "trace/writer.h"

namespace rankscope::trace::testing {

using rankscope::testing::TempDir;

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

}  // namespace rankscope::trace::testing
