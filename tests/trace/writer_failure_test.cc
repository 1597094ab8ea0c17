// A rank file that fails under the writer (size limit, removed directory) stops recording for
// good without harming the process: Submit keeps returning at once, Flush and Close return
// the error, the callback hears of it once, and the file keeps what was committed and says
// why it stopped. And a recording writer never creates or maps a -shm file.
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "trace/reader.h"
#include "trace/schema.h"
#include "trace_test_util.h"

namespace rankscope::trace {
namespace {

using namespace std::chrono_literals;
using testing::AddGpuLane;
using testing::FilesIn;
using testing::KernelBatch;
using testing::MakeIdentity;
using testing::MustCreate;
using testing::TempDir;

// What the child of FileSizeLimit found, through a pipe: exit code 0 means every check in
// the child passed.
struct ChildReport {
  unsigned long long committed = 0, dropped = 0, callbacks = 0;
  char message[400] = {};
};

// Runs in the forked child: records under a 1 MiB file-size limit until recording stops.
int RecordUntilTheLimit(const std::filesystem::path& path, int report_fd) {
  ChildReport report;
  const rlimit limit{1 << 20, 1 << 20};
  if (setrlimit(RLIMIT_FSIZE, &limit) != 0) return 10;
  signal(SIGXFSZ, SIG_IGN);  // a write past the limit fails with EFBIG instead of killing us
  WriterOptions options;
  options.on_failure = [&report](const Status& status) {
    ++report.callbacks;
    std::snprintf(report.message, sizeof report.message, "%s", status.message().c_str());
  };
  auto created = TraceWriter::Create(path, MakeIdentity("limit", 0, 1), options);
  if (!created.ok()) return 11;
  TraceWriter& writer = **created;
  const LaneId lane = AddGpuLane(writer);
  // Small commits that fit, then one too big for the limit: it fails while SQLite appends
  // its frames, and the room it reached takes the stop records.
  for (int batch = 0; batch < 5; ++batch) {
    if (!writer.Submit(KernelBatch(lane, 100, batch * 10000))) return 12;
    if (!writer.Flush(std::chrono::hours(1)).ok()) return 13;
  }
  if (!writer.Submit(KernelBatch(lane, 60000, 1'000'000))) return 12;
  const Status flushed = writer.Flush(std::chrono::hours(1));
  if (flushed.message().find("recording stopped") == std::string::npos) return 14;
  // Stopped for good: every later batch is refused at once, and counted.
  for (int i = 0; i < 100; ++i) {
    if (writer.Submit(KernelBatch(lane, 10, 1'000'000'000))) return 15;
  }
  // Flush answers at once (an hour's wait would be a hang the parent kills).
  if (writer.Flush(std::chrono::hours(1)).message() != flushed.message()) return 16;
  const Status closed = writer.Close();
  if (closed.message() != flushed.message()) return 17;
  report.committed = writer.stats().events_committed;
  report.dropped = writer.stats().events_dropped;
  if (write(report_fd, &report, sizeof report) != static_cast<ssize_t>(sizeof report)) return 18;
  return 0;
}

TEST(WriterFailure, FileSizeLimitStopsRecordingAndTheFileSaysWhy) {
  TempDir dir;
  const auto path = dir / "rank-0.sqlite";
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(fds[0]);
    _exit(RecordUntilTheLimit(path, fds[1]));
  }
  close(fds[1]);
  ChildReport report;
  const ssize_t got = read(fds[0], &report, sizeof report);
  close(fds[0]);
  const std::optional<int> status = testing::WaitForChild(pid);
  ASSERT_TRUE(status.has_value()) << "the child hung";
  ASSERT_TRUE(WIFEXITED(*status)) << "the child died of signal " << WTERMSIG(*status);
  ASSERT_EQ(WEXITSTATUS(*status), 0) << "check number " << WEXITSTATUS(*status) << " failed in the child";
  ASSERT_EQ(got, static_cast<ssize_t>(sizeof report));

  EXPECT_EQ(report.callbacks, 1u);
  const std::string message = report.message;
  EXPECT_NE(message.find(path.string() + ": recording stopped: "), std::string::npos) << message;
  EXPECT_NE(message.find("events committed"), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  EXPECT_EQ(report.committed, 500u);
  EXPECT_EQ(report.dropped, 61000u);  // the failed commit's events and the 100 refused batches of 10

  // The file holds exactly what was committed, says it was not closed, and (there is room
  // where the failed commit's frames were, and the reserve was given back) why recording
  // stopped and every event lost.
  EXPECT_EQ(FilesIn(dir.path()), (std::set<std::string>{"rank-0.sqlite", "rank-0.sqlite-wal"}));
  auto reader = TraceReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  EXPECT_FALSE((*reader)->meta().closed_cleanly);
  auto trace = (*reader)->LoadAll();
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  EXPECT_EQ(trace->events.kernels.size(), report.committed);
  const auto& entries = (*reader)->meta().entries;
  const auto stopped = entries.find(std::string(meta_key::kRecordingStopped));
  ASSERT_NE(stopped, entries.end());
  EXPECT_NE(stopped->second.find(" after " + std::to_string(report.committed) + " events committed"),
            std::string::npos)
      << stopped->second;
  EXPECT_NE(message.find(stopped->second), std::string::npos) << message << " vs " << stopped->second;
  uint64_t stopped_drops = 0;
  for (const DropRecord& drop : trace->drops) {
    if (drop.source == "writer" && drop.reason == "recording stopped") stopped_drops += drop.count;
  }
  EXPECT_EQ(stopped_drops, report.dropped);
}

TEST(WriterFailure, RemovedDirectoryStopsRecordingWithoutHarm) {
  TempDir dir;
  const auto run = dir / "run";
  std::filesystem::create_directory(run);
  const auto path = run / "rank-0.sqlite";
  int callbacks = 0;
  std::string reported;
  WriterOptions options;
  options.on_failure = [&](const Status& status) {
    ++callbacks;
    reported = status.message();
  };
  auto writer = MustCreate(path, MakeIdentity("r", 0, 1), options);
  ASSERT_NE(writer, nullptr);
  const LaneId lane = AddGpuLane(*writer);
  ASSERT_TRUE(writer->Submit(KernelBatch(lane, 10)));
  ASSERT_TRUE(writer->Flush(10s).ok());

  std::filesystem::remove_all(run);
  ASSERT_TRUE(writer->Submit(KernelBatch(lane, 5, 1000)));  // queued: the writer cannot know yet
  const Status flushed = writer->Flush(10s);
  EXPECT_EQ(flushed.code(), StatusCode::kIo);
  EXPECT_NE(flushed.message().find(path.string() + ": recording stopped: file removed: "), std::string::npos)
      << flushed.message();
  EXPECT_EQ(callbacks, 1);
  EXPECT_EQ(reported, flushed.message());
  EXPECT_FALSE(writer->Submit(KernelBatch(lane, 3, 2000)));
  EXPECT_EQ(writer->Close().message(), flushed.message());
  EXPECT_EQ(callbacks, 1);
  const WriterStats stats = writer->stats();
  EXPECT_EQ(stats.events_committed, 10u);
  EXPECT_EQ(stats.events_dropped, 8u);
  EXPECT_FALSE(std::filesystem::exists(run));  // nothing recreated it
}

// Every mapping of this process whose path lies under `dir`.
std::string MappingsUnder(const std::filesystem::path& dir) {
  std::ifstream maps("/proc/self/maps");
  std::string line, found;
  while (std::getline(maps, line)) {
    if (line.find(dir.string()) != std::string::npos) found += line + "\n";
  }
  return found;
}

TEST(WriterFailure, RecordingNeverCreatesOrMapsAShmFile) {
  TempDir dir;
  const auto path = dir / "rank-0.sqlite";
  auto writer = MustCreate(path, MakeIdentity("r", 0, 1));
  ASSERT_NE(writer, nullptr);
  const LaneId lane = AddGpuLane(*writer);
  for (int batch = 0; batch < 5; ++batch) {
    ASSERT_TRUE(writer->Submit(KernelBatch(lane, 2000, batch * 100000)));
    ASSERT_TRUE(writer->Flush(10s).ok());
    EXPECT_EQ(FilesIn(dir.path()),
              (std::set<std::string>{"rank-0.sqlite", "rank-0.sqlite-reserve", "rank-0.sqlite-wal"}));
    EXPECT_EQ(MappingsUnder(dir.path()), "");
  }
  ASSERT_TRUE(writer->Close().ok());
  EXPECT_EQ(FilesIn(dir.path()), (std::set<std::string>{"rank-0.sqlite"}));
}

}  // namespace
}  // namespace rankscope::trace
