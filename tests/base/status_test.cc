#include "base/status.h"

#include <memory>

#include <gtest/gtest.h>

namespace rankscope {
namespace {

Result<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgument("odd");
  return x / 2;
}

Result<int> Quarter(int x) {
  RS_ASSIGN_OR_RETURN(int half, Half(x));
  RS_ASSIGN_OR_RETURN(int quarter, Half(half));
  return quarter;
}

Status CheckEven(int x) {
  RS_RETURN_IF_ERROR(Half(x).status());
  return Status::Ok();
}

TEST(Status, OkAndErrors) {
  EXPECT_TRUE(Status::Ok().ok());
  Status s = Corrupt("bad page").WithContext("rank-0.sqlite");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_EQ(s.message(), "rank-0.sqlite: bad page");
  EXPECT_EQ(Status::Ok().WithContext("x").ToString(), "ok");
}

TEST(Result, PropagatesValuesAndErrors) {
  EXPECT_EQ(*Quarter(8), 2);
  EXPECT_EQ(Quarter(6).status().message(), "odd");
  EXPECT_TRUE(CheckEven(4).ok());
  EXPECT_EQ(CheckEven(3).code(), StatusCode::kInvalidArgument);
  Result<std::unique_ptr<int>> moved = std::make_unique<int>(5);
  std::unique_ptr<int> owned = std::move(moved).value();
  EXPECT_EQ(*owned, 5);
}

}  // namespace
}  // namespace rankscope
