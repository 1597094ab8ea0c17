// The JSON report's shape: what docs/report-json.md promises and scripts rely on.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "report/report_writers.h"
#include "tests/report/sample_report.h"

namespace rankscope::report {

using analyzer::Report;
namespace {

using nlohmann::json;

const std::vector<std::string> kBreakdownKeys = {
    "window_ns",          "compute_ns",      "comm_ns",        "memory_ns",
    "overlap_ns",         "exposed_comm_ns", "busy_ns",        "idle_ns",
    "compute_only_ns",    "comm_only_ns",    "memory_only_ns", "overlap_pct",
    "comm_compute_ratio", "utilization_pct"};

const std::vector<std::string> kStepStatsKeys = {
    "step_ns", "compute_ns", "comm_ns",     "memory_ns",          "overlap_ns",      "exposed_comm_ns",
    "busy_ns", "idle_ns",    "overlap_pct", "comm_compute_ratio", "utilization_pct", "wait_ns"};

json Parse(const std::string& text) {
  json parsed = json::parse(text, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(parsed.is_discarded()) << text;
  return parsed;
}

TEST(ReportJsonTest, TopLevelKeysFormatAndVersion) {
  const std::string text = ReportToJson(testing::SampleReport());
  const json report = Parse(text);
  EXPECT_EQ(report["format"], "rankscope.report");
  EXPECT_EQ(report["version"], 1);
  EXPECT_EQ(report["tool_version"], "0.1.0-test");
  for (const char* key : {"run", "workload", "steps", "comm_patterns", "compute_patterns", "summary", "ranks",
                          "top_activities", "cross_rank", "parallelism", "memory", "comparable", "warnings"}) {
    EXPECT_TRUE(report.contains(key)) << key;
  }
  EXPECT_EQ(report.size(), 16u);
  // Pretty-printed with two spaces, in the structs' order, ending in a newline.
  EXPECT_EQ(text.rfind("{\n  \"format\": \"rankscope.report\",\n  \"version\": 1,", 0), 0u);
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
}

TEST(ReportJsonTest, RanksHaveRankDeviceAndAllTotals) {
  const json report = Parse(ReportToJson(testing::SampleReport()));
  const json& ranks = report["ranks"];
  ASSERT_TRUE(ranks.is_array());
  ASSERT_EQ(ranks.size(), 2u);
  for (size_t i = 0; i < ranks.size(); ++i) {
    const json& rank = ranks[i];
    EXPECT_EQ(rank["rank"], static_cast<int>(i));
    EXPECT_EQ(rank["device"], -1);
    EXPECT_TRUE(rank["host"].is_string());
    const json& totals = rank["totals"];
    ASSERT_TRUE(totals.is_object());
    EXPECT_EQ(totals.size(), kBreakdownKeys.size());
    for (const std::string& key : kBreakdownKeys) {
      ASSERT_TRUE(totals.contains(key)) << key;
      EXPECT_TRUE(totals[key].is_number()) << key;
    }
    // The partition the charts rely on holds in the JSON too.
    EXPECT_EQ(totals["compute_only_ns"].get<int64_t>() + totals["overlap_ns"].get<int64_t>() +
                  totals["comm_only_ns"].get<int64_t>() + totals["memory_only_ns"].get<int64_t>() +
                  totals["idle_ns"].get<int64_t>(),
              totals["window_ns"].get<int64_t>());
    EXPECT_TRUE(rank["wait_ns"].is_number_integer());
    EXPECT_TRUE(rank["transfer_ns"].is_number_integer());
  }
  EXPECT_EQ(ranks[0]["totals"]["window_ns"], 202 * testing::kMs);
}

TEST(ReportJsonTest, StepsAreFlatAndStepStatsHaveEveryMetric) {
  const json report = Parse(ReportToJson(testing::SampleReport()));
  const json& rank = report["ranks"][0];
  ASSERT_EQ(rank["steps"].size(), 3u);
  const json& warm_up = rank["steps"][0];
  EXPECT_EQ(warm_up["number"], 0);
  EXPECT_EQ(warm_up["aggregated"], false);
  EXPECT_EQ(rank["steps"][1]["aggregated"], true);
  for (const char* key : {"number", "start_ns", "end_ns", "aggregated", "wait_ns"}) {
    EXPECT_TRUE(warm_up.contains(key)) << key;
  }
  for (const std::string& key : kBreakdownKeys) EXPECT_TRUE(warm_up.contains(key)) << key;
  EXPECT_FALSE(warm_up.contains("breakdown"));
  EXPECT_EQ(warm_up.size(), 5 + kBreakdownKeys.size());
  EXPECT_EQ(warm_up["end_ns"].get<int64_t>() - warm_up["start_ns"].get<int64_t>(), warm_up["window_ns"]);

  const json& step_stats = rank["step_stats"];
  EXPECT_EQ(step_stats.size(), kStepStatsKeys.size());
  for (const std::string& key : kStepStatsKeys) {
    ASSERT_TRUE(step_stats.contains(key)) << key;
    for (const char* field : {"count", "median", "min", "max", "p90"}) {
      EXPECT_TRUE(step_stats[key].contains(field)) << key << "." << field;
    }
  }
  EXPECT_EQ(step_stats["step_ns"]["count"], 2);
  EXPECT_DOUBLE_EQ(step_stats["step_ns"]["median"].get<double>(), 51.0 * testing::kMs);
}

TEST(ReportJsonTest, EmptyOptionalsAreNull) {
  Report sample = testing::SampleReport();
  sample.ranks[0].steps[0].breakdown = testing::MakeBreakdown(0, 0, 5 * testing::kMs, 0, 0);  // comm, no compute
  const json report = Parse(ReportToJson(sample));
  EXPECT_TRUE(report["workload"]["parameters"].is_null());
  EXPECT_EQ(report["workload"]["global_batch"], 64);
  EXPECT_TRUE(report["steps"]["first"].is_null());
  EXPECT_TRUE(report["steps"]["last"].is_null());
  EXPECT_TRUE(report["ranks"][0]["steps"][0]["comm_compute_ratio"].is_null());
  EXPECT_TRUE(report["ranks"][0]["steps"][1]["comm_compute_ratio"].is_number());
  EXPECT_TRUE(report["cross_rank"]["kinds"][0]["busbw_gbps"].is_object());
  EXPECT_EQ(report["cross_rank"]["steps"][0]["last_rank"], 1);
  EXPECT_EQ(report["top_activities"][1]["activity_class"], "comm");
  EXPECT_EQ(report["cross_rank"]["stragglers"], json::array({1}));
}

TEST(ReportJsonTest, NonFiniteNumbersBecomeNull) {
  Report sample = testing::SampleReport();
  sample.ranks[0].totals.overlap_pct = std::numeric_limits<double>::quiet_NaN();
  sample.ranks[0].totals.comm_compute_ratio = std::numeric_limits<double>::infinity();
  sample.summary.throughput = -std::numeric_limits<double>::infinity();
  sample.summary.metrics[0].median = std::numeric_limits<double>::quiet_NaN();
  sample.ranks[1].step_stats.overlap_pct.p90 = std::numeric_limits<double>::infinity();
  sample.cross_rank.step_time_spread = std::numeric_limits<double>::quiet_NaN();
  const std::string text = ReportToJson(sample);
  for (const char* word : {"nan", "NaN", "inf", "Infinity"}) EXPECT_EQ(text.find(word), std::string::npos) << word;
  const json report = Parse(text);
  EXPECT_TRUE(report["ranks"][0]["totals"]["overlap_pct"].is_null());
  EXPECT_TRUE(report["ranks"][0]["totals"]["comm_compute_ratio"].is_null());
  EXPECT_TRUE(report["summary"]["throughput"].is_null());
  EXPECT_TRUE(report["summary"]["metrics"][0]["median"].is_null());
  EXPECT_TRUE(report["ranks"][1]["step_stats"]["overlap_pct"]["p90"].is_null());
  EXPECT_TRUE(report["cross_rank"]["step_time_spread"].is_null());
}

TEST(ReportJsonTest, InvalidUtf8InNamesIsReplacedNotThrown) {
  Report sample = testing::SampleReport();
  sample.top_activities[0].name = "kernel\xff\xfe";
  std::string text;
  EXPECT_NO_THROW(text = ReportToJson(sample));
  const json report = Parse(text);
  EXPECT_EQ(report["top_activities"][0]["name"].get<std::string>().rfind("kernel", 0), 0u);
}

// The writer lays the step rows out itself: the text must be exactly what nlohmann's
// dump(2) makes of the same values, whatever the doubles, names and empty parts.
TEST(ReportJsonTest, TextIsNlohmannsOwnLayoutOfIt) {
  Report sample = testing::SampleReport();
  const double awkward[] = {0.1 + 0.2, 1.0 / 3.0, 1e-7, 123456789.0, 1e21, 5e-324, -0.5, 100.0, 0.0,
                            std::numeric_limits<double>::quiet_NaN()};
  std::vector<analyzer::StepMetrics>& steps = sample.ranks[0].steps;
  for (size_t i = 0; i < std::size(awkward); ++i) {
    analyzer::StepMetrics step = steps.back();
    step.number = steps.back().number + 1;
    step.breakdown.overlap_pct = awkward[i];
    step.breakdown.utilization_pct = awkward[(i + 3) % std::size(awkward)];
    step.breakdown.comm_compute_ratio = i % 3 == 0 ? std::nullopt : std::optional<double>(awkward[(i + 5) % 10]);
    step.wait_ns = -static_cast<int64_t>(i) * 1'000'000'007;
    steps.push_back(step);
  }
  sample.ranks[1].steps.clear();  // an empty array among full ones
  sample.ranks[1].host = "host \"two\"\t\xff";
  sample.run.directory = "runs/\xce\xbc-bench";
  // Parsed keeping the keys' order, then dumped again.
  auto relaid = [](const std::string& text) {
    const auto parsed = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
    EXPECT_FALSE(parsed.is_discarded());
    return parsed.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
  };
  const std::string text = ReportToJson(sample);
  EXPECT_EQ(text, relaid(text));
  const json parsed = Parse(text);
  EXPECT_EQ(parsed["ranks"][0]["steps"].size(), steps.size());
  EXPECT_TRUE(parsed["ranks"][1]["steps"].empty());
  EXPECT_TRUE(parsed["ranks"][0]["steps"].back()["overlap_pct"].is_null());  // NaN

  const std::string empty = ReportToJson(testing::EmptyReport());
  EXPECT_EQ(empty, relaid(empty));
}

TEST(ReportJsonTest, EmptyReport) {
  const json report = Parse(ReportToJson(testing::EmptyReport()));
  EXPECT_EQ(report["format"], "rankscope.report");
  EXPECT_EQ(report["version"], 1);
  EXPECT_TRUE(report["ranks"].is_array());
  EXPECT_TRUE(report["ranks"].empty());
  EXPECT_TRUE(report["top_activities"].empty());
  EXPECT_TRUE(report["cross_rank"]["steps"].empty());
  EXPECT_TRUE(report["summary"]["step_time_ns"].is_null());
  EXPECT_TRUE(report["summary"]["throughput"].is_null());
  EXPECT_TRUE(report["run"]["world_size"].is_null());
  EXPECT_TRUE(report["cross_rank"]["clock"]["residual_ns"].is_null());
}

TEST(ReportJsonTest, CriticalPathOnlyWhenMeasured) {
  EXPECT_FALSE(Parse(ReportToJson(testing::SampleReport())).contains("critical_path"));
  analyzer::Report with = testing::SampleReport();
  analyzer::CriticalPathSummary path;
  path.steps = 3;
  path.measured_step_ns = path.path_ns = 1000;
  path.categories = {{"compute", 0.75}, {"host gap", 0.25}};
  path.top = {{"compute", 2, "gemm", 750, 0.75}};
  path.waits = {{0, 2, "allreduce", "gemm", 300, 3}};
  path.what_ifs = {{"communication fully overlapped", 900, 0.1}};
  with.critical_path = path;
  const json report = Parse(ReportToJson(with));
  const json& cp = report["critical_path"];
  EXPECT_EQ(cp["steps"], 3);
  EXPECT_EQ(cp["path_ns"], 1000);
  EXPECT_EQ(cp["categories"]["compute"], 0.75);
  EXPECT_EQ(cp["top"][0]["name"], "gemm");
  EXPECT_EQ(cp["top"][0]["rank"], 2);
  EXPECT_EQ(cp["waits"][0]["late_rank"], 2);
  EXPECT_EQ(cp["what_ifs"][0]["projected_step_ns"], 900);
  EXPECT_EQ(cp["what_ifs"][0]["gain"], 0.1);
}

}  // namespace
}  // namespace rankscope::report
