// A closed rank file holding every kind of event the analyzer and the viewer read, and a way
// to damage one id column of it the way a hostile file would: rows 1 to 4 of the table get
// the ids -1, 987654321, 2^31 and 2^63-1, none of which the file's string or lane tables
// hold. Shared by tests/analyzer (AnalyzeRun, StreamRunEvents) and tests/gui (the model).
#pragma once

#include <sqlite3.h>

#include <array>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/rank_file_writer.h"
#include "tests/trace_builder.h"

namespace rankscope::testing {

inline constexpr std::array<int64_t, 4> kHostileIds = {-1, 987654321, int64_t{1} << 31, INT64_MAX};

struct IdColumn {
  const char* table;
  const char* column;
  bool analyzed;  // the analyzer reads it (API calls and syncs only the viewer does)
};

// Every id column a row of the analyzer's or the viewer's stream carries.
inline const std::vector<IdColumn>& IdColumns() {
  static const std::vector<IdColumn> columns = {
      {"kernels", "lane", true},          {"kernels", "name", true},         {"memcpys", "lane", true},
      {"memsets", "lane", true},          {"nvtx_ranges", "lane", true},     {"nvtx_ranges", "name", true},
      {"nvtx_ranges", "domain", true},    {"nvtx_ranges", "args", true},     {"nvtx_marks", "lane", true},
      {"nvtx_marks", "name", true},       {"nvtx_marks", "domain", true},    {"nvtx_marks", "args", true},
      {"collectives", "lane", true},      {"collectives", "name", true},     {"collectives", "algorithm", true},
      {"collectives", "protocol", true},  {"api_calls", "lane", false},      {"api_calls", "name", false},
      {"syncs", "lane", false},           {"syncs", "name", false},
  };
  return columns;
}

// Rows in the file written by WriteSoundRankFile: those the analyzer reads, and all of them.
inline constexpr int64_t kAnalyzedRows = 8 + 6 + 6 + 6 + 6 + 6;  // kernels ... collectives
inline constexpr int64_t kAllRows = kAnalyzedRows + 6 + 6;       // and API calls, syncs

// Rank 0 of a world of 1: a GPU stream with 8 kernels, 6 copies and 6 sets; a thread with 6
// steps (domain and args set), 6 marks, 6 API calls and 6 syncs; a communicator with 6
// all-reduce records (algorithm and protocol set).
inline void WriteSoundRankFile(const std::filesystem::path& path) {
  analyzer::testing::TraceBuilder b(0, 1);
  const trace::LaneId gpu = b.GpuStream(0);
  const trace::LaneId thread = b.CpuThread("main");
  const trace::LaneId comm = b.Communicator(0xC0FFEE);
  for (int i = 0; i < 8; ++i) b.Kernel(gpu, "gemm", 1000 * i, 1000 * i + 400);
  for (int i = 0; i < 6; ++i) {
    b.Copy(gpu, 1000 * i + 500, 1000 * i + 600, 4096);
    b.Memset(gpu, 1000 * i + 700, 1000 * i + 750, 64);
    b.Step(thread, i, 1000 * i, 1000 * i + 900, 8);
    b.Mark(thread, "rankscope", "tick", 1000 * i + 10, "{\"i\":" + std::to_string(i) + "}");
    b.Collective(comm, "allreduce", 1000 * i + 800, 1000 * i + 850, 0xC0FFEE, static_cast<uint64_t>(i),
                 trace::CollectiveOp::kAllReduce, 1024, 1);
  }
  const trace::StringId ring = b.Str("RING");
  const trace::StringId simple = b.Str("SIMPLE");
  const trace::StringId launch = b.Str("cudaLaunchKernel");
  const trace::StringId sync = b.Str("cudaStreamSynchronize");
  trace::RankTrace rank = b.Build();
  for (trace::CollectiveEvent& collective : rank.events.collectives) {
    collective.algorithm = ring;
    collective.protocol = simple;
  }
  for (int i = 0; i < 6; ++i) {
    trace::ApiCallEvent call;
    call.lane = thread;
    call.name = launch;
    call.start_ns = 1000 * i + 20;
    call.end_ns = 1000 * i + 30;
    call.correlation_id = static_cast<uint64_t>(i + 1);
    rank.events.api_calls.push_back(call);
    trace::SyncEvent wait;
    wait.lane = thread;
    wait.name = sync;
    wait.start_ns = 1000 * i + 40;
    wait.end_ns = 1000 * i + 60;
    rank.events.syncs.push_back(wait);
  }
  WriteRankTraceFile(rank, path);
}

// Rows 1 to 4 of `column.table` get the hostile ids, as another tool would write them.
inline void DamageIdColumn(const std::filesystem::path& path, const IdColumn& column) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  for (size_t row = 0; row < kHostileIds.size(); ++row) {
    const std::string sql = "UPDATE " + std::string(column.table) + " SET " + column.column + " = " +
                            std::to_string(kHostileIds[row]) + " WHERE id = " + std::to_string(row + 1);
    EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
    EXPECT_EQ(sqlite3_changes(db), 1) << sql;
  }
  sqlite3_close(db);
}

}  // namespace rankscope::testing
