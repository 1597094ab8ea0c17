// End to end, on a machine that gets busy mid-run: `rankscope ab` with a CPU hog (one busy
// process per core) started while the pairs run, as on a shared CI runner. A against itself
// raises no alarm in five runs; a planted slowdown of 3% of the step time is still caught
// within a bounded number of pairs. Not under the sanitizers: their cost would be the noise.
#include <gtest/gtest.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "tests/e2e/e2e_process.h"
#include "tests/temp_dir.h"

namespace rankscope {
namespace {

namespace fs = std::filesystem;
using testing::ChildProcess;
using testing::EndToEndEnvironment;
using testing::ProcessOptions;
using testing::ProcessResult;
using testing::RunProcess;
using testing::TempDir;

// Steps of about 10 ms on this machine, so that 3% of one is a fraction of a millisecond.
const std::string kWorkload = " --steps 30 --batch 128 --width 512 --depth 4 --bucket-mb 1 --threads 1 --quiet";
const std::string kTrainer = std::string(TRAINER_BINARY) + kWorkload;

// One busy process per core the test may use, each pinned to its core, until destroyed. Pinned,
// the hog never doubles up on one core and leaves another free, so whatever else runs shares a
// core with one busy process all the time: a steady slowdown, where an unpinned hog's is
// bimodal (a run that finds the free core runs twice as fast as one that does not, the
// scheduler rarely moving it within seconds), noise no number of pairs averages out quickly.
class CpuHog {
 public:
  CpuHog() {
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (::sched_getaffinity(0, sizeof allowed, &allowed) != 0) ADD_FAILURE() << "sched_getaffinity failed";
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (!CPU_ISSET(cpu, &allowed)) continue;
      auto& process = busy_.emplace_back(std::make_unique<ChildProcess>(
          std::vector<std::string>{"/bin/sh", "-c", "while :; do :; done"}, EndToEndEnvironment()));
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpu, &one);
      if (::sched_setaffinity(process->pid(), sizeof one, &one) != 0) ADD_FAILURE() << "could not pin to " << cpu;
    }
  }

 private:
  std::vector<std::unique_ptr<ChildProcess>> busy_;  // their destructors kill them
};

// The trainer's median step time in milliseconds, from one run without the collector.
double StepTimeMs() {
  const ProcessResult run = RunProcess({TRAINER_BINARY, "--steps", "30", "--batch", "128", "--width", "512",
                                        "--depth", "4", "--bucket-mb", "1", "--threads", "1"});
  std::smatch found;
  const std::string text = run.err + run.out;
  if (run.exit_code != 0 || !std::regex_search(text, found, std::regex("step time median ([0-9.]+) ms"))) {
    ADD_FAILURE() << "the trainer failed or printed no step time: " << text;
    return 0;
  }
  return std::stod(found[1].str());
}

// Runs `rankscope ab` and starts the hog `hog_after` into it; the hog stops when the run ends.
ProcessResult AbUnderHog(const fs::path& dir, const std::string& b, const std::vector<std::string>& options,
                         std::chrono::milliseconds hog_after) {
  std::vector<std::string> argv = {RANKSCOPE_CLI, "ab",     "--a",          kTrainer, "--b", b, "--ranks", "1",
                                   "--metric",    "step_time_ns", "-o", dir.string()};
  argv.insert(argv.end(), options.begin(), options.end());
  ChildProcess ab(argv,
                  EndToEndEnvironment(), ProcessOptions{.timeout = std::chrono::seconds(450)});
  std::this_thread::sleep_for(hog_after);
  CpuHog hog;
  return ab.Wait();
}

// "B against A, 15 pairs ..." → 15.
int PairsRun(const std::string& out) {
  std::smatch found;
  return std::regex_search(out, found, std::regex("B against A, ([0-9]+) pairs")) ? std::stoi(found[1].str()) : -1;
}

TEST(AbUnderLoad, AAgainstItselfRaisesNoAlarmInFiveRunsWhenAHogStartsMidRun) {
  for (int attempt = 1; attempt <= 5; ++attempt) {
    TempDir dir;
    // Ten pairs, one look: the interval is the widest ab draws, the false-alarm chance 1%.
    const ProcessResult run = AbUnderHog(dir / "ab", kTrainer, {"--pairs", "10"}, std::chrono::milliseconds(1500));
    ASSERT_FALSE(run.timed_out) << "run " << attempt;
    EXPECT_EQ(run.out.find("regressed"), std::string::npos) << "run " << attempt << ":\n" << run.out;
    EXPECT_EQ(run.exit_code, 0) << "run " << attempt << ":\n" << run.out << run.err;
    EXPECT_EQ(PairsRun(run.out), 10) << run.out;
    std::smatch row;
    if (std::regex_search(run.out, row, std::regex("step_time_ns[^\n]*"))) {
      std::printf("run %d: %s\n", attempt, row.str().c_str());
    }
  }
}

TEST(AbUnderLoad, AThreePercentSlowdownIsCaughtWithin150PairsWhenAHogStartsMidRun) {
  // 3% more CPU work per step (--extra-step-work-ms; a sleep would cost less under the hog,
  // which uses the time the sleeper gives up), of the quiet step time: the fastest of three.
  double step_ms = StepTimeMs();
  for (int i = 0; i < 2; ++i) step_ms = std::min(step_ms, StepTimeMs());
  ASSERT_GT(step_ms, 0);
  char work[32];
  std::snprintf(work, sizeof work, "%.3f", step_ms * 0.03);
  // The typical ratio lands within about half a percent of 3%, near the default 2% tolerance's
  // edge; the tolerance is the user's choice, and 1% here tests the pairs' power rather than
  // where 2% cuts. The bound, 150 pairs (about 4 minutes at most; the early stop usually ends
  // the run within 10-35), is wide because a shared CI runner is noisier than this machine:
  // one measured +2.0% [-0.5%, +4.1%] after 60 pairs, a pair's ratio spread of about 6%.
  TempDir dir;
  const ProcessResult run = AbUnderHog(dir / "ab", kTrainer + " --extra-step-work-ms " + work,
                                       {"--pairs", "150", "--tolerance", "1%"}, std::chrono::milliseconds(2000));
  ASSERT_FALSE(run.timed_out);
  EXPECT_EQ(run.exit_code, 1) << "work " << work << " ms:\n" << run.out << run.err;
  EXPECT_NE(run.out.find("regressed"), std::string::npos) << run.out;
  const int pairs = PairsRun(run.out);
  EXPECT_GE(pairs, 10) << run.out;
  EXPECT_LE(pairs, 150) << run.out;
  std::smatch row;
  std::regex_search(run.out, row, std::regex("step_time_ns[^\n]*"));
  std::printf("3%% more work (%s ms of %.2f ms), %d pairs under the hog: %s\n", work, step_ms, pairs,
              row.str().c_str());
}

}  // namespace
}  // namespace rankscope
