// Other tools' traces analyzed straight from their files (interop::AnalyzeInputs: no rank
// files, no SQLite) give exactly the report that `import` then `analyze` gives: over every
// real trace of ../shared/data and the fixtures here, so the reference values the import
// route reproduces (import_kineto_test, import_nsys_test) hold on this route too.
#include <gtest/gtest.h>

#include <filesystem>
#include <algorithm>
#include <fstream>
#include <map>
#include <mutex>
#include <tuple>
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

// Every event a view sink receives, per rank number, with names and lanes spelled out (a
// streamed rank learns them as it goes), sorted: what the viewer's model is built from.
class CollectingSink : public analyzer::ViewEventSink {
 public:
  using Event = std::tuple<std::string, int64_t, int64_t, std::string, int, int, uint64_t>;

  Status OnRank(size_t index, analyzer::ViewRank rank) override {
    std::lock_guard lock(mutex_);
    ranks_[index] = std::move(rank);
    return Status::Ok();
  }
  Status OnEvents(size_t index, std::span<const analyzer::ViewEvent> events) override {
    std::lock_guard lock(mutex_);
    pending_[index].insert(pending_[index].end(), events.begin(), events.end());
    return Status::Ok();
  }
  Status OnMoreNames(size_t index, std::span<const std::string> strings, std::span<const trace::Lane> lanes) override {
    std::lock_guard lock(mutex_);
    analyzer::ViewRank& rank = ranks_[index];
    rank.strings.insert(rank.strings.end(), strings.begin(), strings.end());
    rank.lanes.insert(rank.lanes.end(), lanes.begin(), lanes.end());
    return Status::Ok();
  }
  Status OnRankEnd(size_t index, trace::RankMeta meta, std::vector<trace::Lane> lanes) override {
    std::lock_guard lock(mutex_);
    ranks_[index].meta = std::move(meta);
    ranks_[index].lanes = std::move(lanes);
    return Status::Ok();
  }
  Status OnMemory(size_t index, std::vector<analyzer::MemorySeries> series) override {
    std::lock_guard lock(mutex_);
    memory_[index] = std::move(series);
    return Status::Ok();
  }
  Status OnRankDone(size_t index) override {
    std::lock_guard lock(mutex_);
    const analyzer::ViewRank& rank = ranks_[index];
    for (const analyzer::MemorySeries& series : memory_[index]) {
      std::vector<std::tuple<std::string, int64_t, int64_t>>& samples =
          memory_by_rank_[rank.meta.rank.value_or(-1)][series.source];
      for (const analyzer::MemorySample& sample : series.samples) {
        samples.emplace_back(series.categories.at(sample.category), sample.ts_ns, sample.bytes);
      }
    }
    std::vector<Event>& events = by_rank_[rank.meta.rank.value_or(-1)];
    for (const analyzer::ViewEvent& e : pending_[index]) {
      const std::string lane = e.lane >= 1 && e.lane <= rank.lanes.size() ? analyzer::LaneLabel(rank.lanes[e.lane - 1]) : "?";
      events.emplace_back(lane, e.start_ns, e.end_ns, rank.strings.at(e.name), static_cast<int>(e.event_class),
                          static_cast<int>(e.source), e.correlation_id);
    }
    std::sort(events.begin(), events.end());
    rank_files_.push_back(rank.rank_file);
    return Status::Ok();
  }

  const std::map<int, std::vector<Event>>& by_rank() const { return by_rank_; }
  const std::vector<bool>& rank_files() const { return rank_files_; }
  // Per rank number and memory source: (category, time, bytes) of each sample, in order.
  using MemorySamples = std::map<int, std::map<std::string, std::vector<std::tuple<std::string, int64_t, int64_t>>>>;
  const MemorySamples& memory_by_rank() const { return memory_by_rank_; }

 private:
  std::mutex mutex_;
  std::map<size_t, analyzer::ViewRank> ranks_;
  std::map<size_t, std::vector<analyzer::ViewEvent>> pending_;
  std::map<int, std::vector<Event>> by_rank_;
  std::map<size_t, std::vector<analyzer::MemorySeries>> memory_;
  MemorySamples memory_by_rank_;
  std::vector<bool> rank_files_;
};

struct Case {
  const char* name;
  std::vector<std::string> inputs;  // under the shared data, or the source tree's test data
  bool shared = true;
  bool memory = false;  // the traces hold memory counters: the report and the view have them
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
    // Kineto [memory] events: memory counters through both routes.
    {"kineto_memory", {"tests/interop/golden/kineto_ddp_rank0.json", "tests/interop/golden/kineto_ddp_rank1.json"},
     false, true},
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
  if (c.memory) {
    ASSERT_FALSE(from_files->memory.empty());
    for (const analyzer::RankMemory& memory : from_files->memory) {
      EXPECT_TRUE(memory.source == "pytorch allocated" || memory.source == "pytorch reserved") << memory.source;
      EXPECT_GT(memory.peak_bytes, 0);
    }
  }

  // The viewer's route: the same events as the imported run's files, classed alike, and in
  // the same pass the same report.
  CollectingSink from_run;
  Result<ViewedInputs> run_view = ViewInputs({run}, ViewOptions{}, from_run);
  ASSERT_TRUE(run_view.ok()) << run_view.status().message();
  EXPECT_FALSE(run_view->foreign);
  EXPECT_EQ(run_view->report, nullptr) << "a rankscope run is analyzed afterwards";
  for (int threads : thread_counts) {
    CollectingSink direct;
    ViewOptions options;
    options.threads = threads;
    int last_done = 0, inputs_seen = 0;
    std::mutex progress_mutex;
    options.progress = [&](int done, int all) {
      std::lock_guard lock(progress_mutex);
      last_done = std::max(last_done, done);
      inputs_seen = all;
    };
    Result<ViewedInputs> viewed = ViewInputs(inputs, options, direct);
    ASSERT_TRUE(viewed.ok()) << viewed.status().message();
    EXPECT_TRUE(viewed->foreign);
    EXPECT_EQ(viewed->notes, imported->notes);
    // Progress counts trace files (a directory holds several), each once read.
    EXPECT_GE(inputs_seen, static_cast<int>(inputs.size()));
    EXPECT_EQ(last_done, inputs_seen);
    ASSERT_EQ(direct.by_rank().size(), from_run.by_rank().size());
    for (const auto& [rank, events] : from_run.by_rank()) {
      ASSERT_TRUE(direct.by_rank().contains(rank)) << "rank " << rank;
      const auto& got = direct.by_rank().at(rank);
      EXPECT_EQ(got.size(), events.size()) << c.name << " rank " << rank;
      EXPECT_TRUE(got == events) << c.name << " rank " << rank << ": the events differ";
    }
    EXPECT_EQ(direct.memory_by_rank(), from_run.memory_by_rank()) << c.name;
    EXPECT_EQ(direct.memory_by_rank().empty(), !c.memory) << c.name;
    for (bool rank_file : direct.rank_files()) EXPECT_FALSE(rank_file);
    ASSERT_NE(viewed->report, nullptr) << viewed->analysis_error;
    EXPECT_EQ(Comparable(*viewed->report, viewed->display), Comparable(*from_files, run.string()))
        << c.name << " viewed with " << threads << " thread(s)";
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
