// Elementwise ops beyond the core: bit counts, more transcendental functions, reduce-precision
// and bitcast-convert. Hand-computed values for the interpreter, then the compiled code against
// it on the same inputs, edge values included.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "tests/unit/compiler/ops/op_check.h"

namespace hlocache::compiler {
namespace {

using hlo::PrimitiveType;
using interp::Literal;
using op_check::ExpectMalformed;
using op_check::ExpectValue;
using op_check::Replaced;

// A module applying `op` (with `attrs`) to one parameter of `in`, returning `out`.
std::string Unary(const std::string& in, const std::string& out, const std::string& op,
                  const std::string& attrs = "") {
  return "HloModule m\n\nENTRY e {\n  x = " + in + " parameter(0)\n  ROOT r = " + out + " " + op +
         "(x)" + attrs + "\n}\n";
}

TEST(ElementwiseOpsTest, PopcntCountsTheBitsOfTheTypesWidth) {
  ExpectValue(Unary("s32[5]", "s32[5]", "popcnt"),
              {Array(PrimitiveType::kS32, {5}, {0, 1, -1, 255, -2147483648.0})},
              Array(PrimitiveType::kS32, {5}, {0, 1, 32, 8, 1}));
  ExpectValue(Unary("s8[3]", "s8[3]", "popcnt"), {Array(PrimitiveType::kS8, {3}, {-1, -128, 7})},
              Array(PrimitiveType::kS8, {3}, {8, 1, 3}));
  ExpectValue(Unary("u64[2]", "u64[2]", "popcnt"),
              {Array(PrimitiveType::kU64, {2}, {0, 4294967296.0 * 3})},
              Array(PrimitiveType::kU64, {2}, {0, 2}));
}

TEST(ElementwiseOpsTest, CountLeadingZerosOfZeroIsTheWidth) {
  ExpectValue(Unary("s32[5]", "s32[5]", "count-leading-zeros"),
              {Array(PrimitiveType::kS32, {5}, {0, 1, -1, 65536, 2147483647})},
              Array(PrimitiveType::kS32, {5}, {32, 31, 0, 15, 1}));
  ExpectValue(Unary("u8[4]", "u8[4]", "count-leading-zeros"),
              {Array(PrimitiveType::kU8, {4}, {0, 1, 128, 15})},
              Array(PrimitiveType::kU8, {4}, {8, 7, 0, 4}));
  ExpectValue(Unary("s16[2]", "s16[2]", "count-leading-zeros"),
              {Array(PrimitiveType::kS16, {2}, {-5, 3})}, Array(PrimitiveType::kS16, {2}, {0, 14}));
}

TEST(ElementwiseOpsTest, TranscendentalFunctionsRoundOnceToTheType) {
  ExpectValue(Unary("f32[3]", "f32[3]", "cbrt"), {Array(PrimitiveType::kF32, {3}, {27, -8, 0})},
              Array(PrimitiveType::kF32, {3}, {3, -2, 0}));
  ExpectValue(Unary("f64[2]", "f64[2]", "tan"), {Array(PrimitiveType::kF64, {2}, {0, 0.5})},
              Array(PrimitiveType::kF64, {2}, {0, std::tan(0.5)}));
  ExpectValue(Unary("f32[2]", "f32[2]", "erf"), {Array(PrimitiveType::kF32, {2}, {0, 1})},
              Array(PrimitiveType::kF32, {2}, {0, static_cast<float>(std::erf(1.0))}));
  ExpectValue(Unary("bf16[2]", "bf16[2]", "erf"), {Array(PrimitiveType::kBF16, {2}, {0, 3})},
              Array(PrimitiveType::kBF16, {2}, {0, 1}));  // erf(3) = 0.99997..., 1 in bf16.
  for (const char* op : {"acos", "asin", "atan", "acosh", "asinh", "atanh", "cosh", "sinh"}) {
    SCOPED_TRACE(op);
    ExpectCompiledMatchesInterpreter(Unary("f32[5]", "f32[5]", op),
                                     {Array(PrimitiveType::kF32, {5}, {-0.5, 0, 0.25, 1, 2})});
  }
}

TEST(ElementwiseOpsTest, ReducePrecisionRoundsTheMantissaToNearestEven) {
  const std::string to_bf16 =
      Unary("f32[5]", "f32[5]", "reduce-precision", ", exponent_bits=8, mantissa_bits=7");
  // bf16 keeps 7 mantissa bits: steps of 2^-7 near 1. 1 + 2^-8 is a tie, to the even 1;
  // 1 + 3 * 2^-8 a tie, to the even 1 + 2^-6; 1 + 2^-8 + 2^-20 is above the tie.
  ExpectValue(to_bf16,
              {Array(PrimitiveType::kF32, {5},
                     {1 + 0x1p-8, 1 + 3 * 0x1p-8, 1 + 0x1p-8 + 0x1p-20, -3.0, 0x1.fffffep127})},
              Array(PrimitiveType::kF32, {5},
                    {1, 1 + 0x1p-6, 1 + 0x1p-7, -3.0, std::numeric_limits<double>::infinity()}));
}

TEST(ElementwiseOpsTest, ReducePrecisionFlushesOutOfRangeExponentsKeepingTheSign) {
  const std::string to_f16 =
      Unary("f32[6]", "f32[6]", "reduce-precision", ", exponent_bits=5, mantissa_bits=10");
  const double inf = std::numeric_limits<double>::infinity();
  // f16's largest finite value is 65504; its smallest normal 2^-14: anything at or below the
  // exponent under it is zero (no subnormals).
  ExpectValue(to_f16,
              {Array(PrimitiveType::kF32, {6}, {70000, -70000, 65504, 0x1p-14, 0x1p-15, -1e-8})},
              Array(PrimitiveType::kF32, {6}, {inf, -inf, 65504, 0x1p-14, 0, -0.0}));
}

TEST(ElementwiseOpsTest, ReducePrecisionKeepsNaNUnlessNoMantissaIsLeft) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  auto keep = op_check::Eval(
      Unary("f32[2]", "f32[2]", "reduce-precision", ", exponent_bits=5, mantissa_bits=2"),
      {Array(PrimitiveType::kF32, {2}, {nan, 1.75})});
  ASSERT_THAT(keep, IsOk());
  EXPECT_TRUE(std::isnan(keep->GetFloat(0)));
  EXPECT_EQ(keep->GetFloat(1), 1.75);
  const std::string none =
      Unary("f32[3]", "f32[3]", "reduce-precision", ", exponent_bits=3, mantissa_bits=0");
  // 1.75 rounds to 2 with no mantissa; NaN becomes +inf.
  ExpectValue(none, {Array(PrimitiveType::kF32, {3}, {nan, 1.75, -1.25})},
              Array(PrimitiveType::kF32, {3}, {inf, 2, -1}));
  // The same rules on the bits of the 16- and 64-bit types.
  for (const char* type : {"bf16", "f16", "f64"}) {
    SCOPED_TRACE(type);
    const std::string shape = std::string(type) + "[8]";
    const PrimitiveType t = std::string(type) == "bf16"  ? PrimitiveType::kBF16
                            : std::string(type) == "f16" ? PrimitiveType::kF16
                                                         : PrimitiveType::kF64;
    ExpectCompiledMatchesInterpreter(
        Unary(shape, shape, "reduce-precision", ", exponent_bits=4, mantissa_bits=3"),
        {Array(t, {8}, {nan, inf, -inf, 0, -0.0, 1.0625, 300, 0.001})});
  }
}

TEST(ElementwiseOpsTest, BitcastConvertReinterpretsBytes) {
  ExpectValue(Unary("f32[2]", "u32[2]", "bitcast-convert"),
              {Array(PrimitiveType::kF32, {2}, {1.0, -2.0})},
              Array(PrimitiveType::kU32, {2}, {0x3f800000, 0xc0000000}));
  // A wider type becomes its bytes in memory order, in a new last dimension, and back.
  ExpectValue(Unary("f32[2]", "u8[2,4]", "bitcast-convert"),
              {Array(PrimitiveType::kF32, {2}, {1.0, -2.0})},
              Array(PrimitiveType::kU8, {2, 4}, {0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0}));
  ExpectValue(Unary("u16[3,2]", "s32[3]", "bitcast-convert"),
              {Array(PrimitiveType::kU16, {3, 2}, {1, 0, 0, 1, 0xffff, 0xffff})},
              Array(PrimitiveType::kS32, {3}, {1, 65536, -1}));
  ExpectValue(Unary("bf16[2]", "s16[2]", "bitcast-convert"),
              {Array(PrimitiveType::kBF16, {2}, {1.0, -0.0})},
              Array(PrimitiveType::kS16, {2}, {0x3f80, -32768}));
}

// Uniform floats in [1, 2) from random bits, as jax.random does: shifts, or, bitcast-convert,
// then arithmetic, in one fused loop.
TEST(ElementwiseOpsTest, RandomBitsToUniformFloatsMatchTheInterpreter) {
  const std::string text = R"(HloModule m

ENTRY e {
  bits = u32[64] parameter(0)
  nine = u32[] constant(9)
  shift = u32[64] broadcast(nine), dimensions={}
  mantissa = u32[64] shift-right-logical(bits, shift)
  one_bits = u32[] constant(1065353216)
  exponent = u32[64] broadcast(one_bits), dimensions={}
  both = u32[64] or(mantissa, exponent)
  f = f32[64] bitcast-convert(both)
  one = f32[] constant(1)
  ones = f32[64] broadcast(one), dimensions={}
  u = f32[64] subtract(f, ones)
  c = u32[64] popcnt(bits)
  z = u32[64] count-leading-zeros(bits)
  s = u32[64] add(c, z)
  p = f32[64] reduce-precision(u), exponent_bits=5, mantissa_bits=10
  ROOT t = (f32[64], u32[64], f32[64]) tuple(u, s, p)
}
)";
  ExpectCompiledMatchesInterpreterOnRandomInputs(text, 7);
  ExpectCompiledMatchesInterpreterOnRandomInputs(text, 8);
}

// stochastic-convert: the fraction 0.25 of 2.25 scaled to u32 is 2^30; bits below it round
// the magnitude up. Negative values round their magnitude; the extremes saturate.
TEST(ElementwiseOpsTest, StochasticConvertRoundsUpWhenTheBitsAreBelowTheFraction) {
  const std::string text =
      "HloModule m\n\nENTRY e {\n  x = f32[8] parameter(0)\n  r = u32[8] parameter(1)\n"
      "  ROOT c = s8[8] stochastic-convert(x, r)\n}\n";
  const std::vector<Literal> args = {
      Array(PrimitiveType::kF32, {8}, {2.25, 2.25, -2.25, -2.25, 1000, -1000, NAN, -127.5}),
      Array(PrimitiveType::kU32, {8}, {1073741823, 1073741824, 0, 4294967295.0, 0, 0, 0, 0})};
  ExpectValue(text, args, Array(PrimitiveType::kS8, {8}, {3, 2, -3, -2, 127, -128, 0, -128}));
  ExpectCompiledMatchesInterpreter(text, args);
  for (const char* types : {"bf16|u16|s32", "f16|u16|s16", "f64|u64|s64", "f32|u32|s64"}) {
    std::string t = types;
    const std::string f = t.substr(0, t.find('|')), rest = t.substr(t.find('|') + 1);
    const std::string r = rest.substr(0, rest.find('|')), out = rest.substr(rest.find('|') + 1);
    SCOPED_TRACE(types);
    ExpectCompiledMatchesInterpreterOnRandomInputs(
        "HloModule m\n\nENTRY e {\n  x = " + f + "[64] parameter(0)\n  s = " + f +
            "[] constant(300)\n  b = " + f + "[64] broadcast(s), dimensions={}\n  y = " + f +
            "[64] multiply(x, b)\n  r = " + r + "[64] parameter(1)\n  ROOT c = " + out +
            "[64] stochastic-convert(y, r)\n}\n",
        3);
  }
  ExpectMalformed(Replaced(text, "u32[8] parameter(1)", "u16[8] parameter(1)"), "ROOT c",
                  "unsigned random bits of its width");
  ExpectMalformed(Replaced(text, "u32[8] parameter(1)", "u32[4] parameter(1)"), "ROOT c",
                  "not of the operand's dimensions");
}

TEST(ElementwiseOpsTest, MalformedElementwiseOpsAreRefusedWithTheirLine) {
  ExpectMalformed(Unary("f32[4]", "f32[4]", "popcnt"), "ROOT r", "counts bits of integers only");
  ExpectMalformed(Unary("s32[4]", "s32[4]", "erf"), "ROOT r", "takes floats only");
  ExpectMalformed(Unary("f32[4]", "f32[3]", "cbrt"), "ROOT r", "not of the operand's shape");
  const std::string rp =
      Unary("f32[4]", "f32[4]", "reduce-precision", ", exponent_bits=8, mantissa_bits=7");
  ExpectMalformed(Replaced(rp, ", exponent_bits=8", ""), "ROOT r", "exponent_bits >= 1");
  ExpectMalformed(Replaced(rp, "exponent_bits=8", "exponent_bits=0"), "ROOT r",
                  "exponent_bits >= 1");
  ExpectMalformed(Unary("f32[4]", "u8[4]", "bitcast-convert"), "ROOT r",
                  "does not hold the operand's bytes");
  ExpectMalformed(Unary("u8[4,2]", "f32[4]", "bitcast-convert"), "ROOT r",
                  "last dimension is not 4");
}

}  // namespace
}  // namespace hlocache::compiler
