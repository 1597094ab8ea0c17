// The import driver: format detection, reading (and gunzipping) input files, the rank files
// an import writes, and temporary runs for commands that take foreign traces directly.
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "interop/import_internal.h"
#include "interop/inflate.h"
#include "base/file_check.h"
#include "base/text.h"
#include "trace/recording_lock.h"
#include "trace/run_dir.h"
#include "trace/schema.h"
#include "trace/sqlite_util.h"
#include "trace/writer.h"

namespace rankscope::interop {
namespace fs = std::filesystem;

namespace import {

std::string Head(const fs::path& path, size_t bytes) {
  if (!CheckRegularFile(path).ok()) return {};  // a FIFO would block the open
  std::ifstream in(path, std::ios::binary);
  std::string head(bytes, '\0');
  in.read(head.data(), static_cast<std::streamsize>(bytes));
  head.resize(static_cast<size_t>(std::max<std::streamsize>(in.gcount(), 0)));
  return head;
}

namespace {

constexpr unsigned char kGzipMagic[] = {0x1f, 0x8b};

bool IsGzip(std::string_view head) {
  return head.size() >= 2 && static_cast<unsigned char>(head[0]) == kGzipMagic[0] &&
         static_cast<unsigned char>(head[1]) == kGzipMagic[1];
}

constexpr size_t kJsonSniffBytes = size_t{1} << 20;

// The first character that is not white space, or '\0'.
char FirstCharacter(std::string_view text) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  return first == std::string_view::npos ? '\0' : text[first];
}

// Chrome's trace formats: an object with "traceEvents" (Kineto writes it before its long
// array of events), or the older bare array of events ("JSON Array Format").
bool LooksLikeChromeTrace(std::string_view head) {
  const char first = FirstCharacter(head);
  if (first == '{') return head.find("\"traceEvents\"") != std::string_view::npos;
  if (first != '[') return false;
  const size_t next = head.find_first_not_of(" \t\r\n", head.find('[') + 1);
  return next != std::string_view::npos && (head[next] == '{' || head[next] == ']') &&
         (head[next] == ']' || head.find("\"ph\"") != std::string_view::npos);
}

// A Kineto trace in a directory of them: named like one (PyTorch writes *.pt.trace.json and
// friends, often gzipped) and starting like JSON.
// The older PyTorch profiler format: a bare array whose first event is a CPU function, with
// "pid": "CPU functions" and no "cat".
bool LooksLikeTorchProfilerLegacy(std::string_view head) {
  if (FirstCharacter(head) != '[') return false;
  const size_t open = head.find('{');
  const size_t close = head.find('}', open);
  if (open == std::string_view::npos || close == std::string_view::npos) return false;
  const std::string_view first = head.substr(open, close - open);
  return first.find("\"CPU functions\"") != std::string_view::npos && first.find("\"cat\"") == std::string_view::npos;
}

bool IsKinetoFileName(const fs::path& path) {
  const std::string name = path.filename().string();
  return name.ends_with(".json") || name.ends_with(".json.gz");
}

bool LooksLikeKineto(const fs::path& path) {
  return LooksLikeChromeTrace(WithoutByteOrderMark(TextHead(path, kJsonSniffBytes)));
}

std::vector<fs::path> KinetoFilesIn(const fs::path& dir) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_regular_file(ec) && IsKinetoFileName(it->path()) && LooksLikeKineto(it->path())) {
      files.push_back(it->path());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

bool HasRankFiles(const fs::path& dir) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (trace::ParseRankFileName(it->path().filename().string()).is_rank_file) return true;
  }
  return false;
}

// Which SQLite file this is: a rank file (rankscope's application id) or an nsys export
// (its metadata table: META_DATA_EXPORT from schema 3, EXPORT_META_DATA in schema 2).
Result<TraceFormat> SqliteFormat(const fs::path& path) {
  RS_RETURN_IF_ERROR(trace::sql::CheckFileHeader(path));
  // The application id is in the header (bytes 68-71, big-endian): a rank file still being
  // recorded, or left by a killed writer, is recognized without opening it in SQLite (which
  // would wait on its writer's lock, or need a private copy).
  std::array<unsigned char, 72> header{};
  {
    std::ifstream in(path, std::ios::binary);
    if (!in.read(reinterpret_cast<char*>(header.data()), static_cast<std::streamsize>(header.size()))) {
      return IoError("cannot read the SQLite header");
    }
  }
  const uint32_t application_id = (uint32_t{header[68]} << 24) | (uint32_t{header[69]} << 16) |
                                  (uint32_t{header[70]} << 8) | uint32_t{header[71]};
  if (application_id == static_cast<uint32_t>(trace::kApplicationId)) return TraceFormat::kRankscopeFile;
  RS_ASSIGN_OR_RETURN(trace::sql::ReadableDatabase readable, trace::sql::ReadableDatabase::Prepare(path));
  RS_ASSIGN_OR_RETURN(trace::sql::DbHandle db, readable.Connect());
  RS_ASSIGN_OR_RETURN(trace::sql::Statement tables,
                      trace::sql::Statement::Prepare(db.get(), "SELECT name FROM sqlite_schema WHERE type = 'table' "
                                                               "AND name IN ('META_DATA_EXPORT', 'EXPORT_META_DATA')"));
  const int rc = sqlite3_step(tables.get());
  if (rc == SQLITE_ROW) return TraceFormat::kNsysSqlite;
  if (rc != SQLITE_DONE) return trace::sql::FromSqlite(db.get(), rc, "reading the schema");
  return Unsupported("an SQLite database, but neither a rankscope rank file nor an Nsight Systems export "
                     "(no META_DATA_EXPORT or EXPORT_META_DATA table)");
}

}  // namespace

Result<std::string> ReadMaybeGzip(const fs::path& file, size_t max_bytes) {
  RS_RETURN_IF_ERROR(CheckRegularFile(file));
  std::error_code ec;
  const uintmax_t size = fs::file_size(file, ec);
  if (ec) return IoError(fmt::format("{}: cannot read its size: {}", Quoted(file), ec.message()));
  // Told apart here for the message; ReadWholeIfAtMost refuses such a file too.
  if (size > max_bytes) {
    return Unsupported(
        fmt::format("{}: {} bytes, more than the {} the JSON parser takes", Quoted(file), size, max_bytes));
  }
  RS_ASSIGN_OR_RETURN(std::optional<std::string> bytes, ReadWholeIfAtMost(file, max_bytes, kJsonPadding));
  if (!bytes) {
    return Unsupported(
        fmt::format("{}: more than {} bytes once unpacked, the most the JSON parser takes", Quoted(file), max_bytes));
  }
  return std::move(*bytes);
}

std::string TextHead(const fs::path& file, size_t max_bytes) {
  const std::string head = Head(file, max_bytes);
  if (!IsGzip(head)) return head;
  // Inflate only as much as the head needs.
  z_stream zs{};
  if (inflateInit2(&zs, 15 + 16) != Z_OK) return {};
  std::string raw = head;
  std::string text(max_bytes, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(raw.data());
  zs.avail_in = static_cast<uInt>(raw.size());
  zs.next_out = reinterpret_cast<Bytef*>(text.data());
  zs.avail_out = static_cast<uInt>(text.size());
  inflate(&zs, Z_SYNC_FLUSH);
  text.resize(text.size() - zs.avail_out);
  inflateEnd(&zs);
  return text;
}

// ---- DamagedEvents ---------------------------------------------------------------------------

void DamagedEvents::Count(std::string_view kind, std::string_view reason, std::string_view detail) {
  auto found = kinds_.find(kind);
  if (found == kinds_.end()) {
    found = kinds_.emplace(std::string(kind), Kind{}).first;
    found->second.first_detail = std::string(detail);
  }
  auto counted = found->second.reasons.find(reason);
  if (counted == found->second.reasons.end()) counted = found->second.reasons.emplace(std::string(reason), 0).first;
  ++counted->second;
}

std::vector<DamagedEvents::Line> DamagedEvents::Lines() const {
  std::vector<Line> lines;
  for (const auto& [kind, counts] : kinds_) {
    std::vector<std::pair<std::string_view, uint64_t>> reasons(counts.reasons.begin(), counts.reasons.end());
    std::stable_sort(reasons.begin(), reasons.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    uint64_t events = 0;
    for (const auto& [reason, count] : reasons) events += count;
    Line line;
    line.kind = kind;
    // Kinds are the importers' own words (categories they know), not text from the trace.
    line.text = fmt::format("left out {} {}{}event{}", events, kind, kind.empty() ? "" : " ", events == 1 ? "" : "s");
    if (reasons.size() == 1) {
      line.text += fmt::format(" {}", reasons[0].first);
    } else {
      std::string list;
      for (const auto& [reason, count] : reasons) {
        list += fmt::format("{}{} {}", list.empty() ? "" : ", ", count, reason);
      }
      line.text += ": " + list;
    }
    if (!counts.first_detail.empty()) line.text += fmt::format(" (first: {})", counts.first_detail);
    line.meta_key = "import.left_out.";
    for (char c : kind.empty() ? std::string("event") : kind) {
      const auto byte = static_cast<unsigned char>(c);
      line.meta_key += std::isalnum(byte) ? static_cast<char>(std::tolower(byte)) : '_';
    }
    lines.push_back(std::move(line));
  }
  return lines;
}

}  // namespace import

// ---- formats ----------------------------------------------------------------------------------

std::string_view TraceFormatName(TraceFormat format) {
  switch (format) {
    case TraceFormat::kRankscopeRun: return "rankscope run";
    case TraceFormat::kRankscopeFile: return "rankscope rank file";
    case TraceFormat::kKinetoJson: return "Kineto (PyTorch profiler) JSON";
    case TraceFormat::kTorchProfilerLegacyJson: return "PyTorch profiler JSON of the older format (without Kineto)";
    case TraceFormat::kKinetoRun: return "directory of Kineto traces";
    case TraceFormat::kNsysSqlite: return "Nsight Systems SQLite export";
    case TraceFormat::kRankscopeReport: return "rankscope JSON report";
  }
  return "unknown";
}

Result<TraceFormat> DetectTraceFormat(const fs::path& path) {
  // Before anything opens it: reading a FIFO would wait for a writer forever.
  RS_RETURN_IF_ERROR(CheckRegularFileOrDirectory(path));
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    if (import::HasRankFiles(path)) return TraceFormat::kRankscopeRun;
    if (!import::KinetoFilesIn(path).empty()) return TraceFormat::kKinetoRun;
    return InvalidArgument(fmt::format("{}: neither a run directory (no rank-*.sqlite files) nor a directory of "
                                       "PyTorch profiler traces (*.json, *.json.gz)",
                                       Quoted(path)));
  }
  const std::string head = import::Head(path, 16);
  if (head.empty()) return Corrupt(fmt::format("{}: empty or unreadable file", Quoted(path)));
  if (head.starts_with(std::string_view("SQLite format 3\0", 16))) {
    Result<TraceFormat> format = import::SqliteFormat(path);
    if (!format.ok()) return format.status().WithContext(path.string());
    return format;
  }
  const std::string head_text = import::TextHead(path, import::kJsonSniffBytes);
  const std::string_view text = import::WithoutByteOrderMark(head_text);
  if (import::LooksLikeChromeTrace(text)) {
    return import::LooksLikeTorchProfilerLegacy(text) ? TraceFormat::kTorchProfilerLegacyJson : TraceFormat::kKinetoJson;
  }
  const char first = import::FirstCharacter(text);
  if (first != '{' && first != '[' && import::IsGzip(head)) {
    // A gzip file whose head inflates to nothing readable: say what is wrong with the gzip.
    // Only the head is inflated again: whatever the rest holds, this is not JSON.
    Result<std::string> start = import::ReadMaybeGzip(path, import::kJsonSniffBytes);
    if (!start.ok() && start.status().code() == StatusCode::kCorrupt) return start.status();
  }
  if (first == '{' || first == '[') {
    // Reports are written with "format" first: {"format": "rankscope.analysis", ...
    const size_t format = text.find("\"format\"");
    if (first == '{' && format != std::string::npos && text.find_first_not_of(" \t\r\n{") == format &&
        text.find("\"rankscope.", format) != std::string::npos) {
      return TraceFormat::kRankscopeReport;
    }
    // Only on this slower path is the whole file read: a report whose keys were reordered
    // (e.g. by `jq -S`), or broken JSON, or the wrong JSON.
    Result<std::string> whole = import::ReadMaybeGzip(path);
    if (!whole.ok()) return whole.status();
    const std::string_view json = import::WithoutByteOrderMark(*whole);
    if (first == '[') {
      if (!nlohmann::json::accept(json)) return Corrupt(fmt::format("{}: not a JSON file", Quoted(path)));
    }
    // Only the top level's "format" is kept: every other key's value is dropped as it is
    // parsed, so a large file of other JSON builds no tree.
    const nlohmann::json::parser_callback_t keep_format = [](int depth, nlohmann::json::parse_event_t event,
                                                             nlohmann::json& parsed) {
      return event != nlohmann::json::parse_event_t::key || (depth == 1 && parsed == "format");
    };
    const nlohmann::json parsed =
        first == '[' ? nlohmann::json() : nlohmann::json::parse(json, keep_format, /*allow_exceptions=*/false);
    if (parsed.is_discarded()) return Corrupt(fmt::format("{}: not a JSON file", Quoted(path)));
    if (parsed.is_object()) {
      const auto format_key = parsed.find("format");
      if (format_key != parsed.end() && format_key->is_string() &&
          format_key->get_ref<const std::string&>().starts_with("rankscope.")) {
        return TraceFormat::kRankscopeReport;
      }
    }
    return Unsupported(fmt::format("{}: JSON, but neither a Kineto (PyTorch profiler) trace (an object with "
                                   "\"traceEvents\", or an array of trace events) nor a rankscope report",
                                   Quoted(path)));
  }
  return Unsupported(fmt::format("{}: not a trace rankscope reads (a run directory, a rank file, a Kineto JSON trace "
                                 "or an Nsight Systems SQLite export)",
                                 Quoted(path)));
}

// ---- imports --------------------------------------------------------------------------------

namespace {

// `dir` without "." and ".." parts or a trailing separator, absolute.
fs::path NormalDirectory(const fs::path& dir) {
  fs::path normal = fs::absolute(dir).lexically_normal();
  return normal.has_filename() ? normal : normal.parent_path();
}

// Creates `dir` with its missing parents; returns the outermost directory it created (empty
// when `dir` already existed), so that a failed import can take back exactly those.
Result<fs::path> CreateRunDirectory(const fs::path& dir) {
  fs::path outermost_missing;
  std::error_code ec;
  for (fs::path at = NormalDirectory(dir); at.has_relative_path(); at = at.parent_path()) {
    if (fs::exists(at, ec)) break;
    outermost_missing = at;
  }
  fs::create_directories(dir, ec);
  if (ec) return IoError(fmt::format("{}: cannot create the run directory: {}", Quoted(dir), ec.message()));
  return outermost_missing;
}

// Removes the directories CreateRunDirectory created, innermost first, each only if empty:
// nothing that was there before, or that someone else put there since, goes.
void RemoveCreatedDirectories(const fs::path& dir, const fs::path& outermost_created) {
  if (outermost_created.empty()) return;
  std::error_code ec;
  for (fs::path at = NormalDirectory(dir); at.has_relative_path(); at = at.parent_path()) {
    if (!fs::remove(at, ec)) return;
    if (at == outermost_created) return;
  }
}

// A directory of the import's own inside the run directory, removed with everything in it.
class StagingDirectory {
 public:
  static Result<std::unique_ptr<StagingDirectory>> Create(const fs::path& run_dir) {
    std::string pattern = (run_dir / ".rankscope-import-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      return IoError(fmt::format("{}: cannot create a directory in it: {}", Quoted(run_dir), std::strerror(errno)));
    }
    return std::unique_ptr<StagingDirectory>(new StagingDirectory(pattern));
  }
  ~StagingDirectory() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  StagingDirectory(const StagingDirectory&) = delete;
  StagingDirectory& operator=(const StagingDirectory&) = delete;
  const fs::path& path() const { return path_; }

 private:
  explicit StagingDirectory(fs::path path) : path_(std::move(path)) {}
  fs::path path_;
};

// Imports every file into rank files of a staging directory, then moves them into `run_dir`
// (replacing its rank files with `overwrite`): a failed import leaves the run directory as
// it was, earlier rank files included.
Result<ImportResult> ImportIntoRunDirectory(const std::vector<std::pair<fs::path, TraceFormat>>& files,
                                            const fs::path& run_dir, const ImportOptions& options) {
  if (!options.overwrite && trace::HasRankFiles(run_dir)) {
    return AlreadyExists(fmt::format("{}: already holds rank files (use --force to replace them)", Quoted(run_dir)));
  }
  if (options.overwrite) {
    if (Result<bool> recording = trace::RunIsRecording(run_dir); recording.ok() && *recording) {
      return AlreadyExists(fmt::format("{} is still being recorded into by a running process; --force deletes "
                                       "nothing while that run records: wait for it to end, or choose another "
                                       "directory",
                                       Quoted(run_dir)));
    }
  }
  RS_ASSIGN_OR_RETURN(std::unique_ptr<StagingDirectory> staging, StagingDirectory::Create(run_dir));
  const std::string run_id = options.run_id.empty() ? trace::GenerateRunId() : options.run_id;
  ImportResult result;
  {
    // The reading buffers are freed with the import, however it ends.
    struct Release {
      ~Release() { import::ReleaseReadingBuffers(); }
    } release;
    import::RunSink sink(staging->path(), run_id);
    for (const auto& [file, format] : files) {
      RS_RETURN_IF_ERROR(import::ImportOne(file, format, sink));
      // One input's files at a time: a thousand ranks need no more descriptors than one.
      RS_RETURN_IF_ERROR(sink.CloseOpenRanks());
    }
    RS_RETURN_IF_ERROR(sink.Finish(&result));
  }
  // Rank files go with their -wal/-shm/-journal: a new rank file must not meet an old log.
  if (options.overwrite) RS_RETURN_IF_ERROR(trace::RemoveRankFiles(run_dir).status());
  for (fs::path& file : result.rank_files) {
    const fs::path moved = run_dir / file.filename();
    std::error_code ec;
    fs::rename(file, moved, ec);
    if (ec) return IoError(fmt::format("{}: cannot move it into {}: {}", Quoted(file), Quoted(run_dir), ec.message()));
    file = moved;
  }
  return result;
}

}  // namespace

namespace import {

Result<std::vector<std::pair<fs::path, TraceFormat>>> ForeignTraceFiles(const std::vector<fs::path>& inputs) {
  if (inputs.empty()) return InvalidArgument("no traces to import");
  std::vector<std::pair<fs::path, TraceFormat>> files;
  for (const fs::path& input : inputs) {
    RS_ASSIGN_OR_RETURN(TraceFormat format, DetectTraceFormat(input));
    switch (format) {
      case TraceFormat::kKinetoJson:
      case TraceFormat::kTorchProfilerLegacyJson:
      case TraceFormat::kNsysSqlite: files.emplace_back(input, format); break;
      case TraceFormat::kKinetoRun:
        for (const fs::path& file : import::KinetoFilesIn(input)) files.emplace_back(file, TraceFormat::kKinetoJson);
        break;
      case TraceFormat::kRankscopeRun:
      case TraceFormat::kRankscopeFile:
      case TraceFormat::kRankscopeReport:
        return InvalidArgument(fmt::format("{}: a {}, not another tool's trace: nothing to import",
                                           Quoted(input), TraceFormatName(format)));
    }
  }
  return files;
}

Result<bool> IsOneRankscopeRun(const std::vector<fs::path>& inputs) {
  if (inputs.empty()) return InvalidArgument("no run given");
  std::vector<TraceFormat> formats;
  for (const fs::path& input : inputs) {
    RS_ASSIGN_OR_RETURN(TraceFormat format, DetectTraceFormat(input));
    formats.push_back(format);
  }
  const bool native = formats[0] == TraceFormat::kRankscopeRun || formats[0] == TraceFormat::kRankscopeFile;
  if (inputs.size() == 1 && native) return true;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (formats[i] == TraceFormat::kRankscopeReport) {
      return InvalidArgument(fmt::format("{}: a rankscope JSON report holds figures, not a trace: give the run it "
                                         "came from", Quoted(inputs[i])));
    }
    if (formats[i] == TraceFormat::kRankscopeRun || formats[i] == TraceFormat::kRankscopeFile) {
      return InvalidArgument(fmt::format("{}: a {} given with other inputs: give one run at a time",
                                         Quoted(inputs[i]), TraceFormatName(formats[i])));
    }
  }
  return false;
}

Status ImportOne(const fs::path& file, TraceFormat format, RunSink& sink) {
  return format == TraceFormat::kNsysSqlite ? ImportNsys(file, sink) : ImportKineto(file, sink);
}

}  // namespace import

Result<ImportResult> ImportTraces(const std::vector<fs::path>& inputs, const fs::path& run_dir,
                                  const ImportOptions& options) {
  RS_ASSIGN_OR_RETURN(auto files, import::ForeignTraceFiles(inputs));
  RS_ASSIGN_OR_RETURN(const fs::path created, CreateRunDirectory(run_dir));
  Result<ImportResult> imported = ImportIntoRunDirectory(files, run_dir, options);
  if (!imported.ok()) RemoveCreatedDirectories(run_dir, created);
  return imported;
}

ResolvedRun::ResolvedRun(fs::path path, fs::path temporary, std::vector<std::string> notes, std::string display)
    : path_(std::move(path)), temporary_(std::move(temporary)), notes_(std::move(notes)), display_(std::move(display)) {}

std::string ResolvedRun::Describe(std::string message) const {
  if (temporary_.empty()) return message;
  const std::string from = temporary_.string();
  for (size_t at = message.find(from); at != std::string::npos; at = message.find(from, at + display_.size())) {
    message.replace(at, from.size(), display_);
  }
  return message;
}

ResolvedRun::~ResolvedRun() {
  if (temporary_.empty()) return;
  std::error_code ec;
  fs::remove_all(temporary_, ec);
}

Result<fs::path> ResolvedRun::RankFile(int rank) const {
  std::error_code ec;
  if (!fs::is_directory(path_, ec)) return path_;  // one rank file
  fs::path file = path_ / trace::RankFileName(rank);
  if (!fs::is_regular_file(file, ec)) {
    return NotFound(fmt::format("{}: no rank {}", Describe(path_.string()), rank));
  }
  return file;
}

Result<std::unique_ptr<ResolvedRun>> ResolveRun(const std::vector<fs::path>& inputs) {
  RS_ASSIGN_OR_RETURN(const bool native, import::IsOneRankscopeRun(inputs));
  if (native) {
    return std::make_unique<ResolvedRun>(inputs[0], fs::path(), std::vector<std::string>(), inputs[0].string());
  }
  // A private directory for the imported run, removed with the ResolvedRun.
  std::error_code ec;
  const fs::path base = fs::temp_directory_path(ec);
  if (ec) return IoError(fmt::format("no temporary directory: {}", ec.message()));
  std::random_device random;
  fs::path temporary;
  for (int attempt = 0; attempt < 16 && temporary.empty(); ++attempt) {
    const fs::path candidate = base / fmt::format("rankscope-import-{:08x}", random());
    if (fs::create_directory(candidate, ec)) temporary = candidate;
  }
  if (temporary.empty()) return IoError(fmt::format("cannot create a directory in {}: {}", base.string(), ec.message()));
  Result<ImportResult> imported = ImportTraces(inputs, temporary);
  if (!imported.ok()) {
    fs::remove_all(temporary, ec);
    return imported.status();
  }
  std::string display;
  for (const fs::path& input : inputs) display += (display.empty() ? "" : ", ") + input.string();
  return std::make_unique<ResolvedRun>(temporary, temporary, std::move(imported->notes), std::move(display));
}

}  // namespace rankscope::interop
