// Child process of crash_test.cc: writes batches of kBatch kernels into a rank file forever
// (until SIGKILLed) and prints "committed N" each time N whole batches are durable.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "trace/writer.h"

using namespace rankscope::trace;

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s RANK_FILE EVENTS_PER_BATCH\n", argv[0]);
    return 2;
  }
  const int per_batch = std::atoi(argv[2]);
  RankIdentity id;
  id.run_id = "crash-run";
  id.rank = 0;
  id.world_size = 1;
  id.pid = getpid();
  auto writer = TraceWriter::Create(argv[1], id);
  if (!writer.ok()) {
    std::fprintf(stderr, "%s\n", writer.status().message().c_str());
    return 1;
  }
  Lane lane;
  lane.kind = LaneKind::kGpuStream;
  const LaneId lane_id = (*writer)->AddLane(lane);
  const StringId name = (*writer)->Intern("batch kernel");
  uint64_t reported = 0;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (uint64_t batch = 0; std::chrono::steady_clock::now() < give_up; ++batch) {
    EventTables events;
    for (int i = 0; i < per_batch; ++i) {
      KernelEvent k;
      k.lane = lane_id;
      k.start_ns = static_cast<TimestampNs>(batch * 1'000'000 + i * 10);
      k.end_ns = k.start_ns + 5;
      k.name = name;
      k.correlation_id = batch;  // which batch the event came in
      events.kernels.push_back(k);
    }
    if (!(*writer)->Submit(std::move(events))) {
      std::fprintf(stderr, "batch %llu dropped\n", static_cast<unsigned long long>(batch));
      return 1;
    }
    // The queue is FIFO, so N * per_batch committed events means batches 0..N-1 are durable.
    const uint64_t committed = (*writer)->stats().events_committed / per_batch;
    if (committed > reported) {
      reported = committed;
      std::printf("committed %llu\n", static_cast<unsigned long long>(committed));
      std::fflush(stdout);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // ~0.5M events/s
  }
  return 3;  // never killed: the parent test failed to do its part
}
