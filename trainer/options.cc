#include "trainer/options.h"

#include <cctype>
#include <charconv>
#include <map>
#include <string_view>
#include <system_error>
#include <tuple>
#include <utility>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "base/text.h"

namespace rankscope::trainer {
namespace {

template <typename Enum>
CLI::Option* AddChoice(CLI::App& app, const std::string& name, Enum& target,
                       const std::map<std::string, Enum>& choices, const std::string& help) {
  std::string names;
  for (const auto& [text, value] : choices) names += (names.empty() ? "" : "|") + text;
  // The help and the error name the choices themselves: CLI11's CheckedTransformer prints
  // the enum's values, which for a one-byte enum are control characters (a 0 cut the line).
  CLI::Validator choice(
      [choices, names](std::string& input) -> std::string {
        std::string lower = input;
        for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        const auto found = choices.find(lower);
        if (found == choices.end()) return "'" + input + "' is not one of " + names;
        input = std::to_string(static_cast<int>(found->second));  // the number CLI11 reads into the enum
        return {};
      },
      "");
  return app.add_option(name, target, help + " (" + names + ")")->transform(choice)->option_text("ENUM");
}

// "RANK:VALUE" (--slow-rank, --hang-rank, --mismatch-rank): a rank of 0 or more, a colon
// and a number, nothing else; `form` names the expected form in the error.
template <typename Value>
Result<std::pair<int, Value>> ParseRankAnd(std::string_view option, const std::string& text, std::string_view form) {
  const auto whole_number = [](const char* first, const char* last, auto& out) {
    const auto [end, error] = std::from_chars(first, last, out);
    return first != last && error == std::errc() && end == last;
  };
  const size_t colon = text.find(':');
  const char* begin = text.data();
  int rank = -1;
  Value value{};
  if (colon == std::string::npos || !whole_number(begin, begin + colon, rank) ||
      !whole_number(begin + colon + 1, begin + text.size(), value) || rank < 0) {
    return InvalidArgument(fmt::format("{} {}: expected {}", option, Printable(text), form));
  }
  return std::pair<int, Value>{rank, value};
}

// A planted failure's step must be one the run reaches.
Status CheckPlantedStep(std::string_view option, int rank, int64_t step, int steps) {
  if (rank < 0) return Status::Ok();
  if (step < 0 || step >= steps) {
    return InvalidArgument(fmt::format("{} {}:{}: the step must be in 0..{} (steps count from 0; --steps {})",
                                       option, rank, step, steps - 1, steps));
  }
  return Status::Ok();
}

Status Validate(const TrainerOptions& o) {
  auto positive = [](const char* name, double value) -> Status {
    if (value > 0) return Status::Ok();
    return InvalidArgument(fmt::format("{} must be positive, not {}", name, value));
  };
  RS_RETURN_IF_ERROR(positive("--features", o.features));
  RS_RETURN_IF_ERROR(positive("--width", o.width));
  RS_RETURN_IF_ERROR(positive("--classes", o.classes));
  RS_RETURN_IF_ERROR(positive("--batch", o.batch));
  RS_RETURN_IF_ERROR(positive("--accum", o.accum));
  RS_RETURN_IF_ERROR(positive("--steps", o.steps));
  RS_RETURN_IF_ERROR(positive("--lr", o.lr));
  RS_RETURN_IF_ERROR(positive("--lr-reference-batch", o.lr_reference_batch));
  RS_RETURN_IF_ERROR(positive("--bucket-mb", o.bucket_mb));
  RS_RETURN_IF_ERROR(positive("--first-bucket-mb", o.first_bucket_mb));
  RS_RETURN_IF_ERROR(positive("--timeout", o.timeout_s));
  if (o.depth < 0) return InvalidArgument(fmt::format("--depth must be 0 or more, not {}", o.depth));
  if (o.classes < 2) return InvalidArgument("--classes must be at least 2");
  if (o.dataset_size < o.batch) {
    return InvalidArgument(fmt::format("--samples {} is smaller than --batch {}", o.dataset_size, o.batch));
  }
  // Layer sizes feed int GEMM dimensions and per-layer buffers; keep them well inside int.
  constexpr int kMaxDimension = 1 << 16;
  if (o.features > kMaxDimension || o.width > kMaxDimension || o.classes > kMaxDimension ||
      o.batch > kMaxDimension || o.depth > 1024) {
    return InvalidArgument(fmt::format("model or batch too large (at most {} per dimension, depth 1024)",
                                       kMaxDimension));
  }
  if (o.momentum < 0 || o.momentum >= 1) return InvalidArgument("--momentum must be in [0, 1)");
  if (o.weight_decay < 0) return InvalidArgument("--weight-decay must not be negative");
  if (o.clip_grad_norm < 0) return InvalidArgument("--clip-grad-norm must not be negative");
  if (o.warmup_steps < 0) return InvalidArgument("--warmup-steps must not be negative");
  if (o.threads < 0) return InvalidArgument("--threads must not be negative");
  if (o.checkpoint_every < 0) return InvalidArgument("--checkpoint-every must not be negative");
  if (o.checkpoint_every > 0 && o.checkpoint.empty()) {
    return InvalidArgument("--checkpoint-every needs --checkpoint PATH");
  }
  if (o.extra_step_delay_ms < 0) return InvalidArgument("--extra-step-delay-ms must not be negative");
  if (o.extra_step_work_ms < 0) return InvalidArgument("--extra-step-work-ms must not be negative");
  if (!(o.link_gbps >= 0)) return InvalidArgument("--link-gbps must be a positive number of Gbit/s");
  if (o.link_gbps > 0 && o.backend == Backend::kNccl) {
    return InvalidArgument("--link-gbps simulates a link for the Gloo backend; NCCL crosses a real one");
  }
  if (o.backend == Backend::kGloo && o.precision == Precision::kBf16) {
    return InvalidArgument("--precision bf16 needs the GPU backend (the CPU kernels are fp32)");
  }
  RS_RETURN_IF_ERROR(CheckPlantedStep("--hang-rank", o.hang_rank, o.hang_step, o.steps));
  RS_RETURN_IF_ERROR(CheckPlantedStep("--mismatch-rank", o.mismatch_rank, o.mismatch_step, o.steps));
  if (o.parallel == Parallelism::kFsdp) {
    // Not built for sharded runs yet: say so rather than do something else.
    if (!o.checkpoint.empty() || !o.resume.empty()) {
      return InvalidArgument("--parallel fsdp: checkpoints of a sharded run (--checkpoint, --resume) are not supported yet");
    }
    if (o.mismatch_rank >= 0) return InvalidArgument("--parallel fsdp: --mismatch-rank plants a DDP mismatch; use --parallel ddp");
  }
  if (o.parallel == Parallelism::kPipeline) {
    if (o.stages < 0) return InvalidArgument("--stages must not be negative (0: one stage per rank)");
    if (o.micro_batches < 1) return InvalidArgument("--micro-batches must be at least 1");
    if (o.accum != 1) {
      return InvalidArgument("--parallel pipeline: a pipeline accumulates over its micro-batches; use --micro-batches, "
                             "not --accum");
    }
    if (!o.checkpoint.empty() || !o.resume.empty()) {
      return InvalidArgument(
          "--parallel pipeline: checkpoints of a pipelined run (--checkpoint, --resume) are not supported yet");
    }
    if (o.mismatch_rank >= 0) {
      return InvalidArgument("--parallel pipeline: --mismatch-rank plants a DDP mismatch; use --parallel ddp");
    }
  }
  return Status::Ok();
}

}  // namespace

Result<CommandLine> ParseCommandLine(const std::vector<std::string>& args) {
  CommandLine result;
  TrainerOptions& o = result.options;
  CLI::App app("rankscope-trainer: the reference trainer that rankscope profiles (data parallel, sharded or pipelined). "
               "Rank and world size come from torchrun, Slurm or Open MPI variables.",
               "rankscope-trainer");
  app.set_version_flag("--version", RANKSCOPE_VERSION);
  app.get_formatter()->column_width(34);
  // A later occurrence wins, so scripts can append overrides to a base command line.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);

  auto* model = "Model and data";
  app.add_option("--features", o.features, "Input features")->group(model)->capture_default_str();
  app.add_option("--width", o.width, "Hidden layer width")->group(model)->capture_default_str();
  app.add_option("--depth", o.depth, "Hidden layers")->group(model)->capture_default_str();
  app.add_option("--classes", o.classes, "Output classes")->group(model)->capture_default_str();
  AddChoice(app, "--activation", o.activation,
            {{"gelu", kernels::Activation::kGelu}, {"relu", kernels::Activation::kRelu}}, "Activation")
      ->group(model);
  app.add_option("--samples", o.dataset_size, "Synthetic dataset size")->group(model)->capture_default_str();
  app.add_option("--seed", o.seed, "Seed of data, initialization and shuffling")->group(model)->capture_default_str();

  auto* schedule = "Schedule and optimizer";
  app.add_option("--batch", o.batch, "Samples per rank per micro-step")->group(schedule)->capture_default_str();
  app.add_option("--accum", o.accum, "Micro-steps per optimizer step (gradient accumulation)")
      ->group(schedule)->capture_default_str();
  app.add_option("--steps", o.steps, "Optimizer steps to run in total")->group(schedule)->capture_default_str();
  AddChoice(app, "--optimizer", o.optimizer, {{"sgd", OptimizerKind::kSgd}, {"adamw", OptimizerKind::kAdamW}},
            "Optimizer")->group(schedule);
  app.add_option("--lr", o.lr, "Learning rate at a global batch of --lr-reference-batch")
      ->group(schedule)->capture_default_str();
  app.add_option("--lr-reference-batch", o.lr_reference_batch,
                 "Linear scaling: the rate used is lr x global batch / this")->group(schedule)->capture_default_str();
  app.add_option("--warmup-steps", o.warmup_steps, "Linear learning-rate warm-up")->group(schedule)->capture_default_str();
  app.add_option("--momentum", o.momentum, "SGD momentum")->group(schedule)->capture_default_str();
  app.add_option("--weight-decay", o.weight_decay, "Weight decay (decoupled for AdamW)")->group(schedule)->capture_default_str();
  app.add_option("--clip-grad-norm", o.clip_grad_norm, "Clip the global gradient norm to this (0: off)")
      ->group(schedule)->capture_default_str();

  auto* ddp = "Data parallelism";
  AddChoice(app, "--parallel", o.parallel,
            {{"ddp", Parallelism::kDdp}, {"fsdp", Parallelism::kFsdp}, {"pipeline", Parallelism::kPipeline}},
            "ddp: replicas, gradients all-reduced in buckets; fsdp: parameters, gradients and optimizer state "
            "sharded per layer (all-gather, reduce-scatter); pipeline: layers split into stages over the ranks, "
            "micro-batches sent point to point")->group(ddp);
  auto* pipeline = "Pipeline parallelism (--parallel pipeline)";
  auto* stages = app.add_option("--stages", o.stages,
                                "Pipeline stages; the world size must be a multiple (data parallel over the rest); "
                                "0: one per rank")->group(pipeline)->capture_default_str();
  auto* micro_batches = app.add_option("--micro-batches", o.micro_batches,
                                       "Micro-batches of --batch rows per step")->group(pipeline)->capture_default_str();
  auto* schedule_option = AddChoice(app, "--schedule", o.schedule,
                                    {{"1f1b", PipelineSchedule::kOneForwardOneBackward}, {"gpipe", PipelineSchedule::kGPipe}},
                                    "1f1b: one forward, one backward (at most S-s micro-batches in flight on stage s); "
                                    "gpipe: all forwards, then all backwards")->group(pipeline);
  auto* stage_layers = app.add_option("--stage-layers", o.stage_layers,
                                      "Layers per stage, e.g. 1,4 (default: balanced by multiply-adds)")
                           ->delimiter(',')->group(pipeline);
  app.add_option("--bucket-mb", o.bucket_mb, "Gradient bucket cap in MiB")->group(ddp)->capture_default_str();
  app.add_option("--first-bucket-mb", o.first_bucket_mb, "Cap of the first bucket in MiB")->group(ddp)->capture_default_str();
  app.add_flag("--no-overlap{false}", o.overlap,
               "DDP: all-reduce every bucket after the backward pass; FSDP: no prefetch of the next layer's "
               "all-gather")->group(ddp);
  AddChoice(app, "--backend", o.backend, {{"auto", Backend::kAuto}, {"nccl", Backend::kNccl}, {"gloo", Backend::kGloo}},
            "Collectives: auto is NCCL when a GPU is usable, else Gloo")->group(ddp);
  AddChoice(app, "--precision", o.precision, {{"fp32", Precision::kFp32}, {"bf16", Precision::kBf16}},
            "GEMM precision (bf16: GPU tensor cores)")->group(ddp);
  app.add_option("--rdzv", o.rendezvous, "Rendezvous store: file:DIR or redis://HOST:PORT")->group(ddp);
  app.add_option("--timeout", o.timeout_s, "Seconds before a rendezvous or collective gives up")
      ->group(ddp)->capture_default_str();
  app.add_option("--threads", o.threads, "CPU kernel threads (0: cores / local ranks)")->group(ddp)->capture_default_str();

  auto* output = "Checkpoints and output";
  app.add_option("--checkpoint", o.checkpoint, "Save a checkpoint here (rank 0; atomic replace)")->group(output);
  app.add_option("--checkpoint-every", o.checkpoint_every, "Also save every N steps")->group(output);
  app.add_option("--resume", o.resume, "Continue from this checkpoint")->group(output);
  app.add_option("--metrics-out", o.metrics_out, "Write per-step metrics as JSON ({rank} becomes the rank)")
      ->group(output);
  app.add_option("--log-every", o.log_every, "Print a line every N steps (0: never)")->group(output)->capture_default_str();
  app.add_flag("--quiet", o.quiet, "Print only the final line and errors")->group(output);

  // Test hooks, not shown in --help.
  app.add_option("--fault-rank", o.fault_rank)->group("");
  app.add_option("--fault-step", o.fault_step)->group("");
  app.add_option("--extra-step-delay-ms", o.extra_step_delay_ms,
                 "Sleep this long in every step (a planted slowdown for regression checks)")->group(ddp);
  app.add_option("--extra-step-work-ms", o.extra_step_work_ms,
                 "Spin this much CPU time in every step (a planted slowdown that a busy machine does not hide)")
      ->group(ddp);
  app.add_option("--link-gbps", o.link_gbps,
                 "Gloo: each collective also lasts as long as its bytes take on a link of this many Gbit/s, "
                 "sleeping (a network's transfer, which compute beside it overlaps; 0: off)")
      ->group(ddp);

  app.add_flag("--slow-rank-busy", o.slow_rank_busy,
               "The --slow-rank straggler spins instead of sleeping (keeps its core busy, as more work would)")
      ->group(ddp);
  std::string slow_rank;
  app.add_option("--slow-rank", slow_rank, "R:MS: rank R sleeps MS milliseconds before every forward pass "
                                           "(a planted straggler)")->group(ddp);
  // Planted failures for the hang detector's tests.
  auto* failures = "Planted failures (STEP counts from 0, as the NVTX \"step\" ranges and --fault-step do; "
                   "the log line \"step N/M\" is printed after step N-1)";
  std::string hang_rank;
  app.add_option("--hang-rank", hang_rank,
                 "R:STEP: rank R blocks forever at step STEP, in its backward pass before the step's first "
                 "collective (signals still end it)")->group(failures);
  std::string mismatch_rank;
  app.add_option("--mismatch-rank", mismatch_rank,
                 "R:STEP: at step STEP rank R broadcasts (root 0) the first bucket where the other ranks "
                 "all-reduce it")->group(failures);

  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& error) {
    if (error.get_exit_code() == 0) {
      result.exit_now = true;
      result.text = dynamic_cast<const CLI::CallForVersion*>(&error) != nullptr ? RANKSCOPE_VERSION "\n"
                                                                               : app.help();
      return result;
    }
    return InvalidArgument(fmt::format("{}; see rankscope-trainer --help", error.what()));
  }
  if (!slow_rank.empty()) {
    constexpr std::string_view kForm = "RANK:MILLISECONDS, e.g. 1:20";
    RS_ASSIGN_OR_RETURN(auto rank_and_ms, ParseRankAnd<double>("--slow-rank", slow_rank, kForm));
    if (!(rank_and_ms.second >= 0)) {
      return InvalidArgument(fmt::format("--slow-rank {}: expected {}", Printable(slow_rank), kForm));
    }
    std::tie(o.slow_rank, o.slow_rank_ms) = rank_and_ms;
  }
  if (!hang_rank.empty()) {
    RS_ASSIGN_OR_RETURN(std::tie(o.hang_rank, o.hang_step),
                        ParseRankAnd<int64_t>("--hang-rank", hang_rank, "RANK:STEP, e.g. 1:5"));
  }
  if (!mismatch_rank.empty()) {
    RS_ASSIGN_OR_RETURN(std::tie(o.mismatch_rank, o.mismatch_step),
                        ParseRankAnd<int64_t>("--mismatch-rank", mismatch_rank, "RANK:STEP, e.g. 1:5"));
  }
  if (o.parallel != Parallelism::kPipeline) {
    for (const CLI::Option* option : {stages, micro_batches, schedule_option, stage_layers}) {
      if (option->count() > 0) {
        return InvalidArgument(fmt::format("{} needs --parallel pipeline", option->get_name()));
      }
    }
  }
  RS_RETURN_IF_ERROR(Validate(o));
  return result;
}

const char* ParallelismName(Parallelism parallel) {
  switch (parallel) {
    case Parallelism::kDdp: return "ddp";
    case Parallelism::kFsdp: return "fsdp";
    case Parallelism::kPipeline: return "pipeline";
  }
  return "?";
}

const char* ScheduleName(PipelineSchedule schedule) {
  return schedule == PipelineSchedule::kGPipe ? "gpipe" : "1f1b";
}

const char* BackendName(Backend backend) {
  switch (backend) {
    case Backend::kAuto: return "auto";
    case Backend::kNccl: return "nccl";
    case Backend::kGloo: return "gloo";
  }
  return "?";
}

const char* PrecisionName(Precision precision) {
  return precision == Precision::kBf16 ? "bf16" : "fp32";
}

const char* ActivationName(kernels::Activation activation) {
  switch (activation) {
    case kernels::Activation::kNone: return "none";
    case kernels::Activation::kRelu: return "relu";
    case kernels::Activation::kGelu: return "gelu";
  }
  return "?";
}

const char* OptimizerName(OptimizerKind kind) { return kind == OptimizerKind::kAdamW ? "adamw" : "sgd"; }

}  // namespace rankscope::trainer
