// The README's trace-store example, compiled and run, so the README cannot drift from
// the API.
#include <iostream>

#include <gtest/gtest.h>

#include "trace/reader.h"
#include "trace/run_dir.h"
#include "trace/writer.h"
#include "trace_test_util.h"

namespace rankscope::trace {
namespace {

TEST(ReadmeExample, WriteThenRead) {
  testing::TempDir dir;
  std::filesystem::create_directory(dir / "run");
  const auto path = (dir / "run" / "rank-0.sqlite").string();

  // --- as in README.md
  RankIdentity who{.run_id = GenerateRunId(), .rank = 0, .world_size = 2};
  auto writer = TraceWriter::Create(path, who);
  ASSERT_TRUE(writer.ok()) << writer.status().message();
  Lane stream{.kind = LaneKind::kGpuStream, .device = 0, .stream = 7};
  EventTables batch;
  KernelEvent k;
  k.lane = (*writer)->AddLane(stream);
  k.name = (*writer)->Intern("gemm_bf16");
  k.start_ns = 1'700'000'000'000'000'000;
  k.end_ns = k.start_ns + 42'000;
  batch.kernels.push_back(k);
  EXPECT_TRUE((*writer)->Submit(std::move(batch)));
  Status closed = (*writer)->Close();
  ASSERT_TRUE(closed.ok()) << closed.message();

  auto run = OpenRun(dir / "run");
  ASSERT_TRUE(run.ok()) << run.status().message();
  for (const std::string& line : run->Warnings()) std::cerr << line << "\n";
  EXPECT_EQ(run->missing_ranks, std::vector<int>{1});
  auto reader = TraceReader::Open(run->ranks[0].path);
  ASSERT_TRUE(reader.ok());
  auto window = (*reader)->ReadLaneRange(k.lane, k.start_ns, k.start_ns + 1);
  ASSERT_TRUE(window.ok());
  EXPECT_EQ(window->kernels.size(), 1u);
  auto rank = (*reader)->LoadAll();
  ASSERT_TRUE(rank.ok());
  EXPECT_EQ(rank->str(rank->events.kernels[0].name), "gemm_bf16");
}

}  // namespace
}  // namespace rankscope::trace
