// The small floating-point formats of XLA (ml_dtypes' float8, float6 and float4 types) to and
// from double: f8e5m2, f8e4m3 and f8e3m4 (IEEE-like: infinities, NaN with an all-ones exponent),
// f8e4m3fn (no infinities; NaN only S.1111.111), f8e4m3fnuz, f8e5m2fnuz, f8e4m3b11fnuz (no
// infinities, no negative zero; NaN is 0x80), the microscaling element types f6e2m3fn,
// f6e3m2fn and f4e2m1fn (no infinities, no NaN; one per byte, in its low bits) and the
// microscaling scale type f8e8m0fnu (2^(bits - 127): no sign, no mantissa, no zero; NaN is 0xff).
//
// Encoding rounds to nearest, ties to even, straight from double. A value past the largest
// finite one after rounding becomes infinity where the format has one and NaN where it does not
// (ml_dtypes' conversion, which does not saturate); NaN stays NaN; a format without negative
// zero gives +0 for -0 and for negative values that round to zero. The formats without NaN or
// infinity saturate: infinities and values past the largest become the largest of their sign,
// and NaN becomes the sign bit alone, -0 (ml_dtypes' quiet_NaN() of these types; MX leaves the
// conversion of NaN to the implementation, and the sign of a NaN is not one C++ arithmetic pins
// down, so it is not looked at). f8e8m0fnu follows ml_dtypes' conversion bit for bit: a
// significand of 1.5 or more rounds up to the next power of two, values at or under 2^-127 become
// 2^-127 (and values above it up to 2^-126, where the format's missing subnormals round), and zero,
// negative values, infinities, NaN and values past 2^127 become NaN. The code generator's prelude
// spells out the same algorithm, so compiled code and the interpreter agree bit for bit.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>

#include "compiler/hlo/shape.h"

namespace hlocache::interp {

struct MiniFloatFormat {
  // Where NaN is: an all-ones exponent (IEEE), the all-ones magnitude, the negative zero; no NaN
  // at all; or f8e8m0fnu's 0xff in a format of exponent bits alone.
  enum class Nan { kIeee, kAllOnes, kNegativeZero, kNone, kExponentOnly };
  int exponent_bits;
  int mantissa_bits;
  int bias;
  bool has_inf;
  Nan nan;
};

// The format of an 8-, 6- or 4-bit float type; nullopt for every other type.
std::optional<MiniFloatFormat> MiniFloatFormatOf(hlo::PrimitiveType type);

uint8_t EncodeMiniFloat(double v, const MiniFloatFormat& format);
double DecodeMiniFloat(uint8_t bits, const MiniFloatFormat& format);

}  // namespace hlocache::interp
