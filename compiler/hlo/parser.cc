// The HLO parser: the module, its computations and instructions, their operands and
// attributes (literals and shapes are in parser_shapes.cc).
#include "compiler/hlo/parser_impl.h"

#include <memory>
#include <optional>

#include <fcntl.h>
#include <unistd.h>

#include "common/file.h"

namespace hlocache::hlo {
namespace parser_internal {

bool Parser::ParseModuleBody() {
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
  if (listener_ != nullptr) listener_->HeaderParsed(m_);
  if (Kind() == TokenKind::kEnd) return FailHere("expected a computation");
  while (Kind() != TokenKind::kEnd) {
    if (!ParseComputation()) return false;
  }
  // Entry: the one marked ENTRY, else the last computation.
  if (m_.entry < 0) m_.entry = static_cast<int32_t>(m_.computations.size()) - 1;
  return true;
}

bool Parser::ParseModuleAttribute() {
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
bool Parser::ParseEntryLayout(const Attribute& attr) {
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
bool Parser::SkipStackFrameTables() {
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

bool Parser::ParseComputation() {
  Computation comp;
  // Tells the listener when an error leaves the computation (its instructions are then freed).
  struct LeftUnparsed {
    ParseListener* listener;
    const Computation& comp;
    ~LeftUnparsed() {
      if (listener != nullptr) listener->ComputationLeft(comp, /*parsed=*/false);
    }
  } left_unparsed{listener_, comp};
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
  last_defined_index_ = -1;
  parameters_.clear();
  const size_t expected = InstructionsInGroup(pos_ - 1);
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
  if (listener_ != nullptr) listener_->ComputationLeft(comp, /*parsed=*/true);
  left_unparsed.listener = nullptr;
  m_.computations.push_back(std::move(comp));
  return true;
}

// Instructions in the body that starts at pos_: names followed by '=' at bracket depth 0 that
// do not follow a comma (those are attributes). Reserving this many avoids moving every
// instruction as the vector grows.
size_t Parser::CountInstructionsAhead() const {
  size_t count = 0;
  int depth = 0;
  for (size_t i = pos_; i + 1 < token_count_; ++i) {
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

size_t Parser::InstructionsInGroup(uint32_t open) {
  while (next_group_ < groups_.size() && groups_[next_group_].open < open) ++next_group_;
  if (next_group_ < groups_.size() && groups_[next_group_].open == open) {
    return groups_[next_group_].definitions + 1;
  }
  return CountInstructionsAhead();
}

Instruction& Parser::PlaceInstruction(Computation& comp) {
  if (listener_ != nullptr && comp.instructions.size() == comp.instructions.capacity()) {
    listener_->InstructionsWillMove(comp);
  }
  return comp.instructions.emplace_back();
}

void Parser::InstructionPlaced(Computation& comp) {
  const Instruction& inst = comp.instructions.back();
  if (inst.opcode.opcode == Opcode::kParameter && inst.opcode.phase == AsyncPhase::kNone) {
    parameters_.push_back(static_cast<int32_t>(comp.instructions.size() - 1));
  }
  any_shape_missing_ |= !inst.shape_written;
  if (listener_ != nullptr) listener_->InstructionAdded(comp);
}

void Parser::AddInstruction(Computation& comp, Instruction&& inst) {
  PlaceInstruction(comp) = std::move(inst);
  InstructionPlaced(comp);
}

bool Parser::CollectParameters(Computation& comp) {
  // Numbered 0 to count - 1 when the computation is well formed: one block, sized once, where
  // growing it a parameter at a time took a few blocks for each of thousands of computations.
  comp.parameters.assign(parameters_.size(), -1);
  for (const int32_t i : parameters_) {
    const Instruction& inst = comp.instructions[i];
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
    comp.parameters[n] = i;
  }
  for (size_t n = 0; n < comp.parameters.size(); ++n) {
    if (comp.parameters[n] < 0) {
      return Fail(comp.offset, "computation '" + std::string(comp.name) + "' lacks parameter " +
                                   std::to_string(n));
    }
  }
  return true;
}

bool Parser::ParseInstruction(Computation& comp, bool& saw_root) {
  const uint32_t offset = Peek().offset;
  bool is_root = false;
  if (AtIdent("ROOT")) {
    is_root = true;
    if (saw_root) return Fail(offset, "more than one ROOT instruction in a computation");
    saw_root = true;
    Advance();
  }
  if (Kind() != TokenKind::kIdent || Kind(1) != TokenKind::kEqual) {
    return FailHere("expected an instruction 'name = opcode(...)'");
  }
  const std::string_view name = StripPercent(Text());
  const uint64_t name_hash = names_.Prefetch(name);
  const uint32_t name_offset = Peek().offset;
  Advance();
  Advance();
  const uint32_t rhs = pos_;
  // Parsed where it stays, at the computation's end: parsing it aside and moving it there cost
  // a twentieth of a large module's parse. An operand written as an instruction of its own
  // (`add(f32[] multiply(x, y), z)`, rare) takes the place before it; then it is parsed again
  // aside, its operands placed first.
  Instruction* inst = &PlaceInstruction(comp);
  inst->offset = offset;
  inst->name = name;
  parsing_in_place_ = true;
  const bool placed = ParseInstructionRhs(comp, *inst, 0);
  parsing_in_place_ = false;
  // A failed parse leaves the computation its whole instructions only (what a listener sees).
  const auto drop_placed = [&] {
    if (placed) comp.instructions.pop_back();
    return false;
  };
  // On the heap, made only when needed: an empty std::optional<Instruction> on the stack was
  // still zeroed (272 bytes, a `rep stos`) for every instruction, a third of this function's
  // own time.
  std::unique_ptr<Instruction> aside;
  if (!placed) {
    comp.instructions.pop_back();
    if (!nested_operand_) return false;
    nested_operand_ = false;
    pos_ = rhs;
    aside = std::make_unique<Instruction>();
    inst = aside.get();
    inst->offset = offset;
    inst->name = name;
    if (!ParseInstructionRhs(comp, *inst, 0)) return false;
  }
  attributes_.clear();
  callees_.clear();
  control_predecessors_.clear();
  while (Kind() == TokenKind::kComma) {
    Advance();
    if (!ParseInstructionAttribute()) return drop_placed();
  }
  inst->attributes = m_.KeepAttributes(attributes_);
  inst->callees = m_.KeepIndices(callees_);
  inst->control_predecessors = m_.KeepIndices(control_predecessors_);
  const auto index = static_cast<int32_t>(comp.instructions.size() - (placed ? 1 : 0));
  // Named only now, so that its own operands cannot name it.
  if (!names_.Insert(name, index, name_hash)) {
    Fail(name_offset, "duplicate instruction name '" + std::string(name) + "'");
    return drop_placed();
  }
  last_defined_ = name;
  last_defined_index_ = index;
  if (is_root) comp.root = index;
  if (placed) {
    InstructionPlaced(comp);
  } else {
    AddInstruction(comp, std::move(*aside));
  }
  return true;
}

bool Parser::AtShapeStart() const {
  if (Kind() == TokenKind::kLParen) return true;
  if (Kind() != TokenKind::kIdent) return false;
  // A word before '[' can only be an element type (an opcode has '(' after it): its lookup is
  // left to the shape's parse, which a shape written before skips.
  if (Kind(1) == TokenKind::kLBracket) return true;
  return Kind(1) == TokenKind::kLParen && Text() == "b";
}

// shape? opcode '(' operands ')'. Attributes are parsed by the caller.
bool Parser::ParseInstructionRhs(Computation& comp, Instruction& inst, int depth) {
  if (depth > kMaxNesting) return FailHere("operands nested too deeply");
  if (AtShapeStart()) {
    if (!ParseShape(inst.shape, 0, &inst.shape_text_id)) return false;
    inst.shape_written = true;
  }
  if (Kind() != TokenKind::kIdent) return FailHere("expected an opcode");
  if (Kind(1) == TokenKind::kLBracket) {
    return Fail(Peek().offset, "unknown element type '" + std::string(Text()) + "'");
  }
  // Kept in a local whose address is never taken, so in registers: held in memory (returned as
  // an optional, or read back from `inst`), its two bytes were stored one at a time and loaded
  // as one word while the stores were in flight, a stall at every instruction.
  OpcodeSpelling spelling{Opcode::kParameter};
  if (const std::optional<Opcode> plain = OpcodeFromName(Text())) {
    spelling.opcode = *plain;
  } else if (const std::optional<OpcodeSpelling> async = ParseOpcodeSpelling(Text())) {
    spelling = *async;  // `all-reduce-start` is a plain name; `fusion-start` is async sugar.
  } else {
    return Fail(Peek().offset, "unknown opcode '" + std::string(Text()) + "'");
  }
  inst.opcode = spelling;
  Advance();
  const uint32_t open_offset = Peek().offset;
  if (!Expect(TokenKind::kLParen, "'(' after the opcode")) return false;
  if (spelling.phase == AsyncPhase::kNone && spelling.opcode == Opcode::kConstant) {
    return ParseLiteral(inst, open_offset);
  }
  if (spelling.phase == AsyncPhase::kNone && spelling.opcode == Opcode::kParameter) {
    if (!ParseInt(inst.parameter_number)) return false;
    if (inst.parameter_number < 0) return Fail(inst.offset, "negative parameter number");
    return Expect(TokenKind::kRParen, "')' after the parameter number");
  }
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

bool Parser::ParseOperand(Computation& comp, int32_t& operand, int depth) {
  // Printed operand shapes (older dumps) are derived information: parsed, checked, dropped.
  const uint32_t start = pos_;
  if (AtShapeStart()) {
    Shape ignored;
    if (!ParseShape(ignored, 0)) return false;
  }
  if (Kind() != TokenKind::kIdent) return FailHere("expected an operand name");
  if (Kind(1) == TokenKind::kLParen && ParseOpcodeSpelling(Text()).has_value()) {
    // Nested anonymous instruction: `add(f32[] multiply(x, y), z)`.
    if (parsing_in_place_) {
      nested_operand_ = true;  // Its instruction is parsed again, aside (ParseInstruction).
      return false;
    }
    pos_ = start;
    Instruction nested;
    nested.offset = Peek().offset;
    if (!ParseInstructionRhs(comp, nested, depth + 1)) return false;
    operand = static_cast<int32_t>(comp.instructions.size());
    AddInstruction(comp, std::move(nested));
    return true;
  }
  std::string_view name = StripPercent(Text());
  operand = last_defined_index_ >= 0 && name.size() == last_defined_.size() &&
                    NameTable::SameBytes(name.data(), last_defined_.data(), name.size())
                ? last_defined_index_
                : names_.Find(name);
  if (operand < 0) {
    return Fail(Peek().offset, "undefined operand '" + std::string(Text()) +
                                   "' (operands must be defined before use)");
  }
  Advance();
  return true;
}

bool Parser::ParseInstructionAttribute() {
  if (Kind() != TokenKind::kIdent || Kind(1) != TokenKind::kEqual) {
    return FailHere("expected an attribute 'name=value'");
  }
  Attribute attr{Text(), {}, Peek().offset};
  const std::optional<AttributeRole> role = KnownInstructionAttributeRole(attr.name);
  if (!role) return Fail(attr.offset, "unknown attribute '" + std::string(attr.name) + "'");
  for (const Attribute& a : attributes_) {
    if (a.name == attr.name) {
      return Fail(attr.offset, "duplicate attribute '" + std::string(attr.name) + "'");
    }
  }
  Advance();
  Advance();
  attr.value.begin = pos_;
  if (!SkipAttributeValue(attr)) return false;
  attr.value.end = pos_;
  attr.role = *role;
  if (attr.role == AttributeRole::kCallee) {
    if (!ResolveNames(attr, /*computations=*/true, callees_)) return false;
  } else if (attr.role == AttributeRole::kControlPredecessors) {
    if (!ResolveNames(attr, /*computations=*/false, control_predecessors_)) {
      return false;
    }
  }
  attributes_.push_back(attr);
  return true;
}

// An attribute value is one unit (a token or a bracketed group), continued only by the forms
// XLA prints: more brackets (`f32[2]{0}`, `[2,4]<=[8]T(1,0)`), `<=` and `->` (dim_labels) with
// the unit after them, and a word after a group (`literal=s32[] 1`). Anything else after a
// value is an error, not part of it.
bool Parser::SkipAttributeValue(const Attribute& attr) {
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
bool Parser::ResolveNames(const Attribute& attr, bool computations, std::vector<int32_t>& out) {
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

}  // namespace parser_internal

using parser_internal::Parser;

Result<Module> ParseModule(std::string text, std::string filename) {
  return ParseModule(std::move(text), std::move(filename), nullptr);
}

Result<Module> ParseModule(std::string text, std::string filename, ParseListener* listener) {
  auto source = std::make_unique<std::string>(std::move(text));
  Module module(std::move(source), std::move(filename));
  std::vector<TopLevelGroup> groups;
  auto tokens = LexFirstModule(module.source(), module.filename(), &groups);
  if (!tokens) {
    if (listener != nullptr) listener->ParseEnded(/*parsed=*/false);
    return Error(tokens.error());
  }
  module.tokens = std::move(*tokens);
  Parser parser(module, groups, listener);
  Status status = parser.Run();
  if (listener != nullptr) listener->ParseEnded(status.ok());
  if (!status.ok()) return Error(std::move(status));
  if (parser.AnyShapeMissing()) InferMissingShapes(module);
  return module;
}

Result<std::string> ReadModuleFile(const std::string& path) {
  std::string text;
  if (path == "-") {
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    return text;
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Error(IoError(path + ": " + std::strerror(errno)));
  const int err = ReadAll(fd, text, kMaxSourceBytes);
  ::close(fd);
  if (err == EFBIG) return Error(InvalidArgument(path + ":1:1: error: file larger than 2 GiB"));
  if (err != 0) return Error(IoError(path + ": read error: " + std::strerror(err)));
  return text;
}

std::string ModuleFileName(const std::string& path) { return path == "-" ? "<stdin>" : path; }

Result<Module> ParseModuleFile(const std::string& path) {
  auto text = ReadModuleFile(path);
  if (!text) return Error(text.error());
  return ParseModule(std::move(*text), ModuleFileName(path));
}

}  // namespace hlocache::hlo
