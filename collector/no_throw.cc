#include "collector/no_throw.h"

#include <atomic>
#include <cstdio>
#include <exception>

#include "collector/stderr_line.h"

namespace rankscope::collector {
namespace {

std::atomic<uint64_t> g_faults{0};

}  // namespace

uint64_t CollectorFaults() { return g_faults.load(std::memory_order_relaxed); }

void NoteCollectorFault() noexcept {
  if (g_faults.fetch_add(1, std::memory_order_relaxed) != 0) return;
  const char* what = "an unknown exception";
  if (const std::exception_ptr current = std::current_exception()) {
    try {
      std::rethrow_exception(current);
    } catch (const std::exception& error) {
      what = error.what();
    } catch (...) {
    }
  }
  char line[512];
  std::snprintf(line, sizeof line,
                "rankscope: the collector stopped an exception (%s) in a callback; that event is lost, recording goes on",
                what);
  WriteStderrLine(line);
}

}  // namespace rankscope::collector
