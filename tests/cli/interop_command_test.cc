// `rankscope export` and `rankscope import`, and the other commands reading foreign traces
// directly: the built binary on hand-written runs, a round trip that must not change a
// single figure, and every input a user can get wrong (one error line, exit 2, nothing
// written or changed).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/cli/cli_test_util.h"
#include "tests/cli/cpu_run_writer.h"
#include "trace/run_dir.h"

namespace rankscope::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::ExpectOneErrorLine;
using testing::Lines;
using testing::RankSpec;
using testing::ReadFile;
using testing::RunOptions;
using testing::RunRankscope;
using testing::Snapshot;
using testing::TempDir;
using testing::WriteFile;
using testing::WriteRun;

// The report of `path` as JSON, without what names the run rather than measures it.
json ReportFigures(const std::string& path, const RunOptions& options = {}) {
  const auto run = RunRankscope({"analyze", path, "--format", "json"}, options);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  json report = json::parse(run.out, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(report.is_discarded()) << run.out;
  if (report.is_discarded()) return report;
  report["run"].erase("directory");
  report["run"].erase("run_id");
  report["comparable"].erase("source");
  return report;
}

size_t CountEntries(const fs::path& dir) {
  size_t count = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir)) ++count;
  return count;
}

class InteropCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteRun(dir_ / "run", 2);
    fs::create_directories(dir_ / "tmp");
    // Runs read on the fly are imported under TMPDIR: the tests check it is left empty.
    options_.set_env["TMPDIR"] = (dir_ / "tmp").string();
  }
  fs::path Export(const std::string& name) {
    const fs::path out = dir_ / name;
    const auto run = RunRankscope({"export", (dir_ / "run").string(), "--chrome", out.string()}, options_);
    EXPECT_EQ(run.exit_code, 0) << run.err;
    return out;
  }

  TempDir dir_;
  RunOptions options_;
};

TEST_F(InteropCommandTest, ExportWritesChromeJsonAndLeavesTheRunAlone) {
  const auto before = Snapshot(dir_ / "run");
  const fs::path out = dir_ / "trace.json";
  const auto run = RunRankscope({"export", (dir_ / "run").string(), "--chrome", out.string()}, options_);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_TRUE(run.out.empty()) << run.out;
  const std::vector<std::string> lines = Lines(run.err);
  ASSERT_EQ(lines.size(), 1u) << run.err;
  EXPECT_NE(lines[0].find("of 2 ranks to " + out.string()), std::string::npos) << lines[0];
  const json trace = json::parse(ReadFile(out), nullptr, false);
  ASSERT_FALSE(trace.is_discarded());
  ASSERT_TRUE(trace["traceEvents"].is_array());
  EXPECT_FALSE(trace["traceEvents"].empty());
  EXPECT_EQ(trace["rankscope"]["ranks"].size(), 2u);
  EXPECT_EQ(Snapshot(dir_ / "run"), before) << "export must not change the run";
}

TEST_F(InteropCommandTest, ExportCompressesWhenTheNameEndsInGz) {
  const std::string bytes = ReadFile(Export("trace.json.gz"));
  ASSERT_GE(bytes.size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>(bytes[0]), 0x1f);
  EXPECT_EQ(static_cast<unsigned char>(bytes[1]), 0x8b);
}

TEST_F(InteropCommandTest, ImportOfAnExportGivesTheSameReport) {
  const fs::path exported = Export("trace.json");
  const auto run = RunRankscope({"import", exported.string(), "-o", (dir_ / "back").string()}, options_);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.err.find("imported 2 ranks"), std::string::npos) << run.err;
  EXPECT_TRUE(fs::exists(dir_ / "back" / trace::RankFileName(0)));
  EXPECT_TRUE(fs::exists(dir_ / "back" / trace::RankFileName(1)));
  const json original = ReportFigures((dir_ / "run").string());
  EXPECT_EQ(ReportFigures((dir_ / "back").string()), original);
}

TEST_F(InteropCommandTest, AnalyzeReadsAnExportedTraceDirectlyAndCleansUp) {
  const fs::path exported = Export("trace.json.gz");
  const auto run = RunRankscope({"analyze", exported.string(), "--format", "json"}, options_);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const json report = json::parse(run.out, nullptr, false);
  ASSERT_FALSE(report.is_discarded()) << run.out;
  // The report names the file given, not the temporary run it was read through.
  EXPECT_EQ(report["run"]["directory"], exported.string());
  EXPECT_EQ(report["comparable"]["source"], exported.string());
  EXPECT_EQ(ReportFigures(exported.string(), options_), ReportFigures((dir_ / "run").string()));
  EXPECT_EQ(CountEntries(dir_ / "tmp"), 0u) << "the temporary import was left behind";
}

TEST_F(InteropCommandTest, WarningsAboutAnImportedRunNameTheFileGiven) {
  WriteRun(dir_ / "partial", 1, RankSpec{.world_size = 3});  // ranks 1 and 2 missing
  const fs::path exported = dir_ / "partial.json";
  ASSERT_EQ(RunRankscope({"export", (dir_ / "partial").string(), "--chrome", exported.string()}).exit_code, 0);
  const auto run = RunRankscope({"analyze", exported.string(), "--format", "json"}, options_);
  EXPECT_EQ(run.exit_code, 1) << run.err;  // a partial run: the report, and exit 1
  EXPECT_NE(run.err.find(exported.string() + ": missing rank files for rank(s) 1-2"), std::string::npos) << run.err;
  EXPECT_EQ(run.err.find((dir_ / "tmp").string()), std::string::npos) << run.err;
  const auto scaled = RunRankscope({"scale", exported.string(), (dir_ / "run").string()}, options_);
  EXPECT_EQ(scaled.err.find((dir_ / "tmp").string()), std::string::npos) << scaled.err;
  EXPECT_NE(scaled.err.find("missing rank files"), std::string::npos) << scaled.err;
}

TEST_F(InteropCommandTest, ScaleAndExportTakeForeignTraces) {
  RankSpec one;
  one.world_size = 1;
  one.step_ms = 10;
  WriteRun(dir_ / "n1", 1, one);
  const fs::path n1 = dir_ / "n1.json";
  ASSERT_EQ(RunRankscope({"export", (dir_ / "n1").string(), "--chrome", n1.string()}).exit_code, 0);
  const fs::path n2 = Export("n2.json");
  const auto scaled = RunRankscope({"scale", n1.string(), n2.string()}, options_);
  ASSERT_EQ(scaled.exit_code, 0) << scaled.err;
  EXPECT_NE(scaled.out.find("| GPUs | Batch Size | Samples/sec | Scaling Efficiency |"), std::string::npos)
      << scaled.out;
  EXPECT_NE(scaled.out.find(n2.string()), std::string::npos) << scaled.out;
  // A foreign trace exports again (read on the fly, written as a run would be).
  const fs::path again = dir_ / "again.json";
  const auto exported = RunRankscope({"export", n2.string(), "--chrome", again.string()}, options_);
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  EXPECT_EQ(json::parse(ReadFile(again))["rankscope"]["ranks"].size(), 2u);
  EXPECT_EQ(CountEntries(dir_ / "tmp"), 0u);
}

TEST_F(InteropCommandTest, ImportRefusesARunDirectoryThatHoldsRankFilesUnlessForced) {
  const fs::path exported = Export("trace.json");
  WriteRun(dir_ / "occupied", 1, RankSpec{.run_id = "other", .world_size = 1});
  const auto before = Snapshot(dir_ / "occupied");
  const auto refused = RunRankscope({"import", exported.string(), "-o", (dir_ / "occupied").string()}, options_);
  EXPECT_EQ(refused.exit_code, 2);
  ExpectOneErrorLine(refused, "--force");
  EXPECT_EQ(Snapshot(dir_ / "occupied"), before);

  const auto forced =
      RunRankscope({"import", exported.string(), "-o", (dir_ / "occupied").string(), "--force"}, options_);
  ASSERT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_EQ(ReportFigures((dir_ / "occupied").string()), ReportFigures((dir_ / "run").string()));
}

TEST_F(InteropCommandTest, ImportOfAMissingFileCreatesNothing) {
  const auto run = RunRankscope({"import", (dir_ / "nope.json").string(), "-o", (dir_ / "out").string()}, options_);
  EXPECT_EQ(run.exit_code, 2);
  ExpectOneErrorLine(run, "nope.json");
  EXPECT_FALSE(fs::exists(dir_ / "out"));
}

TEST_F(InteropCommandTest, ImportOfACorruptTraceLeavesNoRankFile) {
  const fs::path exported = Export("trace.json");
  const std::string text = ReadFile(exported);
  WriteFile(dir_ / "cut.json", text.substr(0, text.size() / 2));
  const auto run = RunRankscope({"import", (dir_ / "cut.json").string(), "-o", (dir_ / "out").string()}, options_);
  EXPECT_EQ(run.exit_code, 2);
  ExpectOneErrorLine(run, "cut.json");
  EXPECT_FALSE(fs::exists(dir_ / "out")) << "the directory it created is taken back";
}

TEST_F(InteropCommandTest, ImportRefusesAReportAndWhatIsNotATrace) {
  const auto report = RunRankscope({"analyze", (dir_ / "run").string(), "--format", "json", "--out",
                                    (dir_ / "report.json").string()});
  ASSERT_EQ(report.exit_code, 0) << report.err;
  const auto from_report =
      RunRankscope({"import", (dir_ / "report.json").string(), "-o", (dir_ / "out").string()}, options_);
  EXPECT_EQ(from_report.exit_code, 2);
  ExpectOneErrorLine(from_report, "report.json");

  WriteFile(dir_ / "notes.txt", "hello\n");
  const auto from_text = RunRankscope({"analyze", (dir_ / "notes.txt").string()}, options_);
  EXPECT_EQ(from_text.exit_code, 2);
  ExpectOneErrorLine(from_text, "notes.txt");

  // Broken JSON is called that, and valid JSON of another kind is named as such.
  WriteFile(dir_ / "broken.json", "{ \"traceEvents\": [ {\"ph\": \"X\"");
  WriteFile(dir_ / "config.json", "{\"lr\": 0.1}");
  const auto broken = RunRankscope({"analyze", (dir_ / "broken.json").string()}, options_);
  EXPECT_EQ(broken.exit_code, 2);
  ExpectOneErrorLine(broken, "broken.json");
  const auto other = RunRankscope({"analyze", (dir_ / "config.json").string()}, options_);
  EXPECT_EQ(other.exit_code, 2);
  ExpectOneErrorLine(other, "JSON, but neither a Kineto");
  WriteFile(dir_ / "bad.json", "{ not json");
  const auto bad = RunRankscope({"analyze", (dir_ / "bad.json").string()}, options_);
  EXPECT_EQ(bad.exit_code, 2);
  ExpectOneErrorLine(bad, "not a JSON file");
  EXPECT_EQ(CountEntries(dir_ / "tmp"), 0u);
}

TEST_F(InteropCommandTest, ExportErrorsWriteNothing) {
  const auto missing =
      RunRankscope({"export", (dir_ / "nope").string(), "--chrome", (dir_ / "t.json").string()}, options_);
  EXPECT_EQ(missing.exit_code, 2);
  ExpectOneErrorLine(missing, "nope");
  EXPECT_FALSE(fs::exists(dir_ / "t.json"));

  const auto unwritable = RunRankscope(
      {"export", (dir_ / "run").string(), "--chrome", (dir_ / "no" / "such" / "t.json").string()}, options_);
  EXPECT_EQ(unwritable.exit_code, 2);
  ExpectOneErrorLine(unwritable, "--chrome");

  // An existing trace is replaced whole or not at all: a failed export keeps it.
  WriteFile(dir_ / "kept.json", "{\"traceEvents\": []}");
  const auto failed =
      RunRankscope({"export", (dir_ / "nope").string(), "--chrome", (dir_ / "kept.json").string()}, options_);
  EXPECT_EQ(failed.exit_code, 2);
  EXPECT_EQ(ReadFile(dir_ / "kept.json"), "{\"traceEvents\": []}");
}

// A FIFO given as an input is named in one line, never opened: reading one waits for a writer
// forever. Every command that reads traces or reports checks before it opens.
TEST_F(InteropCommandTest, FifosGivenAsInputsAreRefusedNotOpened) {
  const fs::path kineto = dir_ / "trace.json";
  const fs::path sqlite = dir_ / "export.sqlite";
  ASSERT_EQ(::mkfifo(kineto.c_str(), 0600), 0) << std::strerror(errno);
  ASSERT_EQ(::mkfifo(sqlite.c_str(), 0600), 0) << std::strerror(errno);
  const std::vector<std::vector<std::string>> commands = {
      {"analyze", kineto.string()},
      {"analyze", sqlite.string()},
      {"import", kineto.string(), "-o", (dir_ / "out").string()},
      {"import", sqlite.string(), "-o", (dir_ / "out").string()},
      {"export", kineto.string(), "--chrome", (dir_ / "t.json").string()},
      {"scale", kineto.string(), (dir_ / "run").string()},
      {"compare", "--baseline", kineto.string(), (dir_ / "run").string()},
  };
  for (const std::vector<std::string>& command : commands) {
    SCOPED_TRACE(command[0] + " " + command[1]);
    const auto run = RunRankscope(command, options_);
    EXPECT_EQ(run.exit_code, 2) << run.err;
    ExpectOneErrorLine(run, "not a regular file (a FIFO)");
  }
  EXPECT_FALSE(fs::exists(dir_ / "out"));
  EXPECT_FALSE(fs::exists(dir_ / "t.json"));
  EXPECT_TRUE(fs::is_fifo(kineto));
  EXPECT_EQ(CountEntries(dir_ / "tmp"), 0u);
}

// A failed import takes back the directories it created; an existing one keeps what it held.
TEST_F(InteropCommandTest, AFailedImportLeavesNoDirectoryBehind) {
  const fs::path exported = Export("trace.json");
  const std::string text = ReadFile(exported);
  WriteFile(dir_ / "cut.json", text.substr(0, text.size() / 2));
  const auto created =
      RunRankscope({"import", (dir_ / "cut.json").string(), "-o", (dir_ / "new" / "out").string()}, options_);
  EXPECT_EQ(created.exit_code, 2);
  ExpectOneErrorLine(created, "cut.json");
  EXPECT_FALSE(fs::exists(dir_ / "new"));

  fs::create_directories(dir_ / "existing");
  WriteFile(dir_ / "existing" / "notes.txt", "mine");
  const auto before = Snapshot(dir_ / "existing");
  const auto kept = RunRankscope({"import", (dir_ / "cut.json").string(), "-o", (dir_ / "existing").string()}, options_);
  EXPECT_EQ(kept.exit_code, 2);
  EXPECT_EQ(Snapshot(dir_ / "existing"), before);
}

// An import that keeps no events is an error wherever a foreign trace is read: one line naming
// what was left out and why, exit 2, and nothing written (no run directory, no export, no
// temporary import left behind).
TEST_F(InteropCommandTest, ATraceWithNothingToImportIsOneErrorLineEverywhere) {
  const fs::path counters = dir_ / "counters.json";
  WriteFile(counters, R"([{"name": "memory", "ph": "C", "ts": 1, "pid": 1, "args": {"bytes": 4}},
                          {"name": "memory", "ph": "C", "ts": 2, "pid": 1, "args": {"bytes": 8}}])");
  const std::string why = "no events rankscope imports: '" + counters.string() +
                          "': left out 2 events of kinds rankscope does not import ('ph C' 2)";
  const auto imported = RunRankscope({"import", counters.string(), "-o", (dir_ / "out").string()}, options_);
  EXPECT_EQ(imported.exit_code, 2);
  ExpectOneErrorLine(imported, why);
  EXPECT_FALSE(fs::exists(dir_ / "out"));

  const auto analyzed = RunRankscope({"analyze", counters.string(), "--out", (dir_ / "r.txt").string()}, options_);
  EXPECT_EQ(analyzed.exit_code, 2);
  ExpectOneErrorLine(analyzed, why);
  EXPECT_FALSE(fs::exists(dir_ / "r.txt"));

  const auto exported = RunRankscope({"export", counters.string(), "--chrome", (dir_ / "t.json").string()}, options_);
  EXPECT_EQ(exported.exit_code, 2);
  ExpectOneErrorLine(exported, why);
  EXPECT_FALSE(fs::exists(dir_ / "t.json"));
  EXPECT_EQ(CountEntries(dir_ / "tmp"), 0u);
}

// What an import left out or assumed reaches the user on every path that reads a foreign
// trace: import, export and analyze print the importer's notes (here of the older PyTorch
// profiler format, whose file names the rank) before anything else.
TEST_F(InteropCommandTest, ImportNotesReachTheUserInImportExportAndAnalyze) {
  const fs::path legacy = dir_ / "job_rank1.json";
  WriteFile(legacy, R"([{"name": "ProfilerStep#0", "ph": "X", "ts": 10, "dur": 90, "tid": 1, "pid": "CPU functions", "args": {}},
{"name": "aten::mm", "ph": "X", "ts": 20, "dur": 30, "tid": 1, "pid": "CPU functions", "args": {}},
{"name": "gloo:all_reduce", "ph": "X", "ts": 55, "dur": 40, "tid": 2, "pid": "CPU functions", "args": {}},
{"name": "memory", "ph": "C", "ts": 60, "pid": 1, "args": {}}])");
  const std::string format_note = "rankscope: note: '" + legacy.string() +
                                  "': the older PyTorch profiler format (PyTorch without Kineto): 3 CPU functions "
                                  "imported as ranges";
  const std::string rank_note =
      "rankscope: note: '" + legacy.string() + "': no rank recorded; imported as rank 1, from its file name";
  const std::string left_out_note = "rankscope: note: '" + legacy.string() +
                                    "': left out 1 event of kinds rankscope does not import ('ph C' 1)";

  const auto imported = RunRankscope({"import", legacy.string(), "-o", (dir_ / "out").string()}, options_);
  ASSERT_EQ(imported.exit_code, 0) << imported.err;
  EXPECT_NE(imported.err.find("imported 1 rank (3 events)"), std::string::npos) << imported.err;
  EXPECT_TRUE(fs::exists(dir_ / "out" / trace::RankFileName(1)));

  const auto exported = RunRankscope({"export", legacy.string(), "--chrome", (dir_ / "t.json").string()}, options_);
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  EXPECT_TRUE(fs::exists(dir_ / "t.json"));

  // Whatever the analysis makes of a CPU-only trace, the notes come before its own lines.
  const auto analyzed = RunRankscope({"analyze", legacy.string()}, options_);
  for (const auto* run : {&imported, &exported, &analyzed}) {
    const std::vector<std::string> lines = Lines(run->err);
    for (const std::string& note : {format_note, rank_note, left_out_note}) {
      const auto at = std::find_if(lines.begin(), lines.end(), [&](const std::string& line) { return line.starts_with(note); });
      ASSERT_NE(at, lines.end()) << note << "\n" << run->err;
      EXPECT_TRUE(std::all_of(lines.begin(), at, [](const std::string& line) { return line.starts_with("rankscope: note: "); }))
          << run->err;
    }
  }
  EXPECT_EQ(CountEntries(dir_ / "tmp"), 0u);
}

}  // namespace
}  // namespace rankscope::cli
