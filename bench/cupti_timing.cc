// Kernels of known length, for checking the times CUPTI gives the collector
// (bench/cupti_timing_check.py runs this under `rankscope profile` and compares).
//
//   cupti_timing OUT.json [--repeats N]
//
// Each kernel spins on the GPU's global nanosecond timer for a chosen time. Three clocks
// time launch i, which runs with i + 1 blocks so that the check can find it by its grid:
// CUDA events recorded around it on its stream, the kernel's own global-timer reading, and
// CLOCK_REALTIME (the rank file's clock) read before the launch and after the event's
// synchronization. A warm-up launch of kWarmupBlocks blocks comes first (module loading).
// Exits 2 with one line when there is no usable GPU, 1 on any other failure.
#include <time.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include <cuda_runtime_api.h>
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "bench/spin_kernel.h"

namespace {

constexpr int kWarmupBlocks = 100;
// 10 µs to 20 ms: launch-latency scale up to a long GEMM's.
constexpr uint64_t kDurationsNs[] = {10'000, 50'000, 200'000, 1'000'000, 5'000'000, 20'000'000};

int64_t RealtimeNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

[[noreturn]] void Fail(const std::string& what) {
  fmt::print(stderr, "cupti_timing: {}\n", what);
  std::exit(1);
}

void Check(cudaError_t error, const char* what) {
  if (error != cudaSuccess) Fail(fmt::format("{}: {} ({})", what, cudaGetErrorName(error), cudaGetErrorString(error)));
}

int Usage(const char* program) {
  fmt::print(stderr, "usage: {} OUT.json [--repeats N]   (N from 1 to 5)\n", program);
  return 64;
}

}  // namespace

int main(int argc, char** argv) {
  std::string out_path;
  int repeats = 3;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--repeats" && i + 1 < argc) {
      repeats = std::atoi(argv[++i]);
    } else if (out_path.empty() && !arg.starts_with("-")) {
      out_path = arg;
    } else {
      return Usage(argv[0]);
    }
  }
  constexpr int kDurations = static_cast<int>(std::size(kDurationsNs));
  // Launch i has i + 1 blocks, all resident at once on any GPU of 32+ SMs.
  if (out_path.empty() || repeats < 1 || repeats > 5) return Usage(argv[0]);

  int devices = 0;
  if (const cudaError_t error = cudaGetDeviceCount(&devices); error != cudaSuccess || devices == 0) {
    fmt::print("cupti_timing: no usable GPU ({})\n",
               error != cudaSuccess ? fmt::format("cudaGetDeviceCount: {}", cudaGetErrorName(error))
                                    : std::string("no CUDA device"));
    return 2;
  }
  cudaDeviceProp properties{};
  Check(cudaGetDeviceProperties(&properties, 0), "cudaGetDeviceProperties");
  cudaStream_t stream = nullptr;
  Check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  const int launches = repeats * kDurations;
  void* device_memory = nullptr;
  Check(cudaMalloc(&device_memory, sizeof(uint64_t) * (launches + 1)), "cudaMalloc");
  auto* measured = static_cast<uint64_t*>(device_memory);
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
  Check(cudaEventCreate(&start), "cudaEventCreate");
  Check(cudaEventCreate(&stop), "cudaEventCreate");

  Check(rankscope::bench::LaunchSpin(stream, kWarmupBlocks, 10'000, measured + launches), "warm-up launch");
  Check(cudaStreamSynchronize(stream), "warm-up");

  nlohmann::json records = nlohmann::json::array();
  for (int index = 0; index < launches; ++index) {
    const uint64_t target_ns = kDurationsNs[index % kDurations];
    const int64_t host_before = RealtimeNs();
    Check(cudaEventRecord(start, stream), "cudaEventRecord");
    Check(rankscope::bench::LaunchSpin(stream, index + 1, target_ns, measured + index), "launch");
    Check(cudaEventRecord(stop, stream), "cudaEventRecord");
    Check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    const int64_t host_after = RealtimeNs();
    float event_ms = 0.0f;
    Check(cudaEventElapsedTime(&event_ms, start, stop), "cudaEventElapsedTime");
    records.push_back({{"index", index},
                       {"blocks", index + 1},
                       {"target_ns", target_ns},
                       {"event_ns", static_cast<int64_t>(static_cast<double>(event_ms) * 1e6 + 0.5)},
                       {"host_before_ns", host_before},
                       {"host_after_ns", host_after}});
  }
  std::vector<uint64_t> gpu_ns(launches);
  Check(cudaMemcpy(gpu_ns.data(), measured, sizeof(uint64_t) * launches, cudaMemcpyDeviceToHost), "cudaMemcpy");
  for (int index = 0; index < launches; ++index) records[index]["gpu_ns"] = gpu_ns[index];

  const nlohmann::json out = {{"device", properties.name},
                              {"kernel", rankscope::bench::kSpinKernelName},
                              {"warmup_blocks", kWarmupBlocks},
                              {"launches", records}};
  std::ofstream file(out_path);
  file << out.dump(1) << '\n';
  file.close();
  if (!file) Fail(fmt::format("cannot write {}", out_path));
  Check(cudaEventDestroy(start), "cudaEventDestroy");
  Check(cudaEventDestroy(stop), "cudaEventDestroy");
  Check(cudaFree(measured), "cudaFree");
  Check(cudaStreamDestroy(stream), "cudaStreamDestroy");
  fmt::print("cupti_timing: {} launches on {} written to {}\n", launches, properties.name, out_path);
  return 0;
}
