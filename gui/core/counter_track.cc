#include "gui/core/counter_track.h"

#include <algorithm>
#include <cmath>

namespace rankscope::gui {

namespace {

// Index of the first change after `t`.
size_t FirstAfter(const std::vector<int64_t>& ts, int64_t t) {
  return static_cast<size_t>(std::upper_bound(ts.begin(), ts.end(), t) - ts.begin());
}

}  // namespace

int64_t CounterTrack::TotalAt(int64_t t) const {
  const size_t after = FirstAfter(ts, t);
  return after == 0 ? 0 : total[after - 1];
}

std::vector<int64_t> CounterTrack::CategoriesAt(int64_t t) const {
  std::vector<int64_t> held(categories.size(), 0);
  const size_t after = FirstAfter(ts, t);
  for (size_t i = 0; i < after; ++i) {
    if (category[i] < held.size()) held[category[i]] = bytes[i];
  }
  return held;
}

size_t CounterTrack::MemoryBytes() const {
  size_t total_bytes = sizeof(CounterTrack) + source.capacity() + label.capacity();
  for (const std::string& name : categories) total_bytes += sizeof(std::string) + name.capacity();
  total_bytes += ts.capacity() * sizeof(int64_t) + category.capacity() * sizeof(uint32_t) +
                 bytes.capacity() * sizeof(int64_t) + total.capacity() * sizeof(int64_t);
  return total_bytes;
}

CounterTrack MakeCounterTrack(const analyzer::MemorySeries& series) {
  CounterTrack track;
  track.source = series.source;
  track.label = "memory · " + series.source;
  track.categories = series.categories;
  const size_t n = series.samples.size();
  track.ts.reserve(n);
  track.category.reserve(n);
  track.bytes.reserve(n);
  track.total.reserve(n);
  std::vector<int64_t> live(series.categories.size(), 0);
  int64_t total = 0;
  for (const analyzer::MemorySample& sample : series.samples) {
    if (sample.category >= live.size()) continue;
    total += sample.bytes - live[sample.category];
    live[sample.category] = sample.bytes;
    track.ts.push_back(sample.ts_ns);
    track.category.push_back(sample.category);
    track.bytes.push_back(sample.bytes);
    track.total.push_back(total);
    track.peak = std::max(track.peak, total);
  }
  return track;
}

std::vector<int64_t> CounterColumns(const CounterTrack& track, int64_t t0, double ns_per_px, int width) {
  std::vector<int64_t> columns(static_cast<size_t>(std::max(width, 0)), 0);
  if (track.ts.empty() || width <= 0 || !(ns_per_px > 0)) return columns;
  for (int x = 0; x < width; ++x) {
    const auto begin = t0 + static_cast<int64_t>(std::floor(ns_per_px * x));
    const auto end = t0 + static_cast<int64_t>(std::floor(ns_per_px * (x + 1)));
    // Held when the column starts, then every change inside it.
    size_t i = FirstAfter(track.ts, begin);
    int64_t largest = i == 0 ? 0 : track.total[i - 1];
    for (; i < track.ts.size() && track.ts[i] < end; ++i) largest = std::max(largest, track.total[i]);
    columns[static_cast<size_t>(x)] = largest;
  }
  return columns;
}

}  // namespace rankscope::gui
