// Large buffers kept for reuse while an evaluation runs (compiler/semantics/retained_memory.h).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "compiler/semantics/retained_memory.h"

namespace hlocache::interp {
namespace {

constexpr size_t kLarge = size_t{4} << 20;

TEST(RetainedMemoryTest, WithinAScopeAFreedLargeBufferIsReusedForItsSize) {
  if (!RetainsBuffers()) GTEST_SKIP() << "nothing is kept under AddressSanitizer";
  const RetainScope scope;
  void* first = AllocateRetainable(kLarge);
  std::memset(first, 1, kLarge);
  FreeRetainable(first, kLarge);
  EXPECT_EQ(RetainedBytes(), kLarge);
  // Another size does not take it; the same size does.
  void* other = AllocateRetainable(kLarge * 2);
  EXPECT_NE(other, first);
  void* again = AllocateRetainable(kLarge);
  EXPECT_EQ(again, first);
  EXPECT_EQ(RetainedBytes(), 0u);
  FreeRetainable(again, kLarge);
  FreeRetainable(other, kLarge * 2);
  EXPECT_EQ(RetainedBytes(), kLarge * 3);
}

TEST(RetainedMemoryTest, NothingIsKeptOutsideAScopeOrOnceTheLastEnds) {
  void* outside = AllocateRetainable(kLarge);
  FreeRetainable(outside, kLarge);
  EXPECT_EQ(RetainedBytes(), 0u);
  {
    const RetainScope outer;
    {
      const RetainScope inner;
      FreeRetainable(AllocateRetainable(kLarge), kLarge);
    }
    // The outer scope still runs: kept.
    EXPECT_EQ(RetainedBytes(), RetainsBuffers() ? kLarge : 0u);
  }
  EXPECT_EQ(RetainedBytes(), 0u);
}

TEST(RetainedMemoryTest, SmallBuffersAndTheBoundAreLeftToTheAllocator) {
  const RetainScope scope;
  FreeRetainable(AllocateRetainable(kRetainedMinBytes - 8), kRetainedMinBytes - 8);
  EXPECT_EQ(RetainedBytes(), 0u);
  // Past the bound, freed buffers go back.
  std::vector<void*> buffers;
  const size_t each = size_t{64} << 20;
  for (uint64_t held = 0; held <= kRetainedMaxBytes; held += each) {
    buffers.push_back(AllocateRetainable(each));
  }
  for (void* p : buffers) FreeRetainable(p, each);
  EXPECT_LE(RetainedBytes(), kRetainedMaxBytes);
  if (RetainsBuffers()) {
    EXPECT_GT(RetainedBytes(), kRetainedMaxBytes - each);
  }
}

}  // namespace
}  // namespace hlocache::interp
