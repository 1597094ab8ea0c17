#include "trainer/training_loop.h"

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "trainer/annotations.h"
#include "trainer/checkpoint.h"
#include "trainer/collectives.h"
#include "trainer/ddp.h"
#include "trainer/fsdp.h"
#include "trainer/device.h"
#include "trainer/model.h"
#include "trainer/optimizer.h"
#include "trainer/pipeline.h"
#include "trainer/synthetic_data.h"

namespace rankscope::trainer {
namespace {

using Clock = std::chrono::steady_clock;

struct Runtime {
  Backend backend = Backend::kGloo;
  std::unique_ptr<ComputeDevice> device;
};

Result<Runtime> ChooseRuntime(const TrainerOptions& options, const World& world) {
  Runtime runtime;
  runtime.backend = options.backend;
  if (options.backend != Backend::kGloo) {
    const GpuAvailability gpu = ProbeGpu();
    if (options.backend == Backend::kAuto) {
      runtime.backend = gpu.usable ? Backend::kNccl : Backend::kGloo;
    } else if (!gpu.usable) {
      return Unavailable(fmt::format("--backend nccl needs a GPU: {}", gpu.reason));
    }
  }
  if (runtime.backend == Backend::kGloo) {
    if (options.precision == Precision::kBf16) {
      return InvalidArgument("--precision bf16 needs a GPU (the CPU kernels are fp32)");
    }
    const int threads = options.threads > 0 ? options.threads : kernels::DefaultThreadCount(world.local_world_size);
    runtime.device = MakeCpuDevice(threads);
  } else {
    if (options.link_gbps > 0) {
      return InvalidArgument("--link-gbps simulates a link for the Gloo backend, and this run uses NCCL "
                             "(add --backend gloo)");
    }
    RS_ASSIGN_OR_RETURN(runtime.device, MakeCudaDevice(world.local_rank, options.precision == Precision::kBf16));
  }
  return runtime;
}

Result<CheckpointContents> Snapshot(ComputeDevice& device, const TrainerOptions& options, const World& world,
                                    Mlp& model, const Optimizer& optimizer, int64_t steps_done) {
  CheckpointContents c;
  c.features = options.features;
  c.width = options.width;
  c.depth = options.depth;
  c.classes = options.classes;
  c.activation = ActivationName(options.activation);
  c.optimizer = OptimizerName(options.optimizer);
  c.seed = options.seed;
  c.world_size = world.world_size;
  c.batch = options.batch;
  c.accum = options.accum;
  c.steps_done = steps_done;
  c.optimizer_steps = optimizer.steps_taken();
  c.parameters.resize(model.parameter_count());
  RS_RETURN_IF_ERROR(device.CopyToHost(model.params(), c.parameters.data(), c.parameters.size()));
  for (float* state : optimizer.state()) {
    c.optimizer_state.emplace_back(optimizer.parameter_count());
    RS_RETURN_IF_ERROR(device.CopyToHost(state, c.optimizer_state.back().data(), optimizer.parameter_count()));
  }
  return c;
}

Status Restore(ComputeDevice& device, const CheckpointContents& c, Mlp& model, Optimizer& optimizer) {
  if (c.parameters.size() != model.parameter_count() || c.optimizer_state.size() != optimizer.state().size()) {
    return InvalidArgument("the checkpoint's parameter or optimizer-state sizes do not match this model");
  }
  RS_RETURN_IF_ERROR(device.CopyToDevice(c.parameters.data(), model.params(), c.parameters.size()));
  for (size_t i = 0; i < c.optimizer_state.size(); ++i) {
    if (c.optimizer_state[i].size() != optimizer.parameter_count()) {
      return InvalidArgument("the checkpoint's optimizer state does not match this model");
    }
    RS_RETURN_IF_ERROR(device.CopyToDevice(c.optimizer_state[i].data(), optimizer.state()[i], c.optimizer_state[i].size()));
  }
  optimizer.set_steps_taken(c.optimizer_steps);
  return Status::Ok();
}

// Where output will be written must exist and be writable before training starts, not be
// found missing after the last step.
Status CheckOutputPath(const std::string& path, const char* option) {
  if (path.empty()) return Status::Ok();
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  const std::string directory = parent.empty() ? "." : parent.string();
  if (::access(directory.c_str(), W_OK | X_OK) != 0) {
    return InvalidArgument(fmt::format("{} {}: cannot write in {}: {}", option, path, directory, std::strerror(errno)));
  }
  return Status::Ok();
}

int64_t ThreadCpuNs() {
  timespec now{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

// Busy until this thread has used `ms` of CPU time (--extra-step-work-ms).
void SpinCpuTime(double ms) {
  const int64_t until = ThreadCpuNs() + static_cast<int64_t>(ms * 1e6);
  while (ThreadCpuNs() < until) {
  }
}

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t middle = values.size() / 2;
  return values.size() % 2 == 1 ? values[middle] : 0.5 * (values[middle - 1] + values[middle]);
}

Status WriteMetrics(const std::string& pattern, const TrainingSummary& summary, const TrainerOptions& options) {
  std::string path = pattern;
  if (size_t at = path.find("{rank}"); at != std::string::npos) path.replace(at, 6, std::to_string(summary.rank));
  nlohmann::json steps = nlohmann::json::array();
  for (const StepRecord& s : summary.steps) {
    // A pipeline stage without the loss writes null for it.
    const nlohmann::json loss = s.has_loss ? nlohmann::json(s.loss) : nlohmann::json(nullptr);
    const nlohmann::json accuracy = s.has_loss ? nlohmann::json(s.accuracy) : nlohmann::json(nullptr);
    steps.push_back({{"step", s.step}, {"loss", loss}, {"accuracy", accuracy}, {"lr", s.lr},
                     {"time_ms", s.seconds * 1e3}});
  }
  nlohmann::json document = {
      {"rank", summary.rank},
      {"world_size", summary.world_size},
      {"backend", summary.backend},
      {"device", summary.device},
      {"batch", options.batch},
      {"accum", options.accum},
      {"parameters", summary.parameter_count},
      {"bucket_bytes", summary.bucket_bytes},
      {"overlap", options.overlap},
      {"steps", steps},
      {"step_time_median_ms", summary.step_time_median_s * 1e3},
      {"samples_per_second", summary.samples_per_second},
      {"parallel", ParallelismName(options.parallel)},
  };
  if (summary.stages > 1 || options.parallel == Parallelism::kPipeline) {
    document["stage"] = summary.stage;
    document["stages"] = summary.stages;
    document["micro_batches"] = options.micro_batches;
    document["schedule"] = ScheduleName(options.schedule);
  }
  std::ofstream out(path, std::ios::trunc);
  out << document.dump(2) << '\n';
  out.close();
  if (!out) return IoError(fmt::format("cannot write --metrics-out {}", path));
  return Status::Ok();
}

// --hang-rank and --mismatch-rank name a rank of this run and a step it runs; the world
// size and the resumed step are known only here.
Status CheckPlantedFailure(const char* option, int rank, int64_t step, const World& world, int64_t first_step) {
  if (rank < 0) return Status::Ok();
  if (rank >= world.world_size) {
    return InvalidArgument(fmt::format("{} {}:{}: there is no rank {} in a run of {} rank(s)", option, rank, step,
                                       rank, world.world_size));
  }
  if (step < first_step) {
    return InvalidArgument(fmt::format("{} {}:{}: this run resumes at step {}, after step {}", option, rank, step,
                                       first_step, step));
  }
  return Status::Ok();
}

// --hang-rank: blocks for good, as a deadlocked rank does. Only sleeps and no signal
// handlers of its own, so SIGTERM, SIGINT and SIGKILL end it as they end any process.
[[noreturn]] void HangForever(int rank, int64_t step) {
  std::fprintf(stderr, "rankscope-trainer: rank %d hangs at step %lld (--hang-rank)\n", rank,
               static_cast<long long>(step));
  std::fflush(nullptr);
  while (true) std::this_thread::sleep_for(std::chrono::hours(1));
}

}  // namespace

Result<TrainingSummary> RunTraining(const TrainerOptions& options, const World& world, std::FILE* log) {
  InitAnnotations();
  NameThisThread("compute");
  const bool chatty = !options.quiet && world.rank == 0;
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(options.timeout_s * 1000));

  RS_RETURN_IF_ERROR(CheckPlantedFailure("--hang-rank", options.hang_rank, options.hang_step, world, 0));
  RS_RETURN_IF_ERROR(CheckPlantedFailure("--mismatch-rank", options.mismatch_rank, options.mismatch_step, world, 0));
  if (world.rank == 0) RS_RETURN_IF_ERROR(CheckOutputPath(options.checkpoint, "--checkpoint"));
  RS_RETURN_IF_ERROR(CheckOutputPath(options.metrics_out, "--metrics-out"));
  RS_ASSIGN_OR_RETURN(Runtime runtime, ChooseRuntime(options, world));
  ComputeDevice& device = *runtime.device;

  // The pipeline's layout needs only the world size: a bad --stages fails before the rendezvous.
  const ModelShape shape{options.features, options.width, options.depth, options.classes, options.activation};
  const bool sharded = options.parallel == Parallelism::kFsdp;
  const bool pipelined = options.parallel == Parallelism::kPipeline;
  std::optional<PipelineLayout> layout;
  if (pipelined) {
    PipelineOptions pipeline_options;
    pipeline_options.stages = options.stages > 0 ? options.stages : world.world_size;
    pipeline_options.micro_batches = options.micro_batches;
    pipeline_options.schedule = options.schedule;
    pipeline_options.stage_layers = options.stage_layers;
    RS_ASSIGN_OR_RETURN(layout, LayOutPipeline(shape, world.world_size, world.rank, pipeline_options));
  }
  RendezvousSpec spec;
  if (!options.rendezvous.empty()) {
    RS_ASSIGN_OR_RETURN(spec, ParseRendezvous(options.rendezvous));
  } else {
    RS_ASSIGN_OR_RETURN(spec, DefaultRendezvous(ProcessEnv()));
  }
  RS_ASSIGN_OR_RETURN(std::unique_ptr<Rendezvous> rendezvous, Rendezvous::Connect(spec, world, timeout));
  // Every rank makes its groups in the same order: the world's, then (a pipeline with
  // replicas) its stage's replicas'.
  const auto make_group = [&](std::vector<int> members) -> Result<std::unique_ptr<Collectives>> {
    if (runtime.backend == Backend::kNccl) {
      return MakeNcclCollectives(*rendezvous, device, world.local_rank, timeout, std::move(members));
    }
    return MakeGlooCollectives(*rendezvous, timeout, std::move(members), SimulatedLink{options.link_gbps});
  };
  RS_ASSIGN_OR_RETURN(std::unique_ptr<Collectives> collectives, make_group({}));
  std::unique_ptr<Collectives> replica_collectives;
  if (layout && layout->replicas > 1) {
    RS_ASSIGN_OR_RETURN(replica_collectives, make_group(layout->replica_ranks));
  }

  // One of the three engines: DDP keeps a replica of the model, FSDP binds its layers to
  // gathered shards and the optimizer steps the shards, a pipeline stage holds its layers.
  DdpOptions ddp_options;
  ddp_options.bucket_cap_bytes = static_cast<size_t>(options.bucket_mb * 1024 * 1024);
  ddp_options.first_bucket_cap_bytes = static_cast<size_t>(options.first_bucket_mb * 1024 * 1024);
  ddp_options.overlap = options.overlap;
  std::optional<Mlp> whole_model;
  std::optional<DdpEngine> ddp;
  std::unique_ptr<FsdpEngine> fsdp;
  std::unique_ptr<PipelineEngine> pipeline;
  if (pipelined) {
    RS_ASSIGN_OR_RETURN(pipeline, PipelineEngine::Create(device, *collectives, replica_collectives.get(), shape,
                                                         options.batch, options.seed, *layout, ddp_options));
  } else {
    RS_ASSIGN_OR_RETURN(Mlp created, Mlp::Create(device, shape, options.batch, options.seed,
                                                 sharded ? ParameterStorage::kBound : ParameterStorage::kOwned));
    whole_model.emplace(std::move(created));
  }
  Mlp& model = pipelined ? pipeline->model() : *whole_model;
  if (sharded) {
    RS_ASSIGN_OR_RETURN(fsdp, FsdpEngine::Create(device, *collectives, model, options.seed, FsdpOptions{options.overlap}));
  } else if (!pipelined) {
    RS_ASSIGN_OR_RETURN(DdpEngine engine, DdpEngine::Create(device, *collectives, model, ddp_options));
    ddp.emplace(std::move(engine));
  }
  RS_ASSIGN_OR_RETURN(Optimizer optimizer,
                      Optimizer::Create(device, options, sharded ? fsdp->shard_count() : model.parameter_count()));
  const LayerHooks no_layer_hooks;
  const LayerHooks& layer_hooks = sharded ? fsdp->hooks() : no_layer_hooks;

  int64_t first_step = 0;
  if (!options.resume.empty()) {
    RS_ASSIGN_OR_RETURN(CheckpointContents saved, LoadCheckpoint(options.resume));
    RS_RETURN_IF_ERROR(CheckResumable(saved, options));
    RS_RETURN_IF_ERROR(Restore(device, saved, model, optimizer));
    first_step = saved.steps_done;
    RS_RETURN_IF_ERROR(CheckPlantedFailure("--hang-rank", options.hang_rank, options.hang_step, world, first_step));
    RS_RETURN_IF_ERROR(
        CheckPlantedFailure("--mismatch-rank", options.mismatch_rank, options.mismatch_step, world, first_step));
    if (chatty) {
      std::fprintf(log, "resumed from %s at step %lld\n", options.resume.c_str(), static_cast<long long>(first_step));
      if (saved.seed != options.seed || saved.world_size != world.world_size || saved.batch != options.batch ||
          saved.accum != options.accum) {
        std::fprintf(log, "note: the checkpoint's workload (seed %llu, %d ranks, batch %d, accum %d) differs from "
                          "this run's; the data order will differ from an uninterrupted run\n",
                     static_cast<unsigned long long>(saved.seed), saved.world_size, saved.batch, saved.accum);
      }
    }
  }
  // Rank 0's parameters everywhere, as DDP's constructor does (a no-op change here, since
  // every rank initializes from the same seed, but it is part of the real protocol).
  // (FSDP's shards are each rank's slices of the same seeded values.)
  if (ddp) RS_RETURN_IF_ERROR(ddp->BroadcastParameters());
  if (pipeline) RS_RETURN_IF_ERROR(pipeline->BroadcastParameters());
  // A pipeline's samples per step and replica are batch · micro-batches.
  const int micro_steps = pipelined ? options.micro_batches : options.accum;
  const int replicas = layout ? layout->replicas : world.world_size;
  MarkWorkload({static_cast<uint64_t>(world.world_size), static_cast<uint64_t>(options.batch),
                static_cast<uint64_t>(options.accum), static_cast<uint64_t>(options.steps), model.parameter_count(),
                static_cast<uint64_t>(options.parallel), static_cast<uint64_t>(layout ? layout->stages : 1),
                static_cast<uint64_t>(pipelined ? options.micro_batches : 1)});

  TrainingSummary summary;
  summary.rank = world.rank;
  summary.world_size = world.world_size;
  summary.backend = BackendName(runtime.backend);
  summary.device = device.Describe();
  if (ddp) summary.bucket_bytes = ddp->BucketBytes();
  summary.parameter_count = model.parameter_count();
  if (layout) {
    summary.stage = layout->stage;
    summary.stages = layout->stages;
  }
  // The rank that holds the loss prints the progress: rank 0, or a pipeline's last stage.
  const bool reports = !options.quiet && world.rank == (layout ? layout->stages - 1 : 0);
  if (reports) {
    std::string arrangement;
    if (ddp) {
      arrangement = fmt::format("in {} bucket(s)", ddp->bucket_count());
    } else if (fsdp) {
      arrangement = fmt::format("sharded, {} per rank", fsdp->shard_count());
    } else {
      const size_t stage = static_cast<size_t>(layout->stage);
      arrangement = fmt::format("on stage {} of {} (layers {}-{}), {} replica(s), schedule {}, {} in flight at most",
                                layout->stage, layout->stages, layout->boundaries[stage],
                                layout->boundaries[stage + 1] - 1, layout->replicas, ScheduleName(layout->schedule),
                                pipeline->in_flight());
    }
    std::fprintf(log, "rankscope-trainer: %d rank(s), %s, backend %s on %s; %zu parameters %s; "
                      "batch %d x %d micro-step(s) per rank; overlap %s\n",
                 world.world_size, ParallelismName(options.parallel), summary.backend.c_str(), summary.device.c_str(),
                 model.parameter_count(), arrangement.c_str(), options.batch, micro_steps,
                 options.overlap ? "on" : "off");
    std::fflush(log);
  }

  SyntheticDataset dataset(options.seed, options.dataset_size, options.features, options.classes);
  // Data parallel over the replicas: every rank, or a pipeline's replicas (each stage of a
  // replica reads the same rows: the first its features, the last its labels).
  DistributedSampler sampler(options.dataset_size, replicas, layout ? layout->replica : world.rank, options.seed);
  BatchPlan plan(dataset, sampler, options.batch);
  std::vector<float> host_x(static_cast<size_t>(options.batch) * static_cast<size_t>(options.features));
  std::vector<int32_t> host_labels(static_cast<size_t>(options.batch));
  // The batch on the device; a pipeline keeps its own per micro-batch.
  float* x = nullptr;
  int32_t* labels = nullptr;
  if (!pipelined) {
    RS_ASSIGN_OR_RETURN(x, device.Allocate(host_x.size(), MemoryCategory::kData));
    RS_ASSIGN_OR_RETURN(labels, device.AllocateLabelsIn(host_labels.size(), MemoryCategory::kData));
  }
  // Set for the backward pass in which --hang-rank's rank stops: at its first gradient, so
  // inside "step" and "backward" and before the step's first collective is issued.
  int64_t hang_at_step = -1;
  const auto hook = [&ddp, &hang_at_step, &world](int parameter) {
    if (hang_at_step >= 0) HangForever(world.rank, hang_at_step);
    return ddp ? ddp->OnGradientReady(parameter) : Status::Ok();
  };
  const auto rank_context = [&](int64_t step) { return fmt::format("rank {}: step {}", world.rank, step); };

  for (int64_t step = first_step; step < options.steps; ++step) {
    if (step == options.fault_step && world.rank == options.fault_rank) {
      std::fprintf(stderr, "rankscope-trainer: rank %d: killing itself at step %lld (--fault-step)\n", world.rank,
                   static_cast<long long>(step));
      std::fflush(nullptr);
      ::raise(SIGKILL);
    }
    const Clock::time_point started = Clock::now();
    const double lr = LearningRate(options, replicas, step);
    {
      StepRange step_range(static_cast<uint64_t>(step), static_cast<uint64_t>(options.batch) * micro_steps);
      Status status;
      if (world.rank == options.slow_rank && options.slow_rank_ms > 0) {
        ScopedRange delay("injected_delay");
        if (options.slow_rank_busy) {
          const Clock::time_point until = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                             std::chrono::duration<double, std::milli>(options.slow_rank_ms));
          while (Clock::now() < until) {
          }
        } else {
          std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(options.slow_rank_ms));
        }
      }
      if (world.rank == options.mismatch_rank && step == options.mismatch_step) {
        std::fprintf(stderr, "rankscope-trainer: rank %d broadcasts where the others all-reduce at step %lld "
                             "(--mismatch-rank)\n", world.rank, static_cast<long long>(step));
        std::fflush(stderr);
        ddp->PlantMismatch();  // DDP only (options.cc refuses it with FSDP)
      }
      if (pipeline) {
        if (world.rank == options.hang_rank && step == options.hang_step) hang_at_step = step;
        status = pipeline->RunStep(
            [&](int micro, float* rows, int32_t* row_labels) { plan.Fill(step * micro_steps + micro, rows, row_labels); },
            hook);
      }
      for (int micro = 0; !pipeline && micro < options.accum && status.ok(); ++micro) {
        plan.Fill(step * options.accum + micro, host_x.data(), host_labels.data());
        status = device.CopyToDevice(host_x.data(), x, host_x.size());
        if (status.ok()) status = device.CopyLabelsToDevice(host_labels.data(), labels, host_labels.size());
        if (status.ok()) status = model.Forward(x, labels, layer_hooks);
        if (status.ok()) {
          const bool sync = micro + 1 == options.accum;
          if (ddp) ddp->BeginBackward(sync);
          if (fsdp) fsdp->BeginBackward(micro == 0);
          if (sync && world.rank == options.hang_rank && step == options.hang_step) hang_at_step = step;
          // FSDP accumulates in its shards; the model's gradients are per micro-step.
          status = model.Backward(x, labels, 1.0f / static_cast<float>(options.accum), !sharded && micro > 0, hook,
                                  layer_hooks);
        }
      }
      if (status.ok() && !pipeline) status = ddp ? ddp->FinishBackward() : fsdp->FinishBackward();
      if (status.ok()) {
        ScopedRange range("optimizer");
        if (options.clip_grad_norm > 0) {
          if (sharded) {
            status = fsdp->ClipGradientNorm(options.clip_grad_norm).status();
          } else if (pipeline) {
            status = pipeline->ClipGradientNorm(options.clip_grad_norm).status();
          } else {
            status = ClipGradientNorm(device, model.grads(), model.parameter_count(), options.clip_grad_norm).status();
          }
        }
        if (status.ok()) {
          status = sharded ? optimizer.Step(fsdp->shard_params(), fsdp->shard_grads(), lr)
                           : optimizer.Step(model.params(), model.grads(), lr);
        }
      }
      if (!status.ok()) return status.WithContext(rank_context(step));
      if (options.extra_step_delay_ms > 0) {
        std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(options.extra_step_delay_ms));
      }
      if (options.extra_step_work_ms > 0) SpinCpuTime(options.extra_step_work_ms);
      Result<LossStats> loss = device.TakeLoss();
      if (!loss.ok()) return loss.status().WithContext(rank_context(step));
      StepRecord record;
      record.step = step;
      record.has_loss = model.computes_loss();
      record.loss = loss->rows > 0 ? loss->loss_sum / static_cast<double>(loss->rows) : 0;
      record.accuracy = loss->rows > 0 ? static_cast<double>(loss->correct) / static_cast<double>(loss->rows) : 0;
      record.lr = lr;
      record.seconds = std::chrono::duration<double>(Clock::now() - started).count();
      summary.steps.push_back(record);
      if (record.has_loss && !std::isfinite(record.loss)) {
        return InvalidArgument(fmt::format("{}: the loss is {} (diverged; lower --lr)", rank_context(step), record.loss));
      }
    }
    const int64_t done = step + 1;
    if (reports && options.log_every > 0 && (done % options.log_every == 0 || done == options.steps)) {
      const StepRecord& r = summary.steps.back();
      std::fprintf(log, "step %lld/%d  loss %.4f  accuracy %.3f  lr %.4g  %.1f ms\n", static_cast<long long>(done),
                   options.steps, r.loss, r.accuracy, r.lr, r.seconds * 1e3);
      std::fflush(log);
    }
    const bool save_now = options.checkpoint_every > 0 && done % options.checkpoint_every == 0;
    if (world.rank == 0 && !options.checkpoint.empty() && (save_now || done == options.steps)) {
      RS_ASSIGN_OR_RETURN(CheckpointContents snapshot, Snapshot(device, options, world, model, optimizer, done));
      RS_RETURN_IF_ERROR(SaveCheckpoint(options.checkpoint, snapshot));
    }
  }

  std::vector<double> times;
  for (size_t i = summary.steps.size() > 1 ? 1 : 0; i < summary.steps.size(); ++i) {
    times.push_back(summary.steps[i].seconds);
  }
  summary.step_time_median_s = Median(times);
  if (summary.step_time_median_s > 0) {
    summary.samples_per_second =
        static_cast<double>(options.batch) * micro_steps / summary.step_time_median_s;
  }
  if (!options.metrics_out.empty()) RS_RETURN_IF_ERROR(WriteMetrics(options.metrics_out, summary, options));
  return summary;
}

std::string FinalLine(const TrainingSummary& s) {
  std::string losses;
  if (!s.steps.empty() && s.steps.front().has_loss) {
    losses = fmt::format("; loss {:.4f} -> {:.4f}", s.steps.front().loss, s.steps.back().loss);
  } else if (!s.steps.empty()) {
    losses = fmt::format("; pipeline stage {} of {} (the loss is on the last)", s.stage, s.stages);
  }
  return fmt::format("rank {}/{}: {:.1f} samples/s, step time median {:.2f} ms over {} step(s){}", s.rank,
                     s.world_size, s.samples_per_second, s.step_time_median_s * 1e3, s.steps.size(), losses);
}

}  // namespace rankscope::trainer
