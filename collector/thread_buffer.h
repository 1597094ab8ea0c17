// Per-thread event buffers: single-producer (the application thread), single-consumer
// (the drain thread), lock-free. Records are variable-length byte strings appended to a
// chain of chunks; the producer publishes each record with one release store, and the
// consumer frees chunks it has read. A global byte budget bounds the memory: a record that
// would exceed it is dropped and counted, never waited for.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstddef>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <vector>

namespace rankscope::collector {

// Chunks come from one budget shared by every buffer of the process. Drained chunks go
// back to a small pool, so a steady stream of events reuses warm memory instead of paying
// page faults for fresh allocations on the application thread.
class ChunkBudget {
 public:
  explicit ChunkBudget(size_t max_bytes) : max_bytes_(max_bytes) {}
  ~ChunkBudget();
  ChunkBudget(const ChunkBudget&) = delete;
  ChunkBudget& operator=(const ChunkBudget&) = delete;

  // Memory for one chunk of `bytes`, or nullptr when the budget is spent. The pool's lock
  // is taken once per chunk (thousands of events), never per event.
  void* Acquire(size_t bytes);
  void Recycle(void* memory, size_t bytes);
  size_t in_use() const { return in_use_.load(std::memory_order_relaxed); }

 private:
  static constexpr size_t kMaxPooled = 32;
  size_t max_bytes_;
  std::atomic<size_t> in_use_{0};
  std::mutex pool_mutex_;
  std::vector<void*> pool_;  // chunks of ThreadBuffer's size only
};

class ThreadBuffer {
 public:
  static constexpr uint32_t kChunkBytes = 256 * 1024;
  static constexpr size_t kAlign = 8;

  ThreadBuffer(ChunkBudget* budget, int64_t tid, std::string name, uint64_t serial);
  ~ThreadBuffer();
  ThreadBuffer(const ThreadBuffer&) = delete;
  ThreadBuffer& operator=(const ThreadBuffer&) = delete;

  // Producer side, in two steps so records are written in place: Reserve returns room for
  // `size` bytes (nullptr, counting a drop, when it cannot), Commit publishes it. Nothing
  // else may run on the producer side between the two.
  std::byte* Reserve(size_t size);
  void Commit(size_t size);
  // Reserve + copy `parts` back to back + Commit. Returns false on a drop.
  bool Append(std::span<const std::span<const std::byte>> parts);

  // Consumer side: calls `visit` for published records, in order, at most `max_records`,
  // and frees the chunks it finished. Returns the number of records visited.
  size_t Drain(const std::function<void(std::span<const std::byte>)>& visit,
               size_t max_records = SIZE_MAX);

  // The owning thread exited; the consumer may free the buffer once drained.
  void MarkExited() { exited_.store(true, std::memory_order_release); }
  bool exited() const { return exited_.load(std::memory_order_acquire); }
  uint64_t TakeDrops() { return drops_.exchange(0, std::memory_order_relaxed); }

  int64_t tid() const { return tid_; }
  const std::string& name() const { return name_; }
  uint64_t serial() const { return serial_; }

 private:
  struct Chunk;
  Chunk* NewChunk();
  void FreeChunk(Chunk* chunk);

  ChunkBudget* budget_;
  const int64_t tid_;
  const std::string name_;
  const uint64_t serial_;
  std::atomic<bool> exited_{false};
  std::atomic<uint64_t> drops_{0};
  // Producer state.
  Chunk* write_chunk_ = nullptr;
  uint32_t write_pos_ = 0;
  std::atomic<Chunk*> first_chunk_{nullptr};  // hands the chain to the consumer
  // Consumer state.
  Chunk* read_chunk_ = nullptr;
  uint32_t read_pos_ = 0;
};

// All buffers of the process. Registration takes a lock (once per thread); the drain
// thread snapshots the list.
class BufferRegistry {
 public:
  explicit BufferRegistry(size_t max_bytes) : budget_(max_bytes) {}
  ~BufferRegistry();  // frees every buffer: only once no thread can append any more
  BufferRegistry(const BufferRegistry&) = delete;
  BufferRegistry& operator=(const BufferRegistry&) = delete;
  ThreadBuffer* Register(int64_t tid, std::string name);
  std::vector<ThreadBuffer*> Snapshot();
  // Removes and frees `buffers`: ones seen exited before their last drain.
  void Remove(const std::vector<ThreadBuffer*>& buffers);
  ChunkBudget& budget() { return budget_; }

 private:
  ChunkBudget budget_;
  std::mutex mutex_;
  std::vector<ThreadBuffer*> buffers_;
  uint64_t next_serial_ = 1;
};

}  // namespace rankscope::collector
