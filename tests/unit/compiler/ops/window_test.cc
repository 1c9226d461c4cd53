// reduce-window and select-and-scatter: hand-computed values for the interpreter (strides,
// padding, negative padding, base and window dilation, variadic reducers, reducers that must be
// called, the selection rule of select-and-scatter), the compiled code checked against it on
// each, and malformed windows refused with their line.
#include <gtest/gtest.h>

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
using op_check::Tuple;

// A module reducing `in` (a parameter) with `window` to `out` by `op` from `init`.
std::string ReduceWindow(const std::string& type, const std::string& in, const std::string& out,
                         const std::string& window, const std::string& op = "add",
                         const std::string& init = "0") {
  return "HloModule m\n\nf {\n  a = " + type + "[] parameter(0)\n  b = " + type +
         "[] parameter(1)\n  ROOT c = " + type + "[] " + op +
         "(a, b)\n}\n\nENTRY e {\n  x = " + type + in + " parameter(0)\n  init = " + type +
         "[] constant(" + init + ")\n  ROOT r = " + type + out +
         " reduce-window(x, init), window={" + window + "}, to_apply=f\n}\n";
}

TEST(ReduceWindowTest, SlidesWithStridesAndPadding) {
  const Literal x = Array(PrimitiveType::kS32, {5}, {1, 2, 3, 4, 5});
  ExpectValue(ReduceWindow("s32", "[5]", "[4]", "size=2"), {x},
              Array(PrimitiveType::kS32, {4}, {3, 5, 7, 9}));
  // Padding reads nothing: the padded ends sum only what is inside.
  ExpectValue(ReduceWindow("s32", "[5]", "[3]", "size=3 stride=2 pad=1_1"), {x},
              Array(PrimitiveType::kS32, {3}, {3, 9, 9}));
  // A window as long as the operand, padded on the left: the running sum (cumsum).
  ExpectValue(ReduceWindow("s32", "[5]", "[5]", "size=5 pad=4_0"), {x},
              Array(PrimitiveType::kS32, {5}, {1, 3, 6, 10, 15}));
  // Negative padding cuts elements off.
  ExpectValue(ReduceWindow("s32", "[5]", "[2]", "size=2 pad=-1_-1"), {x},
              Array(PrimitiveType::kS32, {2}, {5, 7}));
  // A window longer than the padded operand has no placement.
  ExpectValue(ReduceWindow("s32", "[5]", "[0]", "size=7"), {x},
              Array(PrimitiveType::kS32, {0}, {}));
}

TEST(ReduceWindowTest, DilatesTheBaseAndTheWindow) {
  const Literal x = Array(PrimitiveType::kS32, {4}, {1, 10, 100, 1000});
  // Base dilated by 2: 1 _ 10 _ 100 _ 1000; windows of 3 read 1+10, 10, 10+100, 100, 100+1000.
  ExpectValue(ReduceWindow("s32", "[4]", "[5]", "size=3 lhs_dilate=2"), {x},
              Array(PrimitiveType::kS32, {5}, {11, 10, 110, 100, 1100}));
  // Window elements 2 apart: x[i] + x[i+2].
  ExpectValue(ReduceWindow("s32", "[4]", "[2]", "size=2 rhs_dilate=2"), {x},
              Array(PrimitiveType::kS32, {2}, {101, 1010}));
}

TEST(ReduceWindowTest, MaxPoolsTwoDimensions) {
  const double inf = std::numeric_limits<double>::infinity();
  // 3x3 max pool, stride 2, padding 1, over a 4x4 image.
  const std::string text =
      ReduceWindow("f32", "[4,4]", "[2,2]", "size=3x3 stride=2x2 pad=1_1x1_1", "maximum", "-inf");
  const Literal x = Array(PrimitiveType::kF32, {4, 4},
                          {1, 2, 3, 4, 5, 6, 7, 8, -9, -10, -11, -12, 13, 14, 15, -inf});
  ExpectValue(text, {x}, Array(PrimitiveType::kF32, {2, 2}, {6, 8, 14, 15}));
  // NaN propagates through maximum, as in the interpreter's maximum.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Literal with_nan =
      Array(PrimitiveType::kF32, {4, 4}, {1, 2, 3, 4, 5, nan, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16});
  ExpectCompiledMatchesInterpreter(text, {with_nan});
  ExpectCompiledMatchesInterpreterOnRandomInputs(
      Replaced(Replaced(Replaced(text, "[4,4]", "[3,17,9]"), "[2,2]", "[2,9,5]"),
               "size=3x3 stride=2x2 pad=1_1x1_1", "size=2x3x3 stride=1x2x2 pad=0_0x1_1x1_1"),
      4);
}

TEST(ReduceWindowTest, CallsAReducerThatIsNotOneOp) {
  // acc * 2 + x, in window order: the order of the fold is visible in the result.
  const std::string text = R"(HloModule m

f {
  acc = s32[] parameter(0)
  x = s32[] parameter(1)
  two = s32[] constant(2)
  twice = s32[] multiply(acc, two)
  ROOT r = s32[] add(twice, x)
}

ENTRY e {
  x = s32[2,3] parameter(0)
  init = s32[] constant(1)
  ROOT r = s32[2,2] reduce-window(x, init), window={size=2x2 pad=0_1x0_0}, to_apply=f
}
)";
  // Placement (0,0) folds 1, 2, 4, 5 into 1: (((1*2+1)*2+2)*2+4)*2+5 = 45; the last row's
  // windows reach into the padding and fold two elements.
  ExpectValue(text, {Array(PrimitiveType::kS32, {2, 3}, {1, 2, 3, 4, 5, 6})},
              Array(PrimitiveType::kS32, {2, 2}, {45, 60, 17, 20}));
  ExpectCompiledMatchesInterpreterOnRandomInputs(text, 2);
}

TEST(ReduceWindowTest, ReducesSeveralOperandsAtOnce) {
  // Argmax over windows of 3: the value and its position, the first position on ties.
  const std::string text = R"(HloModule m

argmax {
  v = f32[] parameter(0)
  i = s32[] parameter(1)
  w = f32[] parameter(2)
  j = s32[] parameter(3)
  gt = pred[] compare(w, v), direction=GT
  value = f32[] select(gt, w, v)
  index = s32[] select(gt, j, i)
  ROOT r = (f32[], s32[]) tuple(value, index)
}

ENTRY e {
  x = f32[6] parameter(0)
  positions = s32[6] iota(), iota_dimension=0
  low = f32[] constant(-inf)
  none = s32[] constant(-1)
  ROOT r = (f32[3], s32[3]) reduce-window(x, positions, low, none), window={size=3 stride=2 pad=1_0}, to_apply=argmax
}
)";
  ExpectValue(text, {Array(PrimitiveType::kF32, {6}, {4, 1, 7, 7, 2, 9})},
              Tuple({Array(PrimitiveType::kF32, {3}, {4, 7, 9}),
                     Array(PrimitiveType::kS32, {3}, {0, 2, 5})}));
  ExpectCompiledMatchesInterpreterOnRandomInputs(text, 5);
}

TEST(ReduceWindowTest, CompiledWindowsMatchTheInterpreter) {
  // bf16 sums round at every step; an operand as the first argument of add; both dilations
  // with strides and uneven padding.
  const std::string bf16 = ReduceWindow(
      "bf16", "[7,11]", "[3,10]", "size=3x2 stride=2x2 pad=1_2x0_-1 lhs_dilate=1x2 rhs_dilate=2x1");
  ExpectCompiledMatchesInterpreterOnRandomInputs(bf16, 6);
  ExpectCompiledMatchesInterpreterOnRandomInputs(Replaced(bf16, "add(a, b)", "add(b, a)"), 7);
  ExpectCompiledMatchesInterpreterOnRandomInputs(
      ReduceWindow("u8", "[1,64,3]", "[1,64,3]", "size=1x64x1 pad=0_0x63_0x0_0", "multiply", "1"),
      8);
  // A scalar operand: one placement reading it.
  ExpectValue(ReduceWindow("s64", "[]", "[]", ""), {Array(PrimitiveType::kS64, {}, {41})},
              Array(PrimitiveType::kS64, {}, {41}));
  // An operand with no elements: every placement gets the init.
  ExpectValue(ReduceWindow("s32", "[0,2]", "[2,2]", "size=1x1 pad=1_1x0_0", "add", "7"),
              {Array(PrimitiveType::kS32, {0, 2}, {})},
              Array(PrimitiveType::kS32, {2, 2}, {7, 7, 7, 7}));
}

TEST(SelectAndScatterTest, ScattersEachSourceToItsWindowsMaximum) {
  const std::string text = R"(HloModule m

ge {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = pred[] compare(a, b), direction=GE
}

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}

ENTRY e {
  x = f32[4,4] parameter(0)
  source = f32[2,2] parameter(1)
  zero = f32[] constant(0)
  ROOT r = f32[4,4] select-and-scatter(x, source, zero), window={size=3x3 stride=2x2 pad=1_1x1_1}, select=ge, scatter=add
}
)";
  // The four windows' maxima: 6 at (1,1), 8 at (1,3), 14 at (3,1), 15 at (3,2).
  const Literal x = Array(PrimitiveType::kF32, {4, 4},
                          {1, 2, 3, 4, 5, 6, 7, 8, -9, -10, -11, -12, 13, 14, 15, -1});
  const Literal source = Array(PrimitiveType::kF32, {2, 2}, {10, 20, 30, 40});
  ExpectValue(
      text, {x, source},
      Array(PrimitiveType::kF32, {4, 4}, {0, 0, 0, 0, 0, 10, 0, 20, 0, 0, 0, 0, 0, 30, 40, 0}));
  // Every window holds (1,1): all four scatter there.
  const Literal peak =
      Array(PrimitiveType::kF32, {4, 4}, {0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0});
  ExpectValue(
      text, {peak, source},
      Array(PrimitiveType::kF32, {4, 4}, {0, 0, 0, 0, 0, 100, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}));
  // Ties keep the first element each window reads.
  const Literal ties =
      Array(PrimitiveType::kF32, {4, 4}, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1});
  ExpectValue(
      text, {ties, source},
      Array(PrimitiveType::kF32, {4, 4}, {10, 20, 0, 0, 30, 40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}));
  ExpectCompiledMatchesInterpreterOnRandomInputs(text, 9);
  // A selection that is not one compare (the minimum of |x|), called; a scatter that is not
  // one op, called.
  std::string called = Replaced(
      text, "ROOT r = pred[] compare(a, b), direction=GE",
      "p = f32[] abs(a)\n  q = f32[] abs(b)\n  ROOT r = pred[] compare(p, q), direction=LE");
  called = Replaced(called, "ROOT r = f32[] add(a, b)",
                    "s = f32[] subtract(a, b)\n  ROOT r = f32[] negate(s)");
  ExpectCompiledMatchesInterpreterOnRandomInputs(called, 10);
}

TEST(WindowTest, MalformedWindowsAreRefusedWithTheirLine) {
  const std::string text = ReduceWindow("f32", "[4,6]", "[3,2]", "size=2x3 stride=1x2");
  ExpectValue(
      text, {Array(PrimitiveType::kF32, {4, 6}, {0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11,
                                                 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23})},
      Array(PrimitiveType::kF32, {3, 2}, {24, 36, 60, 72, 96, 108}));
  ExpectMalformed(Replaced(text, "f32[3,2] reduce", "f32[3,3] reduce"), "ROOT r",
                  "is not the window's f32[3,2]");
  ExpectMalformed(Replaced(text, "size=2x3 stride=1x2", "size=2 stride=1x2"), "ROOT r",
                  "size=2 has 1 dimensions, the operand 2");
  ExpectMalformed(Replaced(text, "stride=1x2", "stride=1x0"), "ROOT r",
                  "'0' is not a positive integer");
  ExpectMalformed(Replaced(text, "stride=1x2", "stride=1x2 shift=1x1"), "ROOT r",
                  "unknown key 'shift'");
  ExpectMalformed(Replaced(text, "stride=1x2", "stride=1x2 pad=1x1"), "ROOT r",
                  "'1' is not LOW_HIGH");
  ExpectMalformed(Replaced(text, "stride=1x2", "stride=1x2 lhs_dilate=2199023255552x1"), "ROOT r",
                  "is not a positive integer");
  ExpectMalformed(Replaced(text, "init = f32[] constant(0)", "init = f32[1] constant({0})"),
                  "ROOT r", "init value 0 is not a scalar");
  ExpectMalformed(Replaced(text, "ROOT c = f32[] add(a, b)", "ROOT c = f32[] parameter(2)"),
                  "ROOT r", "the reduction computation");
  const std::string sas = R"(HloModule m

ge {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = pred[] compare(a, b), direction=GE
}

ENTRY e {
  x = f32[4,4] parameter(0)
  source = f32[2,2] parameter(1)
  zero = f32[] constant(0)
  ROOT r = f32[4,4] select-and-scatter(x, source, zero), window={size=2x2 stride=2x2}, select=ge, scatter=ge
}
)";
  ExpectMalformed(sas, "ROOT r = f32[4,4]", "scatter returns pred[], not f32[]");
  ExpectMalformed(Replaced(sas, "source = f32[2,2]", "source = f32[2,3]"), "ROOT r = f32[4,4]",
                  "is not one element per window placement");
}

}  // namespace
}  // namespace hlocache::compiler
