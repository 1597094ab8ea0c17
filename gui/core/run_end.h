// What each rank was inside when its file ended, placed on its lanes: the collectives it had
// entered and not completed (trace::FlightCollective with no end) and its threads' open NVTX
// ranges (trace::OpenRange), from the in-flight state every schema-3 rank file ends with
// (read through analyzer::ReadRankEnd), each drawn from its start to the state's time.
//
// Where a mark goes:
// - a collective: on the lane it was issued on; NCCL's (lane 0) on the rank's communicator
//   lane with its comm hash, else on the rank's first shown lane;
// - an open range: on its thread's lane. A range the file holds as a row (its collector
//   closed it at the end, flagged "rankscope.unfinished" in its args, or the state names it
//   by lane, start and name) is marked where it is; one without a row (a SIGKILLed rank
//   never writes it) is added to the lane from the state, nesting over the ranges it holds.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "analyzer/hang.h"
#include "base/status.h"
#include "gui/core/timeline_model.h"

namespace rankscope::gui {

// A range row a file's collector closed at the end and flagged unfinished.
struct FlaggedRow {
  trace::LaneId lane = trace::kNoLane;
  int64_t start_ns = 0, end_ns = 0;
};

struct RankEndInput {
  analyzer::RankEnd end;                // meta, lane names, in-flight state
  std::vector<FlaggedRow> flagged_rows;
};

// Reads the end of `rank`'s file (rank.file): analyzer::ReadRankEnd, and, when its meta
// counts unfinished ranges (collector.unfinished_ranges), the range rows that end where each
// thread's ranges last end and carry "rankscope.unfinished" in their args. Cost: one open of
// the file (a file never closed is recovered into a private copy, as every reader does), the
// in-flight tables, and one lane query per thread lane with ranges of such a file.
Result<RankEndInput> ReadRankEndInput(const RankTimeline& rank);

// Places `input` on `rank` (loaded from the same file; `lanes` its declared lanes, lanes[i].id
// == i + 1): fills rank.end, adds an event for each collective in flight and each open range
// without a row (a track for a lane that had no events; tracks keep LaneShownBefore's order),
// and widens the rank's extent to the state's time. Returns how many state entries name no
// lane of the file (not shown). Cost: O(E log R + E·D) for each lane that gets an event (its
// E events are repacked into D rows from R sorted runs), O(log E) per mark otherwise.
size_t ApplyRankEnd(RankTimeline& rank, const std::vector<trace::Lane>& lanes, const RankEndInput& input);

// "AllReduce #41 in flight (12.4 s)", "Send #3 to peer 1 in flight (2.00 s)".
std::string InFlightLabel(const trace::FlightCollective& collective, int64_t as_of_ns);
// "backward · open at end (12.5 s)".
std::string OpenRangeLabel(std::string_view name, int64_t start_ns, int64_t as_of_ns);

// The Details tab's (label, value) rows for `mark`, the mark of `ref`: what it is, where and
// since when (times after the run's start, on the common clock), and for how long.
std::vector<std::pair<std::string, std::string>> EndMarkFields(const TimelineModel& model, const EventRef& ref,
                                                               const EndMark& mark);

}  // namespace rankscope::gui
