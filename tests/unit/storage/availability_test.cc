#include "storage/availability.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

#include "tests/unit/status_matchers.h"

namespace hlocache::storage {
namespace {

using std::chrono::milliseconds;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class AvailabilityTest : public ::testing::Test {
 protected:
  Availability::Log Log() {
    return [this](std::string_view line) { lines_.emplace_back(line); };
  }
  std::vector<std::string> lines_;
};

TEST_F(AvailabilityTest, AnUnreachableBackendRestsAndIsNotAskedUntilTheRestIsOver) {
  Availability a("origin", {milliseconds(150), milliseconds(1000)}, Log());
  EXPECT_TRUE(a.Admit());
  EXPECT_THAT(a.Record(Unavailable("connection refused")),
              StatusIs(StatusCode::kUnavailable, HasSubstr("connection refused")));
  EXPECT_FALSE(a.up());
  EXPECT_FALSE(a.Admit());
  EXPECT_FALSE(a.Admit());
  EXPECT_THAT(a.Resting(), StatusIs(StatusCode::kUnavailable, HasSubstr("origin is resting")));
  EXPECT_GT(a.RestLeft(), std::chrono::steady_clock::duration::zero());
  std::this_thread::sleep_for(milliseconds(200));
  EXPECT_TRUE(a.Admit()) << "one failure never disables a backend for good";
  EXPECT_TRUE(a.Record(Status::Ok()).ok());
  EXPECT_TRUE(a.up());
  const AvailabilityStats s = a.stats();
  EXPECT_EQ(s.failures, 1u);
  EXPECT_EQ(s.skipped, 2u);
  EXPECT_THAT(lines_, ElementsAre(HasSubstr("origin skipped for 0.1 s: connection refused"),
                                  "origin is reachable again"));
}

TEST_F(AvailabilityTest, FailuresInARowRestLongerAndASuccessStartsAgain) {
  Availability a("origin", {milliseconds(100), milliseconds(250)}, Log());
  (void)a.Record(Unavailable("down"));
  (void)a.Record(Unavailable("down"));
  (void)a.Record(Unavailable("down"));
  EXPECT_GT(a.RestLeft(), milliseconds(200));  // 100, 200, then 250 (capped).
  EXPECT_LE(a.RestLeft(), milliseconds(250));
  EXPECT_EQ(lines_.size(), 1u) << "one line when it goes down, not one per failure";
  (void)a.Record(Status::Ok());
  EXPECT_EQ(a.RestLeft(), std::chrono::steady_clock::duration::zero());
  (void)a.Record(Unavailable("down"));
  EXPECT_LE(a.RestLeft(), milliseconds(100));
}

TEST_F(AvailabilityTest, ErrorsThatSayNothingOfReachabilityAreCountedNotRestedOn) {
  Availability a("origin", {milliseconds(1000), milliseconds(1000)}, Log());
  for (Status s : {PermissionDenied("403"), InvalidArgument("400"), ResourceExhausted("full"),
                   FailedPrecondition("422")}) {
    EXPECT_EQ(a.Record(s).code(), s.code());
    EXPECT_TRUE(a.Admit());
    EXPECT_TRUE(a.up());
  }
  EXPECT_EQ(a.stats().failures, 4u);
  EXPECT_EQ(a.stats().skipped, 0u);
  EXPECT_TRUE(lines_.empty());
}

TEST_F(AvailabilityTest, OnBackIsCalledOnceWhenASuccessEndsAFailure) {
  int backs = 0;
  Availability a("origin", {milliseconds(1000), milliseconds(1000)}, Log(), [&] { ++backs; });
  (void)a.Record(Status::Ok());
  EXPECT_EQ(backs, 0) << "it was never down";
  (void)a.Record(Unavailable("down"));
  (void)a.Record(Unavailable("down"));
  (void)a.Record(Status::Ok());
  (void)a.Record(Status::Ok());
  EXPECT_EQ(backs, 1);
}

TEST_F(AvailabilityTest, ResultsAreRecordedByTheirError) {
  Availability a("origin", {milliseconds(1000), milliseconds(1000)});
  Result<int> failed = Error(Unavailable("timeout"));
  EXPECT_FALSE(a.Record(std::move(failed)).has_value());
  EXPECT_FALSE(a.Admit());
  Result<int> ok = 7;
  EXPECT_EQ(*a.Record(std::move(ok)), 7);
  EXPECT_TRUE(a.Admit());
}

}  // namespace
}  // namespace hlocache::storage
