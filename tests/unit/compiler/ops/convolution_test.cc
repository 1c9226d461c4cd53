// convolution: hand-computed values for the interpreter (padding, strides, input and kernel
// dilation, reversal, features, feature groups, batch groups), the compiled code checked
// against it on each and on random inputs over layouts, types and ranks, and malformed
// convolutions refused with their line.
#include <gtest/gtest.h>

#include <string>

#include "compiler/artifact/conv_runtime.h"
#include "tests/unit/compiler/ops/op_check.h"

namespace hlocache::compiler {
namespace {

using hlo::PrimitiveType;
using interp::Literal;
using op_check::ExpectMalformed;
using op_check::ExpectValue;
using op_check::Replaced;

// A convolution of two parameters.
std::string Conv(const std::string& input, const std::string& kernel, const std::string& result,
                 const std::string& attributes) {
  return "HloModule m\n\nENTRY e {\n  x = " + input + " parameter(0)\n  k = " + kernel +
         " parameter(1)\n  ROOT c = " + result + " convolution(x, k), " + attributes + "\n}\n";
}

TEST(ConvolutionTest, SlidesTheKernelWithPaddingStridesDilationAndReversal) {
  const Literal x = F32({1, 5, 1}, {1, 2, 3, 4, 5});
  const Literal k = F32({3, 1, 1}, {1, 2, 3});
  auto conv = [](const std::string& out, const std::string& window) {
    return Conv("f32[1,5,1]", "f32[3,1,1]", "f32[1," + out + ",1]",
                "window={" + window + "}, dim_labels=b0f_0io->b0f");
  };
  ExpectValue(conv("3", "size=3"), {x, k}, F32({1, 3, 1}, {14, 20, 26}));
  // The padding reads nothing.
  ExpectValue(conv("5", "size=3 pad=1_1"), {x, k}, F32({1, 5, 1}, {8, 14, 20, 26, 14}));
  ExpectValue(conv("3", "size=3 stride=2 pad=1_1"), {x, k}, F32({1, 3, 1}, {8, 20, 14}));
  // The kernel read backwards.
  ExpectValue(conv("3", "size=3 rhs_reversal=1"), {x, k}, F32({1, 3, 1}, {10, 16, 22}));
  // The input dilated (a transposed convolution): 1 _ 2 _ 3 _ 4 _ 5.
  ExpectValue(conv("7", "size=3 lhs_dilate=2"), {x, k}, F32({1, 7, 1}, {7, 4, 11, 6, 15, 8, 19}));
  // The kernel dilated: x0, x2 and x4.
  ExpectValue(conv("1", "size=3 rhs_dilate=2"), {x, k}, F32({1, 1, 1}, {22}));
}

TEST(ConvolutionTest, SumsOverInputFeaturesIntoEachOutputFeature) {
  // out0[p] = x0[p] + x1[p + 1]; out1[p] = x0[p] + x0[p + 1].
  const std::string text =
      Conv("f32[1,2,3]", "f32[2,2,2]", "f32[1,2,2]", "window={size=2}, dim_labels=bf0_oi0->bf0");
  ExpectValue(text,
              {F32({1, 2, 3}, {1, 2, 3, 10, 20, 30}), F32({2, 2, 2}, {1, 0, 0, 1, 1, 1, 0, 0})},
              F32({1, 2, 2}, {21, 32, 3, 5}));
}

TEST(ConvolutionTest, FeatureGroupsAndBatchGroupsSplitTheOutputFeatures) {
  const Literal k = F32({2, 1, 2}, {1, 1, 1, -1});
  // Feature groups: output feature 0 reads input feature 0 only, output feature 1 feature 1.
  ExpectValue(Conv("f32[1,2,3]", "f32[2,1,2]", "f32[1,2,2]",
                   "window={size=2}, dim_labels=bf0_oi0->bf0, feature_group_count=2"),
              {F32({1, 2, 3}, {1, 2, 3, 10, 20, 30}), k}, F32({1, 2, 2}, {3, 5, -10, -10}));
  // Batch groups: output feature 0 reads batch element 0 only, output feature 1 element 1.
  ExpectValue(Conv("f32[2,1,3]", "f32[2,1,2]", "f32[1,2,2]",
                   "window={size=2}, dim_labels=bf0_oi0->bf0, batch_group_count=2"),
              {F32({2, 1, 3}, {1, 2, 3, 10, 20, 30}), k}, F32({1, 2, 2}, {3, 5, -10, -10}));
  // Batch groups of two elements each (input batch 4, output batch 2).
  ExpectCompiledMatchesInterpreterOnRandomInputs(
      Conv("f32[4,2,5]", "f32[4,2,3]", "f32[2,4,3]",
           "window={size=3}, dim_labels=bf0_oi0->bf0, batch_group_count=2"),
      3);
}

TEST(ConvolutionTest, CompiledConvolutionsMatchTheInterpreter) {
  // NCHW with uneven padding and strides.
  ExpectCompiledMatchesInterpreterOnRandomInputs(
      Conv("f32[2,3,9,8]", "f32[4,3,3,2]", "f32[2,4,5,8]",
           "window={size=3x2 stride=2x1 pad=1_1x0_1}, dim_labels=bf01_oi01->bf01"),
      1);
  // NHWC depthwise, bf16 into f32 (preferred_element_type).
  ExpectCompiledMatchesInterpreterOnRandomInputs(
      Conv("bf16[1,7,7,6]", "bf16[3,3,1,6]", "f32[1,7,7,6]",
           "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, feature_group_count=6"),
      2);
  // Unusual layouts, both dilations, reversal, and negative padding, in f64.
  ExpectCompiledMatchesInterpreterOnRandomInputs(
      Conv("f64[3,2,6,5]", "f64[2,2,3,4]", "f64[5,8,4,2]",
           "window={size=2x2 pad=1_0x-1_1 lhs_dilate=1x2 rhs_dilate=2x1 rhs_reversal=1x0}, "
           "dim_labels=fb01_01io->01fb"),
      4);
  // Groups of 16 output features or more go 4 placements x 16 features at a time: placements
  // at the padded edges, a last block of fewer than 4 placements, feature counts that are not
  // a multiple of 16, feature groups, integers.
  ExpectCompiledMatchesInterpreterOnRandomInputs(
      Conv("f32[2,3,7,5]", "f32[20,3,3,3]", "f32[2,20,4,5]",
           "window={size=3x3 stride=2x1 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01"),
      10);
  ExpectCompiledMatchesInterpreterOnRandomInputs(
      Conv("bf16[1,5,3,2]", "bf16[3,2,2,17]", "bf16[1,5,3,17]",
           "window={size=3x2 pad=1_1x0_1}, dim_labels=b01f_01io->b01f"),
      11);
  ExpectCompiledMatchesInterpreterOnRandomInputs(
      Conv("f32[1,4,6]", "f32[32,2,3]", "f32[1,32,6]",
           "window={size=3 pad=1_1}, dim_labels=bf0_oi0->bf0, feature_group_count=2"),
      12);
  ExpectCompiledMatchesInterpreterOnRandomInputs(
      Conv("s32[1,4,5]", "s32[16,4,2]", "s32[1,16,4]", "window={size=2}, dim_labels=bf0_oi0->bf0"),
      13);
  // f32 by BLAS with the input's features apart (NCHW): each window element's placements copied
  // as runs of adjacent inputs, broken by padding, strides, holes of lhs_dilate and row ends;
  // 512 input features make a window of 4608, so the 400 placements take two chunks.
  ExpectCompiledMatchesInterpreterOnRandomInputs(
      Conv("f32[2,3,9,8]", "f32[5,3,3,3]", "f32[2,5,10,14]",
           "window={size=3x3 pad=2_1x1_0 lhs_dilate=1x2}, dim_labels=bf01_oi01->bf01"),
      16);
  ExpectCompiledMatchesInterpreterOnRandomInputs(
      Conv("f32[1,512,20,20]", "f32[4,512,3,3]", "f32[1,4,20,20]",
           "window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01"),
      17);
  ExpectCompiledMatchesInterpreterOnRandomInputs(
      Conv("f32[1,20,20,512]", "f32[3,3,512,4]", "f32[1,20,20,4]",
           "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f"),
      18);
  // Three spatial dimensions.
  ExpectCompiledMatchesInterpreterOnRandomInputs(
      Conv("f32[1,2,4,5,3]", "f32[3,2,2,2,2]", "f32[1,3,3,4,2]",
           "window={size=2x2x2}, dim_labels=bf012_oi012->bf012"),
      5);
  // Integers wrap: s8 into s32, and u16 products past 2^16.
  ExpectCompiledMatchesInterpreterOnRandomInputs(
      Conv("s8[1,3,6]", "s8[2,3,2]", "s32[1,2,5]", "window={size=2}, dim_labels=bf0_oi0->bf0"), 6);
  ExpectCompiledMatchesInterpreterOnRandomInputs(
      Conv("u16[1,3,6]", "u16[2,3,2]", "u16[1,2,5]", "window={size=2}, dim_labels=bf0_oi0->bf0"),
      7);
  // pred operands count as 0 and 1, into floats and into integers.
  ExpectCompiledMatchesInterpreterOnRandomInputs(
      Conv("pred[1,3,6]", "f32[2,3,2]", "f32[1,2,5]", "window={size=2}, dim_labels=bf0_oi0->bf0"),
      14);
  ExpectCompiledMatchesInterpreterOnRandomInputs(
      Conv("s32[1,3,6]", "pred[20,3,2]", "s32[1,20,5]", "window={size=2}, dim_labels=bf0_oi0->bf0"),
      15);
  // Into pred, every operand as pred: true where some product of two true elements is summed,
  // never cancelled by others (1 * 1 + -1 * 1 is true), a NaN true.
  ExpectValue(
      Conv("s32[1,1,2]", "s32[1,1,2]", "pred[1,1,1]", "window={size=2}, dim_labels=bf0_oi0->bf0"),
      {S32({1, 1, 2}, {1, -1}), S32({1, 1, 2}, {1, 1})}, Pred({1, 1, 1}, {1}));
  ExpectValue(
      Conv("f32[1,1,2]", "pred[1,1,2]", "pred[1,1,1]", "window={size=2}, dim_labels=bf0_oi0->bf0"),
      {F32({1, 1, 2}, {0, NAN}), Pred({1, 1, 2}, {1, 1})}, Pred({1, 1, 1}, {1}));
  ExpectValue(
      Conv("f32[1,1,2]", "pred[1,1,2]", "pred[1,1,1]", "window={size=2}, dim_labels=bf0_oi0->bf0"),
      {F32({1, 1, 2}, {0, 2}), Pred({1, 1, 2}, {1, 0})}, Pred({1, 1, 1}, {0}));
  ExpectCompiledMatchesInterpreterOnRandomInputs(
      Conv("f8e8m0fnu[1,28,1]", "pred[28,1,1]", "pred[1,28,1]",
           "window={size=28 pad=13_14}, dim_labels=b0f_0io->b0f"),
      16);
  ExpectCompiledMatchesInterpreterOnRandomInputs(
      Conv("s8[1,3,6]", "bf16[2,3,2]", "pred[1,2,5]", "window={size=2}, dim_labels=bf0_oi0->bf0"),
      17);
  // No spatial dimensions: a matrix product by another name.
  ExpectValue(Conv("f32[2,3]", "f32[3,1]", "f32[2,1]", "dim_labels=bf_io->bf"),
              {F32({2, 3}, {1, 2, 3, 4, 5, 6}), F32({3, 1}, {1, 10, 100})},
              F32({2, 1}, {321, 654}));
  // An empty batch.
  ExpectCompiledMatchesInterpreterOnRandomInputs(
      Conv("f32[0,2,4]", "f32[3,2,2]", "f32[0,3,3]", "window={size=2}, dim_labels=bf0_oi0->bf0"),
      8);
}

// f32 convolutions of at least compiler::kMinDnnlMacs multiply-adds go to oneDNN where the host
// has it (compiler/artifact/conv_runtime.h): each spec field as oneDNN reads it, in both common
// layouts and unusual ones, and the ones it declines (input dilation) computed by BLAS instead.
TEST(ConvolutionTest, LargeF32ConvolutionsByOneDnnMatchTheInterpreter) {
  ASSERT_TRUE(HasDnnl()) << "libdnnl.so.2 (Debian's libdnnl2) is not on this host";
  // Each case's compiled runs go to oneDNN (by_dnnl) or none does.
  auto check = [](const std::string& text, uint64_t seed, bool by_dnnl) {
    const uint64_t before = DnnlConvolutionCount();
    ExpectCompiledMatchesInterpreterOnRandomInputs(text, seed);
    EXPECT_EQ(DnnlConvolutionCount() > before, by_dnnl) << text;
  };
  // NHWC, padded.
  check(Conv("f32[2,16,16,64]", "f32[3,3,64,64]", "f32[2,16,16,64]",
             "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f"),
        30, true);
  // NCHW, strides, kernel dilation, uneven padding, and a last input row no window reads (an
  // end padding of -1 for oneDNN).
  check(Conv("f32[2,64,34,30]", "f32[64,64,3,3]", "f32[2,64,16,15]",
             "window={size=3x3 stride=2x2 pad=2_0x1_1 rhs_dilate=2x1}, dim_labels=bf01_oi01->bf01"),
        31, true);
  // Feature groups.
  check(Conv("f32[4,16,16,128]", "f32[3,3,32,128]", "f32[4,16,16,128]",
             "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, feature_group_count=4"),
        32, true);
  // Features before the batch, the kernel's input features first, the result's features last
  // but one.
  check(Conv("f32[32,2,24,24]", "f32[32,64,3,3]", "f32[24,24,64,2]",
             "window={size=3x3 pad=1_1x1_1}, dim_labels=fb01_io01->01fb"),
        33, true);
  // One and three spatial dimensions.
  check(Conv("f32[2,512,64]", "f32[3,64,128]", "f32[2,512,128]",
             "window={size=3 pad=1_1}, dim_labels=b0f_0io->b0f"),
        34, true);
  check(Conv("f32[1,10,8,8,32]", "f32[3,3,3,32,32]", "f32[1,10,8,8,32]",
             "window={size=3x3x3 pad=1_1x1_1x1_1}, dim_labels=b012f_012io->b012f"),
        35, true);
  // Declined, computed by BLAS: input dilation (a transposed convolution), reversed windows,
  // and fewer multiply-adds than kMinDnnlMacs.
  check(Conv("f32[1,64,16,16]", "f32[64,64,3,3]", "f32[1,64,31,31]",
             "window={size=3x3 pad=1_1x1_1 lhs_dilate=2x2}, dim_labels=bf01_oi01->bf01"),
        36, false);
  check(Conv("f32[2,16,16,64]", "f32[3,3,64,64]", "f32[2,16,16,64]",
             "window={size=3x3 pad=1_1x1_1 rhs_reversal=1x0}, dim_labels=b01f_01io->b01f"),
        37, false);
  check(Conv("f32[2,16,16,32]", "f32[3,3,32,64]", "f32[2,16,16,64]",
             "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f"),
        38, false);
}

TEST(ConvolutionTest, MalformedConvolutionsAreRefusedWithTheirLine) {
  const std::string text =
      Conv("f32[1,2,5]", "f32[4,2,3]", "f32[1,4,3]", "window={size=3}, dim_labels=bf0_oi0->bf0");
  ExpectCompiledMatchesInterpreterOnRandomInputs(text, 9);
  ExpectMalformed(Replaced(text, "bf0_oi0->bf0", "bf0_oi0->bb0"), "ROOT c",
                  "'bb0' is not a permutation of b, f and the spatial dimensions");
  ExpectMalformed(Replaced(text, "bf0_oi0->bf0", "bf0_oi01->bf0"), "ROOT c",
                  "'oi01' names 4 dimensions, the operands have 3");
  ExpectMalformed(Replaced(text, ", dim_labels=bf0_oi0->bf0", ""), "ROOT c", "dim_labels: absent");
  ExpectMalformed(Replaced(text, "size=3", "size=2"), "ROOT c",
                  "window size 2 differs from the kernel's spatial dimension 0");
  ExpectMalformed(Replaced(text, "f32[1,4,3] conv", "f32[1,4,4] conv"), "ROOT c",
                  "is not the convolution's f32[1,4,3]");
  ExpectMalformed(Replaced(text, "->bf0", "->bf0, feature_group_count=3"), "ROOT c",
                  "not feature_group_count (3) times the kernel's input features (2)");
  ExpectMalformed(Replaced(text, "->bf0", "->bf0, feature_group_count=2, batch_group_count=2"),
                  "ROOT c", "both above 1");
  // Integers with floats: well-formed, but not computed.
  auto m = hlo::ParseModule(Replaced(text, "k = f32[4,2,3]", "k = s32[4,2,3]"), "g.hlo");
  ASSERT_THAT(m, IsOk());
  EXPECT_THAT(LowerToCpp(*m), StatusIs(StatusCode::kFailedPrecondition,
                                       ::testing::HasSubstr("a convolution of f32 and s32")));
}

}  // namespace
}  // namespace hlocache::compiler
