// common/fast_hash.h: the vector-unit XXH3 gives libxxhash's results and leaves no
// upper vector state in use behind it (which would slow every SSE instruction that follows).
#include "common/fast_hash.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <string>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace {

std::string Bytes(size_t size) {
  std::string s(size, '\0');
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (char& c : s) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    c = static_cast<char>(x);
  }
  return s;
}

TEST(FastHashTest, GivesLibxxhashsResultsOneShotAndStreamed) {
  for (size_t size : {0, 1, 17, 240, 241, 4096, 1 << 20}) {
    const std::string s = Bytes(size);
    const XXH128_hash_t fast = XXH3_128bits(s.data(), s.size());
    const XXH128_hash_t plain = ::XXH3_128bits_dispatch(s.data(), s.size());
    EXPECT_TRUE(XXH128_isEqual(fast, plain)) << size;
    EXPECT_EQ(XXH3_64bits(s.data(), s.size()), ::XXH3_64bits_dispatch(s.data(), s.size()));
    XXH3_state_t* state = XXH3_createState();
    XXH3_128bits_reset(state);
    XXH3_128bits_update(state, s.data(), s.size() / 3);
    XXH3_128bits_update(state, s.data() + s.size() / 3, s.size() - s.size() / 3);
    EXPECT_TRUE(XXH128_isEqual(XXH3_128bits_digest(state), plain)) << size;
    XXH3_freeState(state);
  }
}

#if defined(__x86_64__)
// XINUSE (XGETBV with ECX=1): bit 2 is the upper halves of YMM0-15, bit 6 those of ZMM0-15.
bool XInUseReadable() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __builtin_cpu_supports("avx") && __get_cpuid_count(0xd, 1, &a, &b, &c, &d) &&
         ((a >> 2) & 1) != 0;
}
uint64_t XInUse() {
  uint32_t lo = 0, hi = 0;
  asm volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(1));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}
constexpr uint64_t kUpperVectorState = (1u << 2) | (1u << 6);

TEST(FastHashTest, Hex128WritesTheHighHalfThenTheLowInThirtyTwoLowercaseDigits) {
  XXH128_hash_t h;
  h.high64 = 0x0123456789abcdefull;
  h.low64 = 0xfedcba9876543210ull;
  EXPECT_EQ(hlocache::Hex128(h), "0123456789abcdeffedcba9876543210");
  h.high64 = 0;
  h.low64 = 0xa;
  EXPECT_EQ(hlocache::Hex128(h), "0000000000000000000000000000000a");
  const std::string bytes = Bytes(100);
  const XXH128_hash_t whole = XXH3_128bits(bytes.data(), bytes.size());
  char expected[33];
  std::snprintf(expected, sizeof expected, "%016llx%016llx",
                static_cast<unsigned long long>(whole.high64),
                static_cast<unsigned long long>(whole.low64));
  EXPECT_EQ(hlocache::Hex128(bytes.data(), bytes.size()), expected);
}

TEST(FastHashTest, LeavesNoUpperVectorStateInUse) {
  if (!XInUseReadable()) GTEST_SKIP() << "this CPU has no AVX or cannot report XINUSE";
  const std::string s = Bytes(1 << 20);
  volatile uint64_t sink = XXH3_128bits(s.data(), s.size()).low64;
  EXPECT_EQ(XInUse() & kUpperVectorState, 0u) << "after XXH3_128bits";
  XXH3_state_t* state = XXH3_createState();
  XXH3_128bits_reset(state);
  XXH3_128bits_update(state, s.data(), s.size());
  EXPECT_EQ(XInUse() & kUpperVectorState, 0u) << "after XXH3_128bits_update";
  sink = sink + XXH3_64bits(s.data(), s.size());
  EXPECT_EQ(XInUse() & kUpperVectorState, 0u) << "after XXH3_64bits";
  XXH3_freeState(state);
}
#endif

}  // namespace
