// The schema is defined once in trace/schema.cc; this checks the DDL applies and that
// docs/schema.md documents exactly the same tables and columns, in order.
#include "trace/schema.h"

#include <sqlite3.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

namespace rankscope::trace {
namespace {

TEST(Schema, DdlCreatesEveryTableAndIndex) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(":memory:", &db), SQLITE_OK);
  char* error = nullptr;
  ASSERT_EQ(sqlite3_exec(db, SchemaDdl().c_str(), nullptr, nullptr, &error), SQLITE_OK) << error;
  ASSERT_EQ(sqlite3_exec(db, IndexDdl().c_str(), nullptr, nullptr, &error), SQLITE_OK) << error;
  ASSERT_EQ(sqlite3_exec(db, IndexDdl().c_str(), nullptr, nullptr, &error), SQLITE_OK) << error;
  for (const TableDef& table : SchemaTables()) {
    const std::string sql = "SELECT " + table.DataColumnList() + " FROM " + std::string(table.name);
    sqlite3_stmt* stmt = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr), SQLITE_OK) << sql;
    sqlite3_finalize(stmt);
  }
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT count(*) FROM sqlite_schema WHERE type='index' AND name LIKE '%_lane_time'",
                               -1, &stmt, nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(stmt, 0), 9);  // 8 event tables + counter_samples
  sqlite3_finalize(stmt);
  sqlite3_close(db);
}

TEST(Schema, EnumValuesAreUniquePerType) {
  std::set<std::pair<std::string_view, int>> values;
  std::set<std::pair<std::string_view, std::string_view>> names;
  for (const EnumValue& e : EnumValues()) {
    EXPECT_TRUE(values.emplace(e.type, e.value).second) << e.type << " " << e.value;
    EXPECT_TRUE(names.emplace(e.type, e.name).second) << e.type << " " << e.name;
  }
}

TEST(Schema, DocsDescribeEveryColumn) {
  std::ifstream in(std::string(RANKSCOPE_SOURCE_DIR) + "/docs/schema.md");
  ASSERT_TRUE(in) << "docs/schema.md is missing";
  // Sections start with "### `table`"; their rows with "| `column` | TYPE |".
  std::map<std::string, std::vector<std::string>> documented;
  std::vector<std::string> order;
  std::string line, current;
  auto quoted = [](const std::string& text, size_t from) -> std::string {
    const size_t open = text.find('`', from);
    const size_t close = open == std::string::npos ? open : text.find('`', open + 1);
    return close == std::string::npos ? "" : text.substr(open + 1, close - open - 1);
  };
  while (std::getline(in, line)) {
    if (line.rfind("### `", 0) == 0) {
      current = quoted(line, 0);
      order.push_back(current);
    } else if (!current.empty() && line.rfind("| `", 0) == 0) {
      for (const char* type : {"| INTEGER |", "| TEXT |", "| REAL |"}) {
        if (line.find(type) != std::string::npos) {
          documented[current].push_back(quoted(line, 0));
          break;
        }
      }
    } else if (line.rfind("## ", 0) == 0) {
      current.clear();
    }
  }
  std::vector<std::string> expected_order;
  for (const TableDef& table : SchemaTables()) {
    expected_order.emplace_back(table.name);
    std::vector<std::string> columns;
    for (const ColumnDef& c : table.columns) columns.emplace_back(c.name);
    EXPECT_EQ(documented[std::string(table.name)], columns) << "table " << table.name;
  }
  EXPECT_EQ(order, expected_order);
}

}  // namespace
}  // namespace rankscope::trace
