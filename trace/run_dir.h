// A run directory holds one rank file per process of a run: `rank-<R>.sqlite`, or
// `rank-unknown-<pid>.sqlite` for processes without a rank (e.g. data-loader workers).
// OpenRun checks that the files belong together and reports what is missing.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "trace/rank_meta.h"

namespace rankscope::trace {

std::string RankFileName(int rank);
std::string UnknownRankFileName(int64_t pid);

struct ParsedRankFileName {
  bool is_rank_file = false;
  std::optional<int> rank;  // nullopt for rank-unknown files
};
// Classifies a file name; other files in a run directory are ignored.
ParsedRankFileName ParseRankFileName(std::string_view file_name);

// ---- the rank files of a directory -------------------------------------------------------
// Every command that finds, replaces or deletes rank files goes through these, so they all
// agree on what a rank file is. Only `dir` itself is looked at, never its subdirectories.

// The files SQLite may keep next to a rank file: its write-ahead log (-wal), the log's
// index (-shm) and a rollback journal (-journal).
std::vector<std::filesystem::path> RankFileCompanions(const std::filesystem::path& rank_file);
// True for a rank file's name and for the name of one of its companions.
bool IsRankFileOrCompanion(std::string_view file_name);

// The rank files in `dir`, sorted by path. Errors: a directory that cannot be listed.
Result<std::vector<std::filesystem::path>> ListRankFiles(const std::filesystem::path& dir);
// Whether `dir` holds a rank file; false for a path that is no readable directory.
bool HasRankFiles(const std::filesystem::path& dir);

// Removes the rank files of `dir` with their companions, and companions left without their
// rank file too (an old journal next to a new rank file would be rolled into it). Other
// entries are kept. Everything is checked before the first removal: an entry named like a
// rank file or companion that is a directory, or a directory that cannot be listed, is an
// error and removes nothing. Returns the removed paths, sorted.
Result<std::vector<std::filesystem::path>> RemoveRankFiles(const std::filesystem::path& dir);

// A fresh random run id (32 hex digits).
std::string GenerateRunId();
// 1 to 128 characters of letters, digits, '.', '_' and '-'.
bool IsValidRunId(std::string_view run_id);

struct RunFile {
  std::filesystem::path path;
  RankMeta meta;
};

struct Run {
  std::filesystem::path directory;
  std::string run_id;
  std::optional<int> world_size;   // agreed by every rank file that states it
  std::vector<RunFile> ranks;      // rank files, sorted by rank
  std::vector<RunFile> unranked;   // rank-unknown files, sorted by pid
  std::vector<int> missing_ranks;  // ranks below world_size with no file
  std::vector<int> extra_ranks;    // ranks at or above world_size
  std::vector<std::string> crashed;  // file names whose writer never closed them
  // A process still records into the directory (recording_lock.h): the unclosed files are
  // live, read as snapshots of what they had committed when they were opened.
  bool recording = false;

  bool complete() const { return missing_ranks.empty() && extra_ranks.empty(); }
  // One line per problem worth telling a user (missing/extra ranks, unclosed files).
  std::vector<std::string> Warnings() const;
};

// Opens a run directory, or a single rank file as a run of one file. Every rank file is
// opened and validated. Errors (one line, naming the file): a missing or empty directory,
// an unreadable or invalid rank file, files of different runs, a file whose name and
// recorded rank disagree, and disagreeing world sizes. Missing and extra ranks are not
// errors: they are listed in the Run.
Result<Run> OpenRun(const std::filesystem::path& path);

// What OpenRun makes of the files it opened (not their names): one run id, one world size,
// missing and extra ranks, unclosed files. Also for ranks read from elsewhere (another
// tool's traces analyzed without rank files), whose `path` is the input that held them.
Result<Run> RunOfFiles(const std::filesystem::path& directory, std::vector<RunFile> files);

}  // namespace rankscope::trace
