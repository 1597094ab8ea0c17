#include "compare/ab.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "base/format.h"
#include "compare/signed_rank.h"

namespace rankscope::compare {

const char* AbVerdictName(AbVerdict verdict) {
  switch (verdict) {
    case AbVerdict::kUnchanged: return "unchanged";
    case AbVerdict::kImproved: return "improved";
    case AbVerdict::kRegressed: return "regressed";
    case AbVerdict::kCannotTell: return "can't tell";
  }
  return "can't tell";
}

Result<std::vector<MetricTolerance>> AbMetrics(const AbOptions& options) {
  if (!(options.tolerance >= 0)) return InvalidArgument("the tolerance must not be negative");
  std::vector<MetricTolerance> out;
  if (options.metrics.empty()) {
    for (const MetricInfo& info : ComparableMetrics()) {
      if (info.gated_by_default) out.push_back({std::string(info.name), options.tolerance});
    }
    return out;
  }
  for (const MetricTolerance& wanted : options.metrics) {
    if (FindMetricInfo(wanted.metric) == nullptr) {
      return InvalidArgument(fmt::format("unknown metric '{}'", wanted.metric));
    }
    const double tolerance = wanted.tolerance.value_or(options.tolerance);
    if (!(tolerance >= 0)) return InvalidArgument(fmt::format("{}: the tolerance must not be negative", wanted.metric));
    out.push_back({wanted.metric, tolerance});
  }
  return out;
}

namespace {

// "+3.1%": the change a ratio B/A stands for.
std::string Percent(double ratio) { return fmt::format("{:+.1f}%", 100.0 * (ratio - 1.0)); }

AbRow Judge(const PairedMetric& paired, const MetricInfo& info, double tolerance, double confidence) {
  AbRow row;
  row.world_size = paired.world_size;
  row.metric = paired.metric;
  row.tolerance = tolerance;
  std::vector<double> logs;
  for (size_t i = 0; i < paired.a.size(); ++i) {
    const double a = paired.a[i], b = paired.b[i];
    if (std::isfinite(a) && std::isfinite(b) && a > 0 && b > 0) logs.push_back(std::log(b / a));
  }
  row.pairs = logs.size();
  if (logs.empty()) {
    row.reason = "no pair has this metric on both sides";
    return row;
  }
  const Result<CenterEstimate> center = HodgesLehmann(logs, confidence);
  const Result<SignedRankResult> test = WilcoxonSignedRank(logs);
  if (!center.ok() || !test.ok()) {  // only non-finite logs, which were left out above
    row.reason = "the pairs' ratios cannot be judged";
    return row;
  }
  row.ratio = std::exp(center->estimate);
  row.p_value = test->p_value;
  if (!center->lower) {
    row.reason = fmt::format("{} pairs are too few for a {:.0f}% interval", row.pairs, 100 * confidence);
    return row;
  }
  row.low = std::exp(*center->lower);
  row.high = std::exp(*center->upper);
  row.coverage = center->coverage;
  // In log space the tolerance is symmetric: 2% slower and 2% faster are ±ln(1.02).
  const double bound = std::log1p(tolerance);
  const double worse_sign = info.higher_is_better ? -1.0 : 1.0;  // the sign of a change for the worse
  const double lo = *center->lower, hi = *center->upper, mid = center->estimate;
  const std::string interval = fmt::format("B/A {} [{}, {}]", Percent(row.ratio), Percent(*row.low), Percent(*row.high));
  if (lo > -bound && hi < bound) {
    row.verdict = AbVerdict::kUnchanged;
    row.reason = fmt::format("{}: within ±{}", interval, format::FormatPercent(100 * tolerance));
  } else if ((lo > 0 || hi < 0) && std::abs(mid) > bound) {
    const bool worse = (mid > 0 ? 1.0 : -1.0) == worse_sign;
    row.verdict = worse ? AbVerdict::kRegressed : AbVerdict::kImproved;
    row.reason = fmt::format("{}: beyond ±{} and not noise (p = {:.2g})", interval,
                             format::FormatPercent(100 * tolerance), row.p_value);
  } else {
    row.reason = fmt::format("{}: reaches past ±{}; more pairs would tell", interval,
                             format::FormatPercent(100 * tolerance));
  }
  return row;
}

}  // namespace

Result<std::vector<AbRow>> JudgePairs(const std::vector<PairedMetric>& paired, const AbOptions& options) {
  if (!(options.confidence > 0 && options.confidence < 1)) {
    return InvalidArgument("the confidence must lie between 0 and 1");
  }
  RS_ASSIGN_OR_RETURN(std::vector<MetricTolerance> checked, AbMetrics(options));
  std::vector<AbRow> rows;
  for (const MetricTolerance& wanted : checked) {
    const MetricInfo* info = FindMetricInfo(wanted.metric);
    for (const PairedMetric& metric : paired) {
      if (metric.metric != wanted.metric) continue;
      if (metric.a.size() != metric.b.size()) {
        return InvalidArgument(fmt::format("{} at {} ranks: {} values of A against {} of B", metric.metric,
                                           metric.world_size, metric.a.size(), metric.b.size()));
      }
      rows.push_back(Judge(metric, *info, *wanted.tolerance, options.confidence));
    }
  }
  std::stable_sort(rows.begin(), rows.end(), [](const AbRow& x, const AbRow& y) { return x.world_size < y.world_size; });
  return rows;
}

bool AbLooks::IsLook(int pairs) const { return std::find(at.begin(), at.end(), pairs) != at.end(); }

AbLooks PlanLooks(double confidence, int max_pairs) {
  const double alpha = 1 - confidence;
  const int last = std::max(max_pairs, 1);
  AbLooks plan;
  plan.at = {last};
  plan.per_look_confidence = confidence;
  for (int first = 1; first <= last; ++first) {
    std::vector<int> at;
    for (int pairs = first; pairs < last; pairs = std::max(pairs + 1, (3 * pairs + 1) / 2)) at.push_back(pairs);
    at.push_back(last);
    const double look_alpha = alpha / static_cast<double>(at.size());
    if (std::ldexp(2.0, -first) <= look_alpha) {
      plan.at = std::move(at);
      plan.per_look_confidence = 1 - look_alpha;
      break;
    }
  }
  return plan;
}

bool AllDecided(const std::vector<AbRow>& rows) {
  return std::none_of(rows.begin(), rows.end(), [](const AbRow& row) { return row.verdict == AbVerdict::kCannotTell; });
}

bool AnyRegressed(const std::vector<AbRow>& rows) {
  return std::any_of(rows.begin(), rows.end(), [](const AbRow& row) { return row.verdict == AbVerdict::kRegressed; });
}

}  // namespace rankscope::compare
