#include "compiler/hlo/parser.h"

#include "compiler/hlo/shape_inference.h"

#include <algorithm>
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

namespace hlocache::hlo {
namespace {

constexpr int kMaxNesting = 200;  // Brackets in a value, tuple shapes, nested operands.

class Parser {
 public:
  explicit Parser(Module& m)
      : m_(m), toks_(m.tokens), names_(m.source()), comp_index_(m.source()) {}

  Status Run() {
    if (!ParseModuleBody()) return std::move(error_);
    return Status::Ok();
  }

 private:
  // ---- token helpers ----
  const Token& Peek(uint32_t ahead = 0) const {
    uint32_t i = pos_ + ahead;
    return i < toks_.size() ? toks_[i] : toks_.back();
  }
  TokenKind Kind(uint32_t ahead = 0) const { return Peek(ahead).kind; }
  std::string_view Text(uint32_t ahead = 0) const { return m_.TokenText(Peek(ahead)); }
  bool AtIdent(std::string_view word) const {
    return Kind() == TokenKind::kIdent && Text() == word;
  }
  void Advance() {
    if (pos_ + 1 < toks_.size()) ++pos_;
  }

  bool Fail(uint32_t offset, std::string_view message) {
    if (error_.ok()) error_ = ErrorAt(m_.filename(), m_.source(), offset, message);
    return false;
  }
  bool FailHere(std::string_view message) {
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
    if (Kind() != kind) return FailHere(std::string("expected ") + std::string(what));
    Advance();
    return true;
  }

  static std::string_view StripPercent(std::string_view name) {
    return (!name.empty() && name[0] == '%') ? name.substr(1) : name;
  }

  bool ParseInt(int64_t& out) {
    if (Kind() != TokenKind::kInt) return FailHere("expected an integer");
    std::string_view t = Text();
    auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), out);
    if (ec != std::errc() || p != t.data() + t.size()) {
      return FailHere("integer out of range");
    }
    Advance();
    return true;
  }

  // Skips one balanced group starting at an opening bracket. Leaves pos_ after the closer.
  bool SkipGroup() {
    std::vector<TokenKind> closers;
    do {
      switch (Kind()) {
        case TokenKind::kLBrace:
          closers.push_back(TokenKind::kRBrace);
          break;
        case TokenKind::kLBracket:
          closers.push_back(TokenKind::kRBracket);
          break;
        case TokenKind::kLParen:
          closers.push_back(TokenKind::kRParen);
          break;
        case TokenKind::kRBrace:
        case TokenKind::kRBracket:
        case TokenKind::kRParen:
          if (closers.empty() || closers.back() != Kind()) return FailHere("unbalanced brackets");
          closers.pop_back();
          break;
        case TokenKind::kEnd:
          return FailHere("unbalanced brackets: unexpected end of file inside a value");
        default:
          break;
      }
      if (closers.size() > kMaxNesting) return FailHere("value nested too deeply");
      Advance();
    } while (!closers.empty());
    return true;
  }

  static bool IsOpen(TokenKind k) {
    return k == TokenKind::kLBrace || k == TokenKind::kLBracket || k == TokenKind::kLParen;
  }

  // ---- module ----
  bool ParseModuleBody() {
    if (AtIdent("HloModule")) {
      Advance();
      if (Kind() != TokenKind::kIdent) return FailHere("expected a module name after HloModule");
      m_.name = StripPercent(Text());
      Advance();
      if (Kind() == TokenKind::kColon) Advance();  // XLA's lexer reads `name:` as a name too.
      while (Kind() == TokenKind::kComma) {
        Advance();
        if (!ParseModuleAttribute()) return false;
      }
    }
    if (!SkipStackFrameTables()) return false;
    if (Kind() == TokenKind::kEnd) return FailHere("expected a computation");
    while (Kind() != TokenKind::kEnd) {
      if (!ParseComputation()) return false;
    }
    // Entry: the one marked ENTRY, else the last computation.
    if (m_.entry < 0) m_.entry = static_cast<int32_t>(m_.computations.size()) - 1;
    return true;
  }

  bool ParseModuleAttribute() {
    if (Kind() != TokenKind::kIdent || Kind(1) != TokenKind::kEqual) {
      return FailHere("expected a module attribute 'name=value'");
    }
    Attribute attr{Text(), {}, Peek().offset};
    if (!IsKnownModuleAttribute(attr.name)) {
      return Fail(attr.offset, "unknown module attribute '" + std::string(attr.name) + "'");
    }
    for (const Attribute& a : m_.attributes) {
      if (a.name == attr.name) {
        return Fail(attr.offset, "duplicate module attribute '" + std::string(attr.name) + "'");
      }
    }
    Advance();
    Advance();
    attr.value.begin = pos_;
    if (IsOpen(Kind())) {
      if (!SkipGroup()) return false;
    } else if (Kind() == TokenKind::kIdent || Kind() == TokenKind::kInt ||
               Kind() == TokenKind::kFloat || Kind() == TokenKind::kString ||
               Kind() == TokenKind::kWord) {
      Advance();
    } else {
      return FailHere("expected a value for module attribute '" + std::string(attr.name) + "'");
    }
    attr.value.end = pos_;
    m_.attributes.push_back(attr);
    if (attr.name == "entry_computation_layout") return ParseEntryLayout(attr);
    return true;
  }

  // entry_computation_layout={(shape, ...)->shape}
  bool ParseEntryLayout(const Attribute& attr) {
    const uint32_t after = pos_;
    pos_ = attr.value.begin;
    ProgramShape program;
    if (!Expect(TokenKind::kLBrace, "'{' in entry_computation_layout") ||
        !Expect(TokenKind::kLParen, "'(' in entry_computation_layout")) {
      return false;
    }
    while (Kind() != TokenKind::kRParen) {
      program.parameters.emplace_back();
      if (!ParseShape(program.parameters.back(), 0)) return false;
      if (Kind() == TokenKind::kComma) {
        Advance();
      } else if (Kind() != TokenKind::kRParen) {
        return FailHere("expected ',' or ')' in entry_computation_layout");
      }
    }
    Advance();
    if (!Expect(TokenKind::kArrow, "'->' in entry_computation_layout") ||
        !ParseShape(program.result, 0) ||
        !Expect(TokenKind::kRBrace, "'}' closing entry_computation_layout")) {
      return false;
    }
    if (pos_ != after) return FailHere("unexpected tokens in entry_computation_layout");
    m_.entry_computation_layout = std::move(program);
    return true;
  }

  // FileNames / FunctionNames / FileLocations / StackFrames: debug tables, skipped.
  bool SkipStackFrameTables() {
    while (AtIdent("FileNames") || AtIdent("FunctionNames") || AtIdent("FileLocations") ||
           AtIdent("StackFrames")) {
      Advance();
      while (Kind() == TokenKind::kInt) {
        Advance();
        if (Kind() == TokenKind::kString) {
          Advance();
        } else if (Kind() == TokenKind::kLBrace) {
          if (!SkipGroup()) return false;
        } else {
          return FailHere("expected a string or {...} entry in a stack frame table");
        }
      }
    }
    return true;
  }

  // ---- computations ----
  bool ParseComputation() {
    Computation comp;
    comp.offset = Peek().offset;
    bool is_entry = false;
    if (AtIdent("ENTRY")) {
      is_entry = true;
      Advance();
    }
    if (Kind() != TokenKind::kIdent) return FailHere("expected a computation name");
    comp.name = StripPercent(Text());
    const uint32_t name_offset = Peek().offset;
    if (comp_index_.Find(comp.name) >= 0) {
      return Fail(name_offset, "duplicate computation name '" + std::string(comp.name) + "'");
    }
    Advance();
    if (Kind() == TokenKind::kLParen) {
      // Program shape: derived information, parsed for validity and dropped.
      Advance();
      while (Kind() != TokenKind::kRParen) {
        if (Kind() != TokenKind::kIdent || Kind(1) != TokenKind::kColon) {
          return FailHere("expected 'name: shape' in the computation's parameter list");
        }
        Advance();
        Advance();
        Shape ignored;
        if (!ParseShape(ignored, 0)) return false;
        if (Kind() == TokenKind::kComma) {
          Advance();
        } else if (Kind() != TokenKind::kRParen) {
          return FailHere("expected ',' or ')' in the computation's parameter list");
        }
      }
      Advance();
      if (!Expect(TokenKind::kArrow, "'->' after the computation's parameters")) return false;
      Shape ignored;
      if (!ParseShape(ignored, 0)) return false;
    }
    const uint32_t open_offset = Peek().offset;
    if (!Expect(TokenKind::kLBrace, "'{' to open the computation body")) return false;
    names_.Clear();
    const size_t expected = CountInstructionsAhead();
    names_.Reserve(expected);
    comp.instructions.reserve(expected);
    AdviseHugePages(comp.instructions.data(), comp.instructions.capacity() * sizeof(Instruction));
    bool saw_root = false;
    while (Kind() != TokenKind::kRBrace) {
      if (Kind() == TokenKind::kEnd) {
        return Fail(open_offset, "unexpected end of file: computation '" + std::string(comp.name) +
                                     "' is never closed with '}'");
      }
      if (!ParseInstruction(comp, saw_root)) return false;
    }
    Advance();
    if (comp.instructions.empty()) {
      return Fail(open_offset, "computation '" + std::string(comp.name) + "' has no instructions");
    }
    if (comp.root < 0) comp.root = static_cast<int32_t>(comp.instructions.size()) - 1;
    if (Kind() == TokenKind::kComma && Kind(1) == TokenKind::kIdent &&
        Text(1) == "execution_thread") {
      Advance();
      Advance();
      if (!Expect(TokenKind::kEqual, "'=' after execution_thread")) return false;
      if (Kind() != TokenKind::kString) return FailHere("expected a string execution thread");
      comp.execution_thread = {pos_, pos_ + 1};
      Advance();
    }
    if (!CollectParameters(comp)) return false;
    const auto index = static_cast<int32_t>(m_.computations.size());
    if (is_entry) {
      if (m_.entry >= 0) return Fail(comp.offset, "more than one ENTRY computation");
      m_.entry = index;
    }
    comp_index_.Insert(comp.name, index);
    m_.computations.push_back(std::move(comp));
    return true;
  }

  // Instructions in the body that starts at pos_: names followed by '=' at bracket depth 0 that
  // do not follow a comma (those are attributes). Reserving this many avoids moving every
  // instruction as the vector grows.
  size_t CountInstructionsAhead() const {
    size_t count = 0;
    int depth = 0;
    for (size_t i = pos_; i + 1 < toks_.size(); ++i) {
      const TokenKind k = toks_[i].kind;
      if (k == TokenKind::kLBrace || k == TokenKind::kLParen || k == TokenKind::kLBracket) {
        ++depth;
      } else if (k == TokenKind::kRBrace || k == TokenKind::kRParen || k == TokenKind::kRBracket) {
        if (--depth < 0) break;
      } else if (depth == 0 && k == TokenKind::kIdent && toks_[i + 1].kind == TokenKind::kEqual &&
                 i > 0 && toks_[i - 1].kind != TokenKind::kComma) {
        ++count;
      }
    }
    return count + 1;
  }

  bool CollectParameters(Computation& comp) {
    for (size_t i = 0; i < comp.instructions.size(); ++i) {
      const Instruction& inst = comp.instructions[i];
      if (inst.opcode.opcode != Opcode::kParameter || inst.opcode.phase != AsyncPhase::kNone) {
        continue;
      }
      const int64_t n = inst.parameter_number;
      if (n >= static_cast<int64_t>(comp.instructions.size())) {
        return Fail(inst.offset, "parameter number " + std::to_string(n) +
                                     " is out of range for a computation of " +
                                     std::to_string(comp.instructions.size()) + " instructions");
      }
      if (comp.parameters.size() <= static_cast<size_t>(n)) comp.parameters.resize(n + 1, -1);
      if (comp.parameters[n] >= 0) {
        return Fail(inst.offset, "duplicate parameter number " + std::to_string(n));
      }
      comp.parameters[n] = static_cast<int32_t>(i);
    }
    for (size_t n = 0; n < comp.parameters.size(); ++n) {
      if (comp.parameters[n] < 0) {
        return Fail(comp.offset, "computation '" + std::string(comp.name) + "' lacks parameter " +
                                     std::to_string(n));
      }
    }
    return true;
  }

  // ---- instructions ----
  bool ParseInstruction(Computation& comp, bool& saw_root) {
    Instruction inst;
    inst.offset = Peek().offset;
    bool is_root = false;
    if (AtIdent("ROOT")) {
      is_root = true;
      if (saw_root) return Fail(inst.offset, "more than one ROOT instruction in a computation");
      saw_root = true;
      Advance();
    }
    if (Kind() != TokenKind::kIdent || Kind(1) != TokenKind::kEqual) {
      return FailHere("expected an instruction 'name = opcode(...)'");
    }
    inst.name = StripPercent(Text());
    const uint32_t name_offset = Peek().offset;
    if (names_.Find(inst.name) >= 0) {
      return Fail(name_offset, "duplicate instruction name '" + std::string(inst.name) + "'");
    }
    Advance();
    Advance();
    if (!ParseInstructionRhs(comp, inst, 0)) return false;
    if (Kind() == TokenKind::kComma) inst.attributes.reserve(CountAttributesAhead());
    while (Kind() == TokenKind::kComma) {
      Advance();
      if (!ParseInstructionAttribute(inst)) return false;
    }
    const auto index = static_cast<int32_t>(comp.instructions.size());
    names_.Insert(inst.name, index);
    if (is_root) comp.root = index;
    comp.instructions.push_back(std::move(inst));
    return true;
  }

  bool AtShapeStart() const {
    if (Kind() == TokenKind::kLParen) return true;
    if (Kind() != TokenKind::kIdent) return false;
    std::string_view t = Text();
    if (t == "b" && Kind(1) == TokenKind::kLParen) return true;
    return Kind(1) == TokenKind::kLBracket && PrimitiveTypeFromName(t).has_value();
  }

  // shape? opcode '(' operands ')'. Attributes are parsed by the caller.
  bool ParseInstructionRhs(Computation& comp, Instruction& inst, int depth) {
    if (depth > kMaxNesting) return FailHere("operands nested too deeply");
    if (AtShapeStart()) {
      if (!ParseShape(inst.shape, 0)) return false;
      inst.shape_written = true;
    }
    if (Kind() != TokenKind::kIdent) return FailHere("expected an opcode");
    if (Kind(1) == TokenKind::kLBracket) {
      return Fail(Peek().offset, "unknown element type '" + std::string(Text()) + "'");
    }
    auto spelling = ParseOpcodeSpelling(Text());
    if (!spelling) {
      return Fail(Peek().offset, "unknown opcode '" + std::string(Text()) + "'");
    }
    inst.opcode = *spelling;
    Advance();
    const uint32_t open_offset = Peek().offset;
    if (!Expect(TokenKind::kLParen, "'(' after the opcode")) return false;
    if (inst.opcode.phase == AsyncPhase::kNone && inst.opcode.opcode == Opcode::kConstant) {
      return ParseLiteral(inst, open_offset);
    }
    if (inst.opcode.phase == AsyncPhase::kNone && inst.opcode.opcode == Opcode::kParameter) {
      if (!ParseInt(inst.parameter_number)) return false;
      if (inst.parameter_number < 0) return Fail(inst.offset, "negative parameter number");
      return Expect(TokenKind::kRParen, "')' after the parameter number");
    }
    inst.operands.reserve(CountListAhead());
    while (Kind() != TokenKind::kRParen) {
      int32_t operand = -1;
      if (!ParseOperand(comp, operand, depth)) return false;
      inst.operands.push_back(operand);
      if (Kind() == TokenKind::kComma) {
        Advance();
      } else if (Kind() != TokenKind::kRParen) {
        return FailHere("expected ',' or ')' in the operand list");
      }
    }
    Advance();
    return true;
  }

  bool ParseOperand(Computation& comp, int32_t& operand, int depth) {
    // Printed operand shapes (older dumps) are derived information: parsed, checked, dropped.
    const uint32_t start = pos_;
    if (AtShapeStart()) {
      Shape ignored;
      if (!ParseShape(ignored, 0)) return false;
    }
    if (Kind() != TokenKind::kIdent) return FailHere("expected an operand name");
    if (Kind(1) == TokenKind::kLParen && ParseOpcodeSpelling(Text()).has_value()) {
      // Nested anonymous instruction: `add(f32[] multiply(x, y), z)`.
      pos_ = start;
      Instruction nested;
      nested.offset = Peek().offset;
      if (!ParseInstructionRhs(comp, nested, depth + 1)) return false;
      operand = static_cast<int32_t>(comp.instructions.size());
      comp.instructions.push_back(std::move(nested));
      return true;
    }
    std::string_view name = StripPercent(Text());
    operand = names_.Find(name);
    if (operand < 0) {
      return Fail(Peek().offset, "undefined operand '" + std::string(Text()) +
                                     "' (operands must be defined before use)");
    }
    Advance();
    return true;
  }

  bool ParseLiteral(Instruction& inst, uint32_t open_offset) {
    // The literal runs to the ')' matching constant's '('.
    inst.literal.begin = pos_;
    int depth = 0;
    while (true) {
      TokenKind k = Kind();
      if (k == TokenKind::kEnd) {
        return Fail(open_offset, "unexpected end of file inside a constant literal");
      }
      if (k == TokenKind::kRParen && depth == 0) break;
      if (IsOpen(k)) {
        if (++depth > kMaxNesting) return FailHere("constant literal nested too deeply");
      } else if (k == TokenKind::kRParen || k == TokenKind::kRBrace || k == TokenKind::kRBracket) {
        --depth;
      } else if (k == TokenKind::kEllipsis) {
        inst.literal_elided = true;
      }
      Advance();
    }
    inst.literal.end = pos_;
    Advance();
    if (inst.literal.empty()) return Fail(open_offset, "constant has no literal");
    if (inst.literal_elided) {
      // XLA elides a large literal whole, as `{...}`; `...` anywhere else is not a literal.
      const uint32_t b = inst.literal.begin;
      if (inst.literal.end - b != 3 || toks_[b].kind != TokenKind::kLBrace ||
          toks_[b + 2].kind != TokenKind::kRBrace) {
        return Fail(toks_[b].offset, "'...' is only valid as a whole elided literal {...}");
      }
    }
    if (!inst.shape_written) return Fail(inst.offset, "constant needs a shape");
    if (inst.literal_elided) return true;
    return ValidateLiteral(inst.shape, inst.literal);
  }

  bool IsScalarToken(uint32_t i) const {
    const Token& t = toks_[i];
    if (t.kind == TokenKind::kInt || t.kind == TokenKind::kFloat) return true;
    if (t.kind != TokenKind::kIdent) return false;
    std::string_view s = m_.TokenText(t);
    return s == "true" || s == "false" || s == "inf" || s == "nan";
  }

  // Checks that an array literal's nesting and element counts match the shape. Scalars may be
  // written bare or as (re, im) for complex types; nan payloads `nan(0x..)` are accepted.
  bool ValidateLiteral(const Shape& shape, TokenRange range) {
    if (!shape.IsArray() || !shape.dynamic.empty()) return true;  // Tuples: checked loosely.
    uint32_t i = range.begin;
    const size_t rank = shape.dims.size();
    std::vector<int64_t> counts(rank + 1, 0);
    size_t depth = 0;
    auto fail = [&](uint32_t at, const std::string& msg) {
      return Fail(toks_[at].offset, msg + " for a constant of shape " + CanonicalShapeText(shape));
    };
    auto scalar = [&]() -> bool {
      if (toks_[i].kind == TokenKind::kLParen) {  // Complex (re, im).
        if (i + 4 >= range.end || !IsScalarToken(i + 1) || toks_[i + 2].kind != TokenKind::kComma ||
            !IsScalarToken(i + 3) || toks_[i + 4].kind != TokenKind::kRParen) {
          return fail(i, "malformed complex value");
        }
        i += 5;
        return true;
      }
      if (!IsScalarToken(i)) return fail(i, "expected a number");
      ++i;
      if (i < range.end && toks_[i].kind == TokenKind::kLParen &&
          m_.TokenText(toks_[i - 1]) == "nan") {
        i += 3;  // nan(0x...)
      }
      return true;
    };
    if (rank == 0 || (range.end - range.begin == 1 && IsScalarToken(range.begin))) {
      // A bare scalar for an array shape fills the array, as XLA's parser allows.
      if (!scalar()) return false;
      if (i != range.end) return fail(i, "extra tokens after a scalar");
      return true;
    }
    while (i < range.end) {
      TokenKind k = toks_[i].kind;
      if (k == TokenKind::kLBrace) {
        if (depth == rank) return fail(i, "too many nested braces");
        ++counts[depth];
        ++depth;
        counts[depth] = 0;
        ++i;
      } else if (k == TokenKind::kRBrace) {
        if (depth == 0) return fail(i, "unbalanced '}'");
        if (counts[depth] != shape.dims[depth - 1]) {
          return fail(i, "dimension " + std::to_string(depth - 1) + " has " +
                             std::to_string(counts[depth]) + " elements, expected " +
                             std::to_string(shape.dims[depth - 1]));
        }
        --depth;
        ++i;
      } else if (k == TokenKind::kComma) {
        ++i;
      } else {
        if (depth != rank) return fail(i, "a value at the wrong nesting depth");
        ++counts[depth];
        if (!scalar()) return false;
      }
    }
    if (depth != 0 || counts[0] != 1) return fail(range.begin, "malformed array literal");
    return true;
  }

  bool ParseInstructionAttribute(Instruction& inst) {
    if (Kind() != TokenKind::kIdent || Kind(1) != TokenKind::kEqual) {
      return FailHere("expected an attribute 'name=value'");
    }
    Attribute attr{Text(), {}, Peek().offset};
    if (!IsKnownInstructionAttribute(attr.name)) {
      return Fail(attr.offset, "unknown attribute '" + std::string(attr.name) + "'");
    }
    for (const Attribute& a : inst.attributes) {
      if (a.name == attr.name) {
        return Fail(attr.offset, "duplicate attribute '" + std::string(attr.name) + "'");
      }
    }
    Advance();
    Advance();
    attr.value.begin = pos_;
    if (!SkipAttributeValue(attr)) return false;
    attr.value.end = pos_;
    if (IsCalleeAttribute(attr.name)) {
      if (!ResolveNames(attr, /*computations=*/true, inst.callees)) return false;
    } else if (attr.name == "control-predecessors") {
      if (!ResolveNames(attr, /*computations=*/false, inst.control_predecessors)) {
        return false;
      }
    }
    inst.attributes.push_back(attr);
    return true;
  }

  // An attribute value is one unit (a token or a bracketed group), continued only by the forms
  // XLA prints: more brackets (`f32[2]{0}`, `[2,4]<=[8]T(1,0)`), `<=` and `->` (dim_labels) with
  // the unit after them, and a word after a group (`literal=s32[] 1`). Anything else after a
  // value is an error, not part of it.
  bool SkipAttributeValue(const Attribute& attr) {
    const uint32_t begin = pos_;
    bool need_unit = true;
    bool after_group = false;
    while (true) {
      const TokenKind k = Kind();
      if (need_unit) {
        after_group = IsOpen(k);
        if (IsOpen(k)) {
          if (!SkipGroup()) return false;
        } else if (IsWordLike(k) || k == TokenKind::kOther) {
          Advance();
        } else {
          break;
        }
        need_unit = false;
        continue;
      }
      if (IsOpen(k)) {
        need_unit = true;
      } else if (after_group && IsWordLike(k) && Kind(1) != TokenKind::kEqual &&
                 !(k == TokenKind::kIdent && StripPercent(Text()) == "ROOT")) {
        // (`%ROOT` prints as `ROOT`, which would start the next instruction on reparse.)
        need_unit = true;
      } else if (k == TokenKind::kLessEq || k == TokenKind::kArrow) {
        Advance();
        need_unit = true;
      } else if (k == TokenKind::kIdent && Kind(1) == TokenKind::kLParen && Text() == "T") {
        Advance();  // Iota transpose: [2,4]<=[4,2]T(1,0).
        need_unit = true;
      } else {
        break;
      }
    }
    if (pos_ == begin) {
      return Fail(attr.offset, "attribute '" + std::string(attr.name) + "' has no value");
    }
    if (need_unit) {
      return FailHere("incomplete value for attribute '" + std::string(attr.name) + "'");
    }
    return true;
  }

  // Value `name` or `{name, name, ...}`: resolves each name to a computation or an instruction.
  bool ResolveNames(const Attribute& attr, bool computations, std::vector<int32_t>& out) {
    uint32_t i = attr.value.begin;
    uint32_t end = attr.value.end;
    if (toks_[i].kind == TokenKind::kLBrace) {
      if (toks_[end - 1].kind != TokenKind::kRBrace) {
        return Fail(toks_[i].offset, "malformed list in '" + std::string(attr.name) + "'");
      }
      ++i;
      --end;
    }
    bool expect_name = true;
    for (; i < end; ++i) {
      const Token& t = toks_[i];
      if (!expect_name) {
        if (t.kind != TokenKind::kComma) {
          return Fail(t.offset, "expected ',' between names in '" + std::string(attr.name) + "'");
        }
        expect_name = true;
        continue;
      }
      if (t.kind != TokenKind::kIdent) {
        if (computations && t.kind == TokenKind::kLBrace) {
          return Fail(t.offset,
                      "inline computation bodies are not supported; define the "
                      "computation by name");
        }
        return Fail(t.offset, "expected a name in '" + std::string(attr.name) + "'");
      }
      std::string_view name = StripPercent(m_.TokenText(t));
      if (computations) {
        const int32_t callee = comp_index_.Find(name);
        if (callee < 0) {
          return Fail(t.offset, "undefined computation '" + std::string(name) +
                                    "' (computations must be defined before use)");
        }
        out.push_back(callee);
      } else {
        const int32_t pred = names_.Find(name);
        if (pred < 0) {
          return Fail(t.offset,
                      "undefined instruction '" + std::string(name) + "' in control-predecessors");
        }
        out.push_back(pred);
      }
      expect_name = false;
    }
    return true;
  }

  // ---- shapes ----
  bool ParseShape(Shape& shape, int depth) {
    if (depth > kMaxNesting) return FailHere("shape nested too deeply");
    if (Kind() == TokenKind::kLParen) {
      Advance();
      shape.type = PrimitiveType::kTuple;
      while (Kind() != TokenKind::kRParen) {
        shape.tuple_elements.emplace_back();
        if (!ParseShape(shape.tuple_elements.back(), depth + 1)) return false;
        if (Kind() == TokenKind::kComma) {
          Advance();
        } else if (Kind() != TokenKind::kRParen) {
          return FailHere("expected ',' or ')' in a tuple shape");
        }
      }
      Advance();
      return true;
    }
    if (Kind() != TokenKind::kIdent) return FailHere("expected a shape");
    if (Text() == "b" && Kind(1) == TokenKind::kLParen) {
      Advance();
      Advance();
      shape.is_buffer = true;
      shape.type = PrimitiveType::kTuple;
      shape.tuple_elements.emplace_back();
      if (!ParseShape(shape.tuple_elements.back(), depth + 1)) return false;
      return Expect(TokenKind::kRParen, "')' closing a buffer shape");
    }
    auto type = PrimitiveTypeFromName(Text());
    if (!type) return FailHere("expected an element type (f32, s32, pred, ...)");
    shape.type = *type;
    Advance();
    if (!Expect(TokenKind::kLBracket, "'[' after the element type")) return false;
    shape.dims.reserve(CountDimsAhead());  // One allocation, not one per doubling.
    while (Kind() != TokenKind::kRBracket) {
      bool dynamic = false;
      int64_t dim = 0;
      if (Kind() == TokenKind::kOther && Text() == "?") {
        dynamic = true;
        dim = Shape::kUnboundedDim;
        Advance();
      } else {
        if (Kind() == TokenKind::kLessEq) {
          dynamic = true;
          Advance();
        }
        if (!ParseInt(dim)) return false;
        if (dim < 0) return Fail(toks_[pos_ - 1].offset, "negative dimension size");
      }
      if (dynamic) {
        shape.dynamic.resize(shape.dims.size() + 1, false);
        shape.dynamic.back() = true;
      } else if (!shape.dynamic.empty()) {
        shape.dynamic.push_back(false);
      }
      shape.dims.push_back(dim);
      if (shape.dims.size() > 64) return FailHere("too many dimensions");
      if (Kind() == TokenKind::kComma) {
        Advance();
      } else if (Kind() != TokenKind::kRBracket) {
        return FailHere("expected ',' or ']' in dimensions");
      }
    }
    Advance();
    if (Kind() == TokenKind::kLBrace &&
        (Kind(1) == TokenKind::kInt || Kind(1) == TokenKind::kColon ||
         Kind(1) == TokenKind::kRBrace)) {
      return ParseLayout(shape);
    }
    return true;
  }

  // Attributes `, name=value` from pos_ to the end of the instruction (the next `name =` that
  // does not follow a comma, or the '}' closing the computation). A reservation hint only.
  size_t CountAttributesAhead() const {
    size_t count = 0;
    int depth = 0;
    for (size_t i = pos_; i + 2 < toks_.size(); ++i) {
      const TokenKind k = toks_[i].kind;
      if (k == TokenKind::kLParen || k == TokenKind::kLBrace || k == TokenKind::kLBracket) {
        ++depth;
      } else if (k == TokenKind::kRParen || k == TokenKind::kRBrace || k == TokenKind::kRBracket) {
        if (--depth < 0) break;
      } else if (depth == 0 && k == TokenKind::kComma) {
        if (toks_[i + 1].kind != TokenKind::kIdent || toks_[i + 2].kind != TokenKind::kEqual) break;
        ++count;
      } else if (depth == 0 && k == TokenKind::kIdent && toks_[i + 1].kind == TokenKind::kEqual &&
                 toks_[i - 1].kind != TokenKind::kComma) {
        break;
      } else if (k == TokenKind::kEnd) {
        break;
      }
    }
    return count;
  }

  // Elements of the list that starts at pos_ and ends at the ')' closing it: commas at its own
  // depth, plus one. A reservation hint only.
  size_t CountListAhead() const {
    size_t count = 0;
    int depth = 0;
    for (size_t i = pos_; i < toks_.size(); ++i) {
      const TokenKind k = toks_[i].kind;
      if (k == TokenKind::kLParen || k == TokenKind::kLBrace || k == TokenKind::kLBracket) {
        ++depth;
      } else if (k == TokenKind::kRParen || k == TokenKind::kRBrace || k == TokenKind::kRBracket) {
        if (--depth < 0) break;
      } else if (k == TokenKind::kComma && depth == 0) {
        ++count;
      } else if (k == TokenKind::kEnd) {
        break;
      }
    }
    return Kind() == TokenKind::kRParen ? 0 : count + 1;
  }

  // Dimensions between pos_ and the next ']' (commas + 1), capped at the most a shape may have.
  size_t CountDimsAhead() const {
    size_t count = 0;
    for (size_t i = pos_; i < toks_.size() && count <= 64; ++i) {
      const TokenKind k = toks_[i].kind;
      if (k == TokenKind::kRBracket || k == TokenKind::kEnd) break;
      if (k == TokenKind::kComma) ++count;
    }
    return Kind() == TokenKind::kRBracket ? 0 : count + 1;
  }

  bool ParseLayout(Shape& shape) {
    const uint32_t open_offset = Peek().offset;
    Advance();
    Layout layout;
    layout.minor_to_major.reserve(shape.dims.size());
    while (Kind() == TokenKind::kInt) {
      int64_t d = 0;
      if (!ParseInt(d)) return false;
      layout.minor_to_major.push_back(d);
      if (Kind() == TokenKind::kComma) Advance();
    }
    if (Kind() == TokenKind::kColon) {
      Advance();
      // Tiles, memory space and the like: kept as normalized text.
      int depth = 0;
      while (!(Kind() == TokenKind::kRBrace && depth == 0)) {
        TokenKind k = Kind();
        if (k == TokenKind::kEnd) return Fail(open_offset, "unterminated layout");
        if (k == TokenKind::kLParen || k == TokenKind::kLBrace || k == TokenKind::kLBracket) {
          if (++depth > kMaxNesting) return FailHere("layout nested too deeply");
        } else if (k == TokenKind::kRParen || k == TokenKind::kRBracket) {
          if (--depth < 0) return FailHere("unbalanced layout");
        } else if (k == TokenKind::kRBrace) {
          --depth;
        }
        if (!layout.details.empty() && NeedsSpaceBetween(toks_[pos_ - 1].kind, k)) {
          layout.details += ' ';
        }
        layout.details += Text();
        Advance();
      }
    }
    if (!Expect(TokenKind::kRBrace, "'}' closing the layout")) return false;
    if (layout.minor_to_major.size() != shape.dims.size()) {
      return Fail(open_offset, "layout has " + std::to_string(layout.minor_to_major.size()) +
                                   " dimensions but the shape has " +
                                   std::to_string(shape.dims.size()));
    }
    uint64_t seen = 0;  // ParseShape allows at most 64 dimensions.
    for (int64_t d : layout.minor_to_major) {
      if (d < 0 || d >= static_cast<int64_t>(shape.dims.size()) || (seen >> d & 1) != 0) {
        return Fail(open_offset, "layout is not a permutation of the dimensions");
      }
      seen |= uint64_t{1} << d;
    }
    shape.layout = std::move(layout);
    return true;
  }

  Module& m_;
  const std::vector<Token>& toks_;
  uint32_t pos_ = 0;
  Status error_;
  NameTable names_;       // Current computation's scope.
  NameTable comp_index_;  // Computations defined so far.
};

}  // namespace

std::string_view FirstModuleText(std::string_view source) {
  // XLA's tools split multi-module files at lines that start with "// -----".
  size_t at = source.starts_with("// -----") ? 0 : source.find("\n// -----");
  return at == std::string_view::npos ? source : source.substr(0, at);
}

Result<Module> ParseModule(std::string text, std::string filename) {
  auto source = std::make_unique<std::string>(std::move(text));
  Module module(std::move(source), std::move(filename));
  auto tokens = Lex(FirstModuleText(module.source()), module.filename());
  if (!tokens) return Error(tokens.error());
  module.tokens = std::move(*tokens);
  Status status = Parser(module).Run();
  if (!status.ok()) return Error(std::move(status));
  InferMissingShapes(module);
  return module;
}

Result<Module> ParseModuleFile(const std::string& path) {
  std::string text;
  if (path == "-") {
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    return ParseModule(std::move(text), "<stdin>");
  }
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return Error(IoError(path + ": " + std::strerror(errno)));
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) {
    text.append(buf, n);
    if (text.size() > kMaxSourceBytes) {
      std::fclose(f);
      return Error(InvalidArgument(path + ":1:1: error: file larger than 2 GiB"));
    }
  }
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) return Error(IoError(path + ": read error"));
  return ParseModule(std::move(text), path);
}

}  // namespace hlocache::hlo
