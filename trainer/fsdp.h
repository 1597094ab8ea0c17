// Fully sharded data parallel, as PyTorch's FSDP (FULL_SHARD) with one unit per layer: each
// layer's parameters (weight then bias) are padded to a multiple of the world size N and
// sharded, rank r keeping elements [r·s, (r+1)·s) of every layer (s = padded / N), and so
// are its gradients and its optimizer state. A layer's parameters are all-gathered into a
// full buffer before its forward and again before its backward; after its backward its
// gradients are reduce-scattered back to the shards. With overlap, the next layer's
// all-gather (forward: l+1, backward: l-1) starts before this layer's compute (prefetch).
// Full buffers exist for two layers at a time (the one computing and the one prefetched).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "base/status.h"
#include "trainer/collectives.h"
#include "trainer/device.h"
#include "trainer/model.h"

namespace rankscope::trainer {

struct FsdpOptions {
  bool overlap = true;  // false: each all-gather starts when its layer needs it
};

class FsdpEngine {
 public:
  // `model` has kBound storage; every rank starts from Mlp::InitialParameters(shape, seed).
  static Result<std::unique_ptr<FsdpEngine>> Create(ComputeDevice& device, Collectives& collectives, Mlp& model,
                                                    uint64_t seed, const FsdpOptions& options);
  FsdpEngine(const FsdpEngine&) = delete;
  FsdpEngine& operator=(const FsdpEngine&) = delete;

  // For Mlp::Forward and Mlp::Backward (which must not accumulate: the engine does).
  const LayerHooks& hooks() const { return hooks_; }
  // Before each micro-step's backward pass: the first of a step replaces the shards'
  // gradients, later ones add to them.
  void BeginBackward(bool first_micro_step) { first_micro_step_ = first_micro_step; }
  // After the backward pass: every reduce-scatter done and in the shards, averaged.
  Status FinishBackward();

  // This rank's shards of every layer, concatenated: what the optimizer steps.
  float* shard_params() { return shard_params_; }
  float* shard_grads() { return shard_grads_; }
  size_t shard_count() const { return shard_count_; }
  // Scales the shards' gradients so that their global norm (over every rank's shards) is at
  // most max_norm, as torch's FSDP clip_grad_norm_ does; returns the norm before.
  Result<double> ClipGradientNorm(double max_norm);
  // Every layer's full parameters, flat in the model's layout (for checkpoints and tests):
  // all-gathered, so every rank must call it.
  Result<std::vector<float>> GatherParameters();

 private:
  struct Layer {
    size_t count = 0;         // its parameters
    size_t shard = 0;         // padded / N
    size_t shard_offset = 0;  // into the shard buffers
  };
  // A reduce-scatter started and not yet added to its layer's shard.
  struct PendingScatter {
    int layer = 0;
    Collectives::Ticket ticket = 0;
    bool first_micro_step = true;  // of its micro-step: replaces the shard's gradients
  };

  FsdpEngine(ComputeDevice& device, Collectives& collectives, Mlp& model, const FsdpOptions& options)
      : device_(&device), collectives_(&collectives), model_(&model), options_(options) {}
  int slot(int layer) const { return layer % 2; }
  Status StartGather(int layer);
  Status WaitGather(int layer);
  Status BeforeForward(int layer);
  Status BeforeBackward(int layer);
  Status AfterBackward(int layer);
  // Waits for the pending reduce-scatter in `slot`, if any, and adds it to its shard.
  Status Drain(int slot);

  ComputeDevice* device_;
  Collectives* collectives_;
  Mlp* model_;
  FsdpOptions options_;
  LayerHooks hooks_;
  std::vector<Layer> layers_;
  size_t shard_count_ = 0;
  size_t max_padded_ = 0;
  float* shard_params_ = nullptr;
  float* shard_grads_ = nullptr;
  float* gathered_[2] = {nullptr, nullptr};  // full parameters of the layers in the two slots
  float* full_grads_[2] = {nullptr, nullptr};
  std::vector<std::optional<Collectives::Ticket>> gather_ticket_;  // by layer, this pass
  std::optional<PendingScatter> pending_[2];
  bool first_micro_step_ = true;
  float* norm_ = nullptr;  // one float: the squared norm, all-reduced
};

}  // namespace rankscope::trainer
