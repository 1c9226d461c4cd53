// scaled-dot and ragged-dot: hand-computed values for the interpreter, the compiled code against
// it on the same inputs and on random ones, and malformed forms refused with their line.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "tests/unit/compiler/ops/op_check.h"

namespace hlocache::compiler {
namespace {

using hlo::PrimitiveType;
using interp::Literal;
using op_check::Eval;
using op_check::ExpectMalformed;
using op_check::ExpectValue;
using op_check::Replaced;

std::string ScaledDot(const std::string& lhs, const std::string& rhs, const std::string& ls,
                      const std::string& rs, const std::string& out) {
  return "HloModule m\n\nENTRY e {\n  a = " + lhs + " parameter(0)\n  b = " + rhs +
         " parameter(1)\n  as = " + ls + " parameter(2)\n  bs = " + rs +
         " parameter(3)\n  ROOT d = " + out +
         " scaled-dot(a, b, as, bs), lhs_contracting_dims={1}, rhs_contracting_dims={1}\n}\n";
}

// Each operand times its block's scale, then dot: blocks of 4 along the contraction.
TEST(DotsTest, ScaledDotMultipliesEachBlockByItsScale) {
  const std::string text =
      ScaledDot("f8e4m3fn[2,8]", "f8e4m3fn[3,8]", "f8e8m0fnu[2,2]", "f8e8m0fnu[3,2]", "f32[2,3]");
  std::vector<double> ones(16, 1.0), threes(24, 1.0);
  threes[23] = 3;  // rhs row 2, last column.
  const std::vector<Literal> args = {Array(PrimitiveType::kF8E4M3FN, {2, 8}, ones),
                                     Array(PrimitiveType::kF8E4M3FN, {3, 8}, threes),
                                     Array(PrimitiveType::kF8E8M0FNU, {2, 2}, {1, 2, 4, 0.5}),
                                     Array(PrimitiveType::kF8E8M0FNU, {3, 2}, {1, 1, 1, 1, 1, 8})};
  // Row 0: 4 * 1 + 4 * 2 = 12; row 1: 4 * 4 + 4 * 0.5 = 18. Column 2's second block, scaled by
  // 8, is 8, 8, 8, 24: row 0 gives 4 + 2 * 48, row 1 gives 16 + 0.5 * 48.
  ExpectValue(text, args, F32({2, 3}, {12, 12, 100, 18, 18, 40}));
  // A bf16 operand with f32 scales is dequantized in f32; a scalar scale leaves its operand.
  ExpectCompiledMatchesInterpreterOnRandomInputs(
      ScaledDot("bf16[3,16]", "bf16[5,16]", "f32[3,4]", "f32[5,2]", "f32[3,5]"), 4);
  ExpectCompiledMatchesInterpreterOnRandomInputs(
      ScaledDot("f32[3,16]", "bf16[5,16]", "f32[]", "bf16[1,16]", "bf16[3,5]"), 5);
  ExpectMalformed(Replaced(text, "as = f8e8m0fnu[2,2]", "as = f8e8m0fnu[2,3]"), "ROOT d",
                  "lhs scale's dimension 1 does not cut its operand's into blocks");
  ExpectMalformed(Replaced(text, "as = f8e8m0fnu[2,2]", "as = f8e8m0fnu[2]"), "ROOT d",
                  "lhs scale's rank is not its operand's");
  ExpectMalformed(Replaced(text, "f32[2,3] scaled", "f32[2,4] scaled"), "ROOT d",
                  "the result's dimensions are not batch, lhs free, rhs free");
}

std::string RaggedDot(const std::string& lhs, const std::string& rhs, const std::string& sizes,
                      const std::string& out, const std::string& dims) {
  return "HloModule m\n\nENTRY e {\n  a = " + lhs + " parameter(0)\n  b = " + rhs +
         " parameter(1)\n  g = " + sizes + " parameter(2)\n  ROOT d = " + out +
         " ragged-dot(a, b, g), " + dims + "\n}\n";
}

// A ragged non-contracting dimension: rows in groups, each multiplied by its group's rhs.
TEST(DotsTest, RaggedRowsUseTheirGroupsRhs) {
  const std::string text =
      RaggedDot("f32[5,2]", "f32[3,2,2]", "s64[3]", "f32[5,2]",
                "lhs_contracting_dims={1}, rhs_contracting_dims={1}, lhs_ragged_dims={0}, "
                "rhs_group_dims={0}");
  // Groups of 2, 0 and 2 rows: rows 0-1 use rhs[0], rows 2-3 rhs[2], row 4 none (zeros).
  const Literal lhs = F32({5, 2}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  const Literal rhs = F32({3, 2, 2}, {1, 0, 0, 1, 9, 9, 9, 9, 2, 0, 0, 3});
  ExpectValue(text, {lhs, rhs, Array(PrimitiveType::kS64, {3}, {2, 0, 2})},
              F32({5, 2}, {1, 2, 3, 4, 10, 18, 14, 24, 0, 0}));
  // The corpus's form: group sizes per batch row of the outer dimension.
  ExpectCompiledMatchesInterpreterOnRandomInputs(
      RaggedDot("f32[4,6,5]", "f32[3,5,7]", "s64[4,3]", "f32[4,6,7]",
                "lhs_contracting_dims={2}, rhs_contracting_dims={1}, lhs_ragged_dims={1}, "
                "rhs_group_dims={0}"),
      6);
  // With batch dimensions and integers (which wrap).
  ExpectCompiledMatchesInterpreterOnRandomInputs(
      RaggedDot("s32[2,6,5]", "s32[3,2,5,4]", "u8[2,3]", "s32[2,6,4]",
                "lhs_batch_dims={0}, rhs_batch_dims={1}, lhs_contracting_dims={2}, "
                "rhs_contracting_dims={2}, lhs_ragged_dims={1}, rhs_group_dims={0}"),
      7);
}

// A ragged contracting dimension: each group sums its own contracting positions, the groups
// first in the result.
TEST(DotsTest, RaggedContractionsSumEachGroupsPositions) {
  const std::string text =
      RaggedDot("f32[2,4]", "f32[4,3]", "s32[2]", "f32[2,2,3]",
                "lhs_contracting_dims={1}, rhs_contracting_dims={0}, lhs_ragged_dims={1}");
  const Literal lhs = F32({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  const Literal rhs = F32({4, 3}, {1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1});
  // Group 0 is k = 0; group 1 is k = 1, 2, 3.
  ExpectValue(text, {lhs, rhs, Array(PrimitiveType::kS32, {2}, {1, 3})},
              F32({2, 2, 3}, {1, 0, 0, 5, 0, 0, 4, 6, 7, 8, 14, 15}));
  // The corpus's form: two contracting dimensions, sizes per outer contracting index.
  ExpectCompiledMatchesInterpreterOnRandomInputs(
      RaggedDot("f32[3,4,5]", "f32[4,5,2]", "s64[4,3]", "f32[3,3,2]",
                "lhs_contracting_dims={1,2}, rhs_contracting_dims={0,1}, lhs_ragged_dims={2}"),
      8);
}

TEST(DotsTest, MalformedRaggedDotsAreRefusedWithTheirLine) {
  const std::string text =
      RaggedDot("f32[5,2]", "f32[3,2,2]", "s64[3]", "f32[5,2]",
                "lhs_contracting_dims={1}, rhs_contracting_dims={1}, lhs_ragged_dims={0}, "
                "rhs_group_dims={0}");
  ExpectMalformed(Replaced(text, ", rhs_group_dims={0}", ""), "ROOT d",
                  "a ragged non-contracting dimension needs rhs_group_dims");
  ExpectMalformed(Replaced(text, "g = s64[3]", "g = s64[4]"), "ROOT d",
                  "rhs's group dimension is not the number of groups");
  ExpectMalformed(Replaced(text, "g = s64[3]", "g = f32[3]"), "ROOT d",
                  "group_sizes is not an integer array");
  ExpectMalformed(Replaced(text, "f32[5,2] ragged", "f32[5,3] ragged"), "ROOT d",
                  "the result is not f32[5,2]");
  ExpectMalformed(Replaced(text, "lhs_ragged_dims={0}", "lhs_ragged_dims={0,1}"), "ROOT d",
                  "the dimension numbers do not pair up");
  // A ragged batch dimension: well-formed, not computed.
  auto m = hlo::ParseModule(
      RaggedDot("f32[2,3,4]", "f32[2,4,5]", "s32[2]", "f32[2,3,5]",
                "lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, "
                "rhs_contracting_dims={1}, lhs_ragged_dims={0}"),
      "g.hlo");
  ASSERT_THAT(m, IsOk());
  EXPECT_THAT(LowerToCpp(*m), StatusIs(StatusCode::kFailedPrecondition,
                                       ::testing::HasSubstr("a ragged batch dimension")));
}

}  // namespace
}  // namespace hlocache::compiler
