// Analyzer throughput and memory (issues: analyze a synthetic 8-rank, 10M-event run end to
// end at >= 11M events/s on 2 cores and >= 0.75 of a bare SQLite loop reading the same rows,
// >= 8.6M events/s with the JSON report, with peak memory <= 40 bytes per event). Run through
// bench/analyze_bench.py, which interleaves fresh processes of each mode.
//
//   analyze_bench generate DIR [--ranks 8] [--events 10000000]   the synthetic run
//   analyze_bench sqlite DIR [--threads N]            bare SQLite loop over the analyzer's rows
//   analyze_bench analyze DIR [--threads N]           AnalyzeRun + ReportToJson
//
// `sqlite` and `analyze` print one JSON line: events, seconds, events_per_s, peak RSS.
#include <sqlite3.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include "bench/rss.h"
#include "analyzer/analyze.h"
#include "report/report_writers.h"
#include "trace/events.h"
#include "trace/run_dir.h"
#include "trace/writer.h"

namespace rankscope::bench {
namespace {
namespace fs = std::filesystem;
using trace::CollectiveEvent;
using trace::EventTables;
using trace::KernelEvent;
using trace::LaneId;
using trace::MemcpyEvent;
using trace::MemsetEvent;
using trace::NvtxRangeEvent;
using trace::StringId;
using trace::TimestampNs;

// Bump when the generated content changes, so cached runs are regenerated.
constexpr int kGeneratorVersion = 1;
constexpr const char* kParamsFile = "params.txt";

// ---- Synthetic run -----------------------------------------------------------------------

struct KernelKind {
  const char* name;
  double us;  // typical duration
};

// A transformer's DDP step: forward, backward, fused optimizer. 30 names in all.
constexpr KernelKind kForward[] = {
    {"ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_tn", 180},
    {"sm80_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x256x32_stage3_warpsize2x4x1_tensor16x8x16_kernel", 220},
    {"void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, "
     "at::native::GeluType)::{lambda()#2}::operator()() const::{lambda(c10::Half)#1}, at::detail::Array<char*, 2> >",
     30},
    {"void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::Half, float>(int, float, "
     "c10::Half const*, c10::Half const*, c10::Half const*, float*, float*, c10::Half*)",
     25},
    {"void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::Half>, "
     "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<c10::Half>, at::detail::Array<char*, 3>)",
     12},
    {"fmha_cutlassF_f16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<cutlass::half_t, "
     "cutlass::arch::Sm80, true, 64, 64, 64, true, true>::Params)",
     150},
    {"void (anonymous namespace)::softmax_warp_forward<c10::Half, c10::Half, float, 10, false, false>(c10::Half*, "
     "c10::Half const*, int, int, int, bool const*, int, bool)",
     30},
    {"void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::"
     "{lambda()#3}::operator()() const::{lambda(c10::Half)#1}, at::detail::Array<char*, 2> >",
     10},
    {"void at::native::(anonymous namespace)::indexSelectLargeIndex<c10::Half, long, unsigned int, 2, 2, -2, true>",
     20},
    {"void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<c10::Half>, "
     "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<c10::Half>, at::detail::Array<char*, 1>)",
     4},
    {"void at::native::(anonymous namespace)::fused_dropout_kernel_vec<c10::Half, float, unsigned int, 1, 4, bool>",
     18},
    {"cutlass::Kernel2<cutlass_80_wmma_tensorop_f16_s161616gemm_f16_32x32_128x2_tn_align8>", 90},
    {"void cublasLt::splitKreduce_kernel<32, 16, int, __half, __half, __half, __half, true, false, false>", 8},
    {"void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float, float, "
     "float>, unsigned int, float, 4> >",
     15},
};
constexpr KernelKind kBackward[] = {
    {"ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_nn", 190},
    {"ampere_fp16_s16816gemm_fp16_256x128_ldg8_f2f_stages_64x3_nt", 230},
    {"sm80_xmma_gemm_f16f16_f16f32_f32_nn_n_tilesize128x128x32_stage4_warpsize2x2x1_tensor16x8x16_kernel", 200},
    {"void at::native::vectorized_elementwise_kernel<4, at::native::GeluBackwardCUDAKernelImpl(at::TensorIterator"
     "Base&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda(c10::Half, c10::Half)#1}, "
     "at::detail::Array<char*, 3> >",
     35},
    {"void at::native::(anonymous namespace)::layer_norm_grad_input_kernel_vectorized<c10::Half, float>", 30},
    {"void at::native::(anonymous namespace)::GammaBetaBackwardCUDAKernel<c10::Half, float>", 25},
    {"fmha_cutlassB_f16_aligned_64x64_k64_sm80(PyTorchMemEffAttention::AttentionBackwardKernel<cutlass::arch::"
     "Sm80, cutlass::half_t, true, false, false, 64, 64, 64, false>::Params)",
     300},
    {"void (anonymous namespace)::softmax_warp_backward<c10::Half, c10::Half, float, 10, false, false>", 35},
    {"void at::native::reduce_kernel<128, 4, at::native::ReduceOp<c10::Half, at::native::func_wrapper_t<c10::Half, "
     "at::native::sum_functor<c10::Half, float, c10::Half>::operator()(at::TensorIterator&)::{lambda(float, float)"
     "#1}>, unsigned int, c10::Half, 4> >",
     20},
    {"void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<c10::Half, c10::Half, c10::Half, "
     "at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 2> >",
     12},
    {"void at::native::(anonymous namespace)::embedding_backward_feature_kernel<c10::Half, float, long>", 40},
    {"void at::native::(anonymous namespace)::masked_scale_kernel<bool, c10::Half, float>", 14},
    {"cutlass::Kernel2<cutlass_80_wmma_tensorop_f16_s161616gemm_f16_32x32_128x2_nn_align8>", 95},
    {"void cublasLt::splitKreduce_kernel<32, 16, int, float, __half, float, __half, true, false, false>", 10},
};
constexpr KernelKind kOptimizer[] = {
    {"void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::"
     "TensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<c10::Half, 4, "
     "(at::native::ADAM_MODE)1, false> >",
     60},
    {"void at::native::lpnorm_cleanup<float, (at::native::NormType)1, float, float>", 8},
};
constexpr const char* kNcclKernel = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";

// Events of one step on one rank. Kernels are ~86% of all events.
constexpr int kForwardKernels = 56;
constexpr int kBackwardKernels = 96;
constexpr int kOptimizerKernels = 8;
constexpr int kBuckets = 8;  // DDP gradient buckets: one all-reduce (and NCCL kernel) each
constexpr int kInputCopies = 8;
constexpr int kOutputCopies = 4;
constexpr int kMemsets = 4;
constexpr int kRanges = 4;  // step, forward, backward, optimizer
constexpr uint64_t kEventsPerStep = kForwardKernels + kBackwardKernels + kOptimizerKernels + 2 * kBuckets +
                                    kInputCopies + kOutputCopies + kMemsets + kRanges;
// Bucket b's gradients are ready when backward kernel kFirstBucketKernel + b * kBucketStride
// ends: all-reduces overlap the second half of backward.
constexpr int kFirstBucketKernel = kBackwardKernels / 2 + 5;
constexpr int kBucketStride = (kBackwardKernels - kFirstBucketKernel) / (kBuckets - 1);
constexpr uint64_t kBucketBytes = uint64_t{25} << 20;  // DDP's default bucket size
constexpr uint64_t kCommHash = 0x7f3a9c2e51d04b86;
constexpr size_t kSubmitBatch = 65536;
constexpr uint64_t kMaxInFlight = 262144;  // queued per writer before the generator waits

struct Names {
  std::vector<StringId> forward, backward, optimizer;
  StringId nccl = 0, allreduce = 0, ring = 0, ll = 0, h2d = 0, d2h = 0, memset = 0;
  StringId step = 0, fwd_range = 0, bwd_range = 0, opt_range = 0;
};

struct Lanes {
  LaneId compute = 0, comm = 0, copy = 0, cpu = 0, communicator = 0;
};

// One rank being generated. Ranks are generated in lockstep: an all-reduce ends when the
// last rank has arrived, so the slower ranks make the others wait, as in real DDP.
struct RankGen {
  int rank = 0;
  std::mt19937_64 rng;
  double factor = 1.0;      // this rank's slowness (a few %)
  uint64_t extra = 0;       // events beyond whole steps, added as forward kernels
  std::unique_ptr<trace::TraceWriter> writer;
  Names names;
  Lanes lanes;
  EventTables batch;
  TimestampNs t = 0;        // next step's start
  uint64_t correlation = 0;
  // Scratch of the current step.
  TimestampNs step_start = 0, fwd_start = 0, fwd_end = 0, bwd_start = 0, bwd_end = 0;
  TimestampNs ready[kBuckets] = {};
  TimestampNs comm_start[kBuckets] = {};

  double Uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); }
  TimestampNs Us(double us) { return static_cast<TimestampNs>(us * 1000.0); }
  // A kernel of typical duration `us` on this rank: the rank's factor and +-3% noise.
  TimestampNs KernelNs(double us) { return std::max<TimestampNs>(1000, Us(us * factor * Uniform(0.97, 1.03))); }
  TimestampNs GapNs() { return Us(Uniform(1.5, 4.0)); }

  void Kernel(LaneId lane, StringId name, TimestampNs start, TimestampNs end) {
    KernelEvent k;
    k.lane = lane;
    k.start_ns = start;
    k.end_ns = end;
    k.name = name;
    k.correlation_id = ++correlation;
    k.grid = {static_cast<uint32_t>(108 * (1 + correlation % 4)), 1, 1};
    k.block = {256, 1, 1};
    k.registers_per_thread = 96;
    k.static_shared_bytes = 16384;
    batch.kernels.push_back(k);
  }
  void Memcpy(StringId name, trace::CopyKind kind, TimestampNs start, TimestampNs end, uint64_t bytes) {
    MemcpyEvent c;
    c.lane = lanes.copy;
    c.start_ns = start;
    c.end_ns = end;
    c.name = name;
    c.correlation_id = ++correlation;
    c.bytes = bytes;
    c.copy_kind = kind;
    const bool to_device = kind == trace::CopyKind::kHostToDevice;
    c.src_kind = to_device ? trace::MemoryKind::kPinned : trace::MemoryKind::kDevice;
    c.dst_kind = to_device ? trace::MemoryKind::kDevice : trace::MemoryKind::kPinned;
    batch.memcpys.push_back(c);
  }
  void Range(StringId name, TimestampNs start, TimestampNs end, int64_t payload) {
    NvtxRangeEvent r;
    r.lane = lanes.cpu;
    r.start_ns = start;
    r.end_ns = end;
    r.name = name;
    if (payload >= 0) r.payload = {trace::PayloadKind::kUint64, payload, 0.0};
    batch.nvtx_ranges.push_back(r);
  }

  // Input copies, forward, gradient memsets and backward; records when each bucket is ready.
  void FirstHalf(uint64_t step, uint64_t steps) {
    step_start = t;
    TimestampNs now = t + Us(Uniform(4, 8));
    for (int i = 0; i < kInputCopies; ++i) {
      const TimestampNs end = now + KernelNs(12);
      Memcpy(names.h2d, trace::CopyKind::kHostToDevice, now, end, 512 * 1024);
      now = end + Us(2);
    }
    const uint64_t extra_now = extra / steps + (step < extra % steps ? 1 : 0);
    fwd_start = now + Us(3);
    now = fwd_start;
    for (uint64_t i = 0; i < kForwardKernels + extra_now; ++i) {
      const KernelKind& kind = kForward[i % std::size(kForward)];
      const TimestampNs end = now + KernelNs(kind.us);
      Kernel(lanes.compute, names.forward[i % std::size(kForward)], now, end);
      now = end + GapNs();
    }
    fwd_end = now;
    bwd_start = now;
    for (int i = 0; i < kMemsets; ++i) {
      MemsetEvent m;
      m.lane = lanes.compute;
      m.start_ns = now;
      m.end_ns = now + KernelNs(3);
      m.name = names.memset;
      m.correlation_id = ++correlation;
      m.bytes = kBucketBytes;
      m.memory_kind = trace::MemoryKind::kDevice;
      batch.memsets.push_back(m);
      now = m.end_ns + Us(1);
    }
    for (int i = 0; i < kBackwardKernels; ++i) {
      const KernelKind& kind = kBackward[i % std::size(kBackward)];
      const TimestampNs end = now + KernelNs(kind.us);
      Kernel(lanes.compute, names.backward[i % std::size(kBackward)], now, end);
      const int bucket = (i - kFirstBucketKernel) / kBucketStride;
      if (i >= kFirstBucketKernel && (i - kFirstBucketKernel) % kBucketStride == 0 && bucket < kBuckets) {
        ready[bucket] = end;
      }
      now = end + GapNs();
    }
    ready[kBuckets - 1] = std::max(ready[kBuckets - 1], now);  // the last bucket waits for all gradients
    bwd_end = now;
  }

  // NCCL kernels and collectives (ends shared by every rank), optimizer, output copies, ranges.
  void SecondHalf(uint64_t step, uint64_t sequence, const TimestampNs* comm_end, int ranks) {
    for (int b = 0; b < kBuckets; ++b) {
      Kernel(lanes.comm, names.nccl, comm_start[b], comm_end[b]);
      CollectiveEvent c;
      c.lane = lanes.communicator;
      c.start_ns = comm_start[b];
      c.end_ns = comm_end[b];
      c.name = names.allreduce;
      c.comm_hash = kCommHash;
      c.sequence = sequence + static_cast<uint64_t>(b);
      c.op = trace::CollectiveOp::kAllReduce;
      c.reduce_op = trace::ReduceOp::kSum;
      c.datatype = trace::DataType::kFloat32;
      c.bytes = kBucketBytes;
      c.comm_rank = rank;
      c.comm_size = ranks;
      c.channels = 2;
      c.algorithm = names.ring;
      c.protocol = names.ll;
      batch.collectives.push_back(c);
    }
    // The optimizer waits for the last all-reduce (a stream wait on the compute stream).
    TimestampNs now = std::max(bwd_end, comm_end[kBuckets - 1]) + Us(Uniform(5, 10));
    const TimestampNs opt_start = now;
    for (int i = 0; i < kOptimizerKernels; ++i) {
      const KernelKind& kind = kOptimizer[i % std::size(kOptimizer)];
      const TimestampNs end = now + KernelNs(kind.us);
      Kernel(lanes.compute, names.optimizer[i % std::size(kOptimizer)], now, end);
      now = end + GapNs();
    }
    const TimestampNs opt_end = now;
    for (int i = 0; i < kOutputCopies; ++i) {
      const TimestampNs end = now + KernelNs(3);
      Memcpy(names.d2h, trace::CopyKind::kDeviceToHost, now, end, 4096);
      now = end + Us(2);
    }
    const TimestampNs step_end = now + Us(Uniform(15, 30));  // host-side bookkeeping
    Range(names.step, step_start, step_end, static_cast<int64_t>(step));
    Range(names.fwd_range, fwd_start - Us(2), fwd_end, -1);
    Range(names.bwd_range, bwd_start - Us(2), bwd_end, -1);
    Range(names.opt_range, opt_start - Us(2), opt_end, -1);
    t = step_end;
  }

  // Hands the batch to the writer once it is large, waiting while the writer is far behind
  // (a refused batch would be lost).
  bool Submit(bool force) {
    if (batch.empty() || (!force && batch.size() < kSubmitBatch)) return true;
    for (;;) {
      const trace::WriterStats stats = writer->stats();
      if (stats.events_submitted - stats.events_committed <= kMaxInFlight) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    const bool ok = writer->Submit(std::move(batch));
    batch = EventTables{};
    return ok;
  }
};

Status SetUpRank(RankGen& g, const fs::path& dir, int ranks, const std::string& command) {
  trace::RankIdentity id;
  id.run_id = "analyze-bench";
  id.rank = g.rank;
  id.world_size = ranks;
  id.local_rank = g.rank;
  id.host = "bench";
  id.pid = 4000 + g.rank;
  id.command_line = command;
  id.backend = "nccl";
  trace::WriterOptions options;
  options.queue_capacity_events = size_t{1} << 22;
  options.overwrite = true;
  auto writer = trace::TraceWriter::Create(dir / trace::RankFileName(g.rank), id, std::move(options));
  if (!writer.ok()) return writer.status();
  g.writer = std::move(writer).value();
  trace::TraceWriter& w = *g.writer;

  auto gpu_lane = [&](uint64_t stream, const char* name) {
    trace::Lane lane;
    lane.kind = trace::LaneKind::kGpuStream;
    lane.device = 0;
    lane.context = 1;
    lane.stream = stream;
    lane.pid = id.pid;
    lane.name = name;
    return w.AddLane(lane);
  };
  g.lanes.compute = gpu_lane(7, "stream 7");
  g.lanes.comm = gpu_lane(13, "stream 13");
  g.lanes.copy = gpu_lane(21, "stream 21");
  trace::Lane cpu;
  cpu.kind = trace::LaneKind::kCpuThread;
  cpu.pid = id.pid;
  cpu.tid = id.pid;
  cpu.name = "python";
  g.lanes.cpu = w.AddLane(cpu);
  trace::Lane comm;
  comm.kind = trace::LaneKind::kCommunicator;
  comm.pid = id.pid;
  comm.comm_hash = kCommHash;
  comm.name = "nccl world";
  g.lanes.communicator = w.AddLane(comm);

  for (const KernelKind& k : kForward) g.names.forward.push_back(w.Intern(k.name));
  for (const KernelKind& k : kBackward) g.names.backward.push_back(w.Intern(k.name));
  for (const KernelKind& k : kOptimizer) g.names.optimizer.push_back(w.Intern(k.name));
  g.names.nccl = w.Intern(kNcclKernel);
  g.names.allreduce = w.Intern("AllReduce");
  g.names.ring = w.Intern("RING");
  g.names.ll = w.Intern("LL");
  g.names.h2d = w.Intern("Memcpy HtoD (Pinned -> Device)");
  g.names.d2h = w.Intern("Memcpy DtoH (Device -> Pinned)");
  g.names.memset = w.Intern("Memset (Device)");
  g.names.step = w.Intern("step");
  g.names.fwd_range = w.Intern("forward");
  g.names.bwd_range = w.Intern("backward");
  g.names.opt_range = w.Intern("optimizer");
  return Status::Ok();
}

std::string ParamsText(int ranks, uint64_t events) {
  return fmt::format("generator={} ranks={} events={}", kGeneratorVersion, ranks, events);
}

// True when DIR holds a complete run written with these parameters (params.txt gets its
// final text only after every rank file was closed).
bool HaveRun(const fs::path& dir, int ranks, uint64_t events) {
  std::ifstream in(dir / kParamsFile);
  if (!in) return false;
  std::string line;
  if (!std::getline(in, line) || line != ParamsText(ranks, events)) return false;
  for (int r = 0; r < ranks; ++r) {
    std::error_code ec;
    if (!fs::is_regular_file(dir / trace::RankFileName(r), ec)) return false;
  }
  return true;
}

// Removes every rank file (with SQLite sidecars) an earlier generate left in DIR. Refuses
// when DIR holds rank files but no params.txt of ours: they may be someone's real run.
Status ClearRun(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec) || !trace::HasRankFiles(dir)) return Status::Ok();
  std::ifstream in(dir / kParamsFile);
  std::string line;
  const bool ours = in && std::getline(in, line) && line.starts_with("generator=");
  if (!ours) {
    return InvalidArgument(fmt::format("{} holds rank files that analyze_bench did not write; choose another directory",
                                       dir.string()));
  }
  return trace::RemoveRankFiles(dir).status();
}

// params.txt: "generator=V ranks=R events=N", plus " incomplete" until every file is closed.
Status WriteParams(const fs::path& dir, const std::string& text) {
  std::ofstream out(dir / kParamsFile, std::ios::trunc);
  out << text << '\n';
  out.close();
  if (!out) return IoError(fmt::format("{}: cannot write", (dir / kParamsFile).string()));
  return Status::Ok();
}

Status Generate(const fs::path& dir, int ranks, uint64_t events) {
  if (ranks < 1 || ranks > 1024) return InvalidArgument(fmt::format("--ranks {} is out of range (1 to 1024)", ranks));
  const uint64_t steps = events / static_cast<uint64_t>(ranks) / kEventsPerStep;
  if (steps < 2) {
    return InvalidArgument(fmt::format("--events {} is too small: at least {} per rank", events, 2 * kEventsPerStep));
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return IoError(fmt::format("{}: cannot create: {}", dir.string(), ec.message()));
  if (HaveRun(dir, ranks, events)) {
    fmt::print("reusing {} ({} ranks, {} events)\n", dir.string(), ranks, events);
    return Status::Ok();
  }
  RS_RETURN_IF_ERROR(ClearRun(dir));
  RS_RETURN_IF_ERROR(WriteParams(dir, ParamsText(ranks, events) + " incomplete"));

  const auto t0 = std::chrono::steady_clock::now();
  // Times start at the current whole second, near the writers' recorded clock samples as
  // in a real recording.
  const TimestampNs epoch_ns = std::chrono::duration_cast<std::chrono::seconds>(
                                   std::chrono::system_clock::now().time_since_epoch()).count() * 1'000'000'000;
  const std::string command = fmt::format(
      "torchrun --nproc-per-node {} train.py --model gpt2-medium --batch-size 16 (analyze_bench synthetic)", ranks);
  std::vector<RankGen> gens(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    RankGen& g = gens[static_cast<size_t>(r)];
    g.rank = r;
    g.rng.seed(0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(r + 1));
    g.factor = 1.0 + g.Uniform(0.0, 0.04);
    const uint64_t quota = events / static_cast<uint64_t>(ranks) + (static_cast<uint64_t>(r) < events % ranks ? 1 : 0);
    g.extra = quota - steps * kEventsPerStep;
    g.t = epoch_ns + g.Us(g.Uniform(0, 50));
    RS_RETURN_IF_ERROR(SetUpRank(g, dir, ranks, command));
  }

  // Shared by every rank: the bus bandwidth each all-reduce gets.
  std::mt19937_64 shared_rng(0x5eed);
  const double ring_factor = 2.0 * (ranks - 1) / ranks;
  uint64_t sequence = 1;
  TimestampNs comm_end[kBuckets];
  for (uint64_t step = 0; step < steps; ++step) {
    for (RankGen& g : gens) g.FirstHalf(step, steps);
    // An all-reduce starts on a rank when its bucket is ready and the previous one is done,
    // and ends once the last rank has arrived and the data moved.
    TimestampNs previous_end = 0;
    for (int b = 0; b < kBuckets; ++b) {
      TimestampNs last = 0;
      for (RankGen& g : gens) {
        g.comm_start[b] = std::max(g.ready[b], previous_end) + g.Us(g.Uniform(4, 6));
        last = std::max(last, g.comm_start[b]);
      }
      const double busbw_gbps = 140.0 * std::uniform_real_distribution<double>(0.95, 1.05)(shared_rng);
      const double transfer_ns = static_cast<double>(kBucketBytes) * std::max(ring_factor, 0.5) / busbw_gbps;
      comm_end[b] = last + static_cast<TimestampNs>(transfer_ns);
      previous_end = comm_end[b];
    }
    for (RankGen& g : gens) {
      g.SecondHalf(step, sequence, comm_end, ranks);
      if (!g.Submit(false)) return IoError(fmt::format("rank {}: the writer dropped a batch", g.rank));
    }
    sequence += kBuckets;
  }
  for (RankGen& g : gens) {
    if (!g.Submit(true)) return IoError(fmt::format("rank {}: the writer dropped a batch", g.rank));
  }
  uint64_t written = 0;
  for (RankGen& g : gens) {
    RS_RETURN_IF_ERROR(g.writer->Close());
    const trace::WriterStats stats = g.writer->stats();
    if (stats.events_dropped != 0) {
      return IoError(fmt::format("rank {}: the writer dropped {} events", g.rank, stats.events_dropped));
    }
    written += stats.events_committed;
  }
  if (written != events) return IoError(fmt::format("wrote {} events, expected {}", written, events));

  RS_RETURN_IF_ERROR(WriteParams(dir, ParamsText(ranks, events)));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fmt::print("generated {} ({} ranks, {} events, {} steps) in {:.1f} s\n", dir.string(), ranks, events, steps,
             seconds);
  return Status::Ok();
}

// ---- Measuring -----------------------------------------------------------------------------

// Exactly what the analyzer reads: the span queries of TraceReader::Stream (SpanQuery in
// trace/reader.cc) and the two tables it reads whole.
constexpr const char* kBaselineQueries[] = {
    "SELECT lane, start_ns, end_ns, name FROM kernels ORDER BY id",
    "SELECT lane, start_ns, end_ns FROM memcpys ORDER BY id",
    "SELECT lane, start_ns, end_ns FROM memsets ORDER BY id",
    "SELECT lane, start_ns, end_ns, name, domain, category, args, payload_kind, payload_int "
    "FROM nvtx_ranges ORDER BY id",
    "SELECT * FROM nvtx_marks ORDER BY id",
    "SELECT * FROM collectives ORDER BY id",
};
constexpr const char* kCountedTables[] = {"kernels", "memcpys", "memsets", "nvtx_ranges", "nvtx_marks", "collectives"};

class Db {
 public:
  ~Db() { sqlite3_close(db_); }
  Status Open(const fs::path& path) {
    const int rc = sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nullptr);
    if (rc != SQLITE_OK) return IoError(fmt::format("{}: cannot open: {}", path.string(), sqlite3_errstr(rc)));
    path_ = path.string();
    return Status::Ok();
  }
  // Steps every row of `sql`, reading each column as an integer into `sum`.
  Status ForEachRow(const char* sql, uint64_t& rows, uint64_t& sum) {
    sqlite3_stmt* stmt = nullptr;
    int rc = sqlite3_prepare_v2(db_, sql, -1, &stmt, nullptr);
    if (rc != SQLITE_OK) return IoError(fmt::format("{}: {}: {}", path_, sql, sqlite3_errmsg(db_)));
    const int columns = sqlite3_column_count(stmt);
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
      ++rows;
      for (int c = 0; c < columns; ++c) sum += static_cast<uint64_t>(sqlite3_column_int64(stmt, c));
    }
    sqlite3_finalize(stmt);
    if (rc != SQLITE_DONE) return IoError(fmt::format("{}: {}: {}", path_, sql, sqlite3_errstr(rc)));
    return Status::Ok();
  }
  Status Exec(const char* sql) {
    const int rc = sqlite3_exec(db_, sql, nullptr, nullptr, nullptr);
    if (rc != SQLITE_OK) return IoError(fmt::format("{}: {}: {}", path_, sql, sqlite3_errmsg(db_)));
    return Status::Ok();
  }

 private:
  sqlite3* db_ = nullptr;
  std::string path_;
};

Result<std::vector<fs::path>> RankFiles(const fs::path& dir) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    if (trace::ParseRankFileName(entry.path().filename().string()).is_rank_file) files.push_back(entry.path());
  }
  if (ec) return IoError(fmt::format("{}: cannot list: {}", dir.string(), ec.message()));
  if (files.empty()) return NotFound(fmt::format("{}: no rank files (run `analyze_bench generate` first)", dir.string()));
  std::sort(files.begin(), files.end());
  return files;
}

// Rows of the tables the analyzer reads, counted before (not inside) the timed region.
Result<uint64_t> CountEvents(const std::vector<fs::path>& files) {
  uint64_t events = 0;
  for (const fs::path& file : files) {
    Db db;
    RS_RETURN_IF_ERROR(db.Open(file));
    for (const char* table : kCountedTables) {
      const std::string sql = fmt::format("SELECT count(*) FROM {}", table);
      uint64_t rows = 0, count = 0;
      RS_RETURN_IF_ERROR(db.ForEachRow(sql.c_str(), rows, count));
      events += count;
    }
  }
  return events;
}


// CPU seconds of all the process's threads: less disturbed than wall time when other work
// shares the machine.
double ProcessCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

int ResolveThreads(int threads) {
  return threads > 0 ? threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

// The bare loop: files spread over threads like the analyzer spreads ranks, each file read
// in one read transaction.
Status BareSqlite(const std::vector<fs::path>& files, int threads, uint64_t& rows, uint64_t& checksum) {
  std::atomic<size_t> next{0};
  std::atomic<uint64_t> total_rows{0}, total_sum{0};
  std::mutex error_mu;
  Status error = Status::Ok();
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < files.size();) {
      uint64_t file_rows = 0, sum = 0;
      Db db;
      Status s = db.Open(files[i]);
      if (s.ok()) s = db.Exec("BEGIN");
      for (const char* sql : kBaselineQueries) {
        if (s.ok()) s = db.ForEachRow(sql, file_rows, sum);
      }
      if (s.ok()) s = db.Exec("COMMIT");
      if (!s.ok()) {
        std::lock_guard lock(error_mu);
        if (error.ok()) error = s;
        return;
      }
      total_rows += file_rows;
      total_sum += sum;
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  rows = total_rows;
  checksum = total_sum;
  return error;
}

void PrintResult(const char* mode, uint64_t events, double seconds, double cpu_seconds, int threads,
                 int64_t rss_before, const std::string& extra) {
  const int64_t peak = PeakRssBytes();
  fmt::print(
      "{{\"mode\": \"{}\", \"events\": {}, \"seconds\": {:.4f}, \"events_per_s\": {:.0f}, \"cpu_s\": {:.4f}, "
      "\"threads\": {}, \"peak_rss_kib\": {}, \"rss_before_kib\": {}, \"bytes_per_event\": {:.2f}{}}}\n",
      mode, events, seconds, static_cast<double>(events) / seconds, cpu_seconds, threads, peak / 1024,
      rss_before / 1024,
      static_cast<double>(peak - rss_before) / static_cast<double>(std::max<uint64_t>(events, 1)), extra);
  std::fflush(stdout);
}

Status RunSqlite(const fs::path& dir, int threads) {
  RS_ASSIGN_OR_RETURN(std::vector<fs::path> files, RankFiles(dir));
  RS_ASSIGN_OR_RETURN(uint64_t events, CountEvents(files));
  threads = ResolveThreads(threads);
  const int64_t rss_before = CurrentRssBytes();
  const double cpu0 = ProcessCpuSeconds();
  const auto t0 = std::chrono::steady_clock::now();
  uint64_t rows = 0, checksum = 0;
  RS_RETURN_IF_ERROR(BareSqlite(files, threads, rows, checksum));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double cpu_seconds = ProcessCpuSeconds() - cpu0;
  if (rows != events) return InternalError(fmt::format("read {} rows, counted {}", rows, events));
  PrintResult("sqlite", events, seconds, cpu_seconds, threads, rss_before,
              fmt::format(", \"checksum\": {}", checksum));
  return Status::Ok();
}

Status RunAnalyze(const fs::path& dir, int threads, bool critical_path) {
  RS_ASSIGN_OR_RETURN(std::vector<fs::path> files, RankFiles(dir));
  RS_ASSIGN_OR_RETURN(uint64_t events, CountEvents(files));
  analyzer::AnalyzeOptions options;
  options.critical_path = critical_path;
  options.threads = ResolveThreads(threads);
  options.tool_version = "analyze_bench";
  int progress_reported = 0;
  options.progress = [&](int done, int) { progress_reported = done; };
  // Where the time goes: AnalyzeRun reads and measures ranks on worker threads while this
  // thread waits, then does the cross-rank and run-level work alone; so this thread's CPU
  // time is the serial part.
  using Clock = std::chrono::steady_clock;
  const int64_t rss_before = CurrentRssBytes();
  const double cpu0 = ProcessCpuSeconds();
  const double thread_cpu0 = ThreadCpuSeconds();
  const Clock::time_point t0 = Clock::now();
  auto report = analyzer::AnalyzeRun(dir, options);
  if (!report.ok()) return report.status();
  const Clock::time_point analyzed = Clock::now();
  const double analyzed_cpu = ProcessCpuSeconds();
  const double serial_cpu = ThreadCpuSeconds() - thread_cpu0;
  const int64_t peak_analyzed = PeakRssBytes();
  const std::string json = report::ReportToJson(*report);
  const Clock::time_point t1 = Clock::now();
  const double cpu1 = ProcessCpuSeconds();
  auto seconds = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); };
  PrintResult(critical_path ? "path" : "analyze", events, seconds(t0, t1), cpu1 - cpu0, options.threads, rss_before,
              fmt::format(", \"analyze_s\": {:.4f}, \"json_s\": {:.4f}, \"workers_cpu_s\": {:.4f}, "
                          "\"serial_cpu_s\": {:.4f}, \"json_cpu_s\": {:.4f}, \"peak_rss_before_json_kib\": {}, "
                          "\"progress_reported\": {}, \"report_events\": {}, \"ranks\": {}, \"steps\": {}, "
                          "\"matched_collectives\": {}, \"json_bytes\": {}, \"path_steps\": {}",
                          seconds(t0, analyzed), seconds(analyzed, t1), analyzed_cpu - cpu0 - serial_cpu, serial_cpu,
                          cpu1 - analyzed_cpu, peak_analyzed / 1024, progress_reported, report->run.events,
                          report->summary.ranks, report->steps.steps_found, report->cross_rank.matched, json.size(),
                          report->critical_path ? report->critical_path->steps : -1));
  return Status::Ok();
}

// ---- Command line --------------------------------------------------------------------------

// The command line (CLI11): `--help` anywhere prints the usage and writes nothing, and a
// DIR that looks like an option is refused rather than created.
int Main(int argc, char** argv) {
  CLI::App app("analyze_bench: the analyzer's load + metrics benchmark and its synthetic run", "analyze_bench");
  app.require_subcommand(1);
  std::string dir;
  uint64_t ranks = 8, events = 10'000'000, threads = 0;
  auto add_dir = [&](CLI::App* command) {
    command->add_option("DIR", dir, "the run directory")->required()->check([](const std::string& value) {
      return value.starts_with("-") ? std::string("a directory name, not an option: ") + value : std::string();
    });
  };
  CLI::App* generate = app.add_subcommand("generate", "write the synthetic run into DIR");
  add_dir(generate);
  generate->add_option("--ranks", ranks, "ranks")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  generate->add_option("--events", events, "events in all")->capture_default_str();
  CLI::App* sqlite = app.add_subcommand("sqlite", "the bare SQLite loop over DIR's rows");
  CLI::App* analyze = app.add_subcommand("analyze", "load + metrics of DIR, timed");
  for (CLI::App* command : {sqlite, analyze}) {
    add_dir(command);
    command->add_option("--threads", threads, "threads (0: one per core)")->check(CLI::Range(0, 1024));
  }
  bool critical_path = false;
  analyze->add_flag("--critical-path", critical_path, "also each step's critical path (docs/metrics.md §10)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error);
  }
  Status status = Status::Ok();
  std::string mode;
  if (generate->parsed()) {
    mode = "generate";
    status = Generate(dir, static_cast<int>(ranks), events);
  } else if (sqlite->parsed()) {
    mode = "sqlite";
    status = RunSqlite(dir, static_cast<int>(threads));
  } else {
    mode = "analyze";
    status = RunAnalyze(dir, static_cast<int>(threads), critical_path);
  }
  if (!status.ok()) {
    fmt::print(stderr, "analyze_bench {}: {}\n", mode, status.message());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace rankscope::bench

int main(int argc, char** argv) {
  try {
    return rankscope::bench::Main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "analyze_bench: %s\n", e.what());
    return 1;
  }
}
