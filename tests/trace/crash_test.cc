// Crash safety: a process writing a rank file is SIGKILLed midway. The file must open
// cleanly and hold every batch the writer had reported committed.
#include <signal.h>
#include <spawn.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "trace/reader.h"
#include "trace/run_dir.h"
#include "trace_test_util.h"

extern char** environ;

namespace rankscope::trace {
namespace {

std::string IntegrityCheck(const std::filesystem::path& path) {
  sqlite3* db = nullptr;
  std::string result = "cannot open";
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &stmt, nullptr) == SQLITE_OK &&
        sqlite3_step(stmt) == SQLITE_ROW) {
      result = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
    }
    sqlite3_finalize(stmt);
  }
  sqlite3_close(db);
  return result;
}

TEST(CrashSafety, KilledWriterLeavesEveryCommittedBatch) {
  testing::TempDir dir;
  const auto path = dir / "rank-0.sqlite";
  constexpr int kPerBatch = 1000;
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, pipe_fds[0]);
  std::string child = CRASH_WRITER_CHILD, file = path.string(), per_batch = std::to_string(kPerBatch);
  char* argv[] = {child.data(), file.data(), per_batch.data(), nullptr};
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, child.c_str(), &actions, nullptr, argv, environ), 0);
  posix_spawn_file_actions_destroy(&actions);
  close(pipe_fds[1]);

  // Kill it once a few batches are durable, while it is still submitting more.
  FILE* out = fdopen(pipe_fds[0], "r");
  ASSERT_NE(out, nullptr);
  unsigned long long committed = 0;
  char line[128];
  while (committed < 4 && std::fgets(line, sizeof line, out) != nullptr) {
    std::sscanf(line, "committed %llu", &committed);
  }
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  std::fclose(out);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "child ended by itself";
  ASSERT_GE(committed, 4u);

  EXPECT_EQ(IntegrityCheck(path), "ok");
  auto reader = TraceReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  EXPECT_FALSE((*reader)->meta().closed_cleanly);
  EXPECT_FALSE((*reader)->meta().clock_end.has_value());
  auto trace = (*reader)->LoadAll();
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  std::map<uint64_t, int> per_batch_count;
  for (const KernelEvent& k : trace->events.kernels) ++per_batch_count[k.correlation_id];
  for (uint64_t batch = 0; batch < committed; ++batch) {
    EXPECT_EQ(per_batch_count[batch], kPerBatch) << "batch " << batch;
  }
  for (const auto& [batch, count] : per_batch_count) EXPECT_LE(count, kPerBatch);

  // No lane/time index (the writer builds them at close), yet range queries still answer.
  auto range = (*reader)->ReadLaneRange(1, 1'000'000, 2'000'000);
  ASSERT_TRUE(range.ok()) << range.status().message();
  EXPECT_EQ(range->kernels.size(), static_cast<size_t>(kPerBatch));

  auto run = OpenRun(dir.path());
  ASSERT_TRUE(run.ok()) << run.status().message();
  ASSERT_EQ(run->crashed.size(), 1u);
  EXPECT_EQ(run->crashed[0], "rank-0.sqlite");
}

}  // namespace
}  // namespace rankscope::trace
