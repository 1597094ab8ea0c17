// Hand-written CPU-backend runs for the cli/ tests: rank files as the collector writes them
// for the reference trainer (compute and comm ranges on their own lanes, step ranges on the
// main thread, one all-reduce per step).
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "tests/cli/cli_test_util.h"
#include "trace/run_dir.h"
#include "trace/writer.h"

namespace rankscope::cli::testing {

struct RankSpec {
  std::string run_id = "run-a";
  int world_size = 2;
  int steps = 3;
  int64_t step_ms = 10;  // each step; compute and comm scale with it
  int samples = 8;       // per rank per step (the step payload)
  bool device_activity = true;
  std::map<std::string, std::string> meta{};  // further meta rows, e.g. cupti.status
};

// A rank file as the collector writes it for the CPU backend: compute and comm ranges on
// their own lanes, step ranges on the main thread, one all-reduce per step.
inline void WriteRank(const std::filesystem::path& dir, int rank, const RankSpec& spec) {
  trace::RankIdentity who;
  who.run_id = spec.run_id;
  who.rank = rank;
  who.world_size = spec.world_size;
  who.host = "host";
  who.pid = 1000 + rank;
  who.command_line = "trainer --steps 3";
  auto writer = trace::TraceWriter::Create(dir / trace::RankFileName(rank), who);
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  trace::TraceWriter& w = **writer;
  for (const auto& [key, value] : spec.meta) w.SetMeta(key, value);
  w.SetMeta("nvtx.category.rankscope.1", "compute");
  w.SetMeta("nvtx.category.rankscope.2", "comm");
  auto lane = [&](int64_t tid, const char* name) {
    trace::Lane l;
    l.kind = trace::LaneKind::kCpuThread;
    l.pid = who.pid;
    l.tid = tid;
    l.name = name;
    return w.AddLane(l);
  };
  const trace::LaneId main = lane(1, "main"), compute = lane(2, "compute"), comm = lane(3, "comm");
  trace::EventTables batch;
  auto range = [&](trace::LaneId on, const char* name, uint32_t category, int64_t start, int64_t end,
                   const std::string& args) {
    trace::NvtxRangeEvent r;
    r.lane = on;
    r.name = w.Intern(name);
    r.domain = w.Intern("rankscope");
    r.category = category;
    r.start_ns = start;
    r.end_ns = end;
    r.args = w.Intern(args);
    batch.nvtx_ranges.push_back(r);
  };
  const int64_t ms = 1'000'000;
  for (int step = 0; step < spec.steps; ++step) {
    const int64_t t0 = 1'000'000'000 + step * spec.step_ms * ms;
    const int64_t tenth = spec.step_ms * ms / 10;
    range(main, "step", 0, t0, t0 + spec.step_ms * ms,
          fmt::format(R"({{"samples":{},"step":{}}})", spec.samples, step));
    if (!spec.device_activity) continue;
    range(compute, "linear_forward", 1, t0, t0 + 6 * tenth, "");
    range(comm, "allreduce", 2, t0 + 4 * tenth, t0 + 8 * tenth, R"({"bucket":0,"bytes":4000000})");
  }
  ASSERT_TRUE(w.Submit(std::move(batch)));
  ASSERT_TRUE(w.Close().ok());
}

inline void WriteRun(const std::filesystem::path& dir, int ranks, const RankSpec& spec = {}) {
  std::filesystem::create_directories(dir);
  for (int rank = 0; rank < ranks; ++rank) WriteRank(dir, rank, spec);
}

// One "rankscope: error:" line and nothing else on stderr.
inline void ExpectOneErrorLine(const RankscopeRun& run, const std::string& contains) {
  const std::vector<std::string> lines = Lines(run.err);
  ASSERT_EQ(lines.size(), 1u) << run.err;
  EXPECT_EQ(lines[0].rfind("rankscope: error: ", 0), 0u) << lines[0];
  EXPECT_NE(lines[0].find(contains), std::string::npos) << lines[0];
  EXPECT_TRUE(run.out.empty()) << run.out;
}

}  // namespace rankscope::cli::testing
