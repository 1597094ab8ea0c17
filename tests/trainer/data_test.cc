// The synthetic dataset, the DistributedSampler sharding and the per-rank batch plan: the
// data side of the DDP equivalence property (world W at batch B sees, step by step, the
// same samples as world 1 at batch W·B).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "trainer/synthetic_data.h"

namespace rankscope::trainer {
namespace {

struct Row {
  std::vector<float> x;
  int32_t label = 0;
};

std::vector<float> Features(const SyntheticDataset& dataset, int64_t index, int32_t* label) {
  std::vector<float> x(static_cast<size_t>(dataset.features()));
  dataset.Sample(index, x.data(), label);
  return x;
}

TEST(SyntheticDatasetTest, SameSampleTwiceAndAcrossInstances) {
  const SyntheticDataset a(7, 1000, 12, 5);
  const SyntheticDataset b(7, 1000, 12, 5);
  EXPECT_EQ(a.size(), 1000);
  EXPECT_EQ(a.features(), 12);
  EXPECT_EQ(a.classes(), 5);
  for (int64_t index : {int64_t{0}, int64_t{1}, int64_t{17}, int64_t{999}}) {
    int32_t label1 = -1;
    int32_t label2 = -1;
    int32_t label3 = -1;
    const std::vector<float> x1 = Features(a, index, &label1);
    // Other samples in between must not change sample `index` (no hidden generator state).
    int32_t ignored = 0;
    (void)Features(a, index + 1, &ignored);
    const std::vector<float> x2 = Features(a, index, &label2);
    const std::vector<float> x3 = Features(b, index, &label3);
    EXPECT_EQ(x1, x2) << "sample " << index;
    EXPECT_EQ(x1, x3) << "sample " << index;
    EXPECT_EQ(label1, label2);
    EXPECT_EQ(label1, label3);
  }
}

TEST(SyntheticDatasetTest, DifferentIndicesAndSeedsDiffer) {
  const SyntheticDataset a(7, 100, 8, 4);
  const SyntheticDataset b(8, 100, 8, 4);
  int32_t label = 0;
  const std::vector<float> a0 = Features(a, 0, &label);
  const std::vector<float> a1 = Features(a, 1, &label);
  const std::vector<float> b0 = Features(b, 0, &label);
  EXPECT_NE(a0, a1);
  EXPECT_NE(a0, b0);
}

TEST(SyntheticDatasetTest, LabelsInRangeAndEveryClassAppears) {
  constexpr int kClasses = 8;
  const SyntheticDataset dataset(3, 4000, 16, kClasses);
  std::vector<int> counts(kClasses, 0);
  for (int64_t i = 0; i < dataset.size(); ++i) {
    int32_t label = -1;
    (void)Features(dataset, i, &label);
    ASSERT_GE(label, 0) << "sample " << i;
    ASSERT_LT(label, kClasses) << "sample " << i;
    ++counts[static_cast<size_t>(label)];
  }
  for (int c = 0; c < kClasses; ++c) EXPECT_GT(counts[static_cast<size_t>(c)], 0) << "class " << c;
}

TEST(SyntheticDatasetTest, FeaturesLookStandardNormal) {
  // 4000 × 16 = 64000 draws: the standard error of the mean is 0.004 and of the variance
  // about 0.006, so these bounds are more than 8 standard errors wide.
  const SyntheticDataset dataset(11, 4000, 16, 4);
  double sum = 0;
  double sum_squares = 0;
  size_t n = 0;
  for (int64_t i = 0; i < dataset.size(); ++i) {
    int32_t label = 0;
    for (float v : Features(dataset, i, &label)) {
      ASSERT_TRUE(std::isfinite(v));
      sum += v;
      sum_squares += static_cast<double>(v) * v;
      ++n;
    }
  }
  const double mean = sum / static_cast<double>(n);
  const double variance = sum_squares / static_cast<double>(n) - mean * mean;
  EXPECT_NEAR(mean, 0.0, 0.05);
  EXPECT_NEAR(variance, 1.0, 0.05);
}

// Rebuilds the global (padded) order from every rank's indices: position p was taken by
// rank p mod world as its (p / world)-th entry.
std::vector<int64_t> GlobalOrder(int64_t dataset_size, int world, uint64_t seed, int64_t epoch) {
  std::vector<std::vector<int64_t>> per_rank;
  int64_t per = -1;
  for (int r = 0; r < world; ++r) {
    const DistributedSampler sampler(dataset_size, world, r, seed);
    if (per < 0) per = sampler.samples_per_rank();
    EXPECT_EQ(sampler.samples_per_rank(), per);
    per_rank.push_back(sampler.EpochIndices(epoch));
    EXPECT_EQ(static_cast<int64_t>(per_rank.back().size()), sampler.samples_per_rank()) << "rank " << r;
  }
  std::vector<int64_t> order;
  for (int64_t i = 0; i < per; ++i) {
    for (int r = 0; r < world; ++r) {
      const auto& mine = per_rank[static_cast<size_t>(r)];
      order.push_back(static_cast<size_t>(i) < mine.size() ? mine[static_cast<size_t>(i)] : -1);
    }
  }
  return order;
}

TEST(DistributedSamplerTest, ShardsCoverTheDatasetDisjointlyUpToWrapAroundPadding) {
  for (int64_t dataset_size : {int64_t{11}, int64_t{3}, int64_t{101}}) {
    for (int world = 1; world <= 4; ++world) {
      SCOPED_TRACE("dataset " + std::to_string(dataset_size) + ", world " + std::to_string(world));
      const int64_t per = (dataset_size + world - 1) / world;
      EXPECT_EQ(DistributedSampler(dataset_size, world, 0, 5).samples_per_rank(), per);
      for (int64_t epoch : {int64_t{0}, int64_t{3}}) {
        const std::vector<int64_t> order = GlobalOrder(dataset_size, world, 5, epoch);
        ASSERT_EQ(static_cast<int64_t>(order.size()), per * world);
        // The first dataset_size positions are a permutation of the dataset...
        std::vector<int64_t> head(order.begin(), order.begin() + dataset_size);
        std::sort(head.begin(), head.end());
        for (int64_t i = 0; i < dataset_size; ++i) ASSERT_EQ(head[static_cast<size_t>(i)], i);
        // ... and the padding repeats the permutation's beginning.
        for (int64_t p = dataset_size; p < per * world; ++p) {
          EXPECT_EQ(order[static_cast<size_t>(p)], order[static_cast<size_t>(p - dataset_size)]) << "position " << p;
        }
        // Hence the ranks share exactly (padded − size) indices between them.
        std::set<int64_t> distinct(order.begin(), order.end());
        EXPECT_EQ(static_cast<int64_t>(distinct.size()), dataset_size);
      }
    }
  }
}

TEST(DistributedSamplerTest, PermutationDependsOnEpochAndSeedOnly) {
  const DistributedSampler a(100, 1, 0, 42);
  const DistributedSampler b(100, 1, 0, 42);
  const DistributedSampler other_seed(100, 1, 0, 43);
  const std::vector<int64_t> epoch0 = a.EpochIndices(0);
  EXPECT_EQ(epoch0, a.EpochIndices(0));
  EXPECT_EQ(epoch0, b.EpochIndices(0));
  EXPECT_EQ(a.EpochIndices(5), b.EpochIndices(5));
  EXPECT_NE(epoch0, a.EpochIndices(1));
  EXPECT_NE(a.EpochIndices(1), a.EpochIndices(2));
  EXPECT_NE(epoch0, other_seed.EpochIndices(0));
  // Shuffled, not the identity.
  std::vector<int64_t> identity(100);
  for (int64_t i = 0; i < 100; ++i) identity[static_cast<size_t>(i)] = i;
  EXPECT_NE(epoch0, identity);
  // Every rank of a larger world sees the same permutation (rank r takes positions r, r + W, ...).
  for (int world : {2, 3}) {
    for (int r = 0; r < world; ++r) {
      const std::vector<int64_t> mine = DistributedSampler(100, world, r, 42).EpochIndices(0);
      for (size_t i = 0; i < mine.size(); ++i) {
        const size_t position = (static_cast<size_t>(r) + i * static_cast<size_t>(world)) % 100;
        ASSERT_EQ(mine[i], epoch0[position]) << "world " << world << " rank " << r << " entry " << i;
      }
    }
  }
}

std::vector<Row> Rows(const std::vector<float>& x, const std::vector<int32_t>& labels, int features) {
  std::vector<Row> rows;
  for (size_t i = 0; i < labels.size(); ++i) {
    Row row;
    row.x.assign(x.begin() + static_cast<std::ptrdiff_t>(i * static_cast<size_t>(features)),
                 x.begin() + static_cast<std::ptrdiff_t>((i + 1) * static_cast<size_t>(features)));
    row.label = labels[i];
    rows.push_back(std::move(row));
  }
  return rows;
}

bool operator<(const Row& a, const Row& b) { return std::tie(a.x, a.label) < std::tie(b.x, b.label); }
bool operator==(const Row& a, const Row& b) { return a.x == b.x && a.label == b.label; }

// The union over W ranks of micro-batch k at batch B, as a sorted multiset of rows.
std::vector<Row> WorldBatch(const SyntheticDataset& dataset, int world, int batch, int64_t micro_batch,
                            int64_t* batches_per_epoch) {
  std::vector<Row> all;
  for (int r = 0; r < world; ++r) {
    const DistributedSampler sampler(dataset.size(), world, r, 9);
    BatchPlan plan(dataset, sampler, batch);
    *batches_per_epoch = plan.batches_per_epoch();
    std::vector<float> x(static_cast<size_t>(batch) * static_cast<size_t>(dataset.features()), NAN);
    std::vector<int32_t> labels(static_cast<size_t>(batch), -1);
    plan.Fill(micro_batch, x.data(), labels.data());
    for (Row& row : Rows(x, labels, dataset.features())) all.push_back(std::move(row));
  }
  std::sort(all.begin(), all.end());
  return all;
}

TEST(BatchPlanTest, RanksTogetherSeeTheSingleRankBatch) {
  // 96 samples: world 1 at batch 8 and world 2 at batch 4 both have 12 micro-batches per
  // epoch, world 4 at batch 2 too, so micro-batch k is the same slice of the same epoch.
  const SyntheticDataset dataset(21, 96, 6, 4);
  for (int64_t k = 0; k < 30; ++k) {  // two and a half epochs
    SCOPED_TRACE("micro-batch " + std::to_string(k));
    int64_t per_epoch_1 = 0;
    int64_t per_epoch_2 = 0;
    int64_t per_epoch_4 = 0;
    const std::vector<Row> single = WorldBatch(dataset, 1, 8, k, &per_epoch_1);
    const std::vector<Row> two = WorldBatch(dataset, 2, 4, k, &per_epoch_2);
    const std::vector<Row> four = WorldBatch(dataset, 4, 2, k, &per_epoch_4);
    ASSERT_EQ(per_epoch_1, 12);
    ASSERT_EQ(per_epoch_2, 12);
    ASSERT_EQ(per_epoch_4, 12);
    ASSERT_EQ(single.size(), 8u);
    EXPECT_TRUE(single == two);
    EXPECT_TRUE(single == four);
    // Eight distinct samples (rows collide only if the generator is broken).
    for (size_t i = 1; i < single.size(); ++i) EXPECT_FALSE(single[i - 1] == single[i]);
  }
}

TEST(BatchPlanTest, MicroBatchesFollowTheShardInOrderAndEpochsReshuffle) {
  const SyntheticDataset dataset(4, 50, 3, 3);
  const DistributedSampler sampler(50, 2, 1, 77);
  BatchPlan plan(dataset, sampler, 4);
  ASSERT_EQ(plan.batches_per_epoch(), 6);  // 25 per rank, the last partial batch dropped
  for (int64_t k : {int64_t{0}, int64_t{5}, int64_t{6}, int64_t{13}, int64_t{2}}) {
    const std::vector<int64_t> shard = sampler.EpochIndices(k / 6);
    std::vector<float> x(12);
    std::vector<int32_t> labels(4);
    plan.Fill(k, x.data(), labels.data());
    for (int i = 0; i < 4; ++i) {
      int32_t label = -1;
      const std::vector<float> expected = Features(dataset, shard[static_cast<size_t>((k % 6) * 4 + i)], &label);
      EXPECT_EQ(std::vector<float>(x.begin() + 3 * i, x.begin() + 3 * i + 3), expected) << "k " << k << " row " << i;
      EXPECT_EQ(labels[static_cast<size_t>(i)], label);
    }
  }
}

}  // namespace
}  // namespace rankscope::trainer
