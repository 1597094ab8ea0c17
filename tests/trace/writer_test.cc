// Writer behaviour: commit cadence, non-blocking producers with counted drops, refusal to
// overwrite, validation. (A file that fails under the writer: writer_failure_test.cc.)
#include <sqlite3.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <latch>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "trace/reader.h"
#include "trace/sqlite_util.h"
#include "trace_test_util.h"

namespace rankscope::trace {
namespace {

using namespace std::chrono_literals;
using testing::MakeIdentity;
using testing::MustCreate;
using testing::TempDir;

// Rows of `table` that another process can see (i.e. committed rows): while the writer
// records, only through a private snapshot, as TraceReader reads.
int64_t CommittedRows(const std::filesystem::path& path, const char* table) {
  auto source = sql::ReadableDatabase::Prepare(path);
  if (!source.ok()) return -1;
  auto db = source->Connect();
  if (!db.ok()) return -1;
  int64_t rows = -1;
  sqlite3_stmt* stmt = nullptr;
  const std::string sql = std::string("SELECT count(*) FROM ") + table;
  if (sqlite3_prepare_v2(db->get(), sql.c_str(), -1, &stmt, nullptr) == SQLITE_OK && sqlite3_step(stmt) == SQLITE_ROW) {
    rows = sqlite3_column_int64(stmt, 0);
  }
  sqlite3_finalize(stmt);
  return rows;
}

// Polls until `done` holds or 20 s pass. Not a timing assertion: it only bounds a hang.
template <typename F>
bool Eventually(F done) {
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return done();
}

LaneId AddStream(TraceWriter& w) {
  Lane lane;
  lane.kind = LaneKind::kGpuStream;
  return w.AddLane(lane);
}

EventTables Kernels(LaneId lane, size_t n, TimestampNs t0 = 0) {
  EventTables batch;
  for (size_t i = 0; i < n; ++i) {
    KernelEvent k;
    k.lane = lane;
    k.start_ns = t0 + static_cast<TimestampNs>(i) * 10;
    k.end_ns = k.start_ns + 5;
    batch.kernels.push_back(k);
  }
  return batch;
}

std::string FileBytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(CommitPolicy, CommitsOnCountOrAge) {
  WriterOptions o;
  o.commit_max_events = 100;
  o.commit_interval = 200ms;
  EXPECT_FALSE(ShouldCommit(99, 199ms, o));
  EXPECT_TRUE(ShouldCommit(100, 0ms, o));
  EXPECT_TRUE(ShouldCommit(1, 200ms, o));
}

TEST(Writer, CommitsEveryMaxEventsWithoutWaitingForTheClock) {
  TempDir dir;
  const auto path = dir / "rank-0.sqlite";
  WriterOptions options;
  options.commit_max_events = 1000;
  options.commit_interval = std::chrono::hours(1);  // only the count can trigger a commit
  auto writer = MustCreate(path, MakeIdentity("r", 0, 1), options);
  ASSERT_NE(writer, nullptr);
  const LaneId lane = AddStream(*writer);
  ASSERT_TRUE(writer->Submit(Kernels(lane, 2500)));
  ASSERT_TRUE(Eventually([&] { return writer->stats().events_committed == 2000; }));
  EXPECT_EQ(CommittedRows(path, "kernels"), 2000);  // durable, visible to other processes
  EXPECT_EQ(writer->stats().events_committed, 2000u);  // the last 500 wait for a commit
  ASSERT_TRUE(writer->Close().ok());
  EXPECT_EQ(CommittedRows(path, "kernels"), 2500);
}

TEST(Writer, CommitsAfterTheIntervalWithoutMoreEvents) {
  TempDir dir;
  const auto path = dir / "rank-0.sqlite";
  WriterOptions options;
  options.commit_interval = 50ms;
  auto writer = MustCreate(path, MakeIdentity("r", 0, 1), options);
  ASSERT_NE(writer, nullptr);
  ASSERT_TRUE(writer->Submit(Kernels(AddStream(*writer), 10)));
  EXPECT_TRUE(Eventually([&] { return CommittedRows(path, "kernels") == 10; }));
  ASSERT_TRUE(writer->Close().ok());
}

TEST(Writer, FullQueueDropsAndCountsWithoutBlocking) {
  TempDir dir;
  const auto path = dir / "rank-0.sqlite";
  std::latch writer_stalled(1), release(1);
  std::atomic<int> calls{0};
  WriterOptions options;
  options.queue_capacity_events = 100;
  options.writer_thread_hook = [&] {
    if (calls.fetch_add(1) == 0) {
      writer_stalled.count_down();
      release.wait();  // the writer thread is stuck: the queue can only fill up
    }
  };
  auto writer = MustCreate(path, MakeIdentity("r", 0, 1), options);
  ASSERT_NE(writer, nullptr);
  const LaneId lane = AddStream(*writer);
  ASSERT_TRUE(writer->Submit(Kernels(lane, 100)));  // taken by the writer, which then stalls
  writer_stalled.wait();
  EXPECT_TRUE(writer->Submit(Kernels(lane, 100, 10000)));  // fills the queue
  // Each of these returns at once (a blocking Submit would hang this test) and is dropped.
  EXPECT_FALSE(writer->Submit(Kernels(lane, 1, 20000)));
  EXPECT_FALSE(writer->Submit(Kernels(lane, 50, 30000)));
  EXPECT_EQ(writer->stats().events_dropped, 51u);
  release.count_down();
  ASSERT_TRUE(writer->Close().ok());
  EXPECT_EQ(writer->stats().events_committed, 200u);

  auto reader = TraceReader::Open(path);
  ASSERT_TRUE(reader.ok());
  auto drops = (*reader)->ReadDrops();
  ASSERT_TRUE(drops.ok());
  ASSERT_EQ(drops->size(), 1u);
  EXPECT_EQ((*drops)[0].source, "writer");
  EXPECT_EQ((*drops)[0].reason, "queue full");
  EXPECT_EQ((*drops)[0].count, 51u);
  EXPECT_EQ(CommittedRows(path, "kernels"), 200);
}

TEST(Writer, ManyProducersNeverLoseAcceptedEvents) {
  TempDir dir;
  const auto path = dir / "rank-0.sqlite";
  WriterOptions options;
  options.queue_capacity_events = 2000;
  auto writer = MustCreate(path, MakeIdentity("r", 0, 1), options);
  ASSERT_NE(writer, nullptr);
  const LaneId lane = AddStream(*writer);
  std::atomic<uint64_t> accepted{0}, refused{0};
  std::vector<std::thread> producers;
  for (int p = 0; p < 4; ++p) {
    producers.emplace_back([&, p] {
      for (int i = 0; i < 200; ++i) {
        (writer->Submit(Kernels(lane, 50, (p * 1000 + i) * 1000)) ? accepted : refused) += 50;
      }
    });
  }
  for (auto& t : producers) t.join();
  ASSERT_TRUE(writer->Close().ok());
  EXPECT_EQ(accepted + refused, 4u * 200 * 50);
  EXPECT_EQ(writer->stats().events_committed, accepted.load());
  EXPECT_EQ(writer->stats().events_dropped, refused.load());
  EXPECT_EQ(CommittedRows(path, "kernels"), static_cast<int64_t>(accepted.load()));
}

TEST(Writer, RefusesToOverwriteAndLeavesTheFileIntact) {
  TempDir dir;
  const auto path = dir / "rank-0.sqlite";
  testing::WriteRankFile(path, MakeIdentity("first", 0, 1));
  const std::string before = FileBytes(path);
  auto again = TraceWriter::Create(path, MakeIdentity("second", 0, 1));
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), StatusCode::kAlreadyExists);
  EXPECT_NE(again.status().message().find(path.string()), std::string::npos);
  EXPECT_EQ(FileBytes(path), before);

  WriterOptions overwrite;
  overwrite.overwrite = true;
  auto replaced = TraceWriter::Create(path, MakeIdentity("second", 0, 1), overwrite);
  ASSERT_TRUE(replaced.ok()) << replaced.status().message();
  ASSERT_TRUE((*replaced)->Close().ok());
  auto reader = TraceReader::Open(path);
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ((*reader)->meta().run_id, "second");
}

TEST(Writer, OfTwoWritersForOnePathOnlyOneCreatesAndNeitherDeletesTheOther) {
  TempDir dir;
  const auto path = dir / "rank-0.sqlite";
  auto first = MustCreate(path, MakeIdentity("first", 0, 1));
  ASSERT_NE(first, nullptr);
  ASSERT_TRUE(first->Submit(Kernels(AddStream(*first), 10)));
  auto second = TraceWriter::Create(path, MakeIdentity("second", 0, 1));
  EXPECT_EQ(second.status().code(), StatusCode::kAlreadyExists);
  ASSERT_TRUE(first->Close().ok());
  EXPECT_EQ(CommittedRows(path, "kernels"), 10);
}

TEST(Writer, RejectsBadIdentityAndMissingDirectory) {
  TempDir dir;
  auto no_run = TraceWriter::Create(dir / "a.sqlite", MakeIdentity("", 0, 1));
  EXPECT_EQ(no_run.status().code(), StatusCode::kInvalidArgument);
  auto bad_run = TraceWriter::Create(dir / "a.sqlite", MakeIdentity("run\nid", 0, 1));
  EXPECT_EQ(bad_run.status().code(), StatusCode::kInvalidArgument);
  auto rank_too_big = TraceWriter::Create(dir / "b.sqlite", MakeIdentity("r", 4, 4));
  EXPECT_EQ(rank_too_big.status().code(), StatusCode::kInvalidArgument);
  auto no_dir = TraceWriter::Create(dir / "missing" / "c.sqlite", MakeIdentity("r", 0, 1));
  EXPECT_EQ(no_dir.status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(std::filesystem::exists(dir / "a.sqlite"));
  EXPECT_FALSE(std::filesystem::exists(dir / "b.sqlite"));
}

TEST(Writer, DropsEventsOnUnknownLanesOrWithInvalidTimes) {
  TempDir dir;
  const auto path = dir / "rank-0.sqlite";
  auto writer = MustCreate(path, MakeIdentity("r", 0, 1));
  ASSERT_NE(writer, nullptr);
  const LaneId lane = AddStream(*writer);
  EventTables batch = Kernels(lane, 4);
  batch.kernels[1].lane = 99;
  batch.kernels[2].end_ns = batch.kernels[2].start_ns - 1;
  batch.kernels[3].start_ns = std::numeric_limits<TimestampNs>::min();  // span overflows int64
  batch.kernels[3].end_ns = std::numeric_limits<TimestampNs>::max();
  ASSERT_TRUE(writer->Submit(std::move(batch)));
  ASSERT_TRUE(writer->Close().ok());
  EXPECT_EQ(CommittedRows(path, "kernels"), 1);
  EXPECT_EQ(writer->stats().events_dropped, 3u);
  auto reader = TraceReader::Open(path);
  ASSERT_TRUE(reader.ok());
  auto drops = (*reader)->ReadDrops();
  ASSERT_TRUE(drops.ok());
  std::map<std::string, uint64_t> reasons;
  for (const DropRecord& d : *drops) reasons[d.reason] += d.count;
  EXPECT_EQ(reasons, (std::map<std::string, uint64_t>{{"unknown lane", 1}, {"invalid time range", 2}}));
}

// The version 2 tables go through the same checks and bookkeeping as the others.
TEST(Writer, CountersOfOneDeviceAreLanesOfTheirOwn) {
  TempDir dir;
  const auto path = dir / "rank-0.sqlite";
  auto writer = MustCreate(path, MakeIdentity("r", 0, 1));
  ASSERT_NE(writer, nullptr);
  Lane counter;
  counter.kind = LaneKind::kCounter;
  counter.device = 0;
  counter.name = "cuda memory: device (gpu 0)";
  const LaneId device = writer->AddLane(counter);
  counter.name = "cuda memory: pinned (gpu 0)";
  const LaneId pinned = writer->AddLane(counter);
  EXPECT_NE(device, pinned);
  EXPECT_EQ(writer->AddLane(counter), pinned);
  EventTables batch;
  batch.counter_samples.push_back({device, 10, 4096.0});
  batch.counter_samples.push_back({pinned, 20, 512.0});
  ASSERT_TRUE(writer->Submit(std::move(batch)));
  ASSERT_TRUE(writer->Close().ok());
  auto reader = TraceReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  auto lanes = (*reader)->ReadLanes();
  ASSERT_TRUE(lanes.ok()) << lanes.status().message();
  ASSERT_EQ(lanes->size(), 2u);
  EXPECT_EQ((*lanes)[0].name, "cuda memory: device (gpu 0)");
  EXPECT_EQ((*lanes)[1].name, "cuda memory: pinned (gpu 0)");
  EXPECT_EQ(CommittedRows(path, "counter_samples"), 2);
}

TEST(Writer, Version2TablesAreCheckedAndCountedLikeTheOthers) {
  TempDir dir;
  const auto path = dir / "rank-0.sqlite";
  auto writer = MustCreate(path, MakeIdentity("r", 0, 1));
  ASSERT_NE(writer, nullptr);
  const LaneId stream = AddStream(*writer);
  Lane comm_desc;
  comm_desc.kind = LaneKind::kCommunicator;
  comm_desc.comm_hash = 5;
  const LaneId comm = writer->AddLane(comm_desc);
  EventTables batch = Kernels(stream, 2);  // each 5 ns long
  for (TimestampNs start : {0, 100, 200}) {
    OverheadEvent o;
    o.lane = stream;
    o.start_ns = start;
    o.end_ns = start + 70;
    batch.overheads.push_back(o);
    CollectivePartEvent p;
    p.lane = comm;
    p.start_ns = start;
    p.end_ns = start + 30;
    batch.collective_parts.push_back(p);
  }
  batch.overheads[1].end_ns = batch.overheads[1].start_ns - 1;  // invalid time range
  batch.overheads[2].lane = 99;                                 // unknown lane
  batch.collective_parts[2].lane = kNoLane;                     // unknown lane
  ASSERT_TRUE(writer->Submit(std::move(batch)));
  ASSERT_TRUE(writer->Close().ok());
  EXPECT_EQ(CommittedRows(path, "overheads"), 1);
  EXPECT_EQ(CommittedRows(path, "collective_parts"), 2);
  EXPECT_EQ(writer->stats().events_committed, 5u);
  EXPECT_EQ(writer->stats().events_dropped, 3u);

  auto reader = TraceReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  auto drops = (*reader)->ReadDrops();
  ASSERT_TRUE(drops.ok());
  std::map<std::string, uint64_t> reasons;
  for (const DropRecord& d : *drops) reasons[d.reason] += d.count;
  EXPECT_EQ(reasons, (std::map<std::string, uint64_t>{{"unknown lane", 2}, {"invalid time range", 1}}));
  // An overhead is the longest event on the stream, a part the longest on the communicator.
  auto lanes = (*reader)->ReadLanes();
  ASSERT_TRUE(lanes.ok());
  ASSERT_EQ(lanes->size(), 2u);
  EXPECT_EQ((*lanes)[stream - 1].max_duration_ns, 70);
  EXPECT_EQ((*lanes)[comm - 1].max_duration_ns, 30);

  // lane_blocks counts the new tables' rows per lane.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db,
                               "SELECT event_table, block, lane, rows FROM lane_blocks "
                               "ORDER BY event_table, lane",
                               -1, &stmt, nullptr),
            SQLITE_OK);
  std::vector<std::string> blocks;
  while (sqlite3_step(stmt) == SQLITE_ROW) {
    blocks.push_back(std::string(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0))) + " " +
                     std::to_string(sqlite3_column_int64(stmt, 1)) + " " +
                     std::to_string(sqlite3_column_int64(stmt, 2)) + " " +
                     std::to_string(sqlite3_column_int64(stmt, 3)));
  }
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  const std::string on_stream = " 0 " + std::to_string(stream) + " ";
  const std::string on_comm = " 0 " + std::to_string(comm) + " ";
  EXPECT_EQ(blocks, (std::vector<std::string>{"collective_parts" + on_comm + "2", "kernels" + on_stream + "2",
                                              "overheads" + on_stream + "1"}));
}

TEST(Writer, SubmitAfterCloseIsDroppedAndCloseIsIdempotent) {
  TempDir dir;
  auto writer = MustCreate(dir / "rank-0.sqlite", MakeIdentity("r", 0, 1));
  ASSERT_NE(writer, nullptr);
  const LaneId lane = AddStream(*writer);
  ASSERT_TRUE(writer->Close().ok());
  EXPECT_FALSE(writer->Submit(Kernels(lane, 4)));
  EXPECT_EQ(writer->stats().events_dropped, 4u);
  EXPECT_TRUE(writer->Close().ok());
}

}  // namespace
}  // namespace rankscope::trace

namespace rankscope::trace {
namespace {

FlightCollective Entered(uint64_t sequence, TimestampNs start, std::optional<TimestampNs> end) {
  FlightCollective c;
  c.comm_hash = 0xfeedf00ddeadbeefULL;  // above INT64_MAX: stored by bit pattern
  c.sequence = sequence;
  c.op = CollectiveOp::kAllReduce;
  c.name = "allreduce";
  c.bytes = 4096;
  c.comm_rank = 1;
  c.comm_size = 4;
  c.lane = 1;
  c.start_ns = start;
  c.end_ns = end;
  return c;
}

// The latest state replaces the earlier one, lands after the events submitted before it,
// and reads back field for field; a file of schema 2 reads as having none.
TEST(Writer, InFlightStateIsReplacedAsAWholeAndReadBack) {
  TempDir dir;
  const auto path = dir / "rank-0.sqlite";
  auto writer = MustCreate(path, MakeIdentity("r", 0, 1));
  ASSERT_NE(writer, nullptr);
  const LaneId stream = AddStream(*writer);
  InFlightState first;
  first.as_of_ns = 1000;
  first.collectives = {Entered(7, 100, std::nullopt)};
  writer->ReplaceInFlight(first);
  ASSERT_TRUE(writer->Submit(Kernels(stream, 3)));
  InFlightState second;
  second.as_of_ns = 2000;
  second.completed_collectives = 8;
  second.completed_steps = 2;
  second.last_progress_ns = 1900;
  second.collectives = {Entered(7, 100, 1900), Entered(8, 1950, std::nullopt)};
  OpenRange range;
  range.lane = stream;
  range.depth = 1;
  range.start_ns = 1500;
  range.name = "backward";
  range.domain = "rankscope";
  range.category = 2;
  range.args = R"({"step":5})";
  second.open_ranges = {range};
  writer->ReplaceInFlight(second);
  ASSERT_TRUE(writer->Close().ok());
  EXPECT_EQ(CommittedRows(path, "flight_collectives"), 2);
  EXPECT_EQ(CommittedRows(path, "kernels"), 3);

  auto reader = TraceReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  auto state = (*reader)->ReadInFlight();
  ASSERT_TRUE(state.ok()) << state.status().message();
  EXPECT_EQ(state->as_of_ns, 2000);
  EXPECT_EQ(state->completed_collectives, 8u);
  EXPECT_EQ(state->completed_steps, 2u);
  EXPECT_EQ(state->last_progress_ns, 1900);
  ASSERT_EQ(state->collectives.size(), 2u);
  const FlightCollective& done = state->collectives[0];
  EXPECT_EQ(done.comm_hash, 0xfeedf00ddeadbeefULL);
  EXPECT_EQ(done.sequence, 7u);
  EXPECT_EQ(done.op, CollectiveOp::kAllReduce);
  EXPECT_EQ(done.name, "allreduce");
  EXPECT_EQ(done.bytes, 4096u);
  EXPECT_EQ(done.root, -1);
  EXPECT_EQ(done.comm_rank, 1);
  EXPECT_EQ(done.comm_size, 4);
  EXPECT_EQ(done.end_ns, std::optional<TimestampNs>(1900));
  EXPECT_TRUE(state->collectives[1].in_flight());
  ASSERT_EQ(state->open_ranges.size(), 1u);
  EXPECT_EQ(state->open_ranges[0].name, "backward");
  EXPECT_EQ(state->open_ranges[0].domain, "rankscope");
  EXPECT_EQ(state->open_ranges[0].depth, 1u);
  EXPECT_EQ(state->open_ranges[0].args, R"({"step":5})");
  reader->reset();

  // What the previous schema version wrote.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "DROP TABLE flight_collectives; DROP TABLE open_ranges; PRAGMA user_version = 2;",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  auto old = TraceReader::Open(path);
  ASSERT_TRUE(old.ok()) << old.status().message();
  auto none = (*old)->ReadInFlight();
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_TRUE(none->empty());
  EXPECT_TRUE(none->collectives.empty());
}

}  // namespace
}  // namespace rankscope::trace
