// Helpers of the importer and exporter tests: loading what an import wrote, and its notes.
#pragma once

#include <algorithm>
#include <filesystem>
#include <string>

#include "interop/interop.h"
#include "tests/rank_file_writer.h"

namespace rankscope::interop::testing {

inline trace::RankTrace Load(const std::filesystem::path& rank_file) {
  return rankscope::testing::LoadRankTraceFile(rank_file);
}

inline bool HasNote(const ImportResult& result, const std::string& text) {
  return std::any_of(result.notes.begin(), result.notes.end(),
                     [&](const std::string& note) { return note.find(text) != std::string::npos; });
}

// Every note, a line each: what a failed expectation shows.
inline std::string AllNotes(const ImportResult& result) {
  std::string all;
  for (const std::string& note : result.notes) all += note + "\n";
  return all;
}

}  // namespace rankscope::interop::testing
