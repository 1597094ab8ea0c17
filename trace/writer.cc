#include "trace/writer.h"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <array>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>
#include <unordered_map>

#include "trace/event_codec.h"
#include "trace/run_dir.h"
#include "trace/schema.h"
#include "trace/sqlite_util.h"

#ifndef RANKSCOPE_VERSION
#define RANKSCOPE_VERSION "unknown"
#endif

namespace rankscope::trace {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

bool ShouldCommit(size_t uncommitted_events, std::chrono::nanoseconds since_first_uncommitted,
                  const WriterOptions& options) {
  return uncommitted_events >= options.commit_max_events ||
         since_first_uncommitted >= options.commit_interval;
}

namespace {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

// A counter's name is part of its identity (Lane::SameIdentity).
using LaneKey = std::tuple<LaneKind, LaneRole, int32_t, uint32_t, uint64_t, int64_t, int64_t, uint64_t, std::string>;
LaneKey KeyOf(const Lane& l) {
  return {l.kind, l.role, l.device, l.context, l.stream, l.pid, l.tid, l.comm_hash,
          l.kind == LaneKind::kCounter ? l.name : std::string()};
}

using DropKey = std::tuple<std::string, std::string, int32_t, uint32_t, uint64_t>;

// Reasons the writer gives in `drops` (source "writer").
constexpr const char* kReasonQueueFull = "queue full";
constexpr const char* kReasonStopped = "recording stopped";
// Room for the stop record on a full disk: a transaction of a few 16 KiB pages in the WAL.
constexpr off_t kStopRecordReserveBytes = 256 * 1024;
constexpr const char* kReasonClosed = "writer closed";
constexpr const char* kReasonUnknownLane = "unknown lane";
constexpr const char* kReasonInvalidTime = "invalid time range";

Status Validate(const RankIdentity& id) {
  if (!IsValidRunId(id.run_id)) {
    return InvalidArgument("run id must be 1 to 128 characters of letters, digits, '.', '_' or '-'");
  }
  if (id.rank && (*id.rank < 0 || *id.rank >= kMaxWorldSize)) {
    return InvalidArgument(fmt::format("rank {} is out of range (0 to {})", *id.rank, kMaxWorldSize - 1));
  }
  if (id.world_size && (*id.world_size <= 0 || *id.world_size > kMaxWorldSize)) {
    return InvalidArgument(fmt::format("world size {} is out of range (1 to {})", *id.world_size, kMaxWorldSize));
  }
  if (id.rank && id.world_size && *id.rank >= *id.world_size) {
    return InvalidArgument(fmt::format("rank {} is not below world size {}", *id.rank, *id.world_size));
  }
  return Status::Ok();
}

// Why recording stopped, in a user's words: from the last SQLite error on `db` and the
// system error behind it. Read it before anything else runs on `db`.
constexpr const char* kFileRemoved = "file removed";
const char* StopKind(sqlite3* db) {
  const int rc = sqlite3_extended_errcode(db) & 0xff;
  const int system_error = sqlite3_system_errno(db);  // when SQLite kept it
  if (rc == SQLITE_FULL || system_error == ENOSPC || system_error == EDQUOT) return "disk full";
  if (system_error == EFBIG) return "file size limit reached";
  switch (rc) {
    case SQLITE_READONLY: return "file became read-only";
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB: return "file damaged";
    case SQLITE_IOERR: return "write error";
    default: return "error";
  }
}

void RemoveWithSidecars(const fs::path& path) {
  std::error_code ignored;
  fs::remove(path, ignored);
  for (const fs::path& companion : RankFileCompanions(path)) fs::remove(companion, ignored);
}

}  // namespace

// The file a writer created: what its path must keep naming while it records.
struct FileIdentity {
  dev_t device = 0;
  ino_t inode = 0;
};

class TraceWriter::Impl {
 public:
  Impl(fs::path path, WriterOptions options, FileIdentity file)
      : path_(std::move(path)), options_(std::move(options)), file_(file) {}

  Status Open(const RankIdentity& identity);
  void Start() { thread_ = std::thread([this] { Run(); }); }
  Status Close();
  void KeepRoomForTheStopRecord();
  Status UpsertDrop(const DropKey& key, uint64_t count);
  void GiveBackTheReserve();
  Status Flush(std::chrono::milliseconds timeout);

  StringId Intern(std::string_view text);
  LaneId AddLane(const Lane& lane);
  void SetMeta(std::string_view key, std::string_view value);
  bool Submit(EventTables&& batch);
  void ReplaceInFlight(InFlightState state);
  void AddDrops(const DropRecord& drop, bool wake);
  WriterStats Stats() const;
  const fs::path& path() const { return path_; }

 private:
  void Run();
  void WakeWriter();
  void Begin();
  void Commit();
  // Stops recording for good: rolls back, counts what is lost. `kind` says why in a user's
  // words; null reads it from the SQLite error that just happened.
  void Fail(Status status, const char* kind = nullptr);
  Status CheckFileStillThere() const;
  // Once after Fail: the stop record, then options_.on_failure.
  void ReportStop();
  void WriteStopRecord();
  void WriteAux();
  void InsertBatch(const EventTables& batch);
  void WriteInFlight(const InFlightState& state);
  template <typename Record>
  bool InsertRecord(int table, const Record& record);
  void WriteBlock(int table);
  Status Sql(std::string_view sql, std::string_view what) { return sql::Exec(db_.get(), sql, what); }

  const fs::path path_;
  const WriterOptions options_;
  const FileIdentity file_;
  sql::DbHandle db_;

  // Producer side: the queue.
  mutable std::mutex queue_mu_;
  std::condition_variable queue_cv_;
  std::deque<EventTables> queue_;
  size_t queued_events_ = 0;
  bool stop_ = false;
  bool aux_pending_ = false;
  // The latest in-flight state, written after the first `in_flight_after_` queued batches
  // (those submitted before it), so the file never shows a state older than its events.
  std::optional<InFlightState> in_flight_;
  size_t in_flight_after_ = 0;
  uint64_t flush_requested_ = 0;  // Flush tickets handed out
  uint64_t flush_done_ = 0;       // tickets whose events are committed
  std::condition_variable flush_cv_;
  std::atomic<bool> failed_{false};
  Status failure_;  // error_ once recording stopped, for Flush on other threads

  // Producer side: strings, lanes, meta and drop counts waiting for the next transaction.
  std::mutex state_mu_;
  std::unordered_map<std::string, StringId, StringHash, std::equal_to<>> string_ids_;
  std::vector<std::pair<StringId, std::string>> new_strings_;
  std::vector<Lane> lanes_;
  std::map<LaneKey, LaneId> lane_ids_;
  std::vector<Lane> new_lanes_, renamed_lanes_;
  std::map<std::string, std::string> pending_meta_;
  std::map<DropKey, uint64_t> drop_totals_;
  bool drops_dirty_ = false;

  std::atomic<uint64_t> submitted_{0}, committed_{0}, dropped_{0}, commits_{0};

  // Writer thread only (and Close, after the thread has stopped).
  std::thread thread_;
  sql::Statement insert_[codec::kEventTableCount];
  sql::Statement insert_string_, insert_lane_, rename_lane_, update_lane_max_, upsert_meta_,
      upsert_drop_, insert_flight_, insert_open_range_;
  bool txn_open_ = false;
  Clock::time_point txn_started_;
  size_t uncommitted_ = 0;
  size_t batch_handled_ = 0;  // rows of the current batch inserted or refused
  LaneId known_lanes_ = 0;
  std::vector<int64_t> lane_max_;  // index = lane id
  // Rows per lane of the block of row ids each event table is filling (`lane_blocks`).
  struct BlockCounts {
    int64_t block = -1;
    std::vector<uint64_t> rows;  // index = lane id
    bool dirty = false;          // changed since last written
  };
  std::array<BlockCounts, codec::kEventTableCount> blocks_;
  std::array<std::string, codec::kEventTableCount> table_names_;
  sql::Statement upsert_block_;
  std::vector<bool> lane_max_changed_;  // index = lane id
  std::vector<LaneId> lane_max_dirty_;   // lanes whose maximum changed in this transaction
  Status error_;
  std::string stop_line_;  // meta `recording_stopped`
  bool file_gone_ = false;  // nothing to write the stop record into
  bool stop_reported_ = false;
  bool closed_ = false;
  std::filesystem::path reserve_path_;  // empty: no room kept (or given back)
  Status close_status_;
};

// A full disk would leave no room to say so: the writer keeps kStopRecordReserveBytes in a
// companion file (<rank file>-reserve) while it records, and gives them back to write the
// stop record. Without room for the reserve (or fallocate), it records without one.
void TraceWriter::Impl::KeepRoomForTheStopRecord() {
  fs::path reserve = path_;
  reserve += "-reserve";
  const int fd = ::open(reserve.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0) return;
  const bool kept = ::posix_fallocate(fd, 0, kStopRecordReserveBytes) == 0;
  ::close(fd);
  if (kept) {
    reserve_path_ = std::move(reserve);
  } else {
    ::unlink(reserve.c_str());
  }
}

void TraceWriter::Impl::GiveBackTheReserve() {
  if (reserve_path_.empty()) return;
  ::unlink(reserve_path_.c_str());
  reserve_path_.clear();
}

Status TraceWriter::Impl::Open(const RankIdentity& identity) {
  KeepRoomForTheStopRecord();
  sqlite3* raw = nullptr;
  // The file exists (Create made it, empty); SQLite treats an empty file as a new database.
  const int rc = sqlite3_open_v2(path_.c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX,
                                 nullptr);
  db_.reset(raw);
  if (rc != SQLITE_OK) return sql::FromSqlite(raw, rc, "cannot create the rank file");
  // page_size must precede WAL and the first table. synchronous=NORMAL in WAL mode keeps
  // every commit across a process crash; only a power loss can cost the last commits.
  RS_RETURN_IF_ERROR(Sql(fmt::format("PRAGMA page_size={}; {} PRAGMA wal_autocheckpoint={}; PRAGMA cache_size=-{};",
                                     kPageSize, kWriterPragmas, options_.wal_checkpoint_pages,
                                     options_.page_cache_kib),
                         "setting up the file"));
  RS_RETURN_IF_ERROR(Sql("BEGIN", "starting a transaction"));
  RS_RETURN_IF_ERROR(Sql(SchemaDdl(), "creating the tables"));
  RS_RETURN_IF_ERROR(Sql(fmt::format("PRAGMA application_id={}; PRAGMA user_version={};", kApplicationId,
                                     kSchemaVersion),
                         "writing the header"));
  {
    RS_ASSIGN_OR_RETURN(sql::Statement insert_enum,
                        sql::Statement::Prepare(db_.get(), "INSERT INTO enums VALUES(?, ?, ?)"));
    for (const EnumValue& e : EnumValues()) {
      insert_enum.BindText(1, e.type);
      insert_enum.BindInt(2, e.value);
      insert_enum.BindText(3, e.name);
      RS_RETURN_IF_ERROR(insert_enum.StepDone("writing enums"));
    }
  }
  RS_ASSIGN_OR_RETURN(upsert_meta_, sql::Statement::Prepare(
                                        db_.get(), "INSERT OR REPLACE INTO meta VALUES(?, ?)"));
  std::map<std::string, std::string> meta = IdentityToMeta(identity);
  meta.merge(ClockToMeta("start", SampleClocks()));
  meta[std::string(meta_key::kToolVersion)] = RANKSCOPE_VERSION;
  meta[std::string(meta_key::kSchemaVersion)] = std::to_string(kSchemaVersion);
  meta[std::string(meta_key::kCreatedRealtimeNs)] = std::to_string(RealtimeNs());
  meta[std::string(meta_key::kClosedCleanly)] = "0";
  for (const auto& [key, value] : meta) {
    upsert_meta_.BindText(1, key);
    upsert_meta_.BindText(2, value);
    RS_RETURN_IF_ERROR(upsert_meta_.StepDone("writing meta"));
  }
  RS_RETURN_IF_ERROR(Sql("COMMIT", "committing"));

  int index = 0;
  Status status;
  EventTables no_events;
  codec::ForEachTable(no_events, [&](std::string_view name, const auto&) {
    table_names_[static_cast<size_t>(index)] = std::string(name);
    auto stmt = sql::Statement::Prepare(db_.get(), FindTable(name)->InsertSql());
    if (!stmt.ok()) status = stmt.status();
    else insert_[index] = std::move(stmt).value();
    ++index;
  });
  RS_RETURN_IF_ERROR(status);
  RS_ASSIGN_OR_RETURN(upsert_block_,
                      sql::Statement::Prepare(db_.get(), "INSERT OR REPLACE INTO lane_blocks VALUES(?, ?, ?, ?)"));
  RS_ASSIGN_OR_RETURN(insert_string_,
                      sql::Statement::Prepare(db_.get(), "INSERT INTO strings VALUES(?, ?)"));
  RS_ASSIGN_OR_RETURN(insert_lane_, sql::Statement::Prepare(
                                        db_.get(), "INSERT INTO lanes VALUES(?,?,?,?,?,?,?,?,?,?,0)"));
  RS_ASSIGN_OR_RETURN(rename_lane_, sql::Statement::Prepare(
                                        db_.get(), "UPDATE lanes SET name=? WHERE id=?"));
  RS_ASSIGN_OR_RETURN(update_lane_max_,
                      sql::Statement::Prepare(db_.get(),
                                              "UPDATE lanes SET max_duration_ns=? WHERE id=?"));
  RS_ASSIGN_OR_RETURN(insert_flight_,
                      sql::Statement::Prepare(db_.get(), FindTable("flight_collectives")->InsertSql()));
  RS_ASSIGN_OR_RETURN(insert_open_range_,
                      sql::Statement::Prepare(db_.get(), FindTable("open_ranges")->InsertSql()));
  RS_ASSIGN_OR_RETURN(
      upsert_drop_,
      sql::Statement::Prepare(db_.get(),
                              "INSERT INTO drops(source, reason, device, context, stream, count) "
                              "VALUES(?,?,?,?,?,?) ON CONFLICT(source, reason, device, context, "
                              "stream) DO UPDATE SET count=excluded.count"));
  return Status::Ok();
}

StringId TraceWriter::Impl::Intern(std::string_view text) {
  if (text.empty()) return kEmptyString;
  std::lock_guard lock(state_mu_);
  auto it = string_ids_.find(text);
  if (it != string_ids_.end()) return it->second;
  const auto id = static_cast<StringId>(string_ids_.size() + 1);
  string_ids_.emplace(std::string(text), id);
  new_strings_.emplace_back(id, std::string(text));
  return id;
}

LaneId TraceWriter::Impl::AddLane(const Lane& lane) {
  std::lock_guard lock(state_mu_);
  auto [it, inserted] = lane_ids_.emplace(KeyOf(lane), static_cast<LaneId>(lanes_.size() + 1));
  if (inserted) {
    Lane stored = lane;
    stored.id = it->second;
    stored.max_duration_ns = 0;
    lanes_.push_back(stored);
    new_lanes_.push_back(stored);
  } else if (!lane.name.empty() && lanes_[it->second - 1].name != lane.name) {
    lanes_[it->second - 1].name = lane.name;
    renamed_lanes_.push_back(lanes_[it->second - 1]);
  }
  return it->second;
}

void TraceWriter::Impl::SetMeta(std::string_view key, std::string_view value) {
  {
    std::lock_guard lock(state_mu_);
    pending_meta_[std::string(key)] = std::string(value);
  }
  WakeWriter();
}

void TraceWriter::Impl::WakeWriter() {
  {
    std::lock_guard lock(queue_mu_);
    aux_pending_ = true;
  }
  queue_cv_.notify_one();
}

bool TraceWriter::Impl::Submit(EventTables&& batch) {
  const size_t n = batch.size();
  if (n == 0) return true;
  const char* refused = nullptr;
  {
    std::lock_guard lock(queue_mu_);
    if (stop_) {
      refused = kReasonClosed;
    } else if (failed_.load(std::memory_order_relaxed)) {
      refused = kReasonStopped;
    } else if (queued_events_ > 0 && queued_events_ + n > options_.queue_capacity_events) {
      refused = kReasonQueueFull;
    } else {
      queue_.push_back(std::move(batch));
      queued_events_ += n;
    }
  }
  if (refused == nullptr) {
    submitted_.fetch_add(n, std::memory_order_relaxed);
    queue_cv_.notify_one();
    return true;
  }
  // After Close the writer thread is gone; the count still shows in stats(). After a stop,
  // Close writes the count (best effort); only a full queue needs the next commit.
  AddDrops(DropRecord{"writer", refused, -1, 0, 0, n}, /*wake=*/refused == kReasonQueueFull);
  return false;
}

void TraceWriter::Impl::ReplaceInFlight(InFlightState state) {
  {
    std::lock_guard lock(queue_mu_);
    if (stop_ || failed_.load(std::memory_order_relaxed)) return;
    in_flight_ = std::move(state);
    in_flight_after_ = queue_.size();
  }
  queue_cv_.notify_one();
}

void TraceWriter::Impl::AddDrops(const DropRecord& drop, bool wake) {
  if (drop.count == 0) return;
  {
    std::lock_guard lock(state_mu_);
    drop_totals_[DropKey{drop.source, drop.reason, drop.device, drop.context, drop.stream}] +=
        drop.count;
    drops_dirty_ = true;
  }
  if (drop.source == "writer") dropped_.fetch_add(drop.count, std::memory_order_relaxed);
  if (wake) WakeWriter();
}

WriterStats TraceWriter::Impl::Stats() const {
  WriterStats s;
  s.events_submitted = submitted_.load();
  s.events_committed = committed_.load();
  s.events_dropped = dropped_.load();
  s.commits = commits_.load();
  return s;
}

void TraceWriter::Impl::Run() {
  std::deque<EventTables> work;
  for (;;) {
    bool stopping = false;
    bool aux = false;
    std::optional<InFlightState> in_flight;
    size_t in_flight_after = 0;
    uint64_t flush_ticket = 0;
    {
      std::unique_lock lock(queue_mu_);
      auto ready = [this] {
        return stop_ || aux_pending_ || !queue_.empty() || in_flight_.has_value() ||
               flush_requested_ > flush_done_;
      };
      if (txn_open_) {
        queue_cv_.wait_until(lock, txn_started_ + options_.commit_interval, ready);
      } else {
        queue_cv_.wait(lock, ready);
      }
      work.swap(queue_);
      queued_events_ = 0;
      in_flight.swap(in_flight_);
      in_flight_.reset();
      in_flight_after = in_flight_after_;
      aux = aux_pending_;
      aux_pending_ = false;
      stopping = stop_;
      if (flush_requested_ > flush_done_) flush_ticket = flush_requested_;
    }
    if (options_.writer_thread_hook) options_.writer_thread_hook();
    if (aux && error_.ok()) {
      Begin();
      WriteAux();
    }
    for (size_t i = 0; i < work.size(); ++i) {
      if (in_flight && i == in_flight_after) WriteInFlight(*in_flight);
      InsertBatch(work[i]);
    }
    if (in_flight && in_flight_after >= work.size()) WriteInFlight(*in_flight);
    work.clear();
    if (txn_open_ && (stopping || flush_ticket != 0 ||
                      ShouldCommit(uncommitted_, Clock::now() - txn_started_, options_))) {
      Commit();
    }
    ReportStop();
    if (flush_ticket != 0) {
      std::lock_guard lock(queue_mu_);
      flush_done_ = flush_ticket;
      flush_cv_.notify_all();
    }
    if (stopping) return;
  }
}

void TraceWriter::Impl::Begin() {
  if (txn_open_ || !error_.ok()) return;
  if (Status s = Sql("BEGIN", "starting a transaction"); !s.ok()) return Fail(s);
  txn_open_ = true;
  txn_started_ = Clock::now();
}

void TraceWriter::Impl::Fail(Status status, const char* kind) {
  if (!error_.ok()) return;
  if (kind == nullptr) kind = StopKind(db_.get());
  if (txn_open_) {
    (void)Sql("ROLLBACK", "rolling back");
    txn_open_ = false;
  }
  stop_line_ = fmt::format("{}: {} after {} events committed", kind, status.message(), committed_.load());
  error_ = Status(status.code(), fmt::format("{}: recording stopped: {}", path_.string(), stop_line_));
  file_gone_ = kind == kFileRemoved;
  {
    std::lock_guard lock(queue_mu_);
    failure_ = error_;
  }
  failed_.store(true);
  // Rolled-back events never reach the file: count them as lost.
  AddDrops(DropRecord{"writer", kReasonStopped, -1, 0, 0, uncommitted_}, false);
  uncommitted_ = 0;
  lane_max_dirty_.clear();
  std::fill(lane_max_changed_.begin(), lane_max_changed_.end(), false);
}

// Recording into a file that was removed (or replaced) would only fill the disk with data
// nobody can read: SQLite keeps writing to the open file without noticing.
Status TraceWriter::Impl::CheckFileStillThere() const {
  struct stat now {};
  if (::stat(path_.c_str(), &now) != 0) {
    return IoError(fmt::format("the file cannot be found any more ({})", std::strerror(errno)));
  }
  if (now.st_dev != file_.device || now.st_ino != file_.inode) {
    return IoError("another file has taken its place");
  }
  return Status::Ok();
}

void TraceWriter::Impl::ReportStop() {
  if (error_.ok() || stop_reported_) return;
  stop_reported_ = true;
  if (!file_gone_) WriteStopRecord();
  if (!options_.on_failure) return;
  try {
    options_.on_failure(error_);
  } catch (...) {  // the host's callback must not take the writer thread (and the process) down
  }
}

// Best effort after recording stopped: meta `recording_stopped` says why, and `drops`
// counts every event lost since. A file that cannot take even that stays as committed.
Status TraceWriter::Impl::UpsertDrop(const DropKey& key, uint64_t count) {
  upsert_drop_.BindText(1, std::get<0>(key));
  upsert_drop_.BindText(2, std::get<1>(key));
  upsert_drop_.BindInt(3, std::get<2>(key));
  upsert_drop_.BindInt(4, std::get<3>(key));
  upsert_drop_.BindUint(5, std::get<4>(key));
  upsert_drop_.BindUint(6, count);
  return upsert_drop_.StepDone("writing drops");
}

void TraceWriter::Impl::WriteStopRecord() {
  GiveBackTheReserve();
  std::vector<std::pair<DropKey, uint64_t>> drops;
  {
    std::lock_guard lock(state_mu_);
    drops.assign(drop_totals_.begin(), drop_totals_.end());
  }
  if (!Sql("BEGIN", "starting a transaction").ok()) return;
  upsert_meta_.BindText(1, meta_key::kRecordingStopped);
  upsert_meta_.BindText(2, stop_line_);
  bool written = upsert_meta_.StepDone("writing meta").ok();
  for (const auto& [key, count] : drops) {
    if (!written) break;
    written = UpsertDrop(key, count).ok();
  }
  if (!written || !Sql("COMMIT", "committing").ok()) (void)Sql("ROLLBACK", "rolling back");
}

void TraceWriter::Impl::Commit() {
  if (!txn_open_) return;
  WriteAux();
  std::vector<LaneId> changed;
  changed.swap(lane_max_dirty_);  // Fail() clears lane_max_dirty_: never iterate it directly
  for (LaneId lane : changed) {
    if (!error_.ok()) break;
    update_lane_max_.BindInt(1, lane_max_[lane]);
    update_lane_max_.BindInt(2, lane);
    if (Status s = update_lane_max_.StepDone("updating lane durations"); !s.ok()) Fail(s);
    lane_max_changed_[lane] = false;
  }
  for (int table = 0; table < codec::kEventTableCount; ++table) WriteBlock(table);
  if (!error_.ok()) return;
  if (Status s = CheckFileStillThere(); !s.ok()) return Fail(s, kFileRemoved);
  if (Status s = Sql("COMMIT", "committing"); !s.ok()) return Fail(s);
  txn_open_ = false;
  committed_.fetch_add(uncommitted_, std::memory_order_relaxed);
  commits_.fetch_add(1, std::memory_order_relaxed);
  uncommitted_ = 0;
}

// Writes strings, lanes, meta and drop totals created since the last call. Runs inside the
// open transaction, before the events that may reference them.
void TraceWriter::Impl::WriteAux() {
  std::vector<std::pair<StringId, std::string>> strings;
  std::vector<Lane> lanes, renamed;
  std::map<std::string, std::string> meta;
  std::vector<std::pair<DropKey, uint64_t>> drops;
  {
    std::lock_guard lock(state_mu_);
    strings.swap(new_strings_);
    lanes.swap(new_lanes_);
    renamed.swap(renamed_lanes_);
    meta.swap(pending_meta_);
    if (drops_dirty_) drops.assign(drop_totals_.begin(), drop_totals_.end());
    drops_dirty_ = false;
  }
  auto check = [this](Status s) {
    if (!s.ok()) Fail(s);
    return error_.ok();
  };
  for (const auto& [id, text] : strings) {
    insert_string_.BindInt(1, id);
    insert_string_.BindText(2, text);
    if (!check(insert_string_.StepDone("writing strings"))) return;
  }
  for (const Lane& lane : lanes) {
    sql::Statement& s = insert_lane_;
    s.BindInt(1, lane.id);
    s.BindInt(2, static_cast<int>(lane.kind));
    s.BindInt(3, static_cast<int>(lane.role));
    s.BindInt(4, lane.device);
    s.BindInt(5, lane.context);
    s.BindUint(6, lane.stream);
    s.BindInt(7, lane.pid);
    s.BindInt(8, lane.tid);
    s.BindUint(9, lane.comm_hash);
    s.BindText(10, lane.name);
    if (!check(s.StepDone("writing lanes"))) return;
    known_lanes_ = std::max(known_lanes_, lane.id);
  }
  lane_max_.resize(known_lanes_ + 1, 0);
  lane_max_changed_.resize(known_lanes_ + 1, false);
  for (const Lane& lane : renamed) {
    rename_lane_.BindText(1, lane.name);
    rename_lane_.BindInt(2, lane.id);
    if (!check(rename_lane_.StepDone("renaming lanes"))) return;
  }
  for (const auto& [key, value] : meta) {
    upsert_meta_.BindText(1, key);
    upsert_meta_.BindText(2, value);
    if (!check(upsert_meta_.StepDone("writing meta"))) return;
  }
  for (const auto& [key, count] : drops) {
    if (!check(UpsertDrop(key, count))) return;
  }
}

void TraceWriter::Impl::WriteInFlight(const InFlightState& state) {
  if (!error_.ok()) return;
  Begin();
  auto check = [this](Status s) {
    if (!s.ok()) Fail(s);
    return error_.ok();
  };
  if (!check(Sql("DELETE FROM flight_collectives; DELETE FROM open_ranges;", "replacing the in-flight state"))) return;
  for (const FlightCollective& c : state.collectives) {
    sql::Statement& s = insert_flight_;
    s.BindUint(1, c.comm_hash);
    s.BindUint(2, c.sequence);
    s.BindInt(3, static_cast<int>(c.op));
    s.BindText(4, c.name);
    s.BindUint(5, c.bytes);
    s.BindInt(6, c.root);
    s.BindInt(7, c.peer);
    s.BindInt(8, c.comm_rank);
    s.BindInt(9, c.comm_size);
    s.BindInt(10, c.lane);
    s.BindInt(11, c.start_ns);
    if (c.end_ns) s.BindInt(12, *c.end_ns);
    else sqlite3_bind_null(s.get(), 12);
    if (!check(s.StepDone("writing the in-flight collectives"))) return;
  }
  for (const OpenRange& r : state.open_ranges) {
    sql::Statement& s = insert_open_range_;
    s.BindInt(1, r.lane);
    s.BindInt(2, r.depth);
    s.BindInt(3, r.start_ns);
    s.BindText(4, r.name);
    s.BindText(5, r.domain);
    s.BindInt(6, r.category);
    s.BindText(7, r.args);
    if (!check(s.StepDone("writing the open ranges"))) return;
  }
  const std::pair<std::string_view, int64_t> meta[] = {
      {meta_key::kInFlightAsOfNs, state.as_of_ns},
      {meta_key::kInFlightCompletedCollectives, static_cast<int64_t>(state.completed_collectives)},
      {meta_key::kInFlightCompletedSteps, static_cast<int64_t>(state.completed_steps)},
      {meta_key::kInFlightLastProgressNs, state.last_progress_ns},
  };
  for (const auto& [key, value] : meta) {
    upsert_meta_.BindText(1, key);
    upsert_meta_.BindText(2, std::to_string(value));
    if (!check(upsert_meta_.StepDone("writing meta"))) return;
  }
  // Not events: the commit comes with the transaction's age, and the event counts stay exact.
}

template <typename Record>
bool TraceWriter::Impl::InsertRecord(int table, const Record& record) {
  sql::Statement& stmt = insert_[table];
  const LaneId lane = codec::LaneOf(record);
  const TimestampNs duration = codec::DurationOf(record);
  if (lane == kNoLane || lane > known_lanes_ || duration < 0) {
    const bool bad_lane = lane == kNoLane || lane > known_lanes_;
    AddDrops(DropRecord{"writer", bad_lane ? kReasonUnknownLane : kReasonInvalidTime, -1, 0,
                        0, 1},
             false);
    ++batch_handled_;
    return true;
  }
  codec::Bind(stmt, record);
  const int rc = sqlite3_step(stmt.get());
  sqlite3_reset(stmt.get());
  if (rc != SQLITE_DONE) {
    Fail(sql::FromSqlite(db_.get(), rc, "inserting events"));
    return false;
  }
  BlockCounts& block = blocks_[static_cast<size_t>(table)];
  const int64_t block_index = (sqlite3_last_insert_rowid(db_.get()) - 1) / kBlockRows;
  if (block_index != block.block) {
    WriteBlock(table);
    block.block = block_index;
    block.rows.assign(known_lanes_ + 1, 0);
  } else if (block.rows.size() <= lane) {
    block.rows.resize(known_lanes_ + 1, 0);
  }
  ++block.rows[lane];
  block.dirty = true;
  if (duration > lane_max_[lane]) {
    lane_max_[lane] = duration;
    if (!lane_max_changed_[lane]) {
      lane_max_changed_[lane] = true;
      lane_max_dirty_.push_back(lane);
    }
  }
  ++uncommitted_;
  ++batch_handled_;
  if (uncommitted_ >= options_.commit_max_events) {
    Commit();
    Begin();
  }
  return error_.ok();
}

// Writes the row counts of `table`'s current block if they changed (absolute values, so
// a block filled across several transactions is rewritten, never double counted).
void TraceWriter::Impl::WriteBlock(int table) {
  BlockCounts& block = blocks_[static_cast<size_t>(table)];
  if (!block.dirty || !error_.ok()) return;
  block.dirty = false;
  for (LaneId lane = 1; lane < block.rows.size(); ++lane) {
    if (block.rows[lane] == 0) continue;
    upsert_block_.BindText(1, table_names_[static_cast<size_t>(table)]);
    upsert_block_.BindInt(2, block.block);
    upsert_block_.BindInt(3, lane);
    upsert_block_.BindUint(4, block.rows[lane]);
    if (Status s = upsert_block_.StepDone("writing lane blocks"); !s.ok()) return Fail(s);
  }
}

void TraceWriter::Impl::InsertBatch(const EventTables& batch) {
  const size_t total = batch.size();
  batch_handled_ = 0;
  if (error_.ok()) {
    Begin();
    WriteAux();
  }
  int index = 0;
  codec::ForEachTable(batch, [&](std::string_view, const auto& table) {
    const int table_index = index++;
    for (const auto& record : table) {
      if (!error_.ok() || !InsertRecord(table_index, record)) return;
    }
  });
  if (!error_.ok()) {
    const uint64_t lost = total - batch_handled_;
    AddDrops(DropRecord{"writer", kReasonStopped, -1, 0, 0, lost}, false);
  }
  batch_handled_ = 0;
}

Status TraceWriter::Impl::Close() {
  if (closed_) return close_status_;
  closed_ = true;
  {
    std::lock_guard lock(queue_mu_);
    stop_ = true;
  }
  queue_cv_.notify_one();
  if (thread_.joinable()) thread_.join();
  if (error_.ok()) {
    std::map<std::string, std::string> end = ClockToMeta("end", SampleClocks());
    end[std::string(meta_key::kClosedCleanly)] = "1";
    {
      std::lock_guard lock(state_mu_);
      for (auto& [key, value] : end) pending_meta_[key] = value;
    }
    Begin();
    WriteAux();
    Commit();
  }
  Status index_error;
  if (error_.ok()) {
    // Every event is committed by now: a failure here leaves the file without its indexes,
    // which range queries do without, and is no reason to say recording stopped.
    index_error = Sql(IndexDdl(), "building the lane/time indexes");
  }
  if (error_.ok() && index_error.ok()) {
    // Leave a self-contained file: fold the WAL back in and use a rollback journal, so the
    // trace can be copied or opened from read-only media. If that fails (no room for the
    // checkpoint), the file stays in WAL mode, which readers recover.
    (void)Sql("PRAGMA wal_checkpoint(TRUNCATE)", "checkpointing");
    (void)Sql("PRAGMA journal_mode=DELETE", "leaving WAL mode");
  } else {
    if (!error_.ok()) {
      const bool reported = stop_reported_;
      ReportStop();                                    // the final commit failed: now
      if (reported && !file_gone_) WriteStopRecord();  // the events refused since
    }
    // Leave the WAL as it is: folding it into a file that just failed could only fail too.
    sqlite3_db_config(db_.get(), SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr);
  }
  for (sql::Statement* s : {&upsert_block_, &insert_string_, &insert_lane_, &rename_lane_, &update_lane_max_,
                           &upsert_meta_, &upsert_drop_, &insert_flight_, &insert_open_range_}) {
    *s = sql::Statement();
  }
  for (sql::Statement& s : insert_) s = sql::Statement();
  const int rc = sqlite3_close(db_.release());
  GiveBackTheReserve();
  if (error_.ok() && !index_error.ok()) {
    error_ = index_error.WithContext(path_.string());
  }
  if (rc != SQLITE_OK && error_.ok()) {
    error_ = IoError(fmt::format("{}: closing failed: {}", path_.string(), sqlite3_errstr(rc)));
  }
  close_status_ = error_;
  return close_status_;
}

// ---- TraceWriter -------------------------------------------------------------------------

TraceWriter::TraceWriter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TraceWriter::~TraceWriter() {
  if (impl_) (void)impl_->Close();
}

Result<std::unique_ptr<TraceWriter>> TraceWriter::Create(const fs::path& path,
                                                         const RankIdentity& identity,
                                                         WriterOptions options) {
  if (Status s = Validate(identity); !s.ok()) return s.WithContext(path.string());
  if (options.commit_max_events == 0 || options.queue_capacity_events == 0 || options.wal_checkpoint_pages <= 0 ||
      options.page_cache_kib <= 0) {
    return InvalidArgument(fmt::format("{}: commit, queue, checkpoint and cache sizes must be positive", path.string()));
  }
  std::error_code ec;
  const fs::path parent = path.has_parent_path() ? path.parent_path() : fs::path(".");
  if (!fs::is_directory(parent, ec)) {
    return NotFound(fmt::format("{}: directory {} does not exist", path.string(), parent.string()));
  }
  if (options.overwrite) RemoveWithSidecars(path);
  // O_EXCL: of two writers racing for one path, exactly one creates the file, and a
  // failed Create only ever deletes a file it created itself.
  const int fd = ::open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0) {
    if (errno == EEXIST) {
      return AlreadyExists(fmt::format("{}: already exists; refusing to overwrite it", path.string()));
    }
    return IoError(fmt::format("{}: cannot create: {}", path.string(), std::strerror(errno)));
  }
  struct stat created {};
  const bool identified = ::fstat(fd, &created) == 0;
  const int saved_errno = errno;
  ::close(fd);
  if (!identified) {
    RemoveWithSidecars(path);
    return IoError(fmt::format("{}: cannot inspect the new file: {}", path.string(), std::strerror(saved_errno)));
  }

  auto impl = std::make_unique<Impl>(path, std::move(options), FileIdentity{created.st_dev, created.st_ino});
  if (Status s = impl->Open(identity); !s.ok()) {
    impl.reset();
    RemoveWithSidecars(path);  // ours, half-made: leave nothing behind
    return s.WithContext(path.string());
  }
  impl->Start();
  return std::unique_ptr<TraceWriter>(new TraceWriter(std::move(impl)));
}

StringId TraceWriter::Intern(std::string_view text) { return impl_->Intern(text); }
LaneId TraceWriter::AddLane(const Lane& lane) { return impl_->AddLane(lane); }
void TraceWriter::SetMeta(std::string_view key, std::string_view value) { impl_->SetMeta(key, value); }
bool TraceWriter::Submit(EventTables&& batch) { return impl_->Submit(std::move(batch)); }
void TraceWriter::ReplaceInFlight(InFlightState state) { impl_->ReplaceInFlight(std::move(state)); }
void TraceWriter::AddDrops(const DropRecord& drop) { impl_->AddDrops(drop, true); }
Status TraceWriter::Close() { return impl_->Close(); }

Status TraceWriter::Flush(std::chrono::milliseconds timeout) { return impl_->Flush(timeout); }

Status TraceWriter::Impl::Flush(std::chrono::milliseconds timeout) {
  std::unique_lock lock(queue_mu_);
  if (stop_) return Unavailable("the writer is closed");
  if (failed_.load()) return failure_;
  uint64_t ticket = ++flush_requested_;
  queue_cv_.notify_one();
  if (!flush_cv_.wait_for(lock, timeout, [&] { return flush_done_ >= ticket; })) {
    return Unavailable(fmt::format("flush did not finish within {} ms", timeout.count()));
  }
  if (failed_.load()) return failure_;
  return Status::Ok();
}
WriterStats TraceWriter::stats() const { return impl_->Stats(); }
const fs::path& TraceWriter::path() const { return impl_->path(); }

}  // namespace rankscope::trace
