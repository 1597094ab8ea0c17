// Field-by-field equality of two docs/metrics.md §3 breakdowns, for tests that compare two ways
// of computing the same window (range statistics against the analyzer's own).
#pragma once

#include <gtest/gtest.h>

#include "analyzer/report.h"

namespace rankscope::analyzer::testing {

inline void ExpectSameBreakdown(const Breakdown& got, const Breakdown& want) {
  EXPECT_EQ(got.window_ns, want.window_ns);
  EXPECT_EQ(got.compute_ns, want.compute_ns);
  EXPECT_EQ(got.comm_ns, want.comm_ns);
  EXPECT_EQ(got.memory_ns, want.memory_ns);
  EXPECT_EQ(got.overlap_ns, want.overlap_ns);
  EXPECT_EQ(got.exposed_comm_ns, want.exposed_comm_ns);
  EXPECT_EQ(got.busy_ns, want.busy_ns);
  EXPECT_EQ(got.idle_ns, want.idle_ns);
  EXPECT_EQ(got.compute_only_ns, want.compute_only_ns);
  EXPECT_EQ(got.comm_only_ns, want.comm_only_ns);
  EXPECT_EQ(got.memory_only_ns, want.memory_only_ns);
  EXPECT_DOUBLE_EQ(got.overlap_pct, want.overlap_pct);
  EXPECT_EQ(got.comm_compute_ratio.has_value(), want.comm_compute_ratio.has_value());
  if (got.comm_compute_ratio && want.comm_compute_ratio) {
    EXPECT_DOUBLE_EQ(*got.comm_compute_ratio, *want.comm_compute_ratio);
  }
  EXPECT_DOUBLE_EQ(got.utilization_pct, want.utilization_pct);
}

}  // namespace rankscope::analyzer::testing
