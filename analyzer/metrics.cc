#include "analyzer/metrics.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace rankscope::analyzer {

DeviceTimeline::DeviceTimeline(DeviceActivity activity)
    : activity_(std::move(activity)), extent_(activity_.Extent()) {}

void FillRatios(Breakdown& b) {
  b.overlap_pct = b.comm_ns > 0 ? 100.0 * static_cast<double>(b.overlap_ns) / static_cast<double>(b.comm_ns) : 0.0;
  if (b.compute_ns > 0) {
    b.comm_compute_ratio = static_cast<double>(b.comm_ns) / static_cast<double>(b.compute_ns);
  } else {
    b.comm_compute_ratio = b.comm_ns > 0 ? std::nullopt : std::optional<double>(0.0);
  }
  b.utilization_pct =
      b.window_ns > 0 ? 100.0 * static_cast<double>(b.busy_ns) / static_cast<double>(b.window_ns) : 0.0;
}

Breakdown DeviceTimeline::Measure(Interval window) const {
  // Bit 0: compute, bit 1: comm, bit 2: memory.
  const std::array<const std::vector<Interval>*, 3> sets = {
      &activity_.compute.intervals(), &activity_.comm.intervals(), &activity_.memory.intervals()};
  std::array<size_t, 3> next{};
  for (size_t k = 0; k < sets.size(); ++k) {
    // The first interval that ends after the window starts.
    next[k] = static_cast<size_t>(
        std::upper_bound(sets[k]->begin(), sets[k]->end(), window.start,
                         [](int64_t t, const Interval& interval) { return t < interval.end; }) -
        sets[k]->begin());
  }
  std::array<int64_t, 8> time_in{};  // by combination of the three bits
  // Where the next interval of set k starts after t (window.end when none does before it).
  auto next_start = [&](size_t k, int64_t t) {
    const std::vector<Interval>& set = *sets[k];
    size_t& i = next[k];
    while (i < set.size() && set[i].end <= t) ++i;
    return i < set.size() ? std::max(set[i].start, t) : window.end;
  };
  for (int64_t t = window.start; t < window.end;) {
    // Fast path, the common case: no comm or memory at t. Walk compute alone up to the
    // next comm or memory interval.
    const int64_t horizon = std::min({next_start(1, t), next_start(2, t), window.end});
    if (horizon > t) {
      const std::vector<Interval>& compute = *sets[0];
      size_t& i = next[0];
      while (t < horizon) {
        while (i < compute.size() && compute[i].end <= t) ++i;
        if (i == compute.size() || compute[i].start >= horizon) {
          time_in[0] += horizon - t;
          t = horizon;
          break;
        }
        if (compute[i].start > t) {
          time_in[0] += compute[i].start - t;
          t = compute[i].start;
        }
        const int64_t until = std::min(compute[i].end, horizon);
        time_in[1] += until - t;
        t = until;
      }
      continue;
    }

    unsigned state = 0;
    int64_t change = window.end;
    for (size_t k = 0; k < sets.size(); ++k) {
      const std::vector<Interval>& set = *sets[k];
      size_t& i = next[k];
      while (i < set.size() && set[i].end <= t) ++i;
      if (i == set.size()) continue;
      if (set[i].start <= t) {
        state |= 1u << k;
        change = std::min(change, set[i].end);
      } else {
        change = std::min(change, set[i].start);
      }
    }
    time_in[state] += change - t;
    t = change;
  }
  auto sum = [&](auto wanted) {
    int64_t total = 0;
    for (unsigned state = 0; state < time_in.size(); ++state) {
      if (wanted(state)) total += time_in[state];
    }
    return total;
  };
  constexpr unsigned kCompute = 1, kComm = 2, kMemory = 4;
  Breakdown b;
  b.window_ns = window.length();
  b.compute_ns = sum([](unsigned s) { return (s & kCompute) != 0; });
  b.comm_ns = sum([](unsigned s) { return (s & kComm) != 0; });
  b.memory_ns = sum([](unsigned s) { return (s & kMemory) != 0; });
  b.overlap_ns = sum([](unsigned s) { return (s & kCompute) != 0 && (s & kComm) != 0; });
  b.compute_only_ns = sum([](unsigned s) { return (s & kCompute) != 0 && (s & kComm) == 0; });
  b.comm_only_ns = sum([](unsigned s) { return (s & kComm) != 0 && (s & kCompute) == 0; });
  b.exposed_comm_ns = b.comm_only_ns;
  b.memory_only_ns = time_in[kMemory];
  b.busy_ns = b.window_ns - time_in[0];
  b.idle_ns = time_in[0];
  FillRatios(b);
  return b;
}

namespace {

void AddTimes(Breakdown& into, const Breakdown& part) {
  into.window_ns += part.window_ns;
  into.compute_ns += part.compute_ns;
  into.comm_ns += part.comm_ns;
  into.memory_ns += part.memory_ns;
  into.overlap_ns += part.overlap_ns;
  into.exposed_comm_ns += part.exposed_comm_ns;
  into.busy_ns += part.busy_ns;
  into.idle_ns += part.idle_ns;
  into.compute_only_ns += part.compute_only_ns;
  into.comm_only_ns += part.comm_only_ns;
  into.memory_only_ns += part.memory_only_ns;
}

}  // namespace

Breakdown MeasureCovering(const DeviceTimeline& timeline, Interval window, const std::vector<StepMetrics>& steps) {
  Breakdown total;
  int64_t covered_until = window.start;
  for (const StepMetrics& step : steps) {
    const Interval part{std::max(step.start_ns, window.start), std::min(step.end_ns, window.end)};
    if (part.end <= part.start || part.start < covered_until) continue;
    if (part.start > covered_until) AddTimes(total, timeline.Measure({covered_until, part.start}));
    const bool whole_step = part.start == step.start_ns && part.end == step.end_ns;
    AddTimes(total, whole_step ? step.breakdown : timeline.Measure(part));
    covered_until = part.end;
  }
  if (covered_until < window.end) AddTimes(total, timeline.Measure({covered_until, window.end}));
  FillRatios(total);
  return total;
}

Stats ComputeStats(std::vector<double> samples) {
  Stats stats;
  stats.count = static_cast<int64_t>(samples.size());
  if (samples.empty()) return stats;
  // Four ranks at most are needed, not the whole order: each is selected in linear time
  // (nth_element), within the part not yet known to hold only smaller values.
  const size_t last = samples.size() - 1;
  size_t known_smallest = 0;  // samples[0, known_smallest) are that many smallest, unordered
  std::array<std::pair<size_t, double>, 4> selected;
  size_t selected_count = 0;
  auto value_at_rank = [&](size_t rank) {
    for (size_t i = 0; i < selected_count; ++i) {
      if (selected[i].first == rank) return selected[i].second;
    }
    const size_t from = rank >= known_smallest ? known_smallest : 0;
    std::nth_element(samples.begin() + static_cast<ptrdiff_t>(from), samples.begin() + static_cast<ptrdiff_t>(rank),
                     samples.end());
    known_smallest = rank + 1;
    const double value = samples[rank];
    if (selected_count < selected.size()) selected[selected_count++] = {rank, value};
    return value;
  };
  auto quantile = [&](double q) {
    const double position = q * static_cast<double>(last);
    const auto below = static_cast<size_t>(std::floor(position));
    const size_t above = std::min(below + 1, last);
    const double fraction = position - static_cast<double>(below);
    const double low = value_at_rank(below);
    const double high = value_at_rank(above);
    return low + (high - low) * fraction;
  };
  stats.min = *std::min_element(samples.begin(), samples.end());
  stats.max = *std::max_element(samples.begin(), samples.end());
  stats.median = quantile(0.5);
  stats.p90 = quantile(0.9);
  return stats;
}

namespace {

template <typename ValueOf>
Stats AggregatedStats(const std::vector<StepMetrics>& steps, ValueOf value_of) {
  std::vector<double> samples;
  samples.reserve(steps.size());
  for (const StepMetrics& step : steps) {
    if (!step.aggregated) continue;
    if (std::optional<double> value = value_of(step)) samples.push_back(*value);
  }
  return ComputeStats(std::move(samples));
}

}  // namespace

Stats ComputeWaitStats(const std::vector<StepMetrics>& steps) {
  return AggregatedStats(steps, [](const StepMetrics& s) { return std::optional<double>(static_cast<double>(s.wait_ns)); });
}

StepStats ComputeStepStats(const std::vector<StepMetrics>& steps) {
  StepStats out;
  auto stats_of = [&](auto value_of) { return AggregatedStats(steps, value_of); };
  auto time = [&](int64_t Breakdown::*field) {
    return stats_of([field](const StepMetrics& s) { return std::optional<double>(static_cast<double>(s.breakdown.*field)); });
  };
  out.step_ns = time(&Breakdown::window_ns);
  out.compute_ns = time(&Breakdown::compute_ns);
  out.comm_ns = time(&Breakdown::comm_ns);
  out.memory_ns = time(&Breakdown::memory_ns);
  out.overlap_ns = time(&Breakdown::overlap_ns);
  out.exposed_comm_ns = time(&Breakdown::exposed_comm_ns);
  out.busy_ns = time(&Breakdown::busy_ns);
  out.idle_ns = time(&Breakdown::idle_ns);
  out.overlap_pct = stats_of([](const StepMetrics& s) { return std::optional<double>(s.breakdown.overlap_pct); });
  out.comm_compute_ratio = stats_of([](const StepMetrics& s) { return s.breakdown.comm_compute_ratio; });
  out.utilization_pct =
      stats_of([](const StepMetrics& s) { return std::optional<double>(s.breakdown.utilization_pct); });
  out.wait_ns = ComputeWaitStats(steps);
  return out;
}

}  // namespace rankscope::analyzer
