// Internal to the HLO parser (compiler/hlo/parser*.cc): the recursive-descent parser over the
// lexer's tokens. The module, computation and instruction grammar is in parser.cc; literals,
// shapes and layouts in parser_shapes.cc. The contract is compiler/hlo/parser.h's.
#pragma once

#include "compiler/hlo/parser.h"

#include "compiler/hlo/shape_inference.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include "common/huge_pages.h"
#include "compiler/hlo/attributes.h"
#include "compiler/hlo/lexer.h"
#include "compiler/hlo/name_table.h"
#include "compiler/hlo/shape_inference.h"

namespace hlocache::hlo::parser_internal {

inline constexpr int kMaxNesting = 200;  // Brackets in a value, tuple shapes, nested operands.
inline constexpr size_t kMaxDims = 64;  // Dimensions of one array shape (layouts use 64-bit masks).

class Parser {
 public:
  // `groups`: the lexer's top-level groups of m.tokens (sizes for the computations' bodies).
  // `listener` (may be null) is told of the module's parts as they are parsed.
  Parser(Module& m, const std::vector<TopLevelGroup>& groups, ParseListener* listener)
      : m_(m),
        listener_(listener),
        groups_(groups),
        toks_(m.tokens.data()),
        source_(m.source().data()),
        token_count_(static_cast<uint32_t>(m.tokens.size())),
        names_(m.source()),
        comp_index_(m.source()),
        shape_memo_index_(m.source()) {}

  Status Run() {
    if (!ParseModuleBody()) return std::move(error_);
    return Status::Ok();
  }
  // Whether an instruction was written without its shape (InferMissingShapes has work).
  bool AnyShapeMissing() const { return any_shape_missing_; }

 private:
  // ---- token helpers ----
  // The token stream ends with one kEnd, which Advance never moves past: looking beyond it gives
  // it again. pos_ is always a token's index (every position the parser jumps to is one it
  // has seen), so the current token needs no bounds check: the check in every Peek was a
  // twentieth of a large module's parse.
  const Token& Peek() const { return toks_[pos_]; }
  const Token& Peek(uint32_t ahead) const {
    const uint32_t i = pos_ + ahead;
    return toks_[i < token_count_ ? i : token_count_ - 1];
  }
  TokenKind Kind() const { return Peek().kind; }
  TokenKind Kind(uint32_t ahead) const { return Peek(ahead).kind; }
  // Every token lies inside the source (the lexer made it from there): no bounds check.
  std::string_view Text() const { return TextOf(Peek()); }
  std::string_view Text(uint32_t ahead) const { return TextOf(Peek(ahead)); }
  std::string_view TextOf(const Token& t) const { return {source_ + t.offset, t.length}; }
  bool AtIdent(std::string_view word) const {
    return Kind() == TokenKind::kIdent && Text() == word;
  }
  void Advance() { pos_ += Peek().kind != TokenKind::kEnd ? 1 : 0; }

  // The error paths are cold and out of line: in line, their string building kept the small
  // checks that call them (Expect, a call per punctuation token) from being inlined themselves.
  [[gnu::cold, gnu::noinline]] bool Fail(uint32_t offset, std::string_view message) {
    if (error_.ok()) error_ = ErrorAt(m_.filename(), m_.source(), offset, message);
    return false;
  }
  [[gnu::cold, gnu::noinline]] bool FailHere(std::string_view message) {
    std::string msg(message);
    if (Kind() == TokenKind::kEnd) {
      msg += ", got end of file";
    } else {
      std::string_view got = Text();
      if (got.size() > 40) got = got.substr(0, 40);
      msg += ", got '";
      msg += got;
      msg += "'";
    }
    return Fail(Peek().offset, msg);
  }
  bool Expect(TokenKind kind, std::string_view what) {
    if (Kind() != kind) [[unlikely]]
      return ExpectFailed(what);
    Advance();
    return true;
  }
  [[gnu::cold, gnu::noinline]] bool ExpectFailed(std::string_view what) {
    return FailHere(std::string("expected ") + std::string(what));
  }

  static std::string_view StripPercent(std::string_view name) {
    return (!name.empty() && name[0] == '%') ? name.substr(1) : name;
  }

  bool ParseInt(int64_t& out) {
    if (Kind() != TokenKind::kInt) return FailHere("expected an integer");
    std::string_view t = Text();
    // Dimensions, layouts and parameter numbers are short decimals: read in line, without the
    // library call (2% of a large module's parse). Anything else goes to from_chars.
    if (!t.empty() && t.size() <= 18) {
      int64_t value = 0;
      size_t k = 0;
      for (; k < t.size() && t[k] >= '0' && t[k] <= '9'; ++k) value = value * 10 + (t[k] - '0');
      if (k == t.size()) {
        out = value;
        Advance();
        return true;
      }
    }
    auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), out);
    if (ec != std::errc() || p != t.data() + t.size()) {
      return FailHere("integer out of range");
    }
    Advance();
    return true;
  }

  // Skips one balanced group starting at an opening bracket. Leaves pos_ after the closer.
  bool SkipGroup() {
    // The closer each open bracket expects, innermost last, in a stack on the stack: one more
    // than kMaxNesting fits, for the check that refuses it. Values (metadata, stack frame
    // tables) are a tenth of a module's tokens; a vector's checks on each push were most of
    // the cost of skipping them.
    std::array<TokenKind, kMaxNesting + 1> closers;
    size_t open = 0;
    uint32_t pos = pos_;  // Never past the kEnd token, where the walk stops.
    const auto fail_at = [&](std::string_view message) {
      pos_ = pos;
      return FailHere(message);
    };
    do {
      const TokenKind k = toks_[pos].kind;
      switch (k) {
        case TokenKind::kLBrace:
          closers[open++] = TokenKind::kRBrace;
          break;
        case TokenKind::kLBracket:
          closers[open++] = TokenKind::kRBracket;
          break;
        case TokenKind::kLParen:
          closers[open++] = TokenKind::kRParen;
          break;
        case TokenKind::kRBrace:
        case TokenKind::kRBracket:
        case TokenKind::kRParen:
          if (open == 0 || closers[open - 1] != k) return fail_at("unbalanced brackets");
          --open;
          break;
        case TokenKind::kEnd:
          return fail_at("unbalanced brackets: unexpected end of file inside a value");
        default:
          break;
      }
      if (open > static_cast<size_t>(kMaxNesting)) return fail_at("value nested too deeply");
      ++pos;
    } while (open != 0);
    pos_ = pos;
    return true;
  }

  static bool IsOpen(TokenKind k) {
    return k == TokenKind::kLBrace || k == TokenKind::kLBracket || k == TokenKind::kLParen;
  }

  bool ParseModuleBody();
  bool ParseModuleAttribute();
  // entry_computation_layout={(shape, ...)->shape}
  bool ParseEntryLayout(const Attribute& attr);
  // FileNames / FunctionNames / FileLocations / StackFrames: debug tables, skipped.
  bool SkipStackFrameTables();
  bool ParseComputation();
  // Instructions in the body that starts at pos_: names followed by '=' at bracket depth 0 that
  // do not follow a comma (those are attributes). Reserving this many avoids moving every
  // instruction as the vector grows. A pass over the body: only the fallback of
  // InstructionsInGroup, for a body the lexer did not count.
  size_t CountInstructionsAhead() const;
  // The same, from the lexer's count for the group whose `{` is token `open`, when it has one.
  size_t InstructionsInGroup(uint32_t open);
  // Fills comp.parameters from the parameters AddInstruction noted, in textual order.
  bool CollectParameters(Computation& comp);
  bool ParseInstruction(Computation& comp, bool& saw_root);
  // Appends `inst` to `comp`, noting on the way what is checked after the body: its index when
  // it is a parameter, and a shape left to inference. Passes over every instruction for these
  // read a large module's instructions from memory once more each.
  void AddInstruction(Computation& comp, Instruction&& inst);
  // A new instruction at the end of `comp`, to be parsed in place; InstructionPlaced once it is
  // whole (the same notes as AddInstruction's).
  Instruction& PlaceInstruction(Computation& comp);
  void InstructionPlaced(Computation& comp);
  bool AtShapeStart() const;
  // shape? opcode '(' operands ')'. Attributes are parsed by the caller.
  bool ParseInstructionRhs(Computation& comp, Instruction& inst, int depth);
  bool ParseOperand(Computation& comp, int32_t& operand, int depth);
  bool ParseLiteral(Instruction& inst, uint32_t open_offset);
  bool IsScalarToken(uint32_t i) const;
  // Checks that an array literal's nesting and element counts match the shape. Scalars may be
  // written bare or as (re, im) for complex types; nan payloads `nan(0x..)` are accepted.
  bool ValidateLiteral(const Shape& shape, TokenRange range);
  bool ParseInstructionAttribute();
  // An attribute value is one unit (a token or a bracketed group), continued only by the forms
  // XLA prints: more brackets (`f32[2]{0}`, `[2,4]<=[8]T(1,0)`), `<=` and `->` (dim_labels) with
  // the unit after them, and a word after a group (`literal=s32[] 1`). Anything else after a
  // value is an error, not part of it.
  bool SkipAttributeValue(const Attribute& attr);
  // Value `name` or `{name, name, ...}`: resolves each name to a computation or an instruction.
  bool ResolveNames(const Attribute& attr, bool computations, std::vector<int32_t>& out);
  // A shape, from the memo when its text was parsed before (shape_memo_). `text_id`, when
  // given, is set to the shape's memo entry, or -1 when the memo does not hold it.
  bool ParseShape(Shape& shape, int depth, int32_t* text_id = nullptr);
  // Where the array shape at pos_ ends (the token after it) if it is a plain one: the element
  // type, then dimensions (numbers, `<=` bounds, `?`) and at most a layout of numbers; 0 for
  // any other (a tuple, a layout with tiles or a memory space, a malformed one).
  uint32_t PlainArrayShapeEnd() const;
  // An array shape: the type, dimensions and layout, parsed from the tokens.
  bool ParseArrayShape(Shape& shape);
  // Elements of the list that starts at pos_ and ends at the ')' closing it: commas at its own
  // depth, plus one. A reservation hint only.
  size_t CountListAhead() const;
  bool ParseLayout(Shape& shape);

  Module& m_;
  ParseListener* listener_;
  const std::vector<TopLevelGroup>& groups_;
  size_t next_group_ = 0;  // groups_ before this one open before pos_.
  const Token* toks_;      // m_.tokens, which the parser does not change.
  const char* source_;     // m_.source()'s bytes.
  uint32_t token_count_;
  uint32_t pos_ = 0;
  // The attributes of the instruction being parsed, and the computations and instructions they
  // name, gathered here (kept between instructions: no allocation each) and then copied into
  // the Module at once, exactly sized.
  std::vector<Attribute> attributes_;
  std::vector<int32_t> callees_;
  std::vector<int32_t> control_predecessors_;
  std::vector<int32_t> parameters_;  // The current computation's parameter instructions.
  bool any_shape_missing_ = false;
  // An instruction is being parsed in its place (ParseInstruction), and an operand of it turned
  // out to be an instruction of its own, which must be placed before it.
  bool parsing_in_place_ = false;
  bool nested_operand_ = false;
  Status error_;
  NameTable names_;  // Current computation's scope.
  // The name defined last in it, and its index (-1 for none): half of a large module's
  // operands name the instruction just before theirs (Mixtral's, Gemma's), which a comparison
  // finds without hashing the name and probing the table.
  std::string_view last_defined_;
  int32_t last_defined_index_ = -1;
  NameTable comp_index_;  // Computations defined so far.
  // Plain array shapes parsed so far, by their source text (`bf16[8,128]{1,0}`,
  // Module::SourceText: the same text is the same tokens, so the same shape): a module writes
  // tens of thousands of shapes in one or two hundred texts, so nearly every shape is a copy of
  // one parsed before. Indexes shape_memo_.
  NameTable shape_memo_index_;
  std::vector<Shape> shape_memo_;
  // The text of the shape last found in or added to the memo, and its index there: most lines
  // repeat the shape of the line before (two in three of Mixtral's), which a comparison finds
  // without hashing the text and probing the index.
  std::string_view last_shape_text_;
  int32_t last_shape_id_ = -1;
};

}  // namespace hlocache::hlo::parser_internal
