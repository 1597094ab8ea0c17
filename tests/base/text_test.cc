#include "base/text.h"

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

namespace rankscope {
namespace {

TEST(TextTest, PrintableQuotesAndEscapesWhatATerminalWouldNotShow) {
  EXPECT_EQ(Printable("rank-0.sqlite"), "'rank-0.sqlite'");
  EXPECT_EQ(Printable("a\nb'c\\"), "'a\\x0ab\\x27c\\x5c'");
  EXPECT_EQ(Printable("\xc3\xa9"), "'\\xc3\\xa9'");
}

TEST(TextTest, PrintableCutsLongTextAndSaysSo) {
  EXPECT_EQ(Printable("abcdef", 3), "'abc'...");
  EXPECT_EQ(Printable("abc", 3), "'abc'");
}

TEST(TextTest, QuotedKeepsRoomForLongPaths) {
  const std::string long_name(150, 'x');
  EXPECT_EQ(Quoted(std::filesystem::path("/runs") / long_name), "'/runs/" + long_name + "'");
  EXPECT_EQ(Quoted(std::filesystem::path(std::string(300, 'y'))), "'" + std::string(200, 'y') + "'...");
}

}  // namespace
}  // namespace rankscope
