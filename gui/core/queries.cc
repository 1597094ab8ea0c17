#include "gui/core/queries.h"

#include <algorithm>
#include <map>

#include "gui/core/lod.h"

namespace rankscope::gui {

std::vector<EventRef> FindEvents(const TimelineModel& model, const std::function<bool(std::string_view)>& matches,
                                 size_t limit) {
  std::vector<EventRef> found;
  const std::vector<RankTimeline>& ranks = model.ranks();
  for (uint32_t r = 0; r < ranks.size(); ++r) {
    const RankTimeline& rank = ranks[r];
    // Each distinct name is tested once.
    std::vector<int8_t> verdict(rank.strings.size(), -1);
    auto name_matches = [&](uint32_t id) {
      if (id >= verdict.size()) return false;
      if (verdict[id] < 0) verdict[id] = !rank.strings[id].empty() && matches(rank.strings[id]) ? 1 : 0;
      return verdict[id] == 1;
    };
    for (uint32_t t = 0; t < rank.tracks.size(); ++t) {
      const std::vector<EventRow>& rows = rank.tracks[t].rows;
      for (uint32_t w = 0; w < rows.size(); ++w) {
        for (uint32_t i = 0; i < rows[w].size(); ++i) {
          if (name_matches(rows[w].name[i])) found.push_back({r, t, w, i});
        }
      }
    }
  }
  std::sort(found.begin(), found.end(), [&](const EventRef& a, const EventRef& b) {
    const int64_t sa = model.DisplayStart(a), sb = model.DisplayStart(b);
    if (sa != sb) return sa < sb;
    return std::tie(a.rank, a.track, a.row, a.index) < std::tie(b.rank, b.track, b.row, b.index);
  });
  if (found.size() > limit) found.resize(limit);
  return found;
}

std::optional<size_t> NextMatch(const TimelineModel& model, const std::vector<EventRef>& matches, int64_t time_ns,
                                bool forward) {
  if (matches.empty()) return std::nullopt;
  auto start_of = [&](const EventRef& ref) { return model.DisplayStart(ref); };
  if (forward) {
    auto it = std::upper_bound(matches.begin(), matches.end(), time_ns,
                               [&](int64_t t, const EventRef& ref) { return t < start_of(ref); });
    return it == matches.end() ? 0 : static_cast<size_t>(it - matches.begin());
  }
  auto it = std::lower_bound(matches.begin(), matches.end(), time_ns,
                             [&](const EventRef& ref, int64_t t) { return start_of(ref) < t; });
  return it == matches.begin() ? matches.size() - 1 : static_cast<size_t>(it - matches.begin()) - 1;
}

std::optional<EventRef> CorrelatedEvent(const TimelineModel& model, const EventRef& event) {
  if (!model.Contains(event)) return std::nullopt;
  const uint32_t correlation = model.CorrelationOf(event);
  if (correlation == 0) return std::nullopt;
  const EventSource source = model.SourceOf(event);
  const bool from_api = source == EventSource::kApiCall;
  const bool from_device =
      source == EventSource::kKernel || source == EventSource::kMemcpy || source == EventSource::kMemset;
  if (!from_api && !from_device) return std::nullopt;
  const RankTimeline& rank = model.rank(event);
  for (uint32_t t = 0; t < rank.tracks.size(); ++t) {
    const std::vector<EventRow>& rows = rank.tracks[t].rows;
    for (uint32_t w = 0; w < rows.size(); ++w) {
      const EventRow& row = rows[w];
      for (uint32_t i = 0; i < row.correlation.size(); ++i) {
        if (row.correlation[i] != correlation) continue;
        const EventSource other = static_cast<EventSource>(row.source[i]);
        const bool wanted = from_api ? (other == EventSource::kKernel || other == EventSource::kMemcpy ||
                                        other == EventSource::kMemset)
                                     : other == EventSource::kApiCall;
        if (wanted) return EventRef{event.rank, t, w, i};
      }
    }
  }
  return std::nullopt;
}

std::vector<analyzer::RangeDeviceStats> MeasureDisplayRange(const TimelineModel& model, int64_t t0_ns, int64_t t1_ns,
                                                            size_t top) {
  std::vector<analyzer::DeviceRows> devices;
  const std::vector<RankTimeline>& ranks = model.ranks();
  constexpr uint8_t kDeviceClasses = (1u << static_cast<unsigned>(EventClass::kCompute)) |
                                     (1u << static_cast<unsigned>(EventClass::kComm)) |
                                     (1u << static_cast<unsigned>(EventClass::kMemory));
  for (const RankTimeline& rank : ranks) {
    std::map<int, analyzer::DeviceRows> by_device;
    for (const Track& track : rank.tracks) {
      for (const EventRow& row : track.rows) {
        if ((row.class_mask & kDeviceClasses) == 0) continue;
        analyzer::DeviceRows& device = by_device[track.device];
        device.rows.push_back(row.Columns());
      }
    }
    for (auto& [device_id, device] : by_device) {
      device.rank = rank.rank;
      device.device = device_id;
      device.strings = &rank.strings;
      device.window = {t0_ns - rank.clock_offset_ns, t1_ns - rank.clock_offset_ns};
      devices.push_back(std::move(device));
    }
  }
  return analyzer::MeasureRange(devices, top);
}

}  // namespace rankscope::gui
