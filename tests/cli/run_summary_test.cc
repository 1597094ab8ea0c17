// The closing summary: counting rank files and the text users read.
#include "cli/run_summary.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sstream>

#include "cli_test_util.h"
#include "trace/recording_lock.h"
#include "trace/run_dir.h"
#include "trace/schema.h"
#include "trace/writer.h"

namespace rankscope::cli {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

constexpr const char* kRunId = "feedc0de";

void WriteRankNow(const fs::path& path, std::optional<int> rank, std::optional<int> world_size, int events,
                  uint64_t drops, bool close, const std::string& recording_stopped) {
  trace::RankIdentity who;
  who.run_id = kRunId;
  who.rank = rank;
  who.world_size = world_size;
  who.pid = rank ? 1000 + *rank : getpid();
  auto writer = trace::TraceWriter::Create(path, who);
  ASSERT_TRUE(writer.ok()) << writer.status().message();
  trace::Lane lane;
  lane.kind = trace::LaneKind::kGpuStream;
  lane.stream = 1;
  const trace::LaneId id = (*writer)->AddLane(lane);
  trace::EventTables batch;
  for (int i = 0; i < events; ++i) {
    trace::KernelEvent kernel;
    kernel.lane = id;
    kernel.start_ns = 100 * i;
    kernel.end_ns = 100 * i + 50;
    batch.kernels.push_back(kernel);
  }
  ASSERT_TRUE((*writer)->Submit(std::move(batch)));
  if (drops > 0) {
    trace::DropRecord drop;
    drop.source = "writer";
    drop.reason = "queue full";
    drop.count = drops;
    (*writer)->AddDrops(drop);
  }
  // What the writer records when it stops for good (e.g. a full disk) and the process runs on.
  if (!recording_stopped.empty()) (*writer)->SetMeta(trace::meta_key::kRecordingStopped, recording_stopped);
  if (close) {
    ASSERT_TRUE((*writer)->Close().ok());
  } else {
    ASSERT_TRUE((*writer)->Flush(std::chrono::seconds(10)).ok());
    // Never closed, as after a crash; only the child process of WriteRank, which _exits, gets here.
    [[maybe_unused]] trace::TraceWriter* leaked = (*writer).release();
  }
}

// Writes a rank file; `close` false leaves it as a crashed process would (never closed),
// from a child process that exits without closing it.
void WriteRank(const fs::path& path, std::optional<int> rank, std::optional<int> world_size, int events,
               uint64_t drops = 0, bool close = true, const std::string& recording_stopped = "") {
  if (close) {
    WriteRankNow(path, rank, world_size, events, drops, close, recording_stopped);
    return;
  }
  const pid_t child = ::fork();
  if (child == 0) {
    WriteRankNow(path, rank, world_size, events, drops, close, recording_stopped);
    ::_exit(::testing::Test::HasFailure() ? 1 : 0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST(RunSummaryText, ThousandsAreGrouped) {
  EXPECT_EQ(GroupThousands(0), "0");
  EXPECT_EQ(GroupThousands(999), "999");
  EXPECT_EQ(GroupThousands(1000), "1,000");
  EXPECT_EQ(GroupThousands(1234567), "1,234,567");
}

TEST(RunSummary, EmptyDirectorySaysNothingWasRecorded) {
  TempDir tmp;
  auto stats = CollectRunStats(tmp.path());
  ASSERT_TRUE(stats.ok()) << stats.status().message();
  EXPECT_TRUE(stats->empty());
  const std::string text =
      FormatRunSummary({.run_dir = tmp.path(), .run_id = kRunId, .outcome = "exit code 0"}, stats);
  EXPECT_NE(text.find("none recorded"), std::string::npos) << text;
  EXPECT_NE(text.find("exit code 0"), std::string::npos);
  EXPECT_NE(text.find(tmp.path().string()), std::string::npos);
}

// A rank file that holds no event, from a process that ran `command_line`.
void WriteEmptyRank(const fs::path& dir, int rank, const std::string& command_line, bool pytorch_hook) {
  trace::RankIdentity who;
  who.run_id = kRunId;
  who.rank = rank;
  who.world_size = 2;
  who.pid = 1000 + rank;
  who.command_line = command_line;
  auto writer = trace::TraceWriter::Create(dir / trace::RankFileName(rank), who);
  ASSERT_TRUE(writer.ok()) << writer.status().message();
  if (pytorch_hook) (*writer)->SetMeta("pytorch.hook", "on (torch 1.13)");
  ASSERT_TRUE((*writer)->Close().ok());
}

TEST(RunSummary, RanksThatRecordedNothingAreNamedWithWhatWouldHelp) {
  struct Case {
    std::string command_line;
    bool pytorch_hook;
    std::string help;
  };
  for (const Case& c : {Case{"/usr/bin/python3 train.py", false, "they run Python: profile again with --pytorch"},
                        Case{"python3 train.py", true, "the PyTorch hook saw no optimizer step"},
                        Case{"./my_program", false, "nothing marked its work: annotate it with NVTX ranges"}}) {
    SCOPED_TRACE(c.command_line);
    TempDir tmp;
    WriteEmptyRank(tmp.path(), 0, c.command_line, c.pytorch_hook);
    WriteEmptyRank(tmp.path(), 1, c.command_line, c.pytorch_hook);
    auto stats = CollectRunStats(tmp.path());
    ASSERT_TRUE(stats.ok()) << stats.status().message();
    EXPECT_EQ(stats->empty_ranks, (std::vector<int>{0, 1}));
    const std::string text =
        FormatRunSummary({.run_dir = tmp.path(), .run_id = kRunId, .outcome = "exit code 0"}, stats);
    EXPECT_NE(text.find("nothing to analyze: ranks 0, 1 recorded no events; " + c.help), std::string::npos) << text;
  }
  // A rank with events is not named.
  TempDir tmp;
  WriteRank(tmp.path() / trace::RankFileName(0), 0, 2, 3);
  WriteEmptyRank(tmp.path(), 1, "python3 train.py", false);
  auto stats = CollectRunStats(tmp.path());
  ASSERT_TRUE(stats.ok()) << stats.status().message();
  const std::string text = FormatRunSummary({.run_dir = tmp.path(), .run_id = kRunId, .outcome = "exit code 0"}, stats);
  EXPECT_NE(text.find("nothing to analyze: rank 1 recorded no events"), std::string::npos) << text;
}

TEST(RunSummary, CountsEventsDropsAndProblems) {
  TempDir tmp;
  WriteRank(tmp / "rank-0.sqlite", 0, 4, 30, 5);
  WriteRank(tmp / "rank-2.sqlite", 2, 4, 12, 0, /*close=*/false);
  WriteRank(tmp / trace::UnknownRankFileName(getpid()), std::nullopt, std::nullopt, 3);
  testing::WriteFile(tmp / "notes.txt", "not a rank file");

  auto stats = CollectRunStats(tmp.path());
  ASSERT_TRUE(stats.ok()) << stats.status().message();
  EXPECT_EQ(stats->run_id, kRunId);
  ASSERT_EQ(stats->ranks.size(), 2u);
  EXPECT_EQ(stats->ranks[0].events, 30u);
  EXPECT_EQ(stats->ranks[0].dropped, 5u);
  EXPECT_GT(stats->ranks[0].bytes, 0u);
  EXPECT_EQ(stats->ranks[1].events, 12u);
  ASSERT_EQ(stats->unranked.size(), 1u);
  EXPECT_EQ(stats->unranked[0].events, 3u);
  EXPECT_EQ(stats->missing_ranks, (std::vector<int>{1, 3}));
  EXPECT_EQ(stats->crashed, (std::vector<std::string>{"rank-2.sqlite"}));
  EXPECT_EQ(stats->drops_by_reason.at("writer: queue full"), 5u);

  const std::string text =
      FormatRunSummary({.run_dir = tmp.path(), .run_id = kRunId, .outcome = "exit code 0"}, stats);
  EXPECT_NE(text.find("2 of world size 4 recorded"), std::string::npos) << text;
  EXPECT_NE(text.find("missing ranks:  1, 3"), std::string::npos) << text;
  EXPECT_NE(text.find("not closed:     rank-2.sqlite (its process ended without closing it: SIGKILL, a crash or "
                      "_exit; what was committed before is kept)"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("still running"), std::string::npos) << text;
  EXPECT_NE(text.find("'writer: queue full' 5"), std::string::npos) << text;
  EXPECT_NE(text.find("1 file of processes without a rank"), std::string::npos) << text;
  EXPECT_NE(text.find("sqlite3 " + (tmp / "rank-0.sqlite").string() + " .tables"), std::string::npos) << text;
  EXPECT_NE(text.find("docs/schema.md"), std::string::npos);
  EXPECT_EQ(text.find("run id feedc0de, not"), std::string::npos) << "same run id: no warning";

  const std::string other =
      FormatRunSummary({.run_dir = tmp.path(), .run_id = "another", .outcome = "exit code 0"}, stats);
  EXPECT_NE(other.find("record run id 'feedc0de', not this run's"), std::string::npos) << other;
}

// Ranks whose CUDA never started (no driver) say so in one line; a choice (--trace) does not.
TEST(RunSummary, CudaThatNeverStartedIsOneLineForAllRanks) {
  TempDir tmp;
  const std::string never = "not started: the process never loaded the CUDA driver (libcuda.so.1)";
  for (int rank = 0; rank < 3; ++rank) {
    trace::RankIdentity who;
    who.run_id = kRunId;
    who.rank = rank;
    who.world_size = 3;
    who.pid = 1000 + rank;
    auto writer = trace::TraceWriter::Create(tmp / trace::RankFileName(rank), who);
    ASSERT_TRUE(writer.ok()) << writer.status().message();
    (*writer)->SetMeta("cupti.status", rank < 2 ? never : "off: not selected (--trace)");
    ASSERT_TRUE((*writer)->Close().ok());
  }
  auto stats = CollectRunStats(tmp.path());
  ASSERT_TRUE(stats.ok()) << stats.status().message();
  const std::string text =
      FormatRunSummary({.run_dir = tmp.path(), .run_id = kRunId, .outcome = "exit code 0"}, stats);
  EXPECT_NE(text.find("  CUDA activity:  not recorded on ranks 0, 1: 'the process never loaded the CUDA driver "
                      "(libcuda.so.1)'\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("not selected"), std::string::npos) << text;
}

// A rank whose writer stopped for good (a full disk) ran on: its row must not read as a
// complete record with nothing dropped, nor its file as a process that died.
TEST(RunSummary, ARankThatStoppedRecordingEarlySaysWhy) {
  TempDir tmp;
  WriteRank(tmp / "rank-0.sqlite", 0, 3, 20);
  WriteRank(tmp / "rank-1.sqlite", 1, 3, 7, 0, /*close=*/false, "disk full: database or disk is full");
  WriteRank(tmp / "rank-2.sqlite", 2, 3, 9, 0, /*close=*/false);
  auto stats = CollectRunStats(tmp.path());
  ASSERT_TRUE(stats.ok()) << stats.status().message();
  ASSERT_EQ(stats->ranks.size(), 3u);
  EXPECT_TRUE(stats->ranks[0].closed_cleanly);
  EXPECT_EQ(stats->ranks[1].recording_stopped, "disk full: database or disk is full");
  EXPECT_FALSE(stats->ranks[2].closed_cleanly);
  EXPECT_TRUE(stats->ranks[2].recording_stopped.empty());

  const std::string text =
      FormatRunSummary({.run_dir = tmp.path(), .run_id = kRunId, .outcome = "exit code 0"}, stats);
  EXPECT_NE(text.find("  stopped early:  rank 1: 'disk full: database or disk is full'; nothing after it was "
                      "recorded (the process ran on)\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("not closed:     rank-2.sqlite ("), std::string::npos) << text;
  EXPECT_EQ(text.find("rank-1.sqlite ("), std::string::npos) << "its stop explains why it was not closed\n" << text;
  std::map<std::string, std::string> row_of;  // the rank table's rows by their label
  for (const std::string& line : testing::Lines(text)) {
    std::istringstream fields(line);
    std::string label;
    fields >> label;
    if (label == "0" || label == "1" || label == "2") row_of[label] = line;
  }
  ASSERT_EQ(row_of.size(), 3u) << text;
  EXPECT_TRUE(row_of["0"].ends_with("B")) << row_of["0"];  // the size, and no note
  EXPECT_TRUE(row_of["1"].ends_with("B  recording stopped early")) << row_of["1"];
  EXPECT_TRUE(row_of["2"].ends_with("B  not closed")) << row_of["2"];
}

TEST(RunSummary, ARunStillRecordingIsSaidToBe) {
  TempDir tmp;
  WriteRank(tmp / "rank-0.sqlite", 0, 1, 5, 0, /*close=*/false);
  auto live = trace::RecordingLock::Acquire(tmp.path());  // a process of the run lives on
  ASSERT_TRUE(live.ok()) << live.status().message();
  auto stats = CollectRunStats(tmp.path());
  ASSERT_TRUE(stats.ok()) << stats.status().message();
  EXPECT_TRUE(stats->still_recording);
  const std::string text =
      FormatRunSummary({.run_dir = tmp.path(), .run_id = kRunId, .outcome = "exit code 0"}, stats);
  EXPECT_NE(text.find("  still running:  a process of this run still records into the directory"), std::string::npos)
      << text;
  EXPECT_NE(text.find("not closed:     rank-0.sqlite (still being written, or its process ended without closing it"),
            std::string::npos)
      << text;
}

TEST(RunSummary, ManyRanksStayOnOneScreen) {
  TempDir tmp;
  for (int rank = 0; rank < 6; ++rank) WriteRank(tmp / trace::RankFileName(rank), rank, 6, rank);
  auto stats = CollectRunStats(tmp.path());
  ASSERT_TRUE(stats.ok()) << stats.status().message();
  const std::string text = FormatRunSummary(
      {.run_dir = tmp.path(), .run_id = kRunId, .outcome = "all 6 ranks exited with code 0", .max_rank_rows = 3},
      stats);
  EXPECT_NE(text.find("(3 more ranks, counted in the total)"), std::string::npos) << text;
  std::istringstream lines(text);
  bool total_found = false;
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::string label, events;
    fields >> label >> events;
    if (label == "total") {
      total_found = true;
      EXPECT_EQ(events, "15");
    }
  }
  EXPECT_TRUE(total_found) << text;
}

TEST(RunSummary, UnreadableRunIsReportedNotFatal) {
  TempDir tmp;
  testing::WriteFile(tmp / "rank-0.sqlite", "this is not SQLite");
  auto stats = CollectRunStats(tmp.path());
  ASSERT_FALSE(stats.ok());
  const std::string text =
      FormatRunSummary({.run_dir = tmp.path(), .run_id = kRunId, .outcome = "exit code 1"}, stats);
  EXPECT_NE(text.find("cannot read the run"), std::string::npos) << text;
  EXPECT_NE(text.find("rank-0.sqlite"), std::string::npos) << text;
}

}  // namespace
}  // namespace rankscope::cli
