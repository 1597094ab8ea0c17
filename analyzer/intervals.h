// Interval algebra over integer nanoseconds, the arithmetic under every metric of
// docs/metrics.md (|S|, ∪, ∩, \). An IntervalSet holds disjoint, non-empty, half-open intervals
// [start, end) sorted by start; touching intervals are merged. Set operations walk both
// inputs once (linear in their sizes).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace rankscope::analyzer {

struct Interval {
  int64_t start = 0;
  int64_t end = 0;  // exclusive
  int64_t length() const { return end > start ? end - start : 0; }
  bool operator==(const Interval&) const = default;
};

class IntervalSet {
 public:
  IntervalSet() = default;

  // Any intervals, in any order, overlapping or empty (dropped): sorts, then merges.
  static IntervalSet FromUnsorted(std::vector<Interval> intervals);
  // Intervals sorted by start (overlaps allowed): merges in one pass.
  static IntervalSet FromSortedByStart(std::span<const Interval> intervals);
  // The same, merging in place: no second buffer.
  static IntervalSet FromSortedByStart(std::vector<Interval>&& intervals);

  const std::vector<Interval>& intervals() const { return intervals_; }
  bool empty() const { return intervals_.empty(); }
  size_t size() const { return intervals_.size(); }
  // |S|: the total length.
  int64_t Length() const;
  // S ∩ [window.start, window.end).
  IntervalSet Clip(Interval window) const;
  // |S ∩ window| without building the clipped set.
  int64_t LengthWithin(Interval window) const;

  bool operator==(const IntervalSet&) const = default;

 private:
  std::vector<Interval> intervals_;
};

IntervalSet Union(const IntervalSet& a, const IntervalSet& b);
IntervalSet Intersection(const IntervalSet& a, const IntervalSet& b);
// a \ b
IntervalSet Difference(const IntervalSet& a, const IntervalSet& b);

}  // namespace rankscope::analyzer
