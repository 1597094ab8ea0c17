// The default names records get, shared by the collector and the importers.
#include <gtest/gtest.h>
#include "trace/events.h"

namespace rankscope::trace {
namespace {

TEST(EventNames, WithoutApiVersionDropsOnlyATrailingVersion) {
  EXPECT_EQ(WithoutApiVersion("cudaLaunchKernel_v7000"), "cudaLaunchKernel");
  EXPECT_EQ(WithoutApiVersion("cudaStreamSynchronize_v3020"), "cudaStreamSynchronize");
  EXPECT_EQ(WithoutApiVersion("cuMemcpyHtoD_v2"), "cuMemcpyHtoD");
  EXPECT_EQ(WithoutApiVersion("cuLaunchKernel"), "cuLaunchKernel");
  // Not a version: nothing after "_v", letters after it, or "_v" inside the name.
  EXPECT_EQ(WithoutApiVersion("cudaFoo_v"), "cudaFoo_v");
  EXPECT_EQ(WithoutApiVersion("cudaFoo_v2a"), "cudaFoo_v2a");
  EXPECT_EQ(WithoutApiVersion("cuda_vector_add"), "cuda_vector_add");
  EXPECT_EQ(WithoutApiVersion(""), "");
}

TEST(EventNames, DefaultNamesFollowNsightSystems) {
  EXPECT_EQ(DefaultName(CopyKind::kHostToDevice), "Memcpy HtoD");
  EXPECT_EQ(DefaultName(CopyKind::kPeerToPeer), "Memcpy PtoP");
  EXPECT_EQ(DefaultName(CopyKind::kUnknown), "Memcpy");
  EXPECT_EQ(DefaultName(SyncKind::kStreamSynchronize), "Stream synchronize");
  EXPECT_EQ(DefaultName(SyncKind::kUnknown), "Synchronize");
  EXPECT_EQ(DefaultName(OverheadKind::kCuptiBufferFlush), "CUPTI buffer flush");
  EXPECT_EQ(DefaultName(OverheadKind::kUvmActivityInit), "UVM activity init");
}

TEST(EventNames, KindsOutsideTheEnumGetTheGenericName) {
  // A value read from a newer file than this build knows.
  EXPECT_EQ(DefaultName(static_cast<CopyKind>(200)), "Memcpy");
  EXPECT_EQ(DefaultName(static_cast<SyncKind>(200)), "Synchronize");
  EXPECT_EQ(DefaultName(static_cast<OverheadKind>(200)), "Profiler overhead");
}

TEST(MemoryCounterNames, NameAndParseAreInverse) {
  EXPECT_EQ(MemoryCounterName(kCudaMemorySource, CudaMemoryCategory(MemoryKind::kDevice, 0)),
            "cuda memory: device (gpu 0)");
  EXPECT_EQ(CudaMemoryCategory(MemoryKind::kManagedStatic, -1), "managed static");
  EXPECT_EQ(CudaMemoryCategory(static_cast<MemoryKind>(200), 3), "unknown (gpu 3)");
  const auto parsed = ParseMemoryCounterName("pytorch reserved memory: cuda:1");
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->source, kPytorchReservedSource);
  EXPECT_EQ(parsed->category, "cuda:1");
  EXPECT_FALSE(ParseMemoryCounterName("memory: parameters").has_value());  // no source
  EXPECT_FALSE(ParseMemoryCounterName("cuda memory: ").has_value());       // no category
  EXPECT_FALSE(ParseMemoryCounterName("gpu utilization").has_value());
}

TEST(LaneIdentity, CountersDifferByNameOtherLanesDoNot) {
  Lane a, b;
  a.kind = b.kind = LaneKind::kCounter;
  a.name = "cuda memory: device (gpu 0)";
  b.name = "cuda memory: pinned (gpu 0)";
  EXPECT_FALSE(a.SameIdentity(b));
  a.kind = b.kind = LaneKind::kCpuThread;  // a thread renamed is the same thread
  EXPECT_TRUE(a.SameIdentity(b));
}

}  // namespace
}  // namespace rankscope::trace
