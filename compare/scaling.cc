#include "compare/scaling.h"

#include <Eigen/Dense>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "analyzer/metrics.h"

namespace rankscope::compare {

using analyzer::ComputeStats;
using analyzer::Report;
namespace {

std::optional<double> Value(const ComparableRun& run, std::string_view name) {
  if (const ComparableMetric* metric = run.Find(name)) return metric->value;
  return std::nullopt;
}

// The communication model the runs' strategy calls for (CommModel), and why, in words.
ModelShape ChooseModel(const std::vector<ComparableRun>& runs, std::string& note) {
  ModelShape shape;
  const std::string& first = runs.front().workload.strategy;
  const bool same = std::all_of(runs.begin(), runs.end(),
                                [&](const ComparableRun& run) { return run.workload.strategy == first; });
  if (!same) {
    note = "the runs differ in strategy: modelled as DDP's ring all-reduce";
    return shape;
  }
  if (first == "fsdp") {
    shape.comm = CommModel::kFsdp;
    note = "FSDP: all-gather twice and reduce-scatter once per step, 3(N-1) hops and 3(N-1)/N of the parameter bytes";
    return shape;
  }
  if (first == "pipeline") {
    // A damaged report's stages or micro-batches below 1 count as 1.
    const auto stages = [](const ComparableRun& run) { return std::max<int64_t>(1, run.workload.stages.value_or(1)); };
    const auto micro_batches = [](const ComparableRun& run) {
      return std::max<int64_t>(1, run.workload.micro_batches.value_or(1));
    };
    const int64_t m = micro_batches(runs.front());
    const bool one_pipeline = std::all_of(runs.begin(), runs.end(), [&](const ComparableRun& run) {
      return stages(run) == run.workload.world_size && micro_batches(run) == m;
    });
    if (one_pipeline) {
      shape.comm = CommModel::kPipeline;
      shape.micro_batches = static_cast<int>(m);
      note = fmt::format("one pipeline of N stages, {} micro-batches: compute (M+N-1)/(N*M) of one stage's, "
                         "2(M+N-2) messages on the critical path",
                         m);
      return shape;
    }
    const int64_t fixed = stages(runs.front());
    const bool replicas = std::all_of(runs.begin(), runs.end(), [&](const ComparableRun& run) {
      return stages(run) == fixed && run.workload.world_size % fixed == 0;
    });
    if (replicas) {
      shape.comm = CommModel::kReplicaAllReduce;
      shape.stages = static_cast<int>(fixed);
      note = fmt::format("pipelines of {} stages, more replicas: each stage's ring all-reduce over D = N/{} replicas",
                         fixed, fixed);
      return shape;
    }
    note = "pipelines whose stages and replicas both change: modelled as DDP's ring all-reduce";
    return shape;
  }
  note = first == "ddp" ? "DDP: a ring all-reduce of the gradients, 2(N-1) hops and 2(N-1)/N of the bytes"
                        : "strategy unknown: modelled as DDP's ring all-reduce";
  return shape;
}

// Every run states the value, and they are all equal.
bool AllEqual(const std::vector<std::optional<int64_t>>& values) {
  if (values.empty() || !values.front()) return false;
  return std::all_of(values.begin(), values.end(), [&](const std::optional<int64_t>& v) { return v == values.front(); });
}

bool NoneKnown(const std::vector<std::optional<int64_t>>& values) {
  return std::none_of(values.begin(), values.end(), [](const auto& v) { return v.has_value(); });
}

// Efficiency of a run whose step took `step_ns` (or that moved `throughput` samples/s).
struct EfficiencyBase {
  ScalingMode mode = ScalingMode::kWeak;
  double n0 = 1;
  double t0 = 0;                    // the smallest run's median step time
  std::optional<double> x0;         // and its throughput
};

double EfficiencyOf(const EfficiencyBase& base, double n, double step_ns, std::optional<double> throughput) {
  if (base.mode == ScalingMode::kStrong) return base.n0 * base.t0 / (n * step_ns);
  // X(N) / (N/N0 · X(N0)); with a fixed per-rank batch, X = N · b / T, so it is T(N0) / T(N).
  if (throughput && base.x0) return *throughput / (n / base.n0 * *base.x0);
  return base.t0 / step_ns;
}

// ---- the model ------------------------------------------------------------------------

// The model's terms at one world size: T = c·compute + α·hops + γ·volume − H (exposed).
struct ModelTerms {
  double compute = 1;  // 1 (weak) or N0/N (strong)
  double hops = 0;     // 2(N−1)
  double volume = 0;   // 2(N−1)/N; γ = S/B
};

ModelTerms TermsAt(ScalingMode mode, const ModelShape& shape, int n0, int n) {
  ModelTerms terms;
  terms.compute = mode == ScalingMode::kWeak ? 1.0 : static_cast<double>(n0) / n;
  switch (shape.comm) {
    case CommModel::kRingAllReduce:
      terms.hops = 2.0 * (n - 1);
      terms.volume = 2.0 * (n - 1) / n;
      break;
    case CommModel::kFsdp:
      terms.hops = 3.0 * (n - 1);
      terms.volume = 3.0 * (n - 1) / n;
      break;
    case CommModel::kReplicaAllReduce: {
      const double d = std::max(1.0, static_cast<double>(n) / std::max(1, shape.stages));
      terms.hops = 2.0 * (d - 1);
      terms.volume = 2.0 * (d - 1) / d;
      break;
    }
    case CommModel::kPipeline: {
      // The model split over n stages, each micro-batch's work 1/n, the schedule's bubble:
      // (M + n − 1) slots of 1/(n·M) of the step's work, relative to n0's.
      const double m = std::max(1, shape.micro_batches);
      const auto slots = [m](double stages) { return (m + stages - 1.0) / (stages * m); };
      terms.compute = slots(n) / slots(n0);
      // Messages on the critical path; their sizes are fixed, so latency and bandwidth are
      // one term (γ has no column of its own).
      terms.hops = n > 1 ? 2.0 * (m + n - 2.0) : 0.0;
      terms.volume = 0.0;
      break;
    }
  }
  return terms;
}

using Coefficients = std::array<double, 3>;  // c, α, γ

double Evaluate(const Coefficients& k, const ModelTerms& t, double hidden_ns) {
  const double ring = k[1] * t.hops + k[2] * t.volume;
  return k[0] * t.compute + std::max(0.0, ring - hidden_ns);
}

// The fit's system A·k = b: one row per measured point, one column per coefficient (c, α, γ).
using Design = Eigen::Matrix<double, Eigen::Dynamic, 3>;

// A column whose part independent of the other columns is below this fraction of its length
// counts as dependent, and the subset as singular: 10⁻¹⁰ on the normal equations' pivots,
// the squares of R's diagonal, so the same subsets are refused, but the solve no longer
// squares the condition number.
constexpr double kDependentColumn = 1e-5;

// Least squares of A·k = b over the columns in `free` (others 0), by a column-pivoting
// Householder QR; false when the columns are dependent. Columns are scaled to unit length
// first, so the dependence test does not depend on the units (ns against 1/ns).
bool SolveSubset(const Design& a, const Eigen::VectorXd& b, const std::array<bool, 3>& free, Coefficients& out) {
  std::vector<int> columns;
  for (int c = 0; c < 3; ++c) {
    if (free[c]) columns.push_back(c);
  }
  const auto m = static_cast<Eigen::Index>(columns.size());
  Eigen::MatrixXd scaled(a.rows(), m);
  Eigen::VectorXd scale(m);
  for (Eigen::Index i = 0; i < m; ++i) {
    const double length = a.col(columns[i]).norm();
    if (!(length > 0)) return false;
    scale[i] = 1.0 / length;
    scaled.col(i) = a.col(columns[i]) * scale[i];
  }
  Eigen::ColPivHouseholderQR<Eigen::MatrixXd> qr(scaled);
  qr.setThreshold(kDependentColumn);
  if (qr.rank() < m) return false;
  const Eigen::VectorXd solution = qr.solve(b);
  out = {0, 0, 0};
  for (Eigen::Index i = 0; i < m; ++i) out[columns[i]] = solution[i] * scale[i];
  return true;
}

// Non-negative least squares over three unknowns: the best of every subset whose
// unconstrained solution is non-negative (exact for so few unknowns).
bool SolveNonNegative(const Design& a, const Eigen::VectorXd& b, Coefficients& best) {
  double best_error = INFINITY;
  for (int mask = 1; mask < 8; ++mask) {
    const std::array<bool, 3> free = {(mask & 1) != 0, (mask & 2) != 0, (mask & 4) != 0};
    Coefficients k;
    if (!SolveSubset(a, b, free, k)) continue;
    if (std::any_of(k.begin(), k.end(), [](double v) { return v < 0; })) continue;
    const double error = (a * Eigen::Vector3d(k[0], k[1], k[2]) - b).squaredNorm();
    if (error < best_error) {
      best_error = error;
      best = k;
    }
  }
  return std::isfinite(best_error);
}

}  // namespace

const char* ScalingModeName(ScalingMode mode) { return mode == ScalingMode::kWeak ? "weak" : "strong"; }

const char* CommModelName(CommModel model) {
  switch (model) {
    case CommModel::kRingAllReduce: return "ring all-reduce (DDP)";
    case CommModel::kFsdp: return "all-gather twice and reduce-scatter (FSDP)";
    case CommModel::kReplicaAllReduce: return "pipeline replicas' ring all-reduce";
    case CommModel::kPipeline: return "pipeline stages";
  }
  return "?";
}

double ModelStepTime(const ScalingFit& fit, ScalingMode mode, int smallest_world_size, int world_size) {
  const Coefficients k = {fit.compute_ns, fit.latency_ns, fit.transfer_ns};
  return Evaluate(k, TermsAt(mode, fit.shape, smallest_world_size, world_size), fit.hidden_comm_ns);
}

Result<ScalingFit> FitScalingModel(const ScalingModelInput& input) {
  const size_t count = input.world_sizes.size();
  if (count < static_cast<size_t>(kMinSizesToProject) || input.step_time_ns.size() != count) {
    return InvalidArgument(fmt::format("the scaling model needs {} or more world sizes", kMinSizesToProject));
  }
  for (size_t i = 0; i < count; ++i) {
    if (input.world_sizes[i] <= 0 || !(input.step_time_ns[i] > 0) || !std::isfinite(input.step_time_ns[i])) {
      return InvalidArgument("the scaling model needs a positive world size and step time at every point");
    }
  }
  const int n0 = *std::min_element(input.world_sizes.begin(), input.world_sizes.end());
  const double hidden = std::max(0.0, input.hidden_comm_ns);
  // Which points have exposed ring time (R(N) > H) decides the linear form; start by
  // assuming every multi-rank point does, and repeat until the fit agrees.
  std::vector<bool> exposed(count);
  for (size_t i = 0; i < count; ++i) exposed[i] = input.world_sizes[i] > 1;
  Coefficients k = {0, 0, 0};
  bool solved = false;
  const auto rows = static_cast<Eigen::Index>(count);
  for (int round = 0; round < 8; ++round) {
    Design a(rows, 3);
    Eigen::VectorXd b(rows);
    for (size_t i = 0; i < count; ++i) {
      const auto row = static_cast<Eigen::Index>(i);
      const ModelTerms t = TermsAt(input.mode, input.shape, n0, input.world_sizes[i]);
      // Rows divided by the measured time: least squares on relative residuals.
      const double w = 1.0 / input.step_time_ns[i];
      if (exposed[i]) {
        a.row(row) << t.compute * w, t.hops * w, t.volume * w;
        b[row] = (input.step_time_ns[i] + hidden) * w;
      } else {
        a.row(row) << t.compute * w, 0.0, 0.0;
        b[row] = input.step_time_ns[i] * w;
      }
    }
    if (!SolveNonNegative(a, b, k)) break;
    solved = true;
    bool changed = false;
    for (size_t i = 0; i < count; ++i) {
      const ModelTerms t = TermsAt(input.mode, input.shape, n0, input.world_sizes[i]);
      const bool now = k[1] * t.hops + k[2] * t.volume > hidden;
      changed |= now != exposed[i];
      exposed[i] = now;
    }
    if (!changed) break;
  }
  if (!solved) return InvalidArgument("the scaling model could not be fitted to these points");
  // Flat points fit a ring that stays just under H at every measured size as well as no
  // ring at all, and the two project very differently. Prefer the simpler explanation
  // unless the communication terms really reduce the error.
  const auto squared_error = [&](const Coefficients& candidate) {
    double sum = 0;
    for (size_t i = 0; i < count; ++i) {
      const double fitted = Evaluate(candidate, TermsAt(input.mode, input.shape, n0, input.world_sizes[i]), hidden);
      const double relative = (fitted - input.step_time_ns[i]) / input.step_time_ns[i];
      sum += relative * relative;
    }
    return sum;
  };
  {
    Design a = Design::Zero(rows, 3);
    const Eigen::VectorXd b = Eigen::VectorXd::Ones(rows);
    for (size_t i = 0; i < count; ++i) {
      const double compute = TermsAt(input.mode, input.shape, n0, input.world_sizes[i]).compute;
      a(static_cast<Eigen::Index>(i), 0) = compute / input.step_time_ns[i];
    }
    Coefficients compute_only = {0, 0, 0};
    if (SolveSubset(a, b, {true, false, false}, compute_only) &&
        squared_error(compute_only) <= squared_error(k) * (1 + 1e-6) + 1e-12) {
      k = compute_only;
    }
  }

  ScalingFit fit;
  fit.shape = input.shape;
  fit.compute_ns = k[0];
  fit.latency_ns = k[1];
  fit.transfer_ns = k[2];
  fit.bytes_per_step = input.bytes_per_step;
  fit.hidden_comm_ns = hidden;
  if (k[2] > 0 && input.bytes_per_step > 0) fit.bus_bandwidth_bps = input.bytes_per_step / (k[2] / 1e9);
  double squares = 0;
  for (size_t i = 0; i < count; ++i) {
    const double fitted = Evaluate(k, TermsAt(input.mode, input.shape, n0, input.world_sizes[i]), hidden);
    fit.fitted_step_ns.push_back(fitted);
    const double error = 100.0 * std::abs(fitted - input.step_time_ns[i]) / input.step_time_ns[i];
    squares += error * error;
    fit.max_error_pct = std::max(fit.max_error_pct, error);
  }
  fit.rms_error_pct = std::sqrt(squares / static_cast<double>(count));
  return fit;
}

Result<ScalingTable> ComputeScalingOfRuns(std::vector<ComparableRun> runs) {
  if (runs.size() < 2) return InvalidArgument("scaling needs runs at two or more world sizes");
  std::sort(runs.begin(), runs.end(), [](const ComparableRun& a, const ComparableRun& b) {
    return a.workload.world_size < b.workload.world_size;
  });
  for (size_t i = 0; i < runs.size(); ++i) {
    if (runs[i].workload.world_size <= 0) return InvalidArgument(fmt::format("{}: no world size", runs[i].source));
    const std::optional<double> step = Value(runs[i], "step_time_ns");
    if (!step || !(*step > 0)) return InvalidArgument(fmt::format("{}: no step time to scale", runs[i].source));
    if (i > 0 && runs[i].workload.world_size == runs[i - 1].workload.world_size) {
      return Inconsistent(fmt::format("{} and {} both ran {} ranks", runs[i - 1].source, runs[i].source,
                                      runs[i].workload.world_size));
    }
  }
  std::string model_note;
  const ModelShape shape = ChooseModel(runs, model_note);
  // Samples per rank per step (batch · accumulation): from the workload mark, or else
  // from the step payload's global batch over the world size. A pipeline's ranks share
  // each sample (every stage works on it): the global batch over the world size.
  std::vector<std::optional<int64_t>> per_rank, global;
  for (const ComparableRun& run : runs) {
    const WorkloadIdentity& w = run.workload;
    std::optional<int64_t> samples;
    if (w.strategy == "pipeline") {
      if (w.global_batch && *w.global_batch % w.world_size == 0) samples = *w.global_batch / w.world_size;
    } else if (w.batch_per_rank) {
      samples = *w.batch_per_rank * w.accumulation.value_or(1);
    } else if (w.global_batch && *w.global_batch % w.world_size == 0) {
      samples = *w.global_batch / w.world_size;
    }
    per_rank.push_back(samples);
    global.push_back(w.global_batch);
  }
  ScalingTable table;
  table.model = shape;
  table.model_note = std::move(model_note);
  if (AllEqual(per_rank)) {
    table.mode = ScalingMode::kWeak;
    table.mode_reason = fmt::format("weak scaling: every run has {} samples per rank per step", *per_rank.front());
  } else if (AllEqual(global)) {
    table.mode = ScalingMode::kStrong;
    table.mode_reason = fmt::format("strong scaling: every run has a global batch of {}", *global.front());
  } else if (NoneKnown(per_rank) && NoneKnown(global)) {
    // DDP keeps the per-rank batch; without any batch information assume it did.
    table.mode = ScalingMode::kWeak;
    table.mode_reason = "weak scaling assumed: the runs record no batch sizes";
    table.warnings.push_back("no run records its batch size: efficiency is from step times, T(N0) / T(N)");
  } else {
    return Inconsistent("the runs differ in both per-rank and global batch: not one workload");
  }

  const ComparableRun& smallest = runs.front();
  EfficiencyBase base;
  base.mode = table.mode;
  base.n0 = smallest.workload.world_size;
  base.t0 = *Value(smallest, "step_time_ns");
  base.x0 = Value(smallest, "throughput");
  for (ComparableRun& run : runs) {
    ScalingPoint point;
    point.world_size = run.workload.world_size;
    point.run = run.source;
    point.global_batch = run.workload.global_batch;
    point.throughput = Value(run, "throughput");
    point.step_time_ns = Value(run, "step_time_ns");
    const double n = point.world_size;
    point.efficiency = EfficiencyOf(base, n, *point.step_time_ns, point.throughput);
    if (base.x0) point.ideal_throughput = n / base.n0 * *base.x0;
    point.comm_compute_ratio = Value(run, "comm_compute_ratio");
    point.exposed_comm_ns = Value(run, "exposed_comm_ns");
    point.overlap_pct = Value(run, "overlap_pct");
    point.wait_ns = Value(run, "wait_ns");

    // Per-step efficiency against the smallest run's median, for compare's U test.
    ComparableMetric efficiency{"efficiency", *point.efficiency, {}};
    const ComparableMetric* steps = run.Find("step_time_ns");
    const ComparableMetric* throughput = run.Find("throughput");
    if (throughput && base.x0 && table.mode == ScalingMode::kWeak) {
      for (const double x : throughput->samples) efficiency.samples.push_back(EfficiencyOf(base, n, 1, x));
    } else if (steps) {
      for (const double t : steps->samples) {
        if (t > 0) efficiency.samples.push_back(EfficiencyOf(base, n, t, std::nullopt));
      }
    }
    std::erase_if(run.metrics, [](const ComparableMetric& m) { return m.name == "efficiency"; });
    run.metrics.push_back(std::move(efficiency));
    table.points.push_back(std::move(point));
  }

  if (runs.size() < static_cast<size_t>(kMinSizesToProject)) {
    table.projection_note = fmt::format(
        "no projection: it needs runs at {} or more world sizes, and {} were measured", kMinSizesToProject,
        runs.size());
  } else {
    ScalingModelInput input;
    input.mode = table.mode;
    input.shape = shape;
    std::vector<double> bytes;
    for (const ComparableRun& run : runs) {
      input.world_sizes.push_back(run.workload.world_size);
      input.step_time_ns.push_back(*Value(run, "step_time_ns"));
      // Pipelines with more replicas: their stages' all-reduces, not the messages between
      // stages, are what the model's volume term moves.
      const std::optional<double>& moved =
          shape.comm == CommModel::kReplicaAllReduce ? run.allreduce_bytes_per_step : run.model_bytes_per_step;
      if (moved) bytes.push_back(*moved);
    }
    input.bytes_per_step = bytes.empty() ? 0.0 : ComputeStats(bytes).median;
    // A pipeline's sends and receives block its stages: nothing is hidden.
    input.hidden_comm_ns =
        shape.comm == CommModel::kPipeline ? 0.0 : Value(runs.back(), "overlap_ns").value_or(0.0);
    Result<ScalingFit> fit = FitScalingModel(input);
    if (!fit.ok()) {
      table.projection_note = "no projection: " + fit.status().message();
    } else {
      ScalingProjection projection;
      projection.fit = *fit;
      const int n0 = runs.front().workload.world_size;
      const int largest = runs.back().workload.world_size;
      const double model_t0 = ModelStepTime(*fit, table.mode, n0, n0);
      for (const int factor : {2, 4}) {
        ProjectedPoint point;
        point.world_size = largest * factor;
        point.step_time_ns = ModelStepTime(*fit, table.mode, n0, point.world_size);
        // Efficiency as a ratio of model times, so the fit's error at N0 does not bias it.
        const double n = point.world_size;
        point.efficiency = table.mode == ScalingMode::kWeak ? model_t0 / point.step_time_ns
                                                            : n0 * model_t0 / (n * point.step_time_ns);
        const ComparableRun& last = runs.back();
        if (table.mode == ScalingMode::kWeak && per_rank.back()) {
          point.throughput = static_cast<double>(*per_rank.back()) * n / (point.step_time_ns / 1e9);
        } else if (table.mode == ScalingMode::kStrong && last.workload.global_batch) {
          point.throughput = static_cast<double>(*last.workload.global_batch) / (point.step_time_ns / 1e9);
        }
        projection.points.push_back(point);
      }
      std::vector<std::string> notes;
      // Below this error the fit counts as meeting the points exactly.
      constexpr double kExactFitPct = 0.01;
      if (runs.size() == 3 && fit->max_error_pct < kExactFitPct) {
        notes.push_back(
            "3 sizes for the model's 3 parameters: the fit meets every point, so its error cannot test the "
            "model; measure 4 or more sizes to check it");
      } else if (runs.size() == 3) {
        notes.push_back(fmt::format(
            "3 sizes for the model's 3 parameters, yet the fit misses by up to {:.1f}%: the step times do not "
            "take the model's shape (compute plus a ring all-reduce), so the projection is a rough guide",
            fit->max_error_pct));
      }
      if (input.bytes_per_step <= 0 && shape.comm != CommModel::kPipeline) {
        notes.push_back(
            "the runs record no communication sizes: the bandwidth term is fitted as a time, without a bandwidth");
      }
      table.projection_note = fmt::format("{}", fmt::join(notes, "; "));
      table.projection = std::move(projection);
    }
  }
  table.runs = std::move(runs);
  return table;
}

Result<ScalingTable> ComputeScaling(const std::vector<const Report*>& reports) {
  std::vector<ComparableRun> runs;
  runs.reserve(reports.size());
  for (const Report* report : reports) runs.push_back(MakeComparable(*report));
  return ComputeScalingOfRuns(std::move(runs));
}

}  // namespace rankscope::compare
