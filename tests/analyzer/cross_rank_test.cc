// The stages of AnalyzeCrossRank, each against docs/metrics.md §4 on hand-made collectives.
#include "analyzer/cross_rank.h"

#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "analyzer/cross_rank_stages.h"

namespace rankscope::analyzer {
namespace {

using trace::CollectiveOp;

// One rank's collectives, owning what RankCollectives points at.
struct RankData {
  int rank = 0;
  std::string host = "node-a";
  CollectiveSource source = CollectiveSource::kPlugin;
  std::vector<StepRange> steps;
  std::vector<std::string> kinds = {"AllReduce"};
  std::vector<CollectiveRecord> records;
};

// A plugin record of kind 0 on communicator `comm`.
CollectiveRecord Record(uint64_t sequence, int64_t start_ns, int64_t end_ns, uint64_t comm = 0xC0,
                        uint64_t bytes = 0, CollectiveOp op = CollectiveOp::kAllReduce) {
  CollectiveRecord record;
  record.op = op;
  record.comm_hash = comm;
  record.sequence = sequence;
  record.start_ns = start_ns;
  record.end_ns = end_ns;
  record.bytes = bytes;
  return record;
}

class CrossRankStages : public ::testing::Test {
 protected:
  RankData& AddRank(int rank, std::string host = "node-a") {
    RankData& data = ranks_.emplace_back();
    data.rank = rank;
    data.host = std::move(host);
    return data;
  }
  std::vector<RankCollectives> Inputs() const {
    std::vector<RankCollectives> inputs;
    for (const RankData& data : ranks_) {
      inputs.push_back({data.rank, data.host, data.source, &data.steps, &data.kinds, &data.records});
    }
    return inputs;
  }

  std::deque<RankData> ranks_;  // stable addresses
};

// ---- matching ----

TEST_F(CrossRankStages, MatchesByCommunicatorAndSequenceWithPluginIds) {
  RankData& r0 = AddRank(0);
  RankData& r1 = AddRank(1);
  r0.records = {Record(1, 0, 10), Record(2, 20, 30), Record(3, 40, 50)};
  r1.records = {Record(2, 21, 31), Record(1, 1, 11)};  // no sequence 3; out of order
  const std::vector<RankCollectives> inputs = Inputs();
  const CollectiveMatch match = MatchCollectives(inputs);
  EXPECT_EQ(match.collective_source, "NCCL profiler plugin");
  ASSERT_EQ(match.matched.size(), 2u);
  EXPECT_EQ(match.unmatched, 1);
  for (size_t i = 0; i < 2; ++i) {
    const CollectiveInstance& instance = match.matched[i];
    EXPECT_EQ(instance.kind, "AllReduce");
    ASSERT_EQ(instance.arrivals.size(), 2u);
    EXPECT_EQ(instance.arrivals[0].rank_index, 0u);
    EXPECT_EQ(instance.arrivals[1].rank_index, 1u);
    EXPECT_EQ(instance.arrivals[0].record->sequence, i + 1);
    EXPECT_EQ(instance.arrivals[1].record->sequence, i + 1);
  }
  ASSERT_EQ(match.warnings.size(), 1u);
  EXPECT_NE(match.warnings[0].find("1 collective(s) were not seen on every rank"), std::string::npos);
}

TEST_F(CrossRankStages, CommunicatorMembersAreTheRanksThatRecordedIt) {
  // Communicator A on ranks 0 and 1, B on ranks 1 and 2: each instance needs only its members.
  AddRank(0).records = {Record(1, 0, 10, 0xA)};
  AddRank(1).records = {Record(1, 0, 10, 0xA), Record(1, 0, 10, 0xB), Record(1, 5, 10, 0xB)};  // repeated id
  AddRank(2).records = {Record(1, 0, 10, 0xB)};
  AddRank(3).records = {Record(7, 0, 10, 0xD)};  // alone on its communicator: nothing to match
  const std::vector<RankCollectives> inputs = Inputs();
  const CollectiveMatch match = MatchCollectives(inputs);
  ASSERT_EQ(match.matched.size(), 2u);
  EXPECT_EQ(match.unmatched, 0);
  EXPECT_TRUE(match.warnings.empty());
  ASSERT_EQ(match.matched[1].arrivals.size(), 2u);  // rank 1 once, though it repeated the id
  EXPECT_EQ(match.matched[1].arrivals[0].rank_index, 1u);
  EXPECT_EQ(match.matched[1].arrivals[0].record->comm_hash, 0xBu);
  EXPECT_EQ(match.matched[1].arrivals[1].rank_index, 2u);
}

TEST_F(CrossRankStages, InterleavedCommunicatorsMatchInIdentityOrderKeepingARepeatsEarliestRecord) {
  // Two communicators alternating in time on three ranks (so no rank's records are in
  // identity order), 40 of each; rank 2 records sequence 7 of communicator B twice.
  for (int rank = 0; rank < 3; ++rank) {
    RankData& data = AddRank(rank);
    for (uint64_t sequence = 0; sequence < 40; ++sequence) {
      const auto t = static_cast<int64_t>(sequence) * 100 + rank;
      data.records.push_back(Record(sequence, t, t + 10, 0xB));
      data.records.push_back(Record(sequence, t + 50, t + 60, 0xA));
      if (rank == 2 && sequence == 7) data.records.push_back(Record(sequence, t + 70, t + 80, 0xB));
    }
  }
  const std::vector<RankCollectives> inputs = Inputs();
  const CollectiveMatch match = MatchCollectives(inputs);
  ASSERT_EQ(match.matched.size(), 80u);
  EXPECT_EQ(match.unmatched, 0);
  for (size_t i = 0; i < match.matched.size(); ++i) {
    const CollectiveInstance& instance = match.matched[i];
    ASSERT_EQ(instance.arrivals.size(), 3u) << i;
    for (size_t r = 0; r < 3; ++r) {
      EXPECT_EQ(instance.arrivals[r].rank_index, r);
      EXPECT_EQ(instance.arrivals[r].record->comm_hash, i < 40 ? 0xAu : 0xBu) << i;
      EXPECT_EQ(instance.arrivals[r].record->sequence, i % 40) << i;
    }
  }
  EXPECT_EQ(match.matched[40 + 7].arrivals[2].record->start_ns, 7 * 100 + 2);  // the earlier of the two
}

TEST_F(CrossRankStages, MixedSourcesMatchByNameAndOrder) {
  RankData& r0 = AddRank(0);
  RankData& r1 = AddRank(1);
  r1.source = CollectiveSource::kKernels;
  r0.kinds = {"AllReduce", "Broadcast"};
  r1.kinds = {"Broadcast", "AllReduce"};
  // Rank 0's sequence numbers are taken as the n-th of each name, as rank 1's are.
  r0.records = {Record(0, 0, 10, 0xC0), Record(0, 20, 30, 0xC0)};
  r0.records[1].kind = 1;
  r1.records = {Record(0, 1, 11, 0), Record(0, 21, 31, 0), Record(1, 41, 51, 0)};
  r1.records[0].kind = 1;  // AllReduce #0
  r1.records[1].kind = 0;  // Broadcast #0
  r1.records[2].kind = 1;  // AllReduce #1: unmatched
  const std::vector<RankCollectives> inputs = Inputs();
  const CollectiveMatch match = MatchCollectives(inputs);
  EXPECT_EQ(match.collective_source, "mixed");
  ASSERT_EQ(match.matched.size(), 2u);
  EXPECT_EQ(match.unmatched, 1);
  std::set<std::string> kinds;
  for (const CollectiveInstance& instance : match.matched) kinds.insert(instance.kind);
  EXPECT_EQ(kinds, (std::set<std::string>{"AllReduce", "Broadcast"}));
  ASSERT_EQ(match.warnings.size(), 2u);
  EXPECT_EQ(match.warnings[0],
            "ranks recorded collectives differently (NCCL profiler plugin, NCCL kernels); matching by name and order");
}

// ---- clock alignment ----

TEST_F(CrossRankStages, TwoHostsWithAKnownSkewAreAlignedOnCollectiveEnds) {
  // Host b's clock runs 7'000'123 ns ahead: its times must get -7'000'123 added.
  constexpr int64_t kSkew = 7'000'123;
  AddRank(0, "a");
  AddRank(1, "a");
  AddRank(2, "b");
  AddRank(3, "b");
  for (uint64_t s = 0; s < 5; ++s) {
    const int64_t end = 1'000'000 * static_cast<int64_t>(s + 1);  // every rank ends together
    for (size_t r = 0; r < 4; ++r) {
      const int64_t clock = ranks_[r].host == "b" ? kSkew : 0;
      ranks_[r].records.push_back(Record(s, end - 500 - 100 * static_cast<int64_t>(r) + clock, end + clock));
    }
  }
  const std::vector<RankCollectives> inputs = Inputs();
  const CollectiveMatch match = MatchCollectives(inputs);
  ASSERT_EQ(match.matched.size(), 5u);
  const HostClocks clocks = AlignHostClocks(inputs, match.matched);
  ASSERT_EQ(clocks.clock.hosts.size(), 2u);
  EXPECT_EQ(clocks.clock.hosts[0].host, "a");
  EXPECT_EQ(clocks.clock.hosts[0].ranks, (std::vector<int>{0, 1}));
  EXPECT_EQ(clocks.clock.hosts[0].offset_ns, 0);
  EXPECT_EQ(clocks.clock.hosts[1].host, "b");
  EXPECT_EQ(clocks.clock.hosts[1].ranks, (std::vector<int>{2, 3}));
  EXPECT_EQ(clocks.clock.hosts[1].offset_ns, -kSkew);
  EXPECT_EQ(clocks.clock.hosts[1].collectives_used, 5);
  EXPECT_TRUE(clocks.clock.applied);
  EXPECT_EQ(clocks.host_of, (std::vector<size_t>{0, 0, 1, 1}));
  EXPECT_EQ(clocks.Aligned(3, 1'000'000 + kSkew), 1'000'000);
  // Aligned, every instance ends at one instant: no residual spread.
  ASSERT_TRUE(clocks.clock.residual_ns.has_value());
  EXPECT_EQ(clocks.clock.residual_ns->count, 5);
  EXPECT_EQ(clocks.clock.residual_ns->max, 0);
  EXPECT_TRUE(clocks.warnings.empty());
}

TEST_F(CrossRankStages, OneHostGetsNoCorrectionAndItsResidualIsTheEndSpread) {
  AddRank(0, "only").records = {Record(1, 0, 1'000), Record(2, 2'000, 3'000), Record(3, 4'000, 5'000)};
  AddRank(1, "only").records = {Record(1, 0, 1'040), Record(2, 2'000, 2'990), Record(3, 4'000, 5'000)};
  const std::vector<RankCollectives> inputs = Inputs();
  const CollectiveMatch match = MatchCollectives(inputs);
  const HostClocks clocks = AlignHostClocks(inputs, match.matched);
  ASSERT_EQ(clocks.clock.hosts.size(), 1u);
  EXPECT_EQ(clocks.clock.hosts[0].offset_ns, 0);
  EXPECT_EQ(clocks.clock.hosts[0].collectives_used, 0);
  EXPECT_FALSE(clocks.clock.applied);
  EXPECT_EQ(clocks.Aligned(1, 1'040), 1'040);
  // Spreads 40, 10, 0.
  ASSERT_TRUE(clocks.clock.residual_ns.has_value());
  EXPECT_EQ(clocks.clock.residual_ns->count, 3);
  EXPECT_DOUBLE_EQ(clocks.clock.residual_ns->median, 10);
  EXPECT_DOUBLE_EQ(clocks.clock.residual_ns->max, 40);
  EXPECT_DOUBLE_EQ(clocks.clock.residual_ns->min, 0);
}

TEST_F(CrossRankStages, HostSharingNoMatchedCollectiveIsLeftUnalignedWithAWarning) {
  // Hosts a and b share communicator 0xAB; host c's two ranks talk only to each other.
  AddRank(0, "a").records = {Record(1, 0, 1'000, 0xAB)};
  AddRank(1, "b").records = {Record(1, 500, 1'500, 0xAB)};
  AddRank(2, "c").records = {Record(1, 9'000, 10'000, 0xCC)};
  AddRank(3, "c").records = {Record(1, 9'100, 10'000, 0xCC)};
  const std::vector<RankCollectives> inputs = Inputs();
  const CollectiveMatch match = MatchCollectives(inputs);
  ASSERT_EQ(match.matched.size(), 2u);
  const HostClocks clocks = AlignHostClocks(inputs, match.matched);
  ASSERT_EQ(clocks.clock.hosts.size(), 3u);
  // One shared instance is enough for host b.
  EXPECT_EQ(clocks.clock.hosts[1].collectives_used, 1);
  EXPECT_EQ(clocks.clock.hosts[1].offset_ns, -500);
  EXPECT_EQ(clocks.clock.hosts[2].host, "c");
  EXPECT_EQ(clocks.clock.hosts[2].collectives_used, 0);
  EXPECT_EQ(clocks.clock.hosts[2].offset_ns, 0);
  EXPECT_TRUE(clocks.clock.applied);
  ASSERT_EQ(clocks.warnings.size(), 1u);
  EXPECT_EQ(clocks.warnings[0], "host 'c' shares no matched collective with host 'a': its clock is not aligned");
}

TEST_F(CrossRankStages, NoisyEndsGiveTheMedianOffsetAndReportTheResidual) {
  // Host b is 1'000 ns ahead; each instance's ends are off by some noise, one by a lot.
  AddRank(0, "a");
  AddRank(1, "b");
  const std::vector<int64_t> noise = {0, 30, -20, 10, 5'000};
  for (uint64_t s = 0; s < noise.size(); ++s) {
    const int64_t end = 100'000 * static_cast<int64_t>(s + 1);
    ranks_[0].records.push_back(Record(s, end - 50'000, end));
    ranks_[1].records.push_back(Record(s, end - 50'000 + 1'000, end + 1'000 + noise[s]));
  }
  const std::vector<RankCollectives> inputs = Inputs();
  const CollectiveMatch match = MatchCollectives(inputs);
  const HostClocks clocks = AlignHostClocks(inputs, match.matched);
  // d = -1000 - noise: the median of {-1000, -1030, -980, -1010, -6000} is -1010.
  EXPECT_EQ(clocks.clock.hosts[1].offset_ns, -1'010);
  EXPECT_EQ(clocks.clock.hosts[1].collectives_used, 5);
  // Aligned spreads |noise - 10|: 10, 20, 30, 0, 4990.
  ASSERT_TRUE(clocks.clock.residual_ns.has_value());
  EXPECT_EQ(clocks.clock.residual_ns->count, 5);
  EXPECT_DOUBLE_EQ(clocks.clock.residual_ns->min, 0);
  EXPECT_DOUBLE_EQ(clocks.clock.residual_ns->median, 20);
  EXPECT_DOUBLE_EQ(clocks.clock.residual_ns->max, 4'990);
}

TEST_F(CrossRankStages, NothingMatchedMeansNoResidual) {
  AddRank(0, "a");
  AddRank(1, "b");
  const std::vector<RankCollectives> inputs = Inputs();
  const HostClocks clocks = AlignHostClocks(inputs, {});
  EXPECT_FALSE(clocks.clock.residual_ns.has_value());
  EXPECT_FALSE(clocks.clock.applied);
  EXPECT_EQ(clocks.warnings.size(), 1u);
}

// ---- wait and transfer ----

TEST(StepIndexAt, WindowsAreHalfOpen) {
  const std::vector<StepRange> steps = {{1, 100, 200, 0}, {2, 200, 300, 0}, {3, 400, 500, 0}};
  EXPECT_FALSE(StepIndexAt(steps, 99).has_value());
  EXPECT_EQ(StepIndexAt(steps, 100), 0u);
  EXPECT_EQ(StepIndexAt(steps, 199), 0u);
  EXPECT_EQ(StepIndexAt(steps, 200), 1u);
  EXPECT_FALSE(StepIndexAt(steps, 300).has_value());  // the gap
  EXPECT_EQ(StepIndexAt(steps, 499), 2u);
  EXPECT_FALSE(StepIndexAt(steps, 500).has_value());
  EXPECT_FALSE(StepIndexAt({}, 0).has_value());
}

TEST_F(CrossRankStages, WaitsUseAlignedTimesAndStepsUseTheRanksOwnClock) {
  // Rank 1 (host b) is 1'000 ahead. Aligned starts: rank 0 at 100, rank 1 at 400; both end at 1'000.
  RankData& r0 = AddRank(0, "a");
  RankData& r1 = AddRank(1, "b");
  r0.steps = {{5, 0, 500, 0}};
  r1.steps = {{5, 0, 1'300, 0}, {6, 1'300, 3'000, 0}};  // its own start 1'400 lies in step 6
  r0.records = {Record(1, 100, 1'000)};
  r1.records = {Record(1, 1'400, 2'000)};
  const std::vector<RankCollectives> inputs = Inputs();
  const CollectiveMatch match = MatchCollectives(inputs);
  const HostClocks clocks = AlignHostClocks(inputs, match.matched);
  ASSERT_EQ(clocks.clock.hosts[1].offset_ns, -1'000);
  const WaitAttribution waits = AttributeWaits(inputs, match.matched, clocks);
  ASSERT_EQ(waits.instances.size(), 1u);
  EXPECT_EQ(waits.instances[0].last_rank_index, 1u);
  EXPECT_EQ(waits.instances[0].wait_ns, 300);
  EXPECT_EQ(waits.instances[0].transfer_ns, 600 + 600);
  EXPECT_EQ(waits.instances[0].median_transfer_ns, 600);
  EXPECT_EQ(waits.waits[0].rank, 0);
  EXPECT_EQ(waits.waits[0].wait_ns, 300);
  EXPECT_EQ(waits.waits[0].transfer_ns, 600);
  EXPECT_EQ(waits.waits[0].times_last, 0);
  EXPECT_EQ(waits.waits[1].wait_ns, 0);
  EXPECT_EQ(waits.waits[1].times_last, 1);
  EXPECT_EQ(waits.waits[1].wait_caused_ns, 300);
  EXPECT_EQ(waits.step_wait_ns, (std::vector<std::vector<int64_t>>{{300}, {0, 0}}));
  // The instance belongs to the last rank's step holding its own start: step 6.
  ASSERT_EQ(waits.caused_by_step.size(), 1u);
  EXPECT_EQ(waits.caused_by_step.at(6), (std::vector<int64_t>{0, 300}));
}

TEST_F(CrossRankStages, TiesGoToTheLowestRankAndTransfersAreClampedAtZero) {
  AddRank(0).records = {Record(1, 100, 150)};
  AddRank(1).records = {Record(1, 500, 900)};
  AddRank(2).records = {Record(1, 500, 800)};
  const std::vector<RankCollectives> inputs = Inputs();
  const CollectiveMatch match = MatchCollectives(inputs);
  const WaitAttribution waits = AttributeWaits(inputs, match.matched, AlignHostClocks(inputs, match.matched));
  EXPECT_EQ(waits.instances[0].last_rank_index, 1u);  // ranks 1 and 2 start together
  EXPECT_EQ(waits.waits[0].wait_ns, 400);
  EXPECT_EQ(waits.waits[0].transfer_ns, 0);  // ended before the last rank started
  EXPECT_EQ(waits.instances[0].transfer_ns, 0 + 400 + 300);
  EXPECT_EQ(waits.instances[0].median_transfer_ns, 300);
  // No steps: the wait counts in the totals only.
  EXPECT_TRUE(waits.caused_by_step.empty());
}

// ---- per kind ----

TEST_F(CrossRankStages, KindsCarryNcclTestsBusBandwidthAndSortByTime) {
  RankData& r0 = AddRank(0);
  RankData& r1 = AddRank(1);
  r0.kinds = r1.kinds = {"AllReduce", "Broadcast"};
  // AllReduce: 1 MB moved in 1'000 ns on both ranks -> algbw 1'000 GB/s, busbw x 2(n-1)/n = 1.
  r0.records = {Record(1, 0, 1'000, 0xC0, 1'000'000), Record(2, 2'000, 2'100, 0xC0, 0, CollectiveOp::kBroadcast)};
  r1.records = {Record(1, 0, 1'000, 0xC0, 1'000'000), Record(2, 1'000, 2'100, 0xC0, 0, CollectiveOp::kBroadcast)};
  r0.records[1].kind = r1.records[1].kind = 1;
  const std::vector<RankCollectives> inputs = Inputs();
  const CollectiveMatch match = MatchCollectives(inputs);
  const WaitAttribution waits = AttributeWaits(inputs, match.matched, AlignHostClocks(inputs, match.matched));
  const std::vector<CollectiveKindSummary> kinds = SummarizeKinds(inputs, match.matched, waits.instances);
  ASSERT_EQ(kinds.size(), 2u);
  // AllReduce's wait + transfer (2'000) is larger than Broadcast's (1'000 + 200).
  EXPECT_EQ(kinds[0].kind, "AllReduce");
  EXPECT_EQ(kinds[0].op, "allreduce");
  EXPECT_EQ(kinds[0].count, 1);
  EXPECT_EQ(kinds[0].total_bytes, 1'000'000u);
  EXPECT_EQ(kinds[0].wait_ns, 0);
  EXPECT_EQ(kinds[0].transfer_ns, 2'000);
  ASSERT_TRUE(kinds[0].busbw_gbps.has_value());
  EXPECT_DOUBLE_EQ(kinds[0].busbw_gbps->median, 1'000.0);
  EXPECT_EQ(kinds[1].kind, "Broadcast");
  EXPECT_EQ(kinds[1].wait_ns, 1'000);
  EXPECT_EQ(kinds[1].transfer_ns, 200);
  EXPECT_FALSE(kinds[1].busbw_gbps.has_value());  // no bytes
}

// ---- per-step rows and stragglers ----

TEST_F(CrossRankStages, StepRowsNameWhoCausedTheMostWaitAboveFivePercent) {
  RankData& r0 = AddRank(0);
  RankData& r1 = AddRank(1);
  r0.steps = {{1, 0, 1'000, 0}, {2, 1'000, 2'000, 0}};
  r1.steps = {{1, 0, 1'000, 0}, {2, 1'000, 2'000, 0}, {3, 2'000, 3'000, 0}};
  // Step 1: rank 1 is last by 40 ns (under 5% of 1'000); step 2: rank 0 is last by 200 ns.
  r0.records = {Record(1, 100, 500), Record(2, 1'300, 1'500)};
  r1.records = {Record(1, 140, 500), Record(2, 1'100, 1'500)};
  const std::vector<RankCollectives> inputs = Inputs();
  const CollectiveMatch match = MatchCollectives(inputs);
  const WaitAttribution waits = AttributeWaits(inputs, match.matched, AlignHostClocks(inputs, match.matched));
  const std::map<int64_t, double> median_step_ns = {{1, 1'000}, {2, 1'000}, {3, 1'000}};
  const StepRows steps = BuildStepRows(inputs, waits, {2, 3}, median_step_ns);
  ASSERT_EQ(steps.rows.size(), 3u);  // every step number of any rank
  EXPECT_EQ(steps.rows[0].step, 1);
  EXPECT_FALSE(steps.rows[0].aggregated);
  EXPECT_EQ(steps.rows[0].wait_ns, (std::vector<int64_t>{40, 0}));
  EXPECT_FALSE(steps.rows[0].last_rank.has_value());
  EXPECT_EQ(steps.rows[1].step, 2);
  EXPECT_TRUE(steps.rows[1].aggregated);
  EXPECT_EQ(steps.rows[1].wait_ns, (std::vector<int64_t>{0, 200}));
  EXPECT_EQ(steps.rows[1].last_rank, 0);
  EXPECT_EQ(steps.rows[2].wait_ns, (std::vector<int64_t>{0, 0}));  // rank 0 has no step 3
  EXPECT_FALSE(steps.rows[2].last_rank.has_value());
  EXPECT_EQ(steps.steps_most_wait, (std::vector<int64_t>{1, 0}));

  // The same wait in a non-aggregated step names the rank but counts nothing.
  EXPECT_EQ(BuildStepRows(inputs, waits, {3}, median_step_ns).steps_most_wait, (std::vector<int64_t>{0, 0}));
}

TEST(MarkStragglers, HalfOfTheAggregatedStepsMakeAStraggler) {
  std::vector<RankWait> waits(3);
  for (int r = 0; r < 3; ++r) waits[static_cast<size_t>(r)].rank = r;
  waits[0].steps_most_wait = 2;
  waits[1].steps_most_wait = 1;
  EXPECT_EQ(MarkStragglers(4, waits), (std::vector<int>{0}));
  EXPECT_TRUE(waits[0].straggler);
  EXPECT_FALSE(waits[1].straggler);
  EXPECT_EQ(MarkStragglers(2, waits), (std::vector<int>{0, 1}));
  EXPECT_TRUE(MarkStragglers(0, waits).empty());  // no aggregated step: nobody
  EXPECT_FALSE(waits[0].straggler);
  // One aggregated step is no evidence: whoever was last in it would be flagged.
  waits[0].steps_most_wait = 1;
  waits[1].steps_most_wait = 0;
  EXPECT_TRUE(MarkStragglers(1, waits).empty());
  EXPECT_FALSE(waits[0].straggler);
}

// ---- the stages together ----

TEST_F(CrossRankStages, AnalyzeCrossRankComposesTheStages) {
  RankData& r0 = AddRank(0, "a");
  RankData& r1 = AddRank(1, "b");
  r0.steps = r1.steps = {{1, 0, 10'000, 0}, {2, 10'000, 20'000, 0}};
  // Rank 1 arrives 2'000 late in both steps, on a clock 5'000 ahead.
  for (uint64_t s = 0; s < 2; ++s) {
    const int64_t base = 10'000 * static_cast<int64_t>(s);
    r0.records.push_back(Record(s, base + 1'000, base + 4'000, 0xC0, 1'000));
    r1.records.push_back(Record(s, base + 3'000 + 5'000, base + 4'000 + 5'000, 0xC0, 1'000));
  }
  const std::vector<RankCollectives> inputs = Inputs();
  const CrossRankResult result = AnalyzeCrossRank(inputs, {1, 2}, {{1, 10'000}, {2, 10'000}});
  const CrossRank& cross = result.cross_rank;
  EXPECT_EQ(cross.ranks, (std::vector<int>{0, 1}));
  EXPECT_EQ(cross.matched, 2);
  EXPECT_EQ(cross.clock.hosts[1].offset_ns, -5'000);
  EXPECT_EQ(cross.waits[0].wait_ns, 4'000);
  EXPECT_EQ(cross.waits[1].times_last, 2);
  EXPECT_EQ(cross.waits[1].steps_most_wait, 2);
  EXPECT_EQ(cross.stragglers, (std::vector<int>{1}));
  ASSERT_EQ(cross.steps.size(), 2u);
  EXPECT_EQ(cross.steps[0].last_rank, 1);
  ASSERT_EQ(cross.kinds.size(), 1u);
  EXPECT_EQ(cross.kinds[0].count, 2);
  EXPECT_EQ(result.step_wait_ns, (std::vector<std::vector<int64_t>>{{2'000, 2'000}, {0, 0}}));
  EXPECT_TRUE(result.warnings.empty());
}

TEST_F(CrossRankStages, WithoutMatchedInstancesThereIsNoHeatmap) {
  AddRank(0).steps = {{1, 0, 10, 0}};
  AddRank(1).steps = {{1, 0, 10, 0}};
  const std::vector<RankCollectives> inputs = Inputs();
  const CrossRankResult result = AnalyzeCrossRank(inputs, {1}, {{1, 10}});
  EXPECT_EQ(result.cross_rank.collective_source, "");
  EXPECT_TRUE(result.cross_rank.steps.empty());
  EXPECT_TRUE(result.cross_rank.stragglers.empty());
  EXPECT_EQ(result.step_wait_ns, (std::vector<std::vector<int64_t>>{{0}, {0}}));
}

}  // namespace
}  // namespace rankscope::analyzer
