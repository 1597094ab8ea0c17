// End to end: `rankscope ab` runs the real trainer under the real collector as A and B in
// alternating pairs at 1 and 2 CPU ranks, the way a CI job gates a commit: a planted slowdown
// (--extra-step-delay-ms) is a regression with a JUnit failure; the early stop, the budget,
// a failing B run and bad options each end as documented.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "tests/e2e/e2e_process.h"
#include "tests/temp_dir.h"

namespace rankscope {
namespace {

namespace fs = std::filesystem;
using testing::ProcessResult;
using testing::ReadFile;
using testing::RunProcess;
using testing::TempDir;

// Short steps (a few milliseconds): the pairs are quick, and a 20 ms delay per step is many
// times the noise.
const std::string kTrainer = std::string(TRAINER_BINARY) + " --steps 12 --width 128 --depth 2 --threads 1 --quiet";

ProcessResult Ab(const fs::path& dir, const std::string& b, const std::vector<std::string>& extra) {
  std::vector<std::string> argv = {RANKSCOPE_CLI, "ab", "--a", kTrainer, "--b", b, "-o", dir.string()};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return RunProcess(argv);
}

TEST(AbEndToEnd, APlantedSlowdownRegressesAndStopsOnceDecided) {
  TempDir dir;
  const fs::path junit = dir / "ab.xml", markdown = dir / "ab.md";
  const ProcessResult run = Ab(dir / "runs", kTrainer + " --extra-step-delay-ms 20",
                               {"--ranks", "1,2", "--pairs", "20", "--metric", "step_time_ns", "--junit",
                                junit.string(), "--markdown", markdown.string()});
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  // Every verdict is decided at the first look, after 10 pairs (with up to 20 the looks are
  // at 10, 15 and 20, each at 1 − 1%/3): no more are run.
  EXPECT_NE(run.out.find("10 pairs: every verdict was decided"), std::string::npos) << run.out;
  EXPECT_TRUE(fs::exists(dir / "runs" / "pair-9" / "b" / "n2"));
  EXPECT_FALSE(fs::exists(dir / "runs" / "pair-10"));
  EXPECT_NE(run.out.find("regressed"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("regression: B is worse than A"), std::string::npos) << run.out;
  // The trainer's own output went to the log, not between the verdicts.
  EXPECT_EQ(run.out.find("rankscope-trainer:"), std::string::npos) << run.out;
  EXPECT_TRUE(fs::exists(dir / "runs" / "ab.log"));
  const std::string xml = ReadFile(junit);
  EXPECT_NE(xml.find("<testcase classname=\"rankscope.ab.n2\" name=\"step_time_ns\">"), std::string::npos) << xml;
  EXPECT_NE(xml.find("type=\"regression\""), std::string::npos) << xml;
  EXPECT_NE(ReadFile(markdown).find("## rankscope ab: regression"), std::string::npos);
}

TEST(AbEndToEnd, TheBudgetEndsThePairsEarly) {
  TempDir dir;
  const ProcessResult run = Ab(dir / "runs", kTrainer, {"--ranks", "1", "--pairs", "500", "--budget", "2s"});
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_NE(run.out.find("another would pass the --budget of 2s"), std::string::npos) << run.out;
  EXPECT_FALSE(fs::exists(dir / "runs" / "pair-499"));
}

TEST(AbEndToEnd, AFailingBRunStopsWithOneLineNamingIt) {
  TempDir dir;
  const ProcessResult run = Ab(dir / "runs", kTrainer + " --fault-rank 1 --fault-step 2", {"--ranks", "2"});
  EXPECT_EQ(run.exit_code, 2) << run.out << run.err;
  EXPECT_NE(run.err.find("rankscope: error: B's 2-rank run of pair 1 failed"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("ab.log"), std::string::npos) << run.err;
}

TEST(AbEndToEnd, BadOptionsAreOneLineAndRunNothing) {
  TempDir dir;
  const struct {
    std::vector<std::string> extra;
    std::string b, expected;
  } cases[] = {
      {{"--pairs", "0"}, kTrainer, "--pairs 0"},
      {{"--budget", "soon"}, kTrainer, "--budget 'soon'"},
      {{"--ranks", "1,1"}, kTrainer, "listed twice"},
      {{"--tolerance", "lots"}, kTrainer, "--tolerance"},
      {{"--metric", "speed"}, kTrainer, "unknown metric 'speed'"},
      {{}, kTrainer + " 'unbalanced", "--b"},
      {{}, kTrainer + " $(rm -rf /)", "command substitution"},
      {{"--junit", (dir / "missing" / "x.xml").string()}, kTrainer, "--junit"},
      {{}, "no-such-program-here --steps 3", "--b: cannot run 'no-such-program-here': command not found"},
      {{}, "/nonexistent/trainer", "--b: cannot run '/nonexistent/trainer': command not found"},
  };
  for (const auto& c : cases) {
    const ProcessResult run = Ab(dir / "runs", c.b, c.extra);
    EXPECT_EQ(run.exit_code, 2) << c.expected << "\n" << run.out << run.err;
    EXPECT_NE(run.err.find("rankscope: error: "), std::string::npos) << run.err;
    EXPECT_NE(run.err.find(c.expected), std::string::npos) << c.expected << ": " << run.err;
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
    EXPECT_FALSE(fs::exists(dir / "runs" / "pair-0")) << c.expected;
  }
}

// samples/ci/ab-gate.sh as a CI job runs it, with this build as both the base and the head,
// a short workload at 1 rank: B's planted delay fails the job with its reports; a missing
// base build is refused with one line.
TEST(AbEndToEnd, TheSampleCiGateCatchesAPlantedSlowdown) {
  TempDir dir;
  const std::string build = fs::path(RANKSCOPE_CLI).parent_path().parent_path().string();
  const std::string script = std::string(RANKSCOPE_SOURCE_DIR) + "/samples/ci/ab-gate.sh";
  std::map<std::string, std::string> env = testing::EndToEndEnvironment();
  env["RANKSCOPE_ARTIFACTS"] = (dir / "ci").string();
  env["RANKSCOPE_AB_WORKLOAD"] = "--steps 12 --width 128 --depth 2 --threads 1 --quiet";
  env["RANKSCOPE_AB_RANKS"] = "1";
  env["RANKSCOPE_AB_PAIRS"] = "8";
  env["RANKSCOPE_TRAINER_ARGS"] = "--extra-step-delay-ms 20";
  testing::ChildProcess gate({"/bin/bash", script, build, build}, env,
                             testing::ProcessOptions{.timeout = std::chrono::seconds(400)});
  const ProcessResult run = gate.Wait();
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  EXPECT_NE(run.out.find("regression: B is worse than A"), std::string::npos) << run.out;
  EXPECT_NE(ReadFile(dir / "ci" / "ab.md").find("## rankscope ab: regression"), std::string::npos);
  EXPECT_NE(ReadFile(dir / "ci" / "ab.xml").find("type=\"regression\""), std::string::npos);

  testing::ChildProcess missing({"/bin/bash", script, (dir / "no-build").string(), build}, env,
                                testing::ProcessOptions{.timeout = std::chrono::seconds(60)});
  const ProcessResult refused = missing.Wait();
  EXPECT_EQ(refused.exit_code, 2) << refused.out << refused.err;
  EXPECT_NE(refused.err.find("ab-gate: "), std::string::npos) << refused.err;
  EXPECT_EQ(std::count(refused.err.begin(), refused.err.end(), '\n'), 1) << refused.err;
}

}  // namespace
}  // namespace rankscope
