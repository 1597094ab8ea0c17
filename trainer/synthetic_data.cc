#include "trainer/synthetic_data.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace rankscope::trainer {
namespace {

// SplitMix64: a counter-based generator, so sample i needs no state from sample i − 1.
uint64_t Mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

double Uniform01(uint64_t bits) {  // (0, 1], never 0 so the logarithm below is finite
  return (static_cast<double>(bits >> 11) + 1.0) * 0x1.0p-53;
}

// Standard normals j and j + 1 (j even) of stream `key`: one Box–Muller pair from two
// counter draws, so value j is the same whether it is drawn alone or with its partner.
void NormalPair(uint64_t key, uint64_t j, float* out, size_t count) {
  const uint64_t pair = j / 2;
  const double u1 = Uniform01(Mix(key ^ Mix(2 * pair)));
  const double u2 = Uniform01(Mix(key ^ Mix(2 * pair + 1)));
  const double radius = std::sqrt(-2.0 * std::log(u1));
  const double angle = 2.0 * std::numbers::pi * u2;
  out[0] = static_cast<float>(radius * std::cos(angle));
  if (count > 1) out[1] = static_cast<float>(radius * std::sin(angle));
}

// values[i] = standard normal i of stream `key`.
void Normals(uint64_t key, float* values, size_t count) {
  for (size_t j = 0; j < count; j += 2) NormalPair(key, j, values + j, count - j);
}

constexpr uint64_t kTeacherStream = 0x7465616368657231ull;  // "teacher1"
constexpr uint64_t kSampleStream = 0x73616d706c657321ull;   // "samples!"
constexpr uint64_t kShuffleStream = 0x73687566666c6521ull;  // "shuffle!"

}  // namespace

SyntheticDataset::SyntheticDataset(uint64_t seed, int64_t size, int features, int classes)
    : seed_(seed), size_(size), features_(features), classes_(classes),
      teacher_(static_cast<size_t>(features) * static_cast<size_t>(classes)) {
  const uint64_t key = Mix(seed ^ kTeacherStream);
  Normals(key, teacher_.data(), teacher_.size());
}

void SyntheticDataset::Sample(int64_t index, float* features_out, int32_t* label_out) const {
  const uint64_t key = Mix(Mix(seed_ ^ kSampleStream) ^ static_cast<uint64_t>(index));
  Normals(key, features_out, static_cast<size_t>(features_));
  int best = 0;
  double best_score = -INFINITY;
  for (int c = 0; c < classes_; ++c) {
    const float* row = &teacher_[static_cast<size_t>(c) * static_cast<size_t>(features_)];
    double score = 0;
    for (int f = 0; f < features_; ++f) score += static_cast<double>(row[f]) * features_out[f];
    if (score > best_score) {
      best_score = score;
      best = c;
    }
  }
  *label_out = best;
}

DistributedSampler::DistributedSampler(int64_t dataset_size, int world_size, int rank, uint64_t seed)
    : dataset_size_(dataset_size), world_size_(world_size), rank_(rank), seed_(seed),
      per_rank_((dataset_size + world_size - 1) / world_size) {}

std::vector<int64_t> DistributedSampler::EpochIndices(int64_t epoch) const {
  std::vector<int64_t> order(static_cast<size_t>(dataset_size_));
  for (int64_t i = 0; i < dataset_size_; ++i) order[static_cast<size_t>(i)] = i;
  // Fisher–Yates with the counter generator: the same permutation on every rank.
  const uint64_t key = Mix(Mix(seed_ ^ kShuffleStream) + static_cast<uint64_t>(epoch));
  for (int64_t i = dataset_size_ - 1; i > 0; --i) {
    const uint64_t j = Mix(key ^ static_cast<uint64_t>(i)) % static_cast<uint64_t>(i + 1);
    std::swap(order[static_cast<size_t>(i)], order[j]);
  }
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(per_rank_));
  const int64_t padded = per_rank_ * world_size_;
  for (int64_t position = rank_; position < padded; position += world_size_) {
    mine.push_back(order[static_cast<size_t>(position % dataset_size_)]);
  }
  return mine;
}

BatchPlan::BatchPlan(const SyntheticDataset& dataset, const DistributedSampler& sampler, int batch)
    : dataset_(dataset), sampler_(sampler), batch_(batch),
      batches_per_epoch_(std::max<int64_t>(1, sampler.samples_per_rank() / batch)) {}

void BatchPlan::Fill(int64_t micro_batch, float* x, int32_t* labels) {
  const int64_t epoch = micro_batch / batches_per_epoch_;
  const int64_t first = (micro_batch % batches_per_epoch_) * batch_;
  if (epoch != cached_epoch_) {
    epoch_indices_ = sampler_.EpochIndices(epoch);
    cached_epoch_ = epoch;
  }
  const size_t features = static_cast<size_t>(dataset_.features());
  for (int i = 0; i < batch_; ++i) {
    // A shard shorter than one batch wraps around rather than reading past its end.
    const size_t position = static_cast<size_t>(first + i) % epoch_indices_.size();
    dataset_.Sample(epoch_indices_[position], x + static_cast<size_t>(i) * features, &labels[i]);
  }
}

}  // namespace rankscope::trainer
