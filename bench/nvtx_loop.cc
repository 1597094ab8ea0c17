// The NVTX workload of the collector benchmarks, run by collector_bench.py under three
// injections (none, empty, the collector):
//   nvtx_loop pairs N          N push+pop pairs on one thread, in timed bursts; prints ns
//                              per pair
//   nvtx_loop rate T R S       T threads together making R NVTX calls per second for S
//                              seconds (a push and a pop are one call each); prints the
//                              calls made and the seconds it took
#include <nvtx3/nvToolsExt.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

// Times bursts of pairs and pauses between them (untimed) so the collector's threads can
// drain: the cost measured is the application thread's, not a backlog the writer (about
// 1M events/s) could never clear at this loop's 7M+ ranges/s.
int Pairs(long pairs) {
  constexpr long kBurst = 20000;
  for (long i = 0; i < kBurst; ++i) {  // warm up: NVTX init, first-event setup
    nvtxRangePushA("warm");
    nvtxRangePop();
  }
  double ns = 0;
  for (long done = 0; done < pairs; done += kBurst) {
    std::this_thread::sleep_for(std::chrono::milliseconds(40));
    auto start = Clock::now();
    for (long i = 0; i < kBurst; ++i) {
      nvtxRangePushA("pair");
      nvtxRangePop();
    }
    ns += std::chrono::duration<double, std::nano>(Clock::now() - start).count();
  }
  long timed = (pairs + kBurst - 1) / kBurst * kBurst;
  std::printf("ns_per_pair %.2f\n", ns / static_cast<double>(timed));
  return 0;
}

int Rate(int threads, double calls_per_second, double seconds) {
  // Each thread makes its share in slices every 2 ms and sleeps in between, so the
  // producers leave the CPU to the collector's threads as a real program would.
  const double per_thread = calls_per_second / threads;
  const auto slice = std::chrono::milliseconds(2);
  const long pairs_per_slice = static_cast<long>(per_thread * 0.002 / 2);
  const long slices = static_cast<long>(seconds / 0.002);
  auto start = Clock::now();
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&] {
      auto next = Clock::now();
      for (long s = 0; s < slices; ++s) {
        for (long i = 0; i < pairs_per_slice; ++i) {
          nvtxRangePushA("event");
          nvtxRangePop();
        }
        next += slice;
        std::this_thread::sleep_until(next);
      }
    });
  }
  for (auto& worker : workers) worker.join();
  double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  std::printf("calls %ld seconds %.3f\n", 2 * pairs_per_slice * slices * threads, elapsed);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string_view(argv[1]) == "pairs") return Pairs(std::atol(argv[2]));
  if (argc == 5 && std::string_view(argv[1]) == "rate") {
    return Rate(std::atoi(argv[2]), std::atof(argv[3]), std::atof(argv[4]));
  }
  std::fprintf(stderr, "usage: nvtx_loop pairs N | nvtx_loop rate THREADS CALLS_PER_S SECONDS\n");
  return 2;
}
