// Other tools' traces at speed: synthetic PyTorch-profiler (Kineto) traces, and the floor an
// importer is measured against (bench/import_bench.py drives it).
//   import_bench generate FILE [--events N | --bytes B] [--rank R] [--world-size W] [--gzip]
//       one rank's trace, streamed to FILE (gzip-compressed with --gzip) as it is made, so a
//       file of any size costs a few MiB of memory; it ends after the step that reaches N
//       events or B bytes of JSON
//   import_bench parse [--threads N] FILE...
//       the floor: every file read (and inflated when gzipped), then simdjson On-Demand walks
//       every event and every field of it, nested args included; files are spread over N
//       threads (default: one per hardware thread, as the analyzer spreads ranks)
//   import_bench import FILE   interop::ImportTraces into a temporary run, end to end
//   import_bench generator-version   the generator's version: a data set made by another
//       version is made again
// Each prints one JSON line: generate {events, bytes, steps, generator}; parse {files,
// threads, bytes (of JSON text), stored_bytes (as read from disk), seconds, mb_per_s, events};
// import {bytes, seconds, mb_per_s, events (imported)}.
#include <unistd.h>

#include <simdjson.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <zlib.h>

#include "interop/interop.h"

namespace {

namespace fs = std::filesystem;
namespace od = simdjson::ondemand;
using Clock = std::chrono::steady_clock;

// Bump when the generated text changes, so import_bench.py makes its data sets again.
constexpr int kGeneratorVersion = 2;

int Usage() {
  std::fprintf(stderr,
               "usage: import_bench generate FILE [--events N | --bytes B] [--rank R] [--world-size W] [--gzip]\n"
               "       import_bench parse [--threads N] FILE...\n"
               "       import_bench import FILE\n"
               "       import_bench generator-version\n");
  return 2;
}

// ---- the generated trace ------------------------------------------------------------------

// Where the text goes: a plain file or a gzip stream, written in 4 MiB pieces.
class TraceSink {
 public:
  TraceSink(const fs::path& file, bool gzip) {
    if (gzip) {
      gz_ = gzopen(file.c_str(), "wb6");  // zlib's default level; inflating costs the same at any
    } else {
      plain_ = std::fopen(file.c_str(), "wb");
    }
    buffer_.reserve(kFlushAt + (64 << 10));
  }
  ~TraceSink() {
    if (plain_ != nullptr) std::fclose(plain_);
    if (gz_ != nullptr) gzclose(gz_);
  }
  TraceSink(const TraceSink&) = delete;
  TraceSink& operator=(const TraceSink&) = delete;

  bool opened() const { return plain_ != nullptr || gz_ != nullptr; }
  std::string& buffer() { return buffer_; }
  uint64_t bytes() const { return flushed_ + buffer_.size(); }

  // Called between steps: writes the buffer out once it is large.
  bool MaybeFlush() { return buffer_.size() < kFlushAt || Flush(); }

  bool Flush() {
    if (buffer_.empty()) return ok_;
    if (plain_ != nullptr) {
      ok_ = ok_ && std::fwrite(buffer_.data(), 1, buffer_.size(), plain_) == buffer_.size();
    } else {
      ok_ = ok_ && gzwrite(gz_, buffer_.data(), static_cast<unsigned>(buffer_.size())) ==
                       static_cast<int>(buffer_.size());
    }
    flushed_ += buffer_.size();
    buffer_.clear();
    return ok_;
  }

  bool Close() {
    Flush();
    if (plain_ != nullptr) ok_ = std::fclose(plain_) == 0 && ok_;
    if (gz_ != nullptr) ok_ = gzclose(gz_) == Z_OK && ok_;
    plain_ = nullptr;
    gz_ = nullptr;
    return ok_;
  }

 private:
  static constexpr size_t kFlushAt = 4 << 20;
  FILE* plain_ = nullptr;
  gzFile gz_ = nullptr;
  std::string buffer_;
  uint64_t flushed_ = 0;
  bool ok_ = true;
};

// Kineto's newer form: microseconds with three decimals, from baseTimeNanoseconds.
struct Micros {
  int64_t ns;
};

}  // namespace

template <>
struct fmt::formatter<Micros> : fmt::formatter<std::string_view> {
  auto format(Micros t, fmt::format_context& ctx) const {
    return fmt::format_to(ctx.out(), "{}.{:03}", t.ns / 1000, t.ns % 1000);
  }
};

namespace {

// Kernel names as a transformer's DDP step shows them in PyTorch 2.x traces.
constexpr std::string_view kGemmKernels[] = {
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel"
    "__5x_cublas",
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_nn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel"
    "__5x_cublas",
    "void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8>"
    "(cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8::Params)",
    "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_nt",
};
// cuDNN's fused attention, which PyTorch's scaled_dot_product_attention picks on H100.
constexpr std::string_view kAttentionKernel =
    "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3_64x64x128_4x1x1_kernel0_0";
constexpr std::string_view kAttentionBackwardKernel =
    "cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_7_64x128x128_4x1x1_kernel0_0";
constexpr std::string_view kLayerNormKernel =
    "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, float, "
    "c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, c10::BFloat16*)";
constexpr std::string_view kLayerNormBackwardKernel =
    "void at::native::(anonymous namespace)::layer_norm_grad_input_kernel_vectorized<c10::BFloat16, float>("
    "c10::BFloat16 "
    "const*, c10::BFloat16 const*, float const*, float const*, c10::BFloat16 const*, c10::BFloat16*, int)";
constexpr std::string_view kGeluKernel =
    "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, "
    "at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)"
    "#1}, at::detail::Array<char*, 2> >(int, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, "
    "at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)"
    "#1}, at::detail::Array<char*, 2>)";
constexpr std::string_view kAddKernel =
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, "
    "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, at::detail::Array<char*, 3>)";
constexpr std::string_view kAllReduceKernel =
    "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)";
constexpr std::string_view kAdamKernel =
    "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous "
    "namespace)::TensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<c10::BFloat16, 4, "
    "(at::native::ADAM_MODE)1, false>, double*, double, double, double, double, double, double, bool, double*, "
    "double*>(at::native::(anonymous namespace)::TensorListMetadata<4>, at::native::(anonymous "
    "namespace)::FusedAdamMathFunctor<c10::BFloat16, 4, (at::native::ADAM_MODE)1, false>, double*, double, double, "
    "double, double, double, double, bool, double*, double*)";

// One rank of a DDP transformer job under torch.profiler. Each step: the batch's copy and a
// memset, a forward of kLayers blocks (Python module calls around aten ops, each op's
// cudaLaunchKernel with its ac2g flow, the kernels back to back on the compute stream), the
// backward on the autograd thread, whose gradient buckets are all-reduced by NCCL kernels on
// their own stream while backward kernels still run, the fused AdamW step, the loss read back
// (a copy the CPU waits for), and the ProfilerStep#N annotation around it all. Ranges that
// enclose others are written where they start once their end is known, so events stay in
// start order on each thread, as Kineto writes them.
class KinetoRankGenerator {
 public:
  KinetoRankGenerator(TraceSink& sink, int rank, int world_size)
      : sink_(sink),
        text_(sink.buffer()),
        out_(std::back_inserter(sink.buffer())),
        rank_(rank),
        world_size_(world_size),
        pid_(2568503 + 97 * rank),
        autograd_tid_(pid_ + 211),
        tid_(pid_),
        random_(0x5eed0000u + static_cast<uint64_t>(rank)) {}

  void Begin() {
    fmt::format_to(out_, R"({{
  "schemaVersion": 1,
  "deviceProperties": [)");
    for (int device = 0; device < 8; ++device) {
      fmt::format_to(out_, R"({}
    {{
      "id": {}, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 84942979072,
      "computeMajor": 9, "computeMinor": 0,
      "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
      "regsPerBlock": 65536, "warpSize": 32,
      "sharedMemPerBlock": 49152, "numSms": 132,
      "regsPerMultiprocessor": 65536, "sharedMemPerBlockOptin": 232448, "sharedMemPerMultiprocessor": 233472
    }})",
                     device == 0 ? "" : ",", device);
    }
    fmt::format_to(out_, R"(
  ],
  "cupti_version": 24,
  "cuda_runtime_version": 12060,
  "cuda_driver_version": 12080,
  "distributedInfo": {{"backend": "nccl", "rank": {}, "world_size": {}, "pg_count": 1, "pg_config": [{{"pg_name": "0", )"
                         R"("pg_desc": "default_pg", "backend_config": "cuda:nccl", "pg_size": {}, "ranks": [{}]}}], )"
                         R"("nccl_version": "2.21.5"}},
  "record_shapes": 1,
  "with_stack": 0,
  "trace_id": "{:016X}",
  "traceEvents": [
)",
                   rank_, world_size_, world_size_, RankList(), random_());
    now_ns_ = kStartNs + static_cast<int64_t>(rank_) * 1733;
    gpu_free_ns_ = now_ns_;
    comm_free_ns_ = now_ns_;
  }

  // Writes one step; its text leaves for the file between steps (a range is inserted where
  // it starts, so a step stays in the buffer until it ends).
  bool Step() {
    const size_t step_at = text_.size();
    const int64_t step_start = now_ns_;
    step_gpu_start_ns_ = -1;
    Copy(/*to_device=*/true, 4 << 20);
    Memset(1 << 20);
    const size_t model_at = text_.size();
    const int64_t model_start = now_ns_;
    const uint64_t model_id = NextId();
    now_ns_ += 2'000;
    for (int layer = 0; layer < kLayers; ++layer) ForwardLayer(layer, model_id);
    InsertPython(model_at, "nn.Module: Transformer_0", model_start, now_ns_ + 1'000, model_id, 1);
    Kernel("aten::cross_entropy_loss", kAddKernel, R"("Input Dims": [[16384, 32000], [16384], [], [], []])", 90'000);
    // loss.backward(): the autograd thread runs it while the main thread waits.
    const int64_t backward_start = now_ns_ + 15'000;
    tid_ = autograd_tid_;
    now_ns_ = backward_start;
    for (int layer = kLayers - 1; layer >= 0; --layer) {
      BackwardLayer(layer);
      if (layer % kLayersPerBucket == 0) AllReduceBucket(layer / kLayersPerBucket);
    }
    tid_ = pid_;
    now_ns_ += 20'000;
    Optimizer();
    ReadLoss();
    const uint64_t id = NextId();
    InsertX(step_at, "user_annotation", fmt::format("ProfilerStep#{}", step_), step_start, now_ns_ + 2'000,
            fmt::format(R"("External id": {}, "Record function id": 0, "Ev Idx": {})", id, id - 1));
    AppendX("gpu_user_annotation", fmt::format("ProfilerStep#{}", step_), rank_, kComputeStream, step_gpu_start_ns_,
            gpu_free_ns_ - step_gpu_start_ns_,
            fmt::format(R"("External id": {}, "device": {}, "stream": {}, "correlation": {})", id, rank_,
                        kComputeStream, NextId()));
    now_ns_ += 40'000 + Jitter(5'000);
    ++step_;
    return sink_.MaybeFlush();
  }

  // The process and thread names, the profiler's span, and the fields Kineto writes after
  // traceEvents (baseTimeNanoseconds last).
  bool End() {
    Metadata("process_name", pid_, 0, R"("name": "python3")");
    Metadata("process_labels", pid_, 0, R"("labels": "CPU")");
    Metadata("process_sort_index", pid_, 0, R"("sort_index": 1)");
    Metadata("process_name", rank_, 0, R"("name": "python3")");
    Metadata("process_labels", rank_, 0, fmt::format(R"("labels": "GPU {}")", rank_));
    Metadata("process_sort_index", rank_, 0, fmt::format(R"("sort_index": {})", 5000000 + rank_));
    for (int stream : {kComputeStream, kCommStream}) {
      Metadata("thread_name", rank_, stream, fmt::format(R"("name": "stream {}")", stream));
      Metadata("thread_sort_index", rank_, stream, fmt::format(R"("sort_index": {})", stream));
    }
    Metadata("thread_name", pid_, pid_, fmt::format(R"J("name": "thread {} (python3)")J", pid_));
    Metadata("thread_name", pid_, autograd_tid_,
             fmt::format(R"J("name": "thread {} (pt_autograd_0)")J", autograd_tid_));
    fmt::format_to(out_,
                   R"(  {{"ph": "X", "cat": "Trace", "ts": {}, "dur": {}, "pid": "Spans", "tid": "PyTorch Profiler", )"
                   R"J("name": "PyTorch Profiler (0)", "args": {{"Op count": 0}}}},
  {{"name": "Iteration Start: PyTorch Profiler", "ph": "i", "s": "g", "pid": "Traces", "tid": "Trace PyTorch Profiler", )J"
                   R"("ts": {}}},
  {{"name": "Record Window End", "ph": "i", "s": "g", "pid": "", "tid": "", "ts": {}}}
  ],
  "traceName": "/tmp/traces/host-{}.{}.pt.trace.json",
  "displayTimeUnit": "ms",
  "baseTimeNanoseconds": {}
}}
)",
                   Micros{kStartNs - 1'000}, Micros{now_ns_ - kStartNs + 2'000}, Micros{kStartNs - 1'000},
                   Micros{now_ns_ + 1'000}, rank_, pid_, kBaseTimeNs);
    events_ += 3;
    return sink_.Close();
  }

  uint64_t events() const { return events_; }
  int steps() const { return step_ - kFirstStep; }

 private:
  static constexpr int64_t kBaseTimeNs = 1'733'961'600'000'000'000;  // a day's start, as Kineto takes it
  static constexpr int64_t kStartNs = 36'003'217'000'000;             // ten hours into that day
  static constexpr int kComputeStream = 7;
  static constexpr int kCommStream = 20;
  static constexpr int kLayers = 24;
  static constexpr int kLayersPerBucket = 3;
  static constexpr int kOpsPerLayer = 10;  // kernels a layer launches, forward and backward alike
  static constexpr int kFirstStep = 100;
  static constexpr std::string_view kBf16x3 = R"("Input type": ["c10::BFloat16", "c10::BFloat16", "c10::BFloat16"])";

  std::string RankList() const {
    std::string list;
    for (int r = 0; r < world_size_; ++r) list += fmt::format("{}{}", r == 0 ? "" : ", ", r);
    return list;
  }

  uint64_t NextId() { return next_id_++; }
  int64_t Jitter(int64_t max_ns) { return std::uniform_int_distribution<int64_t>(0, max_ns)(random_); }

  void AppendX(std::string_view category, std::string_view name, int pid, int tid, int64_t start_ns, int64_t dur_ns,
               std::string_view args) {
    fmt::format_to(out_,
                   R"(  {{"ph": "X", "cat": "{}", "name": "{}", "pid": {}, "tid": {}, "ts": {}, "dur": {}, )"
                   R"("args": {{{}}}}},
)",
                   category, name, pid, tid, Micros{start_ns}, Micros{dur_ns}, args);
    ++events_;
  }

  // A range on this thread from start to end, written at `at` (where its start falls).
  void InsertX(size_t at, std::string_view category, std::string_view name, int64_t start_ns, int64_t end_ns,
               std::string_view args) {
    text_.insert(at, fmt::format(R"(  {{"ph": "X", "cat": "{}", "name": "{}", "pid": {}, "tid": {}, "ts": {}, "dur": {}, )"
                                 R"("args": {{{}}}}},
)",
                                 category, name, pid_, tid_, Micros{start_ns}, Micros{end_ns - start_ns}, args));
    ++events_;
  }

  void InsertPython(size_t at, std::string_view name, int64_t start_ns, int64_t end_ns, uint64_t id, uint64_t parent) {
    InsertX(at, "python_function", name, start_ns, end_ns,
            fmt::format(R"("Python parent id": {}, "Python id": {}, "Python thread": 0)", parent, id));
  }

  void Metadata(std::string_view name, int pid, int tid, std::string_view args) {
    fmt::format_to(out_, R"(  {{"name": "{}", "ph": "M", "ts": {}, "pid": {}, "tid": {}, "args": {{{}}}}},
)",
                   name, Micros{kStartNs - 500}, pid, tid, args);
    ++events_;
  }

  void NoteGpuStart(int64_t start_ns) {
    if (step_gpu_start_ns_ < 0) step_gpu_start_ns_ = start_ns;
  }

  // The launch call on this thread, its ac2g flow, and the kernel on `stream` once the
  // stream is past `ready_ns`; returns the kernel's end.
  int64_t Launch(uint64_t external_id, std::string_view kernel, int stream, int64_t ready_ns, int64_t kernel_ns,
                 std::string_view call = "cudaLaunchKernel", int cbid = 211) {
    const uint64_t correlation = NextId();
    const int64_t call_ns = now_ns_;
    const int64_t call_dur = 4'000 + Jitter(3'000);
    const int64_t start = std::max(call_ns + call_dur + 2'000, ready_ns + 1'000);
    const int blocks = 132 * (1 + static_cast<int>(correlation % 4));
    const bool comm = stream == kCommStream;
    fmt::format_to(out_,
                   R"(  {{"ph": "X", "cat": "cuda_runtime", "name": "{}", "pid": {}, "tid": {}, "ts": {}, "dur": {}, )"
                   R"("args": {{"External id": {}, "cbid": {}, "correlation": {}}}}},
  {{"ph": "s", "id": {}, "pid": {}, "tid": {}, "ts": {}, "cat": "ac2g", "name": "ac2g"}},
  {{"ph": "f", "id": {}, "pid": {}, "tid": {}, "ts": {}, "cat": "ac2g", "name": "ac2g", "bp": "e"}},
  {{"ph": "X", "cat": "kernel", "name": "{}", "pid": {}, "tid": {}, "ts": {}, "dur": {}, )"
                   R"("args": {{"External id": {}, "device": {}, "stream": {}, "correlation": {}, )"
                   R"("registers per thread": {}, "shared memory": {}, "blocks per SM": {}, "warps per SM": {}, )"
                   R"("grid": [{}, 1, 1], "block": [{}, 1, 1], "est. achieved occupancy %": {}}}}},
)",
                   call, pid_, tid_, Micros{call_ns}, Micros{call_dur}, external_id, cbid, correlation,  //
                   correlation, pid_, tid_, Micros{call_ns},                                            //
                   correlation, rank_, stream, Micros{start},                                           //
                   kernel, rank_, stream, Micros{start}, Micros{kernel_ns}, external_id, rank_, stream, correlation,
                   comm ? 96 : 168, comm ? 0 : 98304, blocks / 132.0f, blocks / 132.0f * 8, blocks, comm ? 640 : 256,
                   comm ? 12 : 25);
    events_ += 4;
    NoteGpuStart(start);
    now_ns_ = call_ns + call_dur + 800;
    return start + kernel_ns;
  }

  // An aten op that launches one kernel on the compute stream: the op, the ops it calls
  // before the launch (`inner`, each inside the one before: aten::t, aten::transpose, ...),
  // the launch, its flow, and the kernel, which starts when the stream is free.
  void Kernel(std::string_view op, std::string_view kernel, std::string_view dims, int64_t kernel_ns,
              std::initializer_list<std::string_view> inner = {}) {
    const int64_t op_start = now_ns_;
    const int64_t op_dur = 14'000 + Jitter(6'000);
    const uint64_t id = NextId();
    fmt::format_to(out_,
                   R"(  {{"ph": "X", "cat": "cpu_op", "name": "{}", "pid": {}, "tid": {}, "ts": {}, "dur": {}, )"
                   R"("args": {{"External id": {}, "Record function id": 0, {}, {}, "Ev Idx": {}, "Sequence number": {}}}}},
)",
                   op, pid_, tid_, Micros{op_start}, Micros{op_dur}, id, dims, kBf16x3, id - 1, id / 7);
    ++events_;
    if (fwdbwd_phase_ != '\0') {
      // Forward op i of a layer links to backward op 9 - i of the same layer.
      const int slot = fwdbwd_phase_ == 's' ? fwdbwd_slot_ : kOpsPerLayer - 1 - fwdbwd_slot_;
      const int64_t flow_id = static_cast<int64_t>(step_) * 1000 + fwdbwd_layer_ * kOpsPerLayer + slot;
      fmt::format_to(out_,
                     R"(  {{"ph": "{}", "id": {}, "pid": {}, "tid": {}, "ts": {}, "cat": "fwdbwd", "name": "fwdbwd"{}}},
)",
                     fwdbwd_phase_, flow_id, pid_, tid_, Micros{op_start}, fwdbwd_phase_ == 'f' ? R"(, "bp": "e")" : "");
      ++events_;
      ++fwdbwd_slot_;
    }
    int depth = 0;
    for (std::string_view name : inner) {
      const uint64_t inner_id = NextId();
      fmt::format_to(out_,
                     R"(  {{"ph": "X", "cat": "cpu_op", "name": "{}", "pid": {}, "tid": {}, "ts": {}, "dur": {}, )"
                     R"("args": {{"External id": {}, "Record function id": 0, "Input Dims": [[4096, 4096]], )"
                     R"("Input type": ["c10::BFloat16"], "Ev Idx": {}}}}},
)",
                     name, pid_, tid_, Micros{op_start + 800 * (depth + 1)}, Micros{3'700 - 1'200 * depth}, inner_id,
                     inner_id - 1);
      ++events_;
      if (name == "aten::empty") {
        // The caching allocator asks whether the stream is being captured.
        AppendX("cuda_runtime", "cudaStreamIsCapturing", pid_, tid_, op_start + 800 * (depth + 1) + 200, 500,
                fmt::format(R"("External id": {}, "cbid": 317, "correlation": {})", inner_id, NextId()));
      }
      ++depth;
    }
    now_ns_ = op_start + 5'000;
    gpu_free_ns_ = Launch(id, kernel, kComputeStream, gpu_free_ns_, kernel_ns + Jitter(kernel_ns / 16));
    now_ns_ = std::max(now_ns_, op_start + op_dur) + 1'500;
  }

  void ForwardLayer(int layer, uint64_t model_id) {
    const size_t block_at = text_.size();
    const int64_t block_start = now_ns_;
    const uint64_t block_id = NextId(), call_id = NextId();
    now_ns_ += 1'500;
    LinkOps('s', layer);
    Kernel("aten::layer_norm", kLayerNormKernel, R"("Input Dims": [[8, 2048, 4096], [], [4096], [4096], []])", 30'000,
           {"aten::native_layer_norm", "aten::empty"});
    Kernel("aten::linear", kGemmKernels[0], R"("Input Dims": [[8, 2048, 4096], [12288, 4096], [12288]])", 160'000,
           {"aten::t", "aten::transpose", "aten::as_strided"});
    Kernel("aten::_scaled_dot_product_cudnn_attention", kAttentionKernel,
           R"("Input Dims": [[8, 32, 2048, 128], [8, 32, 2048, 128], [8, 32, 2048, 128], [], [], []])", 210'000,
           {"aten::_cudnn_attention_forward", "aten::empty"});
    Kernel("aten::linear", kGemmKernels[1], R"("Input Dims": [[8, 2048, 4096], [4096, 4096], [4096]])", 60'000,
           {"aten::t", "aten::transpose", "aten::as_strided"});
    Kernel("aten::add", kAddKernel, R"("Input Dims": [[8, 2048, 4096], [8, 2048, 4096], []])", 25'000);
    Kernel("aten::layer_norm", kLayerNormKernel, R"("Input Dims": [[8, 2048, 4096], [], [4096], [4096], []])", 30'000,
           {"aten::native_layer_norm", "aten::empty"});
    Kernel("aten::linear", kGemmKernels[2], R"("Input Dims": [[8, 2048, 4096], [16384, 4096], [16384]])", 220'000,
           {"aten::t", "aten::transpose", "aten::as_strided"});
    Kernel("aten::gelu", kGeluKernel, R"("Input Dims": [[8, 2048, 16384], []])", 70'000,
           {"aten::empty_like", "aten::empty"});
    Kernel("aten::linear", kGemmKernels[3], R"("Input Dims": [[8, 2048, 16384], [4096, 16384], [4096]])", 220'000,
           {"aten::t", "aten::transpose", "aten::as_strided"});
    Kernel("aten::add", kAddKernel, R"("Input Dims": [[8, 2048, 4096], [8, 2048, 4096], []])", 25'000);
    LinkOps('\0', 0);
    // The module call around its forward(): inner range first, then the outer before it.
    InsertPython(block_at, "torch/nn/modules/module.py(1747): _call_impl", block_start + 600, now_ns_ + 300, call_id,
                 block_id);
    InsertPython(block_at, fmt::format("nn.Module: TransformerBlock_{}", layer), block_start, now_ns_ + 600, block_id,
                 model_id);
    now_ns_ += 1'200;
  }

  void BackwardLayer(int layer) {
    LinkOps('f', layer);
    Kernel("autograd::engine::evaluate_function: AddmmBackward0", kGemmKernels[1],
           R"("Input Dims": [[8, 2048, 4096], [4096, 16384]])", 220'000,
           {"AddmmBackward0", "aten::t", "aten::transpose", "aten::as_strided"});
    Kernel("aten::mm", kGemmKernels[0], R"("Input Dims": [[16384, 16384], [16384, 4096]])", 220'000);
    Kernel("autograd::engine::evaluate_function: GeluBackward0", kGeluKernel,
           R"("Input Dims": [[8, 2048, 16384], [8, 2048, 16384]])", 90'000, {"GeluBackward0", "aten::gelu_backward"});
    Kernel("autograd::engine::evaluate_function: AddmmBackward0", kGemmKernels[2],
           R"("Input Dims": [[8, 2048, 16384], [16384, 4096]])", 220'000,
           {"AddmmBackward0", "aten::t", "aten::transpose", "aten::as_strided"});
    Kernel("autograd::engine::evaluate_function: NativeLayerNormBackward0", kLayerNormBackwardKernel,
           R"("Input Dims": [[8, 2048, 4096], [8, 2048, 4096], [8, 2048, 1], [8, 2048, 1], [4096], [4096]])", 45'000,
           {"NativeLayerNormBackward0", "aten::native_layer_norm_backward", "aten::empty_like"});
    Kernel("autograd::engine::evaluate_function: ScaledDotProductCudnnAttentionBackward0", kAttentionBackwardKernel,
           R"("Input Dims": [[8, 32, 2048, 128], [8, 32, 2048, 128], [8, 32, 2048, 128], [8, 32, 2048, 128]])", 520'000,
           {"ScaledDotProductCudnnAttentionBackward0", "aten::_cudnn_attention_backward", "aten::empty"});
    Kernel("autograd::engine::evaluate_function: AddmmBackward0", kGemmKernels[3],
           R"("Input Dims": [[8, 2048, 12288], [12288, 4096]])", 160'000,
           {"AddmmBackward0", "aten::t", "aten::transpose", "aten::as_strided"});
    Kernel("aten::mm", kGemmKernels[0], R"("Input Dims": [[12288, 16384], [16384, 4096]])", 160'000);
    Kernel("autograd::engine::evaluate_function: NativeLayerNormBackward0", kLayerNormBackwardKernel,
           R"("Input Dims": [[8, 2048, 4096], [8, 2048, 4096], [8, 2048, 1], [8, 2048, 1], [4096], [4096]])", 45'000,
           {"NativeLayerNormBackward0", "aten::native_layer_norm_backward", "aten::empty_like"});
    Kernel("aten::add_", kAddKernel, R"("Input Dims": [[4096, 4096], [4096, 4096], []])", 12'000);
    LinkOps('\0', 0);
  }

  // The ops Kernel() writes next start ('s') or end ('f') the fwdbwd flows of `layer` (the
  // profiler's link from a forward op to its backward); '\0': no flows.
  void LinkOps(char phase, int layer) {
    fwdbwd_phase_ = phase;
    fwdbwd_layer_ = layer;
    fwdbwd_slot_ = 0;
  }

  // A gradient bucket: DDP's record_param_comms op around the event record, the stream
  // wait and the NCCL kernel's launch; the kernel starts once the bucket's gradients are
  // computed and overlaps what backward launches next on the compute stream.
  void AllReduceBucket(int bucket) {
    constexpr int64_t kBucketElements = 25 << 20;
    const uint64_t id = NextId();
    const int64_t op_start = now_ns_;
    fmt::format_to(out_,
                   R"(  {{"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": {}, "tid": {}, "ts": {}, "dur": {}, )"
                   R"("args": {{"External id": {}, "Record function id": 0, "Collective name": "allreduce", )"
                   R"("In msg nelems": {}, "Out msg nelems": {}, "Group size": {}, "dtype": "BFloat16", )"
                   R"("In split size": "[]", "Out split size": "[]", "Global rank start": 0, "Global rank stride": 1, )"
                   R"("Process Group Name": "0", "Process Group Description": "default_pg", "Process Group Ranks": "[{}]", )"
                   R"("Ev Idx": {}, "Bucket": {}}}}},
)",
                   pid_, tid_, Micros{op_start}, Micros{60'000}, id, kBucketElements, kBucketElements, world_size_,
                   RankList(), id - 1, bucket);
    ++events_;
    now_ns_ += 3'000;
    RuntimeCall("cudaEventRecord", 135, id, 4'000);
    RuntimeCall("cudaStreamWaitEvent", 147, id, 3'000);
    comm_free_ns_ = Launch(id, kAllReduceKernel, kCommStream, std::max(gpu_free_ns_, comm_free_ns_),
                           1'400'000 + Jitter(200'000), "cudaLaunchKernelExC", 430);
    now_ns_ = op_start + 62'000;
  }

  void RuntimeCall(std::string_view name, int cbid, uint64_t external_id, int64_t dur_ns) {
    AppendX("cuda_runtime", name, pid_, tid_, now_ns_, dur_ns,
            fmt::format(R"("External id": {}, "cbid": {}, "correlation": {})", external_id, cbid, NextId()));
    now_ns_ += dur_ns + 700;
  }

  // The fused AdamW step over 12 parameter groups, once the last bucket is reduced.
  void Optimizer() {
    const size_t at = text_.size();
    const int64_t start = now_ns_;
    const uint64_t id = NextId();
    now_ns_ += 3'000;
    gpu_free_ns_ = std::max(gpu_free_ns_, comm_free_ns_);
    for (int group = 0; group < 12; ++group) {
      Kernel("aten::_fused_adamw_", kAdamKernel, R"("Input Dims": [[], [], [], [], [], [], [], []])", 180'000);
    }
    InsertX(at, "user_annotation", "Optimizer.step#AdamW.step", start, now_ns_ + 1'000,
            fmt::format(R"("External id": {}, "Record function id": 0, "Ev Idx": {})", id, id - 1));
    now_ns_ += 2'000;
  }

  // aten::copy_ around cudaMemcpyAsync, its flow, and the copy on the compute stream.
  void Copy(bool to_device, int64_t bytes) {
    const size_t at = text_.size();
    const int64_t start = now_ns_;
    const uint64_t id = NextId();
    now_ns_ += 2'000;
    MemoryCall(id, "cudaMemcpyAsync", 41, "gpu_memcpy",
               to_device ? "Memcpy HtoD (Pinned -> Device)" : "Memcpy DtoH (Device -> Pinned)", bytes,
               to_device ? 24.6 : 21.3);
    InsertX(at, "cpu_op", "aten::copy_", start, now_ns_ + 1'000,
            fmt::format(R"("External id": {}, "Record function id": 0, "Input Dims": [[8, 2048], [8, 2048], []], )"
                        R"("Input type": ["long int", "long int", "Scalar"], "Ev Idx": {})",
                        id, id - 1));
    now_ns_ += 2'000;
  }

  void Memset(int64_t bytes) {
    const size_t at = text_.size();
    const int64_t start = now_ns_;
    const uint64_t id = NextId();
    now_ns_ += 2'000;
    MemoryCall(id, "cudaMemsetAsync", 51, "gpu_memset", "Memset (Device)", bytes, 1450.2);
    InsertX(at, "cpu_op", "aten::zero_", start, now_ns_ + 1'000,
            fmt::format(R"("External id": {}, "Record function id": 0, "Input Dims": [[262144]], "Input type": ["float"], )"
                        R"("Ev Idx": {})",
                        id, id - 1));
    now_ns_ += 2'000;
  }

  void MemoryCall(uint64_t external_id, std::string_view call, int cbid, std::string_view category,
                  std::string_view name, int64_t bytes, double gb_per_s) {
    const uint64_t correlation = NextId();
    const int64_t call_ns = now_ns_;
    const int64_t start = std::max(call_ns + 8'000, gpu_free_ns_ + 1'000);
    const int64_t dur = static_cast<int64_t>(static_cast<double>(bytes) / gb_per_s) + 1'000;
    fmt::format_to(out_,
                   R"(  {{"ph": "X", "cat": "cuda_runtime", "name": "{}", "pid": {}, "tid": {}, "ts": {}, "dur": {}, )"
                   R"("args": {{"External id": {}, "cbid": {}, "correlation": {}}}}},
  {{"ph": "s", "id": {}, "pid": {}, "tid": {}, "ts": {}, "cat": "ac2g", "name": "ac2g"}},
  {{"ph": "f", "id": {}, "pid": {}, "tid": {}, "ts": {}, "cat": "ac2g", "name": "ac2g", "bp": "e"}},
  {{"ph": "X", "cat": "{}", "name": "{}", "pid": {}, "tid": {}, "ts": {}, "dur": {}, "args": {{"External id": {}, )"
                   R"J("device": {}, "context": 1, "stream": {}, "correlation": {}, "bytes": {}, "memory bandwidth (GB/s)": {:.4f}}}}},
)J",
                   call, pid_, tid_, Micros{call_ns}, Micros{6'000}, external_id, cbid, correlation,  //
                   correlation, pid_, tid_, Micros{call_ns},                                           //
                   correlation, rank_, kComputeStream, Micros{start},                                  //
                   category, name, rank_, kComputeStream, Micros{start}, Micros{dur}, external_id, rank_,
                   kComputeStream, correlation, bytes, gb_per_s);
    events_ += 4;
    NoteGpuStart(start);
    gpu_free_ns_ = start + dur;
    now_ns_ = call_ns + 7'000;
  }

  // loss.item(): aten::item around a device-to-host copy and the synchronisation the CPU
  // waits in until the step's last kernel is done.
  void ReadLoss() {
    const size_t at = text_.size();
    const int64_t start = now_ns_;
    const uint64_t id = NextId();
    now_ns_ += 2'000;
    Copy(/*to_device=*/false, 4);
    const int64_t wait = std::max<int64_t>(gpu_free_ns_ - now_ns_, 0) + 3'000;
    RuntimeCall("cudaStreamSynchronize", 131, id, wait);
    InsertX(at, "cpu_op", "aten::item", start, now_ns_ + 1'000,
            fmt::format(R"("External id": {}, "Record function id": 0, "Input Dims": [[]], "Input type": ["float"], )"
                        R"("Ev Idx": {})",
                        id, id - 1));
    now_ns_ += 2'000;
  }

  TraceSink& sink_;
  std::string& text_;
  std::back_insert_iterator<std::string> out_;
  const int rank_;
  const int world_size_;
  const int pid_;
  const int autograd_tid_;
  int tid_;
  std::mt19937_64 random_;
  uint64_t next_id_ = 1000;
  uint64_t events_ = 0;
  int step_ = kFirstStep;
  int64_t now_ns_ = 0;
  int64_t gpu_free_ns_ = 0;
  int64_t comm_free_ns_ = 0;
  int64_t step_gpu_start_ns_ = -1;
  char fwdbwd_phase_ = '\0';
  int fwdbwd_layer_ = 0;
  int fwdbwd_slot_ = 0;
};

int Generate(const fs::path& file, uint64_t target_events, uint64_t target_bytes, int rank, int world_size, bool gzip) {
  TraceSink sink(file, gzip);
  if (!sink.opened()) return std::fprintf(stderr, "import_bench: cannot create %s\n", file.c_str()), 1;
  KinetoRankGenerator generator(sink, rank, world_size);
  generator.Begin();
  bool ok = true;
  while (ok && (generator.events() < target_events || sink.bytes() < target_bytes)) ok = generator.Step();
  ok = generator.End() && ok;
  const uint64_t bytes = sink.bytes();
  if (!ok) return std::fprintf(stderr, "import_bench: cannot write %s (disk full?)\n", file.c_str()), 1;
  std::printf("{\"events\": %llu, \"bytes\": %llu, \"steps\": %d, \"generator\": %d}\n",
              static_cast<unsigned long long>(generator.events()), static_cast<unsigned long long>(bytes),
              generator.steps(), kGeneratorVersion);
  return 0;
}

// ---- the floor: read, inflate, walk --------------------------------------------------------

// A file's JSON text with simdjson's padding after it, in a buffer reused from file to file.
struct JsonText {
  std::unique_ptr<char[]> data;
  size_t size = 0;
  size_t capacity = 0;  // usable bytes, padding excluded

  void Reserve(size_t bytes) {
    if (bytes <= capacity) return;
    auto grown = std::make_unique_for_overwrite<char[]>(bytes + simdjson::SIMDJSON_PADDING);
    if (size > 0) std::memcpy(grown.get(), data.get(), size);
    data = std::move(grown);
    capacity = bytes;
  }
};

// Inflates gzip (several members included) into `text`, sized from the last member's length
// field (the size mod 2^32) and grown when that was short.
bool Inflate(const std::string& packed, const fs::path& file, JsonText& text, std::string& error) {
  uint32_t size_hint = 0;
  if (packed.size() >= 4) std::memcpy(&size_hint, packed.data() + packed.size() - 4, 4);
  text.size = 0;
  text.Reserve(std::max<size_t>({size_hint, packed.size() * 4, 1 << 20}));
  z_stream stream{};
  if (inflateInit2(&stream, 16 + MAX_WBITS) != Z_OK) return error = "zlib: inflateInit2 failed", false;
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(packed.data()));
  size_t left = packed.size();
  int status = Z_OK;
  while (true) {
    if (text.size == text.capacity) text.Reserve(text.capacity * 2);
    const size_t room = std::min<size_t>(text.capacity - text.size, UINT32_MAX);
    const size_t offered = std::min<size_t>(left, UINT32_MAX);
    stream.avail_in = static_cast<uInt>(offered);
    stream.next_out = reinterpret_cast<Bytef*>(text.data.get() + text.size);
    stream.avail_out = static_cast<uInt>(room);
    status = inflate(&stream, Z_NO_FLUSH);
    text.size += room - stream.avail_out;
    left -= offered - stream.avail_in;
    if (status == Z_STREAM_END) {
      if (left == 0) break;
      inflateReset(&stream);  // another member follows
    } else if (status != Z_OK && status != Z_BUF_ERROR) {
      break;
    } else if (status == Z_BUF_ERROR && left == 0) {
      break;  // cut short
    }
  }
  inflateEnd(&stream);
  if (status != Z_STREAM_END) return error = fmt::format("{}: truncated or damaged gzip", file.string()), false;
  return true;
}

// Reads `file` into `text`; a gzip file is inflated (its packed bytes pass through `packed`).
bool ReadJson(const fs::path& file, std::string& packed, JsonText& text, uint64_t& stored, std::string& error) {
  std::error_code ec;
  const uintmax_t size = fs::file_size(file, ec);
  std::unique_ptr<FILE, int (*)(FILE*)> in(std::fopen(file.c_str(), "rb"), &std::fclose);
  if (ec || in == nullptr) return error = fmt::format("cannot read {}", file.string()), false;
  text.size = 0;
  text.Reserve(size);
  if (std::fread(text.data.get(), 1, size, in.get()) != size) {
    return error = fmt::format("cannot read {}", file.string()), false;
  }
  text.size = size;
  stored = size;
  const auto* head = reinterpret_cast<const unsigned char*>(text.data.get());
  if (size >= 2 && head[0] == 0x1f && head[1] == 0x8b) {
    packed.assign(text.data.get(), size);
    return Inflate(packed, file, text, error);
  }
  return true;
}

// Every value below `value`: numbers parsed, strings unescaped, objects and arrays walked.
simdjson::error_code Touch(od::value value, uint64_t& checksum) {
  od::json_type type{};
  SIMDJSON_TRY(value.type().get(type));
  switch (type) {
    case od::json_type::object: {
      od::object object;
      SIMDJSON_TRY(value.get_object().get(object));
      for (auto field : object) {
        std::string_view key;
        SIMDJSON_TRY(field.unescaped_key().get(key));
        checksum += key.size();
        od::value inner;
        SIMDJSON_TRY(field.value().get(inner));
        SIMDJSON_TRY(Touch(inner, checksum));
      }
      return simdjson::SUCCESS;
    }
    case od::json_type::array: {
      od::array array;
      SIMDJSON_TRY(value.get_array().get(array));
      for (auto element : array) {
        od::value inner;
        SIMDJSON_TRY(element.get(inner));
        SIMDJSON_TRY(Touch(inner, checksum));
      }
      return simdjson::SUCCESS;
    }
    case od::json_type::string: {
      std::string_view text;
      SIMDJSON_TRY(value.get_string().get(text));
      checksum += text.size();
      return simdjson::SUCCESS;
    }
    case od::json_type::number: {
      od::number number;
      SIMDJSON_TRY(value.get_number().get(number));
      checksum += static_cast<uint64_t>(number.as_double() >= 0 ? number.as_double() : -number.as_double());
      return simdjson::SUCCESS;
    }
    case od::json_type::boolean: {
      bool flag = false;
      SIMDJSON_TRY(value.get_bool().get(flag));
      checksum += flag ? 1 : 0;
      return simdjson::SUCCESS;
    }
    case od::json_type::null: {
      bool null = false;
      SIMDJSON_TRY(value.is_null().get(null));
      return null ? simdjson::SUCCESS : simdjson::INCORRECT_TYPE;
    }
  }
  return simdjson::INCORRECT_TYPE;
}

// The whole document: each entry of traceEvents counted as an event, every other top-level
// field walked too.
simdjson::error_code Walk(od::parser& parser, const JsonText& text, uint64_t& events, uint64_t& checksum) {
  od::document document;
  SIMDJSON_TRY(parser.iterate(text.data.get(), text.size, text.capacity + simdjson::SIMDJSON_PADDING).get(document));
  od::object top;
  SIMDJSON_TRY(document.get_object().get(top));
  for (auto field : top) {
    std::string_view key;
    SIMDJSON_TRY(field.unescaped_key().get(key));
    od::value value;
    SIMDJSON_TRY(field.value().get(value));
    if (key != "traceEvents") {
      SIMDJSON_TRY(Touch(value, checksum));
      continue;
    }
    od::array array;
    SIMDJSON_TRY(value.get_array().get(array));
    for (auto element : array) {
      od::value event;
      SIMDJSON_TRY(element.get(event));
      SIMDJSON_TRY(Touch(event, checksum));
      ++events;
    }
  }
  return simdjson::SUCCESS;
}

int Parse(const std::vector<fs::path>& files, unsigned threads) {
  struct Totals {
    uint64_t events = 0, bytes = 0, stored = 0, checksum = 0;
    std::string error;
  };
  threads = std::clamp<unsigned>(threads, 1, static_cast<unsigned>(files.size()));
  std::vector<Totals> totals(threads);
  std::atomic<size_t> next{0};
  const auto start = Clock::now();
  auto work = [&](Totals& mine) {
    od::parser parser;
    std::string packed;
    JsonText text;
    for (size_t i = next++; i < files.size() && mine.error.empty(); i = next++) {
      uint64_t stored = 0;
      if (!ReadJson(files[i], packed, text, stored, mine.error)) break;
      if (const auto error = Walk(parser, text, mine.events, mine.checksum); error != simdjson::SUCCESS) {
        mine.error = fmt::format("{}: {}", files[i].string(), simdjson::error_message(error));
        break;
      }
      mine.bytes += text.size;
      mine.stored += stored;
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(work, std::ref(totals[t]));
  work(totals[0]);
  for (std::thread& thread : pool) thread.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  Totals all;
  for (const Totals& t : totals) {
    if (!t.error.empty()) return std::fprintf(stderr, "import_bench: %s\n", t.error.c_str()), 1;
    all.events += t.events;
    all.bytes += t.bytes;
    all.stored += t.stored;
    all.checksum += t.checksum;
  }
  if (all.checksum == 0) return std::fprintf(stderr, "import_bench: the walk read nothing\n"), 1;
  std::printf("{\"files\": %zu, \"threads\": %u, \"bytes\": %llu, \"stored_bytes\": %llu, \"seconds\": %.4f, "
              "\"mb_per_s\": %.1f, \"events\": %llu}\n",
              files.size(), threads, static_cast<unsigned long long>(all.bytes),
              static_cast<unsigned long long>(all.stored), seconds, static_cast<double>(all.bytes) / 1e6 / seconds,
              static_cast<unsigned long long>(all.events));
  return 0;
}

int Import(const fs::path& file) {
  std::string packed, error;
  JsonText text;
  uint64_t stored = 0;
  if (!ReadJson(file, packed, text, stored, error)) return std::fprintf(stderr, "import_bench: %s\n", error.c_str()), 1;
  const size_t bytes = text.size;
  packed = {};
  text = {};
  const fs::path run = fs::temp_directory_path() / fmt::format("rankscope-import-bench-{}", getpid());
  std::error_code ec;
  fs::remove_all(run, ec);
  const auto start = Clock::now();
  auto imported = rankscope::interop::ImportTraces({file}, run);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  fs::remove_all(run, ec);
  if (!imported.ok()) return std::fprintf(stderr, "import_bench: %s\n", imported.status().message().c_str()), 1;
  std::printf("{\"bytes\": %zu, \"seconds\": %.4f, \"mb_per_s\": %.1f, \"events\": %llu}\n", bytes, seconds,
              static_cast<double>(bytes) / 1e6 / seconds, static_cast<unsigned long long>(imported->events));
  return 0;
}

bool ParseCount(const char* text, uint64_t& value) {
  char* end = nullptr;
  errno = 0;
  const double parsed = std::strtod(text, &end);  // 6e9 and 200000000 alike
  if (errno != 0 || end == text || *end != '\0' || !(parsed >= 0) || parsed > 1e15) return false;
  value = static_cast<uint64_t>(parsed);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return Usage();
  const std::string_view mode = argv[1];
  if (mode == "generator-version" && argc == 2) return std::printf("%d\n", kGeneratorVersion), 0;
  if (mode == "generate" && argc >= 3) {
    uint64_t events = 0, bytes = 0, rank = 0, world_size = 1;
    bool gzip = false;
    for (int i = 3; i < argc; ++i) {
      const std::string_view flag = argv[i];
      const bool has_value = i + 1 < argc;
      if (flag == "--gzip") {
        gzip = true;
      } else if (!has_value) {
        return Usage();
      } else if (flag == "--events") {
        if (!ParseCount(argv[++i], events)) return Usage();
      } else if (flag == "--bytes") {
        if (!ParseCount(argv[++i], bytes)) return Usage();
      } else if (flag == "--rank") {
        if (!ParseCount(argv[++i], rank)) return Usage();
      } else if (flag == "--world-size") {
        if (!ParseCount(argv[++i], world_size)) return Usage();
      } else {
        return Usage();
      }
    }
    if (events == 0 && bytes == 0) events = 1'000'000;
    if (world_size == 0 || world_size > 4096 || rank >= world_size) return Usage();
    return Generate(argv[2], events, bytes, static_cast<int>(rank), static_cast<int>(world_size), gzip);
  }
  if (mode == "parse") {
    unsigned threads = std::max(1u, std::thread::hardware_concurrency());
    std::vector<fs::path> files;
    for (int i = 2; i < argc; ++i) {
      uint64_t value = 0;
      if (std::string_view(argv[i]) == "--threads" && i + 1 < argc) {
        if (!ParseCount(argv[++i], value) || value == 0 || value > 1024) return Usage();
        threads = static_cast<unsigned>(value);
      } else {
        files.emplace_back(argv[i]);
      }
    }
    if (files.empty()) return Usage();
    return Parse(files, threads);
  }
  if (mode == "import" && argc == 3) return Import(argv[2]);
  return Usage();
}
