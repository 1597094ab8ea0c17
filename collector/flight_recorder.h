// The drain thread's flight recorder: the collectives (and sends and receives) this rank
// entered and whether they completed, the last trace::kFlightWindow per communicator stream
// plus every one still in flight, and the rank's progress counters. Fed by the NCCL
// plugin's operations, language hooks and NVTX ranges of the `rankscope collective`
// convention; written into the rank file as its in-flight state (trace/in_flight.h) and
// summed up in the progress file `rankscope profile --hang-timeout` watches. Drain thread
// only; nothing here runs on an application thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <tuple>
#include <vector>

#include "trace/in_flight.h"

namespace rankscope::collector {

class FlightRecorder {
 public:
  // A rank holds at most this many entered, not completed collectives per stream; older
  // ones beyond it (records lost on the way) are forgotten and counted.
  static constexpr size_t kMaxInFlightPerStream = 1024;

  // The rank entered `collective` (its end_ns is ignored).
  void Enter(trace::FlightCollective collective);
  // It completed at end_ns. A collective never entered (its start was lost, or the source
  // reports only finished ones) is entered and completed at once, from start_ns.
  void Complete(const trace::FlightCollective& collective, trace::TimestampNs end_ns);
  void CompleteStep(trace::TimestampNs end_ns);

  // Whether anything changed since the last Snapshot.
  bool changed() const { return changed_; }
  // The state now, with every stream's window in order; clears changed().
  trace::InFlightState Snapshot(trace::TimestampNs as_of_ns);

  uint64_t completed_collectives() const { return completed_collectives_; }
  uint64_t completed_steps() const { return completed_steps_; }
  trace::TimestampNs last_progress_ns() const { return last_progress_ns_; }
  size_t in_flight() const { return in_flight_; }
  uint64_t forgotten() const { return forgotten_; }

 private:
  // (communicator, 0 collective | 1 send | 2 receive, peer): one numbering of sequences.
  using StreamKey = std::tuple<uint64_t, int, int32_t>;
  static StreamKey KeyOf(const trace::FlightCollective& collective);
  void Trim(std::deque<trace::FlightCollective>& stream);
  void Progress(trace::TimestampNs end_ns);

  std::map<StreamKey, std::deque<trace::FlightCollective>> streams_;
  uint64_t completed_collectives_ = 0;
  uint64_t completed_steps_ = 0;
  trace::TimestampNs last_progress_ns_ = 0;
  size_t in_flight_ = 0;
  uint64_t forgotten_ = 0;
  bool changed_ = false;
};

}  // namespace rankscope::collector
