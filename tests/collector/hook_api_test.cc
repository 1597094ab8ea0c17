// The language-hook API (collector/hook_api.h): what `rankscope_hook_*` records, and what
// it refuses, read back from the rank file.
#include "collector/hook_api.h"

#include <map>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "collector/recorder.h"
#include "tests/collector/collector_test_util.h"
#include "tests/trace/trace_test_util.h"
#include "trace/reader.h"

namespace rankscope::collector {
namespace {

using testing::Load;
using trace::testing::TempDir;

RecorderOptions Options(const TempDir& dir) {
  return testing::MakeRecorderOptions(dir, {.run_id = "hookrun", .rank = 1, .world_size = 2,
                                            .command_line = "python3 train.py"});
}

TEST(HookApi, RangesKeepTheirTimesRoleAndArgs) {
  TempDir dir;
  Recorder recorder(Options(dir));
  EXPECT_EQ(HookRange(&recorder, "backward", 1'000'000, 3'000'000, 1, nullptr), 1);
  EXPECT_EQ(HookRange(&recorder, "step", 500'000, 4'000'000, 0, R"({"step": 7, "samples": 64})"), 1);
  EXPECT_EQ(HookMeta(&recorder, "pytorch.hook", "on (torch 1.13)"), 1);
  EXPECT_EQ(HookMeta(&recorder, "backend", "gloo"), 1);
  ASSERT_TRUE(recorder.Close(Recorder::EndReason::kExit).ok());

  trace::RankTrace trace = Load(dir / "rank-1.sqlite");
  ASSERT_EQ(trace.events.nvtx_ranges.size(), 2u);
  std::map<std::string, trace::NvtxRangeEvent> by_name;
  for (const auto& range : trace.events.nvtx_ranges) by_name[trace.str(range.name)] = range;
  const trace::NvtxRangeEvent& backward = by_name["backward"];
  EXPECT_EQ(backward.start_ns, 1'000'000);
  EXPECT_EQ(backward.end_ns, 3'000'000);
  EXPECT_EQ(trace.str(backward.domain), "pytorch");
  EXPECT_EQ(backward.category, 1u);
  EXPECT_EQ(backward.args, trace::kEmptyString);
  EXPECT_EQ(by_name["step"].category, 0u);
  EXPECT_EQ(trace.str(by_name["step"].args), R"({"step": 7, "samples": 64})");
  // The categories are named, so the analyzer classifies the ranges (docs/metrics.md §1).
  EXPECT_EQ(trace.meta.entries["nvtx.category.pytorch.1"], "compute");
  EXPECT_EQ(trace.meta.entries["nvtx.category.pytorch.2"], "comm");
  EXPECT_EQ(trace.meta.entries["pytorch.hook"], "on (torch 1.13)");
  EXPECT_EQ(trace.meta.backend, "gloo");
}

TEST(HookApi, CollectivesGoOnTheirCommunicatorAndAsCommOnTheCompletingThread) {
  TempDir dir;
  Recorder recorder(Options(dir));
  std::thread gloo_worker([&] {
    EXPECT_EQ(HookCollective(&recorder, "gloo:all_reduce", "gloo group 0 (2 ranks)", 2'000'000, 2'500'000, 0xabcdef,
                             3, /*op=*/1, /*reduce_op=*/1, /*datatype=*/8, 4096, -1, -1, 1, 2,
                             R"({"bytes": 4096, "seq": 3})"),
              1);
  });
  gloo_worker.join();
  ASSERT_TRUE(recorder.Close(Recorder::EndReason::kExit).ok());

  trace::RankTrace trace = Load(dir / "rank-1.sqlite");
  ASSERT_EQ(trace.events.collectives.size(), 1u);
  const trace::CollectiveEvent& collective = trace.events.collectives[0];
  EXPECT_EQ(trace.str(collective.name), "gloo:all_reduce");
  EXPECT_EQ(collective.comm_hash, 0xabcdefu);
  EXPECT_EQ(collective.sequence, 3u);
  EXPECT_EQ(collective.op, trace::CollectiveOp::kAllReduce);
  EXPECT_EQ(collective.reduce_op, trace::ReduceOp::kSum);
  EXPECT_EQ(collective.datatype, trace::DataType::kFloat32);
  EXPECT_EQ(collective.bytes, 4096u);
  EXPECT_EQ(collective.comm_rank, 1);
  EXPECT_EQ(collective.comm_size, 2);
  EXPECT_EQ(collective.end_ns - collective.start_ns, 500'000);
  const trace::Lane* comm_lane = nullptr;
  for (const trace::Lane& lane : trace.lanes) {
    if (lane.id == collective.lane) comm_lane = &lane;
  }
  ASSERT_NE(comm_lane, nullptr);
  EXPECT_EQ(comm_lane->kind, trace::LaneKind::kCommunicator);
  EXPECT_EQ(comm_lane->name, "gloo group 0 (2 ranks)");
  ASSERT_EQ(trace.events.nvtx_ranges.size(), 1u);
  const trace::NvtxRangeEvent& range = trace.events.nvtx_ranges[0];
  EXPECT_EQ(range.category, 2u);  // comm
  EXPECT_EQ(range.start_ns, collective.start_ns);
  EXPECT_NE(range.lane, collective.lane);
  EXPECT_EQ(trace.str(range.args), R"({"bytes": 4096, "seq": 3})");
}

// Entered and not finished: in flight in the file (what a rank hung in it shows); entered
// and finished: completed; the step ranges count as progress.
TEST(HookApi, AnEnteredCollectiveIsInFlightUntilItsFinishedOneArrives) {
  TempDir dir;
  Recorder recorder(Options(dir));
  EXPECT_EQ(HookCollectiveBegin(&recorder, "gloo:all_reduce", "g", 2'000'000, 0xabcdef, 3, 1, 4096, -1, -1, 1, 2), 1);
  EXPECT_EQ(HookCollectiveBegin(&recorder, "gloo:broadcast", "g", 3'000'000, 0xabcdef, 4, 4, 64, 0, -1, 1, 2), 1);
  EXPECT_EQ(HookCollective(&recorder, "gloo:all_reduce", "g", 2'100'000, 2'500'000, 0xabcdef, 3, 1, 1, 8, 4096, -1,
                           -1, 1, 2, nullptr),
            1);
  EXPECT_EQ(HookRange(&recorder, "ProfilerStep#0", 1'000'000, 2'600'000, 0, nullptr), 1);
  EXPECT_EQ(HookCollectiveBegin(nullptr, "gloo:all_reduce", "g", 1, 1, 1, 1, 1, -1, -1, 0, 1), 0);
  EXPECT_EQ(HookCollectiveBegin(&recorder, "", "g", 1, 1, 1, 1, 1, -1, -1, 0, 1), 0);
  ASSERT_TRUE(recorder.Close(Recorder::EndReason::kExit).ok());

  auto reader = trace::TraceReader::Open(dir / "rank-1.sqlite");
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  auto state = (*reader)->ReadInFlight();
  ASSERT_TRUE(state.ok()) << state.status().message();
  ASSERT_EQ(state->collectives.size(), 2u);
  EXPECT_EQ(state->collectives[0].sequence, 3u);
  EXPECT_EQ(state->collectives[0].start_ns, 2'000'000);  // entered when issued
  EXPECT_EQ(state->collectives[0].end_ns, std::optional<int64_t>(2'500'000));
  EXPECT_EQ(state->collectives[1].name, "gloo:broadcast");
  EXPECT_EQ(state->collectives[1].op, trace::CollectiveOp::kBroadcast);
  EXPECT_EQ(state->collectives[1].root, 0);
  EXPECT_TRUE(state->collectives[1].in_flight());
  EXPECT_EQ(state->completed_collectives, 1u);
  EXPECT_EQ(state->completed_steps, 1u);
  EXPECT_EQ(state->last_progress_ns, 2'600'000);
}

TEST(HookApi, RefusesWhatItCannotRecord) {
  TempDir dir;
  Recorder recorder(Options(dir));
  EXPECT_EQ(HookRange(nullptr, "x", 1, 2, 0, nullptr), 0);
  EXPECT_EQ(HookRange(&recorder, nullptr, 1, 2, 0, nullptr), 0);
  EXPECT_EQ(HookRange(&recorder, "", 1, 2, 0, nullptr), 0);
  EXPECT_EQ(HookRange(&recorder, "backwards in time", 5, 4, 0, nullptr), 0);
  EXPECT_EQ(HookRange(&recorder, "no role 3", 1, 2, 3, nullptr), 0);
  EXPECT_EQ(HookRange(&recorder, "before the epoch", 0, 2, 0, nullptr), 0);
  EXPECT_EQ(HookMeta(&recorder, "collector.records", "0"), 0);  // the collector's own keys stay its own
  EXPECT_EQ(HookMeta(&recorder, "pytorch.x", nullptr), 0);
  // Args that are not a JSON object are left out; the range stays.
  EXPECT_EQ(HookRange(&recorder, "kept", 1, 2, 0, "not json"), 1);
  // Unknown enum numbers read as unknown rather than as another op.
  EXPECT_EQ(HookCollective(&recorder, "odd", nullptr, 1, 2, 1, 1, 99, 99, 99, 0, -1, -1, 0, -5, nullptr), 1);
  ASSERT_TRUE(recorder.Close(Recorder::EndReason::kExit).ok());
  trace::RankTrace trace = Load(dir / "rank-1.sqlite");
  EXPECT_FALSE(trace.meta.entries.contains("pytorch.x"));
  ASSERT_EQ(trace.events.collectives.size(), 1u);
  EXPECT_EQ(trace.events.collectives[0].op, trace::CollectiveOp::kUnknown);
  EXPECT_EQ(trace.events.collectives[0].reduce_op, trace::ReduceOp::kNone);
  EXPECT_EQ(trace.events.collectives[0].datatype, trace::DataType::kUnknown);
  EXPECT_EQ(trace.events.collectives[0].comm_size, 0);
  ASSERT_EQ(trace.events.nvtx_ranges.size(), 2u);
  for (const auto& range : trace.events.nvtx_ranges) {
    if (trace.str(range.name) == "kept") {
      EXPECT_EQ(range.args, trace::kEmptyString);
    }
  }
}

}  // namespace
}  // namespace rankscope::collector
