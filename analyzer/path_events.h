// A rank's events as the critical path needs them (critical_path.h, step_graph.h), kept per
// lane in the order they came: time order within a lane and table for files rankscope
// wrote, so that a step's events are found by binary search, not by grouping every event
// by step (which doubled the memory the scan touched and was most of the critical path's
// cost on a large run).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rankscope::analyzer {

// One event: 40 bytes.
struct PathEvent {
  enum class Kind : uint8_t { kKernel, kCopy, kRange, kApiCall, kSync };
  Kind kind = Kind::kRange;
  int8_t activity_class = -1;  // ActivityClass; -1: none (an annotation, a host call)
  uint32_t lane = 0;
  uint32_t name = 0;  // into RankPathEvents::names
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint64_t correlation_id = 0;  // launches and their kernels and copies
};

class RankPathEvents {
 public:
  // Where Add put an event, valid until Seal.
  struct Ref {
    uint32_t slot = 0;
    uint32_t index = 0;
  };

  // Appends an event to its lane's list. Amortized O(1).
  Ref Add(const PathEvent& event);
  // Room for `rows` events of `lane` (a hint; a damaged file may lie, so callers cap it).
  void Reserve(uint32_t lane, size_t rows);
  PathEvent& at(Ref ref) { return lanes_[ref.slot].events[ref.index]; }

  // After the last Add: marks each lane's runs sorted by start, and sorts a lane whose runs
  // are too many to search one by one (another tool's file in no order). O(E), O(n log n)
  // for such a lane of n.
  void Seal();

  // Appends the events that start in [start, end), lane by lane. After Seal: O(lanes × runs
  // × log E + found); before: O(E).
  void StartingIn(int64_t start, int64_t end, std::vector<const PathEvent*>* out) const;

  // Every event, to rename (names): lane by lane.
  template <typename Visit>
  void ForEach(Visit&& visit) {
    for (LaneEvents& lane : lanes_) {
      for (PathEvent& event : lane.events) visit(event);
    }
  }
  // Keeps only the events `keep` accepts. O(E).
  template <typename Keep>
  void Retain(Keep&& keep) {
    size_ = 0;
    for (LaneEvents& lane : lanes_) {
      std::erase_if(lane.events, [&](const PathEvent& e) { return !keep(e); });
      size_ += lane.events.size();
    }
    sealed_ = false;
  }
  size_t size() const { return size_; }

  std::vector<std::string> names;
  // The steps whose events these are (rank_scan.h PathStepsKept); empty: every step's.
  std::vector<int64_t> kept_steps;

 private:
  struct LaneEvents {
    std::vector<PathEvent> events;
    std::vector<uint32_t> run_first;  // after Seal: where each run sorted by start begins
  };
  LaneEvents& LaneOf(uint32_t lane);

  std::vector<LaneEvents> lanes_;
  std::vector<uint32_t> slot_of_lane_;  // lane id → its index in lanes_ + 1 (0: none yet)
  size_t size_ = 0;
  bool sealed_ = false;
};

}  // namespace rankscope::analyzer
