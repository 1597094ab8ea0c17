#include "collector/flight_recorder.h"

#include <algorithm>

namespace rankscope::collector {

FlightRecorder::StreamKey FlightRecorder::KeyOf(const trace::FlightCollective& collective) {
  switch (collective.op) {
    case trace::CollectiveOp::kSend: return {collective.comm_hash, 1, collective.peer};
    case trace::CollectiveOp::kRecv: return {collective.comm_hash, 2, collective.peer};
    default: return {collective.comm_hash, 0, -1};
  }
}

void FlightRecorder::Enter(trace::FlightCollective collective) {
  collective.end_ns.reset();
  std::deque<trace::FlightCollective>& stream = streams_[KeyOf(collective)];
  stream.push_back(std::move(collective));
  ++in_flight_;
  Trim(stream);
  changed_ = true;
}

void FlightRecorder::Complete(const trace::FlightCollective& collective, trace::TimestampNs end_ns) {
  std::deque<trace::FlightCollective>& stream = streams_[KeyOf(collective)];
  // The newest entry of that sequence still in flight: a program may reuse a number.
  const auto entered = std::find_if(stream.rbegin(), stream.rend(), [&](const trace::FlightCollective& c) {
    return c.sequence == collective.sequence && c.in_flight();
  });
  if (entered != stream.rend()) {
    entered->end_ns = std::max(end_ns, entered->start_ns);
    --in_flight_;
  } else {
    trace::FlightCollective finished = collective;
    finished.end_ns = std::max(end_ns, finished.start_ns);
    // In sequence order, so that a window read front to back reads in order.
    const auto after = std::find_if(stream.begin(), stream.end(), [&](const trace::FlightCollective& c) {
      return c.sequence > finished.sequence;
    });
    stream.insert(after, std::move(finished));
  }
  Trim(stream);
  ++completed_collectives_;
  Progress(end_ns);
}

void FlightRecorder::CompleteStep(trace::TimestampNs end_ns) {
  ++completed_steps_;
  Progress(end_ns);
}

void FlightRecorder::Progress(trace::TimestampNs end_ns) {
  last_progress_ns_ = std::max(last_progress_ns_, end_ns);
  changed_ = true;
}

void FlightRecorder::Trim(std::deque<trace::FlightCollective>& stream) {
  // The last kFlightWindow entries stay whatever their state; older ones only while in
  // flight, and of those only the newest kMaxInFlightPerStream.
  static_assert(kMaxInFlightPerStream >= trace::kFlightWindow, "the cap is reached among the older entries");
  if (stream.size() <= trace::kFlightWindow) return;
  size_t in_flight_here = 0;
  for (const trace::FlightCollective& c : stream) in_flight_here += c.in_flight() ? 1 : 0;
  size_t older = stream.size() - trace::kFlightWindow;
  for (auto it = stream.begin(); older > 0; --older) {
    if (!it->in_flight()) {
      it = stream.erase(it);
    } else if (in_flight_here > kMaxInFlightPerStream) {
      it = stream.erase(it);
      --in_flight_here;
      --in_flight_;
      ++forgotten_;
    } else {
      ++it;
    }
  }
}

trace::InFlightState FlightRecorder::Snapshot(trace::TimestampNs as_of_ns) {
  trace::InFlightState state;
  state.as_of_ns = as_of_ns;
  state.completed_collectives = completed_collectives_;
  state.completed_steps = completed_steps_;
  state.last_progress_ns = last_progress_ns_;
  for (const auto& [key, stream] : streams_) state.collectives.insert(state.collectives.end(), stream.begin(), stream.end());
  changed_ = false;
  return state;
}

}  // namespace rankscope::collector
