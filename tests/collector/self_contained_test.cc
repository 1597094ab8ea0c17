// The injected library drops into a process that has an SQLite and an fmt of its own: it
// records with its own copies and never calls the host's (collector/README.md, "Dropping
// into any process"). Its NEEDED entries and exports are checked by
// check_self_contained_library.cmake.
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "tests/child_process.h"
#include "tests/collector/collector_test_util.h"

namespace rankscope::collector {
namespace {

using testing::CountByName;
using testing::Load;
using trace::testing::TempDir;

TEST(SelfContained, RecordsInAHostThatExportsItsOwnSqliteAndFmt) {
  TempDir dir;
  std::map<std::string, std::string> env = testing::CollectorEnvironment();
  env["RANKSCOPE_RUN_DIR"] = dir.path().string();
  env["RANKSCOPE_RUN_ID"] = "interposed";
  env["RANK"] = "0";
  env["NVTX_INJECTION64_PATH"] = COLLECTOR_LIBRARY;
  env["LD_PRELOAD"] = COLLECTOR_LIBRARY;
  rankscope::testing::ChildProcess child({INTERPOSING_HOST_PROGRAM}, env);
  const rankscope::testing::ProcessResult run = child.Wait();
  ASSERT_EQ(run.exit_code, 0) << run.err;
  // The host's definitions announce themselves: none may have run.
  EXPECT_EQ(run.err.find("interposing_host_program: the host's"), std::string::npos) << run.err;

  const trace::RankTrace trace = Load(dir / "rank-0.sqlite");
  EXPECT_TRUE(trace.meta.closed_cleanly);
  EXPECT_EQ(trace.meta.run_id, "interposed");
  EXPECT_EQ(CountByName(trace), (std::map<std::string, int>{{"main-outer", 50}, {"main-inner", 50},
                                                             {"worker-outer", 50}, {"worker-inner", 50}}));
  EXPECT_TRUE(trace.drops.empty());
}

}  // namespace
}  // namespace rankscope::collector
