// docs/metrics.md §1 on hand-built rank traces.
#include "analyzer/classify.h"

#include <gtest/gtest.h>

#include "tests/trace_builder.h"

namespace rankscope::analyzer {
namespace {

using testing::TraceBuilder;

std::vector<Interval> Of(const IntervalSet& set) { return set.intervals(); }

TEST(ClassifyKernelName, FollowsMetricsSectionOne) {
  const ClassifyOptions none;
  EXPECT_EQ(ClassifyKernelName("ncclDevKernel_AllReduce_Sum_f32_RING_LL", none), ActivityClass::kComm);
  EXPECT_EQ(ClassifyKernelName("ncclKernel_Broadcast", none), ActivityClass::kComm);
  EXPECT_EQ(ClassifyKernelName("ncclSymkDevKernel_AllGather", none), ActivityClass::kComm);
  EXPECT_EQ(ClassifyKernelName("NCCL_custom", none), ActivityClass::kComm);  // any case
  EXPECT_EQ(ClassifyKernelName("Memcpy DtoD (Device -> Device)", none), ActivityClass::kMemory);
  EXPECT_EQ(ClassifyKernelName("Memset (Device)", none), ActivityClass::kMemory);
  EXPECT_EQ(ClassifyKernelName("ampere_sgemm_128x64_tn", none), ActivityClass::kCompute);
  EXPECT_EQ(ClassifyKernelName("deep_ep::dispatch", none), ActivityClass::kCompute);
}

TEST(ClassifyKernelName, UserPatternsOverrideAndCommWins) {
  ClassifyOptions options;
  options.comm_patterns = {"deep_ep::"};
  options.compute_patterns = {"nccl_fused_gemm", "DISPATCH"};
  EXPECT_EQ(ClassifyKernelName("deep_ep::dispatch", options), ActivityClass::kComm);  // both match: comm
  EXPECT_EQ(ClassifyKernelName("my_nccl_fused_gemm", options), ActivityClass::kCompute);
  EXPECT_EQ(ClassifyKernelName("ncclDevKernel_AllReduce", options), ActivityClass::kComm);
}

TEST(ClassifyRank, GpuKernelsAndCopiesPerDevice) {
  TraceBuilder b;
  const trace::LaneId gpu0_compute = b.Lane(trace::LaneKind::kGpuStream, 0);
  const trace::LaneId gpu0_comm = b.Lane(trace::LaneKind::kGpuStream, 0);
  const trace::LaneId gpu1 = b.Lane(trace::LaneKind::kGpuStream, 1);
  b.Kernel(gpu0_compute, "gemm", 0, 100);
  b.Kernel(gpu0_compute, "gelu", 90, 150);  // overlapping compute merges into one interval
  b.Kernel(gpu0_comm, "ncclDevKernel_AllReduce", 120, 300);
  b.Copy(gpu0_comm, 400, 450);
  b.Kernel(gpu1, "gemm", 10, 20);
  const std::vector<DeviceActivity> devices = ClassifyRank(b.trace(), {});
  ASSERT_EQ(devices.size(), 2u);
  EXPECT_EQ(devices[0].device, 0);
  EXPECT_EQ(Of(devices[0].compute), (std::vector<Interval>{{0, 150}}));
  EXPECT_EQ(Of(devices[0].comm), (std::vector<Interval>{{120, 300}}));
  EXPECT_EQ(Of(devices[0].memory), (std::vector<Interval>{{400, 450}}));
  // Busy = [0,300) ∪ [400,450) = 300 + 50; extent [0, 450).
  EXPECT_EQ(devices[0].Busy().Length(), 350);
  EXPECT_EQ(devices[0].Extent(), (Interval{0, 450}));
  EXPECT_EQ(devices[1].device, 1);
  EXPECT_EQ(Of(devices[1].compute), (std::vector<Interval>{{10, 20}}));
}

TEST(ClassifyRank, CpuBackendRangesByCategoryNameAndAnnotationsIgnored) {
  TraceBuilder b;
  const trace::LaneId compute_thread = b.Lane(trace::LaneKind::kCpuThread, -1);
  const trace::LaneId comm_thread = b.Lane(trace::LaneKind::kCpuThread, -1);
  b.Meta("nvtx.category.rankscope.1", "compute");
  b.Meta("nvtx.category.rankscope.2", "comm");
  b.Meta("nvtx.category.other.1", "io");  // same id, other domain: not compute
  b.Range(compute_thread, "rankscope", 0, "step", 0, 1000);        // annotation
  b.Range(compute_thread, "rankscope", 0, "backward", 100, 600);   // annotation
  b.Range(compute_thread, "rankscope", 1, "linear_backward_weight", 100, 300);
  b.Range(compute_thread, "rankscope", 1, "linear_backward_data", 300, 500);
  b.Range(comm_thread, "rankscope", 2, "allreduce", 250, 700);
  b.Range(comm_thread, "other", 1, "read", 800, 900);              // category "io": annotation
  const std::vector<DeviceActivity> devices = ClassifyRank(b.trace(), {});
  ASSERT_EQ(devices.size(), 1u);
  EXPECT_EQ(devices[0].device, kCpuDevice);
  EXPECT_EQ(Of(devices[0].compute), (std::vector<Interval>{{100, 500}}));
  EXPECT_EQ(Of(devices[0].comm), (std::vector<Interval>{{250, 700}}));
  EXPECT_TRUE(devices[0].memory.empty());
  // Overlap |C ∩ M| = [250,500) = 250; exposed |M \ C| = [500,700) = 200.
  EXPECT_EQ(Intersection(devices[0].compute, devices[0].comm).Length(), 250);
  EXPECT_EQ(Difference(devices[0].comm, devices[0].compute).Length(), 200);
}

TEST(ClassifyRank, DefaultDomainCategoryAndLaneRoles) {
  TraceBuilder b;
  const trace::LaneId thread = b.Lane(trace::LaneKind::kCpuThread, -1);
  const trace::LaneId comm_role = b.Lane(trace::LaneKind::kCpuThread, -1, trace::LaneRole::kComm);
  b.Meta("nvtx.category..3", "compute");  // the default domain has an empty name
  b.Range(thread, "", 3, "work", 0, 10);
  b.Range(comm_role, "", 0, "send", 5, 15);
  const std::vector<DeviceActivity> devices = ClassifyRank(b.trace(), {});
  ASSERT_EQ(devices.size(), 1u);
  EXPECT_EQ(Of(devices[0].compute), (std::vector<Interval>{{0, 10}}));
  EXPECT_EQ(Of(devices[0].comm), (std::vector<Interval>{{5, 15}}));
}

TEST(ClassifyRank, NoDeviceActivityGivesNoDevices) {
  TraceBuilder b;
  const trace::LaneId thread = b.Lane(trace::LaneKind::kCpuThread, -1);
  b.Range(thread, "app", 0, "step", 0, 10);
  EXPECT_TRUE(ClassifyRank(b.trace(), {}).empty());
}

}  // namespace
}  // namespace rankscope::analyzer
