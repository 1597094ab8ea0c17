// What a rank was inside when its file was last committed: the collectives it entered
// (the last few per communicator, those not completed among them) and every thread's open
// NVTX ranges. The collector replaces this state with each drain (every 50 ms while it
// changes), in the same transaction order as the events, so a rank killed or hung at any
// instant leaves a file that says which collective it waited in and what it was doing
// (schema v3: tables `flight_collectives`, `open_ranges`, meta `in_flight.*`).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "trace/events.h"

namespace rankscope::trace {

// How many entered collectives the collector keeps per communicator stream (a
// communicator's collectives, or its sends to / receives from one peer), besides every
// one still in flight: enough to see where ranks parted ways.
inline constexpr size_t kFlightWindow = 16;

// One collective (or send/receive) a rank entered.
struct FlightCollective {
  uint64_t comm_hash = 0;
  // Identical on every rank for the same collective. Sends and receives are numbered per
  // (communicator, peer, direction): the n-th send to a peer meets its n-th receive.
  uint64_t sequence = 0;
  CollectiveOp op = CollectiveOp::kUnknown;
  std::string name;       // as the source named it: "AllReduce", "allreduce", ...
  uint64_t bytes = 0;
  int32_t root = -1;      // -1 when not applicable
  int32_t peer = -1;      // communicator rank of the peer; -1 when not applicable
  int32_t comm_rank = -1; // this rank's index in the communicator; -1 when unknown
  int32_t comm_size = 0;  // 0 when unknown
  LaneId lane = kNoLane;  // the thread or communicator lane it was issued on
  TimestampNs start_ns = 0;                 // entered
  std::optional<TimestampNs> end_ns;        // completed; nullopt while in flight

  bool in_flight() const { return !end_ns.has_value(); }
};

// A range open on a thread.
struct OpenRange {
  LaneId lane = kNoLane;
  uint32_t depth = 0;  // 0 = outermost in its domain
  TimestampNs start_ns = 0;
  std::string name;
  std::string domain;  // "" = the default domain
  uint32_t category = 0;
  std::string args;    // the decoded payload as JSON; "" when none
};

struct InFlightState {
  // When the collector took this state (CLOCK_REALTIME ns); 0 when the file has none (an
  // older schema, a foreign trace, or a process that never drained).
  TimestampNs as_of_ns = 0;
  // Progress counters at that moment, and the time of the last completion of either.
  uint64_t completed_collectives = 0;
  uint64_t completed_steps = 0;
  TimestampNs last_progress_ns = 0;
  std::vector<FlightCollective> collectives;  // by (comm_hash, op class, peer, sequence)
  std::vector<OpenRange> open_ranges;         // by (lane, domain, depth)

  bool empty() const { return as_of_ns == 0; }
};

}  // namespace rankscope::trace
