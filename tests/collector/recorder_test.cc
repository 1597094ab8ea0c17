#include "collector/recorder.h"

#include <unistd.h>

#include <thread>

#include <gtest/gtest.h>

#include "tests/collector/collector_test_util.h"
#include "tests/trace/trace_test_util.h"
#include "trace/reader.h"
#include "trace/run_dir.h"

namespace rankscope::collector {
namespace {

using testing::Load;
using testing::Named;
using trace::testing::TempDir;

RecorderOptions Options(const TempDir& dir, std::optional<int> rank) {
  return testing::MakeRecorderOptions(dir, {.run_id = "testrun",
                                            .rank = rank,
                                            .world_size = rank ? std::optional<int>(4) : std::nullopt,
                                            .command_line = "recorder_test"});
}

TEST(Recorder, RecordsRangesMarksAndCrossThreadEnds) {
  TempDir dir;
  Recorder recorder(Options(dir, 2));
  const NvtxDomain* domain = recorder.registry().CreateDomain("app");
  EXPECT_EQ(recorder.Push(Named(domain, "outer")), 0);
  EXPECT_EQ(recorder.Push(Named(domain, "inner")), 1);
  EXPECT_EQ(recorder.Pop(domain, {}), 1);
  EXPECT_EQ(recorder.Pop(domain, {}), 0);
  EXPECT_EQ(recorder.Pop(domain, {}), -1);  // nothing open
  uint64_t id = recorder.Start(Named(domain, "across"));
  std::thread other([&] {
    EventDraft mark = Named(domain, "mark");
    mark.payload_kind = trace::PayloadKind::kInt64;
    mark.payload_bits = static_cast<uint64_t>(int64_t{-3});
    recorder.Mark(mark);
    recorder.End(domain, id, {});
  });
  other.join();
  ASSERT_TRUE(recorder.Close(Recorder::EndReason::kExit).ok());
  EXPECT_FALSE(recorder.recording());

  trace::RankTrace trace = Load(dir / "rank-2.sqlite");
  EXPECT_EQ(trace.meta.rank, 2);
  EXPECT_TRUE(trace.meta.closed_cleanly);
  EXPECT_EQ(trace.meta.entries["collector.ended_by"], "exit");
  ASSERT_EQ(trace.events.nvtx_ranges.size(), 3u);
  ASSERT_EQ(trace.events.nvtx_marks.size(), 1u);
  EXPECT_EQ(trace.lanes.size(), 2u);
  std::map<std::string, trace::NvtxRangeEvent> by_name;
  for (const auto& range : trace.events.nvtx_ranges) by_name[trace.str(range.name)] = range;
  EXPECT_LE(by_name["outer"].start_ns, by_name["inner"].start_ns);
  EXPECT_GE(by_name["outer"].end_ns, by_name["inner"].end_ns);
  EXPECT_EQ(trace.str(by_name["inner"].domain), "app");
  EXPECT_EQ(by_name["across"].style, trace::NvtxRangeStyle::kStartEnd);
  EXPECT_NE(by_name["across"].end_lane, trace::kNoLane);
  EXPECT_NE(by_name["across"].end_lane, by_name["across"].lane);
  EXPECT_EQ(trace.events.nvtx_marks[0].payload.int_value, -3);
}

TEST(Recorder, FastRangesRecordWhatTheGeneralPathRecords) {
  TempDir dir;
  Recorder recorder(Options(dir, 0));
  const NvtxDomain* app = recorder.registry().CreateDomain("app");
  const NvtxDomain* plain = recorder.registry().DefaultDomain();
  std::thread([&] {
    // A thread's first event takes the general path (it registers the thread's buffer).
    EXPECT_EQ(recorder.PushPlain(plain, {.message = "outer"}), 0);
    EXPECT_EQ(recorder.PushPlain(app, {.message = "in app", .category = 4, .color = 0xFF0000FFu}), 0);
    EXPECT_EQ(recorder.PushPlain(plain, {.message = "inner"}), 1);
    EXPECT_EQ(recorder.Push(Named(plain, "general")), 2);
    EXPECT_EQ(recorder.PopPlain(plain), 2);
    EXPECT_EQ(recorder.PopPlain(plain), 1);
    EXPECT_EQ(recorder.PopPlain(app), 0);
    EXPECT_EQ(recorder.Pop(plain, {}), 0);
    EXPECT_EQ(recorder.PopPlain(plain), -1);  // nothing open
    EXPECT_EQ(recorder.PushPlain(plain, {.registered = recorder.registry().RegisterString(plain, "registered")}), 0);
    EXPECT_EQ(recorder.PopPlain(plain), 0);
  }).join();
  ASSERT_TRUE(recorder.Close(Recorder::EndReason::kExit).ok());
  trace::RankTrace trace = Load(dir / "rank-0.sqlite");
  ASSERT_EQ(trace.events.nvtx_ranges.size(), 5u);
  std::map<std::string, trace::NvtxRangeEvent> by_name;
  for (const auto& range : trace.events.nvtx_ranges) by_name[trace.str(range.name)] = range;
  ASSERT_EQ(by_name.size(), 5u);
  EXPECT_EQ(trace.str(by_name["in app"].domain), "app");
  EXPECT_EQ(by_name["in app"].category, 4u);
  EXPECT_EQ(by_name["in app"].color, 0xFF0000FFu);
  EXPECT_EQ(by_name.count("registered"), 1u);
  EXPECT_EQ(trace.str(by_name["outer"].domain), "");
  EXPECT_LE(by_name["outer"].start_ns, by_name["inner"].start_ns);
  EXPECT_LE(by_name["inner"].start_ns, by_name["general"].start_ns);
  EXPECT_LE(by_name["general"].end_ns, by_name["inner"].end_ns);
  EXPECT_LE(by_name["inner"].end_ns, by_name["in app"].end_ns);
  EXPECT_LE(by_name["in app"].end_ns, by_name["outer"].end_ns);
  EXPECT_EQ(trace.meta.entries["collector.unmatched_ends"], "0");
  EXPECT_EQ(trace.meta.entries["collector.unfinished_ranges"], "0");
}

TEST(Recorder, OpenRangesAreWrittenAsUnfinished) {
  TempDir dir;
  Recorder recorder(Options(dir, 0));
  recorder.Push(Named(recorder.registry().DefaultDomain(), "never popped"));
  ASSERT_TRUE(recorder.Close(Recorder::EndReason::kSignal, 15).ok());
  trace::RankTrace trace = Load(dir / "rank-0.sqlite");
  ASSERT_EQ(trace.events.nvtx_ranges.size(), 1u);
  EXPECT_EQ(trace.str(trace.events.nvtx_ranges[0].args), R"({"rankscope.unfinished":true})");
  EXPECT_EQ(trace.meta.entries["collector.ended_by"], "signal 15");
  EXPECT_EQ(trace.meta.entries["collector.unfinished_ranges"], "1");
}

TEST(Recorder, FlushCommitsWhileRecordingGoesOn) {
  TempDir dir;
  Recorder recorder(Options(dir, 1));
  for (int i = 0; i < 100; ++i) {
    recorder.Push(Named(recorder.registry().DefaultDomain(), "r"));
    recorder.Pop(recorder.registry().DefaultDomain(), {});
  }
  ASSERT_TRUE(recorder.Flush(std::chrono::seconds(10)).ok());
  auto reader = trace::TraceReader::Open(dir / "rank-1.sqlite");
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  auto trace = (*reader)->LoadAll();
  ASSERT_TRUE(trace.ok());
  EXPECT_EQ(trace->events.nvtx_ranges.size(), 100u);
  EXPECT_FALSE(trace->meta.closed_cleanly);
  EXPECT_TRUE(recorder.recording());
}

TEST(Recorder, RankedProcessLeavesAFileEvenWithoutEvents) {
  TempDir dir;
  { Recorder recorder(Options(dir, 3)); }
  trace::RankTrace trace = Load(dir / "rank-3.sqlite");
  EXPECT_TRUE(trace.meta.closed_cleanly);
  EXPECT_EQ(trace.events.size(), 0u);
}

TEST(Recorder, WrapperWithoutEventsLeavesNothingWhenItsRankIsTaken) {
  TempDir dir;
  trace::testing::WriteRankFile(dir / "rank-0.sqlite", trace::testing::MakeIdentity("testrun", 0, 4));
  { Recorder recorder(Options(dir, 0)); }
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    files.push_back(entry.path().filename().string());
  }
  EXPECT_EQ(files, std::vector<std::string>{"rank-0.sqlite"});
}

TEST(Recorder, UnrankedProcessWithoutEventsLeavesNoFile) {
  TempDir dir;
  { Recorder recorder(Options(dir, std::nullopt)); }
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(Recorder, ExecLeavesTheRankToTheNextImageWhenNothingWasRecorded) {
  TempDir dir;
  Recorder recorder(Options(dir, 0));
  ASSERT_TRUE(recorder.Close(Recorder::EndReason::kExec).ok());
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(Recorder, TakenRankFileFallsBackToRankUnknown) {
  TempDir dir;
  trace::testing::WriteRankFile(dir / "rank-0.sqlite", trace::testing::MakeIdentity("testrun", 0, 4));
  Recorder recorder(Options(dir, 0));
  recorder.Mark(Named(recorder.registry().DefaultDomain(), "m"));
  ASSERT_TRUE(recorder.Close(Recorder::EndReason::kExit).ok());
  auto path = dir / trace::UnknownRankFileName(getpid());
  trace::RankTrace trace = Load(path);
  EXPECT_FALSE(trace.meta.rank.has_value());
  EXPECT_EQ(trace.meta.entries["collector.claimed_rank"], "0");
  EXPECT_EQ(trace.events.nvtx_marks.size(), 1u);
  EXPECT_EQ(recorder.file_path(), path);
}

TEST(Recorder, FullBuffersAreCountedAsDrops) {
  TempDir dir;
  RecorderOptions options = Options(dir, 0);
  options.config.buffer_bytes = ThreadBuffer::kChunkBytes + 1024;  // one chunk
  options.drain_interval = std::chrono::hours(1);                  // no drain until close
  Recorder recorder(std::move(options));
  const int marks = 20000;  // 24 bytes each: more than one chunk holds
  for (int i = 0; i < marks; ++i) recorder.Mark(Named(recorder.registry().DefaultDomain(), "m"));
  ASSERT_TRUE(recorder.Close(Recorder::EndReason::kExit).ok());
  trace::RankTrace trace = Load(dir / "rank-0.sqlite");
  uint64_t dropped = 0;
  for (const auto& drop : trace.drops) {
    if (drop.source == "collector" && drop.reason == "thread buffer full") dropped += drop.count;
  }
  EXPECT_GT(dropped, 0u);
  EXPECT_EQ(trace.events.nvtx_marks.size() + dropped, static_cast<size_t>(marks));
}

TEST(Recorder, ARangeWhosePopWasDroppedEndsAtTheNextPushOfItsLevel) {
  TempDir dir;
  RecorderOptions options = Options(dir, 0);
  options.config.buffer_bytes = 2 * ThreadBuffer::kChunkBytes;  // two chunks
  options.drain_interval = std::chrono::hours(1);               // drained only when asked
  Recorder recorder(std::move(options));
  const NvtxDomain* plain = recorder.registry().DefaultDomain();
  EXPECT_EQ(recorder.Push(Named(plain, "outer")), 0);
  const int marks = 30000;  // 24 bytes each: more than the two chunks hold
  for (int i = 0; i < marks; ++i) recorder.Mark(Named(plain, "m"));
  EXPECT_EQ(recorder.PopPlain(plain), 0);  // the buffers are full: this pop is dropped
  // The drain frees the first chunk; the thread records into it again.
  ASSERT_TRUE(recorder.Flush(std::chrono::seconds(30)).ok());
  EXPECT_EQ(recorder.PushPlain(plain, {.message = "next"}), 0);
  EXPECT_EQ(recorder.PopPlain(plain), 0);
  ASSERT_TRUE(recorder.Close(Recorder::EndReason::kExit).ok());

  trace::RankTrace trace = Load(dir / "rank-0.sqlite");
  std::map<std::string, trace::NvtxRangeEvent> by_name;
  for (const auto& range : trace.events.nvtx_ranges) by_name[trace.str(range.name)] = range;
  ASSERT_EQ(by_name.size(), 2u);
  EXPECT_EQ(trace.str(by_name["outer"].args), R"({"rankscope.unfinished":true})");
  EXPECT_EQ(by_name["outer"].end_ns, by_name["next"].start_ns);
  EXPECT_EQ(trace.str(by_name["next"].args), "");
  uint64_t dropped = 0;
  for (const auto& drop : trace.drops) dropped += drop.count;
  EXPECT_EQ(trace.events.nvtx_marks.size() + dropped, static_cast<size_t>(marks) + 1);  // the pop too
  EXPECT_EQ(trace.meta.entries["collector.unfinished_ranges"], "1");
  EXPECT_EQ(trace.meta.entries["collector.unmatched_ends"], "0");
}

TEST(Recorder, UnwritableRunDirTurnsRecordingOff) {
  TempDir dir;
  RecorderOptions options = Options(dir, 0);
  options.config.run_dir = (dir / "missing" / "deeper").string();
  Recorder recorder(std::move(options));
  recorder.Mark(Named(recorder.registry().DefaultDomain(), "m"));
  EXPECT_FALSE(recorder.Close(Recorder::EndReason::kExit).ok() && !recorder.file_path().empty());
  EXPECT_FALSE(recorder.recording());
}

}  // namespace
}  // namespace rankscope::collector
