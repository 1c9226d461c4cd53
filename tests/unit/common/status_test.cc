#include "common/status.h"

#include <gtest/gtest.h>

#include <memory>

#include "tests/unit/status_matchers.h"

namespace hlocache {
namespace {

using ::testing::HasSubstr;

Result<int> Half(int x) {
  if (x % 2) return Error(InvalidArgument("odd"));
  return x / 2;
}

Result<int> Quarter(int x) {
  auto half = Half(x);
  if (!half) return Error(half.error());
  return Half(*half);
}

TEST(StatusTest, OkAndErrorsReadWell) {
  EXPECT_THAT(Status::Ok(), IsOk());
  EXPECT_EQ(Status::Ok().ToString(), "OK");
  Status s = NotFound("no such key");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.ToString(), "NOT_FOUND: no such key");
  EXPECT_THAT(s, StatusIs(StatusCode::kNotFound, HasSubstr("key")));
}

TEST(ResultTest, CarriesValueOrError) {
  EXPECT_THAT(Quarter(8), IsOk());
  EXPECT_EQ(*Quarter(8), 2);
  EXPECT_THAT(Quarter(6), StatusIs(StatusCode::kInvalidArgument, "odd"));
  EXPECT_FALSE(Quarter(6).has_value());
}

TEST(ResultTest, HoldsMoveOnlyValues) {
  Result<std::unique_ptr<int>> r = std::make_unique<int>(7);
  ASSERT_TRUE(r);
  std::unique_ptr<int> p = *std::move(r);
  EXPECT_EQ(*p, 7);
}

}  // namespace
}  // namespace hlocache
