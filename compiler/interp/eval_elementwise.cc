// Elementwise ops beyond the core: bit counts, more transcendental functions, reduce-precision
// and bitcast-convert.
//
// popcnt(x) and count-leading-zeros(x) count the bits of an integer of its type's width (the
// leading zeros of 0 are the width). cbrt, tan, erf and the inverse and hyperbolic functions
// of floats are computed in double, then rounded once to the element type, like the core's.
//
// reduce-precision(x), exponent_bits=E, mantissa_bits=M rounds a float to the nearest value of
// a format with E exponent and M mantissa bits, working on x's own bits as XLA does: the
// mantissa is rounded to nearest even, then an exponent above the format's range becomes an
// infinity and one at or below its smallest normal exponent a zero (the format has no
// subnormals), both keeping x's sign. A NaN stays the same NaN, or becomes +inf when M is 0.
//
// bitcast-convert(x) reinterprets the bytes of x as the result's type: the same dimensions
// when both types have the same width; otherwise the narrower side has one more, last,
// dimension of the ratio of the widths (f32[N] <-> u8[N,4]), each element's bytes in memory
// order. pred takes no part.
//
// stochastic-convert(x, r) rounds a float to a signed integer up or down at random, as XLA's
// StochasticConvertDecomposer spells it out: the magnitude's fraction, scaled by 2^B (B the
// width of the unsigned random bits r, the width of x's type) in x's type (f32 for f16) and
// converted to r's type, rounds the magnitude up when r is below it; the sign is applied by a
// wrapping negation; x at or below the result type's smallest value (as x's type holds it) gives
// that value, at or above its largest the largest. Conversions saturate and NaN gives 0.
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "compiler/interp/eval_families.h"
#include "compiler/semantics/half.h"
#include "compiler/semantics/rules/families.h"

namespace hlocache::interp {
namespace {

using hlo::Instruction;
using hlo::Opcode;
using hlo::PrimitiveType;
using hlo::Shape;

// The format of a float type's bits: exponent and mantissa widths.
struct FloatBits {
  int exponent;
  int mantissa;
};

FloatBits FormatOf(PrimitiveType t) {
  switch (t) {
    case PrimitiveType::kF16:
      return {5, 10};
    case PrimitiveType::kBF16:
      return {8, 7};
    case PrimitiveType::kF32:
      return {8, 23};
    default:
      return {11, 52};
  }
}

// XLA's reduce-precision on the bits `u` of a float of format `src`.
uint64_t ReducePrecisionBits(uint64_t u, FloatBits src, int64_t exponent_bits,
                             int64_t mantissa_bits) {
  const uint64_t exponent_mask = ((uint64_t{1} << src.exponent) - 1) << src.mantissa;
  const uint64_t mantissa_mask = (uint64_t{1} << src.mantissa) - 1;
  const bool nan = (u & exponent_mask) == exponent_mask && (u & mantissa_mask) != 0;
  uint64_t r = u;
  if (mantissa_bits < src.mantissa) {
    const int dropped = src.mantissa - static_cast<int>(mantissa_bits);
    const uint64_t last_kept = uint64_t{1} << dropped;
    // Ties go to the even kept mantissa: half minus one, plus the last kept bit.
    r = (r + ((r & last_kept) >> dropped) + (last_kept / 2 - 1)) & ~(last_kept - 1);
  }
  if (exponent_bits < src.exponent) {
    const uint64_t sign = uint64_t{1} << (src.exponent + src.mantissa);
    const int64_t bias = (int64_t{1} << (src.exponent - 1)) - 1;
    const int64_t reduced_bias = (int64_t{1} << (exponent_bits - 1)) - 1;
    const uint64_t exponent = r & exponent_mask;
    if (exponent > static_cast<uint64_t>(bias + reduced_bias) << src.mantissa) {
      r = (r & sign) | exponent_mask;
    } else if (exponent <= static_cast<uint64_t>(bias - reduced_bias) << src.mantissa) {
      r &= sign;
    }
  }
  if (nan) r = mantissa_bits > 0 ? u : exponent_mask;
  return r;
}

double ReducePrecision(double v, PrimitiveType t, int64_t e, int64_t m) {
  switch (t) {
    case PrimitiveType::kF16:
      return DecodeHalf(
          static_cast<uint16_t>(ReducePrecisionBits(EncodeHalf(v, kF16Format), FormatOf(t), e, m)),
          kF16Format);
    case PrimitiveType::kBF16:
      return DecodeHalf(
          static_cast<uint16_t>(ReducePrecisionBits(EncodeHalf(v, kBF16Format), FormatOf(t), e, m)),
          kBF16Format);
    case PrimitiveType::kF32:
      return std::bit_cast<float>(static_cast<uint32_t>(
          ReducePrecisionBits(std::bit_cast<uint32_t>(static_cast<float>(v)), FormatOf(t), e, m)));
    default:
      return std::bit_cast<double>(
          ReducePrecisionBits(std::bit_cast<uint64_t>(v), FormatOf(t), e, m));
  }
}

double Transcendental(Opcode op, double x) {
  switch (op) {
    case Opcode::kCbrt:
      return std::cbrt(x);
    case Opcode::kTan:
      return std::tan(x);
    case Opcode::kErf:
      return std::erf(x);
    case Opcode::kAcos:
      return std::acos(x);
    case Opcode::kAcosh:
      return std::acosh(x);
    case Opcode::kAsin:
      return std::asin(x);
    case Opcode::kAsinh:
      return std::asinh(x);
    case Opcode::kAtan:
      return std::atan(x);
    case Opcode::kAtanh:
      return std::atanh(x);
    case Opcode::kCosh:
      return std::cosh(x);
    default:
      return std::sinh(x);
  }
}

// Float to integer as convert does: saturating at [lo, hi], NaN to 0, else truncated.
int64_t SaturatingInteger(double v, int64_t lo, int64_t hi) {
  if (std::isnan(v)) return 0;
  if (v <= static_cast<double>(lo)) return lo;
  if (v >= static_cast<double>(hi)) return hi;
  return static_cast<int64_t>(std::trunc(v));
}

Literal StochasticConvert(const Instruction& inst, const Literal& x, const Literal& random) {
  Literal out(inst.shape);
  const PrimitiveType t = out.type(), f = x.type();
  const int bits = hlo::PrimitiveTypeBits(t), random_bits = hlo::PrimitiveTypeBits(random.type());
  const int64_t lo = std::numeric_limits<int64_t>::min() >> (64 - bits);
  const int64_t hi = std::numeric_limits<int64_t>::max() >> (64 - bits);
  // The scaled fraction is converted to the unsigned random type: 0 .. 2^B - 1.
  const int64_t random_max =
      random_bits == 64 ? -1 : static_cast<int64_t>((uint64_t{1} << random_bits) - 1);
  const PrimitiveType scaled_type = f == PrimitiveType::kF16 ? PrimitiveType::kF32 : f;
  const double lo_f = RoundToType(static_cast<double>(lo), f);
  const double hi_f = RoundToType(static_cast<double>(hi), f);
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = x.GetFloat(i);
    const double magnitude = std::fabs(v), whole = std::floor(magnitude);
    const double scaled = RoundToType(std::ldexp(magnitude - whole, random_bits), scaled_type);
    uint64_t threshold;
    if (std::isnan(scaled)) {
      threshold = 0;
    } else if (scaled >= std::ldexp(1.0, random_bits) - 1) {
      threshold = static_cast<uint64_t>(random_max);
    } else {
      threshold = static_cast<uint64_t>(std::trunc(scaled));
    }
    int64_t r = SaturatingInteger(whole, lo, hi);
    if (static_cast<uint64_t>(random.GetInt(i)) < threshold) r = WrapToType(r + 1, t);
    if (v < 0) r = WrapToType(static_cast<int64_t>(0 - static_cast<uint64_t>(r)), t);
    if (v <= lo_f) r = lo;
    if (v >= hi_f) r = hi;
    out.SetInt(i, r);
  }
  return out;
}

Result<Literal> Eval(EvalContext& ctx, const Instruction& inst,
                     std::span<const Literal* const> operands) {
  const Literal& x = *operands[0];
  const Opcode op = inst.opcode.opcode;
  if (op == Opcode::kStochasticConvert) return StochasticConvert(inst, x, *operands[1]);
  if (op == Opcode::kBitcastConvert) return FromBytes(inst.shape, ToBytes(x));
  Literal out(inst.shape);
  const PrimitiveType t = x.type();
  if (op == Opcode::kPopulationCount || op == Opcode::kClz) {
    const int width = hlo::PrimitiveTypeBits(t);
    const uint64_t mask = width == 64 ? ~uint64_t{0} : (uint64_t{1} << width) - 1;
    for (size_t i = 0; i < x.size(); ++i) {
      const uint64_t bits = static_cast<uint64_t>(x.GetInt(i)) & mask;
      out.SetInt(i, op == Opcode::kPopulationCount ? std::popcount(bits)
                                                   : std::countl_zero(bits) - (64 - width));
    }
    return out;
  }
  if (op == Opcode::kReducePrecision) {
    HLOCACHE_ASSIGN_OR_RETURN(int64_t e, ctx.IntOr(inst, "exponent_bits", -1));
    HLOCACHE_ASSIGN_OR_RETURN(int64_t m, ctx.IntOr(inst, "mantissa_bits", -1));
    for (size_t i = 0; i < x.size(); ++i) out.SetFloat(i, ReducePrecision(x.GetFloat(i), t, e, m));
    return out;
  }
  for (size_t i = 0; i < x.size(); ++i) out.SetFloat(i, Transcendental(op, x.GetFloat(i)));
  return out;
}

}  // namespace

OpFamily ElementwiseOps() { return {ElementwiseRules().takes, Eval}; }

}  // namespace hlocache::interp
