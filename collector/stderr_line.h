// The collector's one way to tell the user something: one line on the process's stderr that
// can neither kill nor stall the host. A write to a closed pipe raises SIGPIPE, whose default
// action ends the process, and a write to a full pipe waits for its reader; both would be
// the profiler harming the job. So the line goes out with SIGPIPE blocked for this thread
// (and a SIGPIPE it raised taken back), only when stderr can take it now, in one write, and
// errno is left as the host had it.
#pragma once

#include <string_view>

namespace rankscope::collector {

// Writes `text` and a newline (cut to 1 KiB). A line stderr cannot take at once is lost.
void WriteStderrLine(std::string_view text) noexcept;

}  // namespace rankscope::collector
