#include "collector/rank_env.h"

#include <map>
#include <string>

#include <gtest/gtest.h>

namespace rankscope::collector {
namespace {

GetEnv FakeEnv(std::map<std::string, std::string> values) {
  return [values = std::move(values)](const char* name) -> const char* {
    auto found = values.find(name);
    return found != values.end() ? found->second.c_str() : nullptr;
  };
}

TEST(DetectRank, TorchrunComesFirst) {
  auto env = FakeEnv({{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"},
                      {"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "16"}});
  auto rank = DetectRank(env);
  ASSERT_TRUE(rank.ok()) << rank.status().message();
  EXPECT_EQ(rank->rank, 3);
  EXPECT_EQ(rank->world_size, 8);
  EXPECT_EQ(rank->local_rank, 1);
  EXPECT_EQ(rank->source, "torchrun");
}

TEST(DetectRank, ReadsTheLocalWorldSizeWhenTheLauncherGivesIt) {
  auto torchrun = DetectRank(FakeEnv({{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"LOCAL_WORLD_SIZE", "4"}}));
  ASSERT_TRUE(torchrun.ok());
  EXPECT_EQ(torchrun->local_world_size, 4);
  auto ompi = DetectRank(FakeEnv({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                                  {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}}));
  ASSERT_TRUE(ompi.ok());
  EXPECT_EQ(ompi->local_world_size, 2);
  // Slurm's per-node count may be absent or in its "2(x3)" form: then it is simply unknown.
  auto slurm = DetectRank(FakeEnv({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "6"}, {"SLURM_NTASKS_PER_NODE", "2(x3)"}}));
  ASSERT_TRUE(slurm.ok());
  EXPECT_FALSE(slurm->local_world_size.has_value());
}

TEST(DetectRank, FallsThroughTheLaunchersInOrder) {
  auto slurm = DetectRank(FakeEnv({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "16"},
                                   {"SLURM_LOCALID", "1"}, {"OMPI_COMM_WORLD_RANK", "2"}}));
  ASSERT_TRUE(slurm.ok());
  EXPECT_EQ(slurm->source, "slurm");
  EXPECT_EQ(slurm->rank, 5);
  EXPECT_EQ(slurm->local_rank, 1);
  auto ompi = DetectRank(FakeEnv({{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                                  {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}, {"PMI_RANK", "1"}}));
  ASSERT_TRUE(ompi.ok());
  EXPECT_EQ(ompi->source, "openmpi");
  EXPECT_EQ(ompi->world_size, 4);
  auto pmi = DetectRank(FakeEnv({{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}}));
  ASSERT_TRUE(pmi.ok());
  EXPECT_EQ(pmi->source, "pmi");
  EXPECT_FALSE(pmi->local_rank.has_value());
}

TEST(DetectRank, NoLauncherMeansRankUnknown) {
  auto none = DetectRank(FakeEnv({{"WORLD_SIZE", "4"}}));
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->rank.has_value());
  EXPECT_TRUE(none->source.empty());
}

TEST(DetectRank, BadValuesAreErrorsNotRankUnknown) {
  for (auto env : {FakeEnv({{"RANK", "x"}}), FakeEnv({{"RANK", "-1"}}),
                   FakeEnv({{"RANK", "2"}, {"WORLD_SIZE", "2"}}),
                   FakeEnv({{"RANK", "0"}, {"WORLD_SIZE", "0"}}),
                   FakeEnv({{"RANK", "99999999999"}})}) {
    auto rank = DetectRank(env);
    ASSERT_FALSE(rank.ok());
    EXPECT_EQ(rank.status().message().find('\n'), std::string::npos);
  }
}

TEST(ReadConfig, TraceSelectionDefaultsToEverythingAndRejectsUnknownItems) {
  auto all = ReadConfig(FakeEnv({{"RANKSCOPE_RUN_DIR", "/tmp/x"}, {"RANKSCOPE_RUN_ID", "abc"}}));
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->trace.nvtx && all->trace.cuda && all->trace.nccl);
  auto some = ReadConfig(FakeEnv({{"RANKSCOPE_RUN_DIR", "/tmp/x"}, {"RANKSCOPE_RUN_ID", "abc"},
                                  {"RANKSCOPE_TRACE", "nccl,nvtx"}}));
  ASSERT_TRUE(some.ok());
  EXPECT_TRUE(some->trace.nvtx && some->trace.nccl);
  EXPECT_FALSE(some->trace.cuda);
  auto bad = ReadConfig(FakeEnv({{"RANKSCOPE_RUN_DIR", "/tmp/x"}, {"RANKSCOPE_RUN_ID", "abc"},
                                 {"RANKSCOPE_TRACE", "nvtx,mpi"}}));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("mpi"), std::string::npos);
  EXPECT_NE(bad.status().message().find("RANKSCOPE_TRACE"), std::string::npos);
}

TEST(ReadConfig, ProgressFileIsOneOrZero) {
  const auto with = [](const char* value) {
    return ReadConfig(FakeEnv({{"RANKSCOPE_RUN_DIR", "/tmp/x"}, {"RANKSCOPE_RUN_ID", "abc"},
                               {"RANKSCOPE_PROGRESS_FILE", value}}));
  };
  auto unset = ReadConfig(FakeEnv({{"RANKSCOPE_RUN_DIR", "/tmp/x"}, {"RANKSCOPE_RUN_ID", "abc"}}));
  ASSERT_TRUE(unset.ok());
  EXPECT_FALSE(unset->progress_file);
  ASSERT_TRUE(with("1").ok());
  EXPECT_TRUE(with("1")->progress_file);
  ASSERT_TRUE(with("0").ok());
  EXPECT_FALSE(with("0")->progress_file);
  auto bad = with("yes");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("RANKSCOPE_PROGRESS_FILE='yes' is not 0 or 1"), std::string::npos)
      << bad.status().message();
}

TEST(ReadConfig, InertWithoutRunDirAndStrictWithIt) {
  auto inert = ReadConfig(FakeEnv({{"RANK", "nonsense"}}));
  ASSERT_TRUE(inert.ok());
  EXPECT_TRUE(inert->run_dir.empty());
  auto good = ReadConfig(FakeEnv({{"RANKSCOPE_RUN_DIR", "/tmp/x"}, {"RANKSCOPE_RUN_ID", "abc"},
                                  {"RANKSCOPE_BUFFER_MB", "16"}, {"RANK", "0"}}));
  ASSERT_TRUE(good.ok()) << good.status().message();
  EXPECT_EQ(good->buffer_bytes, size_t{16} << 20);
  EXPECT_EQ(good->rank.rank, 0);
  EXPECT_FALSE(ReadConfig(FakeEnv({{"RANKSCOPE_RUN_DIR", "/tmp/x"}, {"RANKSCOPE_RUN_ID", "a b"}})).ok());
  EXPECT_FALSE(ReadConfig(FakeEnv({{"RANKSCOPE_RUN_DIR", "/tmp/x"}, {"RANKSCOPE_RUN_ID", "abc"},
                                   {"RANKSCOPE_CLOCK", "hpet"}})).ok());
  EXPECT_FALSE(ReadConfig(FakeEnv({{"RANKSCOPE_RUN_DIR", "/tmp/x"}, {"RANKSCOPE_RUN_ID", "abc"},
                                   {"RANKSCOPE_BUFFER_MB", "0"}})).ok());
}

}  // namespace
}  // namespace rankscope::collector
