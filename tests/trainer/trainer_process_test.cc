// The real rankscope-trainer binary, one or more ranks as processes: DDP's numerical
// consistency, learning, exact resume, real overlap (from the collector's trace), and
// failures (a dead rank, bad arguments, an unreachable rendezvous, a world-size mismatch).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "tests/child_process.h"
#include "trace/reader.h"
#include "trace/run_dir.h"
#include "trainer/checkpoint.h"
#include "trainer/device.h"

namespace rankscope::trainer {
namespace {

using rankscope::testing::ChildProcess;
using rankscope::testing::ProcessOptions;
using rankscope::testing::ProcessResult;
using rankscope::testing::ReadFile;
using rankscope::testing::TempDir;

// A model small enough that a step takes about a millisecond.
const std::vector<std::string> kSmallModel = {"--features", "16", "--width", "32", "--depth", "2",
                                              "--classes", "4", "--samples", "2048", "--threads", "1",
                                              "--log-every", "0", "--timeout", "30"};

std::map<std::string, std::string> RankEnvironment(int rank, int world_size) {
  std::map<std::string, std::string> env = rankscope::testing::CurrentEnvironment();
  for (const char* name : {"LD_PRELOAD", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "RANKSCOPE_RUN_DIR",
                           "TORCHELASTIC_RUN_ID", "MASTER_ADDR", "MASTER_PORT"}) {
    env.erase(name);
  }
  env["RANK"] = std::to_string(rank);
  env["WORLD_SIZE"] = std::to_string(world_size);
  env["LOCAL_RANK"] = std::to_string(rank);
  env["LOCAL_WORLD_SIZE"] = std::to_string(world_size);
  return env;
}

std::vector<std::string> TrainerArgv(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {TRAINER_BINARY};
  argv.insert(argv.end(), kSmallModel.begin(), kSmallModel.end());
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

// world_size ranks of the trainer with a fresh file rendezvous; per-rank extra arguments.
std::vector<ProcessResult> RunRanks(int world_size, const std::vector<std::string>& args, const TempDir& dir,
                                    const std::string& tag,
                                    const std::vector<std::vector<std::string>>& per_rank_args = {}) {
  std::vector<std::unique_ptr<ChildProcess>> ranks;
  for (int rank = 0; rank < world_size; ++rank) {
    std::vector<std::string> all = args;
    all.push_back("--rdzv=file:" + (dir / ("rdzv-" + tag)).string());
    if (static_cast<size_t>(rank) < per_rank_args.size()) {
      all.insert(all.end(), per_rank_args[rank].begin(), per_rank_args[rank].end());
    }
    ranks.push_back(std::make_unique<ChildProcess>(TrainerArgv(all), RankEnvironment(rank, world_size),
                                                   ProcessOptions{.timeout = std::chrono::seconds(120)}));
  }
  std::vector<ProcessResult> results;
  for (auto& rank : ranks) results.push_back(rank->Wait());
  return results;
}

void ExpectAllSucceeded(const std::vector<ProcessResult>& results) {
  for (size_t rank = 0; rank < results.size(); ++rank) {
    EXPECT_EQ(results[rank].exit_code, 0) << "rank " << rank << " stderr:\n" << results[rank].err;
    EXPECT_NE(results[rank].out.find("samples/s, step time median"), std::string::npos) << results[rank].out;
  }
}

std::vector<float> Parameters(const std::filesystem::path& checkpoint) {
  Result<CheckpointContents> contents = LoadCheckpoint(checkpoint.string());
  EXPECT_TRUE(contents.ok()) << contents.status().ToString();
  return contents.ok() ? contents->parameters : std::vector<float>{};
}

TEST(TrainerProcess, TwoRanksWithBatchBMatchOneRankWithBatch2B) {
  TempDir dir;
  const std::vector<std::string> common = {"--steps", "10", "--seed", "7", "--warmup-steps", "2"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), common.begin(), common.end());
    return extra;
  };
  ExpectAllSucceeded(RunRanks(1, with({"--batch", "16", "--checkpoint", (dir / "one.ckpt").string()}), dir, "one"));
  ExpectAllSucceeded(RunRanks(2, with({"--batch", "8", "--checkpoint", (dir / "two.ckpt").string()}), dir, "two"));
  const std::vector<float> one = Parameters(dir / "one.ckpt");
  const std::vector<float> two = Parameters(dir / "two.ckpt");
  ASSERT_EQ(one.size(), two.size());
  ASSERT_FALSE(one.empty());
  // Same global batch, same samples, same learning rate: the runs differ only in the order
  // of fp32 sums (one GEMM over 16 rows vs. two over 8, then an all-reduce). Each step's
  // rounding differences are ~1e-7 relative; 10 SGD steps keep them far below 1e-4 on
  // parameters of size ~0.1–0.3.
  double max_difference = 0;
  for (size_t i = 0; i < one.size(); ++i) {
    max_difference = std::max(max_difference, static_cast<double>(std::fabs(one[i] - two[i])));
  }
  EXPECT_LT(max_difference, 1e-4);
  // And training did move the parameters (so the comparison is not vacuous).
  ExpectAllSucceeded(RunRanks(1, with({"--batch", "16", "--steps", "1", "--checkpoint", (dir / "start.ckpt").string()}),
                              dir, "start"));
  const std::vector<float> early = Parameters(dir / "start.ckpt");
  double moved = 0;
  for (size_t i = 0; i < one.size() && i < early.size(); ++i) {
    moved = std::max(moved, static_cast<double>(std::fabs(one[i] - early[i])));
  }
  EXPECT_GT(moved, 1e-3);
}

TEST(TrainerProcess, LossDecreasesOnTheSyntheticTask) {
  TempDir dir;
  const std::string metrics = (dir / "metrics-{rank}.json").string();
  ExpectAllSucceeded(RunRanks(2, {"--steps", "60", "--batch", "32", "--lr", "1.0", "--metrics-out", metrics}, dir, "loss"));
  const nlohmann::json rank0 = nlohmann::json::parse(ReadFile(dir / "metrics-0.json"));
  const auto& steps = rank0.at("steps");
  ASSERT_EQ(steps.size(), 60u);
  auto mean_loss = [&](size_t first, size_t count) {
    double sum = 0;
    for (size_t i = first; i < first + count; ++i) sum += steps[i].at("loss").get<double>();
    return sum / static_cast<double>(count);
  };
  const double start = mean_loss(0, 5);
  const double end = mean_loss(55, 5);
  EXPECT_GT(start, 1.2);  // about ln(4) = 1.39 for 4 classes at random initialization
  EXPECT_LT(end, 0.7 * start) << "loss " << start << " -> " << end;
  double accuracy = 0;
  for (size_t i = 55; i < 60; ++i) accuracy += steps[i].at("accuracy").get<double>() / 5;
  EXPECT_GT(accuracy, 0.5);  // chance is 0.25
}

// FSDP shards what DDP replicates; on the same batches the losses are DDP's to float
// rounding, step by step, on 2 and 4 ranks (4 does not divide the layers: padding), with
// accumulation and gradient clipping (a global norm over every rank's shards).
TEST(TrainerProcess, FsdpLossesAreDdpLossesOnTwoAndFourRanks) {
  TempDir dir;
  for (int ranks : {2, 4}) {
    SCOPED_TRACE(ranks);
    std::map<std::string, std::vector<double>> losses;
    for (const std::string parallel : {"ddp", "fsdp"}) {
      const std::string tag = parallel + std::to_string(ranks);
      const std::string metrics = (dir / (tag + "-{rank}.json")).string();
      ExpectAllSucceeded(RunRanks(ranks,
                                  {"--parallel", parallel, "--steps", "12", "--batch", "8", "--accum", "2",
                                   "--lr", "0.5", "--clip-grad-norm", "0.5", "--metrics-out", metrics},
                                  dir, tag));
      const nlohmann::json rank0 = nlohmann::json::parse(ReadFile(dir / (tag + "-0.json")));
      for (const auto& step : rank0.at("steps")) losses[parallel].push_back(step.at("loss").get<double>());
    }
    ASSERT_EQ(losses["ddp"].size(), 12u);
    ASSERT_EQ(losses["fsdp"].size(), 12u);
    for (size_t i = 0; i < 12; ++i) EXPECT_NEAR(losses["fsdp"][i], losses["ddp"][i], 1e-4) << "step " << i;
    EXPECT_LT(losses["ddp"].back(), losses["ddp"].front());  // it trained: the comparison means something
  }
}

// A pipeline computes what one rank accumulating over the same micro-batches computes: the
// losses (on the last stage) step by step, for 1F1B and GPipe on 2 and 4 stages, and with 2
// stages x 2 replicas what DDP on 2 ranks computes. Stages before the last have no loss.
TEST(TrainerProcess, PipelineLossesAreOneRanksOnTwoAndFourRanks) {
  TempDir dir;
  const std::vector<std::string> common = {"--depth", "3", "--steps", "12", "--batch", "8", "--lr", "8", "--warmup-steps", "1",
                                           "--clip-grad-norm", "1"};
  const auto losses_of = [&](int ranks, std::vector<std::string> args, const std::string& tag, int reporting_rank) {
    args.insert(args.begin(), common.begin(), common.end());
    args.push_back("--metrics-out=" + (dir / (tag + "-{rank}.json")).string());
    ExpectAllSucceeded(RunRanks(ranks, args, dir, tag));
    std::vector<double> losses;
    const nlohmann::json document =
        nlohmann::json::parse(ReadFile(dir / (tag + "-" + std::to_string(reporting_rank) + ".json")));
    for (const auto& step : document.at("steps")) losses.push_back(step.at("loss").get<double>());
    return losses;
  };
  const auto expect_near = [](const std::vector<double>& got, const std::vector<double>& want) {
    ASSERT_EQ(got.size(), 12u);
    ASSERT_EQ(want.size(), 12u);
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-4) << "step " << i;
    EXPECT_LT(want.back(), want.front());  // it trained: the comparison means something
  };
  const std::vector<double> one_rank = losses_of(1, {"--accum", "4"}, "one", 0);
  for (int ranks : {2, 4}) {
    for (const std::string schedule : {"1f1b", "gpipe"}) {
      SCOPED_TRACE(std::to_string(ranks) + " stages, " + schedule);
      const std::string tag = schedule + std::to_string(ranks);
      expect_near(losses_of(ranks, {"--parallel", "pipeline", "--micro-batches", "4", "--schedule", schedule}, tag,
                            ranks - 1),
                  one_rank);
      const nlohmann::json first_stage = nlohmann::json::parse(ReadFile(dir / (tag + "-0.json")));
      EXPECT_TRUE(first_stage.at("steps").at(0).at("loss").is_null());
      EXPECT_EQ(first_stage.at("stages").get<int>(), ranks);
    }
  }
  SCOPED_TRACE("2 stages x 2 replicas");
  expect_near(losses_of(4, {"--parallel", "pipeline", "--stages", "2", "--micro-batches", "4", "--stage-layers", "1,3"},
                        "replicas", 1),
              losses_of(2, {"--accum", "4"}, "ddp2", 0));
}

TEST(TrainerProcess, ASlowRankMakesTheOthersWaitAtTheAllReduce) {
  TempDir dir;
  const std::string metrics = (dir / "metrics-{rank}.json").string();
  ExpectAllSucceeded(RunRanks(2, {"--steps", "6", "--batch", "8", "--slow-rank", "1:50", "--metrics-out", metrics},
                              dir, "slow"));
  // Rank 1 sleeps 50 ms before every forward pass, and rank 0 cannot finish a step's
  // all-reduce before rank 1 joins it: rank 0's steps last about 50 ms although its own work
  // takes well under 1 ms. The bound is half that, so a descheduled rank cannot fail it.
  const nlohmann::json rank0 = nlohmann::json::parse(ReadFile(dir / "metrics-0.json"));
  EXPECT_GE(rank0.at("step_time_median_ms").get<double>(), 25.0);
}

TEST(TrainerProcess, ResumeFromACheckpointContinuesBitIdentically) {
  TempDir dir;
  const std::vector<std::string> common = {"--batch", "8", "--seed", "3", "--optimizer", "adamw", "--lr", "0.01",
                                           "--clip-grad-norm", "1.0", "--accum", "2"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), common.begin(), common.end());
    return extra;
  };
  ExpectAllSucceeded(RunRanks(2, with({"--steps", "12", "--checkpoint", (dir / "straight.ckpt").string()}), dir, "a"));
  ExpectAllSucceeded(RunRanks(2, with({"--steps", "5", "--checkpoint", (dir / "half.ckpt").string()}), dir, "b"));
  ExpectAllSucceeded(RunRanks(2, with({"--steps", "12", "--resume", (dir / "half.ckpt").string(), "--checkpoint",
                                       (dir / "resumed.ckpt").string()}),
                              dir, "c"));
  const std::string straight = ReadFile(dir / "straight.ckpt");
  const std::string resumed = ReadFile(dir / "resumed.ckpt");
  ASSERT_FALSE(straight.empty());
  EXPECT_TRUE(straight == resumed) << "the resumed run's final checkpoint differs from the uninterrupted run's";
  EXPECT_FALSE(straight == ReadFile(dir / "half.ckpt"));
}

// All "allreduce" ranges and the "backward" range of every step, from a profiled run.
struct StepTimes {
  int64_t backward_end = 0;
  std::vector<int64_t> allreduce_starts;
};

std::map<int64_t, StepTimes> AllReducesPerStep(const trace::RankTrace& trace) {
  std::vector<std::pair<int64_t, int64_t>> steps, backwards;
  std::vector<int64_t> allreduces;
  for (const trace::NvtxRangeEvent& range : trace.events.nvtx_ranges) {
    const std::string& name = trace.str(range.name);
    if (trace.str(range.domain) != "rankscope") continue;
    if (name == "step") steps.emplace_back(range.start_ns, range.end_ns);
    if (name == "backward") backwards.emplace_back(range.start_ns, range.end_ns);
    if (name == "allreduce") allreduces.push_back(range.start_ns);
  }
  std::map<int64_t, StepTimes> per_step;
  std::sort(steps.begin(), steps.end());
  for (size_t s = 0; s < steps.size(); ++s) {
    StepTimes& times = per_step[static_cast<int64_t>(s)];
    for (const auto& [start, end] : backwards) {
      if (start >= steps[s].first && end <= steps[s].second) times.backward_end = std::max(times.backward_end, end);
    }
    for (int64_t start : allreduces) {
      if (start >= steps[s].first && start <= steps[s].second) times.allreduce_starts.push_back(start);
    }
  }
  return per_step;
}

// One Gloo collective as the collector recorded it: its range's name and decoded payload.
struct RecordedCollective {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  std::string op;
  nlohmann::json args;
};

// The "rankscope collective" convention (trainer/README.md), per rank in call order: the
// initial broadcast is number 0, every all-reduce after it the next number; the same call
// has the same number, op, size and communicator on every rank.
void ExpectTheCollectiveConvention(const std::vector<std::vector<RecordedCollective>>& per_rank, int steps) {
  ASSERT_EQ(per_rank.size(), 2u);
  ASSERT_FALSE(per_rank[0].empty());
  const nlohmann::json comm = per_rank[0][0].args.value("comm", nlohmann::json());
  EXPECT_TRUE(comm.is_number_unsigned()) << per_rank[0][0].args.dump();
  const std::vector<std::string> fields = {"bucket", "bytes", "comm", "comm_rank", "comm_size", "peer", "root",
                                           "sequence"};  // sorted, as the JSON object lists them
  for (size_t rank = 0; rank < per_rank.size(); ++rank) {
    const std::vector<RecordedCollective>& calls = per_rank[rank];
    ASSERT_EQ(calls.size(), per_rank[0].size()) << "rank " << rank;
    uint64_t allreduce_bytes = 0;
    for (size_t i = 0; i < calls.size(); ++i) {
      const nlohmann::json& args = calls[i].args;
      SCOPED_TRACE("rank " + std::to_string(rank) + ", collective " + std::to_string(i) + ": " + args.dump());
      std::vector<std::string> keys;
      for (const auto& item : args.items()) keys.push_back(item.key());
      ASSERT_EQ(keys, fields);
      EXPECT_EQ(args.at("sequence"), i);
      EXPECT_EQ(args.at("comm"), comm);
      EXPECT_EQ(args.at("comm_rank"), rank);
      EXPECT_EQ(args.at("comm_size"), 2);
      EXPECT_EQ(args.at("peer"), -1);
      if (i == 0) {
        EXPECT_EQ(calls[i].op, "broadcast");
        EXPECT_EQ(args.at("root"), 0);
        EXPECT_EQ(args.at("bucket"), -1);
      } else {
        EXPECT_EQ(calls[i].op, "allreduce");
        EXPECT_EQ(args.at("root"), -1);
        EXPECT_GE(args.at("bucket").get<int64_t>(), 0);
        allreduce_bytes += args.at("bytes").get<uint64_t>();
      }
      if (i > 0) {
        EXPECT_GE(calls[i].start_ns, calls[i - 1].end_ns);  // one at a time, in order
      }
      EXPECT_EQ(calls[i].op, per_rank[0][i].op);
      EXPECT_EQ(args.at("bytes"), per_rank[0][i].args.at("bytes"));
      EXPECT_EQ(args.at("bucket"), per_rank[0][i].args.at("bucket"));
    }
    // The broadcast sends every parameter once; each step's buckets all-reduce them all.
    EXPECT_EQ(allreduce_bytes, static_cast<uint64_t>(steps) * calls[0].args.at("bytes").get<uint64_t>());
  }
}

// How many all-reduces started while their step's backward pass was still running.
int AllReducesStartedDuringBackward(bool overlap) {
  TempDir dir;
  std::vector<std::string> argv = {RANKSCOPE_CLI, "profile", "-n", "2", "-o", (dir / "run").string(), "--",
                                   TRAINER_BINARY};
  // Tiny buckets, so several all-reduces run per step.
  for (const std::string& arg : kSmallModel) argv.push_back(arg);
  for (const char* arg : {"--steps", "6", "--batch", "64", "--width", "128", "--depth", "3", "--bucket-mb", "0.02",
                          "--first-bucket-mb", "0.01"}) {
    argv.push_back(arg);
  }
  if (!overlap) argv.push_back("--no-overlap");
  std::map<std::string, std::string> env = rankscope::testing::CurrentEnvironment();
  for (const char* name : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LD_PRELOAD"}) env.erase(name);
  env["RANKSCOPE_COLLECTOR_LIB"] = COLLECTOR_LIBRARY;
  env["ASAN_OPTIONS"] = rankscope::testing::ChildAsanOptions();
  ChildProcess profile(argv, env, ProcessOptions{.timeout = std::chrono::seconds(120)});
  const ProcessResult result = profile.Wait();
  EXPECT_EQ(result.exit_code, 0) << result.err;
  Result<trace::Run> run = trace::OpenRun(dir / "run");
  EXPECT_TRUE(run.ok()) << run.status().ToString();
  if (!run.ok()) return -1;
  EXPECT_EQ(run->ranks.size(), 2u);
  int started_during_backward = 0;
  int allreduces = 0;
  std::vector<std::vector<RecordedCollective>> collectives;
  for (const trace::RunFile& file : run->ranks) {
    auto reader = trace::TraceReader::Open(file.path);
    EXPECT_TRUE(reader.ok()) << reader.status().ToString();
    if (!reader.ok()) return -1;
    Result<trace::RankTrace> trace = (*reader)->LoadAll();
    EXPECT_TRUE(trace.ok()) << trace.status().ToString();
    if (!trace.ok()) return -1;
    // The workload mark carries what the analyzer needs for the global batch.
    bool workload_seen = false;
    for (const trace::NvtxMarkEvent& mark : trace->events.nvtx_marks) {
      if (trace->str(mark.name) != "workload") continue;
      const nlohmann::json args = nlohmann::json::parse(trace->str(mark.args));
      EXPECT_EQ(args.at("world_size"), 2);
      EXPECT_EQ(args.at("batch"), 64);
      EXPECT_EQ(args.at("accum"), 1);
      workload_seen = true;
    }
    EXPECT_TRUE(workload_seen);
    // A compute lane and a communication lane, as CUDA streams would be on a GPU.
    std::set<trace::LaneId> compute_lanes, comm_lanes;
    std::vector<RecordedCollective>& calls = collectives.emplace_back();
    for (const trace::NvtxRangeEvent& range : trace->events.nvtx_ranges) {
      if (range.category == 1) compute_lanes.insert(range.lane);
      if (range.category == 2) {
        comm_lanes.insert(range.lane);
        calls.push_back({range.start_ns, range.end_ns, trace->str(range.name),
                         nlohmann::json::parse(trace->str(range.args), nullptr, /*allow_exceptions=*/false)});
      }
    }
    std::sort(calls.begin(), calls.end(), [](const RecordedCollective& a, const RecordedCollective& b) {
      return std::pair(a.start_ns, a.end_ns) < std::pair(b.start_ns, b.end_ns);
    });
    EXPECT_EQ(compute_lanes.size(), 1u);
    EXPECT_EQ(comm_lanes.size(), 1u);
    EXPECT_TRUE(compute_lanes != comm_lanes);
    EXPECT_EQ(trace->meta.entries["nvtx.category.rankscope.1"], "compute");
    EXPECT_EQ(trace->meta.entries["nvtx.category.rankscope.2"], "comm");
    const auto per_step = AllReducesPerStep(*trace);
    EXPECT_EQ(per_step.size(), 6u);
    for (const auto& [step, times] : per_step) {
      EXPECT_GT(times.backward_end, 0) << "step " << step << " has no backward range";
      EXPECT_GE(times.allreduce_starts.size(), 3u) << "step " << step;
      for (int64_t start : times.allreduce_starts) {
        ++allreduces;
        if (start < times.backward_end) ++started_during_backward;
      }
    }
  }
  EXPECT_GT(allreduces, 0);
  ExpectTheCollectiveConvention(collectives, 6);
  return started_during_backward;
}

TEST(TrainerProcess, WithOverlapSomeAllReducesStartDuringBackward) {
  EXPECT_GT(AllReducesStartedDuringBackward(/*overlap=*/true), 0);
}

TEST(TrainerProcess, WithoutOverlapNoAllReduceStartsBeforeBackwardEnds) {
  EXPECT_EQ(AllReducesStartedDuringBackward(/*overlap=*/false), 0);
}

TEST(TrainerProcess, ADeadRankStopsTheOthersWithAnErrorNamingIt) {
  TempDir dir;
  const auto results =
      RunRanks(2, {"--steps", "50", "--batch", "8", "--fault-rank", "1", "--fault-step", "3"}, dir, "dead");
  EXPECT_EQ(results[1].exit_code, 128 + SIGKILL) << results[1].err;
  EXPECT_NE(results[0].exit_code, 0);
  EXPECT_FALSE(results[0].timed_out);
  // Gloo sees the closed connection at once; the bound only says "no hang".
  EXPECT_LT(results[0].elapsed.count(), 30.0);
  EXPECT_NE(results[0].err.find("rank 1"), std::string::npos) << results[0].err;
  EXPECT_NE(results[0].err.find("rankscope-trainer: error:"), std::string::npos) << results[0].err;
}

// --mismatch-rank: rank 1 broadcasts (root 0) where rank 0 all-reduces the first bucket.
// Gloo matches neither call's messages to the other's, so both wait until --timeout (3 s)
// and then end with the trainer's one error line and exit 1: no crash, no endless wait.
TEST(TrainerProcess, AMismatchedCollectiveEndsEveryRankWithAnErrorAtTheTimeout) {
  TempDir dir;
  const auto results =
      RunRanks(2, {"--steps", "3", "--batch", "8", "--timeout", "3", "--mismatch-rank", "1:1"}, dir, "mismatch");
  for (size_t rank = 0; rank < results.size(); ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank) + " stderr:\n" + results[rank].err);
    EXPECT_FALSE(results[rank].timed_out);
    EXPECT_EQ(results[rank].exit_code, 1);
    EXPECT_NE(results[rank].err.find("rankscope-trainer: error: rank " + std::to_string(rank) + ": step 1: "),
              std::string::npos);
  }
  EXPECT_EQ(results[1].err.rfind("rankscope-trainer: rank 1 broadcasts where the others all-reduce at step 1 "
                                 "(--mismatch-rank)\n", 0), 0u);
  EXPECT_NE(results[1].err.find("broadcast"), std::string::npos);
  EXPECT_NE(results[0].err.find("all-reduce"), std::string::npos);
}

// --hang-rank: the rank says where it stops, stops there (step 0 finished, step 1 never
// does), and SIGTERM still ends it by its default action. One rank, so nobody waits on it.
TEST(TrainerProcess, AHangingRankSaysWhereAndASignalStillEndsIt) {
  TempDir dir;
  ChildProcess trainer(TrainerArgv({"--steps", "3", "--batch", "8", "--log-every", "1", "--hang-rank", "0:1",
                                    "--rdzv=file:" + (dir / "rdzv").string()}),
                       RankEnvironment(0, 1));
  // The trainer's stderr is a file, which /proc reopens while the trainer runs (once it is
  // a file: right after the fork it is still this test's stderr, maybe a pipe).
  const std::filesystem::path stderr_path = "/proc/" + std::to_string(trainer.pid()) + "/fd/2";
  const std::string line = "rankscope-trainer: rank 0 hangs at step 1 (--hang-rank)\n";
  const auto said_it = [&] {
    std::error_code error;
    return std::filesystem::is_regular_file(stderr_path, error) &&
           ReadFile(stderr_path).find(line) != std::string::npos;
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);  // only "it got there"
  while (!said_it() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(::kill(trainer.pid(), SIGTERM), 0);
  const ProcessResult result = trainer.Wait();
  EXPECT_EQ(result.exit_code, 128 + SIGTERM) << result.err;
  EXPECT_EQ(result.err, line);
  EXPECT_NE(result.out.find("step 1/3"), std::string::npos) << result.out;
  EXPECT_EQ(result.out.find("step 2/3"), std::string::npos) << result.out;
}

size_t LineCount(const std::string& text) { return static_cast<size_t>(std::count(text.begin(), text.end(), '\n')); }

TEST(TrainerProcess, BadArgumentsGiveOneLineAndExitTwo) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"--batch", "0"}, {"--backend", "mpi"}, {"--steps", "many"},
                                             {"--rdzv", "tcp://host:1"}, {"--resume", "/nonexistent/ckpt"},
                                             {"--checkpoint", "/nonexistent/dir/x.ckpt"},
                                             {"--metrics-out", "/nonexistent/m.json"},
                                             {"--hang-rank", "1:0"}, {"--mismatch-rank", "x:0"},
                                             {"--parallel", "tp"}, {"--parallel", "fsdp", "--checkpoint", "c.ckpt"},
                                             {"--parallel", "fsdp", "--mismatch-rank", "0:0"}}) {
    ChildProcess trainer(TrainerArgv(args), RankEnvironment(0, 1));
    const ProcessResult result = trainer.Wait();
    EXPECT_EQ(result.exit_code, 2) << args[0] << ": " << result.err;
    EXPECT_EQ(LineCount(result.err), 1u) << result.err;
    EXPECT_EQ(result.err.rfind("rankscope-trainer: error: ", 0), 0u) << result.err;
  }
  // A pipeline that does not fit the world fails before waiting for the other ranks: rank 0
  // of 2 alone, with a rendezvous timeout far beyond the process's.
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"--parallel", "pipeline", "--stages", "3"}, {"--parallel", "pipeline", "--stage-layers", "9,9"}}) {
    const TempDir dir;
    std::vector<std::string> alone = args;
    alone.insert(alone.end(), {"--timeout", "600", "--rdzv", "file:" + (dir.path() / "rdzv").string()});
    ChildProcess trainer(TrainerArgv(alone), RankEnvironment(0, 2), ProcessOptions{.timeout = std::chrono::seconds(20)});
    const ProcessResult result = trainer.Wait();
    EXPECT_EQ(result.exit_code, 2) << args[3] << ": " << result.err;
    EXPECT_EQ(LineCount(result.err), 1u) << result.err;
  }
  // A wrong choice names the choices (CLI11's own message printed one-byte enums as bytes,
  // and a 0 cut the line).
  ChildProcess trainer(TrainerArgv({"--parallel", "tp"}), RankEnvironment(0, 1));
  const ProcessResult result = trainer.Wait();
  EXPECT_EQ(result.err,
            "rankscope-trainer: error: --parallel: 'tp' is not one of ddp|fsdp|pipeline; see rankscope-trainer --help\n");
}

// CLI11 printed one-byte enums' values as control characters ("{adamw->^A,sgd->^@}").
TEST(TrainerProcess, HelpIsPrintableAndNamesEveryChoice) {
  ChildProcess trainer(TrainerArgv({"--help"}), RankEnvironment(0, 1));
  const ProcessResult result = trainer.Wait();
  ASSERT_EQ(result.exit_code, 0) << result.err;
  for (const char c : result.out) {
    ASSERT_TRUE(c == '\n' || (c >= ' ' && c < 127)) << "byte " << static_cast<int>(c) << " in:\n" << result.out;
  }
  for (const char* choices : {"(adamw|sgd)", "(auto|gloo|nccl)", "(bf16|fp32)", "(ddp|fsdp|pipeline)", "(1f1b|gpipe)"}) {
    EXPECT_NE(result.out.find(choices), std::string::npos) << choices << " missing from:\n" << result.out;
  }
}

TEST(TrainerProcess, ADamagedCheckpointIsBadInput) {
  TempDir dir;
  {
    std::ofstream out(dir / "bad.ckpt", std::ios::binary);
    out << "RSCKPT01 but then nothing that makes sense";
  }
  ChildProcess trainer(TrainerArgv({"--resume", (dir / "bad.ckpt").string()}), RankEnvironment(0, 1));
  const ProcessResult result = trainer.Wait();
  EXPECT_EQ(result.exit_code, 2) << result.err;
  EXPECT_EQ(LineCount(result.err), 1u) << result.err;
  EXPECT_NE(result.err.find("bad.ckpt"), std::string::npos) << result.err;
}

TEST(TrainerProcess, AnUnreachableRendezvousIsOneClearLine) {
  ChildProcess trainer(TrainerArgv({"--rdzv", "redis://127.0.0.1:1", "--timeout", "5"}), RankEnvironment(0, 2));
  const ProcessResult result = trainer.Wait();
  EXPECT_NE(result.exit_code, 0);
  EXPECT_FALSE(result.timed_out);
  EXPECT_EQ(LineCount(result.err), 1u) << result.err;
  EXPECT_NE(result.err.find("127.0.0.1:1"), std::string::npos) << result.err;
}

TEST(TrainerProcess, AWorldSizeMismatchIsReported) {
  TempDir dir;
  std::vector<std::unique_ptr<ChildProcess>> ranks;
  const std::string rdzv = "--rdzv=file:" + (dir / "rdzv").string();
  ranks.push_back(std::make_unique<ChildProcess>(TrainerArgv({rdzv, "--timeout", "5"}), RankEnvironment(0, 2)));
  ranks.push_back(std::make_unique<ChildProcess>(TrainerArgv({rdzv, "--timeout", "5"}), RankEnvironment(1, 3)));
  const ProcessResult first = ranks[0]->Wait();
  const ProcessResult second = ranks[1]->Wait();
  EXPECT_NE(first.exit_code, 0);
  EXPECT_NE(second.exit_code, 0);
  EXPECT_FALSE(first.timed_out || second.timed_out);
  EXPECT_NE((first.err + second.err).find("world-size mismatch"), std::string::npos) << first.err << second.err;
}

TEST(TrainerProcess, TheGpuBackendWithoutAGpuSaysWhy) {
  if (ProbeGpu().usable) GTEST_SKIP() << "this machine has a GPU";
  ChildProcess trainer(TrainerArgv({"--backend", "nccl"}), RankEnvironment(0, 1));
  const ProcessResult result = trainer.Wait();
  EXPECT_NE(result.exit_code, 0);
  EXPECT_EQ(LineCount(result.err), 1u) << result.err;
  EXPECT_NE(result.err.find("needs a GPU"), std::string::npos) << result.err;
}

}  // namespace
}  // namespace rankscope::trainer
