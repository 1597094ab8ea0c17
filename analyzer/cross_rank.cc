#include "analyzer/cross_rank.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <tuple>
#include <unordered_map>

#include "analyzer/cross_rank_stages.h"
#include "analyzer/intervals.h"
#include "analyzer/metrics.h"

namespace rankscope::analyzer {
namespace {

// The share of a step that others must wait on average for their wait to name a straggler:
// below it, who arrives last is noise.
constexpr double kStragglerMinWaitShare = 0.05;
// Aggregated steps a straggler verdict needs: with one, "last in 1 of 1" flags whoever was
// last, however close (docs/metrics.md, Stragglers).
constexpr int64_t kStragglerMinSteps = 2;

template <typename T>
double Median(std::vector<T> values) {
  return ComputeStats(std::vector<double>(values.begin(), values.end())).median;
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

std::optional<size_t> StepIndexAt(const std::vector<StepRange>& steps, int64_t t) {
  auto it = std::upper_bound(steps.begin(), steps.end(), t,
                             [](int64_t time, const StepRange& step) { return time < step.start_ns; });
  if (it == steps.begin()) return std::nullopt;
  --it;
  if (t >= it->end_ns) return std::nullopt;
  return static_cast<size_t>(it - steps.begin());
}

CollectiveMatch MatchCollectives(const std::vector<RankCollectives>& ranks) {
  CollectiveMatch match;
  // The weakest source any rank has names the whole match.
  std::set<CollectiveSource> sources;
  for (const RankCollectives& rank : ranks) {
    if (!rank.records->empty()) sources.insert(rank.source);
  }
  if (sources.size() > 1) {
    match.warnings.push_back("ranks recorded collectives differently (" +
                             fmt::format("{}", fmt::join([&] {
                               std::vector<std::string> names;
                               for (CollectiveSource s : sources) names.push_back(CollectiveSourceName(s));
                               return names;
                             }(), ", ")) + "); matching by name and order");
  }
  const bool by_plugin_ids = sources.size() == 1 && (*sources.begin() == CollectiveSource::kPlugin ||
                                                     *sources.begin() == CollectiveSource::kHook);
  match.collective_source =
      sources.size() == 1 ? CollectiveSourceName(*sources.begin()) : sources.empty() ? "" : "mixed";

  // Group by identity: (communicator, sequence) with plugin ids, else (kind, n-th). Kinds
  // get run-wide numbers, so that the identity is two integers.
  std::map<std::string, uint64_t> kind_ids;
  struct Entry {
    uint64_t group = 0;     // communicator hash, or kind id
    uint64_t sequence = 0;
    size_t rank_index = 0;
    const CollectiveRecord* record = nullptr;
  };
  const auto by_identity = [](const Entry& a, const Entry& b) {
    return std::tie(a.group, a.sequence, a.rank_index) < std::tie(b.group, b.sequence, b.rank_index);
  };
  std::vector<Entry> entries;
  size_t total_records = 0;
  for (const RankCollectives& rank : ranks) total_records += rank.records->size();
  entries.reserve(total_records);
  // One run of entries per rank, in identity order. A rank's records come sorted by start,
  // which is already identity order when its sequence numbers rise with time (the usual
  // case): then the runs are only merged, not sorted again. Stable throughout, so that of
  // a repeated id on one rank the earliest record is kept.
  std::vector<size_t> run_ends;
  for (size_t r = 0; r < ranks.size(); ++r) {
    std::vector<uint64_t> kind_id;
    for (const std::string& kind : *ranks[r].kinds) {
      kind_id.push_back(kind_ids.try_emplace(kind, kind_ids.size()).first->second);
    }
    const auto run_start = static_cast<ptrdiff_t>(entries.size());
    for (const CollectiveRecord& record : *ranks[r].records) {
      entries.push_back({by_plugin_ids ? record.comm_hash : kind_id[record.kind], record.sequence, r, &record});
    }
    if (!std::is_sorted(entries.begin() + run_start, entries.end(), by_identity)) {
      std::stable_sort(entries.begin() + run_start, entries.end(), by_identity);
    }
    run_ends.push_back(entries.size());
  }
  // Merges neighbouring runs pairwise until one is left (no two runs share a rank, so no
  // two entries of different runs compare equal).
  std::vector<Entry> merged(entries.size());
  while (run_ends.size() > 1) {
    std::vector<size_t> next_ends;
    size_t start = 0;
    for (size_t i = 0; i < run_ends.size(); i += 2) {
      const size_t middle = run_ends[i];
      const size_t end = i + 1 < run_ends.size() ? run_ends[i + 1] : middle;
      std::merge(entries.begin() + static_cast<ptrdiff_t>(start), entries.begin() + static_cast<ptrdiff_t>(middle),
                 entries.begin() + static_cast<ptrdiff_t>(middle), entries.begin() + static_cast<ptrdiff_t>(end),
                 merged.begin() + static_cast<ptrdiff_t>(start), by_identity);
      next_ends.push_back(end);
      start = end;
    }
    entries.swap(merged);
    run_ends = std::move(next_ends);
  }
  std::vector<Entry>().swap(merged);
  // Which ranks take part in a communicator: those that recorded any of its collectives
  // (without plugin ids, every rank that recorded any collective).
  std::map<uint64_t, std::set<size_t>> members;
  for (const Entry& entry : entries) members[by_plugin_ids ? entry.group : 0].insert(entry.rank_index);
  for (size_t i = 0; i < entries.size();) {
    size_t end = i;
    while (end < entries.size() && entries[end].group == entries[i].group &&
           entries[end].sequence == entries[i].sequence) {
      ++end;
    }
    CollectiveInstance instance;
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
        match.matched.push_back(std::move(instance));
      } else {
        ++match.unmatched;
      }
    }
    i = end;
  }
  if (match.unmatched > 0) {
    match.warnings.push_back(fmt::format("{} collective(s) were not seen on every rank of their communicator "
                                         "and are left out of wait and bandwidth figures", match.unmatched));
  }
  return match;
}

HostClocks AlignHostClocks(const std::vector<RankCollectives>& ranks, const std::vector<CollectiveInstance>& matched) {
  HostClocks clocks;
  ClockAlignment& clock = clocks.clock;
  // Hosts in order of their lowest rank; the first is the reference.
  std::vector<std::string> hosts;
  clocks.host_of.resize(ranks.size());
  for (size_t r = 0; r < ranks.size(); ++r) {
    auto it = std::find(hosts.begin(), hosts.end(), ranks[r].host);
    if (it == hosts.end()) it = hosts.insert(hosts.end(), ranks[r].host);
    clocks.host_of[r] = static_cast<size_t>(it - hosts.begin());
  }
  for (size_t h = 0; h < hosts.size(); ++h) {
    HostClock host;
    host.host = hosts[h];
    for (size_t r = 0; r < ranks.size(); ++r) {
      if (clocks.host_of[r] == h) host.ranks.push_back(ranks[r].rank);
    }
    if (h > 0) {
      // Per instance with ranks on both hosts: median reference end - median end on h.
      std::vector<double> differences;
      for (const CollectiveInstance& instance : matched) {
        std::vector<int64_t> reference_ends, host_ends;
        for (const CollectiveArrival& a : instance.arrivals) {
          if (clocks.host_of[a.rank_index] == 0) reference_ends.push_back(a.record->end_ns);
          if (clocks.host_of[a.rank_index] == h) host_ends.push_back(a.record->end_ns);
        }
        if (reference_ends.empty() || host_ends.empty()) continue;
        differences.push_back(Median(reference_ends) - Median(host_ends));
      }
      host.collectives_used = static_cast<int64_t>(differences.size());
      if (differences.empty()) {
        clocks.warnings.push_back(fmt::format("host '{}' shares no matched collective with host '{}': its clock "
                                              "is not aligned", hosts[h], hosts[0]));
      } else {
        host.offset_ns = std::llround(Median(differences));
      }
      clock.applied = clock.applied || host.offset_ns != 0;
    }
    clock.hosts.push_back(std::move(host));
  }
  // The residual: the spread of each matched instance's aligned end times.
  std::vector<double> residuals;
  for (const CollectiveInstance& instance : matched) {
    int64_t first_end = INT64_MAX, last_end = INT64_MIN;
    for (const CollectiveArrival& a : instance.arrivals) {
      const int64_t end = clocks.Aligned(a.rank_index, a.record->end_ns);
      first_end = std::min(first_end, end);
      last_end = std::max(last_end, end);
    }
    residuals.push_back(static_cast<double>(last_end - first_end));
  }
  if (!residuals.empty()) clock.residual_ns = ComputeStats(residuals);
  return clocks;
}

WaitAttribution AttributeWaits(const std::vector<RankCollectives>& ranks,
                               const std::vector<CollectiveInstance>& matched, const HostClocks& clocks) {
  WaitAttribution out;
  out.step_wait_ns.resize(ranks.size());
  for (size_t r = 0; r < ranks.size(); ++r) {
    out.step_wait_ns[r].assign(ranks[r].steps->size(), 0);
    out.waits.push_back(RankWait{ranks[r].rank});
  }
  for (const CollectiveInstance& instance : matched) {
    InstanceWait result;
    int64_t last_start = INT64_MIN;
    const CollectiveArrival* last = &instance.arrivals.front();
    for (const CollectiveArrival& a : instance.arrivals) {
      const int64_t start = clocks.Aligned(a.rank_index, a.record->start_ns);
      if (start > last_start) {
        last_start = start;
        last = &a;
      }
    }
    std::vector<int64_t> transfers;
    for (const CollectiveArrival& a : instance.arrivals) {
      const int64_t start = clocks.Aligned(a.rank_index, a.record->start_ns);
      const int64_t wait = std::max<int64_t>(0, last_start - start);
      const int64_t transfer =
          std::max<int64_t>(0, clocks.Aligned(a.rank_index, a.record->end_ns) - std::max(start, last_start));
      transfers.push_back(transfer);
      RankWait& rank_wait = out.waits[a.rank_index];
      rank_wait.wait_ns += wait;
      rank_wait.transfer_ns += transfer;
      result.wait_ns += wait;
      // A wait belongs to the rank's own step that holds its own, unaligned start.
      if (std::optional<size_t> step = StepIndexAt(*ranks[a.rank_index].steps, a.record->start_ns)) {
        out.step_wait_ns[a.rank_index][*step] += wait;
      }
    }
    result.last_rank_index = last->rank_index;
    result.median_transfer_ns = std::llround(Median(transfers));
    for (int64_t transfer : transfers) result.transfer_ns += transfer;
    RankWait& last_rank = out.waits[last->rank_index];
    ++last_rank.times_last;
    last_rank.wait_caused_ns += result.wait_ns;
    // The instance's step: the last arrival's step window that holds its start.
    const std::vector<StepRange>& last_steps = *ranks[last->rank_index].steps;
    if (std::optional<size_t> step = StepIndexAt(last_steps, last->record->start_ns)) {
      std::vector<int64_t>& caused_in_step = out.caused_by_step[last_steps[*step].number];
      caused_in_step.resize(ranks.size(), 0);
      caused_in_step[last->rank_index] += result.wait_ns;
    }
    out.instances.push_back(result);
  }
  return out;
}

std::vector<CollectiveKindSummary> SummarizeKinds(const std::vector<RankCollectives>& ranks,
                                                  const std::vector<CollectiveInstance>& matched,
                                                  const std::vector<InstanceWait>& waits) {
  std::map<std::string, std::vector<size_t>> by_kind;  // kind -> instance indexes
  for (size_t i = 0; i < matched.size(); ++i) by_kind[matched[i].kind].push_back(i);
  std::vector<CollectiveKindSummary> kinds;
  for (const auto& [kind, list] : by_kind) {
    CollectiveKindSummary summary;
    summary.kind = kind;
    const trace::CollectiveOp op = matched[list.front()].arrivals.front().record->op;
    summary.op = CollectiveOpName(op);
    std::vector<double> busbw;
    // The end-aligned split, per rank index: its records, and the last d_min of each.
    std::vector<std::vector<Interval>> records(ranks.size()), transfers(ranks.size());
    for (size_t i : list) {
      const CollectiveInstance& instance = matched[i];
      uint64_t bytes = 0;
      bool per_rank_bytes = false;
      int comm_size = 0;
      int64_t shortest = INT64_MAX;
      for (const CollectiveArrival& a : instance.arrivals) {
        bytes = std::max(bytes, a.record->bytes);
        per_rank_bytes = per_rank_bytes || a.record->per_rank_bytes;
        comm_size = std::max(comm_size, a.record->comm_size);
        shortest = std::min(shortest, a.record->end_ns - a.record->start_ns);
      }
      for (const CollectiveArrival& a : instance.arrivals) {
        records[a.rank_index].push_back({a.record->start_ns, a.record->end_ns});
        transfers[a.rank_index].push_back({a.record->end_ns - shortest, a.record->end_ns});
      }
      const int participants = comm_size > 0 ? comm_size : static_cast<int>(instance.arrivals.size());
      // nccl-tests' size: an all-gather's output, a reduce-scatter's input.
      if (per_rank_bytes) bytes *= static_cast<uint64_t>(participants);
      ++summary.count;
      summary.total_bytes += bytes;
      summary.wait_ns += waits[i].wait_ns;
      summary.transfer_ns += waits[i].transfer_ns;
      const int64_t transfer = waits[i].median_transfer_ns;
      // bytes per nanosecond is 1e9 bytes per second: GB/s.
      if (bytes > 0 && transfer > 0) {
        busbw.push_back(static_cast<double>(bytes) / static_cast<double>(transfer) *
                        BusBandwidthFactor(op, participants));
      }
    }
    if (!busbw.empty()) summary.busbw_gbps = ComputeStats(std::move(busbw));
    for (size_t r = 0; r < ranks.size(); ++r) {
      if (records[r].empty()) continue;
      CollectiveKindOnRank on_rank;
      on_rank.rank = ranks[r].rank;
      on_rank.time_ns = IntervalSet::FromUnsorted(std::move(records[r])).Length();
      on_rank.end_aligned_transfer_ns = IntervalSet::FromUnsorted(std::move(transfers[r])).Length();
      on_rank.end_aligned_wait_ns = on_rank.time_ns - on_rank.end_aligned_transfer_ns;
      summary.per_rank.push_back(on_rank);
    }
    kinds.push_back(std::move(summary));
  }
  std::sort(kinds.begin(), kinds.end(), [](const CollectiveKindSummary& a, const CollectiveKindSummary& b) {
    return a.wait_ns + a.transfer_ns > b.wait_ns + b.transfer_ns;
  });
  return kinds;
}

StepRows BuildStepRows(const std::vector<RankCollectives>& ranks, const WaitAttribution& waits,
                       const std::set<int64_t>& aggregated_steps, const std::map<int64_t, double>& median_step_ns) {
  StepRows out;
  out.steps_most_wait.assign(ranks.size(), 0);
  std::set<int64_t> numbers;
  for (const RankCollectives& rank : ranks) {
    for (const StepRange& step : *rank.steps) numbers.insert(step.number);
  }
  std::vector<std::unordered_map<int64_t, int64_t>> wait_by_number(ranks.size());
  for (size_t r = 0; r < ranks.size(); ++r) {
    const std::vector<StepRange>& steps = *ranks[r].steps;
    for (size_t i = 0; i < steps.size(); ++i) wait_by_number[r][steps[i].number] += waits.step_wait_ns[r][i];
  }
  for (int64_t number : numbers) {
    StepWait row;
    row.step = number;
    row.aggregated = aggregated_steps.contains(number);
    row.wait_ns.assign(ranks.size(), 0);
    for (size_t r = 0; r < ranks.size(); ++r) {
      const auto found = wait_by_number[r].find(number);
      if (found != wait_by_number[r].end()) row.wait_ns[r] = found->second;
    }
    const auto caused = waits.caused_by_step.find(number);
    const auto median = median_step_ns.find(number);
    if (caused != waits.caused_by_step.end() && median != median_step_ns.end() && ranks.size() >= 2) {
      const auto most = std::max_element(caused->second.begin(), caused->second.end());
      const double average_wait = static_cast<double>(*most) / static_cast<double>(ranks.size() - 1);
      if (*most > 0 && average_wait >= kStragglerMinWaitShare * median->second) {
        const auto index = static_cast<size_t>(most - caused->second.begin());
        row.last_rank = ranks[index].rank;
        if (row.aggregated) ++out.steps_most_wait[index];
      }
    }
    out.rows.push_back(std::move(row));
  }
  return out;
}

std::vector<int> MarkStragglers(size_t aggregated_steps, std::vector<RankWait>& waits) {
  std::vector<int> stragglers;
  const auto steps = static_cast<int64_t>(aggregated_steps);
  for (RankWait& wait : waits) {
    wait.straggler = steps >= kStragglerMinSteps && 2 * wait.steps_most_wait >= steps;
    if (wait.straggler) stragglers.push_back(wait.rank);
  }
  return stragglers;
}

CrossRankResult AnalyzeCrossRank(const std::vector<RankCollectives>& ranks, const std::set<int64_t>& aggregated_steps,
                                 const std::map<int64_t, double>& median_step_ns) {
  CrossRankResult result;
  CrossRank& out = result.cross_rank;
  for (const RankCollectives& rank : ranks) out.ranks.push_back(rank.rank);

  CollectiveMatch match = MatchCollectives(ranks);
  out.collective_source = std::move(match.collective_source);
  out.matched = static_cast<int64_t>(match.matched.size());
  out.unmatched = match.unmatched;
  result.warnings = std::move(match.warnings);

  HostClocks clocks = AlignHostClocks(ranks, match.matched);
  result.warnings.insert(result.warnings.end(), clocks.warnings.begin(), clocks.warnings.end());

  WaitAttribution waits = AttributeWaits(ranks, match.matched, clocks);
  out.kinds = SummarizeKinds(ranks, match.matched, waits.instances);
  // The heatmap exists only when some instance matched.
  if (!match.matched.empty()) {
    StepRows steps = BuildStepRows(ranks, waits, aggregated_steps, median_step_ns);
    out.steps = std::move(steps.rows);
    for (size_t r = 0; r < ranks.size(); ++r) waits.waits[r].steps_most_wait = steps.steps_most_wait[r];
  }
  out.stragglers = MarkStragglers(aggregated_steps.size(), waits.waits);
  out.clock = std::move(clocks.clock);
  out.waits = std::move(waits.waits);
  result.step_wait_ns = std::move(waits.step_wait_ns);
  return result;
}

}  // namespace rankscope::analyzer
