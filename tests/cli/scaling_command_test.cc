// `rankscope scale`, `compare` and `sweep` as a user runs them, on hand-written runs: the
// reports, the verdicts and exit codes, and every input a user can get wrong (one error
// line, exit 2, nothing written or changed).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <functional>

#include "cli/scaling_command.h"
#include "tests/cli/cli_test_util.h"
#include "tests/cli/cpu_run_writer.h"

namespace rankscope::cli {
namespace {

namespace fs = std::filesystem;
using testing::ExpectOneErrorLine;
using testing::RankSpec;
using testing::ReadFile;
using testing::RunRankscope;
using testing::Snapshot;
using testing::TempDir;
using testing::WriteRun;

// A sweep directory of hand-written runs: DIR/n<N>/ with `steps` steps of `step_ms(N)`.
void WriteSweep(const fs::path& dir, const std::vector<std::pair<int, int64_t>>& sizes_and_step_ms, int samples = 8,
                int steps = 12) {
  for (const auto& [size, step_ms] : sizes_and_step_ms) {
    RankSpec spec;
    spec.run_id = "run-n" + std::to_string(size);
    spec.world_size = size;
    spec.steps = steps;
    spec.step_ms = step_ms;
    spec.samples = samples;
    WriteRun(dir / ("n" + std::to_string(size)), size, spec);
  }
}

TEST(ParseSweepSizes, TwoOrMoreDistinctSizesInOrder) {
  EXPECT_EQ(*ParseSweepSizes("1,2,4"), (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(*ParseSweepSizes("4,1,2"), (std::vector<int>{1, 2, 4}));
  for (const char* bad : {"", "2", "1,1", "0,2", "1,,2", "a,b", "1,2,", "-1,2", "1, 2"}) {
    EXPECT_FALSE(ParseSweepSizes(bad).ok()) << bad;
  }
  EXPECT_NE(ParseSweepSizes("2").status().message().find("two or more world sizes"), std::string::npos);
}

TEST(SweepRunDir, IsNPrefixed) { EXPECT_EQ(SweepRunDir("/s", 4), fs::path("/s/n4")); }

// ---- scale -------------------------------------------------------------------------------

TEST(RankscopeScale, PrintsThePublishedTableAndProjects) {
  TempDir dir;
  WriteSweep(dir / "sweep", {{1, 10}, {2, 11}, {4, 12}});
  const auto before = Snapshot(dir / "sweep");
  const auto run = RunRankscope({"scale", (dir / "sweep" / "n1").string(), (dir / "sweep" / "n2").string(),
                                 (dir / "sweep" / "n4").string()});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("| GPUs | Batch Size | Samples/sec | Scaling Efficiency |"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("weak scaling: every run has 8 samples per rank"), std::string::npos) << run.out;
  // E(2) = T(1)/T(2) = 10/11.
  EXPECT_NE(run.out.find("90.9%"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("projection"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("error on the measured points"), std::string::npos) << run.out;
  EXPECT_EQ(Snapshot(dir / "sweep"), before) << "scale must not change the runs";
}

TEST(RankscopeScale, ASweepDirectoryIsItsRuns) {
  TempDir dir;
  WriteSweep(dir / "sweep", {{1, 10}, {2, 12}});
  const auto run = RunRankscope({"scale", (dir / "sweep").string(), "--format", "json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json report = nlohmann::json::parse(run.out);
  EXPECT_EQ(report["format"], "rankscope.scaling");
  EXPECT_EQ(report["version"], 1);
  EXPECT_EQ(report["mode"], "weak");
  ASSERT_EQ(report["points"].size(), 2u);
  EXPECT_NEAR(report["points"][1]["efficiency"].get<double>(), 10.0 / 12.0, 1e-9);
  EXPECT_TRUE(report["projection"].is_null());
  EXPECT_NE(report["projection_note"].get<std::string>().find("3 or more"), std::string::npos);
  ASSERT_EQ(report["runs"].size(), 2u);
}

TEST(RankscopeScale, WritesHtmlAndThePng) {
  TempDir dir;
  WriteSweep(dir / "sweep", {{1, 10}, {2, 11}, {4, 13}});
  const fs::path html = dir / "scale.html", png = dir / "scale.png";
  const auto run = RunRankscope({"scale", (dir / "sweep").string(), "--format", "html", "--out", html.string(),
                                 "--plot", png.string()});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_TRUE(run.out.empty()) << run.out;
  EXPECT_NE(ReadFile(html).find("<svg"), std::string::npos);
  const std::string image = ReadFile(png);
  ASSERT_GT(image.size(), 8u);
  EXPECT_EQ(image.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
}

TEST(RankscopeScale, OneWorldSizeIsNotAStudy) {
  TempDir dir;
  WriteSweep(dir / "sweep", {{2, 10}});
  const auto run = RunRankscope({"scale", (dir / "sweep" / "n2").string()});
  EXPECT_EQ(run.exit_code, kExitUsage);
  ExpectOneErrorLine(run, "two or more world sizes");
}

TEST(RankscopeScale, BadInputsAreOneLineAndWriteNothing) {
  TempDir dir;
  WriteSweep(dir / "sweep", {{1, 10}, {2, 11}});
  const std::string sweep = (dir / "sweep").string();
  struct Case {
    std::vector<std::string> args;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {{"scale", (dir / "missing").string()}, "no such file or directory"},
      {{"scale", sweep, "--format", "pdf"}, "--format 'pdf'"},
      {{"scale", sweep, "--plot", (dir / "no" / "x.png").string()}, "--plot"},
      {{"scale", sweep, "--out", dir.path().string()}, "is a directory"},
      {{"scale", dir.path().string()}, "neither a run"},
      {{"scale", sweep, (dir / "sweep" / "n2").string()}, "both ran 2 ranks"},
  };
  for (const Case& c : cases) {
    const auto before = Snapshot(dir.path());
    const auto run = RunRankscope(c.args);
    EXPECT_EQ(run.exit_code, kExitUsage) << c.expected;
    ExpectOneErrorLine(run, c.expected);
    EXPECT_EQ(Snapshot(dir.path()), before) << c.expected;
  }
}

// ---- compare -----------------------------------------------------------------------------

struct Baseline {
  TempDir dir;
  fs::path sweep, json;
  Baseline() : sweep(dir / "base"), json(dir / "base.json") {
    WriteSweep(sweep, {{1, 10}, {2, 11}});
    const auto run = RunRankscope({"scale", sweep.string(), "--format", "json", "--out", json.string()});
    EXPECT_EQ(run.exit_code, 0) << run.err;
  }
};

TEST(RankscopeCompare, TheSameRunsPass) {
  Baseline base;
  const auto run = RunRankscope({"compare", "--baseline", base.json.string(), base.sweep.string()});
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_NE(run.out.find("no regression"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("efficiency"), std::string::npos) << run.out;
  // The JSON report itself is a valid CURRENT too.
  const auto against_json = RunRankscope({"compare", "--baseline", base.json.string(), base.json.string()});
  EXPECT_EQ(against_json.exit_code, 0) << against_json.out << against_json.err;
}

TEST(RankscopeCompare, ABaselineWithSortedKeysIsStillABaseline) {
  Baseline base;
  // A note added by hand, then the keys sorted as `jq -S` does (nlohmann::json, not
  // ordered_json, writes them sorted): "comment" now comes before "format".
  nlohmann::json edited = nlohmann::json::parse(ReadFile(base.json));
  edited["comment"] = "measured on the old runner";
  const std::string sorted = edited.dump(1);
  ASSERT_FALSE(sorted.starts_with("{\n \"format\"")) << "the test needs \"format\" not first";
  std::ofstream(base.dir / "sorted.json") << sorted;
  const auto run = RunRankscope({"compare", "--baseline", (base.dir / "sorted.json").string(), base.sweep.string()});
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  const auto as_current =
      RunRankscope({"compare", "--baseline", base.json.string(), (base.dir / "sorted.json").string()});
  EXPECT_EQ(as_current.exit_code, 0) << as_current.out << as_current.err;
}

TEST(RankscopeCompare, ASlowerRunRegressesWithJUnitAndMarkdown) {
  Baseline base;
  WriteSweep(base.dir / "slow", {{1, 10}, {2, 14}});
  const fs::path junit = base.dir / "compare.xml", markdown = base.dir / "compare.md";
  const auto run = RunRankscope({"compare", "--baseline", base.json.string(), (base.dir / "slow").string(), "--junit",
                                 junit.string(), "--markdown", markdown.string()});
  EXPECT_EQ(run.exit_code, kExitRegression) << run.out << run.err;
  EXPECT_NE(run.out.find("REGRESSED"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("REGRESSION"), std::string::npos) << run.out;
  const std::string xml = ReadFile(junit);
  EXPECT_NE(xml.find("<failure"), std::string::npos) << xml;
  EXPECT_NE(xml.find("classname=\"rankscope.compare.n2\" name=\"step_time_ns\""), std::string::npos) << xml;
  EXPECT_NE(ReadFile(markdown).find("## rankscope compare: regression"), std::string::npos);
}

TEST(RankscopeCompare, PerMetricToleranceCanAllowTheChange) {
  Baseline base;
  WriteSweep(base.dir / "slow", {{1, 10}, {2, 12}});
  // 9% slower at 2 ranks: beyond 5%, within 30%.
  const auto strict = RunRankscope({"compare", "--baseline", base.json.string(), (base.dir / "slow").string(),
                                    "--metric", "step_time_ns"});
  EXPECT_EQ(strict.exit_code, kExitRegression) << strict.out;
  const auto loose = RunRankscope({"compare", "--baseline", base.json.string(), (base.dir / "slow").string(),
                                   "--metric", "step_time_ns:30%"});
  EXPECT_EQ(loose.exit_code, 0) << loose.out << loose.err;
}

TEST(RankscopeCompare, AnotherWorkloadIsRefusedUnlessForced) {
  Baseline base;
  WriteSweep(base.dir / "bigger", {{1, 10}, {2, 11}}, /*samples=*/16);
  const auto refused = RunRankscope({"compare", "--baseline", base.json.string(), (base.dir / "bigger").string()});
  EXPECT_EQ(refused.exit_code, kExitUsage);
  ExpectOneErrorLine(refused, "not the same workload as the baseline");
  const auto forced =
      RunRankscope({"compare", "--baseline", base.json.string(), (base.dir / "bigger").string(), "--force"});
  EXPECT_NE(forced.exit_code, kExitUsage) << forced.err;
  EXPECT_NE(forced.out.find("--force"), std::string::npos) << forced.out;
}

TEST(RankscopeCompare, BadInputsAreOneLineAndWriteNothing) {
  Baseline base;
  const std::string current = base.sweep.string();
  // A baseline from a future rankscope, and a file that is no report.
  nlohmann::json newer = nlohmann::json::parse(ReadFile(base.json));
  newer["version"] = 2;
  std::ofstream(base.dir / "newer.json") << newer.dump();
  std::ofstream(base.dir / "notes.json") << "{ not json";
  struct Case {
    std::vector<std::string> args;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {{"compare", "--baseline", (base.dir / "missing.json").string(), current}, "--baseline"},
      {{"compare", "--baseline", (base.dir / "newer.json").string(), current}, "version 2"},
      {{"compare", "--baseline", (base.dir / "notes.json").string(), current}, "not a JSON file"},
      {{"compare", "--baseline", base.json.string(), (base.dir / "nothing").string()}, "no such file"},
      {{"compare", "--baseline", base.json.string(), current, "--tolerance", "lots"}, "--tolerance"},
      {{"compare", "--baseline", base.json.string(), current, "--metric", "speed"}, "unknown metric 'speed'"},
      {{"compare", "--baseline", base.json.string(), current, "--junit", (base.dir / "no" / "x.xml").string()},
       "--junit"},
      {{"compare", base.json.string(), current}, "--baseline"},
  };
  for (const Case& c : cases) {
    const auto before = Snapshot(base.dir.path());
    const auto run = RunRankscope(c.args);
    EXPECT_EQ(run.exit_code, kExitUsage) << c.expected << "\n" << run.out;
    ExpectOneErrorLine(run, c.expected);
    EXPECT_EQ(Snapshot(base.dir.path()), before) << c.expected;
  }
}

// A baseline whose metrics were renamed, set to null or removed checks nothing: refused with
// one line (exit 2) instead of "no regression: 0 checks", and nothing written.
TEST(RankscopeCompare, ABaselineThatChecksNothingIsRefused) {
  Baseline base;
  const nlohmann::json original = nlohmann::json::parse(ReadFile(base.json));
  ASSERT_TRUE(original.contains("runs"));
  const std::vector<std::pair<std::string, std::function<void(nlohmann::json&)>>> edits = {
      {"renamed", [](nlohmann::json& metric) { metric["name"] = "old_" + metric["name"].get<std::string>(); }},
      {"null", [](nlohmann::json& metric) { metric["value"] = nullptr; metric.erase("samples"); }},
  };
  for (const auto& [what, edit] : edits) {
    nlohmann::json edited = original;
    for (nlohmann::json& run : edited["runs"]) {
      for (nlohmann::json& metric : run["metrics"]) edit(metric);
    }
    const fs::path file = base.dir / (what + ".json");
    std::ofstream(file) << edited.dump(1);
    const auto before = Snapshot(base.dir.path());
    const auto run = RunRankscope({"compare", "--baseline", file.string(), base.sweep.string(), "--junit",
                                   (base.dir / "out.xml").string()});
    EXPECT_EQ(run.exit_code, kExitUsage) << what << "\n" << run.out << run.err;
    ExpectOneErrorLine(run, "nothing to compare at");
    EXPECT_EQ(Snapshot(base.dir.path()), before) << what;
  }
  nlohmann::json emptied = original;
  for (nlohmann::json& run : emptied["runs"]) run["metrics"] = nlohmann::json::array();
  std::ofstream(base.dir / "emptied.json") << emptied.dump(1);
  const auto run = RunRankscope({"compare", "--baseline", (base.dir / "emptied.json").string(), base.sweep.string()});
  EXPECT_EQ(run.exit_code, kExitUsage) << run.out << run.err;
  ExpectOneErrorLine(run, "the baseline has no metric that this run has");
}

TEST(RankscopeCompare, ASingleRunBaselineAgainstASweepNeedsForce) {
  Baseline base;
  const fs::path run_json = base.dir / "n2.json";
  const auto analyzed =
      RunRankscope({"analyze", (base.sweep / "n2").string(), "--format", "json", "--out", run_json.string()});
  ASSERT_EQ(analyzed.exit_code, 0) << analyzed.err;
  const auto refused = RunRankscope({"compare", "--baseline", run_json.string(), base.sweep.string()});
  EXPECT_EQ(refused.exit_code, kExitUsage);
  ExpectOneErrorLine(refused, "world sizes 2 (baseline) vs 1,2 (current)");
  const auto same = RunRankscope({"compare", "--baseline", run_json.string(), (base.sweep / "n2").string()});
  EXPECT_EQ(same.exit_code, 0) << same.out << same.err;
}

// ---- sweep -------------------------------------------------------------------------------

TEST(RankscopeSweep, RunsEachSizeThenPrintsTheTable) {
  TempDir dir;
  const auto run = RunRankscope(
      {"sweep", "--ranks", "1,2", "-o", (dir / "sweep").string(), "--", FAKE_RANK_BINARY, "20", "0"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_TRUE(fs::exists(dir / "sweep" / "n1" / "rank-0.sqlite"));
  EXPECT_TRUE(fs::exists(dir / "sweep" / "n2" / "rank-1.sqlite"));
  EXPECT_NE(run.out.find("| GPUs | Batch Size | Samples/sec | Scaling Efficiency |"), std::string::npos) << run.out;
  for (const char* name : {"scaling.json", "scaling.html", "scaling.png"}) {
    EXPECT_TRUE(fs::exists(dir / "sweep" / name)) << name;
  }
  // The sweep's JSON is a baseline its own runs pass.
  const auto compared =
      RunRankscope({"compare", "--baseline", (dir / "sweep" / "scaling.json").string(), (dir / "sweep").string()});
  EXPECT_EQ(compared.exit_code, 0) << compared.out << compared.err;
}

TEST(RankscopeSweep, AFailingSizeStopsTheSweepAndKeepsTheRunsBefore) {
  TempDir dir;
  // fake_rank's third argument is its exit code: every run fails, so the sweep stops at 1 rank.
  const auto run = RunRankscope(
      {"sweep", "--ranks", "1,2", "-o", (dir / "sweep").string(), "--", FAKE_RANK_BINARY, "5", "0", "3"});
  EXPECT_EQ(run.exit_code, 3) << run.err;
  EXPECT_NE(run.err.find("sweep stopped: the 1-rank run failed (exit code 3)"), std::string::npos) << run.err;
  EXPECT_TRUE(fs::exists(dir / "sweep" / "n1" / "rank-0.sqlite"));
  EXPECT_FALSE(fs::exists(dir / "sweep" / "n2"));
  EXPECT_FALSE(fs::exists(dir / "sweep" / "scaling.json"));
}

TEST(RankscopeSweep, BadInputsAreOneLineAndRunNothing) {
  TempDir dir;
  WriteSweep(dir / "old", {{1, 10}});
  struct Case {
    std::vector<std::string> args;
    std::string expected;
  };
  const std::string out = (dir / "new").string();
  const std::vector<Case> cases = {
      {{"sweep", "--ranks", "2", "-o", out, "--", FAKE_RANK_BINARY}, "two or more world sizes"},
      {{"sweep", "--ranks", "1,2", "--", FAKE_RANK_BINARY}, "-o DIR is required"},
      {{"sweep", "--ranks", "1,2", "-o", out}, "missing command"},
      {{"sweep", "--ranks", "1,2", "-o", (dir / "old").string(), "--", FAKE_RANK_BINARY}, "--force"},
      {{"sweep", "--ranks", "1,2", "-o", out, "--steps", "x", "--", FAKE_RANK_BINARY}, "--steps 'x'"},
  };
  for (const Case& c : cases) {
    const auto before = Snapshot(dir.path());
    const auto run = RunRankscope(c.args);
    EXPECT_EQ(run.exit_code, kExitUsage) << c.expected;
    ExpectOneErrorLine(run, c.expected);
    EXPECT_EQ(Snapshot(dir.path()), before) << c.expected;
  }
}

}  // namespace
}  // namespace rankscope::cli
