// The real traces of real multi-GPU runs that the importers' reference tests read: the
// project's ../shared/data/, or the folder RANKSCOPE_SHARED_DATA names. A checkout without
// them skips those tests, saying which folder it looked for; every other test still runs.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

namespace rankscope::testing {

inline std::filesystem::path SharedDataDir() {
  const char* chosen = std::getenv("RANKSCOPE_SHARED_DATA");
  if (chosen != nullptr && *chosen != '\0') return chosen;
  return std::filesystem::path(RANKSCOPE_SOURCE_DIR) / ".." / "shared" / "data";
}

}  // namespace rankscope::testing

// Skips the calling test when `file` (a path under SharedDataDir()) is missing.
#define RANKSCOPE_REQUIRE_SHARED_DATA(file)                                                        \
  do {                                                                                             \
    if (!std::filesystem::exists(file)) {                                                          \
      GTEST_SKIP() << "the real traces are not here: " << (file)                                   \
                   << " (set RANKSCOPE_SHARED_DATA to the folder that holds kineto/ and nsys/)";   \
    }                                                                                              \
  } while (false)
