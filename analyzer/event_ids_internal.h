// Internal to analyzer/: the ids an event takes from its rank file, checked against the
// file's own string and lane tables. A damaged or hostile file may hold any integer in an id
// column, and the scanner and the viewer's stream index (and once sized) tables by them: an
// event naming a string or lane its file does not have is damaged, skipped and counted
// invalid, like one that ends before it starts.
#pragma once

#include "trace/reader.h"

namespace rankscope::analyzer {

inline bool KnownString(trace::StringId id, const trace::StreamHeader& header) {
  return id == trace::kEmptyString || id < header.strings.size();
}

// Lane ids are 1..N; 0 ("no lane") is never written for an event.
inline bool KnownLane(trace::LaneId lane, const trace::StreamHeader& header) {
  return lane != trace::kNoLane && lane <= header.lanes.size();
}

inline bool KnownIds(const trace::SpanRow& row, const trace::StreamHeader& header) {
  return KnownLane(row.lane, header) && KnownString(row.name, header) && KnownString(row.domain, header) &&
         KnownString(row.args, header);
}

inline bool KnownIds(const trace::NvtxMarkEvent& mark, const trace::StreamHeader& header) {
  return KnownLane(mark.lane, header) && KnownString(mark.name, header) && KnownString(mark.domain, header) &&
         KnownString(mark.args, header);
}

inline bool KnownIds(const trace::CollectiveEvent& collective, const trace::StreamHeader& header) {
  return KnownLane(collective.lane, header) && KnownString(collective.name, header) &&
         KnownString(collective.algorithm, header) && KnownString(collective.protocol, header);
}

}  // namespace rankscope::analyzer
