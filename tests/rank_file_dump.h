// A rank file as canonical text, for golden tests of whatever writes rank files (the
// importers): everything a reader sees through trace::TraceReader's public API, in an order
// that does not depend on the order rows were written in.
//
// Layout: the meta rows sorted by key; the string table sorted by text; the lanes by id;
// the drops; then every event table, one line per event, sorted by (lane, start, end,
// name). Names, domains and args are printed as text, not string ids, and enumerations by
// the names of the file's schema (trace::EnumValues). Values that differ from one run of
// the test to the next are masked, all in one place: MaskedMetaValue in rank_file_dump.cc.
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace rankscope::testing {

// One rank file. Errors: what TraceReader::Open and LoadAll refuse.
Result<std::string> DumpRankFile(const std::filesystem::path& file);

// Several rank files (an import's, in rank order), each under a "=== <file name>" line,
// after the given notes (an import's, one line each); the whole text then goes through
// WithoutPaths.
Result<std::string> DumpRankFiles(const std::vector<std::filesystem::path>& files,
                                  const std::vector<std::string>& notes,
                                  const std::vector<std::pair<std::filesystem::path, std::string>>& placeholders);

// `text` with every occurrence of each path replaced by its placeholder ("<input>"): how a
// test keeps its temporary directories out of a golden file. Longer paths are replaced
// first, so a folder inside another gets its own placeholder.
std::string WithoutPaths(std::string text,
                         const std::vector<std::pair<std::filesystem::path, std::string>>& placeholders);

}  // namespace rankscope::testing
