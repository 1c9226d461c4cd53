// GoogleTest matchers for Status and Result, in the style of abseil's status matchers:
//   EXPECT_THAT(ParseModule(text, "f"), IsOk());
//   EXPECT_THAT(result, StatusIs(StatusCode::kInvalidArgument, HasSubstr("f:3:7: error")));
//   EXPECT_THAT(Int(attr), IsOkAndHolds(3));
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <ostream>

#include "common/status.h"

namespace hlocache {

inline void PrintTo(const Status& s, std::ostream* os) { *os << s.ToString(); }
template <typename T>
void PrintTo(const Result<T>& r, std::ostream* os) {
  *os << (r.has_value() ? std::string("a value") : r.error().ToString());
}

namespace testing_internal {
inline const Status& GetStatus(const Status& s) { return s; }
template <typename T>
Status GetStatus(const Result<T>& r) {
  return r.has_value() ? Status::Ok() : r.error();
}
}  // namespace testing_internal

MATCHER(IsOk, "is OK") {
  Status s = testing_internal::GetStatus(arg);
  if (!s.ok()) *result_listener << "status is " << s.ToString();
  return s.ok();
}

MATCHER_P2(StatusIs, code, message_matcher,
           "has code " + std::string(StatusCodeName(code)) + " and a matching message") {
  Status s = testing_internal::GetStatus(arg);
  *result_listener << "status is " << s.ToString();
  return s.code() == code && ::testing::Matches(message_matcher)(s.message());
}

MATCHER_P(StatusIs, code, "has code " + std::string(StatusCodeName(code))) {
  Status s = testing_internal::GetStatus(arg);
  *result_listener << "status is " << s.ToString();
  return s.code() == code;
}

// A Result holding a value that `value_matcher` matches (a plain value compares with ==).
MATCHER_P(IsOkAndHolds, value_matcher, "is OK and holds a matching value") {
  if (!arg.has_value()) {
    *result_listener << "status is " << arg.error().ToString();
    return false;
  }
  return ::testing::ExplainMatchResult(value_matcher, *arg, result_listener);
}

}  // namespace hlocache
