#include "compiler/interp/minifloat.h"

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
    default:
      return std::nullopt;
  }
}

uint8_t EncodeMiniFloat(double v, const MiniFloatFormat& f) {
  const int m = f.mantissa_bits;
  const uint32_t magnitude_bits = (1u << (f.exponent_bits + m)) - 1u;  // All but the sign.
  const uint32_t sign = std::signbit(v) ? magnitude_bits + 1u : 0u;
  const uint32_t exponent_ones = ((1u << f.exponent_bits) - 1u) << m;
  const uint32_t nan = f.nan == Nan::kIeee      ? sign | exponent_ones | (1u << (m - 1))
                       : f.nan == Nan::kAllOnes ? sign | magnitude_bits
                                                : magnitude_bits + 1u;
  // The largest finite magnitude's bits.
  const uint32_t max = f.nan == Nan::kIeee      ? exponent_ones - 1u
                       : f.nan == Nan::kAllOnes ? magnitude_bits - 1u
                                                : magnitude_bits;
  if (std::isnan(v)) return static_cast<uint8_t>(nan);
  const double a = std::fabs(v);
  if (std::isinf(a)) return static_cast<uint8_t>(f.has_inf ? sign | exponent_ones : nan);
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
    if (bits > max) return static_cast<uint8_t>(f.has_inf ? sign | exponent_ones : nan);
  }
  if (bits == 0 && f.nan == Nan::kNegativeZero) return 0;  // No negative zero.
  return static_cast<uint8_t>(sign | bits);
}

double DecodeMiniFloat(uint8_t bits, const MiniFloatFormat& f) {
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
