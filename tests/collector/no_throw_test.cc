// collector/no_throw.h: an exception never leaves a callback that C code called; it is
// counted, said once on stderr, and written to the rank file's meta.
#include "collector/no_throw.h"

#include <new>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "collector/recorder.h"
#include "tests/collector/collector_test_util.h"
#include "tests/trace/trace_test_util.h"

namespace rankscope::collector {
namespace {

using testing::Load;
using testing::Named;
using trace::testing::TempDir;

int Add(int a, int b) { return a + b; }
int ThrowsBadAlloc(int, int) { throw std::bad_alloc(); }
void ThrowsRuntimeError(const char* what) { throw std::runtime_error(what); }

TEST(NoThrow, PassesArgumentsAndResultsThrough) {
  const uint64_t before = CollectorFaults();
  EXPECT_EQ((NoThrow<&Add>::Call(2, 3)), 5);
  EXPECT_EQ(CollectorFaults(), before);
}

TEST(NoThrow, StopsTheExceptionCountsItAndReturnsTheFallback) {
  const uint64_t before = CollectorFaults();
  ::testing::internal::CaptureStderr();
  EXPECT_EQ((NoThrow<&ThrowsBadAlloc, -7>::Call(2, 3)), -7);
  NoThrow<&ThrowsRuntimeError>::Call("second");
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(CollectorFaults(), before + 2);
  if (before == 0) {  // only the process's first fault is printed
    EXPECT_NE(err.find("rankscope: the collector stopped an exception (std::bad_alloc)"), std::string::npos) << err;
    EXPECT_EQ(err.find("second"), std::string::npos) << err;
  } else {
    EXPECT_TRUE(err.empty()) << err;
  }
}

TEST(NoThrow, TheRankFileCountsTheFaults) {
  TempDir dir;
  {
    Recorder recorder(testing::MakeRecorderOptions(dir, {.run_id = "faults", .rank = 0, .world_size = 1}));
    recorder.Mark(Named(recorder.registry().DefaultDomain(), "still-recorded"));
    ::testing::internal::CaptureStderr();
    (void)NoThrow<&ThrowsBadAlloc>::Call(0, 0);
    (void)::testing::internal::GetCapturedStderr();
    ASSERT_TRUE(recorder.Close(Recorder::EndReason::kExit).ok());
  }
  trace::RankTrace trace = Load(dir / "rank-0.sqlite");
  EXPECT_EQ(trace.meta.entries["collector.faults"], std::to_string(CollectorFaults()));
  EXPECT_EQ(trace.events.nvtx_marks.size(), 1u);
}

}  // namespace
}  // namespace rankscope::collector
