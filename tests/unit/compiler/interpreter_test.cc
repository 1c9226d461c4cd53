// The reference interpreter on hand-written modules with hand-computed results.
#include "compiler/interp/interpreter.h"
#include "compiler/semantics/minifloat.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "compiler/hlo/parser.h"
#include "tests/unit/status_matchers.h"

namespace hlocache::interp {
namespace {

using hlo::PrimitiveType;
using ::testing::HasSubstr;

hlo::Shape ArrayShape(PrimitiveType type, std::vector<int64_t> dims) {
  hlo::Shape s;
  s.type = type;
  s.dims = std::move(dims);
  return s;
}

Literal Floats(PrimitiveType type, std::vector<int64_t> dims, const std::vector<double>& v) {
  Literal l(ArrayShape(type, std::move(dims)));
  for (size_t i = 0; i < v.size(); ++i) l.SetFloat(i, v[i]);
  return l;
}

Literal Ints(PrimitiveType type, std::vector<int64_t> dims, const std::vector<int64_t>& v) {
  Literal l(ArrayShape(type, std::move(dims)));
  for (size_t i = 0; i < v.size(); ++i) l.SetInt(i, v[i]);
  return l;
}

std::vector<double> FloatsOf(const Literal& l) {
  std::vector<double> v;
  for (size_t i = 0; i < l.size(); ++i) v.push_back(l.GetFloat(i));
  return v;
}
std::vector<int64_t> IntsOf(const Literal& l) {
  std::vector<int64_t> v;
  for (size_t i = 0; i < l.size(); ++i) v.push_back(l.GetInt(i));
  return v;
}

Result<Literal> EvalText(const std::string& text, std::vector<Literal> args) {
  auto m = hlo::ParseModule(text, "t.hlo");
  if (!m) return Error(m.error());
  return Evaluate(*m, args);
}

TEST(InterpreterTest, FloatArithmeticRoundsToF32OnEveryStep) {
  auto r = EvalText(R"(ENTRY e {
  a = f32[4] parameter(0)
  b = f32[4] parameter(1)
  s = f32[4] add(a, b)
  m = f32[4] multiply(s, b)
  ROOT d = f32[4] divide(m, a)
})",
                    {Floats(PrimitiveType::kF32, {4}, {1, 2, 0.1, -3}),
                     Floats(PrimitiveType::kF32, {4}, {3, 0.5, 0.2, 3})});
  ASSERT_THAT(r, IsOk());
  const float s2 = 0.1f + 0.2f;
  const float m2 = s2 * 0.2f;
  EXPECT_EQ(FloatsOf(*r), (std::vector<double>{12, 0.625, static_cast<float>(m2 / 0.1f), -0.0}));
}

// The 8-bit float formats' encodings, from ml_dtypes' definitions: largest finite values, ties
// to even, overflow to infinity or NaN, subnormals, and which formats have a negative zero.
TEST(InterpreterTest, EightBitFloatsRoundAsTheirFormatsSay) {
  auto encode = [](PrimitiveType t, double v) {
    return static_cast<int>(EncodeMiniFloat(v, *MiniFloatFormatOf(t)));
  };
  auto decode = [](PrimitiveType t, int bits) {
    return DecodeMiniFloat(static_cast<uint8_t>(bits), *MiniFloatFormatOf(t));
  };
  const PrimitiveType fn = PrimitiveType::kF8E4M3FN, e5 = PrimitiveType::kF8E5M2;
  const PrimitiveType fnuz = PrimitiveType::kF8E4M3FNUZ;
  EXPECT_EQ(encode(fn, 1.0), 0x38);
  EXPECT_EQ(encode(fn, 448), 0x7e);
  EXPECT_EQ(encode(fn, 464), 0x7e);  // The tie between 448 and 480 goes to even 448.
  EXPECT_EQ(encode(fn, 465), 0x7f);  // Past the largest finite: NaN (no infinity).
  EXPECT_EQ(encode(fn, -INFINITY), 0xff);
  EXPECT_EQ(encode(fn, 0x1p-9), 0x01);    // The smallest subnormal.
  EXPECT_EQ(encode(fn, -0x1p-10), 0x80);  // A tie to zero keeps its sign.
  EXPECT_TRUE(std::isnan(decode(fn, 0x7f)));
  EXPECT_EQ(decode(fn, 0x7e), 448);
  EXPECT_EQ(decode(fn, 0xfe), -448);
  EXPECT_EQ(encode(e5, 57344), 0x7b);
  EXPECT_EQ(encode(e5, 61440), 0x7c);  // The tie above the largest goes to infinity.
  EXPECT_EQ(decode(e5, 0x7c), INFINITY);
  EXPECT_TRUE(std::isnan(decode(e5, 0x7e)));
  EXPECT_EQ(encode(PrimitiveType::kF8E4M3, 240), 0x77);
  EXPECT_EQ(encode(PrimitiveType::kF8E4M3, 1e9), 0x78);  // Infinity.
  EXPECT_EQ(encode(PrimitiveType::kF8E3M4, 15.5), 0x6f);
  EXPECT_EQ(encode(fnuz, 1.0), 0x40);
  EXPECT_EQ(encode(fnuz, 240), 0x7f);
  EXPECT_EQ(encode(fnuz, -0.0), 0x00);  // No negative zero.
  EXPECT_EQ(encode(fnuz, -0x1p-12), 0x00);
  EXPECT_EQ(encode(fnuz, NAN), 0x80);
  EXPECT_TRUE(std::isnan(decode(fnuz, 0x80)));
  EXPECT_EQ(encode(PrimitiveType::kF8E5M2FNUZ, 57344), 0x7f);
  EXPECT_EQ(encode(PrimitiveType::kF8E4M3B11FNUZ, 1.0), 0x58);
  EXPECT_EQ(decode(PrimitiveType::kF8E4M3B11FNUZ, 0x7f), 30);
  // The microscaling element types: no infinity, no NaN; they saturate.
  const PrimitiveType f4 = PrimitiveType::kF4E2M1FN, e8 = PrimitiveType::kF8E8M0FNU;
  EXPECT_EQ(encode(f4, 1.0), 0x2);
  EXPECT_EQ(encode(f4, 6.0), 0x7);
  EXPECT_EQ(encode(f4, 7.0), 0x7);  // The tie between 6 and 8 goes past the largest: saturated.
  EXPECT_EQ(encode(f4, 1e9), 0x7);
  EXPECT_EQ(encode(f4, -INFINITY), 0xf);
  EXPECT_EQ(encode(f4, NAN), 0x8);   // No NaN: the sign bit alone.
  EXPECT_EQ(encode(f4, 0.25), 0x0);  // A tie between 0 and 0.5 goes to even.
  EXPECT_EQ(encode(f4, 0.75), 0x2);  // A tie between 0.5 and 1 goes to even.
  EXPECT_EQ(decode(f4, 0x1), 0.5);
  EXPECT_EQ(decode(f4, 0xf), -6);
  EXPECT_EQ(decode(f4, 0xf2), 1.0);  // The byte's upper bits are not the value's.
  EXPECT_TRUE(std::signbit(decode(f4, 0x8)));
  EXPECT_EQ(encode(PrimitiveType::kF6E2M3FN, 100), 0x1f);
  EXPECT_EQ(decode(PrimitiveType::kF6E2M3FN, 0x1f), 7.5);
  EXPECT_EQ(encode(PrimitiveType::kF6E3M2FN, -100), 0x3f);
  EXPECT_EQ(decode(PrimitiveType::kF6E3M2FN, 0x1f), 28);
  // The scale type: powers of two, a significand of 1.5 or more rounding up.
  EXPECT_EQ(encode(e8, 1.0), 127);
  EXPECT_EQ(encode(e8, 2.9), 128);
  EXPECT_EQ(encode(e8, 3.0), 129);
  EXPECT_EQ(encode(e8, 0x1p127), 254);
  EXPECT_EQ(encode(e8, 0x1.8p127), 0xff);  // Rounds past 2^127: NaN.
  EXPECT_EQ(encode(e8, 0x1p-127), 0);
  EXPECT_EQ(encode(e8, 0x1p-140), 0);    // Under the smallest: the smallest.
  EXPECT_EQ(encode(e8, 0x1.4p-127), 1);  // Between 2^-127 and 2^-126: up, as ml_dtypes does.
  EXPECT_EQ(encode(e8, 0.0), 0xff);      // No zero.
  EXPECT_EQ(encode(e8, -1.0), 0xff);     // No sign.
  EXPECT_EQ(encode(e8, INFINITY), 0xff);
  EXPECT_EQ(decode(e8, 0), 0x1p-127);
  EXPECT_EQ(decode(e8, 254), 0x1p127);
  EXPECT_TRUE(std::isnan(decode(e8, 0xff)));
  // Every encoding of every format decodes to a value that encodes back to it (NaN aside).
  for (PrimitiveType t : {fn, e5, fnuz, PrimitiveType::kF8E4M3, PrimitiveType::kF8E3M4,
                          PrimitiveType::kF8E5M2FNUZ, PrimitiveType::kF8E4M3B11FNUZ, f4,
                          PrimitiveType::kF6E2M3FN, PrimitiveType::kF6E3M2FN, e8}) {
    for (int bits = 0; bits < (1 << hlo::PrimitiveTypeBits(t)); ++bits) {
      const double v = decode(t, bits);
      if (!std::isnan(v)) {
        EXPECT_EQ(encode(t, v), bits) << hlo::PrimitiveTypeName(t) << " " << bits;
      }
    }
  }
}

TEST(InterpreterTest, IntegerSemanticsFollowXla) {
  auto r = EvalText(R"(ENTRY e {
  a = s32[5] parameter(0)
  b = s32[5] parameter(1)
  add = s32[5] add(a, b)
  div = s32[5] divide(a, b)
  rem = s32[5] remainder(a, b)
  ROOT t = (s32[5], s32[5], s32[5]) tuple(add, div, rem)
})",
                    {Ints(PrimitiveType::kS32, {5}, {2147483647, 7, -7, -2147483648LL, 9}),
                     Ints(PrimitiveType::kS32, {5}, {1, 0, 2, -1, -4})});
  ASSERT_THAT(r, IsOk());
  ASSERT_EQ(r->elements().size(), 3u);
  // Wrap on overflow; x/0 is -1 and x%0 is x; MIN/-1 is MIN and MIN%-1 is 0; C rounding.
  EXPECT_EQ(IntsOf(r->elements()[0]), (std::vector<int64_t>{-2147483648LL, 7, -5, 2147483647, 5}));
  EXPECT_EQ(IntsOf(r->elements()[1]),
            (std::vector<int64_t>{2147483647, -1, -3, -2147483648LL, -2}));
  EXPECT_EQ(IntsOf(r->elements()[2]), (std::vector<int64_t>{0, 7, -1, 0, 1}));

  auto u = EvalText(
      R"(ENTRY e {
  a = u8[3] parameter(0)
  b = u8[3] parameter(1)
  ROOT s = u8[3] add(a, b)
})",
      {Ints(PrimitiveType::kU8, {3}, {250, 1, 128}), Ints(PrimitiveType::kU8, {3}, {10, 2, 128})});
  ASSERT_THAT(u, IsOk());
  EXPECT_EQ(IntsOf(*u), (std::vector<int64_t>{4, 3, 0}));
}

TEST(InterpreterTest, ShiftsPastTheWidthAndSignFill) {
  auto r = EvalText(R"(ENTRY e {
  a = u32[4] parameter(0)
  n = u32[4] parameter(1)
  l = u32[4] shift-left(a, n)
  lr = u32[4] shift-right-logical(a, n)
  ar = u32[4] shift-right-arithmetic(a, n)
  ROOT t = (u32[4], u32[4], u32[4]) tuple(l, lr, ar)
})",
                    {Ints(PrimitiveType::kU32, {4}, {1, 0x80000000LL, 0x80000000LL, 5}),
                     Ints(PrimitiveType::kU32, {4}, {31, 31, 1, 32})});
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(IntsOf(r->elements()[0]), (std::vector<int64_t>{0x80000000LL, 0, 0, 0}));
  EXPECT_EQ(IntsOf(r->elements()[1]), (std::vector<int64_t>{0, 1, 0x40000000, 0}));
  EXPECT_EQ(IntsOf(r->elements()[2]), (std::vector<int64_t>{0, 0xFFFFFFFFLL, 0xC0000000LL, 0}));
}

TEST(InterpreterTest, CompareSelectClampAndNan) {
  auto r = EvalText(R"(ENTRY e {
  a = f32[4] parameter(0)
  b = f32[4] parameter(1)
  lt = pred[4] compare(a, b), direction=LT
  ne = pred[4] compare(a, b), direction=NE
  mx = f32[4] maximum(a, b)
  sel = f32[4] select(lt, a, b)
  lo = f32[] constant(-1)
  hi = f32[] constant(1)
  c = f32[4] clamp(lo, a, hi)
  ROOT t = (pred[4], pred[4], f32[4], f32[4], f32[4]) tuple(lt, ne, mx, sel, c)
})",
                    {Floats(PrimitiveType::kF32, {4}, {1, NAN, -5, 2}),
                     Floats(PrimitiveType::kF32, {4}, {2, 0, -5, 0.5})});
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(IntsOf(r->elements()[0]), (std::vector<int64_t>{1, 0, 0, 0}));
  EXPECT_EQ(IntsOf(r->elements()[1]), (std::vector<int64_t>{1, 1, 0, 1}));
  const auto mx = FloatsOf(r->elements()[2]);
  EXPECT_EQ(mx[0], 2);
  EXPECT_TRUE(std::isnan(mx[1])) << "maximum must propagate NaN";
  EXPECT_EQ(FloatsOf(r->elements()[3])[0], 1);
  const auto clamped = FloatsOf(r->elements()[4]);
  EXPECT_EQ(clamped[0], 1);
  EXPECT_TRUE(std::isnan(clamped[1])) << "clamp must propagate NaN";
  EXPECT_EQ(clamped[2], -1);
  EXPECT_EQ(clamped[3], 1);
}

TEST(InterpreterTest, ConvertSaturatesRoundsAndMapsNanToZero) {
  auto r = EvalText(R"(ENTRY e {
  f = f32[5] parameter(0)
  i = s32[5] convert(f)
  p = pred[5] convert(f)
  ROOT t = (s32[5], pred[5]) tuple(i, p)
})",
                    {Floats(PrimitiveType::kF32, {5}, {1.9, -1.9, 1e20, NAN, -1e20})});
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(IntsOf(r->elements()[0]), (std::vector<int64_t>{1, -1, 2147483647, 0, -2147483648LL}));
  EXPECT_EQ(IntsOf(r->elements()[1]), (std::vector<int64_t>{1, 1, 1, 1, 1}));
  auto f = EvalText(R"(ENTRY e {
  i = s32[2] parameter(0)
  ROOT f = f32[2] convert(i)
})",
                    {Ints(PrimitiveType::kS32, {2}, {16777217, -3})});
  ASSERT_THAT(f, IsOk());
  EXPECT_EQ(FloatsOf(*f), (std::vector<double>{16777216, -3}));  // f32 has 24 bits.
}

// A loop's state is taken from iteration to iteration, and a scatter or dynamic-update-slice
// updates its operand in place, only when nothing else reads that value: an operand read again
// after the update (x), an element read by two get-tuple-elements (x, x_again) and a call's
// argument used after the call (x0) keep their values.
TEST(InterpreterTest, ValuesAreTakenOnlyWhenNothingElseReadsThem) {
  auto r = EvalText(R"(HloModule m
add_f {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
negate_f {
  p = f32[4] parameter(0)
  ROOT n = f32[4] negate(p)
}
body {
  p = (s32[], f32[4], f32[4]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[4] get-tuple-element(p), index=1
  x_again = f32[4] get-tuple-element(p), index=1
  y = f32[4] get-tuple-element(p), index=2
  one = s32[] constant(1)
  next = s32[] add(i, one)
  ten = f32[1] constant({10})
  x2 = f32[4] dynamic-update-slice(x, ten, i)
  sum = f32[4] add(x, x2)
  both = f32[4] add(sum, x_again)
  idx = s32[1] reshape(i)
  upd = f32[] constant(1)
  y2 = f32[4] scatter(y, idx, upd), update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=0, to_apply=add_f
  ROOT t = (s32[], f32[4], f32[4]) tuple(next, both, y2)
}
cond {
  p = (s32[], f32[4], f32[4]) parameter(0)
  unused = f32[4] get-tuple-element(p), index=1
  i = s32[] get-tuple-element(p), index=0
  three = s32[] constant(3)
  ROOT lt = pred[] compare(i, three), direction=LT
}
ENTRY e {
  x0 = f32[4] parameter(0)
  zero = s32[] constant(0)
  y0 = f32[4] constant({0, 0, 0, 0})
  init = (s32[], f32[4], f32[4]) tuple(zero, x0, y0)
  w = (s32[], f32[4], f32[4]) while(init), condition=cond, body=body
  n = f32[4] call(x0), to_apply=negate_f
  ROOT r = ((s32[], f32[4], f32[4]), f32[4], f32[4]) tuple(w, x0, n)
})",
                    {Floats(PrimitiveType::kF32, {4}, {1, 2, 3, 4})});
  ASSERT_THAT(r, IsOk());
  ASSERT_EQ(r->elements().size(), 3u);
  const Literal& w = r->elements()[0];
  ASSERT_EQ(w.elements().size(), 3u);
  EXPECT_EQ(IntsOf(w.elements()[0]), (std::vector<int64_t>{3}));
  // Each step: x + x_updated + x, the element at i being 2x + 10 and the others 3x.
  EXPECT_EQ(FloatsOf(w.elements()[1]), (std::vector<double>{108, 66, 64, 108}));
  EXPECT_EQ(FloatsOf(w.elements()[2]), (std::vector<double>{1, 1, 1, 0}));
  EXPECT_EQ(FloatsOf(r->elements()[1]), (std::vector<double>{1, 2, 3, 4}));
  EXPECT_EQ(FloatsOf(r->elements()[2]), (std::vector<double>{-1, -2, -3, -4}));
}

TEST(InterpreterTest, ShapesMoveDataWhereTheySay) {
  auto r = EvalText(R"(ENTRY e {
  io = s32[2,3] iota(), iota_dimension=1
  tr = s32[3,2] transpose(io), dimensions={1,0}
  re = s32[6] reshape(tr)
  v = s32[2] constant({10, 20})
  bc = s32[2,3] broadcast(v), dimensions={0}
  ROOT t = (s32[6], s32[2,3]) tuple(re, bc)
})",
                    {});
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(IntsOf(r->elements()[0]), (std::vector<int64_t>{0, 0, 1, 1, 2, 2}));
  EXPECT_EQ(IntsOf(r->elements()[1]), (std::vector<int64_t>{10, 10, 10, 20, 20, 20}));
}

TEST(InterpreterTest, ReduceWithAnyComputationIncludingVariadic) {
  auto r = EvalText(R"(
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
argmax {
  v0 = f32[] parameter(0)
  i0 = s32[] parameter(1)
  v1 = f32[] parameter(2)
  i1 = s32[] parameter(3)
  gt = pred[] compare(v1, v0), direction=GT
  v = f32[] select(gt, v1, v0)
  i = s32[] select(gt, i1, i0)
  ROOT t = (f32[], s32[]) tuple(v, i)
}
ENTRY e {
  a = f32[2,3] constant({{1, 2, 3}, {4, -5, 6}})
  z = f32[] constant(0)
  rows = f32[2] reduce(a, z), dimensions={1}, to_apply=add
  all = f32[] reduce(a, z), dimensions={0,1}, to_apply=add
  idx = s32[2,3] iota(), iota_dimension=0
  ninf = f32[] constant(-inf)
  m1 = s32[] constant(-1)
  am = (f32[3], s32[3]) reduce(a, idx, ninf, m1), dimensions={0}, to_apply=argmax
  ROOT t = (f32[2], f32[], (f32[3], s32[3])) tuple(rows, all, am)
})",
                    {});
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(FloatsOf(r->elements()[0]), (std::vector<double>{6, 5}));
  EXPECT_EQ(FloatsOf(r->elements()[1]), (std::vector<double>{11}));
  const Literal& am = r->elements()[2];
  EXPECT_EQ(FloatsOf(am.elements()[0]), (std::vector<double>{4, 2, 6}));
  EXPECT_EQ(IntsOf(am.elements()[1]), (std::vector<int64_t>{1, 0, 1}));
}

TEST(InterpreterTest, DotWithBatchAndContractingDimensions) {
  auto r = EvalText(R"(ENTRY e {
  a = f32[2,3] constant({{1, 2, 3}, {4, 5, 6}})
  b = f32[3,2] constant({{7, 8}, {9, 10}, {11, 12}})
  mm = f32[2,2] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  x = s32[2,2,2] constant({{{1, 2}, {3, 4}}, {{5, 6}, {7, 8}}})
  bmm = s32[2,2,2] dot(x, x), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_contracting_dims={1}
  ROOT t = (f32[2,2], s32[2,2,2]) tuple(mm, bmm)
})",
                    {});
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(FloatsOf(r->elements()[0]), (std::vector<double>{58, 64, 139, 154}));
  EXPECT_EQ(IntsOf(r->elements()[1]), (std::vector<int64_t>{7, 10, 15, 22, 67, 78, 91, 106}));
}

// Batch and contracting dimensions anywhere, two contracting dimensions paired out of order,
// and sizes that are not multiples of the interpreter's row and column blocks: compared with
// the definition written out here, one element at a time.
TEST(InterpreterTest, DotMatchesItsDefinitionForAnyDimensionNumbers) {
  constexpr int64_t kK1 = 3, kB = 2, kM = 5, kK2 = 2, kN = 11;
  auto module = [](const char* type) {
    return std::string("ENTRY e {\n  a = ") + type + "[3,2,5,2] parameter(0)\n  b = " + type +
           "[11,2,2,3] parameter(1)\n  ROOT d = " + type +
           "[2,5,11] dot(a, b), lhs_batch_dims={1}, rhs_batch_dims={2}, "
           "lhs_contracting_dims={0,3}, rhs_contracting_dims={3,1}\n}";
  };
  std::vector<int64_t> lhs(kK1 * kB * kM * kK2), rhs(kN * kK2 * kB * kK1);
  for (size_t i = 0; i < lhs.size(); ++i) lhs[i] = static_cast<int64_t>((i * 37) % 101) - 50;
  for (size_t i = 0; i < rhs.size(); ++i) rhs[i] = static_cast<int64_t>((i * 53) % 97) - 48;
  std::vector<int64_t> expected;
  for (int64_t b = 0; b < kB; ++b) {
    for (int64_t m = 0; m < kM; ++m) {
      for (int64_t n = 0; n < kN; ++n) {
        int64_t sum = 0;
        for (int64_t c0 = 0; c0 < kK1; ++c0) {
          for (int64_t c1 = 0; c1 < kK2; ++c1) {
            sum += lhs[static_cast<size_t>(((c0 * kB + b) * kM + m) * kK2 + c1)] *
                   rhs[static_cast<size_t>(((n * kK2 + c1) * kB + b) * kK1 + c0)];
          }
        }
        expected.push_back(sum);
      }
    }
  }
  // f32: small integers, so every sum is exact.
  std::vector<double> lhs_f(lhs.begin(), lhs.end()), rhs_f(rhs.begin(), rhs.end());
  auto f = EvalText(module("f32"), {Floats(PrimitiveType::kF32, {kK1, kB, kM, kK2}, lhs_f),
                                    Floats(PrimitiveType::kF32, {kN, kK2, kB, kK1}, rhs_f)});
  ASSERT_THAT(f, IsOk());
  EXPECT_EQ(FloatsOf(*f), std::vector<double>(expected.begin(), expected.end()));
  // s8: the sums wrap to 8 bits.
  for (auto* v : {&lhs, &rhs}) {
    for (int64_t& x : *v) x = static_cast<int8_t>(x);
  }
  auto s = EvalText(module("s8"), {Ints(PrimitiveType::kS8, {kK1, kB, kM, kK2}, lhs),
                                   Ints(PrimitiveType::kS8, {kN, kK2, kB, kK1}, rhs)});
  ASSERT_THAT(s, IsOk());
  std::vector<int64_t> wrapped;
  for (int64_t x : expected) wrapped.push_back(static_cast<int8_t>(static_cast<uint8_t>(x & 0xff)));
  EXPECT_EQ(IntsOf(*s), wrapped);
}

// A reducer of one op is applied to all results at once; it must still round to the element
// type after every step, in the order of the reduced dimensions, as the one-element-at-a-time
// definition does (and the general path, which a subtracting reducer takes, does).
TEST(InterpreterTest, ReductionsRoundEveryStepAndKeepTheirOrder) {
  auto r = EvalText(R"(
add {
  x = bf16[] parameter(0)
  y = bf16[] parameter(1)
  ROOT s = bf16[] add(y, x)
}
max {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT m = f32[] maximum(x, y)
}
sub {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT d = f32[] subtract(x, y)
}
xor {
  x = u8[] parameter(0)
  y = u8[] parameter(1)
  ROOT d = u8[] xor(x, y)
}
ENTRY e {
  h = bf16[2,5] constant({{256, 1, 1, 1, 1}, {1, 1, 1, 1, 256}})
  hz = bf16[] constant(0)
  hs = bf16[2] reduce(h, hz), dimensions={1}, to_apply=add
  a = f32[2,3,2] constant({{{1, 7}, {nan, 2}, {3, 4}}, {{-1, -2}, {-3, -4}, {-5, 9}}})
  ninf = f32[] constant(-inf)
  mx = f32[2,2] reduce(a, ninf), dimensions={1}, to_apply=max
  ten = f32[] constant(10)
  v = f32[3] constant({1, 2, 3})
  df = f32[] reduce(v, ten), dimensions={0}, to_apply=sub
  u = u8[2,2] constant({{1, 2}, {4, 8}})
  zero = u8[] constant(0)
  x = u8[2] reduce(u, zero), dimensions={0}, to_apply=xor
  ROOT t = (bf16[2], f32[2,2], f32[], u8[2]) tuple(hs, mx, df, x)
})",
                    {});
  ASSERT_THAT(r, IsOk());
  // bf16 has 8 significant bits: 256 + 1 rounds back to 256, while 4 + 256 is exact.
  EXPECT_EQ(FloatsOf(r->elements()[0]), (std::vector<double>{256, 260}));
  const std::vector<double> mx = FloatsOf(r->elements()[1]);
  ASSERT_EQ(mx.size(), 4u);
  EXPECT_TRUE(std::isnan(mx[0]));  // NaN wins.
  EXPECT_EQ(mx[1], 7);
  EXPECT_EQ(mx[2], -1);
  EXPECT_EQ(mx[3], 9);
  EXPECT_EQ(FloatsOf(r->elements()[2]), (std::vector<double>{4}));  // ((10 - 1) - 2) - 3.
  EXPECT_EQ(IntsOf(r->elements()[3]), (std::vector<int64_t>{5, 10}));
}

TEST(InterpreterTest, CallsAndTuples) {
  auto r = EvalText(R"(
sq {
  x = f64[] parameter(0)
  ROOT m = f64[] multiply(x, x)
}
ENTRY e {
  p = (f64[], s64[]) parameter(0)
  x = f64[] get-tuple-element(p), index=0
  ROOT c = f64[] call(x), to_apply=sq
})",
                    [] {
                      hlo::Shape t;
                      t.tuple_elements = {ArrayShape(PrimitiveType::kF64, {}),
                                          ArrayShape(PrimitiveType::kS64, {})};
                      Literal arg(t);
                      arg.elements()[0].SetFloat(0, 1.5);
                      return std::vector<Literal>{arg};
                    }());
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(FloatsOf(*r), (std::vector<double>{2.25}));
}

TEST(InterpreterTest, SlicesPadsConcatenatesAndReverses) {
  auto r = EvalText(R"(ENTRY e {
  a = s32[3,4] iota(), iota_dimension=1
  b = s32[3,4] iota(), iota_dimension=0
  m = s32[3,4] multiply(b, b)
  x = s32[3,4] add(a, m)
  sl = s32[2,2] slice(x), slice={[1:3], [0:4:2]}
  rv = s32[3,4] reverse(x), dimensions={0,1}
  zero = s32[] constant(-9)
  pd = s32[1,4] pad(sl, zero), padding=-1_0x1_0_1
  cc = s32[2,4] concatenate(sl, sl), dimensions={1}
  ROOT t = (s32[2,2], s32[3,4], s32[1,4], s32[2,4]) tuple(sl, rv, pd, cc)
})",
                    {});
  ASSERT_THAT(r, IsOk());
  // x[i][j] = j + i*i: rows {0,1,2,3}, {1,2,3,4}, {4,5,6,7}.
  EXPECT_EQ(IntsOf(r->elements()[0]), (std::vector<int64_t>{1, 3, 4, 6}));
  EXPECT_EQ(IntsOf(r->elements()[1]), (std::vector<int64_t>{7, 6, 5, 4, 4, 3, 2, 1, 3, 2, 1, 0}));
  // Row 0 of sl dropped (low -1); in the row, one pad before and one between the values.
  EXPECT_EQ(IntsOf(r->elements()[2]), (std::vector<int64_t>{-9, 4, -9, 6}));
  EXPECT_EQ(IntsOf(r->elements()[3]), (std::vector<int64_t>{1, 3, 1, 3, 4, 6, 4, 6}));
}

TEST(InterpreterTest, DynamicSlicesClampTheirStarts) {
  auto r = EvalText(R"(ENTRY e {
  a = s32[5] iota(), iota_dimension=0
  i = s32[] parameter(0)
  ds = s32[2] dynamic-slice(a, i), dynamic_slice_sizes={2}
  u = s32[2] constant({70, 80})
  dus = s32[5] dynamic-update-slice(a, u, i)
  ROOT t = (s32[2], s32[5]) tuple(ds, dus)
})",
                    {Ints(PrimitiveType::kS32, {}, {9})});
  ASSERT_THAT(r, IsOk());
  // A start of 9 is clamped to 3, the last start that keeps the window inside.
  EXPECT_EQ(IntsOf(r->elements()[0]), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(IntsOf(r->elements()[1]), (std::vector<int64_t>{0, 1, 2, 70, 80}));
}

TEST(InterpreterTest, ShapesThatDoNotFitTheirOpsAreRefusedNotRead) {
  // The parser infers no shapes: each of these would index out of bounds if evaluated.
  const std::vector<std::string> bad = {
      "ENTRY e {\n  a = f32[4] parameter(0)\n  b = f32[3] constant({1, 2, 3})\n"
      "  ROOT s = f32[4] add(a, b)\n}",
      "ENTRY e {\n  a = f32[4] parameter(0)\n  b = s32[4] constant({1, 2, 3, 4})\n"
      "  ROOT s = f32[4] add(a, b)\n}",
      "ENTRY e {\n  a = f32[4] parameter(0)\n  ROOT b = f32[5,4] broadcast(a), dimensions={0}\n}",
      "ENTRY e {\n  a = f32[4] parameter(0)\n  ROOT s = f32[3] slice(a), slice={[2:5]}\n}",
      "ENTRY e {\n  a = f32[4] parameter(0)\n  ROOT t = f32[4] transpose(a), dimensions={1}\n}",
      "ENTRY e {\n  a = f32[4] parameter(0)\n  b = f32[3,2] constant({{1,2},{3,4},{5,6}})\n"
      "  ROOT d = f32[2] dot(a, b), lhs_contracting_dims={0}, rhs_contracting_dims={0}\n}",
      "ENTRY e {\n  a = f32[4] parameter(0)\n  z = f32[] constant(0)\n"
      "  ROOT p = f32[8] pad(a, z), padding=1_1_1\n}",
      "ENTRY e {\n  a = f32[4] parameter(0)\n  i = s32[] constant(0)\n"
      "  ROOT d = f32[5] dynamic-slice(a, i), dynamic_slice_sizes={5}\n}",
      "ENTRY e {\n  a = f32[4] parameter(0)\n  ROOT r = f32[5] reshape(a)\n}",
  };
  for (const std::string& text : bad) {
    EXPECT_THAT(EvalText(text, {Floats(PrimitiveType::kF32, {4}, {1, 2, 3, 4})}),
                StatusIs(StatusCode::kInvalidArgument, HasSubstr("t.hlo:")))
        << text;
  }
  // The right size for that padding (1 + 1 + 4 + 3 interior) evaluates.
  auto padded = EvalText(
      "ENTRY e {\n  a = f32[4] parameter(0)\n  z = f32[] constant(0)\n"
      "  ROOT p = f32[9] pad(a, z), padding=1_1_1\n}",
      {Floats(PrimitiveType::kF32, {4}, {1, 2, 3, 4})});
  ASSERT_THAT(padded, IsOk());
  EXPECT_EQ(FloatsOf(*padded), (std::vector<double>{0, 1, 0, 2, 0, 3, 0, 4, 0}));
}

TEST(InterpreterTest, UnsupportedInputsAreNamedErrors) {
  EXPECT_THAT(EvalText("ENTRY e {\n  a = f32[4] parameter(0)\n  ROOT s = f32[4] custom-call(a), "
                       "custom_call_target=\"lapack_sgetrf\"\n}",
                       {Floats(PrimitiveType::kF32, {4}, {1, 2, 3, 4})}),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("t.hlo:3:")));
  EXPECT_THAT(
      EvalText("ENTRY e {\n  a = s32[2] parameter(0)\n  ROOT p = s32[3] pad(a), padding=0_1\n}",
               {Ints(PrimitiveType::kS32, {2}, {1, 2})}),
      StatusIs(StatusCode::kInvalidArgument, HasSubstr("t.hlo:3: 'p' (pad) has 1 operands")));
  EXPECT_THAT(EvalText("ENTRY e {\n  ROOT c = f32[4] constant({...})\n}", {}),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("elided")));
  EXPECT_THAT(EvalText("ENTRY e {\n  ROOT a = bf16[2] parameter(0)\n}",
                       {Floats(PrimitiveType::kF32, {2}, {1, 2})}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("bf16[2]")));
  EXPECT_THAT(EvalText("ENTRY e {\n  ROOT a = f32[2] parameter(0)\n}", {}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("takes 1 arguments")));
}

}  // namespace
}  // namespace hlocache::interp
