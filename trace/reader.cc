#include "trace/reader.h"

#include <fmt/format.h>

#include <array>
#include <cstring>
#include <fstream>
#include <map>

#include "trace/event_codec.h"
#include "trace/schema.h"
#include "trace/sqlite_util.h"

namespace rankscope::trace {
namespace fs = std::filesystem;

const std::string& RankTrace::str(StringId id) const {
  static const std::string empty;
  return id < strings.size() ? strings[id] : empty;
}

const Lane* RankTrace::lane(LaneId id) const {
  return id >= 1 && id <= lanes.size() ? &lanes[id - 1] : nullptr;
}

namespace {

uint32_t BigEndian32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

// Checks the 100-byte SQLite header before SQLite sees the file, so that a non-SQLite or
// truncated file gets a precise message instead of a failure at some later query.
Status CheckFileHeader(const fs::path& path) {
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (!fs::exists(status)) return NotFound("no such file");
  if (fs::is_directory(status)) return InvalidArgument("is a directory, not a rank file");
  const uintmax_t size = fs::file_size(path, ec);
  if (ec) return IoError(fmt::format("cannot read the file size: {}", ec.message()));
  if (size == 0) return Corrupt("empty file, not a rankscope trace");
  std::ifstream in(path, std::ios::binary);
  if (!in) return IoError(fmt::format("cannot open for reading: {}", std::strerror(errno)));
  std::array<unsigned char, 100> header{};
  in.read(reinterpret_cast<char*>(header.data()), header.size());
  static constexpr char kMagic[] = "SQLite format 3";  // 16 bytes with the NUL
  if (in.gcount() < 16 || std::memcmp(header.data(), kMagic, 16) != 0) {
    return Corrupt("not an SQLite database");
  }
  if (in.gcount() < 100) return Corrupt(fmt::format("truncated: {} bytes, shorter than the SQLite header", size));
  // With a WAL beside it, the main file may legitimately lag behind its header.
  if (fs::exists(fs::path(path.string() + "-wal"), ec)) return Status::Ok();
  uint32_t page_size = (uint32_t{header[16]} << 8) | header[17];
  if (page_size == 1) page_size = 65536;
  const uint32_t change_counter = BigEndian32(&header[24]);
  const uint32_t page_count = BigEndian32(&header[28]);
  const uint32_t valid_for = BigEndian32(&header[92]);
  const uintmax_t expected = uintmax_t{page_size} * page_count;
  if (valid_for == change_counter && page_count > 0 && size < expected) {
    return Corrupt(fmt::format("truncated: {} bytes, but its header says {} bytes", size, expected));
  }
  return Status::Ok();
}

// Wraps every event table with a prepared "all rows" and "rows of a lane in a window" query.
struct TableQueries {
  sql::Statement all;
  sql::Statement range;
};

}  // namespace

class TraceReader::Impl {
 public:
  explicit Impl(fs::path path) : path_(std::move(path)) {}

  Status Open();
  Status Fail(Status s) const { return s.WithContext(path_.string()); }

  fs::path path_;
  sql::DbHandle db_;
  RankMeta meta_;
  std::array<TableQueries, codec::kEventTableCount> queries_;
  sql::Statement lane_max_;
};

Status TraceReader::Impl::Open() {
  RS_RETURN_IF_ERROR(CheckFileHeader(path_));
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path_.c_str(), &raw, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nullptr);
  db_.reset(raw);
  if (rc != SQLITE_OK) return sql::FromSqlite(raw, rc, "cannot open");
  // Defensive: the file may come from anywhere; its schema must not run functions or
  // touch anything but its own pages.
  sqlite3_db_config(raw, SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr);
  sqlite3_db_config(raw, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, nullptr);
  sqlite3_busy_timeout(raw, 2000);  // a live writer may hold the WAL lock briefly

  RS_ASSIGN_OR_RETURN(sql::Statement ids, sql::Statement::Prepare(raw, "PRAGMA application_id"));
  rc = sqlite3_step(ids.get());
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

  // Every table must have the columns this version reads; preparing the queries checks it.
  int index = 0;
  Status status;
  EventTables none;
  codec::ForEachTable(none, [&](std::string_view name, const auto&) {
    TableQueries& q = queries_[index++];
    if (!status.ok()) return;
    const TableDef* table = FindTable(name);
    const std::string columns = table->DataColumnList();
    const bool instants = !table->is_event_table;
    const std::string start = instants ? "ts_ns" : "start_ns";
    const std::string end = instants ? "ts_ns" : "end_ns";
    auto all = sql::Statement::Prepare(raw, fmt::format("SELECT {} FROM {}", columns, name));
    // ?1 lane, ?2 t0, ?3 t1, ?4 lowest start that can still reach t0 (t0 - longest event).
    auto range = sql::Statement::Prepare(
        raw, fmt::format("SELECT {0} FROM {1} WHERE lane = ?1 AND {2} >= ?4 AND {2} < ?3 "
                         "AND ({3} > ?2 OR {2} >= ?2) ORDER BY {2}",
                         columns, name, start, end));
    if (!all.ok() || !range.ok()) {
      status = Corrupt(fmt::format("table '{}' is missing or malformed", name));
      return;
    }
    q.all = std::move(all).value();
    q.range = std::move(range).value();
  });
  RS_RETURN_IF_ERROR(status);
  auto lane_max = sql::Statement::Prepare(raw, "SELECT max_duration_ns FROM lanes WHERE id = ?");
  if (!lane_max.ok()) return Corrupt("table 'lanes' is missing or malformed");
  lane_max_ = std::move(lane_max).value();

  auto meta_stmt = sql::Statement::Prepare(raw, "SELECT key, value FROM meta");
  if (!meta_stmt.ok()) return Corrupt("table 'meta' is missing or malformed");
  std::map<std::string, std::string> rows;
  while ((rc = sqlite3_step(meta_stmt->get())) == SQLITE_ROW) {
    rows[meta_stmt->ColumnText(0)] = meta_stmt->ColumnText(1);
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
  std::vector<std::string> strings(1);
  int rc;
  while ((rc = sqlite3_step(stmt->get())) == SQLITE_ROW) {
    const int64_t id = stmt->ColumnInt(0);
    if (id < 1 || id > int64_t{1} << 32) {
      return impl_->Fail(Corrupt(fmt::format("string id {} is out of range", id)));
    }
    if (static_cast<size_t>(id) >= strings.size()) strings.resize(static_cast<size_t>(id) + 1);
    strings[static_cast<size_t>(id)] = stmt->ColumnText(1);
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
    Lane lane;
    lane.id = static_cast<LaneId>(stmt->ColumnInt(0));
    lane.kind = static_cast<LaneKind>(stmt->ColumnInt(1));
    lane.role = static_cast<LaneRole>(stmt->ColumnInt(2));
    lane.device = static_cast<int32_t>(stmt->ColumnInt(3));
    lane.context = static_cast<uint32_t>(stmt->ColumnInt(4));
    lane.stream = stmt->ColumnUint(5);
    lane.pid = stmt->ColumnInt(6);
    lane.tid = stmt->ColumnInt(7);
    lane.comm_hash = stmt->ColumnUint(8);
    lane.name = stmt->ColumnText(9);
    lane.max_duration_ns = stmt->ColumnInt(10);
    if (lane.id != lanes.size() + 1) {
      return impl_->Fail(Corrupt(fmt::format("lane ids are not 1..N (found {} at position {})",
                                             lane.id, lanes.size() + 1)));
    }
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

Result<EventTables> TraceReader::ReadLaneRange(LaneId lane, TimestampNs t0, TimestampNs t1) const {
  if (t1 < t0) return InvalidArgument(fmt::format("empty time range [{}, {})", t0, t1));
  sql::Statement& lane_max = impl_->lane_max_;
  lane_max.BindInt(1, lane);
  int64_t longest = 0;
  const int rc = sqlite3_step(lane_max.get());
  if (rc == SQLITE_ROW) longest = lane_max.ColumnInt(0);
  sqlite3_reset(lane_max.get());
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
    return impl_->Fail(sql::FromSqlite(impl_->db_.get(), rc, "reading lanes"));
  }
  const int64_t lowest_start = longest > 0 && t0 > INT64_MIN + longest ? t0 - longest : t0;

  EventTables out;
  Status status;
  int index = 0;
  codec::ForEachTable(out, [&](std::string_view name, auto& table) {
    sql::Statement& stmt = impl_->queries_[index++].range;
    if (!status.ok()) return;
    stmt.BindInt(1, lane);
    stmt.BindInt(2, t0);
    stmt.BindInt(3, t1);
    stmt.BindInt(4, lowest_start);
    status = ReadRows(stmt, &table, name);
  });
  if (!status.ok()) return impl_->Fail(status);
  return out;
}

Result<RankTrace> TraceReader::LoadAll() const {
  RankTrace trace;
  trace.path = impl_->path_;
  trace.meta = impl_->meta_;
  RS_ASSIGN_OR_RETURN(trace.strings, ReadStrings());
  RS_ASSIGN_OR_RETURN(trace.lanes, ReadLanes());
  RS_ASSIGN_OR_RETURN(trace.drops, ReadDrops());
  Status status;
  int index = 0;
  codec::ForEachTable(trace.events, [&](std::string_view name, auto& table) {
    sql::Statement& stmt = impl_->queries_[index++].all;
    if (status.ok()) status = ReadRows(stmt, &table, name);
  });
  if (!status.ok()) return impl_->Fail(status);
  trace.events.SortByLaneAndTime();
  return trace;
}

}  // namespace rankscope::trace
