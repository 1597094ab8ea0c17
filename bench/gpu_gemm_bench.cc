// Own CUDA GEMMs against cuBLAS on the trainer's shapes: the three GEMMs of a linear layer
// (forward y = x·wᵀ, data gradient dx = dy·w, weight gradient dw = dyᵀ·x) for 1024→1024 and
// 4096→4096 layers at batch 512 and 4096. For each shape it times own fp32 GEMM vs
// cublasSgemm (plain fp32, no TF32) and own bf16 tensor-core GEMM vs cublasGemmEx (bf16 in,
// fp32 out, fp32 compute), with CUDA events over warmed-up repetitions, and prints TFLOP/s,
// own/cuBLAS and the largest difference between the two results (relative to the largest
// cuBLAS element), as a check that the timed kernels compute the same thing.
//
//   gpu_gemm_bench
// Exits 1 when the bf16 GEMM's geometric mean over the shapes is below kTargetBf16Ratio of
// cuBLAS, or when a result differs from cuBLAS's by more than kMaxDifference (a wrong
// kernel is off by O(1), rounding by about 1e-5); 2 with one line "gpu_gemm_bench: no
// usable GPU (...)" when there is no GPU.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>
#include <fmt/core.h>

#include "kernels/cuda_kernels.h"

namespace {

namespace kernels = rankscope::kernels;
using kernels::Transpose;

constexpr double kTargetMilliseconds = 100.0;  // per measurement, after warm-up
constexpr int kWarmup = 3;
constexpr double kTargetBf16Ratio = 0.6;
constexpr double kMaxDifference = 1e-2;

struct Shape {
  std::string name;
  Transpose ta, tb;
  int m, n, k;
};

std::vector<Shape> TrainerShapes() {
  std::vector<Shape> shapes;
  for (int batch : {512, 4096}) {
    for (int width : {1024, 4096}) {
      const std::string layer = fmt::format("{}x{} b{}", width, width, batch);
      shapes.push_back({"fwd   y=x*wT  " + layer, Transpose::kNo, Transpose::kYes, batch, width,
                        width});
      shapes.push_back({"dgrad dx=dy*w " + layer, Transpose::kNo, Transpose::kNo, batch, width,
                        width});
      shapes.push_back({"wgrad dw=dyT*x " + layer, Transpose::kYes, Transpose::kNo, width, width,
                        batch});
    }
  }
  return shapes;
}

// Leading dimensions of tightly stored operands (row-major, A m×k or k×m, B k×n or n×k).
int Lda(const Shape& s) { return s.ta == Transpose::kYes ? s.m : s.k; }
int Ldb(const Shape& s) { return s.tb == Transpose::kYes ? s.k : s.n; }

// cuBLAS is column-major: a row-major matrix is its transpose there. Row-major
// C = op(A)·op(B) is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ, so B goes first, m and n swap, and
// each operand keeps its own transpose flag (a stored row-major B read column-major is
// already Bᵀ, so op(B)ᵀ = B needs no transpose when op is "no").
cublasOperation_t CublasOp(Transpose t) { return t == Transpose::kYes ? CUBLAS_OP_T : CUBLAS_OP_N; }

void Fail(const std::string& what) {
  fmt::print(stderr, "gpu_gemm_bench: {}\n", what);
  std::exit(1);
}

void Check(cudaError_t error, const char* what) {
  if (error != cudaSuccess) Fail(fmt::format("{}: {}", what, cudaGetErrorString(error)));
}
void Check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    Fail(fmt::format("{}: cuBLAS status {}", what, static_cast<int>(status)));
  }
}
void Check(const rankscope::Status& status, const char* what) {
  if (!status.ok()) Fail(fmt::format("{}: {}", what, status.ToString()));
}

template <typename T>
T* DeviceAlloc(size_t count) {
  void* raw = nullptr;
  Check(cudaMalloc(&raw, std::max<size_t>(count, 1) * sizeof(T)), "cudaMalloc");
  return static_cast<T*>(raw);
}

float* RandomDevice(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> host(count);
  for (float& v : host) v = uniform(rng);
  float* device = DeviceAlloc<float>(count);
  Check(cudaMemcpy(device, host.data(), count * sizeof(float), cudaMemcpyHostToDevice),
        "cudaMemcpy");
  return device;
}

// Average milliseconds per launch: kWarmup launches, one timed to size the run, then
// enough repetitions for about kTargetMilliseconds between two events.
template <typename Launch>
double MillisecondsPerLaunch(cudaStream_t stream, Launch&& launch) {
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
  Check(cudaEventCreate(&start), "cudaEventCreate");
  Check(cudaEventCreate(&stop), "cudaEventCreate");
  auto timed = [&](int reps) {
    Check(cudaEventRecord(start, stream), "cudaEventRecord");
    for (int i = 0; i < reps; ++i) launch();
    Check(cudaEventRecord(stop, stream), "cudaEventRecord");
    Check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0.0f;
    Check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    return static_cast<double>(ms);
  };
  for (int i = 0; i < kWarmup; ++i) launch();
  const double once = std::max(timed(1), 1e-3);
  const int reps = static_cast<int>(std::clamp(kTargetMilliseconds / once, 5.0, 2000.0));
  const double total = timed(reps);
  Check(cudaEventDestroy(start), "cudaEventDestroy");
  Check(cudaEventDestroy(stop), "cudaEventDestroy");
  return total / reps;
}

// max |x − y| / max |y|.
double RelativeDifference(const float* x_device, const float* y_device, size_t count) {
  std::vector<float> x(count), y(count);
  Check(cudaMemcpy(x.data(), x_device, count * sizeof(float), cudaMemcpyDeviceToHost),
        "cudaMemcpy");
  Check(cudaMemcpy(y.data(), y_device, count * sizeof(float), cudaMemcpyDeviceToHost),
        "cudaMemcpy");
  double max_diff = 0.0;
  double max_ref = 0.0;
  for (size_t i = 0; i < count; ++i) {
    max_diff = std::max(max_diff, std::fabs(static_cast<double>(x[i]) - y[i]));
    max_ref = std::max(max_ref, std::fabs(static_cast<double>(y[i])));
  }
  if (std::isnan(max_diff)) return NAN;
  return max_ref > 0.0 ? max_diff / max_ref : max_diff;
}

struct Result {
  double own_tflops, cublas_tflops, difference;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) {
    fmt::print(stderr, "usage: {} (no arguments)\n", argv[0]);
    return 64;
  }
  int devices = 0;
  const cudaError_t device_error = cudaGetDeviceCount(&devices);
  if (device_error != cudaSuccess || devices == 0) {
    const std::string reason = device_error != cudaSuccess
                                   ? fmt::format("cudaGetDeviceCount: {}: {}",
                                                 cudaGetErrorName(device_error),
                                                 cudaGetErrorString(device_error))
                                   : std::string("no CUDA device");
    fmt::print("gpu_gemm_bench: no usable GPU ({})\n", reason);
    return 2;
  }
  cudaDeviceProp properties{};
  Check(cudaGetDeviceProperties(&properties, 0), "cudaGetDeviceProperties");
  fmt::print("device: {} (sm_{}{}, {} SMs)\n", properties.name, properties.major,
             properties.minor, properties.multiProcessorCount);

  cudaStream_t stream = nullptr;
  Check(cudaStreamCreate(&stream), "cudaStreamCreate");
  cublasHandle_t handle = nullptr;
  Check(cublasCreate(&handle), "cublasCreate");
  Check(cublasSetStream(handle, stream), "cublasSetStream");
  Check(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");  // no TF32

  fmt::print("{:<30} {:>5} {:>5} {:>5} | {:>15} {:>15} {:>6} {:>8} | {:>15} {:>15} {:>6} {:>8}\n",
             "shape (op)", "m", "n", "k", "fp32 own TF/s", "cuBLAS TF/s", "ratio", "diff",
             "bf16 own TF/s", "cuBLAS TF/s", "ratio", "diff");
  double log_ratio_sum = 0.0;
  int bf16_shapes = 0;
  int bf16_at_target = 0;
  int wrong_results = 0;
  uint32_t seed = 1;
  for (const Shape& s : TrainerShapes()) {
    const size_t a_count = static_cast<size_t>(s.m) * s.k;
    const size_t b_count = static_cast<size_t>(s.k) * s.n;
    const size_t c_count = static_cast<size_t>(s.m) * s.n;
    float* a = RandomDevice(a_count, seed++);
    float* b = RandomDevice(b_count, seed++);
    auto* a16 = DeviceAlloc<__nv_bfloat16>(a_count);
    auto* b16 = DeviceAlloc<__nv_bfloat16>(b_count);
    Check(kernels::cuda::CastToBf16(stream, a_count, a, a16), "CastToBf16");
    Check(kernels::cuda::CastToBf16(stream, b_count, b, b16), "CastToBf16");
    float* c_own = DeviceAlloc<float>(c_count);
    float* c_cublas = DeviceAlloc<float>(c_count);
    const int lda = Lda(s);
    const int ldb = Ldb(s);
    const int ldc = s.n;
    const float alpha = 1.0f;
    const float beta = 0.0f;
    const double flops = 2.0 * s.m * s.n * s.k;
    auto tflops = [&](double ms) { return flops / (ms * 1e-3) / 1e12; };

    Check(kernels::cuda::Gemm(stream, s.ta, s.tb, s.m, s.n, s.k, alpha, a, lda, b, ldb, beta,
                              c_own, ldc),
          "cuda::Gemm");
    const double fp32_own = MillisecondsPerLaunch(stream, [&] {
      (void)kernels::cuda::Gemm(stream, s.ta, s.tb, s.m, s.n, s.k, alpha, a, lda, b, ldb, beta,
                                c_own, ldc);
    });
    Check(cublasSgemm(handle, CublasOp(s.tb), CublasOp(s.ta), s.n, s.m, s.k, &alpha, b, ldb, a,
                      lda, &beta, c_cublas, ldc),
          "cublasSgemm");
    const double fp32_cublas = MillisecondsPerLaunch(stream, [&] {
      (void)cublasSgemm(handle, CublasOp(s.tb), CublasOp(s.ta), s.n, s.m, s.k, &alpha, b, ldb, a,
                        lda, &beta, c_cublas, ldc);
    });
    Check(cudaStreamSynchronize(stream), "fp32 GEMMs");
    const Result fp32{tflops(fp32_own), tflops(fp32_cublas),
                      RelativeDifference(c_own, c_cublas, c_count)};

    Check(kernels::cuda::GemmBf16(stream, s.ta, s.tb, s.m, s.n, s.k, alpha, a16, lda, b16, ldb,
                                  beta, c_own, ldc),
          "cuda::GemmBf16");
    const double bf16_own = MillisecondsPerLaunch(stream, [&] {
      (void)kernels::cuda::GemmBf16(stream, s.ta, s.tb, s.m, s.n, s.k, alpha, a16, lda, b16, ldb,
                                    beta, c_own, ldc);
    });
    auto gemm_ex = [&] {
      return cublasGemmEx(handle, CublasOp(s.tb), CublasOp(s.ta), s.n, s.m, s.k, &alpha, b16,
                          CUDA_R_16BF, ldb, a16, CUDA_R_16BF, lda, &beta, c_cublas, CUDA_R_32F,
                          ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    };
    Check(gemm_ex(), "cublasGemmEx");
    const double bf16_cublas = MillisecondsPerLaunch(stream, [&] { (void)gemm_ex(); });
    Check(cudaStreamSynchronize(stream), "bf16 GEMMs");
    const Result bf16{tflops(bf16_own), tflops(bf16_cublas),
                      RelativeDifference(c_own, c_cublas, c_count)};

    fmt::print("{:<30} {:>5} {:>5} {:>5} | {:>15.2f} {:>15.2f} {:>5.0f}% {:>8.1e} | {:>15.2f} "
               "{:>15.2f} {:>5.0f}% {:>8.1e}\n",
               s.name, s.m, s.n, s.k, fp32.own_tflops, fp32.cublas_tflops,
               100.0 * fp32.own_tflops / fp32.cublas_tflops, fp32.difference, bf16.own_tflops,
               bf16.cublas_tflops, 100.0 * bf16.own_tflops / bf16.cublas_tflops,
               bf16.difference);
    const double bf16_ratio = bf16.own_tflops / bf16.cublas_tflops;
    log_ratio_sum += std::log(bf16_ratio);
    ++bf16_shapes;
    if (bf16_ratio >= kTargetBf16Ratio) ++bf16_at_target;
    for (const double difference : {fp32.difference, bf16.difference}) {
      if (!(difference <= kMaxDifference)) ++wrong_results;  // NaN counts as wrong
    }

    for (void* p : {static_cast<void*>(a), static_cast<void*>(b), static_cast<void*>(a16),
                    static_cast<void*>(b16), static_cast<void*>(c_own),
                    static_cast<void*>(c_cublas)}) {
      Check(cudaFree(p), "cudaFree");
    }
  }
  Check(cublasDestroy(handle), "cublasDestroy");
  Check(cudaStreamDestroy(stream), "cudaStreamDestroy");
  const double geometric_mean = std::exp(log_ratio_sum / bf16_shapes);
  const bool met = geometric_mean >= kTargetBf16Ratio && wrong_results == 0;
  fmt::print("bf16 own/cuBLAS: geometric mean {:.0f}% (target >= {:.0f}%), {} of {} shapes at target{}: {}\n",
             100.0 * geometric_mean, 100.0 * kTargetBf16Ratio, bf16_at_target, bf16_shapes,
             wrong_results == 0 ? ""
                                : fmt::format(", {} results differ from cuBLAS by more than {:g}",
                                              wrong_results, kMaxDifference),
             met ? "PASS" : "FAIL");
  return met ? 0 : 1;
}
