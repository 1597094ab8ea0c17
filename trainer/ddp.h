// The data-parallel engine, as PyTorch's DistributedDataParallel does it: gradients go into
// buckets in reverse parameter order (first bucket capped at 1 MiB, the rest at 25 MiB by
// default); during the backward pass a bucket's all-reduce starts as soon as its last
// gradient is ready, beside the remaining backward compute; the results are averaged and
// copied back before the optimizer step.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "base/status.h"
#include "kernels/cpu_kernels.h"
#include "trainer/collectives.h"
#include "trainer/device.h"
#include "trainer/model.h"

namespace rankscope::trainer {

// Parameter indices per bucket: parameters taken in reverse order, a bucket closed as soon
// as its size reaches its cap (so it may exceed the cap by its last parameter), the first
// bucket's cap first_cap_bytes, every later one's cap_bytes. PyTorch's
// _compute_bucket_assignment_by_size with one dtype and device.
std::vector<std::vector<int>> AssignBuckets(std::span<const Parameter> parameters, size_t cap_bytes,
                                            size_t first_cap_bytes);

struct DdpOptions {
  size_t bucket_cap_bytes = size_t{25} << 20;
  size_t first_bucket_cap_bytes = size_t{1} << 20;
  bool overlap = true;  // false: every all-reduce starts after the backward pass
};

class DdpEngine {
 public:
  static Result<DdpEngine> Create(ComputeDevice& device, Collectives& collectives, Mlp& model,
                                  const DdpOptions& options);

  // Rank 0's parameters everywhere (DDP does this at construction).
  Status BroadcastParameters();
  // Before each micro-step's backward pass; sync is false on all but the last micro-step
  // of gradient accumulation (DDP's no_sync()).
  void BeginBackward(bool sync);
  // The model's gradient hook.
  Status OnGradientReady(int parameter);
  // After the backward pass: starts what has not started, waits, averages, copies back.
  Status FinishBackward();
  // A planted failure (--mismatch-rank): the next synchronizing backward pass broadcasts
  // its first bucket from rank 0 where the other ranks all-reduce it. The broadcast goes
  // through the same collectives, so it gets the number the all-reduce would have had, and
  // it blocks (Collectives::Broadcast) until it returns or fails.
  void PlantMismatch() { mismatch_planted_ = true; }

  size_t bucket_count() const { return buckets_.size(); }
  // Bytes per bucket, in launch order.
  std::vector<size_t> BucketBytes() const;

 private:
  struct Bucket {
    std::vector<int> parameters;
    std::vector<kernels::ConstSpan> gradients;
    std::vector<kernels::MutableSpan> gradient_targets;
    size_t count = 0;
    float* buffer = nullptr;
    int pending = 0;
  };

  DdpEngine(ComputeDevice& device, Collectives& collectives, Mlp& model, const DdpOptions& options)
      : device_(&device), collectives_(&collectives), model_(&model), options_(options) {}
  Status Launch(size_t bucket);

  ComputeDevice* device_;
  Collectives* collectives_;
  Mlp* model_;
  DdpOptions options_;
  std::vector<Bucket> buckets_;
  std::vector<int> bucket_of_parameter_;
  bool sync_ = true;
  size_t next_launch_ = 0;
  bool mismatch_planted_ = false;
};

}  // namespace rankscope::trainer
