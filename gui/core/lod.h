// Level of detail: what one row looks like at the current zoom, with no paint walking the
// whole row. Events at least `min_width_px` wide are drawn alone; runs of narrower events
// whose gaps are under a pixel fold into one item (Tracy's rule) of at most `max_fold_px`,
// found by galloping over the sorted ends, so a row costs O(visible pixels · log n), not
// O(events).
#pragma once

#include <cstdint>
#include <vector>

#include "gui/core/timeline_model.h"

namespace rankscope::gui {

struct DrawItem {
  double x0 = 0, x1 = 0;      // pixels; folds are min_width_px wide at least, unless the
                              // next item starts sooner (items never overlap)
  uint32_t index = 0;         // the (first) event
  uint32_t count = 1;         // events folded in; 1 = a single event
  uint8_t event_class = 0;    // EventClass; for folds, the row's class if it has one, else
                              // the class holding the most time among the folded events
  // Folds: the share of the fold's time span its events cover (0..1], the density the
  // viewer shades it by; 1 for a single event. O(EventRow::kBusyBlock) per fold.
  float busy = 1.0f;
};

struct LodOptions {
  double min_width_px = 1.0;  // narrower events fold
  // A fold stops growing past this width, so a zoomed-out row is a strip of short folds,
  // each shaded by its own density, not one bar over the whole run.
  double max_fold_px = 3.0;
};

// Items for events of `row` overlapping [t0, t0 + width·ns_per_px) on the row's own clock,
// with x = (t - t0) / ns_per_px, in time order. Appends to `out`.
void BuildRowGeometry(const EventRow& row, int64_t t0, double ns_per_px, double width_px, const LodOptions& options,
                      std::vector<DrawItem>* out);

// The event of `row` covering `t`, else the nearest one within `tolerance_ns`; nullopt
// when none is that close.
std::optional<uint32_t> EventAt(const EventRow& row, int64_t t, int64_t tolerance_ns);

// First event with end > t (ends are sorted within a row).
uint32_t FirstEndingAfter(const EventRow& row, int64_t t);

}  // namespace rankscope::gui
