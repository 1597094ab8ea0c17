#include "analyzer/path_events.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstddef>

namespace rankscope::analyzer {
namespace {

// More runs than this in one lane and the lane is sorted instead: a step's lookup then costs
// one binary search per lane.
constexpr size_t kMostRunsPerLane = 16;

// Lane ids of the files rankscope reads are 1..N; an id beyond this (a hostile file, which
// the scanner refuses anyway) shares one list rather than sizing a table by it.
constexpr uint32_t kMostDirectLanes = 1u << 20;

}  // namespace

RankPathEvents::LaneEvents& RankPathEvents::LaneOf(uint32_t lane) {
  const uint32_t key = std::min(lane, kMostDirectLanes);
  if (key >= slot_of_lane_.size()) slot_of_lane_.resize(static_cast<size_t>(key) + 1, 0);
  uint32_t& slot = slot_of_lane_[key];
  if (slot == 0) {
    lanes_.emplace_back();
    slot = static_cast<uint32_t>(lanes_.size());
  }
  return lanes_[slot - 1];
}

RankPathEvents::Ref RankPathEvents::Add(const PathEvent& event) {
  LaneEvents& lane = LaneOf(event.lane);
  lane.events.push_back(event);
  ++size_;
  sealed_ = false;
  return {static_cast<uint32_t>(&lane - lanes_.data()), static_cast<uint32_t>(lane.events.size() - 1)};
}

void RankPathEvents::Reserve(uint32_t lane, size_t rows) {
  std::vector<PathEvent>& events = LaneOf(lane).events;
  events.reserve(events.size() + rows);
  // Large lists in 2 MiB pages where the kernel offers them on request (transparent huge
  // pages in "madvise" mode): filling them then faults once per 2 MiB, not per 4 KiB, which
  // was a third of what keeping the events cost. Only the whole pages inside the buffer.
  constexpr uintptr_t kHugePage = uintptr_t{2} << 20;
  const auto begin = reinterpret_cast<uintptr_t>(events.data());
  const uintptr_t end = begin + events.capacity() * sizeof(PathEvent);
  const uintptr_t first = (begin + kHugePage - 1) & ~(kHugePage - 1);
  const uintptr_t last = end & ~(kHugePage - 1);
  if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);  // a hint: failure is fine
}

void RankPathEvents::Seal() {
  for (LaneEvents& lane : lanes_) {
    lane.run_first.clear();
    const std::vector<PathEvent>& events = lane.events;
    for (size_t i = 0; i < events.size(); ++i) {
      if (i == 0 || events[i].start_ns < events[i - 1].start_ns) lane.run_first.push_back(static_cast<uint32_t>(i));
      if (lane.run_first.size() > kMostRunsPerLane) break;
    }
    if (lane.run_first.size() > kMostRunsPerLane) {
      std::sort(lane.events.begin(), lane.events.end(),
                [](const PathEvent& a, const PathEvent& b) { return a.start_ns < b.start_ns; });
      lane.run_first.assign(1, 0);
    }
  }
  sealed_ = true;
}

void RankPathEvents::StartingIn(int64_t start, int64_t end, std::vector<const PathEvent*>* out) const {
  for (const LaneEvents& lane : lanes_) {
    const std::vector<PathEvent>& events = lane.events;
    if (!sealed_) {
      for (const PathEvent& e : events) {
        if (e.start_ns >= start && e.start_ns < end) out->push_back(&e);
      }
      continue;
    }
    for (size_t r = 0; r < lane.run_first.size(); ++r) {
      const auto run_begin = events.begin() + lane.run_first[r];
      const auto run_end = r + 1 < lane.run_first.size() ? events.begin() + lane.run_first[r + 1] : events.end();
      auto it = std::lower_bound(run_begin, run_end, start,
                                 [](const PathEvent& e, int64_t t) { return e.start_ns < t; });
      for (; it != run_end && it->start_ns < end; ++it) out->push_back(&*it);
    }
  }
}

}  // namespace rankscope::analyzer
