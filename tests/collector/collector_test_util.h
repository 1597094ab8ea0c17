// Helpers shared by the collector/ tests: recorder set-ups, rank files read back, a device
// event sink to inspect, and the environment of a program run under the real collector.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "collector/device_tracer.h"
#include "collector/recorder.h"
#include "tests/child_process.h"
#include "tests/rank_file_writer.h"
#include "tests/trace/trace_test_util.h"
#include "trace/reader.h"

namespace rankscope::collector::testing {

using trace::testing::TempDir;

// What the recorder tests choose; the host and pid are always this test process.
struct RecorderSetup {
  std::string run_id{};
  std::optional<int> rank{};
  std::optional<int> world_size{};
  std::string clock_override{};  // "": the collector's own choice
  std::string command_line{};
  std::chrono::milliseconds drain_interval{5};
};

// A recorder writing its rank file into `dir`.
inline RecorderOptions MakeRecorderOptions(const TempDir& dir, const RecorderSetup& setup) {
  RecorderOptions options;
  options.config.run_dir = dir.path().string();
  options.config.run_id = setup.run_id;
  options.config.rank.rank = setup.rank;
  options.config.rank.world_size = setup.world_size;
  options.config.clock_override = setup.clock_override;
  options.host = "testhost";
  options.pid = getpid();
  options.command_line = setup.command_line;
  options.drain_interval = setup.drain_interval;
  return options;
}

inline EventDraft Named(const NvtxDomain* domain, const char* name) {
  EventDraft draft;
  draft.domain = domain;
  draft.text = name;
  return draft;
}

inline trace::RankTrace Load(const std::filesystem::path& path) { return rankscope::testing::LoadRankTraceFile(path); }

// How many NVTX ranges of each name the file holds.
inline std::map<std::string, int> CountByName(const trace::RankTrace& trace) {
  std::map<std::string, int> counts;
  for (const auto& range : trace.events.nvtx_ranges) ++counts[trace.str(range.name)];
  return counts;
}

// The rank file's side of a device tracer, as a test can inspect it: lanes as added (ids
// from 1), strings interned once each (id 0 is ""), device timestamps plus `clock_offset_ns`.
class FakeDeviceSink {
 public:
  explicit FakeDeviceSink(int64_t clock_offset_ns = 0) {
    sink_.add_lane = [this](const trace::Lane& lane) {
      lanes_.push_back(lane);
      lanes_.back().id = static_cast<trace::LaneId>(lanes_.size());
      return lanes_.back().id;
    };
    sink_.intern = [this](std::string_view text) {
      for (size_t i = 0; i < strings_.size(); ++i) {
        if (strings_[i] == text) return static_cast<trace::StringId>(i);
      }
      strings_.emplace_back(text);
      return static_cast<trace::StringId>(strings_.size() - 1);
    };
    sink_.to_realtime_ns = [clock_offset_ns](uint64_t ticks) { return static_cast<int64_t>(ticks) + clock_offset_ns; };
    sink_.thread_name = [](int64_t tid) { return "thread-" + std::to_string(tid); };
  }
  // The sink's functions point at this object.
  FakeDeviceSink(const FakeDeviceSink&) = delete;
  FakeDeviceSink& operator=(const FakeDeviceSink&) = delete;

  const DeviceEventSink& sink() const { return sink_; }
  const std::vector<trace::Lane>& lanes() const { return lanes_; }
  const trace::Lane& lane(trace::LaneId id) const { return lanes_.at(id - 1); }
  const std::string& str(trace::StringId id) const { return strings_.at(id); }

 private:
  DeviceEventSink sink_;
  std::vector<trace::Lane> lanes_;
  std::vector<std::string> strings_{""};
};

// The test's environment for a program run under the built collector (COLLECTOR_LIBRARY),
// preloaded or by `rankscope profile`: without the test's own launcher and injection
// variables, and with ASan's link-order check off, since the preloaded collector comes
// before the sanitizer runtime in sanitizer builds.
inline std::map<std::string, std::string> CollectorEnvironment() {
  std::map<std::string, std::string> env = rankscope::testing::CurrentEnvironment();
  for (const char* name : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK",
                           "LD_PRELOAD", "NVTX_INJECTION64_PATH", "CUDA_INJECTION64_PATH", "RANKSCOPE_CUPTI_LIBRARY",
                           "RANKSCOPE_TRACE"}) {
    env.erase(name);
  }
  env["RANKSCOPE_COLLECTOR_LIB"] = COLLECTOR_LIBRARY;
  env["ASAN_OPTIONS"] = rankscope::testing::ChildAsanOptions();
  return env;
}

}  // namespace rankscope::collector::testing
