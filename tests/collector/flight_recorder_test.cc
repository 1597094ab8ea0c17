// FlightRecorder on its own: what it keeps per communicator stream, in which order, and the
// progress counters the progress file and the rank file's in-flight state report.
#include "collector/flight_recorder.h"

#include <cstdint>
#include <optional>
#include <vector>

#include <gtest/gtest.h>

namespace rankscope::collector {
namespace {

using trace::CollectiveOp;
using trace::FlightCollective;

constexpr uint64_t kComm = 0xF00DCAFE12345678;

FlightCollective Collective(uint64_t sequence, CollectiveOp op = CollectiveOp::kAllReduce, uint64_t comm = kComm,
                            int32_t peer = -1) {
  FlightCollective collective;
  collective.comm_hash = comm;
  collective.sequence = sequence;
  collective.op = op;
  collective.name = "allreduce";
  collective.bytes = 1024;
  collective.peer = peer;
  collective.start_ns = 1'000 + static_cast<int64_t>(sequence) * 100;
  return collective;
}

// The snapshot's (sequence, in flight) pairs of one communicator's collectives, in order.
std::vector<std::pair<uint64_t, bool>> Window(const trace::InFlightState& state, uint64_t comm = kComm) {
  std::vector<std::pair<uint64_t, bool>> window;
  for (const FlightCollective& c : state.collectives) {
    if (c.comm_hash == comm && c.peer == -1) window.emplace_back(c.sequence, c.in_flight());
  }
  return window;
}

std::vector<std::pair<uint64_t, bool>> Completed(uint64_t first, uint64_t last) {
  std::vector<std::pair<uint64_t, bool>> expected;
  for (uint64_t s = first; s <= last; ++s) expected.emplace_back(s, false);
  return expected;
}

TEST(FlightRecorder, KeepsTheLastWindowOfCompletedCollectives) {
  FlightRecorder flight;
  for (uint64_t s = 0; s <= trace::kFlightWindow; ++s) {  // 17
    flight.Enter(Collective(s));
    flight.Complete(Collective(s), 5'000 + static_cast<int64_t>(s));
  }
  const trace::InFlightState state = flight.Snapshot(9'000);
  EXPECT_EQ(Window(state), Completed(1, trace::kFlightWindow));  // the oldest went
  EXPECT_EQ(state.collectives.size(), trace::kFlightWindow);
  EXPECT_EQ(state.completed_collectives, trace::kFlightWindow + 1);
  EXPECT_EQ(flight.in_flight(), 0u);
  EXPECT_EQ(flight.forgotten(), 0u);  // completed ones leave the window, they are not forgotten
}

TEST(FlightRecorder, KeepsEveryCollectiveInFlightBesidesTheWindow) {
  FlightRecorder flight;
  // Three entered and never completed (a stalled operation, say), then 20 that completed.
  for (uint64_t s = 0; s < 3; ++s) flight.Enter(Collective(s));
  for (uint64_t s = 3; s < 23; ++s) {
    flight.Enter(Collective(s));
    flight.Complete(Collective(s), 5'000);
  }
  std::vector<std::pair<uint64_t, bool>> expected = {{0, true}, {1, true}, {2, true}};
  for (const auto& completed : Completed(23 - trace::kFlightWindow, 22)) expected.push_back(completed);
  EXPECT_EQ(Window(flight.Snapshot(9'000)), expected);
  EXPECT_EQ(flight.in_flight(), 3u);
}

TEST(FlightRecorder, CollectivesInFlightAreForgottenOnlyBeyondTheCap) {
  FlightRecorder flight;
  const uint64_t entered = FlightRecorder::kMaxInFlightPerStream + 2;
  for (uint64_t s = 0; s < entered; ++s) flight.Enter(Collective(s));
  EXPECT_EQ(flight.in_flight(), FlightRecorder::kMaxInFlightPerStream);
  EXPECT_EQ(flight.forgotten(), 2u);
  const trace::InFlightState state = flight.Snapshot(9'000);
  ASSERT_EQ(state.collectives.size(), FlightRecorder::kMaxInFlightPerStream);
  EXPECT_EQ(state.collectives.front().sequence, 2u);  // the oldest two went
  EXPECT_EQ(state.collectives.back().sequence, entered - 1);
  for (const FlightCollective& c : state.collectives) EXPECT_TRUE(c.in_flight());
  EXPECT_EQ(state.completed_collectives, 0u);
}

TEST(FlightRecorder, CompletingTheNewestEntryOfASequence) {
  FlightRecorder flight;
  flight.Enter(Collective(4));
  flight.Enter(Collective(5));
  flight.Complete(Collective(4), 7'000);
  EXPECT_EQ(flight.in_flight(), 1u);
  trace::InFlightState state = flight.Snapshot(9'000);
  ASSERT_EQ(state.collectives.size(), 2u);
  EXPECT_EQ(state.collectives[0].sequence, 4u);
  EXPECT_EQ(state.collectives[0].end_ns, std::optional<int64_t>(7'000));
  EXPECT_EQ(state.collectives[0].start_ns, 1'400);  // as entered
  EXPECT_TRUE(state.collectives[1].in_flight());
  // An end before the start (clocks of two sources) never makes a negative duration.
  flight.Complete(Collective(5), 10);
  state = flight.Snapshot(9'000);
  EXPECT_EQ(state.collectives[1].end_ns, std::optional<int64_t>(1'500));
  EXPECT_EQ(flight.in_flight(), 0u);
}

TEST(FlightRecorder, CompletingACollectiveNeverEnteredInsertsItInSequenceOrder) {
  FlightRecorder flight;
  flight.Enter(Collective(1));
  flight.Enter(Collective(3));
  flight.Complete(Collective(2), 6'000);  // its start was lost, or its source reports only finished ones
  flight.Complete(Collective(0), 6'100);
  flight.Complete(Collective(9), 6'200);
  EXPECT_EQ(Window(flight.Snapshot(9'000)),
            (std::vector<std::pair<uint64_t, bool>>{{0, false}, {1, true}, {2, false}, {3, true}, {9, false}}));
  EXPECT_EQ(flight.in_flight(), 2u);
  EXPECT_EQ(flight.completed_collectives(), 3u);
  const trace::InFlightState state = flight.Snapshot(9'000);
  EXPECT_EQ(state.collectives[2].start_ns, 1'200);  // entered and completed at once, from its start
  EXPECT_EQ(state.collectives[2].end_ns, std::optional<int64_t>(6'000));
}

TEST(FlightRecorder, SendsAndReceivesAreNumberedPerPeerAndDirection) {
  FlightRecorder flight;
  flight.Enter(Collective(0, CollectiveOp::kAllReduce));
  flight.Enter(Collective(0, CollectiveOp::kSend, kComm, 1));
  flight.Enter(Collective(0, CollectiveOp::kSend, kComm, 2));
  flight.Enter(Collective(0, CollectiveOp::kRecv, kComm, 1));
  flight.Enter(Collective(0, CollectiveOp::kAllReduce, kComm + 1));
  // Sequence 0 of the send to peer 2 completes; the others of number 0 stay in flight.
  flight.Complete(Collective(0, CollectiveOp::kSend, kComm, 2), 5'000);
  EXPECT_EQ(flight.in_flight(), 4u);
  const trace::InFlightState state = flight.Snapshot(9'000);
  ASSERT_EQ(state.collectives.size(), 5u);
  int completed = 0;
  for (const FlightCollective& c : state.collectives) {
    if (c.in_flight()) continue;
    ++completed;
    EXPECT_EQ(c.op, CollectiveOp::kSend);
    EXPECT_EQ(c.peer, 2);
  }
  EXPECT_EQ(completed, 1);
  // By communicator, then collectives before sends before receives.
  EXPECT_EQ(state.collectives[0].op, CollectiveOp::kAllReduce);
  EXPECT_EQ(state.collectives[0].comm_hash, kComm);
  EXPECT_EQ(state.collectives[1].peer, 1);
  EXPECT_EQ(state.collectives[2].peer, 2);
  EXPECT_EQ(state.collectives[3].op, CollectiveOp::kRecv);
  EXPECT_EQ(state.collectives[4].comm_hash, kComm + 1);
}

TEST(FlightRecorder, ProgressCountsCompletedCollectivesAndSteps) {
  FlightRecorder flight;
  EXPECT_EQ(flight.last_progress_ns(), 0);
  flight.Enter(Collective(0));
  EXPECT_EQ(flight.completed_collectives(), 0u);  // entering is no progress
  EXPECT_EQ(flight.last_progress_ns(), 0);
  flight.Complete(Collective(0), 8'000);
  flight.CompleteStep(9'000);
  flight.Complete(Collective(1), 7'000);  // reported late: progress time never goes back
  EXPECT_EQ(flight.completed_collectives(), 2u);
  EXPECT_EQ(flight.completed_steps(), 1u);
  EXPECT_EQ(flight.last_progress_ns(), 9'000);
  const trace::InFlightState state = flight.Snapshot(12'345);
  EXPECT_EQ(state.as_of_ns, 12'345);
  EXPECT_EQ(state.completed_collectives, 2u);
  EXPECT_EQ(state.completed_steps, 1u);
  EXPECT_EQ(state.last_progress_ns, 9'000);
  EXPECT_TRUE(state.open_ranges.empty());  // the recorder adds those
}

TEST(FlightRecorder, ChangedUntilTheNextSnapshot) {
  FlightRecorder flight;
  EXPECT_FALSE(flight.changed());
  const trace::InFlightState nothing = flight.Snapshot(1);
  EXPECT_FALSE(nothing.empty());  // taken: as_of_ns says when, even with nothing in it
  EXPECT_TRUE(nothing.collectives.empty());
  flight.Enter(Collective(0));
  EXPECT_TRUE(flight.changed());
  (void)flight.Snapshot(2);
  EXPECT_FALSE(flight.changed());
  flight.Complete(Collective(0), 3);
  EXPECT_TRUE(flight.changed());
  (void)flight.Snapshot(4);
  flight.CompleteStep(5);
  EXPECT_TRUE(flight.changed());
  (void)flight.Snapshot(6);
  EXPECT_FALSE(flight.changed());
}

}  // namespace
}  // namespace rankscope::collector
