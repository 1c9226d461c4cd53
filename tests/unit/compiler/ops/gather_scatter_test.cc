// gather and scatter: the interpreter against results worked out by hand, the compiled code
// against the interpreter, the shape of the generated loops where it matters, and malformed
// modules refused with their line.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "compiler/codegen/cpu_codegen.h"
#include "compiler/hlo/parser.h"
#include "compiler/interp/interpreter.h"
#include "compiler/semantics/arguments.h"
#include "tests/unit/compiler/compile_check.h"
#include "tests/unit/status_matchers.h"

namespace hlocache::compiler {
namespace {

using hlo::PrimitiveType;
using interp::Literal;
using ::testing::HasSubstr;
using ::testing::Not;

// Evaluates `text` with the interpreter; an empty literal (and a test failure) on error.
Literal Evaluate(const std::string& text, const std::vector<Literal>& args) {
  auto m = hlo::ParseModule(text, "g.hlo");
  EXPECT_THAT(m, IsOk());
  if (!m) return Literal();
  auto out = interp::Evaluate(*m, args);
  EXPECT_THAT(out, IsOk());
  if (!out) return Literal();
  return std::move(*out);
}

// Expects the interpreter's result, then the compiled code's, to be `want`.
void ExpectResult(const std::string& text, const std::vector<Literal>& args, const Literal& want) {
  const Literal got = Evaluate(text, args);
  EXPECT_TRUE(got == want) << "got " << got.ToString() << "\nwant " << want.ToString();
  ExpectCompiledMatchesInterpreter(text, args);
}

// An integer array from exact 64-bit values (Array goes through double).
Literal Ints(PrimitiveType type, std::vector<int64_t> dims, const std::vector<int64_t>& values) {
  hlo::Shape s;
  s.type = type;
  s.dims = std::move(dims);
  Literal l(s);
  for (size_t i = 0; i < l.size(); ++i) l.SetInt(i, values[i]);
  return l;
}

using op_check::Tuple;

std::vector<double> Iota(int n) {
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back(i);
  return v;
}

constexpr PrimitiveType kF32 = PrimitiveType::kF32;
constexpr PrimitiveType kS32 = PrimitiveType::kS32;

const char* kAddF32 = R"(add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
)";
const char* kAddS32 = R"(add {
  x = s32[] parameter(0)
  y = s32[] parameter(1)
  ROOT s = s32[] add(x, y)
}
)";

// ---- gather --------------------------------------------------------------------------------

TEST(GatherScatterTest, GatherOfRows) {
  const std::string text = R"(ENTRY e {
  table = f32[4,3] parameter(0)
  ids = s32[3] parameter(1)
  ROOT g = f32[3,3] gather(table, ids), offset_dims={1}, collapsed_slice_dims={0},
    start_index_map={0}, index_vector_dim=1, slice_sizes={1,3}
})";
  ExpectResult(text, {Array(kF32, {4, 3}, Iota(12)), Array(kS32, {3}, {2, 0, 3})},
               Array(kF32, {3, 3}, {6, 7, 8, 0, 1, 2, 9, 10, 11}));
}

TEST(GatherScatterTest, GatherWithBatchingDimensionsInAnotherOrder) {
  // result[a, b, w] = operand[b, a, clamp(indices[a, b], 0, 2) + w].
  const std::string text = R"(ENTRY e {
  o = s32[2,3,4] parameter(0)
  i = s32[3,2,1] parameter(1)
  ROOT g = s32[3,2,2] gather(o, i), offset_dims={2}, collapsed_slice_dims={},
    start_index_map={2}, operand_batching_dims={0,1}, start_indices_batching_dims={1,0},
    index_vector_dim=2, slice_sizes={1,1,2}
})";
  std::vector<double> operand;
  for (int b = 0; b < 2; ++b) {
    for (int a = 0; a < 3; ++a) {
      for (int k = 0; k < 4; ++k) operand.push_back(100 * b + 10 * a + k);
    }
  }
  ExpectResult(text, {Array(kS32, {2, 3, 4}, operand), Array(kS32, {3, 2, 1}, {0, 1, 2, 3, -1, 5})},
               Array(kS32, {3, 2, 2}, {0, 1, 101, 102, 12, 13, 112, 113, 20, 21, 122, 123}));
}

TEST(GatherScatterTest, GatherWithIndexVectorDimEqualToTheRank) {
  const std::string text = R"(ENTRY e {
  o = f32[5] parameter(0)
  i = s32[2,2] parameter(1)
  ROOT g = f32[2,2] gather(o, i), offset_dims={}, collapsed_slice_dims={0},
    start_index_map={0}, index_vector_dim=2, slice_sizes={1}
})";
  ExpectResult(text, {Array(kF32, {5}, {10, 11, 12, 13, 14}), Array(kS32, {2, 2}, {4, 0, 1, 3})},
               Array(kF32, {2, 2}, {14, 10, 11, 13}));
}

TEST(GatherScatterTest, GatherClampsStartsSoTheSliceStaysInside) {
  // Slices of 2 out of 5: starts clamp to [0, 3], negative ones included.
  const std::string text = R"(ENTRY e {
  o = f32[5] parameter(0)
  i = s32[4] parameter(1)
  ROOT g = f32[4,2] gather(o, i), offset_dims={1}, collapsed_slice_dims={},
    start_index_map={0}, index_vector_dim=1, slice_sizes={2}
})";
  ExpectResult(text, {Array(kF32, {5}, Iota(5)), Array(kS32, {4}, {-3, 7, 2, 4})},
               Array(kF32, {4, 2}, {0, 1, 3, 4, 2, 3, 3, 4}));
}

TEST(GatherScatterTest, GatherReadsEveryIntegerTypeAsItsValue) {
  const std::string text = R"(ENTRY e {
  o = f32[5] parameter(0)
  a = u8[3] parameter(1)
  b = u64[3] parameter(2)
  c = s8[3] parameter(3)
  d = u32[3] parameter(4)
  ga = f32[3] gather(o, a), offset_dims={}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1}
  gb = f32[3] gather(o, b), offset_dims={}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1}
  gc = f32[3] gather(o, c), offset_dims={}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1}
  gd = f32[3] gather(o, d), offset_dims={}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1}
  ROOT t = (f32[3], f32[3], f32[3], f32[3]) tuple(ga, gb, gc, gd)
})";
  // u64 2^64-1 and 2^63 are past the end (not negative); u8 200 and 255 too.
  const int64_t u64_max = -1, u64_half = std::numeric_limits<int64_t>::min();
  ExpectResult(text,
               {Array(kF32, {5}, Iota(5)), Ints(PrimitiveType::kU8, {3}, {200, 1, 255}),
                Ints(PrimitiveType::kU64, {3}, {u64_max, 3, u64_half}),
                Ints(PrimitiveType::kS8, {3}, {-128, 127, 2}),
                Ints(PrimitiveType::kU32, {3}, {4294967295, 0, 2})},
               Tuple({Array(kF32, {3}, {4, 1, 4}), Array(kF32, {3}, {4, 3, 4}),
                      Array(kF32, {3}, {0, 4, 2}), Array(kF32, {3}, {4, 0, 2})}));
}

TEST(GatherScatterTest, GatherWithAPermutedStartIndexMap) {
  // Entry 0 of the start vector is the column, entry 1 the row: start (1, 2).
  const std::string text = R"(ENTRY e {
  o = s32[3,4] parameter(0)
  i = s32[1,2] parameter(1)
  ROOT g = s32[1,2,2] gather(o, i), offset_dims={1,2}, collapsed_slice_dims={},
    start_index_map={1,0}, index_vector_dim=1, slice_sizes={2,2}
})";
  ExpectResult(text,
               {Array(kS32, {3, 4}, {0, 1, 2, 3, 10, 11, 12, 13, 20, 21, 22, 23}),
                Array(kS32, {1, 2}, {2, 1})},
               Array(kS32, {1, 2, 2}, {12, 13, 22, 23}));
}

TEST(GatherScatterTest, GatherOfScalarsAndOfNothing) {
  const std::string text = R"(ENTRY e {
  o = f32[5] parameter(0)
  i = s32[] parameter(1)
  none = s32[0,1] parameter(2)
  one = f32[] gather(o, i), offset_dims={}, collapsed_slice_dims={0}, start_index_map={0},
    index_vector_dim=0, slice_sizes={1}
  empty = f32[0,2] gather(o, none), offset_dims={1}, collapsed_slice_dims={},
    start_index_map={0}, index_vector_dim=1, slice_sizes={2}
  ROOT t = (f32[], f32[0,2]) tuple(one, empty)
})";
  ExpectResult(text, {Array(kF32, {5}, Iota(5)), Array(kS32, {}, {3}), Array(kS32, {0, 1}, {})},
               Tuple({Array(kF32, {}, {3}), Array(kF32, {0, 2}, {})}));
}

// ---- scatter -------------------------------------------------------------------------------

TEST(GatherScatterTest, ScatterAddAccumulatesDuplicates) {
  const std::string text = std::string(kAddF32) + R"(ENTRY e {
  o = f32[5] parameter(0)
  i = s32[3,1] parameter(1)
  u = f32[3] parameter(2)
  ROOT s = f32[5] scatter(o, i, u), update_window_dims={}, inserted_window_dims={0},
    scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
})";
  ExpectResult(text,
               {Array(kF32, {5}, {1, 2, 3, 4, 5}), Array(kS32, {3, 1}, {1, 3, 1}),
                Array(kF32, {3}, {10, 20, 30})},
               Array(kF32, {5}, {1, 42, 3, 24, 5}));
}

// Updates u[w][s]: window dimension first, position second. Position 0 starts at 0, position 1
// at 1, so u[0][1] and u[1][0] both land on element 1. Row-major order of the updates applies
// u[0][1] (= 2) before u[1][0] (= 3); position-major order would do the opposite.
std::string OrderModule(const std::string& root) {
  return R"(combine {
  x = s32[] parameter(0)
  y = s32[] parameter(1)
  two = s32[] constant(2)
  twice = s32[] multiply(x, two)
  ROOT )" +
         root + R"(
}
ENTRY e {
  o = s32[3] parameter(0)
  i = s32[2,1] parameter(1)
  u = s32[2,2] parameter(2)
  ROOT s = s32[3] scatter(o, i, u), update_window_dims={0}, inserted_window_dims={},
    scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=combine
})";
}

TEST(GatherScatterTest, ScatterAppliesUpdatesInRowMajorOrderOfTheUpdates) {
  const std::vector<Literal> args = {Array(kS32, {3}, {7, 7, 7}), Array(kS32, {2, 1}, {0, 1}),
                                     Array(kS32, {2, 2}, {1, 2, 3, 4})};
  // x * 2 + y: element 1 is (7 * 2 + 2) * 2 + 3; position-major order would give 36.
  ExpectResult(OrderModule("r = s32[] add(twice, y)"), args, Array(kS32, {3}, {15, 35, 18}));
}

TEST(GatherScatterTest, ScatterThatReplaces) {
  const std::string text = R"(replace {
  x = s32[] parameter(0)
  ROOT y = s32[] parameter(1)
}
ENTRY e {
  o = s32[3] parameter(0)
  i = s32[2,1] parameter(1)
  u = s32[2,2] parameter(2)
  ROOT s = s32[3] scatter(o, i, u), update_window_dims={0}, inserted_window_dims={},
    scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=replace
})";
  ExpectResult(
      text,
      {Array(kS32, {3}, {7, 7, 7}), Array(kS32, {2, 1}, {0, 1}), Array(kS32, {2, 2}, {1, 2, 3, 4})},
      Array(kS32, {3}, {1, 3, 4}));
}

TEST(GatherScatterTest, ScatterSkipsWindowsNotWhollyInside) {
  // Windows of 2 out of 5: starts -1 and 4 are skipped whole (4 would fit one element).
  const std::string text = std::string(kAddS32) + R"(ENTRY e {
  o = s32[5] parameter(0)
  i = s32[4,1] parameter(1)
  u = s32[4,2] parameter(2)
  ROOT s = s32[5] scatter(o, i, u), update_window_dims={1}, inserted_window_dims={},
    scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
})";
  ExpectResult(text,
               {Array(kS32, {5}, {0, 0, 0, 0, 0}), Array(kS32, {4, 1}, {-1, 4, 3, 0}),
                Array(kS32, {4, 2}, {1, 2, 3, 4, 5, 6, 7, 8})},
               Array(kS32, {5}, {7, 8, 0, 5, 6}));
}

TEST(GatherScatterTest, ScatterSkipsUnsignedIndicesPastTheEnd) {
  const std::string text = std::string(kAddS32) + R"(ENTRY e {
  o = s32[4] parameter(0)
  i = u64[3,1] parameter(1)
  u = s32[3] parameter(2)
  ROOT s = s32[4] scatter(o, i, u), update_window_dims={}, inserted_window_dims={0},
    scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
})";
  ExpectResult(text,
               {Array(kS32, {4}, {0, 0, 0, 0}),
                Ints(PrimitiveType::kU64, {3, 1}, {-1, 3, std::numeric_limits<int64_t>::min()}),
                Array(kS32, {3}, {1, 2, 3})},
               Array(kS32, {4}, {0, 0, 0, 2}));
}

const char* kVariadic = R"(combine {
  a = s32[] parameter(0)
  b = f32[] parameter(1)
  x = s32[] parameter(2)
  y = f32[] parameter(3)
  s = s32[] add(a, x)
  m = f32[] maximum(b, y)
  ROOT t = (s32[], f32[]) tuple(s, m)
}
ENTRY e {
  o1 = s32[4] parameter(0)
  o2 = f32[4] parameter(1)
  i = s32[3] parameter(2)
  u1 = s32[3] parameter(3)
  u2 = f32[3] parameter(4)
  ROOT s = (s32[4], f32[4]) scatter(o1, o2, i, u1, u2), update_window_dims={},
    inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1,
    to_apply=combine
})";

TEST(GatherScatterTest, VariadicScatter) {
  ExpectResult(
      kVariadic,
      {Array(kS32, {4}, {1, 1, 1, 1}), Array(kF32, {4}, {0, 0, 0, 0}), Array(kS32, {3}, {2, 0, 2}),
       Array(kS32, {3}, {5, 6, 7}), Array(kF32, {3}, {-1, 3, 2})},
      Tuple({Array(kS32, {4}, {7, 1, 13, 1}), Array(kF32, {4}, {3, 0, 2, 0})}));
}

TEST(GatherScatterTest, ScatterWithBatchingDimensions) {
  // Row b of the operand gets update b at column indices[b].
  const std::string text = std::string(kAddS32) + R"(ENTRY e {
  o = s32[2,3] parameter(0)
  i = s32[2,1] parameter(1)
  u = s32[2] parameter(2)
  ROOT s = s32[2,3] scatter(o, i, u), update_window_dims={}, inserted_window_dims={1},
    scatter_dims_to_operand_dims={1}, input_batching_dims={0},
    scatter_indices_batching_dims={0}, index_vector_dim=1, to_apply=add
})";
  ExpectResult(text,
               {Array(kS32, {2, 3}, {0, 0, 0, 0, 0, 0}), Array(kS32, {2, 1}, {2, 0}),
                Array(kS32, {2}, {5, 9})},
               Array(kS32, {2, 3}, {0, 0, 5, 9, 0, 0}));
}

TEST(GatherScatterTest, ScatterWithAComputationReturningATuple) {
  const std::string text = R"(add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  s = f32[] add(x, y)
  ROOT t = (f32[]) tuple(s)
}
ENTRY e {
  o = f32[3] parameter(0)
  i = s32[] parameter(1)
  u = f32[] parameter(2)
  ROOT s = f32[3] scatter(o, i, u), update_window_dims={}, inserted_window_dims={0},
    scatter_dims_to_operand_dims={0}, index_vector_dim=0, to_apply=add
})";
  ExpectResult(text, {Array(kF32, {3}, {1, 2, 3}), Array(kS32, {}, {1}), Array(kF32, {}, {0.5})},
               Array(kF32, {3}, {1, 2.5, 3}));
}

TEST(GatherScatterTest, ScatterOfNoUpdatesKeepsTheOperand) {
  const std::string text = std::string(kAddF32) + R"(ENTRY e {
  o = f32[2,3] parameter(0)
  i = s32[0,1] parameter(1)
  u = f32[0,3] parameter(2)
  ROOT s = f32[2,3] scatter(o, i, u), update_window_dims={1}, inserted_window_dims={0},
    scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
})";
  ExpectResult(
      text,
      {Array(kF32, {2, 3}, {1, 2, 3, 4, 5, 6}), Array(kS32, {0, 1}, {}), Array(kF32, {0, 3}, {})},
      Array(kF32, {2, 3}, {1, 2, 3, 4, 5, 6}));
}

// ---- the compiled code against the interpreter, on random inputs ---------------------------

TEST(GatherScatterTest, CompiledGathersMatchTheInterpreter) {
  // Indices are random in [-8, 8]: starts both inside and clamped.
  ExpectCompiledMatchesInterpreterOnRandomInputs(R"(ENTRY e {
  o = f32[30,20] parameter(0)
  i = s32[10,2] parameter(1)
  ROOT g = f32[10,4,8] gather(o, i), offset_dims={1,2}, collapsed_slice_dims={},
    start_index_map={1,0}, index_vector_dim=1, slice_sizes={4,8}
})");
  // Window and position dimensions interleaved in the result; the index vector first.
  ExpectCompiledMatchesInterpreterOnRandomInputs(R"(ENTRY e {
  o = bf16[6,5,4] parameter(0)
  i = s64[2,3] parameter(1)
  ROOT g = bf16[3,3,2] gather(o, i), offset_dims={0,2}, collapsed_slice_dims={0},
    start_index_map={0,2}, index_vector_dim=0, slice_sizes={1,3,2}
})");
  ExpectCompiledMatchesInterpreterOnRandomInputs(R"(ENTRY e {
  o = f16[5,4,6] parameter(0)
  i = u16[4,5,1] parameter(1)
  ROOT g = f16[4,5,3] gather(o, i), offset_dims={2}, collapsed_slice_dims={},
    start_index_map={2}, operand_batching_dims={0,1}, start_indices_batching_dims={1,0},
    index_vector_dim=2, slice_sizes={1,1,3}
})");
  ExpectCompiledMatchesInterpreterOnRandomInputs(R"(ENTRY e {
  o = s8[3,4,5] parameter(0)
  i = s32[7,3] parameter(1)
  ROOT g = s8[7] gather(o, i), offset_dims={}, collapsed_slice_dims={0,1,2},
    start_index_map={0,1,2}, index_vector_dim=1, slice_sizes={1,1,1}
})");
}

TEST(GatherScatterTest, CompiledScattersMatchTheInterpreter) {
  // Window dimension before the position dimension; duplicates and skipped windows.
  ExpectCompiledMatchesInterpreterOnRandomInputs(std::string(kAddF32) + R"(ENTRY e {
  o = f32[9,4] parameter(0)
  i = s32[6,1] parameter(1)
  u = f32[3,6,4] parameter(2)
  ROOT s = f32[9,4] scatter(o, i, u), update_window_dims={0,2}, inserted_window_dims={},
    scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
})");
  // A computation of several ops, in bf16; indices along dimension 0.
  ExpectCompiledMatchesInterpreterOnRandomInputs(R"(fma {
  x = bf16[] parameter(0)
  y = bf16[] parameter(1)
  xx = bf16[] multiply(x, x)
  ROOT r = bf16[] add(xx, y)
}
ENTRY e {
  o = bf16[6,5] parameter(0)
  i = s16[2,7] parameter(1)
  u = bf16[7] parameter(2)
  ROOT s = bf16[6,5] scatter(o, i, u), update_window_dims={}, inserted_window_dims={0,1},
    scatter_dims_to_operand_dims={1,0}, index_vector_dim=0, to_apply=fma
})");
  // Operands swapped in the one op, and maximum, in f16.
  for (const char* op : {"add(y, x)", "maximum(y, x)", "minimum(x, y)", "multiply(x, y)"}) {
    ExpectCompiledMatchesInterpreterOnRandomInputs(std::string(R"(f {
  x = f16[] parameter(0)
  y = f16[] parameter(1)
  ROOT r = f16[] )") + op + R"(
}
ENTRY e {
  o = f16[8,3] parameter(0)
  i = s32[5] parameter(1)
  u = f16[5,3] parameter(2)
  ROOT s = f16[8,3] scatter(o, i, u), update_window_dims={1}, inserted_window_dims={0},
    scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=f
})");
  }
  // Batching dimensions paired in another order, rows replaced whole.
  ExpectCompiledMatchesInterpreterOnRandomInputs(R"(replace {
  x = f32[] parameter(0)
  ROOT y = f32[] parameter(1)
}
ENTRY e {
  o = f32[3,4,5] parameter(0)
  i = s32[4,3,1] parameter(1)
  u = f32[4,3,5] parameter(2)
  ROOT s = f32[3,4,5] scatter(o, i, u), update_window_dims={2}, inserted_window_dims={},
    scatter_dims_to_operand_dims={2}, input_batching_dims={0,1},
    scatter_indices_batching_dims={1,0}, index_vector_dim=2, to_apply=replace
})");
  ExpectCompiledMatchesInterpreterOnRandomInputs(R"(replace {
  x = s32[] parameter(0)
  ROOT y = s32[] parameter(1)
}
ENTRY e {
  o = s32[9,4] parameter(0)
  i = u32[5,1] parameter(1)
  u = s32[5,4] parameter(2)
  ROOT s = s32[9,4] scatter(o, i, u), update_window_dims={1}, inserted_window_dims={0},
    scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=replace
})");
  ExpectCompiledMatchesInterpreterOnRandomInputs(kVariadic);
}

TEST(GatherScatterTest, CompiledScatterMaximumKeepsNaNAndSignedZeros) {
  const std::string text = R"(max {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT m = f32[] maximum(x, y)
}
ENTRY e {
  o = f32[4] parameter(0)
  i = s32[4,1] parameter(1)
  u = f32[4] parameter(2)
  ROOT s = f32[4] scatter(o, i, u), update_window_dims={}, inserted_window_dims={0},
    scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=max
})";
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<Literal> args = {Array(kF32, {4}, {0.0, 1, nan, -0.0}),
                                     Array(kS32, {4, 1}, {0, 1, 2, 3}),
                                     Array(kF32, {4}, {-0.0, nan, 5, 0.0})};
  const Literal got = Evaluate(text, args);
  ASSERT_EQ(got.size(), 4u);
  EXPECT_TRUE(std::isnan(got.GetFloat(1)));
  EXPECT_TRUE(std::isnan(got.GetFloat(2)));
  ExpectCompiledMatchesInterpreter(text, args);
}

// ---- what the generated code looks like where it counts -------------------------------------

TEST(GatherScatterTest, EmbeddingLookupCopiesRowsWithMemcpy) {
  const std::string source = ExpectCompiledMatchesInterpreterOnRandomInputs(R"(ENTRY e {
  table = f32[50,16] parameter(0)
  ids = s32[4,8] parameter(1)
  ROOT g = f32[4,8,16] gather(table, ids), offset_dims={2}, collapsed_slice_dims={0},
    start_index_map={0}, index_vector_dim=2, slice_sizes={1,16}
})");
  // One copy of 16 floats per id, no loop over the row.
  EXPECT_THAT(source, HasSubstr("std::memcpy(v2 + o, p0 + b, 64LL);"));
  EXPECT_THAT(source, HasSubstr("o += 16LL;"));
  EXPECT_THAT(source, Not(HasSubstr("d2 < 16LL")));
}

TEST(GatherScatterTest, ScatterAddCombinesInTheLoopWithoutACall) {
  const std::string source =
      ExpectCompiledMatchesInterpreterOnRandomInputs(std::string(kAddF32) + R"(ENTRY e {
  o = f32[50,16] parameter(0)
  i = s32[32] parameter(1)
  u = f32[32,16] parameter(2)
  ROOT s = f32[50,16] scatter(o, i, u), update_window_dims={1}, inserted_window_dims={0},
    scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
})");
  EXPECT_THAT(source, HasSubstr("v3[at] = hc_add<float>(v3[at], p2[ua]);"));
  EXPECT_THAT(source, Not(HasSubstr("if (hc_comp")));
}

TEST(GatherScatterTest, ScatterWithAnotherComputationCallsItsFunction) {
  const std::string source = ExpectCompiledMatchesInterpreterOnRandomInputs(R"(f {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  d = f32[] subtract(x, y)
  ROOT r = f32[] multiply(d, y)
}
ENTRY e {
  o = f32[10] parameter(0)
  i = s32[6] parameter(1)
  u = f32[6] parameter(2)
  ROOT s = f32[10] scatter(o, i, u), update_window_dims={}, inserted_window_dims={0},
    scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=f
})");
  EXPECT_THAT(source, HasSubstr("if (hc_comp0(v3 + at, p2 + ua, next0) != 0) return 1;"));
}

// ---- malformed modules ---------------------------------------------------------------------

// A module whose line 15 is `ROOT r = OP`, with o = f32[4,3], i = s32[2,1], u = f32[2,3] and
// update computations add (f32) and add_s32.
std::string WithOp(const std::string& op) {
  return std::string(kAddF32) + "add_s32 {\n  x = s32[] parameter(0)\n  y = s32[] parameter(1)\n" +
         "  ROOT s = s32[] add(x, y)\n}\n" +
         "ENTRY e {\n  o = f32[4,3] parameter(0)\n  i = s32[2,1] parameter(1)\n" +
         "  u = f32[2,3] parameter(2)\n  ROOT r = " + op + "\n}\n";
}

// Both the code generator and the interpreter refuse `op` with `code`, naming line 15; the
// code generator's message says `why`.
void ExpectRefused(const std::string& op, StatusCode code, const std::string& why) {
  SCOPED_TRACE(op);
  auto m = hlo::ParseModule(WithOp(op), "g.hlo");
  ASSERT_THAT(m, IsOk());
  EXPECT_THAT(LowerToCpp(*m), StatusIs(code, HasSubstr("g.hlo:15: ")));
  EXPECT_THAT(LowerToCpp(*m), StatusIs(code, HasSubstr(why)));
  auto args = interp::MakeArguments(*m, interp::ArgumentFill::kZeros, 1);
  ASSERT_THAT(args, IsOk());
  EXPECT_THAT(interp::Evaluate(*m, *args), StatusIs(code, HasSubstr("g.hlo:15: ")));
}

void ExpectAccepted(const std::string& op) {
  SCOPED_TRACE(op);
  auto m = hlo::ParseModule(WithOp(op), "g.hlo");
  ASSERT_THAT(m, IsOk());
  EXPECT_THAT(LowerToCpp(*m), IsOk());
  auto args = interp::MakeArguments(*m, interp::ArgumentFill::kZeros, 1);
  ASSERT_THAT(args, IsOk());
  EXPECT_THAT(interp::Evaluate(*m, *args), IsOk());
}

TEST(GatherScatterTest, MalformedGathersAreRefusedWithTheirLine) {
  const auto bad = StatusCode::kInvalidArgument;
  const std::string map = "start_index_map={0}, index_vector_dim=1";
  // The well-formed gather each case below changes in one thing.
  ExpectAccepted("f32[2,3] gather(o, i), offset_dims={1}, collapsed_slice_dims={0}, " + map +
                 ", slice_sizes={1,3}");
  ExpectRefused("f32[2,4] gather(o, i), offset_dims={1}, collapsed_slice_dims={0}, " + map +
                    ", slice_sizes={1,3}",
                bad, "dimension 1 of the result is 4, not the slice size 3");
  ExpectRefused("f32[3,3] gather(o, i), offset_dims={1}, collapsed_slice_dims={0}, " + map +
                    ", slice_sizes={1,3}",
                bad, "dimension 0 of the result is 3, not 2");
  ExpectRefused("s32[2,3] gather(o, i), offset_dims={1}, collapsed_slice_dims={0}, " + map +
                    ", slice_sizes={1,3}",
                bad, "element type");
  ExpectRefused("f32[2,3] gather(o, i), offset_dims={2}, collapsed_slice_dims={0}, " + map +
                    ", slice_sizes={1,3}",
                bad, "offset_dims={2} is not ascending dimensions of the result");
  ExpectRefused("f32[3,2] gather(o, i), offset_dims={1,0}, collapsed_slice_dims={}, " + map +
                    ", slice_sizes={2,3}",
                bad, "offset_dims={1,0} is not ascending");
  ExpectRefused("f32[2,3] gather(o, i), offset_dims={1}, collapsed_slice_dims={2}, " + map +
                    ", slice_sizes={1,3}",
                bad, "collapsed_slice_dims={2}");
  ExpectRefused("f32[2,4] gather(o, i), offset_dims={1}, collapsed_slice_dims={0}, " + map +
                    ", slice_sizes={1,4}",
                bad, "does not fit in the operand");
  ExpectRefused("f32[2,3] gather(o, i), offset_dims={1}, collapsed_slice_dims={0}, " + map +
                    ", slice_sizes={2,3}",
                bad, "more than 1");
  ExpectRefused("f32[2,3] gather(o, i), offset_dims={1}, collapsed_slice_dims={0}, " + map +
                    ", slice_sizes={1,3,1}",
                bad, "slice_sizes has 3 entries");
  ExpectRefused(
      "f32[2,3] gather(o, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0,1}, "
      "index_vector_dim=1, slice_sizes={1,3}",
      bad, "start_index_map has 2 entries for start vectors of 1");
  ExpectRefused(
      "f32[2,3] gather(o, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, "
      "index_vector_dim=3, slice_sizes={1,3}",
      bad, "index_vector_dim 3 is outside [0, 2]");
  ExpectRefused(
      "f32[2,3] gather(o, i), offset_dims={1}, collapsed_slice_dims={}, "
      "operand_batching_dims={0}, start_index_map={1}, index_vector_dim=1, slice_sizes={1,3}",
      bad, "differ in length");
  ExpectRefused(
      "f32[2,3] gather(o, i), offset_dims={1}, collapsed_slice_dims={}, "
      "operand_batching_dims={0}, start_indices_batching_dims={1}, start_index_map={1}, "
      "index_vector_dim=1, slice_sizes={1,3}",
      bad, "other than index_vector_dim");
  ExpectRefused("f32[2,3] gather(o, u), offset_dims={1}, collapsed_slice_dims={0}, " + map +
                    ", slice_sizes={1,3}",
                bad, "the indices are not integers");
  ExpectRefused("f32[2,3] gather(o, i), offset_dims={1}, collapsed_slice_dims={0}, " + map, bad,
                "lacks slice_sizes");
  ExpectRefused("f32[2,3] gather(o), offset_dims={1}, collapsed_slice_dims={0}, " + map +
                    ", slice_sizes={1,3}",
                bad, "takes an operand and start indices");
  // Well formed, but a collapsed slice of no elements has nothing to read.
  ExpectRefused("f32[2,3] gather(o, i), offset_dims={1}, collapsed_slice_dims={0}, " + map +
                    ", slice_sizes={0,3}",
                StatusCode::kFailedPrecondition, "collapsed or batching slice size is 0");
}

TEST(GatherScatterTest, MalformedScattersAreRefusedWithTheirLine) {
  const auto bad = StatusCode::kInvalidArgument;
  const std::string dims = "scatter_dims_to_operand_dims={0}, index_vector_dim=1";
  ExpectAccepted("f32[4,3] scatter(o, i, u), update_window_dims={1}, inserted_window_dims={0}, " +
                 dims + ", to_apply=add");
  ExpectRefused("f32[4,4] scatter(o, i, u), update_window_dims={1}, inserted_window_dims={0}, " +
                    dims + ", to_apply=add",
                bad, "the result is not of the operands' shapes");
  ExpectRefused("f32[4,3] scatter(o, i), update_window_dims={1}, inserted_window_dims={0}, " +
                    dims + ", to_apply=add",
                bad, "takes n operands, the indices and n updates");
  ExpectRefused("f32[4,3] scatter(o, i, u), update_window_dims={0}, inserted_window_dims={1}, " +
                    dims + ", to_apply=add",
                bad, "dimension 1 of the updates is 3, not 2");
  ExpectRefused("f32[4,3] scatter(o, i, u), update_window_dims={1}, inserted_window_dims={}, " +
                    dims + ", to_apply=add",
                bad, "the operand's rank 2 is not the count");
  ExpectRefused(
      "f32[4,3] scatter(o, i, u), update_window_dims={1}, inserted_window_dims={0}, "
      "scatter_dims_to_operand_dims={5}, index_vector_dim=1, to_apply=add",
      bad, "scatter_dims_to_operand_dims={5} is not distinct dimensions");
  ExpectRefused(
      "f32[4,3] scatter(o, i, u), update_window_dims={1}, inserted_window_dims={0}, "
      "scatter_dims_to_operand_dims={0}, index_vector_dim=-1, to_apply=add",
      bad, "index_vector_dim -1 is outside");
  ExpectRefused(
      "f32[4,3] scatter(o, i, u), update_window_dims={1}, inserted_window_dims={0}, " + dims, bad,
      "does not name one computation in to_apply=");
  ExpectRefused(
      "(f32[4,3], f32[4,3]) scatter(o, o, i, u, u), update_window_dims={1}, "
      "inserted_window_dims={0}, " +
          dims + ", to_apply=add",
      bad, "the update computation takes 2 parameters, not 4");
  ExpectRefused("f32[4,3] scatter(o, i, i), update_window_dims={1}, inserted_window_dims={0}, " +
                    dims + ", to_apply=add",
                bad, "updates 0 are not of operand 0's element type");
  // Well formed in XLA (a computation of another precision), but not implemented.
  ExpectRefused("f32[4,3] scatter(o, i, u), update_window_dims={1}, inserted_window_dims={0}, " +
                    dims + ", to_apply=add_s32",
                StatusCode::kFailedPrecondition, "other element types");
}

}  // namespace
}  // namespace hlocache::compiler
