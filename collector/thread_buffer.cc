#include "collector/thread_buffer.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

namespace rankscope::collector {

struct ThreadBuffer::Chunk {
  std::atomic<uint32_t> committed{0};  // bytes published to the consumer
  std::atomic<bool> sealed{false};     // the producer moved on to `next`
  std::atomic<Chunk*> next{nullptr};
  alignas(64) std::byte data[kChunkBytes];
};

ChunkBudget::~ChunkBudget() {
  for (void* memory : pool_) ::operator delete(memory, std::align_val_t{64});
}

void* ChunkBudget::Acquire(size_t bytes) {
  size_t current = in_use_.load(std::memory_order_relaxed);
  do {
    if (current + bytes > max_bytes_) return nullptr;
  } while (!in_use_.compare_exchange_weak(current, current + bytes, std::memory_order_relaxed));
  {
    std::lock_guard lock(pool_mutex_);
    if (!pool_.empty()) {
      void* memory = pool_.back();
      pool_.pop_back();
      return memory;
    }
  }
  void* memory = ::operator new(bytes, std::align_val_t{64}, std::nothrow);
  if (memory == nullptr) in_use_.fetch_sub(bytes, std::memory_order_relaxed);
  return memory;
}

void ChunkBudget::Recycle(void* memory, size_t bytes) {
  in_use_.fetch_sub(bytes, std::memory_order_relaxed);
  {
    std::lock_guard lock(pool_mutex_);
    if (pool_.size() < kMaxPooled) {
      pool_.push_back(memory);
      return;
    }
  }
  ::operator delete(memory, std::align_val_t{64});
}

ThreadBuffer::ThreadBuffer(ChunkBudget* budget, int64_t tid, std::string name, uint64_t serial)
    : budget_(budget), tid_(tid), name_(std::move(name)), serial_(serial) {}

ThreadBuffer::~ThreadBuffer() {
  // Only the consumer destroys a buffer, after the producer exited; the chain from the
  // read chunk on holds every chunk still allocated.
  Chunk* chunk =
      read_chunk_ != nullptr ? read_chunk_ : first_chunk_.load(std::memory_order_acquire);
  while (chunk != nullptr) {
    Chunk* next = chunk->next.load(std::memory_order_acquire);
    FreeChunk(chunk);
    chunk = next;
  }
}

ThreadBuffer::Chunk* ThreadBuffer::NewChunk() {
  void* memory = budget_->Acquire(sizeof(Chunk));
  return memory != nullptr ? new (memory) Chunk : nullptr;
}

void ThreadBuffer::FreeChunk(Chunk* chunk) {
  chunk->~Chunk();
  budget_->Recycle(chunk, sizeof(Chunk));
}

std::byte* ThreadBuffer::Reserve(size_t size) {
  size_t padded = (size + kAlign - 1) & ~(kAlign - 1);
  if (padded == 0 || padded > kChunkBytes) {
    drops_.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  if (write_chunk_ == nullptr || write_pos_ + padded > kChunkBytes) {
    Chunk* fresh = NewChunk();
    if (fresh == nullptr) {
      drops_.fetch_add(1, std::memory_order_relaxed);
      return nullptr;
    }
    if (write_chunk_ == nullptr) {
      first_chunk_.store(fresh, std::memory_order_release);  // the consumer starts here
    } else {
      write_chunk_->next.store(fresh, std::memory_order_release);
      write_chunk_->sealed.store(true, std::memory_order_release);
    }
    write_chunk_ = fresh;
    write_pos_ = 0;
  }
  return write_chunk_->data + write_pos_;
}

void ThreadBuffer::Commit(size_t size) {
  write_pos_ += static_cast<uint32_t>((size + kAlign - 1) & ~(kAlign - 1));
  write_chunk_->committed.store(write_pos_, std::memory_order_release);
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

size_t ThreadBuffer::Drain(const std::function<void(std::span<const std::byte>)>& visit,
                           size_t max_records) {
  size_t visited = 0;
  if (read_chunk_ == nullptr) read_chunk_ = first_chunk_.load(std::memory_order_acquire);
  while (read_chunk_ != nullptr) {
    uint32_t committed = read_chunk_->committed.load(std::memory_order_acquire);
    while (read_pos_ < committed) {
      if (visited == max_records) return visited;
      const std::byte* record = read_chunk_->data + read_pos_;
      uint32_t size = 0;
      std::memcpy(&size, record, sizeof(size));  // every record starts with its size
      size_t padded = (size + kAlign - 1) & ~(kAlign - 1);
      if (size < sizeof(uint32_t) || read_pos_ + padded > committed) break;  // damaged
      visit(std::span<const std::byte>(record, size));
      read_pos_ += static_cast<uint32_t>(padded);
      ++visited;
    }
    if (!read_chunk_->sealed.load(std::memory_order_acquire)) break;
    if (read_pos_ < read_chunk_->committed.load(std::memory_order_acquire)) continue;
    Chunk* next = read_chunk_->next.load(std::memory_order_acquire);
    FreeChunk(read_chunk_);
    read_chunk_ = next;
    read_pos_ = 0;
  }
  return visited;
}

ThreadBuffer* BufferRegistry::Register(int64_t tid, std::string name) {
  std::lock_guard lock(mutex_);
  auto* buffer = new (std::nothrow) ThreadBuffer(&budget_, tid, std::move(name), next_serial_++);
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
