// Gloo all-reduce on N local ranks (processes meeting through a temporary FileStore)
// against this machine's memcpy bandwidth: how close does the CPU trainer's gradient
// exchange get to the memory system, and how much does the TCP transport cost?
//
//   allreduce_bench [--ranks N] [--smoke]
//
// Per size: the time of one all-reduce (mean over timed repetitions after a warm-up),
// algbw = bytes / time and busbw = algbw * 2(n-1)/n (the nccl-tests definition: the
// traffic each rank's link carries in a ring all-reduce), and memcpy bandwidth (bytes
// copied per second, one buffer to another, measured by the parent before the ranks start
// so that nothing competes with it).
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "trainer/gloo_group.h"
#include "trainer/rendezvous.h"

namespace {

using rankscope::Status;
using rankscope::trainer::GlooGroup;
using rankscope::trainer::Rendezvous;
using rankscope::trainer::RendezvousSpec;
using rankscope::trainer::World;
using Clock = std::chrono::steady_clock;

constexpr size_t kKiB = 1024;
constexpr size_t kMiB = 1024 * kKiB;
constexpr auto kCommTimeout = std::chrono::seconds(60);

struct Options {
  int ranks = 2;
  bool smoke = false;
};

std::vector<size_t> Sizes(bool smoke) {
  if (smoke) return {1 * kKiB, 64 * kKiB};
  std::vector<size_t> sizes;
  for (size_t bytes = kKiB; bytes <= 64 * kMiB; bytes *= 4) sizes.push_back(bytes);
  return sizes;
}

// Enough repetitions for about a gigabyte per size: small sizes measure latency over many
// calls, large ones a few seconds at most. Every rank computes the same number.
int Repetitions(size_t bytes, bool smoke) {
  if (smoke) return 1;
  return static_cast<int>(std::clamp<size_t>((1024 * kMiB) / bytes, 10, 1000));
}

int Warmups(bool smoke) { return smoke ? 1 : 3; }

std::string SizeLabel(size_t bytes) {
  if (bytes >= kMiB && bytes % kMiB == 0) return fmt::format("{} MiB", bytes / kMiB);
  if (bytes >= kKiB && bytes % kKiB == 0) return fmt::format("{} KiB", bytes / kKiB);
  return fmt::format("{} B", bytes);
}

// Keeps the compiler from dropping copies whose results nobody reads.
void Escape(void* pointer) { asm volatile("" : : "g"(pointer) : "memory"); }

// Bytes copied per second for copies of `bytes`, repeated for at least `min_time`.
double MemcpyBandwidth(size_t bytes, std::chrono::milliseconds min_time) {
  std::vector<char> source(bytes, 1);
  std::vector<char> target(bytes, 0);
  std::memcpy(target.data(), source.data(), bytes);  // fault the pages in
  size_t copies = 1;
  while (true) {
    const auto start = Clock::now();
    for (size_t i = 0; i < copies; ++i) {
      std::memcpy(target.data(), source.data(), bytes);
      Escape(target.data());
    }
    const std::chrono::duration<double> elapsed = Clock::now() - start;
    if (elapsed >= min_time) return static_cast<double>(bytes * copies) / elapsed.count();
    copies *= 2;
  }
}

struct Row {
  size_t bytes = 0;
  double seconds = 0;  // one all-reduce
};

// One rank: joins, checks each size once for a correct sum, then times it. Rank 0 prints.
Status RunRank(int rank, const Options& options, const std::string& dir,
               const std::vector<double>& memcpy_bandwidth) {
  RendezvousSpec spec;
  spec.file_dir = dir;
  World world;
  world.rank = rank;
  world.world_size = options.ranks;
  world.launcher = "allreduce_bench";
  auto rendezvous = Rendezvous::Connect(spec, world, kCommTimeout, "allreduce-bench");
  if (!rendezvous.ok()) return rendezvous.status();
  auto group = GlooGroup::Create(**rendezvous, kCommTimeout);
  if (!group.ok()) return group.status();

  const std::vector<size_t> sizes = Sizes(options.smoke);
  const int n = options.ranks;
  std::vector<float> buffer(sizes.back() / sizeof(float));
  std::vector<Row> rows;
  if (rank == 0) {
    fmt::print("Gloo all-reduce (ring, fp32 sum), {} ranks on this host, TCP over loopback\n", n);
    fmt::print("{:>8} {:>6} {:>12} {:>12} {:>12} {:>14}\n", "size", "reps", "time (us)", "algbw GB/s",
               "busbw GB/s", "memcpy GB/s");
    std::fflush(stdout);
  }
  for (size_t index = 0; index < sizes.size(); ++index) {
    const size_t bytes = sizes[index];
    const size_t count = bytes / sizeof(float);
    float* data = buffer.data();
    std::fill(data, data + count, static_cast<float>(rank + 1));
    if (Status reduced = (*group)->AllReduceSum(data, count); !reduced.ok()) return reduced;
    const float expected = static_cast<float>(n * (n + 1) / 2);
    if (std::any_of(data, data + count, [&](float value) { return value != expected; })) {
      return rankscope::InternalError(fmt::format("wrong all-reduce result at {}", SizeLabel(bytes)));
    }
    std::fill(data, data + count, 0.0f);  // zeros stay zeros: no overflow over many repetitions
    for (int i = 0; i < Warmups(options.smoke); ++i) {
      if (Status reduced = (*group)->AllReduceSum(data, count); !reduced.ok()) return reduced;
    }
    if (Status synced = (*group)->Barrier(); !synced.ok()) return synced;
    const int repetitions = Repetitions(bytes, options.smoke);
    const auto start = Clock::now();
    for (int i = 0; i < repetitions; ++i) {
      if (Status reduced = (*group)->AllReduceSum(data, count); !reduced.ok()) return reduced;
    }
    const std::chrono::duration<double> elapsed = Clock::now() - start;
    const double seconds = elapsed.count() / repetitions;
    rows.push_back({bytes, seconds});
    if (rank == 0) {
      const double algbw = static_cast<double>(bytes) / seconds / 1e9;
      const double busbw = algbw * 2.0 * (n - 1) / n;
      fmt::print("{:>8} {:>6} {:>12.1f} {:>12.3f} {:>12.3f} {:>14.2f}\n", SizeLabel(bytes), repetitions,
                 seconds * 1e6, algbw, busbw, memcpy_bandwidth[index] / 1e9);
      std::fflush(stdout);
    }
  }
  if (rank == 0) {
    const Row& largest = rows.back();
    const double busbw = static_cast<double>(largest.bytes) / largest.seconds * 2.0 * (n - 1) / n;
    const double copy = memcpy_bandwidth.back();
    fmt::print("Gloo all-reduce busbw at {}, {} ranks: {:.2f} GB/s = {:.3f}× memcpy bandwidth ({:.2f} GB/s)\n",
               SizeLabel(largest.bytes), n, busbw / 1e9, busbw / copy, copy / 1e9);
    std::fflush(stdout);
  }
  return (*group)->Barrier();  // nobody leaves while rank 0 still needs the connections
}

bool ParseOptions(int argc, char** argv, Options& options) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--smoke") {
      options.smoke = true;
    } else if (arg == "--ranks" && i + 1 < argc) {
      const std::string_view value = argv[++i];
      int ranks = 0;
      const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), ranks);
      if (error != std::errc{} || end != value.data() + value.size() || ranks < 2 || ranks > 64) {
        std::fprintf(stderr, "allreduce_bench: --ranks '%s' is not a number in 2..64\n", argv[i]);
        return false;
      }
      options.ranks = ranks;
    } else if (arg == "--help" || arg == "-h") {
      std::printf("usage: allreduce_bench [--ranks N] [--smoke]\n");
      std::exit(0);
    } else {
      std::fprintf(stderr, "allreduce_bench: unknown argument '%s' (usage: allreduce_bench [--ranks N] [--smoke])\n",
                   argv[i]);
      return false;
    }
  }
  return true;
}

std::string DescribeExit(int status) {
  if (WIFEXITED(status)) return fmt::format("exit status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return fmt::format("signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
  return "unknown status";
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (!ParseOptions(argc, argv, options)) return 2;

  // memcpy first, alone on the machine, before any rank exists.
  const auto min_time = std::chrono::milliseconds(options.smoke ? 1 : 100);
  std::vector<double> memcpy_bandwidth;
  for (size_t bytes : Sizes(options.smoke)) memcpy_bandwidth.push_back(MemcpyBandwidth(bytes, min_time));

  std::string pattern = (std::filesystem::temp_directory_path() / "allreduce-bench-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) {
    std::fprintf(stderr, "allreduce_bench: cannot create a temporary directory: %s\n", std::strerror(errno));
    return 1;
  }
  const std::string dir = pattern;

  std::fflush(stdout);  // children must not inherit and print again what is buffered
  std::vector<pid_t> children;
  for (int rank = 0; rank < options.ranks; ++rank) {
    const pid_t pid = fork();
    if (pid < 0) {
      std::fprintf(stderr, "allreduce_bench: fork failed: %s\n", std::strerror(errno));
      for (pid_t child : children) kill(child, SIGKILL);
      break;
    }
    if (pid == 0) {
      const Status status = RunRank(rank, options, dir, memcpy_bandwidth);
      if (!status.ok()) std::fprintf(stderr, "allreduce_bench: rank %d: %s\n", rank, status.message().c_str());
      std::fflush(stdout);
      std::fflush(stderr);
      _exit(status.ok() ? 0 : 1);
    }
    children.push_back(pid);
  }

  // Each rank fails by itself on a dead peer (the group's timeout); this deadline only
  // guards against a rank stuck outside a collective.
  const auto deadline = Clock::now() + (options.smoke ? std::chrono::minutes(2) : std::chrono::minutes(15));
  std::vector<std::string> failures;
  if (children.size() != static_cast<size_t>(options.ranks)) failures.push_back("not every rank could be started");
  std::vector<bool> done(children.size(), false);
  size_t remaining = children.size();
  while (remaining > 0) {
    for (size_t rank = 0; rank < children.size(); ++rank) {
      if (done[rank]) continue;
      int status = 0;
      const pid_t reaped = waitpid(children[rank], &status, WNOHANG);
      if (reaped == 0) continue;
      done[rank] = true;
      --remaining;
      if (reaped < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        failures.push_back(fmt::format("rank {} failed ({})", rank, reaped < 0 ? "lost" : DescribeExit(status)));
      }
    }
    if (remaining > 0 && Clock::now() >= deadline) {
      for (size_t rank = 0; rank < children.size(); ++rank) {
        if (!done[rank]) {
          kill(children[rank], SIGKILL);
          waitpid(children[rank], nullptr, 0);
          failures.push_back(fmt::format("rank {} did not finish in time and was killed", rank));
        }
      }
      break;
    }
    if (remaining > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }

  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  if (!failures.empty()) {
    std::string text;
    for (const std::string& failure : failures) text += (text.empty() ? "" : "; ") + failure;
    std::fprintf(stderr, "allreduce_bench: FAILED: %s\n", text.c_str());
    return 1;
  }
  return 0;
}
