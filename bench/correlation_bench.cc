// The cost of CUPTI correlation on the NVTX push/pop path, without a GPU: the pairs NVTX's
// nvtxRangePushA/nvtxRangePop handlers record (Recorder::PushPlain and PopPlain, default
// domain, a short text) timed with no device tracer (the fast path) and
// with a tracer whose PushCorrelation/PopCorrelation only count, attached through
// Recorder::AttachDeviceTracer, which switches correlation on. Each run is a fresh
// recorder writing its own rank file in a temporary directory; runs alternate (off, on,
// off, ...). Like `nvtx_loop pairs`, a run times bursts of 20K pairs with untimed 40 ms
// pauses, so the drain thread keeps up, after one untimed warm-up burst. The cost of a pair
// is the thread's CPU time (CLOCK_THREAD_CPUTIME_ID) per pair; wall time is printed beside
// it. collector_bench.py runs this and judges the medians.
//
//   correlation_bench [--repetitions N] [--pairs N] [--smoke]
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/core.h>

#include "collector/device_tracer.h"
#include "collector/recorder.h"

namespace rankscope::bench {
namespace {

namespace fs = std::filesystem;
using collector::DeviceTracer;
using collector::Recorder;
using collector::RecorderOptions;

constexpr long kBurst = 20000;
constexpr auto kPause = std::chrono::milliseconds(40);

// Correlation as the recorder drives it, minus CUPTI: the calls are counted, nothing else.
// The real tracer's calls into CUPTI cost more; this measures the recorder's own share.
class CountingTracer final : public DeviceTracer {
 public:
  void PushCorrelation(uint64_t /*range_id*/) override { ++pushes_; }
  void PopCorrelation() override { ++pops_; }
  void Drain(const collector::DeviceEventSink& /*sink*/, const Submit& /*submit*/, bool /*flush*/,
             bool final) override {
    if (final) finished_.store(true);
  }
  bool finished() const override { return finished_.load(); }
  std::vector<trace::DropRecord> TakeDrops() override { return {}; }
  std::vector<std::pair<std::string, std::string>> Meta() const override {
    return {{"cupti.status", "off: correlation_bench's counting tracer"}};
  }
  // Read on the application thread, which alone calls Push/PopCorrelation.
  uint64_t pushes() const { return pushes_; }
  uint64_t pops() const { return pops_; }

 private:
  uint64_t pushes_ = 0, pops_ = 0;
  std::atomic<bool> finished_{false};
};

struct Options {
  long repetitions = 5;
  long pairs = 200000;  // timed pairs per run
};

struct RunCost {
  double cpu_ns_per_pair = 0;
  double wall_ns_per_pair = 0;
};

double ThreadCpuNs() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) * 1e9 + static_cast<double>(now.tv_nsec);
}

void RecordPairs(Recorder& recorder, const collector::NvtxDomain* domain, long pairs) {
  for (long i = 0; i < pairs; ++i) {
    recorder.PushPlain(domain, {.message = "pair"});
    recorder.PopPlain(domain);
  }
}

RecorderOptions OptionsFor(const fs::path& dir) {
  RecorderOptions options;
  options.config.run_dir = dir.string();
  options.config.run_id = "correlation_bench";
  options.config.rank.rank = 0;
  options.config.rank.world_size = 1;
  options.config.rank.source = "correlation_bench";
  options.host = "bench";
  options.pid = getpid();
  options.command_line = "correlation_bench";
  return options;
}

// One run: a recorder in `dir`, with the counting tracer when `correlate`. Prints why and
// returns false when the recorder did not record what it was given.
bool MeasureRun(const fs::path& dir, bool correlate, long pairs, RunCost& cost) {
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) {
    std::fprintf(stderr, "correlation_bench: cannot create %s: %s\n", dir.c_str(), error.message().c_str());
    return false;
  }
  Recorder recorder(OptionsFor(dir));
  CountingTracer* tracer = nullptr;
  if (correlate) {
    auto owned = std::make_unique<CountingTracer>();
    tracer = owned.get();
    recorder.AttachDeviceTracer(std::move(owned));
  }
  const collector::NvtxDomain* domain = recorder.registry().DefaultDomain();

  RecordPairs(recorder, domain, kBurst);  // warm-up: the thread's buffer, the drain thread's file
  const long bursts = std::max(1L, (pairs + kBurst - 1) / kBurst);
  double cpu_ns = 0, wall_ns = 0;
  for (long b = 0; b < bursts; ++b) {
    std::this_thread::sleep_for(kPause);
    const double cpu_start = ThreadCpuNs();
    const auto wall_start = std::chrono::steady_clock::now();
    RecordPairs(recorder, domain, kBurst);
    wall_ns += std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - wall_start).count();
    cpu_ns += ThreadCpuNs() - cpu_start;
  }
  const auto timed = static_cast<double>(bursts * kBurst);
  cost = {cpu_ns / timed, wall_ns / timed};

  const Status closed = recorder.Close(Recorder::EndReason::kExit);
  if (!closed.ok()) {
    std::fprintf(stderr, "correlation_bench: closing the recorder in %s: %s\n", dir.c_str(), closed.message().c_str());
    return false;
  }
  const uint64_t calls = 2 * static_cast<uint64_t>((bursts + 1) * kBurst);
  const collector::RecorderStats stats = recorder.stats();
  if (stats.records != calls || stats.buffer_drops != 0) {
    std::fprintf(stderr, "correlation_bench: the recorder drained %llu records and dropped %llu of %llu calls\n",
                 static_cast<unsigned long long>(stats.records), static_cast<unsigned long long>(stats.buffer_drops),
                 static_cast<unsigned long long>(calls));
    return false;
  }
  if (tracer != nullptr && (tracer->pushes() != calls / 2 || tracer->pops() != calls / 2)) {
    std::fprintf(stderr,
                 "correlation_bench: with a tracer attached the recorder made %llu correlation pushes and %llu "
                 "pops for %llu ranges (correlation did not switch on)\n",
                 static_cast<unsigned long long>(tracer->pushes()), static_cast<unsigned long long>(tracer->pops()),
                 static_cast<unsigned long long>(calls / 2));
    return false;
  }
  return true;
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

bool ParseCount(std::string_view flag, const char* text, long max, long& out) {
  const std::string_view value = text;
  long parsed = 0;
  const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), parsed);
  if (error != std::errc{} || end != value.data() + value.size() || parsed < 1 || parsed > max) {
    std::fprintf(stderr, "correlation_bench: %.*s '%s' is not a whole number in 1..%ld\n",
                 static_cast<int>(flag.size()), flag.data(), text, max);
    return false;
  }
  out = parsed;
  return true;
}

constexpr const char* kUsage = "usage: correlation_bench [--repetitions N] [--pairs N] [--smoke]";

int Main(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--smoke") {
      options = {.repetitions = 1, .pairs = kBurst};
    } else if ((arg == "--repetitions" || arg == "--pairs") && i + 1 < argc) {
      long& target = arg == "--repetitions" ? options.repetitions : options.pairs;
      if (!ParseCount(arg, argv[++i], arg == "--repetitions" ? 1000 : 1'000'000'000, target)) return 2;
    } else if (arg == "--help" || arg == "-h") {
      std::printf("%s\n", kUsage);
      return 0;
    } else {
      std::fprintf(stderr, "correlation_bench: unknown argument '%s' (%s)\n", argv[i], kUsage);
      return 2;
    }
  }

  std::string pattern = (fs::temp_directory_path() / "correlation_bench.XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) {
    std::fprintf(stderr, "correlation_bench: cannot create a directory like %s\n", pattern.c_str());
    return 1;
  }
  const fs::path root = pattern;
  std::vector<double> cpu[2], wall[2];
  const char* const names[2] = {"off", "on"};
  bool ok = true;
  for (long rep = 0; rep < options.repetitions && ok; ++rep) {
    for (int correlate = 0; correlate < 2 && ok; ++correlate) {
      RunCost cost;
      ok = MeasureRun(root / fmt::format("{}-{}", names[correlate], rep), correlate == 1, options.pairs, cost);
      if (!ok) break;
      cpu[correlate].push_back(cost.cpu_ns_per_pair);
      wall[correlate].push_back(cost.wall_ns_per_pair);
      fmt::print("run {} cpu_ns_per_pair {:.2f} wall_ns_per_pair {:.2f}\n", names[correlate], cost.cpu_ns_per_pair,
                 cost.wall_ns_per_pair);
    }
  }
  std::error_code ignored;
  fs::remove_all(root, ignored);
  if (!ok) return 1;
  for (int correlate = 0; correlate < 2; ++correlate) {
    fmt::print("median {} cpu_ns_per_pair {:.2f} wall_ns_per_pair {:.2f}\n", names[correlate],
               Median(cpu[correlate]), Median(wall[correlate]));
  }
  return 0;
}

}  // namespace
}  // namespace rankscope::bench

int main(int argc, char** argv) { return rankscope::bench::Main(argc, argv); }
