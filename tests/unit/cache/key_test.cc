#include "cache/key.h"

#include <gtest/gtest.h>

#include "tests/unit/status_matchers.h"

namespace hlocache::cache {
namespace {

KeyInput Input() { return KeyInput{"graph", "cpu-x86-64-v3", "gcc-12/hlocache-codegen-1/O2", {}}; }

TEST(KeyTest, WellFormedAndDeterministic) {
  Key a = ComposeKey(Input());
  Key b = ComposeKey(Input());
  EXPECT_EQ(a.text, b.text);
  EXPECT_TRUE(IsWellFormedKey(a.text)) << a.text;
  EXPECT_EQ(a.text.size(), kKeyLength);
  EXPECT_EQ(a.graph, HashBytes("graph"));
}

TEST(KeyTest, EveryPartChangesTheKeyAndOnlyItsOwnHash) {
  Key base = ComposeKey(Input());
  KeyInput t = Input();
  t.target = "cpu-x86-64-v4";
  Key kt = ComposeKey(t);
  EXPECT_NE(kt.text, base.text);
  EXPECT_NE(kt.target, base.target);
  EXPECT_EQ(kt.graph, base.graph);
  EXPECT_EQ(kt.compiler_id, base.compiler_id);

  KeyInput c = Input();
  c.compiler_id = "gcc-13/hlocache-codegen-1/O2";
  EXPECT_NE(ComposeKey(c).text, base.text);

  KeyInput o = Input();
  o.options = {{"fast-math", "1"}};
  Key ko = ComposeKey(o);
  EXPECT_NE(ko.text, base.text);
  EXPECT_NE(ko.options, base.options);
  EXPECT_EQ(ko.graph, base.graph);
}

TEST(KeyTest, OptionsAreSortedAndPartsLengthPrefixed) {
  KeyInput a = Input(), b = Input();
  a.options = {{"x", "1"}, {"y", "2"}};
  b.options = {{"y", "2"}, {"x", "1"}};
  EXPECT_EQ(ComposeKey(a).text, ComposeKey(b).text);
  // Moving bytes between adjacent parts must not collide.
  KeyInput c = Input(), d = Input();
  c.canonical_module = "ab";
  c.target = "c";
  d.canonical_module = "a";
  d.target = "bc";
  EXPECT_NE(ComposeKey(c).text, ComposeKey(d).text);
  KeyInput e = Input(), f = Input();
  e.options = {{"a", "b=c"}};
  f.options = {{"a=b", "c"}};
  EXPECT_NE(ComposeKey(e).text, ComposeKey(f).text);
}

TEST(KeyTest, KeyValidationRejectsAnythingButTheExactForm) {
  EXPECT_TRUE(IsWellFormedKey("v1-0123456789abcdef0123456789abcdef"));
  EXPECT_FALSE(IsWellFormedKey("v1-0123456789ABCDEF0123456789abcdef"));
  EXPECT_FALSE(IsWellFormedKey("v1-0123456789abcdef0123456789abcde"));
  EXPECT_FALSE(IsWellFormedKey("v2-0123456789abcdef0123456789abcdef"));
  EXPECT_FALSE(IsWellFormedKey("../../etc/passwd"));
  EXPECT_FALSE(IsWellFormedKey(""));
}

TEST(KeyTest, NamesAreValidated) {
  EXPECT_THAT(ValidateTarget("cuda-sm_90"), IsOk());
  EXPECT_THAT(ValidateTarget(""),
              StatusIs(StatusCode::kInvalidArgument, ::testing::HasSubstr("target")));
  EXPECT_THAT(ValidateTarget("cpu x86"), StatusIs(StatusCode::kInvalidArgument, ::testing::_));
  EXPECT_THAT(ValidateOption("k", "v\nw"), StatusIs(StatusCode::kInvalidArgument, ::testing::_));
}

}  // namespace
}  // namespace hlocache::cache
