#include "collector/thread_buffer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <new>

namespace rankscope::collector {

// ---- ChunkPool ---------------------------------------------------------------------------

void ChunkPool::IndexStack::Push(uint32_t index, std::atomic<uint32_t>* next) {
  uint64_t head = head_.load(std::memory_order_relaxed);
  uint64_t desired = 0;
  do {
    next[index].store(static_cast<uint32_t>(head), std::memory_order_relaxed);
    desired = ((head >> 32) + 1) << 32 | (uint64_t{index} + 1);
  } while (!head_.compare_exchange_weak(head, desired, std::memory_order_release, std::memory_order_relaxed));
}

bool ChunkPool::IndexStack::Pop(uint32_t& index, std::atomic<uint32_t>* next) {
  uint64_t head = head_.load(std::memory_order_acquire);
  for (;;) {
    const auto top = static_cast<uint32_t>(head);
    if (top == 0) return false;
    // Stale when another thread popped `top` meanwhile; the tag then fails the exchange.
    const uint32_t below = next[top - 1].load(std::memory_order_relaxed);
    const uint64_t desired = ((head >> 32) + 1) << 32 | below;
    if (head_.compare_exchange_weak(head, desired, std::memory_order_acquire, std::memory_order_acquire)) {
      index = top - 1;
      return true;
    }
  }
}

ChunkPool::ChunkPool(size_t max_bytes) {
  const size_t count = std::clamp<size_t>(max_bytes / kChunkBytes, 1, UINT32_MAX - 1);
  // Address space only: pages become resident when Prepare (or a thread that outran the
  // reserve) touches them.
  void* base = mmap(nullptr, count * kChunkBytes, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) return;  // no chunks: every record is dropped and counted
  next_.reset(new (std::nothrow) std::atomic<uint32_t>[count]);
  if (!next_) {
    munmap(base, count * kChunkBytes);
    return;
  }
  base_ = static_cast<std::byte*>(base);
  chunk_count_ = count;
  // Pushed in reverse, so chunks are first used from the start of the range.
  for (size_t i = count; i > 0; --i) cold_.Push(static_cast<uint32_t>(i - 1), next_.get());
  cold_count_.store(count, std::memory_order_relaxed);
}

ChunkPool::~ChunkPool() {
  if (base_ != nullptr) munmap(base_, chunk_count_ * kChunkBytes);
}

uint32_t ChunkPool::IndexOf(const void* chunk) const {
  return static_cast<uint32_t>((static_cast<const std::byte*>(chunk) - base_) / kChunkBytes);
}

void* ChunkPool::Take() {
  if (chunk_count_ == 0) return nullptr;
  uint32_t index = 0;
  if (ready_.Pop(index, next_.get())) {
    ready_count_.fetch_sub(1, std::memory_order_relaxed);
  } else {
    if (!starved_.load(std::memory_order_relaxed)) starved_.store(true, std::memory_order_relaxed);
    if (!cold_.Pop(index, next_.get())) return nullptr;
    cold_count_.fetch_sub(1, std::memory_order_relaxed);
    faulted_by_threads_.fetch_add(1, std::memory_order_relaxed);
  }
  taken_.fetch_add(1, std::memory_order_relaxed);
  return ChunkAt(index);
}

void ChunkPool::Recycle(void* chunk) {
  ready_.Push(IndexOf(chunk), next_.get());
  ready_count_.fetch_add(1, std::memory_order_relaxed);
  returns_.fetch_add(1, std::memory_order_release);
}

namespace {
// Makes the pages of [start, start + bytes) resident and writable now: one system call
// where the kernel has MADV_POPULATE_WRITE (5.14), else a write to every page.
void FaultIn(std::byte* start, size_t bytes) {
#ifdef MADV_POPULATE_WRITE
  if (madvise(start, bytes, MADV_POPULATE_WRITE) == 0) return;
#endif
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  for (size_t offset = 0; offset < bytes; offset += page) {
    reinterpret_cast<volatile std::byte*>(start)[offset] = std::byte{0};
  }
}
}  // namespace

size_t ChunkPool::Prepare(size_t target) {
  size_t prepared = 0;
  uint32_t index = 0;
  while (ready_count() < target && cold_.Pop(index, next_.get())) {
    cold_count_.fetch_sub(1, std::memory_order_relaxed);
    FaultIn(ChunkAt(index), kChunkBytes);
    ready_.Push(index, next_.get());
    ready_count_.fetch_add(1, std::memory_order_relaxed);
    ++prepared;
  }
  // A thread that found nothing while this chunk was being faulted in may take it now.
  if (prepared > 0) returns_.fetch_add(1, std::memory_order_release);
  return prepared;
}

size_t ChunkPool::Release(size_t keep) {
  size_t released = 0;
  uint32_t index = 0;
  while (ready_count() > keep && ready_.Pop(index, next_.get())) {
    ready_count_.fetch_sub(1, std::memory_order_relaxed);
    madvise(ChunkAt(index), kChunkBytes, MADV_DONTNEED);  // zero pages again on next touch
    cold_.Push(index, next_.get());
    cold_count_.fetch_add(1, std::memory_order_relaxed);
    ++released;
  }
  if (released > 0) returns_.fetch_add(1, std::memory_order_release);
  return released;
}

// ---- ThreadBuffer ------------------------------------------------------------------------

// A chunk's first 64 bytes; the records follow.
struct alignas(64) ThreadBuffer::Chunk {
  std::atomic<uint32_t> committed{0};  // record bytes published to the consumer
  std::atomic<bool> sealed{false};     // the producer moved on to `next`
  std::atomic<Chunk*> next{nullptr};
  std::byte* data() { return reinterpret_cast<std::byte*>(this) + sizeof(Chunk); }
};

namespace {
constexpr uint32_t kChunkDataBytes = ThreadBuffer::kChunkBytes - 64;
}

ThreadBuffer::ThreadBuffer(ChunkPool* pool, int64_t tid, std::string name, uint64_t serial)
    : pool_(pool), tid_(tid), name_(std::move(name)), serial_(serial) {
  static_assert(sizeof(Chunk) == 64);
}

ThreadBuffer::~ThreadBuffer() {
  // Only the consumer destroys a buffer, after the producer exited; the chain from the
  // read chunk on holds every chunk still held.
  Chunk* chunk = read_chunk_ != nullptr ? read_chunk_ : first_chunk_.load(std::memory_order_acquire);
  while (chunk != nullptr) {
    Chunk* next = chunk->next.load(std::memory_order_acquire);
    GiveBack(chunk);
    chunk = next;
  }
}

void ThreadBuffer::GiveBack(Chunk* chunk) {
  chunk->~Chunk();
  pool_->Recycle(chunk);
}

std::byte* ThreadBuffer::ReserveInNextChunk(size_t size) {
  if (size == 0 || size > kMaxRecordBytes) {
    Bump(dropped_);
    return nullptr;
  }
  // While the budget is spent, ask the pool again only once a chunk came back.
  if (refused_ && pool_->returns() == returns_when_refused_) {
    Bump(dropped_);
    return nullptr;
  }
  const uint64_t returns = pool_->returns();
  void* memory = pool_->Take();
  refused_ = memory == nullptr;
  if (memory == nullptr) {
    returns_when_refused_ = returns;
    Bump(dropped_);
    return nullptr;
  }
  auto* fresh = new (memory) Chunk;
  if (write_chunk_ == nullptr) {
    first_chunk_.store(fresh, std::memory_order_release);  // the consumer starts here
  } else {
    write_chunk_->next.store(fresh, std::memory_order_release);
    write_chunk_->sealed.store(true, std::memory_order_release);
  }
  write_chunk_ = fresh;
  write_data_ = fresh->data();
  write_committed_ = &fresh->committed;
  write_pos_ = 0;
  write_end_ = kChunkDataBytes;
  return write_data_;
}

bool ThreadBuffer::Append(std::span<const std::span<const std::byte>> parts) {
  size_t size = 0;
  for (const auto& part : parts) size += part.size();
  std::byte* out = Reserve(size);
  if (out == nullptr) return false;
  for (const auto& part : parts) {
    if (part.empty()) continue;  // its data() may be null
    std::memcpy(out, part.data(), part.size());
    out += part.size();
  }
  Commit(size);
  return true;
}

uint64_t ThreadBuffer::TakeDrops() {
  const uint64_t dropped = dropped_.load(std::memory_order_relaxed);
  const uint64_t since = dropped - drops_taken_;
  drops_taken_ = dropped;
  return since;
}

size_t ThreadBuffer::Drain(const std::function<void(std::span<const std::byte>)>& visit, size_t max_records) {
  size_t visited = 0;
  if (read_chunk_ == nullptr) read_chunk_ = first_chunk_.load(std::memory_order_acquire);
  while (read_chunk_ != nullptr) {
    const uint32_t committed = read_chunk_->committed.load(std::memory_order_acquire);
    while (read_pos_ < committed) {
      if (visited == max_records) return visited;
      const std::byte* record = read_chunk_->data() + read_pos_;
      uint16_t size = 0;
      std::memcpy(&size, record, sizeof(size));  // every record starts with its size
      const size_t padded = Padded(size);
      if (size < sizeof(size) || read_pos_ + padded > committed) break;  // damaged
      visit(std::span<const std::byte>(record, size));
      read_pos_ += static_cast<uint32_t>(padded);
      ++visited;
    }
    if (!read_chunk_->sealed.load(std::memory_order_acquire)) break;
    if (read_pos_ < read_chunk_->committed.load(std::memory_order_acquire)) continue;
    Chunk* next = read_chunk_->next.load(std::memory_order_acquire);
    GiveBack(read_chunk_);
    read_chunk_ = next;
    read_pos_ = 0;
  }
  return visited;
}

// ---- BufferRegistry ----------------------------------------------------------------------

ThreadBuffer* BufferRegistry::Register(int64_t tid, std::string name) {
  std::lock_guard lock(mutex_);
  auto* buffer = new (std::nothrow) ThreadBuffer(&pool_, tid, std::move(name), next_serial_++);
  if (buffer != nullptr) buffers_.push_back(buffer);
  return buffer;
}

BufferRegistry::~BufferRegistry() {
  for (ThreadBuffer* buffer : buffers_) delete buffer;
}

std::vector<ThreadBuffer*> BufferRegistry::Snapshot() {
  std::lock_guard lock(mutex_);
  return buffers_;
}

void BufferRegistry::Remove(const std::vector<ThreadBuffer*>& buffers) {
  if (buffers.empty()) return;
  {
    std::lock_guard lock(mutex_);
    std::erase_if(buffers_, [&](ThreadBuffer* b) {
      return std::find(buffers.begin(), buffers.end(), b) != buffers.end();
    });
  }
  for (ThreadBuffer* buffer : buffers) delete buffer;
}

}  // namespace rankscope::collector
