// The NVTX workload of the collector benchmarks, run by collector_bench.py under three
// injections (none, empty, the collector):
//   nvtx_loop pairs N [T]       the process makes N push+pop pairs, split evenly over T
//                               threads (default 1), in timed bursts of 20K pairs (each
//                               thread 20K/T) with untimed 40 ms pauses between them
//   nvtx_loop continuous N [T]  two threads first record 300 ranges each and exit (the
//                               collector's file and threads are then up), then T threads
//                               (default 1) each make N pairs in one tight loop, no pauses
//   nvtx_loop rate T R S        T threads together making R NVTX calls per second for S
//                               seconds (a push and a pop are one call each); prints the
//                               calls made and the seconds it took
//   nvtx_loop collective-pairs N           one thread makes N "allreduce" ranges of each kind
//                               below, alternating bursts of 5K pairs of one kind and the
//                               other with untimed 100 ms pauses (the collector stores each
//                               burst before the next), and prints per kind its CPU time per
//                               pair and each burst's (`kind K pairs N cpu_ns_per_pair X`,
//                               `bursts K NS NS ...`). Each range carries the trainer's
//                               64-byte collective payload (comm, sequence counting up, bytes,
//                               root, peer, comm rank and size, bucket) in domain `rankscope`;
//                               kind `collective` under the schema name `rankscope
//                               collective`, so the collector's flight recorder enters and
//                               completes it, kind `plain` under `bench plain`: the same
//                               records, payload and rows, and no more
//   nvtx_loop collective-rate KIND R S     one thread making R pairs of KIND (`collective` or
//                               `plain`) per second for S seconds; prints the calls made and
//                               the seconds it took
// pairs and continuous print, for each timed thread, its CPU time per pair
// (CLOCK_THREAD_CPUTIME_ID: what the pairs cost the thread itself, page faults and kernel
// time included, not the time it waited for a core) and its wall time per pair; then every
// NVTX call the process made (warm-ups included) and its peak RSS so far: ru_maxrss, and
// VmHWM, which leaves out what exec inherited from the parent.
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtPayload.h>
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

constexpr long kProcessBurst = 20000;           // pairs per burst, all threads together
constexpr auto kPause = std::chrono::milliseconds(40);
// collective-pairs: a range with a payload costs the collector's threads ~5 us, so smaller
// bursts and longer pauses let them store each burst before the next begins, and the
// application thread is timed while they rest rather than beside them.
constexpr long kCollectiveBurst = 5000;
constexpr auto kCollectivePause = std::chrono::milliseconds(100);
constexpr int kWarmThreads = 2;                  // continuous: threads recording first
constexpr long kWarmRanges = 300;                // ... this many ranges each

double ThreadCpuNs() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) * 1e9 + static_cast<double>(now.tv_nsec);
}

// This program image's own peak RSS (VmHWM). ru_maxrss also counts what exec inherited: a
// process started by a big parent (Python) reports at least the parent's size.
long OwnPeakRssKib() {
  std::FILE* status = std::fopen("/proc/self/status", "r");
  if (status == nullptr) return -1;
  char line[256];
  long kib = -1;
  while (std::fgets(line, sizeof line, status) != nullptr) {
    if (std::sscanf(line, "VmHWM: %ld kB", &kib) == 1) break;
  }
  std::fclose(status);
  return kib;
}

void RecordPairs(long pairs, const char* name) {
  for (long i = 0; i < pairs; ++i) {
    nvtxRangePushA(name);
    nvtxRangePop();
  }
}

// The trainer's `rankscope collective` payload (trainer/annotations.h, CollectiveFields).
struct CollectiveFields {
  uint64_t comm;
  uint64_t sequence;
  uint64_t bytes;
  int64_t root;
  int64_t peer;
  int64_t comm_rank;
  int64_t comm_size;
  int64_t bucket;
};

// Domain `rankscope` with the trainer's collective layout registered twice: under the
// convention's name, and under another.
struct PayloadRanges {
  nvtxDomainHandle_t domain = nullptr;
  uint64_t collective_schema = 0;  // `rankscope collective`: the flight recorder's
  uint64_t plain_schema = 0;       // `bench plain`: an ordinary payload
};
PayloadRanges g_payload_ranges;

uint64_t RegisterCollectiveLayout(nvtxDomainHandle_t domain, const char* schema_name) {
  static const nvtxPayloadSchemaEntry_t entries[] = {
      {0, NVTX_PAYLOAD_ENTRY_TYPE_UINT64, "comm", nullptr, 0, offsetof(CollectiveFields, comm), nullptr, nullptr},
      {0, NVTX_PAYLOAD_ENTRY_TYPE_UINT64, "sequence", nullptr, 0, offsetof(CollectiveFields, sequence), nullptr,
       nullptr},
      {0, NVTX_PAYLOAD_ENTRY_TYPE_UINT64, "bytes", nullptr, 0, offsetof(CollectiveFields, bytes), nullptr, nullptr},
      {0, NVTX_PAYLOAD_ENTRY_TYPE_INT64, "root", nullptr, 0, offsetof(CollectiveFields, root), nullptr, nullptr},
      {0, NVTX_PAYLOAD_ENTRY_TYPE_INT64, "peer", nullptr, 0, offsetof(CollectiveFields, peer), nullptr, nullptr},
      {0, NVTX_PAYLOAD_ENTRY_TYPE_INT64, "comm_rank", nullptr, 0, offsetof(CollectiveFields, comm_rank), nullptr,
       nullptr},
      {0, NVTX_PAYLOAD_ENTRY_TYPE_INT64, "comm_size", nullptr, 0, offsetof(CollectiveFields, comm_size), nullptr,
       nullptr},
      {0, NVTX_PAYLOAD_ENTRY_TYPE_INT64, "bucket", nullptr, 0, offsetof(CollectiveFields, bucket), nullptr, nullptr},
  };
  nvtxPayloadSchemaAttr_t attr{};
  attr.fieldMask = NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_NAME | NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_TYPE |
                   NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_ENTRIES | NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_NUM_ENTRIES |
                   NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_STATIC_SIZE;
  attr.name = schema_name;
  attr.type = NVTX_PAYLOAD_SCHEMA_TYPE_STATIC;
  attr.entries = entries;
  attr.numEntries = sizeof(entries) / sizeof(entries[0]);
  attr.payloadStaticSize = sizeof(CollectiveFields);
  return nvtxPayloadSchemaRegister(domain, &attr);
}

// As the trainer does (trainer/annotations.cc).
void RegisterPayloadRanges() {
  g_payload_ranges.domain = nvtxDomainCreateA("rankscope");
  g_payload_ranges.collective_schema = RegisterCollectiveLayout(g_payload_ranges.domain, "rankscope collective");
  g_payload_ranges.plain_schema = RegisterCollectiveLayout(g_payload_ranges.domain, "bench plain");
}

// Pairs as the trainer makes them around a Gloo all-reduce: always named "allreduce" (both
// kinds record the same text), each the communicator's next number, counted in `sequence`.
void RecordPayloadPairs(uint64_t schema, long pairs, uint64_t& sequence) {
  CollectiveFields fields{0xCBF29CE484222325, 0, 1 << 20, -1, -1, 0, 2, 0};
  for (long i = 0; i < pairs; ++i) {
    fields.sequence = sequence++;
    nvtxPayloadData_t data{schema, sizeof(fields), &fields};
    nvtxEventAttributes_t attributes{};
    attributes.version = NVTX_VERSION;
    attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    attributes.payloadType = NVTX_PAYLOAD_TYPE_EXT;
    attributes.reserved0 = 1;  // one nvtxPayloadData_t
    attributes.payload.ullValue = reinterpret_cast<uint64_t>(&data);
    attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
    attributes.message.ascii = "allreduce";
    nvtxDomainRangePushEx(g_payload_ranges.domain, &attributes);
    nvtxDomainRangePop(g_payload_ranges.domain);
  }
}

uint64_t g_rate_schema = 0;  // collective-rate: the kind's schema

void RecordRatePairs(long pairs, const char* /*name*/) {
  thread_local uint64_t sequence = 0;
  RecordPayloadPairs(g_rate_schema, pairs, sequence);
}

using Recording = void (*)(long pairs, const char* name);

// What one timed thread measured.
struct ThreadCost {
  long pairs = 0;
  double cpu_ns = 0;
  double wall_ns = 0;
};

void PrintCosts(const std::vector<ThreadCost>& costs, long calls) {
  for (size_t t = 0; t < costs.size(); ++t) {
    const double pairs = static_cast<double>(costs[t].pairs);
    std::printf("thread %zu pairs %ld cpu_ns_per_pair %.2f wall_ns_per_pair %.2f\n", t, costs[t].pairs,
                costs[t].cpu_ns / pairs, costs[t].wall_ns / pairs);
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  std::printf("calls %ld\npeak_rss_kib %ld\nvm_hwm_kib %ld\n", calls, usage.ru_maxrss, OwnPeakRssKib());
}

// Times bursts of pairs and pauses between them (untimed) so the collector's threads can
// drain: the cost measured is the application thread's while the writer keeps up. Every
// thread starts each burst together (after a barrier), so T threads contend as they would.
int Pairs(long pairs, int threads) {
  const long burst = kProcessBurst / threads;
  const long bursts = std::max(1L, (pairs / threads + burst - 1) / burst);
  std::vector<ThreadCost> costs(static_cast<size_t>(threads));
  std::barrier sync(threads);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      RecordPairs(burst, "warm");  // NVTX init, the thread's first-event setup
      ThreadCost& cost = costs[static_cast<size_t>(t)];
      for (long b = 0; b < bursts; ++b) {
        std::this_thread::sleep_for(kPause);
        sync.arrive_and_wait();
        const double cpu_start = ThreadCpuNs();
        const auto wall_start = Clock::now();
        RecordPairs(burst, "pair");
        cost.wall_ns += std::chrono::duration<double, std::nano>(Clock::now() - wall_start).count();
        cost.cpu_ns += ThreadCpuNs() - cpu_start;
      }
      cost.pairs = bursts * burst;
    });
  }
  for (auto& worker : workers) worker.join();
  PrintCosts(costs, 2 * threads * (bursts + 1) * burst);
  return 0;
}

// A program recording ranges nonstop: once the buffers are full the collector must drop
// (and count) rather than slow the thread down or grow without bound.
int Continuous(long pairs, int threads) {
  std::vector<std::thread> warm;
  for (int t = 0; t < kWarmThreads; ++t) warm.emplace_back([] { RecordPairs(kWarmRanges, "warm"); });
  for (auto& thread : warm) thread.join();
  // Untimed: lets a collector's drain thread create its file, as in a running program.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));

  std::vector<ThreadCost> costs(static_cast<size_t>(threads));
  std::barrier sync(threads);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      sync.arrive_and_wait();
      const double cpu_start = ThreadCpuNs();
      const auto wall_start = Clock::now();
      RecordPairs(pairs, "pair");
      ThreadCost& cost = costs[static_cast<size_t>(t)];
      cost.wall_ns = std::chrono::duration<double, std::nano>(Clock::now() - wall_start).count();
      cost.cpu_ns = ThreadCpuNs() - cpu_start;
      cost.pairs = pairs;
    });
  }
  for (auto& worker : workers) worker.join();
  PrintCosts(costs, 2 * (kWarmThreads * kWarmRanges + threads * pairs));
  return 0;
}

int Rate(int threads, double calls_per_second, double seconds, Recording record = RecordPairs) {
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
        record(pairs_per_slice, "event");
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

// Both kinds on one thread in alternating bursts (plain, collective, collective, plain, ...:
// each kind first as often as second), so that both meet the same machine; each burst is
// timed on its own. Prints per kind its CPU time per pair over all bursts and each burst's.
int CollectivePairs(long pairs) {
  const long bursts = std::max(1L, (pairs + kCollectiveBurst - 1) / kCollectiveBurst);  // per kind
  const uint64_t schemas[2] = {g_payload_ranges.plain_schema, g_payload_ranges.collective_schema};
  const char* const names[2] = {"plain", "collective"};
  uint64_t sequences[2] = {0, 0};
  std::vector<double> burst_ns_per_pair[2];
  double cpu_ns[2] = {0, 0};
  for (int kind = 0; kind < 2; ++kind) RecordPayloadPairs(schemas[kind], kCollectiveBurst, sequences[kind]);  // warm
  for (long b = 0; b < 2 * bursts; ++b) {
    const int kind = static_cast<int>((b + 1) / 2 % 2);
    std::this_thread::sleep_for(kCollectivePause);
    const double cpu_start = ThreadCpuNs();
    RecordPayloadPairs(schemas[kind], kCollectiveBurst, sequences[kind]);
    const double spent = ThreadCpuNs() - cpu_start;
    cpu_ns[kind] += spent;
    burst_ns_per_pair[kind].push_back(spent / static_cast<double>(kCollectiveBurst));
  }
  for (int kind = 0; kind < 2; ++kind) {
    std::printf("kind %s pairs %ld cpu_ns_per_pair %.2f\nbursts %s", names[kind], bursts * kCollectiveBurst,
                cpu_ns[kind] / static_cast<double>(bursts * kCollectiveBurst), names[kind]);
    for (double ns : burst_ns_per_pair[kind]) std::printf(" %.2f", ns);
    std::printf("\n");
  }
  PrintCosts({}, 2 * 2 * (bursts + 1) * kCollectiveBurst);
  return 0;
}

// A count from the command line: a whole number in [1, max], or 0 when it is not one.
long Count(const char* text, long max) {
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  return end != text && *end == '\0' && value >= 1 && value <= max ? value : 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string_view mode = argc >= 2 ? argv[1] : "";
  if ((mode == "pairs" || mode == "continuous") && (argc == 3 || argc == 4)) {
    const long pairs = Count(argv[2], 1L << 40);
    const long threads = argc == 4 ? Count(argv[3], 256) : 1;
    if (pairs == 0 || threads == 0) {
      std::fprintf(stderr, "nvtx_loop: pairs and threads must be positive whole numbers (threads at most 256)\n");
      return 2;
    }
    return mode == "pairs" ? Pairs(pairs, static_cast<int>(threads)) : Continuous(pairs, static_cast<int>(threads));
  }
  if (argc == 5 && mode == "rate") {
    return Rate(std::atoi(argv[2]), std::atof(argv[3]), std::atof(argv[4]));
  }
  if (mode == "collective-pairs" && argc == 3) {
    const long pairs = Count(argv[2], 1L << 40);
    if (pairs == 0) {
      std::fprintf(stderr, "nvtx_loop: pairs must be a positive whole number\n");
      return 2;
    }
    RegisterPayloadRanges();
    return CollectivePairs(pairs);
  }
  if (mode == "collective-rate" && argc == 5) {
    const std::string_view kind = argv[2];
    if (kind != "collective" && kind != "plain") {
      std::fprintf(stderr, "nvtx_loop: the kind is 'collective' or 'plain', not '%s'\n", argv[2]);
      return 2;
    }
    RegisterPayloadRanges();
    g_rate_schema = kind == "collective" ? g_payload_ranges.collective_schema : g_payload_ranges.plain_schema;
    return Rate(1, 2 * std::atof(argv[3]), std::atof(argv[4]), RecordRatePairs);
  }
  std::fprintf(stderr,
               "usage: nvtx_loop pairs N [THREADS] | nvtx_loop continuous N [THREADS] | "
               "nvtx_loop rate THREADS CALLS_PER_S SECONDS | nvtx_loop collective-pairs N | "
               "nvtx_loop collective-rate collective|plain PAIRS_PER_S SECONDS\n");
  return 2;
}
