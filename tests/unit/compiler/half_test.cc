// The 16-bit float formats (compiler/semantics/half.h), checked exhaustively: every bit pattern
// of f16 and bf16 decodes to its exact value, and encoding rounds every double to the nearest
// value, ties to even, as IEEE 754 defines it.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "compiler/semantics/half.h"

namespace hlocache::interp {
namespace {

// The value of a bit pattern, by the definition: (-1)^s * 1.mantissa * 2^(exponent - bias), or
// 0.mantissa * 2^(1 - bias) for a zero exponent.
double ValueByDefinition(uint16_t bits, HalfFormat f) {
  const int m = f.mantissa_bits;
  const int bias = (1 << (f.exponent_bits - 1)) - 1;
  const int max_exponent = (1 << f.exponent_bits) - 1;
  const int exponent = (bits >> m) & max_exponent;
  const int mantissa = bits & ((1 << m) - 1);
  double v = 0;
  if (exponent == max_exponent) {
    v = mantissa != 0 ? std::numeric_limits<double>::quiet_NaN()
                      : std::numeric_limits<double>::infinity();
  } else if (exponent == 0) {
    v = std::ldexp(mantissa, 1 - bias - m);
  } else {
    v = std::ldexp(mantissa + (1 << m), exponent - bias - m);
  }
  return (bits & 0x8000) != 0 ? -v : v;
}

bool IsNanPattern(uint16_t bits, HalfFormat f) {
  const int max_exponent = (1 << f.exponent_bits) - 1;
  return ((bits >> f.mantissa_bits) & max_exponent) == max_exponent &&
         (bits & ((1 << f.mantissa_bits) - 1)) != 0;
}

class HalfTest : public ::testing::TestWithParam<HalfFormat> {};

TEST_P(HalfTest, EveryPatternDecodesToItsValueAndEncodesBack) {
  const HalfFormat f = GetParam();
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const auto bits = static_cast<uint16_t>(b);
    const double v = DecodeHalf(bits, f);
    if (IsNanPattern(bits, f)) {
      ASSERT_TRUE(std::isnan(v)) << std::hex << b;
      EXPECT_EQ(std::signbit(v), (b & 0x8000) != 0) << std::hex << b;
      // Quiet, with the payload kept in the top of the double's mantissa.
      const uint64_t d = std::bit_cast<uint64_t>(v);
      EXPECT_NE(d & (uint64_t{1} << 51), 0u) << std::hex << b;
      EXPECT_EQ((d >> (52 - f.mantissa_bits)) & ((1u << (f.mantissa_bits - 1)) - 1),
                b & ((1u << (f.mantissa_bits - 1)) - 1))
          << std::hex << b;
      const uint16_t again = EncodeHalf(v, f);
      EXPECT_TRUE(IsNanPattern(again, f)) << std::hex << b;
      EXPECT_EQ(again & 0x8000, b & 0x8000) << std::hex << b;
      EXPECT_NE(again & (1u << (f.mantissa_bits - 1)), 0u) << "not quiet: " << std::hex << b;
      continue;
    }
    ASSERT_EQ(std::bit_cast<uint64_t>(v), std::bit_cast<uint64_t>(ValueByDefinition(bits, f)))
        << std::hex << b;
    ASSERT_EQ(EncodeHalf(v, f), bits) << std::hex << b;
  }
}

// Between each pair of neighbouring finite values: the midpoint goes to the one with an even
// mantissa, and the doubles just either side of it to the nearer value.
TEST_P(HalfTest, EveryMidpointRoundsToEvenAndItsNeighboursToTheNearer) {
  const HalfFormat f = GetParam();
  const uint16_t max_finite =
      static_cast<uint16_t>((((1u << f.exponent_bits) - 1u) << f.mantissa_bits) - 1u);
  for (uint16_t sign : {uint16_t{0}, uint16_t{0x8000}}) {
    for (uint32_t b = 0; b < max_finite; ++b) {
      const auto lo = static_cast<uint16_t>(sign | b);
      const auto hi = static_cast<uint16_t>(sign | (b + 1));
      const double a = DecodeHalf(lo, f);
      const double c = DecodeHalf(hi, f);
      const double mid = a + (c - a) / 2;  // Exact: both are far from double's limits.
      const uint16_t even = (b & 1) == 0 ? lo : hi;
      ASSERT_EQ(EncodeHalf(mid, f), even) << std::hex << b;
      ASSERT_EQ(EncodeHalf(std::nextafter(mid, a), f), lo) << std::hex << b;
      ASSERT_EQ(EncodeHalf(std::nextafter(mid, c), f), hi) << std::hex << b;
    }
  }
}

TEST_P(HalfTest, LargeValuesOverflowToInfinityAndTinyOnesToZero) {
  const HalfFormat f = GetParam();
  const uint16_t inf = static_cast<uint16_t>(((1u << f.exponent_bits) - 1u) << f.mantissa_bits);
  const uint16_t max_finite = static_cast<uint16_t>(inf - 1);
  const double max = DecodeHalf(max_finite, f);
  const double ulp = max - DecodeHalf(static_cast<uint16_t>(max_finite - 1), f);
  // Up to half an ulp past the largest value (exclusive, as the tie would go to the even
  // infinity) it is the largest; from there on, infinity.
  EXPECT_EQ(EncodeHalf(std::nextafter(max + ulp / 2, 0.0), f), max_finite);
  EXPECT_EQ(EncodeHalf(max + ulp / 2, f), inf);
  EXPECT_EQ(EncodeHalf(1e300, f), inf);
  EXPECT_EQ(EncodeHalf(-1e300, f), inf | 0x8000);
  EXPECT_EQ(EncodeHalf(std::numeric_limits<double>::infinity(), f), inf);
  EXPECT_EQ(EncodeHalf(-std::numeric_limits<double>::infinity(), f), inf | 0x8000);

  const double smallest = DecodeHalf(1, f);
  EXPECT_EQ(EncodeHalf(smallest / 2, f), 0);  // The tie goes to even: zero.
  EXPECT_EQ(EncodeHalf(std::nextafter(smallest / 2, 1.0), f), 1);
  EXPECT_EQ(EncodeHalf(-smallest / 4, f), 0x8000);
  EXPECT_EQ(EncodeHalf(std::numeric_limits<double>::denorm_min(), f), 0);
  EXPECT_EQ(EncodeHalf(-std::numeric_limits<double>::min(), f), 0x8000);
  EXPECT_EQ(EncodeHalf(-0.0, f), 0x8000);
}

std::string FormatName(const ::testing::TestParamInfo<HalfFormat>& format) {
  return format.param.exponent_bits == 5 ? "F16" : "BF16";
}

INSTANTIATE_TEST_SUITE_P(Formats, HalfTest, ::testing::Values(kF16Format, kBF16Format), FormatName);

}  // namespace
}  // namespace hlocache::interp
