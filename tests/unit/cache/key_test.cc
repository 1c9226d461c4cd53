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

// An artifact's graph is keyed as it decompresses, never whole: the key must be ComposeKey's to
// the bit, wherever the pieces are cut.
TEST(KeyTest, AStreamedModuleGetsComposeKeysKeyWhereverItIsCut) {
  std::string module;
  for (int i = 0; module.size() < 300000; ++i) module += "i" + std::to_string(i * 7919) + " ";
  KeyInput input{module, "cuda-sm_90", "nvcc-12/hlocache-codegen-4/O3", {{"b", "2"}, {"a", "1"}}};
  const Key whole = ComposeKey(input);
  uint64_t x = 88172645463325252ull;
  for (int round = 0; round < 20; ++round) {
    StreamedKey streamed(module.size());
    size_t at = 0;
    while (at < module.size()) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      const size_t take = std::min<size_t>(module.size() - at, x % (round < 10 ? 64 : 70000));
      streamed.Append(std::string_view(module).substr(at, take));
      at += take;
    }
    auto key = streamed.Finish(input.target, input.compiler_id, input.options);
    ASSERT_THAT(key, IsOk());
    EXPECT_EQ(key->text, whole.text);
    EXPECT_EQ(key->graph, whole.graph);
    EXPECT_EQ(key->target, whole.target);
    EXPECT_EQ(key->compiler_id, whole.compiler_id);
    EXPECT_EQ(key->options, whole.options);
  }
  // The empty module too.
  StreamedKey empty(0);
  EXPECT_EQ(empty.Finish("t", "c")->text, ComposeKey(KeyInput{"", "t", "c", {}}).text);
}

TEST(KeyTest, AStreamedModuleOfAnotherSizeThanSaidHasNoKey) {
  StreamedKey shorter(10);
  shorter.Append("123456789");
  EXPECT_THAT(shorter.Finish("t", "c"), StatusIs(StatusCode::kInvalidArgument));
  StreamedKey longer(3);
  longer.Append("1234");
  EXPECT_THAT(longer.Finish("t", "c"), StatusIs(StatusCode::kInvalidArgument));
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
