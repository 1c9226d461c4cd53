// Tokens, the ops that hand values on (add-dependency, opt-barrier, domain) and the
// asynchronous wrappers (copy-start/-done, async-start/-update/-done): their meaning in the
// interpreter, the compiled code against it, and malformed modules refused with their line.
#include <gtest/gtest.h>

#include <string>

#include "tests/unit/compiler/ops/op_check.h"

namespace hlocache::compiler {
namespace {

using hlo::PrimitiveType;
using interp::Literal;
using op_check::Eval;
using op_check::ExpectMalformed;
using op_check::Replaced;

TEST(ControlWrappersTest, TokensHoldNoData) {
  // A token literal is one element, always 0, whatever is stored; one byte in a buffer.
  Literal t = Token();
  t.SetInt(0, 5);
  EXPECT_EQ(t.GetInt(0), 0);
  EXPECT_EQ(interp::ToBytes(t), std::string(1, '\0'));
  auto back = interp::FromBytes(t.shape(), std::string(1, '\x7f'));
  ASSERT_THAT(back, IsOk());
  EXPECT_TRUE(*back == Token());
  hlo::Shape token;
  token.type = PrimitiveType::kToken;
  EXPECT_EQ(hlo::BufferElementBytes(token.type), 1);
}

constexpr const char* kTokens = R"(HloModule m
ENTRY e {
  t0 = token[] parameter(0)
  t1 = token[] parameter(1)
  x = f32[2,3] parameter(2)
  a = token[] after-all(t0, t1)
  b = token[] after-all()
  c = token[] after-all(a, b, t0)
  y = f32[2,3] add-dependency(x, c)
  z = f32[2,3] negate(y)
  ROOT r = (token[], f32[2,3], token[]) tuple(c, z, t1)
})";

TEST(ControlWrappersTest, TokensThroughAfterAllAndAddDependency) {
  const Literal x = Array(PrimitiveType::kF32, {2, 3}, {1, -2, 3, -4, 5, -6});
  const std::vector<Literal> args = {Token(), Token(), x};
  auto got = Eval(kTokens, args);
  ASSERT_THAT(got, IsOk());
  ASSERT_EQ(got->elements().size(), 3u);
  EXPECT_TRUE(got->elements()[0] == Token());
  EXPECT_TRUE(got->elements()[1] == Array(PrimitiveType::kF32, {2, 3}, {-1, 2, -3, 4, -5, 6}));
  EXPECT_TRUE(got->elements()[2] == Token());
  // The entry takes and returns one byte per token leaf.
  auto m = hlo::ParseModule(kTokens, "g.hlo");
  ASSERT_THAT(m, IsOk());
  auto leaves = EntryLeavesOf(*m);
  ASSERT_THAT(leaves, IsOk());
  ASSERT_EQ(leaves->parameters.size(), 3u);
  EXPECT_EQ(leaves->parameters[0].type, PrimitiveType::kToken);
  ASSERT_EQ(leaves->results.size(), 3u);
  EXPECT_EQ(leaves->results[2].type, PrimitiveType::kToken);
  ExpectCompiledMatchesInterpreter(kTokens, args);
  ExpectCompiledMatchesInterpreterOnRandomInputs(kTokens, 2);
}

TEST(ControlWrappersTest, BarriersAndDomainsAreTheirOperand) {
  const std::string text = R"(HloModule m
ENTRY e {
  a = s32[4] parameter(0)
  b = f32[2] parameter(1)
  t = (s32[4], f32[2]) tuple(a, b)
  o = (s32[4], f32[2]) opt-barrier(t)
  d = s32[4] domain(a), domain={kind="sharding", entry={maximal device=1}, exit={}}
  oa = s32[4] get-tuple-element(o), index=0
  s = s32[4] add(oa, d)
  ob = f32[2] opt-barrier(b)
  ROOT r = (s32[4], f32[2], (s32[4], f32[2])) tuple(s, ob, o)
})";
  const Literal a = Array(PrimitiveType::kS32, {4}, {1, -2, 2147483647, 0});
  const Literal b = Array(PrimitiveType::kF32, {2}, {0.5, -0.25});
  auto got = Eval(text, {a, b});
  ASSERT_THAT(got, IsOk());
  EXPECT_TRUE(got->elements()[0] == Array(PrimitiveType::kS32, {4}, {2, -4, -2, 0}));
  EXPECT_TRUE(got->elements()[1] == b);
  EXPECT_TRUE(got->elements()[2].elements()[0] == a);
  ExpectCompiledMatchesInterpreter(text, {a, b});
}

TEST(ControlWrappersTest, CopyStartAndDone) {
  const std::string text = R"(HloModule m
ENTRY e {
  x = f32[3,2] parameter(0)
  s = (f32[3,2], f32[3,2], u32[]) copy-start(x), cross_program_prefetch_index=0
  d = f32[3,2] copy-done(s)
  ROOT r = (f32[3,2], (f32[3,2], f32[3,2], u32[])) tuple(d, s)
})";
  const Literal x = Array(PrimitiveType::kF32, {3, 2}, {1, 2, 3, 4, 5, 6});
  auto got = Eval(text, {x});
  ASSERT_THAT(got, IsOk());
  EXPECT_TRUE(got->elements()[0] == x);
  const Literal& started = got->elements()[1];
  EXPECT_TRUE(started.elements()[0] == x);
  EXPECT_TRUE(started.elements()[1] == x);
  EXPECT_TRUE(started.elements()[2] == Array(PrimitiveType::kU32, {}, {0}));
  ExpectCompiledMatchesInterpreter(text, {x});
}

constexpr const char* kAsync = R"(HloModule m
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
wrapped {
  a = f32[4] parameter(0)
  b = s32[4] parameter(1)
  c = f32[4] convert(b)
  s = f32[4] subtract(a, c)
  r = f32[4] all-reduce(s), replica_groups={{0}}, to_apply=add
  ROOT t = (f32[4], s32[4]) tuple(r, b)
}
ENTRY e {
  a = f32[4] parameter(0)
  b = s32[4] parameter(1)
  start = ((f32[4], s32[4]), (f32[4], s32[4]), s32[]) async-start(a, b), calls=wrapped
  update = ((f32[4], s32[4]), (f32[4], s32[4]), s32[]) async-update(start), calls=wrapped
  done = (f32[4], s32[4]) async-done(update), calls=wrapped
  ROOT r = ((f32[4], s32[4]), ((f32[4], s32[4]), (f32[4], s32[4]), s32[])) tuple(done, start)
})";

TEST(ControlWrappersTest, AsyncStartRunsTheWrappedComputation) {
  const Literal a = Array(PrimitiveType::kF32, {4}, {1.5, 2, -3, 0});
  const Literal b = Array(PrimitiveType::kS32, {4}, {1, -2, 3, 7});
  auto got = Eval(kAsync, {a, b});
  ASSERT_THAT(got, IsOk());
  const Literal& done = got->elements()[0];
  EXPECT_TRUE(done.elements()[0] == Array(PrimitiveType::kF32, {4}, {0.5, 4, -6, -7}))
      << done.ToString();
  EXPECT_TRUE(done.elements()[1] == b);
  const Literal& start = got->elements()[1];
  EXPECT_TRUE(start.elements()[0].elements()[0] == a);
  EXPECT_TRUE(start.elements()[0].elements()[1] == b);
  EXPECT_TRUE(start.elements()[2] == Array(PrimitiveType::kS32, {}, {0}));
  ExpectCompiledMatchesInterpreter(kAsync, {a, b});
  ExpectCompiledMatchesInterpreterOnRandomInputs(kAsync, 9);
}

// ---- Malformed modules ------------------------------------------------------------------------

TEST(ControlWrappersTest, MalformedWrappersAreRefusedWithTheirLine) {
  ExpectMalformed(Replaced(kTokens, "after-all(t0, t1)", "after-all(t0, x)"),
                  "a = token[] after-all", "operand 1 is not a token");
  ExpectMalformed(
      Replaced(kTokens, "y = f32[2,3] add-dependency(x, c)", "y = f32[3,2] add-dependency(x, c)"),
      "y = f32[3,2] add-dependency", "the result f32[3,2] is not the operand's shape f32[2,3]");
  ExpectMalformed(Replaced(kTokens, "add-dependency(x, c)", "add-dependency(x)"),
                  "y = f32[2,3] add-dependency", "takes two operands");
  ExpectMalformed(Replaced(kAsync, "async-start(a, b)", "async-start(b, a)"), "start = ",
                  "the wrapped computation's parameter 0 is f32[4], but it is passed s32[4]");
  ExpectMalformed(
      Replaced(kAsync, "start = ((f32[4], s32[4]), (f32[4], s32[4]), s32[])",
               "start = ((f32[4]), (f32[4], s32[4]), s32[])"),
      "start = ", "is not ((operands...), the wrapped computation's result, contexts...)");
  ExpectMalformed(Replaced(kAsync, "done = (f32[4], s32[4]) async-done",
                           "done = (f32[4], s32[4], s32[]) async-done"),
                  "done = ", "the result (f32[4], s32[4], s32[]) is not (f32[4], s32[4])");
  const std::string copy = R"(HloModule m
ENTRY e {
  x = f32[3,2] parameter(0)
  s = (f32[3,2], f32[2,3], u32[]) copy-start(x)
  ROOT d = f32[3,2] copy-done(s)
})";
  ExpectMalformed(copy, "s = (f32[3,2]", "is not (f32[3,2], f32[3,2], u32[])");
}

}  // namespace
}  // namespace hlocache::compiler
