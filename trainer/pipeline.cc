#include "trainer/pipeline.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <limits>
#include <numeric>

#include "trainer/annotations.h"
#include "trainer/optimizer.h"

namespace rankscope::trainer {

std::vector<PipelinePass> StageSchedule(PipelineSchedule schedule, int stages, int stage, int micro_batches) {
  std::vector<PipelinePass> passes;
  if (schedule == PipelineSchedule::kGPipe) {
    for (int k = 0; k < micro_batches; ++k) passes.push_back({true, k});
    for (int k = 0; k < micro_batches; ++k) passes.push_back({false, k});
    return passes;
  }
  const int warmup = std::min(stages - stage - 1, micro_batches);
  for (int k = 0; k < warmup; ++k) passes.push_back({true, k});
  for (int k = 0; k + warmup < micro_batches; ++k) {
    passes.push_back({true, k + warmup});
    passes.push_back({false, k});
  }
  for (int k = micro_batches - warmup; k < micro_batches; ++k) passes.push_back({false, k});
  return passes;
}

std::vector<int> BalanceStages(const std::vector<int64_t>& work, int stages) {
  const int layers = static_cast<int>(work.size());
  std::vector<int64_t> prefix(work.size() + 1, 0);
  for (size_t i = 0; i < work.size(); ++i) prefix[i + 1] = prefix[i] + work[i];
  // heaviest[s][l]: the lightest possible heaviest stage when the first l layers make s stages.
  constexpr int64_t kNone = std::numeric_limits<int64_t>::max();
  std::vector<std::vector<int64_t>> heaviest(static_cast<size_t>(stages) + 1,
                                             std::vector<int64_t>(work.size() + 1, kNone));
  std::vector<std::vector<int>> cut(heaviest.size(), std::vector<int>(work.size() + 1, 0));
  heaviest[0][0] = 0;
  for (int s = 1; s <= stages; ++s) {
    for (int l = s; l <= layers; ++l) {
      for (int first = s - 1; first < l; ++first) {
        const int64_t before = heaviest[static_cast<size_t>(s) - 1][static_cast<size_t>(first)];
        if (before == kNone) continue;
        const int64_t here = std::max(before, prefix[static_cast<size_t>(l)] - prefix[static_cast<size_t>(first)]);
        // Ties go to the later cut: the last stage, which also computes the loss, gets fewer
        // layers.
        if (here <= heaviest[static_cast<size_t>(s)][static_cast<size_t>(l)]) {
          heaviest[static_cast<size_t>(s)][static_cast<size_t>(l)] = here;
          cut[static_cast<size_t>(s)][static_cast<size_t>(l)] = first;
        }
      }
    }
  }
  std::vector<int> boundaries(static_cast<size_t>(stages) + 1);
  boundaries[static_cast<size_t>(stages)] = layers;
  for (int s = stages; s > 0; --s) {
    boundaries[static_cast<size_t>(s) - 1] = cut[static_cast<size_t>(s)][static_cast<size_t>(boundaries[static_cast<size_t>(s)])];
  }
  return boundaries;
}

Result<PipelineLayout> LayOutPipeline(const ModelShape& shape, int world_size, int rank,
                                      const PipelineOptions& options) {
  const int layers = Mlp::LayerCount(shape);
  const int stages = options.stages;
  if (stages < 1 || world_size % stages != 0) {
    return InvalidArgument(fmt::format("--stages {}: must divide the world size {} (data parallel over the rest)",
                                       stages, world_size));
  }
  if (stages > layers) {
    return InvalidArgument(fmt::format("--stages {}: the model has only {} layers (--depth {} + 1)", stages, layers,
                                       shape.depth));
  }
  if (options.micro_batches < 1) {
    return InvalidArgument(fmt::format("--micro-batches {}: must be at least 1", options.micro_batches));
  }
  PipelineLayout layout;
  layout.stages = stages;
  layout.stage = rank % stages;
  layout.replicas = world_size / stages;
  layout.replica = rank / stages;
  layout.micro_batches = options.micro_batches;
  layout.schedule = options.schedule;
  if (options.stage_layers.empty()) {
    layout.boundaries = BalanceStages(Mlp::LayerWork(shape), stages);
  } else {
    const int sum = std::accumulate(options.stage_layers.begin(), options.stage_layers.end(), 0);
    const bool positive = std::all_of(options.stage_layers.begin(), options.stage_layers.end(), [](int n) { return n > 0; });
    if (static_cast<int>(options.stage_layers.size()) != stages || sum != layers || !positive) {
      return InvalidArgument(fmt::format("--stage-layers {}: needs {} positive counts (one per stage) adding up to the "
                                         "model's {} layers", fmt::join(options.stage_layers, ","), stages, layers));
    }
    layout.boundaries.push_back(0);
    for (int n : options.stage_layers) layout.boundaries.push_back(layout.boundaries.back() + n);
  }
  if (!layout.first()) layout.previous_rank = rank - 1;
  if (!layout.last()) layout.next_rank = rank + 1;
  for (int d = 0; d < layout.replicas; ++d) layout.replica_ranks.push_back(layout.stage + d * stages);
  return layout;
}

Result<std::unique_ptr<PipelineEngine>> PipelineEngine::Create(ComputeDevice& device, Collectives& pipeline,
                                                               Collectives* replicas, const ModelShape& shape,
                                                               int batch, uint64_t seed, const PipelineLayout& layout,
                                                               const DdpOptions& ddp) {
  std::unique_ptr<PipelineEngine> engine(new PipelineEngine(device, pipeline, layout));
  engine->batch_ = batch;
  const std::vector<PipelinePass> passes =
      StageSchedule(layout.schedule, layout.stages, layout.stage, layout.micro_batches);
  // The most micro-batches between their forward and their backward at any time.
  int open = 0;
  for (const PipelinePass& pass : passes) {
    open += pass.forward ? 1 : -1;
    engine->in_flight_ = std::max(engine->in_flight_, open);
  }
  const ModelPart part{layout.boundaries[static_cast<size_t>(layout.stage)],
                       layout.boundaries[static_cast<size_t>(layout.stage) + 1], engine->in_flight_};
  RS_ASSIGN_OR_RETURN(Mlp model, Mlp::Create(device, shape, batch, seed, ParameterStorage::kOwned, part));
  engine->model_.emplace(std::move(model));
  if (replicas != nullptr) {
    RS_ASSIGN_OR_RETURN(DdpEngine replicated, DdpEngine::Create(device, *replicas, *engine->model_, ddp));
    engine->ddp_.emplace(std::move(replicated));
  }
  const auto rows = static_cast<size_t>(batch);
  const auto micro_batches = static_cast<size_t>(layout.micro_batches);
  engine->host_x_.resize(micro_batches * rows * static_cast<size_t>(shape.features));
  engine->host_labels_.resize(micro_batches * rows);
  for (int s = 0; s < engine->in_flight_; ++s) {
    RS_ASSIGN_OR_RETURN(float* input,
                        device.Allocate(rows * static_cast<size_t>(engine->model_->input_width()), MemoryCategory::kActivations));
    engine->inputs_.push_back(input);
    if (layout.last()) {
      RS_ASSIGN_OR_RETURN(int32_t* labels, device.AllocateLabelsIn(rows, MemoryCategory::kData));
      engine->labels_.push_back(labels);
    }
  }
  if (!layout.last()) {
    RS_ASSIGN_OR_RETURN(engine->output_gradient_,
                        device.Allocate(rows * static_cast<size_t>(engine->model_->output_width()), MemoryCategory::kCommunication));
  }
  RS_ASSIGN_OR_RETURN(engine->norm_, device.Allocate(1, MemoryCategory::kCommunication));
  return engine;
}

Status PipelineEngine::BroadcastParameters() { return ddp_ ? ddp_->BroadcastParameters() : Status::Ok(); }

Status PipelineEngine::RunStep(const FillMicroBatch& fill, const std::function<Status(int)>& grad_ready) {
  Mlp& model = *model_;
  const int micro_batches = layout_.micro_batches;
  const auto rows = static_cast<size_t>(batch_);
  const size_t input_count = rows * static_cast<size_t>(model.input_width());
  const size_t output_count = rows * static_cast<size_t>(model.output_width());
  // What the previous pass left to send; sent together with the next pass's receive, so
  // that neighbouring stages sending each other at once do not deadlock.
  Collectives::Outgoing pending;
  bool last_backward = false;
  // Every micro-batch's rows first, as a data loader would have them ready: generating them
  // between passes would idle the pipeline for the data, not for the schedule.
  const size_t x_count = rows * static_cast<size_t>(model.shape().features);
  if (layout_.first() || layout_.last()) {
    for (int k = 0; k < micro_batches; ++k) {
      fill(k, host_x_.data() + static_cast<size_t>(k) * x_count, host_labels_.data() + static_cast<size_t>(k) * rows);
    }
  }
  const auto hook = [&](int parameter) -> Status {
    if (!last_backward) return Status::Ok();
    RS_RETURN_IF_ERROR(grad_ready(parameter));
    return ddp_ ? ddp_->OnGradientReady(parameter) : Status::Ok();
  };
  for (const PipelinePass& pass : StageSchedule(layout_.schedule, layout_.stages, layout_.stage, micro_batches)) {
    const int k = pass.micro_batch;
    const MicroBatchFields fields{static_cast<uint64_t>(layout_.stage), static_cast<uint64_t>(layout_.stages),
                                  static_cast<uint64_t>(k), static_cast<uint64_t>(micro_batches)};
    model.SelectActivations(set(k));
    float* input = inputs_[static_cast<size_t>(set(k))];
    Collectives::Incoming incoming;
    if (pass.forward) {
      if (layout_.first()) {
        RS_RETURN_IF_ERROR(device_->CopyToDevice(host_x_.data() + static_cast<size_t>(k) * x_count, input, x_count));
      }
      if (layout_.last()) {
        RS_RETURN_IF_ERROR(device_->CopyLabelsToDevice(host_labels_.data() + static_cast<size_t>(k) * rows,
                                                       labels_[static_cast<size_t>(set(k))], rows));
      }
      if (!layout_.first()) incoming = {input, input_count, layout_.previous_rank, k};
    } else if (!layout_.last()) {
      incoming = {output_gradient_, output_count, layout_.next_rank, k};
    }
    RS_RETURN_IF_ERROR(pipeline_->SendRecv(pending, incoming));
    pending = {};
    const int32_t* labels = layout_.last() ? labels_[static_cast<size_t>(set(k))] : nullptr;
    if (pass.forward) {
      RS_RETURN_IF_ERROR(model.Forward(input, labels, {}, &fields));
      if (!layout_.last()) pending = {model.output(), output_count, layout_.next_rank, k};
    } else {
      last_backward = k + 1 == micro_batches;
      if (ddp_) ddp_->BeginBackward(last_backward);
      RS_RETURN_IF_ERROR(model.Backward(input, labels, 1.0f / static_cast<float>(micro_batches), k > 0, hook, {},
                                        output_gradient_, &fields));
      if (!layout_.first()) pending = {model.input_gradient(), input_count, layout_.previous_rank, k};
    }
  }
  RS_RETURN_IF_ERROR(pipeline_->SendRecv(pending, {}));
  return ddp_ ? ddp_->FinishBackward() : Status::Ok();
}

Result<double> PipelineEngine::ClipGradientNorm(double max_norm) {
  return trainer::ClipGradientNorm(*device_, *pipeline_, norm_, model_->grads(), model_->parameter_count(), max_norm,
                                   layout_.replicas);
}

}  // namespace rankscope::trainer
