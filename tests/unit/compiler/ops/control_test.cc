// while: its meaning in the interpreter (hand-computed values), the compiled code against the
// interpreter, the loop state's buffers (a passed-through leaf is never copied nor written), and
// malformed loops refused with their line.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "compiler/artifact/loader.h"
#include "compiler/build.h"
#include "compiler/target.h"
#include "compiler/toolchain.h"
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

constexpr const char* kCounting = R"(HloModule m
cond {
  i = s32[] parameter(0)
  n = s32[] constant(10)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  i = s32[] parameter(0)
  one = s32[] constant(1)
  ROOT next = s32[] add(i, one)
}
ENTRY e {
  i0 = s32[] parameter(0)
  ROOT w = s32[] while(i0), condition=cond, body=body
})";

TEST(ControlTest, CountingLoopRunsUntilTheConditionFails) {
  ExpectValue(kCounting, {Scalar(PrimitiveType::kS32, 3)}, Scalar(PrimitiveType::kS32, 10));
  ExpectValue(kCounting, {Scalar(PrimitiveType::kS32, -5)}, Scalar(PrimitiveType::kS32, 10));
  // A loop whose condition is false at once never runs its body: the state is the init.
  ExpectValue(kCounting, {Scalar(PrimitiveType::kS32, 12)}, Scalar(PrimitiveType::kS32, 12));
  ExpectValue(kCounting, {Scalar(PrimitiveType::kS32, 10)}, Scalar(PrimitiveType::kS32, 10));
}

// A tuple state: a counter, a leaf the body passes through (w) and one it updates (acc).
constexpr const char* kTupleState = R"(HloModule m
cond {
  s = (s32[], f32[3], f32[3]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(4)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[3], f32[3]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  w = f32[3] get-tuple-element(s), index=1
  acc = f32[3] get-tuple-element(s), index=2
  acc1 = f32[3] add(acc, w)
  ROOT t = (s32[], f32[3], f32[3]) tuple(i1, w, acc1)
}
ENTRY e {
  w = f32[3] parameter(0)
  acc = f32[3] parameter(1)
  i = s32[] constant(0)
  t = (s32[], f32[3], f32[3]) tuple(i, w, acc)
  ROOT r = (s32[], f32[3], f32[3]) while(t), condition=cond, body=body
})";

TEST(ControlTest, TupleStateWithAPassedThroughLeaf) {
  const Literal w = Array(PrimitiveType::kF32, {3}, {1.5, -2, 0.25});
  const Literal acc = Array(PrimitiveType::kF32, {3}, {1, 2, 3});
  ExpectValue(
      kTupleState, {w, acc},
      Tuple({Scalar(PrimitiveType::kS32, 4), w, Array(PrimitiveType::kF32, {3}, {7, -6, 4})}));
  ExpectCompiledMatchesInterpreterOnRandomInputs(kTupleState, 7);
}

TEST(ControlTest, LeavesThatTradePlacesEachStep) {
  // The body returns (i + 1, c, b): each buffer is read as another leaf is written.
  const std::string text = R"(HloModule m
cond {
  s = (s32[], f32[2], (f32[2])) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[2], (f32[2])) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  b = f32[2] get-tuple-element(s), index=1
  ct = (f32[2]) get-tuple-element(s), index=2
  c = f32[2] get-tuple-element(ct), index=0
  bt = (f32[2]) tuple(b)
  ROOT t = (s32[], f32[2], (f32[2])) tuple(i1, c, bt)
}
ENTRY e {
  b = f32[2] parameter(0)
  c = f32[2] parameter(1)
  i = s32[] constant(0)
  ct = (f32[2]) tuple(c)
  t = (s32[], f32[2], (f32[2])) tuple(i, b, ct)
  ROOT r = (s32[], f32[2], (f32[2])) while(t), condition=cond, body=body
})";
  const Literal b = Array(PrimitiveType::kF32, {2}, {1, 2});
  const Literal c = Array(PrimitiveType::kF32, {2}, {3, 4});
  // Three swaps: an odd number, so b and c end up traded.
  ExpectValue(text, {b, c}, Tuple({Scalar(PrimitiveType::kS32, 3), c, Tuple({b})}));
}

TEST(ControlTest, NestedLoops) {
  // total += i + 1, four times per outer step, for i = 0, 1, 2: 4 * (1 + 2 + 3) = 24.
  const std::string text = R"(HloModule m
inner_cond {
  s = (s32[], s32[], s32[]) parameter(0)
  j = s32[] get-tuple-element(s), index=0
  n = s32[] constant(4)
  ROOT lt = pred[] compare(j, n), direction=LT
}
inner_body {
  s = (s32[], s32[], s32[]) parameter(0)
  j = s32[] get-tuple-element(s), index=0
  one = s32[] constant(1)
  j1 = s32[] add(j, one)
  i = s32[] get-tuple-element(s), index=1
  total = s32[] get-tuple-element(s), index=2
  i1 = s32[] add(i, one)
  total1 = s32[] add(total, i1)
  ROOT t = (s32[], s32[], s32[]) tuple(j1, i, total1)
}
outer_cond {
  s = (s32[], s32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}
outer_body {
  s = (s32[], s32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  total = s32[] get-tuple-element(s), index=1
  zero = s32[] constant(0)
  t = (s32[], s32[], s32[]) tuple(zero, i, total)
  w = (s32[], s32[], s32[]) while(t), condition=inner_cond, body=inner_body
  total1 = s32[] get-tuple-element(w), index=2
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  ROOT r = (s32[], s32[]) tuple(i1, total1)
}
ENTRY e {
  start = s32[] parameter(0)
  zero = s32[] constant(0)
  t = (s32[], s32[]) tuple(zero, start)
  w = (s32[], s32[]) while(t), condition=outer_cond, body=outer_body
  ROOT total = s32[] get-tuple-element(w), index=1
})";
  ExpectValue(text, {Scalar(PrimitiveType::kS32, 100)}, Scalar(PrimitiveType::kS32, 124));
}

// ---- The loop state's buffers ----------------------------------------------------------------

// Runs `text`'s compiled entry with its parameter 0 (f32[n]) in read-only memory: a loop that
// wrote a passed-through leaf, even with the values it holds, would fault.
void RunWithReadOnlyParameter(const std::string& text, size_t n, std::vector<float>& result) {
  auto module = hlo::ParseModule(text, "g.hlo");
  ASSERT_THAT(module, IsOk());
  auto toolchain = Toolchain::Probe(ToolchainOptions());
  ASSERT_THAT(toolchain, IsOk());
  auto artifact =
      BuildArtifact(*module, *toolchain, {"v1-00000000000000000000000000000000", HostCpuTarget()});
  ASSERT_THAT(artifact, IsOk());
  auto loaded = LoadedExecutable::Load(*artifact);
  ASSERT_THAT(loaded, IsOk());
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t bytes = (n * sizeof(float) + page - 1) / page * page;
  void* mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  auto* w = static_cast<float*>(mem);
  for (size_t i = 0; i < n; ++i) w[i] = static_cast<float>(i % 7) - 3;
  ASSERT_EQ(mprotect(mem, bytes, PROT_READ), 0);
  const void* params[] = {mem};
  void* results[] = {result.data()};
  auto entry = reinterpret_cast<int (*)(const void* const*, void* const*)>((*loaded)->entry());
  EXPECT_EQ(entry(params, results), 0);
  munmap(mem, bytes);
}

constexpr const char* kBigPassThrough = R"(HloModule m
cond {
  s = (s32[], f32[1048576], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(50)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[1048576], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  w = f32[1048576] get-tuple-element(s), index=1
  acc = f32[4] get-tuple-element(s), index=2
  head = f32[4] slice(w), slice={[0:4]}
  acc1 = f32[4] add(acc, head)
  kept = f32[1048576] opt-barrier(w)
  ROOT t = (s32[], f32[1048576], f32[4]) tuple(i1, kept, acc1)
}
ENTRY e {
  w = f32[1048576] parameter(0)
  z = f32[] constant(0)
  acc = f32[4] broadcast(z), dimensions={}
  i = s32[] constant(0)
  t = (s32[], f32[1048576], f32[4]) tuple(i, w, acc)
  r = (s32[], f32[1048576], f32[4]) while(t), condition=cond, body=body
  ROOT a = f32[4] get-tuple-element(r), index=2
})";

// Exits 0 when the loop of kBigPassThrough ran from read-only memory and got its result.
void RunFromReadOnlyMemoryAndExit() {
  std::vector<float> result(4, 0.f);
  RunWithReadOnlyParameter(kBigPassThrough, 1048576, result);
  const bool right = result == std::vector<float>{-150, -100, -50, 0};
  std::_Exit(right && !::testing::Test::HasFailure() ? 0 : 1);
}

TEST(ControlTest, APassedThroughLeafIsNeitherCopiedNorWritten) {
  auto module = hlo::ParseModule(kBigPassThrough, "g.hlo");
  ASSERT_THAT(module, IsOk());
  auto source = LowerToCpp(*module);
  ASSERT_THAT(source, IsOk());
  // The body hands its parameter leaf 1 on: it copies it only into a result that is not it...
  EXPECT_NE(source->find("if (r1 != p1) std::memcpy(r1, p1, 4194304LL);"), std::string::npos)
      << "if (r1 != p1) std::memcpy(r1, p1, 4194304LL);";
  // ...and the loop passes that very buffer as the result, and owns no buffers for it, while the
  // leaves that change swap between two buffers each.
  EXPECT_NE(source->find("const_cast<float*>(loop_0_1)"), std::string::npos)
      << "const_cast<float*>(loop_0_1)";
  EXPECT_EQ(source->find("loop_0_1_a"), std::string::npos);
  EXPECT_NE(source->find("loop_0_2_a"), std::string::npos) << "loop_0_2_a";
  EXPECT_NE(source->find("loop_0_2_b"), std::string::npos) << "loop_0_2_b";
  // At run time, from read-only memory: 50 steps add w[0:4] = {-3, -2, -1, 0} each time.
  EXPECT_EXIT(RunFromReadOnlyMemoryAndExit(), ::testing::ExitedWithCode(0), "");
}

// ---- Malformed loops ----------------------------------------------------------------------

TEST(ControlTest, LoopInvariantValuesAreComputedOnceOutsideTheSteps) {
  // Each step adds the same sum of iota * iota (invariant: it depends on no parameter), a
  // broadcast of it (an invariant array) and the step's own x; the condition compares with an
  // invariant bound. A random draw in the body depends on nothing either, but differs per step:
  // it must stay in the step.
  const std::string text = R"(HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
cond {
  p = (s32[], f32[8], f32[8]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  two = s32[] constant(2)
  four = s32[] constant(4)
  n = s32[] multiply(two, four)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  p = (s32[], f32[8], f32[8]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[8] get-tuple-element(p), index=1
  y = f32[8] get-tuple-element(p), index=2
  iota = f32[4096] iota(), iota_dimension=0
  sq = f32[4096] multiply(iota, iota)
  zero = f32[] constant(0)
  s = f32[] reduce(sq, zero), dimensions={0}, to_apply=add
  sb = f32[8] broadcast(s), dimensions={}
  x1 = f32[8] add(x, sb)
  lo = f32[] constant(0)
  hi = f32[] constant(1)
  r = f32[8] rng(lo, hi), distribution=rng_uniform
  y1 = f32[8] add(y, r)
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  ROOT t = (s32[], f32[8], f32[8]) tuple(i1, x1, y1)
}
ENTRY e {
  x0 = f32[8] parameter(0)
  z = s32[] constant(0)
  y0 = f32[8] broadcast(f32[] constant(0)), dimensions={}
  init = (s32[], f32[8], f32[8]) tuple(z, x0, y0)
  w = (s32[], f32[8], f32[8]) while(init), condition=cond, body=body
  x = f32[8] get-tuple-element(w), index=1
  y = f32[8] get-tuple-element(w), index=2
  ROOT o = (f32[8], f32[8]) tuple(x, y)
})";
  const std::string source = ExpectCompiledMatchesInterpreterOnRandomInputs(text);
  ASSERT_FALSE(source.empty());
  // The function each instruction's code is in: the header of the last definition before it.
  auto function_of = [&](const std::string& code) {
    const size_t at = source.find(code);
    if (at == std::string::npos) return std::string("(not found)");
    const size_t start = source.rfind("\nint hc_comp", at);
    return source.substr(start + 1, source.find('(', start) - start - 1);
  };
  EXPECT_NE(function_of("// s = reduce").find("_invariants"), std::string::npos)
      << "the sum of iota * iota is computed outside the step\n"
      << source;
  EXPECT_NE(function_of("// n = multiply").find("_invariants"), std::string::npos)
      << "the condition's bound is computed outside the step\n"
      << source;
  EXPECT_EQ(function_of("// r = rng").find("_invariants"), std::string::npos)
      << "a random draw stays in the step\n"
      << source;
  EXPECT_EQ(function_of("// x1 = add").find("_invariants"), std::string::npos) << source;
  // Computed once: a static, initialized by the first step.
  EXPECT_NE(source.find("static const int hc_hoisted = "), std::string::npos) << source;
}

TEST(ControlTest, AStepWithoutInvariantsIsLoweredAsBefore) {
  const std::string source = ExpectCompiledMatchesInterpreterOnRandomInputs(kCounting);
  ASSERT_FALSE(source.empty());
  EXPECT_EQ(source.find("_invariants("), std::string::npos) << source;
}

TEST(ControlTest, MalformedLoopsAreRefusedWithTheirLine) {
  // A condition that does not return pred[].
  ExpectMalformed(Replaced(kCounting, "ROOT lt = pred[] compare(i, n), direction=LT",
                           "ROOT lt = s32[] add(i, n)"),
                  "ROOT w = s32[] while", "the condition returns s32[], not pred[]");
  // A body whose result is not the state's shape.
  ExpectMalformed(Replaced(kTupleState, "ROOT t = (s32[], f32[3], f32[3]) tuple(i1, w, acc1)",
                           "ROOT t = (s32[], f32[3]) tuple(i1, acc1)"),
                  "ROOT r = (s32[], f32[3], f32[3]) while", "the body returns (s32[], f32[3])");
  // A condition whose parameter is not the state.
  ExpectMalformed(Replaced(kCounting, "i = s32[] parameter(0)\n  n = s32[] constant(10)",
                           "i = s64[] parameter(0)\n  n = s64[] constant(10)"),
                  "ROOT w = s32[] while", "the condition's parameter 0 is s64[]");
  // A while whose result is not its state.
  ExpectMalformed(Replaced(kCounting, "ROOT w = s32[] while", "ROOT w = s64[] while"),
                  "ROOT w = s64[] while", "is not the state's shape");
}

}  // namespace
}  // namespace hlocache::compiler
