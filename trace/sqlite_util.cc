#include "trace/sqlite_util.h"

#include <fmt/format.h>

namespace rankscope::trace::sql {

std::string ErrorMessage(sqlite3* db, int rc) {
  if (db != nullptr && sqlite3_errcode(db) == rc) return sqlite3_errmsg(db);
  return sqlite3_errstr(rc);
}

Status FromSqlite(sqlite3* db, int rc, std::string_view what) {
  std::string message = fmt::format("{}: {}", what, ErrorMessage(db, rc));
  switch (rc & 0xff) {
    case SQLITE_NOTADB:
      return Corrupt(fmt::format("{}: not an SQLite database", what));
    case SQLITE_CORRUPT:
      return Corrupt(fmt::format("{}: the database is damaged ({})", what, ErrorMessage(db, rc)));
    case SQLITE_CANTOPEN:
      return NotFound(message);
    default:
      return IoError(message);
  }
}

Status Exec(sqlite3* db, std::string_view sql) {
  const std::string text(sql);
  const int rc = sqlite3_exec(db, text.c_str(), nullptr, nullptr, nullptr);
  if (rc == SQLITE_OK) return Status::Ok();
  return FromSqlite(db, rc, "SQL failed");
}

Result<Statement> Statement::Prepare(sqlite3* db, std::string_view sql) {
  sqlite3_stmt* raw = nullptr;
  const int rc = sqlite3_prepare_v3(db, sql.data(), static_cast<int>(sql.size()),
                                    SQLITE_PREPARE_PERSISTENT, &raw, nullptr);
  if (rc != SQLITE_OK) {
    sqlite3_finalize(raw);
    return FromSqlite(db, rc, fmt::format("preparing `{}`", sql));
  }
  Statement statement;
  statement.stmt_.reset(raw);
  return statement;
}

std::string Statement::ColumnText(int index) const {
  const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(get(), index));
  if (text == nullptr) return {};
  return std::string(text, static_cast<size_t>(sqlite3_column_bytes(get(), index)));
}

Status Statement::StepDone(std::string_view what) {
  const int rc = sqlite3_step(get());
  sqlite3_reset(get());
  if (rc == SQLITE_DONE || rc == SQLITE_ROW) return Status::Ok();
  return FromSqlite(sqlite3_db_handle(get()), rc, what);
}

}  // namespace rankscope::trace::sql
