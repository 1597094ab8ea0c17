// Hand-built ends of runs (analyzer::RankEnd): what each rank's file held when the run
// stopped. Shared by the diagnosis tests (tests/analyzer) and its report goldens (tests/report).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "analyzer/hang.h"

namespace rankscope::testing {

inline constexpr int64_t kSecondNs = 1'000'000'000;
inline constexpr int64_t kMillisecondNs = 1'000'000;
// The time origin of these runs: an instant in 2027 on every rank's clock.
inline constexpr int64_t kRunStartNs = 1'800'000'000 * kSecondNs;
// Seconds after kRunStartNs.
inline constexpr int64_t At(double seconds) { return kRunStartNs + static_cast<int64_t>(seconds * 1e9); }

class RankEndBuilder {
 public:
  // A rank whose state was taken `as_of_s` seconds after the run started, and whose file
  // was closed by SIGTERM (how `profile --hang-timeout` stops a job).
  RankEndBuilder(int rank, double as_of_s) {
    end_.rank = rank;
    end_.host = "node-a";
    end_.pid = 1000 + rank;
    end_.closed_cleanly = true;
    end_.ended_by = "signal 15";
    end_.state.as_of_ns = At(as_of_s);
  }

  RankEndBuilder& Host(std::string host) {
    end_.host = std::move(host);
    return *this;
  }
  RankEndBuilder& Ended(bool closed_cleanly, std::string ended_by) {
    end_.closed_cleanly = closed_cleanly;
    end_.ended_by = std::move(ended_by);
    return *this;
  }
  // A file without in-flight state (an older collector).
  RankEndBuilder& NoState() {
    end_.state = {};
    return *this;
  }
  // A thread lane; returns its id.
  trace::LaneId Thread(std::string name) {
    end_.lane_names.push_back(std::move(name));
    return static_cast<trace::LaneId>(end_.lane_names.size());
  }
  RankEndBuilder& Open(trace::LaneId lane, uint32_t depth, double start_s, std::string name) {
    trace::OpenRange range;
    range.lane = lane;
    range.depth = depth;
    range.start_ns = At(start_s);
    range.name = std::move(name);
    end_.state.open_ranges.push_back(std::move(range));
    return *this;
  }

  // Collectives `first`..`last` on `comm`, sequence k entered at k seconds and completed
  // 100 ms later.
  RankEndBuilder& Completed(uint64_t comm, int comm_rank, int comm_size, uint64_t first, uint64_t last,
                            uint64_t bytes = 8 << 20, trace::CollectiveOp op = trace::CollectiveOp::kAllReduce,
                            std::string name = "AllReduce") {
    for (uint64_t sequence = first; sequence <= last; ++sequence) {
      trace::FlightCollective c = Collective(comm, comm_rank, comm_size, sequence, static_cast<double>(sequence));
      c.op = op;
      c.name = name;
      c.bytes = bytes;
      c.end_ns = c.start_ns + 100 * kMillisecondNs;
      end_.state.collectives.push_back(std::move(c));
      ++end_.state.completed_collectives;
    }
    return *this;
  }
  // Collective `sequence` entered at `start_s`, not completed.
  RankEndBuilder& Entered(uint64_t comm, int comm_rank, int comm_size, uint64_t sequence, double start_s,
                          trace::CollectiveOp op = trace::CollectiveOp::kAllReduce, std::string name = "AllReduce",
                          uint64_t bytes = 8 << 20, int root = -1) {
    trace::FlightCollective c = Collective(comm, comm_rank, comm_size, sequence, start_s);
    c.op = op;
    c.name = std::move(name);
    c.bytes = bytes;
    c.root = root;
    end_.state.collectives.push_back(std::move(c));
    return *this;
  }
  // A send to (or receive from) communicator rank `peer`; completed 100 ms after it
  // started unless `in_flight`.
  RankEndBuilder& PointToPoint(trace::CollectiveOp op, uint64_t comm, int comm_rank, int comm_size, int peer,
                               uint64_t sequence, double start_s, bool in_flight) {
    trace::FlightCollective c = Collective(comm, comm_rank, comm_size, sequence, start_s);
    c.op = op;
    c.name = op == trace::CollectiveOp::kSend ? "Send" : "Recv";
    c.bytes = 1 << 20;
    c.peer = peer;
    if (!in_flight) c.end_ns = c.start_ns + 100 * kMillisecondNs;
    end_.state.collectives.push_back(std::move(c));
    return *this;
  }

  analyzer::RankEnd Build() const { return end_; }

 private:
  static trace::FlightCollective Collective(uint64_t comm, int comm_rank, int comm_size, uint64_t sequence,
                                            double start_s) {
    trace::FlightCollective c;
    c.comm_hash = comm;
    c.sequence = sequence;
    c.op = trace::CollectiveOp::kAllReduce;
    c.name = "AllReduce";
    c.comm_rank = comm_rank;
    c.comm_size = comm_size;
    c.lane = 1;
    c.start_ns = At(start_s);
    return c;
  }

  analyzer::RankEnd end_;
};

// ---- The hang every diagnosis test starts from -----------------------------------------
//
// Four ranks on one world communicator kHangComm. Each completed AllReduce #0..#4 (8 MiB,
// entered at k s, done 100 ms later). Ranks 0, 1 and 3 entered #5 at 5.0, 5.1 and 5.2 s;
// rank 2 never did: it is inside step (since 4.5 s) > backward (since 4.9 s) on thread
// "main", and inside "fetch" (since 17.0 s) on thread "pin_memory"; the others are inside
// step (4.5 s) > backward (4.8 s) on "main". Every state was taken at 17.4 s, and every file
// was closed by SIGTERM.
// So: ranks 0, 1, 3 waited 12.4, 12.3, 12.2 s (the longest 12.4 s); rank 2's backward has
// been open 17.4 - 4.9 = 12.5 s and its fetch 400 ms.
inline constexpr uint64_t kHangComm = 0x3f2a11c09e4b7d21;

inline std::vector<analyzer::RankEnd> HangRun() {
  std::vector<analyzer::RankEnd> ranks;
  const double entered[] = {5.0, 5.1, 0, 5.2};
  for (int rank = 0; rank < 4; ++rank) {
    RankEndBuilder b(rank, 17.4);
    const trace::LaneId main = b.Thread("main");
    b.Completed(kHangComm, rank, 4, 0, 4);
    if (rank == 2) {
      const trace::LaneId pin = b.Thread("pin_memory");
      b.Open(main, 0, 4.5, "step").Open(main, 1, 4.9, "backward").Open(pin, 0, 17.0, "fetch");
    } else {
      b.Entered(kHangComm, rank, 4, 5, entered[rank]);
      b.Open(main, 0, 4.5, "step").Open(main, 1, 4.8, "backward");
    }
    ranks.push_back(b.Build());
  }
  return ranks;
}

}  // namespace rankscope::testing
