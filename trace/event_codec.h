// Internal: maps each event struct to its table's columns, in the order of
// TableDef::DataColumnList(). One Bind and one Read per kind, nothing else knows the order.
#pragma once

#include <string_view>
#include <vector>

#include "trace/events.h"
#include "trace/sqlite_util.h"

namespace rankscope::trace::codec {

// Binds all data columns (parameters 1..N) of an INSERT.
void Bind(sql::Statement& stmt, const KernelEvent& e);
void Bind(sql::Statement& stmt, const MemcpyEvent& e);
void Bind(sql::Statement& stmt, const MemsetEvent& e);
void Bind(sql::Statement& stmt, const ApiCallEvent& e);
void Bind(sql::Statement& stmt, const SyncEvent& e);
void Bind(sql::Statement& stmt, const NvtxRangeEvent& e);
void Bind(sql::Statement& stmt, const NvtxMarkEvent& e);
void Bind(sql::Statement& stmt, const CollectiveEvent& e);
void Bind(sql::Statement& stmt, const CounterSample& e);
void Bind(sql::Statement& stmt, const CollectivePartEvent& e);
void Bind(sql::Statement& stmt, const OverheadEvent& e);

// Reads all data columns (result columns 0..N-1) of a SELECT of DataColumnList() or
// SelectList(). A lane or string id that cannot be one (negative, or above 2^32 - 1) reads
// as kUnreadableId, which names no lane or string: the analysis counts such a row invalid.
void Read(const sql::Statement& stmt, KernelEvent* e);
void Read(const sql::Statement& stmt, MemcpyEvent* e);
void Read(const sql::Statement& stmt, MemsetEvent* e);
void Read(const sql::Statement& stmt, ApiCallEvent* e);
void Read(const sql::Statement& stmt, SyncEvent* e);
void Read(const sql::Statement& stmt, NvtxRangeEvent* e);
void Read(const sql::Statement& stmt, NvtxMarkEvent* e);
void Read(const sql::Statement& stmt, CollectiveEvent* e);
void Read(const sql::Statement& stmt, CounterSample* e);
void Read(const sql::Statement& stmt, CollectivePartEvent* e);
void Read(const sql::Statement& stmt, OverheadEvent* e);

// Calls f(table_name, vector) for each table of `tables`, in schema order.
template <typename Tables, typename F>
void ForEachTable(Tables& tables, F&& f) {
  f(std::string_view("kernels"), tables.kernels);
  f(std::string_view("memcpys"), tables.memcpys);
  f(std::string_view("memsets"), tables.memsets);
  f(std::string_view("api_calls"), tables.api_calls);
  f(std::string_view("syncs"), tables.syncs);
  f(std::string_view("nvtx_ranges"), tables.nvtx_ranges);
  f(std::string_view("nvtx_marks"), tables.nvtx_marks);
  f(std::string_view("collectives"), tables.collectives);
  f(std::string_view("counter_samples"), tables.counter_samples);
  f(std::string_view("collective_parts"), tables.collective_parts);
  f(std::string_view("overheads"), tables.overheads);
}

// Calls f(a_vector, b_vector) for each pair of same-kind tables, in schema order.
template <typename F>
void ForEachTablePair(EventTables& a, EventTables& b, F&& f) {
  f(a.kernels, b.kernels);
  f(a.memcpys, b.memcpys);
  f(a.memsets, b.memsets);
  f(a.api_calls, b.api_calls);
  f(a.syncs, b.syncs);
  f(a.nvtx_ranges, b.nvtx_ranges);
  f(a.nvtx_marks, b.nvtx_marks);
  f(a.collectives, b.collectives);
  f(a.counter_samples, b.counter_samples);
  f(a.collective_parts, b.collective_parts);
  f(a.overheads, b.overheads);
}

inline constexpr int kEventTableCount = 11;

// Lane, start and duration of any record, for index bookkeeping.
inline LaneId LaneOf(const EventCommon& e) { return e.lane; }
inline LaneId LaneOf(const CounterSample& e) { return e.lane; }
inline TimestampNs StartOf(const EventCommon& e) { return e.start_ns; }
inline TimestampNs StartOf(const CounterSample& e) { return e.ts_ns; }
// -1 for an invalid time range (see CheckedDuration).
inline TimestampNs DurationOf(const EventCommon& e) { return CheckedDuration(e.start_ns, e.end_ns).value_or(-1); }
inline TimestampNs DurationOf(const CounterSample&) { return 0; }

}  // namespace rankscope::trace::codec
