#include "common/backoff.h"

#include <gtest/gtest.h>

namespace hlocache {
namespace {

using std::chrono::milliseconds;

TEST(BackoffTest, RestsDoubleFromTheFirstUpToTheLongestAndASuccessEndsThem) {
  Backoff backoff({milliseconds(100), milliseconds(350)});
  const auto t0 = Backoff::Clock::now();
  EXPECT_FALSE(backoff.Resting(t0));
  EXPECT_EQ(backoff.Failed(t0), milliseconds(100));
  EXPECT_TRUE(backoff.Resting(t0 + milliseconds(99)));
  EXPECT_FALSE(backoff.Resting(t0 + milliseconds(100)));
  EXPECT_EQ(backoff.Failed(t0), milliseconds(200));
  EXPECT_EQ(backoff.Failed(t0), milliseconds(350));  // Capped, not 400.
  EXPECT_EQ(backoff.Failed(t0), milliseconds(350));
  EXPECT_EQ(backoff.Left(t0 + milliseconds(50)), milliseconds(300));
  EXPECT_TRUE(backoff.Succeeded());
  EXPECT_FALSE(backoff.Resting(t0));
  EXPECT_FALSE(backoff.Succeeded());
  EXPECT_EQ(backoff.Failed(t0), milliseconds(100));  // From the start again.
}

TEST(BackoffTest, AFirstRestLongerThanTheLongestIsCapped) {
  Backoff backoff({milliseconds(500), milliseconds(200)});
  EXPECT_EQ(backoff.Failed(), milliseconds(200));
}

}  // namespace
}  // namespace hlocache
