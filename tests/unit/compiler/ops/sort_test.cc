// sort: hand-computed orders for the interpreter (one and several operands, any dimension,
// stability, comparators of several operands, total order of floats), then the compiled code
// against it, including comparators that are no strict weak order.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "tests/unit/compiler/ops/op_check.h"

namespace hlocache::compiler {
namespace {

using hlo::PrimitiveType;
using interp::Literal;
using op_check::ExpectMalformed;
using op_check::ExpectValue;
using op_check::Replaced;
using op_check::Tuple;

// A comparator of one operand of `type`: `direction` on its two scalars.
std::string Less(const std::string& type, const std::string& direction,
                 const std::string& extra = "") {
  return "less {\n  a = " + type + "[] parameter(0)\n  b = " + type +
         "[] parameter(1)\n  ROOT r = pred[] compare(a, b), direction=" + direction + extra +
         "\n}\n\n";
}

TEST(SortTest, SortsEachRowAlongTheDimension) {
  const std::string rows = "HloModule m\n\n" + Less("s32", "LT") +
                           "ENTRY e {\n  x = s32[2,4] parameter(0)\n  ROOT s = s32[2,4] sort(x), "
                           "dimensions={1}, to_apply=less\n}\n";
  ExpectValue(rows, {Array(PrimitiveType::kS32, {2, 4}, {3, -1, 2, 0, 9, 8, 7, 9})},
              Array(PrimitiveType::kS32, {2, 4}, {-1, 0, 2, 3, 7, 8, 9, 9}));
  // Along dimension 0: each column, descending.
  const std::string columns =
      Replaced(Replaced(rows, "dimensions={1}", "dimensions={0}"), "direction=LT", "direction=GT");
  ExpectValue(columns, {Array(PrimitiveType::kS32, {2, 4}, {3, -1, 2, 0, 9, 8, 7, 9})},
              Array(PrimitiveType::kS32, {2, 4}, {9, 8, 7, 9, 3, -1, 2, 0}));
}

TEST(SortTest, KeysCarryTheirValuesAndEqualKeysKeepTheirOrder) {
  // argsort: the values' positions (an iota) follow the keys; ties stay in input order.
  const std::string text = R"(HloModule m

less {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  i = s32[] parameter(2)
  j = s32[] parameter(3)
  ROOT r = pred[] compare(a, b), direction=LT
}

ENTRY e {
  x = f32[6] parameter(0)
  positions = s32[6] iota(), iota_dimension=0
  ROOT s = (f32[6], s32[6]) sort(x, positions), dimensions={0}, is_stable=true, to_apply=less
}
)";
  ExpectValue(text, {Array(PrimitiveType::kF32, {6}, {2, 1, 2, 0, 1, 2})},
              Tuple({Array(PrimitiveType::kF32, {6}, {0, 1, 1, 2, 2, 2}),
                     Array(PrimitiveType::kS32, {6}, {3, 1, 4, 0, 2, 5})}));
}

TEST(SortTest, AComparatorMayOrderByEveryOperand) {
  // Lexicographic: by the first operand, then descending by the second.
  const std::string text = R"(HloModule m

less {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  c = u8[] parameter(2)
  d = u8[] parameter(3)
  lt = pred[] compare(a, b), direction=LT
  eq = pred[] compare(a, b), direction=EQ
  gt = pred[] compare(c, d), direction=GT
  tie = pred[] and(eq, gt)
  ROOT r = pred[] or(lt, tie)
}

ENTRY e {
  x = s32[5] parameter(0)
  y = u8[5] parameter(1)
  ROOT s = (s32[5], u8[5]) sort(x, y), dimensions={0}, to_apply=less
}
)";
  ExpectValue(text,
              {Array(PrimitiveType::kS32, {5}, {1, 0, 1, 0, 1}),
               Array(PrimitiveType::kU8, {5}, {5, 6, 7, 8, 200})},
              Tuple({Array(PrimitiveType::kS32, {5}, {0, 0, 1, 1, 1}),
                     Array(PrimitiveType::kU8, {5}, {8, 6, 200, 7, 5})}));
}

TEST(SortTest, TotalOrderPutsNegativeZeroBeforeZeroAndNaNLast) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const std::string text = "HloModule m\n\n" + Less("f32", "LT", ", type=TOTALORDER") +
                           "ENTRY e {\n  x = f32[7] parameter(0)\n  ROOT s = f32[7] sort(x), "
                           "dimensions={0}, is_stable=true, to_apply=less\n}\n";
  const Literal in = Array(PrimitiveType::kF32, {7}, {nan, 1, 0.0, -inf, -0.0, inf, -2});
  auto got = op_check::Eval(text, {in});
  ASSERT_THAT(got, IsOk());
  const double want[] = {-inf, -2, -0.0, 0.0, 1, inf};
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(got->GetFloat(i), want[i]) << i;
    EXPECT_EQ(std::signbit(got->GetFloat(i)), std::signbit(want[i])) << i;
  }
  EXPECT_TRUE(std::isnan(got->GetFloat(6)));
  ExpectCompiledMatchesInterpreter(text, {in});
  // Without it, compare is IEEE's: -0 == 0, and a NaN is neither less nor greater.
  const std::string ieee = Replaced(text, ", type=TOTALORDER", "");
  const Literal zeros = Array(PrimitiveType::kF32, {7}, {0.0, -0.0, 0.0, -0.0, 1, -1, 0.0});
  ExpectValue(ieee, {zeros}, Array(PrimitiveType::kF32, {7}, {-1, 0.0, -0.0, 0.0, -0.0, 0.0, 1}));
}

TEST(SortTest, ComparatorsThatAreNoStrictWeakOrderGiveTheSameOrderCompiled) {
  // LE is not irreflexive, NE not transitive: the order is whatever the merge sort's steps make
  // of them, the same in both.
  for (const char* direction : {"LE", "NE", "EQ"}) {
    SCOPED_TRACE(direction);
    const std::string text = "HloModule m\n\n" + Less("s32", direction) +
                             "ENTRY e {\n  x = s32[3,37] parameter(0)\n  ROOT s = s32[3,37] "
                             "sort(x), dimensions={1}, to_apply=less\n}\n";
    ExpectCompiledMatchesInterpreterOnRandomInputs(text, 3);
  }
}

TEST(SortTest, CompiledSortsMatchTheInterpreter) {
  // bf16 keys with a total-order comparator and their positions, as jnp.argsort writes them,
  // sorted along the middle dimension of a rank-3 array.
  const std::string text = R"(HloModule m

less {
  a = bf16[] parameter(0)
  b = bf16[] parameter(1)
  i = s32[] parameter(2)
  j = s32[] parameter(3)
  ROOT r = pred[] compare(a, b), direction=GT, type=TOTALORDER
}

ENTRY e {
  x = bf16[3,50,4] parameter(0)
  positions = s32[3,50,4] iota(), iota_dimension=1
  ROOT s = (bf16[3,50,4], s32[3,50,4]) sort(x, positions), dimensions={1}, is_stable=true, to_apply=less
}
)";
  ExpectCompiledMatchesInterpreterOnRandomInputs(text, 1);
  // One element, and an empty dimension.
  for (const char* shape : {"f64[1]", "f64[0,3]"}) {
    SCOPED_TRACE(shape);
    const std::string one = "HloModule m\n\n" + Less("f64", "LT") + "ENTRY e {\n  x = " + shape +
                            " parameter(0)\n  ROOT s = " + shape +
                            " sort(x), dimensions={0}, to_apply=less\n}\n";
    ExpectCompiledMatchesInterpreterOnRandomInputs(one, 2);
  }
}

TEST(SortTest, SortsOfValuesByLessOrGreaterSortTheValuesInTheMergeSortsOrder) {
  // One operand ordered by LT or GT (either parameter first) is sorted by value, without the
  // comparator; equal values keep their order, which -0 and 0 make visible (bit for bit against
  // the interpreter); a row with a NaN goes back to the merge sort.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> values;
  for (int r = 0; r < 3; ++r) {
    for (int j = 0; j < 40; ++j)
      values.push_back(j % 5 == 0 ? 0.0 : j % 5 == 1 ? -0.0 : (j * 7 + r) % 9 - 4.0);
  }
  values[2 * 40 + 17] = nan;
  for (const char* comparator : {"compare(a, b), direction=LT", "compare(a, b), direction=GT",
                                 "compare(b, a), direction=LT", "compare(b, a), direction=GT"}) {
    SCOPED_TRACE(comparator);
    const std::string text =
        std::string(
            "HloModule m\n\nless {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
            "  ROOT r = pred[] ") +
        comparator +
        "\n}\n\nENTRY e {\n  x = f32[3,40] parameter(0)\n  ROOT s = f32[3,40] sort(x), "
        "dimensions={1}, to_apply=less\n}\n";
    const std::string source =
        ExpectCompiledMatchesInterpreter(text, {Array(PrimitiveType::kF32, {3, 40}, values)});
    EXPECT_NE(source.find("hc_sort_run(", source.find("\nint hc_comp")), std::string::npos);
  }
  // A comparator of more than one op keeps the merge sort.
  const std::string two_ops =
      "HloModule m\n\nless {\n  a = s32[] parameter(0)\n  b = s32[] parameter(1)\n"
      "  n = s32[] negate(a)\n  ROOT r = pred[] compare(n, b), direction=LT\n}\n\n"
      "ENTRY e {\n  x = s32[2,30] parameter(0)\n  ROOT s = s32[2,30] sort(x), dimensions={1}, "
      "to_apply=less\n}\n";
  const std::string source = ExpectCompiledMatchesInterpreterOnRandomInputs(two_ops, 4);
  EXPECT_EQ(source.find("hc_sort_run(", source.find("\nint hc_comp")), std::string::npos);
}

TEST(SortTest, LongRunsOfEveryValueTypeAreSortedByKeyInTheMergeSortsOrder) {
  // Runs of 600 take the radix sort: keys must order negatives, infinities, subnormals and
  // integers' sign bits as `<` does, hold -0 and 0 equal (their order kept, visible bit for
  // bit), and keep equal values in order, in both directions.
  const double inf = std::numeric_limits<double>::infinity();
  for (const char* type : {"f32", "f64", "s32", "s64", "u32", "u64"}) {
    const std::string t = type;
    const bool is_float = t[0] == 'f', is_unsigned = t[0] == 'u';
    std::vector<double> values;
    uint32_t state = 12345;
    for (int j = 0; j < 2 * 600; ++j) {
      state = state * 1664525u + 1013904223u;
      const double r = static_cast<double>(state >> 8) / (1 << 24);  // [0, 1)
      double v = std::floor(r * 50) - (is_unsigned ? 0 : 25);        // Many equal values.
      if (j % 7 == 0) v = is_unsigned ? 4e9 + j % 3 : -4e9 - j % 3;  // Past 24 bits, signs.
      if (is_float && j % 11 == 0) v = j % 2 == 0 ? -0.0 : 0.0;
      if (is_float && j % 13 == 0) v = r * 2e-40 - 1e-40;  // f32 subnormals of either sign.
      if (is_float && j % 97 == 0) v = j % 2 == 0 ? inf : -inf;
      if (!is_float && j % 5 == 0) v = j * 977.0;  // Spread over more bytes.
      values.push_back(v);
    }
    for (const char* direction : {"LT", "GT"}) {
      SCOPED_TRACE(t + " " + direction);
      const std::string text = "HloModule m\n\n" + Less(t, direction) + "ENTRY e {\n  x = " + t +
                               "[2,600] parameter(0)\n  ROOT s = " + t +
                               "[2,600] sort(x), dimensions={1}, to_apply=less\n}\n";
      const std::string source = ExpectCompiledMatchesInterpreter(
          text, {Array(*hlo::PrimitiveTypeFromName(t), {2, 600}, values)});
      EXPECT_NE(source.find("hc_sort_run(", source.find("\nint hc_comp")), std::string::npos);
    }
  }
}

TEST(SortTest, AComparatorReturningATupleOfOnePred) {
  const std::string text = R"(HloModule m

less {
  a = u16[] parameter(0)
  b = u16[] parameter(1)
  lt = pred[] compare(a, b), direction=LT
  ROOT r = (pred[]) tuple(lt)
}

ENTRY e {
  x = u16[4] parameter(0)
  ROOT s = u16[4] sort(x), dimensions={0}, to_apply=less
}
)";
  ExpectValue(text, {Array(PrimitiveType::kU16, {4}, {65535, 3, 0, 7})},
              Array(PrimitiveType::kU16, {4}, {0, 3, 7, 65535}));
}

TEST(SortTest, MalformedSortsAreRefusedWithTheirLine) {
  const std::string two = R"(HloModule m

less {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  i = s32[] parameter(2)
  j = s32[] parameter(3)
  ROOT r = pred[] compare(a, b), direction=LT
}

ENTRY e {
  x = f32[2,3] parameter(0)
  y = s32[2,3] parameter(1)
  ROOT s = (f32[2,3], s32[2,3]) sort(x, y), dimensions={1}, to_apply=less
}
)";
  ExpectMalformed(Replaced(two, "dimensions={1}", "dimensions={2}"), "ROOT s",
                  "dimensions must name one dimension");
  ExpectMalformed(
      Replaced(Replaced(two, "y = s32[2,3]", "y = s32[3,2]"), "s32[2,3]) sort", "s32[3,2]) sort"),
      "ROOT s", "operand 1 is not an array of operand 0's dimensions");
  ExpectMalformed(Replaced(two, "(f32[2,3], s32[2,3]) sort", "f32[2,3] sort"), "ROOT s",
                  "is not the operands' shape");
  ExpectMalformed(Replaced(two, "j = s32[] parameter(3)", "j = f32[] parameter(3)"), "ROOT s",
                  "the comparator's parameter 3 is f32[]");
  ExpectMalformed(Replaced(two, ", to_apply=less", ""), "ROOT s", "to_apply");
}

}  // namespace
}  // namespace hlocache::compiler

namespace hlocache::compiler {
namespace {

TEST(TopKTest, TheLargestOrSmallestKOfEachRowWithTheirPositions) {
  const std::string text = R"(HloModule m

ENTRY e {
  x = f32[2,5] parameter(0)
  ROOT t = (f32[2,3], s32[2,3]) topk(x), k=3, largest=true
}
)";
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // Ties keep their order; in total order NaN is above everything, -0 below +0.
  ExpectValue(text, {Array(PrimitiveType::kF32, {2, 5}, {3, 1, 3, 7, -2, 0.0, -0.0, nan, 1, 1})},
              Tuple({Array(PrimitiveType::kF32, {2, 3}, {7, 3, 3, nan, 1, 1}),
                     Array(PrimitiveType::kS32, {2, 3}, {3, 0, 2, 2, 3, 4})}));
  ExpectValue(Replaced(text, "largest=true", "largest=false"),
              {Array(PrimitiveType::kF32, {2, 5}, {3, 1, 3, 7, -2, 0.0, -0.0, 5, 1, 1})},
              Tuple({Array(PrimitiveType::kF32, {2, 3}, {-2, 1, 3, -0.0, 0.0, 1}),
                     Array(PrimitiveType::kS32, {2, 3}, {4, 1, 0, 1, 0, 3})}));
  // Random rows of bf16 and of unsigned integers, compiled.
  ExpectCompiledMatchesInterpreterOnRandomInputs(
      "HloModule m\n\nENTRY e {\n  x = bf16[4,3,50] parameter(0)\n  ROOT t = (bf16[4,3,7], "
      "s32[4,3,7]) topk(x), k=7, largest=true\n}\n",
      1);
  ExpectCompiledMatchesInterpreterOnRandomInputs(
      "HloModule m\n\nENTRY e {\n  x = u64[9,33] parameter(0)\n  ROOT t = (u64[9,33], "
      "s32[9,33]) topk(x), k=33, largest=false\n}\n",
      2);
  ExpectMalformed(Replaced(text, "k=3", "k=6"), "ROOT t",
                  "k is not between 0 and the last dimension's 5");
  ExpectMalformed(Replaced(text, "(f32[2,3], s32[2,3])", "(f32[2,3], s64[2,3])"), "ROOT t",
                  "the result is not (f32[2,3], s32[2,3])");
}

}  // namespace
}  // namespace hlocache::compiler
