// The DDP engine: bucket assignment, when each bucket's all-reduce starts relative to the
// backward pass (overlap, no overlap, no_sync), and the averaged gradients it leaves behind.
// The collectives are a fake that records every call; the compute is the CPU device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "trainer/collectives.h"
#include "trainer/ddp.h"
#include "trainer/device.h"
#include "trainer/model.h"
#include "trainer/synthetic_data.h"

namespace rankscope::trainer {
namespace {

std::vector<Parameter> ParametersOfSizes(const std::vector<size_t>& sizes) {
  std::vector<Parameter> parameters;
  size_t offset = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    parameters.push_back({"p" + std::to_string(i), offset, sizes[i]});
    offset += sizes[i];
  }
  return parameters;
}

using Buckets = std::vector<std::vector<int>>;

TEST(AssignBucketsTest, ReverseOrderFirstCapThenCap) {
  // Sizes in floats 10, 20, 30, 40 = 40, 80, 120, 160 bytes; first cap 100, later caps 150.
  // Reverse order: p3 (160 ≥ 100) closes bucket 0 alone; p2 (120 < 150) + p1 (80) = 200 ≥ 150
  // closes bucket 1, over the cap by its last parameter; p0 (40) is left over as bucket 2.
  const std::vector<Parameter> parameters = ParametersOfSizes({10, 20, 30, 40});
  EXPECT_EQ(AssignBuckets(parameters, 150, 100), (Buckets{{3}, {2, 1}, {0}}));
}

TEST(AssignBucketsTest, FirstCapIsOnlyForTheFirstBucket) {
  // Six parameters of 4 floats (16 bytes). First cap 16: {5} alone. Later cap 48: three
  // parameters per bucket, the cap reached exactly (≥ closes): {4, 3, 2}, then {1, 0} left.
  const std::vector<Parameter> parameters = ParametersOfSizes({4, 4, 4, 4, 4, 4});
  EXPECT_EQ(AssignBuckets(parameters, 48, 16), (Buckets{{5}, {4, 3, 2}, {1, 0}}));
  // With the first cap as large as the others the first bucket is as full as the others.
  EXPECT_EQ(AssignBuckets(parameters, 48, 48), (Buckets{{5, 4, 3}, {2, 1, 0}}));
}

TEST(AssignBucketsTest, ParameterLargerThanTheCapGetsItsOwnBucket) {
  // Sizes 4, 1000, 2, 2 floats = 16, 4000, 8, 8 bytes; first cap 16, cap 40.
  // p3 + p2 = 16 ≥ 16 closes bucket 0; p1 (4000 ≥ 40) arrives at an empty bucket and closes it
  // alone; p0 (16 < 40) is left over.
  const std::vector<Parameter> parameters = ParametersOfSizes({4, 1000, 2, 2});
  EXPECT_EQ(AssignBuckets(parameters, 40, 16), (Buckets{{3, 2}, {1}, {0}}));
}

TEST(AssignBucketsTest, SmallModelsGetOneBucket) {
  EXPECT_EQ(AssignBuckets(ParametersOfSizes({3}), size_t{25} << 20, size_t{1} << 20), (Buckets{{0}}));
  EXPECT_EQ(AssignBuckets(ParametersOfSizes({3, 5, 7}), size_t{25} << 20, size_t{1} << 20),
            (Buckets{{2, 1, 0}}));
  EXPECT_TRUE(AssignBuckets(ParametersOfSizes({}), 100, 100).empty());
}

// A Collectives that records what the engine asks for. WaitAll "reduces" every started
// bucket as if a second rank had contributed Other(bucket, i): summing like Gloo (averages()
// false) or averaging like NCCL (averages() true).
class FakeCollectives final : public Collectives {
 public:
  struct Call {
    int bucket = 0;
    float* data = nullptr;
    size_t count = 0;
    std::vector<float> sent;  // the data at the time of the call
  };

  explicit FakeCollectives(bool averaging = false) : averaging_(averaging) {}

  static float Other(int bucket, size_t i) {
    return 0.25f * static_cast<float>(bucket + 1) + 0.001f * static_cast<float>(i);
  }

  int rank() const override { return 0; }
  int size() const override { return 2; }
  Status Broadcast(float* data, size_t count, int root) override {
    broadcasts.push_back({root, data, count, std::vector<float>(data, data + count)});
    return Status::Ok();
  }
  Status StartAllReduce(int bucket, float* data, size_t count) override {
    calls.push_back({bucket, data, count, std::vector<float>(data, data + count)});
    if (!start_error.ok()) return start_error;
    return Status::Ok();
  }
  Status WaitAll() override {
    ++waits;
    for (size_t c = reduced_; c < calls.size(); ++c) {
      Call& call = calls[c];
      for (size_t i = 0; i < call.count; ++i) {
        const float sum = call.data[i] + Other(call.bucket, i);
        call.data[i] = averaging_ ? sum / 2.0f : sum;
      }
    }
    reduced_ = calls.size();
    return wait_error;
  }
  bool averages() const override { return averaging_; }
  // The DDP engine starts nothing else.
  Result<Ticket> StartAllGather(int, const float*, float*, size_t) override { return Unexpected("all-gather"); }
  Result<Ticket> StartReduceScatter(int, float*, size_t) override { return Unexpected("reduce-scatter"); }
  Status Wait(Ticket) override { return Unexpected("wait"); }
  Status SendRecv(const Outgoing&, const Incoming&) override { return Unexpected("send or receive"); }
  static Status Unexpected(const char* what) { return InternalError(std::string("DDP called ") + what); }

  std::vector<Call> calls;
  std::vector<Call> broadcasts;  // bucket holds the root
  int waits = 0;
  Status start_error;
  Status wait_error;

 private:
  bool averaging_;
  size_t reduced_ = 0;
};

// features 5, width 7, depth 2, classes 3: parameters (floats) w0 35, b0 7, w1 49, b1 7,
// w2 21, b2 3. With a first cap of 64 bytes and a cap of 200 bytes, in reverse order:
// b2 12 B + w2 84 B = 96 ≥ 64 → bucket 0 {5, 4}; b1 28 + w1 196 = 224 ≥ 200 → bucket 1 {3, 2};
// b0 28 + w0 140 = 168 → bucket 2 {1, 0}.
constexpr int kBatch = 4;
const Buckets kExpectedBuckets = {{5, 4}, {3, 2}, {1, 0}};

class DdpEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    device_ = MakeCpuDevice(1);
    ModelShape shape;
    shape.features = 5;
    shape.width = 7;
    shape.depth = 2;
    shape.classes = 3;
    Result<Mlp> model = Mlp::Create(*device_, shape, kBatch, 1234);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    model_ = std::make_unique<Mlp>(std::move(model).value());
    ASSERT_EQ(model_->parameters().size(), 6u);

    const SyntheticDataset dataset(5, 64, shape.features, shape.classes);
    std::vector<float> x(kBatch * 5);
    std::vector<int32_t> labels(kBatch);
    for (int i = 0; i < kBatch; ++i) dataset.Sample(i, &x[static_cast<size_t>(i) * 5], &labels[static_cast<size_t>(i)]);
    Result<float*> device_x = device_->AllocateFloats(x.size());
    Result<int32_t*> device_labels = device_->AllocateLabels(labels.size());
    ASSERT_TRUE(device_x.ok() && device_labels.ok());
    x_ = *device_x;
    labels_ = *device_labels;
    ASSERT_TRUE(device_->CopyToDevice(x.data(), x_, x.size()).ok());
    ASSERT_TRUE(device_->CopyLabelsToDevice(labels.data(), labels_, labels.size()).ok());
  }

  DdpOptions SmallBuckets(bool overlap) const {
    DdpOptions options;
    options.first_bucket_cap_bytes = 64;
    options.bucket_cap_bytes = 200;
    options.overlap = overlap;
    return options;
  }

  std::unique_ptr<DdpEngine> MakeEngine(FakeCollectives& fake, const DdpOptions& options) {
    Result<DdpEngine> engine = DdpEngine::Create(*device_, fake, *model_, options);
    EXPECT_TRUE(engine.ok()) << engine.status().ToString();
    if (!engine.ok()) return nullptr;
    return std::make_unique<DdpEngine>(std::move(engine).value());
  }

  std::vector<float> Grads() {
    std::vector<float> host(model_->parameter_count());
    EXPECT_TRUE(device_->CopyToHost(model_->grads(), host.data(), host.size()).ok());
    return host;
  }

  std::vector<float> GradOf(const std::vector<float>& all, int parameter) const {
    const Parameter& p = model_->parameters()[static_cast<size_t>(parameter)];
    return std::vector<float>(all.begin() + static_cast<std::ptrdiff_t>(p.offset),
                              all.begin() + static_cast<std::ptrdiff_t>(p.offset + p.size));
  }

  // The bucket's gradients flattened in bucket order.
  std::vector<float> Flat(const std::vector<float>& all, const std::vector<int>& bucket) const {
    std::vector<float> flat;
    for (int p : bucket) {
      const std::vector<float> part = GradOf(all, p);
      flat.insert(flat.end(), part.begin(), part.end());
    }
    return flat;
  }

  // Local gradients of one forward + backward pass without any engine.
  std::vector<float> LocalGrads() {
    EXPECT_TRUE(model_->Forward(x_, labels_).ok());
    EXPECT_TRUE(model_->Backward(x_, labels_, 1.0f, false, [](int) { return Status::Ok(); }).ok());
    return Grads();
  }

  std::unique_ptr<ComputeDevice> device_;
  std::unique_ptr<Mlp> model_;
  float* x_ = nullptr;
  int32_t* labels_ = nullptr;
};

TEST_F(DdpEngineTest, BucketsOfTheModel) {
  FakeCollectives fake;
  std::unique_ptr<DdpEngine> engine = MakeEngine(fake, SmallBuckets(true));
  ASSERT_NE(engine, nullptr);
  EXPECT_EQ(AssignBuckets(model_->parameters(), 200, 64), kExpectedBuckets);
  EXPECT_EQ(engine->bucket_count(), 3u);
  EXPECT_EQ(engine->BucketBytes(), (std::vector<size_t>{96, 224, 168}));

  FakeCollectives fake_default;
  std::unique_ptr<DdpEngine> one = MakeEngine(fake_default, DdpOptions{});
  ASSERT_NE(one, nullptr);
  EXPECT_EQ(one->bucket_count(), 1u);
  EXPECT_EQ(one->BucketBytes(), (std::vector<size_t>{model_->parameter_count() * sizeof(float)}));
}

TEST_F(DdpEngineTest, BroadcastsTheParametersFromRankZero) {
  FakeCollectives fake;
  std::unique_ptr<DdpEngine> engine = MakeEngine(fake, SmallBuckets(true));
  ASSERT_NE(engine, nullptr);
  ASSERT_TRUE(engine->BroadcastParameters().ok());
  ASSERT_EQ(fake.broadcasts.size(), 1u);
  EXPECT_EQ(fake.broadcasts[0].bucket, 0);  // the root
  EXPECT_EQ(fake.broadcasts[0].data, model_->params());
  EXPECT_EQ(fake.broadcasts[0].count, model_->parameter_count());
  EXPECT_TRUE(fake.calls.empty());
}

TEST_F(DdpEngineTest, OverlapStartsEachBucketDuringBackwardInOrder) {
  const std::vector<float> local = LocalGrads();
  FakeCollectives fake;
  std::unique_ptr<DdpEngine> engine = MakeEngine(fake, SmallBuckets(true));
  ASSERT_NE(engine, nullptr);

  ASSERT_TRUE(model_->Forward(x_, labels_).ok());
  engine->BeginBackward(true);
  std::vector<int> hook_order;
  std::vector<size_t> started_after_hook;  // the fake's call count right after each hook
  const auto hook = [&](int parameter) {
    hook_order.push_back(parameter);
    Status status = engine->OnGradientReady(parameter);
    started_after_hook.push_back(fake.calls.size());
    return status;
  };
  ASSERT_TRUE(model_->Backward(x_, labels_, 1.0f, false, hook).ok());
  ASSERT_EQ(hook_order, (std::vector<int>{5, 4, 3, 2, 1, 0}));
  // Bucket 0 starts when w2 (index 4) is ready, bucket 1 with w1, bucket 2 with w0: all of
  // them before Backward returns, and nothing is waited for yet.
  EXPECT_EQ(started_after_hook, (std::vector<size_t>{0, 1, 1, 2, 2, 3}));
  ASSERT_EQ(fake.calls.size(), 3u);
  EXPECT_EQ(fake.waits, 0);
  for (size_t b = 0; b < 3; ++b) {
    EXPECT_EQ(fake.calls[b].bucket, static_cast<int>(b));
    // What was sent is the bucket's local gradients, flattened in bucket order.
    EXPECT_EQ(fake.calls[b].sent, Flat(local, kExpectedBuckets[b])) << "bucket " << b;
  }

  ASSERT_TRUE(engine->FinishBackward().ok());
  EXPECT_EQ(fake.calls.size(), 3u);  // nothing started twice
  EXPECT_EQ(fake.waits, 1);
  // Every gradient is now (local + other rank's) / 2.
  const std::vector<float> grads = Grads();
  for (size_t b = 0; b < 3; ++b) {
    const std::vector<float> sent = Flat(local, kExpectedBuckets[b]);
    const std::vector<float> now = Flat(grads, kExpectedBuckets[b]);
    ASSERT_EQ(now.size(), sent.size());
    for (size_t i = 0; i < sent.size(); ++i) {
      EXPECT_FLOAT_EQ(now[i], (sent[i] + FakeCollectives::Other(static_cast<int>(b), i)) / 2.0f)
          << "bucket " << b << " element " << i;
    }
  }
}

TEST_F(DdpEngineTest, AveragingBackendIsNotDividedAgain) {
  const std::vector<float> local = LocalGrads();
  FakeCollectives fake(/*averaging=*/true);
  std::unique_ptr<DdpEngine> engine = MakeEngine(fake, SmallBuckets(true));
  ASSERT_NE(engine, nullptr);
  ASSERT_TRUE(model_->Forward(x_, labels_).ok());
  engine->BeginBackward(true);
  ASSERT_TRUE(model_->Backward(x_, labels_, 1.0f, false, [&](int p) { return engine->OnGradientReady(p); }).ok());
  ASSERT_TRUE(engine->FinishBackward().ok());
  const std::vector<float> grads = Grads();
  for (size_t b = 0; b < 3; ++b) {
    const std::vector<float> sent = Flat(local, kExpectedBuckets[b]);
    const std::vector<float> now = Flat(grads, kExpectedBuckets[b]);
    for (size_t i = 0; i < sent.size(); ++i) {
      EXPECT_FLOAT_EQ(now[i], (sent[i] + FakeCollectives::Other(static_cast<int>(b), i)) / 2.0f);
    }
  }
}

TEST_F(DdpEngineTest, WithoutOverlapEverythingStartsInFinishBackward) {
  const std::vector<float> local = LocalGrads();
  FakeCollectives fake;
  std::unique_ptr<DdpEngine> engine = MakeEngine(fake, SmallBuckets(false));
  ASSERT_NE(engine, nullptr);
  ASSERT_TRUE(model_->Forward(x_, labels_).ok());
  engine->BeginBackward(true);
  size_t max_started_during_backward = 0;
  const auto hook = [&](int parameter) {
    Status status = engine->OnGradientReady(parameter);
    max_started_during_backward = std::max(max_started_during_backward, fake.calls.size());
    return status;
  };
  ASSERT_TRUE(model_->Backward(x_, labels_, 1.0f, false, hook).ok());
  EXPECT_EQ(max_started_during_backward, 0u);
  EXPECT_TRUE(fake.calls.empty());
  ASSERT_TRUE(engine->FinishBackward().ok());
  ASSERT_EQ(fake.calls.size(), 3u);
  EXPECT_EQ(fake.waits, 1);
  const std::vector<float> grads = Grads();
  for (size_t b = 0; b < 3; ++b) {
    EXPECT_EQ(fake.calls[b].bucket, static_cast<int>(b));
    const std::vector<float> sent = Flat(local, kExpectedBuckets[b]);
    EXPECT_EQ(fake.calls[b].sent, sent);
    const std::vector<float> now = Flat(grads, kExpectedBuckets[b]);
    for (size_t i = 0; i < sent.size(); ++i) {
      EXPECT_FLOAT_EQ(now[i], (sent[i] + FakeCollectives::Other(static_cast<int>(b), i)) / 2.0f);
    }
  }
}

// --mismatch-rank: the next synchronizing pass broadcasts its first bucket from rank 0
// instead of all-reducing it, once; the other buckets are all-reduced as always.
TEST_F(DdpEngineTest, APlantedMismatchBroadcastsTheFirstBucketOfTheNextSyncPassOnce) {
  const std::vector<float> local = LocalGrads();
  FakeCollectives fake;
  std::unique_ptr<DdpEngine> engine = MakeEngine(fake, SmallBuckets(true));
  ASSERT_NE(engine, nullptr);
  const auto hook = [&](int parameter) { return engine->OnGradientReady(parameter); };
  engine->PlantMismatch();
  // A no_sync micro-step issues nothing, so the mismatch waits for the synchronizing one.
  ASSERT_TRUE(model_->Forward(x_, labels_).ok());
  engine->BeginBackward(false);
  ASSERT_TRUE(model_->Backward(x_, labels_, 1.0f, false, hook).ok());
  ASSERT_TRUE(engine->FinishBackward().ok());
  EXPECT_TRUE(fake.broadcasts.empty());
  EXPECT_TRUE(fake.calls.empty());

  ASSERT_TRUE(model_->Forward(x_, labels_).ok());
  engine->BeginBackward(true);
  ASSERT_TRUE(model_->Backward(x_, labels_, 1.0f, false, hook).ok());
  ASSERT_TRUE(engine->FinishBackward().ok());
  ASSERT_EQ(fake.broadcasts.size(), 1u);
  EXPECT_EQ(fake.broadcasts[0].bucket, 0);  // the root
  EXPECT_EQ(fake.broadcasts[0].sent, Flat(local, kExpectedBuckets[0]));
  ASSERT_EQ(fake.calls.size(), 2u);
  EXPECT_EQ(fake.calls[0].bucket, 1);
  EXPECT_EQ(fake.calls[1].bucket, 2);

  // Once: the next pass all-reduces bucket 0 again, from the buffer the broadcast sent.
  ASSERT_TRUE(model_->Forward(x_, labels_).ok());
  engine->BeginBackward(true);
  ASSERT_TRUE(model_->Backward(x_, labels_, 1.0f, false, hook).ok());
  ASSERT_TRUE(engine->FinishBackward().ok());
  EXPECT_EQ(fake.broadcasts.size(), 1u);
  ASSERT_EQ(fake.calls.size(), 5u);
  EXPECT_EQ(fake.calls[2].bucket, 0);
  EXPECT_EQ(fake.calls[2].data, fake.broadcasts[0].data);
}

TEST_F(DdpEngineTest, NoSyncStartsNothingAndLeavesGradientsLocal) {
  const std::vector<float> local = LocalGrads();
  FakeCollectives fake;
  std::unique_ptr<DdpEngine> engine = MakeEngine(fake, SmallBuckets(true));
  ASSERT_NE(engine, nullptr);
  ASSERT_TRUE(model_->Forward(x_, labels_).ok());
  engine->BeginBackward(false);
  ASSERT_TRUE(model_->Backward(x_, labels_, 1.0f, false, [&](int p) { return engine->OnGradientReady(p); }).ok());
  EXPECT_TRUE(fake.calls.empty());
  ASSERT_TRUE(engine->FinishBackward().ok());
  EXPECT_TRUE(fake.calls.empty());
  EXPECT_EQ(fake.waits, 0);
  EXPECT_EQ(Grads(), local);

  // The next, synchronized micro-step accumulates onto them and reduces the sum.
  ASSERT_TRUE(model_->Forward(x_, labels_).ok());
  engine->BeginBackward(true);
  ASSERT_TRUE(model_->Backward(x_, labels_, 1.0f, true, [&](int p) { return engine->OnGradientReady(p); }).ok());
  ASSERT_EQ(fake.calls.size(), 3u);
  for (size_t b = 0; b < 3; ++b) {
    const std::vector<float> sent = Flat(local, kExpectedBuckets[b]);
    ASSERT_EQ(fake.calls[b].sent.size(), sent.size());
    for (size_t i = 0; i < sent.size(); ++i) EXPECT_FLOAT_EQ(fake.calls[b].sent[i], 2.0f * sent[i]);
  }
  ASSERT_TRUE(engine->FinishBackward().ok());
  EXPECT_EQ(fake.waits, 1);
}

TEST_F(DdpEngineTest, BucketsStartStrictlyInIndexOrder) {
  // Gradients arriving out of order (bucket 2's first) must not start bucket 2 before 0 and 1.
  FakeCollectives fake;
  std::unique_ptr<DdpEngine> engine = MakeEngine(fake, SmallBuckets(true));
  ASSERT_NE(engine, nullptr);
  engine->BeginBackward(true);
  ASSERT_TRUE(engine->OnGradientReady(0).ok());
  ASSERT_TRUE(engine->OnGradientReady(1).ok());
  EXPECT_TRUE(fake.calls.empty());
  ASSERT_TRUE(engine->OnGradientReady(3).ok());
  ASSERT_TRUE(engine->OnGradientReady(2).ok());
  EXPECT_TRUE(fake.calls.empty());
  ASSERT_TRUE(engine->OnGradientReady(5).ok());
  EXPECT_TRUE(fake.calls.empty());
  ASSERT_TRUE(engine->OnGradientReady(4).ok());
  ASSERT_EQ(fake.calls.size(), 3u);
  EXPECT_EQ(fake.calls[0].bucket, 0);
  EXPECT_EQ(fake.calls[1].bucket, 1);
  EXPECT_EQ(fake.calls[2].bucket, 2);
  ASSERT_TRUE(engine->FinishBackward().ok());

  // A new backward pass starts counting afresh.
  engine->BeginBackward(true);
  ASSERT_TRUE(engine->OnGradientReady(5).ok());
  ASSERT_TRUE(engine->OnGradientReady(4).ok());
  ASSERT_EQ(fake.calls.size(), 4u);
  EXPECT_EQ(fake.calls[3].bucket, 0);
}

TEST_F(DdpEngineTest, FinishBackwardWithMissingGradientsIsAnError) {
  FakeCollectives fake;
  std::unique_ptr<DdpEngine> engine = MakeEngine(fake, SmallBuckets(false));
  ASSERT_NE(engine, nullptr);
  engine->BeginBackward(true);
  for (int p : {5, 4, 3, 2, 1}) ASSERT_TRUE(engine->OnGradientReady(p).ok());
  const Status status = engine->FinishBackward();
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(status.code(), StatusCode::kInternal);
  EXPECT_NE(status.message().find("bucket 2"), std::string::npos) << status.message();
}

TEST_F(DdpEngineTest, CollectiveErrorsReachTheCaller) {
  FakeCollectives fake;
  fake.start_error = IoError("peer went away");
  std::unique_ptr<DdpEngine> engine = MakeEngine(fake, SmallBuckets(true));
  ASSERT_NE(engine, nullptr);
  ASSERT_TRUE(model_->Forward(x_, labels_).ok());
  engine->BeginBackward(true);
  const Status status =
      model_->Backward(x_, labels_, 1.0f, false, [&](int p) { return engine->OnGradientReady(p); });
  EXPECT_EQ(status.code(), StatusCode::kIo);
  EXPECT_EQ(fake.calls.size(), 1u);  // the backward pass stopped at the first failure

  FakeCollectives failing_wait;
  failing_wait.wait_error = Unavailable("timed out");
  std::unique_ptr<DdpEngine> other = MakeEngine(failing_wait, SmallBuckets(false));
  ASSERT_NE(other, nullptr);
  other->BeginBackward(true);
  for (int p : {5, 4, 3, 2, 1, 0}) ASSERT_TRUE(other->OnGradientReady(p).ok());
  EXPECT_EQ(other->FinishBackward().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace rankscope::trainer
