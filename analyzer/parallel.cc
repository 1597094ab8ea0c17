#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "analyzer/parallel_internal.h"

namespace rankscope::analyzer {

Status ParallelFor(size_t count, int threads, const std::function<Status(size_t)>& work,
                   const std::function<void(int, int)>& progress) {
  std::vector<Status> errors(count);
  std::atomic<size_t> next{0};
  std::mutex mutex;
  std::condition_variable changed;
  size_t done = 0;
  bool failed = false;
  auto worker_loop = [&] {
    for (size_t i; (i = next.fetch_add(1)) < count;) {
      errors[i] = work(i);
      if (!errors[i].ok()) next.store(count);  // stop early: the whole job fails anyway
      std::lock_guard lock(mutex);
      ++done;
      failed = failed || !errors[i].ok();
      changed.notify_one();
    }
  };
  const unsigned hardware = std::max(1u, std::thread::hardware_concurrency());
  const size_t workers_wanted = std::clamp<size_t>(threads > 0 ? static_cast<size_t>(threads) : hardware, 1,
                                                   std::max<size_t>(count, 1));
  std::vector<std::thread> workers;
  for (size_t t = 0; t < workers_wanted; ++t) workers.emplace_back(worker_loop);
  {
    std::unique_lock lock(mutex);
    size_t reported = 0;
    while (reported < count && !failed) {
      changed.wait(lock, [&] { return done > reported || failed; });
      if (failed) break;  // the workers stop on their own; no more progress to tell
      reported = done;
      if (progress) {
        lock.unlock();
        progress(static_cast<int>(reported), static_cast<int>(count));
        lock.lock();
      }
    }
  }
  for (std::thread& worker : workers) worker.join();
  for (const Status& error : errors) RS_RETURN_IF_ERROR(error);
  return Status::Ok();
}

}  // namespace rankscope::analyzer
