// What set a step's time: the step's work on every rank as a dependency graph, the longest
// chain through it (the critical path) with its time blamed on categories, ranks and names,
// and what-if projections that re-evaluate the graph with one change (docs/metrics.md §10).
//
// The graph is built by the caller (from a run's events, or by hand in tests); this file
// only needs its nodes and dependencies. Times are on one clock (aligned across hosts).
// Costs: FindCriticalPath and Project are O((nodes + dependencies) · log nodes) per step.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"

namespace rankscope::analyzer {

// Where a piece of the critical path's time went.
enum class PathCategory : uint8_t {
  kCompute,       // a compute kernel or operator (a CPU backend's compute range)
  kCommTransfer,  // a collective's or message's time after its last member arrived
  kMemcpy,        // a memory copy or set
  kHost,          // host work on the path: API calls, a sync's return, recorded CPU ranges
  kHostGap,       // a CPU lane with nothing recorded running (Python, a sleep, the framework)
  kLaunchGap,     // a device lane idle because its work was launched late
  kIdle,          // a device lane idle after its previous work, with no later release seen
};
const char* PathCategoryName(PathCategory category);

struct WorkNode {
  int32_t rank = 0;
  int32_t lane = 0;              // the caller's lane id within the rank (a thread, a stream)
  bool device = false;           // a GPU stream (or a CPU backend's compute/comm lane)
  PathCategory category = PathCategory::kCompute;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int32_t name = -1;             // into StepGraph::names, -1: none
  // Members of one collective instance (or of one message: its send and its receive) share
  // an id ≥ 0: each member's end waits for the last member's start.
  int64_t instance = -1;
  // A synchronization (a stream or device sync, a wait): its own time is waiting, not work,
  // so the path goes through what released it.
  bool waits = false;
};

enum class DependencyKind : uint8_t {
  kProgramOrder,  // the previous node on the same lane
  kLaunch,        // a launch call → its kernel or copy: released at the call's start
  kSync,          // the work a synchronization or a waiting lane waited for
};

// `to` cannot start before `from` releases it: from's end (a launch: from's start).
struct Dependency {
  uint32_t from = 0;
  uint32_t to = 0;
  DependencyKind kind = DependencyKind::kProgramOrder;
};

struct StepGraph {
  int64_t step = 0;
  int64_t start_ns = 0;  // the earliest rank's step start
  int64_t end_ns = 0;    // the latest rank's step end
  std::vector<std::string> names;
  std::vector<WorkNode> nodes;
  std::vector<Dependency> dependencies;
};

struct PathSegment {
  int32_t rank = 0;
  int32_t lane = 0;
  PathCategory category = PathCategory::kCompute;
  int32_t name = -1;  // the node's; a gap's is the node it preceded
  int64_t start_ns = 0;
  int64_t end_ns = 0;
};

// On the path, `waiting_rank` waited `wait_ns` at a collective (`collective`, its name) for
// `late_rank`, which was running `late_doing` (the name of the path's segment just before it
// arrived; -1: a gap) when the others had arrived.
struct CrossRankWait {
  int32_t waiting_rank = 0;
  int32_t late_rank = 0;
  int32_t collective = -1;
  int32_t late_doing = -1;
  int64_t wait_ns = 0;
};

struct CriticalPath {
  int64_t step = 0;
  int64_t start_ns = 0;  // where the walk ended (≥ the graph's start)
  int64_t end_ns = 0;    // the latest end of any node
  std::vector<PathSegment> segments;  // in time order; they tile [start_ns, end_ns]
  std::vector<CrossRankWait> waits;   // in time order
  int64_t length_ns() const { return end_ns - start_ns; }
};

// The path that ends at the latest-ending node, walked back: from each node to what released
// it last (its latest dependency, or a collective's last arrival), the time between them a
// gap. Fails on a dependency that names a missing node.
Result<CriticalPath> FindCriticalPath(const StepGraph& graph);

// One change to re-evaluate a step with. Scales multiply durations: 0.5 halves.
struct WhatIf {
  std::string label;
  std::vector<double> duration_scale;  // per node; empty: 1 for every node
  std::vector<double> gap_scale;       // per node, the gap before it (its slack); empty: 1
};

// The step re-evaluated: every node starts when its latest dependency releases it plus its
// original slack (the gap it had, scaled), lasts its duration (scaled); a collective member
// ends its (scaled) transfer after the last member's new start. Nothing is reordered.
// Unchanged, it reproduces the original times exactly. Returns the projected step time:
// latest end − graph start.
Result<int64_t> ProjectStepTime(const StepGraph& graph, const WhatIf& change);

// The what-ifs of docs/metrics.md §10, as changes for one graph.
// Every rank whose own time in the step (its non-waiting work and host gaps) exceeds the
// median rank's (the lower middle one: of two ranks, the faster) gets its work and gaps
// scaled down to it.
WhatIf RemoveStragglers(const StepGraph& graph);
// Collective and message transfers cost nothing: communication fully overlapped.
WhatIf OverlapCommunication(const StepGraph& graph);
// Nodes whose name `matches` last 1/factor as long.
WhatIf FasterWork(const StepGraph& graph, const std::string& label,
                  const std::function<bool(const std::string& name)>& matches, double factor);
// Transfers last 1/factor as long: bandwidth × factor.
WhatIf FasterCommunication(const StepGraph& graph, double factor);

}  // namespace rankscope::analyzer
