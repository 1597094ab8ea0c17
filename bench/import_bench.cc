// The Kineto importer's speed: a synthetic PyTorch-profiler trace (bench/import_bench.py
// drives it).
//   import_bench generate FILE [--events N] [--gzip]   a trace of about N events
//   import_bench parse FILE    the floor: simdjson walks every event, reading the fields the
//                              importer reads, and nothing else
//   import_bench import FILE   interop::ImportTraces into a temporary run, end to end
// parse and import print one JSON line: bytes (of JSON text), seconds, mb_per_s, events.
#include <unistd.h>

#include <simdjson.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <zlib.h>

#include "interop/interop.h"
#include "interop/import_internal.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

int Usage() {
  std::fprintf(stderr, "usage: import_bench generate FILE [--events N] [--gzip] | parse FILE | import FILE\n");
  return 2;
}

// One training step of a DDP job as PyTorch's profiler records it: nested CPU ops, their
// launches, the kernels on two streams, copies, and the step annotation.
class TraceGenerator {
 public:
  explicit TraceGenerator(uint64_t seed) : random_(seed) {}

  void Step(int step, double& now_us, std::vector<nlohmann::json>& events) {
    const double step_start = now_us;
    for (int op = 0; op < 40; ++op) {
      const double op_start = now_us;
      const double launch = op_start + 3.125;
      const uint64_t correlation = next_correlation_++;
      events.push_back(Event("cpu_op", kOps[op % std::size(kOps)], kPid, kPid, op_start, 25.5,
                             {{"External id", correlation}, {"Ev Idx", correlation}}));
      events.push_back(Event("cuda_runtime", "cudaLaunchKernel", kPid, kPid, launch, 6.25,
                             {{"External id", correlation}, {"cbid", 211}, {"correlation", correlation}}));
      const bool comm = op % 10 == 9;
      const double kernel_start = launch + 8.0 + Jitter();
      const double kernel_dur = comm ? 180.0 : 40.0 + Jitter() * 10;
      events.push_back(Event(
          "kernel", comm ? "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)" : kKernels[op % std::size(kKernels)],
          0, comm ? 13 : 7, kernel_start, kernel_dur,
          {{"External id", correlation}, {"queued", 0}, {"device", 0}, {"context", 1}, {"stream", comm ? 13 : 7},
           {"correlation", correlation}, {"registers per thread", 96}, {"shared memory", 49152},
           {"blocks per SM", 2.5}, {"warps per SM", 20.0}, {"grid", {264, 1, 1}}, {"block", {256, 1, 1}},
           {"est. achieved occupancy %", 50}}));
      if (op % 8 == 0) {
        const uint64_t copy = next_correlation_++;
        events.push_back(Event("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", 0, 7, kernel_start + kernel_dur, 12.0,
                               {{"device", 0}, {"context", 1}, {"stream", 7}, {"correlation", copy}, {"bytes", 1 << 20},
                                {"memory bandwidth (GB/s)", 87.4}}));
      }
      now_us = op_start + 30.0;
    }
    events.push_back(Event("user_annotation", fmt::format("ProfilerStep#{}", step), kPid, kPid, step_start,
                           now_us - step_start, {{"External id", next_correlation_++}}));
    now_us += 50.0;
  }

 private:
  static constexpr int kPid = 4242;
  static constexpr const char* kOps[] = {"aten::linear", "aten::addmm", "aten::relu", "aten::layer_norm",
                                          "aten::softmax", "aten::mul", "aten::add_", "aten::copy_"};
  static constexpr const char* kKernels[] = {
      "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>(Params)",
      "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>, at::detail::Array<char*, 3> >(int, at::native::AddFunctor<float>, at::detail::Array<char*, 3>)",
      "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>(int, float, float const*, float const*, float const*, float*, float*, float*)",
      "ampere_sgemm_128x64_tn"};

  static nlohmann::json Event(const char* cat, std::string_view name, int pid, int tid, double ts, double dur,
                              nlohmann::json args) {
    return {{"ph", "X"}, {"cat", cat}, {"name", name}, {"pid", pid}, {"tid", tid},
            {"ts", Micros(ts)}, {"dur", Micros(dur)}, {"args", std::move(args)}};
  }
  // Kineto writes microseconds with three decimals: keep that form.
  static double Micros(double value) { return std::round(value * 1000.0) / 1000.0; }
  double Jitter() { return std::uniform_real_distribution<double>(0.0, 2.0)(random_); }

  std::mt19937_64 random_;
  uint64_t next_correlation_ = 1000;
};

int Generate(const fs::path& file, uint64_t target_events, bool gzip) {
  TraceGenerator generator(42);
  std::string text = R"({"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 8}, )"
                     R"("traceEvents": [)";
  std::vector<nlohmann::json> events;
  double now_us = 1000.0;
  uint64_t written = 0;
  for (int step = 0; written < target_events; ++step) {
    events.clear();
    generator.Step(step, now_us, events);
    for (const nlohmann::json& event : events) {
      if (written > 0) text += ",\n";
      text += event.dump();
      ++written;
    }
  }
  text += R"(], "displayTimeUnit": "ms", "baseTimeNanoseconds": 1700000000000000000})";
  if (!gzip) {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    if (!out) return std::fprintf(stderr, "import_bench: cannot write %s\n", file.c_str()), 1;
  } else {
    gzFile out = gzopen(file.c_str(), "wb6");
    if (out == nullptr || gzwrite(out, text.data(), static_cast<unsigned>(text.size())) != static_cast<int>(text.size()) ||
        gzclose(out) != Z_OK) {
      return std::fprintf(stderr, "import_bench: cannot write %s\n", file.c_str()), 1;
    }
  }
  std::printf("{\"events\": %llu, \"bytes\": %zu}\n", static_cast<unsigned long long>(written), text.size());
  return 0;
}

void PrintRate(size_t bytes, double seconds, uint64_t events) {
  std::printf("{\"bytes\": %zu, \"seconds\": %.4f, \"mb_per_s\": %.1f, \"events\": %llu}\n", bytes, seconds,
              static_cast<double>(bytes) / 1e6 / seconds, static_cast<unsigned long long>(events));
}

// The floor: read (and gunzip) the file, then walk every event reading what an importer
// must (category, name, timestamps, ids, args) without converting or storing anything.
int Parse(const fs::path& file) {
  const auto start = Clock::now();
  auto text = rankscope::interop::import::ReadMaybeGzip(file);
  if (!text.ok()) return std::fprintf(stderr, "import_bench: %s\n", text.status().message().c_str()), 1;
  simdjson::ondemand::parser parser;
  auto document = parser.iterate(text->data(), text->size(), text->capacity());
  uint64_t events = 0, checksum = 0;
  for (auto event : document["traceEvents"].get_array()) {
    ++events;
    for (auto field : event.get_object()) {
      std::string_view key = field.unescaped_key();
      std::string_view token;
      if (key == "args") {
        for (auto arg : field.value().get_object()) {
          if (arg.value().raw_json_token().get(token) == simdjson::SUCCESS) checksum += token.size();
        }
      } else if (field.value().raw_json_token().get(token) == simdjson::SUCCESS) {
        checksum += token.size();
      }
    }
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (checksum == 0) return 1;
  PrintRate(text->size(), seconds, events);
  return 0;
}

int Import(const fs::path& file) {
  const size_t bytes = [&] {
    auto text = rankscope::interop::import::ReadMaybeGzip(file);
    return text.ok() ? text->size() : size_t{0};
  }();
  const fs::path run = fs::temp_directory_path() / fmt::format("rankscope-import-bench-{}", getpid());
  std::error_code ec;
  fs::remove_all(run, ec);
  const auto start = Clock::now();
  auto imported = rankscope::interop::ImportTraces({file}, run);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  fs::remove_all(run, ec);
  if (!imported.ok()) return std::fprintf(stderr, "import_bench: %s\n", imported.status().message().c_str()), 1;
  PrintRate(bytes, seconds, imported->events);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return Usage();
  const std::string_view mode = argv[1];
  const fs::path file = argv[2];
  if (mode == "generate") {
    uint64_t events = 1'000'000;
    bool gzip = false;
    for (int i = 3; i < argc; ++i) {
      if (std::strcmp(argv[i], "--events") == 0 && i + 1 < argc) {
        events = std::strtoull(argv[++i], nullptr, 10);
      } else if (std::strcmp(argv[i], "--gzip") == 0) {
        gzip = true;
      } else {
        return Usage();
      }
    }
    return Generate(file, events, gzip);
  }
  if (argc != 3) return Usage();
  if (mode == "parse") return Parse(file);
  if (mode == "import") return Import(file);
  return Usage();
}
