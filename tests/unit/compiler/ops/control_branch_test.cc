// conditional (both forms, indices out of range) and map: their meaning in the interpreter, the
// compiled code against it, and malformed modules refused with their line.
#include <gtest/gtest.h>

#include <climits>
#include <string>

#include "tests/unit/compiler/ops/op_check.h"

namespace hlocache::compiler {
namespace {

using hlo::PrimitiveType;
using interp::Literal;
using op_check::ExpectMalformed;
using op_check::ExpectValue;
using op_check::Replaced;
using op_check::Scalar;
using op_check::Tuple;

// ---- conditional -----------------------------------------------------------------------------

TEST(ControlBranchTest, PredicatedConditionalRunsOneBranch) {
  const std::string text = R"(HloModule m
on_true {
  x = f32[] parameter(0)
  ROOT n = f32[] negate(x)
}
on_false {
  t = (f32[], f32[]) parameter(0)
  a = f32[] get-tuple-element(t), index=0
  b = f32[] get-tuple-element(t), index=1
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  p = pred[] parameter(0)
  x = f32[] parameter(1)
  y = f32[] parameter(2)
  t = (f32[], f32[]) tuple(x, y)
  ROOT c = f32[] conditional(p, x, t), true_computation=on_true, false_computation=on_false
})";
  const Literal x = Scalar(PrimitiveType::kF32, 2.5), y = Scalar(PrimitiveType::kF32, 4);
  ExpectValue(text, {Scalar(PrimitiveType::kPred, 1), x, y}, Scalar(PrimitiveType::kF32, -2.5));
  ExpectValue(text, {Scalar(PrimitiveType::kPred, 0), x, y}, Scalar(PrimitiveType::kF32, 6.5));
}

constexpr const char* kIndexed = R"(HloModule m
b0 {
  x = f32[] parameter(0)
  n = f32[] negate(x)
  zero = s32[] constant(0)
  ROOT t = (f32[], s32[]) tuple(n, zero)
}
b1 {
  t = (f32[], f32[]) parameter(0)
  a = f32[] get-tuple-element(t), index=0
  b = f32[] get-tuple-element(t), index=1
  s = f32[] add(a, b)
  one = s32[] constant(1)
  ROOT r = (f32[], s32[]) tuple(s, one)
}
b2 {
  z = s32[] parameter(0)
  c = f32[] convert(z)
  two = s32[] constant(2)
  ROOT r = (f32[], s32[]) tuple(c, two)
}
ENTRY e {
  i = s32[] parameter(0)
  x = f32[] constant(2.5)
  one = f32[] constant(1)
  two = f32[] constant(2)
  t = (f32[], f32[]) tuple(one, two)
  z = s32[] constant(7)
  ROOT c = (f32[], s32[]) conditional(i, x, t, z), branch_computations={b0, b1, b2}
})";

TEST(ControlBranchTest, IndexedConditionalAndIndicesOutOfRange) {
  auto want = [](double v, double b) {
    return Tuple({Scalar(PrimitiveType::kF32, v), Scalar(PrimitiveType::kS32, b)});
  };
  const std::string text = kIndexed;
  ExpectValue(text, {Scalar(PrimitiveType::kS32, 0)}, want(-2.5, 0));
  ExpectValue(text, {Scalar(PrimitiveType::kS32, 1)}, want(3, 1));
  ExpectValue(text, {Scalar(PrimitiveType::kS32, 2)}, want(7, 2));
  // XLA's rule: an index outside [0, 3) runs the last branch.
  ExpectValue(text, {Scalar(PrimitiveType::kS32, 3)}, want(7, 2));
  ExpectValue(text, {Scalar(PrimitiveType::kS32, -1)}, want(7, 2));
  ExpectValue(text, {Scalar(PrimitiveType::kS32, INT_MIN)}, want(7, 2));
  ExpectValue(text, {Scalar(PrimitiveType::kS32, INT_MAX)}, want(7, 2));
}

// ---- map ---------------------------------------------------------------------------------------

TEST(ControlBranchTest, MapOfTwoOperands) {
  const std::string text = R"(HloModule m
f {
  x = f32[] parameter(0)
  y = s32[] parameter(1)
  c = f32[] convert(y)
  d = f32[] subtract(x, c)
  half = f32[] constant(0.5)
  ROOT r = f32[] multiply(d, half)
}
ENTRY e {
  a = f32[2,3] parameter(0)
  b = s32[2,3] parameter(1)
  ROOT m = f32[2,3] map(a, b), dimensions={0,1}, to_apply=f
})";
  ExpectValue(text,
              {Array(PrimitiveType::kF32, {2, 3}, {1, 2, 3, 0.5, -1, 0}),
               Array(PrimitiveType::kS32, {2, 3}, {2, 3, -1, 4, 5, 6})},
              Array(PrimitiveType::kF32, {2, 3}, {-0.5, -0.5, 2, -1.75, -3, -3}));
  ExpectCompiledMatchesInterpreterOnRandomInputs(text, 3);
}

TEST(ControlBranchTest, MalformedBranchesAndMapsAreRefusedWithTheirLine) {
  const std::string pred_text = R"(HloModule m
on_true {
  x = f32[] parameter(0)
  ROOT n = f32[] negate(x)
}
on_false {
  x = f32[] parameter(0)
  ROOT n = f32[] abs(x)
}
ENTRY e {
  p = pred[] parameter(0)
  x = f32[] parameter(1)
  y = s32[] parameter(2)
  ROOT c = f32[] conditional(p, x, y), true_computation=on_true, false_computation=on_false
})";
  ExpectMalformed(pred_text, "ROOT c =", "branch 1's parameter 0 is f32[], but it is passed s32[]");
  ExpectMalformed(Replaced(pred_text, "conditional(p, x, y)", "conditional(p, x)"),
                  "ROOT c =", "2 branches take 2 operands after the selector, not 1");
  ExpectMalformed(Replaced(pred_text, "p = pred[] parameter(0)", "p = f32[] parameter(0)"),
                  "ROOT c =", "the selector f32[] is neither pred[] nor s32[]");
  ExpectMalformed(
      Replaced(Replaced(pred_text, "ROOT n = f32[] abs(x)", "ROOT n = f64[] convert(x)"),
               "y = s32[]", "y = f32[]"),
      "ROOT c =", "branch 1 returns f64[], not f32[]");

  const std::string map_text = R"(HloModule m
f {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  a = f32[4] parameter(0)
  b = f32[5] parameter(1)
  ROOT m = f32[4] map(a, b), dimensions={0}, to_apply=f
})";
  ExpectMalformed(map_text, "ROOT m =", "operand 1 f32[5] does not have the result's dimensions");
  ExpectMalformed(Replaced(map_text, "b = f32[5]", "b = s32[4]"), "ROOT m =",
                  "the mapped computation's parameter 1 is f32[], but it is passed s32[]");
}

}  // namespace
}  // namespace hlocache::compiler
