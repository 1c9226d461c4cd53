// 16-bit floating-point formats (f16: IEEE binary16; bf16: bfloat16) to and from double.
//
// Encoding rounds to nearest, ties to even, straight from double (never through float, which
// would round twice), with overflow to infinity, gradual underflow, and NaN kept as a quiet NaN
// of the same sign. The code generator's prelude spells out the same algorithm for generated
// code, so compiled executables and the interpreter agree bit for bit.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>

namespace hlocache::interp {

struct HalfFormat {
  int exponent_bits;
  int mantissa_bits;
};
inline constexpr HalfFormat kF16Format{5, 10};
inline constexpr HalfFormat kBF16Format{8, 7};

uint16_t EncodeHalf(double v, HalfFormat format);
double DecodeHalf(uint16_t bits, HalfFormat format);

}  // namespace hlocache::interp
