#include "server/header_check.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace hlocache::server {
namespace {

using ::testing::HasSubstr;

// The refusal for `head` fed whole, then (a fresh check) fed a byte at a time: the two agree.
std::optional<HeaderCheck::Refusal> Check(const std::string& head) {
  HeaderCheck whole;
  whole.Reset();
  auto at_once = whole.Feed(head);
  HeaderCheck bytes;
  bytes.Reset();
  std::optional<HeaderCheck::Refusal> one_by_one;
  for (const char c : head) {
    if (auto r = bytes.Feed(std::string_view(&c, 1)); r && !one_by_one) one_by_one = r;
  }
  EXPECT_EQ(at_once.has_value(), one_by_one.has_value()) << head;
  if (at_once && one_by_one) {
    EXPECT_EQ(at_once->reason, one_by_one->reason);
  }
  return at_once;
}

TEST(HeaderCheckTest, WellFormedHeadsPass) {
  EXPECT_FALSE(Check("GET /v1/stats HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n"));
  EXPECT_FALSE(Check("GET / HTTP/1.1\nHost: x\nX-Empty:\n\n"));  // Bare LF ends lines too.
  EXPECT_FALSE(Check("PUT /v1/a HTTP/1.1\r\nContent-Length: 3\r\nX-A!#$%&'*+-.^_`|~9: v\r\n\r\n"));
  HeaderCheck c;
  c.Reset();
  EXPECT_FALSE(c.Feed("GET / HTTP/1.1\r\nHost: x\r\n\r\nnot: a header line, a body"));
  EXPECT_TRUE(c.done());
}

TEST(HeaderCheckTest, MalformedFieldLinesAre400) {
  const std::string line = "GET / HTTP/1.1\r\nHost: x\r\n";
  const std::pair<std::string, std::string> cases[] = {
      {"NoColonHere\r\n", "without a colon"},
      {"X-A: 1\r\n folded: 2\r\n", "obsolete line folding"},
      {"X-A: 1\r\n\tfolded\r\n", "obsolete line folding"},
      {"Host : x\r\n", "whitespace between a header's name and its colon"},
      {"Host\t: x\r\n", "whitespace between a header's name and its colon"},
      {": no name\r\n", "empty name"},
      {"X(A): 1\r\n", "may not hold"},
      {std::string("X\0A: 1\r\n", 8), "may not hold"},
  };
  for (const auto& [field, why] : cases) {
    auto refusal = Check(line + field + "\r\n");
    ASSERT_TRUE(refusal.has_value()) << field;
    EXPECT_EQ(refusal->status, 400) << field;
    EXPECT_THAT(refusal->reason, HasSubstr(why)) << field;
  }
}

TEST(HeaderCheckTest, TooManyLinesOrBytesAre431) {
  std::string hundred = "GET / HTTP/1.1\r\n";
  for (size_t i = 0; i < HeaderCheck::kMostFieldLines; ++i) {
    hundred += "X-" + std::to_string(i) + ": v\r\n";
  }
  EXPECT_FALSE(Check(hundred + "\r\n")) << "exactly the most lines";
  auto too_many = Check(hundred + "X-One-More: v\r\n\r\n");
  ASSERT_TRUE(too_many.has_value());
  EXPECT_EQ(too_many->status, 431);
  EXPECT_THAT(too_many->reason, HasSubstr("more than 100 header lines"));

  auto too_long = Check("GET / HTTP/1.1\r\nX-Big: " + std::string(70000, 'b') + "\r\n\r\n");
  ASSERT_TRUE(too_long.has_value());
  EXPECT_EQ(too_long->status, 431);
  EXPECT_THAT(too_long->reason, HasSubstr("longer than 64 KiB"));
}

TEST(HeaderCheckTest, ResetStartsTheNextRequest) {
  HeaderCheck c;
  c.Reset();
  ASSERT_TRUE(c.Feed("GET / HTTP/1.1\r\nbad\r\n\r\n").has_value());
  c.Reset();
  EXPECT_FALSE(c.Feed("GET / HTTP/1.1\r\nHost: x\r\n\r\n").has_value());
  EXPECT_TRUE(c.done());
}

}  // namespace
}  // namespace hlocache::server
