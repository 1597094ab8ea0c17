// The FSDP engine on Gloo, ranks as threads: shards hold each layer's padded slices, and
// training sharded gives the parameters that data-parallel training on the same batches
// gives (the gradients averaged over ranks and summed over micro-steps), with and without
// prefetch, for world sizes that do and do not divide the layers.
#include "trainer/fsdp.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "tests/temp_dir.h"
#include "tests/trainer/comm_test_util.h"
#include "tests/trainer/data_parallel_reference.h"
#include "trainer/annotations.h"
#include "trainer/optimizer.h"
#include "trainer/options.h"
#include "trainer/rendezvous.h"
#include "trainer/synthetic_data.h"

namespace rankscope::trainer {
namespace {

using std::chrono::milliseconds;
using testing::FileSpec;
using testing::TempDir;
using testing::WorldOf;
using testing::ReferenceBatch;
using testing::ReferenceData;
using testing::ReferenceRun;
using testing::ReferenceSgd;
using testing::TrainOnOneDevice;

constexpr int kBatch = 4;
constexpr int kSteps = 3;
constexpr uint64_t kSeed = 11;

// features 5, width 7, depth 2, classes 3: layers of 42, 56 and 24 parameters, which 3
// ranks do not all divide.
ModelShape Shape() {
  ModelShape shape;
  shape.features = 5;
  shape.width = 7;
  shape.depth = 2;
  shape.classes = 3;
  return shape;
}

ReferenceRun ReferenceOf(int ranks, int accum) {
  return testing::MakeReferenceRun(Shape(), kBatch, kSeed, kSteps, accum, ranks);
}

// Runs `body(rank)` on a thread per rank with FSDP's pieces set up; returns each rank's error.
std::vector<std::string> RunSharded(int ranks, bool overlap,
                                    const std::function<std::string(int, ComputeDevice&, Mlp&, FsdpEngine&)>& body) {
  TempDir temp;
  const RendezvousSpec spec = FileSpec(temp.path());
  InitAnnotations();  // once before any thread's range, as RunTraining does (NVTX's first use)
  std::vector<std::string> errors(static_cast<size_t>(ranks));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < ranks; ++rank) {
    threads.emplace_back([&, rank] {
      std::string& error = errors[static_cast<size_t>(rank)];
      auto rendezvous = Rendezvous::Connect(spec, WorldOf(rank, ranks), milliseconds(10000), "fsdp-test");
      if (!rendezvous.ok()) return void(error = rendezvous.status().message());
      auto collectives = MakeGlooCollectives(**rendezvous, milliseconds(10000));
      if (!collectives.ok()) return void(error = collectives.status().message());
      std::unique_ptr<ComputeDevice> device = MakeCpuDevice(1);
      Result<Mlp> model = Mlp::Create(*device, Shape(), kBatch, kSeed, ParameterStorage::kBound);
      if (!model.ok()) return void(error = model.status().message());
      auto engine = FsdpEngine::Create(*device, **collectives, *model, kSeed, FsdpOptions{overlap});
      if (!engine.ok()) return void(error = engine.status().message());
      error = body(rank, *device, *model, **engine);
    });
  }
  for (std::thread& thread : threads) thread.join();
  return errors;
}

TEST(FsdpTest, EachRankHoldsItsPaddedSliceOfEveryLayer) {
  for (int ranks : {1, 2, 3}) {
    SCOPED_TRACE(ranks);
    const auto errors = RunSharded(ranks, true, [&](int, ComputeDevice&, Mlp&, FsdpEngine& engine) -> std::string {
      // ceil(42 / N) + ceil(56 / N) + ceil(24 / N)
      const size_t expected = (42 + ranks - 1) / ranks + (56 + ranks - 1) / ranks + (24 + ranks - 1) / ranks;
      if (engine.shard_count() != expected) return "shard count " + std::to_string(engine.shard_count());
      Result<std::vector<float>> all = engine.GatherParameters();
      if (!all.ok()) return all.status().message();
      return *all == Mlp::InitialParameters(Shape(), kSeed) ? "" : "gathered parameters differ from the initial ones";
    });
    for (const std::string& error : errors) EXPECT_EQ(error, "");
  }
}

TEST(FsdpTest, TrainingShardedGivesTheParametersOfDataParallelTraining) {
  for (int ranks : {2, 3}) {
    for (int accum : {1, 2}) {
      for (bool overlap : {true, false}) {
        SCOPED_TRACE(::testing::Message() << ranks << " ranks, accum " << accum << ", overlap " << overlap);
        const std::vector<float> expected = TrainOnOneDevice(ReferenceOf(ranks, accum));
        std::vector<std::vector<float>> got(static_cast<size_t>(ranks));
        const auto errors = RunSharded(ranks, overlap, [&](int rank, ComputeDevice& device, Mlp& model,
                                                           FsdpEngine& engine) -> std::string {
          Result<Optimizer> optimizer = Optimizer::Create(device, ReferenceSgd(), engine.shard_count());
          if (!optimizer.ok()) return optimizer.status().message();
          const SyntheticDataset data = ReferenceData(Shape());
          std::vector<float> x(static_cast<size_t>(kBatch * Shape().features));
          std::vector<int32_t> labels(kBatch);
          Result<float*> x_d = device.AllocateFloats(x.size());
          Result<int32_t*> labels_d = device.AllocateLabels(labels.size());
          if (!x_d.ok() || !labels_d.ok()) return "allocation failed";
          const auto none = [](int) { return Status::Ok(); };
          for (int step = 0; step < kSteps; ++step) {
            for (int micro = 0; micro < accum; ++micro) {
              ReferenceBatch(data, ReferenceOf(ranks, accum), rank, step, micro, x.data(), labels.data());
              Status status = device.CopyToDevice(x.data(), *x_d, x.size());
              if (status.ok()) status = device.CopyLabelsToDevice(labels.data(), *labels_d, labels.size());
              if (status.ok()) status = model.Forward(*x_d, *labels_d, engine.hooks());
              engine.BeginBackward(micro == 0);
              if (status.ok()) {
                status = model.Backward(*x_d, *labels_d, 1.0f / static_cast<float>(accum), false, none, engine.hooks());
              }
              if (!status.ok()) return status.message();
            }
            Status status = engine.FinishBackward();
            if (status.ok()) status = optimizer->Step(engine.shard_params(), engine.shard_grads(), 0.05);
            if (!status.ok()) return status.message();
            (void)device.TakeLoss();
          }
          Result<std::vector<float>> all = engine.GatherParameters();
          if (!all.ok()) return all.status().message();
          got[static_cast<size_t>(rank)] = std::move(*all);
          return "";
        });
        for (const std::string& error : errors) ASSERT_EQ(error, "");
        for (int rank = 0; rank < ranks; ++rank) {
          const std::vector<float>& mine = got[static_cast<size_t>(rank)];
          ASSERT_EQ(mine.size(), expected.size());
          for (size_t i = 0; i < mine.size(); ++i) {
            // The same sums in another order: equal to float rounding.
            ASSERT_NEAR(mine[i], expected[i], 1e-5f * std::max(1.0f, std::fabs(expected[i])))
                << "rank " << rank << ", parameter element " << i;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace rankscope::trainer
