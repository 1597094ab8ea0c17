// Reading a JSON trace in pieces (interop/json_pieces.h): the skeleton keeps every top-level
// field but the event array, the chunks hold every element exactly once, whatever the read
// size, chunk size, strings, escapes and nesting; damage gets one line naming the file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "interop/import_internal.h"
#include "interop/inflate.h"
#include "interop/json_pieces.h"
#include "tests/rank_file_dump.h"
#include "tests/shared_data.h"

namespace rankscope::interop::import {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

fs::path WriteFile(const std::string& name, const std::string& text) {
  const fs::path path = fs::temp_directory_path() / ("rankscope-json-pieces-" + name);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// Events whose strings hold every character the boundary scan must not take for structure.
const char* const kTrace = R"({
  "schemaVersion": 1,
  "deviceProperties": [{"name": "GPU, \"fast\" [0]", "traceEvents": [1, 2]}],
  "distributedInfo": {"rank": 3, "world_size": 8},
  "traceName": "traceEvents",
  "traceEvents": [
    {"ph": "X", "name": "a,b]c}d", "args": {"x": [1, {"y": "]"}], "q": "\\\","}},
    {"ph": "X", "name": "back\\\\", "ts": 1.5},
    [1, 2, [3]],
    "a string, with ] and [",
    {"ph": "i", "name": "\u00e9\\\\\"", "args": {}}
  ],
  "displayTimeUnit": "ms",
  "baseTimeNanoseconds": 1700000000000000000
}
)";

Result<TopLevelScan> Scan(const fs::path& path, size_t piece) {
  RS_ASSIGN_OR_RETURN(std::unique_ptr<FileBytes> bytes, FileBytes::Open(path, 1 << 30));
  return ScanTopLevel(*bytes, "traceEvents", "'trace.json'", piece);
}

// Every element the chunks hand out, parsed.
Result<std::vector<Json>> Elements(const fs::path& path, uint64_t begin, size_t chunk, size_t piece) {
  RS_ASSIGN_OR_RETURN(std::unique_ptr<FileBytes> bytes, FileBytes::Open(path, 1 << 30));
  ArrayChunks chunks(*bytes, begin, chunk, "'trace.json'", piece);
  std::vector<Json> elements;
  for (;;) {
    RS_ASSIGN_OR_RETURN(std::string_view text, chunks.Next(64));
    if (text.empty()) break;
    const Json array = Json::parse(text);
    EXPECT_TRUE(array.is_array()) << text;
    for (const Json& element : array) elements.push_back(element);
  }
  return elements;
}

TEST(JsonPiecesTest, SkeletonKeepsEverythingButTheEventArray) {
  const fs::path path = WriteFile("skeleton.json", kTrace);
  const Json whole = Json::parse(kTrace);
  for (size_t piece : {size_t{1}, size_t{2}, size_t{3}, size_t{7}, size_t{64}, size_t{1} << 20}) {
    Result<TopLevelScan> scan = Scan(path, piece);
    ASSERT_TRUE(scan.ok()) << scan.status().message();
    EXPECT_FALSE(scan->bare_array);
    EXPECT_TRUE(scan->found);
    Json expected = whole;
    expected["traceEvents"] = Json::array();
    EXPECT_EQ(Json::parse(scan->skeleton), expected) << "read " << piece << " bytes at a time";
    EXPECT_EQ(std::string(kTrace).substr(scan->array_begin - 1, 1), "[");
    EXPECT_GE(scan->skeleton.capacity(), scan->skeleton.size() + 64);
  }
  fs::remove(path);
}

TEST(JsonPiecesTest, ChunksHoldEveryElementOnceWhateverTheSizes) {
  const fs::path path = WriteFile("chunks.json", kTrace);
  const Json whole = Json::parse(kTrace);
  Result<TopLevelScan> scan = Scan(path, 1 << 20);
  ASSERT_TRUE(scan.ok()) << scan.status().message();
  for (size_t chunk : {size_t{1}, size_t{10}, size_t{40}, size_t{1} << 20}) {
    for (size_t piece : {size_t{1}, size_t{3}, size_t{5}, size_t{1} << 20}) {
      Result<std::vector<Json>> elements = Elements(path, scan->array_begin, chunk, piece);
      ASSERT_TRUE(elements.ok()) << elements.status().message();
      EXPECT_EQ(Json(*elements), whole["traceEvents"]) << "chunks of " << chunk << ", read " << piece;
    }
  }
  fs::remove(path);
}

TEST(JsonPiecesTest, ABareArrayIsTheEventArray) {
  const fs::path path = WriteFile("bare.json", "\xEF\xBB\xBF  [{\"a\": \"]\"}, {\"b\": [1]}]\n");
  Result<TopLevelScan> scan = Scan(path, 2);
  ASSERT_TRUE(scan.ok()) << scan.status().message();
  EXPECT_TRUE(scan->bare_array);
  Result<std::vector<Json>> elements = Elements(path, scan->array_begin, 4, 3);
  ASSERT_TRUE(elements.ok()) << elements.status().message();
  EXPECT_EQ(Json(*elements), Json::parse(R"([{"a": "]"}, {"b": [1]}])"));
  fs::remove(path);
}

TEST(JsonPiecesTest, AnEmptyEventArrayGivesNoElements) {
  const fs::path path = WriteFile("empty-array.json", R"({"traceEvents": [ ], "x": 1})");
  Result<TopLevelScan> scan = Scan(path, 3);
  ASSERT_TRUE(scan.ok()) << scan.status().message();
  Result<std::vector<Json>> elements = Elements(path, scan->array_begin, 8, 3);
  ASSERT_TRUE(elements.ok()) << elements.status().message();
  EXPECT_TRUE(elements->empty());
  fs::remove(path);
}

TEST(JsonPiecesTest, WithoutTheKeyNothingIsFound) {
  const fs::path path = WriteFile("no-key.json", R"({"other": {"traceEvents": []}, "x": "traceEvents"})");
  Result<TopLevelScan> scan = Scan(path, 4);
  ASSERT_TRUE(scan.ok()) << scan.status().message();
  EXPECT_FALSE(scan->found);
  fs::remove(path);
}

TEST(JsonPiecesTest, DamageGetsOneLineNamingTheFile) {
  struct Bad {
    const char* name;
    const char* text;
    const char* says;
  };
  const Bad kBad[] = {
      {"empty", "  \n", "empty file"},
      {"number", "42", "not a JSON object or array"},
      {"cut-in-object", R"({"traceEvents": [], "x": {"y": 1)", "ends inside"},
      {"cut-in-string", R"({"traceEvents": [], "x": "abc)", "ends inside"},
      {"more-after", R"({"traceEvents": []} {"again": 1})", "more after the top-level value"},
  };
  for (const Bad& bad : kBad) {
    const fs::path path = WriteFile(bad.name, bad.text);
    Result<TopLevelScan> scan = Scan(path, 2);
    ASSERT_FALSE(scan.ok()) << bad.name;
    EXPECT_NE(scan.status().message().find("'trace.json'"), std::string::npos) << scan.status().message();
    EXPECT_NE(scan.status().message().find(bad.says), std::string::npos) << scan.status().message();
    EXPECT_EQ(scan.status().message().find('\n'), std::string::npos);
    fs::remove(path);
  }
  // Cut inside the event array: the scan of the top level says so first; the chunks too.
  const fs::path cut = WriteFile("cut-in-array.json", R"({"traceEvents": [{"a": 1}, {"b": )");
  Result<std::vector<Json>> elements = Elements(cut, 17, 4, 3);
  ASSERT_FALSE(elements.ok());
  EXPECT_NE(elements.status().message().find("ends inside traceEvents"), std::string::npos)
      << elements.status().message();
  fs::remove(cut);
}

// A Kineto trace read in pieces (as one larger than KinetoReadLimits::whole_file_bytes is)
// gives the rank file that reading it whole gives, row for row: chunks of 16 KiB, so every
// trace here is read in many.
Result<std::string> ImportDump(const fs::path& input, const fs::path& run, KinetoReadLimits limits) {
  fs::remove_all(run);
  fs::create_directories(run);
  RunSink sink(run, "pieces-test-run");
  RS_RETURN_IF_ERROR(ImportKineto(input, sink, limits));
  ImportResult result;
  RS_RETURN_IF_ERROR(sink.Finish(&result));
  return testing::DumpRankFiles(result.rank_files, result.notes, {{run, "<run>"}});
}

TEST(KinetoInPiecesTest, ReadInPiecesEveryTraceImportsAsReadWhole) {
  const std::vector<fs::path> inputs = {
      testing::SharedDataDir() / "kineto/hta_trace_filter/sampled_rank-0.json.gz",
      testing::SharedDataDir() / "kineto/hta_trace_diff/control_rank3.json.gz",
      testing::SharedDataDir() / "kineto/tb_plugin_distributed/test_distributed_gloo_gpu_worker0.json",
      fs::path(RANKSCOPE_SOURCE_DIR) / "tests/interop/data/torch_legacy/cpu_single.json",
  };
  const fs::path dir = fs::temp_directory_path() / "rankscope-kineto-pieces";
  for (const fs::path& input : inputs) {
    RANKSCOPE_REQUIRE_SHARED_DATA(input);
    Result<std::string> whole = ImportDump(input, dir / "whole", KinetoReadLimits{});
    ASSERT_TRUE(whole.ok()) << whole.status().message();
    Result<std::string> pieces = ImportDump(input, dir / "pieces", KinetoReadLimits{0, 16 << 10});
    ASSERT_TRUE(pieces.ok()) << pieces.status().message();
    EXPECT_EQ(*pieces, *whole) << input;
  }
  fs::remove_all(dir);
}

// Read whole, a Kineto trace in Kineto's own layout (distributedInfo before traceEvents,
// baseTimeNanoseconds before or in the simple pairs that end the file) is read in one pass;
// any other layout is read top level first. Both give what the pieces' reader gives, which
// always reads the top level first.
TEST(KinetoInPiecesTest, EveryTopLevelLayoutGivesTheSameRank) {
  const std::string events =
      R"("traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10.5, "dur": 2,)"
      R"( "args": {"device": 0, "stream": 7, "correlation": 1}}])";
  const std::string info = R"("distributedInfo": {"rank": 1, "world_size": 2})";
  const std::vector<std::pair<const char*, std::string>> layouts = {
      {"kineto", "{" + info + ", " + events + R"(, "traceName": "a\"b\\", "baseTimeNanoseconds": 1000})"},
      {"base-first", "{" + info + R"(, "baseTimeNanoseconds": 2000, )" + events + "}"},
      {"base-twice", "{" + info + R"(, "baseTimeNanoseconds": 2000, )" + events + R"(, "baseTimeNanoseconds": 3000})"},
      {"base-before-a-composite", "{" + info + ", " + events + R"(, "baseTimeNanoseconds": 4000, "x": [1]})"},
      {"info-after", "{" + events + ", " + info + R"(, "baseTimeNanoseconds": 5000})"},
      {"no-base", "{" + info + ", " + events + "}"},
      {"damaged-base-in-tail", "{" + info + R"(, "baseTimeNanoseconds": 6000, )" + events +
                                   R"(, "baseTimeNanoseconds": "soon"})"},
  };
  const fs::path dir = fs::temp_directory_path() / "rankscope-kineto-layouts";
  fs::create_directories(dir);
  for (const auto& [name, text] : layouts) {
    const fs::path file = dir / (std::string(name) + ".json");
    std::ofstream(file) << text;
    Result<std::string> whole = ImportDump(file, dir / "whole", KinetoReadLimits{});
    Result<std::string> pieces = ImportDump(file, dir / "pieces", KinetoReadLimits{0, 1024});
    ASSERT_EQ(whole.ok(), pieces.ok()) << name << ": " << whole.status().message() << " / "
                                       << pieces.status().message();
    if (whole.ok()) {
      EXPECT_EQ(*whole, *pieces) << name;
    } else {
      EXPECT_EQ(whole.status().message(), pieces.status().message()) << name;
    }
  }
  fs::remove_all(dir);
}

TEST(KinetoInPiecesTest, DamagedTracesFailInPiecesToo) {
  const fs::path data = fs::path(RANKSCOPE_SOURCE_DIR) / "tests/interop/data/kineto";
  const fs::path dir = fs::temp_directory_path() / "rankscope-kineto-pieces-bad";
  for (const char* name : {"malformed.json", "no_trace_events.json", "not_object.json", "truncated.json.gz",
                           "truncated_header.json.gz"}) {
    Result<std::string> whole = ImportDump(data / name, dir / "whole", KinetoReadLimits{});
    Result<std::string> pieces = ImportDump(data / name, dir / "pieces", KinetoReadLimits{0, 1024});
    ASSERT_FALSE(whole.ok()) << name;
    ASSERT_FALSE(pieces.ok()) << name;
    EXPECT_NE(pieces.status().message().find(name), std::string::npos) << pieces.status().message();
    EXPECT_EQ(pieces.status().message().find('\n'), std::string::npos) << pieces.status().message();
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace rankscope::interop::import
