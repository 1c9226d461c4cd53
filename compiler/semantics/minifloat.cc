#include "compiler/semantics/minifloat.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace hlocache::interp {

using hlo::PrimitiveType;
using Nan = MiniFloatFormat::Nan;

std::optional<MiniFloatFormat> MiniFloatFormatOf(PrimitiveType type) {
  switch (type) {
    case PrimitiveType::kF8E5M2:
      return MiniFloatFormat{5, 2, 15, true, Nan::kIeee};
    case PrimitiveType::kF8E4M3:
      return MiniFloatFormat{4, 3, 7, true, Nan::kIeee};
    case PrimitiveType::kF8E3M4:
      return MiniFloatFormat{3, 4, 3, true, Nan::kIeee};
    case PrimitiveType::kF8E4M3FN:
      return MiniFloatFormat{4, 3, 7, false, Nan::kAllOnes};
    case PrimitiveType::kF8E4M3FNUZ:
      return MiniFloatFormat{4, 3, 8, false, Nan::kNegativeZero};
    case PrimitiveType::kF8E5M2FNUZ:
      return MiniFloatFormat{5, 2, 16, false, Nan::kNegativeZero};
    case PrimitiveType::kF8E4M3B11FNUZ:
      return MiniFloatFormat{4, 3, 11, false, Nan::kNegativeZero};
    case PrimitiveType::kF6E2M3FN:
      return MiniFloatFormat{2, 3, 1, false, Nan::kNone};
    case PrimitiveType::kF6E3M2FN:
      return MiniFloatFormat{3, 2, 3, false, Nan::kNone};
    case PrimitiveType::kF4E2M1FN:
      return MiniFloatFormat{2, 1, 1, false, Nan::kNone};
    case PrimitiveType::kF8E8M0FNU:
      return MiniFloatFormat{8, 0, 127, false, Nan::kExponentOnly};
    default:
      return std::nullopt;
  }
}

namespace {

// ml_dtypes' conversion from double's bits to f8e8m0fnu: the significand, its implicit bit
// included, shifted to the format's (absent) mantissa with round-to-nearest-even, the shift one
// wider per power of two under the normal range, and at most two past the significand.
uint8_t EncodeExponentOnly(double v) {
  if (!(v > 0) || std::isinf(v)) return 0xff;  // NaN, zero, negative or infinite.
  const auto bits = std::bit_cast<uint64_t>(v);
  constexpr int kMantissa = 52;
  constexpr uint64_t kImplicit = uint64_t{1} << kMantissa;
  const auto biased = static_cast<int>(bits >> kMantissa);
  const uint64_t fraction = bits & (kImplicit - 1);
  int exponent;
  uint64_t significand;
  if (biased != 0) {
    exponent = biased - 1023;
    significand = kImplicit | fraction;
  } else {  // A subnormal double: normalized.
    const int shift = std::countl_zero(fraction) - (64 - kMantissa) + 1;
    significand = fraction << shift;
    exponent = -1022 - shift;
  }
  const int base = exponent + 127 - 1;
  const int shift = std::min(kMantissa + std::max(0, -base), kMantissa + 2);
  significand += ((significand >> shift) & 1) + (uint64_t{1} << (shift - 1)) - 1;
  const uint64_t result = (significand >> shift) + static_cast<uint64_t>(std::max(0, base));
  if (base >= 128 + 127 || result > 0xfe) return 0xff;
  return static_cast<uint8_t>(result);
}

}  // namespace

uint8_t EncodeMiniFloat(double v, const MiniFloatFormat& f) {
  if (f.nan == Nan::kExponentOnly) return EncodeExponentOnly(v);
  const int m = f.mantissa_bits;
  const uint32_t magnitude_bits = (1u << (f.exponent_bits + m)) - 1u;  // All but the sign.
  const uint32_t sign = std::signbit(v) ? magnitude_bits + 1u : 0u;
  const uint32_t exponent_ones = ((1u << f.exponent_bits) - 1u) << m;
  const uint32_t nan = f.nan == Nan::kIeee      ? sign | exponent_ones | (1u << (m - 1))
                       : f.nan == Nan::kAllOnes ? sign | magnitude_bits
                                                : magnitude_bits + 1u;  // Also -0 for kNone.
  // The largest finite magnitude's bits.
  const uint32_t max = f.nan == Nan::kIeee      ? exponent_ones - 1u
                       : f.nan == Nan::kAllOnes ? magnitude_bits - 1u
                                                : magnitude_bits;
  // Past the largest: infinity, NaN, or (no NaN) the largest.
  const uint32_t overflow = f.has_inf             ? sign | exponent_ones
                            : f.nan == Nan::kNone ? sign | max
                                                  : nan;
  if (std::isnan(v)) return static_cast<uint8_t>(nan);
  const double a = std::fabs(v);
  if (std::isinf(a)) return static_cast<uint8_t>(overflow);
  uint32_t bits = 0;
  if (a != 0) {
    int e = 0;
    std::frexp(a, &e);  // a = g * 2^e, g in [0.5, 1): the unbiased exponent is e - 1.
    const int exponent = e - 1 + f.bias;
    if (exponent >= 1) {
      const double r = std::nearbyint(std::ldexp(a, m - (e - 1)));
      bits = (static_cast<uint32_t>(exponent) << m) + (static_cast<uint32_t>(r) - (1u << m));
    } else {
      // Subnormal: units of 2^(1 - bias - m); rounding up to 2^m is the smallest normal.
      bits = static_cast<uint32_t>(std::nearbyint(std::ldexp(a, m + f.bias - 1)));
    }
    if (bits > max) return static_cast<uint8_t>(overflow);
  }
  if (bits == 0 && f.nan == Nan::kNegativeZero) return 0;  // No negative zero.
  return static_cast<uint8_t>(sign | bits);
}

double DecodeMiniFloat(uint8_t bits, const MiniFloatFormat& f) {
  if (f.nan == Nan::kExponentOnly) {
    return bits == 0xff ? std::nan("") : std::ldexp(1.0, static_cast<int>(bits) - 127);
  }
  const int m = f.mantissa_bits;
  const uint32_t magnitude_bits = (1u << (f.exponent_bits + m)) - 1u;
  const uint32_t exponent_mask = (1u << f.exponent_bits) - 1u;
  const uint32_t magnitude = bits & magnitude_bits;
  const uint32_t exponent = magnitude >> m;
  const uint32_t mantissa = magnitude & ((1u << m) - 1u);
  const bool negative = (bits & (magnitude_bits + 1u)) != 0;
  if (f.nan == Nan::kNegativeZero && negative && magnitude == 0) return std::nan("");
  if (f.nan == Nan::kAllOnes && magnitude == magnitude_bits) return std::nan("");
  if (f.nan == Nan::kIeee && exponent == exponent_mask) {
    if (mantissa != 0) return std::nan("");
    return negative ? -HUGE_VAL : HUGE_VAL;
  }
  const double v = exponent == 0 ? std::ldexp(static_cast<double>(mantissa), 1 - f.bias - m)
                                 : std::ldexp(static_cast<double>(mantissa | (1u << m)),
                                              static_cast<int>(exponent) - f.bias - m);
  return negative ? -v : v;
}

}  // namespace hlocache::interp
