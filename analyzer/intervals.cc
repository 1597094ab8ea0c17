#include "analyzer/intervals.h"

#include <algorithm>

namespace rankscope::analyzer {
namespace {

// Appends to a sorted, merged list, merging with its last interval when they overlap or touch.
void AppendMerged(std::vector<Interval>& out, Interval next) {
  if (next.end <= next.start) return;
  if (!out.empty() && next.start <= out.back().end) {
    out.back().end = std::max(out.back().end, next.end);
  } else {
    out.push_back(next);
  }
}

}  // namespace

IntervalSet IntervalSet::FromUnsorted(std::vector<Interval> intervals) {
  const auto by_start = [](const Interval& x, const Interval& y) { return x.start < y.start; };
  // Often they come in order already (a rank's collectives): a linear check saves the sort.
  if (!std::is_sorted(intervals.begin(), intervals.end(), by_start)) {
    std::sort(intervals.begin(), intervals.end(), by_start);
  }
  return FromSortedByStart(std::move(intervals));
}

IntervalSet IntervalSet::FromSortedByStart(std::vector<Interval>&& intervals) {
  size_t kept = 0;
  for (const Interval& interval : intervals) {
    if (interval.end <= interval.start) continue;
    if (kept > 0 && interval.start <= intervals[kept - 1].end) {
      intervals[kept - 1].end = std::max(intervals[kept - 1].end, interval.end);
    } else {
      intervals[kept++] = interval;
    }
  }
  intervals.resize(kept);
  IntervalSet set;
  set.intervals_ = std::move(intervals);
  return set;
}

IntervalSet IntervalSet::FromSortedByStart(std::span<const Interval> intervals) {
  IntervalSet set;
  set.intervals_.reserve(intervals.size());
  for (const Interval& interval : intervals) AppendMerged(set.intervals_, interval);
  return set;
}

int64_t IntervalSet::Length() const {
  int64_t total = 0;
  for (const Interval& interval : intervals_) total += interval.length();
  return total;
}

IntervalSet IntervalSet::Clip(Interval window) const {
  IntervalSet clipped;
  // The first interval that ends after the window starts.
  auto it = std::upper_bound(intervals_.begin(), intervals_.end(), window.start,
                             [](int64_t t, const Interval& interval) { return t < interval.end; });
  for (; it != intervals_.end() && it->start < window.end; ++it) {
    clipped.intervals_.push_back({std::max(it->start, window.start), std::min(it->end, window.end)});
  }
  if (!clipped.intervals_.empty() && clipped.intervals_.back().length() == 0) clipped.intervals_.pop_back();
  return clipped;
}

int64_t IntervalSet::LengthWithin(Interval window) const {
  int64_t total = 0;
  auto it = std::upper_bound(intervals_.begin(), intervals_.end(), window.start,
                             [](int64_t t, const Interval& interval) { return t < interval.end; });
  for (; it != intervals_.end() && it->start < window.end; ++it) {
    total += std::max<int64_t>(0, std::min(it->end, window.end) - std::max(it->start, window.start));
  }
  return total;
}

IntervalSet Union(const IntervalSet& a, const IntervalSet& b) {
  std::vector<Interval> merged;
  merged.reserve(a.size() + b.size());
  const auto& x = a.intervals();
  const auto& y = b.intervals();
  size_t i = 0, j = 0;
  while (i < x.size() || j < y.size()) {
    const bool take_x = j == y.size() || (i < x.size() && x[i].start <= y[j].start);
    AppendMerged(merged, take_x ? x[i++] : y[j++]);
  }
  return IntervalSet::FromSortedByStart(std::move(merged));
}

IntervalSet Intersection(const IntervalSet& a, const IntervalSet& b) {
  std::vector<Interval> common;
  const auto& x = a.intervals();
  const auto& y = b.intervals();
  size_t i = 0, j = 0;
  while (i < x.size() && j < y.size()) {
    const int64_t start = std::max(x[i].start, y[j].start);
    const int64_t end = std::min(x[i].end, y[j].end);
    if (start < end) common.push_back({start, end});
    // Drop whichever ends first: it cannot meet anything later in the other set.
    if (x[i].end < y[j].end) {
      ++i;
    } else {
      ++j;
    }
  }
  return IntervalSet::FromSortedByStart(std::move(common));
}

IntervalSet Difference(const IntervalSet& a, const IntervalSet& b) {
  std::vector<Interval> rest;
  const auto& y = b.intervals();
  size_t j = 0;
  for (const Interval& piece : a.intervals()) {
    int64_t start = piece.start;
    // Skip the parts of b that end before this piece starts.
    while (j < y.size() && y[j].end <= start) ++j;
    size_t k = j;
    while (k < y.size() && y[k].start < piece.end) {
      if (y[k].start > start) rest.push_back({start, y[k].start});
      start = std::max(start, y[k].end);
      if (start >= piece.end) break;
      ++k;
    }
    if (start < piece.end) rest.push_back({start, piece.end});
  }
  return IntervalSet::FromSortedByStart(std::move(rest));
}

}  // namespace rankscope::analyzer
