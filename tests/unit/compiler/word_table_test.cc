#include "compiler/hlo/word_table.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "compiler/hlo/attributes.h"
#include "compiler/hlo/opcode.h"
#include "compiler/hlo/shape.h"

namespace hlocache::hlo {
namespace {

TEST(WordTableTest, FindsEveryWordAndNothingElse) {
  // Shared prefixes and suffixes, short and long words, and a word of eight bytes exactly (where
  // the hash switches from a byte loop to word loads).
  const std::vector<std::string_view> words = {"all-reduce",
                                               "all-reduce-start",
                                               "all-reduce-done",
                                               "f8e4m3fn",
                                               "f8e4m3fnuz",
                                               "s4",
                                               "s8",
                                               "u8",
                                               "add",
                                               "a",
                                               "",
                                               "abcdefgh",
                                               "abcdefghi"};
  WordTable table(words);
  for (size_t i = 0; i < words.size(); ++i)
    EXPECT_EQ(table.Find(words[i]), static_cast<int32_t>(i));
  for (std::string_view miss : {"all-reduce-", "f8e4m3f", "s16", "ad", "addd", "abcdefgH", "b",
                                "abcdefghij", "ALL-REDUCE"}) {
    EXPECT_EQ(table.Find(miss), -1) << miss;
  }
}

TEST(WordTableTest, LookupsThatUseItAgreeWithTheNames) {
  // Every opcode and element type round-trips through its name; near-misses do not resolve.
  for (int i = 0; i < kOpcodeCount; ++i) {
    const auto op = static_cast<Opcode>(i);
    EXPECT_EQ(OpcodeFromName(OpcodeName(op)), op) << OpcodeName(op);
    EXPECT_FALSE(OpcodeFromName(std::string(OpcodeName(op)) + "x").has_value());
  }
  for (int i = 0; i < static_cast<int>(PrimitiveType::kTuple); ++i) {
    const auto t = static_cast<PrimitiveType>(i);
    EXPECT_EQ(PrimitiveTypeFromName(PrimitiveTypeName(t)), t) << PrimitiveTypeName(t);
  }
  EXPECT_FALSE(PrimitiveTypeFromName("f31").has_value());
  EXPECT_TRUE(IsCalleeAttribute("to_apply"));
  EXPECT_FALSE(IsCalleeAttribute("to_appl"));
  EXPECT_TRUE(IsKnownInstructionAttribute("dimensions"));
  EXPECT_FALSE(IsKnownInstructionAttribute("dimension"));
  EXPECT_TRUE(IsKnownModuleAttribute("replica_count"));
}

}  // namespace
}  // namespace hlocache::hlo
