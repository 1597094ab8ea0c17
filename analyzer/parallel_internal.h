// Internal: rank files are read one per worker thread.
#pragma once

#include <cstddef>
#include <functional>

#include "base/status.h"

namespace rankscope::analyzer {

// Runs work(i) for every i in [0, count) on up to `threads` workers (0: one per hardware
// thread), handing out no more work after a failure. Calls progress(done, count) on the
// calling thread as items finish. Returns the error of the lowest failed index.
Status ParallelFor(size_t count, int threads, const std::function<Status(size_t)>& work,
                   const std::function<void(int, int)>& progress);

}  // namespace rankscope::analyzer
