// Tokens of the HLO text format.
//
// A Token is a (kind, offset, length) view into the module's source text; the text itself is owned
// by whoever owns the source (hlo::Module). Comments and whitespace never become tokens.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace hlocache::hlo {

enum class TokenKind : uint8_t {
  kEnd,       // End of input (one per token stream, zero length).
  kIdent,     // Names, keywords, opcodes, types, dim labels: [%]?[A-Za-z_$][A-Za-z0-9_.$-]*.
  kInt,       // -?[0-9]+ (decimal) or 0x[0-9a-f]+.
  kFloat,     // Decimal float with '.' or exponent, and -inf / -nan.
  kWord,      // Digit-led patterns that are not numbers: 3x3, 1_1x0_0, 01bf.
  kString,    // "..." with C escapes; the token includes the quotes.
  kLBrace,    // {
  kRBrace,    // }
  kLBracket,  // [
  kRBracket,  // ]
  kLParen,    // (
  kRParen,    // )
  kComma,     // ,
  kEqual,     // =
  kColon,     // :
  kArrow,     // ->
  kLessEq,    // <=
  kEllipsis,  // ... (elided constant)
  kOther,     // Any other single punctuation character the grammar uses: ? * # < > + / ! @ ^ | ~ ;
};

// Eight bytes: a 4 MB module has about a million tokens, and every byte of them is memory the
// parser must touch (and, in a fresh process, fault in).
struct Token {
  // Leaves the token unset: the lexer makes room for tokens a few thousand at a time and then
  // writes each one, and zeroing that room first cost 8% of the lexing's instructions.
  Token() noexcept {}  // NOLINT(cppcoreguidelines-pro-type-member-init)
  // The kind and length are written as one 32-bit word, in the layout GCC and Clang give the
  // two bit-fields on little-endian targets (kind in the low byte; TokenTest checks it). Set as
  // fields, they were a byte store, a load of it back and a second store: 5% of the lexing's
  // time.
  Token(TokenKind k, uint32_t bytes, uint32_t at) : offset(at) {
    const uint32_t head = static_cast<uint32_t>(k) | (bytes << 8);
    std::memcpy(static_cast<void*>(this), &head, sizeof head);
  }

  TokenKind kind : 8;
  uint32_t length : 24;  // Byte length in the source; the lexer refuses longer tokens.
  uint32_t offset;       // Byte offset into the source.
};
static_assert(sizeof(Token) == 8);
inline constexpr uint32_t kMaxTokenBytes = (uint32_t{1} << 24) - 1;

// True for tokens that must be separated by a space when printed next to each other.
inline bool IsWordLike(TokenKind k) {
  return k == TokenKind::kIdent || k == TokenKind::kInt || k == TokenKind::kFloat ||
         k == TokenKind::kWord || k == TokenKind::kString;
}

// True when printing `prev` and `next` with nothing between them could lex differently (two words
// merging, `-` `1` becoming -1, `.` `5` becoming .5, `/` `/` starting a comment, a name taking in
// the dots of a `...` after it). The canonical printer puts a space there so that its text reads
// back to the same tokens.
inline bool NeedsSpaceBetween(TokenKind prev, TokenKind next) {
  if (prev == TokenKind::kEnd) return false;
  return (IsWordLike(prev) && IsWordLike(next)) || prev == TokenKind::kOther ||
         next == TokenKind::kOther || (prev == TokenKind::kEllipsis && next == TokenKind::kFloat) ||
         (IsWordLike(prev) && next == TokenKind::kEllipsis);
}

}  // namespace hlocache::hlo
