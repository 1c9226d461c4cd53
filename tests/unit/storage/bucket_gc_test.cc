#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "storage/s3_backend.h"

namespace hlocache::storage {
namespace {

using std::chrono::hours;
using std::chrono::seconds;
using std::chrono::system_clock;
using ::testing::ElementsAre;
using ::testing::Field;

BucketEntry Entry(std::string key, uint64_t size, system_clock::time_point last_use) {
  return BucketEntry{std::move(key), size, last_use};
}

TEST(BucketGcTest, EvictsLeastRecentlyUsedFirstUntilTheBucketFits) {
  const auto now = system_clock::now();
  std::vector<BucketEntry> entries = {
      Entry("new", 100, now - hours(3)), Entry("oldest", 100, now - hours(30)),
      Entry("old", 100, now - hours(20)), Entry("recent", 100, now - hours(5))};
  const BucketGcPlan plan = PlanBucketGc(entries, 250, now, seconds(7200));
  EXPECT_THAT(plan.evict,
              ElementsAre(Field(&BucketEntry::key, "oldest"), Field(&BucketEntry::key, "old")));
  EXPECT_EQ(plan.bytes_before, 400u);
  EXPECT_EQ(plan.bytes_after, 200u);
  EXPECT_EQ(plan.entries_before, 4u);
  EXPECT_EQ(plan.kept_as_recent, 0u);
}

TEST(BucketGcTest, NeverEvictsWhatWasUsedWithinTheWindowEvenWhenTheBucketStaysOver) {
  const auto now = system_clock::now();
  std::vector<BucketEntry> entries = {Entry("stale", 100, now - hours(9)),
                                      Entry("served-now", 100, now - seconds(10)),
                                      Entry("served-an-hour-ago", 100, now - seconds(3700))};
  const BucketGcPlan plan = PlanBucketGc(entries, 0, now, seconds(7200));
  EXPECT_THAT(plan.evict, ElementsAre(Field(&BucketEntry::key, "stale")));
  EXPECT_EQ(plan.bytes_after, 200u);
  EXPECT_EQ(plan.kept_as_recent, 2u);
}

TEST(BucketGcTest, ABucketUnderItsCapLosesNothing) {
  const auto now = system_clock::now();
  const BucketGcPlan plan = PlanBucketGc(
      {Entry("a", 10, now - hours(100)), Entry("b", 10, now - hours(200))}, 20, now, seconds(0));
  EXPECT_TRUE(plan.evict.empty());
  EXPECT_EQ(plan.bytes_after, 20u);
}

TEST(BucketGcTest, S3TimesParseToTheSecondAndBelow) {
  auto t = ParseS3Time("2026-11-26T21:04:05.123Z");
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(system_clock::to_time_t(*t), 1795727045);  // date -u -d 2026-11-26T21:04:05 +%s
  EXPECT_EQ(
      std::chrono::duration_cast<std::chrono::milliseconds>(t->time_since_epoch()).count() % 1000,
      123);
  auto whole = ParseS3Time("2026-11-26T21:04:05Z");
  ASSERT_TRUE(whole.has_value());
  EXPECT_EQ(*t - *whole, std::chrono::milliseconds(123));
  for (const char* bad :
       {"", "2026-11-26", "2026-11-26T21:04:05", "2026-13-26T21:04:05Z", "2026-11-26T21:04:0xZ",
        "2026-11-26T21:04:05.Z", "2026-11-26 21:04:05Z"}) {
    EXPECT_FALSE(ParseS3Time(bad).has_value()) << bad;
  }
}

}  // namespace
}  // namespace hlocache::storage
