#include "compiler/hlo/lexer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/unit/compiler/corpus_files.h"
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

// Token's constructor writes the kind and length as one word, in the layout the ABI gives the
// bit-fields: each field must read back what it was made with, at the edges of its range.
TEST(TokenTest, ReadsBackTheKindLengthAndOffsetItWasMadeWith) {
  for (TokenKind kind :
       {TokenKind::kEnd, TokenKind::kIdent, TokenKind::kComma, TokenKind::kOther}) {
    for (uint32_t length : {0u, 1u, 255u, 256u, 65536u, kMaxTokenBytes}) {
      for (uint32_t offset : {0u, 1u, 0x7fffffffu, 0xffffffffu}) {
        const Token t(kind, length, offset);
        EXPECT_EQ(t.kind, kind);
        EXPECT_EQ(t.length, length);
        EXPECT_EQ(t.offset, offset);
      }
    }
  }
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
      "HloModule m, entry_computation_layout={(f32[2]{0})->f32[2]{0}}, "
      "frontend_attributes={a=\"1\"}\n"
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

// ---- two threads: the same tokens, groups and errors as one ----

struct Lexed {
  std::string error;  // Empty when it lexed.
  std::vector<Token> tokens;
  std::vector<TopLevelGroup> groups;
};

// What `lex(&groups)` gives: its tokens and groups, or its error's message.
template <typename LexFn>
Lexed LexedBy(LexFn lex) {
  Lexed out;
  auto tokens = lex(&out.groups);
  if (tokens) {
    out.tokens = std::move(*tokens);
  } else {
    out.error = tokens.error().message();
  }
  return out;
}

Lexed LexWith(std::string_view source, size_t two_thread_bytes) {
  return LexedBy([&](std::vector<TopLevelGroup>* groups) {
    return Lex(source, "t.hlo", groups, two_thread_bytes);
  });
}

// Every token lexed the general way (LexEachTokenAlone), on one thread.
Lexed LexAlone(std::string_view source) {
  return LexedBy([&](std::vector<TopLevelGroup>* groups) {
    return LexEachTokenAlone(source, "t.hlo", groups);
  });
}

void ExpectLexedAlike(const Lexed& one, const Lexed& two, const std::string& what) {
  EXPECT_EQ(two.error, one.error) << what;
  ASSERT_EQ(two.tokens.size(), one.tokens.size()) << what;
  for (size_t i = 0; i < one.tokens.size(); ++i) {
    const Token& a = one.tokens[i];
    const Token& b = two.tokens[i];
    ASSERT_TRUE(a.kind == b.kind && a.offset == b.offset && a.length == b.length)
        << what << ": token " << i;
  }
  // After an error, the groups are what was counted before it, which two halves count apart:
  // nothing reads them.
  if (!one.error.empty()) return;
  ASSERT_EQ(two.groups.size(), one.groups.size()) << what;
  for (size_t g = 0; g < one.groups.size(); ++g) {
    EXPECT_EQ(two.groups[g].open, one.groups[g].open) << what << ": group " << g;
    EXPECT_EQ(two.groups[g].definitions, one.groups[g].definitions) << what << ": group " << g;
  }
}

// Lexed on one thread, then in two halves at once.
void ExpectTwoThreadsLexAsOne(std::string_view source, const std::string& what) {
  ExpectLexedAlike(LexWith(source, SIZE_MAX), LexWith(source, 0), what);
}

// Lexed as Lex does (the common tokens in a loop of their own), then each token the general
// way.
void ExpectFastLoopLexesAsTheGeneralWay(std::string_view source, const std::string& what) {
  ExpectLexedAlike(LexAlone(source), LexWith(source, SIZE_MAX), what);
}

// Calls `check(text, file)` on each corpus file's text; how many there were.
template <typename Check>
size_t ForEachCorpusText(Check check) {
  size_t files = 0;
  for (const std::string& file : test_support::CorpusFiles({"hlo", "torch_xla", "invalid"})) {
    std::ifstream in(file, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    check(text.str(), file);
    ++files;
  }
  return files;
}

TEST(LexerTest, EveryCorpusModuleLexesAlikeWithAndWithoutTheFastLoop) {
  EXPECT_GE(ForEachCorpusText(ExpectFastLoopLexesAsTheGeneralWay), 400u);
}

// Where the fast loop hands over to the general way: numbers it does not take, names it must
// refuse, groups opening, definitions among the first tokens, the end of the text right after a
// token, and the end of its room for tokens (4096 at a time).
TEST(LexerTest, TheFastLoopHandsOverWhereItMust) {
  const std::vector<std::string> texts = {
      "1 12 0x1f 1.5 2e3 3x3 1_1x0_0 0_-1 01bf 7. 1...2 -1 .5 -inf nan 9",
      "a=1",
      "x = 1",
      "= =",
      "a =",
      "%a-b- %c-->d %e--f %",
      "%1",
      "% a",
      "{a=b}",
      "a{b=c}",
      "{ x = 1, y = 2 } { z = 3 }",
      "{ { a = b } c = d, e = f }",
      "} a = b {",
      "a // c\n= b /* x */ {c=d}",
      "a\"s\" b",
      "[1,2]{1,0:T(8,128)}",
      "a<=b->c",
      "f32[]\x01",
      "ENTRY e {\n  p = f32[] parameter(0)\n  ROOT n = f32[] negate(p)\n}",
      std::string("x = ") + std::string(70, 'a') + "-",
      "9",
      "%",
      "{",
      "="};
  for (const std::string& text : texts) ExpectFastLoopLexesAsTheGeneralWay(text, text);
  // Long enough to fill the room many times over, with definitions on both sides of each edge.
  std::string module = "HloModule m\n\nENTRY e {\n";
  for (int i = 0; i < 5000; ++i) {
    module += "  c" + std::to_string(i) + " = f32[2,3]{1,0} constant({{1,2,3},{4,5,6}})\n";
  }
  module += "  ROOT r = f32[] add(c0, c1)\n}\n";
  ExpectFastLoopLexesAsTheGeneralWay(module, "a long body");
  const Lexed lexed = LexWith(module, SIZE_MAX);
  ASSERT_EQ(lexed.groups.size(), 1u);
  EXPECT_EQ(lexed.groups[0].definitions, 5001u);
}

TEST(LexerTest, TwoThreadsLexEveryCorpusModuleAsOneDoes) {
  EXPECT_GE(ForEachCorpusText(ExpectTwoThreadsLexAsOne), 400u);
}

// A module whose middle line is `middle`, between enough instructions that the halves split
// there.
std::string AroundTheMiddle(const std::string& middle) {
  std::string text = "HloModule m, frontend_attributes={a=\"1\"}\n\nENTRY %e () -> f32[] {\n";
  for (int i = 0; i < 200; ++i) text += "  %c" + std::to_string(i) + " = f32[] constant(1)\n";
  text += middle;
  for (int i = 200; i < 400; ++i) text += "  %c" + std::to_string(i) + " = f32[] constant(1)\n";
  text += "  ROOT %r = f32[] add(%c0, %c1)\n}\n";
  return text;
}

TEST(LexerTest, TwoThreadsLexAsOneWhenSomethingCrossesTheMiddle) {
  // Lines long enough to hold the middle of the text, so that the halves meet inside them.
  const std::string filler(20000, 'x');
  ExpectTwoThreadsLexAsOne(AroundTheMiddle("  /* a comment\n" + filler + "\n\n*/\n"),
                           "a comment across the middle");
  ExpectTwoThreadsLexAsOne(
      AroundTheMiddle("  %s = f32[] constant(1), metadata={op_name=\"a\n" + filler + "\n\nb\"}\n"),
      "a string across the middle");
  ExpectTwoThreadsLexAsOne(
      AroundTheMiddle("  %u = f32[] constant(1), metadata={op_name=\"a\n" + filler + "\n\nb}\n"),
      "an unterminated string from before the middle");
  // Attributes and values that continue on the next lines: `name =` after a comma is not a
  // definition, whichever half counts it.
  ExpectTwoThreadsLexAsOne(AroundTheMiddle("  %t = f32[] constant(1),\n" + std::string(5000, '\n') +
                                           "  sharding={replicated}\n"),
                           "an attribute after a line break at the middle");
  ExpectTwoThreadsLexAsOne(
      AroundTheMiddle("  %b = f32[] constant(1)\n" + std::string(5000, ' ') + "\n  \x01\n"),
      "a bad byte after the middle");
  ExpectTwoThreadsLexAsOne(AroundTheMiddle("  \x01\n" + std::string(20000, '\n')),
                           "a bad byte before the middle");
  // Both halves bad: the first error, as one lexer finds it.
  ExpectTwoThreadsLexAsOne("`\n" + std::string(100, ' ') + "\n`\n", "two bad bytes");
}

// `head`, then `line`, then `tail`, with a comment line before `line` long enough to hold the
// text's middle: the halves split exactly where `line` starts (the first line start past the
// middle, lexer.h). The comment is indented (a comment at depth 0 or 1 alike).
std::string SplitBefore(const std::string& head, const std::string& line, const std::string& tail) {
  const size_t rest = line.size() + tail.size();
  const size_t comment = (head.size() > rest ? head.size() - rest : rest - head.size()) + 64;
  std::string text = head + "  // " + std::string(comment, 'x') + "\n" + line + tail;
  const size_t line_start = text.size() - rest;
  EXPECT_EQ(text.find('\n', text.size() / 2) + 1, line_start) << "not split before: " << line;
  return text;
}

// A body of `n` instructions named `prefix`N, each a constant.
std::string Constants(const std::string& prefix, int n) {
  std::string text;
  for (int i = 0; i < n; ++i) text += "  %" + prefix + std::to_string(i) + " = f32[] constant(1)\n";
  return text;
}

TEST(LexerTest, TwoThreadsCountGroupsAsOneWhateverLineTheHalvesMeetAt) {
  const std::string module = "HloModule m\n\n";
  const std::string callee = "%add (x: f32[], y: f32[]) -> f32[] {\n" + Constants("a", 50) +
                             "  ROOT %s = f32[] add(%x, %y)\n}\n\n";
  const std::string entry = "ENTRY %e () -> f32[] {\n";
  const std::string end = "  ROOT %r = f32[] add(%c0, %c1)\n}\n";
  const std::string body = Constants("c", 60);
  struct Case {
    std::string what, text;
  };
  const std::vector<Case> cases = {
      // Inside a body: the line's `=` is the second half's second token, whose name-after-no-
      // comma test reaches back into the first half.
      {"an instruction",
       SplitBefore(module + entry + body, "  %m = f32[] constant(2)\n", body + end)},
      {"ROOT", SplitBefore(module + entry + body, "  ROOT %m = f32[] constant(2)\n", "}\n")},
      {"an attribute continued after a comma",
       SplitBefore(module + entry + body + "  %t = f32[] constant(1),\n",
                   "  sharding={replicated}\n", body + end)},
      {"a name continued before its `=`",
       SplitBefore(module + entry + body + "  %t\n", "  = f32[] constant(1)\n", body + end)},
      {"blank lines, then an instruction",
       SplitBefore(module + entry + body, "\n\n  %m = f32[] constant(2)\n", body + end)},
      {"a comment at column 0 in a body",
       SplitBefore(module + entry + body, "// note\n  %m = f32[] constant(2)\n", body + end)},
      {"a computation's closing brace",
       SplitBefore(module + callee.substr(0, callee.size() - 4), "}\n\n", entry + body + end)},
      {"a computation's header", SplitBefore(module + callee, entry, body + end)},
      {"a brace opening a body on a line of its own",
       SplitBefore(module + callee + "ENTRY %e () -> f32[]\n", "{\n", body + end)},
      {"a value continued at depth 2",
       SplitBefore(module + entry + body + "  %t = f32[] constant(1), frontend_attributes={\n",
                   "    a=\"1\"}\n", body + end)},
      {"blank lines to the end",
       SplitBefore(module + entry + body + end, std::string(40, '\n'), "")},
  };
  for (const Case& c : cases) {
    const Lexed one = LexWith(c.text, SIZE_MAX);
    ASSERT_EQ(one.error, "") << c.what;
    ASSERT_GE(one.groups.size(), 1u) << c.what;
    ExpectTwoThreadsLexAsOne(c.text, c.what);
  }
}

// LexFirstModule, which stops at the separator as it lexes, on two threads and on one, and Lex
// of FirstModuleText, which is cut there before lexing.
void ExpectFirstModuleLexedAsItsText(const std::string& source, const std::string& what) {
  const Lexed cut = LexWith(FirstModuleText(source), SIZE_MAX);
  for (size_t two_thread_bytes : {size_t{0}, SIZE_MAX}) {
    const Lexed lexed = LexedBy([&](std::vector<TopLevelGroup>* groups) {
      return LexFirstModule(source, "t.hlo", groups, two_thread_bytes);
    });
    ExpectLexedAlike(cut, lexed, what + (two_thread_bytes == 0 ? " (two threads)" : ""));
  }
}

TEST(LexerTest, TwoThreadsLexTheFirstModuleAsOneLexesItsText) {
  // What follows a separator does not lex: read, it would be an error.
  const std::string next = "// -----\nHloModule next\n  \x01\n";
  const std::string head = "HloModule m\n\nENTRY %e () -> f32[] {\n";
  const std::string body = Constants("c", 60);
  const std::string end = "  ROOT %r = f32[] add(%c0, %c1)\n}\n";
  const std::string line = "  %m = f32[] constant(2)\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"no separator", head + body + end},
      {"a separator first", next + head + body + end},
      {"one on the line the halves meet at", SplitBefore(head + body, next, body + end)},
      {"one on the line after it", SplitBefore(head + body, line, next + body + end)},
      {"one on the line before it", SplitBefore(head + body + next, line, body + end)},
      {"one last", head + body + end + next},
      {"one cut short at the end", head + body + end + "\n// ----"},
      {"one in a string in the second half",
       SplitBefore(head + body, line,
                   "  %s = f32[] constant(1), metadata={op_name=\"a\n" + next + "\"}\n" + end)},
      {"a bad byte before one", SplitBefore(head + "  \x01\n" + body, line, next + end)},
      {"one in a string in the first half",
       SplitBefore(head + "  %s = f32[] constant(1), metadata={op_name=\"a\n" + next + "\"}\n",
                   line, body + end)},
      {"a string of two lines and none in it",
       SplitBefore(head + "  %s = f32[] constant(1), metadata={op_name=\"a\n// ---\"}\n", line,
                   body + end + next)},
      {"one in a block comment in the first half",
       SplitBefore(head + "  /* a\n" + next + "*/\n" + body, line, end)},
      {"one in a block comment in the second half",
       SplitBefore(head + body, line, "  /* a\n" + next + "*/\n" + end)},
      {"a block comment of two lines and none in it",
       SplitBefore(head + "  /* a\n// ---- */\n" + body, line, end + next)},
      {"one after a line comment", SplitBefore(head + body, line, "// x\n" + next + end)},
      {"one indented, which is no separator",
       SplitBefore(head + body, line, "  " + next + end + next)},
      {"one after code on its line, which is no separator",
       SplitBefore(head + body + "  %n = f32[] constant(3) " + next, line, end + next)},
  };
  for (const auto& [what, text] : cases) ExpectFirstModuleLexedAsItsText(text, what);
  // A separator before each line in turn.
  const std::string text = head + body + end;
  for (size_t at = 0; at != std::string::npos; at = text.find('\n', at + 1)) {
    const size_t line_start = at == 0 ? 0 : at + 1;
    ExpectFirstModuleLexedAsItsText(text.substr(0, line_start) + next + text.substr(line_start),
                                    "a separator at byte " + std::to_string(line_start));
  }
  // The corpus has files of several modules.
  EXPECT_GE(ForEachCorpusText(ExpectFirstModuleLexedAsItsText), 400u);
}

}  // namespace
}  // namespace hlocache::hlo
