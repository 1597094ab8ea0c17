// End to end: the reference trainer profiled as 2 CPU ranks, exported as Chrome trace JSON,
// imported back, and analyzed with the same figures; and real traces other tools recorded
// (PyTorch profiler JSON, an Nsight Systems export) analyzed and exported directly.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "tests/e2e/e2e_process.h"
#include "tests/shared_data.h"
#include "tests/temp_dir.h"

namespace rankscope {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::ProcessResult;
using testing::ReadFile;
using testing::RunProcess;
using testing::TempDir;

json AnalyzeJson(const std::string& input) {
  const ProcessResult result = RunProcess({RANKSCOPE_CLI, "analyze", input, "--format", "json"});
  // 0, or 1 for a partial run (the real traces hold 2 ranks of larger jobs).
  EXPECT_TRUE(result.exit_code == 0 || result.exit_code == 1) << result.err;
  return json::parse(result.out, nullptr, false);
}

// What a report measures, without what names the run.
json Figures(json report) {
  report["run"].erase("directory");
  report["run"].erase("run_id");
  report["comparable"].erase("source");
  return report;
}

// Chrome trace-event rules Perfetto and chrome://tracing rely on.
void ExpectValidChromeTrace(const json& trace, size_t ranks) {
  ASSERT_TRUE(trace["traceEvents"].is_array());
  std::set<int64_t> pids;
  std::map<std::tuple<int64_t, int64_t>, int> open_ranges;  // (pid, id) of async b/e
  std::map<int64_t, int> flows;                              // flow id -> starts - ends
  size_t complete = 0;
  for (const json& event : trace["traceEvents"]) {
    ASSERT_TRUE(event.contains("ph") && event["ph"].is_string()) << event.dump();
    ASSERT_TRUE(event.contains("pid")) << event.dump();
    const std::string ph = event["ph"];
    pids.insert(event["pid"].get<int64_t>());
    if (ph == "M") continue;
    ASSERT_TRUE(event.contains("ts") && event["ts"].is_number()) << event.dump();
    if (ph == "X") {
      ++complete;
      ASSERT_TRUE(event["dur"].is_number()) << event.dump();
      EXPECT_GE(event["dur"].get<double>(), 0.0) << event.dump();
      EXPECT_TRUE(event.contains("tid")) << event.dump();
    } else if (ph == "b" || ph == "e") {
      open_ranges[{event["pid"].get<int64_t>(), event["id"].get<int64_t>()}] += ph == "b" ? 1 : -1;
    } else if (ph == "s" || ph == "f") {
      flows[event["id"].get<int64_t>()] += ph == "s" ? 1 : -1;
    }
  }
  EXPECT_EQ(pids.size(), ranks);
  EXPECT_GT(complete, 0u);
  for (const auto& [key, balance] : open_ranges) EXPECT_EQ(balance, 0) << "async range " << std::get<1>(key);
  for (const auto& [id, balance] : flows) EXPECT_EQ(balance, 0) << "flow " << id;
}

TEST(InteropEndToEnd, ProfiledTrainerSurvivesExportAndImport) {
  TempDir dir;
  const fs::path run = dir / "run";
  const ProcessResult profiled =
      RunProcess({RANKSCOPE_CLI, "profile", "-n", "2", "-o", run.string(), "--", TRAINER_BINARY, "--steps", "8",
                  "--batch", "64", "--width", "256", "--depth", "3", "--bucket-mb", "0.1"});
  ASSERT_EQ(profiled.exit_code, 0) << profiled.err;

  const fs::path chrome = dir / "run.json.gz";
  const ProcessResult exported = RunProcess({RANKSCOPE_CLI, "export", run.string(), "--chrome", chrome.string()});
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  const fs::path plain = dir / "run.json";
  ASSERT_EQ(RunProcess({RANKSCOPE_CLI, "export", run.string(), "--chrome", plain.string()}).exit_code, 0);
  const json trace = json::parse(ReadFile(plain), nullptr, false);
  ASSERT_FALSE(trace.is_discarded());
  ExpectValidChromeTrace(trace, 2);

  const ProcessResult imported =
      RunProcess({RANKSCOPE_CLI, "import", chrome.string(), "-o", (dir / "back").string()});
  ASSERT_EQ(imported.exit_code, 0) << imported.err;

  const json original = AnalyzeJson(run.string());
  ASSERT_FALSE(original.is_discarded());
  EXPECT_EQ(original["ranks"].size(), 2u);
  EXPECT_EQ(original["steps"]["steps_found"], 8);
  // Every figure, to the nanosecond: the round trip loses nothing the analyzer reads.
  EXPECT_EQ(Figures(AnalyzeJson((dir / "back").string())), Figures(original));
  EXPECT_EQ(Figures(AnalyzeJson(chrome.string())), Figures(original));
}

double RankFigure(const json& report, int rank, const std::string& key) {
  for (const json& entry : report["ranks"]) {
    if (entry["rank"] == rank) return entry["totals"][key].get<double>();
  }
  ADD_FAILURE() << "no rank " << rank;
  return 0;
}

// ../shared/data/README.md, "Reference values: whole-trace metrics".
TEST(InteropEndToEnd, PyTorchProfilerTracesAnalyzeDirectly) {
  const fs::path traces = testing::SharedDataDir() / "kineto" / "hta_trace_filter";
  RANKSCOPE_REQUIRE_SHARED_DATA(traces);
  const json report = AnalyzeJson(traces.string());
  ASSERT_FALSE(report.is_discarded());
  ASSERT_EQ(report["ranks"].size(), 2u);
  EXPECT_EQ(report["run"]["directory"], traces.string());
  EXPECT_NEAR(RankFigure(report, 0, "overlap_pct"), 14.95, 0.05);
  EXPECT_NEAR(RankFigure(report, 1, "overlap_pct"), 19.93, 0.05);

  TempDir dir;
  const fs::path chrome = dir / "hta.json";
  const ProcessResult exported = RunProcess({RANKSCOPE_CLI, "export", traces.string(), "--chrome", chrome.string()});
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  ExpectValidChromeTrace(json::parse(ReadFile(chrome)), 2);
}

TEST(InteropEndToEnd, NsightSystemsExportAnalyzesDirectly) {
  const fs::path exported = testing::SharedDataDir() / "nsys" / "torchrun_2gpu_nccl.sqlite";
  RANKSCOPE_REQUIRE_SHARED_DATA(exported);
  const json report = AnalyzeJson(exported.string());
  ASSERT_FALSE(report.is_discarded());
  ASSERT_EQ(report["ranks"].size(), 2u);
  EXPECT_NEAR(RankFigure(report, 0, "utilization_pct"), 91.32, 0.05);
  EXPECT_NEAR(RankFigure(report, 1, "utilization_pct"), 89.49, 0.05);
  EXPECT_EQ(report["cross_rank"]["collective_source"], "NCCL kernels");
}

}  // namespace
}  // namespace rankscope
