#include "storage/rendezvous.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

namespace hlocache::storage {
namespace {

using ::testing::UnorderedElementsAre;

std::string KeyNumber(int i) { return "k" + std::to_string(i * 7919); }

TEST(RendezvousTest, EveryHostOrdersAKeysOriginsAlikeWhateverOrderItListsThem) {
  const std::vector<std::string> listed = {"http://10.0.0.1:7070", "http://10.0.0.2:7070",
                                           "http://10.0.0.3:7070"};
  const std::vector<std::string> reversed(listed.rbegin(), listed.rend());
  for (int i = 0; i < 200; ++i) {
    std::vector<size_t> a = RendezvousOrder(listed, KeyNumber(i));
    std::vector<size_t> b = RendezvousOrder(reversed, KeyNumber(i));
    ASSERT_EQ(a.size(), 3u);
    EXPECT_THAT(a, UnorderedElementsAre(0u, 1u, 2u));
    for (size_t rank = 0; rank < 3; ++rank) EXPECT_EQ(listed[a[rank]], reversed[b[rank]]);
  }
}

TEST(RendezvousTest, KeysSpreadOverTheOrigins) {
  const std::vector<std::string> origins = {"http://a:1", "http://b:1", "http://c:1", "http://d:1"};
  std::map<size_t, int> first;
  const int keys = 4000;
  for (int i = 0; i < keys; ++i) ++first[RendezvousOrder(origins, KeyNumber(i))[0]];
  ASSERT_EQ(first.size(), 4u);
  // 1000 each on average; a binomial's standard deviation here is about 27.
  for (const auto& [origin, count] : first) {
    EXPECT_GT(count, 850) << origins[origin];
    EXPECT_LT(count, 1150) << origins[origin];
  }
}

TEST(RendezvousTest, RemovingAnOriginMovesOnlyItsKeysAndSpreadsThemOverTheRest) {
  const std::vector<std::string> three = {"http://a:1", "http://b:1", "http://c:1"};
  const std::vector<std::string> two = {"http://a:1", "http://c:1"};
  std::map<std::string, int> moved_to;
  for (int i = 0; i < 3000; ++i) {
    const std::string key = KeyNumber(i);
    const std::vector<size_t> before = RendezvousOrder(three, key);
    const std::string& after = two[RendezvousOrder(two, key)[0]];
    if (three[before[0]] != "http://b:1") {
      EXPECT_EQ(after, three[before[0]]) << key;  // Its origin is still there: it stays.
    } else {
      EXPECT_EQ(after, three[before[1]]) << key;  // Its next choice takes it.
      ++moved_to[after];
    }
  }
  ASSERT_EQ(moved_to.size(), 2u);
  EXPECT_GT(moved_to["http://a:1"], 350);
  EXPECT_GT(moved_to["http://c:1"], 350);
}

TEST(RendezvousTest, OneOriginOrNoneIsTrivial) {
  const std::vector<std::string> one = {"http://a:1"};
  EXPECT_EQ(RendezvousOrder(one, "k"), std::vector<size_t>{0});
  EXPECT_TRUE(RendezvousOrder(std::span<const std::string>(), "k").empty());
}

}  // namespace
}  // namespace hlocache::storage
