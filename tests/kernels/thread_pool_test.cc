#include <gtest/gtest.h>
#include <sched.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <set>
#include <thread>
#include <vector>

#include "kernels/cpu_kernels.h"

namespace rankscope::kernels {
namespace {

int ThreadsInProcess() {
  int count = 0;
  for ([[maybe_unused]] const auto& entry :
       std::filesystem::directory_iterator("/proc/self/task")) {
    ++count;
  }
  return count;
}

double ProcessCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

TEST(ThreadPoolTest, SizeIsAtLeastOne) {
  EXPECT_EQ(ThreadPool(1).size(), 1);
  EXPECT_EQ(ThreadPool(3).size(), 3);
  EXPECT_EQ(ThreadPool(0).size(), 1);
  EXPECT_EQ(ThreadPool(-4).size(), 1);
}

TEST(ThreadPoolTest, PoolOfOneStartsNoThreadAndRunsOnTheCaller) {
  const int before = ThreadsInProcess();
  ThreadPool pool(1);
  EXPECT_EQ(ThreadsInProcess(), before);
  const auto caller = std::this_thread::get_id();
  std::vector<std::thread::id> ran_on(50);
  pool.ParallelFor(50, [&](int i) { ran_on[static_cast<size_t>(i)] = std::this_thread::get_id(); });
  for (const auto& id : ran_on) EXPECT_EQ(id, caller);
}

TEST(ThreadPoolTest, PoolOfNStartsNMinusOneWorkers) {
  // ThreadSanitizer starts a thread of its own at the first pthread_create: let that happen
  // before counting.
  std::thread([] {}).join();
  const int before = ThreadsInProcess();
  {
    ThreadPool pool(3);
    EXPECT_EQ(ThreadsInProcess(), before + 2);
  }
  EXPECT_EQ(ThreadsInProcess(), before);  // the destructor joins them
}

TEST(ThreadPoolTest, RunsEveryTaskExactlyOnce) {
  for (int size : {1, 2, 3, 5}) {
    ThreadPool pool(size);
    for (int tasks : {0, 1, 2, 3, 4, 7, 64, 1000, 100003}) {
      SCOPED_TRACE(testing::Message() << "pool " << size << ", tasks " << tasks);
      std::vector<std::atomic<int>> runs(static_cast<size_t>(tasks));
      pool.ParallelFor(tasks, [&](int i) { runs[static_cast<size_t>(i)].fetch_add(1); });
      int wrong = 0;
      for (const auto& r : runs) wrong += r.load() != 1;
      EXPECT_EQ(wrong, 0);
    }
  }
}

TEST(ThreadPoolTest, LargeTaskCount) {
  ThreadPool pool(3);
  constexpr int kTasks = 1 << 21;
  std::vector<uint8_t> ran(kTasks, 0);
  std::atomic<int64_t> sum{0};
  pool.ParallelFor(kTasks, [&](int i) {
    ran[static_cast<size_t>(i)] = 1;  // distinct bytes per task: no race
    sum.fetch_add(i, std::memory_order_relaxed);
  });
  int64_t missing = 0;
  for (uint8_t r : ran) missing += r == 0;
  EXPECT_EQ(missing, 0);
  EXPECT_EQ(sum.load(), int64_t{kTasks} * (kTasks - 1) / 2);
}

TEST(ThreadPoolTest, AssignmentIsStaticAndTheCallerTakesPart) {
  for (int size : {2, 3}) {
    ThreadPool pool(size);
    constexpr int kTasks = 10;
    std::vector<std::thread::id> first(kTasks);
    pool.ParallelFor(kTasks,
                     [&](int i) { first[static_cast<size_t>(i)] = std::this_thread::get_id(); });
    const std::set<std::thread::id> distinct(first.begin(), first.end());
    EXPECT_EQ(static_cast<int>(distinct.size()), size);
    EXPECT_TRUE(distinct.count(std::this_thread::get_id()) == 1);
    // Sleep between some calls so workers go from spinning to blocked and back.
    for (int call = 0; call < 50; ++call) {
      if (call % 10 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      std::vector<std::thread::id> again(kTasks);
      pool.ParallelFor(kTasks,
                       [&](int i) { again[static_cast<size_t>(i)] = std::this_thread::get_id(); });
      ASSERT_EQ(again, first) << "call " << call;
    }
  }
}

TEST(ThreadPoolTest, ManyRepeatedCallsEachComplete) {
  // A training step makes hundreds of calls; a lost wake-up would hang here.
  ThreadPool pool(3);
  std::vector<int> values(6, 0);
  for (int call = 0; call < 20000; ++call) {
    pool.ParallelFor(6, [&](int i) { values[static_cast<size_t>(i)] += 1; });
  }
  for (int v : values) EXPECT_EQ(v, 20000);
}

TEST(ThreadPoolTest, NestedCallRunsInline) {
  ThreadPool pool(2);
  std::vector<std::atomic<int>> runs(4 * 5);
  pool.ParallelFor(4, [&](int outer) {
    pool.ParallelFor(5,
                     [&](int inner) { runs[static_cast<size_t>(outer * 5 + inner)].fetch_add(1); });
  });
  for (const auto& r : runs) EXPECT_EQ(r.load(), 1);
}

TEST(ThreadPoolTest, IdlePoolDoesNotSpin) {
  ThreadPool pool(3);
  std::atomic<int> ran{0};
  pool.ParallelFor(3, [&](int) { ran.fetch_add(1); });
  ASSERT_EQ(ran.load(), 3);
  // Let the workers finish their short spin, then watch CPU time while the pool idles. Two
  // workers spinning forever would use about twice the idle time; blocked ones use ~nothing.
  // The bound is on CPU time, which a busy machine does not inflate.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const double cpu_before = ProcessCpuSeconds();
  const auto wall_before = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_before).count();
  const double cpu = ProcessCpuSeconds() - cpu_before;
  EXPECT_LT(cpu, 0.25 * wall) << "cpu " << cpu << " s over " << wall << " s idle";
}

TEST(ThreadPoolTest, DefaultThreadCountDividesTheAffinityMask) {
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  const int cpus = CPU_COUNT(&set);
  EXPECT_EQ(DefaultThreadCount(1), cpus);
  EXPECT_EQ(DefaultThreadCount(2), std::max(1, cpus / 2));
  EXPECT_EQ(DefaultThreadCount(cpus + 1), 1);
  EXPECT_EQ(DefaultThreadCount(0), cpus);  // no rank count given: all cores
  EXPECT_EQ(DefaultThreadCount(-3), cpus);
}

TEST(ThreadPoolTest, DefaultThreadCountFollowsARestrictedMask) {
  cpu_set_t original;
  CPU_ZERO(&original);
  ASSERT_EQ(sched_getaffinity(0, sizeof(original), &original), 0);
  int first_cpu = 0;
  while (!CPU_ISSET(first_cpu, &original)) ++first_cpu;
  // Run on a thread of its own so the restriction does not outlive the test.
  int seen = 0;
  std::thread([&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(first_cpu, &one);
    if (sched_setaffinity(0, sizeof(one), &one) == 0) seen = DefaultThreadCount(1);
  }).join();
  EXPECT_EQ(seen, 1);
}

}  // namespace
}  // namespace rankscope::kernels
