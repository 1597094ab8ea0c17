#include "tests/trainer/comm_test_util.h"
#include "trainer/rendezvous.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/temp_dir.h"

namespace rankscope::trainer {
namespace {

using std::chrono::milliseconds;
using testing::TempDir;

GetEnv EnvOf(std::map<std::string, std::string> values) {
  auto shared = std::make_shared<const std::map<std::string, std::string>>(std::move(values));
  return [shared](const char* name) -> const char* {
    const auto found = shared->find(name);
    return found == shared->end() ? nullptr : found->second.c_str();
  };
}

using testing::FileSpec;
using testing::WorldOf;

std::vector<uint8_t> Bytes(const std::string& text) { return {text.begin(), text.end()}; }
std::string Text(const std::vector<uint8_t>& bytes) { return {bytes.begin(), bytes.end()}; }

// Runs `body(rank)` for ranks 0..n-1 on threads, started in the given order with a pause
// between starts, and returns what each returned.
template <typename T>
std::vector<T> RunRanks(const std::vector<int>& ranks, const std::function<T(int)>& body,
                        milliseconds stagger = milliseconds(0)) {
  std::vector<T> results(ranks.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) std::this_thread::sleep_for(stagger);
    threads.emplace_back([&, i] { results[i] = body(ranks[i]); });
  }
  for (std::thread& thread : threads) thread.join();
  return results;
}

std::vector<int> AllRanks(int n) {
  std::vector<int> ranks;
  for (int rank = 0; rank < n; ++rank) ranks.push_back(rank);
  return ranks;
}

// The text of a Connect that must fail ("" when it succeeded).
std::string ConnectError(const RendezvousSpec& spec, const World& world, milliseconds timeout,
                         const std::string& job = "test-job") {
  auto connected = Rendezvous::Connect(spec, world, timeout, job);
  return connected.ok() ? std::string() : connected.status().message();
}

// ---- DetectWorld ----

TEST(DetectWorldTest, NoLauncherIsRankZeroOfOne) {
  auto world = DetectWorld(EnvOf({}));
  ASSERT_TRUE(world.ok()) << world.status().message();
  EXPECT_EQ(world->rank, 0);
  EXPECT_EQ(world->world_size, 1);
  EXPECT_EQ(world->local_rank, 0);
  EXPECT_EQ(world->local_world_size, 1);
  EXPECT_EQ(world->launcher, "none");
}

TEST(DetectWorldTest, Torchrun) {
  auto world = DetectWorld(EnvOf({{"RANK", "5"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"},
                                  {"LOCAL_WORLD_SIZE", "4"}}));
  ASSERT_TRUE(world.ok()) << world.status().message();
  EXPECT_EQ(world->rank, 5);
  EXPECT_EQ(world->world_size, 8);
  EXPECT_EQ(world->local_rank, 1);
  EXPECT_EQ(world->local_world_size, 4);
  EXPECT_EQ(world->launcher, "torchrun");
}

TEST(DetectWorldTest, SlurmWithoutTasksPerNode) {
  auto world = DetectWorld(EnvOf({{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "1"}}));
  ASSERT_TRUE(world.ok()) << world.status().message();
  EXPECT_EQ(world->rank, 3);
  EXPECT_EQ(world->world_size, 4);
  EXPECT_EQ(world->local_rank, 1);
  EXPECT_EQ(world->local_world_size, 2);  // unknown: at least enough for the local rank
  EXPECT_EQ(world->launcher, "slurm");
}

TEST(DetectWorldTest, OpenMpi) {
  auto world = DetectWorld(EnvOf({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"},
                                  {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                                  {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}}));
  ASSERT_TRUE(world.ok()) << world.status().message();
  EXPECT_EQ(world->rank, 0);
  EXPECT_EQ(world->world_size, 2);
  EXPECT_EQ(world->local_world_size, 2);
  EXPECT_EQ(world->launcher, "openmpi");
}

TEST(DetectWorldTest, RankWithoutWorldSizeIsAnError) {
  auto world = DetectWorld(EnvOf({{"RANK", "1"}}));
  ASSERT_FALSE(world.ok());
  EXPECT_EQ(world.status().message(), "RANK=1 is set but WORLD_SIZE is not: the world size is unknown");
  auto slurm = DetectWorld(EnvOf({{"SLURM_PROCID", "0"}}));
  ASSERT_FALSE(slurm.ok());
  EXPECT_EQ(slurm.status().message(),
            "SLURM_PROCID=0 is set but SLURM_NTASKS is not: the world size is unknown");
}

TEST(DetectWorldTest, BadValuesAreErrors) {
  auto typo = DetectWorld(EnvOf({{"RANK", "one"}, {"WORLD_SIZE", "2"}}));
  ASSERT_FALSE(typo.ok());
  EXPECT_EQ(typo.status().message().rfind("RANK=", 0), 0u) << typo.status().message();
  EXPECT_NE(typo.status().message().find("one"), std::string::npos) << typo.status().message();
  auto zero = DetectWorld(EnvOf({{"RANK", "0"}, {"WORLD_SIZE", "0"}}));
  EXPECT_FALSE(zero.ok());
  auto beyond = DetectWorld(EnvOf({{"RANK", "2"}, {"WORLD_SIZE", "2"}}));
  ASSERT_FALSE(beyond.ok());
  EXPECT_EQ(beyond.status().code(), StatusCode::kInvalidArgument);
}

// ---- ParseRendezvous ----

TEST(ParseRendezvousTest, FileForms) {
  auto absolute = ParseRendezvous("file:/shared/rdzv");
  ASSERT_TRUE(absolute.ok()) << absolute.status().message();
  EXPECT_EQ(absolute->file_dir, "/shared/rdzv");
  EXPECT_EQ(absolute->Describe(), "file:/shared/rdzv");
  auto relative = ParseRendezvous("file:rdzv");
  ASSERT_TRUE(relative.ok());
  EXPECT_EQ(relative->file_dir, "rdzv");
  auto url = ParseRendezvous("file:///shared/rdzv");
  ASSERT_TRUE(url.ok());
  EXPECT_EQ(url->file_dir, "/shared/rdzv");
}

TEST(ParseRendezvousTest, RedisForms) {
  auto redis = ParseRendezvous("redis://store.example:6379");
  ASSERT_TRUE(redis.ok()) << redis.status().message();
  EXPECT_EQ(redis->redis_host, "store.example");
  EXPECT_EQ(redis->redis_port, 6379);
  EXPECT_TRUE(redis->file_dir.empty());
  EXPECT_EQ(redis->Describe(), "redis://store.example:6379");
  auto ipv6 = ParseRendezvous("redis://[::1]:7000");
  ASSERT_TRUE(ipv6.ok()) << ipv6.status().message();
  EXPECT_EQ(ipv6->redis_host, "::1");
  EXPECT_EQ(ipv6->redis_port, 7000);
  EXPECT_EQ(ipv6->Describe(), "redis://[::1]:7000");
}

TEST(ParseRendezvousTest, BadFormsNameTheAcceptedOnes) {
  auto foo = ParseRendezvous("foo");
  ASSERT_FALSE(foo.ok());
  EXPECT_EQ(foo.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(foo.status().message(), "--rdzv 'foo': expected file:DIR or redis://HOST:PORT");
  auto no_port = ParseRendezvous("redis://host");
  ASSERT_FALSE(no_port.ok());
  EXPECT_EQ(no_port.status().message(),
            "--rdzv 'redis://host': expected file:DIR or redis://HOST:PORT (the port is missing)");
  for (const char* bad : {"", "file:", "redis://", "redis://:6379", "redis://host:", "redis://host:0",
                          "redis://host:65536", "redis://host:port", "redis://::1:6379",
                          "redis://[::1:6379", "http://host:80", "tcp://host:1"}) {
    auto parsed = ParseRendezvous(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_NE(parsed.status().message().find("expected file:DIR or redis://HOST:PORT"), std::string::npos)
        << parsed.status().message();
    EXPECT_EQ(parsed.status().message().find('\n'), std::string::npos);
  }
}

// ---- DefaultRendezvous and JobKey ----

TEST(DefaultRendezvousTest, RunDirectoryComesFirst) {
  auto spec = DefaultRendezvous(EnvOf({{"RANKSCOPE_RUN_DIR", "/runs/r1"}, {"TORCHELASTIC_RUN_ID", "x"}}));
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->Describe(), "file:/runs/r1/rendezvous");
}

TEST(DefaultRendezvousTest, FromLauncherJobIds) {
  auto elastic = DefaultRendezvous(EnvOf({{"TORCHELASTIC_RUN_ID", "abc"}, {"TMPDIR", "/scratch"}}));
  ASSERT_TRUE(elastic.ok());
  EXPECT_EQ(elastic->file_dir, "/scratch/rankscope-rendezvous-abc");
  auto slurm = DefaultRendezvous(EnvOf({{"SLURM_JOB_ID", "123"}, {"SLURM_STEP_ID", "4"}}));
  ASSERT_TRUE(slurm.ok());
  EXPECT_EQ(slurm->file_dir, "/tmp/rankscope-rendezvous-123.4");
  // torchrun's default run id "none" is shared by every run: the master address says more.
  auto master = DefaultRendezvous(EnvOf({{"TORCHELASTIC_RUN_ID", "none"}, {"MASTER_ADDR", "node/7"},
                                         {"MASTER_PORT", "29500"}, {"RANK", "0"}, {"WORLD_SIZE", "2"}}));
  ASSERT_TRUE(master.ok()) << master.status().message();
  EXPECT_EQ(master->file_dir, "/tmp/rankscope-rendezvous-node_7-29500");
}

TEST(DefaultRendezvousTest, MultiRankJobWithoutIdsNeedsRdzv) {
  auto spec = DefaultRendezvous(EnvOf({{"RANK", "0"}, {"WORLD_SIZE", "2"}}));
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(spec.status().message().find("--rdzv"), std::string::npos) << spec.status().message();
  EXPECT_NE(spec.status().message().find("2 ranks"), std::string::npos) << spec.status().message();
  // A single rank meets nobody and gets a directory of its own.
  auto single = DefaultRendezvous(EnvOf({}));
  ASSERT_TRUE(single.ok()) << single.status().message();
  EXPECT_EQ(single->file_dir.rfind("/tmp/rankscope-rendezvous-single-", 0), 0u) << single->file_dir;
  EXPECT_TRUE(single->remove_when_done);
  auto in_run_dir = DefaultRendezvous(EnvOf({{"RANKSCOPE_RUN_DIR", "/r"}}));
  ASSERT_TRUE(in_run_dir.ok());
  EXPECT_FALSE(in_run_dir->remove_when_done);  // the run directory's rendezvous/ is kept
}

TEST(RendezvousTest, ALoneRanksPrivateDirectoryIsRemovedAfterwards) {
  TempDir dir;
  RendezvousSpec spec = FileSpec(dir / "private");
  spec.remove_when_done = true;
  {
    auto rendezvous = Rendezvous::Connect(spec, WorldOf(0, 1), milliseconds(2000));
    ASSERT_TRUE(rendezvous.ok()) << rendezvous.status().message();
    EXPECT_TRUE(std::filesystem::exists(dir / "private"));
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "private"));
  // A directory the user named stays.
  {
    auto rendezvous = Rendezvous::Connect(FileSpec(dir / "named"), WorldOf(0, 1), milliseconds(2000));
    ASSERT_TRUE(rendezvous.ok()) << rendezvous.status().message();
  }
  EXPECT_TRUE(std::filesystem::exists(dir / "named"));
}

TEST(JobKeyTest, PrefersOwnRunIdThenLaunchers) {
  EXPECT_EQ(JobKey(EnvOf({{"RANKSCOPE_RUN_ID", "r7"}, {"SLURM_JOB_ID", "9"}})), "r7");
  EXPECT_EQ(JobKey(EnvOf({{"TORCHELASTIC_RUN_ID", "e1"}, {"SLURM_JOB_ID", "9"}})), "e1");
  EXPECT_EQ(JobKey(EnvOf({{"TORCHELASTIC_RUN_ID", "e1"}, {"TORCHELASTIC_RESTART_COUNT", "2"}})),
            "e1/restart-2");
  EXPECT_EQ(JobKey(EnvOf({{"SLURM_JOB_ID", "9"}, {"SLURM_STEP_ID", "0"}})), "9.0");
  EXPECT_EQ(JobKey(EnvOf({{"TORCHELASTIC_RUN_ID", "none"}, {"MASTER_ADDR", "10.0.0.1"},
                          {"MASTER_PORT", "29500"}})),
            "10.0.0.1:29500");
  EXPECT_EQ(JobKey(EnvOf({})), "");
}

// ---- Connect ----

TEST(RendezvousTest, SingleRankCreatesTheDirectory) {
  TempDir temp;
  const auto dir = temp / "a" / "b" / "rendezvous";
  auto rendezvous = Rendezvous::Connect(FileSpec(dir), WorldOf(0, 1), milliseconds(2000), "");
  ASSERT_TRUE(rendezvous.ok()) << rendezvous.status().message();
  EXPECT_TRUE(std::filesystem::is_directory(dir));
  EXPECT_EQ((*rendezvous)->world().world_size, 1);
  EXPECT_EQ((*rendezvous)->timeout(), milliseconds(2000));
  EXPECT_TRUE((*rendezvous)->MissingRanks("alone", milliseconds(100)).empty());
}

TEST(RendezvousTest, DirectoryThatCannotBeCreatedIsAClearError) {
  TempDir temp;
  std::ofstream(temp / "plain-file") << "x";
  const auto dir = temp / "plain-file" / "rendezvous";
  const std::string error = ConnectError(FileSpec(dir), WorldOf(0, 1), milliseconds(1000));
  EXPECT_EQ(error, "rendezvous store file:" + dir.string() + ": cannot create the directory: Not a directory");
}

TEST(RendezvousTest, RanksExchangeValues) {
  TempDir temp;
  const RendezvousSpec spec = FileSpec(temp.path());
  const auto errors = RunRanks<std::string>(AllRanks(3), [&](int rank) -> std::string {
    auto rendezvous = Rendezvous::Connect(spec, WorldOf(rank, 3), milliseconds(10000), "exchange");
    if (!rendezvous.ok()) return rendezvous.status().message();
    Status set = (*rendezvous)->Set("from-" + std::to_string(rank), Bytes("hello " + std::to_string(rank)));
    if (!set.ok()) return set.message();
    for (int other = 0; other < 3; ++other) {
      auto value = (*rendezvous)->Get("from-" + std::to_string(other));
      if (!value.ok()) return value.status().message();
      if (Text(*value) != "hello " + std::to_string(other)) return "wrong value: " + Text(*value);
    }
    return "";
  });
  for (const std::string& error : errors) EXPECT_EQ(error, "");
}

TEST(RendezvousTest, EmptyValuesDuplicateKeysAndMissingKeys) {
  TempDir temp;
  auto rendezvous = Rendezvous::Connect(FileSpec(temp.path()), WorldOf(0, 1), milliseconds(300), "");
  ASSERT_TRUE(rendezvous.ok()) << rendezvous.status().message();
  ASSERT_TRUE((*rendezvous)->Set("empty", {}).ok());
  auto empty = (*rendezvous)->Get("empty");
  ASSERT_TRUE(empty.ok()) << empty.status().message();
  EXPECT_TRUE(empty->empty());
  Status again = (*rendezvous)->Set("empty", Bytes("x"));
  EXPECT_EQ(again.code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(again.message(), "rendezvous key 'empty' is already set");
  auto missing = (*rendezvous)->Get("never");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(),
            "rendezvous key 'never' was not set within 300ms (store file:" + temp.path().string() + ")");
}

TEST(RendezvousTest, WorldSizeMismatchNamesBothValues) {
  TempDir temp;
  const RendezvousSpec spec = FileSpec(temp.path());
  const auto errors = RunRanks<std::string>(AllRanks(2), [&](int rank) {
    return ConnectError(spec, WorldOf(rank, rank == 0 ? 2 : 3), milliseconds(5000));
  });
  EXPECT_EQ(errors[0], "world-size mismatch: this rank has WORLD_SIZE=2, rank 1 has 3");
  EXPECT_EQ(errors[1], "world-size mismatch: this rank has WORLD_SIZE=3, rank 0 has 2");
}

// Rank 2 is beyond rank 0's world: rank 0 never waits for it, so it can only tell at its
// timeout that the rendezvous it sees is not an older run's.
TEST(RendezvousTest, WorldSizeMismatchBeyondRankZerosWorld) {
  TempDir temp;
  const RendezvousSpec spec = FileSpec(temp.path());
  const auto errors = RunRanks<std::string>(AllRanks(3), [&](int rank) {
    return ConnectError(spec, WorldOf(rank, rank == 0 ? 2 : 3), milliseconds(1000));
  });
  EXPECT_EQ(errors[0], "world-size mismatch: this rank has WORLD_SIZE=2, rank 1 has 3");
  EXPECT_EQ(errors[1], "world-size mismatch: this rank has WORLD_SIZE=3, rank 0 has 2");
  EXPECT_EQ(errors[2], "world-size mismatch: this rank has WORLD_SIZE=3, rank 0 has 2");
}

TEST(RendezvousTest, TimeoutNamesTheRanksThatDidNotJoin) {
  TempDir temp;
  const RendezvousSpec spec = FileSpec(temp.path());
  const auto start = std::chrono::steady_clock::now();
  const auto errors = RunRanks<std::string>({0, 2}, [&](int rank) {
    return ConnectError(spec, WorldOf(rank, 4), milliseconds(1000));
  });
  const std::string expected =
      "rendezvous timed out after 1s: ranks 1, 3 did not join (store file:" + temp.path().string() + ")";
  EXPECT_EQ(errors[0], expected);
  EXPECT_EQ(errors[1], expected);  // rank 0 tells the ranks that did join
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

TEST(RendezvousTest, TimeoutWithoutRankZero) {
  TempDir temp;
  const std::string error = ConnectError(FileSpec(temp.path()), WorldOf(1, 2), milliseconds(500));
  EXPECT_EQ(error, "rendezvous timed out after 500ms: rank 0 did not join (store file:" +
                       temp.path().string() + ")");
}

TEST(RendezvousTest, UnreachableRedisIsOneClearLine) {
  auto spec = ParseRendezvous("redis://127.0.0.1:1");
  ASSERT_TRUE(spec.ok());
  const auto start = std::chrono::steady_clock::now();
  const std::string error = ConnectError(*spec, WorldOf(0, 2), milliseconds(2000));
  EXPECT_EQ(error, "cannot reach rendezvous store redis://127.0.0.1:1: Connection refused");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

// A rerun in the same directory with the same job key: the old run's keys are all still
// there, and the new rank 1 starts before the new rank 0, so it reads them first.
TEST(RendezvousTest, StaleFilesOfEarlierRunsDoNotConfuseANewOne) {
  TempDir temp;
  const RendezvousSpec spec = FileSpec(temp.path());
  auto run = [&](int world_size, const std::string& value, bool rank_zero_last) {
    std::vector<int> order = AllRanks(world_size);
    if (rank_zero_last) std::rotate(order.begin(), order.begin() + 1, order.end());
    return RunRanks<std::string>(
        order,
        [&](int rank) -> std::string {
          auto rendezvous = Rendezvous::Connect(spec, WorldOf(rank, world_size), milliseconds(10000), "rerun");
          if (!rendezvous.ok()) return rendezvous.status().message();
          if (rank == 0) {
            Status set = (*rendezvous)->Set("value", Bytes(value));
            if (!set.ok()) return set.message();
          }
          auto got = (*rendezvous)->Get("value");
          if (!got.ok()) return got.status().message();
          return Text(*got);
        },
        milliseconds(rank_zero_last ? 300 : 0));
  };
  for (const std::string& got : run(3, "first", false)) EXPECT_EQ(got, "first");
  // A run that failed half-way (rank 2 never came) leaves an incomplete generation.
  const auto failed = RunRanks<std::string>({0, 1}, [&](int rank) {
    return ConnectError(spec, WorldOf(rank, 3), milliseconds(300), "rerun");
  });
  EXPECT_NE(failed[0].find("rank 2 did not join"), std::string::npos) << failed[0];
  for (int attempt = 0; attempt < 5; ++attempt) {
    const std::string value = "run " + std::to_string(attempt);
    for (const std::string& got : run(2 + attempt % 2, value, true)) EXPECT_EQ(got, value);
  }
}

TEST(RendezvousTest, DifferentJobKeysShareADirectory) {
  TempDir temp;
  const RendezvousSpec spec = FileSpec(temp.path());
  const auto values = RunRanks<std::string>(AllRanks(4), [&](int index) -> std::string {
    const std::string job = index < 2 ? "job-a" : "job-b";
    auto rendezvous = Rendezvous::Connect(spec, WorldOf(index % 2, 2), milliseconds(10000), job);
    if (!rendezvous.ok()) return rendezvous.status().message();
    if (index % 2 == 0 && !(*rendezvous)->Set("name", Bytes(job)).ok()) return "set failed";
    auto got = (*rendezvous)->Get("name");
    return got.ok() ? Text(*got) : got.status().message();
  });
  EXPECT_EQ(values, (std::vector<std::string>{"job-a", "job-a", "job-b", "job-b"}));
}

TEST(RendezvousTest, MissingRanksNamesRanksThatDoNotCheckIn) {
  TempDir temp;
  const RendezvousSpec spec = FileSpec(temp.path());
  const auto missing = RunRanks<std::vector<int>>(AllRanks(3), [&](int rank) -> std::vector<int> {
    auto rendezvous = Rendezvous::Connect(spec, WorldOf(rank, 3), milliseconds(10000), "missing");
    if (!rendezvous.ok()) return {-1};
    std::vector<int> result;
    // Round "all": everybody checks in. Round "some": rank 1 stays away.
    if (!(*rendezvous)->MissingRanks("all", milliseconds(5000)).empty()) result.push_back(-2);
    if (rank != 1) {
      for (int gone : (*rendezvous)->MissingRanks("some", milliseconds(300))) result.push_back(gone);
    }
    return result;
  });
  EXPECT_EQ(missing[0], std::vector<int>{1});
  EXPECT_EQ(missing[1], std::vector<int>{});
  EXPECT_EQ(missing[2], std::vector<int>{1});
}

TEST(RendezvousTest, NamespacesAreNumberedInOrder) {
  TempDir temp;
  auto rendezvous = Rendezvous::Connect(FileSpec(temp.path()), WorldOf(0, 1), milliseconds(1000), "");
  ASSERT_TRUE(rendezvous.ok());
  EXPECT_EQ((*rendezvous)->NewNamespace("gloo"), "gloo-0");
  EXPECT_EQ((*rendezvous)->NewNamespace("nccl"), "nccl-1");
}

TEST(RendezvousTest, BadArgumentsAreRejected) {
  TempDir temp;
  EXPECT_NE(ConnectError(FileSpec(temp.path()), WorldOf(2, 2), milliseconds(100)), "");
  EXPECT_NE(ConnectError(FileSpec(temp.path()), WorldOf(0, 1), milliseconds(0)), "");
  EXPECT_NE(ConnectError(RendezvousSpec{}, WorldOf(0, 1), milliseconds(100)), "");
}

}  // namespace
}  // namespace rankscope::trainer
