// compare/scaling.h: docs/metrics.md §6 on hand-built reports. Weak scaling (per-rank batch
// fixed): E(N) = X(N) / (N/N0 · X(N0)); strong scaling (global batch fixed):
// E(N) = N0 · T(N0) / (N · T(N)).
#include "compare/scaling.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "analyzer/report.h"
#include "tests/comparable_run_builder.h"

namespace rankscope::compare {

using analyzer::Report;
namespace {

constexpr double kMs = 1e6;

struct RunShape {
  int world_size = 1;
  std::optional<int64_t> batch_per_rank;
  std::optional<int64_t> global_batch;
  std::optional<double> step_time_ns;
  std::optional<double> throughput;  // samples/s
};

Report MakeReport(const RunShape& shape) {
  Report r;
  r.run.directory = "runs/n" + std::to_string(shape.world_size);
  r.run.run_id = "run-" + std::to_string(shape.world_size);
  r.run.world_size = shape.world_size;
  for (int rank = 0; rank < shape.world_size; ++rank) r.run.ranks.push_back(rank);
  r.workload.world_size = shape.world_size;
  r.workload.batch_per_rank = shape.batch_per_rank;
  r.workload.global_batch = shape.global_batch;
  if (shape.batch_per_rank || shape.global_batch) {
    r.workload.accumulation = 1;
    r.workload.source = "workload mark";
  }
  r.summary.ranks = shape.world_size;
  r.summary.steps = 10;
  r.summary.step_time_ns = shape.step_time_ns;
  r.summary.throughput = shape.throughput;
  return r;
}

std::vector<const Report*> Pointers(const std::vector<Report>& reports) {
  std::vector<const Report*> pointers;
  for (const Report& r : reports) pointers.push_back(&r);
  return pointers;
}

// Weak scaling, 32 samples per rank. X(1) = 1000/s, X(2) = 1900/s, X(4) = 3600/s, so the
// step times are global batch / X: 32/1000 s = 32 ms, 64/1900 s, 128/3600 s.
std::vector<Report> WeakRuns() {
  std::vector<Report> reports;
  for (const auto& [n, x] : std::vector<std::pair<int, double>>{{4, 3600.0}, {1, 1000.0}, {2, 1900.0}}) {
    const int64_t global = 32 * n;
    reports.push_back(MakeReport({n, 32, global, static_cast<double>(global) / x * 1e9, x}));
  }
  return reports;  // deliberately not in world-size order
}

TEST(ComputeScaling, WeakModeWhenThePerRankBatchIsTheSame) {
  const std::vector<Report> reports = WeakRuns();
  const Result<ScalingTable> table = ComputeScaling(Pointers(reports));
  ASSERT_TRUE(table.ok()) << table.status().message();
  EXPECT_EQ(table->mode, ScalingMode::kWeak);
  EXPECT_FALSE(table->mode_reason.empty());
  ASSERT_EQ(table->points.size(), 3u);
  // Sorted by world size.
  EXPECT_EQ(table->points[0].world_size, 1);
  EXPECT_EQ(table->points[1].world_size, 2);
  EXPECT_EQ(table->points[2].world_size, 4);
  EXPECT_EQ(table->points[0].run, "runs/n1");
  EXPECT_EQ(table->points[2].run, "runs/n4");
  EXPECT_EQ(table->points[0].global_batch, 32);
  EXPECT_EQ(table->points[1].global_batch, 64);
  EXPECT_EQ(table->points[2].global_batch, 128);

  const ScalingPoint& p1 = table->points[0];
  const ScalingPoint& p2 = table->points[1];
  const ScalingPoint& p4 = table->points[2];
  ASSERT_TRUE(p1.throughput && p2.throughput && p4.throughput);
  EXPECT_NEAR(*p1.throughput, 1000.0, 1e-6);
  EXPECT_NEAR(*p2.throughput, 1900.0, 1e-6);
  EXPECT_NEAR(*p4.throughput, 3600.0, 1e-6);
  ASSERT_TRUE(p1.step_time_ns && p4.step_time_ns);
  EXPECT_NEAR(*p1.step_time_ns, 32 * kMs, 1e-3);  // 32 / 1000 s
  EXPECT_NEAR(*p4.step_time_ns, 128.0 / 3600.0 * 1e9, 1e-3);

  ASSERT_TRUE(p1.efficiency && p2.efficiency && p4.efficiency);
  EXPECT_NEAR(*p1.efficiency, 1.0, 1e-12);                     // the baseline N0 = 1
  EXPECT_NEAR(*p2.efficiency, 1900.0 / (2.0 * 1000.0), 1e-12);  // 0.95
  EXPECT_NEAR(*p4.efficiency, 3600.0 / (4.0 * 1000.0), 1e-12);  // 0.90
  ASSERT_TRUE(p1.ideal_throughput && p2.ideal_throughput && p4.ideal_throughput);
  EXPECT_NEAR(*p1.ideal_throughput, 1000.0, 1e-9);  // N/N0 · X(N0)
  EXPECT_NEAR(*p2.ideal_throughput, 2000.0, 1e-9);
  EXPECT_NEAR(*p4.ideal_throughput, 4000.0, 1e-9);
}

TEST(ComputeScaling, WeakBaselineIsTheSmallestRunNotOne) {
  // N = 2, 4, 8 at 16 samples per rank; X = 800, 1500, 2800. N0 = 2:
  // E(4) = 1500 / (4/2 · 800) = 0.9375, E(8) = 2800 / (8/2 · 800) = 0.875.
  std::vector<Report> reports;
  for (const auto& [n, x] : std::vector<std::pair<int, double>>{{2, 800.0}, {4, 1500.0}, {8, 2800.0}}) {
    const int64_t global = 16 * n;
    reports.push_back(MakeReport({n, 16, global, static_cast<double>(global) / x * 1e9, x}));
  }
  const Result<ScalingTable> table = ComputeScaling(Pointers(reports));
  ASSERT_TRUE(table.ok()) << table.status().message();
  EXPECT_EQ(table->mode, ScalingMode::kWeak);
  ASSERT_EQ(table->points.size(), 3u);
  EXPECT_NEAR(table->points[0].efficiency.value_or(-1), 1.0, 1e-12);
  EXPECT_NEAR(table->points[1].efficiency.value_or(-1), 0.9375, 1e-12);
  EXPECT_NEAR(table->points[2].efficiency.value_or(-1), 0.875, 1e-12);
  EXPECT_NEAR(table->points[2].ideal_throughput.value_or(-1), 3200.0, 1e-9);  // 8/2 · 800
}

TEST(ComputeScaling, StrongModeWhenTheGlobalBatchIsTheSame) {
  // Global batch 128 at N = 2, 4, 8 (64, 32, 16 per rank); T = 100, 55, 32 ms.
  std::vector<Report> reports;
  for (const auto& [n, t_ms] : std::vector<std::pair<int, double>>{{8, 32.0}, {2, 100.0}, {4, 55.0}}) {
    const double t = t_ms * kMs;
    reports.push_back(MakeReport({n, 128 / n, 128, t, 128.0 / (t / 1e9)}));
  }
  const Result<ScalingTable> table = ComputeScaling(Pointers(reports));
  ASSERT_TRUE(table.ok()) << table.status().message();
  EXPECT_EQ(table->mode, ScalingMode::kStrong);
  EXPECT_FALSE(table->mode_reason.empty());
  ASSERT_EQ(table->points.size(), 3u);
  EXPECT_EQ(table->points[0].world_size, 2);
  EXPECT_EQ(table->points[1].world_size, 4);
  EXPECT_EQ(table->points[2].world_size, 8);
  for (const ScalingPoint& p : table->points) {
    EXPECT_EQ(p.global_batch, 128);
  }

  ASSERT_TRUE(table->points[0].efficiency && table->points[1].efficiency && table->points[2].efficiency);
  EXPECT_NEAR(*table->points[0].efficiency, 1.0, 1e-12);
  EXPECT_NEAR(*table->points[1].efficiency, 2.0 * 100 / (4.0 * 55), 1e-12);  // 0.90909...
  EXPECT_NEAR(*table->points[2].efficiency, 2.0 * 100 / (8.0 * 32), 1e-12);  // 0.78125
  // X(N0) · N/N0 with X(2) = 128 / 0.1 s = 1280/s.
  ASSERT_TRUE(table->points[2].ideal_throughput.has_value());
  EXPECT_NEAR(*table->points[0].ideal_throughput, 1280.0, 1e-6);
  EXPECT_NEAR(*table->points[1].ideal_throughput, 2560.0, 1e-6);
  EXPECT_NEAR(*table->points[2].ideal_throughput, 5120.0, 1e-6);
  EXPECT_NEAR(table->points[2].throughput.value_or(-1), 4000.0, 1e-6);  // 128 / 0.032 s
}

TEST(ComputeScaling, WeakWithoutABatchUsesStepTimes) {
  // No batch known: E = T(N0) / T(N) = 100 / 125 = 0.8 and 100 / 160 = 0.625.
  std::vector<Report> reports = {MakeReport({1, std::nullopt, std::nullopt, 100 * kMs, std::nullopt}),
                                 MakeReport({2, std::nullopt, std::nullopt, 125 * kMs, std::nullopt}),
                                 MakeReport({4, std::nullopt, std::nullopt, 160 * kMs, std::nullopt})};
  const Result<ScalingTable> table = ComputeScaling(Pointers(reports));
  ASSERT_TRUE(table.ok()) << table.status().message();
  EXPECT_EQ(table->mode, ScalingMode::kWeak);
  ASSERT_EQ(table->points.size(), 3u);
  EXPECT_NEAR(table->points[0].efficiency.value_or(-1), 1.0, 1e-12);
  EXPECT_NEAR(table->points[1].efficiency.value_or(-1), 0.8, 1e-12);
  EXPECT_NEAR(table->points[2].efficiency.value_or(-1), 0.625, 1e-12);
  EXPECT_FALSE(table->points[1].throughput.has_value());
  EXPECT_FALSE(table->points[1].global_batch.has_value());
}

TEST(ComputeScaling, CarriesTheRunMetricMedians) {
  std::vector<Report> reports = WeakRuns();
  for (Report& r : reports) {
    const double n = *r.run.world_size;
    r.summary.metrics = {
        {"comm_compute_ratio", 0.1 * n, 0.2 * n, 1, 0, false},
        {"exposed_comm_ns", 1000.0 * n, 2000.0 * n, 1, 0, false},
        {"overlap_pct", 90.0 - n, 80.0 - n, 1, 0, true},
        {"wait_ns", 50.0 * n, 70.0 * n, 1, 0, false},
    };
  }
  const Result<ScalingTable> table = ComputeScaling(Pointers(reports));
  ASSERT_TRUE(table.ok()) << table.status().message();
  ASSERT_EQ(table->points.size(), 3u);
  const ScalingPoint& p4 = table->points[2];  // N = 4: the medians, not the worst values
  EXPECT_NEAR(p4.comm_compute_ratio.value_or(-1), 0.4, 1e-12);
  EXPECT_NEAR(p4.exposed_comm_ns.value_or(-1), 4000.0, 1e-9);
  EXPECT_NEAR(p4.overlap_pct.value_or(-1), 86.0, 1e-12);
  EXPECT_NEAR(p4.wait_ns.value_or(-1), 200.0, 1e-9);
  const ScalingPoint& p1 = table->points[0];
  EXPECT_NEAR(p1.comm_compute_ratio.value_or(-1), 0.1, 1e-12);
  EXPECT_NEAR(p1.wait_ns.value_or(-1), 50.0, 1e-9);
}

TEST(ComputeScaling, MissingRunMetricsStayEmpty) {
  const std::vector<Report> reports = WeakRuns();  // no summary.metrics at all
  const Result<ScalingTable> table = ComputeScaling(Pointers(reports));
  ASSERT_TRUE(table.ok()) << table.status().message();
  for (const ScalingPoint& p : table->points) {
    EXPECT_FALSE(p.comm_compute_ratio.has_value());
    EXPECT_FALSE(p.exposed_comm_ns.has_value());
    EXPECT_FALSE(p.overlap_pct.has_value());
    EXPECT_FALSE(p.wait_ns.has_value());
  }
}

TEST(ComputeScaling, FewerThanTwoRunsIsAnError) {
  EXPECT_FALSE(ComputeScaling({}).ok());
  const Report one = MakeReport({2, 32, 64, 50 * kMs, 1280.0});
  const Result<ScalingTable> table = ComputeScaling({&one});
  ASSERT_FALSE(table.ok());
  EXPECT_FALSE(table.status().message().empty());
}

TEST(ComputeScaling, TwoRunsOfOneWorldSizeIsAnError) {
  const Report a = MakeReport({2, 32, 64, 50 * kMs, 1280.0});
  Report b = MakeReport({2, 32, 64, 52 * kMs, 1230.0});
  b.run.directory = "runs/n2-again";
  const Report c = MakeReport({4, 32, 128, 55 * kMs, 2327.0});
  const Result<ScalingTable> table = ComputeScaling({&a, &b, &c});
  ASSERT_FALSE(table.ok());
  EXPECT_FALSE(table.status().message().empty());
}

TEST(ComputeScaling, BatchesThatFitNeitherModeAreAnError) {
  // Per-rank 32 vs 64 and global 64 vs 256: neither weak nor strong.
  const Report a = MakeReport({2, 32, 64, 50 * kMs, 1280.0});
  const Report b = MakeReport({4, 64, 256, 60 * kMs, 4266.0});
  const Result<ScalingTable> table = ComputeScaling({&a, &b});
  ASSERT_FALSE(table.ok());
  EXPECT_FALSE(table.status().message().empty());
}

TEST(ComputeScaling, ARunWithoutAStepTimeIsAnError) {
  const Report a = MakeReport({2, 32, 64, 50 * kMs, 1280.0});
  const Report b = MakeReport({4, 32, 128, std::nullopt, std::nullopt});
  const Result<ScalingTable> table = ComputeScaling({&a, &b});
  ASSERT_FALSE(table.ok());
  EXPECT_FALSE(table.status().message().empty());
}

// ---- the projection (docs/metrics.md §6) ----------------------------------------------------

// Step times made by the model itself: T(N) = c·g(N) + max(0, 2(N−1)α + 2(N−1)/N·γ − H).
double ModelTime(ScalingMode mode, int n0, int n, double c, double alpha, double gamma, double hidden) {
  const double compute = mode == ScalingMode::kWeak ? c : c * n0 / n;
  return compute + std::max(0.0, 2.0 * (n - 1) * alpha + 2.0 * (n - 1) / n * gamma - hidden);
}

TEST(FitScalingModel, RecoversTheModelThatMadeThePoints) {
  // T_c = 100 ms, α = 0.5 ms per hop, S/B = 20 ms (S = 40 MB at B = 2 GB/s), H = 5 ms.
  ScalingModelInput input;
  input.mode = ScalingMode::kWeak;
  input.bytes_per_step = 40e6;
  input.hidden_comm_ns = 5 * kMs;
  for (const int n : {1, 2, 4, 8}) {
    input.world_sizes.push_back(n);
    input.step_time_ns.push_back(ModelTime(ScalingMode::kWeak, 1, n, 100 * kMs, 0.5 * kMs, 20 * kMs, 5 * kMs));
  }
  const Result<ScalingFit> fit = FitScalingModel(input);
  ASSERT_TRUE(fit.ok()) << fit.status().message();
  EXPECT_NEAR(fit->compute_ns, 100 * kMs, 1e-3 * kMs);
  EXPECT_NEAR(fit->latency_ns, 0.5 * kMs, 1e-3 * kMs);
  EXPECT_NEAR(fit->transfer_ns, 20 * kMs, 1e-3 * kMs);
  ASSERT_TRUE(fit->bus_bandwidth_bps.has_value());
  EXPECT_NEAR(*fit->bus_bandwidth_bps, 2e9, 1e3);
  EXPECT_NEAR(fit->rms_error_pct, 0, 1e-6);
  EXPECT_NEAR(fit->max_error_pct, 0, 1e-6);
  ASSERT_EQ(fit->fitted_step_ns.size(), 4u);
  // The model projects where the points came from.
  EXPECT_NEAR(ModelStepTime(*fit, ScalingMode::kWeak, 1, 32),
              ModelTime(ScalingMode::kWeak, 1, 32, 100 * kMs, 0.5 * kMs, 20 * kMs, 5 * kMs), 1e-2 * kMs);
}

TEST(FitScalingModel, StrongScalingShrinksTheComputePart) {
  ScalingModelInput input;
  input.mode = ScalingMode::kStrong;
  for (const int n : {2, 4, 8}) {
    input.world_sizes.push_back(n);
    input.step_time_ns.push_back(ModelTime(ScalingMode::kStrong, 2, n, 200 * kMs, 1 * kMs, 10 * kMs, 0));
  }
  const Result<ScalingFit> fit = FitScalingModel(input);
  ASSERT_TRUE(fit.ok()) << fit.status().message();
  EXPECT_NEAR(fit->compute_ns, 200 * kMs, 1e-3 * kMs);
  EXPECT_NEAR(ModelStepTime(*fit, ScalingMode::kStrong, 2, 32),
              ModelTime(ScalingMode::kStrong, 2, 32, 200 * kMs, 1 * kMs, 10 * kMs, 0), 1e-2 * kMs);
  // Without S, the bandwidth term is a time only.
  EXPECT_FALSE(fit->bus_bandwidth_bps.has_value());
  EXPECT_NEAR(fit->transfer_ns, 10 * kMs, 1e-3 * kMs);
}

TEST(FitScalingModel, ReportsItsErrorOnNoisyPoints) {
  ScalingModelInput input;
  const std::vector<int> sizes = {1, 2, 3, 4, 6};
  const std::vector<double> noise = {1.03, 0.97, 1.02, 0.98, 1.01};
  for (size_t i = 0; i < sizes.size(); ++i) {
    input.world_sizes.push_back(sizes[i]);
    input.step_time_ns.push_back(noise[i] * ModelTime(ScalingMode::kWeak, 1, sizes[i], 50 * kMs, 0.2 * kMs, 5 * kMs, 0));
  }
  const Result<ScalingFit> fit = FitScalingModel(input);
  ASSERT_TRUE(fit.ok()) << fit.status().message();
  EXPECT_GT(fit->rms_error_pct, 0.1);
  EXPECT_LT(fit->rms_error_pct, 5);
  EXPECT_GE(fit->max_error_pct, fit->rms_error_pct);
  EXPECT_GE(fit->latency_ns, 0);
  EXPECT_GE(fit->transfer_ns, 0);
}

TEST(FitScalingModel, CommunicationHiddenEverywhereLeavesComputeOnly) {
  // Every step takes 80 ms whatever N: the fit needs no communication term.
  ScalingModelInput input;
  input.hidden_comm_ns = 30 * kMs;
  for (const int n : {1, 2, 4}) {
    input.world_sizes.push_back(n);
    input.step_time_ns.push_back(80 * kMs);
  }
  const Result<ScalingFit> fit = FitScalingModel(input);
  ASSERT_TRUE(fit.ok()) << fit.status().message();
  EXPECT_NEAR(fit->compute_ns, 80 * kMs, 1e-3 * kMs);
  EXPECT_NEAR(ModelStepTime(*fit, ScalingMode::kWeak, 1, 16), 80 * kMs, 1e-2 * kMs);
}

TEST(FitScalingModel, RefusesFewerThanThreeSizesAndBadPoints) {
  ScalingModelInput two;
  two.world_sizes = {1, 2};
  two.step_time_ns = {10 * kMs, 12 * kMs};
  EXPECT_FALSE(FitScalingModel(two).ok());
  ScalingModelInput zero;
  zero.world_sizes = {1, 2, 4};
  zero.step_time_ns = {10 * kMs, 0, 12 * kMs};
  EXPECT_FALSE(FitScalingModel(zero).ok());
}

TEST(FitScalingModel, RecoversExactPointsOfANearlyCollinearDesign) {
  // Weak scaling at thousands of ranks: the transfer column 2(N−1)/N is nearly twice the
  // constant compute column (condition number about 10⁴). Solving the normal equations
  // squares that and got γ wrong in the 8th digit; a QR of the weighted design does not.
  const double compute = 100 * kMs, latency = 20e3, transfer = 5 * kMs;
  ScalingModelInput input;
  input.mode = ScalingMode::kWeak;
  for (const int n : {1024, 2048, 4096, 8192}) {
    input.world_sizes.push_back(n);
    input.step_time_ns.push_back(ModelTime(ScalingMode::kWeak, 1024, n, compute, latency, transfer, 0));
  }
  const Result<ScalingFit> fit = FitScalingModel(input);
  ASSERT_TRUE(fit.ok()) << fit.status().message();
  EXPECT_NEAR(fit->compute_ns / compute, 1.0, 1e-9);
  EXPECT_NEAR(fit->latency_ns / latency, 1.0, 1e-9);
  EXPECT_NEAR(fit->transfer_ns / transfer, 1.0, 1e-9);
  ASSERT_EQ(fit->fitted_step_ns.size(), input.step_time_ns.size());
  for (size_t i = 0; i < input.step_time_ns.size(); ++i) {
    EXPECT_NEAR(fit->fitted_step_ns[i] / input.step_time_ns[i], 1.0, 1e-9) << input.world_sizes[i];
  }
}

TEST(ComputeScaling, ProjectsTwiceAndFourTimesTheLargestSize) {
  const std::vector<Report> reports = WeakRuns();
  const Result<ScalingTable> table = ComputeScaling(Pointers(reports));
  ASSERT_TRUE(table.ok()) << table.status().message();
  ASSERT_TRUE(table->projection.has_value()) << table->projection_note;
  ASSERT_EQ(table->projection->points.size(), 2u);
  EXPECT_EQ(table->projection->points[0].world_size, 8);
  EXPECT_EQ(table->projection->points[1].world_size, 16);
  // Efficiency keeps falling as communication grows: below the measured 0.90 at N = 4.
  EXPECT_LT(table->projection->points[0].efficiency, 0.90 + 1e-9);
  EXPECT_LE(table->projection->points[1].efficiency, table->projection->points[0].efficiency);
  EXPECT_GT(table->projection->points[1].efficiency, 0);
  // Weak scaling with 32 samples per rank: throughput = 32 · N / T.
  ASSERT_TRUE(table->projection->points[0].throughput.has_value());
  EXPECT_NEAR(*table->projection->points[0].throughput, 32.0 * 8 / (table->projection->points[0].step_time_ns / 1e9),
              1e-6);
  ASSERT_EQ(table->projection->fit.fitted_step_ns.size(), 3u);
  // Three points for three parameters: the report says the fit error proves nothing.
  EXPECT_NE(table->projection_note.find("cannot test the model"), std::string::npos) << table->projection_note;
}

// Slower at 2 ranks than at 4: no non-negative latency and bandwidth meet all three points,
// so the note must not claim the fit is exact.
TEST(ComputeScaling, ThreeSizesTheModelMissesAreNotCalledExact) {
  std::vector<Report> reports;
  for (const auto& [n, step_ms] : std::vector<std::pair<int, double>>{{1, 10.0}, {2, 16.0}, {4, 11.0}}) {
    const int64_t global = 32 * n;
    reports.push_back(MakeReport({n, 32, global, step_ms * kMs, static_cast<double>(global) / (step_ms / 1e3)}));
  }
  const Result<ScalingTable> table = ComputeScaling(Pointers(reports));
  ASSERT_TRUE(table.ok()) << table.status().message();
  ASSERT_TRUE(table->projection.has_value()) << table->projection_note;
  EXPECT_GT(table->projection->fit.max_error_pct, 1.0);
  EXPECT_EQ(table->projection_note.find("meets every point"), std::string::npos) << table->projection_note;
  EXPECT_NE(table->projection_note.find("yet the fit misses by up to"), std::string::npos) << table->projection_note;
}

TEST(ComputeScaling, DoesNotProjectFromTwoSizes) {
  const Report a = MakeReport({1, 32, 32, 32 * kMs, 1000.0});
  const Report b = MakeReport({2, 32, 64, 34 * kMs, 64.0 / 0.034});
  const Result<ScalingTable> table = ComputeScaling({&a, &b});
  ASSERT_TRUE(table.ok()) << table.status().message();
  EXPECT_FALSE(table->projection.has_value());
  EXPECT_NE(table->projection_note.find("3 or more"), std::string::npos) << table->projection_note;
}

TEST(ComputeScaling, EachRunGainsAnEfficiencyFigure) {
  const std::vector<Report> reports = WeakRuns();
  const Result<ScalingTable> table = ComputeScaling(Pointers(reports));
  ASSERT_TRUE(table.ok()) << table.status().message();
  ASSERT_EQ(table->runs.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    const ComparableMetric* efficiency = table->runs[i].Find("efficiency");
    ASSERT_NE(efficiency, nullptr);
    EXPECT_DOUBLE_EQ(efficiency->value, *table->points[i].efficiency);
  }
}

TEST(ScalingModeName, NamesBothModes) {
  const std::string weak = ScalingModeName(ScalingMode::kWeak);
  const std::string strong = ScalingModeName(ScalingMode::kStrong);
  EXPECT_FALSE(weak.empty());
  EXPECT_FALSE(strong.empty());
  EXPECT_NE(weak, strong);
}

// ---- the projection per strategy ------------------------------------------------------------

TEST(FitScalingModel, FsdpGathersTwiceAndScattersOnce) {
  // T(N) = 100 ms + max(0, 3(N−1)·0.2 ms + 3(N−1)/N·10 ms − 4 ms); S = 20 MB of parameters, so
  // B = S / (S/B) = 2 GB/s.
  ScalingModelInput input;
  input.mode = ScalingMode::kWeak;
  input.shape.comm = CommModel::kFsdp;
  input.bytes_per_step = 20e6;
  input.hidden_comm_ns = 4 * kMs;
  const auto model = [](int n) { return 100 * kMs + std::max(0.0, 3.0 * (n - 1) * 0.2 * kMs + 3.0 * (n - 1) / n * 10 * kMs - 4 * kMs); };
  for (const int n : {1, 2, 4, 8}) {
    input.world_sizes.push_back(n);
    input.step_time_ns.push_back(model(n));
  }
  const Result<ScalingFit> fit = FitScalingModel(input);
  ASSERT_TRUE(fit.ok()) << fit.status().message();
  EXPECT_EQ(fit->shape.comm, CommModel::kFsdp);
  EXPECT_NEAR(fit->compute_ns, 100 * kMs, 1e-3 * kMs);
  EXPECT_NEAR(fit->latency_ns, 0.2 * kMs, 1e-3 * kMs);
  EXPECT_NEAR(fit->transfer_ns, 10 * kMs, 1e-3 * kMs);
  ASSERT_TRUE(fit->bus_bandwidth_bps.has_value());
  EXPECT_NEAR(*fit->bus_bandwidth_bps, 2e9, 1e3);
  EXPECT_NEAR(ModelStepTime(*fit, ScalingMode::kWeak, 1, 32), model(32), 1e-2 * kMs);
}

TEST(FitScalingModel, APipelineSplitsTheModelAndPaysItsBubble) {
  // One pipeline of N stages, M = 8: T(N) = 120 ms · ((8+N−1)/(8N)) / ((8+1−1)/8) + 2(8+N−2)·0.3 ms.
  ScalingModelInput input;
  input.mode = ScalingMode::kStrong;
  input.shape.comm = CommModel::kPipeline;
  input.shape.micro_batches = 8;
  const auto model = [](int n) {
    const double slots = (8.0 + n - 1) / (8.0 * n);
    return 120 * kMs * slots / 1.0 + (n > 1 ? 2.0 * (8 + n - 2) * 0.3 * kMs : 0.0);
  };
  for (const int n : {1, 2, 4}) {
    input.world_sizes.push_back(n);
    input.step_time_ns.push_back(model(n));
  }
  const Result<ScalingFit> fit = FitScalingModel(input);
  ASSERT_TRUE(fit.ok()) << fit.status().message();
  EXPECT_NEAR(fit->compute_ns, 120 * kMs, 1e-3 * kMs);
  EXPECT_NEAR(fit->latency_ns, 0.3 * kMs, 1e-3 * kMs);
  EXPECT_EQ(fit->transfer_ns, 0);  // message sizes are fixed: no bandwidth term of its own
  EXPECT_FALSE(fit->bus_bandwidth_bps.has_value());
  // 8 stages: 120 ms · 15/64 + 2 · 14 · 0.3 ms = 28.125 + 8.4 ms.
  EXPECT_NEAR(ModelStepTime(*fit, ScalingMode::kStrong, 1, 8), (28.125 + 8.4) * kMs, 1e-2 * kMs);
}

compare::ComparableRun RunOf(int n, double step_ms) {
  rankscope::testing::WeakRunSpec spec;
  spec.world_size = n;
  spec.step_ms = {step_ms};
  return rankscope::testing::MakeWeakRun(spec);
}

compare::ComparableRun PipelineRun(int n, double step_ms, std::optional<int64_t> stages) {
  compare::ComparableRun run = RunOf(n, step_ms);
  run.workload.strategy = "pipeline";
  run.workload.stages = stages;
  run.workload.micro_batches = 4;
  run.workload.batch_per_rank = 16;
  const int64_t replicas = n / stages.value_or(1);
  run.workload.global_batch = 16 * 4 * replicas;
  return run;
}

TEST(ComputeScaling, TheStrategyChoosesTheModel) {
  // One pipeline growing by stages: the same global batch split, so strong scaling, and the
  // pipeline model.
  Result<ScalingTable> pipeline = ComputeScalingOfRuns(
      {PipelineRun(1, 100, std::nullopt), PipelineRun(2, 60, 2), PipelineRun(4, 40, 4)});
  ASSERT_TRUE(pipeline.ok()) << pipeline.status().message();
  EXPECT_EQ(pipeline->mode, ScalingMode::kStrong);
  EXPECT_EQ(pipeline->model.comm, CommModel::kPipeline);
  EXPECT_EQ(pipeline->model.micro_batches, 4);
  EXPECT_NE(pipeline->model_note.find("one pipeline of N stages, 4 micro-batches"), std::string::npos)
      << pipeline->model_note;
  // Two stages, more replicas: each stage's all-reduce over N/2 replicas.
  Result<ScalingTable> replicas =
      ComputeScalingOfRuns({PipelineRun(2, 60, 2), PipelineRun(4, 62, 2), PipelineRun(8, 65, 2)});
  ASSERT_TRUE(replicas.ok()) << replicas.status().message();
  EXPECT_EQ(replicas->model.comm, CommModel::kReplicaAllReduce);
  EXPECT_EQ(replicas->model.stages, 2);
  // FSDP, and a mix of strategies (modelled as DDP, saying so).
  std::vector<compare::ComparableRun> fsdp;
  for (const int n : {1, 2, 4}) {
    fsdp.push_back(RunOf(n, 100.0 + n));
    fsdp.back().workload.strategy = "fsdp";
  }
  Result<ScalingTable> sharded = ComputeScalingOfRuns(fsdp);
  ASSERT_TRUE(sharded.ok());
  EXPECT_EQ(sharded->model.comm, CommModel::kFsdp);
  fsdp.back().workload.strategy = "ddp";
  Result<ScalingTable> mixed = ComputeScalingOfRuns(fsdp);
  ASSERT_TRUE(mixed.ok());
  EXPECT_EQ(mixed->model.comm, CommModel::kRingAllReduce);
  EXPECT_EQ(mixed->model_note, "the runs differ in strategy: modelled as DDP's ring all-reduce");
}

}  // namespace
}  // namespace rankscope::compare
