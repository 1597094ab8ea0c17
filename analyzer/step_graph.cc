#include "analyzer/step_graph.h"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>

#include "analyzer/classify.h"
#include "analyzer/classify_internal.h"
#include "analyzer/metrics.h"

namespace rankscope::analyzer {
namespace {

constexpr int8_t kCompute = static_cast<int8_t>(ActivityClass::kCompute);
constexpr int8_t kComm = static_cast<int8_t>(ActivityClass::kComm);
constexpr int8_t kMemory = static_cast<int8_t>(ActivityClass::kMemory);

bool OnDevice(const PathEvent& event) {
  return event.kind == PathEvent::Kind::kKernel || event.kind == PathEvent::Kind::kCopy;
}

PathCategory CategoryOf(const PathEvent& event) {
  if (event.kind == PathEvent::Kind::kApiCall || event.kind == PathEvent::Kind::kSync) return PathCategory::kHost;
  switch (event.activity_class) {
    case kCompute: return PathCategory::kCompute;
    case kComm: return PathCategory::kCommTransfer;
    case kMemory: return PathCategory::kMemcpy;
    default: return PathCategory::kHost;
  }
}

// The instance of the rank's record (a collective or a message) that overlaps [start, end)
// the most; -1: none.
template <typename Record>
class RecordFinder {
 public:
  // `longest`: the longest record's duration (Longest), computed once per rank.
  RecordFinder(const std::vector<Record>* records, const std::vector<int64_t>* ids, int64_t longest)
      : records_(records), ids_(ids), longest_(longest) {}
  static int64_t Longest(const std::vector<Record>* records) {
    int64_t longest = 0;
    if (records != nullptr) {
      for (const Record& r : *records) longest = std::max(longest, r.end_ns - r.start_ns);
    }
    return longest;
  }
  int64_t InstanceOf(int64_t start, int64_t end) const {
    if (records_ == nullptr || ids_ == nullptr || records_->empty()) return -1;
    const std::vector<Record>& records = *records_;
    auto it = std::lower_bound(records.begin(), records.end(), start - longest_,
                               [](const Record& r, int64_t t) { return r.start_ns < t; });
    int64_t best = -1, best_overlap = 0;
    for (; it != records.end() && it->start_ns < end; ++it) {
      const int64_t overlap = std::min(end, it->end_ns) - std::max(start, it->start_ns);
      const size_t index = static_cast<size_t>(it - records.begin());
      if (overlap > best_overlap && index < ids_->size() && (*ids_)[index] >= 0) {
        best_overlap = overlap;
        best = (*ids_)[index];
      }
    }
    return best;
  }

 private:
  const std::vector<Record>* records_;
  const std::vector<int64_t>* ids_;
  int64_t longest_ = 0;
};

// What a rank's graphs look up, computed once for all its steps.
struct RankLookup {
  std::unordered_map<int64_t, size_t> step_index;  // step number → index in its steps
  int64_t longest_collective_ns = 0;
  int64_t longest_message_ns = 0;
};

class GraphBuilder {
 public:
  explicit GraphBuilder(int64_t step) {
    graph_.step = step;
    graph_.start_ns = std::numeric_limits<int64_t>::max();
    graph_.end_ns = std::numeric_limits<int64_t>::min();
  }

  // `step_index`: the index in rank.steps of the graph's step (nullopt: the rank lacks it).
  void AddRank(const RankPathInput& rank, const std::vector<int64_t>* instance_ids, const RankLookup& lookup,
               std::optional<size_t> step_index);
  StepGraph Take() {
    if (graph_.nodes.empty() && graph_.start_ns > graph_.end_ns) graph_.start_ns = graph_.end_ns = 0;
    return std::move(graph_);
  }

 private:
  int32_t Name(const std::string& name) {
    auto [it, added] = names_.try_emplace(name, static_cast<int32_t>(graph_.names.size()));
    if (added) graph_.names.push_back(name);
    return it->second;
  }
  void Depend(uint32_t from, uint32_t to, DependencyKind kind) { graph_.dependencies.push_back({from, to, kind}); }

  StepGraph graph_;
  std::unordered_map<std::string, int32_t> names_;
};

void GraphBuilder::AddRank(const RankPathInput& rank, const std::vector<int64_t>* instance_ids,
                           const RankLookup& lookup, std::optional<size_t> step_index) {
  if (!step_index || rank.events == nullptr || *step_index >= rank.steps->size()) return;
  const StepRange* window = &(*rank.steps)[*step_index];
  const int64_t offset = rank.clock_offset_ns;
  graph_.start_ns = std::min(graph_.start_ns, window->start_ns + offset);
  graph_.end_ns = std::max(graph_.end_ns, window->end_ns + offset);

  // The step's events: those that start in its window.
  std::vector<const PathEvent*> events;
  rank.events->StartingIn(window->start_ns, window->end_ns, &events);
  std::erase_if(events, [](const PathEvent* e) { return e->end_ns < e->start_ns; });
  // Per lane by (start, longest first): on a CPU lane only the innermost ranges are nodes (an
  // enclosing range's own time is the gaps between its children).
  std::sort(events.begin(), events.end(), [](const PathEvent* a, const PathEvent* b) {
    return std::tie(a->lane, a->start_ns, b->end_ns) < std::tie(b->lane, b->start_ns, a->end_ns);
  });
  const RecordFinder<CollectiveRecord> records(rank.collectives, instance_ids, lookup.longest_collective_ns);
  const RecordFinder<MessageRecord> messages(rank.messages, rank.message_instances, lookup.longest_message_ns);
  std::vector<uint32_t> nodes;         // this rank's, in lane then time order
  std::vector<uint64_t> correlations;  // per node
  std::unordered_map<uint64_t, uint32_t> launches;  // correlation → its call's node
  std::set<int64_t> instances_seen;
  for (size_t i = 0; i < events.size(); ++i) {
    const PathEvent& e = *events[i];
    const bool device = OnDevice(e);
    if (!device && i + 1 < events.size() && events[i + 1]->lane == e.lane && events[i + 1]->start_ns < e.end_ns) {
      continue;  // it holds another: not innermost
    }
    WorkNode node;
    node.rank = rank.rank;
    node.lane = static_cast<int32_t>(e.lane);
    node.device = device;
    node.category = CategoryOf(e);
    node.start_ns = e.start_ns + offset;
    node.end_ns = e.end_ns + offset;
    node.name = e.name < rank.events->names.size() ? Name(rank.events->names[e.name]) : -1;
    node.waits = e.kind == PathEvent::Kind::kSync;
    if (node.category == PathCategory::kCommTransfer) {
      int64_t instance = records.InstanceOf(e.start_ns, e.end_ns);
      if (instance < 0) instance = messages.InstanceOf(e.start_ns, e.end_ns);
      // One member per rank and instance: a second node of it (a nested call) is only comm.
      if (instance >= 0 && instances_seen.insert(instance).second) node.instance = instance;
    }
    const auto id = static_cast<uint32_t>(graph_.nodes.size());
    graph_.nodes.push_back(node);
    nodes.push_back(id);
    correlations.push_back(e.correlation_id);
    if (e.kind == PathEvent::Kind::kApiCall && e.correlation_id != 0) launches.emplace(e.correlation_id, id);
  }
  // Program order per lane (nodes are in lane, then time order).
  for (size_t i = 1; i < nodes.size(); ++i) {
    if (graph_.nodes[nodes[i]].lane == graph_.nodes[nodes[i - 1]].lane) {
      Depend(nodes[i - 1], nodes[i], DependencyKind::kProgramOrder);
    }
  }
  // Launch → kernel or copy, by correlation id. A call that returned after its work ended
  // (a synchronous copy) waited for it: its work is also its sync dependency.
  std::vector<uint32_t> device_by_end, host_by_end;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const uint32_t id = nodes[i];
    (graph_.nodes[id].device ? device_by_end : host_by_end).push_back(id);
    if (correlations[i] == 0 || !graph_.nodes[id].device) continue;
    const auto it = launches.find(correlations[i]);
    if (it == launches.end()) continue;
    Depend(it->second, id, DependencyKind::kLaunch);
    WorkNode& call = graph_.nodes[it->second];
    const WorkNode& work = graph_.nodes[id];
    if (work.end_ns <= call.end_ns && work.end_ns > call.start_ns && !call.waits) {
      call.waits = true;
      Depend(id, it->second, DependencyKind::kSync);
    }
  }
  auto by_end = [&](uint32_t a, uint32_t b) { return graph_.nodes[a].end_ns < graph_.nodes[b].end_ns; };
  std::sort(device_by_end.begin(), device_by_end.end(), by_end);
  std::sort(host_by_end.begin(), host_by_end.end(), by_end);
  // The latest-ending node of `sorted` with end in (after, until], not on `lane`; -1: none.
  auto latest_in = [&](const std::vector<uint32_t>& sorted, int64_t after, int64_t until, int32_t lane) -> int64_t {
    auto it = std::upper_bound(sorted.begin(), sorted.end(), until,
                               [&](int64_t t, uint32_t id) { return t < graph_.nodes[id].end_ns; });
    while (it != sorted.begin()) {
      --it;
      const WorkNode& candidate = graph_.nodes[*it];
      if (candidate.end_ns <= after) return -1;
      if (candidate.lane != lane) return *it;
    }
    return -1;
  };
  // Syncs wait for the device work that ended last before they returned. A lane that resumes
  // after a gap waited for the other lanes' work that ended last within the gap: a CPU lane
  // for another CPU lane's (a thread handing work to another); a device stream for another
  // stream's (a wait on an event recorded after that work, which the trace does not tie to
  // it), the gap counted from its launch when that came later (until then the CPU was late).
  const int64_t window_start = window->start_ns + offset;
  std::unordered_map<uint32_t, uint32_t> launch_of;  // device node → its launch call's node
  for (const Dependency& d : graph_.dependencies) {
    if (d.kind == DependencyKind::kLaunch) launch_of.emplace(d.to, d.from);
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    const uint32_t id = nodes[i];
    const WorkNode& node = graph_.nodes[id];
    if (node.waits && !node.device) {
      const int64_t work = latest_in(device_by_end, node.start_ns, node.end_ns, node.lane);
      if (work >= 0) Depend(static_cast<uint32_t>(work), id, DependencyKind::kSync);
      continue;
    }
    const bool first_on_lane = i == 0 || graph_.nodes[nodes[i - 1]].lane != node.lane;
    int64_t free_since = first_on_lane ? window_start : graph_.nodes[nodes[i - 1]].end_ns;
    if (const auto launch = launch_of.find(id); launch != launch_of.end()) {
      free_since = std::max(free_since, graph_.nodes[launch->second].start_ns);  // launched later
    }
    if (free_since >= node.start_ns) continue;
    const int64_t other = latest_in(node.device ? device_by_end : host_by_end, free_since, node.start_ns, node.lane);
    if (other >= 0) Depend(static_cast<uint32_t>(other), id, DependencyKind::kSync);
  }
}

struct StepResult {
  int64_t measured_ns = 0;
  int64_t path_ns = 0;
  std::vector<int64_t> projected_ns;  // per what-if, in the order of `what_if_labels`
};

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

}  // namespace

InstanceIds MatchMessageInstances(const std::vector<RankPathInput>& ranks, int64_t first_id) {
  InstanceIds ids(ranks.size());
  using Key = std::tuple<uint64_t, int32_t, int32_t, uint64_t>;  // (comm, sender, receiver, n)
  std::map<Key, std::vector<std::pair<size_t, size_t>>> sides;     // → (rank index, message index)
  for (size_t r = 0; r < ranks.size(); ++r) {
    if (ranks[r].messages == nullptr) continue;
    ids[r].assign(ranks[r].messages->size(), -1);
    std::map<std::tuple<uint64_t, int32_t, bool>, uint64_t> next;
    for (size_t m = 0; m < ranks[r].messages->size(); ++m) {
      const MessageRecord& message = (*ranks[r].messages)[m];
      const uint64_t n = next[{message.comm_hash, message.peer, message.send}]++;
      const Key key = message.send ? Key{message.comm_hash, message.comm_rank, message.peer, n}
                                   : Key{message.comm_hash, message.peer, message.comm_rank, n};
      sides[key].emplace_back(r, m);
    }
  }
  int64_t id = first_id;
  for (const auto& [key, pair] : sides) {
    if (pair.size() != 2) continue;  // unmatched (or a rank recorded it twice)
    for (const auto& [r, m] : pair) ids[r][m] = id;
    ++id;
  }
  return ids;
}

namespace {

using StepIndexes = std::vector<RankLookup>;

StepIndexes IndexSteps(const std::vector<RankPathInput>& ranks) {
  StepIndexes out(ranks.size());
  for (size_t r = 0; r < ranks.size(); ++r) {
    out[r].longest_collective_ns = RecordFinder<CollectiveRecord>::Longest(ranks[r].collectives);
    out[r].longest_message_ns = RecordFinder<MessageRecord>::Longest(ranks[r].messages);
    if (ranks[r].steps == nullptr) continue;
    for (size_t i = 0; i < ranks[r].steps->size(); ++i) out[r].step_index.emplace((*ranks[r].steps)[i].number, i);
  }
  return out;
}

std::optional<size_t> StepIndexOf(const StepIndexes& indexes, size_t rank, int64_t step) {
  const auto found = indexes[rank].step_index.find(step);
  return found == indexes[rank].step_index.end() ? std::nullopt : std::optional<size_t>(found->second);
}

StepGraph BuildIndexed(const std::vector<RankPathInput>& ranks, const InstanceIds& instances,
                       const StepIndexes& indexes, int64_t step) {
  GraphBuilder builder(step);
  for (size_t r = 0; r < ranks.size(); ++r) {
    builder.AddRank(ranks[r], r < instances.size() ? &instances[r] : nullptr, indexes[r], StepIndexOf(indexes, r, step));
  }
  return builder.Take();
}

}  // namespace

StepGraph BuildStepGraph(const std::vector<RankPathInput>& ranks, const InstanceIds& instances, int64_t step) {
  return BuildIndexed(ranks, instances, IndexSteps(ranks), step);
}

CriticalPathSummary MeasureCriticalPaths(const std::vector<RankPathInput>& ranks, const InstanceIds& instances,
                                         const std::set<int64_t>& all_steps, size_t top,
                                         const std::vector<std::pair<std::string, double>>& faster,
                                         size_t most_steps, const std::vector<double>& bandwidth) {
  CriticalPathSummary summary;
  summary.steps_aggregated = static_cast<int64_t>(all_steps.size());
  // The steps whose events every rank that has them kept (PathStepsKept), then evenly spread:
  // the first, the last, and those between at equal strides.
  const StepIndexes indexes = IndexSteps(ranks);
  std::vector<int64_t> steps;
  for (int64_t step : all_steps) {
    bool kept_by_all = true;
    for (size_t r = 0; r < ranks.size() && kept_by_all; ++r) {
      if (ranks[r].events == nullptr || !StepIndexOf(indexes, r, step)) continue;
      const std::vector<int64_t>& kept = ranks[r].events->kept_steps;
      kept_by_all = kept.empty() || std::binary_search(kept.begin(), kept.end(), step);
    }
    if (kept_by_all) steps.push_back(step);
  }
  if (steps.empty() && !all_steps.empty()) {
    summary.notes.push_back("no step's events were kept by every rank (their steps are numbered apart)");
  }
  if (most_steps > 0 && steps.size() > most_steps) {
    std::vector<int64_t> chosen;
    for (size_t i = 0; i < most_steps; ++i) {
      const size_t at = most_steps == 1 ? 0 : i * (steps.size() - 1) / (most_steps - 1);
      if (chosen.empty() || chosen.back() != steps[at]) chosen.push_back(steps[at]);
    }
    steps = std::move(chosen);
  }
  using ContributionKey = std::tuple<PathCategory, int, std::string>;
  std::map<ContributionKey, int64_t> contributions;
  using WaitKey = std::tuple<int, int, std::string, std::string>;
  std::map<WaitKey, std::pair<int64_t, int64_t>> waits;  // ns, steps
  std::vector<std::string> labels;
  std::vector<std::vector<double>> projected, ratios;
  std::vector<double> measured, lengths;
  int64_t total_ns = 0;
  auto name_of = [](const StepGraph& g, int32_t id) {
    return id >= 0 && static_cast<size_t>(id) < g.names.size() ? g.names[static_cast<size_t>(id)] : std::string();
  };
  for (int64_t step : steps) {
    const StepGraph graph = BuildIndexed(ranks, instances, indexes, step);
    if (graph.nodes.empty()) continue;
    // Ranks whose windows of this step do not overlap on the aligned clock (clocks §4 could
    // not align, or steps numbered apart) give no one step to follow.
    int64_t longest = 0;
    int tail_rank = -1;  // the rank whose step ended last
    for (size_t r = 0; r < ranks.size(); ++r) {
      const std::optional<size_t> i = StepIndexOf(indexes, r, step);
      if (!i) continue;
      const StepRange& s = (*ranks[r].steps)[*i];
      longest = std::max(longest, s.end_ns - s.start_ns);
      if (s.end_ns + ranks[r].clock_offset_ns == graph.end_ns) tail_rank = ranks[r].rank;
    }
    if (graph.end_ns - graph.start_ns > 2 * longest) {
      if (summary.notes.size() < 5) {
        summary.notes.push_back(fmt::format("step {}: the ranks' windows span {} ns on the aligned clock, more than "
                                            "twice the longest one ({} ns); left out",
                                            step, graph.end_ns - graph.start_ns, longest));
      }
      continue;
    }
    Result<CriticalPath> path = FindCriticalPath(graph);
    if (!path.ok()) {
      summary.notes.push_back(fmt::format("step {}: {}", step, path.status().message()));
      continue;
    }
    ++summary.steps;
    const int64_t measured_ns = graph.end_ns - graph.start_ns;
    // The step's tail after its last event (the step range closing) is host time on the rank
    // whose step ended last.
    int64_t path_end = path->end_ns;
    if (graph.end_ns > path_end && !path->segments.empty()) {
      if (tail_rank < 0) tail_rank = path->segments.back().rank;
      contributions[{PathCategory::kHostGap, tail_rank, "(step end)"}] += graph.end_ns - path_end;
      path_end = graph.end_ns;
    }
    const int64_t length = path_end - path->start_ns;
    summary.max_mismatch_ns = std::max(summary.max_mismatch_ns, std::abs(length - measured_ns));
    measured.push_back(static_cast<double>(measured_ns));
    lengths.push_back(static_cast<double>(length));
    total_ns += length;
    StepPath drawn{step, graph.start_ns, graph.end_ns, {}};
    for (const PathSegment& s : path->segments) {
      contributions[{s.category, s.rank, name_of(graph, s.name)}] += s.end_ns - s.start_ns;
      const bool gap = s.category == PathCategory::kHostGap || s.category == PathCategory::kLaunchGap ||
                       s.category == PathCategory::kIdle;
      drawn.segments.push_back({s.rank, static_cast<uint32_t>(s.lane), !gap, s.start_ns, s.end_ns});
    }
    summary.paths.push_back(std::move(drawn));
    for (const CrossRankWait& w : path->waits) {
      auto& [ns, count] = waits[{w.waiting_rank, w.late_rank, name_of(graph, w.collective), name_of(graph, w.late_doing)}];
      ns += w.wait_ns;
      ++count;
    }
    // What-ifs: the default set, then the caller's.
    std::vector<WhatIf> changes = {RemoveStragglers(graph), OverlapCommunication(graph),
                                   FasterCommunication(graph, 2)};
    for (double factor : bandwidth) {
      if (factor != 2) changes.push_back(FasterCommunication(graph, factor));
    }
    for (const auto& [name_part, factor] : faster) {
      const std::string& text = name_part;  // a lambda cannot capture a structured binding before C++20's clang 16
      changes.push_back(FasterWork(graph, fmt::format("work named '{}' {:g}× faster", text, factor),
                                   [&text](const std::string& name) { return ContainsIgnoringCase(name, text); },
                                   factor));
    }
    for (size_t c = 0; c < changes.size(); ++c) {
      if (labels.size() <= c) {
        labels.push_back(changes[c].label);
        projected.emplace_back();
        ratios.emplace_back();
      }
      Result<int64_t> p = ProjectStepTime(graph, changes[c]);
      if (!p.ok()) continue;
      // The tail (after the last event) is kept as it was.
      const int64_t with_tail = *p + (graph.end_ns - path->end_ns > 0 ? graph.end_ns - path->end_ns : 0);
      projected[c].push_back(static_cast<double>(with_tail));
      ratios[c].push_back(measured_ns > 0 ? static_cast<double>(with_tail) / static_cast<double>(measured_ns) : 1.0);
    }
  }
  if (summary.steps == 0) return summary;
  summary.measured_step_ns = static_cast<int64_t>(Median(measured));
  summary.path_ns = static_cast<int64_t>(Median(lengths));
  const double steps_d = static_cast<double>(summary.steps);
  std::map<PathCategory, int64_t> per_category;
  for (const auto& [key, ns] : contributions) {
    const auto& [category, rank, name] = key;
    per_category[category] += ns;
    summary.top.push_back({PathCategoryName(category), rank, name, static_cast<int64_t>(static_cast<double>(ns) / steps_d),
                           total_ns > 0 ? static_cast<double>(ns) / static_cast<double>(total_ns) : 0});
  }
  std::stable_sort(summary.top.begin(), summary.top.end(),
                   [](const PathContribution& a, const PathContribution& b) { return a.ns_per_step > b.ns_per_step; });
  if (summary.top.size() > top) summary.top.resize(top);
  for (const auto& [category, ns] : per_category) {
    summary.categories.emplace_back(PathCategoryName(category),
                                    total_ns > 0 ? static_cast<double>(ns) / static_cast<double>(total_ns) : 0);
  }
  std::stable_sort(summary.categories.begin(), summary.categories.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  for (const auto& [key, value] : waits) {
    const auto& [waiting, late, collective, doing] = key;
    summary.waits.push_back({waiting, late, collective, doing, static_cast<int64_t>(static_cast<double>(value.first) / steps_d),
                             value.second});
  }
  std::stable_sort(summary.waits.begin(), summary.waits.end(),
                   [](const PathWaitSummary& a, const PathWaitSummary& b) { return a.ns_per_step > b.ns_per_step; });
  if (summary.waits.size() > top) summary.waits.resize(top);
  for (size_t c = 0; c < labels.size(); ++c) {
    if (projected[c].empty()) continue;
    summary.what_ifs.push_back({labels[c], static_cast<int64_t>(Median(projected[c])), 1.0 - Median(ratios[c])});
  }
  return summary;
}

}  // namespace rankscope::analyzer
