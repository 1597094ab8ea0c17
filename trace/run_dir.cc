#include "trace/run_dir.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <random>

#include "base/text.h"
#include "trace/reader.h"
#include "trace/recording_lock.h"

namespace rankscope::trace {
namespace fs = std::filesystem;

namespace {
constexpr std::string_view kPrefix = "rank-";
constexpr std::string_view kUnknownPrefix = "rank-unknown-";
constexpr std::string_view kSuffix = ".sqlite";
// "-reserve": the room a live writer keeps for saying why it stopped (trace/writer.cc).
constexpr std::array<std::string_view, 4> kCompanionSuffixes = {"-wal", "-shm", "-journal", "-reserve"};

// Decimal digits without padding: "0", "17", never "007".
bool CanonicalNumber(std::string_view s) {
  return !s.empty() && (s.size() == 1 || s[0] != '0') &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// "1-3, 7, 9-10": consecutive ranks as ranges, so the line stays short.
std::string RankRanges(const std::vector<int>& ranks) {
  std::string text;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    text += fmt::format("{}{}", text.empty() ? "" : ", ", ranks[i]);
    if (j > i) text += fmt::format("-{}", ranks[j]);
    i = j + 1;
  }
  return text;
}
}  // namespace

std::string RankFileName(int rank) { return fmt::format("rank-{}.sqlite", rank); }
std::string UnknownRankFileName(int64_t pid) { return fmt::format("rank-unknown-{}.sqlite", pid); }

ParsedRankFileName ParseRankFileName(std::string_view name) {
  if (!name.starts_with(kPrefix) || !name.ends_with(kSuffix)) return {};
  if (name.starts_with(kUnknownPrefix)) {
    std::string_view pid = name.substr(kUnknownPrefix.size(), name.size() - kUnknownPrefix.size() - kSuffix.size());
    return CanonicalNumber(pid) ? ParsedRankFileName{true, std::nullopt} : ParsedRankFileName{};
  }
  std::string_view digits = name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size());
  int rank = 0;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), rank);
  if (!CanonicalNumber(digits) || ec != std::errc() || ptr != digits.data() + digits.size()) return {};
  return {true, rank};
}

std::vector<fs::path> RankFileCompanions(const fs::path& rank_file) {
  std::vector<fs::path> companions;
  for (std::string_view suffix : kCompanionSuffixes) {
    fs::path companion = rank_file;
    companion += suffix;
    companions.push_back(std::move(companion));
  }
  return companions;
}

bool IsRankFileOrCompanion(std::string_view file_name) {
  for (std::string_view suffix : kCompanionSuffixes) {
    if (file_name.ends_with(suffix)) {
      file_name.remove_suffix(suffix.size());
      break;
    }
  }
  return ParseRankFileName(file_name).is_rank_file;
}

Result<std::vector<fs::path>> ListRankFiles(const fs::path& dir) {
  std::vector<fs::path> files;
  std::error_code ec;
  // increment(ec) rather than a range-for: the library reports errors, never throws.
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (ParseRankFileName(it->path().filename().string()).is_rank_file) files.push_back(it->path());
  }
  if (ec) return IoError(fmt::format("{}: cannot list the directory: {}", Quoted(dir), ec.message()));
  std::sort(files.begin(), files.end());
  return files;
}

bool HasRankFiles(const fs::path& dir) {
  const Result<std::vector<fs::path>> files = ListRankFiles(dir);
  return files.ok() && !files->empty();
}

Result<std::vector<fs::path>> RemoveRankFiles(const fs::path& dir) {
  std::vector<fs::path> doomed;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (!IsRankFileOrCompanion(it->path().filename().string())) continue;
    // symlink_status: a link named like a rank file is removed as a link, whatever it names.
    std::error_code type_ec;
    if (it->symlink_status(type_ec).type() == fs::file_type::directory) {
      return AlreadyExists(fmt::format("{} is a directory, not a rank file; only files are removed: remove it yourself",
                                       Quoted(it->path())));
    }
    doomed.push_back(it->path());
  }
  if (ec) return IoError(fmt::format("{}: cannot list the directory: {}", Quoted(dir), ec.message()));
  std::sort(doomed.begin(), doomed.end());
  std::vector<fs::path> removed;
  for (const fs::path& file : doomed) {
    fs::remove(file, ec);
    if (ec) {
      return IoError(fmt::format("cannot remove {}: {}; {} of {} rank files and companions removed before it",
                                 Quoted(file), ec.message(), removed.size(), doomed.size()));
    }
    removed.push_back(file);
  }
  return removed;
}

std::string GenerateRunId() {
  std::random_device device;  // /dev/urandom on Linux
  return fmt::format("{:08x}{:08x}{:08x}{:08x}", device(), device(), device(), device());
}

bool IsValidRunId(std::string_view run_id) {
  return !run_id.empty() && run_id.size() <= 128 &&
         std::all_of(run_id.begin(), run_id.end(), [](char c) {
           return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == '-';
         });
}

std::vector<std::string> Run::Warnings() const {
  std::vector<std::string> lines;
  if (!missing_ranks.empty()) {
    lines.push_back(fmt::format("{}: missing rank files for rank(s) {} of world size {}",
                                directory.string(), RankRanges(missing_ranks), world_size.value_or(0)));
  }
  if (!extra_ranks.empty()) {
    lines.push_back(fmt::format("{}: rank file(s) for rank(s) {} beyond world size {}",
                                directory.string(), RankRanges(extra_ranks), world_size.value_or(0)));
  }
  for (const std::string& name : crashed) {
    lines.push_back(recording ? fmt::format("{}: {} is still being recorded: read as it was committed when "
                                            "opened (a live snapshot)",
                                            directory.string(), name)
                              : fmt::format("{}: {} was not closed cleanly (the process died?); it holds "
                                            "every event committed before that",
                                            directory.string(), name));
  }
  return lines;
}

Result<Run> OpenRun(const fs::path& path) {
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (!fs::exists(status)) return NotFound(fmt::format("{}: no such run directory or rank file", path.string()));

  std::vector<fs::path> files;
  Run run;
  if (fs::is_directory(status)) {
    run.directory = path;
    RS_ASSIGN_OR_RETURN(files, ListRankFiles(path));
    if (files.empty()) {
      return NotFound(fmt::format("{}: no rank files (rank-<R>.sqlite) in this directory", path.string()));
    }
  } else {
    run.directory = path.has_parent_path() ? path.parent_path() : fs::path(".");
    files.push_back(path);
  }
  std::sort(files.begin(), files.end());

  std::vector<RunFile> opened;
  for (const fs::path& file : files) {
    RS_ASSIGN_OR_RETURN(std::unique_ptr<TraceReader> reader, TraceReader::Open(file));
    RunFile run_file{file, reader->meta()};
    const RankMeta& meta = run_file.meta;
    const ParsedRankFileName parsed = ParseRankFileName(file.filename().string());
    if (parsed.is_rank_file && parsed.rank != meta.rank) {
      return Inconsistent(fmt::format("{}: the file name says rank {} but the file records rank {}",
                                      file.string(), parsed.rank ? std::to_string(*parsed.rank) : "unknown",
                                      meta.rank ? std::to_string(*meta.rank) : "unknown"));
    }
    opened.push_back(std::move(run_file));
  }
  RS_ASSIGN_OR_RETURN(run, RunOfFiles(run.directory, std::move(opened)));
  // Asked after the files were opened: a run that ended in between reads as ended, its files
  // as they were left. A lock that cannot be probed says nothing either way.
  if (Result<bool> recording = RunIsRecording(run.directory); recording.ok()) run.recording = *recording;
  return run;
}

Result<Run> RunOfFiles(const fs::path& directory, std::vector<RunFile> files) {
  Run run;
  run.directory = directory;
  std::string first_run_id, first_name;
  for (RunFile& run_file : files) {
    const fs::path& file = run_file.path;
    const RankMeta& meta = run_file.meta;
    const std::string name = file.filename().string();
    if (first_name.empty()) {
      first_run_id = meta.run_id;
      first_name = name;
    } else if (meta.run_id != first_run_id) {
      return Inconsistent(fmt::format(
          "{}: belongs to run {}, but {} belongs to run {}: rank files of two different runs",
          file.string(), Printable(meta.run_id), first_name, Printable(first_run_id)));
    }
    if (meta.world_size) {
      if (run.world_size && *run.world_size != *meta.world_size) {
        return Inconsistent(fmt::format("{}: records world size {}, but other rank files record {}",
                                        file.string(), *meta.world_size, *run.world_size));
      }
      run.world_size = meta.world_size;
    }
    if (!meta.closed_cleanly) run.crashed.push_back(name);
    auto& list = meta.rank ? run.ranks : run.unranked;
    list.push_back(std::move(run_file));
  }
  run.run_id = first_run_id;
  std::sort(run.ranks.begin(), run.ranks.end(),
            [](const RunFile& a, const RunFile& b) { return *a.meta.rank < *b.meta.rank; });
  std::sort(run.unranked.begin(), run.unranked.end(),
            [](const RunFile& a, const RunFile& b) { return a.meta.pid < b.meta.pid; });
  if (run.world_size) {
    size_t next = 0;
    for (int rank = 0; rank < *run.world_size; ++rank) {
      while (next < run.ranks.size() && *run.ranks[next].meta.rank < rank) ++next;
      if (next == run.ranks.size() || *run.ranks[next].meta.rank != rank) run.missing_ranks.push_back(rank);
    }
    for (const RunFile& f : run.ranks) {
      if (*f.meta.rank >= *run.world_size) run.extra_ranks.push_back(*f.meta.rank);
    }
  }
  return run;
}

}  // namespace rankscope::trace
