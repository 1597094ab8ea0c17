#include "analyzer/cross_rank.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <tuple>
#include <unordered_map>

#include "analyzer/metrics.h"

namespace rankscope::analyzer {
namespace {

// The share of a step that others must wait on average for their wait to name a straggler:
// below it, who arrives last is noise.
constexpr double kStragglerMinWaitShare = 0.05;

struct Arrival {
  size_t rank_index = 0;
  const CollectiveRecord* record = nullptr;
};

// One collective as seen by every rank that took part.
struct Instance {
  std::string kind;
  std::vector<Arrival> arrivals;  // by rank index
  int64_t median_transfer_ns = 0;
  int64_t wait_ns = 0;            // summed over ranks
  int64_t transfer_ns = 0;        // summed over ranks
};

template <typename T>
double Median(std::vector<T> values) {
  return ComputeStats(std::vector<double>(values.begin(), values.end())).median;
}

// The index of the step whose window holds `t`, or nullopt.
std::optional<size_t> StepAt(const std::vector<StepRange>& steps, int64_t t) {
  auto it = std::upper_bound(steps.begin(), steps.end(), t,
                             [](int64_t time, const StepRange& step) { return time < step.start_ns; });
  if (it == steps.begin()) return std::nullopt;
  --it;
  if (t >= it->end_ns) return std::nullopt;
  return static_cast<size_t>(it - steps.begin());
}

}  // namespace

double BusBandwidthFactor(trace::CollectiveOp op, int ranks) {
  using trace::CollectiveOp;
  if (ranks <= 0) return 1.0;
  const double n = ranks;
  switch (op) {
    case CollectiveOp::kAllReduce: return 2.0 * (n - 1) / n;
    case CollectiveOp::kAllGather:
    case CollectiveOp::kReduceScatter:
    case CollectiveOp::kAllToAll: return (n - 1) / n;
    default: return 1.0;
  }
}

CrossRankResult AnalyzeCrossRank(const std::vector<RankCollectives>& ranks, const std::set<int64_t>& aggregated_steps,
                                 const std::map<int64_t, double>& median_step_ns) {
  CrossRankResult result;
  CrossRank& out = result.cross_rank;
  result.step_wait_ns.resize(ranks.size());
  for (size_t r = 0; r < ranks.size(); ++r) {
    result.step_wait_ns[r].assign(ranks[r].steps->size(), 0);
    out.ranks.push_back(ranks[r].rank);
    out.waits.push_back(RankWait{ranks[r].rank});
  }

  // The weakest source any rank has names the whole match.
  std::set<CollectiveSource> sources;
  for (const RankCollectives& rank : ranks) {
    if (!rank.records->empty()) sources.insert(rank.source);
  }
  if (sources.size() > 1) {
    result.warnings.push_back("ranks recorded collectives differently (" +
                              fmt::format("{}", fmt::join([&] {
                                std::vector<std::string> names;
                                for (CollectiveSource s : sources) names.push_back(CollectiveSourceName(s));
                                return names;
                              }(), ", ")) + "); matching by name and order");
  }
  const bool by_plugin_ids = sources.size() == 1 && *sources.begin() == CollectiveSource::kPlugin;
  out.collective_source = sources.size() == 1 ? CollectiveSourceName(*sources.begin()) : sources.empty() ? "" : "mixed";

  // Group by identity: (communicator, sequence) with plugin ids, else (kind, n-th). Kinds
  // get run-wide numbers, so that the identity is two integers.
  std::map<std::string, uint64_t> kind_ids;
  struct Entry {
    uint64_t group = 0;     // communicator hash, or kind id
    uint64_t sequence = 0;
    size_t rank_index = 0;
    const CollectiveRecord* record = nullptr;
  };
  std::vector<Entry> entries;
  size_t total_records = 0;
  for (const RankCollectives& rank : ranks) total_records += rank.records->size();
  entries.reserve(total_records);
  for (size_t r = 0; r < ranks.size(); ++r) {
    std::vector<uint64_t> kind_id;
    for (const std::string& kind : *ranks[r].kinds) {
      kind_id.push_back(kind_ids.try_emplace(kind, kind_ids.size()).first->second);
    }
    for (const CollectiveRecord& record : *ranks[r].records) {
      entries.push_back({by_plugin_ids ? record.comm_hash : kind_id[record.kind], record.sequence, r, &record});
    }
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.group, a.sequence, a.rank_index) < std::tie(b.group, b.sequence, b.rank_index);
  });
  // Which ranks take part in a communicator: those that recorded any of its collectives
  // (without plugin ids, every rank that recorded any collective).
  std::map<uint64_t, std::set<size_t>> members;
  for (const Entry& entry : entries) members[by_plugin_ids ? entry.group : 0].insert(entry.rank_index);
  std::vector<Instance> instances;
  for (size_t i = 0; i < entries.size();) {
    size_t end = i;
    while (end < entries.size() && entries[end].group == entries[i].group &&
           entries[end].sequence == entries[i].sequence) {
      ++end;
    }
    Instance instance;
    const CollectiveRecord& first = *entries[i].record;
    const std::vector<std::string>& first_kinds = *ranks[entries[i].rank_index].kinds;
    instance.kind = first_kinds[first.kind];
    for (size_t k = i; k < end; ++k) {
      // A repeated id on one rank: keep the first.
      if (k > i && entries[k].rank_index == entries[k - 1].rank_index) continue;
      instance.arrivals.push_back({entries[k].rank_index, entries[k].record});
    }
    const size_t expected = members[by_plugin_ids ? entries[i].group : 0].size();
    // A communicator seen on one rank only (a single rank file) has nothing to match.
    if (expected >= 2) {
      if (instance.arrivals.size() == expected) {
        instances.push_back(std::move(instance));
      } else {
        ++out.unmatched;
      }
    }
    i = end;
  }
  std::vector<Instance*> matched;
  for (Instance& instance : instances) matched.push_back(&instance);
  out.matched = static_cast<int64_t>(matched.size());
  if (out.unmatched > 0) {
    result.warnings.push_back(fmt::format("{} collective(s) were not seen on every rank of their communicator "
                                          "and are left out of wait and bandwidth figures", out.unmatched));
  }

  // Clock alignment: hosts in order of their lowest rank; the first is the reference.
  std::vector<std::string> hosts;
  std::vector<size_t> host_of(ranks.size());
  for (size_t r = 0; r < ranks.size(); ++r) {
    auto it = std::find(hosts.begin(), hosts.end(), ranks[r].host);
    if (it == hosts.end()) it = hosts.insert(hosts.end(), ranks[r].host);
    host_of[r] = static_cast<size_t>(it - hosts.begin());
  }
  std::vector<int64_t> offset(hosts.size(), 0);
  for (size_t h = 0; h < hosts.size(); ++h) {
    HostClock clock;
    clock.host = hosts[h];
    for (size_t r = 0; r < ranks.size(); ++r) {
      if (host_of[r] == h) clock.ranks.push_back(ranks[r].rank);
    }
    if (h > 0) {
      std::vector<double> differences;
      for (const Instance* instance : matched) {
        std::vector<int64_t> reference_ends, host_ends;
        for (const Arrival& a : instance->arrivals) {
          if (host_of[a.rank_index] == 0) reference_ends.push_back(a.record->end_ns);
          if (host_of[a.rank_index] == h) host_ends.push_back(a.record->end_ns);
        }
        if (reference_ends.empty() || host_ends.empty()) continue;
        differences.push_back(Median(reference_ends) - Median(host_ends));
      }
      clock.collectives_used = static_cast<int64_t>(differences.size());
      if (differences.empty()) {
        result.warnings.push_back(fmt::format("host '{}' shares no matched collective with host '{}': its clock "
                                              "is not aligned", hosts[h], hosts[0]));
      } else {
        offset[h] = std::llround(Median(differences));
      }
      clock.offset_ns = offset[h];
      out.clock.applied = out.clock.applied || offset[h] != 0;
    }
    out.clock.hosts.push_back(std::move(clock));
  }

  // Wait and transfer per instance, on aligned clocks.
  std::map<int64_t, std::vector<int64_t>> caused_by_step;  // step -> wait caused, per rank index
  std::map<std::string, std::vector<const Instance*>> by_kind;
  std::vector<double> residuals;
  for (Instance* instance : matched) {
    by_kind[instance->kind].push_back(instance);
    auto aligned = [&](const Arrival& a, int64_t t) { return t + offset[host_of[a.rank_index]]; };
    int64_t last_start = INT64_MIN, first_end = INT64_MAX, last_end = INT64_MIN;
    const Arrival* last = nullptr;
    for (const Arrival& a : instance->arrivals) {
      const int64_t start = aligned(a, a.record->start_ns);
      if (start > last_start) {
        last_start = start;
        last = &a;
      }
      first_end = std::min(first_end, aligned(a, a.record->end_ns));
      last_end = std::max(last_end, aligned(a, a.record->end_ns));
    }
    residuals.push_back(static_cast<double>(last_end - first_end));
    int64_t caused = 0;
    std::vector<int64_t> transfers;
    for (const Arrival& a : instance->arrivals) {
      const int64_t start = aligned(a, a.record->start_ns);
      const int64_t wait = std::max<int64_t>(0, last_start - start);
      const int64_t transfer = std::max<int64_t>(0, aligned(a, a.record->end_ns) - std::max(start, last_start));
      transfers.push_back(transfer);
      RankWait& rank_wait = out.waits[a.rank_index];
      rank_wait.wait_ns += wait;
      rank_wait.transfer_ns += transfer;
      caused += wait;
      if (std::optional<size_t> step = StepAt(*ranks[a.rank_index].steps, a.record->start_ns)) {
        result.step_wait_ns[a.rank_index][*step] += wait;
      }
    }
    instance->median_transfer_ns = std::llround(Median(transfers));
    instance->wait_ns = caused;
    for (int64_t transfer : transfers) instance->transfer_ns += transfer;
    RankWait& last_rank = out.waits[last->rank_index];
    ++last_rank.times_last;
    last_rank.wait_caused_ns += caused;
    // The instance's step: the last arrival's step window that holds its start.
    if (std::optional<size_t> step = StepAt(*ranks[last->rank_index].steps, last->record->start_ns)) {
      const int64_t number = (*ranks[last->rank_index].steps)[*step].number;
      std::vector<int64_t>& caused_in_step = caused_by_step[number];
      caused_in_step.resize(ranks.size(), 0);
      caused_in_step[last->rank_index] += caused;
    }
  }
  if (!residuals.empty()) out.clock.residual_ns = ComputeStats(residuals);

  // Collectives by kind, with nccl-tests' bus bandwidth.
  for (const auto& [kind, list] : by_kind) {
    CollectiveKindSummary summary;
    summary.kind = kind;
    trace::CollectiveOp op = list.front()->arrivals.front().record->op;
    summary.op = CollectiveOpName(op);
    std::vector<double> busbw;
    for (const Instance* instance : list) {
      uint64_t bytes = 0;
      int comm_size = 0;
      for (const Arrival& a : instance->arrivals) {
        bytes = std::max(bytes, a.record->bytes);
        comm_size = std::max(comm_size, a.record->comm_size);
      }
      const int participants = comm_size > 0 ? comm_size : static_cast<int>(instance->arrivals.size());
      ++summary.count;
      summary.total_bytes += bytes;
      summary.wait_ns += instance->wait_ns;
      summary.transfer_ns += instance->transfer_ns;
      const int64_t transfer = instance->median_transfer_ns;
      // bytes per nanosecond is 1e9 bytes per second: GB/s.
      if (bytes > 0 && transfer > 0) {
        busbw.push_back(static_cast<double>(bytes) / static_cast<double>(transfer) *
                        BusBandwidthFactor(op, participants));
      }
    }
    if (!busbw.empty()) summary.busbw_gbps = ComputeStats(std::move(busbw));
    out.kinds.push_back(std::move(summary));
  }
  std::sort(out.kinds.begin(), out.kinds.end(), [](const CollectiveKindSummary& a, const CollectiveKindSummary& b) {
    return a.wait_ns + a.transfer_ns > b.wait_ns + b.transfer_ns;
  });

  // Per-step heatmap rows, over every step number any rank has.
  std::set<int64_t> numbers;
  for (const RankCollectives& rank : ranks) {
    for (const StepRange& step : *rank.steps) numbers.insert(step.number);
  }
  std::vector<std::unordered_map<int64_t, int64_t>> wait_by_number(ranks.size());
  for (size_t r = 0; r < ranks.size(); ++r) {
    const std::vector<StepRange>& steps = *ranks[r].steps;
    for (size_t i = 0; i < steps.size(); ++i) wait_by_number[r][steps[i].number] += result.step_wait_ns[r][i];
  }
  if (!matched.empty()) {
    for (int64_t number : numbers) {
      StepWait row;
      row.step = number;
      row.aggregated = aggregated_steps.contains(number);
      row.wait_ns.assign(ranks.size(), 0);
      for (size_t r = 0; r < ranks.size(); ++r) {
        const auto found = wait_by_number[r].find(number);
        if (found != wait_by_number[r].end()) row.wait_ns[r] = found->second;
      }
      auto caused = caused_by_step.find(number);
      const auto median = median_step_ns.find(number);
      if (caused != caused_by_step.end() && median != median_step_ns.end() && ranks.size() >= 2) {
        const auto most = std::max_element(caused->second.begin(), caused->second.end());
        const double average_wait = static_cast<double>(*most) / static_cast<double>(ranks.size() - 1);
        if (*most > 0 && average_wait >= kStragglerMinWaitShare * median->second) {
          const auto index = static_cast<size_t>(most - caused->second.begin());
          row.last_rank = ranks[index].rank;
          if (aggregated_steps.contains(number)) ++out.waits[index].steps_most_wait;
        }
      }
      out.steps.push_back(std::move(row));
    }
  }
  const auto steps = static_cast<int64_t>(aggregated_steps.size());
  for (RankWait& wait : out.waits) {
    wait.straggler = steps > 0 && 2 * wait.steps_most_wait >= steps;
    if (wait.straggler) out.stragglers.push_back(wait.rank);
  }
  return result;
}

}  // namespace rankscope::analyzer
