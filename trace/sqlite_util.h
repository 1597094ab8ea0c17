// RAII wrappers over the SQLite C API: the trace store's, and the nsys importer's
// (analyzer/), which reads other tools' SQLite files with the same care.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"

namespace rankscope::trace::sql {

struct DbCloser {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
using DbHandle = std::unique_ptr<sqlite3, DbCloser>;

// SQLite's message for the last error on `db`, or for `rc` when there is no db.
std::string ErrorMessage(sqlite3* db, int rc);

// Maps an SQLite result code to a Status with a readable message.
Status FromSqlite(sqlite3* db, int rc, std::string_view what);

Status Exec(sqlite3* db, std::string_view sql);

// Checks the 100-byte SQLite header before SQLite sees the file, so that a non-SQLite or
// truncated file gets a precise message instead of a failure at some later query.
Status CheckFileHeader(const std::filesystem::path& path);

// Opens a database that may come from anywhere: read-only, in SQLite's defensive mode, with
// an untrusted schema (it cannot run functions or touch anything but its own pages).
Result<DbHandle> OpenReadOnly(const std::filesystem::path& path);

class Statement {
 public:
  Statement() = default;
  static Result<Statement> Prepare(sqlite3* db, std::string_view sql);

  sqlite3_stmt* get() const { return stmt_.get(); }
  explicit operator bool() const { return stmt_ != nullptr; }

  void BindInt(int index, int64_t value) { sqlite3_bind_int64(get(), index, value); }
  void BindUint(int index, uint64_t value) {
    sqlite3_bind_int64(get(), index, static_cast<int64_t>(value));  // same bits
  }
  void BindReal(int index, double value) { sqlite3_bind_double(get(), index, value); }
  void BindText(int index, std::string_view value) {
    sqlite3_bind_text(get(), index, value.data(), static_cast<int>(value.size()), SQLITE_TRANSIENT);
  }

  int64_t ColumnInt(int index) const { return sqlite3_column_int64(get(), index); }
  uint64_t ColumnUint(int index) const { return static_cast<uint64_t>(ColumnInt(index)); }
  double ColumnReal(int index) const { return sqlite3_column_double(get(), index); }
  std::string ColumnText(int index) const;

  // Runs a statement that returns no rows, then resets it for reuse.
  Status StepDone(std::string_view what);
  void Reset() { sqlite3_reset(get()); }

 private:
  struct Finalizer {
    void operator()(sqlite3_stmt* stmt) const { sqlite3_finalize(stmt); }
  };
  std::unique_ptr<sqlite3_stmt, Finalizer> stmt_;
};

}  // namespace rankscope::trace::sql
