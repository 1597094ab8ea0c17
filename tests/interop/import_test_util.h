// Helpers of the importer and exporter tests: loading what an import wrote, and its notes.
#pragma once

#include <zlib.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "interop/interop.h"
#include "tests/rank_file_writer.h"

namespace rankscope::interop::testing {

// `text` as a gzip file (zlib's deflate with the gzip wrapper).
inline std::string Gzip(const std::string& text, int level = Z_BEST_COMPRESSION) {
  z_stream zs{};
  EXPECT_EQ(deflateInit2(&zs, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&zs, static_cast<uLong>(text.size())), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  zs.avail_in = static_cast<uInt>(text.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

inline void WriteText(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  ASSERT_TRUE(out.good()) << path;
}

// ImportTraces that must succeed; an empty result (and a failure) when it does not.
inline ImportResult ImportOk(const std::vector<std::filesystem::path>& inputs, const std::filesystem::path& run) {
  Result<ImportResult> imported = ImportTraces(inputs, run);
  EXPECT_TRUE(imported.ok()) << imported.status().message();
  return imported.ok() ? std::move(imported).value() : ImportResult{};
}

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
