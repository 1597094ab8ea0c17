// The rank-file schema, defined once. The DDL, the writer's INSERT statements, the
// reader's SELECT statements and the docs check (tests/trace/schema_test.cc) all derive
// from SchemaTables().
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rankscope::trace {

inline constexpr int kSchemaVersion = 1;            // PRAGMA user_version
inline constexpr int32_t kApplicationId = 0x524b5343;  // PRAGMA application_id: "RKSC"

struct ColumnDef {
  std::string_view name;
  std::string_view type;  // SQL type and constraints
};

struct TableDef {
  std::string_view name;
  std::vector<ColumnDef> columns;
  // Extra table constraints, e.g. "UNIQUE(a, b)".
  std::string_view constraints;
  // Column list of the index serving "events of lane L in [t0, t1)"; empty for none.
  std::string_view lane_time_index;
  bool is_event_table = false;  // has the common event columns

  // The column names after `id`, joined with ", " (the order the codec binds them).
  std::string DataColumnList() const;
};

// Every table of schema v1, in creation order.
const std::vector<TableDef>& SchemaTables();
const TableDef* FindTable(std::string_view name);

// CREATE TABLE / CREATE INDEX statements for a new rank file.
std::string SchemaDdl();

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
// Calibration pairs: "clock.<start|end>.<realtime_ns|monotonic_ns|tsc>".
inline constexpr std::string_view kClockPrefix = "clock.";
}  // namespace meta_key

}  // namespace rankscope::trace
