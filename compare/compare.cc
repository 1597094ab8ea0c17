#include "compare/compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>

#include "compare/mann_whitney.h"
#include "base/format.h"

namespace rankscope::compare {
namespace {

std::string KnownMetricNames() {
  std::string names;
  for (const MetricInfo& info : ComparableMetrics()) names += (names.empty() ? "" : ", ") + std::string(info.name);
  return names;
}

std::string WorldSizes(const ComparableSet& set) {
  std::string sizes;
  for (const ComparableRun& run : set.runs) sizes += (sizes.empty() ? "" : ",") + std::to_string(run.workload.world_size);
  return sizes.empty() ? "none" : sizes;
}

// "step_time_ns, throughput" of a run's metrics; "none" without any.
std::string MetricNames(const ComparableRun& run) {
  std::string names;
  for (const ComparableMetric& metric : run.metrics) names += (names.empty() ? "" : ", ") + metric.name;
  return names.empty() ? "none" : names;
}

std::string Optional(const std::optional<int64_t>& value) { return value ? std::to_string(*value) : "unknown"; }

// How two runs of one world size differ as workloads; empty when they do not.
std::vector<std::string> WorkloadDifferences(const WorkloadIdentity& base, const WorkloadIdentity& cur) {
  std::vector<std::string> out;
  auto differ = [&](const char* what, const std::string& a, const std::string& b) {
    if (a != b) out.push_back(fmt::format("{} '{}' vs '{}'", what, a, b));
  };
  auto differ_known = [&](const char* what, const std::optional<int64_t>& a, const std::optional<int64_t>& b) {
    // Unknown on one side is not a difference: older traces may not say.
    if (a && b && *a != *b) out.push_back(fmt::format("{} {} vs {}", what, Optional(a), Optional(b)));
  };
  differ("program", base.program, cur.program);
  // An empty backend is unknown (older files, programs the analyzer cannot place): no difference.
  if (!base.backend.empty() && !cur.backend.empty()) differ("backend", base.backend, cur.backend);
  differ_known("batch per rank", base.batch_per_rank, cur.batch_per_rank);
  differ_known("accumulation", base.accumulation, cur.accumulation);
  differ_known("global batch", base.global_batch, cur.global_batch);
  differ_known("parameters", base.parameters, cur.parameters);
  return out;
}

const ComparableRun* RunOfSize(const ComparableSet& set, int world_size) {
  for (const ComparableRun& run : set.runs) {
    if (run.workload.world_size == world_size) return &run;
  }
  return nullptr;
}

double RelativeChange(double baseline, double current) {
  if (baseline != 0) return (current - baseline) / std::abs(baseline);
  if (current == 0) return 0;
  return current > 0 ? INFINITY : -INFINITY;
}

// The smallest absolute change worth a verdict. A relative tolerance alone turns noise in
// near-zero figures (2 us of exposed comm on one rank, a ratio of 0.002) into huge
// percentages, so: times that are parts of a step must move by 1% of the baseline's step
// time, ratios by 0.01, percentages by one point.
double MeaningfulChange(const MetricInfo& info, const ComparableRun& baseline) {
  const std::string_view name = info.name;
  if (name == "comm_compute_ratio") return 0.01;
  if (name.ends_with("_pct")) return 1.0;
  if (name.ends_with("_ns") && name != "step_time_ns") {
    if (const ComparableMetric* step = baseline.Find("step_time_ns")) return 0.01 * step->value;
  }
  return 0;
}

MetricComparison CompareMetric(const MetricInfo& info, double tolerance, double floor, double alpha, int world_size,
                               const ComparableMetric& base, const ComparableMetric& cur) {
  MetricComparison row;
  row.world_size = world_size;
  row.metric = std::string(info.name);
  row.baseline = base.value;
  row.current = cur.value;
  row.change = RelativeChange(base.value, cur.value);
  row.tolerance = tolerance;
  row.baseline_samples = base.samples.size();
  row.current_samples = cur.samples.size();
  const std::string change = format::FormatPercent(100.0 * row.change);
  const std::string limit = format::FormatPercent(100.0 * tolerance);
  if (!(std::abs(row.change) > tolerance)) {
    row.verdict = Verdict::kUnchanged;
    row.reason = fmt::format("{} is within the {} tolerance", change, limit);
    return row;
  }
  if (std::abs(cur.value - base.value) <= floor) {
    row.verdict = Verdict::kUnchanged;
    row.reason = fmt::format("{}, but only {}: below the {} a change must reach to count", change,
                             format::FormatMetricValue(row.metric, std::abs(cur.value - base.value)),
                             format::FormatMetricValue(row.metric, floor));
    return row;
  }
  const bool worse = info.higher_is_better ? row.change < 0 : row.change > 0;
  const Verdict beyond = worse ? Verdict::kRegressed : Verdict::kImproved;
  const char* direction = worse ? "worse" : "better";
  if (base.samples.empty() || cur.samples.empty()) {
    row.verdict = beyond;
    row.reason = fmt::format("{} {} than the {} tolerance; no per-step samples, so the tolerance decides", change,
                             direction, limit);
    return row;
  }
  if (SmallestTwoSidedP(base.samples.size(), cur.samples.size()) >= alpha) {
    row.verdict = beyond;
    row.reason = fmt::format("{} {} than the {} tolerance; {} and {} steps are too few for the U test at p < {:g}, "
                             "so the tolerance decides",
                             change, direction, limit, base.samples.size(), cur.samples.size(), alpha);
    return row;
  }
  const Result<MannWhitneyResult> test = MannWhitneyU(base.samples, cur.samples);
  if (!test.ok()) {
    row.verdict = beyond;
    row.reason = fmt::format("{} {} than the {} tolerance; U test not possible ({}), so the tolerance decides",
                             change, direction, limit, test.status().message());
    return row;
  }
  row.p_value = test->p_value;
  if (test->p_value < alpha) {
    row.verdict = beyond;
    row.reason = fmt::format("{} {} than the {} tolerance, and the U test says it is real (p = {:.2g} < {:g})",
                             change, direction, limit, test->p_value, alpha);
  } else {
    row.verdict = Verdict::kNotSignificant;
    row.reason = fmt::format("{} {} than the {} tolerance, but within the steps' noise (U test p = {:.2g} >= {:g})",
                             change, direction, limit, test->p_value, alpha);
  }
  return row;
}

}  // namespace

const char* VerdictName(Verdict verdict) {
  switch (verdict) {
    case Verdict::kUnchanged: return "unchanged";
    case Verdict::kNotSignificant: return "noise";
    case Verdict::kImproved: return "improved";
    case Verdict::kRegressed: return "REGRESSED";
  }
  return "";
}

bool Comparison::Regressed() const {
  return std::any_of(rows.begin(), rows.end(), [](const MetricComparison& r) { return r.verdict == Verdict::kRegressed; });
}

double SmallestTwoSidedP(size_t first_count, size_t second_count) {
  // The most extreme arrangement has probability 1 / C(n1 + n2, n1) in each tail.
  double arrangements = 1;
  const size_t small = std::min(first_count, second_count), total = first_count + second_count;
  for (size_t i = 1; i <= small; ++i) arrangements = arrangements * static_cast<double>(total - small + i) / i;
  return std::min(1.0, 2.0 / arrangements);
}

Result<double> ParseTolerance(std::string_view text) {
  const std::string_view number = !text.empty() && text.back() == '%' ? text.substr(0, text.size() - 1) : text;
  double value = 0;
  const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
  if (number.empty() || ec != std::errc() || end != number.data() + number.size() || !std::isfinite(value)) {
    return InvalidArgument(fmt::format("tolerance '{}': expected a percentage such as 5% or a fraction such as 0.05",
                                       text));
  }
  if (text.back() == '%') value /= 100.0;
  if (value < 0) return InvalidArgument(fmt::format("tolerance '{}': must not be negative", text));
  return value;
}

Result<MetricTolerance> ParseMetricTolerance(std::string_view text) {
  const size_t colon = text.find(':');
  MetricTolerance out;
  out.metric = std::string(text.substr(0, colon));
  if (FindMetricInfo(out.metric) == nullptr) {
    return InvalidArgument(fmt::format("--metric {}: unknown metric '{}' (known: {})", text, out.metric,
                                       KnownMetricNames()));
  }
  if (colon != std::string_view::npos) {
    Result<double> tolerance = ParseTolerance(text.substr(colon + 1));
    if (!tolerance.ok()) return InvalidArgument(fmt::format("--metric {}: {}", text, tolerance.status().message()));
    out.tolerance = *tolerance;
  }
  return out;
}

Result<Comparison> CompareWithBaseline(const ComparableSet& baseline, const ComparableSet& current,
                                       const CompareOptions& options) {
  if (options.tolerance < 0) return InvalidArgument("the tolerance must not be negative");
  Comparison out;
  out.baseline_source = baseline.source;
  out.current_source = current.source;
  out.alpha = options.alpha;

  // Which world sizes, and whether the workloads are the same.
  std::vector<int> sizes;
  std::vector<std::string> problems;
  for (const ComparableRun& base : baseline.runs) {
    const ComparableRun* cur = RunOfSize(current, base.workload.world_size);
    if (cur == nullptr) continue;
    sizes.push_back(base.workload.world_size);
    for (const std::string& difference : WorkloadDifferences(base.workload, cur->workload)) {
      problems.push_back(fmt::format("{}: {}", format::RanksText(base.workload.world_size), difference));
    }
    if (base.command != cur->command && !base.command.empty() && !cur->command.empty()) {
      out.notes.push_back(fmt::format("{}: the command lines differ (baseline: {}; current: {})",
                                      format::RanksText(base.workload.world_size), base.command, cur->command));
    }
  }
  if (WorldSizes(baseline) != WorldSizes(current)) {
    problems.insert(problems.begin(), fmt::format("world sizes {} (baseline) vs {} (current)", WorldSizes(baseline),
                                                  WorldSizes(current)));
  }
  if (!problems.empty()) {
    std::string joined;
    for (const std::string& p : problems) joined += (joined.empty() ? "" : "; ") + p;
    if (!options.force) {
      return Inconsistent(fmt::format("not the same workload as the baseline: {} (--force compares anyway)", joined));
    }
    out.notes.push_back("compared although the workloads differ (--force): " + joined);
  }
  if (sizes.empty()) {
    return Inconsistent(fmt::format("no world size in common: baseline {}, current {}", WorldSizes(baseline),
                                    WorldSizes(current)));
  }

  // Which metrics, with which tolerance.
  std::vector<std::pair<const MetricInfo*, double>> checked;
  if (options.metrics.empty()) {
    for (const MetricInfo& info : ComparableMetrics()) {
      if (info.gated_by_default) checked.emplace_back(&info, options.tolerance);
    }
  } else {
    for (const MetricTolerance& wanted : options.metrics) {
      const MetricInfo* info = FindMetricInfo(wanted.metric);
      if (info == nullptr) {
        return InvalidArgument(fmt::format("unknown metric '{}' (known: {})", wanted.metric, KnownMetricNames()));
      }
      const double tolerance = wanted.tolerance.value_or(options.tolerance);
      if (tolerance < 0) return InvalidArgument(fmt::format("{}: the tolerance must not be negative", wanted.metric));
      std::erase_if(checked, [&](const auto& entry) { return entry.first == info; });
      checked.emplace_back(info, tolerance);
    }
    std::sort(checked.begin(), checked.end(), [](const auto& a, const auto& b) {
      return a.first - ComparableMetrics().data() < b.first - ComparableMetrics().data();
    });
  }

  for (const auto& [info, tolerance] : checked) {
    bool found_anywhere = false;
    std::vector<int> missing;
    for (const int size : sizes) {
      const ComparableMetric* base = RunOfSize(baseline, size)->Find(info->name);
      const ComparableMetric* cur = RunOfSize(current, size)->Find(info->name);
      if (base == nullptr || cur == nullptr) {
        if (base != nullptr || cur != nullptr) missing.push_back(size);
        continue;
      }
      found_anywhere = true;
      const double floor = MeaningfulChange(*info, *RunOfSize(baseline, size));
      out.rows.push_back(CompareMetric(*info, tolerance, floor, options.alpha, size, *base, *cur));
    }
    if (!options.metrics.empty() && !found_anywhere) {
      return InvalidArgument(fmt::format("--metric {}: {} (scaling efficiency needs a sweep on both sides)",
                                         info->name, missing.empty() ? "neither side has it" : "only one side has it"));
    }
    for (const int size : missing) {
      out.notes.push_back(
          fmt::format("{}: {} is on one side only, not compared", format::RanksText(size), info->name));
    }
  }
  // A baseline whose metrics are missing, null or renamed would check nothing and pass
  // anything: every world size both sides measured must compare at least one metric.
  for (const int size : sizes) {
    if (std::any_of(out.rows.begin(), out.rows.end(), [&](const MetricComparison& row) { return row.world_size == size; })) {
      continue;
    }
    return Inconsistent(fmt::format(
        "nothing to compare at {}: the baseline has no metric that this run has among those checked (baseline: {}; "
        "this run: {}); is the baseline a rankscope JSON report of the same version?",
        format::RanksText(size), MetricNames(*RunOfSize(baseline, size)), MetricNames(*RunOfSize(current, size))));
  }
  std::stable_sort(out.rows.begin(), out.rows.end(),
                   [](const MetricComparison& a, const MetricComparison& b) { return a.world_size < b.world_size; });
  return out;
}

}  // namespace rankscope::compare
