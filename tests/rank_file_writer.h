// Writes an in-memory rank trace (e.g. from tests/trace_builder.h) as a closed
// rank file, for tests that need real files on disk, and loads one back whole.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>

#include "trace/reader.h"
#include "trace/writer.h"

namespace rankscope::testing {

// Writes `t` as a closed rank file through TraceWriter, remapping string and lane ids.
inline void WriteRankTraceFile(const trace::RankTrace& t, const std::filesystem::path& path) {
  trace::RankIdentity identity = t.meta;
  identity.pid = 1000 + t.meta.rank.value_or(0);
  auto created = trace::TraceWriter::Create(path, identity);
  ASSERT_TRUE(created.ok()) << created.status().message();
  trace::TraceWriter& w = **created;
  std::vector<trace::StringId> strings(t.strings.size());
  for (size_t i = 0; i < t.strings.size(); ++i) strings[i] = w.Intern(t.strings[i]);
  std::vector<trace::LaneId> lanes(t.lanes.size() + 1, trace::kNoLane);
  for (const trace::Lane& lane : t.lanes) lanes[lane.id] = w.AddLane(lane);
  for (const auto& [key, value] : t.meta.entries) w.SetMeta(key, value);
  trace::EventTables e = t.events;
  auto common = [&](trace::EventCommon& event) {
    event.lane = lanes[event.lane];
    event.name = strings[event.name];
  };
  for (auto& k : e.kernels) common(k);
  for (auto& c : e.memcpys) common(c);
  for (auto& m : e.memsets) common(m);
  for (auto& a : e.api_calls) common(a);
  for (auto& y : e.syncs) common(y);
  for (auto& r : e.nvtx_ranges) {
    common(r);
    r.domain = strings[r.domain];
    r.args = strings[r.args];
    r.end_lane = lanes[r.end_lane];
  }
  for (auto& m : e.nvtx_marks) {
    common(m);
    m.domain = strings[m.domain];
    m.args = strings[m.args];
  }
  for (auto& c : e.collectives) {
    common(c);
    c.algorithm = strings[c.algorithm];
    c.protocol = strings[c.protocol];
  }
  ASSERT_TRUE(w.Submit(std::move(e)));
  const Status closed = w.Close();
  ASSERT_TRUE(closed.ok()) << closed.message();
}

// The whole rank file; empty (and the test failed) when it cannot be read.
inline trace::RankTrace LoadRankTraceFile(const std::filesystem::path& path) {
  auto reader = trace::TraceReader::Open(path);
  EXPECT_TRUE(reader.ok()) << reader.status().message();
  if (!reader.ok()) return {};
  auto loaded = (*reader)->LoadAll();
  EXPECT_TRUE(loaded.ok()) << loaded.status().message();
  return loaded.ok() ? std::move(*loaded) : trace::RankTrace{};
}

}  // namespace rankscope::testing
