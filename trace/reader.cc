#include "trace/reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <thread>
#include <tuple>

#include "trace/event_codec.h"
#include "trace/schema.h"
#include "trace/sqlite_util.h"

namespace rankscope::trace {
namespace fs = std::filesystem;

const std::string& RankTrace::str(StringId id) const {
  static const auto* const empty = new std::string();  // never destroyed
  return id < strings.size() ? strings[id] : *empty;
}

const Lane* RankTrace::lane(LaneId id) const {
  return id >= 1 && id <= lanes.size() ? &lanes[id - 1] : nullptr;
}

class TraceReader::Impl {
 public:
  explicit Impl(fs::path path) : path_(std::move(path)) {}

  // Opening runs the stages below in order.
  Status Open();
  // The application id says rankscope; the schema version is one this build reads.
  Status CheckVersion();
  // Every table and column of the file's version is there, in a plain table.
  Status CheckTables();
  // The per-table lane/time range queries of ReadLaneRange.
  Status PrepareRangeQueries();
  Status ReadMeta();
  Status Fail(Status s) const { return s.WithContext(path_.string()); }
  Result<std::vector<uint64_t>> LaneRowHints(size_t lanes) const;
  // Whether `table` holds a row (false for tables the file's version lacks).
  Result<bool> HasRows(std::string_view table) const;

  // Whether the file's schema version has `table` (tables added later read as empty).
  bool HasTable(std::string_view table) const {
    return FindTable(table)->ExistsIn(schema_version_);
  }

  fs::path path_;
  // Where connections come from: the file, or its recovered private copy. Declared before
  // every connection and statement, so it goes last.
  std::optional<sql::ReadableDatabase> source_;
  sql::DbHandle db_;
  int schema_version_ = 0;  // the file's PRAGMA user_version, 1..kSchemaVersion once open
  RankMeta meta_;
  // Per event table: rows of one lane overlapping a time window; empty for tables the
  // file's version lacks.
  std::array<sql::Statement, codec::kEventTableCount> range_queries_;
  sql::Statement lane_max_;
};

Status TraceReader::Impl::Open() {
  RS_ASSIGN_OR_RETURN(source_, sql::ReadableDatabase::Prepare(path_));
  RS_ASSIGN_OR_RETURN(db_, source_->Connect());
  RS_RETURN_IF_ERROR(CheckVersion());
  RS_RETURN_IF_ERROR(CheckTables());
  RS_RETURN_IF_ERROR(PrepareRangeQueries());
  return ReadMeta();
}

Status TraceReader::Impl::CheckVersion() {
  sqlite3* raw = db_.get();
  RS_ASSIGN_OR_RETURN(sql::Statement ids, sql::Statement::Prepare(raw, "PRAGMA application_id"));
  int rc = sqlite3_step(ids.get());
  if (rc != SQLITE_ROW) return sql::FromSqlite(raw, rc, "cannot read the database header");
  const int64_t application_id = ids.ColumnInt(0);
  RS_ASSIGN_OR_RETURN(sql::Statement version, sql::Statement::Prepare(raw, "PRAGMA user_version"));
  rc = sqlite3_step(version.get());
  if (rc != SQLITE_ROW) return sql::FromSqlite(raw, rc, "cannot read the database header");
  const int64_t schema_version = version.ColumnInt(0);
  if (application_id != kApplicationId) {
    return Corrupt("an SQLite database, but not a rankscope trace (no rankscope application id)");
  }
  if (schema_version > kSchemaVersion) {
    return Unsupported(fmt::format(
        "trace schema version {} is newer than this rankscope understands ({}); upgrade rankscope",
        schema_version, kSchemaVersion));
  }
  if (schema_version < 1) {
    return Corrupt(fmt::format("invalid trace schema version {}", schema_version));
  }
  schema_version_ = static_cast<int>(schema_version);
  return Status::Ok();
}

Status TraceReader::Impl::CheckTables() {
  // Every schema table must be a plain table (a view could run any query, e.g. an endless
  // recursive one) with the columns this version reads. Tables and columns added after the
  // file's version are not looked for: older files lack them, and whatever a file has under
  // such a name is never read.
  sqlite3* raw = db_.get();
  std::set<std::string> plain_tables;
  {
    RS_ASSIGN_OR_RETURN(sql::Statement tables,
                        sql::Statement::Prepare(raw, "SELECT name FROM sqlite_schema WHERE type = 'table' "
                                                     "AND sql NOT LIKE 'CREATE VIRTUAL%'"));
    int rc;
    while ((rc = sqlite3_step(tables.get())) == SQLITE_ROW) plain_tables.insert(tables.ColumnText(0));
    if (rc != SQLITE_DONE) return sql::FromSqlite(raw, rc, "reading the schema");
  }
  for (const TableDef& table : SchemaTables()) {
    if (!table.ExistsIn(schema_version_)) continue;
    if (!plain_tables.contains(std::string(table.name))) {
      return Corrupt(fmt::format("table '{}' is missing or malformed", table.name));
    }
    std::string columns;
    for (const ColumnDef& column : table.columns) {
      if (!column.ExistsIn(schema_version_)) continue;
      columns += columns.empty() ? "" : ", ";
      columns += column.name;
    }
    if (!sql::Statement::Prepare(raw, fmt::format("SELECT {} FROM {} LIMIT 0", columns, table.name)).ok()) {
      return Corrupt(fmt::format("table '{}' is missing or malformed", table.name));
    }
  }
  return Status::Ok();
}

Status TraceReader::Impl::PrepareRangeQueries() {
  sqlite3* raw = db_.get();
  int index = 0;
  Status status;
  EventTables none;
  codec::ForEachTable(none, [&](std::string_view name, const auto&) {
    sql::Statement& range_query = range_queries_[static_cast<size_t>(index++)];
    if (!status.ok() || !HasTable(name)) return;
    const TableDef* table = FindTable(name);
    const bool instants = !table->is_event_table;
    const std::string start = instants ? "ts_ns" : "start_ns";
    const std::string end = instants ? "ts_ns" : "end_ns";
    // ?1 lane, ?2 t0, ?3 t1, ?4 lowest start that can still reach t0 (t0 - longest event).
    auto range = sql::Statement::Prepare(
        raw, fmt::format("SELECT {0} FROM {1} WHERE lane = ?1 AND {2} >= ?4 AND {2} < ?3 "
                         "AND ({3} > ?2 OR {2} >= ?2) ORDER BY {2}",
                         table->SelectList(schema_version_), name, start, end));
    if (!range.ok()) status = range.status();
    else range_query = std::move(range).value();
  });
  RS_RETURN_IF_ERROR(status);
  RS_ASSIGN_OR_RETURN(lane_max_, sql::Statement::Prepare(raw, "SELECT max_duration_ns FROM lanes WHERE id = ?"));
  return Status::Ok();
}

Status TraceReader::Impl::ReadMeta() {
  sqlite3* raw = db_.get();
  RS_ASSIGN_OR_RETURN(sql::Statement meta_stmt, sql::Statement::Prepare(raw, "SELECT key, value FROM meta"));
  std::map<std::string, std::string> rows;
  int rc;
  while ((rc = sqlite3_step(meta_stmt.get())) == SQLITE_ROW) {
    rows[meta_stmt.ColumnText(0)] = meta_stmt.ColumnText(1);
  }
  if (rc != SQLITE_DONE) return sql::FromSqlite(raw, rc, "reading meta");
  RS_ASSIGN_OR_RETURN(meta_, MetaFromRows(std::move(rows)));
  return Status::Ok();
}

namespace {

// Steps `stmt` to the end, decoding each row into `out`.
template <typename Record>
Status ReadRows(sql::Statement& stmt, std::vector<Record>* out, std::string_view table) {
  int rc;
  while ((rc = sqlite3_step(stmt.get())) == SQLITE_ROW) {
    codec::Read(stmt, &out->emplace_back());
  }
  sqlite3_reset(stmt.get());
  if (rc != SQLITE_DONE) {
    return sql::FromSqlite(sqlite3_db_handle(stmt.get()), rc, fmt::format("reading table '{}'", table));
  }
  return Status::Ok();
}

}  // namespace

TraceReader::TraceReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TraceReader::~TraceReader() = default;

Result<std::unique_ptr<TraceReader>> TraceReader::Open(const fs::path& path) {
  auto impl = std::make_unique<Impl>(path);
  if (Status s = impl->Open(); !s.ok()) return impl->Fail(s);
  return std::unique_ptr<TraceReader>(new TraceReader(std::move(impl)));
}

const fs::path& TraceReader::path() const { return impl_->path_; }
const RankMeta& TraceReader::meta() const { return impl_->meta_; }

Result<std::vector<std::string>> TraceReader::ReadStrings() const {
  auto stmt = sql::Statement::Prepare(impl_->db_.get(), "SELECT id, value FROM strings ORDER BY id");
  if (!stmt.ok()) return impl_->Fail(stmt.status());
  std::vector<std::string> strings(1);  // id 0 is the empty string
  int rc;
  while ((rc = sqlite3_step(stmt->get())) == SQLITE_ROW) {
    const int64_t id = stmt->ColumnInt(0);
    if (id != static_cast<int64_t>(strings.size())) {
      return impl_->Fail(Corrupt(fmt::format("string ids are not 1..N (found {} at position {})", id,
                                             strings.size())));
    }
    strings.push_back(stmt->ColumnText(1));
  }
  if (rc != SQLITE_DONE) return impl_->Fail(sql::FromSqlite(impl_->db_.get(), rc, "reading strings"));
  return strings;
}

Result<std::vector<Lane>> TraceReader::ReadLanes() const {
  auto stmt = sql::Statement::Prepare(
      impl_->db_.get(),
      "SELECT id, kind, role, device, context, stream, pid, tid, comm_hash, name, "
      "max_duration_ns FROM lanes ORDER BY id");
  if (!stmt.ok()) return impl_->Fail(stmt.status());
  std::vector<Lane> lanes;
  int rc;
  while ((rc = sqlite3_step(stmt->get())) == SQLITE_ROW) {
    const int64_t id = stmt->ColumnInt(0);
    if (id != static_cast<int64_t>(lanes.size()) + 1) {
      return impl_->Fail(Corrupt(fmt::format("lane ids are not 1..N (found {} at position {})", id,
                                             lanes.size() + 1)));
    }
    Lane lane;
    lane.id = static_cast<LaneId>(id);
    lane.kind = static_cast<LaneKind>(stmt->ColumnInt(1));
    lane.role = static_cast<LaneRole>(stmt->ColumnInt(2));
    lane.device = static_cast<int32_t>(stmt->ColumnInt(3));
    lane.context = static_cast<uint32_t>(stmt->ColumnInt(4));
    lane.stream = stmt->ColumnUint(5);
    lane.pid = stmt->ColumnInt(6);
    lane.tid = stmt->ColumnInt(7);
    lane.comm_hash = stmt->ColumnUint(8);
    lane.name = stmt->ColumnText(9);
    lane.max_duration_ns = std::max<int64_t>(0, stmt->ColumnInt(10));
    lanes.push_back(std::move(lane));
  }
  if (rc != SQLITE_DONE) return impl_->Fail(sql::FromSqlite(impl_->db_.get(), rc, "reading lanes"));
  return lanes;
}

Result<std::vector<DropRecord>> TraceReader::ReadDrops() const {
  auto stmt = sql::Statement::Prepare(
      impl_->db_.get(), "SELECT source, reason, device, context, stream, count FROM drops ORDER BY id");
  if (!stmt.ok()) return impl_->Fail(stmt.status());
  std::vector<DropRecord> drops;
  int rc;
  while ((rc = sqlite3_step(stmt->get())) == SQLITE_ROW) {
    drops.push_back(DropRecord{stmt->ColumnText(0), stmt->ColumnText(1),
                               static_cast<int32_t>(stmt->ColumnInt(2)),
                               static_cast<uint32_t>(stmt->ColumnInt(3)), stmt->ColumnUint(4),
                               stmt->ColumnUint(5)});
  }
  if (rc != SQLITE_DONE) return impl_->Fail(sql::FromSqlite(impl_->db_.get(), rc, "reading drops"));
  return drops;
}

Result<InFlightState> TraceReader::ReadInFlight() const {
  InFlightState state;
  if (!impl_->HasTable("flight_collectives")) return state;
  const auto& entries = meta().entries;
  const auto number = [&entries](std::string_view key) -> int64_t {
    const auto found = entries.find(std::string(key));
    if (found == entries.end()) return 0;
    int64_t value = 0;
    const auto [end, error] = std::from_chars(found->second.data(), found->second.data() + found->second.size(), value);
    return error == std::errc() && end == found->second.data() + found->second.size() ? value : 0;
  };
  state.as_of_ns = number(meta_key::kInFlightAsOfNs);
  state.completed_collectives = static_cast<uint64_t>(std::max<int64_t>(0, number(meta_key::kInFlightCompletedCollectives)));
  state.completed_steps = static_cast<uint64_t>(std::max<int64_t>(0, number(meta_key::kInFlightCompletedSteps)));
  state.last_progress_ns = number(meta_key::kInFlightLastProgressNs);
  sqlite3* db = impl_->db_.get();
  {
    auto stmt = sql::Statement::Prepare(
        db, "SELECT " + FindTable("flight_collectives")->DataColumnList() + " FROM flight_collectives ORDER BY id");
    if (!stmt.ok()) return impl_->Fail(stmt.status());
    int rc;
    while ((rc = sqlite3_step(stmt->get())) == SQLITE_ROW) {
      FlightCollective c;
      c.comm_hash = stmt->ColumnUint(0);
      c.sequence = stmt->ColumnUint(1);
      const int64_t op = stmt->ColumnInt(2);
      c.op = op >= 0 && op <= static_cast<int64_t>(CollectiveOp::kScatter) ? static_cast<CollectiveOp>(op)
                                                                             : CollectiveOp::kUnknown;
      c.name = stmt->ColumnText(3);
      c.bytes = stmt->ColumnUint(4);
      c.root = static_cast<int32_t>(stmt->ColumnInt(5));
      c.peer = static_cast<int32_t>(stmt->ColumnInt(6));
      c.comm_rank = static_cast<int32_t>(stmt->ColumnInt(7));
      c.comm_size = static_cast<int32_t>(stmt->ColumnInt(8));
      c.lane = IdFromColumn(stmt->ColumnInt(9));
      c.start_ns = stmt->ColumnInt(10);
      if (sqlite3_column_type(stmt->get(), 11) != SQLITE_NULL) c.end_ns = stmt->ColumnInt(11);
      state.collectives.push_back(std::move(c));
    }
    if (rc != SQLITE_DONE) return impl_->Fail(sql::FromSqlite(db, rc, "reading flight_collectives"));
  }
  auto stmt = sql::Statement::Prepare(
      db, "SELECT " + FindTable("open_ranges")->DataColumnList() + " FROM open_ranges ORDER BY id");
  if (!stmt.ok()) return impl_->Fail(stmt.status());
  int rc;
  while ((rc = sqlite3_step(stmt->get())) == SQLITE_ROW) {
    OpenRange r;
    r.lane = IdFromColumn(stmt->ColumnInt(0));
    r.depth = static_cast<uint32_t>(std::clamp<int64_t>(stmt->ColumnInt(1), 0, UINT32_MAX));
    r.start_ns = stmt->ColumnInt(2);
    r.name = stmt->ColumnText(3);
    r.domain = stmt->ColumnText(4);
    r.category = static_cast<uint32_t>(stmt->ColumnInt(5));
    r.args = stmt->ColumnText(6);
    state.open_ranges.push_back(std::move(r));
  }
  if (rc != SQLITE_DONE) return impl_->Fail(sql::FromSqlite(db, rc, "reading open_ranges"));
  return state;
}

Result<EventTables> TraceReader::ReadLaneRange(LaneId lane, TimestampNs t0, TimestampNs t1) const {
  if (t1 < t0) {
    return impl_->Fail(InvalidArgument(fmt::format("time range [{}, {}) ends before it starts", t0, t1)));
  }
  sql::Statement& lane_max = impl_->lane_max_;
  lane_max.BindInt(1, lane);
  int64_t longest = 0;
  const int rc = sqlite3_step(lane_max.get());
  if (rc == SQLITE_ROW) longest = lane_max.ColumnInt(0);
  sqlite3_reset(lane_max.get());
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
    return impl_->Fail(sql::FromSqlite(impl_->db_.get(), rc, "reading lanes"));
  }
  int64_t lowest_start = t0;  // no event starts earlier and still reaches t0
  if (__builtin_sub_overflow(t0, longest, &lowest_start)) lowest_start = INT64_MIN;

  EventTables out;
  Status status;
  int index = 0;
  codec::ForEachTable(out, [&](std::string_view name, auto& table) {
    sql::Statement& stmt = impl_->range_queries_[static_cast<size_t>(index++)];
    if (!status.ok() || !impl_->HasTable(name)) return;
    stmt.BindInt(1, lane);
    stmt.BindInt(2, t0);
    stmt.BindInt(3, t1);
    stmt.BindInt(4, lowest_start);
    status = ReadRows(stmt, &table, name);
  });
  if (!status.ok()) return impl_->Fail(status);
  return out;
}

Result<std::optional<TimestampNs>> TraceReader::FirstEventTime() const {
  std::optional<TimestampNs> first;
  Status status;
  EventTables none;
  codec::ForEachTable(none, [&](std::string_view name, const auto&) {
    if (!status.ok() || !impl_->HasTable(name)) return;
    const char* start = FindTable(name)->is_event_table ? "start_ns" : "ts_ns";
    Result<sql::Statement> query =
        sql::Statement::Prepare(impl_->db_.get(), fmt::format("SELECT MIN({}) FROM {}", start, name));
    if (!query.ok()) {
      status = query.status();
      return;
    }
    const int rc = sqlite3_step(query->get());
    if (rc == SQLITE_ROW && sqlite3_column_type(query->get(), 0) != SQLITE_NULL) {
      const TimestampNs t = query->ColumnInt(0);
      first = first ? std::min(*first, t) : t;
    } else if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
      status = sql::FromSqlite(impl_->db_.get(), rc, fmt::format("reading {}", name));
    }
  });
  if (!status.ok()) return impl_->Fail(status);
  return first;
}

namespace {

// The row ids of one event table that fall in one block of kBlockRows ids: the unit of
// work of a parallel load.
struct Chunk {
  int table;
  int64_t block;
  int64_t first_id;
  int64_t last_id;
  // (lane bucket, rows), ascending by bucket: from `lane_blocks`, or counted.
  std::vector<std::pair<size_t, size_t>> counts;
  bool known = false;
  std::vector<size_t> first_slot;  // parallel to `counts`
};

// Calls f(name, vector) on the `index`-th table of `tables` (schema order).
template <typename F>
void WithTable(EventTables& tables, int index, F&& f) {
  int i = 0;
  codec::ForEachTable(tables, [&](std::string_view name, auto& table) {
    if (i++ == index) f(name, table);
  });
}

std::string_view TableName(int index) {
  std::string_view name;
  EventTables none;
  WithTable(none, index, [&](std::string_view n, auto&) { name = n; });
  return name;
}

// Runs task(db, worker, i) for i in [0, count) on `workers` threads, each with its own
// read-only connection. Stops at the first error.
template <typename Task>
Status RunParallel(const sql::ReadableDatabase& source, int workers, size_t count, Task&& task) {
  std::vector<Status> status(static_cast<size_t>(workers));
  std::atomic<size_t> next{0};
  auto work = [&](int worker) {
    auto db = source.Connect();
    Status& s = status[static_cast<size_t>(worker)];
    if (!db.ok()) {
      s = db.status();
      return;
    }
    for (size_t i; s.ok() && (i = next.fetch_add(1)) < count;) s = task(db->get(), worker, i);
    if (!s.ok()) next.store(count);  // stop the others early
  };
  std::vector<std::thread> threads;
  for (int w = 1; w < workers; ++w) threads.emplace_back(work, w);
  work(0);
  for (std::thread& t : threads) t.join();
  for (const Status& s : status) RS_RETURN_IF_ERROR(s);
  return Status::Ok();
}

// Keeps every read through one connection in one snapshot of a file that may be growing.
class ReadTransaction {
 public:
  explicit ReadTransaction(sqlite3* db) : db_(db) { open_ = sql::Exec(db_, "BEGIN").ok(); }
  ~ReadTransaction() {
    if (open_) (void)sql::Exec(db_, "COMMIT");
  }
  ReadTransaction(const ReadTransaction&) = delete;
  ReadTransaction& operator=(const ReadTransaction&) = delete;

 private:
  sqlite3* db_;
  bool open_ = false;
};

// A row id of `table` that `sql` selects; nullopt when the table has none.
Result<std::optional<int64_t>> QueryId(sqlite3* db, std::string_view table, const std::string& sql) {
  RS_ASSIGN_OR_RETURN(sql::Statement stmt, sql::Statement::Prepare(db, sql));
  const int rc = sqlite3_step(stmt.get());
  if (rc != SQLITE_ROW) return sql::FromSqlite(db, rc, fmt::format("reading row ids of table '{}'", table));
  if (sqlite3_column_type(stmt.get(), 0) == SQLITE_NULL) return std::optional<int64_t>();
  return std::optional<int64_t>(stmt.ColumnInt(0));
}

// Chunks for the blocks of `table` that hold rows (a sparse id range costs nothing).
Status PlanChunks(sqlite3* db, int table, std::vector<Chunk>* chunks) {
  const std::string_view name = TableName(table);
  RS_ASSIGN_OR_RETURN(std::optional<int64_t> last, QueryId(db, name, fmt::format("SELECT max(id) FROM {}", name)));
  RS_ASSIGN_OR_RETURN(std::optional<int64_t> id, QueryId(db, name, fmt::format("SELECT min(id) FROM {}", name)));
  if (id && *id < 1) return Corrupt(fmt::format("table '{}' has row id {}", name, *id));
  while (id) {
    const int64_t block = (*id - 1) / kBlockRows;
    const int64_t block_last = block >= INT64_MAX / kBlockRows ? INT64_MAX : (block + 1) * kBlockRows;
    chunks->push_back({table, block, *id, std::min(block_last, *last), {}, false, {}});
    if (block_last >= *last) break;
    RS_ASSIGN_OR_RETURN(id, QueryId(db, name, fmt::format("SELECT min(id) FROM {} WHERE id > {}", name, block_last)));
  }
  return Status::Ok();
}

// Per-worker scratch: where the next row of each lane bucket goes in the current chunk,
// and where that bucket's slots end. Untouched buckets have next == end (no room).
struct Placement {
  std::vector<size_t> next, end;
};

// One worker's scratch, sized for `buckets` at its first use.
Placement& ScratchOf(std::vector<Placement>& placement, int worker, size_t buckets) {
  Placement& p = placement[static_cast<size_t>(worker)];
  if (p.next.size() != buckets) {
    p.next.assign(buckets, 0);
    p.end.assign(buckets, 0);
  }
  return p;
}

// Lane bucket b is lane id b for 1..L; bucket 0 collects lane ids outside 1..L (damaged
// or foreign files).
class LaneBuckets {
 public:
  explicit LaneBuckets(size_t lanes) : count_(lanes + 1) {}
  size_t count() const { return count_; }
  size_t Of(int64_t lane) const {
    return lane > 0 && static_cast<uint64_t>(lane) < count_ ? static_cast<size_t>(lane) : 0;
  }

 private:
  size_t count_;
};

// Per event table: the first slot of each lane bucket, and the table's size last.
using BucketStarts = std::array<std::vector<size_t>, codec::kEventTableCount>;

Result<sql::Statement> ChunkQuery(sqlite3* db, const Chunk& chunk, const std::string& columns) {
  return sql::Statement::Prepare(db, fmt::format("SELECT {} FROM {} WHERE id BETWEEN {} AND {}", columns,
                                                 TableName(chunk.table), chunk.first_id, chunk.last_id));
}

// Stage: chunks for every event table the file's version has (tables without chunks load
// empty).
template <typename HasTable>
Status PlanAllChunks(sqlite3* db, HasTable&& has_table, std::vector<Chunk>* chunks) {
  for (int t = 0; t < codec::kEventTableCount; ++t) {
    if (!has_table(TableName(t))) continue;
    RS_RETURN_IF_ERROR(PlanChunks(db, t, chunks));
  }
  return Status::Ok();
}

// Stage: per-lane row counts from the block directory (`lane_blocks`), kept only where
// they are plausible: within a chunk's id span, and for all chunks together at most one
// row per 8 bytes of the file.
Status ApplyBlockDirectory(sqlite3* db, const fs::path& sqlite_path, const LaneBuckets& buckets,
                           std::vector<Chunk>& chunks) {
  std::map<std::pair<std::string, int64_t>, size_t> chunk_of;
  for (size_t c = 0; c < chunks.size(); ++c) {
    chunk_of[{std::string(TableName(chunks[c].table)), chunks[c].block}] = c;
  }
  std::vector<std::map<size_t, size_t>> claimed(chunks.size());
  std::vector<bool> implausible(chunks.size(), false);
  RS_ASSIGN_OR_RETURN(sql::Statement stmt,
                      sql::Statement::Prepare(db, "SELECT event_table, block, lane, rows FROM lane_blocks"));
  int rc;
  while ((rc = sqlite3_step(stmt.get())) == SQLITE_ROW) {
    auto it = chunk_of.find({stmt.ColumnText(0), stmt.ColumnInt(1)});
    if (it == chunk_of.end()) continue;  // a block without rows, or no table of ours
    const int64_t rows = stmt.ColumnInt(3);
    const Chunk& chunk = chunks[it->second];
    size_t& sum = claimed[it->second][buckets.Of(stmt.ColumnInt(2))];
    if (rows < 0 || rows > chunk.last_id - chunk.first_id + 1) implausible[it->second] = true;
    else sum = std::min<size_t>(sum + static_cast<size_t>(rows), SIZE_MAX / 2);
  }
  if (rc != SQLITE_DONE) return sql::FromSqlite(db, rc, "reading lane_blocks");
  // A row takes at least 8 bytes of the file: more claimed rows than that means lies. (The
  // file SQLite reads has nothing beside it: a file left with a WAL is read recovered.)
  std::error_code ec;
  const uintmax_t file_bytes = fs::file_size(sqlite_path, ec);
  if (ec) return IoError(fmt::format("cannot read the file size: {}", ec.message()));
  size_t total = 0;
  for (size_t c = 0; c < chunks.size(); ++c) {
    size_t in_chunk = 0;
    for (const auto& [bucket, rows] : claimed[c]) in_chunk += rows;
    if (implausible[c] || claimed[c].empty() ||
        in_chunk > static_cast<size_t>(chunks[c].last_id - chunks[c].first_id + 1)) {
      continue;
    }
    chunks[c].counts.assign(claimed[c].begin(), claimed[c].end());
    chunks[c].known = true;
    total += in_chunk;
  }
  if (total > file_bytes / 8) {
    for (Chunk& chunk : chunks) chunk.known = false;
  }
  return Status::Ok();
}

// Stage: counts the rows per lane of every chunk without usable counts (one pass over the
// lane column).
Status CountUnknownChunks(const sql::ReadableDatabase& source, int workers, const LaneBuckets& buckets,
                          std::vector<Chunk>& chunks, std::vector<Placement>& placement) {
  return RunParallel(source, workers, chunks.size(), [&](sqlite3* conn, int worker, size_t c) -> Status {
    Chunk& chunk = chunks[c];
    if (chunk.known) return Status::Ok();
    RS_ASSIGN_OR_RETURN(sql::Statement stmt, ChunkQuery(conn, chunk, "lane"));
    std::vector<size_t>& rows = ScratchOf(placement, worker, buckets.count()).next;
    int rc;
    while ((rc = sqlite3_step(stmt.get())) == SQLITE_ROW) ++rows[buckets.Of(stmt.ColumnInt(0))];
    if (rc != SQLITE_DONE) {
      return sql::FromSqlite(conn, rc, fmt::format("counting rows per lane of table '{}'", TableName(chunk.table)));
    }
    chunk.counts.clear();
    for (size_t b = 0; b < buckets.count(); ++b) {
      if (rows[b] > 0) chunk.counts.emplace_back(b, rows[b]);
      rows[b] = 0;
    }
    chunk.known = true;
    return Status::Ok();
  });
}

// Stage: every row's slot, from the counts: bucket by bucket, and within a bucket chunk by
// chunk (row-id order). Sizes the tables of `events` to hold them.
BucketStarts AssignSlots(std::vector<Chunk>& chunks, const LaneBuckets& buckets, EventTables& events) {
  BucketStarts bucket_start;
  const size_t count = buckets.count();
  for (int t = 0; t < codec::kEventTableCount; ++t) {
    std::vector<std::tuple<size_t, size_t, size_t>> entries;  // (bucket, chunk, index in counts)
    for (size_t c = 0; c < chunks.size(); ++c) {
      if (chunks[c].table != t) continue;
      chunks[c].first_slot.assign(chunks[c].counts.size(), 0);
      for (size_t i = 0; i < chunks[c].counts.size(); ++i) entries.emplace_back(chunks[c].counts[i].first, c, i);
    }
    std::sort(entries.begin(), entries.end());
    std::vector<size_t>& start = bucket_start[static_cast<size_t>(t)];
    start.assign(count + 1, SIZE_MAX);
    size_t slot = 0;
    for (const auto& [bucket, c, i] : entries) {
      if (start[bucket] == SIZE_MAX) start[bucket] = slot;
      chunks[c].first_slot[i] = slot;
      slot += chunks[c].counts[i].second;
    }
    start[count] = slot;
    for (size_t b = count; b-- > 0;) {
      if (start[b] == SIZE_MAX) start[b] = start[b + 1];
    }
    WithTable(events, t, [slot](std::string_view, auto& table) { table.resize(slot); });
  }
  return bucket_start;
}

// Stage: decodes each row into its slot. Returns true when the counts were wrong: a row
// found no room left in its bucket, or a bucket was left short.
Result<bool> DecodeChunks(const sql::ReadableDatabase& source, int workers, int schema_version,
                          const LaneBuckets& buckets, const std::vector<Chunk>& chunks,
                          std::vector<Placement>& placement, EventTables& events) {
  std::atomic<bool> wrong{false};
  Status decoded = RunParallel(source, workers, chunks.size(), [&](sqlite3* conn, int worker, size_t c) -> Status {
    const Chunk& chunk = chunks[c];
    Placement& p = ScratchOf(placement, worker, buckets.count());
    for (size_t i = 0; i < chunk.counts.size(); ++i) {
      p.next[chunk.counts[i].first] = chunk.first_slot[i];
      p.end[chunk.counts[i].first] = chunk.first_slot[i] + chunk.counts[i].second;
    }
    Status s;
    WithTable(events, chunk.table, [&](std::string_view name, auto& table) {
      auto stmt = ChunkQuery(conn, chunk, FindTable(name)->SelectList(schema_version));
      if (!stmt.ok()) {
        s = stmt.status();
        return;
      }
      int rc;
      while ((rc = sqlite3_step(stmt->get())) == SQLITE_ROW) {
        const size_t b = buckets.Of(stmt->ColumnInt(0));
        if (p.next[b] == p.end[b]) {
          wrong = true;
          return;
        }
        codec::Read(*stmt, &table[p.next[b]++]);
      }
      if (rc != SQLITE_DONE) s = sql::FromSqlite(conn, rc, fmt::format("reading table '{}'", name));
    });
    for (const auto& [bucket, rows] : chunk.counts) {
      if (p.next[bucket] != p.end[bucket]) wrong = true;
      p.next[bucket] = p.end[bucket] = 0;
    }
    return s;
  });
  RS_RETURN_IF_ERROR(decoded);
  return wrong.load();
}

// Stage: checks time order within each lane and sorts where another tool broke it; rows on
// lanes the file never declared go before or after the known lanes.
void SortLanesByTime(const BucketStarts& bucket_start, const LaneBuckets& buckets, EventTables& events) {
  for (int t = 0; t < codec::kEventTableCount; ++t) {
    const std::vector<size_t>& start = bucket_start[static_cast<size_t>(t)];
    WithTable(events, t, [&](std::string_view, auto& table) {
      auto by_time = [](const auto& a, const auto& b) { return codec::StartOf(a) < codec::StartOf(b); };
      auto by_lane_time = [](const auto& a, const auto& b) {
        const LaneId la = codec::LaneOf(a), lb = codec::LaneOf(b);
        return la != lb ? la < lb : codec::StartOf(a) < codec::StartOf(b);
      };
      for (size_t b = 1; b < buckets.count(); ++b) {
        auto first = table.begin() + static_cast<ptrdiff_t>(start[b]);
        auto last = table.begin() + static_cast<ptrdiff_t>(start[b + 1]);
        if (!std::is_sorted(first, last, by_time)) std::stable_sort(first, last, by_time);
      }
      if (start[1] > 0) std::stable_sort(table.begin(), table.end(), by_lane_time);
    });
  }
}

}  // namespace

// Loading a whole rank. The event tables are split into blocks of kBlockRows row ids, and
// for each block `lane_blocks` says how many rows each lane has there. That fixes every
// row's final slot (lane by lane, row order within a lane) before anything is read, so the
// workers decode each row straight into place: one pass, in parallel, no sort, no copy.
// Row order within a lane is time order, as the writer receives each lane's events in
// order; the last step checks that and sorts any lane where it is not.
// Counts are only trusted within bounds the file itself sets (a chunk's id span; for all
// tables, the file's size), so a hostile file cannot make the reader allocate more than a
// small multiple of its size. Blocks without usable counts are counted first (a pass over
// the lane column), and counts that turn out wrong restart the load with every block
// counted. Rows of lane ids outside 1..L (lane bucket 0) make the table sorted by
// (lane, start) as a whole.
Result<RankTrace> TraceReader::LoadAll(LoadOptions options) const {
  sqlite3* db = impl_->db_.get();
  ReadTransaction snapshot(db);
  RankTrace trace;
  trace.path = impl_->path_;
  trace.meta = impl_->meta_;
  std::vector<Chunk> chunks;
  auto has_table = [this](std::string_view name) { return impl_->HasTable(name); };
  if (Status s = PlanAllChunks(db, has_table, &chunks); !s.ok()) return impl_->Fail(s);
  // Strings and lanes are committed before the events that use them: read them after the
  // event tables' extent, in the same snapshot.
  RS_ASSIGN_OR_RETURN(trace.strings, ReadStrings());
  RS_ASSIGN_OR_RETURN(trace.lanes, ReadLanes());
  RS_ASSIGN_OR_RETURN(trace.drops, ReadDrops());
  const LaneBuckets buckets(trace.lanes.size());
  const sql::ReadableDatabase& source = *impl_->source_;
  if (Status s = ApplyBlockDirectory(db, source.sqlite_path(), buckets, chunks); !s.ok()) return impl_->Fail(s);

  const int hardware = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int workers = static_cast<int>(std::clamp<size_t>(
      static_cast<size_t>(options.threads > 0 ? options.threads : hardware), 1, std::max<size_t>(1, chunks.size())));
  std::vector<Placement> placement(static_cast<size_t>(workers));
  BucketStarts bucket_start;
  for (int attempt = 0;; ++attempt) {
    if (Status s = CountUnknownChunks(source, workers, buckets, chunks, placement); !s.ok()) {
      return impl_->Fail(s);
    }
    bucket_start = AssignSlots(chunks, buckets, trace.events);
    Result<bool> wrong =
        DecodeChunks(source, workers, impl_->schema_version_, buckets, chunks, placement, trace.events);
    if (!wrong.ok()) return impl_->Fail(wrong.status());
    if (!*wrong) break;
    if (attempt > 0) return impl_->Fail(Inconsistent("the file changed while it was being loaded"));
    for (Chunk& chunk : chunks) chunk.known = false;  // the directory lied: count everything
  }
  SortLanesByTime(bucket_start, buckets, trace.events);
  return trace;
}

namespace {

// Reads a whole small table of a file of schema `version` in storage order.
// `max_rows` bounds the memory reserved ahead from the table's highest id (a damaged file
// may claim any id).
template <typename Record>
Result<std::vector<Record>> ReadWholeTable(sqlite3* db, int version, std::string_view name, uint64_t max_rows) {
  RS_ASSIGN_OR_RETURN(sql::Statement stmt,
                      sql::Statement::Prepare(db, fmt::format("SELECT {} FROM {} ORDER BY id",
                                                              FindTable(name)->SelectList(version), name)));
  std::vector<Record> rows;
  // Ids count from 1 in insertion order: the highest is the row count of a file rankscope
  // wrote, found in the index without a scan, and saves the vector's regrowth.
  if (Result<sql::Statement> highest = sql::Statement::Prepare(db, fmt::format("SELECT max(id) FROM {}", name));
      highest.ok() && sqlite3_step(highest->get()) == SQLITE_ROW) {
    const int64_t id = highest->ColumnInt(0);
    if (id > 0) rows.reserve(static_cast<size_t>(std::min<uint64_t>(static_cast<uint64_t>(id), max_rows)));
  }
  RS_RETURN_IF_ERROR(ReadRows(stmt, &rows, name));
  return rows;
}

std::string_view SpanTableName(SpanTable table) {
  switch (table) {
    case SpanTable::kKernels: return "kernels";
    case SpanTable::kMemcpys: return "memcpys";
    case SpanTable::kMemsets: return "memsets";
    case SpanTable::kNvtxRanges: return "nvtx_ranges";
    case SpanTable::kApiCalls: return "api_calls";
    case SpanTable::kSyncs: return "syncs";
  }
  return "";
}

// The lean columns of each span table: lane, start, end, [name,] then the range columns,
// with correlation ids last when asked for. No constant padding: every returned column
// costs a decode, even a literal one.
// `copy_details`: the copy kind and bytes of copies and sets (only with `correlation`).
std::string SpanQuery(SpanTable table, bool correlation, bool copy_details) {
  const char* correlation_column = correlation ? ", correlation_id" : "";
  switch (table) {
    case SpanTable::kKernels:
      return fmt::format("SELECT lane, start_ns, end_ns, name{} FROM kernels ORDER BY id", correlation_column);
    // Copies and sets have no name; with correlation ids (the viewer's stream) their copy kind
    // (0 for sets) takes its place, and their bytes come last.
    case SpanTable::kMemcpys:
      if (correlation && !copy_details) return "SELECT lane, start_ns, end_ns, 0, correlation_id FROM memcpys ORDER BY id";
      return correlation ? "SELECT lane, start_ns, end_ns, copy_kind, correlation_id, bytes FROM memcpys ORDER BY id"
                         : "SELECT lane, start_ns, end_ns FROM memcpys ORDER BY id";
    case SpanTable::kMemsets:
      if (correlation && !copy_details) return "SELECT lane, start_ns, end_ns, 0, correlation_id FROM memsets ORDER BY id";
      return correlation ? "SELECT lane, start_ns, end_ns, 0, correlation_id, bytes FROM memsets ORDER BY id"
                         : "SELECT lane, start_ns, end_ns FROM memsets ORDER BY id";
    case SpanTable::kNvtxRanges:
      return "SELECT lane, start_ns, end_ns, name, domain, category, args, payload_kind, payload_int "
             "FROM nvtx_ranges ORDER BY id";
    case SpanTable::kApiCalls:
      return "SELECT lane, start_ns, end_ns, name, correlation_id FROM api_calls ORDER BY id";
    case SpanTable::kSyncs:
      return "SELECT lane, start_ns, end_ns, name, correlation_id FROM syncs ORDER BY id";
  }
  return "";
}

}  // namespace

Result<bool> TraceReader::Impl::HasRows(std::string_view table) const {
  if (!HasTable(table)) return false;
  auto stmt = sql::Statement::Prepare(db_.get(), fmt::format("SELECT EXISTS (SELECT 1 FROM {})", table));
  if (!stmt.ok()) return Fail(stmt.status());
  const int rc = sqlite3_step(stmt->get());
  if (rc != SQLITE_ROW) return Fail(sql::FromSqlite(db_.get(), rc, fmt::format("reading table '{}'", table)));
  return stmt->ColumnInt(0) != 0;
}

Result<std::vector<uint64_t>> TraceReader::Impl::LaneRowHints(size_t lanes) const {
  std::vector<uint64_t> rows(lanes + 1, 0);
  auto stmt = sql::Statement::Prepare(db_.get(), "SELECT lane, sum(rows) FROM lane_blocks GROUP BY lane");
  if (!stmt.ok()) return Fail(stmt.status());
  // A row takes at least 8 bytes of the file: no lane may claim more rows than that.
  std::error_code ec;
  const uintmax_t file_bytes = fs::file_size(source_->sqlite_path(), ec);
  const uint64_t cap = ec ? 0 : static_cast<uint64_t>(file_bytes / 8);
  int rc;
  while ((rc = sqlite3_step(stmt->get())) == SQLITE_ROW) {
    const int64_t lane = stmt->ColumnInt(0);
    const int64_t count = stmt->ColumnInt(1);
    if (lane >= 0 && static_cast<size_t>(lane) < rows.size() && count > 0) {
      rows[static_cast<size_t>(lane)] = std::min(static_cast<uint64_t>(count), cap);
    }
  }
  if (rc != SQLITE_DONE) return Fail(sql::FromSqlite(db_.get(), rc, "reading lane_blocks"));
  return rows;
}

Status TraceReader::Stream(SpanVisitor& visitor, StreamOptions options) const {
  sqlite3* db = impl_->db_.get();
  ReadTransaction snapshot(db);
  StreamHeader header;
  header.meta = impl_->meta_;
  RS_ASSIGN_OR_RETURN(header.strings, ReadStrings());
  RS_ASSIGN_OR_RETURN(header.lanes, ReadLanes());
  RS_ASSIGN_OR_RETURN(header.drops, ReadDrops());
  // A mark or collective row takes well over 32 bytes of the file: no more can be in it.
  std::error_code size_error;
  const uintmax_t file_bytes = fs::file_size(impl_->source_->sqlite_path(), size_error);
  const uint64_t max_rows = size_error ? 0 : static_cast<uint64_t>(file_bytes / 32);
  auto marks = ReadWholeTable<NvtxMarkEvent>(db, impl_->schema_version_, "nvtx_marks", max_rows);
  if (!marks.ok()) return impl_->Fail(marks.status());
  header.marks = std::move(marks).value();
  auto collectives = ReadWholeTable<CollectiveEvent>(db, impl_->schema_version_, "collectives", max_rows);
  if (!collectives.ok()) return impl_->Fail(collectives.status());
  header.collectives = std::move(collectives).value();
  auto counters = ReadWholeTable<CounterSample>(db, impl_->schema_version_, "counter_samples", max_rows);
  if (!counters.ok()) return impl_->Fail(counters.status());
  header.counters = std::move(counters).value();
  if (options.host_calls) {
    RS_ASSIGN_OR_RETURN(header.lane_rows, impl_->LaneRowHints(header.lanes.size()));
  }
  RS_RETURN_IF_ERROR(visitor.OnHeader(std::move(header)));

  constexpr size_t kBatch = 4096;
  std::vector<SpanRow> batch(kBatch);
  std::vector<SpanTable> tables = {SpanTable::kKernels, SpanTable::kMemcpys, SpanTable::kMemsets};
  tables.insert(options.ranges_first ? tables.begin() : tables.end(), SpanTable::kNvtxRanges);
  if (options.host_calls) {
    tables.push_back(SpanTable::kApiCalls);
    tables.push_back(SpanTable::kSyncs);
  }
  // Correlation ids link launches (API calls) to their work: without API calls, only the
  // viewer (which shows them) reads them.
  bool correlate = options.host_calls;
  if (correlate && options.launch_links_only) {
    RS_ASSIGN_OR_RETURN(correlate, impl_->HasRows("api_calls"));
  }
  const bool copy_details = options.host_calls && !options.launch_links_only;
  for (SpanTable table : tables) {
    const bool correlation = correlate && table != SpanTable::kNvtxRanges;
    auto stmt = sql::Statement::Prepare(db, SpanQuery(table, correlation, copy_details));
    if (!stmt.ok()) return impl_->Fail(stmt.status());
    sqlite3_stmt* raw = stmt->get();
    const std::string_view name = SpanTableName(table);
    // A lane or string id that does not fit 32 bits must not alias another one.
    auto id = [&](int column) -> uint32_t { return IdFromColumn(sqlite3_column_int64(raw, column)); };
    size_t filled = 0;
    int rc;
    while ((rc = sqlite3_step(raw)) == SQLITE_ROW) {
      SpanRow& row = batch[filled];
      row = SpanRow{};
      row.lane = id(0);
      row.start_ns = sqlite3_column_int64(raw, 1);
      row.end_ns = sqlite3_column_int64(raw, 2);
      if (table != SpanTable::kMemcpys && table != SpanTable::kMemsets) row.name = id(3);
      if (correlation) row.correlation_id = static_cast<uint64_t>(sqlite3_column_int64(raw, 4));
      if (copy_details && correlation && (table == SpanTable::kMemcpys || table == SpanTable::kMemsets)) {
        row.category = static_cast<uint32_t>(sqlite3_column_int64(raw, 3));
        row.payload_int = sqlite3_column_int64(raw, 5);
      }
      if (table == SpanTable::kNvtxRanges) {
        row.domain = id(4);
        row.category = static_cast<uint32_t>(sqlite3_column_int64(raw, 5));
        row.args = id(6);
        row.payload_kind = static_cast<uint32_t>(sqlite3_column_int64(raw, 7));
        row.payload_int = sqlite3_column_int64(raw, 8);
      }
      if (++filled == kBatch) {
        RS_RETURN_IF_ERROR(visitor.OnSpans(table, std::span<const SpanRow>(batch.data(), filled)));
        filled = 0;
      }
    }
    if (rc != SQLITE_DONE) return impl_->Fail(sql::FromSqlite(db, rc, fmt::format("reading table '{}'", name)));
    if (filled > 0) RS_RETURN_IF_ERROR(visitor.OnSpans(table, std::span<const SpanRow>(batch.data(), filled)));
  }
  return Status::Ok();
}

Status SpanVisitor::OnMoreNames(std::span<const std::string>, std::span<const Lane>) {
  return Unsupported("this reader of rank files takes no strings or lanes after the header");
}

Status SpanVisitor::OnTrailer(StreamTrailer) {
  return Unsupported("this reader of rank files takes no trailer");
}

}  // namespace rankscope::trace
