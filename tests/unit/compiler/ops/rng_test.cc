// Random numbers: the generators against the published known-answer vectors of ThreeFry-2x32
// and Philox-4x32 (Random123), rng-bit-generator's state layouts and output orders, the
// stateful ops advancing per evaluation, rng's distributions, and the compiled code against
// the interpreter on each.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "compiler/semantics/prng.h"
#include "tests/unit/compiler/ops/op_check.h"

namespace hlocache::compiler {
namespace kat {
HLOCACHE_PRNG_CODE
}  // namespace kat
namespace {

using hlo::PrimitiveType;
using interp::Literal;
using op_check::Eval;
using op_check::ExpectMalformed;
using op_check::ExpectValue;
using op_check::Replaced;
using op_check::Tuple;

TEST(RngTest, GeneratorsGiveThePublishedKnownAnswers) {
  struct ThreeFry {
    uint32_t key[2], counter[2], want[2];
  };
  for (const ThreeFry& t :
       {ThreeFry{{0, 0}, {0, 0}, {0x6b200159, 0x99ba4efe}},
        ThreeFry{{0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}, {0x1cb996fc, 0xbb002be7}},
        ThreeFry{{0x13198a2e, 0x03707344}, {0x243f6a88, 0x85a308d3}, {0xc4923a9c, 0x483df7a0}}}) {
    uint32_t x0 = t.counter[0], x1 = t.counter[1];
    kat::hc_threefry2x32(t.key[0], t.key[1], x0, x1);
    EXPECT_EQ(x0, t.want[0]);
    EXPECT_EQ(x1, t.want[1]);
  }
  struct Philox {
    uint32_t key[2], counter[4], want[4];
  };
  for (const Philox& t :
       {Philox{{0, 0}, {0, 0, 0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
        Philox{{0xffffffff, 0xffffffff},
               {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
               {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
        Philox{{0xa4093822, 0x299f31d0},
               {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
               {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}}}) {
    uint32_t x[4] = {t.counter[0], t.counter[1], t.counter[2], t.counter[3]};
    kat::hc_philox4x32(t.key[0], t.key[1], x);
    for (int k = 0; k < 4; ++k) EXPECT_EQ(x[k], t.want[k]) << k;
  }
}

std::string BitGenerator(const std::string& state, const std::string& bits,
                         const std::string& algorithm) {
  return "HloModule m\n\nENTRY e {\n  s = " + state + " parameter(0)\n  ROOT r = (" + state + ", " +
         bits + ") rng-bit-generator(s), algorithm=" + algorithm + "\n}\n";
}

Literal U64(std::vector<int64_t> dims, const std::vector<double>& values) {
  return Array(PrimitiveType::kU64, std::move(dims), values);
}

TEST(RngTest, BitGeneratorsLayTheirWordsOutAsXlaDoes) {
  // ThreeFry: key, counter. u32[4] splits along its even dimension: counter c gives outputs
  // 2c and 2c + 1; the counter advances by the 2 halves.
  auto threefry = Eval(BitGenerator("u64[2]", "u32[4]", "rng_three_fry"), {U64({2}, {0, 0})});
  ASSERT_THAT(threefry, IsOk());
  EXPECT_EQ(threefry->elements()[0].GetInt(1), 2);
  EXPECT_EQ(threefry->elements()[1].GetInt(0), 0x6b200159);
  EXPECT_EQ(threefry->elements()[1].GetInt(1), 0x99ba4efe);
  // Counter 1 makes the next pair; a scalar takes the first word of counter 0.
  uint32_t x0 = 1, x1 = 0;
  kat::hc_threefry2x32(0, 0, x0, x1);
  EXPECT_EQ(threefry->elements()[1].GetInt(2), x0);
  EXPECT_EQ(threefry->elements()[1].GetInt(3), x1);
  ExpectValue(BitGenerator("u64[2]", "u32[]", "rng_three_fry"), {U64({2}, {0, 0})},
              Tuple({U64({2}, {0, 1}), Array(PrimitiveType::kU32, {}, {0x6b200159})}));
  // A 64-bit word is both halves of one counter's output.
  auto wide = Eval(BitGenerator("u64[3]", "u64[]", "rng_three_fry"), {U64({3}, {0, 0, 7})});
  ASSERT_THAT(wide, IsOk());
  EXPECT_EQ(static_cast<uint64_t>(wide->elements()[1].GetInt(0)), 0x99ba4efe6b200159u);
  EXPECT_EQ(wide->elements()[0].GetInt(1), 1);
  EXPECT_EQ(wide->elements()[0].GetInt(2), 7) << "words past the counter are kept";
  // Philox with a 128-bit counter (state u64[3]): four words per block, in order.
  ExpectValue(
      BitGenerator("u64[3]", "u32[2,2]", "rng_philox"), {U64({3}, {0, 0, 0})},
      Tuple({U64({3}, {0, 1, 0}), Array(PrimitiveType::kU32, {2, 2},
                                        {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8})}));
  // The counter carries into its high word.
  Literal last = U64({3}, {0, 0, 4});
  last.SetInt(1, -1);  // 2^64 - 1.
  auto carry = Eval(BitGenerator("u64[3]", "u32[8]", "rng_philox"), {last});
  ASSERT_THAT(carry, IsOk());
  EXPECT_EQ(carry->elements()[0].GetInt(1), 1);
  EXPECT_EQ(carry->elements()[0].GetInt(2), 5);
  ExpectCompiledMatchesInterpreter(BitGenerator("u64[3]", "u32[8]", "rng_philox"), {last});
  // rng_default is Philox.
  auto default_bits =
      Eval(BitGenerator("u64[3]", "u32[2,2]", "rng_default"), {U64({3}, {0, 0, 0})});
  ASSERT_THAT(default_bits, IsOk());
  EXPECT_EQ(static_cast<uint32_t>(default_bits->elements()[1].GetInt(0)), 0x6627e8d5u);
}

TEST(RngTest, CompiledBitGeneratorsMatchTheInterpreter) {
  // Every width, odd and empty shapes (ThreeFry splits along the first even dimension, else
  // the longest), scalars, from random states of 2 and 5 words.
  const char* kBits[] = {"u32[3,5]", "u8[7]", "s16[2,3,4]", "u64[5]",
                         "s64[]",    "u32[]", "u32[1,3]",   "u16[0,3]"};
  for (const char* algorithm : {"rng_three_fry", "rng_philox"}) {
    for (const char* state : {"u64[2]", "u64[5]"}) {
      SCOPED_TRACE(std::string(algorithm) + " " + state);
      std::string text =
          "HloModule m\n\nENTRY e {\n  s = " + std::string(state) + " parameter(0)\n";
      std::string root = "  ROOT t = (";
      std::string values;
      for (size_t k = 0; k < std::size(kBits); ++k) {
        const std::string r = "r" + std::to_string(k);
        text += "  " + r + " = (" + state + ", " + kBits[k] +
                ") rng-bit-generator(s), algorithm=" + algorithm + "\n";
        root += std::string(k ? ", " : "") + "(" + state + ", " + kBits[k] + ")";
        values += (k ? ", " : "") + r;
      }
      ExpectCompiledMatchesInterpreterOnRandomInputs(text + root + ") tuple(" + values + ")\n}\n",
                                                     1);
    }
  }
}

TEST(RngTest, StatefulOpsAdvanceOncePerEvaluation) {
  // Three turns of a loop each take the state and add 5 to it: 0, 5, 10.
  const std::string text = R"(HloModule m

cond {
  p = (s32[], u64[]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  three = s32[] constant(3)
  ROOT lt = pred[] compare(i, three), direction=LT
}

body {
  p = (s32[], u64[]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  sum = u64[] get-tuple-element(p), index=1
  one = s32[] constant(1)
  next = s32[] add(i, one)
  state = u64[2] rng-get-and-update-state(), delta=5
  low = u64[1] slice(state), slice={[0:1]}
  l = u64[] reshape(low)
  total = u64[] add(sum, l)
  ROOT t = (s32[], u64[]) tuple(next, total)
}

ENTRY e {
  zero = s32[] constant(0)
  z = u64[] constant(0)
  init = (s32[], u64[]) tuple(zero, z)
  loop = (s32[], u64[]) while(init), condition=cond, body=body
  ROOT sum = u64[] get-tuple-element(loop), index=1
}
)";
  ExpectValue(text, {}, U64({}, {15}));
}

TEST(RngTest, UniformAndNormalDistributions) {
  auto rng = [](const std::string& type, const std::string& a, const std::string& b,
                const std::string& distribution) {
    return "HloModule m\n\nENTRY e {\n  a = " + type + "[] constant(" + a + ")\n  b = " + type +
           "[] constant(" + b + ")\n  ROOT r = " + type +
           "[100,101] rng(a, b), distribution=" + distribution + "\n}\n";
  };
  auto uniform = Eval(rng("f32", "2", "5", "rng_uniform"), {});
  ASSERT_THAT(uniform, IsOk());
  double sum = 0;
  for (size_t i = 0; i < uniform->size(); ++i) {
    EXPECT_GE(uniform->GetFloat(i), 2.0);
    EXPECT_LT(uniform->GetFloat(i), 5.0);
    sum += uniform->GetFloat(i);
  }
  EXPECT_NEAR(sum / static_cast<double>(uniform->size()), 3.5, 0.05);
  auto normal = Eval(rng("f64", "1", "2", "rng_normal"), {});
  ASSERT_THAT(normal, IsOk());
  double mean = 0, square = 0;
  for (size_t i = 0; i < normal->size(); ++i) {
    mean += normal->GetFloat(i);
    square += normal->GetFloat(i) * normal->GetFloat(i);
  }
  mean /= static_cast<double>(normal->size());
  EXPECT_NEAR(mean, 1.0, 0.05);
  EXPECT_NEAR(square / static_cast<double>(normal->size()) - mean * mean, 4.0, 0.2);
  auto ints = Eval(rng("s32", "-3", "4", "rng_uniform"), {});
  ASSERT_THAT(ints, IsOk());
  for (size_t i = 0; i < ints->size(); ++i) {
    EXPECT_GE(ints->GetInt(i), -3);
    EXPECT_LT(ints->GetInt(i), 4);
  }
  for (const std::string& text :
       {rng("f32", "2", "5", "rng_uniform"), rng("bf16", "-1", "1", "rng_uniform"),
        rng("f16", "0", "1", "rng_normal"), rng("f64", "1", "2", "rng_normal"),
        rng("s32", "-3", "4", "rng_uniform"), rng("u64", "0", "0", "rng_uniform"),
        Replaced(rng("f32", "0", "1", "rng_normal"), "[100,101]", "[7]")}) {
    SCOPED_TRACE(text);
    ExpectCompiledMatchesInterpreter(text, {});
  }
}

// mhlo.rng's form: a third operand with the result's dimensions, which XLA's RngExpander does
// not read. The values are those of the two-operand form, compiled and interpreted alike.
TEST(RngTest, AThirdOperandOfDimensionsIsIgnoredAsXlaDoes) {
  const std::string two =
      "HloModule m\n\nENTRY e {\n  a = f32[] constant(-1)\n  b = f32[] constant(3)\n"
      "  d = s64[2] constant({4, 5})\n  ROOT r = f32[4,5] rng(a, b), distribution=rng_uniform\n}\n";
  const std::string three = Replaced(two, "rng(a, b)", "rng(a, b, d)");
  auto with_two = Eval(two, {});
  auto with_three = Eval(three, {});
  ASSERT_THAT(with_two, IsOk());
  ASSERT_THAT(with_three, IsOk());
  EXPECT_EQ(*with_two, *with_three);
  ExpectCompiledMatchesInterpreter(three, {});
  ExpectMalformed(Replaced(three, "d = s64[2] constant({4, 5})", "d = f32[2] constant({4, 5})"),
                  "ROOT r", "the third operand is not a rank-1 integer array of dimensions");
}

TEST(RngTest, MalformedRandomOpsAreRefusedWithTheirLine) {
  const std::string text = BitGenerator("u64[2]", "u32[4]", "rng_philox");
  ExpectMalformed(Replaced(text, "s = u64[2]", "s = u32[2]"), "ROOT r",
                  "the state is not u64[N], N >= 2");
  ExpectMalformed(Replaced(text, "(u64[2], u32[4])", "(u64[3], u32[4])"), "ROOT r",
                  "the result is not (the state's shape, an array)");
  ExpectMalformed(
      "HloModule m\n\nENTRY e {\n  a = f32[] constant(0)\n  ROOT r = f32[3] "
      "rng(a, a), distribution=rng_poisson\n}\n",
      "ROOT r", "distribution is not rng_uniform or rng_normal");
  ExpectMalformed("HloModule m\n\nENTRY e {\n  ROOT r = u64[2] rng-get-and-update-state()\n}\n",
                  "ROOT r", "delta is not a non-negative integer");
}

}  // namespace
}  // namespace hlocache::compiler
