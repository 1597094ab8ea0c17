// RAII wrappers over the SQLite C API: the trace store's, and the nsys importer's
// (interop/), which reads other tools' SQLite files with the same care.
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

// Runs `sql` (one or more statements); an error says `what` was being done.
Status Exec(sqlite3* db, std::string_view sql, std::string_view what = "SQL failed");

// Refuses anything but a regular file ("not a regular file (a FIFO)") without opening it:
// opening a FIFO blocks until someone writes to it, and a device or socket is no database.
Status CheckRegularFile(const std::filesystem::path& path);

// Checks the 100-byte SQLite header before SQLite sees the file, so that a non-SQLite or
// truncated file gets a precise message instead of a failure at some later query. Refuses
// a file that is not a regular file first (CheckRegularFile).
Status CheckFileHeader(const std::filesystem::path& path);

// Opens a database that may come from anywhere: read-only, in SQLite's defensive mode, with
// an untrusted schema (it cannot run functions or touch anything but its own pages). Opens
// the file in place: a file left in WAL mode or with a hot journal needs ReadableDatabase.
Result<DbHandle> OpenReadOnly(const std::filesystem::path& path);

// A database file as it can be read without writing anything beside it, whatever state its
// writer left it in. A file that was closed (rollback journal mode, no -wal or -journal
// beside it) is read in place. Any other (its writer was killed, or is still recording) is
// copied with its -wal or -journal into a private temporary directory, database first, and
// recovered there: SQLite rolls back the hot journal or replays the WAL's committed frames.
// The copy is a consistent snapshot of what was committed and goes with this object.
class ReadableDatabase {
 public:
  // Checks `path` (CheckFileHeader) and makes the private copy when one is needed.
  static Result<ReadableDatabase> Prepare(const std::filesystem::path& path);
  ReadableDatabase(ReadableDatabase&& other) noexcept;
  ReadableDatabase& operator=(ReadableDatabase&& other) noexcept;
  ReadableDatabase(const ReadableDatabase&) = delete;
  ReadableDatabase& operator=(const ReadableDatabase&) = delete;
  ~ReadableDatabase();  // removes the private copy

  // A new read-only connection (OpenReadOnly) to what sqlite_path() names.
  Result<DbHandle> Connect() const;
  // The file SQLite reads: the file itself, or its recovered private copy.
  const std::filesystem::path& sqlite_path() const { return sqlite_path_; }
  // Whether the file is read through a private copy (it was not closed by its writer).
  bool is_snapshot() const { return !snapshot_dir_.empty(); }

 private:
  ReadableDatabase(std::filesystem::path sqlite_path, std::filesystem::path snapshot_dir)
      : sqlite_path_(std::move(sqlite_path)), snapshot_dir_(std::move(snapshot_dir)) {}
  void RemoveSnapshot();

  std::filesystem::path sqlite_path_;
  std::filesystem::path snapshot_dir_;  // empty when read in place
};

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

  // Runs a statement to its first row or its end, then resets it for reuse; for statements
  // whose rows are not read (INSERT, UPDATE, PRAGMA ...).
  Status StepDone(std::string_view what);
  void Reset() { sqlite3_reset(get()); }

 private:
  struct Finalizer {
    void operator()(sqlite3_stmt* stmt) const { sqlite3_finalize(stmt); }
  };
  std::unique_ptr<sqlite3_stmt, Finalizer> stmt_;
};

}  // namespace rankscope::trace::sql
