#include "gui/core/lod.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>

namespace rankscope::gui {
namespace {

// Folds of more than this many events weigh classes by sampled events, not all of them.
constexpr uint32_t kExactClassLimit = 64;

// First index in [from, n) whose end exceeds `bound`, galloping from `from`: O(log gap).
size_t GallopEndAfter(const std::vector<int64_t>& end, size_t from, int64_t bound) {
  const size_t n = end.size();
  if (from >= n || end[from] > bound) return from;
  size_t low = from;  // end[low] <= bound
  size_t step = 1;
  size_t high = from + step;
  while (high < n && end[high] <= bound) {
    low = high;
    step *= 2;
    high = from + step;
  }
  high = std::min(high, n);
  return static_cast<size_t>(std::upper_bound(end.begin() + static_cast<ptrdiff_t>(low) + 1,
                                              end.begin() + static_cast<ptrdiff_t>(high), bound) -
                             end.begin());
}

}  // namespace

uint32_t FirstEndingAfter(const EventRow& row, int64_t t) {
  return static_cast<uint32_t>(std::upper_bound(row.end.begin(), row.end.end(), t) - row.end.begin());
}

void BuildRowGeometry(const EventRow& row, int64_t t0, double ns_per_px, double width_px, const LodOptions& options,
                      std::vector<DrawItem>* out) {
  const size_t n = row.size();
  if (n == 0 || !(ns_per_px > 0) || !(width_px > 0)) return;
  const double min_ns = std::max(1.0, options.min_width_px * ns_per_px);
  const double max_fold_ns = std::max(min_ns, options.max_fold_px * ns_per_px);
  const int64_t min_ns_int = static_cast<int64_t>(std::ceil(min_ns));
  const int64_t t1 = t0 + static_cast<int64_t>(std::ceil(width_px * ns_per_px));
  auto x_of = [&](int64_t t) { return static_cast<double>(t - t0) / ns_per_px; };
  // The next pixel boundary strictly after t, as a time.
  auto boundary_after = [&](int64_t t) {
    const double pixel = std::floor(static_cast<double>(t - t0) / ns_per_px) + 1.0;
    return t0 + static_cast<int64_t>(std::ceil(pixel * ns_per_px));
  };
  const bool single_class = std::popcount(static_cast<unsigned>(row.class_mask)) <= 1;
  const uint8_t row_class = single_class && row.class_mask != 0
                                ? static_cast<uint8_t>(std::countr_zero(static_cast<unsigned>(row.class_mask)))
                                : uint8_t{0};
  // The view is [t0, t1): events ending at t0 are out, unless they are instants at t0.
  size_t i = std::upper_bound(row.end.begin(), row.end.end(), t0 - 1) - row.end.begin();
  while (i < n && row.end[i] == t0 && row.start[i] < t0) ++i;
  // Events starting at or after t1 are out; folds never reach past them.
  const size_t limit = std::lower_bound(row.start.begin(), row.start.end(), t1) - row.start.begin();
  const size_t first_item = out->size();
  while (i < limit) {
    const int64_t start = row.start[i];
    const int64_t end = row.end[i];
    if (end - start >= min_ns_int) {
      out->push_back({x_of(start), x_of(end), static_cast<uint32_t>(i), 1, row.event_class[i]});
      ++i;
      continue;
    }
    // A fold: every event ending before the next pixel boundary joins; then the event
    // after it joins too when it is narrow and starts within a pixel of the fold's end.
    std::array<int64_t, 8> class_time{};
    auto weigh = [&](size_t k) { class_time[row.event_class[k] & 7] += row.end[k] - row.start[k]; };
    size_t next = i + 1;
    int64_t fold_end = end;
    weigh(i);
    while (true) {
      const size_t after = std::min(GallopEndAfter(row.end, next, boundary_after(fold_end)), limit);
      if (after > next) {
        if (!single_class) {
          if (after - i <= kExactClassLimit) {
            for (size_t k = next; k < after; ++k) weigh(k);
          } else {
            weigh(after - 1);  // the folded run's last event stands for the rest
          }
        }
        fold_end = std::max(fold_end, row.end[after - 1]);
        next = after;
      }
      if (next >= limit || static_cast<double>(fold_end - start) >= max_fold_ns) break;
      const int64_t s = row.start[next];
      const int64_t e = row.end[next];
      if (e - s >= min_ns_int || s - fold_end >= min_ns_int) break;
      if (!single_class) weigh(next);
      fold_end = std::max(fold_end, e);
      ++next;
    }
    DrawItem item;
    item.x0 = x_of(start);
    item.x1 = std::max(x_of(fold_end), item.x0 + options.min_width_px);
    if (next < limit) item.x1 = std::min(item.x1, std::max(item.x0, x_of(row.start[next])));
    item.index = static_cast<uint32_t>(i);
    item.count = static_cast<uint32_t>(next - i);
    item.event_class = single_class ? row_class
                                    : static_cast<uint8_t>(std::max_element(class_time.begin(), class_time.end()) -
                                                           class_time.begin());
    if (item.count == 1) item.event_class = row.event_class[i];
    if (item.count > 1 && fold_end > start && row.HasBusyIndex()) {
      const double covered = static_cast<double>(row.BusyNs(i, next)) / static_cast<double>(fold_end - start);
      item.busy = static_cast<float>(std::clamp(covered, 0.0, 1.0));
    }
    out->push_back(item);
    i = next;
  }
  // Keep coordinates paintable: nothing far outside the view.
  for (size_t k = first_item; k < out->size(); ++k) {
    DrawItem& item = (*out)[k];
    item.x0 = std::max(item.x0, -2.0);
    item.x1 = std::min(item.x1, width_px + 2.0);
  }
}

std::optional<uint32_t> EventAt(const EventRow& row, int64_t t, int64_t tolerance_ns) {
  const size_t n = row.size();
  if (n == 0) return std::nullopt;
  const size_t i = FirstEndingAfter(row, t);
  if (i < n && row.start[i] <= t) return static_cast<uint32_t>(i);  // covers t
  std::optional<uint32_t> best;
  int64_t best_distance = tolerance_ns;
  if (i < n && row.start[i] - t <= best_distance) {
    best = static_cast<uint32_t>(i);
    best_distance = row.start[i] - t;
  }
  if (i > 0 && t - row.end[i - 1] <= best_distance) best = static_cast<uint32_t>(i - 1);
  return best;
}

}  // namespace rankscope::gui
