// How generated code is cut: names a text uses, units packed from pieces, and computations cut
// into segments that own no buffer themselves.
#include "compiler/codegen/cpu_units.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hlocache::compiler {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = 0; (at = text.find(what, at)) != std::string::npos; at += what.size()) ++n;
  return n;
}

TEST(CpuUnitsTest, NamesUsedFindsWholeIdentifiersInOrder) {
  const std::map<std::string, std::string> names = {
      {"v1", "float*"}, {"v12", "float*"}, {"p0", "const float*"}, {"x", "int*"}};
  EXPECT_THAT(NamesUsed("v12[i] = p0[i] + v1[0] * 0x1p-3 + v12[1]; xv1 = v1x;", names),
              ElementsAre("v12", "p0", "v1"));
  EXPECT_THAT(NamesUsed("", names), ElementsAre());
}

TEST(CpuUnitsTest, IdentifiersAreFoundAndRenamedWhole) {
  const std::string text = "v12[i] = hc_add<float>(p0[i], v1[0] * 0x1p-3) + v12[1]; xv1 = v1x;";
  EXPECT_THAT(Identifiers(text),
              ElementsAre("v12", "i", "hc_add", "float", "p0", "v1", "xv1", "v1x"));
  EXPECT_EQ(RenameNames(text, {{"v12", "a0"}, {"v1", "a1"}, {"p", "q"}}),
            "a0[i] = hc_add<float>(p0[i], a1[0] * 0x1p-3) + a0[1]; xv1 = v1x;");
}

TEST(CpuUnitsTest, SubscriptedReadsOfANameAreReplacedOnlyWhenEveryReadIsSo) {
  // Longer names containing it, and numbers ending in its letters, are other names.
  EXPECT_EQ(ReplaceSubscripted("hc_exp(x[i] - v3[r]) / v3[r] + v31[r] + 0x1v3 + av3[r]", "v3",
                               "[r]", "hc_row"),
            "hc_exp(x[i] - hc_row) / hc_row + v31[r] + 0x1v3 + av3[r]");
  // A read at another subscript, a use without one, or no use at all: nothing to replace.
  EXPECT_EQ(ReplaceSubscripted("v3[r] + v3[i]", "v3", "[r]", "hc_row"), std::nullopt);
  EXPECT_EQ(ReplaceSubscripted("v3[r] + *v3", "v3", "[r]", "hc_row"), std::nullopt);
  EXPECT_EQ(ReplaceSubscripted("v31[r]", "v3", "[r]", "hc_row"), std::nullopt);
}

// What code outside a function may assume of the function's names when they are passed to it:
// buffers and parameters unaliased, pointer variables and whatever they may hold not.
TEST(CpuUnitsTest, NamedPointersKeepTheFunctionsAliasing) {
  SegmentedFunction f("hc_comp0", "int hc_comp0(const float* p0, float* r0)",
                      {{"p0", "const float*"}, {"r0", "float*"}}, 1 << 20);
  f.Declare({"v1", "float", 8, 4, false});
  f.Declare({"v2", "float", 8, 4, false});
  f.DeclarePointer({"state", "float", {"v2", "p0"}});
  auto named = [&](const std::string& name) {
    const auto p = f.Pointer(name);
    return p ? p->type + (p->unaliased ? " unaliased" : "") : std::string("none");
  };
  EXPECT_EQ(named("v1"), "float* unaliased");
  EXPECT_EQ(named("r0"), "float* unaliased");
  EXPECT_EQ(named("v2"), "float*");
  EXPECT_EQ(named("p0"), "const float*");
  EXPECT_EQ(named("state"), "const float*");
  EXPECT_EQ(named("v3"), "none");
}

TEST(CpuUnitsTest, PiecesArePackedIntoBalancedUnitsThatAllStartWithTheSharedText) {
  std::vector<CodePiece> pieces;
  for (int i = 0; i < 10; ++i) {
    pieces.push_back(
        {"int f" + std::to_string(i) + "();\n",
         "int f" + std::to_string(i) + "() { return " + std::string(100, '1') + "; }\n"});
  }
  CpuLoweringOptions one;
  const auto single = PackUnits("// shared\n", pieces, one);
  ASSERT_EQ(single.size(), 1u);
  EXPECT_EQ(Count(single[0], "int f"), 10u);

  CpuLoweringOptions small;
  small.unit_bytes = 300;  // 10 definitions of 122 bytes: five units of two.
  const auto units = PackUnits("// shared\n", pieces, small);
  ASSERT_EQ(units.size(), 5u);
  size_t total = 0;
  for (const std::string& u : units) {
    EXPECT_EQ(u.rfind("// shared\n", 0), 0u);
    EXPECT_GE(Count(u, "{ return"), 2u) << "an unbalanced unit";
    total += Count(u, "{ return");
  }
  EXPECT_EQ(total, 10u) << "every piece lands in exactly one unit";
  EXPECT_EQ(PackUnits("// shared\n", pieces, small), units) << "packing is deterministic";

  CpuLoweringOptions capped = small;
  capped.unit_bytes = 0;
  capped.max_units = 2;
  EXPECT_EQ(PackUnits("", pieces, capped).size(), 2u);
}

TEST(CpuUnitsTest, AShortFunctionStaysOnePlainFunction) {
  SegmentedFunction f("hc_comp1", "int hc_comp1(const float* p0, float* r0)",
                      {{"p0", "const float*"}, {"r0", "float*"}}, 1 << 20);
  f.Declare({"v1", "float", 4, 4, false});
  f.body() += "  for (int64_t i = 0; i < 4; ++i) v1[i] = p0[i];\n";
  f.EndInstruction();
  const auto pieces = f.Finish("  std::memcpy(r0, v1, 16);\n");
  ASSERT_EQ(pieces.size(), 1u);
  EXPECT_THAT(pieces[0].definition, HasSubstr("alignas(64) float v1[4];"));
  EXPECT_THAT(pieces[0].definition, Not(HasSubstr("_s0")));
}

TEST(CpuUnitsTest, ALongFunctionIsCutIntoSegmentsReadingTheirPointersFromTheFrame) {
  SegmentedFunction f("hc_comp2", "int hc_comp2(const float* p0, float* r0)",
                      {{"p0", "const float*"}, {"r0", "float*"}}, 0);
  f.Declare({"v1", "float", 1000, 4, true});
  f.body() += "  for (int64_t i = 0; i < 1000; ++i) v1[i] = p0[i];\n";
  f.EndInstruction();
  f.Declare({"v2", "float", 1000, 4, true});
  f.Declare({"v3", "float", 2, 4, false});
  f.body() += "  for (int64_t i = 0; i < 1000; ++i) v2[i] = v1[i] * 2;\n  v3[0] = 0;\n";
  f.EndInstruction();
  f.body() += "  v3[1] = v3[0];\n";
  f.EndInstruction();
  const auto pieces = f.Finish("  std::memcpy(r0, v2, 4000);\n");
  ASSERT_EQ(pieces.size(), 4u);  // Three segments, then the owner.
  EXPECT_THAT(pieces[0].declaration, HasSubstr("hc_comp2_s0(void** f)"));
  // Each block takes just the pointers it names.
  EXPECT_THAT(pieces[1].definition,
              HasSubstr("float* const __restrict v2 = static_cast<float*>(f[3]);"));
  EXPECT_THAT(pieces[2].definition, Not(HasSubstr("v2")));
  const std::string& owner = pieces[3].definition;
  // v1 is freed once the last segment naming it has run; v2 is kept for the epilogue.
  EXPECT_LT(owner.find("hc_comp2_s1(f)"), owner.find("heap.release(0)"));
  EXPECT_THAT(owner, Not(HasSubstr("heap.release(1)")));
  EXPECT_LT(owner.find("heap.alloc(1,"), owner.find("hc_comp2_s1(f)"));
  EXPECT_GT(owner.find("heap.alloc(1,"), owner.find("hc_comp2_s0(f)"));
  EXPECT_THAT(owner, HasSubstr("std::memcpy(r0, v2, 4000);"));
}

TEST(CpuUnitsTest, APointerVariableCarriesAcrossSegmentsAndKeepsItsTargetsAllocated) {
  SegmentedFunction f("hc_comp3", "int hc_comp3(const float* p0, float* r0)",
                      {{"p0", "const float*"}, {"r0", "float*"}}, 0);
  f.Declare({"w_a", "float", 1000, 4, true});
  f.DeclarePointer({"w", "float", {"p0", "w_a"}});
  f.body() += "  w = p0;\n  std::memcpy(w_a, w, 4000);\n  w = w_a;\n";
  f.EndInstruction();
  f.Declare({"v2", "float", 1000, 4, true});
  f.body() += "  for (int64_t i = 0; i < 1000; ++i) v2[i] = w[i] * 2;\n";
  f.EndInstruction();
  f.body() += "  v2[0] = 1;\n";
  f.EndInstruction();
  const auto pieces = f.Finish("  std::memcpy(r0, v2, 4000);\n");
  ASSERT_EQ(pieces.size(), 4u);
  // Assigned in one block and written back to the frame; read from it in the next.
  EXPECT_THAT(pieces[0].definition, HasSubstr("const float* w = static_cast<const float*>("));
  EXPECT_THAT(pieces[0].definition,
              HasSubstr("] = const_cast<void*>(static_cast<const void*>(w));"));
  EXPECT_THAT(pieces[1].definition, HasSubstr("const float* w = static_cast<const float*>("));
  // What it may point to is never __restrict.
  EXPECT_THAT(pieces[0].definition, HasSubstr("float* const w_a = "));
  EXPECT_THAT(pieces[0].definition, HasSubstr("const float* const p0 = "));
  // w_a is named only in segment 0 but w, which may point to it, in segment 1: freed after that.
  const std::string& owner = pieces[3].definition;
  EXPECT_LT(owner.find("hc_comp3_s1(f)"), owner.find("heap.release(0)"));
  EXPECT_GT(owner.find("hc_comp3_s2(f)"), owner.find("heap.release(0)"));
}

TEST(CpuUnitsTest, AShortFunctionDeclaresItsPointerVariables) {
  SegmentedFunction f("hc_comp4", "int hc_comp4(const float* p0, float* r0)",
                      {{"p0", "const float*"}, {"r0", "float*"}}, 1 << 20);
  f.DeclarePointer({"w", "float", {"p0"}});
  f.body() += "  w = p0;\n";
  f.EndInstruction();
  const auto pieces = f.Finish("  std::memcpy(r0, w, 4);\n");
  ASSERT_EQ(pieces.size(), 1u);
  EXPECT_THAT(pieces[0].definition, HasSubstr("const float* w = nullptr;"));
}

}  // namespace
}  // namespace hlocache::compiler
