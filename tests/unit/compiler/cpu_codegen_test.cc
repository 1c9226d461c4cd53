// The CPU code generator end to end: HLO -> C++ -> the system compiler -> artifact -> loaded from
// memory -> run on buffers, and compared with the reference interpreter, bit for bit.
#include "compiler/codegen/cpu_codegen.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "compiler/artifact/loader.h"
#include "compiler/build.h"
#include "compiler/hlo/parser.h"
#include "compiler/interp/interpreter.h"
#include "compiler/semantics/arguments.h"
#include "compiler/target.h"
#include "compiler/toolchain.h"
#include "tests/unit/compiler/compile_check.h"
#include "tests/unit/status_matchers.h"

namespace hlocache::compiler {
namespace {

using hlo::PrimitiveType;
using interp::Literal;
using ::testing::HasSubstr;
using ::testing::Not;

std::vector<double> Ramp(int n, double start, double step) {
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back(start + step * i);
  return v;
}

TEST(CpuCodegenTest, FloatElementwiseMatchesTheInterpreterBitForBit) {
  // f32 arithmetic computed in float has the bits of double's rounded once: overflow, NaN,
  // -0, division by zero and a subnormal result included.
  ExpectCompiledMatchesInterpreter(
      R"(ENTRY e {
  a = f32[7] parameter(0)
  b = f32[7] parameter(1)
  s = f32[7] add(a, b)
  m = f32[7] multiply(s, a)
  d = f32[7] divide(m, b)
  x = f32[7] maximum(d, a)
  q = f32[7] sqrt(b)
  r = f32[7] remainder(a, b)
  n = f32[7] negate(r)
  w = f32[7] subtract(a, b)
  ROOT o = (f32[7], f32[7], f32[7], f32[7], f32[7]) tuple(x, q, n, w, d)
})",
      {Array(PrimitiveType::kF32, {7}, {0.1, -2.5, 3e38, NAN, 1, -0.0, 1e-30}),
       Array(PrimitiveType::kF32, {7}, {0.2, 0, 3e38, 1, -7, 3, 1e10})});
}

TEST(CpuCodegenTest, F32TranscendentalFunctionsAreVectorizedWithinTheModuleTolerance) {
  // Computed in float by glibc's vector math (each op's bound in ulp is NumericsTest's): the
  // module's results within the stated tolerance, edge values where they are exact.
  const std::string source = ExpectCompiledMatchesInterpreter(
      R"(ENTRY e {
  a = f32[8] parameter(0)
  e = f32[8] exponential(a)
  t = f32[8] tanh(a)
  l = f32[8] logistic(a)
  g = f32[8] log(a)
  ROOT o = (f32[8], f32[8], f32[8], f32[8]) tuple(e, t, l, g)
})",
      {Array(PrimitiveType::kF32, {8}, {0.1, -2.5, 3e38, NAN, 1, -0.0, -100, INFINITY})});
  EXPECT_THAT(source, HasSubstr("#pragma omp simd"));
  EXPECT_THAT(source, HasSubstr("hc_vm_logistic("));
}

int Occurrences(const std::string& text, const std::string& part) {
  int n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// `text` compiled and run at 2, 3 and 1 threads (HLOCACHE_THREADS), each against the
// interpreter bit for bit; its source must split a loop (contain `split`). Two threads first: a
// loaded executable's pool takes its size from its first split loop.
void ExpectSameBitsAtEveryThreadCount(const std::string& text, const std::string& split) {
  for (const char* threads : {"2", "3", "1"}) {
    SCOPED_TRACE(std::string("HLOCACHE_THREADS=") + threads);
    ::setenv("HLOCACHE_THREADS", threads, 1);
    const std::string source = ExpectCompiledMatchesInterpreterOnRandomInputs(text, 7);
    EXPECT_THAT(source, HasSubstr(split));
  }
  ::unsetenv("HLOCACHE_THREADS");
}

// Elementwise loops of 2^17 elements or more, and reductions with as much work, are split
// across threads (the prelude's hc_parallel_run): the same bits at any thread count, the
// pieces' edges included (300001 and 1001 are not multiples of any piece size), each reduced
// result still folded in the interpreter's order.
TEST(CpuCodegenTest, LargeElementwiseLoopsSplitAcrossThreadsComputeTheSameBits) {
  const std::string text = R"(HloModule big
ENTRY e {
  x = f32[300001] parameter(0)
  y = f32[300001] parameter(1)
  m = f32[300001] multiply(x, y)
  t = f32[300001] tanh(m)
  ROOT r = f32[300001] add(t, x)
})";
  ExpectSameBitsAtEveryThreadCount(text, "hc_parallel_run(300001LL");
}

// Floats (i << shift) + offset + low for every i < 65536 (low below 1 << shift).
struct FloatFamily {
  int shift;
  uint32_t offset, low;
};

// A module converting every value of the 16-bit float type `half` (its bits from a u16) to f32,
// and each family's floats to `half`, returned as their u16 bits.
std::string HalfConversionModule(const std::string& half,
                                 const std::vector<FloatFamily>& families) {
  std::string text =
      "HloModule conversions\nENTRY e {\n  i = u32[65536] iota(), iota_dimension=0\n"
      "  h = u16[65536] convert(i)\n  g = " +
      half + "[65536] bitcast-convert(h)\n  f = f32[65536] convert(g)\n";
  std::string shapes = "f32[65536]", names = "f";
  for (size_t k = 0; k < families.size(); ++k) {
    const FloatFamily& fam = families[k];
    const std::string x = "x" + std::to_string(k);
    text += "  " + x + "_s = u32[] constant(" + std::to_string(fam.shift) + ")\n  " + x +
            "_sb = u32[65536] broadcast(" + x + "_s), dimensions={}\n  " + x +
            "_h = u32[65536] shift-left(i, " + x + "_sb)\n  " + x + "_a = u32[] constant(" +
            std::to_string(fam.offset + fam.low) + ")\n  " + x + "_ab = u32[65536] broadcast(" + x +
            "_a), dimensions={}\n  " + x + "_y = u32[65536] add(" + x + "_h, " + x + "_ab)\n  " +
            x + "_f = f32[65536] bitcast-convert(" + x + "_y)\n  " + x + "_r = " + half +
            "[65536] convert(" + x + "_f)\n  " + x + "_b = u16[65536] bitcast-convert(" + x +
            "_r)\n";
    shapes += ", u16[65536]";
    names += ", " + x + "_b";
  }
  return text + "  ROOT o = (" + shapes + ") tuple(" + names + ")\n}\n";
}

// bf16 to f32 and f32 to bf16 take the fast paths of the prelude (a shift; rounding on the
// float's bits), the same bits as the interpreter's conversions through double: every bf16,
// and every float's upper half with lower halves at and around the rounding ties (overflow to
// infinity, NaNs, subnormals, ties to even), the bf16 results compared as integers (a NaN's
// payload too; the f32 ones as floats, whose NaN payloads may differ).
TEST(CpuCodegenTest, HalfArithmeticInFloatMatchesTheInterpreterBitForBit) {
  // f16 and bf16 add, subtract, multiply, divide and square root are computed in float and
  // rounded once to the 16-bit type: every pair of values from subnormals to overflow, signed
  // zeros, infinities and NaN gives the interpreter's bits (double, rounded once).
  const std::vector<double> special = {0.0,    -0.0,         5.96e-8,  6.1e-5, 1e-40,    1.2e-38,
                                       1.0,    1.0009765625, -1.5,     3.0,    1.0 / 3,  2047.0,
                                       2049.0, 65504.0,      -65504.0, 3.3e38, INFINITY, -INFINITY,
                                       NAN,    0.099975586,  -7.0};
  std::vector<double> a, b;
  for (double x : special) {
    for (double y : special) {
      a.push_back(x);
      b.push_back(y);
    }
  }
  const int64_t n = static_cast<int64_t>(a.size());
  for (const char* type : {"f16", "bf16"}) {
    SCOPED_TRACE(type);
    const std::string t = std::string(type) + "[" + std::to_string(n) + "]";
    const std::string text = "ENTRY e {\n  a = " + t + " parameter(0)\n  b = " + t +
                             " parameter(1)\n  s = " + t + " add(a, b)\n  d = " + t +
                             " subtract(a, b)\n  m = " + t + " multiply(a, b)\n  q = " + t +
                             " divide(a, b)\n  r = " + t + " sqrt(a)\n  ROOT o = (" + t + ", " + t +
                             ", " + t + ", " + t + ", " + t + ") tuple(s, d, m, q, r)\n}\n";
    const PrimitiveType pt = *hlo::PrimitiveTypeFromName(type);
    const std::string source =
        ExpectCompiledMatchesInterpreter(text, {Array(pt, {n}, a), Array(pt, {n}, b)});
    EXPECT_THAT(source, HasSubstr("hc_half_sqrt<"));
  }
}

TEST(CpuCodegenTest, Bf16ConversionsOfEveryValueMatchTheInterpreter) {
  std::vector<FloatFamily> families;
  for (uint32_t low : {0x0000u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu, 0x5a5au}) {
    families.push_back({16, 0, low});
  }
  const std::string text = HalfConversionModule("bf16", families);
  const std::string source = ExpectCompiledMatchesInterpreter(text, {});
  EXPECT_THAT(source, HasSubstr("hc_cvt<hc_bf16, float>"));
}

// f16 to f32 and f32 to f16 take the target's conversions where it has them (F16C): the same
// results as the interpreter's conversions through double, the f16 ones compared as integers
// (a NaN's payload too): every f16 value; floats with every upper half and lower halves at and
// around the tie of f16's rounding; floats in f16's subnormal range and at its smallest
// normals, with every upper mantissa and lower bits at and around the tie.
TEST(CpuCodegenTest, F16ConversionsMatchTheInterpreter) {
  std::vector<FloatFamily> families;
  for (uint32_t low : {0x0000u, 0x0fffu, 0x1000u, 0x1001u, 0x3000u, 0xffffu}) {
    families.push_back({16, 0, low});
  }
  // Exponents 102 to 109 (f16's subnormals) and 112 to 119 (its smallest normals).
  for (uint32_t offset : {0x33000000u, 0x38000000u}) {
    for (uint32_t low : {0x0fffu, 0x1000u, 0x1001u}) families.push_back({13, offset, low});
  }
  const std::string text = HalfConversionModule("f16", families);
  const std::string source = ExpectCompiledMatchesInterpreter(text, {});
  EXPECT_THAT(source, HasSubstr("hc_cvt<hc_f16, float>"));
}

// The entry's results are the caller's buffers: a value the root hands on whole and nothing else
// reads is computed into its result (no copy at the end); one handed on twice, a parameter,
// and one that another instruction reads too are copied. Checked cut as built and finest (the
// results then pass through the frame of segment functions), against result buffers filled
// with garbage first.
TEST(CpuCodegenTest, TheEntrysResultsAreWrittenInPlace) {
  const std::string text = R"(HloModule results
add {
  p = f32[] parameter(0)
  q = f32[] parameter(1)
  ROOT s = f32[] add(p, q)
}
ENTRY e {
  x = f32[64] parameter(0)
  y = f32[64] parameter(1)
  a = f32[64] multiply(x, y)
  b = f32[64] add(x, y)
  c = f32[64] subtract(x, y)
  d = f32[64] exponential(c)
  zero = f32[] constant(0)
  s = f32[] reduce(y, zero), dimensions={0}, to_apply=add
  ROOT o = (f32[64], f32[64], f32[64], f32[64], f32[64], f32[64], f32[]) tuple(a, b, b, x, c, d, s)
})";
  const std::string source = ExpectCompiledMatchesInterpreterOnRandomInputs(text, 9);
  // The entry computation's function (hc_comp1; hc_comp0 is `add`): its definition comes last.
  const size_t at = source.rfind("int hc_comp1(");
  ASSERT_NE(at, std::string::npos);
  const std::string entry = source.substr(at);
  for (const char* copied : {"memcpy(r1,", "memcpy(r2,", "memcpy(r3,", "memcpy(r4,"}) {
    EXPECT_THAT(entry, HasSubstr(copied));
  }
  for (const char* in_place : {"memcpy(r0,", "memcpy(r5,", "memcpy(r6,"}) {
    EXPECT_THAT(entry, Not(HasSubstr(in_place)));
  }
}

// A broadcast read by one elementwise op (or reduce) is fused into it, read at an index computed
// from the element's (no pass writing the broadcast whole): along the first, last and middle
// dimensions, runs of dimensions read as one, a degenerate dimension, and into a reduction.
TEST(CpuCodegenTest, BroadcastsAreReadInPlaceByTheirElementwiseUsers) {
  const std::string text = R"(HloModule broadcasts
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[6,4,5] parameter(0)
  rows = f32[6] parameter(1)
  mid = f32[4] parameter(2)
  plane = f32[6,4] parameter(3)
  last = f32[4,5] parameter(4)
  edges = f32[6,5] parameter(5)
  one = f32[1,5] parameter(6)
  b0 = f32[6,4,5] broadcast(rows), dimensions={0}
  b1 = f32[6,4,5] broadcast(mid), dimensions={1}
  b01 = f32[6,4,5] broadcast(plane), dimensions={0,1}
  b12 = f32[6,4,5] broadcast(last), dimensions={1,2}
  b02 = f32[6,4,5] broadcast(edges), dimensions={0,2}
  bone = f32[6,1,4,5] broadcast(one), dimensions={1,3}
  r = f32[6,4,5] reshape(bone)
  s0 = f32[6,4,5] add(x, b0)
  s1 = f32[6,4,5] multiply(s0, b1)
  s2 = f32[6,4,5] subtract(s1, b01)
  s3 = f32[6,4,5] add(s2, b12)
  s4 = f32[6,4,5] maximum(s3, b02)
  s5 = f32[6,4,5] add(s4, r)
  zero = f32[] constant(0)
  bz = f32[6,4,5] broadcast(mid), dimensions={1}
  sums = f32[6,5] reduce(bz, zero), dimensions={1}, to_apply=add
  ROOT o = (f32[6,4,5], f32[6,5]) tuple(s5, sums)
})";
  const std::string source = ExpectCompiledMatchesInterpreterOnRandomInputs(text, 5);
  // No broadcast is written whole (the copy loops of data movement write `[o++] = `); a
  // reshape, which reads at the same index, passes the fused read on.
  EXPECT_EQ(Occurrences(source, "[o++] = "), 0) << source;
  EXPECT_THAT(source, HasSubstr("[(i / 20LL) * 5LL + (i % 5LL)]"));  // b02's runs.
}

// Dots and convolutions with enough work split their blocks of results across threads (the
// prelude's kernels): a dot's blocks of rows, a convolution's tiles of placements (feature
// groups of 16, two batches) and its rows of placements (depthwise), each result summed on
// one thread in the interpreter's order.
TEST(CpuCodegenTest, LargeDotsAndConvolutionsSplitAcrossThreadsComputeTheSameBits) {
  const std::string text = R"(HloModule contractions
ENTRY e {
  a = f32[300,257] parameter(0)
  b = f32[257,130] parameter(1)
  x = f32[2,20,20,32] parameter(2)
  k = f32[3,3,16,32] parameter(3)
  y = f32[2,100,100,16] parameter(4)
  w = f32[3,3,1,16] parameter(5)
  d = f32[300,130] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  c = f32[2,18,18,32] convolution(x, k), window={size=3x3}, dim_labels=b01f_01io->b01f, feature_group_count=2
  r = f32[2,98,98,16] convolution(y, w), window={size=3x3}, dim_labels=b01f_01io->b01f, feature_group_count=16
  ROOT o = (f32[300,130], f32[2,18,18,32], f32[2,98,98,16]) tuple(d, c, r)
})";
  ExpectSameBitsAtEveryThreadCount(text, "hc_conv<");
}

// Sorts of many rows with enough comparisons sort their rows on the executable's threads, each
// row on one: rows along the last dimension with ties between keys (the merge sort is stable,
// so the values' order among equal keys shows a row sorted differently), and rows along the
// first dimension, strided in memory.
TEST(CpuCodegenTest, LargeSortsSortTheirRowsAcrossThreadsWithTheSameResults) {
  const std::string text = R"(HloModule sorts
by_key {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  ROOT lt = pred[] compare(a, b), direction=LT
}
descending {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT gt = pred[] compare(a, b), direction=GT
}
ENTRY e {
  x = f32[300,1000] parameter(0)
  four = f32[] constant(4)
  b4 = f32[300,1000] broadcast(four), dimensions={}
  m = f32[300,1000] multiply(x, b4)
  k = f32[300,1000] floor(m)
  v = s32[300,1000] iota(), iota_dimension=1
  s = (f32[300,1000], s32[300,1000]) sort(k, v), dimensions={1}, to_apply=by_key
  keys = f32[300,1000] get-tuple-element(s), index=0
  values = s32[300,1000] get-tuple-element(s), index=1
  y = f32[1000,130] parameter(1)
  t = f32[1000,130] sort(y), dimensions={0}, to_apply=descending
  ROOT o = (f32[300,1000], s32[300,1000], f32[1000,130]) tuple(keys, values, t)
})";
  ExpectSameBitsAtEveryThreadCount(text, "hc_merge_sort(positions.get()");
}

// Gathers of 1 MiB or more copy pieces of their result's outermost dimension on the threads,
// each piece from its own first output offset: rows of an embedding (65 ids a batch element, so
// pieces end inside a batch element), and a window dimension outermost.
TEST(CpuCodegenTest, LargeGathersCopyPiecesOfTheirResultAcrossThreadsWithTheSameBits) {
  ExpectSameBitsAtEveryThreadCount(R"(HloModule embedding
ENTRY e {
  table = f32[1000,256] parameter(0)
  ids = s32[16,65] parameter(1)
  ROOT g = f32[16,65,256] gather(table, ids), offset_dims={2}, collapsed_slice_dims={0},
    start_index_map={0}, index_vector_dim=2, slice_sizes={1,256}
})",
                                   "int64_t o = d0 * 16640LL;");
  ExpectSameBitsAtEveryThreadCount(R"(HloModule columns
ENTRY e {
  x = f32[600,2000] parameter(0)
  ids = s32[600,1] parameter(1)
  ROOT g = f32[600,600] gather(x, ids), offset_dims={0}, collapsed_slice_dims={1},
    start_index_map={1}, index_vector_dim=1, slice_sizes={600,1}
})",
                                   "int64_t o = d0 * 600LL;");
}

// A split loop is a function of the module taking its buffers and constants as arguments, so
// loops that differ only in what they read and write (a model's layers) share one: here two
// fused loops, one text. Each call still reads its own buffers and constants.
TEST(CpuCodegenTest, SplitLoopsThatDifferOnlyInTheirBuffersShareOneFunction) {
  const std::string text = R"(HloModule layers
ENTRY e {
  x = f32[200000] parameter(0)
  y = f32[200000] parameter(1)
  two = f32[] constant(2)
  three = f32[] constant(3)
  b2 = f32[200000] broadcast(two), dimensions={}
  b3 = f32[200000] broadcast(three), dimensions={}
  mx = f32[200000] multiply(x, b2)
  my = f32[200000] multiply(y, b3)
  tx = f32[200000] tanh(mx)
  ty = f32[200000] tanh(my)
  sx = f32[200000] subtract(tx, y)
  sy = f32[200000] subtract(ty, x)
  ROOT o = (f32[200000], f32[200000]) tuple(sx, sy)
})";
  ::setenv("HLOCACHE_THREADS", "2", 1);
  const std::string source = ExpectCompiledMatchesInterpreterOnRandomInputs(text, 3);
  ::unsetenv("HLOCACHE_THREADS");
  EXPECT_EQ(Occurrences(source, "hc_parallel_run(200000LL"), 2) << source;
  EXPECT_EQ(Occurrences(source, "(void* const* hc_in, int64_t lo, int64_t hi) {"), 1) << source;
}

TEST(CpuCodegenTest, LargeReductionsSplitAcrossThreadsComputeTheSameBits) {
  const std::string text = R"(HloModule reductions
sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[1001,300] parameter(0)
  zero = f32[] constant(0)
  rows = f32[1001] reduce(x, zero), dimensions={1}, to_apply=sum
  columns = f32[300] reduce(x, zero), dimensions={0}, to_apply=sum
  ROOT both = (f32[1001], f32[300]) tuple(rows, columns)
})";
  ExpectSameBitsAtEveryThreadCount(text, "for (int64_t t0 = lo * ");
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

// The sub-byte integers (s1, s2, s4, u1, u2, u4): every value wraps to the type's width (the
// two's complement of 4 bits: 7 + 1 is -8), shifts, bit counts and the sign bit are the width's
// own, conversions from floats saturate at the width's bounds, and dots, reductions, iota and
// bitcast-convert between types of one width all stay inside it.
TEST(CpuCodegenTest, SubByteIntegersWrapToTheirWidth) {
  for (const char* type : {"s4", "u4", "s2", "u2", "s1", "u1"}) {
    std::string text = R"(
add {
  x = T[] parameter(0)
  y = T[] parameter(1)
  ROOT s = T[] add(x, y)
}
ENTRY e {
  a = T[8] parameter(0)
  b = T[8] parameter(1)
  f = f32[8] parameter(2)
  s = T[8] add(a, b)
  d = T[8] subtract(a, b)
  m = T[8] multiply(a, b)
  q = T[8] divide(a, b)
  r = T[8] remainder(a, b)
  mx = T[8] maximum(a, b)
  x = T[8] xor(a, b)
  n = T[8] not(a)
  ng = T[8] negate(a)
  ab = T[8] abs(a)
  sg = T[8] sign(a)
  sl = T[8] shift-left(a, b)
  srl = T[8] shift-right-logical(a, b)
  sra = T[8] shift-right-arithmetic(a, b)
  pc = T[8] popcnt(a)
  cz = T[8] count-leading-zeros(a)
  cf = T[8] convert(f)
  w = s32[8] convert(a)
  nw = T[8] convert(w)
  lt = pred[8] compare(a, b), direction=LT
  io = T[8] iota(), iota_dimension=0
  z = T[] constant(0)
  red = T[] reduce(m, z), dimensions={0}, to_apply=add
  a2 = T[2,4] reshape(a)
  b2 = T[4,2] reshape(b)
  dt = T[2,2] dot(a2, b2), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT o = (T[8], T[8], T[8], T[8], T[8], T[8], T[8], T[8], T[8], T[8], T[8], T[8], T[8], T[8], T[8], T[8], T[8], s32[8], T[8], pred[8], T[8], T[], T[2,2]) tuple(s, d, m, q, r, mx, x, n, ng, ab, sg, sl, srl, sra, pc, cz, cf, w, nw, lt, io, red, dt)
})";
    for (size_t pos; (pos = text.find("T[")) != std::string::npos;) text.replace(pos, 1, type);
    const PrimitiveType t = *hlo::PrimitiveTypeFromName(type);
    SCOPED_TRACE(type);
    ExpectCompiledMatchesInterpreter(
        text, {Array(t, {8}, {7, -8, 5, 3, -1, 6, 0, 2}), Array(t, {8}, {1, 2, -1, 7, 3, 0, 4, 5}),
               Array(PrimitiveType::kF32, {8}, {100, -100, 2.7, -2.7, NAN, 7.5, -8.5, 15})});
  }
  // The values themselves, for s4 and u4: what a wider type would give, wrapped.
  auto eval = [](const std::string& text, const std::vector<interp::Literal>& args) {
    auto m = hlo::ParseModule(text, "t.hlo");
    EXPECT_TRUE(m.has_value());
    auto r = interp::Evaluate(*m, args);
    EXPECT_TRUE(r.has_value());
    return r.has_value() ? *r : interp::Literal();
  };
  const auto s4 = eval(R"(ENTRY e {
  a = s4[4] parameter(0)
  b = s4[4] parameter(1)
  s = s4[4] add(a, b)
  l = s4[4] shift-right-logical(a, b)
  c = s4[4] count-leading-zeros(b)
  ROOT o = (s4[4], s4[4], s4[4]) tuple(s, l, c)
})",
                       {Array(PrimitiveType::kS4, {4}, {7, -8, -1, 3}),
                        Array(PrimitiveType::kS4, {4}, {1, 1, 1, 1})});
  ASSERT_EQ(s4.elements().size(), 3u);
  EXPECT_EQ(s4.elements()[0], Array(PrimitiveType::kS4, {4}, {-8, -7, 0, 4}));
  EXPECT_EQ(s4.elements()[1], Array(PrimitiveType::kS4, {4}, {3, 4, 7, 1}));
  EXPECT_EQ(s4.elements()[2], Array(PrimitiveType::kS4, {4}, {3, 3, 3, 3}));
  const auto u4 = eval(R"(ENTRY e {
  f = f32[4] parameter(0)
  c = u4[4] convert(f)
  ROOT n = u4[4] negate(c)
})",
                       {Array(PrimitiveType::kF32, {4}, {100, -3, 2.5, 15})});
  EXPECT_EQ(u4, Array(PrimitiveType::kU4, {4}, {1, 0, 14, 1}));
}

// A float dot of an integer operand (an int4-weight matmul): the integers are converted to the
// result's type (s32 16777217 is 16777216 in f32: plus 1, 16777216, not 16777218), then summed
// in double like any float dot.
TEST(CpuCodegenTest, IntegerOperandsOfAFloatDotAreConvertedToItsType) {
  const std::string text = R"(ENTRY e {
  a = bf16[2,3] parameter(0)
  w = s4[3,2] parameter(1)
  i = s32[3] parameter(2)
  p = pred[3] parameter(3)
  d = bf16[2,2] dot(a, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  g = f32[] dot(i, p), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  ROOT o = (bf16[2,2], f32[]) tuple(d, g)
})";
  const std::vector<Literal> args = {Array(PrimitiveType::kBF16, {2, 3}, {1, 2, 3, -0.5, 0.25, 8}),
                                     Array(PrimitiveType::kS4, {3, 2}, {7, -8, 1, 2, -1, 0}),
                                     Array(PrimitiveType::kS32, {3}, {16777217, 1, 5}),
                                     Array(PrimitiveType::kPred, {3}, {1, 1, 0})};
  ExpectCompiledMatchesInterpreter(text, args);
  auto m = hlo::ParseModule(text, "t.hlo");
  ASSERT_THAT(m, IsOk());
  auto r = interp::Evaluate(*m, args);
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->elements()[0], Array(PrimitiveType::kBF16, {2, 2}, {6, -4, -11.25, 4.5}))
      << r->elements()[0].ToString();
  EXPECT_EQ(r->elements()[1], Array(PrimitiveType::kF32, {}, {16777216}))
      << r->elements()[1].ToString();
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

// The blocked dot (the prelude's hc_dot): batch and contracting dimensions anywhere, two
// contracting dimensions paired out of order, 5 rows (a block of 4 and one row) and 37 columns
// (two tiles of 16 and a part), for a float, a 16-bit float and two integer types (which wrap),
// and an empty contraction.
TEST(CpuCodegenTest, BlockedDotsMatchTheInterpreterAcrossTileEdges) {
  auto module = [](const char* t) {
    return std::string("ENTRY e {\n  a = ") + t + "[3,2,5,2] parameter(0)\n  b = " + t +
           "[37,2,2,3] parameter(1)\n  ROOT d = " + t +
           "[2,5,37] dot(a, b), lhs_batch_dims={1}, rhs_batch_dims={2}, "
           "lhs_contracting_dims={0,3}, rhs_contracting_dims={3,1}\n}";
  };
  for (PrimitiveType type :
       {PrimitiveType::kF32, PrimitiveType::kBF16, PrimitiveType::kS8, PrimitiveType::kU32}) {
    const bool is_float = type == PrimitiveType::kF32 || type == PrimitiveType::kBF16;
    const char* name = type == PrimitiveType::kF32    ? "f32"
                       : type == PrimitiveType::kBF16 ? "bf16"
                       : type == PrimitiveType::kS8   ? "s8"
                                                      : "u32";
    std::vector<double> lhs = Ramp(60, is_float ? -2.9 : -30, is_float ? 0.1 : 1);
    std::vector<double> rhs = Ramp(444, is_float ? 1.7 : 0, is_float ? -0.01 : 1);
    if (type == PrimitiveType::kS8) {
      for (double& v : rhs) v = std::fmod(v, 100) - 50;
    } else if (type == PrimitiveType::kU32) {
      for (double& v : lhs) v += 30;
      for (double& v : rhs) v *= 1e7;  // Products and sums past 2^32: they wrap.
    }
    SCOPED_TRACE(name);
    ExpectCompiledMatchesInterpreter(
        module(name), {Array(type, {3, 2, 5, 2}, lhs), Array(type, {37, 2, 2, 3}, rhs)});
  }
  ExpectCompiledMatchesInterpreter(
      "ENTRY e {\n  a = f32[4,0] parameter(0)\n  b = f32[0,3] parameter(1)\n  ROOT d = f32[4,3] "
      "dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}",
      {Array(PrimitiveType::kF32, {4, 0}, {}), Array(PrimitiveType::kF32, {0, 3}, {})});
}

TEST(CpuCodegenTest, UnsupportedOpsAreNamedWithTheirLine) {
  auto module = hlo::ParseModule(
      "ENTRY e {\n  a = f32[2,2] parameter(0)\n  ROOT s = f32[2,2] custom-call(a), "
      "custom_call_target=\"lapack_sgetrf\"\n}",
      "g.hlo");
  ASSERT_THAT(module, IsOk());
  EXPECT_THAT(LowerToCpp(*module),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("g.hlo:3:")));
  EXPECT_THAT(LowerToCpp(*module),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("'custom-call'")));
  // Ops HLO leaves undefined are refused rather than handed to c++ as code it would reject.
  for (const char* text :
       {"ENTRY e {\n  a = pred[2] parameter(0)\n  ROOT s = pred[2] subtract(a, a)\n}",
        "ENTRY e {\n  a = f32[2] parameter(0)\n  ROOT n = f32[2] not(a)\n}",
        "ENTRY e {\n  a = f32[2] parameter(0)\n  ROOT n = f32[2] shift-left(a, a)\n}",
        "ENTRY e {\n  a = f32[2] parameter(0)\n  ROOT s = f32[2] custom-call(a), "
        "custom_call_target=\"f\"\n}",
        "ENTRY e {\n  a = f32[2] parameter(0)\n  ROOT s = c64[2] convert(a)\n}"}) {
    auto m = hlo::ParseModule(text, "g.hlo");
    ASSERT_THAT(m, IsOk());
    EXPECT_THAT(LowerToCpp(*m), StatusIs(StatusCode::kFailedPrecondition, HasSubstr("g.hlo:3:")))
        << text;
  }
  // A module whose shapes do not follow from its ops is an input error, as in the interpreter.
  for (const char* text :
       {"ENTRY e {\n  a = s32[2] parameter(0)\n  ROOT f = pred[2] is-finite(a)\n}",
        "ENTRY e {\n  a = f32[2] parameter(0)\n  ROOT f = f32[3] add(a, a)\n}",
        "ENTRY e {\n  a = f32[2] parameter(0)\n  ROOT s = f32[3] slice(a), slice={[0:3]}\n}",
        "ENTRY e {\n  a = f32[2] parameter(0)\n  t = (f32[2]) tuple(a)\n  ROOT g = f32[3] "
        "get-tuple-element(t), index=0\n}",
        "ENTRY e {\n  a = f32[2] parameter(0)\n  ROOT t = (f32[2], f32[2]) tuple(a)\n}"}) {
    auto m = hlo::ParseModule(text, "g.hlo");
    ASSERT_THAT(m, IsOk());
    EXPECT_THAT(LowerToCpp(*m), StatusIs(StatusCode::kInvalidArgument, HasSubstr("g.hlo:")))
        << text;
  }
  // A malformed module (an operand count its op does not take) is an input error.
  auto malformed = hlo::ParseModule(
      "ENTRY e {\n  a = f32[2] parameter(0)\n  ROOT s = f32[2] select(a)\n}", "g.hlo");
  ASSERT_THAT(malformed, IsOk());
  EXPECT_THAT(LowerToCpp(*malformed), StatusIs(StatusCode::kInvalidArgument,
                                               HasSubstr("g.hlo:3: 's' (select) has 1 operands")));
}

TEST(CpuCodegenTest, DataMovementMatchesTheInterpreter) {
  ExpectCompiledMatchesInterpreter(
      R"(ENTRY e {
  a = f32[4,5] parameter(0)
  i = s32[] parameter(1)
  j = u32[] parameter(2)
  sl = f32[2,2] slice(a), slice={[1:4:2], [0:5:3]}
  rv = f32[4,5] reverse(a), dimensions={0,1}
  z = f32[] constant(-1)
  pd = f32[4,8] pad(a, z), padding=1_-1_0x-1_0_1
  sl2 = f32[4,2] slice(a), slice={[0:4], [3:5]}
  cc = f32[4,12] concatenate(a, a, sl2), dimensions={1}
  ds = f32[2,3] dynamic-slice(a, i, j), dynamic_slice_sizes={2,3}
  up = f32[2,2] constant({{10, 20}, {30, 40}})
  dus = f32[4,5] dynamic-update-slice(a, up, j, i)
  ROOT o = (f32[2,2], f32[4,5], f32[4,8], f32[4,12], f32[2,3], f32[4,5]) tuple(sl, rv, pd, cc, ds, dus)
})",
      {Array(PrimitiveType::kF32, {4, 5}, Ramp(20, -3, 0.5)), Array(PrimitiveType::kS32, {}, {3}),
       Array(PrimitiveType::kU32, {}, {1})});
}

TEST(CpuCodegenTest, DynamicStartIndicesAreClampedLikeXla) {
  for (double start : {-7.0, 0.0, 2.0, 100.0}) {
    ExpectCompiledMatchesInterpreter(
        R"(ENTRY e {
  a = s16[6] parameter(0)
  i = s64[] parameter(1)
  ds = s16[4] dynamic-slice(a, i), dynamic_slice_sizes={4}
  u = s16[3] constant({7, 8, 9})
  ROOT dus = s16[6] dynamic-update-slice(a, u, i)
})",
        {Array(PrimitiveType::kS16, {6}, Ramp(6, -3, 1)), Array(PrimitiveType::kS64, {}, {start})});
  }
}

TEST(CpuCodegenTest, CallsTuplesAndVariadicReductions) {
  ExpectCompiledMatchesInterpreter(
      R"(
argmax {
  v0 = f32[] parameter(0)
  i0 = s32[] parameter(1)
  v1 = f32[] parameter(2)
  i1 = s32[] parameter(3)
  gt = pred[] compare(v1, v0), direction=GT
  eq = pred[] compare(v1, v0), direction=EQ
  lt = pred[] compare(i1, i0), direction=LT
  tie = pred[] and(eq, lt)
  take = pred[] or(gt, tie)
  v = f32[] select(take, v1, v0)
  i = s32[] select(take, i1, i0)
  ROOT r = (f32[], s32[]) tuple(v, i)
}
sumsq {
  acc = f32[] parameter(0)
  x = f32[] parameter(1)
  sq = f32[] multiply(x, x)
  ROOT s = f32[] add(acc, sq)
}
helper {
  p = (f32[3,4], s32[]) parameter(0)
  a = f32[3,4] get-tuple-element(p), index=0
  k = s32[] get-tuple-element(p), index=1
  kf = f32[] convert(k)
  b = f32[3,4] broadcast(kf), dimensions={}
  s = f32[3,4] add(a, b)
  ROOT t = (f32[3,4], (s32[], f32[3,4])) tuple(s, (s32[], f32[3,4]) tuple(k, a))
}
ENTRY e {
  a = f32[3,4] parameter(0)
  k = s32[] parameter(1)
  io = s32[3,4] iota(), iota_dimension=1
  ninf = f32[] constant(-inf)
  zero = s32[] constant(0)
  am = (f32[3], s32[3]) reduce(a, io, ninf, zero), dimensions={1}, to_apply=argmax
  z = f32[] constant(0)
  ss = f32[4] reduce(a, z), dimensions={0}, to_apply=sumsq
  pk = (f32[3,4], s32[]) tuple(a, k)
  c = (f32[3,4], (s32[], f32[3,4])) call(pk), to_apply=helper
  inner = (s32[], f32[3,4]) get-tuple-element(c), index=1
  k2 = s32[] get-tuple-element(inner), index=0
  ROOT o = ((f32[3], s32[3]), f32[4], (f32[3,4], (s32[], f32[3,4])), s32[]) tuple(am, ss, c, k2)
})",
      {Array(PrimitiveType::kF32, {3, 4}, {1, 5, 5, -2, NAN, 0, 3, 3, -1, -1, -1, -1}),
       Array(PrimitiveType::kS32, {}, {7})});
}

TEST(CpuCodegenTest, EveryElementTypeComputesLikeTheInterpreter) {
  // Integers: wrapping add, multiply, bitwise ops, shifts, min/max, clamp, compare, convert.
  for (const char* type : {"s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64"}) {
    std::string text = R"(ENTRY e {
  a = T[6] parameter(0)
  b = T[6] parameter(1)
  s = T[6] add(a, b)
  m = T[6] multiply(s, b)
  x = T[6] xor(m, a)
  n = T[6] not(x)
  o = T[6] or(n, b)
  sh = T[6] shift-right-logical(o, b)
  mx = T[6] maximum(sh, a)
  lo = T[] constant(1)
  hi = T[] constant(100)
  cl = T[6] clamp(lo, mx, hi)
  ab = T[6] abs(a)
  sg = T[6] sign(a)
  ng = T[6] negate(a)
  lt = pred[6] compare(a, b), direction=LT
  f = f32[6] convert(m)
  ROOT r = (T[6], T[6], T[6], T[6], T[6], pred[6], f32[6]) tuple(m, cl, ab, sg, ng, lt, f)
})";
    for (size_t pos; (pos = text.find("T[")) != std::string::npos;) text.replace(pos, 1, type);
    const PrimitiveType t = *hlo::PrimitiveTypeFromName(type);
    SCOPED_TRACE(type);
    ExpectCompiledMatchesInterpreter(
        text, {Array(t, {6}, {0, 1, -1, 127, -128, 77}), Array(t, {6}, {3, 0, 9, 2, 255, -5})});
  }
  // Floats, the 16-bit formats included: rounding once, NaN, infinities, subnormals.
  for (const char* type : {"f16", "bf16", "f32", "f64"}) {
    std::string text = R"(ENTRY e {
  a = T[8] parameter(0)
  b = T[8] parameter(1)
  s = T[8] add(a, b)
  d = T[8] divide(s, b)
  e = T[8] exponential(d)
  l = T[8] log(a)
  mn = T[8] minimum(e, l)
  p = T[8] power(a, b)
  r = T[8] round-nearest-even(p)
  i = s32[8] convert(r)
  h = f16[8] convert(s)
  bh = bf16[8] convert(d)
  c = T[8] convert(i)
  ge = pred[8] compare(a, b), direction=GE
  fin = pred[8] is-finite(d)
  ROOT o = (T[8], T[8], s32[8], f16[8], bf16[8], T[8], pred[8], pred[8]) tuple(mn, r, i, h, bh, c, ge, fin)
})";
    for (size_t pos; (pos = text.find("T[")) != std::string::npos;) text.replace(pos, 1, type);
    const PrimitiveType t = *hlo::PrimitiveTypeFromName(type);
    SCOPED_TRACE(type);
    ExpectCompiledMatchesInterpreter(text,
                                     {Array(t, {8}, {0.1, -2.5, 65504, NAN, 1e-6, 3.3, 1e30, -0.0}),
                                      Array(t, {8}, {0.2, 0, 2, 1, -7e-8, 1.7, -INFINITY, 1.5})});
  }
  // The 8-, 6- and 4-bit floats: arithmetic rounded once to the format, overflow to infinity,
  // NaN or the largest, conversions between them, dots and reductions of them.
  for (const char* type : {"f8e5m2", "f8e4m3", "f8e3m4", "f8e4m3fn", "f8e4m3fnuz", "f8e5m2fnuz",
                           "f8e4m3b11fnuz", "f6e2m3fn", "f6e3m2fn", "f4e2m1fn", "f8e8m0fnu"}) {
    std::string text = R"(
add {
  x = T[] parameter(0)
  y = T[] parameter(1)
  ROOT s = T[] add(x, y)
}
ENTRY e {
  a = T[8] parameter(0)
  b = T[8] parameter(1)
  s = T[8] add(a, b)
  m = T[8] multiply(s, b)
  d = T[8] divide(m, a)
  q = T[8] sqrt(d)
  f = f32[8] convert(m)
  g = f8e4m3fn[8] convert(d)
  h = f8e5m2[8] convert(g)
  big = f32[8] multiply(f, f)
  big2 = f32[8] multiply(big, big)
  over = T[8] convert(big2)
  lt = pred[8] compare(a, b), direction=LT
  z = T[] constant(0)
  r = T[] reduce(m, z), dimensions={0}, to_apply=add
  x = T[2,4] reshape(a)
  y = T[4,2] reshape(b)
  dt = f32[2,2] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  i = s32[8] convert(q)
  ROOT o = (T[8], f32[8], f8e5m2[8], T[8], pred[8], T[], f32[2,2], s32[8]) tuple(q, f, h, over, lt, r, dt, i)
})";
    for (size_t pos; (pos = text.find("T[")) != std::string::npos;) text.replace(pos, 1, type);
    const PrimitiveType t = *hlo::PrimitiveTypeFromName(type);
    SCOPED_TRACE(type);
    ExpectCompiledMatchesInterpreter(text,
                                     {Array(t, {8}, {0.1, -2.5, 7.5, NAN, 1e-3, 3.3, 1e30, -0.0}),
                                      Array(t, {8}, {0.2, 0, 2, 1, -7e-3, 1.7, -INFINITY, 1.5})});
  }
  // pred: logical ops, select, and its reductions.
  ExpectCompiledMatchesInterpreter(R"(
any {
  x = pred[] parameter(0)
  y = pred[] parameter(1)
  ROOT o = pred[] or(x, y)
}
ENTRY e {
  a = pred[2,3] parameter(0)
  b = pred[2,3] parameter(1)
  x = pred[2,3] xor(a, b)
  n = pred[2,3] not(x)
  f = pred[] constant(false)
  r = pred[2] reduce(n, f), dimensions={1}, to_apply=any
  s = s8[2,3] convert(n)
  ROOT o = (pred[2,3], pred[2], s8[2,3]) tuple(n, r, s)
})",
                                   {Array(PrimitiveType::kPred, {2, 3}, {1, 0, 1, 0, 0, 1}),
                                    Array(PrimitiveType::kPred, {2, 3}, {1, 1, 0, 0, 0, 1})});
}

TEST(CpuCodegenTest, ElementwiseChainsFuseIntoOneLoop) {
  const std::string source = ExpectCompiledMatchesInterpreter(
      R"(ENTRY e {
  a = f32[64] parameter(0)
  b = f32[64] parameter(1)
  s = f32[64] add(a, b)
  m = f32[64] multiply(s, a)
  e = f32[64] exponential(m)
  c = f32[] constant(0.5)
  bc = f32[64] broadcast(c), dimensions={}
  x = f32[64] maximum(e, bc)
  t = f32[64] tanh(x)
  s2 = f32[64] sqrt(b)
  ROOT r = f32[64] subtract(t, s2)
})",
      {Array(PrimitiveType::kF32, {64}, Ramp(64, -3, 0.1)),
       Array(PrimitiveType::kF32, {64}, Ramp(64, 0.5, 0.25))});
  // add, multiply, exponential, the broadcast of a scalar, maximum, tanh, sqrt and subtract share
  // one loop, which writes the root's buffer.
  // Counted in the module's functions, after the prelude's helpers.
  size_t loops = 0;
  for (size_t pos = source.find("\nint hc_comp");
       (pos = source.find("for (int64_t i = 0;", pos)) != std::string::npos; ++pos) {
    ++loops;
  }
  EXPECT_EQ(loops, 1u) << source;
  EXPECT_EQ(source.find("for (int64_t d0"), std::string::npos) << source;
  // f32 tanh is the prelude's, in float (vectorized), not double's rounded.
  EXPECT_NE(source.find("hc_sub<float>((hc_vm_tanh("), std::string::npos) << source;
  EXPECT_NE(source.find("#pragma omp simd", source.find("\nint hc_comp")), std::string::npos)
      << source;
}

TEST(CpuCodegenTest, F32RowsAreReducedInVectorLanesWithinTheModuleTolerance) {
  // Sums, maxima and minima of rows of 100 (three lanes' worth and a tail of 4) and of 64, an
  // exponential fused into the sum, a NaN in one row: schema/numerics.tsv lets f32 reduces
  // reassociate, and the results stay within the module tolerance.
  std::vector<double> x(5 * 100), y(3 * 64);
  for (size_t k = 0; k < x.size(); ++k) x[k] = std::sin(0.37 * static_cast<double>(k)) * 4;
  for (size_t k = 0; k < y.size(); ++k) y[k] = std::cos(0.11 * static_cast<double>(k)) - 0.5;
  x[250] = NAN;
  const std::string source = ExpectCompiledMatchesInterpreter(
      R"(
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}
min {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] minimum(b, a)
}
ENTRY e {
  x = f32[5,100] parameter(0)
  y = f32[3,64] parameter(1)
  z = f32[] constant(0.25)
  lo = f32[] constant(-inf)
  hi = f32[] constant(inf)
  ex = f32[5,100] exponential(x)
  sums = f32[5] reduce(ex, z), dimensions={1}, to_apply=add
  tops = f32[5] reduce(x, lo), dimensions={1}, to_apply=max
  bottoms = f32[3] reduce(y, hi), dimensions={1}, to_apply=min
  ROOT o = (f32[5], f32[5], f32[3]) tuple(sums, tops, bottoms)
})",
      {Array(PrimitiveType::kF32, {5, 100}, x), Array(PrimitiveType::kF32, {3, 64}, y)});
  EXPECT_EQ(Occurrences(source, "float lane["), 3) << source;
}

TEST(CpuCodegenTest, RowReductionsReadOnlyByABroadcastAreComputedInTheirConsumersLoop) {
  const std::string functions = R"(HloModule m

max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

)";
  // A softmax of 16 MiB (the least that fuses): the max and the sum are each computed, row by
  // row, in the loop that reads them (two loops in all, each row's fold into a local the loop
  // then reads).
  const std::string softmax =
      ExpectCompiledMatchesInterpreterOnRandomInputs(functions + R"(ENTRY e {
  x = f32[2048,2048] parameter(0)
  low = f32[] constant(-inf)
  rowmax = f32[2048] reduce(x, low), dimensions={1}, to_apply=max
  maxes = f32[2048,2048] broadcast(rowmax), dimensions={0}
  shifted = f32[2048,2048] subtract(x, maxes)
  e = f32[2048,2048] exponential(shifted)
  zero = f32[] constant(0)
  sums = f32[2048] reduce(e, zero), dimensions={1}, to_apply=add
  sumsb = f32[2048,2048] broadcast(sums), dimensions={0}
  ROOT y = f32[2048,2048] divide(e, sumsb)
})",
                                                     21);
  EXPECT_EQ(Occurrences(softmax, "float hc_row;"), 2) << softmax;
  // Smaller rows stay in cache: their reductions keep their own loops.
  std::string small = functions + R"(ENTRY e {
  x = f32[96,256] parameter(0)
  low = f32[] constant(-inf)
  rowmax = f32[96] reduce(x, low), dimensions={1}, to_apply=max
  maxes = f32[96,256] broadcast(rowmax), dimensions={0}
  ROOT shifted = f32[96,256] subtract(x, maxes)
})";
  EXPECT_EQ(Occurrences(ExpectCompiledMatchesInterpreterOnRandomInputs(small, 23), "float hc_row;"),
            0);
  // The reduction's code waits for its consumer; an instruction between them that writes code
  // of its own (ey, used twice) runs after it, and a consumer that reads it at another index
  // than its row (t: the sums broadcast along columns) reads it from its buffer, computed
  // before. Each reduction's value must be there when read: the results match.
  const std::string waits = ExpectCompiledMatchesInterpreterOnRandomInputs(functions + R"(ENTRY e {
  x = f32[2048,2048] parameter(0)
  y = f32[2048,2048] parameter(1)
  zero = f32[] constant(0)
  sums = f32[2048] reduce(x, zero), dimensions={1}, to_apply=add
  ey = f32[2048,2048] exponential(y)
  ey2 = f32[2048,2048] multiply(ey, ey)
  across = f32[2048,2048] broadcast(sums), dimensions={1}
  t = f32[2048,2048] add(across, ey)
  m = f32[2048] reduce(y, zero), dimensions={1}, to_apply=max
  mb = f32[2048,2048] broadcast(m), dimensions={0}
  u = f32[2048,2048] subtract(ey2, mb)
  ROOT o = (f32[2048,2048], f32[2048,2048]) tuple(t, u)
})",
                                                                           22);
  EXPECT_EQ(Occurrences(waits, "float hc_row;"), 1) << waits;  // m's only.
}

TEST(CpuCodegenTest, ReadsOfBroadcastRowsAndColumnsLoopOverRowsBitForBit) {
  // A row's value (broadcast along dimension 0) and a column's (along dimension 1) read in a
  // loop over rows: at r and at i - r * width, no quotient or remainder of i left. The ops are
  // exact, so bit for bit, in one loop (40 x 48) and in one split across threads (512 x 512).
  for (const char* dims : {"40,48", "512,512"}) {
    SCOPED_TRACE(dims);
    const std::string d(dims);
    const std::string rows = d.substr(0, d.find(',')), cols = d.substr(d.find(',') + 1);
    const std::string source = ExpectCompiledMatchesInterpreterOnRandomInputs(
        "ENTRY e {\n  x = f32[" + d + "] parameter(0)\n  a = f32[" + rows +
        "] parameter(1)\n  b = f32[" + cols + "] parameter(2)\n  ab = f32[" + d +
        "] broadcast(a), dimensions={0}\n  bb = f32[" + d +
        "] broadcast(b), dimensions={1}\n  s = f32[" + d + "] subtract(x, ab)\n  ROOT m = f32[" +
        d + "] multiply(s, bb)\n}\n");
    const std::string module_code = source.substr(source.find("\nint hc_"));
    EXPECT_THAT(module_code, HasSubstr("[r]"));
    EXPECT_THAT(module_code, HasSubstr("(i - r * " + cols + "LL)"));
    EXPECT_THAT(module_code, Not(HasSubstr("(i / ")));
    EXPECT_THAT(module_code, Not(HasSubstr("(i % ")));
  }
}

TEST(CpuCodegenTest, F32DotsCallTheBlasTheLoaderProvides) {
  // Row-major operands, a transposed lhs (contracting its first dimension), a batch whose rhs
  // is transposed, and a dot of a slice-free but strided layout: the module asks for BLAS, the
  // loader points it at this host's, and the results are within the module tolerance.
  const std::string text = R"(ENTRY e {
  a = f32[24,40] parameter(0)
  b = f32[40,17] parameter(1)
  t = f32[40,24] parameter(2)
  x = f32[3,5,40] parameter(3)
  y = f32[3,9,40] parameter(4)
  ab = f32[24,17] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  tb = f32[24,17] dot(t, b), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  xy = f32[3,5,9] dot(x, y), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_contracting_dims={2}
  ROOT o = (f32[24,17], f32[24,17], f32[3,5,9]) tuple(ab, tb, xy)
})";
  const std::string source = ExpectCompiledMatchesInterpreterOnRandomInputs(text, 5);
  EXPECT_THAT(source, HasSubstr("hlocache_blas_runtime = nullptr;"));
  auto module = hlo::ParseModule(text, "dots.hlo");
  ASSERT_THAT(module, IsOk());
  auto loaded = BuildAndLoad(*module);
  ASSERT_NE(loaded, nullptr);
  auto slot = loaded->Symbol("hlocache_blas_runtime");
  ASSERT_THAT(slot, IsOk());
  EXPECT_NE(*static_cast<const void* const*>(*slot), nullptr) << "the loader gave it no BLAS";
}

TEST(CpuCodegenTest, LargeTemporariesAreKeptFromOneRunToTheNext) {
  // Two temporaries of 210 MB (the converted input and the centered rows, each read twice), past
  // the size the C library always maps anew and unmaps on free: were they not kept by the
  // executable, every run would fault their pages in again (at least 105 huge pages each).
  const std::string text = R"(HloModule m

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY e {
  xb = bf16[12800,4096] parameter(0)
  x = f32[12800,4096] convert(xb)
  zero = f32[] constant(0)
  s = f32[12800] reduce(x, zero), dimensions={1}, to_apply=add
  sb = f32[12800,4096] broadcast(s), dimensions={0}
  c = f32[12800,4096] subtract(x, sb)
  q = f32[12800] reduce(c, zero), dimensions={1}, to_apply=add
  qb = f32[12800,4096] broadcast(q), dimensions={0}
  y = f32[12800,4096] multiply(c, qb)
  ROOT yb = bf16[12800,4096] convert(y)
})";
  auto module = hlo::ParseModule(text, "temps.hlo");
  ASSERT_THAT(module, IsOk());
  auto loaded = BuildAndLoad(*module);
  ASSERT_NE(loaded, nullptr);
  std::vector<uint16_t> in(size_t{12800} * 4096, 0x3f80), out(in.size(), 0);  // bf16 1.0
  const void* params[] = {in.data()};
  void* results[] = {out.data()};
  auto entry = reinterpret_cast<int (*)(const void* const*, void* const*)>(loaded->entry());
  ASSERT_EQ(entry(params, results), 0);
  auto faults = [] {
    rusage u{};
    ::getrusage(RUSAGE_SELF, &u);
    return u.ru_minflt;
  };
  const long before = faults();
  for (int run = 0; run < 3; ++run) ASSERT_EQ(entry(params, results), 0);
  // Fresh blocks would take 630 faults or more (two of 105 huge pages a run); kept ones none,
  // or up to a hundred under ASan, whose allocator serves the run's small allocations from
  // fresh memory (28 to 100 measured in the sanitizer suite).
  EXPECT_LT(faults() - before, 315) << "page faults in three runs after the first";
  // Each element: c = 1 - 4096, y = c * (4096 c), rounded to bf16 (to nearest even).
  const float c = 1.0f - 4096.0f, y = c * (4096.0f * c);
  uint32_t bits;
  std::memcpy(&bits, &y, sizeof bits);
  EXPECT_EQ(out[12345], static_cast<uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16));
}

TEST(CpuCodegenTest, TemporariesPastTheKeptBoundAreFreedAfterTheRun) {
  // A temporary of 545 MB (iota, read by two reductions) is more than an idle executable may
  // hold (512 MiB): after the run the process's resident memory is back where it was.
  const std::string text = R"(HloModule m

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY e {
  t = f32[136314880] iota(), iota_dimension=0
  zero = f32[] constant(0)
  s = f32[] reduce(t, zero), dimensions={0}, to_apply=add
  q = f32[136314880] multiply(t, t)
  s2 = f32[] reduce(q, zero), dimensions={0}, to_apply=add
  ROOT o = (f32[], f32[]) tuple(s, s2)
})";
  auto module = hlo::ParseModule(text, "big.hlo");
  ASSERT_THAT(module, IsOk());
  auto loaded = BuildAndLoad(*module);
  ASSERT_NE(loaded, nullptr);
  auto resident_mb = [] {
    long pages = 0, resident = 0;
    std::FILE* f = std::fopen("/proc/self/statm", "r");
    if (f == nullptr || std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = -1;
    if (f != nullptr) std::fclose(f);
    return resident * ::sysconf(_SC_PAGESIZE) / (1 << 20);
  };
  float s = 0, s2 = 0;
  void* results[] = {&s, &s2};
  auto entry = reinterpret_cast<int (*)(const void* const*, void* const*)>(loaded->entry());
  const long before = resident_mb();
  ASSERT_GE(before, 0);
  ASSERT_EQ(entry(nullptr, results), 0);
  EXPECT_GT(s, 0);
  EXPECT_LT(resident_mb() - before, 128) << "MB still resident after the run";
}

TEST(CpuCodegenTest, DotsOfOtherTypesDoNotAskForBlas) {
  const std::string source = ExpectCompiledMatchesInterpreterOnRandomInputs(R"(ENTRY e {
  a = f64[6,8] parameter(0)
  b = f64[8,5] parameter(1)
  ROOT d = f64[6,5] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
})");
  EXPECT_THAT(source, Not(HasSubstr("hlocache_blas_runtime = nullptr;")));
}

TEST(CpuCodegenTest, ElementwiseProducersFuseIntoReductionsAndDeadCodeIsDropped) {
  // Row and column reductions of a product, a max of an exponential, and a variadic argmax: the
  // product and the exponential are computed inside the reductions' loops, never stored.
  const std::string source = ExpectCompiledMatchesInterpreterOnRandomInputs(R"(
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
max {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT m = f32[] maximum(x, y)
}
argmax {
  a = f32[] parameter(0)
  i = s32[] parameter(1)
  b = f32[] parameter(2)
  j = s32[] parameter(3)
  gt = pred[] compare(a, b), direction=GE
  v = f32[] select(gt, a, b)
  k = s32[] select(gt, i, j)
  ROOT t = (f32[], s32[]) tuple(v, k)
}
ENTRY e {
  a = f32[37,70] parameter(0)
  b = f32[37,70] parameter(1)
  z = f32[] constant(0)
  lo = f32[] constant(-inf)
  m = f32[37,70] multiply(a, b)
  rows = f32[37] reduce(m, z), dimensions={1}, to_apply=add
  m2 = f32[37,70] multiply(a, a)
  cols = f32[70] reduce(m2, z), dimensions={0}, to_apply=add
  x = f32[37,70] exponential(b)
  top = f32[70] reduce(x, lo), dimensions={0}, to_apply=max
  io = s32[37,70] iota(), iota_dimension=1
  zi = s32[] constant(0)
  am = (f32[37], s32[37]) reduce(a, io, lo, zi), dimensions={1}, to_apply=argmax
  dead = f32[37,70] tanh(a)
  ROOT o = (f32[37], f32[70], f32[70], (f32[37], s32[37])) tuple(rows, cols, top, am)
})");
  // The entry's function is written last; the argmax computation's has buffers of its own.
  const size_t entry = source.rfind("\nint hc_comp");
  ASSERT_NE(entry, std::string::npos) << source;
  for (const char* buffer : {"v4[", "v8[", "v11["}) {
    EXPECT_EQ(source.find(buffer, entry), std::string::npos) << buffer << " was stored:\n"
                                                             << source;
  }
  // After the prelude, which defines both functions.
  const size_t module_code = source.find("\nint hc_comp");
  EXPECT_NE(source.find("hc_vm_exp(", module_code), std::string::npos);
  EXPECT_EQ(source.find("hc_vm_tanh(", module_code), std::string::npos) << "dead code was lowered";
}

TEST(CpuCodegenTest, TheRemainingUnaryOpsBitcastCopyAndFusion) {
  ExpectCompiledMatchesInterpreter(
      R"(
fused {
  x = f32[2,4] parameter(0)
  y = f32[2,4] parameter(1)
  m = f32[2,4] multiply(x, y)
  ROOT c = f32[2,4] cosine(m)
}
ENTRY e {
  a = f32[8] parameter(0)
  b = f32[8] parameter(1)
  e1 = f32[8] exponential-minus-one(a)
  l1 = f32[8] log-plus-one(b)
  rs = f32[8] rsqrt(b)
  c = f32[8] cosine(a)
  s = f32[8] sine(a)
  fl = f32[8] floor(a)
  ce = f32[8] ceil(a)
  ra = f32[8] round-nearest-afz(a)
  at = f32[8] atan2(a, b)
  bc = f32[2,4] bitcast(a)
  cp = f32[2,4] copy(bc)
  rb = f32[2,4] reshape(b)
  fu = f32[2,4] fusion(cp, rb), kind=kLoop, calls=fused
  ROOT o = (f32[8], f32[8], f32[8], f32[8], f32[8], f32[8], f32[8], f32[8], f32[8], f32[2,4]) tuple(e1, l1, rs, c, s, fl, ce, ra, at, fu)
})",
      {Array(PrimitiveType::kF32, {8}, {-2.5, -0.5, 0.5, 1.5, 2.5, -0.0, 1e-8, 3.75}),
       Array(PrimitiveType::kF32, {8}, {0.25, 1, 2, 4, 1e-3, 100, 7, 0.5})});
}

// Many executables live in one process (a client caches them): each must stay itself, whatever
// was loaded or unloaded before it.
TEST(CpuCodegenTest, ExecutablesLoadedTogetherStayDistinct) {
  auto toolchain = Toolchain::Probe(ToolchainOptions());
  ASSERT_THAT(toolchain, IsOk());
  std::vector<std::unique_ptr<LoadedExecutable>> loaded;
  for (int k = 0; k < 4; ++k) {
    auto module = hlo::ParseModule("ENTRY e {\n  a = s32[2] parameter(0)\n  c = s32[] constant(" +
                                       std::to_string(k) +
                                       ")\n  b = s32[2] broadcast(c), dimensions={}\n  ROOT s = "
                                       "s32[2] add(a, b)\n}",
                                   "k.hlo");
    ASSERT_THAT(module, IsOk());
    auto artifact = BuildArtifact(*module, *toolchain,
                                  {"v1-0000000000000000000000000000000" + std::to_string(k), ""});
    ASSERT_THAT(artifact, IsOk());
    auto exe = LoadedExecutable::Load(*artifact);
    ASSERT_THAT(exe, IsOk());
    loaded.push_back(std::move(*exe));
    if (k == 1) loaded.erase(loaded.begin());  // Unloading one frees its slot for the next.
  }
  ASSERT_EQ(loaded.size(), 3u);
  const int expected_constant[] = {1, 2, 3};
  for (size_t i = 0; i < loaded.size(); ++i) {
    const int32_t in[2] = {10, 20};
    int32_t out[2] = {0, 0};
    const void* params[] = {in};
    void* results[] = {out};
    auto entry = reinterpret_cast<int (*)(const void* const*, void* const*)>(loaded[i]->entry());
    ASSERT_EQ(entry(params, results), 0);
    EXPECT_EQ(out[0], 10 + expected_constant[i]) << "executable " << i << " ran another's code";
    EXPECT_EQ(out[1], 20 + expected_constant[i]);
  }
}

}  // namespace
}  // namespace hlocache::compiler
