// Questions the viewer asks of a model: launch flows, range statistics (search: search.h).
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "analyzer/range_stats.h"
#include "gui/core/timeline_model.h"

namespace rankscope::gui {

// For device work (kernel, copy, set): the API call with its correlation id on the same
// rank. For an API call: the device work it launched. nullopt without correlation.
std::optional<EventRef> CorrelatedEvent(const TimelineModel& model, const EventRef& event);

// docs/metrics.md §3 and the top activities of [t0, t1) on the common clock, per rank and
// device, computed by the analyzer (analyzer/range_stats.h).
std::vector<analyzer::RangeDeviceStats> MeasureDisplayRange(const TimelineModel& model, int64_t t0_ns, int64_t t1_ns,
                                                            size_t top);

}  // namespace rankscope::gui
