// gui/core/run_end.h: what each rank was inside when its file ended, on its lanes. Marks on
// hand-built ranks (lanes, times, nesting, labels, the "state at" marker, the Details rows),
// and TimelineModel::Load on rank files whose in-flight state TraceWriter::ReplaceInFlight
// wrote (a killed rank's, a state naming an unknown lane, rows flagged unfinished).
#include "gui/core/run_end.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "tests/gui/model_builder.h"
#include "tests/temp_dir.h"

namespace rankscope::gui {
namespace {

using testing::NamedEvent;
using testing::RankBuilder;

using testing::EndRunAt;
constexpr auto At = EndRunAt;
constexpr uint64_t kComm = testing::kEndRunComm;

trace::Lane Stream(trace::LaneId id) {
  trace::Lane lane;
  lane.id = id;
  lane.kind = trace::LaneKind::kGpuStream;
  lane.device = 0;
  lane.stream = 7;
  return lane;
}

trace::Lane Thread(trace::LaneId id, int64_t tid, std::string name) {
  trace::Lane lane;
  lane.id = id;
  lane.kind = trace::LaneKind::kCpuThread;
  lane.tid = tid;
  lane.name = std::move(name);
  return lane;
}

trace::Lane Communicator(trace::LaneId id, uint64_t hash) {
  trace::Lane lane;
  lane.id = id;
  lane.kind = trace::LaneKind::kCommunicator;
  lane.comm_hash = hash;
  return lane;
}

trace::FlightCollective Collective(uint64_t sequence, double start_s, trace::LaneId lane = trace::kNoLane) {
  trace::FlightCollective c;
  c.comm_hash = kComm;
  c.sequence = sequence;
  c.op = trace::CollectiveOp::kAllReduce;
  c.name = "AllReduce";
  c.bytes = 8 << 20;
  c.comm_rank = 2;
  c.comm_size = 4;
  c.lane = lane;
  c.start_ns = At(start_s);
  return c;
}

trace::OpenRange Open(trace::LaneId lane, uint32_t depth, double start_s, std::string name) {
  trace::OpenRange range;
  range.lane = lane;
  range.depth = depth;
  range.start_ns = At(start_s);
  range.name = std::move(name);
  return range;
}

RankEndInput Input(double as_of_s, bool closed_cleanly, std::string ended_by) {
  RankEndInput input;
  input.end.rank = 2;
  input.end.closed_cleanly = closed_cleanly;
  input.end.ended_by = std::move(ended_by);
  input.end.state.as_of_ns = At(as_of_s);
  return input;
}

// (name, start, end) of each event of each row of a track.
using Event = std::tuple<std::string, int64_t, int64_t>;
std::vector<std::vector<Event>> Rows(const RankTimeline& rank, size_t track) {
  std::vector<std::vector<Event>> rows;
  for (const EventRow& row : rank.tracks.at(track).rows) {
    rows.emplace_back();
    for (size_t i = 0; i < row.size(); ++i) rows.back().emplace_back(rank.Str(row.name[i]), row.start[i], row.end[i]);
  }
  return rows;
}

std::vector<std::string> Labels(const RankTimeline& rank) {
  std::vector<std::string> labels;
  for (const EndMark& mark : rank.end.marks) labels.push_back(mark.label);
  return labels;
}

// Rank 2 of a hung run, killed (SIGKILL): a kernel on a stream, a main thread inside step 1
// (open) and backward (open), a communicator lane whose AllReduce #41 is in flight, and a
// pin_memory thread that recorded nothing but has a range open.
class KilledRank : public ::testing::Test {
 protected:
  void SetUp() override {
    RankBuilder b(2, "node-a");  // tracks in the viewer's order: streams, communicators, threads
    const uint32_t stream = b.AddTrack(trace::LaneKind::kGpuStream, 0, "GPU 0 · stream 7");
    b.AddRow(stream, {{At(1.0), At(1.5), "gemm"}});
    const uint32_t comm = b.AddTrack(trace::LaneKind::kCommunicator, -1, "communicator");
    b.AddRow(comm, {{At(1.8), At(1.9), "AllReduce", EventClass::kCollective, EventSource::kCollective}});
    const uint32_t main = b.AddTrack(trace::LaneKind::kCpuThread, -1, "main (100)");
    b.AddRow(main, {{At(0.5), At(2.0), "step", EventClass::kAnnotation, EventSource::kNvtxRange},
                    {At(2.1), At(2.4), "forward", EventClass::kAnnotation, EventSource::kNvtxRange},
                    {At(2.6), At(2.7), "layer", EventClass::kAnnotation, EventSource::kNvtxRange}});
    rank_ = b.Build();
    lanes_ = {Stream(1), Communicator(2, kComm), Thread(3, 100, "main"), Thread(4, 101, "pin_memory")};

    input_ = Input(14.9, /*closed_cleanly=*/false, "");
    trace::FlightCollective done = Collective(40, 1.8);
    done.end_ns = At(1.9);
    input_.end.state.collectives = {done, Collective(41, 2.5)};
    input_.end.state.open_ranges = {Open(3, 0, 2.0, "step"), Open(3, 1, 2.5, "backward"),
                                    Open(4, 0, 14.5, "fetch")};
  }

  RankTimeline rank_;
  std::vector<trace::Lane> lanes_;
  RankEndInput input_;
};

TEST_F(KilledRank, OpenRangesWithoutRowsNestOverTheRangesTheFileHolds) {
  EXPECT_EQ(ApplyRankEnd(rank_, lanes_, input_), 0u);
  ASSERT_EQ(rank_.tracks.size(), 4u);
  EXPECT_EQ(rank_.tracks[2].label, "main (100)");
  // step · open and backward · open stack over the ranges they hold, from start to the state.
  EXPECT_EQ(Rows(rank_, 2), (std::vector<std::vector<Event>>{
                                {{"step", At(0.5), At(2.0)}, {"step · open at end (12.9 s)", At(2.0), At(14.9)}},
                                {{"forward", At(2.1), At(2.4)}, {"backward · open at end (12.4 s)", At(2.5), At(14.9)}},
                                {{"layer", At(2.6), At(2.7)}}}));
  EXPECT_EQ(rank_.tracks[2].events, 5u);
  // The thread that recorded nothing gets a track, after main (by thread id).
  EXPECT_EQ(rank_.tracks[3].lane, 4u);
  EXPECT_EQ(rank_.tracks[3].label, "pin_memory (101)");
  EXPECT_EQ(Rows(rank_, 3), (std::vector<std::vector<Event>>{{{"fetch · open at end (400 ms)", At(14.5), At(14.9)}}}));
  EXPECT_EQ(rank_.events, 9u);
  EXPECT_EQ(rank_.last_ns, At(14.9));

  ASSERT_EQ(rank_.end.marks.size(), 4u);
  for (const EndMark& mark : rank_.end.marks) {
    EXPECT_FALSE(mark.file_row) << mark.label;
    EXPECT_EQ(mark.as_of_ns, At(14.9)) << mark.label;
    const EventRow& row = rank_.tracks[mark.track].rows[mark.row];
    EXPECT_EQ(row.start[mark.index], mark.start_ns) << mark.label;
    EXPECT_EQ(row.end[mark.index], At(14.9)) << mark.label;
    EXPECT_EQ(rank_.Str(row.name[mark.index]), mark.label);
  }
  // By track, row and event: the collective on the communicator, then main's, then pin_memory's.
  EXPECT_EQ(Labels(rank_), (std::vector<std::string>{"AllReduce #41 in flight (12.4 s)", "step · open at end (12.9 s)",
                                                     "backward · open at end (12.4 s)", "fetch · open at end (400 ms)"}));
  EXPECT_EQ(rank_.end.marks[1].range.name, "step");
  EXPECT_EQ(rank_.end.marks[2].range.depth, 1u);
  EXPECT_TRUE(rank_.end.has_state);
  EXPECT_TRUE(rank_.end.show_marker);
}

TEST_F(KilledRank, NcclsInFlightCollectiveGoesOnItsCommunicatorLane) {
  ApplyRankEnd(rank_, lanes_, input_);
  const EndMark& mark = rank_.end.marks.front();
  ASSERT_EQ(mark.kind, EndMarkKind::kCollective);
  EXPECT_EQ(mark.label, "AllReduce #41 in flight (12.4 s)");
  EXPECT_EQ(mark.track, 1u);
  EXPECT_EQ(rank_.tracks[mark.track].kind, trace::LaneKind::kCommunicator);
  EXPECT_EQ(mark.row, 0u);  // after #40, which completed
  EXPECT_EQ(mark.index, 1u);
  EXPECT_EQ(mark.collective.sequence, 41u);
  const EventRow& row = rank_.tracks[mark.track].rows[0];
  EXPECT_EQ(row.event_class[1], static_cast<uint8_t>(EventClass::kCollective));
  EXPECT_EQ(row.source[1], static_cast<uint8_t>(EventSource::kCollective));
}

TEST_F(KilledRank, WithoutACommunicatorLaneItGoesOnTheFirstShownLane) {
  lanes_[1].comm_hash = 0x1234;  // another communicator
  ApplyRankEnd(rank_, lanes_, input_);
  const EndMark& mark = rank_.end.marks.front();  // the stream track sorts first
  ASSERT_EQ(mark.kind, EndMarkKind::kCollective);
  EXPECT_EQ(mark.track, 0u);
  EXPECT_EQ(rank_.tracks[0].label, "GPU 0 · stream 7");
  EXPECT_EQ(Rows(rank_, 0), (std::vector<std::vector<Event>>{
                                {{"gemm", At(1.0), At(1.5)}, {"AllReduce #41 in flight (12.4 s)", At(2.5), At(14.9)}}}));
}

TEST_F(KilledRank, TheModelFindsEachMarkAndReachesTheStatesTime) {
  ApplyRankEnd(rank_, lanes_, input_);
  RankTimeline other = RankBuilder(0, "node-a").Build();
  TimelineModel model("run", {std::move(other), std::move(rank_)});
  EXPECT_EQ(model.start_ns(), At(0.5));
  EXPECT_EQ(model.end_ns(), At(14.9));
  EXPECT_TRUE(model.HasEndMarks());
  const EndMark& first = model.ranks()[1].end.marks.front();
  const EventRef ref{1, first.track, first.row, first.index};
  ASSERT_NE(model.FindEndMark(ref), nullptr);
  EXPECT_EQ(model.FindEndMark(ref)->label, "AllReduce #41 in flight (12.4 s)");
  EXPECT_EQ(model.FindEndMark({1, 2, 0, 0}), nullptr);  // step 0, which ended
  EXPECT_EQ(model.FindEndMark({0, 0, 0, 0}), nullptr);
}

TEST_F(KilledRank, DetailsSayWhatEachMarkIsAndSinceWhen) {
  ApplyRankEnd(rank_, lanes_, input_);
  TimelineModel model("run", {std::move(rank_)});
  const RankTimeline& rank = model.ranks()[0];
  const EndMark& collective = rank.end.marks.front();
  const std::vector<std::pair<std::string, std::string>> fields =
      EndMarkFields(model, {0, collective.track, collective.row, collective.index}, collective);
  const std::map<std::string, std::string> by_label(fields.begin(), fields.end());
  EXPECT_EQ(by_label.at("communicator"), "3f2a11c09e4b7d21");
  EXPECT_EQ(by_label.at("sequence"), "#41");
  EXPECT_EQ(by_label.at("op"), "AllReduce");
  EXPECT_EQ(by_label.at("bytes"), "8.00 MiB");
  EXPECT_EQ(by_label.at("rank in communicator"), "2 of 4");
  EXPECT_EQ(by_label.at("entered"), "2.00 s after the run's start");  // the run starts at 0.5 s
  EXPECT_EQ(by_label.at("in flight for"), "12.4 s when the state was taken");
  EXPECT_EQ(by_label.at("state taken"), "14.4 s after the run's start");
  EXPECT_EQ(by_label.at("file"), "never closed (killed or crashed)");
  EXPECT_FALSE(by_label.contains("root"));

  const EndMark& backward = rank.end.marks[2];
  const auto range_fields = EndMarkFields(model, {0, backward.track, backward.row, backward.index}, backward);
  const std::map<std::string, std::string> range(range_fields.begin(), range_fields.end());
  EXPECT_EQ(range.at("thread"), "main (100)");
  EXPECT_EQ(range.at("depth"), "1");
  EXPECT_EQ(range.at("open for"), "12.4 s when the state was taken");
  EXPECT_EQ(range.at("state"), "open when the file ended (the file holds no row for it)");
}

TEST(RunEnd, LabelsNameTheCollectiveItsPeerAndHowLongItWaited) {
  trace::FlightCollective send = Collective(3, 1.0);
  send.op = trace::CollectiveOp::kSend;
  send.name = "Send";
  send.peer = 1;
  EXPECT_EQ(InFlightLabel(send, At(3.0)), "Send #3 to peer 1 in flight (2.00 s)");
  send.op = trace::CollectiveOp::kRecv;
  EXPECT_EQ(InFlightLabel(send, At(1.0005)), "Recv #3 from peer 1 in flight (500 us)");
  trace::FlightCollective unknown = Collective(7, 1.0);
  unknown.op = trace::CollectiveOp::kUnknown;
  unknown.name = "gloo:all_to_all";
  EXPECT_EQ(InFlightLabel(unknown, At(1.0)), "gloo:all_to_all #7 in flight (0 ns)");
  EXPECT_EQ(OpenRangeLabel("", At(1.0), At(2.0)), "range · open at end (1.00 s)");
}

TEST(RunEnd, EntriesNamingNoDeclaredLaneAreCountedNotShown) {
  RankBuilder b(0, "h");
  const uint32_t main = b.AddTrack(trace::LaneKind::kCpuThread, -1, "main (100)");
  b.AddRow(main, {{At(0.0), At(1.0), "init", EventClass::kAnnotation, EventSource::kNvtxRange}});
  RankTimeline rank = b.Build();
  RankEndInput input = Input(5.0, true, "signal 15");
  input.end.state.collectives = {Collective(1, 2.0, /*lane=*/9)};
  input.end.state.open_ranges = {Open(0, 0, 1.5, "lost"), Open(7, 0, 1.5, "lost too")};
  EXPECT_EQ(ApplyRankEnd(rank, {Thread(1, 100, "main")}, input), 3u);
  EXPECT_TRUE(rank.end.marks.empty());
  EXPECT_EQ(rank.events, 1u);
  // Nothing to mark, but the file ended by a signal: the marker shows where the state was taken.
  EXPECT_TRUE(rank.end.show_marker);
  EXPECT_EQ(rank.last_ns, At(5.0));
}

TEST(RunEnd, ARankThatFinishedCleanlyGetsNoMarker) {
  RankBuilder b(0, "h");
  const uint32_t main = b.AddTrack(trace::LaneKind::kCpuThread, -1, "main (100)");
  b.AddRow(main, {{At(0.0), At(1.0), "init", EventClass::kAnnotation, EventSource::kNvtxRange}});
  RankTimeline rank = b.Build();
  RankEndInput input = Input(1.2, true, "exit");
  trace::FlightCollective done = Collective(1, 0.5);
  done.end_ns = At(0.6);
  input.end.state.collectives = {done};
  ApplyRankEnd(rank, {Thread(1, 100, "main")}, input);
  EXPECT_TRUE(rank.end.marks.empty());
  EXPECT_FALSE(rank.end.show_marker);
  EXPECT_EQ(rank.last_ns, At(1.0));
  TimelineModel model("run", {std::move(rank)});
  EXPECT_EQ(model.end_ns(), At(1.0));
}

// A rank closed by SIGTERM: the collector wrote its open ranges as rows ending at the close,
// flagged unfinished, and a row for the collective in flight.
TEST(RunEnd, RowsTheFileHoldsAreMarkedWhereTheyAreNotAddedAgain) {
  RankBuilder b(1, "h");
  const uint32_t main = b.AddTrack(trace::LaneKind::kCpuThread, -1, "main (100)");
  b.AddRow(main, {{At(2.0), At(9.0), "step", EventClass::kAnnotation, EventSource::kNvtxRange}});
  b.AddRow(main, {{At(2.5), At(9.0), "backward", EventClass::kAnnotation, EventSource::kNvtxRange}});
  const uint32_t comm = b.AddTrack(trace::LaneKind::kCommunicator, -1, "communicator");
  b.AddRow(comm, {{At(3.0), At(9.0), "AllReduce", EventClass::kCollective, EventSource::kCollective}});
  RankTimeline rank = b.Build();
  RankEndInput input = Input(9.1, true, "signal 15");
  input.end.state.open_ranges = {Open(1, 0, 2.0, "step"), Open(1, 1, 2.5, "backward")};
  input.end.state.open_ranges[1].domain = "rankscope";
  input.end.state.collectives = {Collective(6, 3.0)};
  input.flagged_rows = {{1, At(2.0), At(9.0)}};  // backward's flag was found through the state only

  ApplyRankEnd(rank, {Thread(1, 100, "main"), Communicator(2, kComm)}, input);
  EXPECT_EQ(rank.events, 3u);  // nothing added
  EXPECT_EQ(Labels(rank), (std::vector<std::string>{"step · open at end (7.10 s)", "backward · open at end (6.60 s)",
                                                    "AllReduce #6 in flight (6.10 s)"}));
  for (const EndMark& mark : rank.end.marks) EXPECT_TRUE(mark.file_row) << mark.label;
  EXPECT_EQ(rank.end.marks[1].range.domain, "rankscope");  // from the state
  EXPECT_EQ(rank.end.marks[1].row, 1u);
  EXPECT_EQ(rank.end.marks[2].track, 1u);
}

TEST(RunEnd, AFileWithoutStateStillMarksItsFlaggedRows) {
  RankBuilder b(1, "h");
  const uint32_t main = b.AddTrack(trace::LaneKind::kCpuThread, -1, "main (100)");
  b.AddRow(main, {{At(2.0), At(9.0), "step", EventClass::kAnnotation, EventSource::kNvtxRange}});
  RankTimeline rank = b.Build();
  RankEndInput input;
  input.end.closed_cleanly = true;
  input.end.ended_by = "signal 2";
  input.flagged_rows = {{1, At(2.0), At(9.0)}};
  ApplyRankEnd(rank, {Thread(1, 100, "main")}, input);
  EXPECT_EQ(Labels(rank), (std::vector<std::string>{"step · open at end (7.00 s)"}));
  EXPECT_EQ(rank.end.marks[0].as_of_ns, At(9.0));  // the close, as the row says
  EXPECT_FALSE(rank.end.has_state);
  EXPECT_FALSE(rank.end.show_marker);  // no state: no time to mark
}

// ---- From rank files ---------------------------------------------------------------------

TEST(RunEnd, LoadReadsEachRanksStateFromItsFile) {
  rankscope::testing::TempDir dir;
  // Rank 0 was killed waiting: its file never closed, its open range has no row.
  trace::InFlightState waiting;
  waiting.as_of_ns = At(9.5);
  waiting.collectives = {Collective(5, 3.0)};  // NCCL's: lane 0
  waiting.open_ranges = {Open(1, 0, 2.0, "step"), Open(9, 0, 2.0, "nowhere")};
  testing::WriteEndedRankFile(dir.path(), {.rank = 0, .state = waiting, .closed = false});
  // Rank 1's older collector closed it on SIGTERM: a flagged row, no state.
  testing::WriteEndedRankFile(dir.path(), {.rank = 1, .ended_by = "signal 15", .flagged_step = true});

  auto loaded = TimelineModel::Load(dir.path(), {});
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  const TimelineModel& model = **loaded;
  ASSERT_EQ(model.ranks().size(), 2u);
  const RankTimeline& rank0 = model.ranks()[0];
  EXPECT_EQ(Labels(rank0), (std::vector<std::string>{"AllReduce #5 in flight (6.50 s)", "step · open at end (7.50 s)"}));
  EXPECT_EQ(rank0.tracks[rank0.end.marks[0].track].kind, trace::LaneKind::kCommunicator);
  EXPECT_EQ(rank0.tracks[rank0.end.marks[1].track].label, "main (1000)");
  EXPECT_EQ(rank0.end.as_of_ns, At(9.5));
  EXPECT_FALSE(rank0.end.closed_cleanly);
  EXPECT_TRUE(rank0.end.show_marker);
  EXPECT_EQ(model.end_ns(), At(9.5));

  const RankTimeline& rank1 = model.ranks()[1];
  ASSERT_EQ(Labels(rank1), (std::vector<std::string>{"step · open at end (7.00 s)"}));
  EXPECT_TRUE(rank1.end.marks[0].file_row);
  EXPECT_FALSE(rank1.end.has_state);

  // Besides the stream's word on the unclosed file: the entry the state could not place.
  const std::vector<std::string>& warnings = model.warnings();
  EXPECT_EQ(std::count_if(warnings.begin(), warnings.end(),
                          [](const std::string& w) {
                            return w.ends_with("rank-0.sqlite: 1 in-flight state entry names a lane the file does not "
                                               "declare (not shown)");
                          }),
            1)
      << ::testing::PrintToString(warnings);
}

}  // namespace
}  // namespace rankscope::gui
