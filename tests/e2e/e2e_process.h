// Runs rankscope's programs as a user would, for end-to-end tests: a clean environment
// (no launcher variables inherited from the test's own launcher), the build tree's
// collector, and a timeout.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "tests/child_process.h"

namespace rankscope::testing {

inline std::map<std::string, std::string> EndToEndEnvironment() {
  std::map<std::string, std::string> env = CurrentEnvironment();
  for (const char* name : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LD_PRELOAD", "DISPLAY"}) env.erase(name);
  env["RANKSCOPE_COLLECTOR_LIB"] = COLLECTOR_LIBRARY;
  env["ASAN_OPTIONS"] = ChildAsanOptions();
  env["QT_QPA_PLATFORM"] = "offscreen";
  return env;
}

inline ProcessResult RunProcess(std::vector<std::string> argv) {
  ChildProcess process(argv, EndToEndEnvironment(), ProcessOptions{.timeout = std::chrono::seconds(240)});
  return process.Wait();
}

}  // namespace rankscope::testing
