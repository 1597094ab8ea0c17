#include "trace/schema.h"

#include <fmt/format.h>

namespace rankscope::trace {
namespace {

// Columns shared by every event table, after `id`.
std::vector<ColumnDef> EventColumns(std::vector<ColumnDef> specific) {
  std::vector<ColumnDef> columns = {
      {"id", "INTEGER PRIMARY KEY"},
      {"lane", "INTEGER NOT NULL"},
      {"start_ns", "INTEGER NOT NULL"},
      {"end_ns", "INTEGER NOT NULL"},
      {"name", "INTEGER NOT NULL"},
      {"correlation_id", "INTEGER NOT NULL"},
  };
  columns.insert(columns.end(), specific.begin(), specific.end());
  return columns;
}

std::vector<ColumnDef> NvtxColumns(std::vector<ColumnDef> specific) {
  std::vector<ColumnDef> columns = {
      {"domain", "INTEGER NOT NULL"},       {"category", "INTEGER NOT NULL"},
      {"color", "INTEGER NOT NULL"},        {"payload_kind", "INTEGER NOT NULL"},
      {"payload_int", "INTEGER NOT NULL"},  {"payload_real", "REAL NOT NULL"},
      {"args", "INTEGER NOT NULL"},
  };
  columns.insert(columns.end(), specific.begin(), specific.end());
  return EventColumns(std::move(columns));
}

// Tables and columns added after v1 name their version (`since`): older files lack them.
std::vector<TableDef> BuildTables() {
  std::vector<TableDef> t;
  t.push_back({"meta", {{"key", "TEXT PRIMARY KEY"}, {"value", "TEXT NOT NULL"}}, "", "", false});
  t.push_back({"strings", {{"id", "INTEGER PRIMARY KEY"}, {"value", "TEXT NOT NULL"}}, "", "", false});
  t.push_back({"enums",
               {{"type", "TEXT NOT NULL"}, {"value", "INTEGER NOT NULL"}, {"name", "TEXT NOT NULL"}},
               "PRIMARY KEY(type, value)", "", false});
  t.push_back({"lanes",
               {{"id", "INTEGER PRIMARY KEY"},
                {"kind", "INTEGER NOT NULL"},
                {"role", "INTEGER NOT NULL"},
                {"device", "INTEGER NOT NULL"},
                {"context", "INTEGER NOT NULL"},
                {"stream", "INTEGER NOT NULL"},
                {"pid", "INTEGER NOT NULL"},
                {"tid", "INTEGER NOT NULL"},
                {"comm_hash", "INTEGER NOT NULL"},
                {"name", "TEXT NOT NULL"},
                {"max_duration_ns", "INTEGER NOT NULL"}},
               "", "", false});
  t.push_back({"drops",
               {{"id", "INTEGER PRIMARY KEY"},
                {"source", "TEXT NOT NULL"},
                {"reason", "TEXT NOT NULL"},
                {"device", "INTEGER NOT NULL"},
                {"context", "INTEGER NOT NULL"},
                {"stream", "INTEGER NOT NULL"},
                {"count", "INTEGER NOT NULL"}},
               "UNIQUE(source, reason, device, context, stream)", "", false});
  t.push_back({"lane_blocks",
               {{"event_table", "TEXT NOT NULL"},
                {"block", "INTEGER NOT NULL"},
                {"lane", "INTEGER NOT NULL"},
                {"rows", "INTEGER NOT NULL"}},
               "PRIMARY KEY(event_table, block, lane)", "", false});
  t.push_back({"kernels",
               EventColumns({{"grid_x", "INTEGER NOT NULL"},
                             {"grid_y", "INTEGER NOT NULL"},
                             {"grid_z", "INTEGER NOT NULL"},
                             {"block_x", "INTEGER NOT NULL"},
                             {"block_y", "INTEGER NOT NULL"},
                             {"block_z", "INTEGER NOT NULL"},
                             {"registers_per_thread", "INTEGER NOT NULL"},
                             {"static_shared_bytes", "INTEGER NOT NULL"},
                             {"dynamic_shared_bytes", "INTEGER NOT NULL"}}),
               "", "lane, start_ns", true});
  t.push_back({"memcpys",
               EventColumns({{"bytes", "INTEGER NOT NULL"},
                             {"copy_kind", "INTEGER NOT NULL"},
                             {"src_kind", "INTEGER NOT NULL"},
                             {"dst_kind", "INTEGER NOT NULL"},
                             {"src_device", "INTEGER NOT NULL"},
                             {"dst_device", "INTEGER NOT NULL"}}),
               "", "lane, start_ns", true});
  t.push_back({"memsets",
               EventColumns({{"bytes", "INTEGER NOT NULL"},
                             {"value", "INTEGER NOT NULL"},
                             {"memory_kind", "INTEGER NOT NULL"}}),
               "", "lane, start_ns", true});
  t.push_back({"api_calls",
               EventColumns({{"domain", "INTEGER NOT NULL"},
                             {"callback_id", "INTEGER NOT NULL"},
                             {"return_code", "INTEGER NOT NULL"},
                             {"external_id", "INTEGER NOT NULL", 2}}),
               "", "lane, start_ns", true});
  t.push_back({"syncs",
               EventColumns({{"sync_kind", "INTEGER NOT NULL"},
                             {"context", "INTEGER NOT NULL"},
                             {"stream", "INTEGER NOT NULL"},
                             {"cuda_event_id", "INTEGER NOT NULL"}}),
               "", "lane, start_ns", true});
  t.push_back({"nvtx_ranges",
               NvtxColumns({{"style", "INTEGER NOT NULL"}, {"end_lane", "INTEGER NOT NULL"}}),
               "", "lane, start_ns", true});
  t.push_back({"nvtx_marks", NvtxColumns({}), "", "lane, start_ns", true});
  t.push_back({"collectives",
               EventColumns({{"comm_hash", "INTEGER NOT NULL"},
                             {"sequence", "INTEGER NOT NULL"},
                             {"op", "INTEGER NOT NULL"},
                             {"reduce_op", "INTEGER NOT NULL"},
                             {"datatype", "INTEGER NOT NULL"},
                             {"bytes", "INTEGER NOT NULL"},
                             {"root", "INTEGER NOT NULL"},
                             {"peer", "INTEGER NOT NULL"},
                             {"comm_rank", "INTEGER NOT NULL"},
                             {"comm_size", "INTEGER NOT NULL"},
                             {"channels", "INTEGER NOT NULL"},
                             {"algorithm", "INTEGER NOT NULL"},
                             {"protocol", "INTEGER NOT NULL"}}),
               "", "lane, start_ns", true});
  t.push_back({"counter_samples",
               {{"id", "INTEGER PRIMARY KEY"},
                {"lane", "INTEGER NOT NULL"},
                {"ts_ns", "INTEGER NOT NULL"},
                {"value", "REAL NOT NULL"}},
               "", "lane, ts_ns", false});
  t.push_back({"collective_parts",
               EventColumns({{"comm_hash", "INTEGER NOT NULL"},
                             {"sequence", "INTEGER NOT NULL"},
                             {"part_kind", "INTEGER NOT NULL"},
                             {"channel", "INTEGER NOT NULL"},
                             {"peer", "INTEGER NOT NULL"},
                             {"step", "INTEGER NOT NULL"},
                             {"bytes", "INTEGER NOT NULL"}}),
               "", "lane, start_ns", true, 2});
  t.push_back({"overheads",
               EventColumns({{"overhead_kind", "INTEGER NOT NULL"}}),
               "", "lane, start_ns", true, 2});
  // The in-flight state (trace/in_flight.h): replaced as a whole with each drain.
  t.push_back({"flight_collectives",
               {{"id", "INTEGER PRIMARY KEY"},
                {"comm_hash", "INTEGER NOT NULL"},
                {"sequence", "INTEGER NOT NULL"},
                {"op", "INTEGER NOT NULL"},
                {"name", "TEXT NOT NULL"},
                {"bytes", "INTEGER NOT NULL"},
                {"root", "INTEGER NOT NULL"},
                {"peer", "INTEGER NOT NULL"},
                {"comm_rank", "INTEGER NOT NULL"},
                {"comm_size", "INTEGER NOT NULL"},
                {"lane", "INTEGER NOT NULL"},
                {"start_ns", "INTEGER NOT NULL"},
                {"end_ns", "INTEGER"}},
               "", "", false, 3});
  t.push_back({"open_ranges",
               {{"id", "INTEGER PRIMARY KEY"},
                {"lane", "INTEGER NOT NULL"},
                {"depth", "INTEGER NOT NULL"},
                {"start_ns", "INTEGER NOT NULL"},
                {"name", "TEXT NOT NULL"},
                {"domain", "TEXT NOT NULL"},
                {"category", "INTEGER NOT NULL"},
                {"args", "TEXT NOT NULL"}},
               "", "", false, 3});
  return t;
}

}  // namespace

std::string TableDef::DataColumnList() const {
  std::string list;
  for (const ColumnDef& column : columns) {
    if (column.name == "id") continue;
    if (!list.empty()) list += ", ";
    list += column.name;
  }
  return list;
}

std::string TableDef::SelectList(int version) const {
  std::string list;
  for (const ColumnDef& column : columns) {
    if (column.name == "id") continue;
    if (!list.empty()) list += ", ";
    list += column.ExistsIn(version) ? column.name : "0";
  }
  return list;
}

std::string TableDef::InsertSql() const {
  std::string params;
  for (size_t i = 1; i < columns.size(); ++i) params += i > 1 ? ", ?" : "?";
  return fmt::format("INSERT INTO {}({}) VALUES({})", name, DataColumnList(), params);
}

const std::vector<TableDef>& SchemaTables() {
  // Never destroyed: the collector closes its file from a library destructor, after
  // function-local statics constructed later are already gone.
  static const auto* const tables = new std::vector<TableDef>(BuildTables());
  return *tables;
}

const TableDef* FindTable(std::string_view name) {
  for (const TableDef& table : SchemaTables()) {
    if (table.name == name) return &table;
  }
  return nullptr;
}

std::string SchemaDdl() {
  std::string ddl;
  for (const TableDef& table : SchemaTables()) {
    ddl += fmt::format("CREATE TABLE {} (", table.name);
    for (size_t i = 0; i < table.columns.size(); ++i) {
      ddl += fmt::format("{}{} {}", i ? ", " : "", table.columns[i].name, table.columns[i].type);
    }
    if (!table.constraints.empty()) ddl += fmt::format(", {}", table.constraints);
    ddl += ");\n";
  }
  return ddl;
}

std::string IndexDdl() {
  std::string ddl;
  for (const TableDef& table : SchemaTables()) {
    if (table.lane_time_index.empty()) continue;
    ddl += fmt::format("CREATE INDEX IF NOT EXISTS {0}_lane_time ON {0}({1});\n", table.name,
                       table.lane_time_index);
  }
  return ddl;
}

const std::vector<EnumValue>& EnumValues() {
  static const auto* const values = new std::vector<EnumValue>{  // never destroyed, as above
      {"lane_kind", 1, "gpu_stream"}, {"lane_kind", 2, "cpu_thread"},
      {"lane_kind", 3, "communicator"}, {"lane_kind", 4, "counter"},
      {"lane_role", 0, "none"}, {"lane_role", 1, "compute"}, {"lane_role", 2, "comm"},
      {"lane_role", 3, "memory"},
      {"copy_kind", 0, "unknown"}, {"copy_kind", 1, "HtoD"}, {"copy_kind", 2, "DtoH"},
      {"copy_kind", 3, "HtoA"}, {"copy_kind", 4, "AtoH"}, {"copy_kind", 5, "AtoA"},
      {"copy_kind", 6, "AtoD"}, {"copy_kind", 7, "DtoA"}, {"copy_kind", 8, "DtoD"},
      {"copy_kind", 9, "HtoH"}, {"copy_kind", 10, "PtoP"},
      {"memory_kind", 0, "unknown"}, {"memory_kind", 1, "pageable"},
      {"memory_kind", 2, "pinned"}, {"memory_kind", 3, "device"}, {"memory_kind", 4, "array"},
      {"memory_kind", 5, "managed"}, {"memory_kind", 6, "device_static"},
      {"memory_kind", 7, "managed_static"},
      {"api_domain", 0, "unknown"}, {"api_domain", 1, "runtime"}, {"api_domain", 2, "driver"},
      {"sync_kind", 0, "unknown"}, {"sync_kind", 1, "event_synchronize"},
      {"sync_kind", 2, "stream_wait_event"}, {"sync_kind", 3, "stream_synchronize"},
      {"sync_kind", 4, "context_synchronize"},
      {"nvtx_range_style", 1, "push_pop"}, {"nvtx_range_style", 2, "start_end"},
      {"payload_kind", 0, "none"}, {"payload_kind", 1, "uint64"}, {"payload_kind", 2, "int64"},
      {"payload_kind", 3, "double"}, {"payload_kind", 4, "uint32"}, {"payload_kind", 5, "int32"},
      {"payload_kind", 6, "float"},
      {"collective_op", 0, "unknown"}, {"collective_op", 1, "AllReduce"},
      {"collective_op", 2, "AllGather"}, {"collective_op", 3, "ReduceScatter"},
      {"collective_op", 4, "Broadcast"}, {"collective_op", 5, "Reduce"},
      {"collective_op", 6, "AllToAll"}, {"collective_op", 7, "Send"},
      {"collective_op", 8, "Recv"}, {"collective_op", 9, "Barrier"},
      {"collective_op", 10, "Gather"}, {"collective_op", 11, "Scatter"},
      {"reduce_op", 0, "none"}, {"reduce_op", 1, "sum"}, {"reduce_op", 2, "prod"},
      {"reduce_op", 3, "max"}, {"reduce_op", 4, "min"}, {"reduce_op", 5, "avg"},
      {"datatype", 0, "unknown"}, {"datatype", 1, "int8"}, {"datatype", 2, "uint8"},
      {"datatype", 3, "int32"}, {"datatype", 4, "uint32"}, {"datatype", 5, "int64"},
      {"datatype", 6, "uint64"}, {"datatype", 7, "float16"}, {"datatype", 8, "float32"},
      {"datatype", 9, "float64"}, {"datatype", 10, "bfloat16"}, {"datatype", 11, "float8e4m3"},
      {"datatype", 12, "float8e5m2"},
      // Added in schema v2.
      {"overhead_kind", 0, "unknown"}, {"overhead_kind", 1, "driver_compiler"},
      {"overhead_kind", 2, "cupti_buffer_flush"}, {"overhead_kind", 3, "cupti_instrumentation"},
      {"overhead_kind", 4, "cupti_resource"},
      {"overhead_kind", 5, "runtime_triggered_module_loading"},
      {"overhead_kind", 6, "lazy_function_loading"}, {"overhead_kind", 7, "command_buffer_full"},
      {"overhead_kind", 8, "activity_buffer_request"}, {"overhead_kind", 9, "uvm_activity_init"},
      {"collective_part_kind", 0, "unknown"}, {"collective_part_kind", 1, "kernel_channel"},
      {"collective_part_kind", 2, "proxy_send"}, {"collective_part_kind", 3, "proxy_recv"},
      {"collective_part_kind", 4, "proxy_send_step"},
      {"collective_part_kind", 5, "proxy_recv_step"},
  };
  return *values;
}

}  // namespace rankscope::trace
