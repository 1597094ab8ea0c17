#include "collector/thread_buffer.h"

#include <cstring>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace rankscope::collector {
namespace {

// A record the buffer accepts: a leading uint32 size, then a sequence number.
struct TestRecord {
  uint32_t size = sizeof(TestRecord);
  uint32_t pad = 0;
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

TEST(ThreadBuffer, KeepsOrderAcrossChunks) {
  ChunkBudget budget(64 << 20);
  ThreadBuffer buffer(&budget, 1, "t", 1);
  const uint64_t count = 3 * ThreadBuffer::kChunkBytes / sizeof(TestRecord) + 17;
  for (uint64_t i = 0; i < count; ++i) ASSERT_TRUE(AppendRecord(buffer, i));
  std::vector<uint64_t> seen = DrainSequences(buffer);
  ASSERT_EQ(seen.size(), count);
  for (uint64_t i = 0; i < count; ++i) ASSERT_EQ(seen[i], i);
  EXPECT_TRUE(DrainSequences(buffer).empty());
  EXPECT_EQ(buffer.TakeDrops(), 0u);
  // Fully read chunks were returned to the budget; at most the chunk being written remains.
  EXPECT_LE(budget.in_use(), ThreadBuffer::kChunkBytes + 4096);
}

TEST(ThreadBuffer, DropsAndCountsWhenTheBudgetIsSpent) {
  ChunkBudget budget(ThreadBuffer::kChunkBytes + 4096);  // room for one chunk only
  ThreadBuffer buffer(&budget, 1, "t", 1);
  const uint64_t per_chunk = ThreadBuffer::kChunkBytes / sizeof(TestRecord);
  uint64_t accepted = 0;
  for (uint64_t i = 0; i < per_chunk + 100; ++i) accepted += AppendRecord(buffer, i) ? 1 : 0;
  EXPECT_EQ(accepted, per_chunk);
  EXPECT_EQ(buffer.TakeDrops(), 100u);
  EXPECT_EQ(buffer.TakeDrops(), 0u);  // taken once
  EXPECT_EQ(DrainSequences(buffer).size(), per_chunk);
}

TEST(ThreadBuffer, RefusesOversizedRecords) {
  ChunkBudget budget(64 << 20);
  ThreadBuffer buffer(&budget, 1, "t", 1);
  std::vector<std::byte> huge(ThreadBuffer::kChunkBytes + 8);
  std::span<const std::byte> part(huge);
  EXPECT_FALSE(buffer.Append(std::span(&part, 1)));
  EXPECT_EQ(buffer.TakeDrops(), 1u);
}

TEST(ThreadBuffer, ConsumerRunsBesideTheProducer) {
  ChunkBudget budget(256 << 20);
  ThreadBuffer buffer(&budget, 1, "t", 1);
  const uint64_t count = 200000;
  std::thread producer([&] {
    for (uint64_t i = 0; i < count; ++i) AppendRecord(buffer, i);
    buffer.MarkExited();
  });
  std::vector<uint64_t> seen;
  for (;;) {
    bool exited = buffer.exited();
    for (uint64_t s : DrainSequences(buffer)) seen.push_back(s);
    if (exited) break;
  }
  producer.join();
  ASSERT_EQ(seen.size(), count);
  for (uint64_t i = 0; i < count; ++i) ASSERT_EQ(seen[i], i);
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
