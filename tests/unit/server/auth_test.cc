// Bearer tokens: the file format, its errors, and role lookup.
#include "server/auth.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/unit/status_matchers.h"

namespace hlocache::server {
namespace {

using ::testing::HasSubstr;

TEST(TokenTableTest, MapsEachTokenToItsRole) {
  auto table = TokenTable::Parse(
      "# comment\n\nread  reader-secret\nwrite writer-secret\r\nadmin\tadmin-secret  \n", "t");
  ASSERT_THAT(table, IsOk());
  EXPECT_EQ(table->size(), 3u);
  EXPECT_EQ(table->Authorize("Bearer reader-secret"), Role::kRead);
  EXPECT_EQ(table->Authorize("Bearer writer-secret"), Role::kWrite);
  EXPECT_EQ(table->Authorize("Bearer admin-secret"), Role::kAdmin);
}

TEST(TokenTableTest, AnythingElseHasNoRole) {
  auto table = TokenTable::Parse("admin admin-secret\n", "t");
  ASSERT_THAT(table, IsOk());
  EXPECT_EQ(table->Authorize(""), Role::kNone);
  EXPECT_EQ(table->Authorize("admin-secret"), Role::kNone);          // No scheme.
  EXPECT_EQ(table->Authorize("Basic admin-secret"), Role::kNone);    // Another scheme.
  EXPECT_EQ(table->Authorize("Bearer admin-secre"), Role::kNone);    // A prefix.
  EXPECT_EQ(table->Authorize("Bearer admin-secrets"), Role::kNone);  // An extension.
  EXPECT_EQ(table->Authorize("Bearer "), Role::kNone);
}

TEST(TokenTableTest, TheHighestRoleOfADuplicatedTokenWins) {
  auto table = TokenTable::Parse("read same-token\nwrite same-token\n", "t");
  ASSERT_THAT(table, IsOk());
  EXPECT_EQ(table->Authorize("Bearer same-token"), Role::kWrite);
}

TEST(TokenTableTest, MalformedFilesNameTheLine) {
  EXPECT_THAT(TokenTable::Parse("read ok-token-1\nroot some-token\n", "tokens"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("tokens:2: unknown role 'root'")));
  EXPECT_THAT(TokenTable::Parse("read\n", "tokens"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("tokens:1:")));
  EXPECT_THAT(TokenTable::Parse("read short\n", "tokens"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("at least 8")));
  EXPECT_THAT(TokenTable::Parse("read two words here\n", "tokens"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("one word")));
  EXPECT_THAT(TokenTable::Parse("# only comments\n", "tokens"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("no tokens")));
  EXPECT_THAT(TokenTable::Load("/nonexistent/tokens"), ::testing::Not(IsOk()));
}

}  // namespace
}  // namespace hlocache::server
