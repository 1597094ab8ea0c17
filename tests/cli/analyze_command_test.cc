// `rankscope analyze`: option parsing, and the built binary on hand-written runs, above all
// on every input a user can get wrong (one error line, the right exit status, nothing
// written or changed).
#include <gtest/gtest.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <sqlite3.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>

#include "cli/analyze_command.h"
#include "cli/output_file.h"
#include "cli/profile.h"
#include "tests/cli/cli_test_util.h"
#include "tests/cli/cpu_run_writer.h"
#include "trace/run_dir.h"
#include "trace/writer.h"

namespace rankscope::cli {
namespace {

using testing::Lines;
using testing::RunRankscope;
using testing::Snapshot;
using testing::ExpectOneErrorLine;
using testing::RankSpec;
using testing::TempDir;
using testing::WriteRank;
using testing::WriteRun;

TEST(ParseStepRange, AcceptsTheFourForms) {
  using Range = std::pair<std::optional<int64_t>, std::optional<int64_t>>;
  EXPECT_EQ(*ParseStepRange("3..7"), (Range{3, 7}));
  EXPECT_EQ(*ParseStepRange("3.."), (Range{3, std::nullopt}));
  EXPECT_EQ(*ParseStepRange("..7"), (Range{std::nullopt, 7}));
  EXPECT_EQ(*ParseStepRange("5"), (Range{5, 5}));
}

TEST(ParseStepRange, RefusesNonsense) {
  for (const char* text : {"", "..", "a..b", "3..x", "7..3", "3...7", "1,2", " 3"}) {
    EXPECT_FALSE(ParseStepRange(text).ok()) << text;
  }
}

TEST(MakeAnalyzeOptions, StepsWithoutSkipMeansExactlyThoseSteps) {
  AnalyzeRequest request;
  EXPECT_EQ(MakeAnalyzeOptions(request)->skip_steps, 1);
  request.steps = "2..4";
  EXPECT_EQ(MakeAnalyzeOptions(request)->skip_steps, 0);
  request.skip_steps = 3;
  EXPECT_EQ(MakeAnalyzeOptions(request)->skip_steps, 3);
  request.skip_steps = -1;
  EXPECT_FALSE(MakeAnalyzeOptions(request).ok());
}

TEST(MakeAnalyzeOptions, WhatIfsImplyTheCriticalPathAndRefuseBadForms) {
  AnalyzeRequest request;
  EXPECT_FALSE(MakeAnalyzeOptions(request)->critical_path);
  request.what_ifs = {"gemm=2", "a=b=1.5"};
  const Result<analyzer::AnalyzeOptions> options = MakeAnalyzeOptions(request);
  ASSERT_TRUE(options.ok()) << options.status().message();
  EXPECT_TRUE(options->critical_path);
  ASSERT_EQ(options->what_ifs.size(), 2u);
  EXPECT_EQ(options->what_ifs[0].text, "gemm");
  EXPECT_EQ(options->what_ifs[0].factor, 2);
  EXPECT_EQ(options->what_ifs[1].text, "a=b");  // the last '=' splits
  EXPECT_EQ(options->what_ifs[1].factor, 1.5);
  request.what_ifs.clear();
  request.bandwidth_what_ifs = {4};
  ASSERT_TRUE(MakeAnalyzeOptions(request).ok());
  EXPECT_TRUE(MakeAnalyzeOptions(request)->critical_path);
  EXPECT_EQ(MakeAnalyzeOptions(request)->bandwidth_what_ifs, std::vector<double>{4});
  for (double bad : {0.0, -2.0, std::numeric_limits<double>::infinity()}) {
    request.bandwidth_what_ifs = {bad};
    const auto refused = MakeAnalyzeOptions(request);
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_NE(refused.status().message().find("--what-if-bandwidth"), std::string::npos);
  }
  request.bandwidth_what_ifs.clear();
  request.critical_path_steps = 0;
  ASSERT_TRUE(MakeAnalyzeOptions(request).ok());
  EXPECT_TRUE(MakeAnalyzeOptions(request)->critical_path);
  EXPECT_EQ(MakeAnalyzeOptions(request)->critical_path_steps, 0u);
  request.critical_path_steps = -1;
  EXPECT_FALSE(MakeAnalyzeOptions(request).ok());
  request.critical_path_steps.reset();
  for (const char* bad : {"gemm", "=2", "gemm=", "gemm=0", "gemm=-1", "gemm=2x", "gemm=nan", "gemm=inf"}) {
    request.what_ifs = {bad};
    const Result<analyzer::AnalyzeOptions> refused = MakeAnalyzeOptions(request);
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_NE(refused.status().message().find("--what-if"), std::string::npos) << refused.status().message();
  }
}

TEST(MakeAnalyzeOptions, PatternsReachTheClassifier) {
  AnalyzeRequest request;
  request.comm_patterns = {"deep_ep"};
  request.compute_patterns = {"fused"};
  request.step_names = {"iteration"};
  const Result<analyzer::AnalyzeOptions> options = MakeAnalyzeOptions(request);
  ASSERT_TRUE(options.ok());
  EXPECT_EQ(options->classify.comm_patterns, std::vector<std::string>{"deep_ep"});
  EXPECT_EQ(options->classify.compute_patterns, std::vector<std::string>{"fused"});
  EXPECT_NE(std::find(options->step_names.begin(), options->step_names.end(), "iteration"), options->step_names.end());
  request.comm_patterns = {""};
  EXPECT_FALSE(MakeAnalyzeOptions(request).ok());
}

TEST(ParseReportFormat, KnowsTheFourFormats) {
  EXPECT_EQ(*ParseReportFormat("text"), ReportFormat::kText);
  EXPECT_EQ(*ParseReportFormat("json"), ReportFormat::kJson);
  EXPECT_EQ(*ParseReportFormat("md"), ReportFormat::kMarkdown);
  EXPECT_EQ(*ParseReportFormat("html"), ReportFormat::kHtml);
  EXPECT_FALSE(ParseReportFormat("pdf").ok());
}

TEST(RankscopeAnalyze, ReportsACompleteRunInEveryFormat) {
  TempDir dir;
  WriteRun(dir / "run", 2);
  const auto before = Snapshot(dir / "run");

  const auto text = RunRankscope({"analyze", (dir / "run").string()});
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("2 of 2"), std::string::npos) << text.out;

  const auto json = RunRankscope({"analyze", (dir / "run").string(), "--format", "json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const nlohmann::json report = nlohmann::json::parse(json.out);
  ASSERT_EQ(report["ranks"].size(), 2u);
  // Step 0 is warm-up; steps 1 and 2: compute [0,6) ms, comm [4,8) ms of a 10 ms step.
  const nlohmann::json& totals = report["ranks"][0]["totals"];
  EXPECT_EQ(report["ranks"][0]["step_stats"]["step_ns"]["median"], 10e6);
  EXPECT_EQ(report["ranks"][0]["step_stats"]["overlap_pct"]["median"], 50.0);  // 2 of 4 ms hidden
  EXPECT_EQ(totals["window_ns"], 28'000'000);  // [0, 28) ms: first compute start to last comm end
  // Global batch 8 samples/rank x 2 ranks = 16 per 10 ms step: 1600 samples/s.
  EXPECT_DOUBLE_EQ(report["summary"]["throughput"].get<double>(), 1600.0);

  for (const char* format : {"md", "html"}) {
    const auto out = RunRankscope({"analyze", (dir / "run").string(), "--format", format});
    EXPECT_EQ(out.exit_code, 0) << out.err;
    EXPECT_FALSE(out.out.empty());
  }
  EXPECT_EQ(Snapshot(dir / "run"), before) << "analyze must not change the run";
}

TEST(RankscopeAnalyze, WritesTheReportFileAndSaysWhere) {
  TempDir dir;
  WriteRun(dir / "run", 2);
  const std::string out = (dir / "report.html").string();
  const auto run = RunRankscope({"analyze", (dir / "run").string(), "--format", "html", "--out", out});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_TRUE(run.out.empty());
  EXPECT_NE(run.err.find("wrote the HTML report to " + out), std::string::npos) << run.err;
  EXPECT_NE(testing::ReadFile(out).find("<svg"), std::string::npos);
  // No temporary file left beside it.
  int files = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir.path())) ++files;
  EXPECT_EQ(files, 2);  // run/ and report.html
}

TEST(RankscopeAnalyze, MissingRanksGiveAPartialReportAndExitOne) {
  TempDir dir;
  std::filesystem::create_directories(dir / "run");
  RankSpec spec;
  spec.world_size = 4;
  WriteRank(dir / "run", 0, spec);
  WriteRank(dir / "run", 1, spec);
  const auto run = RunRankscope({"analyze", (dir / "run").string(), "--format", "json"});
  EXPECT_EQ(run.exit_code, kExitPartial) << run.err;
  const nlohmann::json report = nlohmann::json::parse(run.out);
  EXPECT_EQ(report["run"]["missing_ranks"], nlohmann::json::array({2, 3}));
  EXPECT_EQ(report["ranks"].size(), 2u);
  EXPECT_NE(run.err.find("rankscope: warning:"), std::string::npos);
  EXPECT_NE(run.err.find("2-3"), std::string::npos) << run.err;
}

TEST(RankscopeAnalyze, OneRankFileIsAnalyzedAloneWithOneWarning) {
  TempDir dir;
  WriteRun(dir / "run", 2);
  const auto run = RunRankscope({"analyze", (dir / "run" / "rank-0.sqlite").string(), "--format", "json"});
  EXPECT_EQ(run.exit_code, kExitPartial) << run.err;
  // Only the missing rank is worth a line: one rank's collectives have nothing to match.
  const std::vector<std::string> lines = Lines(run.err);
  ASSERT_EQ(lines.size(), 1u) << run.err;
  EXPECT_NE(lines[0].find("missing rank files for rank(s) 1"), std::string::npos) << lines[0];
  const nlohmann::json report = nlohmann::json::parse(run.out);
  EXPECT_EQ(report["cross_rank"]["unmatched"], 0);
  EXPECT_EQ(report["ranks"].size(), 1u);
}

TEST(RankscopeAnalyze, FilesOfTwoRunsAreRefused) {
  TempDir dir;
  std::filesystem::create_directories(dir / "run");
  WriteRank(dir / "run", 0, RankSpec{});
  RankSpec other;
  other.run_id = "run-b";
  WriteRank(dir / "run", 1, other);
  ExpectOneErrorLine(RunRankscope({"analyze", (dir / "run").string()}), "run");
}

TEST(RankscopeAnalyze, CorruptFileIsNamed) {
  TempDir dir;
  WriteRun(dir / "run", 2);
  testing::WriteFile(dir / "run" / "rank-1.sqlite", "this is not a database, it is a complaint");
  const auto run = RunRankscope({"analyze", (dir / "run").string()});
  EXPECT_EQ(run.exit_code, kExitUsage);
  ExpectOneErrorLine(run, "rank-1.sqlite");
}

TEST(RankscopeAnalyze, MissingRunDirectory) {
  TempDir dir;
  const auto run = RunRankscope({"analyze", (dir / "nothing-here").string()});
  EXPECT_EQ(run.exit_code, kExitUsage);
  ExpectOneErrorLine(run, "nothing-here");
}

TEST(RankscopeAnalyze, AStepRangeThatSelectsNothingSaysWhichStepsExist) {
  TempDir dir;
  WriteRun(dir / "run", 2);
  const auto run = RunRankscope({"analyze", (dir / "run").string(), "--steps", "100..200"});
  EXPECT_EQ(run.exit_code, kExitUsage);
  ExpectOneErrorLine(run, "the run has steps 0..2");
}

TEST(RankscopeAnalyze, NoDeviceActivityIsAnError) {
  TempDir dir;
  RankSpec spec;
  spec.device_activity = false;
  WriteRun(dir / "run", 2, spec);
  const auto run = RunRankscope({"analyze", (dir / "run").string()});
  EXPECT_EQ(run.exit_code, kExitUsage);
  ExpectOneErrorLine(run, "no rank has device activity");
}

TEST(RankscopeAnalyze, NoDeviceActivityGivesCuptisReasonWhenItWasOff) {
  TempDir dir;
  RankSpec spec;
  spec.device_activity = false;
  spec.meta["cupti.status"] = "off: cuptiSubscribe_v2 failed: CUPTI_ERROR_UNKNOWN (999) (no usable CUDA driver?)";
  WriteRun(dir / "run", 2, spec);
  const auto run = RunRankscope({"analyze", (dir / "run").string()});
  EXPECT_EQ(run.exit_code, kExitUsage);
  ExpectOneErrorLine(run, "nothing to measure; CUDA activity was not recorded: cuptiSubscribe_v2 failed: "
                          "CUPTI_ERROR_UNKNOWN (999) (no usable CUDA driver?) (rank(s) 0, 1)");
}

TEST(RankscopeAnalyze, AnIdleRankWhoseCuptiWasOffSaysWhy) {
  TempDir dir;
  std::filesystem::create_directories(dir / "run");
  WriteRank(dir / "run", 0, RankSpec{});
  RankSpec idle;
  idle.device_activity = false;
  idle.meta["cupti.status"] = "off: another CUPTI client is attached ('Nsight Systems')";
  WriteRank(dir / "run", 1, idle);
  const auto run = RunRankscope({"analyze", (dir / "run").string(), "--format", "json"});
  EXPECT_EQ(run.exit_code, kExitPartial) << run.err;
  EXPECT_NE(run.err.find("rank(s) 1 recorded no device activity and are left out of the metrics; CUDA activity "
                         "was not recorded: another CUPTI client is attached ('Nsight Systems') (rank(s) 1)"),
            std::string::npos)
      << run.err;
  // What the user chose is not news.
  std::filesystem::create_directories(dir / "run2");
  WriteRank(dir / "run2", 0, RankSpec{});
  RankSpec unselected = idle;
  unselected.meta["cupti.status"] = "off: not selected (--trace)";
  WriteRank(dir / "run2", 1, unselected);
  const auto chosen = RunRankscope({"analyze", (dir / "run2").string(), "--format", "json"});
  EXPECT_EQ(chosen.exit_code, kExitPartial) << chosen.err;
  EXPECT_NE(chosen.err.find("rank(s) 1 recorded no device activity and are left out of the metrics\n"),
            std::string::npos)
      << chosen.err;
}

TEST(RankscopeAnalyze, ARankWithoutActivityIsNamed) {
  TempDir dir;
  std::filesystem::create_directories(dir / "run");
  WriteRank(dir / "run", 0, RankSpec{});
  RankSpec idle;
  idle.device_activity = false;
  WriteRank(dir / "run", 1, idle);
  const auto run = RunRankscope({"analyze", (dir / "run").string(), "--format", "json"});
  EXPECT_EQ(run.exit_code, kExitPartial) << run.err;
  EXPECT_NE(run.err.find("rank(s) 1 recorded no device activity"), std::string::npos) << run.err;
}

// What RunAnalyze writes to its two streams.
struct Streams {
  int exit_code = 0;
  std::string out, err;
};

Streams RunInProcess(const AnalyzeRequest& request, bool terminal) {
  std::FILE* out = std::tmpfile();
  std::FILE* err = std::tmpfile();
  Streams streams;
  streams.exit_code = RunAnalyze(request, out, err, terminal);
  for (auto [file, text] : {std::pair{out, &streams.out}, std::pair{err, &streams.err}}) {
    std::rewind(file);
    char buffer[4096];
    for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, file)) > 0;) text->append(buffer, n);
    std::fclose(file);
  }
  return streams;
}

TEST(RunAnalyze, ProgressGoesToStderrOnlyForATerminal) {
  TempDir dir;
  RankSpec spec;
  spec.world_size = 3;
  WriteRun(dir / "run", 3, spec);
  AnalyzeRequest request;
  request.inputs = {(dir / "run").string()};
  request.format = "json";
  const Streams terminal = RunInProcess(request, /*terminal=*/true);
  EXPECT_EQ(terminal.exit_code, 0) << terminal.err;
  EXPECT_NE(terminal.err.find("read 3/3 rank files"), std::string::npos) << terminal.err;
  EXPECT_EQ(terminal.out.find("rank files"), std::string::npos);  // never in the report
  const Streams pipe = RunInProcess(request, /*terminal=*/false);
  EXPECT_EQ(pipe.exit_code, 0) << pipe.err;
  EXPECT_TRUE(pipe.err.empty()) << pipe.err;
  EXPECT_EQ(pipe.out, terminal.out);
}

TEST(RankscopeAnalyze, BadOptionsLeaveAnExistingReportAlone) {
  TempDir dir;
  WriteRun(dir / "run", 2);
  const std::filesystem::path out = dir / "report.json";
  testing::WriteFile(out, "the previous report");
  ExpectOneErrorLine(RunRankscope({"analyze", (dir / "run").string(), "--format", "pdf", "--out", out.string()}),
                     "--format");
  ExpectOneErrorLine(RunRankscope({"analyze", (dir / "run").string(), "--steps", "9..1", "--out", out.string()}),
                     "--steps");
  ExpectOneErrorLine(RunRankscope({"analyze", (dir / "missing").string(), "--out", out.string()}), "missing");
  EXPECT_EQ(testing::ReadFile(out), "the previous report");
  ExpectOneErrorLine(RunRankscope({"analyze", (dir / "run").string(), "--out", (dir / "no" / "r.json").string()}),
                     "does not exist");
  ExpectOneErrorLine(RunRankscope({"analyze"}), "RUN");
  ExpectOneErrorLine(RunRankscope({"analyze", (dir / "run").string(), "--bogus"}), "--bogus");
}

// Ids a rank file does not hold (a damaged or hostile file): the analysis counts those rows
// invalid, says so, and reports the rest, at once and without a crash.
TEST(RankscopeAnalyze, RowsWithIdsTheFileLacksAreCountedInvalid) {
  TempDir dir;
  WriteRun(dir / "run", 2);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir / "run" / "rank-0.sqlite").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,
                         "UPDATE nvtx_ranges SET name = -1 WHERE id = 1; "
                         "UPDATE nvtx_ranges SET name = 987654321 WHERE id = 2; "
                         "UPDATE nvtx_ranges SET lane = 9223372036854775807 WHERE id = 3;",
                         nullptr, nullptr, nullptr),
            SQLITE_OK)
      << sqlite3_errmsg(db);
  sqlite3_close(db);
  const auto run = RunRankscope({"analyze", (dir / "run").string(), "--format", "json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json report = nlohmann::json::parse(run.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(report.is_object()) << run.out;
  EXPECT_EQ(report["run"]["invalid_events"], 3);
  EXPECT_NE(run.err.find("rankscope: warning: 3 damaged event(s)"), std::string::npos) << run.err;
}

// The report's file is written under a name no file had, then renamed: whatever is at the
// destination, a FIFO included, is replaced, never opened.
TEST(WriteFileAtomically, ReplacesWhatIsThereWithoutOpeningIt) {
  TempDir dir;
  const std::filesystem::path out = dir / "report.json";
  ASSERT_EQ(::mkfifo(out.c_str(), 0600), 0) << std::strerror(errno);
  const Status written = WriteFileAtomically(out, "{\"report\": 1}\n");
  ASSERT_TRUE(written.ok()) << written.message();
  EXPECT_TRUE(std::filesystem::is_regular_file(out));
  EXPECT_EQ(testing::ReadFile(out), "{\"report\": 1}\n");
  EXPECT_EQ(std::filesystem::status(out).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write |
                std::filesystem::perms::group_read | std::filesystem::perms::others_read);
  int files = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir.path())) ++files;
  EXPECT_EQ(files, 1) << "no temporary left beside it";
}

// A character device is written into, not replaced: `--out /dev/null` must leave the device.
TEST(WriteFileAtomically, WritesIntoACharacterDevice) {
  const Status written = WriteFileAtomically("/dev/null", "{\"report\": 1}\n");
  ASSERT_TRUE(written.ok()) << written.message();
  struct stat info {};
  ASSERT_EQ(::stat("/dev/null", &info), 0);
  EXPECT_TRUE(S_ISCHR(info.st_mode)) << "/dev/null is no longer a device";
}

}  // namespace
}  // namespace rankscope::cli
