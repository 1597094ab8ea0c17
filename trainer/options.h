// rankscope-trainer's command line: every knob of the model, data, DDP engine and runtime.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "kernels/cpu_kernels.h"

namespace rankscope::trainer {

enum class Backend : uint8_t { kAuto, kNccl, kGloo };
enum class Precision : uint8_t { kFp32, kBf16 };
enum class OptimizerKind : uint8_t { kSgd, kAdamW };
// ddp: DdpEngine (ddp.h); fsdp: FsdpEngine (fsdp.h); pipeline: PipelineEngine (pipeline.h).
enum class Parallelism : uint8_t { kDdp, kFsdp, kPipeline };
enum class PipelineSchedule : uint8_t { kOneForwardOneBackward, kGPipe };

struct TrainerOptions {
  // Model: an MLP features → width (× depth hidden layers) → classes.
  int features = 256;
  int width = 1024;
  int depth = 4;
  int classes = 32;
  kernels::Activation activation = kernels::Activation::kGelu;
  // Data and schedule.
  int64_t dataset_size = 1 << 16;
  int batch = 64;  // per rank, per micro-step
  int accum = 1;   // micro-steps per optimizer step
  int steps = 30;
  uint64_t seed = 1;
  // Optimization.
  OptimizerKind optimizer = OptimizerKind::kSgd;
  double lr = 0.1;                 // at a global batch of lr_reference_batch
  int lr_reference_batch = 256;    // linear scaling: lr · global batch / this
  int warmup_steps = 5;
  double momentum = 0.9;
  double weight_decay = 0.0;
  double clip_grad_norm = 0.0;     // 0: no clipping
  // The parallel engine. overlap: DDP's all-reduces during the backward pass, FSDP's
  // prefetch of the next layer's all-gather.
  Parallelism parallel = Parallelism::kDdp;
  // Pipeline: stages (0: one per rank), micro-batches of `batch` rows per step, the
  // schedule, and layers per stage (empty: balanced by multiply-adds).
  int stages = 0;
  int micro_batches = 4;
  PipelineSchedule schedule = PipelineSchedule::kOneForwardOneBackward;
  std::vector<int> stage_layers;
  double bucket_mb = 25.0;
  double first_bucket_mb = 1.0;
  bool overlap = true;
  // Runtime.
  Backend backend = Backend::kAuto;
  Precision precision = Precision::kFp32;
  std::string rendezvous;          // empty: the default (see rendezvous.h)
  int threads = 0;                 // 0: cores / local ranks
  double timeout_s = 60.0;         // collectives and rendezvous
  // Checkpoints and output.
  std::string checkpoint;          // save here (rank 0), atomically replaced
  int checkpoint_every = 0;        // 0: only at the end
  std::string resume;              // continue from this checkpoint
  std::string metrics_out;         // per-rank JSON; "{rank}" is replaced by the rank
  int log_every = 10;              // 0: no per-step lines
  bool quiet = false;
  // Fault injection for tests: rank fault_rank kills itself (SIGKILL) at step fault_step.
  int fault_rank = -1;
  int fault_step = -1;
  // A deliberate slowdown for regression tests: sleep this long in every step.
  double extra_step_delay_ms = 0.0;
  // The same as CPU work: spin until this thread has used this much CPU time. A sleep costs
  // little on a busy machine (the other processes use the time, the sleeper gets it back
  // after); work costs its share there as it would.
  double extra_step_work_ms = 0.0;
  // A straggler for the analyzer's tests: rank slow_rank sleeps slow_rank_ms before each
  // step's forward pass, so the others wait for it at every all-reduce.
  int slow_rank = -1;
  double slow_rank_ms = 0.0;
  // The straggler spins (busy) for those milliseconds instead of sleeping: it keeps its core
  // busy, as a rank slowed by more work would, instead of lending it to the others.
  bool slow_rank_busy = false;
  // Gloo only: collectives last as long as on a link of this many Gbit/s (SimulatedLink),
  // so that overlapping them with compute saves what it would on a GPU cluster; 0: off.
  double link_gbps = 0.0;
  // Planted failures for the hang detector's tests; steps count from 0, as the "step"
  // ranges do. Rank hang_rank blocks for good at step hang_step, inside its backward pass
  // before the step's first collective. Rank mismatch_rank broadcasts (root 0) at step
  // mismatch_step where the others all-reduce the first bucket. A rank beyond the world
  // size is an error once the world is known (RunTraining).
  int hang_rank = -1;
  int64_t hang_step = -1;
  int mismatch_rank = -1;
  int64_t mismatch_step = -1;
};

struct CommandLine {
  TrainerOptions options;
  bool exit_now = false;  // --help or --version was handled
  std::string text;       // what to print when exit_now
};

// Parses and validates; errors are one line naming the option.
Result<CommandLine> ParseCommandLine(const std::vector<std::string>& args);

const char* BackendName(Backend backend);
const char* ParallelismName(Parallelism parallel);
const char* ScheduleName(PipelineSchedule schedule);
const char* PrecisionName(Precision precision);
const char* ActivationName(kernels::Activation activation);
const char* OptimizerName(OptimizerKind kind);

}  // namespace rankscope::trainer
