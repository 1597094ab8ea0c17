#include "analyzer/parallelism.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <tuple>

#include "analyzer/metrics.h"
#include "base/format.h"

namespace rankscope::analyzer {
namespace {

using format::FormatDuration;
using format::FormatPercent;
using trace::CollectiveOp;

double Median(std::vector<double> values) { return values.empty() ? 0.0 : ComputeStats(std::move(values)).median; }

int64_t MedianNs(const std::vector<double>& values) { return static_cast<int64_t>(std::llround(Median(values))); }

// ---- strategy ---------------------------------------------------------------------------

void ChooseStrategy(const std::vector<RankParallelInput>& ranks, Parallelism& out) {
  for (const RankParallelInput& rank : ranks) {
    const std::optional<WorkloadMark>& mark = rank.activity->workload;
    if (!mark || !mark->parallel) continue;
    static constexpr const char* kNames[] = {"ddp", "fsdp", "pipeline"};
    if (*mark->parallel >= 0 && *mark->parallel < 3) {
      out.strategy = kNames[*mark->parallel];
      out.strategy_source = "workload mark";
      return;
    }
  }
  bool passes = false, gathers = false, scatters = false, reduces = false;
  for (const RankParallelInput& rank : ranks) {
    passes = passes || !rank.activity->passes.empty();
    for (const CollectiveRecord& record : rank.activity->collectives) {
      gathers = gathers || record.op == CollectiveOp::kAllGather;
      scatters = scatters || record.op == CollectiveOp::kReduceScatter;
      reduces = reduces || record.op == CollectiveOp::kAllReduce;
    }
  }
  if (passes) {
    out.strategy = "pipeline";
  } else if (gathers && scatters) {
    out.strategy = "fsdp";
  } else if (reduces) {
    out.strategy = "ddp";
  } else {
    return;
  }
  out.strategy_source = passes ? "pipeline passes" : "collectives";
}

// ---- point to point ----------------------------------------------------------------------

// Per rank index, on its own clock: where it waited in a message for the other side to
// arrive, and where the message then moved.
struct MessageTime {
  std::vector<Interval> waiting;
  std::vector<Interval> moving;
};

struct MessageMatch {
  PointToPoint figures;
  std::vector<MessageTime> per_rank;
  std::vector<std::pair<size_t, size_t>> links;  // rank indexes that exchanged messages
};

MessageMatch MatchMessages(const std::vector<RankParallelInput>& ranks) {
  MessageMatch out;
  out.per_rank.resize(ranks.size());
  // (communicator, sender, receiver, n-th message from sender to receiver): each side
  // counts its own messages in start order, and messages between two ranks arrive in the
  // order they were sent.
  using Key = std::tuple<uint64_t, int32_t, int32_t, uint64_t>;
  struct Sides {
    std::optional<std::pair<size_t, const MessageRecord*>> send, recv;
  };
  std::map<Key, Sides> by_key;
  std::map<std::pair<uint64_t, int32_t>, int> rank_of;  // (communicator, its rank) → rank
  for (size_t i = 0; i < ranks.size(); ++i) {
    std::map<std::tuple<uint64_t, int32_t, bool>, uint64_t> next;
    for (const MessageRecord& message : ranks[i].activity->messages) {
      rank_of.try_emplace({message.comm_hash, message.comm_rank}, ranks[i].rank);
      const uint64_t n = next[{message.comm_hash, message.peer, message.send}]++;
      Sides& sides = message.send ? by_key[{message.comm_hash, message.comm_rank, message.peer, n}]
                                  : by_key[{message.comm_hash, message.peer, message.comm_rank, n}];
      (message.send ? sides.send : sides.recv) = std::make_pair(i, &message);
    }
  }
  std::map<std::pair<int, int>, std::pair<MessageRoute, std::vector<double>>> routes;
  for (const auto& [key, sides] : by_key) {
    if (!sides.send || !sides.recv) {
      ++out.figures.unmatched;
      continue;
    }
    ++out.figures.matched;
    const auto [sender, send] = *sides.send;
    const auto [receiver, recv] = *sides.recv;
    // On the reference clock.
    const int64_t send_start = send->start_ns + ranks[sender].clock_offset_ns;
    const int64_t recv_start = recv->start_ns + ranks[receiver].clock_offset_ns;
    const int64_t recv_end = recv->end_ns + ranks[receiver].clock_offset_ns;
    const int64_t both = std::max(send_start, recv_start);
    auto& [route, bandwidths] = routes[{ranks[sender].rank, ranks[receiver].rank}];
    route.from_rank = ranks[sender].rank;
    route.to_rank = ranks[receiver].rank;
    ++route.count;
    route.total_bytes += std::max(send->bytes, recv->bytes);
    route.receiver_wait_ns += std::max<int64_t>(0, send_start - recv_start);
    route.sender_wait_ns += std::max<int64_t>(0, recv_start - send_start);
    const int64_t transfer = std::max<int64_t>(0, recv_end - both);
    route.transfer_ns += transfer;
    const uint64_t bytes = std::max(send->bytes, recv->bytes);
    if (bytes > 0 && transfer > 0) bandwidths.push_back(static_cast<double>(bytes) / static_cast<double>(transfer));
    // Each side's own clock: it waited until the other side arrived, then the data moved.
    const auto local = [&](size_t index, int64_t t) { return t - ranks[index].clock_offset_ns; };
    out.per_rank[receiver].waiting.push_back({recv->start_ns, std::max(recv->start_ns, local(receiver, both))});
    out.per_rank[receiver].moving.push_back({std::max(recv->start_ns, local(receiver, both)), recv->end_ns});
    out.per_rank[sender].waiting.push_back({send->start_ns, std::max(send->start_ns, local(sender, both))});
    out.per_rank[sender].moving.push_back({std::max(send->start_ns, local(sender, both)), send->end_ns});
    out.links.emplace_back(sender, receiver);
  }
  for (auto& [pair, entry] : routes) {
    auto& [route, bandwidths] = entry;
    if (!bandwidths.empty()) route.bandwidth_gbps = ComputeStats(std::move(bandwidths));
    out.figures.routes.push_back(std::move(route));
  }
  return out;
}

// ---- pipeline bubble -----------------------------------------------------------------------

// Replicas: ranks with passes joined by the messages between them (a pipeline's stages
// send to each other; replicas do not), numbered by their lowest rank.
std::vector<int> Replicas(const std::vector<RankParallelInput>& ranks, const std::vector<bool>& staged,
                          const std::vector<std::pair<size_t, size_t>>& links) {
  std::vector<size_t> parent(ranks.size());
  std::iota(parent.begin(), parent.end(), 0);
  const auto find = [&](size_t i) {
    while (parent[i] != i) i = parent[i] = parent[parent[i]];
    return i;
  };
  for (const auto& [a, b] : links) {
    if (staged[a] && staged[b]) parent[find(a)] = find(b);
  }
  // Without messages between its stages (a GPU run without NCCL's profiler plugin), the
  // trainer's numbering: rank r is stage r % S of replica r / S.
  if (links.empty()) {
    std::vector<int> replica(ranks.size(), -1);
    std::map<int64_t, int> numbered;
    for (size_t i = 0; i < ranks.size(); ++i) {
      if (!staged[i]) continue;
      const int64_t stages = std::max<int64_t>(1, ranks[i].activity->passes.front().stages);
      numbered.try_emplace(ranks[i].rank / stages, static_cast<int>(numbered.size()));
    }
    for (size_t i = 0; i < ranks.size(); ++i) {
      if (staged[i]) replica[i] = numbered[ranks[i].rank / std::max<int64_t>(1, ranks[i].activity->passes.front().stages)];
    }
    return replica;
  }
  std::map<size_t, int> lowest_rank;  // root → lowest rank of its component
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (!staged[i]) continue;
    auto [it, inserted] = lowest_rank.try_emplace(find(i), ranks[i].rank);
    if (!inserted) it->second = std::min(it->second, ranks[i].rank);
  }
  std::vector<int> order;
  for (const auto& [root, rank] : lowest_rank) order.push_back(rank);
  std::sort(order.begin(), order.end());
  std::vector<int> replica(ranks.size(), -1);
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (!staged[i]) continue;
    const int lowest = lowest_rank[find(i)];
    replica[i] = static_cast<int>(std::find(order.begin(), order.end(), lowest) - order.begin());
  }
  return replica;
}

// Per step number, a rank's passes that start inside that step's window: [first start,
// last end) on its clock. One walk over the steps and passes (both sorted by start).
std::map<int64_t, Interval> PassSpans(const RankActivity& activity) {
  std::map<int64_t, Interval> spans;
  size_t next = 0;
  for (const StepRange& step : activity.steps) {
    while (next < activity.passes.size() && activity.passes[next].start_ns < step.start_ns) ++next;
    for (; next < activity.passes.size() && activity.passes[next].start_ns < step.end_ns; ++next) {
      const PipelinePass& pass = activity.passes[next];
      auto [it, inserted] = spans.try_emplace(step.number, Interval{pass.start_ns, pass.end_ns});
      if (!inserted) it->second.end = std::max(it->second.end, pass.end_ns);
    }
  }
  return spans;
}

// On a GPU a pass's NVTX range is the CPU enqueueing its kernels, which run later. Per step
// number, the device's work instead: the hull of the compute kernels inside [the step's first
// pass start, the step's end), clipped to it. The step's end is the host range's: the trainer
// waits for its GPU before it ends a step (its loss), so its kernels run inside it.
std::map<int64_t, Interval> DeviceSpans(const RankActivity& activity, const IntervalSet& compute) {
  std::map<int64_t, Interval> spans;
  const std::vector<Interval>& busy = compute.intervals();
  for (const auto& [number, passes] : PassSpans(activity)) {
    const auto step = std::find_if(activity.steps.begin(), activity.steps.end(),
                                   [number = number](const StepRange& r) { return r.number == number; });
    if (step == activity.steps.end()) continue;
    const Interval window{passes.start, step->end_ns};
    auto first = std::partition_point(busy.begin(), busy.end(), [&](const Interval& i) { return i.end <= window.start; });
    auto last = std::partition_point(first, busy.end(), [&](const Interval& i) { return i.start < window.end; });
    if (first == last) continue;
    spans[number] = Interval{std::max(first->start, window.start), std::min((last - 1)->end, window.end)};
  }
  return spans;
}

std::string Diagnose(const PipelineFigures& figures) {
  const auto window = static_cast<double>(figures.window_ns);
  const double excess = window - static_cast<double>(figures.balanced_window_ns);
  if (window <= 0 || excess <= 0.05 * window) {
    return fmt::format("the bubble is the schedule's: {} idle against the ideal {} for {} stages and {} micro-batches",
                       FormatPercent(figures.bubble_pct), FormatPercent(figures.ideal_bubble_pct), figures.stages,
                       figures.micro_batches);
  }
  const PipelineStageFigures* slowest = nullptr;
  for (const PipelineStageFigures& row : figures.stage_rows) {
    if (slowest == nullptr || row.busy_vs_mean > slowest->busy_vs_mean) slowest = &row;
  }
  const std::string split = fmt::format(
      "the window is {}, balanced stages without communication would take {}; the slowest stage adds {}, "
      "communication and other idle time {}",
      FormatDuration(window), FormatDuration(static_cast<double>(figures.balanced_window_ns)),
      FormatDuration(static_cast<double>(figures.imbalance_ns)),
      FormatDuration(static_cast<double>(figures.communication_ns)));
  if (figures.imbalance_ns >= figures.communication_ns && slowest != nullptr) {
    return fmt::format("mostly imbalance: {}: stage {} (rank {}) computes {:.2f}x the mean stage, and the others wait "
                       "for it; move layers off it (--stage-layers)",
                       split, slowest->stage, slowest->rank, slowest->busy_vs_mean);
  }
  return fmt::format("mostly communication: {} (waiting for a neighbour's send or receive, and transfers)", split);
}

std::optional<PipelineFigures> MeasurePipeline(const std::vector<RankParallelInput>& ranks,
                                               const std::set<int64_t>& aggregated_steps, const MessageMatch& messages) {
  std::vector<bool> staged(ranks.size(), false);
  const PipelinePass* first = nullptr;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i].activity->passes.empty() || ranks[i].compute == nullptr) continue;
    staged[i] = true;
    if (first == nullptr) first = &ranks[i].activity->passes.front();
  }
  if (first == nullptr) return std::nullopt;
  PipelineFigures figures;
  figures.stages = static_cast<int>(first->stages);
  figures.micro_batches = static_cast<int>(first->micro_batches);
  const double s = figures.stages;
  const double m = figures.micro_batches;
  figures.ideal_bubble_pct = 100.0 * (s - 1.0) / (m + s - 1.0);
  const std::vector<int> replica = Replicas(ranks, staged, messages.links);
  figures.replicas = 1 + *std::max_element(replica.begin(), replica.end());

  std::vector<IntervalSet> waiting(ranks.size()), moving(ranks.size());
  std::vector<std::map<int64_t, Interval>> spans(ranks.size());
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (!staged[i]) continue;
    spans[i] = ranks[i].gpu ? DeviceSpans(*ranks[i].activity, *ranks[i].compute) : PassSpans(*ranks[i].activity);
    waiting[i] = IntervalSet::FromUnsorted(messages.per_rank[i].waiting);
    moving[i] = Difference(IntervalSet::FromUnsorted(messages.per_rank[i].moving), waiting[i]);
  }
  struct Samples {
    std::vector<double> window, busy, bubble, wait, transfer, other, vs_mean;
  };
  std::vector<Samples> samples(ranks.size());
  // Per (replica, step): the window's split (PipelineFigures).
  std::vector<double> windows, balanced, imbalance;
  const double schedule_factor = (m + s - 1.0) / m;
  for (int r = 0; r < figures.replicas; ++r) {
    std::vector<size_t> members;
    for (size_t i = 0; i < ranks.size(); ++i) {
      if (replica[i] == r) members.push_back(i);
    }
    for (int64_t number : aggregated_steps) {
      // The replica's window on the reference clock: its stages' first pass to their last.
      std::optional<Interval> window;
      bool complete = true;
      for (size_t i : members) {
        const auto span = spans[i].find(number);
        if (span == spans[i].end()) {
          complete = false;
          break;
        }
        const Interval aligned{span->second.start + ranks[i].clock_offset_ns,
                               span->second.end + ranks[i].clock_offset_ns};
        if (!window) window = aligned;
        window->start = std::min(window->start, aligned.start);
        window->end = std::max(window->end, aligned.end);
      }
      if (!complete || !window || window->length() <= 0) continue;
      std::vector<double> busy(members.size());
      for (size_t k = 0; k < members.size(); ++k) {
        const size_t i = members[k];
        const Interval local{window->start - ranks[i].clock_offset_ns, window->end - ranks[i].clock_offset_ns};
        busy[k] = static_cast<double>(ranks[i].compute->LengthWithin(local));
        const auto length = static_cast<double>(local.length());
        const auto wait = static_cast<double>(waiting[i].LengthWithin(local));
        const auto transfer = static_cast<double>(moving[i].LengthWithin(local));
        Samples& into = samples[i];
        into.window.push_back(length);
        into.busy.push_back(busy[k]);
        into.bubble.push_back(100.0 * (length - busy[k]) / length);
        into.wait.push_back(wait);
        into.transfer.push_back(transfer);
        into.other.push_back(std::max(0.0, length - busy[k] - wait - transfer));
      }
      const double mean = std::accumulate(busy.begin(), busy.end(), 0.0) / static_cast<double>(busy.size());
      for (size_t k = 0; k < members.size(); ++k) {
        if (mean > 0) samples[members[k]].vs_mean.push_back(busy[k] / mean);
      }
      const double most = *std::max_element(busy.begin(), busy.end());
      const auto length = static_cast<double>(window->length());
      windows.push_back(length);
      balanced.push_back(mean * schedule_factor);
      // Σ_s t_s + (M − 1) · max_s t_s with t_s = busy_s / M: the slowest stage paces the
      // M − 1 micro-batches after the first.
      imbalance.push_back((most - mean) * (m - 1.0) / m);
    }
  }
  std::vector<double> bubbles;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (!staged[i] || samples[i].window.empty()) continue;
    const Samples& from = samples[i];
    PipelineStageFigures row;
    row.rank = ranks[i].rank;
    row.stage = static_cast<int>(ranks[i].activity->passes.front().stage);
    row.replica = replica[i];
    row.steps = static_cast<int64_t>(from.window.size());
    row.window_ns = MedianNs(from.window);
    row.busy_ns = MedianNs(from.busy);
    row.bubble_pct = Median(from.bubble);
    row.neighbour_wait_ns = MedianNs(from.wait);
    row.transfer_ns = MedianNs(from.transfer);
    row.other_idle_ns = MedianNs(from.other);
    row.busy_vs_mean = Median(from.vs_mean);
    bubbles.push_back(row.bubble_pct);
    figures.stage_rows.push_back(row);
  }
  if (figures.stage_rows.empty()) return std::nullopt;
  std::sort(figures.stage_rows.begin(), figures.stage_rows.end(),
            [](const PipelineStageFigures& a, const PipelineStageFigures& b) {
              return std::tie(a.replica, a.stage, a.rank) < std::tie(b.replica, b.stage, b.rank);
            });
  figures.bubble_pct = Median(bubbles);
  figures.window_ns = MedianNs(windows);
  figures.balanced_window_ns = MedianNs(balanced);
  figures.imbalance_ns = MedianNs(imbalance);
  // The rest of the median window, so that the three parts add up to it.
  figures.communication_ns =
      std::max<int64_t>(0, figures.window_ns - figures.balanced_window_ns - figures.imbalance_ns);
  figures.diagnosis = Diagnose(figures);
  return figures;
}

// ---- FSDP exposure -------------------------------------------------------------------------

std::optional<FsdpFigures> MeasureFsdp(const std::vector<RankParallelInput>& ranks,
                                       const std::set<int64_t>& aggregated_steps) {
  struct Sums {
    double gathers = 0, gather = 0, exposed_gather = 0, scatter = 0, exposed_scatter = 0;
  };
  std::map<int64_t, Sums> by_layer;
  double rank_steps = 0;  // Σ over ranks of their aggregated steps
  for (const RankParallelInput& rank : ranks) {
    if (rank.compute == nullptr) continue;
    std::vector<Interval> windows;
    for (const StepRange& step : rank.activity->steps) {
      if (aggregated_steps.count(step.number) > 0) windows.push_back({step.start_ns, step.end_ns});
    }
    bool any = false;
    for (const CollectiveRecord& record : rank.activity->collectives) {
      const bool gather = record.op == CollectiveOp::kAllGather;
      if (record.label < 0 || (!gather && record.op != CollectiveOp::kReduceScatter)) continue;
      // The last window that starts at or before the record (windows are sorted, disjoint).
      const auto after = std::upper_bound(windows.begin(), windows.end(), record.start_ns,
                                          [](int64_t t, const Interval& window) { return t < window.start; });
      if (after == windows.begin() || record.start_ns >= std::prev(after)->end) continue;
      any = true;
      const Interval span{record.start_ns, record.end_ns};
      const auto length = static_cast<double>(span.length());
      const double exposed = length - static_cast<double>(rank.compute->LengthWithin(span));
      Sums& sums = by_layer[record.label];
      if (gather) {
        sums.gathers += 1;
        sums.gather += length;
        sums.exposed_gather += exposed;
      } else {
        sums.scatter += length;
        sums.exposed_scatter += exposed;
      }
    }
    if (any) rank_steps += static_cast<double>(windows.size());
  }
  if (by_layer.empty() || rank_steps == 0) return std::nullopt;
  FsdpFigures figures;
  for (const auto& [layer, sums] : by_layer) {
    FsdpLayerFigures row;
    row.layer = layer;
    row.all_gathers = sums.gathers / rank_steps;
    row.gather_ns = sums.gather / rank_steps;
    row.exposed_gather_ns = sums.exposed_gather / rank_steps;
    row.reduce_scatter_ns = sums.scatter / rank_steps;
    row.exposed_reduce_scatter_ns = sums.exposed_scatter / rank_steps;
    figures.gather_ns += row.gather_ns;
    figures.exposed_gather_ns += row.exposed_gather_ns;
    figures.layers.push_back(row);
  }
  if (figures.gather_ns > 0) figures.exposed_gather_pct = 100.0 * figures.exposed_gather_ns / figures.gather_ns;
  return figures;
}

}  // namespace

Parallelism AnalyzeParallelism(const std::vector<RankParallelInput>& ranks, const std::set<int64_t>& aggregated_steps,
                               std::vector<std::string>* warnings) {
  Parallelism out;
  ChooseStrategy(ranks, out);
  MessageMatch messages = MatchMessages(ranks);
  if (messages.figures.matched > 0 || messages.figures.unmatched > 0) {
    if (messages.figures.unmatched > 0) {
      warnings->push_back(fmt::format("{} point-to-point message(s) were recorded by one side only (the other rank's "
                                      "file is missing, or the run ended first)",
                                      messages.figures.unmatched));
    }
    out.point_to_point = messages.figures;
  }
  out.pipeline = MeasurePipeline(ranks, aggregated_steps, messages);
  out.fsdp = MeasureFsdp(ranks, aggregated_steps);
  return out;
}

}  // namespace rankscope::analyzer
