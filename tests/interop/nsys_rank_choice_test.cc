// Which process of an nsys export is which rank (interop/import_internal.h ChooseNsysRanks):
// a table of evidence, from none to conflicting, and the ranks and notes each must give. The
// chooser reads no file, so every case is written out here.
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "interop/import_internal.h"

namespace rankscope::interop::import {
namespace {

NsysProcessEvidence Plain(int64_t pid) {
  NsysProcessEvidence process;
  process.pid = pid;
  return process;
}

NsysProcessEvidence Nccl(int64_t pid, int rank, int ranks) {
  NsysProcessEvidence process = Plain(pid);
  process.nccl_rank = std::pair<int, int>{rank, ranks};
  return process;
}

NsysProcessEvidence Mpi(int64_t pid, int rank, std::string where = "MPI_RANKS") {
  NsysProcessEvidence process = Plain(pid);
  process.mpi_rank = rank;
  process.mpi_evidence = std::move(where);
  return process;
}

NsysProcessEvidence NcclAndMpi(int64_t pid, int nccl_rank, int ranks, int mpi_rank) {
  NsysProcessEvidence process = Nccl(pid, nccl_rank, ranks);
  process.mpi_rank = mpi_rank;
  process.mpi_evidence = "MPI_RANKS";
  return process;
}

struct Expected {
  int64_t pid;
  int rank;
  bool from_evidence;
  std::optional<int> world_size = std::nullopt;
  std::optional<int> local_rank = std::nullopt;
};

struct Case {
  std::string name;
  std::vector<NsysProcessEvidence> processes;
  std::map<std::string, std::string> environment = {};
  bool blobs_exported = false;
  std::set<int> ranks_taken = {};
  NsysRankSource source;
  std::vector<Expected> ranks;   // by pid
  std::vector<std::string> notes;  // exactly
};

constexpr const char* kNoPayloads =
    "the export has no NCCL init payloads (nsys export --include-blobs=true keeps them)";

std::vector<Case> Cases() {
  std::vector<Case> cases;
  cases.push_back({"OneProcessWithoutEvidence", {Plain(77)}, {}, false, {}, NsysRankSource::kProcessOrder,
                   {{77, 0, false}}, {std::string("ranks by process order (pid 77 = rank 0): ") + kNoPayloads}});
  cases.push_back({"OneProcessWithBlobsExportedButNoPayload", {Plain(77)}, {}, true, {},
                   NsysRankSource::kProcessOrder, {{77, 0, false}},
                   {"ranks by process order (pid 77 = rank 0): the export has no NCCL init payloads"}});
  cases.push_back({"OneProcessRankedByItsLaunchEnvironment",
                   {Plain(77)},
                   {{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"}},
                   false,
                   {},
                   NsysRankSource::kEnvironment,
                   {{77, 3, true, 4, 1}},
                   {"rank from the launch environment's torchrun variables (pid 77 = rank 3)"}});
  cases.push_back({"OneProcessWithAnUnusableLaunchEnvironment",
                   {Plain(77)},
                   {{"RANK", "three"}},
                   false,
                   {},
                   NsysRankSource::kProcessOrder,
                   {{77, 0, false}},
                   {"the launch environment's rank variables are not usable (RANK='three' is not a valid rank)",
                    std::string("ranks by process order (pid 77 = rank 0): ") + kNoPayloads}});
  // Whose environment nsys recorded is known only for an export of one process.
  cases.push_back({"TwoProcessesIgnoreTheLaunchEnvironment",
                   {Plain(300), Plain(200)},
                   {{"RANK", "3"}, {"WORLD_SIZE", "4"}},
                   false,
                   {},
                   NsysRankSource::kProcessOrder,
                   {{200, 0, false}, {300, 1, false}},
                   {std::string("ranks by process order (pid 200 = rank 0, pid 300 = rank 1): ") + kNoPayloads}});
  cases.push_back({"NcclPayloadsForEveryProcess",
                   {Nccl(300, 0, 2), Nccl(200, 1, 2)},
                   {},
                   true,
                   {},
                   NsysRankSource::kNcclPayload,
                   {{200, 1, true, 2}, {300, 0, true, 2}},
                   {"ranks from NCCL's ncclCommInitRank payloads (pid 200 = rank 1, pid 300 = rank 0)"}});
  cases.push_back({"NcclPayloadsForSomeProcesses",
                   {Nccl(300, 0, 4), Plain(200), Plain(400)},
                   {},
                   true,
                   {},
                   NsysRankSource::kNcclPayload,
                   {{200, 1, false, 4}, {300, 0, true, 4}, {400, 2, false, 4}},
                   {"ranks from NCCL's ncclCommInitRank payloads (pid 200 = rank 1, pid 300 = rank 0, pid 400 = "
                    "rank 2); the others by process order"}});
  cases.push_back({"NcclPayloadsGivingOneRankTwice",
                   {Nccl(200, 0, 2), Nccl(300, 0, 2)},
                   {},
                   true,
                   {},
                   NsysRankSource::kProcessOrder,
                   {{200, 0, false}, {300, 1, false}},
                   {"ranks by process order (pid 200 = rank 0, pid 300 = rank 1): NCCL init payloads give two "
                    "processes the same rank"}});
  cases.push_back({"DuplicateNcclRanksFallBackToDistinctMpiRanks",
                   {NcclAndMpi(200, 0, 2, 1), NcclAndMpi(300, 0, 2, 0)},
                   {},
                   true,
                   {},
                   NsysRankSource::kMpi,
                   {{200, 1, true}, {300, 0, true}},
                   {"ranks from nsys's MPI trace, MPI_RANKS (pid 200 = rank 1, pid 300 = rank 0) (NCCL init payloads "
                    "give two processes the same rank)"}});
  cases.push_back({"DuplicateRanksOfEveryKindFallBackToProcessOrder",
                   {NcclAndMpi(200, 0, 2, 5), NcclAndMpi(300, 0, 2, 5)},
                   {},
                   true,
                   {},
                   NsysRankSource::kProcessOrder,
                   {{200, 0, false}, {300, 1, false}},
                   {"ranks by process order (pid 200 = rank 0, pid 300 = rank 1): NCCL init payloads give two "
                    "processes the same rank; nsys's MPI trace gives two processes the same rank"}});
  // NCCL and MPI disagree: NCCL's payloads come first.
  cases.push_back({"ConflictingEvidenceNcclWins",
                   {NcclAndMpi(200, 1, 2, 0), NcclAndMpi(300, 0, 2, 1)},
                   {},
                   true,
                   {},
                   NsysRankSource::kNcclPayload,
                   {{200, 1, true, 2}, {300, 0, true, 2}},
                   {"ranks from NCCL's ncclCommInitRank payloads (pid 200 = rank 1, pid 300 = rank 0)"}});
  cases.push_back({"MpiRanksNamedByThreads",
                   {Mpi(1230493, 0, "thread 'MPI Rank 0'")},
                   {},
                   false,
                   {},
                   NsysRankSource::kMpi,
                   {{1230493, 0, true}},
                   {"ranks from nsys's MPI trace, thread 'MPI Rank 0' (pid 1230493 = rank 0)"}});
  // Ranks other inputs of the run hold are not given again.
  cases.push_back({"ProcessOrderSkipsRanksTaken",
                   {Plain(30), Plain(10), Plain(20)},
                   {},
                   true,
                   {0, 2},
                   NsysRankSource::kProcessOrder,
                   {{10, 1, false}, {20, 3, false}, {30, 4, false}},
                   {"ranks by process order (pid 10 = rank 1, pid 20 = rank 3, pid 30 = rank 4): the export has no "
                    "NCCL init payloads"}});
  cases.push_back({"ProcessesWithoutPayloadSkipPayloadRanksAndRanksTaken",
                   {Nccl(20, 0, 3), Plain(10)},
                   {},
                   true,
                   {1},
                   NsysRankSource::kNcclPayload,
                   {{10, 2, false, 3}, {20, 0, true, 3}},
                   {"ranks from NCCL's ncclCommInitRank payloads (pid 10 = rank 2, pid 20 = rank 0); the others by "
                    "process order"}});
  std::vector<NsysProcessEvidence> many;
  std::vector<Expected> many_ranks;
  for (int i = 0; i < 10; ++i) {
    many.push_back(Plain(100 + i));
    many_ranks.push_back({100 + i, i, false});
  }
  cases.push_back({"ManyProcessesListEightInTheNote", many, {}, true, {}, NsysRankSource::kProcessOrder, many_ranks,
                   {"ranks by process order (pid 100 = rank 0, pid 101 = rank 1, pid 102 = rank 2, pid 103 = rank 3, "
                    "pid 104 = rank 4, pid 105 = rank 5, pid 106 = rank 6, pid 107 = rank 7, ... 2 more): the export "
                    "has no NCCL init payloads"}});
  return cases;
}

class NsysRankChoiceTest : public ::testing::TestWithParam<Case> {};

TEST_P(NsysRankChoiceTest, RanksAndNotes) {
  const Case& c = GetParam();
  NsysRankEvidence evidence;
  evidence.processes = c.processes;
  evidence.launch_environment = c.environment;
  evidence.blobs_exported = c.blobs_exported;
  evidence.ranks_taken = c.ranks_taken;
  const Result<NsysRankChoice> choice = ChooseNsysRanks(evidence);
  ASSERT_TRUE(choice.ok()) << choice.status().message();
  EXPECT_EQ(NsysRankSourceName(choice->source), NsysRankSourceName(c.source));
  ASSERT_EQ(choice->ranks.size(), c.ranks.size());
  for (size_t i = 0; i < c.ranks.size(); ++i) {
    SCOPED_TRACE("pid " + std::to_string(c.ranks[i].pid));
    const NsysRankAssignment& got = choice->ranks[i];
    EXPECT_EQ(got.pid, c.ranks[i].pid);
    EXPECT_EQ(got.rank, c.ranks[i].rank);
    EXPECT_EQ(got.from_evidence, c.ranks[i].from_evidence);
    EXPECT_EQ(got.world_size, c.ranks[i].world_size);
    EXPECT_EQ(got.local_rank, c.ranks[i].local_rank);
  }
  EXPECT_EQ(choice->notes, c.notes);
}

INSTANTIATE_TEST_SUITE_P(Evidence, NsysRankChoiceTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& param) { return param.param.name; });

TEST(NsysRankChoiceTest, NoProcessIsAnError) {
  const Result<NsysRankChoice> choice = ChooseNsysRanks(NsysRankEvidence{});
  ASSERT_FALSE(choice.ok());
  EXPECT_NE(choice.status().message().find("no process"), std::string::npos) << choice.status().message();
}

TEST(NsysRankChoiceTest, APidListedTwiceIsAnError) {
  NsysRankEvidence evidence;
  evidence.processes = {Plain(5), Nccl(6, 0, 2), Plain(5)};
  const Result<NsysRankChoice> choice = ChooseNsysRanks(evidence);
  ASSERT_FALSE(choice.ok());
  EXPECT_NE(choice.status().message().find("pid 5 is listed twice"), std::string::npos) << choice.status().message();
}

TEST(NsysRankChoiceTest, SourceNamesAreTheRankFilesMetaValues) {
  EXPECT_EQ(NsysRankSourceName(NsysRankSource::kNcclPayload), "nccl init payload");
  EXPECT_EQ(NsysRankSourceName(NsysRankSource::kMpi), "nsys mpi trace");
  EXPECT_EQ(NsysRankSourceName(NsysRankSource::kEnvironment), "launch environment");
  EXPECT_EQ(NsysRankSourceName(NsysRankSource::kProcessOrder), "process order");
}

}  // namespace
}  // namespace rankscope::interop::import
