#include "trace/sqlite_util.h"

#include <fmt/format.h>

#include <stdlib.h>
#include <sys/stat.h>

#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "base/text.h"

namespace rankscope::trace::sql {
namespace fs = std::filesystem;

namespace {

uint32_t BigEndian32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

// The SQLite files a writer may leave beside a database: the WAL and the rollback journal.
// (-shm is only an index of the WAL; a reader never needs it.)
constexpr const char* kSidecarSuffixes[] = {"-wal", "-journal"};

fs::path WithSuffix(const fs::path& path, std::string_view suffix) {
  return fs::path(path.string() + std::string(suffix));
}

const char* FileTypeName(fs::file_type type) {
  switch (type) {
    case fs::file_type::directory: return "a directory";
    case fs::file_type::fifo: return "a FIFO";
    case fs::file_type::socket: return "a socket";
    case fs::file_type::character: return "a character device";
    case fs::file_type::block: return "a block device";
    default: return "of an unknown type";
  }
}

// Bytes 18 and 19 of the header are 2 in WAL mode, 1 in rollback journal mode.
Result<bool> HeaderSaysWal(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::array<char, 20> header{};
  if (!in.read(header.data(), header.size())) {
    return IoError(fmt::format("cannot read the header: {}", std::strerror(errno)));
  }
  return header[18] == 2 || header[19] == 2;
}

// What stat says about a file that must not change while it is copied.
struct FileVersion {
  dev_t device = 0;
  ino_t inode = 0;
  off_t size = 0;
  timespec modified{};

  bool operator==(const FileVersion& o) const {
    return device == o.device && inode == o.inode && size == o.size &&
           modified.tv_sec == o.modified.tv_sec && modified.tv_nsec == o.modified.tv_nsec;
  }
};

Result<FileVersion> VersionOf(const fs::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return IoError(fmt::format("cannot inspect the file: {}", std::strerror(errno)));
  return FileVersion{st.st_dev, st.st_ino, st.st_size, st.st_mtim};
}

// Opens the private copy read-write so that SQLite recovers it (rolls back a hot journal,
// replays the WAL's committed frames) and leaves it in rollback journal mode with nothing
// beside it, ready for read-only connections.
Status Recover(const fs::path& copy) {
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(copy.c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr);
  DbHandle db(raw);
  if (rc != SQLITE_OK) return FromSqlite(raw, rc, "cannot open the private copy");
  sqlite3_db_config(raw, SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr);
  sqlite3_db_config(raw, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, nullptr);
  // Exclusive locking keeps a WAL's index in memory: no -shm, not even in the private
  // directory. Reading the schema is the first access, which recovers the file.
  RS_RETURN_IF_ERROR(
      Exec(raw, "PRAGMA locking_mode=EXCLUSIVE; SELECT count(*) FROM sqlite_schema", "recovering the private copy"));
  RS_ASSIGN_OR_RETURN(Statement mode, Statement::Prepare(raw, "PRAGMA journal_mode=DELETE"));
  const int step = sqlite3_step(mode.get());
  if (step != SQLITE_ROW) return FromSqlite(raw, step, "recovering the private copy");
  if (mode.ColumnText(0) != "delete") {
    return IoError(fmt::format("recovering the private copy: journal mode stays '{}'", mode.ColumnText(0)));
  }
  return Status::Ok();
}

}  // namespace

Status CheckRegularFile(const fs::path& path) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (status.type() == fs::file_type::not_found) return NotFound("no such file");
  if (ec) return IoError(fmt::format("cannot inspect the file: {}", ec.message()));
  if (status.type() != fs::file_type::regular) {
    return InvalidArgument(fmt::format("not a regular file ({})", FileTypeName(status.type())));
  }
  return Status::Ok();
}

// Checks the 100-byte SQLite header before SQLite sees the file, so that a non-SQLite or
// truncated file gets a precise message instead of a failure at some later query.
Status CheckFileHeader(const fs::path& path) {
  RS_RETURN_IF_ERROR(CheckRegularFile(path));
  std::error_code ec;
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
  // With a WAL or a journal beside it, the main file may legitimately disagree with its
  // header until SQLite has replayed or rolled back.
  for (const char* suffix : kSidecarSuffixes) {
    if (fs::exists(WithSuffix(path, suffix), ec)) return Status::Ok();
  }
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
  RS_RETURN_IF_ERROR(CheckRegularFile(path));
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nullptr);
  sql::DbHandle db(raw);
  if (rc != SQLITE_OK) return sql::FromSqlite(raw, rc, "cannot open");
  // Defensive: the file may come from anywhere; its schema must not run functions or
  // touch anything but its own pages.
  sqlite3_db_config(raw, SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr);
  sqlite3_db_config(raw, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, nullptr);
  sqlite3_busy_timeout(raw, 2000);  // another tool may hold a lock briefly
  return db;
}

// ---- ReadableDatabase --------------------------------------------------------------------

Result<ReadableDatabase> ReadableDatabase::Prepare(const fs::path& path) {
  RS_RETURN_IF_ERROR(CheckFileHeader(path));
  std::string left_behind;  // why the file needs recovering, for messages
  std::error_code ec;
  for (const char* suffix : kSidecarSuffixes) {
    const fs::path sidecar = WithSuffix(path, suffix);
    if (!fs::exists(sidecar, ec)) continue;
    if (Status s = CheckRegularFile(sidecar); !s.ok()) return s.WithContext(fmt::format("its {} file", suffix));
    if (left_behind.empty()) left_behind = fmt::format("its {} file lies beside it", suffix);
  }
  if (left_behind.empty()) {
    RS_ASSIGN_OR_RETURN(const bool wal, HeaderSaysWal(path));
    if (!wal) return ReadableDatabase(path, {});
    left_behind = "it is still in WAL mode";
  }

  // Copies cannot be read in place without SQLite writing beside them (-shm, a rolled-back
  // journal): make the private copy. Whoever cannot afford it can recover the file in place.
  const std::string how_to_recover = fmt::format(
      "set TMPDIR to a directory with room, or recover the file in place once with: sqlite3 {} "
      "'PRAGMA journal_mode=DELETE'",
      Quoted(path));
  auto cannot_copy = [&](const std::string& why) {
    return IoError(fmt::format("was not closed by its writer ({}), and no private copy to recover it could be "
                               "made: {}; {}",
                               left_behind, why, how_to_recover));
  };
  const fs::path temp_root = fs::temp_directory_path(ec);
  if (ec) {
    const char* tmpdir = std::getenv("TMPDIR");
    return cannot_copy(fmt::format("no temporary directory (TMPDIR={}): {}", Quoted(tmpdir ? tmpdir : ""),
                                   ec.message()));
  }
  std::string pattern = (temp_root / "rankscope-read-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) {
    return cannot_copy(fmt::format("{}: {}", temp_root.string(), std::strerror(errno)));
  }
  ReadableDatabase snapshot(fs::path(pattern) / path.filename(), fs::path(pattern));
  const fs::path& copy = snapshot.sqlite_path_;

  // The database before its sidecars: between its checkpoints (every 64 MiB of WAL) a live
  // rankscope writer does not change the database and only appends whole commits to its
  // WAL (SQLite discards a torn tail). A database that changed during the copy (a
  // checkpoint, or the writer closing) is copied again.
  constexpr int kAttempts = 5;
  for (int attempt = 1;; ++attempt) {
    RS_ASSIGN_OR_RETURN(const FileVersion before, VersionOf(path));
    if (!fs::copy_file(path, copy, fs::copy_options::overwrite_existing, ec)) {
      return cannot_copy(fmt::format("{}: {}", copy.string(), ec.message()));
    }
    for (const char* suffix : kSidecarSuffixes) {
      const fs::path sidecar = WithSuffix(path, suffix), sidecar_copy = WithSuffix(copy, suffix);
      fs::remove(sidecar_copy, ec);
      if (!fs::copy_file(sidecar, sidecar_copy, fs::copy_options::overwrite_existing, ec) &&
          ec != std::errc::no_such_file_or_directory) {  // gone meanwhile: the writer closed
        return cannot_copy(fmt::format("{}: {}", sidecar_copy.string(), ec.message()));
      }
    }
    RS_ASSIGN_OR_RETURN(const FileVersion after, VersionOf(path));
    if (before == after) break;
    if (attempt == kAttempts) {
      return Inconsistent(fmt::format("changed each of the {} times it was copied to be read", kAttempts));
    }
  }
  RS_RETURN_IF_ERROR(Recover(copy));
  RS_RETURN_IF_ERROR(CheckFileHeader(copy));
  return snapshot;
}

ReadableDatabase::ReadableDatabase(ReadableDatabase&& other) noexcept
    : sqlite_path_(std::move(other.sqlite_path_)), snapshot_dir_(std::move(other.snapshot_dir_)) {
  other.snapshot_dir_.clear();
}

ReadableDatabase& ReadableDatabase::operator=(ReadableDatabase&& other) noexcept {
  if (this != &other) {
    RemoveSnapshot();
    sqlite_path_ = std::move(other.sqlite_path_);
    snapshot_dir_ = std::move(other.snapshot_dir_);
    other.snapshot_dir_.clear();
  }
  return *this;
}

ReadableDatabase::~ReadableDatabase() { RemoveSnapshot(); }

void ReadableDatabase::RemoveSnapshot() {
  if (snapshot_dir_.empty()) return;
  std::error_code ignored;
  fs::remove_all(snapshot_dir_, ignored);
  snapshot_dir_.clear();
}

Result<DbHandle> ReadableDatabase::Connect() const { return OpenReadOnly(sqlite_path_); }

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

Status Exec(sqlite3* db, std::string_view sql, std::string_view what) {
  const std::string text(sql);
  const int rc = sqlite3_exec(db, text.c_str(), nullptr, nullptr, nullptr);
  if (rc == SQLITE_OK) return Status::Ok();
  return FromSqlite(db, rc, what);
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
