#include "gui/core/queries.h"

#include <algorithm>
#include <map>

#include "gui/core/lod.h"

namespace rankscope::gui {

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
