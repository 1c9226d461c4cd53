// common/small_vector.h: a vector that keeps its first N elements in place.
#include "common/small_vector.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

namespace hlocache {
namespace {

using Small = SmallVector<int32_t, 4>;

std::vector<int32_t> Values(const Small& v) { return std::vector<int32_t>(v.begin(), v.end()); }

TEST(SmallVectorTest, KeepsItsValuesInOrderAcrossTheMoveToTheHeap) {
  Small v;
  EXPECT_TRUE(v.empty());
  std::vector<int32_t> expected;
  for (int32_t i = 0; i < 40; ++i) {
    v.push_back(i * 7);
    expected.push_back(i * 7);
    ASSERT_EQ(Values(v), expected) << "after " << i + 1;
    EXPECT_GE(v.capacity(), v.size());
  }
  EXPECT_EQ(v.front(), 0);
  EXPECT_EQ(v.back(), 39 * 7);
  EXPECT_TRUE(v == expected);
  v.pop_back();
  expected.pop_back();
  EXPECT_TRUE(v == expected);
}

TEST(SmallVectorTest, AValueOfItsOwnIsCopiedBeforeTheVectorGrows) {
  Small v{1, 2, 3, 4};  // Full in place: the next push moves the elements.
  v.push_back(v[0]);
  EXPECT_EQ(Values(v), (std::vector<int32_t>{1, 2, 3, 4, 1}));
  for (int i = 0; i < 3; ++i) v.push_back(v.back());  // Full on the heap at 8.
  v.push_back(v[2]);
  EXPECT_EQ(Values(v), (std::vector<int32_t>{1, 2, 3, 4, 1, 1, 1, 1, 3}));
}

TEST(SmallVectorTest, CopiesAndMovesInPlaceAndOnTheHeapAreIndependent) {
  for (int count : {0, 3, 4, 5, 17}) {
    Small a;
    for (int i = 0; i < count; ++i) a.push_back(i + 100);
    const std::vector<int32_t> values = Values(a);

    Small copy(a);
    EXPECT_EQ(Values(copy), values);
    copy.push_back(-1);  // Changing the copy leaves the original alone.
    EXPECT_EQ(Values(a), values);

    Small assigned{9, 9, 9, 9, 9, 9};
    assigned = a;
    EXPECT_EQ(Values(assigned), values);

    Small moved(std::move(a));
    EXPECT_EQ(Values(moved), values);
    EXPECT_TRUE(a.empty());  // NOLINT(bugprone-use-after-move): moved-from is empty, reusable.
    a.push_back(5);
    EXPECT_EQ(Values(a), (std::vector<int32_t>{5}));

    Small move_assigned{1, 2, 3, 4, 5, 6, 7};
    move_assigned = std::move(moved);
    EXPECT_EQ(Values(move_assigned), values);
    EXPECT_TRUE(moved.empty());  // NOLINT(bugprone-use-after-move)

    Small& self = move_assigned;
    move_assigned = self;  // Self-assignment keeps the values.
    EXPECT_EQ(Values(move_assigned), values);
  }
}

TEST(SmallVectorTest, ReserveResizeAndClear) {
  Small v;
  v.reserve(3);
  EXPECT_EQ(v.capacity(), 4u);  // Within the in-place room: nothing allocated.
  v.reserve(10);
  EXPECT_EQ(v.capacity(), 10u);
  EXPECT_TRUE(v.empty());
  v.resize(6, 8);
  EXPECT_EQ(Values(v), (std::vector<int32_t>(6, 8)));
  v.resize(2);
  EXPECT_EQ(Values(v), (std::vector<int32_t>{8, 8}));
  v.resize(4);
  EXPECT_EQ(Values(v), (std::vector<int32_t>{8, 8, 0, 0}));
  v.clear();
  EXPECT_TRUE(v.empty());
  EXPECT_EQ(v.capacity(), 10u);
  v.push_back(1);
  EXPECT_EQ(Values(v), (std::vector<int32_t>{1}));
  EXPECT_FALSE(v == (std::vector<int32_t>{1, 2}));
  EXPECT_TRUE(v == (Small{1}));
}

// Built from a range or a std::vector, assigned a range, an element erased: on either side of
// the in-place room, with the values in order and nothing of the old contents left.
TEST(SmallVectorTest, RangesVectorsAndErase) {
  const std::vector<int32_t> six = {1, 2, 3, 4, 5, 6};
  const Small from_range(six.begin() + 1, six.begin() + 4);
  EXPECT_EQ(Values(from_range), (std::vector<int32_t>{2, 3, 4}));
  const Small from_vector = six;
  EXPECT_EQ(Values(from_vector), six);

  Small v{9, 9};
  v.assign(six.begin(), six.end());  // Past the room: onto the heap.
  EXPECT_EQ(Values(v), six);
  v.assign(six.data() + 4, six.data() + 6);  // Fewer than it had.
  EXPECT_EQ(Values(v), (std::vector<int32_t>{5, 6}));

  Small w(six.begin(), six.end());
  auto after = w.erase(w.begin());  // The first.
  EXPECT_EQ(*after, 2);
  after = w.erase(w.begin() + 2);  // One inside.
  EXPECT_EQ(*after, 5);
  after = w.erase(w.end() - 1);  // The last.
  EXPECT_EQ(after, w.end());
  EXPECT_EQ(Values(w), (std::vector<int32_t>{2, 3, 5}));
}

}  // namespace
}  // namespace hlocache
