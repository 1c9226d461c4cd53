#include "compiler/hlo/lexer.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <optional>
#include <span>
#include <thread>
#include <type_traits>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "common/helper_thread.h"
#include "common/huge_pages.h"
#include "common/spin_wait.h"

namespace hlocache::hlo {
namespace {

enum CharClass : uint8_t {
  kBad = 0,
  kSpace = 1 << 0,
  kIdentStart = 1 << 1,
  kIdentChar = 1 << 2,  // Letters, digits, _ . $ (and '-' handled separately).
  kDigit = 1 << 3,
  kWordChar = 1 << 4,  // Letters, digits and '_' (digit-led patterns).
  kPunct = 1 << 5,
};

constexpr std::array<uint8_t, 256> MakeClasses() {
  std::array<uint8_t, 256> c{};
  for (int ch : {' ', '\t', '\n', '\r', '\f', '\v'}) c[ch] = kSpace;
  for (int ch = 'a'; ch <= 'z'; ++ch) c[ch] = kIdentStart | kIdentChar | kWordChar;
  for (int ch = 'A'; ch <= 'Z'; ++ch) c[ch] = kIdentStart | kIdentChar | kWordChar;
  for (int ch = '0'; ch <= '9'; ++ch) c[ch] = kIdentChar | kDigit | kWordChar;
  c['_'] = kIdentStart | kIdentChar | kWordChar;
  c['$'] = kIdentStart | kIdentChar;
  c['.'] = kIdentChar | kPunct;
  for (int ch : {'{', '}', '[', ']', '(', ')', ',', '=', ':', '-', '<', '>', '?',
                 '*', '#', '+', '/', '!', '@', '^', '|', '~', ';', '&', '\''}) {
    c[ch] |= kPunct;
  }
  return c;
}
constexpr std::array<uint8_t, 256> kClasses = MakeClasses();

constexpr bool Is(unsigned char ch, uint8_t cls) { return (kClasses[ch] & cls) != 0; }

// The kind of a token that a character makes alone whatever follows it, for the punctuation
// that starts no longer token ('-', '<', '.' and '/' do: numbers, `->`, `<=`, `...`, comments);
// kEnd for every other character. Such tokens are about half of a module's (53 to 55% of the
// three largest corpus modules'): one lookup takes them before the chain of tests for the rest.
constexpr std::array<TokenKind, 256> MakeSingleCharKinds() {
  std::array<TokenKind, 256> k{};  // Value-initialized: kEnd.
  k['{'] = TokenKind::kLBrace;
  k['}'] = TokenKind::kRBrace;
  k['['] = TokenKind::kLBracket;
  k[']'] = TokenKind::kRBracket;
  k['('] = TokenKind::kLParen;
  k[')'] = TokenKind::kRParen;
  k[','] = TokenKind::kComma;
  k['='] = TokenKind::kEqual;
  k[':'] = TokenKind::kColon;
  for (int ch : {'>', '?', '*', '#', '+', '!', '@', '^', '|', '~', ';', '&', '\''}) {
    k[ch] = TokenKind::kOther;
  }
  return k;
}
constexpr std::array<TokenKind, 256> kSingleCharKinds = MakeSingleCharKinds();

// How a single-character token moves the bracket depth.
constexpr std::array<int8_t, 256> MakeDepthChanges() {
  std::array<int8_t, 256> d{};
  d['{'] = d['['] = d['('] = 1;
  d['}'] = d[']'] = d[')'] = -1;
  return d;
}
constexpr std::array<int8_t, 256> kDepthChanges = MakeDepthChanges();

// What LexFast does with a token's first character: one lookup and one switch, where a test
// for white space, then for a single character, then for its depth change came one after the
// other for every token. kOther: a token LexFast leaves to LexOne. Derived from the tables
// above, so that the two ways of lexing cannot disagree on a character.
enum class FastClass : uint8_t {
  kOther,
  kSpace,
  kSingle,  // A single-character token that is not a bracket or '='.
  kOpen,    // { [ (
  kClose,   // } ] )
  kEqual,
  kIdentStart,
  kPercent,
  kDigit,
};
constexpr std::array<FastClass, 256> MakeFastClasses() {
  std::array<FastClass, 256> c{};  // kOther.
  for (int ch = 0; ch < 256; ++ch) {
    if (kSingleCharKinds[ch] != TokenKind::kEnd) {
      c[ch] = kDepthChanges[ch] > 0   ? FastClass::kOpen
              : kDepthChanges[ch] < 0 ? FastClass::kClose
              : ch == '='             ? FastClass::kEqual
                                      : FastClass::kSingle;
    }
    if (Is(static_cast<unsigned char>(ch), kSpace)) c[ch] = FastClass::kSpace;
    if (Is(static_cast<unsigned char>(ch), kIdentStart)) c[ch] = FastClass::kIdentStart;
    if (Is(static_cast<unsigned char>(ch), kDigit)) c[ch] = FastClass::kDigit;
  }
  c['%'] = FastClass::kPercent;
  return c;
}
constexpr std::array<FastClass, 256> kFastClasses = MakeFastClasses();

// A line that starts with it separates modules in one file (FirstModuleText).
constexpr std::string_view kSeparatorLine = "\n// -----";

class Lexer {
 public:
  // `depth`: the bracket depth where lexing starts (nonzero for a lexer that starts inside the
  // source, on what it was told the depth there is).
  Lexer(std::string_view src, std::string_view filename, std::vector<TopLevelGroup>* groups,
        int64_t depth = 0)
      : src_(src), filename_(filename), groups_(groups), depth_(depth) {}

  // Lexes FirstModuleText(src) (before Run): the source ends where a separator line starts.
  // Found as the lexer goes, not by a search through the source first: a `\n// -----` can only
  // be at a comment that starts a line, or inside a string or a block comment, each of which
  // the lexer reaches anyway (a search stopped at each of the source's newlines, a third of a
  // millisecond a 2 MB half).
  void StopAtSeparator() { stop_at_separator_ = true; }
  // Whether the source was found to end at a separator line.
  bool stopped_at_separator() const { return stopped_at_separator_; }

  // A `name =` at depth 1 among the first two tokens this lexer made, which it cannot tell is a
  // definition: whether the tokens before it are a name after no comma is the previous lexer's
  // to know. `groups_before`: the groups this lexer had opened by then.
  struct Undecided {
    uint32_t equal = 0;  // Index of the `=` in this lexer's tokens (0 or 1).
    uint32_t groups_before = 0;
  };
  int64_t depth() const { return depth_; }
  // Definitions counted before this lexer opened a group: those of the group open where it
  // started (a lexer from the source's start drops them, as no group is open there).
  uint32_t lead_definitions() const { return lead_definitions_; }
  std::span<const Undecided> undecided() const { return {undecided_.data(), undecided_count_}; }

  // Whether the `=` at tokens[k] (k >= 2), at depth 1, completes a `name =` definition: a name
  // before it, not after a comma (that is an attribute).
  static bool CompletesDefinition(const Token* tokens, size_t k) {
    return tokens[k - 1].kind == TokenKind::kIdent && tokens[k - 2].kind != TokenKind::kComma;
  }

  // The tokens of src_ from byte `begin` on, ending with kEnd; room reserved for the tokens of
  // `reserve_bytes` of source. `fast`: whether the common tokens take LexFast (tests compare
  // the two ways).
  Result<std::vector<Token>> Run(size_t begin = 0, size_t reserve_bytes = 0, bool fast = true) {
    std::vector<Token> out;
    // Dense modules run about 3.6 source bytes a token; a reservation that covers them keeps the
    // vector from regrowing (a copy, and twice the memory touched). Untouched capacity costs
    // nothing.
    out.reserve(std::max(reserve_bytes, src_.size() - begin) / 3 + 16);
    AdviseHugePages(out.data(), out.capacity() * sizeof(Token));
    Cursor at{begin, 0};
    while (true) {
      // The tokens are written through a pointer into room made a chunk at a time (left unset:
      // see Token's default constructor), so that the loop checks no capacity per token.
      if (at.made == out.size()) out.resize(at.made + kChunkTokens);
      const Stop stop = fast ? LexFast(out.data(), out.data() + out.size(), at) : Stop::kOther;
      if (stop == Stop::kEnd) break;
      if (stop == Stop::kFull) continue;
      if (!LexOne(out.data(), at)) return Error(std::move(error_));
      if (at.i >= src_.size()) break;
    }
    out.resize(at.made);
    out.push_back(Token{TokenKind::kEnd, 0, static_cast<uint32_t>(src_.size())});
    return out;
  }

  // Notes the groups of out[from, end) as if they had been lexed here, after what this lexer
  // lexed (out[0, from)): for tokens another lexer made, which counted no groups.
  void NoteGroupsOf(const std::vector<Token>& out, size_t from) {
    for (size_t k = from; k < out.size(); ++k) {
      NoteGroupAt(out.data(), k, kKindChars[static_cast<size_t>(out[k].kind)]);
    }
  }

 private:
  static constexpr size_t kChunkTokens = 4096;

  // Where lexing stands: the source position, and the tokens made.
  struct Cursor {
    size_t i = 0;
    size_t made = 0;
  };
  enum class Stop : uint8_t {
    kEnd,    // The source has ended.
    kFull,   // The room for tokens is used up.
    kOther,  // At a token LexFast leaves to LexOne.
  };

  // Lexes the tokens most of a module is made of (punctuation, names, decimal integers, and
  // the white space between them) into tokens[at.made, ...) until `room_end`, and stops at
  // anything else: a comment, a string, any other number, an error, a group opening at depth
  // 0, a definition it cannot yet tell is one. It calls nothing, so that its state stays in
  // registers: the one loop that did everything kept its position on the stack, a load and a
  // store per byte. Counts what NoteGroupAt counts for the tokens it makes.
  Stop LexFast(Token* const tokens, Token* const room_end, Cursor& at) {
    const char* const s = src_.data();
    const size_t n = src_.size();
    const bool counting = groups_ != nullptr;
    size_t i = at.i;
    Token* w = tokens + at.made;
    int64_t depth = depth_;
    uint32_t definitions = 0;
    Stop stop = Stop::kOther;
    while (true) {
      if (w == room_end) {
        stop = Stop::kFull;
        break;
      }
      if (i >= n) {
        stop = Stop::kEnd;
        break;
      }
      unsigned char ch = s[i];
      FastClass fast = kFastClasses[ch];
      if (fast == FastClass::kSpace) {  // Before a quarter of the tokens: not checked twice.
        do {
          ++i;
        } while (i < n && Is(s[i], kSpace));
        if (i >= n) {
          stop = Stop::kEnd;
          break;
        }
        ch = s[i];
        fast = kFastClasses[ch];
      }
      size_t end;
      TokenKind kind;
      switch (fast) {
        case FastClass::kOpen:
          if (ch == '{' && depth == 0) goto done;  // A group opens.
          ++depth;
          *w++ = Token{kSingleCharKinds[ch], 1, static_cast<uint32_t>(i)};
          ++i;
          continue;
        case FastClass::kClose:
          --depth;
          *w++ = Token{kSingleCharKinds[ch], 1, static_cast<uint32_t>(i)};
          ++i;
          continue;
        case FastClass::kEqual:
          if (depth == 1 && counting) {
            const auto k = static_cast<size_t>(w - tokens);
            if (k < 2) goto done;  // Perhaps undecided.
            definitions += CompletesDefinition(tokens, k) ? 1 : 0;
          }
          [[fallthrough]];
        case FastClass::kSingle:
          *w++ = Token{kSingleCharKinds[ch], 1, static_cast<uint32_t>(i)};
          ++i;
          continue;
        case FastClass::kIdentStart:
          end = ScanIdentTail(i + 1);
          kind = TokenKind::kIdent;
          break;
        case FastClass::kPercent:
          if (i + 1 >= n || !Is(s[i + 1], kIdentStart)) goto done;
          end = ScanIdentTail(i + 2);
          kind = TokenKind::kIdent;
          break;
        case FastClass::kDigit:
          end = i + 1;
          while (end < n && Is(s[end], kDigit)) ++end;
          // Hexadecimal, a float or a digit-led word: ScanNumber's.
          if (end < n && (Is(s[end], kWordChar) || s[end] == '.')) goto done;
          kind = TokenKind::kInt;
          break;
        default:
          goto done;
      }
      if (end - i > kMaxTokenBytes) break;
      *w++ = Token{kind, static_cast<uint32_t>(end - i), static_cast<uint32_t>(i)};
      i = end;
    }
  done:
    at.i = i;
    at.made = static_cast<size_t>(w - tokens);
    depth_ = depth;
    if (definitions != 0) {
      // No group opened on the way: they are the current group's.
      (groups_->empty() ? lead_definitions_ : groups_->back().definitions) += definitions;
    }
    return stop;
  }

  // Lexes one token (after any white space and comments) into tokens[at.made], which has room
  // for it, the way every token was once lexed; or none, at the source's end. False on an
  // error, in error_.
  bool LexOne(Token* const tokens, Cursor& at) {
    const size_t n = src_.size();
    size_t i = at.i;
    // Skip whitespace and comments.
    while (i < n) {
      unsigned char ch = src_[i];
      if (Is(ch, kSpace)) {
        ++i;
      } else if (ch == '/' && i + 1 < n && src_[i + 1] == '/') {
        if (stop_at_separator_ && (i == 0 || src_[i - 1] == '\n') &&
            Matches(i, kSeparatorLine.substr(1))) {
          CutAtSeparator(i == 0 ? 0 : i - 1);
          at.i = src_.size();
          return true;
        }
        while (i < n && src_[i] != '\n') ++i;
      } else if (ch == '/' && i + 1 < n && src_[i + 1] == '*') {
        size_t end = src_.find("*/", i + 2);
        // A separator inside the comment ends the source before the comment does.
        if (end == std::string_view::npos ||
            (stop_at_separator_ && CutAtSeparatorWithin(i + 2, end))) {
          return Failed(i, "unterminated /* comment");
        }
        i = end + 2;
      } else {
        break;
      }
    }
    at.i = i;
    if (i >= n) return true;
    const size_t start = i;
    const unsigned char ch = src_[i];
    if (const TokenKind single = kSingleCharKinds[ch]; single != TokenKind::kEnd) {
      if (groups_ != nullptr) {
        NoteGroupAt(tokens, at.made, ch);
      } else {
        depth_ += kDepthChanges[ch];  // LexFast keeps count of it either way.
      }
      tokens[at.made++] = Token{single, 1, static_cast<uint32_t>(start)};
      at.i = i + 1;
      return true;
    }
    TokenKind kind;
    if (Is(ch, kIdentStart) || ch == '%') {
      if (ch == '%') {
        ++i;
        if (i >= n || !Is(src_[i], kIdentStart)) return Failed(start, "expected a name after '%'");
      }
      i = ScanIdentTail(i + 1);
      kind = TokenKind::kIdent;
    } else if (Is(ch, kDigit) || (ch == '-' && i + 1 < n && Is(src_[i + 1], kDigit)) ||
               (ch == '.' && i + 1 < n && Is(src_[i + 1], kDigit))) {
      kind = ScanNumber(i);
    } else if (ch == '-' && (Matches(i + 1, "inf") || Matches(i + 1, "nan"))) {
      i += 4;
      kind = TokenKind::kFloat;
    } else if (ch == '"') {
      i = StringEnd(i + 1);
      // A separator inside the string ends the source before the string does.
      if (i > n || (stop_at_separator_ && CutAtSeparatorWithin(start + 1, i - 1))) {
        return Failed(start, "unterminated string");
      }
      kind = TokenKind::kString;
    } else if (ch == '-' && i + 1 < n && src_[i + 1] == '>') {
      i += 2;
      kind = TokenKind::kArrow;
    } else if (ch == '<' && i + 1 < n && src_[i + 1] == '=') {
      i += 2;
      kind = TokenKind::kLessEq;
    } else if (ch == '.' && Matches(i, "...")) {
      i += 3;
      kind = TokenKind::kEllipsis;
    } else if (Is(ch, kPunct)) {
      ++i;
      kind = PunctKind(ch);
    } else {
      char buf[64];
      if (ch >= 0x20 && ch < 0x7f) {
        std::snprintf(buf, sizeof buf, "unexpected character '%c'", ch);
      } else {
        std::snprintf(buf, sizeof buf, "unexpected byte 0x%02x (not HLO text)", ch);
      }
      return Failed(start, buf);
    }
    if (i - start > kMaxTokenBytes) return Failed(start, "token longer than 16 MiB");
    tokens[at.made++] = Token{kind, static_cast<uint32_t>(i - start), static_cast<uint32_t>(start)};
    at.i = i;
    return true;
  }

  bool Failed(size_t offset, std::string_view message) {
    error_ = Fail(offset, message);
    return false;
  }

  // The character of each single-character token kind that moves the depth or may complete a
  // definition; 0 (which does neither) for every other kind.
  static constexpr std::array<unsigned char, 32> kKindChars = [] {
    std::array<unsigned char, 32> c{};
    c[static_cast<size_t>(TokenKind::kLBrace)] = '{';
    c[static_cast<size_t>(TokenKind::kRBrace)] = '}';
    c[static_cast<size_t>(TokenKind::kLBracket)] = '[';
    c[static_cast<size_t>(TokenKind::kRBracket)] = ']';
    c[static_cast<size_t>(TokenKind::kLParen)] = '(';
    c[static_cast<size_t>(TokenKind::kRParen)] = ')';
    c[static_cast<size_t>(TokenKind::kEqual)] = '=';
    return c;
  }();
  static_assert(static_cast<size_t>(TokenKind::kOther) < 32);

  // What the single-character token `ch` at tokens[k] (tokens[0, k) before it) does: the depth
  // it leaves, a group it opens at depth 0, a definition it completes at depth 1.
  void NoteGroupAt(const Token* tokens, size_t k, unsigned char ch) {
    if (const int8_t change = kDepthChanges[ch]; change != 0) {
      if (ch == '{' && depth_ == 0) OpenGroup(k);
      depth_ += change;
      return;
    }
    if (ch == '=' && depth_ == 1) {
      if (k < 2) {
        // Each token is noted once, so there are at most two.
        if (undecided_count_ < undecided_.size()) {
          undecided_[undecided_count_++] = {static_cast<uint32_t>(k),
                                            static_cast<uint32_t>(groups_->size())};
        }
      } else if (CompletesDefinition(tokens, k)) {
        ++(groups_->empty() ? lead_definitions_ : groups_->back().definitions);
      }
    }
  }

  [[gnu::noinline]] void OpenGroup(size_t k) {
    groups_->push_back(TopLevelGroup{static_cast<uint32_t>(k), 0});
  }

  bool Matches(size_t i, std::string_view word) const {
    return src_.substr(i, word.size()) == word;
  }

  // The source ends at `end`: the newline a separator line follows (or 0, one that starts it).
  void CutAtSeparator(size_t end) {
    src_ = src_.substr(0, end);
    stopped_at_separator_ = true;
  }

  // For a string or block comment whose contents are src_[begin, end): whether a separator
  // line starts within them, and then the source is cut there (the string or comment is
  // unterminated, as in FirstModuleText's source). Such a separator lies wholly within the
  // contents: it holds neither a quote nor a `*`. Most strings are of one line, and a search
  // for a newline in them is all they cost; the separator is looked for from that newline on.
  bool CutAtSeparatorWithin(size_t begin, size_t end) {
    const std::string_view contents = src_.substr(begin, end - begin);
    const size_t newline = contents.find('\n');
    if (newline == std::string_view::npos) return false;
    const size_t at = contents.find(kSeparatorLine, newline);
    if (at == std::string_view::npos) return false;
    CutAtSeparator(begin + at);
    return true;
  }

  // Where the string whose contents start at `i` ends (just past its closing quote), or n + 1
  // when it is unterminated. A backslash escapes the byte after it. Metadata strings are most of
  // the bytes of a module from JAX, so this looks for the quote and the backslashes with memchr
  // rather than a byte at a time.
  size_t StringEnd(size_t i) const {
    const size_t n = src_.size();
    const char* const base = src_.data();
    while (i < n) {
      const auto* quote = static_cast<const char*>(std::memchr(base + i, '"', n - i));
      if (quote == nullptr) return n + 1;
      const size_t q = static_cast<size_t>(quote - base);
      const auto* escape = static_cast<const char*>(std::memchr(base + i, '\\', q - i));
      if (escape == nullptr) return q + 1;
      i = static_cast<size_t>(escape - base) + 2;  // Past the backslash and the byte it escapes.
    }
    return n + 1;
  }

  // Identifier tail: [A-Za-z0-9_.$] and '-' unless it starts '->'.
  [[gnu::always_inline]] size_t ScanIdentTail(size_t i) const {
    const size_t n = src_.size();
    for (;;) {
      i = SkipIdentChars(i);
      // A '-' continues the name unless it starts `->` or `--`.
      if (i < n && src_[i] == '-' && !(i + 1 < n && (src_[i + 1] == '>' || src_[i + 1] == '-'))) {
        ++i;
        continue;
      }
      return i;
    }
  }

  // The first position from `i` that is not [A-Za-z0-9_.$] (n at the end). Names are a quarter
  // (JAX's Gemma 2) to two thirds (Mixtral, torax) of a module's bytes: sixteen at a time where
  // SSE2 is there (every x86-64), where a byte at a time cost a mispredicted branch at each
  // name's end.
  [[gnu::always_inline]] size_t SkipIdentChars(size_t i) const {
    const size_t n = src_.size();
#if defined(__SSE2__)
    const auto* base = reinterpret_cast<const unsigned char*>(src_.data());
    while (i + 16 <= n) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(base + i));
      const __m128i ident =
          _mm_or_si128(_mm_or_si128(InRange(_mm_or_si128(v, _mm_set1_epi8(0x20)), 'a', 'z'),
                                    InRange(v, '0', '9')),
                       _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('_')),
                                                 _mm_cmpeq_epi8(v, _mm_set1_epi8('.'))),
                                    _mm_cmpeq_epi8(v, _mm_set1_epi8('$'))));
      const unsigned others = ~static_cast<unsigned>(_mm_movemask_epi8(ident)) & 0xffffu;
      if (others != 0) return i + static_cast<size_t>(__builtin_ctz(others));
      i += 16;
    }
#endif
    while (i < n && Is(src_[i], kIdentChar)) ++i;
    return i;
  }

#if defined(__SSE2__)
  // 0xff in each byte of `v` within [lo, hi]: shifted so that the range starts at -128, one
  // signed compare.
  static __m128i InRange(__m128i v, char lo, char hi) {
    const __m128i shifted = _mm_add_epi8(v, _mm_set1_epi8(static_cast<char>(-128 - lo)));
    return _mm_cmplt_epi8(shifted, _mm_set1_epi8(static_cast<char>(-128 + (hi - lo) + 1)));
  }
#endif

  TokenKind ScanNumber(size_t& i) const {
    const size_t n = src_.size();
    if (src_[i] == '-') ++i;
    if (src_[i] == '0' && i + 1 < n && (src_[i + 1] == 'x' || src_[i + 1] == 'X') && i + 2 < n &&
        std::isxdigit(static_cast<unsigned char>(src_[i + 2]))) {
      i += 2;
      while (i < n && std::isxdigit(static_cast<unsigned char>(src_[i]))) ++i;
      return TokenKind::kInt;
    }
    bool is_float = false;
    while (i < n && Is(src_[i], kDigit)) ++i;
    if (i < n && src_[i] == '.' && !Matches(i, "...")) {
      is_float = true;
      ++i;
      while (i < n && Is(src_[i], kDigit)) ++i;
    }
    if (i < n && (src_[i] == 'e' || src_[i] == 'E')) {
      size_t j = i + 1;
      if (j < n && (src_[j] == '+' || src_[j] == '-')) ++j;
      if (j < n && Is(src_[j], kDigit)) {
        is_float = true;
        i = j;
        while (i < n && Is(src_[i], kDigit)) ++i;
      }
    }
    if (is_float) return TokenKind::kFloat;
    if (i < n && Is(src_[i], kWordChar)) {
      // Digit-led pattern: 3x3, 1_1x0_0, 0_-1, 01bf.
      while (i < n) {
        unsigned char ch = src_[i];
        if (Is(ch, kWordChar)) {
          ++i;
        } else if (ch == '-' && i + 1 < n && Is(src_[i + 1], kDigit) &&
                   (src_[i - 1] == '_' || src_[i - 1] == 'x')) {
          ++i;
        } else {
          break;
        }
      }
      return TokenKind::kWord;
    }
    return TokenKind::kInt;
  }

  static TokenKind PunctKind(unsigned char ch) {
    switch (ch) {
      case '{':
        return TokenKind::kLBrace;
      case '}':
        return TokenKind::kRBrace;
      case '[':
        return TokenKind::kLBracket;
      case ']':
        return TokenKind::kRBracket;
      case '(':
        return TokenKind::kLParen;
      case ')':
        return TokenKind::kRParen;
      case ',':
        return TokenKind::kComma;
      case '=':
        return TokenKind::kEqual;
      case ':':
        return TokenKind::kColon;
      default:
        return TokenKind::kOther;
    }
  }

  ErrorValue Fail(size_t offset, std::string_view message) const {
    return Error(ErrorAt(filename_, src_, static_cast<uint32_t>(offset), message));
  }

  std::string_view src_;
  std::string_view filename_;
  std::vector<TopLevelGroup>* groups_;  // May be null: nothing counted.
  int64_t depth_ = 0;                   // Bracket depth, for groups_.
  bool stop_at_separator_ = false;
  bool stopped_at_separator_ = false;
  uint32_t lead_definitions_ = 0;
  std::array<Undecided, 2> undecided_{};  // Only tokens 0 and 1 can be undecided.
  uint32_t undecided_count_ = 0;
  Status error_;  // Why LexOne failed.
};

}  // namespace

SourcePosition PositionOf(std::string_view source, uint32_t offset) {
  SourcePosition pos{1, 1};
  if (offset > source.size()) offset = static_cast<uint32_t>(source.size());
  size_t line_start = 0;
  for (size_t i = 0; i < offset; ++i) {
    if (source[i] == '\n') {
      ++pos.line;
      line_start = i + 1;
    }
  }
  pos.column = static_cast<uint32_t>(offset - line_start + 1);
  return pos;
}

Status ErrorAt(std::string_view filename, std::string_view source, uint32_t offset,
               std::string_view message) {
  SourcePosition pos = PositionOf(source, offset);
  std::string text;
  text.reserve(filename.size() + message.size() + 32);
  text.append(filename.empty() ? "<input>" : filename);
  text += ':';
  text += std::to_string(pos.line);
  text += ':';
  text += std::to_string(pos.column);
  text += ": error: ";
  // Keep the error on one line whatever the message quotes.
  for (char c : message) text += (c == '\n' || c == '\r') ? ' ' : c;
  return InvalidArgument(std::move(text));
}

namespace {

// The bracket depth at the start of the line at `line_start`, as HLO text is laid out: the
// first line from there that holds more than spaces or a `//` comment, when it is indented or
// closes a brace, is inside a computation's body (depth 1); any other line starts at depth 0 (a
// computation's header, the module's). A guess, checked once the text before the line is
// lexed; a few lines are looked at, not the rest of the text.
int64_t LikelyDepthAt(std::string_view source, size_t line_start) {
  size_t at = line_start;
  for (int line = 0; line < 16 && at < source.size(); ++line) {
    const size_t content = source.find_first_not_of(" \t\r", at);
    if (content == std::string_view::npos) return 0;
    const char first = source[content];
    if (first != '\n' && source.substr(content, 2) != "//") {
      return (content > at || first == '}') ? 1 : 0;
    }
    const size_t end = source.find('\n', content);
    if (end == std::string_view::npos) return 0;
    at = end + 1;
  }
  return 0;
}

// The second half's groups, counted by its own lexer from the depth it was told, added to
// `groups` (the first half's, whose lexer ended where the second began, at that depth).
// `tokens`: both halves, the second from index `from`.
void AddSecondHalfsGroups(const std::vector<Token>& tokens, size_t from, const Lexer& second,
                          std::vector<TopLevelGroup> second_groups,
                          std::vector<TopLevelGroup>& groups) {
  uint32_t lead = second.lead_definitions();
  for (const Lexer::Undecided& u : second.undecided()) {
    const size_t k = from + u.equal;
    if (k < 2 || !Lexer::CompletesDefinition(tokens.data(), k)) continue;
    ++(u.groups_before == 0 ? lead : second_groups[u.groups_before - 1].definitions);
  }
  if (!groups.empty()) groups.back().definitions += lead;
  for (TopLevelGroup g : second_groups) {
    g.open += static_cast<uint32_t>(from);
    groups.push_back(g);
  }
}

// How long a lexer's thread spins for the other before it sleeps: the halves take about as long.
constexpr std::chrono::microseconds kLexerSpin{1000};

// A copy of tokens shared by two threads: the one that made the room copies the first half of
// them and lets the other copy the rest, or tells it there is nothing to copy.
class SharedCopy {
 public:
  // The first thread's: copies tokens [0, count / 2) of `from` to `to`, and lets the other copy
  // the rest. Returns once its own half is copied; the other's is done when that thread ends.
  void CopyOurHalf(const Token* from, size_t count, Token* to) {
    from_ = from;
    to_ = to;
    count_ = count;
    Tell(kCopy);
    std::memcpy(static_cast<void*>(to), from, count / 2 * sizeof(Token));
  }
  void Cancel() { Tell(kNone); }
  // The other thread's: waits for CopyOurHalf or Cancel, and copies the second half if told.
  void CopyTheirHalf() {
    auto waiting = [this] { return state_.load(std::memory_order_acquire) == kWaiting; };
    if (!SpinWhile(waiting, kLexerSpin)) state_.wait(kWaiting, std::memory_order_acquire);
    if (state_.load(std::memory_order_acquire) == kNone) return;
    const size_t half = count_ / 2;
    std::memcpy(static_cast<void*>(to_ + half), from_ + half, (count_ - half) * sizeof(Token));
  }

 private:
  static constexpr int kWaiting = 0, kCopy = 1, kNone = 2;
  void Tell(int state) {
    state_.store(state, std::memory_order_release);
    state_.notify_one();
  }
  std::atomic<int> state_{kWaiting};
  const Token* from_ = nullptr;
  Token* to_ = nullptr;
  size_t count_ = 0;
};

// Lexes a large source in two halves at once: the second, from the first line start past the
// middle, on a thread of its own. When the first half lexes to its end without an error, no
// token, string or comment crosses the line start between them, so the second half's tokens
// are those one lexer would have made there. The second half's lexer counts its groups from
// the depth the line's layout suggests (LikelyDepthAt); where the first half ends at another
// depth, they are counted again after, from its tokens. Otherwise (a string or comment crosses
// the line start, or an error is in the first half) the whole source is lexed again on one
// thread, which finds what one lexer finds.
//
// `first_module`: what is lexed is FirstModuleText(source). Each lexer stops at a separator
// line in its half; where the first half holds one, its tokens are all there is, and the
// second half's are dropped.
std::optional<Result<std::vector<Token>>> LexInTwo(std::string_view source,
                                                   std::string_view filename,
                                                   std::vector<TopLevelGroup>* groups,
                                                   bool first_module) {
  const size_t newline = source.find('\n', source.size() / 2);
  if (newline == std::string_view::npos || newline + 1 >= source.size()) return std::nullopt;
  const size_t split = newline + 1;
  const int64_t split_depth = LikelyDepthAt(source, split);
  std::vector<TopLevelGroup> second_groups;
  Lexer second_lexer(source, filename, groups != nullptr ? &second_groups : nullptr, split_depth);
  Result<std::vector<Token>> second = Error(InvalidArgument(""));
  // The second half's tokens go after the first's, copied by both threads at once, each half of
  // them: a million-token module's second half is 4 MB, a third of a millisecond to copy on one
  // (timed), after the second thread has finished its lexing.
  std::atomic<bool> second_lexed{false};
  SharedCopy copy;
  HelperThread second_thread;
  // A separator line that the split begins is the second lexer's: it starts after a newline
  // there. One that starts before it lies wholly in the first half (it holds no newline).
  if (first_module) second_lexer.StopAtSeparator();
  if (!second_thread.Try([&] {
        second = second_lexer.Run(split, /*reserve_bytes=*/0);
        SetAndWake(second_lexed);
        copy.CopyTheirHalf();
      })) {
    return std::nullopt;  // No thread to be had: one lexer, on this one.
  }
  // Should this thread leave before it has told the second (an exception), it tells it there
  // is nothing to copy, before the thread's join, which would otherwise wait for it forever.
  // Telling it again once it has ended changes nothing.
  struct CancelOnExit {
    SharedCopy& copy;
    ~CancelOnExit() { copy.Cancel(); }
  } cancel_on_exit{copy};
  Lexer first_lexer(source.substr(0, split), filename, groups);
  if (first_module) first_lexer.StopAtSeparator();
  Result<std::vector<Token>> first = first_lexer.Run(0, /*reserve_bytes=*/source.size());
  // Spun for a while before it is slept on: the halves take about as long (spin_wait.h).
  WaitUntilSet(second_lexed, kLexerSpin);
  if (!first || first_lexer.stopped_at_separator() || !second) {
    copy.Cancel();
    second_thread.Join();
    if (!first) return std::nullopt;
    if (first_lexer.stopped_at_separator()) return first;
    return second;
  }
  std::vector<Token>& tokens = *first;
  tokens.pop_back();  // The first half's kEnd.
  const size_t from = tokens.size();
  // Copied as bytes: Token's constructor, which leaves it unset (token.h), makes it no trivial
  // type, and insert copied it a token at a time (six instructions each).
  static_assert(std::is_trivially_copyable_v<Token>);
  tokens.resize(from + second->size());
  copy.CopyOurHalf(second->data(), second->size(), tokens.data() + from);
  second_thread.Join();
  if (groups != nullptr) {
    if (first_lexer.depth() == split_depth) {
      AddSecondHalfsGroups(tokens, from, second_lexer, std::move(second_groups), *groups);
    } else {
      first_lexer.NoteGroupsOf(tokens, from);
    }
  }
  return first;
}

}  // namespace

namespace {

// What every lexing starts with: a source too large is refused; `groups` is emptied.
std::optional<ErrorValue> StartLexing(std::string_view source, std::string_view filename,
                                      std::vector<TopLevelGroup>* groups) {
  if (source.size() > kMaxSourceBytes) {
    return Error(InvalidArgument(std::string(filename) + ":1:1: error: file larger than 2 GiB"));
  }
  if (groups != nullptr) groups->clear();
  return std::nullopt;
}

}  // namespace

Result<std::vector<Token>> LexEachTokenAlone(std::string_view source, std::string_view filename,
                                             std::vector<TopLevelGroup>* groups) {
  if (auto refused = StartLexing(source, filename, groups)) return std::move(*refused);
  return Lexer(source, filename, groups).Run(0, 0, /*fast=*/false);
}

namespace {

// Lex(), or with `first_module` Lex(FirstModuleText(source)).
Result<std::vector<Token>> LexSource(std::string_view source, std::string_view filename,
                                     std::vector<TopLevelGroup>* groups, size_t two_thread_bytes,
                                     bool first_module) {
  if (auto refused = StartLexing(source, filename, groups)) return std::move(*refused);
  if (source.size() >= two_thread_bytes && std::thread::hardware_concurrency() >= 2) {
    if (auto lexed = LexInTwo(source, filename, groups, first_module)) return std::move(*lexed);
    if (groups != nullptr) groups->clear();
  }
  Lexer lexer(source, filename, groups);
  if (first_module) lexer.StopAtSeparator();
  return lexer.Run();
}

}  // namespace

std::string_view FirstModuleText(std::string_view source) {
  // XLA's tools split multi-module files at lines that start with "// -----".
  const size_t at = source.starts_with(kSeparatorLine.substr(1)) ? 0 : source.find(kSeparatorLine);
  return at == std::string_view::npos ? source : source.substr(0, at);
}

Result<std::vector<Token>> Lex(std::string_view source, std::string_view filename,
                               std::vector<TopLevelGroup>* groups, size_t two_thread_bytes) {
  return LexSource(source, filename, groups, two_thread_bytes, /*first_module=*/false);
}

Result<std::vector<Token>> LexFirstModule(std::string_view source, std::string_view filename,
                                          std::vector<TopLevelGroup>* groups,
                                          size_t two_thread_bytes) {
  return LexSource(source, filename, groups, two_thread_bytes, /*first_module=*/true);
}

}  // namespace hlocache::hlo
