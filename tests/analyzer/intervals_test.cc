#include "analyzer/intervals.h"

#include <gtest/gtest.h>

#include <bitset>
#include <random>

namespace rankscope::analyzer {
namespace {

IntervalSet Set(std::vector<Interval> intervals) { return IntervalSet::FromUnsorted(std::move(intervals)); }

TEST(IntervalSet, MergesOverlappingAndTouchingAndDropsEmpty) {
  const IntervalSet s = Set({{50, 60}, {0, 10}, {5, 20}, {20, 25}, {30, 30}, {40, 35}});
  // [0,10) ∪ [5,20) ∪ [20,25) = [0,25); [30,30) and [40,35) are empty.
  EXPECT_EQ(s.intervals(), (std::vector<Interval>{{0, 25}, {50, 60}}));
  EXPECT_EQ(s.Length(), 25 + 10);
}

TEST(IntervalSet, SetOperationsByHand) {
  // Compute [0,100) and [200,300); comm [50,250) and [400,500).
  const IntervalSet compute = Set({{0, 100}, {200, 300}});
  const IntervalSet comm = Set({{50, 250}, {400, 500}});
  // ∩: [50,100) and [200,250) → 50 + 50.
  EXPECT_EQ(Intersection(compute, comm).intervals(), (std::vector<Interval>{{50, 100}, {200, 250}}));
  EXPECT_EQ(Intersection(compute, comm).Length(), 100);
  // comm \ compute: [100,200) and [400,500) → 100 + 100 of exposed communication.
  EXPECT_EQ(Difference(comm, compute).intervals(), (std::vector<Interval>{{100, 200}, {400, 500}}));
  // compute \ comm: [0,50) and [250,300).
  EXPECT_EQ(Difference(compute, comm).intervals(), (std::vector<Interval>{{0, 50}, {250, 300}}));
  // ∪: [0,300) and [400,500) → 300 + 100.
  EXPECT_EQ(Union(compute, comm).intervals(), (std::vector<Interval>{{0, 300}, {400, 500}}));
}

TEST(IntervalSet, ClipAndLengthWithin) {
  const IntervalSet s = Set({{0, 10}, {20, 30}, {40, 50}});
  // Window [5,45): [5,10) + [20,30) + [40,45) = 5 + 10 + 5.
  EXPECT_EQ(s.Clip({5, 45}).intervals(), (std::vector<Interval>{{5, 10}, {20, 30}, {40, 45}}));
  EXPECT_EQ(s.LengthWithin({5, 45}), 20);
  EXPECT_TRUE(s.Clip({10, 20}).empty());  // exactly the gap
  EXPECT_EQ(s.LengthWithin({10, 20}), 0);
  EXPECT_EQ(s.LengthWithin({-100, 100}), s.Length());
}

TEST(IntervalSet, EmptyOperands) {
  const IntervalSet none;
  const IntervalSet some = Set({{1, 2}});
  EXPECT_EQ(Union(none, some), some);
  EXPECT_TRUE(Intersection(none, some).empty());
  EXPECT_EQ(Difference(some, none), some);
  EXPECT_TRUE(Difference(none, some).empty());
}

// Every operation against a bitmap over a small domain, on random sets.
constexpr int kDomain = 200;
using Bits = std::bitset<kDomain>;

Bits ToBits(const IntervalSet& s) {
  Bits bits;
  for (const Interval& interval : s.intervals()) {
    for (int64_t t = interval.start; t < interval.end; ++t) bits.set(static_cast<size_t>(t));
  }
  return bits;
}

IntervalSet FromBits(const Bits& bits) {
  std::vector<Interval> intervals;
  for (int t = 0; t < kDomain; ++t) {
    if (bits.test(static_cast<size_t>(t))) intervals.push_back({t, t + 1});
  }
  return IntervalSet::FromUnsorted(intervals);
}

IntervalSet RandomSet(std::mt19937& random) {
  std::uniform_int_distribution<int> count(0, 8), point(0, kDomain), width(0, 40);
  std::vector<Interval> intervals;
  for (int i = count(random); i > 0; --i) {
    const int start = point(random);
    intervals.push_back({start, std::min(kDomain, start + width(random))});
  }
  return IntervalSet::FromUnsorted(intervals);
}

TEST(IntervalSet, MatchesABitmapOnRandomSets) {
  std::mt19937 random(12345);
  for (int round = 0; round < 2000; ++round) {
    const IntervalSet a = RandomSet(random);
    const IntervalSet b = RandomSet(random);
    SCOPED_TRACE(round);
    EXPECT_EQ(Union(a, b), FromBits(ToBits(a) | ToBits(b)));
    EXPECT_EQ(Intersection(a, b), FromBits(ToBits(a) & ToBits(b)));
    EXPECT_EQ(Difference(a, b), FromBits(ToBits(a) & ~ToBits(b)));
    EXPECT_EQ(a.Length(), static_cast<int64_t>(ToBits(a).count()));
    const int64_t lo = round % kDomain, hi = lo + round % 50;
    Bits window;
    for (int64_t t = lo; t < hi && t < kDomain; ++t) window.set(static_cast<size_t>(t));
    EXPECT_EQ(a.Clip({lo, hi}), FromBits(ToBits(a) & window));
    EXPECT_EQ(a.LengthWithin({lo, hi}), static_cast<int64_t>((ToBits(a) & window).count()));
  }
}

}  // namespace
}  // namespace rankscope::analyzer
