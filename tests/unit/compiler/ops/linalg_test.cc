// cholesky and triangular-solve: hand-computed factors and solutions for the interpreter (only
// the named triangle read, NaN past a matrix that is not positive definite), the compiled code
// checked against it on them and on random batches for every combination of the options, and
// malformed ones refused with their line.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "tests/unit/compiler/ops/op_check.h"

namespace hlocache::compiler {
namespace {

using hlo::PrimitiveType;
using interp::Literal;
using op_check::ExpectMalformed;
using op_check::ExpectValue;

Literal F64(std::vector<int64_t> dims, const std::vector<double>& values) {
  return Array(PrimitiveType::kF64, std::move(dims), values);
}

std::string Cholesky(const std::string& shape, const std::string& attributes) {
  return "HloModule m\n\nENTRY e {\n  a = " + shape + " parameter(0)\n  ROOT c = " + shape +
         " cholesky(a)" + attributes + "\n}\n";
}

std::string Solve(const std::string& a, const std::string& b, const std::string& attributes) {
  return "HloModule m\n\nENTRY e {\n  a = " + a + " parameter(0)\n  b = " + b +
         " parameter(1)\n  ROOT x = " + b + " triangular-solve(a, b)" + attributes + "\n}\n";
}

TEST(LinalgTest, CholeskyFactorsFromTheNamedTriangleAlone) {
  // A = L L^T with L = [[1,0,0],[2,4,0],[3,5,6]]; 99 stands where the other triangle is not read.
  ExpectValue(Cholesky("f64[3,3]", ", lower=true"),
              {F64({3, 3}, {1, 99, 99, 2, 20, 99, 3, 26, 70})},
              F64({3, 3}, {1, 0, 0, 2, 4, 0, 3, 5, 6}));
  ExpectValue(Cholesky("f64[3,3]", ", lower=false"),
              {F64({3, 3}, {1, 2, 3, 99, 20, 26, 99, 99, 70})},
              F64({3, 3}, {1, 2, 3, 0, 4, 5, 0, 0, 6}));
  // Not positive definite: the square root of 1 - 4 is NaN.
  auto got = op_check::Eval(Cholesky("f64[2,2]", ", lower=true"), {F64({2, 2}, {1, 0, 2, 1})});
  ASSERT_THAT(got, IsOk());
  EXPECT_EQ(got->GetFloat(0), 1);
  EXPECT_EQ(got->GetFloat(2), 2);
  EXPECT_TRUE(std::isnan(got->GetFloat(3)));
  ExpectCompiledMatchesInterpreter(Cholesky("f64[2,2]", ", lower=true"),
                                   {F64({2, 2}, {1, 0, 2, 1})});
  // Batches of every float type, compiled and interpreted alike.
  for (const char* shape : {"f32[3,5,5]", "bf16[2,4,4]", "f64[1,16,16]", "f32[0,3,3]"}) {
    SCOPED_TRACE(shape);
    ExpectCompiledMatchesInterpreterOnRandomInputs(Cholesky(shape, ", lower=true"), 3);
    ExpectCompiledMatchesInterpreterOnRandomInputs(Cholesky(shape, ""), 4);
  }
}

TEST(LinalgTest, TriangularSolveSolvesOnEitherSideWithEveryOption) {
  // L = [[2,0],[3,4]] (7: the upper triangle, not read).
  const Literal l = F64({2, 2}, {2, 7, 3, 4});
  ExpectValue(Solve("f64[2,2]", "f64[2,2]", ", left_side=true, lower=true"),
              {l, F64({2, 2}, {2, 4, 11, 16})}, F64({2, 2}, {1, 2, 2, 2.5}));
  ExpectValue(Solve("f64[2,2]", "f64[2,1]", ", left_side=true, lower=true, transpose_a=TRANSPOSE"),
              {l, F64({2, 1}, {8, 8})}, F64({2, 1}, {1, 2}));
  ExpectValue(Solve("f64[2,2]", "f64[1,2]", ", left_side=false, lower=true"),
              {l, F64({1, 2}, {8, 8})}, F64({1, 2}, {1, 2}));
  ExpectValue(Solve("f64[2,2]", "f64[2,1]", ", left_side=true, lower=true, unit_diagonal=true"),
              {F64({2, 2}, {9, 7, 3, 9}), F64({2, 1}, {1, 5})}, F64({2, 1}, {1, 2}));
  ExpectValue(Solve("f64[2,2]", "f64[2,1]", ", left_side=true, lower=false"),
              {F64({2, 2}, {2, 3, 7, 4}), F64({2, 1}, {8, 8})}, F64({2, 1}, {1, 2}));
  // Every combination of the options, in one module compiled once.
  std::string text =
      "HloModule m\n\nENTRY e {\n  a = f32[2,5,5] parameter(0)\n"
      "  bl = f32[2,5,3] parameter(1)\n  br = f32[2,3,5] parameter(2)\n";
  std::string shapes, names;
  int n = 0;
  for (const char* side : {"true", "false"}) {
    for (const char* lower : {"true", "false"}) {
      for (const char* unit : {"true", "false"}) {
        for (const char* transpose : {"NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"}) {
          const bool left = std::string(side) == "true";
          const std::string shape = left ? "f32[2,5,3]" : "f32[2,3,5]";
          const std::string x = "x" + std::to_string(n++);
          text += "  " + x + " = " + shape + " triangular-solve(a, " + (left ? "bl" : "br") +
                  "), left_side=" + side + ", lower=" + lower + ", unit_diagonal=" + unit +
                  ", transpose_a=" + transpose + "\n";
          shapes += (shapes.empty() ? "" : ", ") + shape;
          names += (names.empty() ? "" : ", ") + x;
        }
      }
    }
  }
  text += "  ROOT t = (" + shapes + ") tuple(" + names + ")\n}\n";
  ExpectCompiledMatchesInterpreterOnRandomInputs(text, 5);
}

TEST(LinalgTest, MalformedLinearAlgebraIsRefusedWithItsLine) {
  ExpectMalformed(Cholesky("f32[2,3]", ""), "cholesky", "is not [..., n, n]");
  ExpectMalformed(Cholesky("f32[3,3]", ", lower=maybe"), "cholesky", "lower is neither");
  ExpectMalformed(Solve("f32[3,3]", "f32[2,3]", ", left_side=true"), "triangular-solve",
                  "rows are not a's size");
  ExpectMalformed(Solve("f32[3,3]", "f32[3,3]", ", transpose_a=SIDEWAYS"), "triangular-solve",
                  "transpose_a is not");
  ExpectMalformed(Solve("f32[2,3,3]", "f32[1,3,3]", ", left_side=true"), "triangular-solve",
                  "batch dimensions differ");
}

}  // namespace
}  // namespace hlocache::compiler
