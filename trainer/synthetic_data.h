// Deterministic synthetic classification data and DistributedSampler-style sharding.
#pragma once

#include <cstdint>
#include <vector>

namespace rankscope::trainer {

// Sample i: features x ~ N(0, 1) drawn from a counter-based generator keyed by (seed, i),
// label = argmax(T · x) for a fixed random "teacher" T [classes × features]. Any sample can
// be produced on its own, in any order, on any rank, and is the same everywhere.
class SyntheticDataset {
 public:
  SyntheticDataset(uint64_t seed, int64_t size, int features, int classes);

  int64_t size() const { return size_; }
  int features() const { return features_; }
  int classes() const { return classes_; }
  void Sample(int64_t index, float* features_out, int32_t* label_out) const;

 private:
  uint64_t seed_;
  int64_t size_;
  int features_;
  int classes_;
  std::vector<float> teacher_;
};

// torch.utils.data.DistributedSampler semantics (shuffle=True, drop_last=False): each epoch
// is a permutation of [0, size) seeded by seed + epoch, padded by wrapping around to a
// multiple of the world size; rank r takes positions r, r + world, r + 2·world, ...
class DistributedSampler {
 public:
  DistributedSampler(int64_t dataset_size, int world_size, int rank, uint64_t seed);

  int64_t samples_per_rank() const { return per_rank_; }
  std::vector<int64_t> EpochIndices(int64_t epoch) const;

 private:
  int64_t dataset_size_;
  int world_size_;
  int rank_;
  uint64_t seed_;
  int64_t per_rank_;
};

// Micro-batch number m (counted over the whole run) of one rank: batches of `batch`
// consecutive indices of the rank's shard, the last partial batch of an epoch dropped.
class BatchPlan {
 public:
  BatchPlan(const SyntheticDataset& dataset, const DistributedSampler& sampler, int batch);

  int64_t batches_per_epoch() const { return batches_per_epoch_; }
  // Fills x [batch × features] and labels [batch].
  void Fill(int64_t micro_batch, float* x, int32_t* labels);

 private:
  const SyntheticDataset& dataset_;
  const DistributedSampler& sampler_;
  int batch_;
  int64_t batches_per_epoch_;
  int64_t cached_epoch_ = -1;
  std::vector<int64_t> epoch_indices_;
};

}  // namespace rankscope::trainer
