#include "collector/thread_buffer.h"

#include <cstring>
#include <atomic>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace rankscope::collector {
namespace {

// A record the buffer accepts: a leading uint16 size, then a sequence number.
struct TestRecord {
  uint16_t size = sizeof(TestRecord);
  uint16_t pad[3] = {};
  uint64_t sequence = 0;
  char filler[48] = {};
};

bool AppendRecord(ThreadBuffer& buffer, uint64_t sequence) {
  TestRecord record;
  record.sequence = sequence;
  std::span<const std::byte> part = std::as_bytes(std::span(&record, 1));
  return buffer.Append(std::span(&part, 1));
}

std::vector<uint64_t> DrainSequences(ThreadBuffer& buffer) {
  std::vector<uint64_t> out;
  buffer.Drain([&](std::span<const std::byte> bytes) {
    TestRecord record;
    std::memcpy(&record, bytes.data(), sizeof(record));
    out.push_back(record.sequence);
  });
  return out;
}

// Records of TestRecord's size that one chunk holds (its first 64 bytes are the chunk's own).
constexpr uint64_t kPerChunk = (ThreadBuffer::kChunkBytes - 64) / sizeof(TestRecord);

TEST(ThreadBuffer, KeepsOrderAcrossChunks) {
  ChunkPool pool(64 << 20);
  pool.Prepare(8);
  ThreadBuffer buffer(&pool, 1, "t", 1);
  const uint64_t count = 3 * kPerChunk + 17;
  for (uint64_t i = 0; i < count; ++i) ASSERT_TRUE(AppendRecord(buffer, i));
  std::vector<uint64_t> seen = DrainSequences(buffer);
  ASSERT_EQ(seen.size(), count);
  for (uint64_t i = 0; i < count; ++i) ASSERT_EQ(seen[i], i);
  EXPECT_TRUE(DrainSequences(buffer).empty());
  EXPECT_EQ(buffer.TakeDrops(), 0u);
  // Fully read chunks went back to the pool, ready; only the chunk being written is held.
  EXPECT_EQ(pool.held_count(), 1u);
  EXPECT_EQ(pool.ready_count(), 7u);
  EXPECT_EQ(pool.faulted_by_threads(), 0u);  // every chunk was prepared
}

TEST(ThreadBuffer, DropsAndCountsWhenTheBudgetIsSpent) {
  ChunkPool pool(ThreadBuffer::kChunkBytes + 4096);  // room for one chunk only
  ASSERT_EQ(pool.chunk_count(), 1u);
  ThreadBuffer buffer(&pool, 1, "t", 1);
  uint64_t accepted = 0;
  for (uint64_t i = 0; i < kPerChunk + 100; ++i) accepted += AppendRecord(buffer, i) ? 1 : 0;
  EXPECT_EQ(accepted, kPerChunk);
  EXPECT_EQ(buffer.TakeDrops(), 100u);
  EXPECT_EQ(buffer.TakeDrops(), 0u);  // taken once
  EXPECT_EQ(DrainSequences(buffer).size(), kPerChunk);
}

TEST(ThreadBuffer, RecordsAgainOnceADrainedChunkCameBack) {
  ChunkPool pool(2 * ThreadBuffer::kChunkBytes);
  ThreadBuffer buffer(&pool, 1, "t", 1);
  uint64_t accepted = 0;
  for (uint64_t i = 0; i < 2 * kPerChunk + 5; ++i) accepted += AppendRecord(buffer, i) ? 1 : 0;
  EXPECT_EQ(accepted, 2 * kPerChunk);
  EXPECT_EQ(buffer.TakeDrops(), 5u);
  // The first chunk, sealed and read, goes back to the pool; the next record takes it.
  EXPECT_EQ(DrainSequences(buffer).size(), 2 * kPerChunk);
  EXPECT_EQ(pool.ready_count(), 1u);
  EXPECT_TRUE(AppendRecord(buffer, 7));
  EXPECT_EQ(buffer.TakeDrops(), 0u);
  EXPECT_EQ(DrainSequences(buffer), std::vector<uint64_t>{7});
}

TEST(ThreadBuffer, AThreadThatOutrunsTheReserveFaultsInAColdChunk) {
  ChunkPool pool(8 * ThreadBuffer::kChunkBytes);
  ThreadBuffer buffer(&pool, 1, "t", 1);
  pool.Prepare(1);
  for (uint64_t i = 0; i < kPerChunk + 10; ++i) ASSERT_TRUE(AppendRecord(buffer, i));
  // The first chunk was ready; the second was cold: faulted in by the thread, and the pool
  // says so, so the drain thread prepares more.
  EXPECT_EQ(pool.faulted_by_threads(), 1u);
  EXPECT_TRUE(pool.TakeStarved());
  EXPECT_FALSE(pool.TakeStarved());  // taken once
  EXPECT_EQ(pool.held_count(), 2u);
  EXPECT_EQ(buffer.TakeDrops(), 0u);
  EXPECT_EQ(DrainSequences(buffer).size(), kPerChunk + 10);
}

TEST(ThreadBuffer, ARefusedThreadTriesAgainOnceTheDrainThreadPreparedMemory) {
  ChunkPool pool(ThreadBuffer::kChunkBytes);
  ThreadBuffer buffer(&pool, 1, "t", 1);
  // Another holder has the only chunk: the thread drops, and keeps dropping cheaply.
  void* elsewhere = pool.Take();
  ASSERT_NE(elsewhere, nullptr);
  EXPECT_FALSE(AppendRecord(buffer, 1));
  EXPECT_FALSE(AppendRecord(buffer, 2));
  EXPECT_EQ(buffer.TakeDrops(), 2u);
  // It comes back and is given back to the kernel, then prepared again: the thread takes it.
  pool.Recycle(elsewhere);
  pool.Release(0);
  EXPECT_EQ(pool.cold_count(), 1u);
  EXPECT_EQ(pool.Prepare(1), 1u);
  EXPECT_TRUE(AppendRecord(buffer, 3));
  EXPECT_EQ(DrainSequences(buffer), std::vector<uint64_t>{3});
}

TEST(ThreadBuffer, RefusesOversizedRecords) {
  ChunkPool pool(64 << 20);
  ThreadBuffer buffer(&pool, 1, "t", 1);
  for (size_t size : {ThreadBuffer::kMaxRecordBytes + 1, ThreadBuffer::kChunkBytes + 8}) {
    std::vector<std::byte> huge(size);
    std::span<const std::byte> part(huge);
    EXPECT_FALSE(buffer.Append(std::span(&part, 1)));
  }
  EXPECT_EQ(buffer.TakeDrops(), 2u);
}

TEST(ThreadBuffer, ConsumerRunsBesideTheProducer) {
  ChunkPool pool(256 << 20);
  pool.Prepare(4);
  ThreadBuffer buffer(&pool, 1, "t", 1);
  const uint64_t count = 200000;
  std::thread producer([&] {
    for (uint64_t i = 0; i < count; ++i) ASSERT_TRUE(AppendRecord(buffer, i));
    buffer.MarkExited();
  });
  std::vector<uint64_t> seen;
  for (;;) {
    bool exited = buffer.exited();
    for (uint64_t s : DrainSequences(buffer)) seen.push_back(s);
    pool.Prepare(4);
    if (exited) break;
  }
  producer.join();
  ASSERT_EQ(seen.size(), count);
  for (uint64_t i = 0; i < count; ++i) ASSERT_EQ(seen[i], i);
}

TEST(ChunkPool, PreparesRecyclesAndReleasesWithinItsChunks) {
  ChunkPool pool(4 * ChunkPool::kChunkBytes + 100);
  ASSERT_EQ(pool.chunk_count(), 4u);
  EXPECT_EQ(pool.cold_count(), 4u);
  EXPECT_EQ(pool.Prepare(3), 3u);
  EXPECT_EQ(pool.Prepare(3), 0u);  // already there
  std::vector<void*> held;
  for (void* chunk = pool.Take(); chunk != nullptr; chunk = pool.Take()) held.push_back(chunk);
  ASSERT_EQ(held.size(), 4u);  // three ready, then the cold one
  EXPECT_EQ(pool.faulted_by_threads(), 1u);
  EXPECT_TRUE(pool.TakeStarved());
  EXPECT_EQ(pool.held_count(), 4u);
  EXPECT_EQ(pool.taken(), 4u);
  const uint64_t returns = pool.returns();
  for (void* chunk : held) {
    std::memset(chunk, 0x5A, ChunkPool::kChunkBytes);  // each is a whole, distinct chunk
    pool.Recycle(chunk);
  }
  EXPECT_NE(pool.returns(), returns);
  EXPECT_EQ(pool.ready_count(), 4u);
  EXPECT_EQ(pool.Release(1), 3u);
  EXPECT_EQ(pool.ready_count(), 1u);
  EXPECT_EQ(pool.cold_count(), 3u);
}

TEST(ChunkPool, ThreadsTakeDistinctChunksWhileTheyAreRecycled) {
  constexpr size_t kChunks = 16;
  ChunkPool pool(kChunks * ChunkPool::kChunkBytes);
  pool.Prepare(kChunks);
  std::atomic<int> owners[kChunks] = {};
  std::atomic<bool> overlap{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 20000; ++i) {
        void* chunk = pool.Take();
        if (chunk == nullptr) continue;
        const size_t index = reinterpret_cast<uintptr_t>(chunk) / ChunkPool::kChunkBytes % kChunks;
        if (owners[index].fetch_add(1) != 0) overlap = true;
        owners[index].fetch_sub(1);
        pool.Recycle(chunk);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_FALSE(overlap.load());
  EXPECT_EQ(pool.ready_count(), kChunks);
}

TEST(BufferRegistry, RegistersAndRemovesBuffers) {
  BufferRegistry registry(64 << 20);
  ThreadBuffer* a = registry.Register(10, "a");
  ThreadBuffer* b = registry.Register(11, "b");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(a->serial(), b->serial());
  EXPECT_EQ(b->name(), "b");
  EXPECT_EQ(registry.Snapshot().size(), 2u);
  registry.Remove({a});
  ASSERT_EQ(registry.Snapshot().size(), 1u);
  EXPECT_EQ(registry.Snapshot()[0], b);
}

}  // namespace
}  // namespace rankscope::collector
