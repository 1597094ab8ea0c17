// Small reads of /proc and /sys files without iostreams (which the collector keeps out of
// its dependencies, and whose inlined code trips GCC 12's null-dereference warning).
#pragma once

#include <string>

namespace rankscope::collector {

// Up to `max_bytes` of the file; "" when it cannot be read.
std::string ReadSmallFile(const char* path, size_t max_bytes = 1 << 16);

}  // namespace rankscope::collector
