// The pipeline engine: its schedules pass by pass, its stage split and rank layout, and, on
// Gloo with ranks as threads, training pipelined (1F1B and GPipe, one and two replicas)
// giving each stage the parameters that training the whole model on one device gives.
#include "trainer/pipeline.h"

#include <gtest/gtest.h>

#include <algorithm>
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
constexpr uint64_t kSeed = 13;
constexpr float kLearningRate = 0.05f;

// "F0 F1 B0 ..." for reading a schedule at a glance.
std::string Passes(const std::vector<PipelinePass>& passes) {
  std::string text;
  for (const PipelinePass& pass : passes) {
    if (!text.empty()) text += ' ';
    text += (pass.forward ? "F" : "B") + std::to_string(pass.micro_batch);
  }
  return text;
}

int MostInFlight(const std::vector<PipelinePass>& passes) {
  int open = 0;
  int most = 0;
  for (const PipelinePass& pass : passes) {
    open += pass.forward ? 1 : -1;
    most = std::max(most, open);
  }
  return most;
}

TEST(PipelineScheduleTest, OneForwardOneBackwardWarmsUpByTheStagesAfterIt) {
  const auto schedule = PipelineSchedule::kOneForwardOneBackward;
  // Megatron's 1F1B for 4 stages and 6 micro-batches: stage s warms up with 3 − s forwards.
  EXPECT_EQ(Passes(StageSchedule(schedule, 4, 0, 6)), "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5");
  EXPECT_EQ(Passes(StageSchedule(schedule, 4, 1, 6)), "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 B4 B5");
  EXPECT_EQ(Passes(StageSchedule(schedule, 4, 2, 6)), "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 B5");
  EXPECT_EQ(Passes(StageSchedule(schedule, 4, 3, 6)), "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5");
  // Fewer micro-batches than stages: the warm-up is cut to them.
  EXPECT_EQ(Passes(StageSchedule(schedule, 4, 0, 2)), "F0 F1 B0 B1");
  for (int stage = 0; stage < 4; ++stage) {
    EXPECT_EQ(MostInFlight(StageSchedule(schedule, 4, stage, 6)), 4 - stage) << stage;
  }
}

TEST(PipelineScheduleTest, GPipeRunsEveryForwardThenEveryBackward) {
  EXPECT_EQ(Passes(StageSchedule(PipelineSchedule::kGPipe, 2, 0, 3)), "F0 F1 F2 B0 B1 B2");
  EXPECT_EQ(Passes(StageSchedule(PipelineSchedule::kGPipe, 2, 1, 3)), "F0 F1 F2 B0 B1 B2");
  EXPECT_EQ(MostInFlight(StageSchedule(PipelineSchedule::kGPipe, 2, 1, 3)), 3);
}

TEST(PipelineLayoutTest, StagesBalanceTheirWork) {
  EXPECT_EQ(BalanceStages({1, 1, 1, 1}, 2), (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(BalanceStages({4, 1, 1, 1, 1}, 2), (std::vector<int>{0, 1, 5}));
  // features 64 → 256 × 3 → 8: 16384, 65536, 65536, 2048 multiply-adds per row.
  EXPECT_EQ(BalanceStages({16384, 65536, 65536, 2048}, 2), (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(BalanceStages({16384, 65536, 65536, 2048}, 4), (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(BalanceStages({5, 5, 5}, 1), (std::vector<int>{0, 3}));
}

ModelShape Shape() {
  ModelShape shape;
  shape.features = 6;
  shape.width = 5;
  shape.depth = 3;  // 4 layers
  shape.classes = 3;
  return shape;
}

TEST(PipelineLayoutTest, RanksAreStagesOfReplicas) {
  PipelineOptions options;
  options.stages = 2;
  // World 4: ranks 0, 1 are replica 0's stages, ranks 2, 3 replica 1's.
  Result<PipelineLayout> layout = LayOutPipeline(Shape(), 4, 3, options);
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  EXPECT_EQ(layout->stage, 1);
  EXPECT_EQ(layout->replica, 1);
  EXPECT_EQ(layout->replicas, 2);
  EXPECT_EQ(layout->previous_rank, 2);
  EXPECT_EQ(layout->next_rank, -1);
  EXPECT_EQ(layout->replica_ranks, (std::vector<int>{1, 3}));
  options.stage_layers = {1, 3};
  layout = LayOutPipeline(Shape(), 4, 0, options);
  ASSERT_TRUE(layout.ok());
  EXPECT_EQ(layout->boundaries, (std::vector<int>{0, 1, 4}));
  EXPECT_EQ(layout->next_rank, 1);
}

TEST(PipelineLayoutTest, ImpossibleLayoutsAreOneLineErrors) {
  PipelineOptions options;
  options.stages = 3;
  EXPECT_EQ(LayOutPipeline(Shape(), 4, 0, options).status().message(),
            "--stages 3: must divide the world size 4 (data parallel over the rest)");
  options.stages = 5;
  EXPECT_EQ(LayOutPipeline(Shape(), 5, 0, options).status().message(),
            "--stages 5: the model has only 4 layers (--depth 3 + 1)");
  options.stages = 2;
  options.stage_layers = {1, 2};
  EXPECT_EQ(LayOutPipeline(Shape(), 2, 0, options).status().message(),
            "--stage-layers 1,2: needs 2 positive counts (one per stage) adding up to the model's 4 layers");
}

ReferenceRun ReferenceOf(int replicas, int micro_batches, double clip) {
  return testing::MakeReferenceRun(Shape(), kBatch, kSeed, kSteps, micro_batches, replicas, clip, kLearningRate);
}

struct StageResult {
  std::string error;
  int first_layer = 0;
  int in_flight = 0;
  std::vector<float> params;
};

std::vector<StageResult> TrainPipelined(int world, const PipelineOptions& options, double clip) {
  TempDir temp;
  const RendezvousSpec spec = FileSpec(temp.path());
  InitAnnotations();  // once before any thread's range, as RunTraining does (NVTX's first use)
  std::vector<StageResult> results(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world; ++rank) {
    threads.emplace_back([&, rank] {
      StageResult& result = results[static_cast<size_t>(rank)];
      const auto fail = [&](const Status& status) { result.error = status.ToString(); };
      auto rendezvous = Rendezvous::Connect(spec, WorldOf(rank, world), milliseconds(10000), "pipeline-test");
      if (!rendezvous.ok()) return fail(rendezvous.status());
      Result<PipelineLayout> layout = LayOutPipeline(Shape(), world, rank, options);
      if (!layout.ok()) return fail(layout.status());
      auto pipeline = MakeGlooCollectives(**rendezvous, milliseconds(10000));
      if (!pipeline.ok()) return fail(pipeline.status());
      std::unique_ptr<Collectives> replicas;
      if (layout->replicas > 1) {
        auto made = MakeGlooCollectives(**rendezvous, milliseconds(10000), layout->replica_ranks);
        if (!made.ok()) return fail(made.status());
        replicas = std::move(*made);
      }
      std::unique_ptr<ComputeDevice> device = MakeCpuDevice(1);
      auto engine = PipelineEngine::Create(*device, **pipeline, replicas.get(), Shape(), kBatch, kSeed, *layout, {});
      if (!engine.ok()) return fail(engine.status());
      Mlp& model = (*engine)->model();
      Result<Optimizer> optimizer = Optimizer::Create(*device, ReferenceSgd(), model.parameter_count());
      if (!optimizer.ok()) return fail(optimizer.status());
      const SyntheticDataset data = ReferenceData(Shape());
      const auto none = [](int) { return Status::Ok(); };
      for (int step = 0; step < kSteps; ++step) {
        Status status = (*engine)->RunStep(
            [&](int k, float* x, int32_t* labels) {
              ReferenceBatch(data, ReferenceOf(layout->replicas, options.micro_batches, clip), layout->replica, step, k, x,
                             labels);
            },
            none);
        if (status.ok() && clip > 0) status = (*engine)->ClipGradientNorm(clip).status();
        if (status.ok()) status = optimizer->Step(model.params(), model.grads(), kLearningRate);
        if (!status.ok()) return fail(status);
        (void)device->TakeLoss();
      }
      result.first_layer = model.first_layer();
      result.in_flight = (*engine)->in_flight();
      result.params.resize(model.parameter_count());
      Status copied = device->CopyToHost(model.params(), result.params.data(), result.params.size());
      if (!copied.ok()) fail(copied);
    });
  }
  for (std::thread& thread : threads) thread.join();
  return results;
}

// Where layer `layer`'s parameters start in the whole model's flat order.
size_t Offset(int layer) {
  size_t offset = 0;
  std::vector<int> widths = {Shape().features, Shape().width, Shape().width, Shape().width, Shape().classes};
  for (int l = 0; l < layer; ++l) offset += static_cast<size_t>(widths[l] + 1) * widths[l + 1];
  return offset;
}

TEST(PipelineEngineTest, EachStageEndsWithTheParametersOfTrainingTheWholeModel) {
  struct Case {
    int world;
    int stages;
    PipelineSchedule schedule;
    std::vector<int> stage_layers;
    double clip;
  };
  const std::vector<Case> cases = {
      {2, 2, PipelineSchedule::kOneForwardOneBackward, {}, 0.0},
      {2, 2, PipelineSchedule::kGPipe, {1, 3}, 0.0},
      {4, 4, PipelineSchedule::kOneForwardOneBackward, {}, 0.3},
      {4, 2, PipelineSchedule::kOneForwardOneBackward, {3, 1}, 0.3},  // two replicas
  };
  constexpr int kMicroBatches = 3;
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << c.world << " ranks, " << c.stages << " stages, "
                                      << ScheduleName(c.schedule) << ", clip " << c.clip);
    PipelineOptions options;
    options.stages = c.stages;
    options.micro_batches = kMicroBatches;
    options.schedule = c.schedule;
    options.stage_layers = c.stage_layers;
    const std::vector<float> expected = TrainOnOneDevice(ReferenceOf(c.world / c.stages, kMicroBatches, c.clip));
    const std::vector<StageResult> results = TrainPipelined(c.world, options, c.clip);
    for (int rank = 0; rank < c.world; ++rank) {
      const StageResult& result = results[static_cast<size_t>(rank)];
      ASSERT_EQ(result.error, "") << "rank " << rank;
      const int stage = rank % c.stages;
      EXPECT_EQ(result.in_flight,
                c.schedule == PipelineSchedule::kGPipe ? kMicroBatches : std::min(c.stages - stage, kMicroBatches));
      const size_t offset = Offset(result.first_layer);
      ASSERT_LE(offset + result.params.size(), expected.size());
      for (size_t i = 0; i < result.params.size(); ++i) {
        const float want = expected[offset + i];
        // The same sums in another order: equal to float rounding.
        ASSERT_NEAR(result.params[i], want, 1e-5f * std::max(1.0f, std::fabs(want)))
            << "rank " << rank << ", element " << i << " of its stage";
      }
    }
  }
}

}  // namespace
}  // namespace rankscope::trainer
