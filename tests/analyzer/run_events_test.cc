// analyzer/run_events.h: StreamRunEvents delivers every event of a written run once, with
// the analyzer's class and its source table, in the sink's documented call order; invalid
// rows are counted, not sent. ReadEventDetails reads one event's fields back.
#include "analyzer/run_events.h"

#include <sqlite3.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "analyzer/analyze.h"
#include "tests/temp_dir.h"
#include "trace/run_dir.h"
#include "trace/writer.h"

namespace rankscope::analyzer {
namespace {

using rankscope::testing::TempDir;

constexpr uint64_t kWorld = 0xC0FFEE;
const char* const kNcclKernel = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";

// What one event should arrive as: the name is compared as text ("" where the table has
// no name: copies, sets, API calls, syncs).
using Key = std::tuple<EventSource, EventClass, trace::LaneId, int64_t, int64_t, uint64_t, std::string>;

struct WrittenRank {
  trace::LaneId gpu = trace::kNoLane, thread = trace::kNoLane, comm = trace::kNoLane;
  std::vector<Key> expected;
};

// Rank `rank` of run "events-run", times shifted by 10·rank. Every kind of event the
// viewer shows:
//   GPU stream:   gemm [1000,1500) corr 21 grid 128×1×1, NCCL kernel [1600,2600) corr 22,
//                 "MemcpyKernel_DtoD" [2700,2800) corr 23 (memory by name),
//                 copy [3000,3100) corr 24, set [3200,3250) corr 25
//   thread:       step [900,4000) (annotation), forward [950,1400) (category 1 = compute:
//                 CPU-backend work), annot [960,980) (annotation), a workload mark at 800,
//                 launches [990,995) corr 21 and [1590,1595) corr 22, a copy call
//                 [2990,2995) corr 24, a stream sync [3300,3400)
//   communicator: an all-reduce record [1550,2650)
WrittenRank WriteRank(const std::filesystem::path& path, int rank) {
  WrittenRank w;
  trace::RankIdentity identity;
  identity.run_id = "events-run";
  identity.rank = rank;
  identity.world_size = 2;
  identity.local_rank = rank;
  identity.host = "node";
  identity.pid = 4000 + rank;
  auto created = trace::TraceWriter::Create(path, identity);
  EXPECT_TRUE(created.ok()) << created.status().message();
  if (!created.ok()) return w;
  trace::TraceWriter& writer = **created;
  trace::Lane gpu;
  gpu.kind = trace::LaneKind::kGpuStream;
  gpu.device = 0;
  gpu.stream = 7;
  gpu.name = "stream 7";
  w.gpu = writer.AddLane(gpu);
  trace::Lane thread;
  thread.kind = trace::LaneKind::kCpuThread;
  thread.pid = identity.pid;
  thread.tid = identity.pid + 1;
  thread.name = "main";
  w.thread = writer.AddLane(thread);
  trace::Lane comm;
  comm.kind = trace::LaneKind::kCommunicator;
  comm.comm_hash = kWorld;
  comm.name = "world";
  w.comm = writer.AddLane(comm);
  writer.SetMeta("nvtx.category.rankscope.1", "compute");

  const int64_t s = 10 * rank;
  trace::EventTables e;
  auto kernel = [&](const std::string& name, int64_t start, int64_t end, uint64_t correlation, EventClass c) {
    trace::KernelEvent k;
    k.lane = w.gpu;
    k.name = writer.Intern(name);
    k.start_ns = s + start;
    k.end_ns = s + end;
    k.correlation_id = correlation;
    k.grid = {128, 1, 1};
    k.block = {256, 1, 1};
    k.registers_per_thread = 32;
    e.kernels.push_back(k);
    w.expected.emplace_back(EventSource::kKernel, c, w.gpu, s + start, s + end, correlation, name);
  };
  kernel("gemm", 1000, 1500, 21, EventClass::kCompute);
  kernel(kNcclKernel, 1600, 2600, 22, EventClass::kComm);
  kernel("MemcpyKernel_DtoD", 2700, 2800, 23, EventClass::kMemory);

  trace::MemcpyEvent copy;
  copy.lane = w.gpu;
  copy.start_ns = s + 3000;
  copy.end_ns = s + 3100;
  copy.correlation_id = 24;
  copy.bytes = 4096;
  copy.copy_kind = trace::CopyKind::kHostToDevice;
  e.memcpys.push_back(copy);
  w.expected.emplace_back(EventSource::kMemcpy, EventClass::kMemory, w.gpu, s + 3000, s + 3100, 24, "");
  trace::MemsetEvent set;
  set.lane = w.gpu;
  set.start_ns = s + 3200;
  set.end_ns = s + 3250;
  set.correlation_id = 25;
  set.bytes = 64;
  e.memsets.push_back(set);
  w.expected.emplace_back(EventSource::kMemset, EventClass::kMemory, w.gpu, s + 3200, s + 3250, 25, "");

  auto range = [&](const std::string& name, const std::string& domain, uint32_t category, int64_t start,
                   int64_t end, const std::string& args, EventClass c) {
    trace::NvtxRangeEvent r;
    r.lane = w.thread;
    r.name = writer.Intern(name);
    r.domain = writer.Intern(domain);
    r.category = category;
    r.args = writer.Intern(args);
    r.start_ns = s + start;
    r.end_ns = s + end;
    e.nvtx_ranges.push_back(r);
    w.expected.emplace_back(EventSource::kNvtxRange, c, w.thread, s + start, s + end, 0, name);
  };
  range("step", "rankscope", 0, 900, 4000, R"({"step":0,"samples":32})", EventClass::kAnnotation);
  range("forward", "rankscope", 1, 950, 1400, "", EventClass::kCompute);
  range("annot", "", 0, 960, 980, "", EventClass::kAnnotation);

  trace::NvtxMarkEvent mark;
  mark.lane = w.thread;
  mark.name = writer.Intern("workload");
  mark.domain = writer.Intern("rankscope");
  mark.args = writer.Intern(R"({"world_size":2,"batch":32})");
  mark.start_ns = mark.end_ns = s + 800;
  e.nvtx_marks.push_back(mark);
  w.expected.emplace_back(EventSource::kMark, EventClass::kMark, w.thread, s + 800, s + 800, 0, "workload");

  auto api = [&](const std::string& name, int64_t start, int64_t end, uint64_t correlation) {
    trace::ApiCallEvent a;
    a.lane = w.thread;
    a.name = writer.Intern(name);
    a.start_ns = s + start;
    a.end_ns = s + end;
    a.correlation_id = correlation;
    a.domain = trace::ApiDomain::kRuntime;
    e.api_calls.push_back(a);
    w.expected.emplace_back(EventSource::kApiCall, EventClass::kApiCall, w.thread, s + start, s + end, correlation,
                            "");
  };
  api("cudaLaunchKernel", 990, 995, 21);
  api("cudaLaunchKernel", 1590, 1595, 22);
  api("cudaMemcpyAsync", 2990, 2995, 24);

  trace::SyncEvent sync;
  sync.lane = w.thread;
  sync.start_ns = s + 3300;
  sync.end_ns = s + 3400;
  sync.sync_kind = trace::SyncKind::kStreamSynchronize;
  sync.stream = 7;
  e.syncs.push_back(sync);
  w.expected.emplace_back(EventSource::kSync, EventClass::kSync, w.thread, s + 3300, s + 3400, 0, "");

  trace::CollectiveEvent collective;
  collective.lane = w.comm;
  collective.name = writer.Intern("AllReduce");
  collective.start_ns = s + 1550;
  collective.end_ns = s + 2650;
  collective.comm_hash = kWorld;
  collective.sequence = 0;
  collective.op = trace::CollectiveOp::kAllReduce;
  collective.bytes = 1 << 20;
  collective.comm_size = 2;
  collective.comm_rank = rank;
  e.collectives.push_back(collective);
  w.expected.emplace_back(EventSource::kCollective, EventClass::kCollective, w.comm, s + 1550, s + 2650, 0,
                          "AllReduce");

  EXPECT_TRUE(writer.Submit(std::move(e)));
  const Status closed = writer.Close();
  EXPECT_TRUE(closed.ok()) << closed.message();
  return w;
}

void ExecSql(const std::filesystem::path& path, const char* sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_busy_timeout(db, 5000);
  EXPECT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  sqlite3_close(db);
}

// Records the calls, checking their order per rank.
class RecordingSink : public ViewEventSink {
 public:
  Status OnRank(size_t index, ViewRank rank) override {
    std::lock_guard<std::mutex> lock(mutex_);
    State& s = states[index];
    EXPECT_EQ(s.phase, 0) << "OnRank twice or late for " << index;
    s.phase = 1;
    s.rank = std::move(rank);
    return Status::Ok();
  }
  Status OnEvents(size_t index, std::span<const ViewEvent> events) override {
    std::lock_guard<std::mutex> lock(mutex_);
    State& s = states[index];
    EXPECT_EQ(s.phase, 1) << "OnEvents outside OnRank..OnRankDone for " << index;
    EXPECT_FALSE(events.empty()) << "an empty batch for " << index;
    s.events.insert(s.events.end(), events.begin(), events.end());
    return Status::Ok();
  }
  Status OnRankDone(size_t index) override {
    std::lock_guard<std::mutex> lock(mutex_);
    State& s = states[index];
    EXPECT_EQ(s.phase, 1) << "OnRankDone without OnRank, or twice, for " << index;
    s.phase = 2;
    return Status::Ok();
  }

  struct State {
    int phase = 0;  // 0: nothing yet, 1: OnRank came, 2: done
    ViewRank rank;
    std::vector<ViewEvent> events;
  };
  std::map<size_t, State> states;

  // The events of rank `index` as sorted keys.
  std::vector<Key> Keys(size_t index) {
    std::vector<Key> keys;
    const State& s = states.at(index);
    for (const ViewEvent& e : s.events) {
      const bool named = e.source == EventSource::kKernel || e.source == EventSource::kNvtxRange ||
                         e.source == EventSource::kMark || e.source == EventSource::kCollective;
      std::string name;
      if (named) {
        EXPECT_LT(e.name, s.rank.strings.size());
        if (e.name < s.rank.strings.size()) name = s.rank.strings[e.name];
      }
      keys.emplace_back(e.source, e.event_class, e.lane, e.start_ns, e.end_ns, e.correlation_id, name);
    }
    std::sort(keys.begin(), keys.end());
    return keys;
  }

 private:
  std::mutex mutex_;
};

std::vector<Key> Sorted(std::vector<Key> keys) {
  std::sort(keys.begin(), keys.end());
  return keys;
}

class StreamRunEventsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int rank = 0; rank < 2; ++rank) ranks_.push_back(WriteRank(dir_ / trace::RankFileName(rank), rank));
  }
  TempDir dir_;
  std::vector<WrittenRank> ranks_;
};

TEST_F(StreamRunEventsTest, DeliversEveryEventOnceWithItsClassAndSource) {
  for (int threads : {1, 2}) {
    SCOPED_TRACE(::testing::Message() << threads << " threads");
    RecordingSink sink;
    ViewLoadOptions options;
    options.threads = threads;
    const Result<ViewRun> run = StreamRunEvents(dir_.path(), options, sink);
    ASSERT_TRUE(run.ok()) << run.status().message();
    EXPECT_EQ(run->ranks, 2u);
    EXPECT_EQ(run->run_id, "events-run");
    EXPECT_EQ(run->directory.string(), dir_.path().string());
    EXPECT_EQ(run->invalid_events, 0);
    ASSERT_EQ(sink.states.size(), 2u);
    for (size_t index = 0; index < 2; ++index) {
      SCOPED_TRACE(::testing::Message() << "rank " << index);
      const RecordingSink::State& state = sink.states.at(index);
      EXPECT_EQ(state.phase, 2);
      // Sink indices are in rank order.
      EXPECT_EQ(state.rank.meta.rank, static_cast<int>(index));
      EXPECT_EQ(state.rank.file.filename().string(), trace::RankFileName(static_cast<int>(index)));
      ASSERT_FALSE(state.rank.strings.empty());
      EXPECT_EQ(state.rank.strings[0], "");
      ASSERT_EQ(state.rank.lanes.size(), 3u);
      for (size_t i = 0; i < state.rank.lanes.size(); ++i) {
        EXPECT_EQ(state.rank.lanes[i].id, i + 1);
      }
      EXPECT_EQ(state.rank.lanes[ranks_[index].gpu - 1].kind, trace::LaneKind::kGpuStream);
      // 3 kernels, a copy, a set, 3 ranges, a mark, 3 API calls, a sync, a collective = 14.
      EXPECT_EQ(state.events.size(), 14u);
      EXPECT_EQ(sink.Keys(index), Sorted(ranks_[index].expected));
    }
  }
}

TEST_F(StreamRunEventsTest, InvalidRowsAreCountedNotSent) {
  // Damage rank 1's gemm (start 1010) after the fact: end before start.
  ExecSql(dir_ / trace::RankFileName(1), "UPDATE kernels SET end_ns = start_ns - 5 WHERE start_ns = 1010");
  RecordingSink sink;
  const Result<ViewRun> run = StreamRunEvents(dir_.path(), {}, sink);
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(run->invalid_events, 1);
  EXPECT_FALSE(run->warnings.empty()) << "skipped rows deserve a warning";
  std::vector<Key> expected = ranks_[1].expected;
  expected.erase(std::remove_if(expected.begin(), expected.end(),
                                [](const Key& key) { return std::get<6>(key) == "gemm"; }),
                 expected.end());
  ASSERT_EQ(expected.size(), 13u);
  EXPECT_EQ(sink.Keys(1), Sorted(expected));
  EXPECT_EQ(sink.Keys(0), Sorted(ranks_[0].expected));  // rank 0 untouched
  for (const auto& [index, state] : sink.states) {
    for (const ViewEvent& e : state.events) {
      EXPECT_GE(e.end_ns, e.start_ns) << "rank " << index;
    }
  }
}

TEST_F(StreamRunEventsTest, OneRankFileIsARunOfOne) {
  RecordingSink sink;
  const Result<ViewRun> run = StreamRunEvents(dir_ / trace::RankFileName(1), {}, sink);
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(run->ranks, 1u);
  ASSERT_EQ(sink.states.size(), 1u);
  EXPECT_EQ(sink.states.at(0).rank.meta.rank, 1);
  EXPECT_EQ(sink.Keys(0), Sorted(ranks_[1].expected));
}

TEST_F(StreamRunEventsTest, ReportsProgressUpToEveryRank) {
  RecordingSink sink;
  std::vector<std::pair<int, int>> calls;
  ViewLoadOptions options;
  options.progress = [&calls](int done, int total) { calls.emplace_back(done, total); };
  const Result<ViewRun> run = StreamRunEvents(dir_.path(), options, sink);
  ASSERT_TRUE(run.ok()) << run.status().message();
  ASSERT_FALSE(calls.empty());
  EXPECT_EQ(calls.back(), std::make_pair(2, 2));
}

TEST_F(StreamRunEventsTest, ClassifyOptionsApply) {
  RecordingSink sink;
  ViewLoadOptions options;
  options.classify.comm_patterns = {"gemm"};
  const Result<ViewRun> run = StreamRunEvents(dir_.path(), options, sink);
  ASSERT_TRUE(run.ok()) << run.status().message();
  int gemms = 0;
  const RecordingSink::State& state = sink.states.at(0);
  for (const ViewEvent& e : state.events) {
    if (e.source == EventSource::kKernel && state.rank.strings.at(e.name) == "gemm") {
      ++gemms;
      EXPECT_EQ(e.event_class, EventClass::kComm);
    }
  }
  EXPECT_EQ(gemms, 1);
}

// ---- The CPU-side rule (docs/metrics.md §1) ------------------------------------------------

struct RangeSpec {
  bool gloo_thread;  // else the main thread
  const char* domain;
  const char* name;
  int64_t start, end;
  EventClass expected;
};

// A rank of run "cpu-side-run": NVTX ranges on a main and a gloo thread, and with `kernel`
// a kernel on GPU 0 (device activity: the CPU-side rule is off).
void WriteRangesRank(const std::filesystem::path& path, int rank, bool kernel, const std::vector<RangeSpec>& ranges) {
  trace::RankIdentity identity;
  identity.run_id = "cpu-side-run";
  identity.rank = rank;
  identity.world_size = 2;
  identity.host = "node";
  identity.pid = 5000 + rank;
  auto created = trace::TraceWriter::Create(path, identity);
  ASSERT_TRUE(created.ok()) << created.status().message();
  trace::TraceWriter& writer = **created;
  trace::Lane thread;
  thread.kind = trace::LaneKind::kCpuThread;
  thread.pid = identity.pid;
  thread.tid = identity.pid;
  const trace::LaneId main = writer.AddLane(thread);
  thread.tid = identity.pid + 1;
  const trace::LaneId gloo = writer.AddLane(thread);
  trace::EventTables e;
  if (kernel) {
    trace::Lane gpu;
    gpu.kind = trace::LaneKind::kGpuStream;
    gpu.device = 0;
    gpu.stream = 7;
    trace::KernelEvent k;
    k.lane = writer.AddLane(gpu);
    k.name = writer.Intern("gemm");
    k.start_ns = 0;
    k.end_ns = 10;
    e.kernels.push_back(k);
  }
  for (const RangeSpec& spec : ranges) {
    trace::NvtxRangeEvent r;
    r.lane = spec.gloo_thread ? gloo : main;
    r.domain = writer.Intern(spec.domain);
    r.name = writer.Intern(spec.name);
    r.start_ns = spec.start;
    r.end_ns = spec.end;
    e.nvtx_ranges.push_back(r);
  }
  EXPECT_TRUE(writer.Submit(std::move(e)));
  const Status closed = writer.Close();
  EXPECT_TRUE(closed.ok()) << closed.message();
}

// The class each NVTX range of `index` arrived with, by name.
std::map<std::string, EventClass> RangeClasses(RecordingSink& sink, size_t index) {
  std::map<std::string, EventClass> classes;
  const RecordingSink::State& state = sink.states.at(index);
  for (const ViewEvent& e : state.events) {
    if (e.source == EventSource::kNvtxRange) classes[state.rank.strings.at(e.name)] = e.event_class;
  }
  return classes;
}

TEST(StreamRunEvents, CpuSideRuleClassesRangesAsTheAnalyzerDoes) {
  TempDir dir;
  const std::vector<RangeSpec> cpu_only = {
      {false, "user_annotation", "ProfilerStep#1", 0, 1000, EventClass::kAnnotation},
      {false, "user_annotation", "## forward ##", 90, 450, EventClass::kAnnotation},
      {false, "python_function", "nn.Module: Linear", 95, 420, EventClass::kAnnotation},
      {false, "cpu_op", "aten::linear", 100, 400, EventClass::kCompute},
      {false, "cpu_op", "aten::addmm", 150, 350, EventClass::kAnnotation},  // inside aten::linear
      {false, "cpu_op", "autograd::engine::evaluate_function: AddmmBackward0", 500, 900, EventClass::kCompute},
      {false, "cpu_op", "c10d::allreduce_", 700, 750, EventClass::kComm},
      {true, "cpu_op", "gloo:all_reduce", 720, 980, EventClass::kComm},
  };
  WriteRangesRank(dir / trace::RankFileName(0), 0, false, cpu_only);
  WriteRangesRank(dir / trace::RankFileName(1), 1, true, cpu_only);  // the same ranges beside a kernel

  RecordingSink sink;
  const Result<ViewRun> run = StreamRunEvents(dir.path(), {}, sink);
  ASSERT_TRUE(run.ok()) << run.status().message();
  const std::map<std::string, EventClass> rank0 = RangeClasses(sink, 0);
  const std::map<std::string, EventClass> rank1 = RangeClasses(sink, 1);
  for (const RangeSpec& spec : cpu_only) {
    SCOPED_TRACE(spec.name);
    ASSERT_TRUE(rank0.contains(spec.name));
    EXPECT_EQ(rank0.at(spec.name), spec.expected);
    ASSERT_TRUE(rank1.contains(spec.name));
    EXPECT_EQ(rank1.at(spec.name), EventClass::kAnnotation);  // a rank with device activity
  }
  EXPECT_EQ(sink.states.at(0).events.size(), cpu_only.size());  // each range once

  // The analyzer's top activities name exactly the ranges the viewer shows as device work.
  const Result<Report> report = AnalyzeRun(dir.path(), {});
  ASSERT_TRUE(report.ok()) << report.status().message();
  std::map<std::string, EventClass> analyzed;
  for (const ActivitySummary& activity : report->top_activities) {
    if (activity.name != "gemm") analyzed[activity.name] = ToEventClass(activity.activity_class);
  }
  std::map<std::string, EventClass> shown;
  for (const auto& [name, event_class] : rank0) {
    if (DeviceClassOf(event_class)) shown[name] = event_class;
  }
  EXPECT_EQ(analyzed, shown);
}

TEST(StreamRunEvents, UserPatternsReclassAnnotationsButNotSteps) {
  TempDir dir;
  WriteRangesRank(dir / trace::RankFileName(0), 0, true,
                  {{false, "", "step", 0, 1000, EventClass::kAnnotation},
                   {false, "user_annotation", "ProfilerStep#3", 0, 1000, EventClass::kAnnotation},
                   {false, "user_annotation", "my_all_to_all", 100, 200, EventClass::kComm}});
  RecordingSink sink;
  ViewLoadOptions options;
  options.classify.comm_patterns = {"all_to_all"};
  options.classify.compute_patterns = {"step"};
  const Result<ViewRun> run = StreamRunEvents(dir / trace::RankFileName(0), options, sink);
  ASSERT_TRUE(run.ok()) << run.status().message();
  const std::map<std::string, EventClass> classes = RangeClasses(sink, 0);
  EXPECT_EQ(classes.at("step"), EventClass::kAnnotation);
  EXPECT_EQ(classes.at("ProfilerStep#3"), EventClass::kAnnotation);
  EXPECT_EQ(classes.at("my_all_to_all"), EventClass::kComm);
}

TEST(StreamRunEvents, MissingDirectoryIsAnErrorNamingIt) {
  TempDir dir;
  RecordingSink sink;
  const Result<ViewRun> run = StreamRunEvents(dir / "no-such-run", {}, sink);
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("no-such-run"), std::string::npos) << run.status().message();
  EXPECT_TRUE(sink.states.empty());
}

TEST(StreamRunEvents, NonSqliteFileIsAnErrorNamingIt) {
  TempDir dir;
  {
    std::ofstream out(dir / "rank-0.sqlite", std::ios::binary);
    for (int i = 0; i < 100; ++i) out << "definitely not sqlite\n";
  }
  RecordingSink sink;
  const Result<ViewRun> run = StreamRunEvents(dir.path(), {}, sink);
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("rank-0.sqlite"), std::string::npos) << run.status().message();
}

// ---- LaneLabel ----------------------------------------------------------------------------------

// A thread's name that already holds its id (Kineto's) is not followed by it again; any other
// name is.
TEST(LaneLabelTest, AThreadIdIsWrittenOnce) {
  trace::Lane lane;
  lane.kind = trace::LaneKind::kCpuThread;
  lane.tid = 4515;
  lane.name = "thread 4515 (python3.8)";
  EXPECT_EQ(LaneLabel(lane), "thread 4515 (python3.8)");
  lane.name = "main";
  EXPECT_EQ(LaneLabel(lane), "main (4515)");
  lane.name = "worker45150";  // holds the digits, not the number
  EXPECT_EQ(LaneLabel(lane), "worker45150 (4515)");
  lane.name.clear();
  EXPECT_EQ(LaneLabel(lane), "thread 4515");
}

// ---- ReadEventDetails ----------------------------------------------------------------------------

bool HasField(const EventDetails& details, const std::string& label, const std::string& value) {
  for (const auto& [l, v] : details.fields) {
    if (l == label && v == value) return true;
  }
  return false;
}

// "label=value; ..." for failure messages.
std::string Describe(const EventDetails& details) {
  std::string text;
  for (const auto& [l, v] : details.fields) text += l + "=" + v + "; ";
  return text;
}

bool AnyFieldContains(const EventDetails& details, const std::string& text) {
  for (const auto& [l, v] : details.fields) {
    if (l.find(text) != std::string::npos || v.find(text) != std::string::npos) return true;
  }
  return false;
}

TEST_F(StreamRunEventsTest, ReadEventDetailsOfAKernel) {
  const std::filesystem::path file = dir_ / trace::RankFileName(0);
  const Result<EventDetails> details = ReadEventDetails(file, EventSource::kKernel, ranks_[0].gpu, 1000, 1500);
  ASSERT_TRUE(details.ok()) << details.status().message();
  EXPECT_EQ(details->correlation_id, 21u);
  EXPECT_FALSE(details->fields.empty());
  EXPECT_TRUE(HasField(*details, "grid", "128 × 1 × 1")) << Describe(*details);
  EXPECT_TRUE(AnyFieldContains(*details, "256")) << Describe(*details);  // the block
}

TEST_F(StreamRunEventsTest, ReadEventDetailsOfAnNvtxRangeAndACopy) {
  const std::filesystem::path file = dir_ / trace::RankFileName(1);
  const Result<EventDetails> step = ReadEventDetails(file, EventSource::kNvtxRange, ranks_[1].thread, 910, 4010);
  ASSERT_TRUE(step.ok()) << step.status().message();
  EXPECT_FALSE(step->fields.empty());
  EXPECT_TRUE(AnyFieldContains(*step, "rankscope")) << Describe(*step);  // the domain
  EXPECT_TRUE(AnyFieldContains(*step, "samples")) << Describe(*step);    // the payload JSON
  EXPECT_EQ(step->correlation_id, 0u);

  const Result<EventDetails> copy = ReadEventDetails(file, EventSource::kMemcpy, ranks_[1].gpu, 3010, 3110);
  ASSERT_TRUE(copy.ok()) << copy.status().message();
  EXPECT_EQ(copy->correlation_id, 24u);
  EXPECT_FALSE(copy->fields.empty());
  // 4096 B in 100 ns: 40.96 GB/s = 38.1 GiB/s; the copy's kind under its own label.
  EXPECT_TRUE(HasField(*copy, "throughput", "38.1 GiB/s")) << Describe(*copy);
  EXPECT_TRUE(AnyFieldContains(*copy, "copy kind")) << Describe(*copy);
}

TEST_F(StreamRunEventsTest, ReadEventDetailsFailsForAnEventThatDoesNotExist) {
  const std::filesystem::path file = dir_ / trace::RankFileName(0);
  // Times off by one.
  EXPECT_FALSE(ReadEventDetails(file, EventSource::kKernel, ranks_[0].gpu, 1000, 1501).ok());
  EXPECT_FALSE(ReadEventDetails(file, EventSource::kKernel, ranks_[0].gpu, 999, 1500).ok());
  // The right times in the wrong table, and on the wrong lane.
  EXPECT_FALSE(ReadEventDetails(file, EventSource::kMemcpy, ranks_[0].gpu, 1000, 1500).ok());
  EXPECT_FALSE(ReadEventDetails(file, EventSource::kKernel, ranks_[0].thread, 1000, 1500).ok());
  // No such file.
  EXPECT_FALSE(ReadEventDetails(dir_ / "rank-9.sqlite", EventSource::kKernel, ranks_[0].gpu, 1000, 1500).ok());
}

}  // namespace
}  // namespace rankscope::analyzer
