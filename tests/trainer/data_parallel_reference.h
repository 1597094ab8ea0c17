// Shared by the FSDP and pipeline tests: what data-parallel training computes, on one device,
// to compare a sharded or pipelined run's parameters with. Every rank's micro-batches go
// through one model; the gradient is their mean over ranks, summed over micro-steps (each
// scaled by 1/micro-steps); SGD with momentum 0.9 steps it.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "trainer/device.h"
#include "trainer/model.h"
#include "trainer/optimizer.h"
#include "trainer/options.h"
#include "trainer/synthetic_data.h"

namespace rankscope::testing {

using trainer::ComputeDevice;
using trainer::ModelShape;
using trainer::SyntheticDataset;
using trainer::TrainerOptions;

struct ReferenceRun {
  ModelShape shape;
  int batch = 4;
  uint64_t seed = 0;
  int steps = 3;
  int micro_steps = 1;
  int ranks = 1;
  double clip = 0;  // a gradient-norm clip before each step; 0: none
  float lr = 0.05f;
};

inline ReferenceRun MakeReferenceRun(const ModelShape& shape, int batch, uint64_t seed, int steps, int micro_steps,
                                     int ranks, double clip = 0, float lr = 0.05f) {
  return ReferenceRun{shape, batch, seed, steps, micro_steps, ranks, clip, lr};
}

// Every test's data: 1000 samples of seed 5.
inline SyntheticDataset ReferenceData(const ModelShape& shape) { return SyntheticDataset(5, 1000, shape.features, shape.classes); }

// Rank r's micro-step m of step s: rows ((s·M + m)·R + r)·batch onward.
inline void ReferenceBatch(const SyntheticDataset& data, const ReferenceRun& run, int rank, int step, int micro,
                           float* x, int32_t* labels) {
  const int first = ((step * run.micro_steps + micro) * run.ranks + rank) * run.batch;
  for (int row = 0; row < run.batch; ++row) {
    data.Sample(first + row, x + static_cast<size_t>(row * run.shape.features), labels + row);
  }
}

inline TrainerOptions ReferenceSgd() {
  TrainerOptions options;
  options.optimizer = trainer::OptimizerKind::kSgd;
  options.momentum = 0.9;
  return options;
}

inline std::vector<float> TrainOnOneDevice(const ReferenceRun& run) {
  std::unique_ptr<ComputeDevice> device = trainer::MakeCpuDevice(1);
  Result<trainer::Mlp> model = trainer::Mlp::Create(*device, run.shape, run.batch, run.seed);
  EXPECT_TRUE(model.ok());
  Result<trainer::Optimizer> optimizer = trainer::Optimizer::Create(*device, ReferenceSgd(), model->parameter_count());
  EXPECT_TRUE(optimizer.ok());
  const SyntheticDataset data = ReferenceData(run.shape);
  std::vector<float> x(static_cast<size_t>(run.batch * run.shape.features));
  std::vector<int32_t> labels(static_cast<size_t>(run.batch));
  Result<float*> x_d = device->AllocateFloats(x.size());
  Result<int32_t*> labels_d = device->AllocateLabels(labels.size());
  const auto none = [](int) { return Status::Ok(); };
  const float scale = 1.0f / static_cast<float>(run.micro_steps * run.ranks);
  for (int step = 0; step < run.steps; ++step) {
    bool first = true;
    for (int micro = 0; micro < run.micro_steps; ++micro) {
      for (int rank = 0; rank < run.ranks; ++rank) {
        ReferenceBatch(data, run, rank, step, micro, x.data(), labels.data());
        EXPECT_TRUE(device->CopyToDevice(x.data(), *x_d, x.size()).ok());
        EXPECT_TRUE(device->CopyLabelsToDevice(labels.data(), *labels_d, labels.size()).ok());
        EXPECT_TRUE(model->Forward(*x_d, *labels_d).ok());
        EXPECT_TRUE(model->Backward(*x_d, *labels_d, scale, !first, none).ok());
        first = false;
      }
    }
    if (run.clip > 0) {
      EXPECT_TRUE(trainer::ClipGradientNorm(*device, model->grads(), model->parameter_count(), run.clip).ok());
    }
    EXPECT_TRUE(optimizer->Step(model->params(), model->grads(), run.lr).ok());
    (void)device->TakeLoss();
  }
  std::vector<float> params(model->parameter_count());
  EXPECT_TRUE(device->CopyToHost(model->params(), params.data(), params.size()).ok());
  return params;
}

}  // namespace rankscope::testing
