#include "tests/trainer/comm_test_util.h"
#include "trainer/gloo_group.h"

#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/temp_dir.h"
#include "trainer/annotations.h"
#include "trainer/collectives.h"
#include "trainer/comm_util.h"
#include "trainer/rendezvous.h"

extern char** environ;

namespace rankscope::trainer {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using testing::TempDir;

// Generous: only to prove that nothing hangs.
constexpr auto kDoesNotHang = std::chrono::seconds(20);

using testing::FileSpec;
using testing::WorldOf;

// One rank's connections. The rendezvous must outlive the group.
struct Member {
  std::unique_ptr<Rendezvous> rendezvous;
  std::unique_ptr<GlooGroup> group;
};

Result<Member> Join(const RendezvousSpec& spec, int rank, int size, milliseconds timeout,
                    const std::string& job = "gloo-test") {
  Member member;
  RS_ASSIGN_OR_RETURN(member.rendezvous, Rendezvous::Connect(spec, WorldOf(rank, size), timeout, job));
  RS_ASSIGN_OR_RETURN(member.group, GlooGroup::Create(*member.rendezvous, timeout));
  return member;
}

// Runs body(rank) for every rank on its own thread; returns what each returned.
template <typename T>
std::vector<T> RunRanks(int size, const std::function<T(int)>& body) {
  std::vector<T> results(size);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] { results[rank] = body(rank); });
  }
  for (std::thread& thread : threads) thread.join();
  return results;
}

void ExpectAllEmpty(const std::vector<std::string>& errors) {
  for (size_t rank = 0; rank < errors.size(); ++rank) EXPECT_EQ(errors[rank], "") << "rank " << rank;
}

TEST(GlooGroupTest, AllReduceSumsForSeveralSizes) {
  TempDir temp;
  const RendezvousSpec spec = FileSpec(temp.path());
  constexpr int kRanks = 3;
  const std::vector<size_t> sizes = {0, 1, 2, 7, 1000, 3 * 1024 * 1024 / sizeof(float) + 5};
  ExpectAllEmpty(RunRanks<std::string>(kRanks, [&](int rank) -> std::string {
    auto member = Join(spec, rank, kRanks, milliseconds(10000));
    if (!member.ok()) return member.status().message();
    if (member->group->rank() != rank || member->group->size() != kRanks) return "wrong rank or size";
    for (size_t count : sizes) {
      std::vector<float> data(count);
      for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>(rank * 1000 + i % 97);
      Status reduced = member->group->AllReduceSum(data.data(), count);
      if (!reduced.ok()) return reduced.message();
      for (size_t i = 0; i < count; ++i) {
        // Small integers: exact in float whatever the order of the additions.
        const float expected = static_cast<float>(1000 * (0 + 1 + 2) + kRanks * (i % 97));
        if (data[i] != expected) {
          return "count " + std::to_string(count) + ", element " + std::to_string(i) + ": " +
                 std::to_string(data[i]) + " != " + std::to_string(expected);
        }
      }
    }
    return "";
  }));
}

TEST(GlooGroupTest, EveryRankGetsTheSameBits) {
  TempDir temp;
  const RendezvousSpec spec = FileSpec(temp.path());
  constexpr int kRanks = 3;
  constexpr size_t kCount = 100003;
  std::vector<std::vector<float>> results(kRanks);
  ExpectAllEmpty(RunRanks<std::string>(kRanks, [&](int rank) -> std::string {
    auto member = Join(spec, rank, kRanks, milliseconds(10000));
    if (!member.ok()) return member.status().message();
    std::vector<float> data(kCount);
    for (size_t i = 0; i < kCount; ++i) data[i] = std::sin(static_cast<float>(i * (rank + 1))) * 1e-3f;
    Status reduced = member->group->AllReduceSum(data.data(), kCount);
    results[rank] = std::move(data);
    return reduced.ok() ? "" : reduced.message();
  }));
  for (int rank = 1; rank < kRanks; ++rank) {
    ASSERT_EQ(results[rank].size(), kCount);
    EXPECT_EQ(std::memcmp(results[0].data(), results[rank].data(), kCount * sizeof(float)), 0)
        << "rank " << rank << " differs from rank 0";
  }
}

TEST(GlooGroupTest, BroadcastFromEveryRoot) {
  TempDir temp;
  const RendezvousSpec spec = FileSpec(temp.path());
  constexpr int kRanks = 3;
  ExpectAllEmpty(RunRanks<std::string>(kRanks, [&](int rank) -> std::string {
    auto member = Join(spec, rank, kRanks, milliseconds(10000));
    if (!member.ok()) return member.status().message();
    for (int root = 0; root < kRanks; ++root) {
      std::vector<float> data(4099, static_cast<float>(rank == root ? 100 + root : -1));
      Status sent = member->group->Broadcast(data.data(), data.size(), root);
      if (!sent.ok()) return sent.message();
      for (float value : data) {
        if (value != static_cast<float>(100 + root)) return "wrong value from root " + std::to_string(root);
      }
    }
    return "";
  }));
}

TEST(GlooGroupTest, BarrierWaitsForEveryRank) {
  TempDir temp;
  const RendezvousSpec spec = FileSpec(temp.path());
  constexpr int kRanks = 3;
  std::atomic<int> arrived{0};
  ExpectAllEmpty(RunRanks<std::string>(kRanks, [&](int rank) -> std::string {
    auto member = Join(spec, rank, kRanks, milliseconds(10000));
    if (!member.ok()) return member.status().message();
    if (rank == 2) std::this_thread::sleep_for(milliseconds(200));
    arrived.fetch_add(1);
    Status waited = member->group->Barrier();
    if (!waited.ok()) return waited.message();
    // Nobody leaves the barrier before everybody arrived at it.
    return arrived.load() == kRanks ? "" : "left the barrier early";
  }));
}

// Ranks 1 to 4 (1: nothing to exchange), several block sizes: every rank gets every block.
TEST(GlooGroupTest, AllGatherPutsEveryRanksBlockInRankOrder) {
  for (int ranks = 1; ranks <= 4; ++ranks) {
    TempDir temp;
    const RendezvousSpec spec = FileSpec(temp.path());
    ExpectAllEmpty(RunRanks<std::string>(ranks, [&](int rank) -> std::string {
      auto member = Join(spec, rank, ranks, milliseconds(10000));
      if (!member.ok()) return member.status().message();
      for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{70001}}) {
        std::vector<float> mine(count);
        for (size_t i = 0; i < count; ++i) mine[i] = static_cast<float>(rank * 100000 + i);
        std::vector<float> all(count * static_cast<size_t>(ranks), -1.f);
        Status gathered = member->group->AllGather(mine.data(), all.data(), count);
        if (!gathered.ok()) return gathered.message();
        for (size_t r = 0; r < static_cast<size_t>(ranks); ++r) {
          for (size_t i = 0; i < count; ++i) {
            if (all[r * count + i] != static_cast<float>(r * 100000 + i)) {
              return "count " + std::to_string(count) + ": block " + std::to_string(r) + " element " + std::to_string(i);
            }
          }
        }
      }
      return "";
    }));
  }
}

// Block r of every rank summed lands on rank r; the sum of small integers is exact in any
// order, and the same bits on two runs of real values (one fixed order of additions).
TEST(GlooGroupTest, ReduceScatterSumsEachBlockOntoItsRank) {
  for (int ranks = 1; ranks <= 4; ++ranks) {
    TempDir temp;
    const RendezvousSpec spec = FileSpec(temp.path());
    std::vector<std::vector<float>> first(static_cast<size_t>(ranks));
    ExpectAllEmpty(RunRanks<std::string>(ranks, [&](int rank) -> std::string {
      auto member = Join(spec, rank, ranks, milliseconds(10000));
      if (!member.ok()) return member.status().message();
      for (size_t count : {size_t{0}, size_t{1}, size_t{5}, size_t{30011}}) {
        std::vector<float> data(count * static_cast<size_t>(ranks));
        for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>((rank + 1) * (i % 50));
        Status reduced = member->group->ReduceScatterSum(data.data(), count);
        if (!reduced.ok()) return reduced.message();
        const size_t mine = static_cast<size_t>(rank) * count;
        for (size_t i = 0; i < count; ++i) {
          // Sum over ranks of (r + 1) * (j % 50) for element j of block `rank`.
          const float expected = static_cast<float>(ranks * (ranks + 1) / 2 * ((mine + i) % 50));
          if (data[mine + i] != expected) {
            return "count " + std::to_string(count) + ", element " + std::to_string(i) + ": " +
                   std::to_string(data[mine + i]) + " != " + std::to_string(expected);
          }
        }
      }
      std::vector<float> real(3 * static_cast<size_t>(ranks) + 1);
      for (int run = 0; run < 2; ++run) {
        for (size_t i = 0; i < real.size(); ++i) real[i] = std::sin(static_cast<float>(i * (rank + 3))) * 1e-3f;
        Status reduced = member->group->ReduceScatterSum(real.data(), 3);
        if (!reduced.ok()) return reduced.message();
        const std::vector<float> block(real.begin() + rank * 3, real.begin() + rank * 3 + 3);
        if (run == 0) first[static_cast<size_t>(rank)] = block;
        if (run == 1 && block != first[static_cast<size_t>(rank)]) return "a second run gave other bits";
      }
      return "";
    }));
  }
}

// A pipeline's traffic: rank r sends to r+1 and receives from r-1, several messages in a
// row, and rank 0 also receives from the last; other ranks are not involved in each pair.
TEST(GlooGroupTest, SendAndReceiveMatchInOrderBetweenEachPair) {
  TempDir temp;
  const RendezvousSpec spec = FileSpec(temp.path());
  constexpr int kRanks = 3;
  constexpr int kMessages = 4;
  ExpectAllEmpty(RunRanks<std::string>(kRanks, [&](int rank) -> std::string {
    auto member = Join(spec, rank, kRanks, milliseconds(10000));
    if (!member.ok()) return member.status().message();
    for (int m = 0; m < kMessages; ++m) {
      const size_t count = 1000 + static_cast<size_t>(m);
      if (rank + 1 < kRanks) {
        std::vector<float> out(count, static_cast<float>(rank * 10 + m));
        Status sent = member->group->Send(out.data(), count, rank + 1);
        if (!sent.ok()) return sent.message();
      }
      if (rank > 0) {
        std::vector<float> in(count, -1.f);
        Status received = member->group->Recv(in.data(), count, rank - 1);
        if (!received.ok()) return received.message();
        for (float value : in) {
          if (value != static_cast<float>((rank - 1) * 10 + m)) return "message " + std::to_string(m) + " out of order";
        }
      }
    }
    if (rank == kRanks - 1) {
      const float back = 42.f;
      Status sent = member->group->Send(&back, 1, 0);
      if (!sent.ok()) return sent.message();
    }
    if (rank == 0) {
      float back = 0.f;
      Status received = member->group->Recv(&back, 1, kRanks - 1);
      if (!received.ok()) return received.message();
      if (back != 42.f) return "the last rank's message is wrong";
    }
    // Collectives still line up after point-to-point traffic that only some ranks made.
    float one = 1.f;
    Status reduced = member->group->AllReduceSum(&one, 1);
    if (!reduced.ok()) return reduced.message();
    return one == static_cast<float>(kRanks) ? "" : "all-reduce after send/receive is wrong";
  }));
}

// Two neighbouring pipeline stages in 1F1B's steady state send each other at the same time
// (activations forward, gradients back). Gloo sends only once the receiver is ready, so two
// blocking sends would wait for each other for good; SendRecv posts both halves first.
TEST(GlooGroupTest, SendRecvLetsTwoRanksSendEachOtherAtOnce) {
  TempDir temp;
  const RendezvousSpec spec = FileSpec(temp.path());
  ExpectAllEmpty(RunRanks<std::string>(2, [&](int rank) -> std::string {
    auto member = Join(spec, rank, 2, milliseconds(10000));
    if (!member.ok()) return member.status().message();
    const int peer = 1 - rank;
    for (int round = 0; round < 3; ++round) {
      // Large enough not to fit in a socket buffer.
      std::vector<float> out(1 << 20, static_cast<float>(rank * 100 + round));
      std::vector<float> in(1 << 20, -1.f);
      Status exchanged = member->group->SendRecv(out.data(), out.size(), peer, in.data(), in.size(), peer);
      if (!exchanged.ok()) return exchanged.message();
      if (in.front() != static_cast<float>(peer * 100 + round) || in.back() != in.front()) {
        return "round " + std::to_string(round) + " received the wrong message";
      }
    }
    return "";
  }));
}

// Groups of some ranks (a pipeline stage's replicas): ranks {0, 2} and {1, 3} of four each
// make their own group at the same point, and each sums over its own members only.
TEST(GlooGroupTest, AGroupOfSomeRanksReducesOverItsMembers) {
  TempDir temp;
  const RendezvousSpec spec = FileSpec(temp.path());
  ExpectAllEmpty(RunRanks<std::string>(4, [&](int rank) -> std::string {
    Result<std::unique_ptr<Rendezvous>> rendezvous =
        Rendezvous::Connect(spec, WorldOf(rank, 4), milliseconds(10000), "gloo-test");
    if (!rendezvous.ok()) return rendezvous.status().message();
    auto world = GlooGroup::Create(**rendezvous, milliseconds(10000));
    if (!world.ok()) return world.status().message();
    const std::vector<int> members = rank % 2 == 0 ? std::vector<int>{0, 2} : std::vector<int>{1, 3};
    auto group = GlooGroup::Create(**rendezvous, milliseconds(10000), members);
    if (!group.ok()) return group.status().message();
    if ((*group)->size() != 2 || (*group)->rank() != rank / 2) return "wrong rank or size in the group";
    if ((*group)->communicator_id() == (*world)->communicator_id()) return "the group shares the world's id";
    float value = static_cast<float>(rank);
    Status reduced = (*group)->AllReduceSum(&value, 1);
    if (!reduced.ok()) return reduced.message();
    // 0 + 2 or 1 + 3.
    if (value != (rank % 2 == 0 ? 2.f : 4.f)) return "the group summed over other ranks: " + std::to_string(value);
    // A rank that is not a member is refused.
    auto stranger = GlooGroup::Create(**rendezvous, milliseconds(10000), {rank == 0 ? 1 : 0});
    if (stranger.ok()) return "a group without this rank was made";
    return stranger.status().message() == "rank " + std::to_string(rank) + " is not in the group of ranks " +
                                              std::to_string(rank == 0 ? 1 : 0)
               ? ""
               : stranger.status().message();
  }));
}

TEST(GlooGroupTest, PointToPointRefusesBadPeers) {
  TempDir temp;
  const RendezvousSpec spec = FileSpec(temp.path());
  auto member = Join(spec, 0, 1, milliseconds(10000));
  ASSERT_TRUE(member.ok()) << member.status().message();
  float value = 0.f;
  EXPECT_EQ(member->group->Send(&value, 1, 0).message(), "send: peer 0 is not another rank of 1");
  EXPECT_EQ(member->group->Recv(&value, 1, 3).message(), "receive: peer 3 is not another rank of 1");
  EXPECT_EQ(member->group->Recv(nullptr, 0, 1).message(), "receive: peer 1 is not another rank of 1");
}

// A peer that never receives: the send's rank times out and says so, naming the silent rank.
TEST(GlooGroupTest, AReceiveWithNoSenderTimesOut) {
  TempDir temp;
  const RendezvousSpec spec = FileSpec(temp.path());
  const auto errors = RunRanks<std::string>(2, [&](int rank) -> std::string {
    auto member = Join(spec, rank, 2, milliseconds(1500));
    if (!member.ok()) return member.status().message();
    if (rank == 1) {
      std::this_thread::sleep_for(milliseconds(2500));
      return "";
    }
    float value = 0.f;
    Status received = member->group->Recv(&value, 1, 1);
    return received.ok() ? "received from nobody" : received.message();
  });
  EXPECT_NE(errors[0].find("receive"), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("timed out"), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("rank 1"), std::string::npos) << errors[0];
  EXPECT_EQ(errors[1], "");
}

// The engines' view: FSDP's all-gathers and reduce-scatters on the communication thread,
// each waited for by its ticket, and a pipeline's sends and receives, on 3 ranks.
TEST(GlooCollectivesTest, TicketsWaitForTheirCollectiveAndPointToPointIsInOrder) {
  TempDir temp;
  const RendezvousSpec spec = FileSpec(temp.path());
  constexpr int kRanks = 3;
  constexpr size_t kCount = 1001;
  // Once before any thread's range, as RunTraining does: NVTX initializes on first use,
  // which threads must not race (TSan reports it).
  InitAnnotations();
  ExpectAllEmpty(RunRanks<std::string>(kRanks, [&](int rank) -> std::string {
    auto rendezvous = Rendezvous::Connect(spec, WorldOf(rank, kRanks), milliseconds(10000), "collectives-test");
    if (!rendezvous.ok()) return rendezvous.status().message();
    auto collectives = MakeGlooCollectives(**rendezvous, milliseconds(10000));
    if (!collectives.ok()) return collectives.status().message();
    Collectives& c = **collectives;
    std::vector<float> shard(kCount, static_cast<float>(rank + 1));
    std::vector<float> first(kCount * kRanks), second(kCount * kRanks);
    auto a = c.StartAllGather(0, shard.data(), first.data(), kCount);
    auto b = c.StartAllGather(1, shard.data(), second.data(), kCount);
    if (!a.ok() || !b.ok()) return "start failed";
    if (*b <= *a) return "tickets do not grow";
    // Waiting for the second means the first is done too.
    Status waited = c.Wait(*b);
    if (!waited.ok()) return waited.message();
    for (size_t i = 0; i < first.size(); ++i) {
      const float expected = static_cast<float>(i / kCount + 1);
      if (first[i] != expected || second[i] != expected) return "all-gather element " + std::to_string(i);
    }
    std::vector<float> gradients(kCount * kRanks, static_cast<float>(rank + 1));
    auto reduced = c.StartReduceScatter(0, gradients.data(), kCount);
    if (!reduced.ok()) return reduced.status().message();
    waited = c.Wait(*reduced);
    if (!waited.ok()) return waited.message();
    for (size_t i = 0; i < kCount; ++i) {
      if (gradients[static_cast<size_t>(rank) * kCount + i] != 6.f) return "reduce-scatter element " + std::to_string(i);
    }
    // A ring of sends: each rank sends to the next, then receives from the previous.
    std::vector<float> out(7, static_cast<float>(rank)), in(7, -1.f);
    if (rank % 2 == 0) {
      Status sent = c.Send(out.data(), out.size(), (rank + 1) % kRanks);
      if (!sent.ok()) return sent.message();
      Status received = c.Recv(in.data(), in.size(), (rank + kRanks - 1) % kRanks);
      if (!received.ok()) return received.message();
    } else {
      Status received = c.Recv(in.data(), in.size(), (rank + kRanks - 1) % kRanks);
      if (!received.ok()) return received.message();
      Status sent = c.Send(out.data(), out.size(), (rank + 1) % kRanks);
      if (!sent.ok()) return sent.message();
    }
    if (in[0] != static_cast<float>((rank + kRanks - 1) % kRanks)) return "received the wrong message";
    Status all = c.WaitAll();
    return all.ok() ? "" : all.message();
  }));
}

// --link-gbps: an all-reduce also lasts as long as a ring's bytes take on the link. Two
// ranks, 1M floats at 1 Gbit/s: each rank sends 2 (n - 1) / n x 4 MB = 4 MB = 32 Mbit, 32 ms.
TEST(GlooCollectivesTest, ASimulatedLinkMakesAnAllReduceLastItsBytesOverTheLink) {
  TempDir temp;
  const RendezvousSpec spec = FileSpec(temp.path());
  constexpr size_t kCount = 1 << 20;
  InitAnnotations();
  ExpectAllEmpty(RunRanks<std::string>(2, [&](int rank) -> std::string {
    auto rendezvous = Rendezvous::Connect(spec, WorldOf(rank, 2), milliseconds(10000), "link-test");
    if (!rendezvous.ok()) return rendezvous.status().message();
    auto collectives = MakeGlooCollectives(**rendezvous, milliseconds(10000), {}, SimulatedLink{1.0});
    if (!collectives.ok()) return collectives.status().message();
    std::vector<float> data(kCount, static_cast<float>(rank + 1));
    const auto started = std::chrono::steady_clock::now();
    Status done = (*collectives)->StartAllReduce(0, data.data(), data.size());
    if (done.ok()) done = (*collectives)->WaitAll();
    const auto took = std::chrono::steady_clock::now() - started;
    if (!done.ok()) return done.message();
    if (data.front() != 3.f || data.back() != 3.f) return "the sum is wrong";
    if (took < milliseconds(32)) {
      return "took " + std::to_string(std::chrono::duration<double, std::milli>(took).count()) + " ms";
    }
    return "";
  }));
}

TEST(GlooGroupTest, SingleRankAndBadArguments) {
  TempDir temp;
  auto member = Join(FileSpec(temp.path()), 0, 1, milliseconds(5000));
  ASSERT_TRUE(member.ok()) << member.status().message();
  std::vector<float> data = {1.5f, -2.0f};
  ASSERT_TRUE(member->group->AllReduceSum(data.data(), data.size()).ok());
  EXPECT_EQ(data, (std::vector<float>{1.5f, -2.0f}));
  ASSERT_TRUE(member->group->Broadcast(data.data(), data.size(), 0).ok());
  ASSERT_TRUE(member->group->Barrier().ok());
  Status bad_root = member->group->Broadcast(data.data(), data.size(), 1);
  EXPECT_EQ(bad_root.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad_root.message(), "broadcast: root 1 is not a rank of 1");
  EXPECT_EQ(member->group->AllReduceSum(nullptr, 3).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(member->group->AllReduceSum(nullptr, 0).ok());
  // A dead peer must fail a write with EPIPE, not end this process with SIGPIPE.
  struct sigaction sigpipe {};
  ASSERT_EQ(sigaction(SIGPIPE, nullptr, &sigpipe), 0);
  EXPECT_EQ(sigpipe.sa_handler, SIG_IGN);
}

TEST(GlooGroupTest, TwoGroupsOnOneRendezvous) {
  TempDir temp;
  const RendezvousSpec spec = FileSpec(temp.path());
  // Each rank's communicator ids, first group and second.
  std::vector<std::pair<uint64_t, uint64_t>> ids(2);
  ExpectAllEmpty(RunRanks<std::string>(2, [&](int rank) -> std::string {
    auto member = Join(spec, rank, 2, milliseconds(10000));
    if (!member.ok()) return member.status().message();
    auto second = GlooGroup::Create(*member->rendezvous, milliseconds(10000));
    if (!second.ok()) return second.status().message();
    ids[static_cast<size_t>(rank)] = {member->group->communicator_id(), (*second)->communicator_id()};
    float value = 1.0f;
    Status first_sum = member->group->AllReduceSum(&value, 1);
    Status second_sum = (*second)->AllReduceSum(&value, 1);
    if (!first_sum.ok() || !second_sum.ok()) return "a sum failed";
    return value == 4.0f ? "" : "wrong sum";
  }));
  // The same communicator has the same id on every rank, and each communicator its own:
  // FNV-1a 64 of "<namespace>/<size>".
  EXPECT_EQ(ids[0], ids[1]);
  EXPECT_NE(ids[0].first, ids[0].second);
  EXPECT_EQ(ids[0].first, comm::Fnv1a64("gloo-0/2"));
  EXPECT_EQ(ids[0].second, comm::Fnv1a64("gloo-1/2"));
}

// The published FNV-1a 64 test vectors: the offset basis for "", then "a" and "foobar".
TEST(CommUtilTest, Fnv1a64MatchesTheReferenceValues) {
  EXPECT_EQ(comm::Fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(comm::Fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(comm::Fnv1a64("foobar"), 0x85944171f73967e8ull);
}

// A rank whose connections close (here: a thread that drops its group, like a process
// that exits) is named by every survivor, long before the collective's timeout.
TEST(GlooGroupTest, RankThatLeavesIsNamed) {
  TempDir temp;
  const RendezvousSpec spec = FileSpec(temp.path());
  constexpr int kRanks = 3;
  const auto start = Clock::now();
  const auto errors = RunRanks<std::string>(kRanks, [&](int rank) -> std::string {
    auto member = Join(spec, rank, kRanks, milliseconds(15000));
    if (!member.ok()) return "join: " + member.status().message();
    // Everybody is connected before rank 1 leaves.
    if (Status ready = member->group->Barrier(); !ready.ok()) return "barrier: " + ready.message();
    if (rank == 1) {
      member->group.reset();
      return "";
    }
    std::vector<float> data(1 << 20, 1.0f);
    Status reduced = member->group->AllReduceSum(data.data(), data.size());
    if (reduced.ok()) return "all-reduce succeeded without rank 1";
    Status again = member->group->Barrier();
    if (again.message().find("barrier: the group failed earlier: all-reduce failed") != 0) {
      return "second call: " + again.message();
    }
    return reduced.message();
  });
  EXPECT_EQ(errors[1], "");
  for (int rank : {0, 2}) {
    EXPECT_EQ(errors[rank].rfind("all-reduce failed: rank 1 is gone (", 0), 0u) << errors[rank];
  }
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10)) << "should not wait for the 15 s timeout";
}

TEST(GlooGroupTest, RankThatHangsTimesOut) {
  TempDir temp;
  const RendezvousSpec spec = FileSpec(temp.path());
  std::atomic<bool> rank0_done{false};
  const auto errors = RunRanks<std::string>(2, [&](int rank) -> std::string {
    auto member = Join(spec, rank, 2, milliseconds(1000));
    if (!member.ok()) return "join: " + member.status().message();
    if (rank == 1) {  // alive, but never joins the collective
      while (!rank0_done.load()) std::this_thread::sleep_for(milliseconds(10));
      return "";
    }
    float value = 1.0f;
    Status reduced = member->group->AllReduceSum(&value, 1);
    rank0_done.store(true);
    return reduced.message();
  });
  EXPECT_EQ(errors[0].rfind("all-reduce timed out after 1s: rank 1 did not respond (", 0), 0u) << errors[0];
}

TEST(GlooGroupTest, GroupCreationNamesARankThatDoesNotCome) {
  TempDir temp;
  const RendezvousSpec spec = FileSpec(temp.path());
  const auto errors = RunRanks<std::string>(2, [&](int rank) -> std::string {
    auto rendezvous = Rendezvous::Connect(spec, WorldOf(rank, 2), milliseconds(1000), "creation");
    if (!rendezvous.ok()) return "join: " + rendezvous.status().message();
    if (rank == 1) return "";  // never creates the group
    auto group = GlooGroup::Create(**rendezvous, milliseconds(1000));
    return group.ok() ? "created without rank 1" : group.status().message();
  });
  EXPECT_EQ(errors[0].rfind("gloo: connecting 2 ranks timed out after 1s: rank 1 did not respond (", 0), 0u)
      << errors[0];
}

// ---- Dead processes ----

enum class ChildExit { kBeforeCollective, kDuringCollective };

// Joins as rank 1 of 2 in a child process, then exits: before the next collective, or
// killed by SIGALRM in the middle of a stream of large ones. Forked before this process
// starts any thread; the child never returns into the test.
pid_t ForkRankOne(const RendezvousSpec& spec, ChildExit how) {
  const pid_t pid = fork();
  if (pid != 0) return pid;
  auto member = Join(spec, 1, 2, milliseconds(10000), "dead-peer");
  if (!member.ok()) _exit(3);
  std::vector<float> data(4 << 20, 1.0f);
  if (!member->group->AllReduceSum(data.data(), 16).ok()) _exit(4);
  if (how == ChildExit::kBeforeCollective) _exit(0);
  itimerval timer{};
  timer.it_value.tv_usec = 300 * 1000;
  setitimer(ITIMER_REAL, &timer, nullptr);  // SIGALRM's default action ends the process
  while (true) {
    if (!member->group->AllReduceSum(data.data(), data.size()).ok()) _exit(5);
  }
}

void ExpectDeadPeerIsNamed(ChildExit how) {
  TempDir temp;
  const RendezvousSpec spec = FileSpec(temp.path());
  const pid_t child = ForkRankOne(spec, how);
  ASSERT_GT(child, 0);
  auto member = Join(spec, 0, 2, milliseconds(10000), "dead-peer");
  ASSERT_TRUE(member.ok()) << member.status().message();
  std::vector<float> data(4 << 20, 1.0f);
  ASSERT_TRUE(member->group->AllReduceSum(data.data(), 16).ok());
  const auto start = Clock::now();
  Status reduced;
  while (reduced.ok() && Clock::now() - start < kDoesNotHang) {
    reduced = member->group->AllReduceSum(data.data(), data.size());
  }
  const auto elapsed = Clock::now() - start;
  int child_status = 0;
  ASSERT_EQ(waitpid(child, &child_status, 0), child);
  ASSERT_FALSE(reduced.ok());
  if (how == ChildExit::kBeforeCollective) {
    EXPECT_EQ(reduced.message().rfind("all-reduce failed: rank 1 is gone (", 0), 0u) << reduced.message();
  } else {
    // Killed in the middle of a transfer, the peer is seen either by its closed connection or,
    // when Gloo's pending send outlives it on a loaded machine, by the collective's timeout
    // (CI41 under ASan, two tests at a time): both name rank 1, and neither hangs.
    const std::string& message = reduced.message();
    EXPECT_TRUE(message.rfind("all-reduce failed: rank 1 is gone (", 0) == 0 ||
                message.rfind("all-reduce timed out after 10s: rank 1 did not respond (", 0) == 0)
        << message;
  }
  EXPECT_LT(elapsed, kDoesNotHang);
  if (how == ChildExit::kBeforeCollective) {
    EXPECT_TRUE(WIFEXITED(child_status) && WEXITSTATUS(child_status) == 0) << child_status;
  } else {
    EXPECT_TRUE(WIFSIGNALED(child_status) && WTERMSIG(child_status) == SIGALRM) << child_status;
  }
}

TEST(GlooGroupDeadPeerTest, PeerThatExitedBeforeTheCollective) {
  ExpectDeadPeerIsNamed(ChildExit::kBeforeCollective);
}

TEST(GlooGroupDeadPeerTest, PeerKilledDuringCollectives) {
  ExpectDeadPeerIsNamed(ChildExit::kDuringCollective);
}

// ---- Redis ----

std::string FindOnPath(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::string_view rest = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  while (!rest.empty()) {
    const size_t colon = rest.find(':');
    const std::string candidate = std::string(rest.substr(0, colon)) + "/" + program;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    if (colon == std::string_view::npos) break;
    rest.remove_prefix(colon + 1);
  }
  return "";
}

int FreeTcpPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    port = ntohs(address.sin_port);
  }
  close(fd);
  return port;
}

bool CanConnect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  const bool connected = connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
  close(fd);
  return connected;
}

// A throw-away redis-server on a free port, without persistence, in a temporary directory.
class RedisTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string server = FindOnPath("redis-server");
    if (server.empty()) GTEST_SKIP() << "redis-server is not installed";
    port_ = FreeTcpPort();
    ASSERT_GT(port_, 0);
    const std::string port = std::to_string(port_);
    const std::string dir = temp_.path().string();
    const std::string log = (temp_ / "redis.log").string();
    std::vector<std::string> args = {server, "--port", port, "--bind", "127.0.0.1", "--save", "",
                                     "--appendonly", "no", "--dir", dir, "--logfile", log};
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    ASSERT_EQ(posix_spawn(&pid_, server.c_str(), nullptr, nullptr, argv.data(), environ), 0);
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (!CanConnect(port_) && Clock::now() < deadline) std::this_thread::sleep_for(milliseconds(20));
    ASSERT_TRUE(CanConnect(port_)) << "redis-server did not start; see " << log;
  }

  void TearDown() override {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      int status = 0;
      waitpid(pid_, &status, 0);
    }
  }

  RendezvousSpec Spec() const {
    RendezvousSpec spec;
    spec.redis_host = "127.0.0.1";
    spec.redis_port = port_;
    return spec;
  }

  TempDir temp_;
  pid_t pid_ = 0;
  int port_ = 0;
};

TEST_F(RedisTest, AllReduceOverRedisRendezvousTwice) {
  // The second run finds the first run's keys (Redis keeps them) under the same job key.
  for (int run = 0; run < 2; ++run) {
    ExpectAllEmpty(RunRanks<std::string>(2, [&](int rank) -> std::string {
      auto member = Join(Spec(), rank, 2, milliseconds(10000), "redis-job");
      if (!member.ok()) return member.status().message();
      std::vector<float> data(1000, static_cast<float>(rank + 1 + run));
      Status reduced = member->group->AllReduceSum(data.data(), data.size());
      if (!reduced.ok()) return reduced.message();
      for (float value : data) {
        if (value != static_cast<float>(3 + 2 * run)) return "wrong sum";
      }
      return "";
    }));
  }
}

}  // namespace
}  // namespace rankscope::trainer
