// A fixed pool with static task assignment: task i runs on pool thread i % size, the
// calling thread being thread 0. Workers spin briefly for the next ParallelFor (a training
// step issues hundreds of them back to back) and then block on a condition variable, so an
// idle pool costs no CPU.
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "kernels/cpu_kernels.h"

namespace rankscope::kernels {
namespace {

// Long enough to bridge the serial gaps between the kernels of one training step, short
// enough that a pool left idle stops competing for the CPU almost at once.
constexpr auto kSpinTime = std::chrono::microseconds(50);

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Spins until `done()` or kSpinTime has passed; returns done()'s last value. Yields now and
// then so that, when there are more runnable threads than cores, the spinner hands its core
// to the thread whose work it is waiting for.
template <typename Predicate>
bool SpinFor(const Predicate& done) {
  const auto deadline = std::chrono::steady_clock::now() + kSpinTime;
  while (true) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
      CpuRelax();
    }
    if (std::chrono::steady_clock::now() >= deadline) return done();
    std::this_thread::yield();
  }
}

// The pool whose task the current thread is running, so a nested ParallelFor on the same
// pool runs inline instead of deadlocking.
thread_local const void* running_pool = nullptr;

}  // namespace

struct ThreadPool::State {
  int size = 1;
  std::vector<std::thread> workers;

  std::mutex mutex;
  std::condition_variable work_ready;  // workers wait here for a new generation
  std::condition_variable work_done;   // the caller waits here for `pending` to reach 0

  // Bumped (under `mutex`, with release order) once the job below is published.
  std::atomic<uint64_t> generation{0};
  std::atomic<int> pending{0};  // workers that have not finished the current job
  bool stop = false;            // guarded by `mutex`

  // The current job; written before `generation` is bumped, read after it is seen.
  const std::function<void(int)>* task = nullptr;
  int tasks = 0;

  void RunShare(int thread_index, const std::function<void(int)>& job, int job_tasks) const {
    const void* outer = running_pool;
    running_pool = this;
    for (int i = thread_index; i < job_tasks; i += size) job(i);
    running_pool = outer;
  }

  void WorkerLoop(int thread_index) {
    uint64_t seen = 0;
    while (true) {
      auto new_job = [&] { return generation.load(std::memory_order_acquire) != seen; };
      if (!SpinFor(new_job)) {
        std::unique_lock lock(mutex);
        work_ready.wait(lock, [&] { return stop || new_job(); });
        if (stop) return;
      }
      seen = generation.load(std::memory_order_acquire);
      RunShare(thread_index, *task, tasks);
      if (pending.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        // Take the lock so the notification cannot slip between the caller's check of
        // `pending` and its wait.
        std::lock_guard lock(mutex);
        work_done.notify_one();
      }
    }
  }
};

ThreadPool::ThreadPool(int threads) : state_(std::make_unique<State>()) {
  state_->size = std::max(1, threads);
  state_->workers.reserve(static_cast<size_t>(state_->size - 1));
  for (int t = 1; t < state_->size; ++t) {
    state_->workers.emplace_back([state = state_.get(), t] { state->WorkerLoop(t); });
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(state_->mutex);
    state_->stop = true;
  }
  state_->work_ready.notify_all();
  for (std::thread& worker : state_->workers) worker.join();
}

int ThreadPool::size() const { return state_->size; }

void ThreadPool::ParallelFor(int tasks, const std::function<void(int)>& task) {
  if (tasks <= 0) return;
  State& s = *state_;
  // With one thread, or a single task (which static assignment puts on thread 0), there is
  // nothing to hand out; a call from inside one of this pool's own tasks runs inline too.
  if (s.size == 1 || tasks == 1 || running_pool == &s) {
    for (int i = 0; i < tasks; ++i) task(i);
    return;
  }
  s.task = &task;
  s.tasks = tasks;
  s.pending.store(s.size - 1, std::memory_order_relaxed);
  {
    std::lock_guard lock(s.mutex);
    s.generation.fetch_add(1, std::memory_order_release);
  }
  s.work_ready.notify_all();

  s.RunShare(0, task, tasks);

  auto all_done = [&] { return s.pending.load(std::memory_order_acquire) == 0; };
  if (!SpinFor(all_done)) {
    std::unique_lock lock(s.mutex);
    s.work_done.wait(lock, all_done);
  }
}

int DefaultThreadCount(int local_ranks) {
  int cpus = 0;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) cpus = CPU_COUNT(&set);
  if (cpus <= 0) cpus = static_cast<int>(std::thread::hardware_concurrency());
  return std::max(1, cpus / std::max(1, local_ranks));
}

}  // namespace rankscope::kernels
