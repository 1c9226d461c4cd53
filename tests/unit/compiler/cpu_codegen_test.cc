// The CPU code generator end to end: HLO -> C++ -> the system compiler -> artifact -> loaded from
// memory -> run on buffers, and compared with the reference interpreter, bit for bit.
#include "compiler/codegen/cpu_codegen.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "compiler/artifact/container.h"
#include "compiler/artifact/loader.h"
#include "compiler/hlo/parser.h"
#include "compiler/interp/interpreter.h"
#include "compiler/target.h"
#include "compiler/toolchain.h"
#include "tests/unit/status_matchers.h"

namespace hlocache::compiler {
namespace {

using hlo::PrimitiveType;
using interp::Literal;
using ::testing::HasSubstr;

Literal Array(PrimitiveType type, std::vector<int64_t> dims, const std::vector<double>& values) {
  hlo::Shape s;
  s.type = type;
  s.dims = std::move(dims);
  Literal l(s);
  for (size_t i = 0; i < l.size(); ++i) {
    if (l.is_float()) {
      l.SetFloat(i, values[i]);
    } else {
      l.SetInt(i, static_cast<int64_t>(values[i]));
    }
  }
  return l;
}

// Compiles `text`, runs it on `args`, and checks the result against the interpreter's.
void ExpectCompiledMatchesInterpreter(const std::string& text, const std::vector<Literal>& args) {
  auto module = hlo::ParseModule(text, "g.hlo");
  ASSERT_THAT(module, IsOk());
  auto expected = interp::Evaluate(*module, args);
  ASSERT_THAT(expected, IsOk());

  auto source = LowerToCpp(*module);
  ASSERT_THAT(source, IsOk());
  auto again = LowerToCpp(*module);
  ASSERT_THAT(again, IsOk());
  EXPECT_EQ(*source, *again) << "the generated source is not deterministic";
  auto toolchain = Toolchain::Probe(ToolchainOptions());
  ASSERT_THAT(toolchain, IsOk());
  auto so = toolchain->CompileSharedObject(*source, HostCpuTarget());
  ASSERT_THAT(so, IsOk()) << *source;
  ArtifactHeader header;
  header.key = "v1-00000000000000000000000000000000";
  header.target = HostCpuTarget();
  header.compiler_id = toolchain->CompilerId();
  header.payload_kind = std::string(kPayloadSharedObject);
  header.entry_symbol = kEntrySymbol;
  auto loaded = LoadedExecutable::Load(EncodeArtifact(header, *so));
  ASSERT_THAT(loaded, IsOk());

  std::vector<std::string> in_bytes;
  std::vector<const void*> params;
  for (const Literal& a : args) in_bytes.push_back(interp::ToBytes(a));
  for (const std::string& b : in_bytes) params.push_back(b.data());
  std::vector<const Literal*> leaves;
  if (expected->is_tuple()) {
    for (const Literal& e : expected->elements()) leaves.push_back(&e);
  } else {
    leaves.push_back(&*expected);
  }
  std::vector<std::string> out_bytes;
  std::vector<void*> results;
  for (const Literal* leaf : leaves)
    out_bytes.push_back(std::string(interp::ToBytes(*leaf).size(), '\x55'));
  for (std::string& b : out_bytes) results.push_back(b.data());
  auto entry = reinterpret_cast<int (*)(const void* const*, void* const*)>((*loaded)->entry());
  ASSERT_EQ(entry(params.data(), results.data()), 0);
  for (size_t k = 0; k < leaves.size(); ++k) {
    auto got = interp::FromBytes(leaves[k]->shape(), out_bytes[k]);
    ASSERT_THAT(got, IsOk());
    EXPECT_TRUE(*got == *leaves[k]) << "result " << k << ": compiled " << got->ToString()
                                    << ", interpreter " << leaves[k]->ToString();
  }
}

TEST(CpuCodegenTest, FloatElementwiseMatchesTheInterpreterBitForBit) {
  ExpectCompiledMatchesInterpreter(
      R"(ENTRY e {
  a = f32[6] parameter(0)
  b = f32[6] parameter(1)
  s = f32[6] add(a, b)
  m = f32[6] multiply(s, a)
  d = f32[6] divide(m, b)
  x = f32[6] maximum(d, a)
  e = f32[6] exponential(a)
  t = f32[6] tanh(x)
  q = f32[6] sqrt(b)
  l = f32[6] logistic(a)
  r = f32[6] remainder(a, b)
  n = f32[6] negate(r)
  ROOT o = (f32[6], f32[6], f32[6], f32[6], f32[6], f32[6]) tuple(x, e, t, q, l, n)
})",
      {Array(PrimitiveType::kF32, {6}, {0.1, -2.5, 3e38, NAN, 1, -0.0}),
       Array(PrimitiveType::kF32, {6}, {0.2, 0, 3e38, 1, -7, 3})});
}

TEST(CpuCodegenTest, IntegerSemanticsMatchTheInterpreter) {
  ExpectCompiledMatchesInterpreter(
      R"(ENTRY e {
  a = s32[6] parameter(0)
  b = s32[6] parameter(1)
  s = s32[6] add(a, b)
  d = s32[6] divide(a, b)
  r = s32[6] remainder(a, b)
  sl = s32[6] shift-left(a, b)
  sr = s32[6] shift-right-arithmetic(a, b)
  p = s32[6] power(b, b)
  ROOT o = (s32[6], s32[6], s32[6], s32[6], s32[6], s32[6]) tuple(s, d, r, sl, sr, p)
})",
      {Array(PrimitiveType::kS32, {6}, {2147483647, 7, -7, -2147483648.0, 9, -1}),
       Array(PrimitiveType::kS32, {6}, {1, 0, 2, -1, 40, 3})});
  ExpectCompiledMatchesInterpreter(R"(ENTRY e {
  a = u8[4] parameter(0)
  b = u8[4] parameter(1)
  s = u8[4] subtract(a, b)
  l = u8[4] shift-right-logical(a, b)
  ROOT o = (u8[4], u8[4]) tuple(s, l)
})",
                                   {Array(PrimitiveType::kU8, {4}, {1, 255, 128, 0}),
                                    Array(PrimitiveType::kU8, {4}, {2, 1, 7, 9})});
}

TEST(CpuCodegenTest, ShapesConstantsConversionsAndPredicates) {
  ExpectCompiledMatchesInterpreter(
      R"(ENTRY e {
  a = f32[2,3] parameter(0)
  io = s32[2,3] iota(), iota_dimension=1
  c = f32[3] constant({-0, inf, nan})
  bc = f32[2,3] broadcast(c), dimensions={1}
  t = f32[3,2] transpose(a), dimensions={1,0}
  re = f32[6] reshape(t)
  i = s32[2,3] convert(a)
  lt = pred[2,3] compare(a, bc), direction=LT
  sel = f32[2,3] select(lt, a, bc)
  fi = pred[2,3] is-finite(sel)
  ROOT o = (s32[2,3], f32[6], s32[2,3], pred[2,3], f32[2,3], pred[2,3]) tuple(io, re, i, lt, sel, fi)
})",
      {Array(PrimitiveType::kF32, {2, 3}, {1.5, -1e10, NAN, 2.9, 4e9, -0.5})});
}

TEST(CpuCodegenTest, DotsAndReductionsMatchTheInterpreterBitForBit) {
  ExpectCompiledMatchesInterpreter(R"(
sum {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
max {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT m = f32[] maximum(y, x)
}
ENTRY e {
  a = f32[2,3,4] parameter(0)
  b = f32[2,4,5] parameter(1)
  bmm = f32[2,3,5] dot(a, b), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_contracting_dims={1}
  z = f32[] constant(0)
  rows = f32[2,5] reduce(bmm, z), dimensions={1}, to_apply=sum
  ninf = f32[] constant(-inf)
  mx = f32[3] reduce(a, ninf), dimensions={0,2}, to_apply=max
  all = f32[] reduce(a, z), dimensions={0,1,2}, to_apply=sum
  ROOT o = (f32[2,3,5], f32[2,5], f32[3], f32[]) tuple(bmm, rows, mx, all)
})",
                                   {[] {
                                      std::vector<double> v;
                                      for (int i = 0; i < 24; ++i) v.push_back(0.1 * i - 1.3);
                                      return Array(PrimitiveType::kF32, {2, 3, 4}, v);
                                    }(),
                                    [] {
                                      std::vector<double> v;
                                      for (int i = 0; i < 40; ++i) v.push_back(1.0 / (i + 1));
                                      return Array(PrimitiveType::kF32, {2, 4, 5}, v);
                                    }()});
  ExpectCompiledMatchesInterpreter(R"(
mul {
  x = s64[] parameter(0)
  y = s64[] parameter(1)
  ROOT m = s64[] multiply(x, y)
}
ENTRY e {
  a = s64[3,2] parameter(0)
  b = s64[2] parameter(1)
  mv = s64[3] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  one = s64[] constant(1)
  p = s64[2] reduce(a, one), dimensions={0}, to_apply=mul
  ROOT o = (s64[3], s64[2]) tuple(mv, p)
})",
                                   {Array(PrimitiveType::kS64, {3, 2}, {4e9, 3, -5, 7, 1, 2}),
                                    Array(PrimitiveType::kS64, {2}, {5e9, -2})});
}

TEST(CpuCodegenTest, UnsupportedOpsAreNamedWithTheirLine) {
  auto module = hlo::ParseModule(
      "ENTRY e {\n  a = f32[2,2] parameter(0)\n  ROOT s = f32[2,2] sort(a), dimensions={0}\n}",
      "g.hlo");
  ASSERT_THAT(module, IsOk());
  EXPECT_THAT(LowerToCpp(*module),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("g.hlo:3:")));
  EXPECT_THAT(LowerToCpp(*module), StatusIs(StatusCode::kFailedPrecondition, HasSubstr("'sort'")));
  // Ops HLO leaves undefined are refused rather than handed to c++ as code it would reject.
  for (const char* text :
       {"ENTRY e {\n  a = pred[2] parameter(0)\n  ROOT s = pred[2] subtract(a, a)\n}",
        "ENTRY e {\n  a = f32[2] parameter(0)\n  ROOT n = f32[2] not(a)\n}",
        "ENTRY e {\n  a = s32[2] parameter(0)\n  ROOT f = pred[2] is-finite(a)\n}"}) {
    auto m = hlo::ParseModule(text, "g.hlo");
    ASSERT_THAT(m, IsOk());
    EXPECT_THAT(LowerToCpp(*m), StatusIs(StatusCode::kFailedPrecondition, HasSubstr("g.hlo:3:")))
        << text;
  }
  // A malformed module (an operand count its op does not take) is an input error.
  auto malformed = hlo::ParseModule(
      "ENTRY e {\n  a = f32[2] parameter(0)\n  ROOT s = f32[2] select(a)\n}", "g.hlo");
  ASSERT_THAT(malformed, IsOk());
  EXPECT_THAT(LowerToCpp(*malformed), StatusIs(StatusCode::kInvalidArgument,
                                               HasSubstr("g.hlo:3: 's' (select) has 1 operands")));
}

}  // namespace
}  // namespace hlocache::compiler
