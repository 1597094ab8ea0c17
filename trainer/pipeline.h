// Pipeline parallelism, as GPipe and PipeDream-Flush / Megatron's 1F1B: the model's layers
// split into S stages of consecutive layers, one per rank of a pipeline; each step's batch
// split into M micro-batches that flow forward through the stages (activations sent
// point to point to the next stage) and back (gradients of those activations sent to the
// previous one). With world = S · D, D pipelines (replicas) train data parallel: rank r is
// stage r % S of replica r / S, and each stage's gradients are all-reduced over its D
// replicas (DDP buckets, during the last micro-batch's backward pass).
//
// A stage that waits for its neighbour idles: the pipeline bubble. With equal stages and
// no communication time, each stage is idle (S − 1)/(M + S − 1) of the step, for both
// schedules; 1F1B keeps at most S − s micro-batches' activations on stage s, GPipe all M.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "trainer/collectives.h"
#include "trainer/ddp.h"
#include "trainer/device.h"
#include "trainer/model.h"
#include "trainer/options.h"

namespace rankscope::trainer {

// One pass of one micro-batch on a stage.
struct PipelinePass {
  bool forward = true;
  int micro_batch = 0;
  bool operator==(const PipelinePass&) const = default;
};

// The order in which stage `stage` of `stages` runs its passes of `micro_batches`
// micro-batches. 1F1B: min(S − s − 1, M) forwards, then one forward and one backward
// alternating, then the remaining backwards; GPipe: every forward, then every backward.
std::vector<PipelinePass> StageSchedule(PipelineSchedule schedule, int stages, int stage, int micro_batches);

// Contiguous stages of the layers whose heaviest stage (by `work`) is as light as it can
// be; the result has stages + 1 entries, the first layer of each stage and then the layer
// count. Needs 1 ≤ stages ≤ work.size().
std::vector<int> BalanceStages(const std::vector<int64_t>& work, int stages);

struct PipelineOptions {
  int stages = 2;
  int micro_batches = 4;
  PipelineSchedule schedule = PipelineSchedule::kOneForwardOneBackward;
  // Layers per stage, e.g. {1, 4}; empty: BalanceStages by Mlp::LayerWork.
  std::vector<int> stage_layers;
};

// Where one rank sits: its stage, its replica, its neighbours and its layers.
struct PipelineLayout {
  int stages = 1;
  int stage = 0;
  int replicas = 1;
  int replica = 0;
  int micro_batches = 1;
  PipelineSchedule schedule = PipelineSchedule::kOneForwardOneBackward;
  std::vector<int> boundaries;  // stages + 1 entries: each stage's first layer, then the count
  int previous_rank = -1;       // world ranks of the neighbouring stages; -1 at the ends
  int next_rank = -1;
  std::vector<int> replica_ranks;  // the world ranks holding this stage, ascending
  bool first() const { return stage == 0; }
  bool last() const { return stage + 1 == stages; }
};

// Errors name the option: a world size the stages do not divide, more stages than layers,
// --stage-layers that do not add up to the model's layers.
Result<PipelineLayout> LayOutPipeline(const ModelShape& shape, int world_size, int rank,
                                      const PipelineOptions& options);

class PipelineEngine {
 public:
  // `pipeline` connects the whole world (its ranks are world ranks: point to point between
  // neighbouring stages, and the gradient norm); `replicas` the ranks holding this stage
  // (null with one replica). Every stage starts from its layers of
  // Mlp::InitialParameters(shape, seed).
  static Result<std::unique_ptr<PipelineEngine>> Create(ComputeDevice& device, Collectives& pipeline,
                                                        Collectives* replicas, const ModelShape& shape, int batch,
                                                        uint64_t seed, const PipelineLayout& layout,
                                                        const DdpOptions& ddp);
  PipelineEngine(const PipelineEngine&) = delete;
  PipelineEngine& operator=(const PipelineEngine&) = delete;

  // Puts micro-batch k's rows (batch × features, and their labels) into host buffers.
  using FillMicroBatch = std::function<void(int micro_batch, float* x, int32_t* labels)>;
  // One step: every micro-batch through this stage in the schedule's order, the gradients
  // (of the mean loss over the step's micro-batches) summed in the model and, with
  // replicas, averaged over them. `grad_ready` runs as each parameter's gradient is final
  // for the step (in the last micro-batch's backward pass), before the replicas' hook.
  Status RunStep(const FillMicroBatch& fill, const std::function<Status(int)>& grad_ready);
  // Scales the stage's gradients so that the whole model's gradient norm is at most
  // max_norm; every rank must call it. Returns the norm before.
  Result<double> ClipGradientNorm(double max_norm);

  Mlp& model() { return *model_; }
  const PipelineLayout& layout() const { return layout_; }
  // Micro-batches whose activations a stage holds at most (its activation sets).
  int in_flight() const { return in_flight_; }
  // Broadcasts replica 0's parameters to the other replicas (as DDP's constructor).
  Status BroadcastParameters();

 private:
  PipelineEngine(ComputeDevice& device, Collectives& pipeline, PipelineLayout layout)
      : device_(&device), pipeline_(&pipeline), layout_(std::move(layout)) {}
  int set(int micro_batch) const { return micro_batch % in_flight_; }

  ComputeDevice* device_;
  Collectives* pipeline_;
  PipelineLayout layout_;
  int batch_ = 0;
  int in_flight_ = 1;
  std::optional<Mlp> model_;
  std::optional<DdpEngine> ddp_;
  std::vector<float> host_x_;          // every micro-batch's rows, filled at the step's start
  std::vector<int32_t> host_labels_;
  std::vector<float*> inputs_;         // per activation set: the data (stage 0) or the received activation
  std::vector<int32_t*> labels_;       // per activation set (last stage)
  float* output_gradient_ = nullptr;   // received from the next stage (all but the last)
  float* norm_ = nullptr;
};

}  // namespace rankscope::trainer
