// The schema is defined once in trace/schema.cc; this checks the DDL applies, what each
// version has, and that docs/schema.md documents exactly the same tables, columns and
// enumeration values.
#include "trace/schema.h"

#include <fmt/format.h>
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
  EXPECT_EQ(sqlite3_column_int(stmt, 0), 11);  // 10 event tables + counter_samples
  sqlite3_finalize(stmt);
  sqlite3_close(db);
}

TEST(Schema, Version2AddsExternalIdAndTwoTablesVersion3TheInFlightState) {
  EXPECT_EQ(kSchemaVersion, 3);
  std::vector<std::string> added;  // "table" or "table.column", with the version that added it
  for (const TableDef& table : SchemaTables()) {
    if (table.since != 1) added.push_back(fmt::format("{} {}", table.name, table.since));
    for (const ColumnDef& column : table.columns) {
      if (column.since != 1) added.push_back(fmt::format("{}.{} {}", table.name, column.name, column.since));
    }
  }
  EXPECT_EQ(added, (std::vector<std::string>{"api_calls.external_id 2", "collective_parts 2", "overheads 2",
                                             "flight_collectives 3", "open_ranges 3"}));
  for (std::string_view name : {"flight_collectives", "open_ranges"}) {
    const TableDef* table = FindTable(name);
    ASSERT_NE(table, nullptr) << name;
    EXPECT_FALSE(table->is_event_table) << name;
    EXPECT_TRUE(table->lane_time_index.empty()) << name;
    EXPECT_FALSE(table->ExistsIn(2)) << name;
  }
  for (std::string_view name : {"collective_parts", "overheads"}) {
    const TableDef* table = FindTable(name);
    ASSERT_NE(table, nullptr) << name;
    EXPECT_TRUE(table->is_event_table) << name;
    EXPECT_EQ(table->lane_time_index, "lane, start_ns") << name;
    EXPECT_FALSE(table->ExistsIn(1)) << name;
    EXPECT_TRUE(table->ExistsIn(2)) << name;
  }
  EXPECT_TRUE(FindTable("api_calls")->ExistsIn(1));
}

TEST(Schema, SelectListPutsZeroWhereAnOlderVersionLacksAColumn) {
  const TableDef* api_calls = FindTable("api_calls");
  ASSERT_NE(api_calls, nullptr);
  EXPECT_EQ(api_calls->SelectList(2), api_calls->DataColumnList());
  EXPECT_EQ(api_calls->SelectList(1),
            "lane, start_ns, end_ns, name, correlation_id, domain, callback_id, return_code, 0");
  EXPECT_EQ(api_calls->DataColumnList(),
            "lane, start_ns, end_ns, name, correlation_id, domain, callback_id, return_code, external_id");
  // Tables of version 1 read the same in both versions.
  for (const TableDef& table : SchemaTables()) {
    if (table.name == "api_calls" || !table.ExistsIn(1)) continue;
    EXPECT_EQ(table.SelectList(1), table.DataColumnList()) << table.name;
  }
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

// The "Enumerations" section lists each type as one bullet, "- `type` (...): 0 `name`, ...",
// possibly wrapped over several lines.
TEST(Schema, DocsNameEveryEnumValue) {
  std::ifstream in(std::string(RANKSCOPE_SOURCE_DIR) + "/docs/schema.md");
  ASSERT_TRUE(in) << "docs/schema.md is missing";
  std::map<std::string, std::string> bullets;  // type -> the bullet's text on one line
  std::string line, current;
  bool in_section = false;
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0) {
      in_section = line == "## Enumerations";
      current.clear();
    } else if (in_section && line.rfind("- `", 0) == 0) {
      current = line.substr(3, line.find('`', 3) - 3);
      bullets[current] = line;
    } else if (in_section && !current.empty() && line.rfind("  ", 0) == 0) {
      bullets[current] += " " + line.substr(line.find_first_not_of(' '));
    } else {
      current.clear();
    }
  }
  std::set<std::string> types;
  for (const EnumValue& e : EnumValues()) {
    types.emplace(e.type);
    const std::string entry = fmt::format(" {} `{}`", e.value, e.name);
    auto bullet = bullets.find(std::string(e.type));
    ASSERT_NE(bullet, bullets.end()) << "no bullet for " << e.type;
    EXPECT_NE(bullet->second.find(entry), std::string::npos) << e.type << ":" << entry;
  }
  std::set<std::string> documented;
  for (const auto& [type, text] : bullets) documented.insert(type);
  EXPECT_EQ(documented, types);
}

}  // namespace
}  // namespace rankscope::trace
