#include "trainer/ddp.h"

#include <fmt/format.h>

namespace rankscope::trainer {

std::vector<std::vector<int>> AssignBuckets(std::span<const Parameter> parameters, size_t cap_bytes,
                                            size_t first_cap_bytes) {
  std::vector<std::vector<int>> buckets;
  std::vector<int> current;
  size_t current_bytes = 0;
  for (size_t i = parameters.size(); i-- > 0;) {
    current.push_back(static_cast<int>(i));
    current_bytes += parameters[i].size * sizeof(float);
    const size_t cap = buckets.empty() ? first_cap_bytes : cap_bytes;
    if (current_bytes >= cap) {
      buckets.push_back(std::move(current));
      current.clear();
      current_bytes = 0;
    }
  }
  if (!current.empty()) buckets.push_back(std::move(current));
  return buckets;
}

Result<DdpEngine> DdpEngine::Create(ComputeDevice& device, Collectives& collectives, Mlp& model,
                                    const DdpOptions& options) {
  DdpEngine engine(device, collectives, model, options);
  const std::vector<Parameter>& parameters = model.parameters();
  engine.bucket_of_parameter_.assign(parameters.size(), -1);
  for (std::vector<int>& members :
       AssignBuckets(parameters, options.bucket_cap_bytes, options.first_bucket_cap_bytes)) {
    Bucket bucket;
    for (int p : members) {
      const Parameter& parameter = parameters[static_cast<size_t>(p)];
      float* gradient = model.grads() + parameter.offset;
      bucket.gradients.push_back({gradient, parameter.size});
      bucket.gradient_targets.push_back({gradient, parameter.size});
      bucket.count += parameter.size;
      engine.bucket_of_parameter_[static_cast<size_t>(p)] = static_cast<int>(engine.buckets_.size());
    }
    bucket.parameters = std::move(members);
    RS_ASSIGN_OR_RETURN(bucket.buffer, device.Allocate(bucket.count, MemoryCategory::kCommunication));
    engine.buckets_.push_back(std::move(bucket));
  }
  return engine;
}

Status DdpEngine::BroadcastParameters() {
  return collectives_->Broadcast(model_->params(), model_->parameter_count(), 0)
      .WithContext("broadcasting the initial parameters from rank 0");
}

void DdpEngine::BeginBackward(bool sync) {
  sync_ = sync;
  next_launch_ = 0;
  for (Bucket& bucket : buckets_) bucket.pending = static_cast<int>(bucket.parameters.size());
}

Status DdpEngine::OnGradientReady(int parameter) {
  if (!sync_) return Status::Ok();
  const int index = bucket_of_parameter_.at(static_cast<size_t>(parameter));
  --buckets_[static_cast<size_t>(index)].pending;
  if (!options_.overlap) return Status::Ok();
  // Buckets start strictly in order, as DDP's reducer does, so every rank issues the same
  // sequence of collectives.
  while (next_launch_ < buckets_.size() && buckets_[next_launch_].pending == 0) {
    RS_RETURN_IF_ERROR(Launch(next_launch_++));
  }
  return Status::Ok();
}

Status DdpEngine::Launch(size_t index) {
  Bucket& bucket = buckets_[index];
  RS_RETURN_IF_ERROR(device_->Flatten(bucket.gradients, bucket.buffer));
  if (mismatch_planted_) {
    mismatch_planted_ = false;
    return collectives_->Broadcast(bucket.buffer, bucket.count, 0);
  }
  return collectives_->StartAllReduce(static_cast<int>(index), bucket.buffer, bucket.count);
}

Status DdpEngine::FinishBackward() {
  if (!sync_) return Status::Ok();
  while (next_launch_ < buckets_.size()) {
    if (buckets_[next_launch_].pending != 0) {
      return InternalError(fmt::format("bucket {} still waits for {} gradient(s) after the backward pass",
                                       next_launch_, buckets_[next_launch_].pending));
    }
    RS_RETURN_IF_ERROR(Launch(next_launch_++));
  }
  RS_RETURN_IF_ERROR(collectives_->WaitAll());
  const float factor = collectives_->averages() ? 1.0f : 1.0f / static_cast<float>(collectives_->size());
  for (Bucket& bucket : buckets_) {
    if (factor != 1.0f) RS_RETURN_IF_ERROR(device_->Scale(bucket.count, factor, bucket.buffer));
    RS_RETURN_IF_ERROR(device_->Unflatten(bucket.buffer, bucket.gradient_targets));
  }
  return Status::Ok();
}

std::vector<size_t> DdpEngine::BucketBytes() const {
  std::vector<size_t> bytes;
  for (const Bucket& bucket : buckets_) bytes.push_back(bucket.count * sizeof(float));
  return bytes;
}

}  // namespace rankscope::trainer
