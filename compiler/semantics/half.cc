#include "compiler/semantics/half.h"

#include <cmath>

namespace hlocache::interp {

uint16_t EncodeHalf(double v, HalfFormat f) {
  const int m = f.mantissa_bits;
  const int bias = (1 << (f.exponent_bits - 1)) - 1;
  const uint32_t sign = std::signbit(v) ? 0x8000u : 0u;
  const uint32_t inf = ((1u << f.exponent_bits) - 1u) << m;
  if (std::isnan(v)) return static_cast<uint16_t>(sign | inf | (1u << (m - 1)));
  const double a = std::fabs(v);
  if (a == 0) return static_cast<uint16_t>(sign);
  if (std::isinf(a)) return static_cast<uint16_t>(sign | inf);
  int e = 0;
  std::frexp(a, &e);  // a = f * 2^e, f in [0.5, 1): the unbiased exponent is e - 1.
  const int exponent = e - 1 + bias;
  uint32_t bits = 0;
  if (exponent >= 1) {
    // Scaled into [2^m, 2^(m+1)) exactly, then rounded to an integer: ties go to even under the
    // default rounding mode. A carry into the exponent lands there by the addition.
    const double r = std::nearbyint(std::ldexp(a, m - (e - 1)));
    bits = (static_cast<uint32_t>(exponent) << m) + (static_cast<uint32_t>(r) - (1u << m));
  } else {
    // Subnormal: units of 2^(1 - bias - m). Rounding up to 2^m is the smallest normal number.
    bits = static_cast<uint32_t>(std::nearbyint(std::ldexp(a, m + bias - 1)));
  }
  if (bits >= inf) bits = inf;
  return static_cast<uint16_t>(sign | bits);
}

double DecodeHalf(uint16_t bits, HalfFormat f) {
  const int m = f.mantissa_bits;
  const int bias = (1 << (f.exponent_bits - 1)) - 1;
  const uint32_t exp_mask = (1u << f.exponent_bits) - 1u;
  const uint32_t exponent = (bits >> m) & exp_mask;
  const uint32_t mantissa = bits & ((1u << m) - 1u);
  double v = 0;
  if (exponent == exp_mask) {
    v = mantissa != 0 ? std::nan("") : HUGE_VAL;
  } else if (exponent == 0) {
    v = std::ldexp(static_cast<double>(mantissa), 1 - bias - m);
  } else {
    v = std::ldexp(static_cast<double>(mantissa | (1u << m)),
                   static_cast<int>(exponent) - bias - m);
  }
  return (bits & 0x8000u) ? -v : v;
}

}  // namespace hlocache::interp
