// scan: forward and reverse, along inner and outer dimensions, with and without carries, in the
// interpreter (hand-computed values) and compiled; malformed scans refused with their line.
#include <gtest/gtest.h>

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

// ---- scan --------------------------------------------------------------------------------------

std::string CumulativeSum(const std::string& attributes) {
  return R"(HloModule m
add {
  x = f32[] parameter(0)
  c = f32[] parameter(1)
  s = f32[] add(x, c)
  ROOT t = (f32[], f32[]) tuple(s, s)
}
ENTRY e {
  x = f32[4] parameter(0)
  init = f32[] parameter(1)
  ROOT s = (f32[4], f32[]) scan(x, init), dimensions={0}, num_carries=1)" +
         attributes + R"(, to_apply=add
})";
}

TEST(ControlScanTest, ScanForwardAndReverse) {
  const std::vector<Literal> args = {Array(PrimitiveType::kF32, {4}, {1, 2, 3, 4}),
                                     Scalar(PrimitiveType::kF32, 10)};
  ExpectValue(
      CumulativeSum(", is_associative=true"), args,
      Tuple({Array(PrimitiveType::kF32, {4}, {11, 13, 16, 20}), Scalar(PrimitiveType::kF32, 20)}));
  ExpectValue(
      CumulativeSum(", is_reverse=true"), args,
      Tuple({Array(PrimitiveType::kF32, {4}, {20, 19, 17, 14}), Scalar(PrimitiveType::kF32, 20)}));
}

TEST(ControlScanTest, ScanAlongAnInnerAndAnOuterDimension) {
  // Rows scanned along dimension 1 with a carry per row.
  const std::string rows = R"(HloModule m
add {
  x = f32[2] parameter(0)
  c = f32[2] parameter(1)
  s = f32[2] add(x, c)
  ROOT t = (f32[2], f32[2]) tuple(s, s)
}
ENTRY e {
  x = f32[2,3] parameter(0)
  init = f32[2] parameter(1)
  ROOT s = (f32[2,3], f32[2]) scan(x, init), dimensions={1}, num_carries=1, to_apply=add
})";
  ExpectValue(rows,
              {Array(PrimitiveType::kF32, {2, 3}, {1, 2, 3, 4, 5, 6}),
               Array(PrimitiveType::kF32, {2}, {0, 10})},
              Tuple({Array(PrimitiveType::kF32, {2, 3}, {1, 3, 6, 14, 19, 25}),
                     Array(PrimitiveType::kF32, {2}, {6, 25})}));
  // Two inputs, an output of another type and no carry, backwards along dimension 0.
  const std::string products = R"(HloModule m
mul {
  a = s32[2] parameter(0)
  b = s32[2] parameter(1)
  ROOT p = s32[2] multiply(a, b)
}
ENTRY e {
  a = s32[3,2] parameter(0)
  b = s32[3,2] parameter(1)
  ROOT s = s32[3,2] scan(a, b), dimensions={0}, num_carries=0, is_reverse=true, to_apply=mul
})";
  ExpectValue(products,
              {Array(PrimitiveType::kS32, {3, 2}, {1, 2, 3, 4, 5, 6}),
               Array(PrimitiveType::kS32, {3, 2}, {-1, 2, 0, 1, 2, 3})},
              Array(PrimitiveType::kS32, {3, 2}, {-1, 4, 0, 4, 10, 18}));
  ExpectCompiledMatchesInterpreterOnRandomInputs(rows, 5);
}

TEST(ControlScanTest, MalformedScansAreRefusedWithTheirLine) {
  ExpectMalformed(Replaced(CumulativeSum(""), "num_carries=1", "num_carries=2"),
                  "ROOT s =", "num_carries=2 leaves no input among 2 operands");
  ExpectMalformed(
      Replaced(CumulativeSum(""), "ROOT s = (f32[4], f32[])", "ROOT s = (f32[5], f32[])"),
      "ROOT s =", "output 0 f32[5] is not 4 long in dimension 0");
  ExpectMalformed(Replaced(CumulativeSum(""), "ROOT t = (f32[], f32[]) tuple(s, s)",
                           "ROOT t = (f32[], f32[], f32[]) tuple(s, s, s)"),
                  "ROOT s =", "the scanned computation returns (f32[], f32[], f32[])");
  ExpectMalformed(Replaced(CumulativeSum(""), "dimensions={0}", "dimensions={1}"),
                  "ROOT s =", "input 0 f32[4] has no dimension 1");
}

}  // namespace
}  // namespace hlocache::compiler
