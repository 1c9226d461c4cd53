// Bounded dynamic shapes: values at their run-time sizes in the interpreter, buffers laid out by
// the bounds with their sizes after them in compiled code, and both agreeing; the ops that take
// them, the sizes each gives, and the refusal of everything else by name.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "compiler/artifact/execute.h"
#include "compiler/artifact/loader.h"
#include "compiler/semantics/dynamic_shapes.h"
#include "tests/unit/compiler/ops/op_check.h"

namespace hlocache::compiler {
namespace {

using hlo::PrimitiveType;
using interp::Literal;
using op_check::Eval;
using op_check::ExpectValue;
using op_check::Replaced;

// An elementwise chain, a broadcast and a transpose of a value of 3 rows where 5 fit: the
// results are 3 rows too, and the padding never shows.
TEST(DynamicTest, ElementwiseBroadcastAndTransposeKeepTheSizes) {
  const std::string text = R"(HloModule m

ENTRY e {
  x = f32[<=5,2] parameter(0)
  n = f32[<=5,2] negate(x)
  s = f32[<=5,2] multiply(n, x)
  lt = pred[<=5,2] compare(s, n), direction=LT
  c = s32[<=5,2] convert(lt)
  b = f32[4,<=5,2] broadcast(s), dimensions={1,2}
  t = f32[2,<=5] transpose(s), dimensions={1,0}
  ROOT r = (s32[<=5,2], f32[4,<=5,2], f32[2,<=5]) tuple(c, b, t)
})";
  const Literal x = F32({3, 2}, {1, -2, 3, -4, 0.5, 6});
  auto r = Eval(text, {x});
  ASSERT_THAT(r, IsOk());
  // s = -x * x; s < -x where |x| > 1.
  EXPECT_EQ(r->elements()[0], S32({3, 2}, {0, 1, 1, 1, 0, 1}));
  EXPECT_EQ(r->elements()[1].shape().dims, (std::vector<int64_t>{4, 3, 2}));
  EXPECT_EQ(r->elements()[2], F32({2, 3}, {-1, -9, -0.25, -4, -16, -36}));
  ExpectCompiledMatchesInterpreter(text, {x});
  // At the bound, and empty.
  ExpectCompiledMatchesInterpreter(text, {F32({5, 2}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10})});
  ExpectCompiledMatchesInterpreter(text, {F32({0, 2}, {})});
}

TEST(DynamicTest, SetAndGetDimensionSize) {
  const std::string text = R"(HloModule m

ENTRY e {
  x = f32[4,3] parameter(0)
  n = s32[] parameter(1)
  s = f32[4,<=3] set-dimension-size(x, n), dimensions={1}
  g = s32[] get-dimension-size(s), dimensions={1}
  ROOT r = (f32[4,<=3], s32[]) tuple(s, g)
})";
  const Literal x = F32({4, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  auto two = Eval(text, {x, S32({}, {2})});
  ASSERT_THAT(two, IsOk());
  EXPECT_EQ(two->elements()[0], F32({4, 2}, {1, 2, 4, 5, 7, 8, 10, 11}));
  EXPECT_EQ(two->elements()[1], S32({}, {2}));
  // Sizes past the dimension, or negative, are clamped to it.
  auto nine = Eval(text, {x, S32({}, {9})});
  ASSERT_THAT(nine, IsOk());
  EXPECT_EQ(nine->elements()[1], S32({}, {3}));
  auto negative = Eval(text, {x, S32({}, {-1})});
  ASSERT_THAT(negative, IsOk());
  EXPECT_EQ(negative->elements()[1], S32({}, {0}));
  for (double n : {2.0, 9.0, -1.0, 0.0}) ExpectCompiledMatchesInterpreter(text, {x, S32({}, {n})});
}

// reshape into and out of dynamic shapes: the elements in row-major order at their sizes.
TEST(DynamicTest, ReshapesRelayTheElementsInRowMajorOrder) {
  const std::string text = R"(HloModule m

ENTRY e {
  x = s32[3,<=4] parameter(0)
  f = s32[<=12] reshape(x)
  one = s32[1,<=12] reshape(f)
  ROOT r = (s32[<=12], s32[1,<=12]) tuple(f, one)
})";
  // Three rows of 2 (of room for 4): six elements, packed.
  const Literal x = S32({3, 2}, {1, 2, 3, 4, 5, 6});
  ExpectValue(text, {x},
              op_check::Tuple({S32({6}, {1, 2, 3, 4, 5, 6}), S32({1, 6}, {1, 2, 3, 4, 5, 6})}));
  ExpectCompiledMatchesInterpreter(text, {S32({3, 4}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})});
  // dynamic-reshape: the sizes given, clamped to the bounds; elements past the operand's end
  // are zeros.
  const std::string dynamic = R"(HloModule m

ENTRY e {
  x = f32[6] parameter(0)
  a = s32[] parameter(1)
  b = s32[] parameter(2)
  ROOT r = f32[<=2,<=4] dynamic-reshape(x, a, b)
})";
  const Literal six = F32({6}, {1, 2, 3, 4, 5, 6});
  ExpectValue(dynamic, {six, S32({}, {2}), S32({}, {3})}, F32({2, 3}, {1, 2, 3, 4, 5, 6}));
  ExpectValue(dynamic, {six, S32({}, {1}), S32({}, {2})}, F32({1, 2}, {1, 2}));
  ExpectValue(dynamic, {six, S32({}, {5}), S32({}, {4})}, F32({2, 4}, {1, 2, 3, 4, 5, 6, 0, 0}));
}

TEST(DynamicTest, OpsOutsideTheSetAndUnboundedDimensionsAreRefusedByName) {
  auto refused = [](const std::string& text, const std::string& why) {
    SCOPED_TRACE(why);
    auto m = hlo::ParseModule(text, "g.hlo");
    ASSERT_THAT(m, IsOk());
    auto args = interp::MakeArguments(*m, interp::ArgumentFill::kZeros, 0);
    const auto is = StatusIs(StatusCode::kFailedPrecondition, ::testing::HasSubstr(why));
    if (args) {
      EXPECT_THAT(interp::Evaluate(*m, *args), is);
    }
    EXPECT_THAT(LowerToCpp(*m), is);
  };
  refused(R"(HloModule m

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY e {
  x = f32[<=5] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[] reduce(x, z), dimensions={0}, to_apply=add
})",
          "dynamic dimensions in 'reduce'");
  refused("HloModule m\n\nENTRY e {\n  x = f32[<=5] parameter(0)\n  ROOT r = f32[5] negate(x)\n}\n",
          "a static result of dynamic operands");
  auto unbounded = hlo::ParseModule(
      "HloModule m\n\nENTRY e {\n  x = f32[?,3] parameter(0)\n  ROOT r = f32[?,3] abs(x)\n}\n",
      "g.hlo");
  ASSERT_THAT(unbounded, IsOk());
  EXPECT_THAT(LowerToCpp(*unbounded),
              StatusIs(StatusCode::kFailedPrecondition, ::testing::HasSubstr("unbounded dynamic")));
}

// Sizes in an argument's buffer past its bounds are clamped, never followed.
TEST(DynamicTest, SizesPastTheBoundsAreClampedInCompiledCode) {
  auto m = hlo::ParseModule(
      "HloModule m\n\nENTRY e {\n  x = f32[<=4] parameter(0)\n  ROOT r = f32[<=4] negate(x)\n}\n",
      "g.hlo");
  ASSERT_THAT(m, IsOk());
  const std::unique_ptr<LoadedExecutable> loaded = BuildAndLoad(*m);
  ASSERT_NE(loaded, nullptr);
  float in[5] = {1, 2, 3, 4, 0};
  const int32_t huge = 1 << 30;
  std::memcpy(&in[4], &huge, sizeof huge);
  float out[5] = {};
  const void* params[] = {in};
  void* results[] = {out};
  auto entry = reinterpret_cast<int (*)(const void* const*, void* const*)>(loaded->entry());
  ASSERT_EQ(entry(params, results), 0);
  int32_t size;
  std::memcpy(&size, &out[4], sizeof size);
  EXPECT_EQ(size, 4);
  EXPECT_EQ(out[3], -4.0f);
}

TEST(DynamicTest, ArgumentsTakeSizesInsideTheirBounds) {
  hlo::Shape s;
  s.type = PrimitiveType::kF32;
  s.dims = {8, 3, 1};
  s.dynamic = {true, false, true};
  const hlo::Shape a = interp::ArgumentShape(s);
  EXPECT_EQ(a.dims, (std::vector<int64_t>{6, 3, 1}));
  EXPECT_FALSE(a.IsDynamic());
  EXPECT_TRUE(interp::Admits(s, a));
  hlo::Shape over = a;
  over.dims[0] = 9;
  EXPECT_FALSE(interp::Admits(s, over));
  hlo::Shape wrong = a;
  wrong.dims[1] = 2;
  EXPECT_FALSE(interp::Admits(s, wrong));
}

}  // namespace
}  // namespace hlocache::compiler
