// Search over every event of a model: the events whose name matches, kept per row as the
// indices of its matching events (4 bytes a match; rows are sorted by start, so each list is
// in time order). No limit: the count is exact and next/previous reach every match.
//
// Matches are ordered by their start on the common clock, then (rank, track, row, index);
// that order breaks ties between equal starts, so stepping never sticks on them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "gui/core/timeline_model.h"

namespace rankscope::gui {

class SearchMatches {
 public:
  struct Row {
    uint32_t rank = 0, track = 0, row = 0;
    std::vector<uint32_t> indices;  // ascending: the row's matching events, in time order
  };

  SearchMatches() = default;
  // Every event whose name `matches` (called once per distinct name and rank; unnamed events
  // never match). O(events).
  static SearchMatches Find(const TimelineModel& model, const std::function<bool(std::string_view)>& matches);

  size_t size() const { return total_; }
  bool empty() const { return total_ == 0; }
  const std::vector<Row>& rows() const { return rows_; }
  // The matching indices of one row (empty when none). O(log rows).
  std::span<const uint32_t> InRow(uint32_t rank, uint32_t track, uint32_t row) const;

  // The match after `from` in the order above (forward), or before it, wrapping around;
  // `from` (an event of the model) need not be a match. nullopt without matches. O(rows with matches · log).
  std::optional<EventRef> Step(const TimelineModel& model, const EventRef& from, bool forward) const;
  // The first match starting after `time_ns` (forward), or the last one starting before it,
  // wrapping around. O(rows with matches · log).
  std::optional<EventRef> StepFromTime(const TimelineModel& model, int64_t time_ns, bool forward) const;
  // How many matches come before `ref` in the order above: its 0-based position when it is
  // a match. O(rows with matches · log).
  size_t PositionOf(const TimelineModel& model, const EventRef& ref) const;
  // Every match in order: O(matches · log rows), for tests and small results.
  std::vector<EventRef> All(const TimelineModel& model) const;

  size_t MemoryBytes() const;

 private:
  std::vector<Row> rows_;  // by (rank, track, row)
  size_t total_ = 0;
};

}  // namespace rankscope::gui
