#include "trace/events.h"

#include <algorithm>

#include "trace/event_codec.h"

namespace rankscope::trace {

bool Lane::SameIdentity(const Lane& o) const {
  return kind == o.kind && role == o.role && device == o.device && context == o.context &&
         stream == o.stream && pid == o.pid && tid == o.tid && comm_hash == o.comm_hash;
}

size_t EventTables::size() const {
  size_t total = 0;
  codec::ForEachTable(*this, [&](std::string_view, const auto& table) { total += table.size(); });
  return total;
}

void EventTables::clear() {
  codec::ForEachTable(*this, [](std::string_view, auto& table) { table.clear(); });
}

void EventTables::reserve_each(size_t n) {
  codec::ForEachTable(*this, [n](std::string_view, auto& table) { table.reserve(n); });
}

void EventTables::SortByLaneAndTime() {
  codec::ForEachTable(*this, [](std::string_view, auto& table) {
    auto before = [](const auto& a, const auto& b) {
      const LaneId la = codec::LaneOf(a), lb = codec::LaneOf(b);
      return la != lb ? la < lb : codec::StartOf(a) < codec::StartOf(b);
    };
    if (!std::is_sorted(table.begin(), table.end(), before)) {
      std::stable_sort(table.begin(), table.end(), before);
    }
  });
}

}  // namespace rankscope::trace
