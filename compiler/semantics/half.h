// 16-bit floating-point formats (f16: IEEE binary16; bf16: bfloat16) to and from double.
//
// Encoding rounds to nearest, ties to even, straight from double (never through float, which
// would round twice), with overflow to infinity, gradual underflow, and NaN kept as a quiet NaN
// of the same sign. Decoding is exact; a NaN keeps its sign and payload and comes out quiet, as
// a hardware widening does.
//
// The code is written once, in HLOCACHE_HALF_CODE, on the bits alone (no libm, no headers): the
// interpreter compiles it here, and the CPU and CUDA generators paste its text (kHalfSource)
// after their preludes, so compiled executables and the interpreter agree bit for bit.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>

// clang-format off
#define HLOCACHE_HALF_CODE                                                                     \
  /* The bits of the float with eb exponent and m mantissa bits nearest to the double whose  \
     bits are d. */                                                                            \
  inline uint16_t hc_half_from_double_bits(uint64_t d, int eb, int m) {                        \
    const uint32_t sign = static_cast<uint32_t>(d >> 48) & 0x8000u;                            \
    const int dexp = static_cast<int>((d >> 52) & 0x7ffu);                                     \
    const uint64_t fraction = d & ((static_cast<uint64_t>(1) << 52) - 1);                     \
    const uint32_t inf = ((1u << eb) - 1u) << m;                                               \
    if (dexp == 0x7ff) {                                                                       \
      return static_cast<uint16_t>(sign | inf | (fraction != 0 ? 1u << (m - 1) : 0u));         \
    }                                                                                          \
    /* Zero, and double subnormals: far below half of any 16-bit format's smallest value. */   \
    if (dexp == 0) return static_cast<uint16_t>(sign);                                         \
    const int bias = (1 << (eb - 1)) - 1;                                                      \
    int exponent = dexp - 1023 + bias;                                                         \
    int drop = 52 - m; /* Low significand bits that do not fit. */                            \
    if (exponent < 1) { /* Subnormal in the target: units of its smallest value. */           \
      drop += 1 - exponent;                                                                    \
      exponent = 0;                                                                            \
    }                                                                                          \
    if (drop > 53) return static_cast<uint16_t>(sign); /* Below half the smallest: zero. */   \
    const uint64_t significand = fraction | (static_cast<uint64_t>(1) << 52);                 \
    uint64_t kept = significand >> drop;                                                       \
    const uint64_t rest = significand & ((static_cast<uint64_t>(1) << drop) - 1);             \
    const uint64_t halfway = static_cast<uint64_t>(1) << (drop - 1);                          \
    if (rest > halfway || (rest == halfway && (kept & 1) != 0)) ++kept;                        \
    /* A carry out of the mantissa lands in the exponent by the addition; a subnormal that    \
       rounds up to 2^m is the smallest normal number. */                                      \
    uint32_t bits = exponent == 0 ? static_cast<uint32_t>(kept)                               \
                                  : (static_cast<uint32_t>(exponent) << m) +                   \
                                        static_cast<uint32_t>(kept - (1u << m));               \
    if (bits >= inf) bits = inf;                                                               \
    return static_cast<uint16_t>(sign | bits);                                                 \
  }                                                                                            \
  /* The bits of the double equal to the float with eb exponent and m mantissa bits whose     \
     bits are h. */                                                                            \
  inline uint64_t hc_double_bits_from_half(uint32_t h, int eb, int m) {                        \
    const uint64_t sign = static_cast<uint64_t>(h & 0x8000u) << 48;                            \
    const int bias = (1 << (eb - 1)) - 1;                                                      \
    const int max_exponent = (1 << eb) - 1;                                                    \
    const int exponent = static_cast<int>((h >> m) & static_cast<uint32_t>(max_exponent));    \
    uint64_t mantissa = h & ((1u << m) - 1u);                                                  \
    if (exponent == max_exponent) {                                                            \
      const uint64_t quiet = mantissa != 0 ? static_cast<uint64_t>(1) << 51 : 0;               \
      return sign | (static_cast<uint64_t>(0x7ff) << 52) | (mantissa << (52 - m)) | quiet;    \
    }                                                                                          \
    if (exponent == 0) {                                                                       \
      if (mantissa == 0) return sign;                                                          \
      int e = 1 - bias; /* Normalized: the leading one moves to bit m. */                      \
      while ((mantissa >> m) == 0) {                                                           \
        mantissa <<= 1;                                                                        \
        --e;                                                                                   \
      }                                                                                        \
      return sign | (static_cast<uint64_t>(e + 1023) << 52) |                                  \
             ((mantissa & ((1u << m) - 1u)) << (52 - m));                                      \
    }                                                                                          \
    return sign | (static_cast<uint64_t>(exponent - bias + 1023) << 52) | (mantissa << (52 - m)); \
  }
// clang-format on

#define HLOCACHE_HALF_STRINGIFY(...) #__VA_ARGS__
#define HLOCACHE_HALF_TEXT(...) HLOCACHE_HALF_STRINGIFY(__VA_ARGS__)

namespace hlocache::compiler {

// HLOCACHE_HALF_CODE as source text, pasted after the preludes of generated code (which
// declare its two functions).
inline constexpr const char* kHalfSource = HLOCACHE_HALF_TEXT(HLOCACHE_HALF_CODE);

}  // namespace hlocache::compiler

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
