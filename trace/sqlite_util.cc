#include "trace/sqlite_util.h"

#include <fmt/format.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>

namespace rankscope::trace::sql {
namespace fs = std::filesystem;

namespace {

uint32_t BigEndian32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

}  // namespace

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

Result<sql::DbHandle> OpenReadOnly(const fs::path& path) {
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nullptr);
  sql::DbHandle db(raw);
  if (rc != SQLITE_OK) return sql::FromSqlite(raw, rc, "cannot open");
  // Defensive: the file may come from anywhere; its schema must not run functions or
  // touch anything but its own pages.
  sqlite3_db_config(raw, SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr);
  sqlite3_db_config(raw, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, nullptr);
  sqlite3_busy_timeout(raw, 2000);  // a live writer may hold the WAL lock briefly
  return db;
}


std::string ErrorMessage(sqlite3* db, int rc) {
  const char* text = db != nullptr && sqlite3_errcode(db) == rc ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  // SQLite quotes a damaged schema's raw bytes: escape control bytes so a message stays one line.
  std::string message;
  for (const char* c = text; c != nullptr && *c != '\0'; ++c) {
    const auto byte = static_cast<unsigned char>(*c);
    if (byte < 0x20 || byte == 0x7f) {
      message += fmt::format("\\x{:02x}", byte);
    } else {
      message += *c;
    }
  }
  return message;
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
