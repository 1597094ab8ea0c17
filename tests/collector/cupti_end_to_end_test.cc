// The real collector under the real `rankscope profile`, with CUDA's injection entry point
// called as the driver calls it: CUPTI either runs (a machine with a GPU) or says in the
// rank file, on stderr once, and in the profile summary why it does not, while NVTX
// recording goes on.
#include <algorithm>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/text.h"
#include "tests/child_process.h"
#include "tests/collector/collector_test_util.h"
#include "tests/trace/trace_test_util.h"
#include "trace/reader.h"

#ifdef RANKSCOPE_CLI
namespace rankscope::collector {
namespace {

using testing::CountByName;
using testing::Load;
using trace::testing::TempDir;

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// `rankscope profile -n 1 -- cuda_injection_program`, with `extra` added to the environment.
rankscope::testing::ProcessResult Profile(const std::filesystem::path& run,
                                          const std::map<std::string, std::string>& extra) {
  std::map<std::string, std::string> env = testing::CollectorEnvironment();
  for (const auto& [name, value] : extra) env[name] = value;
  rankscope::testing::ChildProcess child({RANKSCOPE_CLI, "profile", "-o", run.string(), "-n", "1", "--",
                                          CUDA_INJECTION_PROGRAM},
                                         env);
  return child.Wait();
}

const std::map<std::string, int> kRanges = {{"before-cuda", 1}, {"after-cuda", 1}, {"step", 3}};

// When CUPTI is off: one stderr line from the rank, and the summary's line with the reason.
void ExpectOffReported(const rankscope::testing::ProcessResult& result, const std::string& status) {
  const std::string output = result.out + result.err;
  int not_recorded = 0;
  for (const std::string& line : Lines(result.err)) {
    if (line.find("CUDA activity is not recorded") != std::string::npos) ++not_recorded;
  }
  EXPECT_EQ(not_recorded, 1) << result.err;
  // The summary quotes the reason as it quotes every text from a rank file.
  const std::string summary = "  CUDA activity:  not recorded on rank 0: " + Printable(status.substr(5), 200);
  std::vector<std::string> lines = Lines(output);
  EXPECT_NE(std::find(lines.begin(), lines.end(), summary), lines.end()) << "no line \"" << summary << "\" in\n"
                                                                          << output;
}

TEST(CuptiEndToEnd, InjectedCollectorRecordsCudaOrSaysWhyNot) {
  TempDir dir;
  const std::filesystem::path run = dir / "run";
  rankscope::testing::ProcessResult result = Profile(run, {});
  ASSERT_FALSE(result.timed_out);
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  trace::RankTrace trace = Load(run / "rank-0.sqlite");
  EXPECT_TRUE(trace.meta.closed_cleanly);
  EXPECT_EQ(CountByName(trace), kRanges);

  const std::string status = trace.meta.entries["cupti.status"];
  if (status == "on") {  // a machine with a GPU and a driver
    EXPECT_NE(trace.meta.entries["cupti.kinds"].find("concurrent_kernel"), std::string::npos);
    EXPECT_EQ(result.err.find("CUDA activity is not recorded"), std::string::npos) << result.err;
    EXPECT_NE((result.out + result.err).find("CUDA activity:  recorded through CUPTI on 1 of 1 ranks"),
              std::string::npos);
    return;
  }
  ASSERT_TRUE(status.starts_with("off: ")) << status;
  // The reason names CUPTI's result, and without a driver says that is the likely cause.
  // "CUPTI_ERROR_<NAME> (<number>)", found by hand (std::regex trips GCC 12's
  // maybe-uninitialized warning in sanitizer builds).
  const size_t name = status.find("CUPTI_ERROR_");
  ASSERT_NE(name, std::string::npos) << status;
  const size_t open = status.find(" (", name);
  const size_t close = status.find(')', open == std::string::npos ? name : open);
  ASSERT_TRUE(open != std::string::npos && close != std::string::npos) << status;
  const std::string number = status.substr(open + 2, close - open - 2);
  ASSERT_FALSE(number.empty()) << status;
  ASSERT_TRUE(std::all_of(number.begin(), number.end(), [](char c) { return c >= '0' && c <= '9'; })) << status;
  if (number == "999") {
    EXPECT_NE(status.find("CUPTI_ERROR_UNKNOWN (999) (no usable CUDA driver?)"), std::string::npos) << status;
  }
  ExpectOffReported(result, status);
}

TEST(CuptiEndToEnd, MissingLibcuptiTurnsCudaOffAndNvtxGoesOn) {
  TempDir dir;
  const std::filesystem::path run = dir / "run";
  rankscope::testing::ProcessResult result =
      Profile(run, {{"RANKSCOPE_CUPTI_LIBRARY", "/nonexistent/libcupti.so.13"}});
  ASSERT_FALSE(result.timed_out);
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  trace::RankTrace trace = Load(run / "rank-0.sqlite");
  EXPECT_TRUE(trace.meta.closed_cleanly);
  EXPECT_EQ(CountByName(trace), kRanges);
  const std::string status = trace.meta.entries["cupti.status"];
  EXPECT_TRUE(status.starts_with("off: cannot load libcupti: ")) << status;
  EXPECT_NE(status.find("/nonexistent/libcupti.so.13"), std::string::npos) << status;  // dlerror names it
  ExpectOffReported(result, status);
}

}  // namespace
}  // namespace rankscope::collector
#endif
