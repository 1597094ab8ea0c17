// What the recorder needs from a source of device activity (CUPTI today), without its
// types: correlation pushes on application threads, and conversion on the drain thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "trace/events.h"

namespace rankscope::collector {

// The rank file's lanes and strings and the clock, as the drain thread has them.
struct DeviceEventSink {
  std::function<trace::LaneId(const trace::Lane&)> add_lane;
  std::function<trace::StringId(std::string_view)> intern;
  // A device timestamp (ticks of the collector's clock, or CLOCK_REALTIME ns) to realtime ns.
  std::function<int64_t(uint64_t)> to_realtime_ns;
  // A thread's name for its lane, when the lane is new.
  std::function<std::string(int64_t tid)> thread_name;
};

class DeviceTracer {
 public:
  virtual ~DeviceTracer() = default;

  // ---- application threads ----
  // An NVTX push/pop range opened or closed on this thread; `range_id` tags the device
  // work launched inside it.
  virtual void PushCorrelation(uint64_t range_id) = 0;
  virtual void PopCorrelation() = 0;

  // ---- the drain thread ----
  // Takes converted events; false asks the tracer to keep the rest for a later drain (the
  // writer is behind). Never false for a final drain.
  using Submit = std::function<bool(trace::EventTables& events)>;
  // Converts what the device side delivered and hands it to `submit`, a buffer at a time.
  // `flush` asks for records still held by the device side first; `final` for everything,
  // the last time (exit, signal, exec), after which the tracer records nothing more.
  virtual void Drain(const DeviceEventSink& sink, const Submit& submit, bool flush, bool final) = 0;
  virtual bool finished() const = 0;
  // Records lost since the last call.
  virtual std::vector<trace::DropRecord> TakeDrops() = 0;
  // Meta rows describing the tracer (status, version, counts), written at each drain.
  virtual std::vector<std::pair<std::string, std::string>> Meta() const = 0;
};

}  // namespace rankscope::collector
