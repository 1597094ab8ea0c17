#include "analyzer/range_stats.h"

#include <algorithm>
#include <unordered_map>

#include "analyzer/metrics.h"

namespace rankscope::analyzer {
namespace {

// First event of a row ending after t: rows do not overlap, so their ends are sorted.
size_t FirstEndingAfter(const SpanColumns& row, int64_t t) {
  return static_cast<size_t>(std::upper_bound(row.end.begin(), row.end.end(), t) - row.end.begin());
}

RangeDeviceStats MeasureDevice(const DeviceRows& device, size_t top) {
  const Interval window = device.window;
  std::array<std::vector<Interval>, 3> by_class;
  struct NameTime {
    int64_t count = 0;
    int64_t total_ns = 0;
    ActivityClass activity_class = ActivityClass::kCompute;
  };
  std::unordered_map<uint32_t, NameTime> names;
  for (const SpanColumns& row : device.rows) {
    for (size_t i = FirstEndingAfter(row, window.start); i < row.start.size() && row.start[i] < window.end; ++i) {
      const std::optional<ActivityClass> activity_class = DeviceClassOf(static_cast<EventClass>(row.event_class[i]));
      if (!activity_class) continue;
      const Interval clipped{std::max(row.start[i], window.start), std::min(row.end[i], window.end)};
      if (clipped.length() <= 0) continue;
      by_class[static_cast<size_t>(*activity_class)].push_back(clipped);
      NameTime& name = names[row.name[i]];
      ++name.count;
      name.total_ns += clipped.length();
      name.activity_class = *activity_class;
    }
  }
  DeviceActivity activity;
  activity.device = device.device;
  activity.compute = IntervalSet::FromUnsorted(std::move(by_class[0]));
  activity.comm = IntervalSet::FromUnsorted(std::move(by_class[1]));
  activity.memory = IntervalSet::FromUnsorted(std::move(by_class[2]));

  RangeDeviceStats stats;
  stats.rank = device.rank;
  stats.device = device.device;
  stats.breakdown = DeviceTimeline(std::move(activity)).Measure(window);
  for (const auto& [name, time] : names) {
    std::string text = device.strings != nullptr && name < device.strings->size() ? (*device.strings)[name] : "";
    if (text.empty()) text = time.activity_class == ActivityClass::kMemory ? "memory" : "(unnamed)";
    stats.top.push_back({std::move(text), time.activity_class, time.count, time.total_ns});
  }
  // Copies and sets have no names: one "memory" entry may come from several ids; merge.
  std::sort(stats.top.begin(), stats.top.end(), [](const ActivitySummary& a, const ActivitySummary& b) {
    return a.name != b.name ? a.name < b.name : a.activity_class < b.activity_class;
  });
  std::vector<ActivitySummary> merged;
  for (ActivitySummary& entry : stats.top) {
    if (!merged.empty() && merged.back().name == entry.name && merged.back().activity_class == entry.activity_class) {
      merged.back().count += entry.count;
      merged.back().total_ns += entry.total_ns;
    } else {
      merged.push_back(std::move(entry));
    }
  }
  std::sort(merged.begin(), merged.end(), [](const ActivitySummary& a, const ActivitySummary& b) {
    return a.total_ns != b.total_ns ? a.total_ns > b.total_ns : a.name < b.name;
  });
  if (merged.size() > top) merged.resize(top);
  stats.top = std::move(merged);
  return stats;
}

}  // namespace

std::vector<RangeDeviceStats> MeasureRange(std::span<const DeviceRows> devices, size_t top) {
  std::vector<RangeDeviceStats> out;
  out.reserve(devices.size());
  for (const DeviceRows& device : devices) out.push_back(MeasureDevice(device, top));
  return out;
}

}  // namespace rankscope::analyzer
