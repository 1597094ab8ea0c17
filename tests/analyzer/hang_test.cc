// The diagnosis of runs that did not finish (analyzer/hang.h, docs/metrics.md §9), on
// hand-built rank ends whose answers are known by construction (tests/run_end_builder.h).
#include "analyzer/hang.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "analyzer/analyze.h"
#include "tests/run_end_builder.h"
#include "tests/temp_dir.h"
#include "trace/run_dir.h"
#include "trace/writer.h"

namespace rankscope::analyzer {
namespace {

using rankscope::testing::At;
using rankscope::testing::HangRun;
using rankscope::testing::kHangComm;
using rankscope::testing::kMillisecondNs;
using rankscope::testing::kSecondNs;
using rankscope::testing::RankEndBuilder;
using trace::CollectiveOp;

const CommunicatorEnd* FindComm(const HangReport& report, uint64_t hash) {
  for (const CommunicatorEnd& comm : report.communicators) {
    if (comm.comm_hash == hash) return &comm;
  }
  return nullptr;
}

const CommMemberEnd* FindMember(const CommunicatorEnd& comm, int rank) {
  for (const CommMemberEnd& member : comm.members) {
    if (member.rank == rank) return &member;
  }
  return nullptr;
}

void ExpectContains(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "no\n  " << part << "\nin\n  " << text;
}

TEST(CompactRanks, WritesRunsOfThreeOrMoreAsRanges) {
  EXPECT_EQ(CompactRanks({}), "");
  EXPECT_EQ(CompactRanks({3, 0, 1}), "0, 1, 3");
  EXPECT_EQ(CompactRanks({0, 1, 2, 3, 5, 7, 8, 9, 9}), "0-3, 5, 7-9");
  EXPECT_EQ(RanksPhrase({2}), "rank 2");
  EXPECT_EQ(RanksPhrase({0, 1, 3}), "ranks 0, 1, 3");
  EXPECT_EQ(CommHashText(0xC0FFEE), "0000000000c0ffee");
  EXPECT_EQ(CollectiveTitle("allreduce", "ncclAllReduce"), "AllReduce");
  EXPECT_EQ(CollectiveTitle("unknown", "my_op"), "my_op");
  EXPECT_EQ(CollectiveTitle("unknown", ""), "collective");
}

// Rank 2 never entered AllReduce #5; ranks 0, 1, 3 wait in it (tests/run_end_builder.h).
TEST(DiagnoseRunEnd, NamesTheRankThatNeverEnteredTheCollectiveOthersWaitIn) {
  const HangReport report = DiagnoseRunEnd(HangRun(), 4);
  EXPECT_EQ(report.verdict, RunEndVerdict::kHang);
  EXPECT_STREQ(RunEndVerdictName(report.verdict), "hang");
  ASSERT_EQ(report.communicators.size(), 1u);
  const CommunicatorEnd& comm = report.communicators[0];
  EXPECT_EQ(comm.comm, "3f2a11c09e4b7d21");
  EXPECT_EQ(comm.comm_size, 4);
  ASSERT_TRUE(comm.stalled.has_value());
  const StalledCollective& stalled = *comm.stalled;
  EXPECT_EQ(stalled.sequence, 5u);
  EXPECT_EQ(stalled.op, "allreduce");
  EXPECT_EQ(stalled.bytes, 8u << 20);
  EXPECT_EQ(stalled.waiting, (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(stalled.missing, (std::vector<int>{2}));
  EXPECT_TRUE(stalled.passed.empty());
  EXPECT_TRUE(stalled.no_state_ranks.empty());
  EXPECT_EQ(stalled.since_ns, At(5.0));
  EXPECT_EQ(stalled.waited_ns, 12'400 * kMillisecondNs);  // 17.4 - 5.0 s, rank 0's
  EXPECT_TRUE(comm.mismatches.empty());

  // Each member's position; each wait on the rank's own clock.
  const CommMemberEnd* rank1 = FindMember(comm, 1);
  ASSERT_NE(rank1, nullptr);
  EXPECT_EQ(rank1->state, "waiting");
  EXPECT_EQ(rank1->comm_rank, 1);
  EXPECT_EQ(rank1->last_entered, 5u);
  EXPECT_EQ(rank1->last_completed, 4u);
  EXPECT_EQ(rank1->in_flight_since_ns, At(5.1));
  EXPECT_EQ(rank1->waited_ns, 12'300 * kMillisecondNs);
  const CommMemberEnd* rank2 = FindMember(comm, 2);
  ASSERT_NE(rank2, nullptr);
  EXPECT_EQ(rank2->state, "missing");
  EXPECT_EQ(rank2->last_entered, 4u);
  EXPECT_EQ(rank2->last_completed, 4u);
  EXPECT_FALSE(rank2->waited_ns.has_value());

  // The culprit and what its threads were inside.
  ASSERT_EQ(report.culprits.size(), 1u);
  const Culprit& culprit = report.culprits[0];
  EXPECT_EQ(culprit.rank, 2);
  EXPECT_EQ(culprit.reasons, (std::vector<std::string>{"missing"}));
  ASSERT_EQ(culprit.threads.size(), 2u);
  EXPECT_EQ(culprit.threads[0].thread, "main");
  EXPECT_EQ(culprit.threads[0].ranges, (std::vector<std::string>{"step", "backward"}));
  EXPECT_EQ(culprit.threads[0].innermost_open_ns, 12'500 * kMillisecondNs);
  EXPECT_EQ(culprit.threads[1].thread, "pin_memory");
  EXPECT_EQ(culprit.threads[1].innermost_open_ns, 400 * kMillisecondNs);

  EXPECT_EQ(report.summary,
            "Rank 2 never entered AllReduce #5 on communicator 3f2a11c09e4b7d21 (its last entered was #4); "
            "ranks 0, 1, 3 have waited in it for 12.4 s. "
            "Rank 2 was inside step \u203a backward on thread main (open 12.5 s) and fetch on thread pin_memory "
            "(open 400 ms). Ranks 0-3 ended by signal 15.");
  ASSERT_EQ(report.ranks.size(), 4u);
  EXPECT_TRUE(report.ranks[2].has_state);
  EXPECT_EQ(report.ranks[2].in_flight, 0);
  EXPECT_EQ(report.ranks[0].in_flight, 1);
  EXPECT_EQ(report.ranks[0].completed_collectives, 5u);
}

// The input's order does not matter, nor does a missing world size (ranks up to the highest).
TEST(DiagnoseRunEnd, DoesNotDependOnTheOrderOfTheFiles) {
  std::vector<RankEnd> ranks = HangRun();
  std::swap(ranks[0], ranks[3]);
  const HangReport report = DiagnoseRunEnd(ranks, std::nullopt);
  EXPECT_EQ(report.summary, DiagnoseRunEnd(HangRun(), 4).summary);
  EXPECT_FALSE(report.world_size.has_value());
}

// A hang on the world communicator; two healthy sub-communicators (ranks 0-1, ranks 2-3).
TEST(DiagnoseRunEnd, ReportsEachCommunicatorOnItsOwn) {
  constexpr uint64_t kLeft = 0xA1, kRight = 0xB2;
  std::vector<RankEnd> ranks;
  for (RankEnd& end : HangRun()) {
    RankEndBuilder b(end.rank, 17.4);
    b.Completed(end.rank < 2 ? kLeft : kRight, end.rank % 2, 2, 0, 9, 1 << 20);
    const RankEnd sub = b.Build();
    for (const trace::FlightCollective& c : sub.state.collectives) end.state.collectives.push_back(c);
    ranks.push_back(std::move(end));
  }
  const HangReport report = DiagnoseRunEnd(ranks, 4);
  EXPECT_EQ(report.verdict, RunEndVerdict::kHang);
  ASSERT_EQ(report.communicators.size(), 3u);
  for (const uint64_t healthy : {kLeft, kRight}) {
    const CommunicatorEnd* comm = FindComm(report, healthy);
    ASSERT_NE(comm, nullptr);
    EXPECT_FALSE(comm->stalled.has_value());
    EXPECT_TRUE(comm->mismatches.empty());
    ASSERT_EQ(comm->members.size(), 2u);  // a sub-communicator: the ranks with entries
    for (const CommMemberEnd& member : comm->members) {
      EXPECT_EQ(member.state, "idle");
      EXPECT_EQ(member.last_completed, 9u);
    }
  }
  const CommunicatorEnd* world = FindComm(report, kHangComm);
  ASSERT_NE(world, nullptr);
  ASSERT_TRUE(world->stalled.has_value());
  EXPECT_EQ(world->stalled->missing, (std::vector<int>{2}));
  ASSERT_EQ(report.culprits.size(), 1u);
  EXPECT_EQ(report.culprits[0].rank, 2);
  ExpectContains(report.summary, "Rank 2 never entered AllReduce #5 on communicator 3f2a11c09e4b7d21");
  EXPECT_EQ(report.summary.find("00000000000000a1"), std::string::npos) << report.summary;
}

// All four entered #5, but rank 2 as a Broadcast from root 0.
TEST(DiagnoseRunEnd, FindsRanksThatEnteredTheSameSequenceAsAnotherCollective) {
  std::vector<RankEnd> ranks;
  for (int rank = 0; rank < 4; ++rank) {
    RankEndBuilder b(rank, 17.4);
    b.Completed(kHangComm, rank, 4, 0, 4);
    if (rank == 2) {
      b.Entered(kHangComm, rank, 4, 5, 5.3, CollectiveOp::kBroadcast, "Broadcast", 8 << 20, 0);
    } else {
      b.Entered(kHangComm, rank, 4, 5, 5.0 + 0.1 * rank);
    }
    ranks.push_back(b.Build());
  }
  const HangReport report = DiagnoseRunEnd(ranks, 4);
  EXPECT_EQ(report.verdict, RunEndVerdict::kMismatch);
  ASSERT_EQ(report.communicators.size(), 1u);
  const CommunicatorEnd& comm = report.communicators[0];
  ASSERT_EQ(comm.mismatches.size(), 1u);
  const CollectiveMismatch& mismatch = comm.mismatches[0];
  EXPECT_EQ(mismatch.sequence, 5u);
  EXPECT_EQ(mismatch.fields, (std::vector<std::string>{"op", "root"}));
  ASSERT_EQ(mismatch.versions.size(), 2u);
  EXPECT_EQ(mismatch.versions[0].op, "allreduce");
  EXPECT_EQ(mismatch.versions[0].ranks, (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(mismatch.versions[1].op, "broadcast");
  EXPECT_EQ(mismatch.versions[1].root, 0);
  EXPECT_EQ(mismatch.versions[1].ranks, (std::vector<int>{2}));
  ASSERT_TRUE(comm.stalled.has_value());
  EXPECT_EQ(comm.stalled->waiting, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_TRUE(comm.stalled->missing.empty());
  ASSERT_EQ(report.culprits.size(), 1u);
  EXPECT_EQ(report.culprits[0].rank, 2);
  EXPECT_EQ(report.culprits[0].reasons, (std::vector<std::string>{"mismatch"}));
  EXPECT_EQ(report.summary,
            "Mismatch in op and root at #5 on communicator 3f2a11c09e4b7d21: ranks 0, 1, 3 entered AllReduce of "
            "8.00 MiB; rank 2 entered Broadcast of 8.00 MiB from root 0. Ranks 0-3 have waited in it for 12.4 s. "
            "Rank 2 had no range open. Ranks 0-3 ended by signal 15.");
}

// Ranks 0 and 1 all-reduce 4 MiB at #7, ranks 2 and 3 2 MiB: a tie, so all four are named.
TEST(DiagnoseRunEnd, FindsADifferentSizeAndNamesBothSidesOfATie) {
  std::vector<RankEnd> ranks;
  for (int rank = 0; rank < 4; ++rank) {
    RankEndBuilder b(rank, 9.0);
    b.Entered(kHangComm, rank, 4, 7, 7.0, CollectiveOp::kAllReduce, "AllReduce", rank < 2 ? 4 << 20 : 2 << 20);
    ranks.push_back(b.Build());
  }
  const HangReport report = DiagnoseRunEnd(ranks, 4);
  EXPECT_EQ(report.verdict, RunEndVerdict::kMismatch);
  ASSERT_EQ(report.communicators[0].mismatches.size(), 1u);
  const CollectiveMismatch& mismatch = report.communicators[0].mismatches[0];
  EXPECT_EQ(mismatch.fields, (std::vector<std::string>{"bytes"}));
  EXPECT_EQ(mismatch.versions[0].ranks, (std::vector<int>{0, 1}));
  EXPECT_EQ(mismatch.versions[1].ranks, (std::vector<int>{2, 3}));
  ASSERT_EQ(report.culprits.size(), 4u);
  ExpectContains(report.summary, "Mismatch in bytes at #7 on communicator 3f2a11c09e4b7d21: ranks 0, 1 entered "
                                 "AllReduce of 4.00 MiB; ranks 2, 3 entered AllReduce of 2.00 MiB.");
}

// With no op recorded, names are compared without case: "my_sync" and "MY_SYNC" agree,
// "my_sync" and "other_sync" do not.
TEST(DiagnoseRunEnd, ComparesNamesWithoutCaseWhenTheOpIsUnknown) {
  auto run = [](const std::string& rank1_name) {
    std::vector<RankEnd> ranks;
    for (int rank = 0; rank < 2; ++rank) {
      RankEndBuilder b(rank, 3.0);
      b.Entered(0xE1, rank, 2, 0, 1.0, CollectiveOp::kUnknown, rank == 0 ? "my_sync" : rank1_name, 0);
      ranks.push_back(b.Build());
    }
    return DiagnoseRunEnd(ranks, 2);
  };
  const HangReport same = run("MY_SYNC");
  EXPECT_TRUE(same.communicators[0].mismatches.empty());
  EXPECT_EQ(same.verdict, RunEndVerdict::kUnfinished);  // all entered, none completed
  ExpectContains(same.summary, "Ranks 0, 1 have waited 2.00 s in my_sync #0 on communicator 00000000000000e1; "
                               "every member entered it and none completed it.");
  const HangReport different = run("other_sync");
  ASSERT_EQ(different.communicators[0].mismatches.size(), 1u);
  EXPECT_EQ(different.communicators[0].mismatches[0].fields, (std::vector<std::string>{"op"}));
  EXPECT_EQ(different.verdict, RunEndVerdict::kMismatch);
}

// Rank 0 sent #0..#3 to rank 1, which received #0..#2 and then went into its optimizer:
// rank 0's Send #3 waits for a receive that was never posted.
TEST(DiagnoseRunEnd, FindsASendWhoseReceiveWasNeverPosted) {
  constexpr uint64_t kPair = 0xEE;
  RankEndBuilder sender(0, 10.0);
  RankEndBuilder receiver(1, 10.0);
  for (uint64_t sequence = 0; sequence < 3; ++sequence) {
    const double start = 1.0 + static_cast<double>(sequence);
    sender.PointToPoint(CollectiveOp::kSend, kPair, 0, 2, 1, sequence, start, false);
    receiver.PointToPoint(CollectiveOp::kRecv, kPair, 1, 2, 0, sequence, start, false);
  }
  sender.PointToPoint(CollectiveOp::kSend, kPair, 0, 2, 1, 3, 7.0, true);
  const trace::LaneId main = receiver.Thread("main");
  receiver.Open(main, 0, 6.0, "step").Open(main, 1, 6.5, "optimizer");
  const HangReport report = DiagnoseRunEnd({sender.Build(), receiver.Build()}, 2);

  EXPECT_EQ(report.verdict, RunEndVerdict::kHang);
  ASSERT_EQ(report.communicators.size(), 1u);
  const CommunicatorEnd& comm = report.communicators[0];
  EXPECT_FALSE(comm.stalled.has_value());  // no collective: only sends and receives
  ASSERT_EQ(comm.peer_streams.size(), 2u);
  const PeerStream& send = comm.peer_streams[0];
  EXPECT_EQ(send.rank, 0);
  EXPECT_EQ(send.direction, "send");
  EXPECT_EQ(send.peer_rank, 1);
  EXPECT_EQ(send.last_entered, 3u);
  EXPECT_EQ(send.last_completed, 2u);
  EXPECT_EQ(send.in_flight_sequence, 3u);
  EXPECT_EQ(send.waited_ns, 3 * kSecondNs);
  EXPECT_EQ(send.peer_last_entered, 2u);
  EXPECT_TRUE(send.unmatched);
  const PeerStream& recv = comm.peer_streams[1];
  EXPECT_EQ(recv.direction, "recv");
  EXPECT_EQ(recv.last_completed, 2u);
  EXPECT_FALSE(recv.in_flight_sequence.has_value());
  EXPECT_FALSE(recv.unmatched);
  ASSERT_EQ(report.culprits.size(), 1u);
  EXPECT_EQ(report.culprits[0].rank, 1);
  EXPECT_EQ(report.culprits[0].reasons, (std::vector<std::string>{"unmatched p2p"}));
  EXPECT_EQ(report.summary,
            "Rank 0 has waited 3.00 s in Send #3 to rank 1 on communicator 00000000000000ee; rank 1 never entered "
            "the matching receive (its last receive from rank 0 was #2). Rank 1 was inside step \u203a optimizer "
            "on thread main (open 3.50 s). Ranks 0, 1 ended by signal 15.");
}

// And the other way round: rank 1 waits to receive #0 from rank 0, which has sent nothing
// (but received from rank 1, which tells its communicator rank).
TEST(DiagnoseRunEnd, FindsAReceiveWhoseSendWasNeverEntered) {
  constexpr uint64_t kPair = 0xEF;
  RankEndBuilder waiting(1, 4.0);
  waiting.PointToPoint(CollectiveOp::kRecv, kPair, 1, 2, 0, 0, 1.5, true);
  RankEndBuilder other(0, 4.0);
  other.PointToPoint(CollectiveOp::kRecv, kPair, 0, 2, 1, 0, 1.0, true);
  waiting.PointToPoint(CollectiveOp::kSend, kPair, 1, 2, 0, 0, 1.0, false);
  // Rank 0's receive from rank 1 matched rank 1's send (#0 entered): it is not a finding.
  const HangReport report = DiagnoseRunEnd({other.Build(), waiting.Build()}, 2);
  EXPECT_EQ(report.verdict, RunEndVerdict::kHang);
  ASSERT_EQ(report.culprits.size(), 1u);
  EXPECT_EQ(report.culprits[0].rank, 0);
  ExpectContains(report.summary, "Rank 1 has waited 2.50 s in Recv #0 from rank 0 on communicator 00000000000000ef; "
                                 "rank 0 never entered the matching send (it entered no send to rank 1).");
  EXPECT_EQ(report.summary.find("Rank 0 has waited"), std::string::npos) << report.summary;
}

// Rank 1 was killed (its file never closed) after its last collective; nobody waits.
TEST(DiagnoseRunEnd, SaysWhichRanksWereKilledWhenNobodyWaits) {
  std::vector<RankEnd> ranks;
  for (int rank = 0; rank < 3; ++rank) {
    RankEndBuilder b(rank, 8.0);
    b.Completed(kHangComm, rank, 3, 0, 5);
    if (rank == 1) {
      b.Ended(false, "");
      const trace::LaneId main = b.Thread("main");
      b.Open(main, 0, 6.0, "step").Open(main, 1, 6.0, "forward");
    }
    ranks.push_back(b.Build());
  }
  const HangReport report = DiagnoseRunEnd(ranks, 3);
  EXPECT_EQ(report.verdict, RunEndVerdict::kKilled);
  ASSERT_TRUE(report.communicators.size() == 1u);
  EXPECT_FALSE(report.communicators[0].stalled.has_value());
  ASSERT_EQ(report.culprits.size(), 1u);
  EXPECT_EQ(report.culprits[0].rank, 1);
  EXPECT_EQ(report.culprits[0].reasons, (std::vector<std::string>{"not closed"}));
  EXPECT_FALSE(report.ranks[1].closed_cleanly);
  EXPECT_EQ(report.summary,
            "The file of rank 1 was never closed (killed or crashed), and no rank waits on another. Rank 1 was "
            "inside step \u203a forward on thread main (open 2.00 s). Ranks 0, 2 ended by signal 15.");

  // The whole job killed: killed, but no rank is singled out.
  for (RankEnd& end : ranks) {
    end.closed_cleanly = false;
    end.ended_by = "";
  }
  const HangReport all = DiagnoseRunEnd(ranks, 3);
  EXPECT_EQ(all.verdict, RunEndVerdict::kKilled);
  EXPECT_TRUE(all.culprits.empty());
  ExpectContains(all.summary, "The files of ranks 0-2 were never closed (killed or crashed), and no rank waits");
}

// Rank 2's file is open. Read while the run still records, that file is live, not a killed
// rank, and the paragraph says that what is in flight may yet complete.
TEST(DiagnoseRunEnd, ALiveRunsOpenFilesAreNotKilledRanks) {
  std::vector<RankEnd> ranks = HangRun();
  ranks[2].closed_cleanly = false;
  ranks[2].ended_by = "";
  const HangReport live = DiagnoseRunEnd(ranks, 4, /*live=*/true);
  EXPECT_TRUE(live.live);
  EXPECT_EQ(live.verdict, RunEndVerdict::kHang);
  ASSERT_EQ(live.culprits.size(), 1u);
  EXPECT_EQ(live.culprits[0].reasons, (std::vector<std::string>{"missing"}));
  EXPECT_EQ(live.summary.find("never closed"), std::string::npos) << live.summary;
  ExpectContains(live.summary, "The run was still recording when read: this is what its files had committed, and "
                               "what is in flight may yet complete. Rank 2 never entered AllReduce #5");
  // The same files after the run ended: rank 2's unclosed file marks it killed.
  const HangReport ended = DiagnoseRunEnd(ranks, 4);
  EXPECT_FALSE(ended.live);
  EXPECT_EQ(ended.culprits[0].reasons, (std::vector<std::string>{"missing", "not closed"}));
  ExpectContains(ended.summary, "The file of rank 2 was never closed (killed or crashed).");
}

// A rank killed inside the collective the others wait in is the culprit of a hang.
TEST(DiagnoseRunEnd, ARankKilledWhileOthersWaitIsTheCulprit) {
  std::vector<RankEnd> ranks;
  for (int rank = 0; rank < 3; ++rank) {
    RankEndBuilder b(rank, rank == 2 ? 6.0 : 20.0);
    b.Completed(kHangComm, rank, 3, 0, 4).Entered(kHangComm, rank, 3, 5, 5.0);
    if (rank == 2) b.Ended(false, "");
    ranks.push_back(b.Build());
  }
  const HangReport report = DiagnoseRunEnd(ranks, 3);
  EXPECT_EQ(report.verdict, RunEndVerdict::kHang);
  ASSERT_EQ(report.culprits.size(), 1u);
  EXPECT_EQ(report.culprits[0].rank, 2);
  EXPECT_EQ(report.culprits[0].reasons, (std::vector<std::string>{"not closed"}));
  ExpectContains(report.summary, "Ranks 0-2 have waited 15.0 s in AllReduce #5 on communicator 3f2a11c09e4b7d21; "
                                 "every member entered it and none completed it. The file of rank 2 was never "
                                 "closed (killed or crashed).");
}

TEST(DiagnoseRunEnd, ARunThatFinishedHasNoFinding) {
  std::vector<RankEnd> ranks;
  for (int rank = 0; rank < 3; ++rank) {
    RankEndBuilder b(rank, 8.0);
    b.Completed(kHangComm, rank, 3, 0, 5).Ended(true, rank == 0 ? "exec" : "exit");
    const trace::LaneId main = b.Thread("main");
    b.Open(main, 0, 7.0, "never popped");  // an open range at exit is no finding
    ranks.push_back(b.Build());
  }
  // A file closed by a writer that does not say how (an importer), without state.
  ranks.push_back(RankEndBuilder(3, 0).Ended(true, "").NoState().Build());
  const HangReport report = DiagnoseRunEnd(ranks, 4);
  EXPECT_EQ(report.verdict, RunEndVerdict::kFinished);
  EXPECT_TRUE(report.culprits.empty());
  EXPECT_EQ(report.summary, "The run finished: every rank closed its file and nothing was in flight.");

  // The same files, one ended by SIGTERM: unfinished, with nothing to blame.
  ranks[1].ended_by = "signal 15";
  const HangReport stopped = DiagnoseRunEnd(ranks, 4);
  EXPECT_EQ(stopped.verdict, RunEndVerdict::kUnfinished);
  EXPECT_TRUE(stopped.culprits.empty());
  EXPECT_EQ(stopped.summary, "No rank waits on another. Rank 1 ended by signal 15. The file of rank 3 holds no "
                             "in-flight state.");
}

// Rank 2's file is missing: its part is unknown, and said so rather than guessed.
TEST(DiagnoseRunEnd, SaysWhatIsUnknownWhenARankFileIsMissing) {
  std::vector<RankEnd> ranks = HangRun();
  ranks.erase(ranks.begin() + 2);
  const HangReport report = DiagnoseRunEnd(ranks, 4);
  EXPECT_EQ(report.verdict, RunEndVerdict::kHang);
  ASSERT_EQ(report.ranks.size(), 4u);
  EXPECT_FALSE(report.ranks[2].has_file);
  const CommunicatorEnd& comm = report.communicators[0];
  ASSERT_TRUE(comm.stalled.has_value());
  EXPECT_EQ(comm.stalled->waiting, (std::vector<int>{0, 1, 3}));
  EXPECT_TRUE(comm.stalled->missing.empty());
  EXPECT_EQ(comm.stalled->no_state_ranks, (std::vector<int>{2}));
  const CommMemberEnd* rank2 = FindMember(comm, 2);
  ASSERT_NE(rank2, nullptr);
  EXPECT_EQ(rank2->state, "no state");
  EXPECT_EQ(rank2->comm_rank, -1);
  EXPECT_TRUE(report.culprits.empty());
  EXPECT_EQ(report.summary,
            "Ranks 0, 1, 3 have waited 12.4 s in AllReduce #5 on communicator 3f2a11c09e4b7d21; whether the others "
            "entered it is unknown. Rank 2 left no file. Ranks 0, 1, 3 ended by signal 15.");

  // A file without state says that instead.
  ranks.insert(ranks.begin() + 2, RankEndBuilder(2, 0).NoState().Build());
  ExpectContains(DiagnoseRunEnd(ranks, 4).summary, "The file of rank 2 holds no in-flight state.");
}

// A communicator of 3 in a world of 4: communicator rank 2 is in no file's entries.
TEST(DiagnoseRunEnd, SaysWhichCommunicatorRanksNoFileHolds) {
  constexpr uint64_t kSub = 0x5B;
  std::vector<RankEnd> ranks;
  for (int rank = 0; rank < 4; ++rank) {
    RankEndBuilder b(rank, 10.0);
    if (rank < 2) b.Completed(kSub, rank, 3, 0, 1).Entered(kSub, rank, 3, 2, 4.0);
    ranks.push_back(b.Build());
  }
  const HangReport report = DiagnoseRunEnd(ranks, 4);
  EXPECT_EQ(report.verdict, RunEndVerdict::kHang);
  const CommunicatorEnd& comm = report.communicators[0];
  ASSERT_EQ(comm.members.size(), 3u);
  EXPECT_FALSE(comm.members[2].rank.has_value());
  EXPECT_EQ(comm.members[2].comm_rank, 2);
  EXPECT_EQ(comm.members[2].state, "no state");
  EXPECT_EQ(comm.stalled->no_state_comm_ranks, (std::vector<int>{2}));
  ExpectContains(report.summary, "whether the others entered it is unknown. No file holds an entry for "
                                 "communicator rank 2.");
}

// A source that does not know the communicator's size: the ranks seen all wait, but a
// member that entered nothing would not show, so "every member entered" is not claimed.
TEST(DiagnoseRunEnd, DoesNotClaimEveryMemberEnteredWhenTheSizeIsUnknown) {
  std::vector<RankEnd> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    RankEndBuilder b(rank, 5.0);
    b.Entered(kHangComm, rank, /*comm_size=*/0, 0, 1.0);
    ranks.push_back(b.Build());
  }
  const HangReport report = DiagnoseRunEnd(ranks, 2);
  EXPECT_EQ(report.verdict, RunEndVerdict::kHang);
  EXPECT_EQ(report.communicators[0].comm_size, 0);
  ExpectContains(report.summary, "Ranks 0, 1 have waited 4.00 s in AllReduce #0 on communicator 3f2a11c09e4b7d21; "
                                 "whether the others entered it is unknown. The communicator's size is unknown: a "
                                 "member that entered none of its collectives does not show.");
}

// Rank 2 hung before its first collective: with a communicator as large as the world, it is
// a member that never entered one.
TEST(DiagnoseRunEnd, ARankThatEnteredNothingOnTheWorldCommunicatorIsMissing) {
  std::vector<RankEnd> ranks;
  for (int rank = 0; rank < 3; ++rank) {
    RankEndBuilder b(rank, 10.0);
    if (rank != 2) b.Entered(kHangComm, rank, 3, 0, 1.0);
    ranks.push_back(b.Build());
  }
  const HangReport report = DiagnoseRunEnd(ranks, 3);
  EXPECT_EQ(report.verdict, RunEndVerdict::kHang);
  EXPECT_EQ(report.communicators[0].stalled->missing, (std::vector<int>{2}));
  ExpectContains(report.summary, "Rank 2 never entered AllReduce #0 on communicator 3f2a11c09e4b7d21 (it entered "
                                 "none on it); ranks 0, 1 have waited in it for 9.00 s.");
}

// Rank 0 still has #3 in flight (say its completion was never recorded) while the others
// completed it and went on: it waits alone, and the paragraph says the others completed it.
TEST(DiagnoseRunEnd, SaysWhoCompletedTheCollectiveOneRankStillWaitsIn) {
  std::vector<RankEnd> ranks;
  for (int rank = 0; rank < 3; ++rank) {
    RankEndBuilder b(rank, 10.0);
    if (rank == 0) {
      b.Completed(kHangComm, rank, 3, 0, 2).Entered(kHangComm, rank, 3, 3, 3.0);
    } else {
      b.Completed(kHangComm, rank, 3, 0, 6);
    }
    ranks.push_back(b.Build());
  }
  const HangReport report = DiagnoseRunEnd(ranks, 3);
  EXPECT_EQ(report.verdict, RunEndVerdict::kUnfinished);
  const StalledCollective& stalled = *report.communicators[0].stalled;
  EXPECT_EQ(stalled.waiting, (std::vector<int>{0}));
  EXPECT_EQ(stalled.passed, (std::vector<int>{1, 2}));
  EXPECT_TRUE(report.culprits.empty());
  ExpectContains(report.summary, "Rank 0 has waited 7.00 s in AllReduce #3 on communicator 3f2a11c09e4b7d21; "
                                 "ranks 1, 2 completed it.");
}

// 64 ranks, 32 of them never entered #0: one sentence names them all, and the paragraph
// describes only the first three culprits' threads.
TEST(DiagnoseRunEnd, KeepsTheParagraphShortOnALargeJob) {
  std::vector<RankEnd> ranks;
  for (int rank = 0; rank < 64; ++rank) {
    RankEndBuilder b(rank, 10.0);
    if (rank < 32) {
      b.Entered(kHangComm, rank, 64, 0, 1.0);
    } else {
      const trace::LaneId main = b.Thread("main");
      b.Open(main, 0, 2.0, "load_batch");
    }
    ranks.push_back(b.Build());
  }
  const HangReport report = DiagnoseRunEnd(ranks, 64);
  EXPECT_EQ(report.culprits.size(), 32u);
  EXPECT_EQ(report.summary,
            "Ranks 32-63 never entered AllReduce #0 on communicator 3f2a11c09e4b7d21 (they entered none on it); "
            "ranks 0-31 have waited in it for 9.00 s. Rank 32 was inside load_batch on thread main (open 8.00 s). "
            "Rank 33 was inside load_batch on thread main (open 8.00 s). Rank 34 was inside load_batch on thread "
            "main (open 8.00 s). What the other 29 culprit(s) were inside is in the report. Ranks 0-63 ended by "
            "signal 15.");
}

// ---- From rank files on disk ------------------------------------------------------------

// Writes `end` as rank file `end.rank` of run "hung" in `dir`: its thread lanes (named as in
// `end`, so lane ids agree), one kernel (so AnalyzeRun has something to measure), the
// in-flight state and meta collector.ended_by. Not `closed`: written and flushed by a child
// process that exits without closing, as a killed rank leaves it.
void WriteRankEnd(const std::filesystem::path& dir, const RankEnd& end, int world_size, bool closed) {
  auto write = [&]() -> bool {
    trace::RankIdentity who;
    who.run_id = "hung";
    who.rank = end.rank;
    who.world_size = world_size;
    who.host = end.host;
    who.pid = end.pid;
    auto created = trace::TraceWriter::Create(dir / trace::RankFileName(end.rank), who);
    if (!created.ok()) return false;
    trace::TraceWriter& writer = **created;
    for (size_t i = 0; i < end.lane_names.size(); ++i) {
      trace::Lane thread;
      thread.kind = trace::LaneKind::kCpuThread;
      thread.pid = end.pid;
      thread.tid = end.pid + static_cast<int64_t>(i);
      thread.name = end.lane_names[i];
      writer.AddLane(thread);
    }
    trace::Lane stream;
    stream.kind = trace::LaneKind::kGpuStream;
    stream.device = 0;
    stream.stream = 7;
    stream.pid = end.pid;
    trace::EventTables events;
    trace::KernelEvent kernel;
    kernel.lane = writer.AddLane(stream);
    kernel.name = writer.Intern("gemm");
    kernel.start_ns = At(1.0);
    kernel.end_ns = At(1.5);
    events.kernels.push_back(kernel);
    if (!writer.Submit(std::move(events))) return false;
    if (!end.ended_by.empty()) writer.SetMeta("collector.ended_by", end.ended_by);
    writer.ReplaceInFlight(end.state);
    if (closed) return writer.Close().ok();
    if (!writer.Flush(std::chrono::seconds(10)).ok()) return false;
    [[maybe_unused]] trace::TraceWriter* leaked = created->release();  // never closed, as after a kill
    return true;
  };
  if (closed) {
    ASSERT_TRUE(write());
    return;
  }
  const pid_t child = ::fork();
  if (child == 0) ::_exit(write() ? 0 : 1);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

// The hang of tests/run_end_builder.h from files, rank 2 killed (its file never closed):
// read from meta, lanes and in-flight tables, and the same in AnalyzeRun's report.
TEST(DiagnoseRun, ReadsTheRankFilesOfAHungRun) {
  rankscope::testing::TempDir dir;
  for (RankEnd end : HangRun()) {
    const bool killed = end.rank == 2;
    if (killed) end.ended_by = "";
    WriteRankEnd(dir.path(), end, 4, !killed);
  }
  Result<trace::Run> run = trace::OpenRun(dir.path());
  ASSERT_TRUE(run.ok()) << run.status().message();
  Result<std::vector<RankEnd>> ends = ReadRunEnd(*run);
  ASSERT_TRUE(ends.ok()) << ends.status().message();
  ASSERT_EQ(ends->size(), 4u);
  EXPECT_FALSE((*ends)[2].closed_cleanly);
  EXPECT_EQ((*ends)[2].ended_by, "");
  EXPECT_EQ((*ends)[2].lane_names, (std::vector<std::string>{"main", "pin_memory", ""}));
  EXPECT_EQ((*ends)[0].ended_by, "signal 15");

  Result<std::optional<HangReport>> diagnosed = DiagnoseRun(dir.path());
  ASSERT_TRUE(diagnosed.ok()) << diagnosed.status().message();
  ASSERT_TRUE(diagnosed->has_value());
  const HangReport& report = **diagnosed;
  EXPECT_EQ(report.verdict, RunEndVerdict::kHang);
  EXPECT_EQ(report.world_size, 4);
  ASSERT_EQ(report.culprits.size(), 1u);
  EXPECT_EQ(report.culprits[0].reasons, (std::vector<std::string>{"missing", "not closed"}));
  EXPECT_EQ(report.summary,
            "Rank 2 never entered AllReduce #5 on communicator 3f2a11c09e4b7d21 (its last entered was #4); "
            "ranks 0, 1, 3 have waited in it for 12.4 s. The file of rank 2 was never closed (killed or crashed). "
            "Rank 2 was inside step \u203a backward on thread main (open 12.5 s) and fetch on thread pin_memory "
            "(open 400 ms). Ranks 0, 1, 3 ended by signal 15.");

  AnalyzeOptions options;
  options.threads = 1;
  Result<Report> analyzed = AnalyzeRun(dir.path(), options);
  ASSERT_TRUE(analyzed.ok()) << analyzed.status().message();
  ASSERT_TRUE(analyzed->did_not_finish.has_value());
  EXPECT_EQ(analyzed->did_not_finish->summary, report.summary);
}

TEST(DiagnoseRun, SaysNothingOfARunThatFinished) {
  rankscope::testing::TempDir dir;
  for (int rank = 0; rank < 2; ++rank) {
    RankEndBuilder b(rank, 8.0);
    b.Completed(kHangComm, rank, 2, 0, 5).Ended(true, "exit");
    WriteRankEnd(dir.path(), b.Build(), 2, true);
  }
  Result<std::optional<HangReport>> diagnosed = DiagnoseRun(dir.path());
  ASSERT_TRUE(diagnosed.ok()) << diagnosed.status().message();
  EXPECT_FALSE(diagnosed->has_value());
  Result<Report> analyzed = AnalyzeRun(dir.path(), AnalyzeOptions{});
  ASSERT_TRUE(analyzed.ok()) << analyzed.status().message();
  EXPECT_FALSE(analyzed->did_not_finish.has_value());

  EXPECT_FALSE(DiagnoseRun(dir / "no-such-run").ok());
}

}  // namespace
}  // namespace rankscope::analyzer
