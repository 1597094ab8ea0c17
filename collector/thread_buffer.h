// Per-thread event buffers: single-producer (the application thread), single-consumer
// (the drain thread), lock-free. Records are variable-length byte strings appended to a
// chain of chunks; the producer publishes each record with one release store, and the
// consumer hands chunks it has read back to the pool. The pool bounds the memory: a record
// that finds no room is dropped and counted, never waited for.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

namespace rankscope::collector {

// The memory of every buffer of the process: one reserved address range of the budget's
// size, cut into chunks. A chunk is cold (never touched, or given back to the kernel),
// ready (faulted in and free) or held by a buffer. The drain thread keeps a reserve of ready
// chunks (Prepare), growing it whenever a thread found none, so an application thread
// takes neither a page fault nor a lock for a new chunk in steady state. A thread that
// outruns the reserve faults a cold chunk in itself (counted: faulted_by_threads); one that
// finds every chunk held (the budget spent) drops its record instead of waiting.
class ChunkPool {
 public:
  static constexpr size_t kChunkBytes = 256 * 1024;

  // Reserves address space for max_bytes rounded down to whole chunks (at least one);
  // nothing is resident yet. Without address space the pool has no chunks.
  explicit ChunkPool(size_t max_bytes);
  ~ChunkPool();
  ChunkPool(const ChunkPool&) = delete;
  ChunkPool& operator=(const ChunkPool&) = delete;

  // ---- any thread, lock-free (one compare-and-swap per chunk) ----
  // A ready chunk, else a cold one that the caller faults in as it writes (which the pool
  // remembers: TakeStarved, faulted_by_threads); nullptr when every chunk is held.
  void* Take();
  // A chunk a buffer no longer holds (the consumer read it): ready again, still resident
  // and warm.
  void Recycle(void* chunk);
  // ---- the drain thread ----
  // Faults cold chunks in until `target` are ready (or none is cold); returns how many.
  size_t Prepare(size_t target);
  // Gives ready chunks beyond `keep` back to the kernel (cold again); returns how many.
  size_t Release(size_t keep);
  // Whether Take found nothing ready since the last call.
  bool TakeStarved() { return starved_.exchange(false, std::memory_order_relaxed); }
  // Changes whenever a chunk may have become free (recycled, prepared or released): a thread
  // that found none tries again only then, so dropping costs it one read of a line rarely
  // written.
  uint64_t returns() const { return returns_.load(std::memory_order_acquire); }

  size_t chunk_count() const { return chunk_count_; }
  size_t ready_count() const { return ready_count_.load(std::memory_order_relaxed); }
  size_t cold_count() const { return cold_count_.load(std::memory_order_relaxed); }
  size_t held_count() const { return chunk_count_ - ready_count() - cold_count(); }
  uint64_t taken() const { return taken_.load(std::memory_order_relaxed); }
  uint64_t faulted_by_threads() const { return faulted_by_threads_.load(std::memory_order_relaxed); }

 private:
  // A lock-free stack of chunk indexes; the head carries a tag against ABA.
  class IndexStack {
   public:
    void Push(uint32_t index, std::atomic<uint32_t>* next);
    bool Pop(uint32_t& index, std::atomic<uint32_t>* next);

   private:
    std::atomic<uint64_t> head_{0};  // tag << 32 | (index + 1); 0 = empty
  };
  std::byte* ChunkAt(uint32_t index) const { return base_ + size_t{index} * kChunkBytes; }
  uint32_t IndexOf(const void* chunk) const;

  std::byte* base_ = nullptr;
  size_t chunk_count_ = 0;
  std::unique_ptr<std::atomic<uint32_t>[]> next_;  // each chunk's successor in its stack
  // Written per chunk by threads and the drain thread alike.
  alignas(64) IndexStack ready_;
  IndexStack cold_;
  std::atomic<size_t> ready_count_{0}, cold_count_{0};
  std::atomic<uint64_t> taken_{0}, faulted_by_threads_{0};
  std::atomic<bool> starved_{false};
  // Read by dropping threads, written by the drain thread: a line of its own.
  alignas(64) std::atomic<uint64_t> returns_{0};
};

class ThreadBuffer {
 public:
  static constexpr size_t kChunkBytes = ChunkPool::kChunkBytes;
  static constexpr size_t kAlign = 8;
  // Every record starts with its unpadded size as a uint16.
  static constexpr size_t kMaxRecordBytes = UINT16_MAX;

  ThreadBuffer(ChunkPool* pool, int64_t tid, std::string name, uint64_t serial);
  ~ThreadBuffer();
  ThreadBuffer(const ThreadBuffer&) = delete;
  ThreadBuffer& operator=(const ThreadBuffer&) = delete;

  // Producer side, in two steps so records are written in place: Reserve returns room for
  // `size` bytes (1 to kMaxRecordBytes; nullptr, counting a drop, when there is none),
  // Commit publishes it. Nothing else may run on the producer side between the two. Inline:
  // in steady state a record costs a compare, its stores and one release store.
  std::byte* Reserve(size_t size) {
    if (size - 1 < kMaxRecordBytes && Padded(size) <= write_end_ - write_pos_) [[likely]] {
      return write_data_ + write_pos_;
    }
    return ReserveInNextChunk(size);
  }
  void Commit(size_t size) {
    write_pos_ += static_cast<uint32_t>(Padded(size));
    write_committed_->store(write_pos_, std::memory_order_release);
  }
  // Reserve + copy `parts` back to back + Commit. Returns false on a drop.
  bool Append(std::span<const std::span<const std::byte>> parts);
  // A record the producer gave up on before reserving room for it.
  void CountDrop() { Bump(dropped_); }

  // Consumer side: calls `visit` for published records, in order, at most `max_records`,
  // and gives back the chunks it finished. Returns the number of records visited.
  size_t Drain(const std::function<void(std::span<const std::byte>)>& visit,
               size_t max_records = SIZE_MAX);

  // The owning thread exited; the consumer may free the buffer once drained.
  void MarkExited() { exited_.store(true, std::memory_order_release); }
  bool exited() const { return exited_.load(std::memory_order_acquire); }
  // Records dropped since the last call: the pool's chunks were all held (the budget was
  // spent), or a record was larger than kMaxRecordBytes.
  uint64_t TakeDrops();

  int64_t tid() const { return tid_; }
  const std::string& name() const { return name_; }
  uint64_t serial() const { return serial_; }

 private:
  struct Chunk;
  static constexpr size_t Padded(size_t size) { return (size + kAlign - 1) & ~(kAlign - 1); }
  // A counter only the producer writes: no read-modify-write on the hot path.
  static void Bump(std::atomic<uint64_t>& counter) {
    counter.store(counter.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  std::byte* ReserveInNextChunk(size_t size);
  void GiveBack(Chunk* chunk);

  ChunkPool* pool_;
  const int64_t tid_;
  const std::string name_;
  const uint64_t serial_;
  std::atomic<bool> exited_{false};
  // Producer state. write_end_ is 0 until the first chunk, so the first Reserve takes one.
  std::byte* write_data_ = nullptr;
  uint32_t write_pos_ = 0;
  uint32_t write_end_ = 0;
  std::atomic<uint32_t>* write_committed_ = nullptr;
  Chunk* write_chunk_ = nullptr;
  std::atomic<uint64_t> dropped_{0};
  uint64_t returns_when_refused_ = 0;  // the pool's returns() when it last had no chunk
  bool refused_ = false;
  std::atomic<Chunk*> first_chunk_{nullptr};  // hands the chain to the consumer
  // Consumer state.
  Chunk* read_chunk_ = nullptr;
  uint32_t read_pos_ = 0;
  uint64_t drops_taken_ = 0;
};

// All buffers of the process and the pool they share. Registration takes a lock (once per
// thread); the drain thread snapshots the list.
class BufferRegistry {
 public:
  explicit BufferRegistry(size_t max_bytes) : pool_(max_bytes) {}
  ~BufferRegistry();  // frees every buffer: only once no thread can append any more
  BufferRegistry(const BufferRegistry&) = delete;
  BufferRegistry& operator=(const BufferRegistry&) = delete;
  ThreadBuffer* Register(int64_t tid, std::string name);
  std::vector<ThreadBuffer*> Snapshot();
  // Removes and frees `buffers`: ones seen exited before their last drain.
  void Remove(const std::vector<ThreadBuffer*>& buffers);
  ChunkPool& pool() { return pool_; }

 private:
  ChunkPool pool_;
  std::mutex mutex_;
  std::vector<ThreadBuffer*> buffers_;
  uint64_t next_serial_ = 1;
};

}  // namespace rankscope::collector
