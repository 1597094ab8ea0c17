// TraceWriter: the API the collector records through. Producers hand batches to a bounded
// queue and never block; one background thread inserts them into the rank file with
// prepared statements inside transactions (WAL mode, its index in heap memory: no -shm, no
// mmap), committing at least every `commit_interval` and every `commit_max_events` events.
// A crash loses the open transaction and whatever still waits in the queue; every commit
// survives. A write error (disk full, file removed, ...) stops recording for good without
// harming the process: later events are dropped and counted, and the file says why.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"
#include "trace/events.h"
#include "trace/in_flight.h"
#include "trace/rank_meta.h"

namespace rankscope::trace {

struct WriterOptions {
  // Events queued but not yet taken by the writer thread. A batch that would exceed it is
  // dropped (and counted in `drops`), unless the queue is empty.
  size_t queue_capacity_events = size_t{1} << 20;
  std::chrono::milliseconds commit_interval{200};
  size_t commit_max_events = 65536;
  // The WAL is folded into the database once it holds this many pages (kPageSize each):
  // bounds the -wal file while recording. Readers of a live file copy again when a
  // checkpoint lands during their copy (trace/schema.h, kWriterPragmas).
  int wal_checkpoint_pages = 4096;
  // SQLite's page cache for the file, in KiB (kWriterPragmas' 32 MiB by default): inserts
  // in time order touch few pages, so an injected writer can keep its memory small.
  int page_cache_kib = 32768;
  bool overwrite = false;  // replace an existing file instead of refusing
  // Test seam: runs on the writer thread before each batch of work is inserted.
  std::function<void()> writer_thread_hook;
  // Called once when a write error stopped recording, with the error (one line naming the
  // file and why, e.g. "... recording stopped: disk full: ... after 1200 events committed").
  // Runs on the writer thread, or on the thread calling Close when the final commit failed;
  // it must not block or call back into the writer.
  std::function<void(const Status&)> on_failure;
};

struct WriterStats {
  uint64_t events_submitted = 0;  // accepted into the queue
  uint64_t events_committed = 0;  // durable in the file
  uint64_t events_dropped = 0;    // refused (queue full, recording stopped or closed)
  uint64_t commits = 0;
};

// Commit policy, separate so it can be tested without a clock.
bool ShouldCommit(size_t uncommitted_events, std::chrono::nanoseconds since_first_uncommitted,
                  const WriterOptions& options);

class TraceWriter {
 public:
  // Creates the rank file with schema, meta and start calibration, and starts the writer
  // thread. Refuses an existing file unless options.overwrite.
  static Result<std::unique_ptr<TraceWriter>> Create(const std::filesystem::path& path,
                                                     const RankIdentity& identity,
                                                     WriterOptions options = {});
  ~TraceWriter();  // closes if Close() was not called; the error is lost then
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  // Thread-safe. The same text always gets the same id; "" is kEmptyString.
  StringId Intern(std::string_view text);

  // Thread-safe. Returns the id of the lane with the same identity (Lane::SameIdentity)
  // if there is one, renaming it when `lane.name` is new and non-empty; else adds it.
  LaneId AddLane(const Lane& lane);

  // Thread-safe; written with the next commit. Replaces an earlier value.
  void SetMeta(std::string_view key, std::string_view value);

  // Thread-safe and non-blocking. Returns false when the batch was dropped; its events
  // are then counted in `drops`.
  bool Submit(EventTables&& batch);

  // Thread-safe and non-blocking: the rank's in-flight state now (trace/in_flight.h),
  // replacing the one in the file. Written after every batch submitted before the call and
  // before any submitted after it; when several wait, only the latest is written.
  void ReplaceInFlight(InFlightState state);

  // Thread-safe: adds `drop.count` lost events of an outside source (e.g. CUPTI).
  void AddDrops(const DropRecord& drop);

  // Blocks until every batch submitted before the call is committed, or `timeout`
  // passes. Thread-safe; for flush points (signals, exec) where the process may not return.
  // After recording stopped it returns that error at once.
  Status Flush(std::chrono::milliseconds timeout);

  // Flushes everything, records the end calibration, and closes the file. Returns the
  // first error the writer met, if any (after a write error at once, leaving the file as
  // committed). Later Submit calls drop their batches.
  Status Close();

  WriterStats stats() const;
  const std::filesystem::path& path() const;

  class Impl;

 private:
  explicit TraceWriter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rankscope::trace
