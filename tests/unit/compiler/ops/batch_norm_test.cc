// batch-norm-training, -inference and -grad: hand-computed values for the interpreter, the
// compiled code checked against it on them and on random inputs (features in the middle, first
// and last, 16-bit floats), and malformed batch norms refused with their line.
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
using op_check::Tuple;

const char* kTraining = R"(HloModule m

ENTRY e {
  x = f32[2,2] parameter(0)
  scale = f32[2] parameter(1)
  offset = f32[2] parameter(2)
  ROOT t = (f32[2,2], f32[2], f32[2]) batch-norm-training(x, scale, offset), epsilon=0, feature_index=1
}
)";

TEST(BatchNormTest, TrainingNormalizesEachFeatureByItsOwnMeanAndVariance) {
  // Feature 0 holds 1 and 3 (mean 2, variance 1), feature 1 holds 10 and 30 (mean 20,
  // variance 100).
  const Literal x = F32({2, 2}, {1, 10, 3, 30});
  ExpectValue(kTraining, {x, F32({2}, {2, 1}), F32({2}, {0, 5})},
              Tuple({F32({2, 2}, {-2, 4, 2, 6}), F32({2}, {2, 20}), F32({2}, {1, 100})}));
  ExpectCompiledMatchesInterpreterOnRandomInputs(Replaced(kTraining, "epsilon=0", "epsilon=0.001"),
                                                 1);
}

TEST(BatchNormTest, InferenceUsesTheGivenMeanAndVariance) {
  const std::string text = R"(HloModule m

ENTRY e {
  x = f32[2,2] parameter(0)
  scale = f32[2] parameter(1)
  offset = f32[2] parameter(2)
  mean = f32[2] parameter(3)
  var = f32[2] parameter(4)
  ROOT y = f32[2,2] batch-norm-inference(x, scale, offset, mean, var), epsilon=0, feature_index=1
}
)";
  ExpectValue(text,
              {F32({2, 2}, {1, 10, 3, 30}), F32({2}, {2, 1}), F32({2}, {0, 5}), F32({2}, {0, 10}),
               F32({2}, {4, 25})},
              F32({2, 2}, {1, 5, 3, 9}));
}

TEST(BatchNormTest, GradSumsTheOutputGradientPerFeature) {
  const std::string text = R"(HloModule m

ENTRY e {
  x = f32[2,2] parameter(0)
  scale = f32[2] parameter(1)
  mean = f32[2] parameter(2)
  var = f32[2] parameter(3)
  dy = f32[2,2] parameter(4)
  ROOT g = (f32[2,2], f32[2], f32[2]) batch-norm-grad(x, scale, mean, var, dy), epsilon=0, feature_index=1
}
)";
  // Feature 0: doffset = 1 + 1, dscale = 1 * (1 - 2) + 1 * (3 - 2) = 0, and dx = scale / 2 *
  // (2 dy - doffset) = 0. Feature 1 (inv = 1/10): doffset = 1 - 1, dscale = (-10 - 10) / 10.
  ExpectValue(text,
              {F32({2, 2}, {1, 10, 3, 30}), F32({2}, {2, 1}), F32({2}, {2, 20}), F32({2}, {1, 100}),
               F32({2, 2}, {1, 1, 1, -1})},
              Tuple({F32({2, 2}, {0, 0, 0, 0}), F32({2}, {0, -2}), F32({2}, {2, 0})}));
  // Variances from random inputs can be negative: sqrt of a negative is NaN in both.
  ExpectCompiledMatchesInterpreterOnRandomInputs(Replaced(text, "epsilon=0", "epsilon=1e-05"), 2);
}

TEST(BatchNormTest, CompiledBatchNormsMatchTheInterpreter) {
  // NCHW (features second), NHWC (features last), 16-bit floats, features first.
  struct Case {
    const char* shape;
    const char* features;
    const char* index;
  };
  for (const Case& c : {Case{"f32[3,4,5,6]", "f32[4]", "1"}, Case{"f32[3,4,5,6]", "f32[6]", "3"},
                        Case{"bf16[2,5,3,7]", "bf16[7]", "3"}, Case{"f16[8,3]", "f16[8]", "0"}}) {
    SCOPED_TRACE(c.shape);
    const std::string s = c.shape, v = c.features;
    ExpectCompiledMatchesInterpreterOnRandomInputs(
        "HloModule m\n\nENTRY e {\n  x = " + s + " parameter(0)\n  scale = " + v +
            " parameter(1)\n  offset = " + v + " parameter(2)\n  ROOT t = (" + s + ", " + v + ", " +
            v + ") batch-norm-training(x, scale, offset), epsilon=0.001, feature_index=" + c.index +
            "\n}\n",
        3);
  }
  ExpectCompiledMatchesInterpreterOnRandomInputs(R"(HloModule m

ENTRY e {
  x = f64[4,3,2] parameter(0)
  scale = f64[4] parameter(1)
  offset = f64[4] parameter(2)
  mean = f64[4] parameter(3)
  var = f64[4] parameter(4)
  a = f64[4] abs(var)
  ROOT y = f64[4,3,2] batch-norm-inference(x, scale, offset, mean, a), epsilon=1e-3, feature_index=0
}
)",
                                                 4);
}

TEST(BatchNormTest, MalformedBatchNormsAreRefusedWithTheirLine) {
  ExpectMalformed(Replaced(kTraining, "feature_index=1", "feature_index=2"), "ROOT t",
                  "feature_index is not a dimension of the operand");
  ExpectMalformed(Replaced(kTraining, "scale = f32[2]", "scale = f32[3]"), "ROOT t",
                  "operand 1 is not f32[2]");
  ExpectMalformed(Replaced(kTraining, "(f32[2,2], f32[2], f32[2]) batch", "f32[2,2] batch"),
                  "ROOT t", "the result is not (f32[2,2], f32[2], f32[2])");
  ExpectMalformed(Replaced(kTraining, "epsilon=0, ", ""), "ROOT t", "lacks epsilon");
  ExpectMalformed(Replaced(kTraining, "epsilon=0", "epsilon=-1"), "ROOT t",
                  "epsilon is not a non-negative number");
  auto m = hlo::ParseModule(
      "HloModule m\n\nENTRY e {\n  x = s32[2,2] parameter(0)\n  s = s32[2] parameter(1)\n"
      "  ROOT t = (s32[2,2], s32[2], s32[2]) batch-norm-training(x, s, s), epsilon=0, "
      "feature_index=1\n}\n",
      "g.hlo");
  ASSERT_THAT(m, IsOk());
  EXPECT_THAT(LowerToCpp(*m),
              StatusIs(StatusCode::kFailedPrecondition, ::testing::HasSubstr("batch norm of s32")));
}

}  // namespace
}  // namespace hlocache::compiler
