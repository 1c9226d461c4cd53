#include "compiler/hlo/lexer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/unit/status_matchers.h"

namespace hlocache::hlo {
namespace {

using ::testing::HasSubstr;

std::vector<std::pair<TokenKind, std::string>> Tokens(std::string_view src) {
  auto toks = Lex(src, "t.hlo");
  EXPECT_THAT(toks, IsOk());
  std::vector<std::pair<TokenKind, std::string>> out;
  if (!toks) return out;
  for (const Token& t : *toks) {
    if (t.kind != TokenKind::kEnd) {
      out.emplace_back(t.kind, std::string(src.substr(t.offset, t.length)));
    }
  }
  return out;
}

TEST(LexerTest, NamesKeepDashesAndDotsButStopBeforeArrow) {
  auto t = Tokens("%get-tuple-element.5 b01f_01io->b01f");
  ASSERT_EQ(t.size(), 4u);
  EXPECT_EQ(t[0], std::make_pair(TokenKind::kIdent, std::string("%get-tuple-element.5")));
  EXPECT_EQ(t[1].second, "b01f_01io");
  EXPECT_EQ(t[2].first, TokenKind::kArrow);
  EXPECT_EQ(t[3].second, "b01f");
}

TEST(LexerTest, NamesEndAtTheFirstByteOutsideThemWhereverItFalls) {
  // Names are scanned sixteen bytes at a time: every name character, and the bytes just outside
  // each of their ranges, at every position of a name longer than two such blocks, and names
  // that end at the very end of the text.
  const std::string name_chars = "aAzZ09_.$mQ5";
  for (char stop : {'@', '[', '`', '{', '/', ':', ' ', ',', '(', '=', '^', '\x7f'}) {
    for (size_t length = 1; length <= 40; ++length) {
      std::string name;
      for (size_t k = 0; k < length; ++k) name += name_chars[k % name_chars.size()];
      const std::string src = "%" + name + stop + "z";
      auto toks = Lex(src, "t.hlo");
      if (stop == '`' || stop == '\x7f') {
        // Not HLO text: refused, at the byte after the name.
        ASSERT_FALSE(toks.has_value());
        EXPECT_THAT(toks.error().message(), HasSubstr("1:" + std::to_string(length + 2)));
        continue;
      }
      ASSERT_THAT(toks, IsOk()) << src;
      ASSERT_GE(toks->size(), 2u);
      EXPECT_EQ((*toks)[0].kind, TokenKind::kIdent) << src;
      EXPECT_EQ((*toks)[0].length, length + 1) << src;
    }
  }
  for (size_t length = 1; length <= 40; ++length) {
    const std::string name(length, 'q');
    auto at_end = Tokens(name);
    ASSERT_EQ(at_end.size(), 1u);
    EXPECT_EQ(at_end[0].second, name);
    // A dash joins what follows it into the name, past a block's end too, unless `->` or `--`.
    auto dashed = Tokens(name + "-" + name + "->x");
    ASSERT_EQ(dashed.size(), 3u);
    EXPECT_EQ(dashed[0].second, name + "-" + name);
    EXPECT_EQ(dashed[1].first, TokenKind::kArrow);
  }
}

TEST(LexerTest, CountsTheDefinitionsDirectlyInsideEachTopLevelBrace) {
  // A header attribute's braces, a body whose instructions carry attributes (after commas) and
  // nested `k=v` (deeper), a parameter list before a body, and brackets of every kind.
  const std::string src =
      "HloModule m, entry_computation_layout={(f32[2]{0})->f32[2]{0}}, frontend_attributes={a=\"1\"}\n"
      "%add (x: f32[], y: f32[]) -> f32[] {\n"
      "  %x = f32[] parameter(0)\n"
      "  %y = f32[] parameter(1)\n"
      "  ROOT %s = f32[] add(%x, %y), metadata={op_name=\"a\" source_line=3}\n"
      "}\n"
      "ENTRY %main {\n"
      "  %p = f32[2]{0} parameter(0), sharding={replicated}\n"
      "  ROOT %r = f32[2]{0} map(%p), dimensions={0}, to_apply=%add\n"
      "}\n";
  std::vector<TopLevelGroup> groups;
  auto toks = Lex(src, "t.hlo", &groups);
  ASSERT_THAT(toks, IsOk());
  ASSERT_EQ(groups.size(), 4u);
  // Each group's `open` is its `{` token, in token order.
  for (const TopLevelGroup& g : groups) {
    ASSERT_LT(g.open, toks->size());
    EXPECT_EQ((*toks)[g.open].kind, TokenKind::kLBrace);
  }
  EXPECT_EQ(groups[0].definitions, 0u);  // entry_computation_layout's value.
  EXPECT_EQ(groups[1].definitions, 1u);  // {a="1"}: what a body's count would be, unused.
  EXPECT_EQ(groups[2].definitions, 3u);  // %add's body.
  EXPECT_EQ(groups[3].definitions, 2u);  // %main's body.
  // Without the out-parameter, the same tokens.
  auto plain = Lex(src, "t.hlo");
  ASSERT_THAT(plain, IsOk());
  EXPECT_EQ(plain->size(), toks->size());
}

TEST(LexerTest, NumbersAndDigitPatterns) {
  auto t = Tokens("1 -2 1.5 1e-3 -inf nan 3x3 1_1x0_0 -1_-1 0x1F 01bf");
  std::vector<TokenKind> kinds;
  for (auto& [k, s] : t) kinds.push_back(k);
  EXPECT_EQ(kinds, (std::vector<TokenKind>{TokenKind::kInt, TokenKind::kInt, TokenKind::kFloat,
                                           TokenKind::kFloat, TokenKind::kFloat, TokenKind::kIdent,
                                           TokenKind::kWord, TokenKind::kWord, TokenKind::kWord,
                                           TokenKind::kInt, TokenKind::kWord}));
}

TEST(LexerTest, CommentsAndWhitespaceVanish) {
  auto t = Tokens("a /* index=5 */ b // to the end\n c");
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[2].second, "c");
}

TEST(LexerTest, StringsKeepEscapes) {
  auto t = Tokens(R"(x="a\"b" y)");
  ASSERT_EQ(t.size(), 4u);
  EXPECT_EQ(t[2], std::make_pair(TokenKind::kString, std::string(R"("a\"b")")));
  // An escaped backslash before the closing quote, escapes in a row, and quotes escaped after
  // other escapes: each string ends at its first unescaped quote.
  t = Tokens(R"("a\\" "\\\"\n" "\"\"" z)");
  ASSERT_EQ(t.size(), 4u);
  EXPECT_EQ(t[0].second, R"("a\\")");
  EXPECT_EQ(t[1].second, R"("\\\"\n")");
  EXPECT_EQ(t[2].second, R"("\"\"")");
  EXPECT_EQ(t[3].second, "z");
}

TEST(LexerTest, BadInputNamesLineAndColumn) {
  EXPECT_THAT(
      Lex("a\n  \x01", "f.hlo"),
      StatusIs(StatusCode::kInvalidArgument, HasSubstr("f.hlo:2:3: error: unexpected byte 0x01")));
  EXPECT_THAT(
      Lex("a \"open", "f.hlo"),
      StatusIs(StatusCode::kInvalidArgument, HasSubstr("f.hlo:1:3: error: unterminated string")));
  // The only quote escaped, and a backslash as the last byte.
  for (const char* open : {"a \"x\\\"", "a \"x\\"}) {
    EXPECT_THAT(Lex(open, "f.hlo"), StatusIs(StatusCode::kInvalidArgument,
                                             HasSubstr("f.hlo:1:3: error: unterminated string")))
        << open;
  }
  EXPECT_THAT(Lex("/* never closed", "f.hlo"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("1:1: error: unterminated /*")));
}

TEST(LexerTest, TokensLongerThan16MiBAreRefusedWithTheirPlace) {
  // A token's length is kept in 24 bits; a longer one is an error, never a truncated token.
  std::string src = "a\n \"" + std::string(kMaxTokenBytes, 'x') + "\"";
  EXPECT_THAT(Lex(src, "f.hlo"), StatusIs(StatusCode::kInvalidArgument,
                                          HasSubstr("f.hlo:2:2: error: token longer than 16 MiB")));
  src.erase(src.size() - 3, 2);  // Two bytes shorter: the longest token accepted.
  auto toks = Lex(src, "f.hlo");
  ASSERT_THAT(toks, IsOk());
  ASSERT_EQ(toks->size(), 3u);
  EXPECT_EQ((*toks)[1].length, kMaxTokenBytes);
  EXPECT_EQ((*toks)[1].offset, 3u);
}

}  // namespace
}  // namespace hlocache::hlo
