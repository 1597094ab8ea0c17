#include "trainer/fsdp.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "trainer/annotations.h"
#include "trainer/optimizer.h"

namespace rankscope::trainer {

Result<std::unique_ptr<FsdpEngine>> FsdpEngine::Create(ComputeDevice& device, Collectives& collectives, Mlp& model,
                                                       uint64_t seed, const FsdpOptions& options) {
  if (model.params() != nullptr) return InvalidArgument("fsdp: the model must have bound parameter storage");
  std::unique_ptr<FsdpEngine> engine(new FsdpEngine(device, collectives, model, options));
  const auto ranks = static_cast<size_t>(collectives.size());
  const auto rank = static_cast<size_t>(collectives.rank());
  for (int l = 0; l < model.layer_count(); ++l) {
    Layer layer;
    layer.count = model.LayerSpan(l).count;
    layer.shard = (layer.count + ranks - 1) / ranks;
    layer.shard_offset = engine->shard_count_;
    engine->shard_count_ += layer.shard;
    engine->max_padded_ = std::max(engine->max_padded_, layer.shard * ranks);
    engine->layers_.push_back(layer);
  }
  RS_ASSIGN_OR_RETURN(engine->shard_params_, device.Allocate(engine->shard_count_, MemoryCategory::kParameters));
  RS_ASSIGN_OR_RETURN(engine->shard_grads_, device.Allocate(engine->shard_count_, MemoryCategory::kGradients));
  for (int s = 0; s < 2; ++s) {
    // A gathered layer's parameters and its gradients before they are reduce-scattered.
    RS_ASSIGN_OR_RETURN(engine->gathered_[s], device.Allocate(engine->max_padded_, MemoryCategory::kParameters));
    RS_ASSIGN_OR_RETURN(engine->full_grads_[s], device.Allocate(engine->max_padded_, MemoryCategory::kGradients));
  }
  // This rank's part of every layer's initial values; the padding past a layer's end is 0.
  const std::vector<float> initial = Mlp::InitialParameters(model.shape(), seed);
  std::vector<float> shards(engine->shard_count_, 0.0f);
  for (int l = 0; l < model.layer_count(); ++l) {
    const Layer& layer = engine->layers_[static_cast<size_t>(l)];
    const size_t first = rank * layer.shard;
    const size_t end = std::min(layer.count, first + layer.shard);
    for (size_t i = first; i < end; ++i) {
      shards[layer.shard_offset + (i - first)] = initial[model.LayerSpan(l).offset + i];
    }
  }
  RS_RETURN_IF_ERROR(device.CopyToDevice(shards.data(), engine->shard_params_, shards.size()));
  RS_ASSIGN_OR_RETURN(engine->norm_, device.Allocate(1, MemoryCategory::kCommunication));
  engine->gather_ticket_.resize(engine->layers_.size());

  FsdpEngine* self = engine.get();
  engine->hooks_.before_forward = [self](int layer) { return self->BeforeForward(layer); };
  engine->hooks_.before_backward = [self](int layer) { return self->BeforeBackward(layer); };
  engine->hooks_.after_backward = [self](int layer) { return self->AfterBackward(layer); };
  return engine;
}

Status FsdpEngine::StartGather(int layer) {
  const Layer& l = layers_[static_cast<size_t>(layer)];
  RS_ASSIGN_OR_RETURN(Collectives::Ticket ticket,
                      collectives_->StartAllGather(layer, shard_params_ + l.shard_offset, gathered_[slot(layer)],
                                                   l.shard));
  gather_ticket_[static_cast<size_t>(layer)] = ticket;
  return Status::Ok();
}

Status FsdpEngine::WaitGather(int layer) {
  if (!gather_ticket_[static_cast<size_t>(layer)]) RS_RETURN_IF_ERROR(StartGather(layer));
  RS_RETURN_IF_ERROR(collectives_->Wait(*gather_ticket_[static_cast<size_t>(layer)]));
  model_->BindLayer(layer, gathered_[slot(layer)], full_grads_[slot(layer)]);
  return Status::Ok();
}

Status FsdpEngine::BeforeForward(int layer) {
  if (layer == 0) std::fill(gather_ticket_.begin(), gather_ticket_.end(), std::nullopt);
  RS_RETURN_IF_ERROR(WaitGather(layer));
  // The next layer's slot held the previous layer, whose forward is enqueued: prefetch.
  if (options_.overlap && layer + 1 < model_->layer_count()) return StartGather(layer + 1);
  return Status::Ok();
}

Status FsdpEngine::BeforeBackward(int layer) {
  if (layer + 1 == model_->layer_count()) std::fill(gather_ticket_.begin(), gather_ticket_.end(), std::nullopt);
  // This slot's gradients may still be on their way to layer+2's shard.
  RS_RETURN_IF_ERROR(Drain(slot(layer)));
  RS_RETURN_IF_ERROR(WaitGather(layer));
  if (options_.overlap && layer > 0) return StartGather(layer - 1);
  return Status::Ok();
}

Status FsdpEngine::AfterBackward(int layer) {
  const Layer& l = layers_[static_cast<size_t>(layer)];
  float* grads = full_grads_[slot(layer)];
  const size_t padded = l.shard * static_cast<size_t>(collectives_->size());
  // The padding past the layer's end may hold another layer's gradients (the slot is shared);
  // it must add nothing. Gradients are finite, so scaling them by 0 clears them.
  RS_RETURN_IF_ERROR(device_->Scale(padded - l.count, 0.0f, grads + l.count));
  RS_ASSIGN_OR_RETURN(Collectives::Ticket ticket, collectives_->StartReduceScatter(layer, grads, l.shard));
  pending_[slot(layer)] = PendingScatter{layer, ticket, first_micro_step_};
  return Status::Ok();
}

Status FsdpEngine::Drain(int s) {
  if (!pending_[s]) return Status::Ok();
  const PendingScatter pending = *pending_[s];
  pending_[s].reset();
  RS_RETURN_IF_ERROR(collectives_->Wait(pending.ticket));
  const Layer& l = layers_[static_cast<size_t>(pending.layer)];
  float* block = full_grads_[s] + static_cast<size_t>(collectives_->rank()) * l.shard;
  if (!collectives_->averages()) {
    RS_RETURN_IF_ERROR(device_->Scale(l.shard, 1.0f / static_cast<float>(collectives_->size()), block));
  }
  float* shard = shard_grads_ + l.shard_offset;
  if (pending.first_micro_step) {
    const kernels::ConstSpan part{block, l.shard};
    return device_->Flatten(std::span<const kernels::ConstSpan>(&part, 1), shard);
  }
  return device_->Accumulate(l.shard, block, shard);
}

Status FsdpEngine::FinishBackward() {
  RS_RETURN_IF_ERROR(Drain(0));
  RS_RETURN_IF_ERROR(Drain(1));
  return collectives_->WaitAll();
}

Result<double> FsdpEngine::ClipGradientNorm(double max_norm) {
  // The padding is 0, so the shards' squared norms add up to the model's.
  return trainer::ClipGradientNorm(*device_, *collectives_, norm_, shard_grads_, shard_count_, max_norm, 1);
}

Result<std::vector<float>> FsdpEngine::GatherParameters() {
  std::vector<float> all(model_->parameter_count());
  for (int layer = 0; layer < model_->layer_count(); ++layer) {
    const Layer& l = layers_[static_cast<size_t>(layer)];
    RS_ASSIGN_OR_RETURN(Collectives::Ticket ticket,
                        collectives_->StartAllGather(layer, shard_params_ + l.shard_offset, gathered_[0], l.shard));
    RS_RETURN_IF_ERROR(collectives_->Wait(ticket));
    RS_RETURN_IF_ERROR(device_->CopyToHost(gathered_[0], all.data() + model_->LayerSpan(layer).offset, l.count));
  }
  return all;
}

}  // namespace rankscope::trainer
