#include "compiler/hlo/name_table.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hlocache::hlo {
namespace {

TEST(NameTableTest, EveryByteOfANameReachesItsHash) {
  // Names of every length a module spells (and past two words), each changed in one byte at a
  // time: a hash that skipped a byte (the short-name loads, the tail word) would give two of
  // them one hash, and a computation of such names one long probe chain.
  for (size_t length = 1; length <= 24; ++length) {
    const std::string base(length, 'a');
    const uint64_t base_hash = NameTable::Hash(base);
    for (size_t at = 0; at < length; ++at) {
      std::string changed = base;
      changed[at] = 'b';
      EXPECT_NE(NameTable::Hash(changed), base_hash) << "length " << length << ", byte " << at;
    }
    EXPECT_EQ(NameTable::Hash(std::string(base)), base_hash);
  }
  // The length is hashed too: "a" and "a\0" load the same bytes.
  EXPECT_NE(NameTable::Hash(std::string_view("a", 1)), NameTable::Hash(std::string_view("a\0", 2)));
}

TEST(NameTableTest, NamesCompareEqualOnlyWhenEveryByteIs) {
  // Two names whose hashes collide are told apart by their bytes: each length the inline
  // comparison takes in words (up to 32), and the library call's past it, differing at each
  // byte.
  for (size_t length = 0; length <= 40; ++length) {
    const std::string a(length, 'x');
    EXPECT_TRUE(NameTable::SameBytes(a.data(), std::string(a).data(), length));
    for (size_t at = 0; at < length; ++at) {
      std::string b = a;
      b[at] = 'y';
      EXPECT_FALSE(NameTable::SameBytes(a.data(), b.data(), length))
          << "length " << length << ", byte " << at;
    }
  }
}

TEST(NameTableTest, FindsEachNameByItsTextAndRefusesDuplicates) {
  // Names as one source holds them, many sharing prefixes and suffixes, enough to regrow.
  std::string source;
  std::vector<std::pair<size_t, size_t>> spans;
  for (int i = 0; i < 3000; ++i) {
    const std::string name = (i % 3 == 0   ? "add."
                              : i % 3 == 1 ? "fusion.clone."
                                           : "p") +
                             std::to_string(i);
    spans.emplace_back(source.size(), name.size());
    source += name + " ";
  }
  // The same names again, elsewhere in the source: lookups by text, not by position.
  const size_t second = source.size();
  source += source;
  const std::string_view text = source;
  NameTable table(text);
  for (size_t i = 0; i < spans.size(); ++i) {
    ASSERT_TRUE(table.Insert(text.substr(spans[i].first, spans[i].second), static_cast<int>(i)));
  }
  for (size_t i = 0; i < spans.size(); ++i) {
    const std::string_view again = text.substr(second + spans[i].first, spans[i].second);
    EXPECT_EQ(table.Find(again), static_cast<int>(i)) << again;
    EXPECT_FALSE(table.Insert(again, -5)) << again;
    EXPECT_EQ(table.Find(again), static_cast<int>(i)) << again;
  }
  EXPECT_EQ(table.Find(text.substr(0, 3)), -1);  // "add": a prefix of names, not a name.
  table.Clear();
  EXPECT_EQ(table.Find(text.substr(spans[7].first, spans[7].second)), -1);
  EXPECT_TRUE(table.Insert(text.substr(spans[7].first, spans[7].second), 1));
}

}  // namespace
}  // namespace hlocache::hlo
