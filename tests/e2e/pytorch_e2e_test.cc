// End to end with real PyTorch (Debian's python3-torch, CPU, Gloo): `rankscope profile
// --pytorch` of the sample DDP job and of a small CNN under torchrun, analyzed; the same
// steps under torch.profiler, imported and analyzed, agree with what the hook measured; a
// hook that fails leaves the job running to its normal exit.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sqlite3.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "tests/e2e/e2e_process.h"
#include "tests/temp_dir.h"

namespace rankscope {
namespace {

using testing::ProcessResult;
using testing::RunProcess;
using testing::TempDir;
namespace fs = std::filesystem;

// Debian's interpreter: python3-torch installs torch for it (a python3 earlier on PATH, from
// pyenv or a venv, may have none).
constexpr const char* kPython = "/usr/bin/python3";

bool HasTorch() {
  static const bool has = RunProcess({kPython, "-c", "import torch, torch.distributed"}).exit_code == 0;
  return has;
}

#define SKIP_WITHOUT_TORCH()                                                                          \
  if (!HasTorch()) GTEST_SKIP() << kPython << " cannot import torch: install python3-torch "       \
                                              "(scripts/install-deps.sh does)"

nlohmann::json Analyze(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {RANKSCOPE_CLI, "analyze"};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.insert(argv.end(), {"--format", "json"});
  const ProcessResult result = RunProcess(argv);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  return nlohmann::json::parse(result.out, nullptr, false);
}

// Calls row(statement) for each row `sql` gives in the rank file, read-only.
template <typename Row>
void ForEachRow(const fs::path& file, const char* sql, Row row) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(file.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* statement = nullptr;
    if (sqlite3_prepare_v2(db, sql, -1, &statement, nullptr) == SQLITE_OK) {
      while (sqlite3_step(statement) == SQLITE_ROW) row(statement);
    } else {
      ADD_FAILURE() << file << ": " << sqlite3_errmsg(db);
    }
    sqlite3_finalize(statement);
  } else {
    ADD_FAILURE() << file << ": cannot open";
  }
  sqlite3_close(db);
}

std::map<std::string, std::string> Meta(const fs::path& file) {
  std::map<std::string, std::string> meta;
  ForEachRow(file, "SELECT key, value FROM meta", [&](sqlite3_stmt* row) {
    meta[reinterpret_cast<const char*>(sqlite3_column_text(row, 0))] =
        reinterpret_cast<const char*>(sqlite3_column_text(row, 1));
  });
  return meta;
}

// Sum over the steps numbered in [first, last] of one rank's `key` (compute_ns, comm_ns).
double StepSum(const nlohmann::json& report, int rank, const std::string& key, int first, int last) {
  double sum = 0;
  for (const nlohmann::json& device : report.at("ranks")) {
    if (device.at("rank") != rank) continue;
    for (const nlohmann::json& step : device.at("steps")) {
      const int number = step.at("number").get<int>();
      if (number >= first && number <= last) sum += step[key].get<double>();
    }
  }
  return sum;
}

const nlohmann::json* CollectiveKind(const nlohmann::json& report, const std::string& kind) {
  for (const nlohmann::json& entry : report.at("cross_rank").at("kinds")) {
    if (entry.at("kind") == kind) return &entry;
  }
  return nullptr;
}

// The all-reduce time of torch.profiler's steps (its older format: bare array, microseconds)
// and of the hook's steps first_hook_step, ..., step by step, over the steps whose
// profiler all-reduces end before DDP starts copying their result into the gradients.
struct AllReduceTimes {
  std::vector<double> ratios;  // hook / profiler, per compared step
  std::string steps;           // "hook/profiler µs" per compared step, for messages
  int steps_left_out = 0;
  double MedianRatio() const {
    std::vector<double> sorted = ratios;
    std::sort(sorted.begin(), sorted.end());
    const size_t n = sorted.size();
    return n == 0 ? 0.0 : n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  }
};

std::vector<std::pair<int64_t, int64_t>> Rows(const fs::path& file, const char* sql) {
  std::vector<std::pair<int64_t, int64_t>> rows;
  ForEachRow(file, sql, [&](sqlite3_stmt* row) {
    rows.emplace_back(sqlite3_column_int64(row, 0), sqlite3_column_int64(row, 1));
  });
  return rows;
}

AllReduceTimes CompareAllReduces(const fs::path& torch_trace, const fs::path& rank_file, size_t first_hook_step) {
  AllReduceTimes result;
  std::ifstream in(torch_trace);
  const nlohmann::json events = nlohmann::json::parse(in, nullptr, false);
  if (!events.is_array()) {
    ADD_FAILURE() << torch_trace << " is not the older format's array";
    return result;
  }
  struct Span {
    double start_us, end_us;
  };
  std::vector<Span> steps, bucket_copies, all_reduces;
  for (const nlohmann::json& event : events) {
    const auto name_field = event.find("name");
    if (name_field == event.end() || !name_field->is_string()) continue;
    const std::string& name = name_field->get_ref<const std::string&>();
    const Span span{event.value("ts", 0.0), event.value("ts", 0.0) + event.value("dur", 0.0)};
    if (name.starts_with("ProfilerStep#")) steps.push_back(span);
    if (name == "torch.distributed.ddp.reducer::copy_bucket_to_grad") bucket_copies.push_back(span);
    if (name == "gloo:all_reduce") all_reduces.push_back(span);
  }
  const auto hook_steps = Rows(rank_file,
                               "SELECT r.start_ns, r.end_ns FROM nvtx_ranges r JOIN strings s ON s.id = r.name "
                               "WHERE s.value = 'step' ORDER BY r.start_ns");
  const auto hook_all_reduces = Rows(rank_file,
                                     "SELECT c.start_ns, c.end_ns FROM collectives c JOIN strings s ON s.id = c.name "
                                     "WHERE s.value = 'gloo:all_reduce' ORDER BY c.start_ns");
  for (size_t k = 0; k < steps.size() && first_hook_step + k < hook_steps.size(); ++k) {
    const Span step = steps[k];
    double copy_start = step.end_us;  // DDP copies the reduced gradients out of the bucket
    for (const Span& copy : bucket_copies) {
      if (copy.start_us >= step.start_us && copy.start_us < copy_start) copy_start = copy.start_us;
    }
    double profiler_us = 0;
    bool valid = true;
    for (const Span& all_reduce : all_reduces) {
      if (all_reduce.start_us < step.start_us || all_reduce.start_us >= step.end_us) continue;
      profiler_us += all_reduce.end_us - all_reduce.start_us;
      valid = valid && all_reduce.end_us <= copy_start;
    }
    const auto [hook_start, hook_end] = hook_steps[first_hook_step + k];
    double hook_ns = 0;
    for (const auto& [start, end] : hook_all_reduces) {
      if (start >= hook_start && start < hook_end) hook_ns += static_cast<double>(end - start);
    }
    if (!valid || profiler_us == 0) {
      ++result.steps_left_out;
      continue;
    }
    result.ratios.push_back(hook_ns / (profiler_us * 1000.0));
    result.steps += " " + std::to_string(static_cast<int64_t>(hook_ns / 1000)) + "/" +
                    std::to_string(static_cast<int64_t>(profiler_us));
  }
  return result;
}

// The sample: 2 warm-up and 10 measured steps of a 4-layer MLP (width 256: parameters of
// 4 x (256 x 256 + 256) + 256 x 16 + 16 = 267,280 floats, 1,069,120 bytes, one DDP bucket),
// measured steps under torch.profiler too.
TEST(PytorchEndToEnd, SampleDdpJobUnderThePytorchHookAgreesWithTorchProfiler) {
  SKIP_WITHOUT_TORCH();
  TempDir dir;
  const fs::path run = dir.path() / "run";
  const fs::path torch_traces = dir.path() / "torch";
  fs::create_directories(torch_traces);
  const ProcessResult profiled = RunProcess(
      {RANKSCOPE_CLI, "profile", "--pytorch", "-n", "2", "-o", run.string(), "--", kPython,
       RANKSCOPE_SOURCE_DIR "/samples/pytorch/ddp_train.py", "--steps", "10", "--warmup", "2", "--width", "256",
       "--torch-profile", torch_traces.string()});
  ASSERT_EQ(profiled.exit_code, 0) << profiled.err;
  EXPECT_EQ(profiled.err.find("nothing to analyze"), std::string::npos) << profiled.err;
  for (int rank : {0, 1}) {
    std::map<std::string, std::string> meta = Meta(run / ("rank-" + std::to_string(rank) + ".sqlite"));
    EXPECT_TRUE(meta["pytorch.hook"].starts_with("on")) << meta["pytorch.hook"];
    EXPECT_EQ(meta["backend"], "gloo");
  }

  const nlohmann::json ours = Analyze({run.string()});
  ASSERT_FALSE(ours.is_discarded());
  // One step per optimizer step, numbered from 0, with the batch as samples.
  EXPECT_EQ(ours.at("steps").at("steps_found"), 12);
  EXPECT_EQ(ours.at("workload").at("global_batch"), 128);
  ASSERT_EQ(ours.at("ranks").size(), 2u);
  for (const nlohmann::json& device : ours.at("ranks")) {
    EXPECT_GT(device.at("totals").at("compute_ns").get<double>(), 0) << "rank " << device.at("rank");
    EXPECT_GT(device.at("totals").at("comm_ns").get<double>(), 0) << "rank " << device.at("rank");
  }
  // DDP's gradient all-reduces, matched across ranks by (group, sequence), with their bytes.
  EXPECT_EQ(ours.at("cross_rank").at("unmatched"), 0);
  const nlohmann::json* all_reduce = CollectiveKind(ours, "gloo:all_reduce");
  ASSERT_NE(all_reduce, nullptr) << ours.at("cross_rank").dump();
  EXPECT_GE((*all_reduce).at("count").get<int>(), 12);
  EXPECT_EQ((*all_reduce).at("total_bytes").get<double>() / (*all_reduce).at("count").get<double>(), 1'069'120.0);

  // torch.profiler recorded the 10 measured steps (steps 2 to 11 here) of the same run: its
  // trace, imported and analyzed, gives the same compute within 10%.
  const nlohmann::json theirs = Analyze({torch_traces.string(), "--skip-steps", "0"});
  ASSERT_FALSE(theirs.is_discarded());
  EXPECT_EQ(theirs.at("steps").at("steps_found"), 10);
  for (int rank : {0, 1}) {
    const double hook = StepSum(ours, rank, "compute_ns", 2, 11);
    const double profiler = StepSum(theirs, rank, "compute_ns", 0, 1'000'000);
    EXPECT_NEAR(hook / profiler, 1.0, 0.10) << "rank " << rank << " compute: --pytorch " << hook
                                            << " ns, torch.profiler " << profiler << " ns";
    EXPECT_GT(StepSum(theirs, rank, "comm_ns", 0, 1'000'000), 0) << "rank " << rank;
    // And the same all-reduce times, step by step: the median over steps of the ratio within
    // 10%, over the steps where torch.profiler's Gloo range ends before DDP copies its
    // result into the gradients. Both ends are taken behind Python's GIL (the hook's in the
    // work's first future callback, torch.profiler's after all of them), so a step can differ
    // by the time another thread held it; torch.profiler's now and then ends milliseconds
    // after DDP went on, even in the next step: those steps are left out and counted.
    const AllReduceTimes compared = CompareAllReduces(torch_traces / ("rank" + std::to_string(rank) + ".json"),
                                                      run / ("rank-" + std::to_string(rank) + ".sqlite"), 2);
    EXPECT_GE(compared.ratios.size(), 3u) << "rank " << rank << ": " << compared.steps_left_out
                                          << " of 10 steps left out";
    EXPECT_NEAR(compared.MedianRatio(), 1.0, 0.10)
        << "rank " << rank << " all-reduce µs per step, --pytorch/torch.profiler:" << compared.steps;
  }
}

// A CNN with BatchNorm (DDP broadcasts its buffers before each forward), a DataLoader, Adam
// and a blocking all-reduce of the loss, launched by torchrun (with the --redirects/--tee
// that Debian's torch 1.13 needs on Python 3.11).
TEST(PytorchEndToEnd, CnnUnderTorchrunIsAnalyzed) {
  SKIP_WITHOUT_TORCH();
  TempDir dir;
  const fs::path run = dir.path() / "run";
  const ProcessResult profiled = RunProcess(
      {RANKSCOPE_CLI, "profile", "--pytorch", "-o", run.string(), "--", kPython, "-m", "torch.distributed.run",
       "--nproc_per_node", "2", "--redirects", "2", "--tee", "2", RANKSCOPE_SOURCE_DIR "/tests/e2e/pytorch/cnn_ddp.py",
       "--steps", "5"});
  ASSERT_EQ(profiled.exit_code, 0) << profiled.err;
  const nlohmann::json report = Analyze({run.string()});
  ASSERT_FALSE(report.is_discarded());
  EXPECT_EQ(report.at("steps").at("steps_found"), 5);
  EXPECT_EQ(report.at("workload").at("global_batch"), 32);
  for (const nlohmann::json& device : report.at("ranks")) {
    EXPECT_GT(device.at("totals").at("compute_ns").get<double>(), 0);
    EXPECT_GT(device.at("totals").at("comm_ns").get<double>(), 0);
  }
  EXPECT_EQ(report.at("cross_rank").at("unmatched"), 0);
  // Per step: DDP's bucket and the loss (all-reduces), the buffers (a broadcast); at the
  // end a barrier.
  const nlohmann::json* all_reduce = CollectiveKind(report, "gloo:all_reduce");
  const nlohmann::json* broadcast = CollectiveKind(report, "gloo:broadcast");
  const nlohmann::json* barrier = CollectiveKind(report, "gloo:barrier");
  ASSERT_TRUE(all_reduce && broadcast && barrier) << report.at("cross_rank").dump();
  EXPECT_EQ((*all_reduce).at("count"), 10);
  EXPECT_EQ((*broadcast).at("count"), 6);  // DDP's start-up broadcast of the model and 5 buffer syncs
  EXPECT_EQ((*barrier).at("count"), 1);
}

// A rank that never issues its all-reduce, under torchrun and --hang-timeout: the hook says
// when a collective is entered, so the diagnosis names the rank and the collective the other
// waits in.
TEST(PytorchEndToEnd, AHangUnderTorchrunIsStoppedAndNamed) {
  SKIP_WITHOUT_TORCH();
  TempDir dir;
  const fs::path run = dir.path() / "run";
  const ProcessResult profiled = RunProcess(
      {RANKSCOPE_CLI, "profile", "--pytorch", "--hang-timeout", "10", "-o", run.string(), "--", kPython, "-m",
       "torch.distributed.run", "--nproc_per_node", "2", "--redirects", "2", "--tee", "2",
       RANKSCOPE_SOURCE_DIR "/tests/e2e/pytorch/hang_job.py"});
  EXPECT_EQ(profiled.exit_code, 124) << profiled.err;
  EXPECT_NE(profiled.err.find("Rank 1 never entered AllReduce #4"), std::string::npos) << profiled.err;
  EXPECT_NE(profiled.err.find("has waited in it"), std::string::npos) << profiled.err;
}

// A torch the hook cannot patch (here a stand-in package without torch.optim or torch.nn):
// each part says once that it is off, the rank file says why, and the program runs on.
TEST(PytorchEndToEnd, AHookThatFailsLeavesTheJobRunning) {
  SKIP_WITHOUT_TORCH();
  TempDir dir;
  const fs::path fake = dir.path() / "fake";
  fs::create_directories(fake / "torch");
  std::ofstream(fake / "torch" / "__init__.py") << "__version__ = '0.0-stand-in'\n";
  const fs::path script = dir.path() / "job.py";
  std::ofstream(script) << "import sys\nsys.path.insert(0, sys.argv[1])\nimport torch\nprint('job done', "
                           "torch.__version__)\nraise SystemExit(3)\n";
  const fs::path run = dir.path() / "run";
  const ProcessResult profiled = RunProcess({RANKSCOPE_CLI, "profile", "--pytorch", "-n", "1", "-o", run.string(),
                                             "--", kPython, script.string(), fake.string()});
  EXPECT_EQ(profiled.exit_code, 3) << profiled.err;  // the job's own exit code
  EXPECT_NE(profiled.out.find("job done 0.0-stand-in"), std::string::npos) << profiled.out;
  EXPECT_NE(profiled.err.find("PyTorch hook: steps not recorded"), std::string::npos) << profiled.err;
  const std::map<std::string, std::string> meta = Meta(run / "rank-0.sqlite");
  ASSERT_TRUE(meta.contains("pytorch.steps")) << profiled.err;
  EXPECT_TRUE(meta.at("pytorch.steps").starts_with("off: AttributeError")) << meta.at("pytorch.steps");
  EXPECT_TRUE(meta.at("pytorch.compute").starts_with("off: ")) << meta.at("pytorch.compute");
}

}  // namespace
}  // namespace rankscope
