#include "collector/recorder.h"

#include <nvtx3/nvToolsExtPayload.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <map>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "collector/hook_api.h"

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


// ---- the in-flight state and the progress file ---------------------------------------------

constexpr uint64_t kCommId = 0xCBF29CE484222325;  // FNV-1a's basis: the top bit set, as ids often have

// A `rankscope collective` payload, laid out as the trainer's (trainer/annotations.h).
struct CollectiveFields {
  uint64_t comm = kCommId;
  uint64_t sequence = 0;
  uint64_t bytes = 0;
  int64_t root = -1;
  int64_t peer = -1;
  int64_t comm_rank = 1;
  int64_t comm_size = 4;
};

// Registers the convention's schema, or the same layout under another name.
uint64_t RegisterCollectiveSchema(Recorder& recorder, const NvtxDomain* domain,
                                  const char* name = kCollectiveSchemaName) {
  PayloadSchema schema;
  schema.name = name;
  schema.type = NVTX_PAYLOAD_SCHEMA_TYPE_STATIC;
  schema.entries = {{0, NVTX_PAYLOAD_ENTRY_TYPE_UINT64, "comm", 0, offsetof(CollectiveFields, comm)},
                    {0, NVTX_PAYLOAD_ENTRY_TYPE_UINT64, "sequence", 0, offsetof(CollectiveFields, sequence)},
                    {0, NVTX_PAYLOAD_ENTRY_TYPE_UINT64, "bytes", 0, offsetof(CollectiveFields, bytes)},
                    {0, NVTX_PAYLOAD_ENTRY_TYPE_INT64, "root", 0, offsetof(CollectiveFields, root)},
                    {0, NVTX_PAYLOAD_ENTRY_TYPE_INT64, "peer", 0, offsetof(CollectiveFields, peer)},
                    {0, NVTX_PAYLOAD_ENTRY_TYPE_INT64, "comm_rank", 0, offsetof(CollectiveFields, comm_rank)},
                    {0, NVTX_PAYLOAD_ENTRY_TYPE_INT64, "comm_size", 0, offsetof(CollectiveFields, comm_size)}};
  schema.static_size = sizeof(CollectiveFields);
  return recorder.registry().RegisterSchema(domain, schema, std::nullopt);
}

// Pushes `name` with `fields` as its payload of `schema`.
int PushCollective(Recorder& recorder, const NvtxDomain* domain, const char* name, uint64_t schema,
                   const CollectiveFields& fields) {
  const PayloadPiece piece{schema, std::as_bytes(std::span(&fields, 1))};
  EventDraft draft = Named(domain, name);
  draft.pieces = std::span(&piece, 1);
  return recorder.Push(draft);
}

trace::InFlightState ReadInFlight(const std::filesystem::path& path) {
  auto reader = trace::TraceReader::Open(path);
  EXPECT_TRUE(reader.ok()) << reader.status().message();
  if (!reader.ok()) return {};
  auto state = (*reader)->ReadInFlight();
  EXPECT_TRUE(state.ok()) << state.status().message();
  return state.ok() ? *state : trace::InFlightState{};
}

TEST(Recorder, InFlightStateIsCommittedWithTheDrainAsAKilledRankWouldLeaveIt) {
  TempDir dir;
  RecorderOptions options = Options(dir, 0);
  options.config.progress_file = true;
  Recorder recorder(std::move(options));
  const NvtxDomain* domain = recorder.registry().CreateDomain("rankscope");
  const uint64_t schema = RegisterCollectiveSchema(recorder, domain);
  // Step 0 with a broadcast that completes; step 1 enters an all-reduce and never leaves it.
  EXPECT_EQ(recorder.Push(Named(domain, "step")), 0);
  EXPECT_EQ(PushCollective(recorder, domain, "broadcast", schema, {.sequence = 0, .bytes = 4096, .root = 2}), 1);
  EXPECT_EQ(recorder.Pop(domain, {}), 1);
  EXPECT_EQ(recorder.Pop(domain, {}), 0);
  EXPECT_EQ(recorder.Push(Named(domain, "step")), 0);
  EXPECT_EQ(PushCollective(recorder, domain, "allreduce", schema, {.sequence = 1, .bytes = 8192}), 1);
  const uint64_t loading = recorder.Start(Named(recorder.registry().DefaultDomain(), "data wait"));
  ASSERT_NE(loading, 0u);
  ASSERT_TRUE(recorder.Flush(std::chrono::seconds(10)).ok());  // a drain and a commit, no close

  const trace::InFlightState state = ReadInFlight(dir / "rank-0.sqlite");
  EXPECT_GT(state.as_of_ns, 0);
  EXPECT_EQ(state.completed_collectives, 1u);
  EXPECT_EQ(state.completed_steps, 1u);
  ASSERT_EQ(state.collectives.size(), 2u);
  const trace::FlightCollective& broadcast = state.collectives[0];
  EXPECT_FALSE(broadcast.in_flight());
  EXPECT_EQ(broadcast.name, "broadcast");
  EXPECT_EQ(broadcast.op, trace::CollectiveOp::kBroadcast);
  EXPECT_EQ(broadcast.comm_hash, kCommId);
  EXPECT_EQ(broadcast.sequence, 0u);
  EXPECT_EQ(broadcast.bytes, 4096u);
  EXPECT_EQ(broadcast.root, 2);
  EXPECT_EQ(broadcast.peer, -1);
  EXPECT_EQ(broadcast.comm_rank, 1);
  EXPECT_EQ(broadcast.comm_size, 4);
  EXPECT_NE(broadcast.lane, trace::kNoLane);
  EXPECT_LE(broadcast.start_ns, *broadcast.end_ns);
  const trace::FlightCollective& allreduce = state.collectives[1];
  EXPECT_TRUE(allreduce.in_flight());
  EXPECT_EQ(allreduce.name, "allreduce");
  EXPECT_EQ(allreduce.op, trace::CollectiveOp::kAllReduce);
  EXPECT_EQ(allreduce.comm_hash, kCommId);
  EXPECT_EQ(allreduce.sequence, 1u);
  EXPECT_EQ(allreduce.bytes, 8192u);
  EXPECT_EQ(allreduce.root, -1);
  EXPECT_EQ(allreduce.lane, broadcast.lane);
  EXPECT_GE(allreduce.start_ns, *broadcast.end_ns);
  // The last progress: step 0's end, after its broadcast's.
  EXPECT_GE(state.last_progress_ns, *broadcast.end_ns);
  EXPECT_LE(state.last_progress_ns, allreduce.start_ns);

  std::map<std::string, trace::OpenRange> open;
  for (const trace::OpenRange& range : state.open_ranges) open[range.name] = range;
  ASSERT_EQ(open.size(), 3u);
  EXPECT_EQ(open["step"].depth, 0u);
  EXPECT_EQ(open["step"].domain, "rankscope");
  EXPECT_EQ(open["step"].lane, allreduce.lane);
  EXPECT_EQ(open["allreduce"].depth, 1u);
  EXPECT_EQ(open["allreduce"].domain, "rankscope");
  EXPECT_EQ(open["allreduce"].start_ns, allreduce.start_ns);
  const nlohmann::json args = nlohmann::json::parse(open["allreduce"].args);
  EXPECT_EQ(args["sequence"], 1);
  EXPECT_EQ(args["comm"].get<uint64_t>(), kCommId);
  EXPECT_EQ(open["data wait"].domain, "");
  EXPECT_EQ(open["data wait"].depth, 0u);

  // The progress file says as much, for the launcher's hang watch.
  EXPECT_EQ(rankscope::testing::ReadFile(dir / "rank-0.progress"),
            fmt::format("rankscope-progress 1\nrun_id testrun\nrank 0\npid {}\ncollectives 1\nsteps 1\n"
                        "last_progress_ns {}\n",
                        getpid(), state.last_progress_ns));
  EXPECT_FALSE(std::filesystem::exists(dir / "rank-0.progress.new"));

  // A process that exits inside the collective leaves it in flight, and its ranges open.
  recorder.End(recorder.registry().DefaultDomain(), loading, {});
  ASSERT_TRUE(recorder.Close(Recorder::EndReason::kSignal, 15).ok());
  const trace::InFlightState closed = ReadInFlight(dir / "rank-0.sqlite");
  ASSERT_EQ(closed.collectives.size(), 2u);
  EXPECT_TRUE(closed.collectives[1].in_flight());
  EXPECT_EQ(closed.completed_collectives, 1u);
  EXPECT_GE(closed.as_of_ns, state.as_of_ns);
  std::vector<std::string> names;
  for (const trace::OpenRange& range : closed.open_ranges) names.push_back(range.name);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"allreduce", "step"}));
}

TEST(Recorder, OnlyTheConventionsSchemaMakesARangeACollective) {
  TempDir dir;
  Recorder recorder(Options(dir, 0));
  const NvtxDomain* domain = recorder.registry().CreateDomain("app");
  const uint64_t other = RegisterCollectiveSchema(recorder, domain, "my collective");
  EXPECT_EQ(PushCollective(recorder, domain, "allreduce", other, {.sequence = 5}), 0);
  EXPECT_EQ(recorder.Pop(domain, {}), 0);
  ASSERT_TRUE(recorder.Flush(std::chrono::seconds(10)).ok());
  const trace::InFlightState state = ReadInFlight(dir / "rank-0.sqlite");
  EXPECT_GT(state.as_of_ns, 0);  // the range changed the (empty) state of open ranges
  EXPECT_TRUE(state.collectives.empty());
  EXPECT_EQ(state.completed_collectives, 0u);
  EXPECT_TRUE(state.open_ranges.empty());
  // No progress file unless asked for.
  EXPECT_FALSE(std::filesystem::exists(dir / "rank-0.progress"));
}

TEST(Recorder, AProcessWhoseRankFileIsTakenKeepsAProgressFileOfRankUnknown) {
  TempDir dir;
  trace::testing::WriteRankFile(dir / "rank-0.sqlite", trace::testing::MakeIdentity("testrun", 0, 4));
  RecorderOptions options = Options(dir, 0);
  options.config.progress_file = true;
  Recorder recorder(std::move(options));
  recorder.Push(Named(recorder.registry().DefaultDomain(), "step"));
  recorder.Pop(recorder.registry().DefaultDomain(), {});
  ASSERT_TRUE(recorder.Flush(std::chrono::seconds(10)).ok());
  // Not rank 0's progress: the hang watch must not take this process's steps for rank 0's.
  EXPECT_FALSE(std::filesystem::exists(dir / "rank-0.progress"));
  const std::filesystem::path path = dir / fmt::format("rank-unknown-{}.progress", getpid());
  const std::string progress = rankscope::testing::ReadFile(path);
  EXPECT_NE(progress.find("\nrank unknown\n"), std::string::npos) << progress;
  EXPECT_NE(progress.find("\nsteps 1\n"), std::string::npos) << progress;
}

TEST(Recorder, StepsAndHookCollectivesAreProgress) {
  TempDir dir;
  RecorderOptions options = Options(dir, 3);
  options.config.progress_file = true;
  Recorder recorder(std::move(options));
  const NvtxDomain* plain = recorder.registry().DefaultDomain();
  for (const char* name : {"ProfilerStep#7", "train_step", "Step", "steps", "stepper"}) {
    recorder.Push(Named(plain, name));
    recorder.Pop(plain, {});
  }
  // The PyTorch hook reports finished ranges and collectives: a step range, a comm range
  // named "step" (not a training step), and an all-reduce completed at once.
  EXPECT_EQ(HookRange(&recorder, "step", 1'000'000, 2'000'000, 0, nullptr), 1);
  EXPECT_EQ(HookRange(&recorder, "step", 1'000'000, 2'000'000, 2, nullptr), 1);
  EXPECT_EQ(HookCollective(&recorder, "gloo:all_reduce", "gloo", 3'000'000, 3'500'000, 0xabc, 9, /*op=*/1, 1, 8,
                           4096, -1, -1, 0, 2, nullptr),
            1);
  ASSERT_TRUE(recorder.Flush(std::chrono::seconds(10)).ok());
  const trace::InFlightState state = ReadInFlight(dir / "rank-3.sqlite");
  EXPECT_EQ(state.completed_steps, 4u);  // ProfilerStep#7, train_step, Step, the hook's step
  EXPECT_EQ(state.completed_collectives, 1u);
  ASSERT_EQ(state.collectives.size(), 1u);
  EXPECT_EQ(state.collectives[0].comm_hash, 0xabcu);
  EXPECT_EQ(state.collectives[0].sequence, 9u);
  EXPECT_EQ(state.collectives[0].start_ns, 3'000'000);
  EXPECT_EQ(state.collectives[0].end_ns, std::optional<int64_t>(3'500'000));
  EXPECT_TRUE(state.open_ranges.empty());
  const std::string progress = rankscope::testing::ReadFile(dir / "rank-3.progress");
  EXPECT_NE(progress.find("\nrank 3\n"), std::string::npos) << progress;
  EXPECT_NE(progress.find("\ncollectives 1\nsteps 4\n"), std::string::npos) << progress;
}

}  // namespace
}  // namespace rankscope::collector
