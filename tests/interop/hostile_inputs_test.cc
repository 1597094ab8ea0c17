// Inputs that used to hang, crash or exhaust the importers, each now a value: a FIFO (or
// another non-regular file) given as a trace, many ranks under a low limit of open files, a
// gzip bomb, a JSON file starting with a byte-order mark, and failed imports, which must
// leave the output directory as they found it.
#include <sys/resource.h>
#include <sys/stat.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <fmt/format.h>

#include "interop/import_internal.h"
#include "interop/interop.h"
#include "tests/interop/import_test_util.h"
#include "tests/temp_dir.h"
#include "trace/reader.h"
#include "trace/recording_lock.h"
#include "trace/run_dir.h"

namespace rankscope::interop {
namespace {

namespace fs = std::filesystem;
using rankscope::testing::TempDir;
using testing::AllNotes;
using testing::Gzip;
using testing::Load;
using testing::WriteText;

std::string ReadText(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}


// One kernel on one stream: the smallest trace an import keeps.
std::string TinyTrace(int rank, std::optional<int> world_size) {
  const std::string world = world_size ? ", \"world_size\": " + std::to_string(*world_size) : "";
  return "{\"distributedInfo\": {\"rank\": " + std::to_string(rank) + world +
         "}, \"traceEvents\": [{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"relu\", \"pid\": 0, \"tid\": 7, "
         "\"ts\": 100, \"dur\": 10, \"args\": {\"device\": 0, \"stream\": 7, \"correlation\": 5}}]}";
}

// A trace cut inside its events: detected as Kineto, failing as it imports.
std::string Cut(const std::string& trace) { return trace.substr(0, trace.size() - 20); }

// The format's name, or the error: what a failed expectation shows.
std::string Detected(const fs::path& path) {
  const Result<TraceFormat> format = DetectTraceFormat(path);
  return format.ok() ? std::string(TraceFormatName(*format)) : format.status().message();
}

void ExpectOneLine(const Status& status, const std::string& words) {
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find(words), std::string::npos) << status.message();
  EXPECT_EQ(status.message().find('\n'), std::string::npos) << status.message();
}

// ---- FIFOs and other files that are not regular ----------------------------------------------

TEST(NotRegularInput, FifosAreRefusedBeforeAnythingOpensThem) {
  TempDir dir;
  for (const char* name : {"trace.json", "trace.json.gz", "export.sqlite", "report.json"}) {
    SCOPED_TRACE(name);
    const fs::path fifo = dir / name;
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
    const std::string expected = "'" + fifo.string() + "': not a regular file (a FIFO)";
    // Each of these would block forever in open() if it reached it.
    ExpectOneLine(DetectTraceFormat(fifo).status(), expected);
    ExpectOneLine(import::ReadMaybeGzip(fifo).status(), expected);
    EXPECT_EQ(import::Head(fifo, 16), "");
    import::RunSink sink(dir / "direct", "run");
    ExpectOneLine(import::ImportKineto(fifo, sink), expected);
    ExpectOneLine(import::ImportNsys(fifo, sink), expected);
    ExpectOneLine(ResolveRun({fifo}).status(), expected);
    ExpectOneLine(ImportTraces({fifo}, dir / "run").status(), expected);
    EXPECT_FALSE(fs::exists(dir / "run")) << "a refused import creates nothing";
    EXPECT_TRUE(fs::is_fifo(fifo));
  }
}

TEST(NotRegularInput, DevicesAreRefused) {
  ExpectOneLine(DetectTraceFormat("/dev/zero").status(), "'/dev/zero': not a regular file (a character device)");
}

TEST(NotRegularInput, AFifoAmongADirectorysTracesIsNotOneOfThem) {
  TempDir dir;
  fs::create_directory(dir / "traces");
  WriteText(dir / "traces" / "rank0.json", TinyTrace(0, 1));
  ASSERT_EQ(::mkfifo((dir / "traces" / "rank1.json").c_str(), 0600), 0) << std::strerror(errno);
  ASSERT_EQ(Detected(dir / "traces"), std::string(TraceFormatName(TraceFormat::kKinetoRun)));
  Result<ImportResult> imported = ImportTraces({dir / "traces"}, dir / "run");
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  EXPECT_EQ(imported->rank_files.size(), 1u);
}

// ---- open files do not grow with the ranks imported -------------------------------------------

size_t OpenDescriptors() {
  size_t count = 0;
  for ([[maybe_unused]] const fs::directory_entry& entry : fs::directory_iterator("/proc/self/fd")) ++count;
  return count;
}

// Lowers this process's limit of open files for the test's lifetime.
class FileLimit {
 public:
  explicit FileLimit(rlim_t soft) {
    EXPECT_EQ(::getrlimit(RLIMIT_NOFILE, &saved_), 0);
    rlimit lowered = saved_;
    lowered.rlim_cur = soft;
    EXPECT_EQ(::setrlimit(RLIMIT_NOFILE, &lowered), 0) << std::strerror(errno);
  }
  ~FileLimit() { ::setrlimit(RLIMIT_NOFILE, &saved_); }
  FileLimit(const FileLimit&) = delete;
  FileLimit& operator=(const FileLimit&) = delete;

 private:
  rlimit saved_{};
};

// Each rank file being written holds a database, its WAL and its shared memory open: with a
// writer per rank left open until the end, 20 ranks would need 60 descriptors, far more than
// the 24 left here; one input's at a time need 3.
TEST(ManyRanks, AnImportHoldsOneInputsFilesOpenAtATime) {
  TempDir dir;
  constexpr int kRanks = 20;
  std::vector<fs::path> inputs;
  for (int rank = 0; rank < kRanks; ++rank) {
    inputs.push_back(dir / ("rank" + std::to_string(rank) + ".json"));
    WriteText(inputs.back(), TinyTrace(rank, kRanks));
  }
  Result<ImportResult> imported = InvalidArgument("not run");
  {
    FileLimit limit(OpenDescriptors() + 24);
    imported = ImportTraces(inputs, dir / "run");
  }
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  ASSERT_EQ(imported->rank_files.size(), static_cast<size_t>(kRanks));
  for (int rank = 0; rank < kRanks; ++rank) {
    EXPECT_EQ(imported->rank_files[static_cast<size_t>(rank)], dir / "run" / trace::RankFileName(rank));
  }
  const trace::RankTrace last = Load(imported->rank_files.back());
  EXPECT_EQ(last.meta.rank, kRanks - 1);
  EXPECT_EQ(last.meta.world_size, kRanks);
  EXPECT_EQ(last.events.kernels.size(), 1u);
}

// Ranks whose traces give no world size get it once every input is read, after their files
// were closed.
TEST(ManyRanks, AWorldSizeLearnedAtTheEndReachesClosedFiles) {
  TempDir dir;
  WriteText(dir / "a.json", TinyTrace(0, std::nullopt));
  WriteText(dir / "b.json", TinyTrace(4, std::nullopt));
  WriteText(dir / "c.json", TinyTrace(1, 5));
  Result<ImportResult> imported = ImportTraces({dir / "a.json", dir / "b.json", dir / "c.json"}, dir / "run");
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  EXPECT_TRUE(testing::HasNote(*imported, "2 of the traces record no world size; taken as 5 (the highest rank "
                                          "imported + 1)"))
      << AllNotes(*imported);
  for (const fs::path& file : imported->rank_files) {
    const trace::RankTrace rank = Load(file);
    EXPECT_EQ(rank.meta.world_size, 5) << file;
    EXPECT_TRUE(rank.meta.closed_cleanly) << file;
  }
  Result<trace::Run> run = trace::OpenRun(dir / "run");
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(run->ranks.size(), 3u);
}

// ---- gzip bombs ----------------------------------------------------------------------------------

// A small bomb: 2 MiB of JSON white space in one member, then bytes that are not gzip. Were
// it inflated whole, the bytes after it would fail it as damaged; stopping at the limit, it
// never gets there.
TEST(GzipBomb, InflatingStopsOnceTheOutputPassesTheLimit) {
  TempDir dir;
  const fs::path bomb = dir / "bomb.json.gz";
  WriteText(bomb, Gzip("{\"traceEvents\": [" + std::string(size_t{2} << 20, ' ') + "]}") + "not gzip at all");
  const Result<std::string> read = import::ReadMaybeGzip(bomb, size_t{1} << 20);
  ExpectOneLine(read.status(), "bomb.json.gz': more than 1048576 bytes once unpacked, the most the JSON parser takes");
  // Within the limit, the same file is inflated to the end, and its tail found.
  ExpectOneLine(import::ReadMaybeGzip(bomb, size_t{4} << 20).status(), "damaged gzip file");
}

TEST(GzipBomb, AFileLargerThanTheLimitIsNotRead) {
  TempDir dir;
  const fs::path large = dir / "large.json";
  WriteText(large, "{\"traceEvents\": [" + std::string(size_t{1} << 20, ' ') + "]}");
  ExpectOneLine(import::ReadMaybeGzip(large, size_t{1} << 20).status(),
                "large.json': 1048595 bytes, more than the 1048576 the JSON parser takes");
}

// Detection inflates the head only: a bomb of zeros is "not a trace" at once, however long its
// tail (here damaged, which only a whole inflate would see).
TEST(GzipBomb, DetectionReadsOnlyTheHead) {
  TempDir dir;
  const fs::path zeros = dir / "zeros.json.gz";
  WriteText(zeros, Gzip(std::string(size_t{16} << 20, '\0')) + "not gzip at all");
  const Result<TraceFormat> format = DetectTraceFormat(zeros);
  ExpectOneLine(format.status(), "not a trace rankscope reads");
}

// ---- byte-order marks ----------------------------------------------------------------------------

TEST(ByteOrderMark, KinetoTracesWithOneImportAsWithout) {
  TempDir dir;
  const std::string bom = "\xEF\xBB\xBF";
  WriteText(dir / "plain.json", TinyTrace(0, 2));
  WriteText(dir / "marked.json", bom + TinyTrace(1, 2));
  WriteText(dir / "marked.json.gz", Gzip(bom + TinyTrace(0, 1)));
  EXPECT_EQ(Detected(dir / "marked.json"), std::string(TraceFormatName(TraceFormat::kKinetoJson)));
  EXPECT_EQ(Detected(dir / "marked.json.gz"), std::string(TraceFormatName(TraceFormat::kKinetoJson)));
  Result<ImportResult> imported = ImportTraces({dir / "plain.json", dir / "marked.json"}, dir / "run");
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  ASSERT_EQ(imported->rank_files.size(), 2u);
  const trace::RankTrace marked = Load(imported->rank_files[1]);
  EXPECT_EQ(marked.meta.rank, 1);
  ASSERT_EQ(marked.events.kernels.size(), 1u);
  EXPECT_EQ(marked.str(marked.events.kernels[0].name), "relu");
  Result<ImportResult> gzipped = ImportTraces({dir / "marked.json.gz"}, dir / "run-gz");
  ASSERT_TRUE(gzipped.ok()) << gzipped.status().message();
  EXPECT_EQ(Load(gzipped->rank_files[0]).events.kernels.size(), 1u);
}

TEST(ByteOrderMark, ADirectoryFindsMarkedTracesAndReportsAreKnown) {
  TempDir dir;
  fs::create_directory(dir / "traces");
  WriteText(dir / "traces" / "rank0.json", "\xEF\xBB\xBF" + TinyTrace(0, 1));
  EXPECT_EQ(Detected(dir / "traces"), std::string(TraceFormatName(TraceFormat::kKinetoRun)));
  WriteText(dir / "report.json", "\xEF\xBB\xBF{\"format\": \"rankscope.analysis\", \"version\": 1}");
  EXPECT_EQ(Detected(dir / "report.json"), std::string(TraceFormatName(TraceFormat::kRankscopeReport)));
  // Keys in another order (jq -S) take the slower path, which skips the mark too.
  WriteText(dir / "sorted.json", "\xEF\xBB\xBF{\"a\": [1, {\"b\": 2}], \"format\": \"rankscope.scaling\"}");
  EXPECT_EQ(Detected(dir / "sorted.json"), std::string(TraceFormatName(TraceFormat::kRankscopeReport)));
}

// ---- failed imports leave the output as it was -------------------------------------------------

TEST(FailedImport, DirectoriesItCreatedAreRemoved) {
  TempDir dir;
  WriteText(dir / "good.json", TinyTrace(0, 2));
  WriteText(dir / "cut.json", Cut(TinyTrace(1, 2)));
  Result<ImportResult> imported = ImportTraces({dir / "good.json", dir / "cut.json"}, dir / "new" / "deeper" / "run");
  ExpectOneLine(imported.status(), "cut.json': malformed JSON");
  // Where it ends, not "byte 0": simdjson finds a cut document before reading any value.
  EXPECT_NE(imported.status().message().find(fmt::format("ends early, at byte {} (a truncated file?)",
                                                         Cut(TinyTrace(1, 2)).size())),
            std::string::npos)
      << imported.status().message();
  EXPECT_FALSE(fs::exists(dir / "new")) << "every directory the import made is gone";
  EXPECT_EQ(ReadText(dir / "cut.json"), Cut(TinyTrace(1, 2))) << "input unchanged";
}

TEST(FailedImport, AnExistingDirectoryStaysWithWhatItHeld) {
  TempDir dir;
  fs::create_directory(dir / "run");
  WriteText(dir / "run" / "notes.txt", "mine");
  WriteText(dir / "good.json", TinyTrace(0, 2));
  WriteText(dir / "cut.json", Cut(TinyTrace(1, 2)));
  ASSERT_FALSE(ImportTraces({dir / "good.json", dir / "cut.json"}, dir / "run").ok());
  std::vector<std::string> left;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir / "run")) {
    left.push_back(entry.path().filename().string());
  }
  EXPECT_EQ(left, std::vector<std::string>{"notes.txt"});
}

// --force replaces a run's rank files only once the new ones are all written.
TEST(FailedImport, ForceKeepsTheOldRankFilesWhenTheImportFails) {
  TempDir dir;
  WriteText(dir / "old.json", TinyTrace(0, 1));
  ASSERT_TRUE(ImportTraces({dir / "old.json"}, dir / "run").ok());
  const std::string before = ReadText(dir / "run" / "rank-0.sqlite");
  WriteText(dir / "cut.json", Cut(TinyTrace(0, 1)));
  ImportOptions force;
  force.overwrite = true;
  ASSERT_FALSE(ImportTraces({dir / "cut.json"}, dir / "run", force).ok());
  EXPECT_EQ(ReadText(dir / "run" / "rank-0.sqlite"), before);
  std::vector<std::string> left;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir / "run")) {
    left.push_back(entry.path().filename().string());
  }
  EXPECT_EQ(left, std::vector<std::string>{"rank-0.sqlite"});
  // And a sound import with --force replaces them.
  WriteText(dir / "new.json", TinyTrace(0, 1));
  ASSERT_TRUE(ImportTraces({dir / "new.json"}, dir / "run", force).ok());
  EXPECT_NE(ReadText(dir / "run" / "rank-0.sqlite"), before);
}

// --force deletes nothing of a run that a live process still records into.
TEST(FailedImport, ForceRefusesARunStillRecording) {
  TempDir dir;
  WriteText(dir / "old.json", TinyTrace(0, 1));
  ASSERT_TRUE(ImportTraces({dir / "old.json"}, dir / "run").ok());
  const std::string before = ReadText(dir / "run" / "rank-0.sqlite");
  Result<trace::RecordingLock> recording = trace::RecordingLock::Acquire(dir / "run");
  ASSERT_TRUE(recording.ok()) << recording.status().message();
  ImportOptions force;
  force.overwrite = true;
  WriteText(dir / "new.json", TinyTrace(0, 1));
  const Result<ImportResult> refused = ImportTraces({dir / "new.json"}, dir / "run", force);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("still being recorded"), std::string::npos) << refused.status().message();
  EXPECT_EQ(ReadText(dir / "run" / "rank-0.sqlite"), before);
}

}  // namespace
}  // namespace rankscope::interop
