// The rank-file schema, defined once. The DDL, the writer's INSERT statements, the
// reader's SELECT statements and the docs check (tests/trace/schema_test.cc) all derive
// from SchemaTables().
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rankscope::trace {

inline constexpr int kSchemaVersion = 3;            // PRAGMA user_version
inline constexpr int32_t kApplicationId = 0x524b5343;  // PRAGMA application_id: "RKSC"

// Rows of an event table are grouped in blocks of consecutive row ids; `lane_blocks`
// records how many rows of each lane every block holds, so a reader knows where each row
// goes before it reads it.
inline constexpr int64_t kBlockRows = 65536;

// Larger pages mean fewer b-tree splits per inserted row (bench/trace_bench.cc); 16 KiB
// keeps a nearly empty rank file (a data-loader process) near 250 KB.
inline constexpr int kPageSize = 16384;
// How the writer's connection runs. Exclusive locking set before WAL mode keeps the WAL's
// index in heap memory: SQLite never creates or maps a -shm file (a file that becomes
// unwritable cannot SIGBUS the process), and no mmap either. A checkpoint only once the WAL
// holds 4096 pages (64 MiB): between checkpoints the database file does not change and the
// WAL only grows by whole commits, so a copy of both, database first, is a consistent
// snapshot, and a reader that sees the database change during its copy copies again
// (sqlite_util.cc). Without any checkpoint the WAL kept every commit's pages: about 58 KB
// per commit, a gigabyte an hour for a lightly loaded rank. synchronous=NORMAL
// in WAL mode keeps every commit across a process crash; only a power loss can cost the
// last commits.
inline constexpr const char* kWriterPragmas =
    "PRAGMA locking_mode=EXCLUSIVE; PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=4096; "
    "PRAGMA mmap_size=0; PRAGMA synchronous=NORMAL; PRAGMA cache_size=-32768; "
    "PRAGMA temp_store=MEMORY;";

struct ColumnDef {
  std::string_view name;
  std::string_view type;  // SQL type and constraints
  int since = 1;          // the schema version that added the column; older files lack it

  bool ExistsIn(int version) const { return since <= version; }
};

struct TableDef {
  std::string_view name;
  std::vector<ColumnDef> columns;
  // Extra table constraints, e.g. "UNIQUE(a, b)".
  std::string_view constraints;
  // Column list of the index serving "events of lane L in [t0, t1)"; empty for none.
  std::string_view lane_time_index;
  bool is_event_table = false;  // has the common event columns
  int since = 1;                // the schema version that added the table; older files lack it

  // Whether a file of schema `version` has the table (its columns: ColumnDef::ExistsIn).
  bool ExistsIn(int version) const { return since <= version; }
  // The column names after `id`, joined with ", " (the order the codec binds them).
  std::string DataColumnList() const;
  // DataColumnList() as a SELECT list for a file of schema `version`: a literal 0 stands
  // in for each column that version lacks, so the codec reads every version alike.
  std::string SelectList(int version) const;
  // "INSERT INTO table(<data columns>) VALUES(?, ...)": one parameter per data column.
  std::string InsertSql() const;
};

// Every table of the current schema, in creation order.
const std::vector<TableDef>& SchemaTables();
const TableDef* FindTable(std::string_view name);

// CREATE TABLE statements for a new rank file.
std::string SchemaDdl();

// CREATE INDEX statements for the lane/time indexes. The writer runs them when it closes:
// one sort at the end costs far less than keeping the indexes up to date row by row
// (bench/trace_bench.cc). A file whose writer died has none; range queries then scan.
std::string IndexDdl();

struct EnumValue {
  std::string_view type;  // e.g. "copy_kind"
  int value;
  std::string_view name;  // e.g. "HtoD"
};
// Every integer enumeration a table stores, with its names (written to table `enums`).
const std::vector<EnumValue>& EnumValues();

// Meta keys the trace library itself writes or reads.
namespace meta_key {
inline constexpr std::string_view kRunId = "run_id";
inline constexpr std::string_view kRank = "rank";  // "unknown" when the process had none
inline constexpr std::string_view kWorldSize = "world_size";
inline constexpr std::string_view kLocalRank = "local_rank";
inline constexpr std::string_view kHost = "host";
inline constexpr std::string_view kPid = "pid";
inline constexpr std::string_view kCommandLine = "command_line";
inline constexpr std::string_view kBackend = "backend";
inline constexpr std::string_view kToolVersion = "tool_version";
inline constexpr std::string_view kSchemaVersion = "schema_version";
inline constexpr std::string_view kCreatedRealtimeNs = "created_realtime_ns";
inline constexpr std::string_view kClosedCleanly = "closed_cleanly";
// Why the writer stopped recording before the file was closed (one line: "disk full: ...");
// absent when it recorded to the end. Best effort: a disk too full for this row too leaves
// the file without it (then not closed cleanly either).
inline constexpr std::string_view kRecordingStopped = "recording_stopped";
// The in-flight state's moment and progress counters (trace/in_flight.h).
inline constexpr std::string_view kInFlightAsOfNs = "in_flight.as_of_ns";
inline constexpr std::string_view kInFlightCompletedCollectives = "in_flight.completed_collectives";
inline constexpr std::string_view kInFlightCompletedSteps = "in_flight.completed_steps";
inline constexpr std::string_view kInFlightLastProgressNs = "in_flight.last_progress_ns";
// Calibration pairs: "clock.<start|end>.<realtime_ns|monotonic_ns|tsc>".
inline constexpr std::string_view kClockPrefix = "clock.";
}  // namespace meta_key

}  // namespace rankscope::trace
