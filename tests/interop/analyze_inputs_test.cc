// Other tools' traces analyzed straight from their files (interop::AnalyzeInputs: no rank
// files, no SQLite) give exactly the report that `import` then `analyze` gives: over every
// real trace of ../shared/data and the fixtures here, so the reference values the import
// route reproduces (import_kineto_test, import_nsys_test) hold on this route too.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analyzer/analyze.h"
#include "interop/interop.h"
#include "report/report_writers.h"
#include "tests/shared_data.h"

namespace rankscope::interop {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

fs::path TestDir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("rankscope-analyze-inputs-" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// The report as JSON without what names where the run lives (a temporary import directory
// or the user's inputs) and the run id each import makes up.
Json Comparable(const analyzer::Report& report, const std::string& where) {
  Json json = Json::parse(report::ReportToJson(report));
  json["run"].erase("directory");
  json["run"].erase("run_id");
  std::string text = json.dump(1);
  for (size_t at = text.find(where); !where.empty() && at != std::string::npos; at = text.find(where, at)) {
    text.replace(at, where.size(), "<run>");
  }
  return Json::parse(text);
}

struct Case {
  const char* name;
  std::vector<std::string> inputs;  // under the shared data, or the source tree's test data
  bool shared = true;
};

const Case kCases[] = {
    {"hta_trace_filter_directory", {"kineto/hta_trace_filter"}},
    {"hta_trace_filter_two_files",
     {"kineto/hta_trace_filter/sampled_rank-1.json.gz", "kineto/hta_trace_filter/sampled_rank-0.json.gz"}},
    {"hta_control_rank3", {"kineto/hta_trace_diff/control_rank3.json.gz"}},
    {"hta_test_rank1", {"kineto/hta_trace_diff/test_rank1.json.gz"}},
    // Old Kineto format, no distributedInfo: ranks from the file names, in input order.
    {"tb_plugin_gloo_cpu",
     {"kineto/tb_plugin_distributed/test_distributed_gloo_cpu_worker1.json",
      "kineto/tb_plugin_distributed/test_distributed_gloo_cpu_worker0.json"}},
    {"tb_plugin_gloo_gpu",
     {"kineto/tb_plugin_distributed/test_distributed_gloo_gpu_worker0.json",
      "kineto/tb_plugin_distributed/test_distributed_gloo_gpu_worker1.json"}},
    {"tb_plugin_nccl",
     {"kineto/tb_plugin_distributed/test_distributed_nccl_worker0.json",
      "kineto/tb_plugin_distributed/test_distributed_nccl_worker1.json"}},
    {"tb_plugin_nccl_user_annotation",
     {"kineto/tb_plugin_distributed/test_distributed_nccl_user_annotation_has_communication_worker0.json"}},
    {"nsys_torchrun_2gpu", {"nsys/torchrun_2gpu_nccl.sqlite"}},
    {"nsys_saxpy_schema2", {"nsys/saxpy_mpi_cuda_schema2.sqlite"}},
    // A Kineto trace and an nsys export of other ranks, read at once.
    {"kineto_beside_nsys", {"kineto/hta_trace_diff/test_rank1.json.gz", "nsys/saxpy_mpi_cuda_schema2.sqlite"}},
    {"torch_legacy", {"tests/interop/data/torch_legacy/cpu_single.json"}, false},
};

class AnalyzeInputsTest : public ::testing::TestWithParam<Case> {};

TEST_P(AnalyzeInputsTest, DirectlyGivesTheReportOfImportThenAnalyze) {
  const Case& c = GetParam();
  std::vector<fs::path> inputs;
  for (const std::string& input : c.inputs) {
    inputs.push_back(c.shared ? testing::SharedDataDir() / input : fs::path(RANKSCOPE_SOURCE_DIR) / input);
    RANKSCOPE_REQUIRE_SHARED_DATA(inputs.back());
  }
  const fs::path run = TestDir(c.name) / "run";
  Result<ImportResult> imported = ImportTraces(inputs, run);
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  Result<analyzer::Report> from_files = analyzer::AnalyzeRun(run, analyzer::AnalyzeOptions{});
  ASSERT_TRUE(from_files.ok()) << from_files.status().message();

  // Two threads read inputs at once (their rank claims must still come in input order);
  // one, as a sequential import reads them, for the traces of several inputs.
  std::vector<int> thread_counts = {2};
  if (c.inputs.size() > 1) thread_counts.push_back(1);
  for (int threads : thread_counts) {
    analyzer::AnalyzeOptions options;
    options.threads = threads;
    Result<AnalyzedInputs> direct = AnalyzeInputs(inputs, options);
    ASSERT_TRUE(direct.ok()) << direct.status().message();
    EXPECT_TRUE(direct->foreign);
    EXPECT_EQ(direct->notes, imported->notes);
    std::string display;
    for (const fs::path& input : inputs) display += (display.empty() ? "" : ", ") + input.string();
    EXPECT_EQ(direct->report.run.directory, display);
    EXPECT_EQ(Comparable(direct->report, display), Comparable(*from_files, run.string()))
        << c.name << " with " << threads << " thread(s)";
  }
  fs::remove_all(run.parent_path());
}

INSTANTIATE_TEST_SUITE_P(EveryTrace, AnalyzeInputsTest, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& param) { return std::string(param.param.name); });

TEST(AnalyzeInputsErrorsTest, TwoInputsWithOneRankAreRefusedAsImportRefusesThem) {
  const fs::path control = testing::SharedDataDir() / "kineto/hta_trace_diff/control_rank3.json.gz";
  RANKSCOPE_REQUIRE_SHARED_DATA(control);
  const fs::path dir = TestDir("same-rank");
  const fs::path copy = dir / "copy.json.gz";
  fs::copy_file(control, copy);
  Result<AnalyzedInputs> direct = AnalyzeInputs({control, copy}, analyzer::AnalyzeOptions{});
  ASSERT_FALSE(direct.ok());
  Result<ImportResult> imported = ImportTraces({control, copy}, dir / "run");
  ASSERT_FALSE(imported.ok());
  EXPECT_EQ(direct.status().message(), imported.status().message());
  EXPECT_NE(direct.status().message().find("both hold rank 3"), std::string::npos) << direct.status().message();
  fs::remove_all(dir);
}

TEST(AnalyzeInputsErrorsTest, ADamagedInputAmongOthersFailsWithItsOwnLine) {
  const fs::path good = testing::SharedDataDir() / "kineto/hta_trace_diff/test_rank1.json.gz";
  RANKSCOPE_REQUIRE_SHARED_DATA(good);
  const fs::path truncated = fs::path(RANKSCOPE_SOURCE_DIR) / "tests/interop/data/kineto/truncated.json.gz";
  for (int threads : {1, 2}) {
    analyzer::AnalyzeOptions options;
    options.threads = threads;
    Result<AnalyzedInputs> direct = AnalyzeInputs({good, truncated, good}, options);
    ASSERT_FALSE(direct.ok());
    EXPECT_NE(direct.status().message().find("truncated.json.gz"), std::string::npos) << direct.status().message();
    EXPECT_EQ(direct.status().message().find('\n'), std::string::npos);
  }
}

TEST(AnalyzeInputsErrorsTest, AReportOrARunAmongTracesIsRefused) {
  const fs::path good = testing::SharedDataDir() / "kineto/hta_trace_diff/test_rank1.json.gz";
  RANKSCOPE_REQUIRE_SHARED_DATA(good);
  const fs::path dir = TestDir("report-among");
  const fs::path report = dir / "report.json";
  std::ofstream(report) << R"({"format": "rankscope.report.v1", "ranks": []})";
  Result<AnalyzedInputs> direct = AnalyzeInputs({good, report}, analyzer::AnalyzeOptions{});
  ASSERT_FALSE(direct.ok());
  EXPECT_NE(direct.status().message().find("report.json"), std::string::npos) << direct.status().message();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace rankscope::interop
