// The 8-bit floating-point formats of XLA (ml_dtypes' float8 types) to and from double:
// f8e5m2, f8e4m3 and f8e3m4 (IEEE-like: infinities, NaN with an all-ones exponent), f8e4m3fn
// (no infinities; NaN only S.1111.111), and f8e4m3fnuz, f8e5m2fnuz, f8e4m3b11fnuz (no
// infinities, no negative zero; NaN is 0x80).
//
// Encoding rounds to nearest, ties to even, straight from double. A value past the largest
// finite one after rounding becomes infinity where the format has one and NaN where it does not
// (ml_dtypes' conversion, which does not saturate); NaN stays NaN; a format without negative
// zero gives +0 for -0 and for negative values that round to zero. The code generator's prelude
// spells out the same algorithm, so compiled code and the interpreter agree bit for bit.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>

#include "compiler/hlo/shape.h"

namespace hlocache::interp {

struct MiniFloatFormat {
  enum class Nan { kIeee, kAllOnes, kNegativeZero };
  int exponent_bits;
  int mantissa_bits;
  int bias;
  bool has_inf;
  Nan nan;
};

// The format of an 8-bit float type; nullopt for every other type.
std::optional<MiniFloatFormat> MiniFloatFormatOf(hlo::PrimitiveType type);

uint8_t EncodeMiniFloat(double v, const MiniFloatFormat& format);
double DecodeMiniFloat(uint8_t bits, const MiniFloatFormat& format);

}  // namespace hlocache::interp
