#include "analyzer/critical_path.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <span>
#include <unordered_map>

#include <fmt/format.h>

namespace rankscope::analyzer {
namespace {

// A graph checked once and indexed: each node's dependencies, each instance's members.
struct IndexedGraph {
  const StepGraph& graph;
  std::vector<uint32_t> first_dependency;  // CSR over the dependencies by `to`
  std::vector<uint32_t> dependencies;      // indices into graph.dependencies
  std::unordered_map<int64_t, std::vector<uint32_t>> members;  // instance → its nodes
  std::unordered_map<int64_t, uint32_t> last_member;           // instance → the last to arrive

  std::span<const uint32_t> DependenciesOf(uint32_t node) const {
    return {dependencies.data() + first_dependency[node], dependencies.data() + first_dependency[node + 1]};
  }
  // A waiting node's sync dependencies bound its end, not its start (it blocks until they end).
  bool BoundsStart(uint32_t node, const Dependency& d) const {
    return !(graph.nodes[node].waits && d.kind == DependencyKind::kSync);
  }
};

Result<IndexedGraph> Index(const StepGraph& graph) {
  IndexedGraph index{graph, {}, {}, {}, {}};
  const size_t n = graph.nodes.size();
  for (size_t i = 0; i < n; ++i) {
    if (graph.nodes[i].end_ns < graph.nodes[i].start_ns) {
      return InvalidArgument(fmt::format("step {}: node {} ends before it starts", graph.step, i));
    }
  }
  index.first_dependency.assign(n + 1, 0);
  for (const Dependency& d : graph.dependencies) {
    if (d.from >= n || d.to >= n || d.from == d.to) {
      return InvalidArgument(fmt::format("step {}: a dependency {} → {} names no other node of the {}", graph.step,
                                         d.from, d.to, n));
    }
    ++index.first_dependency[d.to + 1];
  }
  std::partial_sum(index.first_dependency.begin(), index.first_dependency.end(), index.first_dependency.begin());
  index.dependencies.resize(graph.dependencies.size());
  std::vector<uint32_t> fill(index.first_dependency.begin(), index.first_dependency.end() - 1);
  for (uint32_t i = 0; i < graph.dependencies.size(); ++i) index.dependencies[fill[graph.dependencies[i].to]++] = i;
  for (uint32_t i = 0; i < n; ++i) {
    const WorkNode& node = graph.nodes[i];
    if (node.instance < 0) continue;
    index.members[node.instance].push_back(i);
    auto [it, inserted] = index.last_member.try_emplace(node.instance, i);
    const WorkNode& last = graph.nodes[it->second];
    if (!inserted && (node.start_ns > last.start_ns || (node.start_ns == last.start_ns && node.rank < last.rank))) {
      it->second = i;
    }
  }
  return index;
}

// When `d` lets its node go: a launch at the call's start, anything else at its end.
int64_t ReleaseOf(const StepGraph& graph, const Dependency& d) {
  const WorkNode& from = graph.nodes[d.from];
  return d.kind == DependencyKind::kLaunch ? from.start_ns : from.end_ns;
}

// The dependency that released `node` last among those bounding its start (or, `ends`, its
// end): -1 when none.
int64_t LatestRelease(const IndexedGraph& index, uint32_t node, bool ends, int64_t* release) {
  int64_t best = -1;
  for (uint32_t di : index.DependenciesOf(node)) {
    const Dependency& d = index.graph.dependencies[di];
    if (index.BoundsStart(node, d) == ends) continue;
    const int64_t at = ReleaseOf(index.graph, d);
    if (best < 0 || at > *release) {
      best = di;
      *release = at;
    }
  }
  return best;
}

// A member's transfer: its time after the last member arrived.
int64_t TransferOf(const IndexedGraph& index, const WorkNode& node) {
  const int64_t last = index.graph.nodes[index.last_member.at(node.instance)].start_ns;
  return std::max<int64_t>(0, node.end_ns - std::max(node.start_ns, last));
}

}  // namespace

const char* PathCategoryName(PathCategory category) {
  switch (category) {
    case PathCategory::kCompute: return "compute";
    case PathCategory::kCommTransfer: return "communication transfer";
    case PathCategory::kMemcpy: return "memory copy";
    case PathCategory::kHost: return "host work";
    case PathCategory::kHostGap: return "host gap";
    case PathCategory::kLaunchGap: return "launch gap";
    case PathCategory::kIdle: return "idle";
  }
  return "unknown";
}

Result<CriticalPath> FindCriticalPath(const StepGraph& graph) {
  RS_ASSIGN_OR_RETURN(IndexedGraph index, Index(graph));
  CriticalPath path;
  path.step = graph.step;
  path.start_ns = path.end_ns = graph.start_ns;
  if (graph.nodes.empty()) return path;

  uint32_t current = 0;
  for (uint32_t i = 1; i < graph.nodes.size(); ++i) {
    const WorkNode& a = graph.nodes[i];
    const WorkNode& b = graph.nodes[current];
    if (a.end_ns > b.end_ns || (a.end_ns == b.end_ns && a.rank < b.rank)) current = i;
  }
  path.end_ns = graph.nodes[current].end_ns;
  int64_t t = path.end_ns;
  // Each node is left twice at most: through its end (its time is on the path) and through
  // its start (to what released it). A launch releases its work at the call's start, so the
  // walk reaches the call at its start and goes straight on to the call's own release.
  std::vector<bool> passed_end(graph.nodes.size(), false), passed_start(graph.nodes.size(), false);
  bool at_start = false;
  std::vector<PathSegment> reversed;
  std::vector<CrossRankWait> waits;
  std::vector<size_t> wait_segment;  // per wait: reversed.size() when it was recorded
  auto add = [&](const WorkNode& on, PathCategory category, int32_t name, int64_t start, int64_t end) {
    start = std::max(start, graph.start_ns);
    if (end > start) reversed.push_back({on.rank, on.lane, category, name, start, end});
  };
  auto to_step_start = [&](const WorkNode& on) {
    add(on, on.device ? PathCategory::kIdle : PathCategory::kHostGap, on.name, graph.start_ns, std::min(t, on.start_ns));
  };

  while (true) {
    const WorkNode* node = &graph.nodes[current];
    if (!at_start) {
      if (passed_end[current]) {  // inconsistent times: a cycle
        to_step_start(*node);
        break;
      }
      passed_end[current] = true;
      if (node->instance >= 0) {
        // Its transfer is on the path; before that, the last member's way to arriving.
        const uint32_t last = index.last_member.at(node->instance);
        const int64_t arrived = graph.nodes[last].start_ns;
        add(*node, PathCategory::kCommTransfer, node->name, arrived, t);
        if (last != current && arrived > node->start_ns) {
          waits.push_back({node->rank, graph.nodes[last].rank, node->name, -1, arrived - node->start_ns});
          wait_segment.push_back(reversed.size());
        }
        current = last;
        node = &graph.nodes[current];
        passed_end[current] = true;
        t = std::min(t, node->start_ns);
      } else if (node->waits) {
        int64_t synced = 0;
        const int64_t sync = LatestRelease(index, current, /*ends=*/true, &synced);
        if (sync >= 0 && synced > node->start_ns && synced < t && !passed_end[graph.dependencies[sync].from]) {
          // It blocked until that work ended: the path goes there; its return is host work.
          add(*node, PathCategory::kHost, node->name, synced, t);
          current = graph.dependencies[sync].from;
          t = synced;
          continue;
        }
        add(*node, PathCategory::kHost, node->name, node->start_ns, t);
      } else {
        add(*node, node->category, node->name, node->start_ns, t);
      }
    }
    // What let it start, and the gap in between.
    if (passed_start[current]) {
      to_step_start(*node);
      break;
    }
    passed_start[current] = true;
    int64_t released = 0;
    const int64_t by = LatestRelease(index, current, /*ends=*/false, &released);
    if (by < 0) {
      to_step_start(*node);
      break;
    }
    released = std::min(released, node->start_ns);
    const Dependency& d = graph.dependencies[by];
    const PathCategory gap = !node->device                         ? PathCategory::kHostGap
                             : d.kind == DependencyKind::kLaunch ? PathCategory::kLaunchGap
                                                                 : PathCategory::kIdle;
    add(*node, gap, node->name, released, node->start_ns);
    current = d.from;
    t = released;
    at_start = d.kind == DependencyKind::kLaunch;
    if (t <= graph.start_ns) break;
  }

  // What each late rank was doing: the first work (not a gap) the walk met after the wait.
  for (size_t w = 0; w < waits.size(); ++w) {
    for (size_t s = wait_segment[w]; s < reversed.size(); ++s) {
      const PathSegment& seg = reversed[s];
      if (seg.rank != waits[w].late_rank) break;
      if (seg.category != PathCategory::kHostGap && seg.category != PathCategory::kIdle &&
          seg.category != PathCategory::kLaunchGap) {
        waits[w].late_doing = seg.name;
        break;
      }
    }
  }
  path.segments.assign(reversed.rbegin(), reversed.rend());
  path.waits.assign(waits.rbegin(), waits.rend());
  // The walk ends at the graph's start: a lane's first node gets the gap from there.
  path.start_ns = path.segments.empty() ? path.end_ns : graph.start_ns;
  return path;
}

Result<int64_t> ProjectStepTime(const StepGraph& graph, const WhatIf& change) {
  RS_ASSIGN_OR_RETURN(IndexedGraph index, Index(graph));
  const size_t n = graph.nodes.size();
  if ((!change.duration_scale.empty() && change.duration_scale.size() != n) ||
      (!change.gap_scale.empty() && change.gap_scale.size() != n)) {
    return InvalidArgument(fmt::format("what-if '{}': its scales are not one per node", change.label));
  }
  auto duration_scale = [&](uint32_t i) { return change.duration_scale.empty() ? 1.0 : change.duration_scale[i]; };
  auto gap_scale = [&](uint32_t i) { return change.gap_scale.empty() ? 1.0 : change.gap_scale[i]; };
  auto scaled = [](int64_t ns, double scale) { return static_cast<int64_t>(static_cast<double>(ns) * scale + 0.5); };

  // Dependencies first (Kahn's order), over each node's start (vertex i) and end (n + i): a
  // launch needs its call's start, anything else its source's end; a waiting node's sync
  // dependencies bound its end. Whatever needs a member's end needs every member's start:
  // members' starts lead to one extra vertex per instance, which leads to the members' ends.
  std::unordered_map<int64_t, uint32_t> instance_vertex;
  for (const auto& [instance, members] : index.members) {
    instance_vertex.emplace(instance, static_cast<uint32_t>(2 * n + instance_vertex.size()));
  }
  const size_t vertices = 2 * n + instance_vertex.size();
  std::vector<std::vector<uint32_t>> next(vertices);
  std::vector<uint32_t> waiting_for(vertices, 0);
  auto link = [&](size_t from, size_t to) {
    next[from].push_back(static_cast<uint32_t>(to));
    ++waiting_for[to];
  };
  for (const Dependency& d : graph.dependencies) {
    const size_t from = d.kind == DependencyKind::kLaunch ? d.from : n + d.from;
    link(from, index.BoundsStart(d.to, d) ? d.to : n + d.to);
  }
  for (uint32_t i = 0; i < n; ++i) {
    link(i, n + i);
    if (graph.nodes[i].instance >= 0) {
      const uint32_t vertex = instance_vertex.at(graph.nodes[i].instance);
      link(i, vertex);
      link(vertex, n + i);
    }
  }
  std::vector<uint32_t> order, ready_vertices;
  order.reserve(vertices);
  for (uint32_t v = 0; v < vertices; ++v) {
    if (waiting_for[v] == 0) ready_vertices.push_back(v);
  }
  while (!ready_vertices.empty()) {
    const uint32_t v = ready_vertices.back();
    ready_vertices.pop_back();
    order.push_back(v);
    for (uint32_t w : next[v]) {
      if (--waiting_for[w] == 0) ready_vertices.push_back(w);
    }
  }
  if (order.size() != vertices) {
    return InvalidArgument(fmt::format("step {}: its dependencies form a cycle", graph.step));
  }
  std::vector<int64_t> start(n, 0), end(n, 0);
  auto release_of = [&](const Dependency& d) -> int64_t {
    return d.kind == DependencyKind::kLaunch ? start[d.from] : end[d.from];
  };

  int64_t latest = graph.start_ns;
  for (uint32_t v : order) {
    if (v >= 2 * n) continue;  // an instance's vertex: every member has started
    const uint32_t i = v < n ? v : static_cast<uint32_t>(v - n);
    const WorkNode& node = graph.nodes[i];
    if (v < n) {
      // Its start: its start dependencies' new release plus its slack, scaled. Work that began
      // before the step's start keeps its time.
      int64_t was_ready = std::min(graph.start_ns, node.start_ns), ready = was_ready;
      for (uint32_t di : index.DependenciesOf(i)) {
        const Dependency& d = graph.dependencies[di];
        if (!index.BoundsStart(i, d)) continue;
        was_ready = std::max(was_ready, std::min(ReleaseOf(graph, d), node.start_ns));
        ready = std::max(ready, release_of(d));
      }
      start[i] = ready + scaled(node.start_ns - std::min(was_ready, node.start_ns), gap_scale(i));
      continue;
    }
    if (node.instance >= 0) {
      // Its scaled transfer after the last member's new start.
      int64_t last = std::numeric_limits<int64_t>::min();
      for (uint32_t m : index.members.at(node.instance)) last = std::max(last, start[m]);
      end[i] = last + scaled(TransferOf(index, node), duration_scale(i));
    } else if (node.waits) {
      // It blocks until its sync dependencies end, then returns as long as it did.
      int64_t was_synced = node.start_ns, synced = std::numeric_limits<int64_t>::min();
      for (uint32_t di : index.DependenciesOf(i)) {
        const Dependency& d = graph.dependencies[di];
        if (index.BoundsStart(i, d)) continue;
        was_synced = std::max(was_synced, std::min(ReleaseOf(graph, d), node.end_ns));
        synced = std::max(synced, release_of(d));
      }
      end[i] = std::max(start[i], synced) + scaled(node.end_ns - was_synced, duration_scale(i));
    } else {
      end[i] = start[i] + scaled(node.end_ns - node.start_ns, duration_scale(i));
    }
    latest = std::max(latest, end[i]);
  }
  return latest - graph.start_ns;
}

namespace {

WhatIf Unchanged(const StepGraph& graph, std::string label) {
  WhatIf change;
  change.label = std::move(label);
  change.duration_scale.assign(graph.nodes.size(), 1.0);
  change.gap_scale.assign(graph.nodes.size(), 1.0);
  return change;
}

}  // namespace

WhatIf RemoveStragglers(const StepGraph& graph) {
  WhatIf change = Unchanged(graph, "every rank as fast as the median rank");
  auto index = Index(graph);
  if (!index.ok()) return change;
  // A rank's own time: its work that is not waiting, and its host lanes' gaps.
  std::unordered_map<int32_t, int64_t> own;
  for (uint32_t i = 0; i < graph.nodes.size(); ++i) {
    const WorkNode& node = graph.nodes[i];
    int64_t& total = own[node.rank];
    if (node.instance < 0 && !node.waits) total += node.end_ns - node.start_ns;
    if (node.device) continue;
    int64_t released = graph.start_ns;
    LatestRelease(*index, i, /*ends=*/false, &released);
    total += std::max<int64_t>(0, node.start_ns - std::max(graph.start_ns, std::min(released, node.start_ns)));
  }
  if (own.size() < 2) return change;
  std::vector<int64_t> totals;
  for (const auto& [rank, total] : own) totals.push_back(total);
  std::sort(totals.begin(), totals.end());
  // The median rank: the lower middle one, a rank that exists (of two ranks, the faster).
  const auto median = static_cast<double>(totals[(totals.size() - 1) / 2]);
  for (uint32_t i = 0; i < graph.nodes.size(); ++i) {
    const WorkNode& node = graph.nodes[i];
    const int64_t total = own[node.rank];
    if (static_cast<double>(total) <= median || total <= 0) continue;
    const double factor = median / static_cast<double>(total);
    if (node.instance < 0 && !node.waits) change.duration_scale[i] = factor;
    if (!node.device) change.gap_scale[i] = factor;
  }
  return change;
}

WhatIf OverlapCommunication(const StepGraph& graph) {
  WhatIf change = Unchanged(graph, "communication fully overlapped");
  for (uint32_t i = 0; i < graph.nodes.size(); ++i) {
    if (graph.nodes[i].instance >= 0) change.duration_scale[i] = 0;
  }
  return change;
}

WhatIf FasterWork(const StepGraph& graph, const std::string& label,
                  const std::function<bool(const std::string& name)>& matches, double factor) {
  WhatIf change = Unchanged(graph, label);
  if (factor <= 0) return change;
  std::vector<int8_t> name_matches(graph.names.size(), -1);
  for (uint32_t i = 0; i < graph.nodes.size(); ++i) {
    const WorkNode& node = graph.nodes[i];
    if (node.name < 0 || static_cast<size_t>(node.name) >= graph.names.size() || node.waits) continue;
    int8_t& known = name_matches[static_cast<size_t>(node.name)];
    if (known < 0) known = matches(graph.names[static_cast<size_t>(node.name)]) ? 1 : 0;
    if (known) change.duration_scale[i] = 1.0 / factor;
  }
  return change;
}

WhatIf FasterCommunication(const StepGraph& graph, double factor) {
  WhatIf change = Unchanged(graph, fmt::format("communication bandwidth ×{:g}", factor));
  if (factor <= 0) return change;
  for (uint32_t i = 0; i < graph.nodes.size(); ++i) {
    if (graph.nodes[i].instance >= 0) change.duration_scale[i] = 1.0 / factor;
  }
  return change;
}

}  // namespace rankscope::analyzer
