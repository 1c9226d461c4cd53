#include "tests/unit/compiler/mutations.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "compiler/hlo/attributes.h"
#include "compiler/hlo/opcode.h"
#include "compiler/hlo/shape.h"
#include "compiler/hlo/token.h"

namespace hlocache::mutation {
namespace {

using hlo::TokenKind;

// ---------------------------------------------------------------------------------------------
// Source edits

// Replaces source bytes [begin, end) with `text`.
struct Edit {
  uint32_t begin = 0;
  uint32_t end = 0;
  std::string text;
};

// Applies non-overlapping edits, given in any order. Nullopt when there are none or they change
// nothing, so that a mutation only counts where it really mutated something.
Mutated ApplyEdits(std::string_view source, std::vector<Edit> edits) {
  std::ranges::stable_sort(edits, {}, &Edit::begin);
  std::string out;
  out.reserve(source.size() + source.size() / 4);
  uint32_t at = 0;
  for (const Edit& e : edits) {
    if (e.begin < at || e.end < e.begin) throw std::logic_error("overlapping mutation edits");
    out.append(source.substr(at, e.begin - at));
    out += e.text;
    at = e.end;
  }
  out.append(source.substr(at));
  if (out == source) return std::nullopt;
  return out;
}

// Deterministic pseudo-random numbers (splitmix64): the same mutation on every run and platform.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// ---------------------------------------------------------------------------------------------
// Tokens and where instructions lie in them

bool IsOpen(TokenKind k) {
  return k == TokenKind::kLBrace || k == TokenKind::kLBracket || k == TokenKind::kLParen;
}
bool IsClose(TokenKind k) {
  return k == TokenKind::kRBrace || k == TokenKind::kRBracket || k == TokenKind::kRParen;
}

class TokenView {
 public:
  explicit TokenView(const hlo::Module& m) : m_(m), tokens_(m.tokens) {}

  TokenKind Kind(uint32_t i) const {
    return i < tokens_.size() ? tokens_[i].kind : TokenKind::kEnd;
  }
  std::string_view Text(uint32_t i) const {
    return i < tokens_.size() ? m_.TokenText(tokens_[i]) : std::string_view();
  }
  uint32_t Begin(uint32_t i) const { return tokens_[i].offset; }
  uint32_t End(uint32_t i) const { return tokens_[i].offset + tokens_[i].length; }
  uint32_t EndIndex() const { return static_cast<uint32_t>(tokens_.size()) - 1; }  // kEnd.
  std::string_view Source() const { return m_.source(); }

  // The source text of tokens [first, last), comments and spacing between them included.
  std::string_view Span(uint32_t first, uint32_t last) const {
    return Source().substr(Begin(first), End(last - 1) - Begin(first));
  }
  Edit ReplaceSpan(uint32_t first, uint32_t last, std::string text) const {
    return {Begin(first), End(last - 1), std::move(text)};
  }

  // Index of the token that starts at `offset`.
  uint32_t IndexAt(uint32_t offset) const {
    auto it = std::ranges::lower_bound(tokens_, offset, {}, &hlo::Token::offset);
    return static_cast<uint32_t>(it - tokens_.begin());
  }

  // One past the bracket that closes the one opened at `open`.
  uint32_t SkipGroup(uint32_t open) const {
    int depth = 0;
    for (uint32_t i = open; i < tokens_.size(); ++i) {
      if (IsOpen(Kind(i))) ++depth;
      if (IsClose(Kind(i)) && --depth == 0) return i + 1;
    }
    return EndIndex();
  }

  // True at `type[`: an array shape.
  bool AtArrayShape(uint32_t i) const {
    return Kind(i) == TokenKind::kIdent && Kind(i + 1) == TokenKind::kLBracket &&
           hlo::PrimitiveTypeFromName(Text(i)).has_value();
  }

  // One past the shape that starts at `i` (as the parser reads shapes), or `i` when none does.
  uint32_t SkipShape(uint32_t i) const {
    if (Kind(i) == TokenKind::kLParen) return SkipGroup(i);
    if (Kind(i) == TokenKind::kIdent && Text(i) == "b" && Kind(i + 1) == TokenKind::kLParen) {
      return SkipGroup(i + 1);
    }
    if (!AtArrayShape(i)) return i;
    uint32_t j = SkipGroup(i + 1);
    if (HasLayoutAt(j)) j = SkipGroup(j);
    return j;
  }

  // A '{' after a shape is a layout when an integer, ':' or '}' follows it.
  bool HasLayoutAt(uint32_t j) const {
    return Kind(j) == TokenKind::kLBrace &&
           (Kind(j + 1) == TokenKind::kInt || Kind(j + 1) == TokenKind::kColon ||
            Kind(j + 1) == TokenKind::kRBrace);
  }

 private:
  const hlo::Module& m_;
  const std::vector<hlo::Token>& tokens_;
};

// Token positions of one instruction: `ROOT? name = shape? opcode(operands), attributes`.
struct Located {
  uint32_t first = 0;  // ROOT or the name; the shape or opcode of a nested anonymous operand.
  uint32_t name = 0;   // The defined name (named instructions only).
  bool explicit_root = false;
  uint32_t shape = 0;  // The result shape's first token (== opcode when none is written).
  uint32_t opcode = 0;
  uint32_t open = 0;   // '(' after the opcode.
  uint32_t close = 0;  // Its ')'.
  uint32_t end = 0;    // One past the instruction's last token.
};

Located Locate(const TokenView& t, const hlo::Instruction& inst) {
  Located l;
  l.first = t.IndexAt(inst.offset);
  uint32_t i = l.first;
  if (!inst.name.empty()) {
    if (t.Text(i) == "ROOT" && t.Kind(i + 1) == TokenKind::kIdent &&
        t.Kind(i + 2) == TokenKind::kEqual) {
      l.explicit_root = true;
      ++i;
    }
    l.name = i;
    i += 2;
  }
  l.shape = i;
  l.opcode = t.SkipShape(i);
  l.open = l.opcode + 1;
  l.close = t.SkipGroup(l.open) - 1;
  l.end = l.close + 1;
  for (const hlo::Attribute& a : inst.attributes) l.end = std::max(l.end, a.value.end);
  return l;
}

bool IsPlain(const hlo::Instruction& inst, hlo::Opcode op) {
  return inst.opcode.opcode == op && inst.opcode.phase == hlo::AsyncPhase::kNone;
}

// Indices of the named (top-level) instructions of `c`, in textual order. Nested anonymous
// operands live inside their user's text and move with it.
std::vector<int32_t> NamedInOrder(const hlo::Computation& c) {
  std::vector<int32_t> out;
  for (size_t i = 0; i < c.instructions.size(); ++i) {
    if (!c.instructions[i].name.empty()) out.push_back(static_cast<int32_t>(i));
  }
  std::ranges::sort(out, {}, [&](int32_t i) { return c.instructions[i].offset; });
  return out;
}

std::vector<bool> ReachableComputations(const hlo::Module& m) {
  std::vector<bool> seen(m.computations.size(), false);
  std::vector<int32_t> stack = {m.entry};
  while (!stack.empty()) {
    const int32_t c = stack.back();
    stack.pop_back();
    if (c < 0 || seen[c]) continue;
    seen[c] = true;
    for (const hlo::Instruction& inst : m.computations[c].instructions) {
      stack.insert(stack.end(), inst.callees.begin(), inst.callees.end());
    }
  }
  return seen;
}

// Calls `visit(computation, instruction)` on every instruction of the computations reachable
// from the entry, in textual order, until it returns an edit: the first site of a sensitivity.
template <typename Visit>
Mutated FirstReachableSite(const hlo::Module& m, Visit visit) {
  const std::vector<bool> reachable = ReachableComputations(m);
  for (size_t c = 0; c < m.computations.size(); ++c) {
    if (!reachable[c]) continue;
    for (const hlo::Instruction& inst : m.computations[c].instructions) {
      if (std::optional<Edit> edit = visit(m.computations[c], inst)) {
        return ApplyEdits(m.source(), {std::move(*edit)});
      }
    }
  }
  return std::nullopt;
}

// Rewrites the spans [first, last) of `items` so that position p holds the text of item
// order[p]; the spacing between spans stays where it was.
template <typename Span>
void PermuteSpans(const TokenView& t, const std::vector<Span>& spans,
                  const std::vector<size_t>& order, std::vector<Edit>& edits) {
  for (size_t p = 0; p < spans.size(); ++p) {
    if (order[p] == p) continue;
    const Span& to = spans[p];
    const Span& from = spans[order[p]];
    edits.push_back(
        t.ReplaceSpan(to.first, to.second, std::string(t.Span(from.first, from.second))));
  }
}

using TokenSpan = std::pair<uint32_t, uint32_t>;

// ---------------------------------------------------------------------------------------------
// Renaming

// Token indices of every name: definitions and references.
std::vector<uint32_t> NameTokens(const hlo::Module& m, const TokenView& t) {
  std::vector<uint32_t> out;
  if (t.Text(0) == "HloModule") out.push_back(1);
  for (const hlo::Computation& c : m.computations) {
    uint32_t i = t.IndexAt(c.offset);
    if (t.Text(i) == "ENTRY" && t.Kind(i + 1) == TokenKind::kIdent) ++i;
    out.push_back(i);
    for (const hlo::Instruction& inst : c.instructions) {
      if (inst.name.empty()) continue;  // Scanned as part of its user's operand list.
      const Located l = Locate(t, inst);
      out.push_back(l.name);
      if (!IsPlain(inst, hlo::Opcode::kConstant)) {
        // An operand name is the ident that ends an operand: before ',' or ')'. Opcodes of
        // nested operands precede '(' and element types '['.
        for (uint32_t k = l.open + 1; k < l.close; ++k) {
          if (t.Kind(k) == TokenKind::kIdent &&
              (t.Kind(k + 1) == TokenKind::kComma || t.Kind(k + 1) == TokenKind::kRParen)) {
            out.push_back(k);
          }
        }
      }
      for (const hlo::Attribute& a : inst.attributes) {
        if (!hlo::IsCalleeAttribute(a.name) && a.name != "control-predecessors") continue;
        for (uint32_t k = a.value.begin; k < a.value.end; ++k) {
          if (t.Kind(k) == TokenKind::kIdent) out.push_back(k);
        }
      }
    }
  }
  return out;
}

std::string_view StripPercent(std::string_view s) { return s.starts_with('%') ? s.substr(1) : s; }

}  // namespace

// ---------------------------------------------------------------------------------------------
// Invariances

Mutated RenameEverything(const hlo::Module& m, bool toggle_percent) {
  const TokenView t(m);
  const std::vector<uint32_t> name_tokens = NameTokens(m, t);
  // Fresh numbers in a shuffled order (Fisher-Yates), so that sorting by the new names gives a
  // different order than sorting by the old ones.
  std::unordered_map<std::string_view, size_t> index;
  for (uint32_t k : name_tokens) index.try_emplace(StripPercent(t.Text(k)), index.size());
  std::vector<size_t> number(index.size());
  for (size_t i = 0; i < number.size(); ++i) number[i] = i;
  for (size_t i = number.size(); i > 1; --i) std::swap(number[i - 1], number[Mix(i) % i]);
  std::vector<Edit> edits;
  for (uint32_t k : name_tokens) {
    const size_t n = number[index.at(StripPercent(t.Text(k)))];
    const bool percent = t.Text(k).starts_with('%') != toggle_percent;
    // Some fresh names get a `.N` suffix, as XLA's own names do.
    std::string fresh = (percent ? "%n" : "n") + std::to_string(n) + (n % 3 == 0 ? ".7" : "");
    edits.push_back({t.Begin(k), t.End(k), std::move(fresh)});
  }
  return ApplyEdits(m.source(), std::move(edits));
}

Mutated StripMetadata(const hlo::Module& m) {
  const TokenView t(m);
  std::vector<Edit> edits;
  for (const hlo::Computation& c : m.computations) {
    for (const hlo::Instruction& inst : c.instructions) {
      const hlo::Attribute* metadata = inst.FindAttribute("metadata");
      if (metadata == nullptr) continue;
      const uint32_t comma = t.IndexAt(metadata->offset) - 1;  // Attributes follow a ','.
      edits.push_back({t.Begin(comma), t.End(metadata->value.end - 1), ""});
    }
  }
  return ApplyEdits(m.source(), std::move(edits));
}

Mutated AddMetadata(const hlo::Module& m) {
  const TokenView t(m);
  std::vector<Edit> edits;
  for (const hlo::Computation& c : m.computations) {
    for (const hlo::Instruction& inst : c.instructions) {
      if (inst.name.empty() || inst.FindAttribute("metadata") != nullptr) continue;
      const uint32_t at = t.End(Locate(t, inst).end - 1);
      edits.push_back({at, at,
                       ", metadata={op_type=\"Other\" op_name=\"x/y\" "
                       "source_file=\"/home/other/host.py\" source_line=7}"});
    }
  }
  return ApplyEdits(m.source(), std::move(edits));
}

Mutated ReformatWhitespaceAndComments(const hlo::Module& m) {
  static constexpr std::string_view kSeparators[] = {
      " ",
      "   ",
      "\t",
      "\n",
      "\n        ",
      " /* c */ ",
      "/* c */",
      " // line comment\n  ",
      "\n// line comment\n",
  };
  const TokenView t(m);
  std::vector<Edit> edits = {{0, 0, "// leading comment\n/* block\n comment */\n"}};
  for (uint32_t i = 0; i < t.EndIndex(); ++i) {
    const uint32_t gap_begin = t.End(i);
    const uint32_t gap_end = t.Begin(i + 1);
    // Only where spacing was, or may be (after a comma): `dimensions=` and `f32[2]{1,0}` stay
    // glued as XLA's own lexer wants them.
    if (gap_begin == gap_end && t.Kind(i) != TokenKind::kComma) continue;
    const std::string_view sep = kSeparators[Mix(i) % std::size(kSeparators)];
    edits.push_back({gap_begin, gap_end, std::string(sep)});
  }
  return ApplyEdits(m.source(), std::move(edits));
}

namespace {

// Rank of the array shape at `type[`; `dims_end` gets one past its ']'.
int64_t RankAt(const TokenView& t, uint32_t type, uint32_t& dims_end) {
  dims_end = t.SkipGroup(type + 1);
  if (dims_end == type + 3) return 0;  // `[]`
  int64_t rank = 1;
  for (uint32_t k = type + 2; k + 1 < dims_end; ++k) rank += t.Kind(k) == TokenKind::kComma;
  return rank;
}

std::string DefaultLayout(int64_t rank) {
  std::string s = "{";
  for (int64_t d = rank - 1; d >= 0; --d) s += std::to_string(d) + (d > 0 ? "," : "");
  return s + "}";
}

// True when the layout `{...}` at `open` is exactly {rank-1, ..., 0} with nothing after ':'.
bool IsDefaultLayoutAt(const TokenView& t, uint32_t open, int64_t rank) {
  uint32_t k = open + 1;
  for (int64_t d = rank - 1; d >= 0; --d) {
    if (t.Kind(k) != TokenKind::kInt || t.Text(k) != std::to_string(d)) return false;
    ++k;
    if (d > 0 && t.Kind(k++) != TokenKind::kComma) return false;
  }
  return t.Kind(k) == TokenKind::kRBrace;
}

}  // namespace

Mutated DropDefaultLayouts(const hlo::Module& m, LayoutPlace place) {
  const TokenView t(m);
  // Tokens inside instruction attribute values (operand_layout_constraints, outfeed_shape, ...).
  std::vector<bool> in_attribute(t.EndIndex() + 1, false);
  for (const hlo::Computation& c : m.computations) {
    for (const hlo::Instruction& inst : c.instructions) {
      for (const hlo::Attribute& a : inst.attributes) {
        std::fill(in_attribute.begin() + a.value.begin, in_attribute.begin() + a.value.end, true);
      }
    }
  }
  std::vector<Edit> edits;
  for (uint32_t i = 0; i < t.EndIndex(); ++i) {
    if (!t.AtArrayShape(i)) continue;
    if (in_attribute[i] != (place == LayoutPlace::kInAttributeValues)) continue;
    uint32_t dims_end = 0;
    const int64_t rank = RankAt(t, i, dims_end);
    if (rank >= 1 && t.HasLayoutAt(dims_end) && IsDefaultLayoutAt(t, dims_end, rank)) {
      edits.push_back(t.ReplaceSpan(dims_end, t.SkipGroup(dims_end), ""));
    }
  }
  return ApplyEdits(m.source(), std::move(edits));
}

Mutated AddDefaultLayouts(const hlo::Module& m) {
  const TokenView t(m);
  std::vector<Edit> edits;
  for (uint32_t i = 0; i < t.EndIndex(); ++i) {
    if (!t.AtArrayShape(i)) continue;
    uint32_t dims_end = 0;
    const int64_t rank = RankAt(t, i, dims_end);
    if (rank >= 1 && t.Kind(dims_end) != TokenKind::kLBrace) {
      const uint32_t at = t.End(dims_end - 1);
      edits.push_back({at, at, DefaultLayout(rank)});
    }
  }
  return ApplyEdits(m.source(), std::move(edits));
}

namespace {

// Another spelling of the same decimal number: [-]digits[.digits][e[+-]digits] is rewritten as
// an integer mantissa and an exponent. `variant` picks the spelling. Nullopt for inf, nan, hex.
std::optional<std::string> RespellDecimal(std::string_view s, size_t variant) {
  size_t i = 0;
  std::string sign;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) sign = s[i++] == '-' ? "-" : "";
  std::string mantissa;
  auto digits = [&] {
    const size_t start = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    return s.substr(start, i - start);
  };
  mantissa += digits();
  int64_t exponent = 0;
  if (i < s.size() && s[i] == '.') {
    ++i;
    const std::string_view fraction = digits();
    mantissa += fraction;
    exponent -= static_cast<int64_t>(fraction.size());
  }
  if (mantissa.empty()) return std::nullopt;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    int64_t e = 0;
    if (i < s.size() && s[i] == '+') ++i;
    auto [end, ec] = std::from_chars(s.data() + i, s.data() + s.size(), e);
    if (ec != std::errc()) return std::nullopt;
    i = end - s.data();
    exponent += e;
  }
  if (i != s.size()) return std::nullopt;
  mantissa.erase(0, std::min(mantissa.find_first_not_of('0'), mantissa.size() - 1));
  if (mantissa == "0") exponent = 0;
  for (size_t v = variant; v < variant + 3; ++v) {
    std::string out;
    switch (v % 3) {
      case 0:  // 1 -> 1.0, 0.5 -> 5e-1
        out = exponent == 0 ? mantissa + ".0" : mantissa + "e" + std::to_string(exponent);
        break;
      case 1:  // 1 -> 1.0e0, 0.5 -> 5.0e-1
        out = mantissa + ".0e" + std::to_string(exponent);
        break;
      default:  // 1 -> 10e-1, 0.5 -> 50e-2
        out = mantissa + "0e" + std::to_string(exponent - 1);
        break;
    }
    out = sign + out;
    if (out != s) return out;
  }
  return std::nullopt;
}

}  // namespace

Mutated RespellFloatConstants(const hlo::Module& m) {
  const TokenView t(m);
  std::vector<Edit> edits;
  size_t variant = 0;
  for (const hlo::Computation& c : m.computations) {
    for (const hlo::Instruction& inst : c.instructions) {
      if (!IsPlain(inst, hlo::Opcode::kConstant) || inst.literal_elided) continue;
      if (inst.shape.type != hlo::PrimitiveType::kF32 &&
          inst.shape.type != hlo::PrimitiveType::kF64) {
        continue;
      }
      for (uint32_t k = inst.literal.begin; k < inst.literal.end; ++k) {
        if (t.Kind(k) != TokenKind::kInt && t.Kind(k) != TokenKind::kFloat) continue;
        if (auto respelled = RespellDecimal(t.Text(k), variant++)) {
          edits.push_back({t.Begin(k), t.End(k), std::move(*respelled)});
        }
      }
    }
  }
  return ApplyEdits(m.source(), std::move(edits));
}

namespace {

std::vector<TokenSpan> InstructionSpans(const TokenView& t, const hlo::Computation& c,
                                        const std::vector<int32_t>& named) {
  std::vector<TokenSpan> spans;
  for (int32_t i : named) {
    const Located l = Locate(t, c.instructions[i]);
    spans.emplace_back(l.first, l.end);
  }
  return spans;
}

// Without a ROOT keyword the last instruction is the root, so it must stay last.
bool RootIsImplicit(const TokenView& t, const hlo::Computation& c) {
  return !Locate(t, c.instructions[c.root]).explicit_root;
}

// True when `user` reads `used`: as an operand, through nested anonymous operands, or as a
// control predecessor.
bool Uses(const hlo::Computation& c, int32_t user, int32_t used) {
  const hlo::Instruction& u = c.instructions[user];
  if (std::ranges::find(u.control_predecessors, used) != u.control_predecessors.end()) return true;
  for (int32_t op : u.operands) {
    if (op == used) return true;
    if (c.instructions[op].name.empty() && Uses(c, op, used)) return true;
  }
  return false;
}

// Edits that write the named instructions of `c` in `order` (positions into NamedInOrder).
void ReorderInstructions(const TokenView& t, const hlo::Computation& c,
                         const std::vector<int32_t>& named, const std::vector<size_t>& order,
                         std::vector<Edit>& edits) {
  PermuteSpans(t, InstructionSpans(t, c, named), order, edits);
}

}  // namespace

Mutated MoveParametersFirst(const hlo::Module& m) {
  if (m.IsScheduled()) return std::nullopt;
  const TokenView t(m);
  std::vector<Edit> edits;
  for (const hlo::Computation& c : m.computations) {
    const std::vector<int32_t> named = NamedInOrder(c);
    std::vector<size_t> params, others;
    for (size_t p = 0; p < named.size(); ++p) {
      const hlo::Instruction& inst = c.instructions[named[p]];
      (IsPlain(inst, hlo::Opcode::kParameter) && inst.control_predecessors.empty() ? params
                                                                                   : others)
          .push_back(p);
    }
    std::ranges::sort(params, std::greater<>(),
                      [&](size_t p) { return c.instructions[named[p]].parameter_number; });
    std::vector<size_t> order = params;
    order.insert(order.end(), others.begin(), others.end());
    if (RootIsImplicit(t, c) && order.back() != named.size() - 1) continue;
    ReorderInstructions(t, c, named, order, edits);
  }
  return ApplyEdits(m.source(), std::move(edits));
}

Mutated SwapIndependentNeighbours(const hlo::Module& m) {
  if (m.IsScheduled()) return std::nullopt;
  const TokenView t(m);
  std::vector<Edit> edits;
  for (const hlo::Computation& c : m.computations) {
    const std::vector<int32_t> named = NamedInOrder(c);
    std::vector<size_t> order(named.size());
    for (size_t p = 0; p < order.size(); ++p) order[p] = p;
    const size_t last_movable = RootIsImplicit(t, c) ? named.size() - 1 : named.size();
    for (size_t p = 0; p + 1 < last_movable; ++p) {
      if (Uses(c, named[p + 1], named[p])) continue;
      std::swap(order[p], order[p + 1]);
      ++p;  // Each instruction moves at most once.
    }
    ReorderInstructions(t, c, named, order, edits);
  }
  return ApplyEdits(m.source(), std::move(edits));
}

Mutated ReorderComputations(const hlo::Module& m) {
  if (m.IsScheduled()) return std::nullopt;
  const TokenView t(m);
  const size_t n = m.computations.size();
  std::vector<TokenSpan> spans;
  for (size_t c = 0; c < n; ++c) {
    const uint32_t first = t.IndexAt(m.computations[c].offset);
    const uint32_t next = c + 1 < n ? t.IndexAt(m.computations[c + 1].offset) : t.EndIndex();
    spans.emplace_back(first, next);
  }
  // Without the ENTRY keyword the last computation is the entry, so it must stay last.
  const bool entry_pinned = t.Text(spans[m.entry].first) != "ENTRY";
  // Kahn's algorithm, always taking the latest ready computation: a legal order (callees
  // first) as far from the original as the call graph allows.
  std::vector<bool> placed(n, false);
  std::vector<size_t> order;
  while (order.size() < n) {
    size_t pick = n;
    for (size_t c = n; c-- > 0;) {
      if (placed[c] ||
          (entry_pinned && c == static_cast<size_t>(m.entry) && order.size() + 1 < n)) {
        continue;
      }
      bool ready = true;
      for (const hlo::Instruction& inst : m.computations[c].instructions) {
        for (int32_t callee : inst.callees) ready = ready && placed[callee];
      }
      if (ready) {
        pick = c;
        break;
      }
    }
    if (pick == n) throw std::logic_error("call graph has a cycle");
    placed[pick] = true;
    order.push_back(pick);
  }
  std::vector<Edit> edits;
  PermuteSpans(t, spans, order, edits);
  return ApplyEdits(m.source(), std::move(edits));
}

Mutated ReverseAttributeOrder(const hlo::Module& m) {
  const TokenView t(m);
  std::vector<Edit> edits;
  for (const hlo::Computation& c : m.computations) {
    for (const hlo::Instruction& inst : c.instructions) {
      if (inst.attributes.size() < 2) continue;
      std::vector<TokenSpan> spans;
      for (const hlo::Attribute& a : inst.attributes) {
        spans.emplace_back(t.IndexAt(a.offset), a.value.end);
      }
      std::vector<size_t> order(spans.size());
      for (size_t p = 0; p < order.size(); ++p) order[p] = order.size() - 1 - p;
      PermuteSpans(t, spans, order, edits);
    }
  }
  return ApplyEdits(m.source(), std::move(edits));
}

// ---------------------------------------------------------------------------------------------
// Sensitivities

namespace {

// A different value of the same element type: integers step towards zero (or up from it),
// floats of magnitude >= 2 halve (exact in every float format), smaller ones grow by one.
std::optional<std::string> ChangedNumber(std::string_view text, TokenKind kind,
                                         hlo::PrimitiveType type) {
  if (text.find_first_of("xXin") != std::string_view::npos) return std::nullopt;  // hex/inf/nan
  if (kind == TokenKind::kInt && !hlo::IsFloat(type)) {
    int64_t v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
    return std::to_string(v > 0 ? v - 1 : v + 1);
  }
  const double v = std::stod(std::string(text));
  const double changed = (v >= 2 || v <= -2) ? v / 2 : v + 1;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", changed);
  return std::string(buf);
}

std::optional<Edit> ReplaceToken(const TokenView& t, uint32_t k, std::string text) {
  return Edit{t.Begin(k), t.End(k), std::move(text)};
}

}  // namespace

Mutated ChangeConstantValue(const hlo::Module& m) {
  const TokenView t(m);
  return FirstReachableSite(
      m, [&](const hlo::Computation&, const hlo::Instruction& inst) -> std::optional<Edit> {
        if (!IsPlain(inst, hlo::Opcode::kConstant) || inst.literal_elided) return std::nullopt;
        for (uint32_t k = inst.literal.begin; k < inst.literal.end; ++k) {
          if (t.Text(k) == "true" || t.Text(k) == "false") {
            return ReplaceToken(t, k, t.Text(k) == "true" ? "false" : "true");
          }
          if (t.Kind(k) != TokenKind::kInt && t.Kind(k) != TokenKind::kFloat) continue;
          if (auto changed = ChangedNumber(t.Text(k), t.Kind(k), inst.shape.type)) {
            return ReplaceToken(t, k, std::move(*changed));
          }
        }
        return std::nullopt;
      });
}

namespace {

// Edit changing the first array shape in the result shape of `inst`: its first dimension grows
// by one, or a scalar becomes a one-element vector. Not for constants, whose literal must match.
std::optional<Edit> GrowFirstDimension(const TokenView& t, const hlo::Instruction& inst) {
  if (inst.name.empty() || !inst.shape_written || IsPlain(inst, hlo::Opcode::kConstant)) {
    return std::nullopt;
  }
  const Located l = Locate(t, inst);
  for (uint32_t type = l.shape; type < l.opcode; ++type) {
    if (!t.AtArrayShape(type)) continue;
    if (t.Kind(type + 2) == TokenKind::kRBracket) {
      return Edit{t.End(type + 1), t.End(type + 1), "1"};
    }
    const uint32_t dim = t.Kind(type + 2) == TokenKind::kLessEq ? type + 3 : type + 2;
    if (t.Kind(dim) != TokenKind::kInt) return std::nullopt;
    int64_t v = 0;
    std::from_chars(t.Text(dim).data(), t.Text(dim).data() + t.Text(dim).size(), v);
    return ReplaceToken(t, dim, std::to_string(v + 1));
  }
  return std::nullopt;
}

}  // namespace

Mutated ChangeDimension(const hlo::Module& m) {
  const TokenView t(m);
  // An entry parameter first: the program's interface changes.
  const hlo::Computation& entry = m.computations[m.entry];
  for (int32_t p : entry.parameters) {
    if (auto edit = GrowFirstDimension(t, entry.instructions[p])) {
      return ApplyEdits(m.source(), {std::move(*edit)});
    }
  }
  return FirstReachableSite(m, [&](const hlo::Computation&, const hlo::Instruction& inst) {
    return GrowFirstDimension(t, inst);
  });
}

Mutated FlipComparisonDirection(const hlo::Module& m) {
  static const std::unordered_map<std::string_view, std::string_view> kFlipped = {
      {"LT", "GT"}, {"GT", "LT"}, {"LE", "GE"}, {"GE", "LE"}, {"EQ", "NE"}, {"NE", "EQ"}};
  const TokenView t(m);
  return FirstReachableSite(
      m, [&](const hlo::Computation&, const hlo::Instruction& inst) -> std::optional<Edit> {
        const hlo::Attribute* direction = inst.FindAttribute("direction");
        if (direction == nullptr) return std::nullopt;
        auto it = kFlipped.find(t.Text(direction->value.begin));
        if (it == kFlipped.end()) return std::nullopt;
        return ReplaceToken(t, direction->value.begin, std::string(it->second));
      });
}

namespace {

// What an instruction computes, as far as its own text tells: everything but its name and the
// numbering and debug attributes the key ignores (channel_id, metadata, ...).
std::string Signature(const TokenView& t, const hlo::Instruction& inst) {
  std::string s = std::string(hlo::OpcodeName(inst.opcode.opcode)) + "/" +
                  std::to_string(static_cast<int>(inst.opcode.phase)) + " " +
                  hlo::CanonicalShapeText(inst.shape) + " p" +
                  std::to_string(inst.parameter_number);
  for (int32_t op : inst.operands) s += " o" + std::to_string(op);
  for (int32_t callee : inst.callees) s += " c" + std::to_string(callee);
  for (uint32_t k = inst.literal.begin; k < inst.literal.end; ++k)
    s += " " + std::string(t.Text(k));
  for (const hlo::Attribute& a : inst.attributes) {
    if (a.name == "channel_id" || hlo::IsDebugOnlyAttribute(a.name)) continue;
    s += " " + std::string(a.name) + "=";
    for (uint32_t k = a.value.begin; k < a.value.end; ++k) s += std::string(t.Text(k)) + " ";
  }
  return s;
}

// True when two instructions compute the same value from the same inputs: swapping them as
// operands gives the same program (e.g. `all-gather(p), channel_id=1` and `all-gather(p),
// channel_id=2`: channel ids are only numbering).
bool LookAlike(const TokenView& t, const hlo::Instruction& a, const hlo::Instruction& b) {
  return Signature(t, a) == Signature(t, b);
}

// Edit swapping the two operands of `inst`, when it has two that differ.
std::optional<Edit> SwapTwoOperands(const TokenView& t, const hlo::Computation& c,
                                    const hlo::Instruction& inst) {
  if (inst.name.empty() || inst.operands.size() != 2 ||
      LookAlike(t, c.instructions[inst.operands[0]], c.instructions[inst.operands[1]])) {
    return std::nullopt;
  }
  const Located l = Locate(t, inst);
  uint32_t comma = 0;
  for (uint32_t k = l.open + 1; k < l.close; ++k) {
    if (IsOpen(t.Kind(k))) k = t.SkipGroup(k) - 1;
    if (t.Kind(k) == TokenKind::kComma) comma = k;
  }
  if (comma == 0) return std::nullopt;
  return t.ReplaceSpan(
      l.open + 1, l.close,
      std::string(t.Span(comma + 1, l.close)) + ", " + std::string(t.Span(l.open + 1, comma)));
}

}  // namespace

Mutated SwapOperands(const hlo::Module& m) {
  static constexpr std::string_view kNonCommutative[] = {"subtract",
                                                         "divide",
                                                         "compare",
                                                         "power",
                                                         "remainder",
                                                         "atan2",
                                                         "shift-left",
                                                         "shift-right-arithmetic",
                                                         "shift-right-logical",
                                                         "dot",
                                                         "concatenate",
                                                         "complex"};
  const TokenView t(m);
  Mutated preferred = FirstReachableSite(
      m, [&](const hlo::Computation& c, const hlo::Instruction& inst) -> std::optional<Edit> {
        const std::string_view opcode = t.Text(Locate(t, inst).opcode);
        if (std::ranges::find(kNonCommutative, opcode) == std::end(kNonCommutative)) {
          return std::nullopt;
        }
        return SwapTwoOperands(t, c, inst);
      });
  if (preferred) return preferred;
  return FirstReachableSite(m, [&](const hlo::Computation& c, const hlo::Instruction& inst) {
    return SwapTwoOperands(t, c, inst);
  });
}

Mutated ChangeAttributeValue(const hlo::Module& m) {
  // Integer-valued op attributes, most common first. Not channel_id: its numbering is invariant.
  static constexpr std::string_view kIntAttributes[] = {"dimensions",
                                                        "index",
                                                        "iota_dimension",
                                                        "lhs_contracting_dims",
                                                        "rhs_contracting_dims",
                                                        "lhs_batch_dims",
                                                        "rhs_batch_dims",
                                                        "slice",
                                                        "dynamic_slice_sizes",
                                                        "slice_sizes",
                                                        "offset_dims",
                                                        "collapsed_slice_dims",
                                                        "start_index_map",
                                                        "index_vector_dim",
                                                        "update_window_dims",
                                                        "inserted_window_dims",
                                                        "scatter_dims_to_operand_dims",
                                                        "feature_group_count",
                                                        "batch_group_count",
                                                        "feature_index",
                                                        "exponent_bits",
                                                        "mantissa_bits",
                                                        "fft_length",
                                                        "split_dimension",
                                                        "concat_dimension",
                                                        "k"};
  const TokenView t(m);
  for (std::string_view name : kIntAttributes) {
    Mutated changed = FirstReachableSite(
        m, [&](const hlo::Computation&, const hlo::Instruction& inst) -> std::optional<Edit> {
          const hlo::Attribute* a = inst.FindAttribute(name);
          if (a == nullptr) return std::nullopt;
          for (uint32_t k = a->value.begin; k < a->value.end; ++k) {
            if (t.Kind(k) != TokenKind::kInt) continue;
            int64_t v = 0;
            std::from_chars(t.Text(k).data(), t.Text(k).data() + t.Text(k).size(), v);
            return ReplaceToken(t, k, std::to_string(v + 1));
          }
          return std::nullopt;
        });
    if (changed) return changed;
  }
  return std::nullopt;
}

Mutated ChangeSharding(const hlo::Module& m) {
  const TokenView t(m);
  // The first word inside the sharding's braces: replicated, maximal, devices, or '{' (tuple).
  auto kind_of = [&](const hlo::Attribute& a) { return t.Text(a.value.begin + 1); };
  auto change = [&](std::string_view wanted) {
    return FirstReachableSite(
        m, [&](const hlo::Computation&, const hlo::Instruction& inst) -> std::optional<Edit> {
          const hlo::Attribute* a = inst.FindAttribute("sharding");
          if (a == nullptr || t.Kind(a->value.begin) != TokenKind::kLBrace) return std::nullopt;
          const std::string_view kind = kind_of(*a);
          if (kind == "replicated" && wanted == kind) {
            return t.ReplaceSpan(a->value.begin, a->value.end, "{maximal device=0}");
          }
          if (kind == "maximal" && wanted == kind) {
            for (uint32_t k = a->value.begin; k < a->value.end; ++k) {
              if (t.Text(k) == "device" && t.Kind(k + 2) == TokenKind::kInt) {
                return ReplaceToken(t, k + 2, t.Text(k + 2) == "0" ? "1" : "0");
              }
            }
          }
          if (wanted == "other" && kind != "replicated" && kind != "maximal" && kind != "{") {
            return t.ReplaceSpan(a->value.begin, a->value.end, "{replicated}");
          }
          return std::nullopt;
        });
  };
  for (std::string_view wanted : {"replicated", "maximal", "other"}) {
    if (Mutated changed = change(wanted)) return changed;
  }
  return std::nullopt;
}

Mutated ChangeOpcode(const hlo::Module& m) {
  // Pairs of opcodes that take the same operands: the changed module still looks valid.
  // clang-format off
  static const std::unordered_map<std::string_view, std::string_view> kOther = {
      {"add", "multiply"},         {"multiply", "add"},       {"subtract", "add"},
      {"maximum", "minimum"},      {"minimum", "maximum"},    {"divide", "multiply"},
      {"exponential", "log"},      {"log", "exponential"},    {"negate", "abs"},
      {"abs", "negate"},           {"sqrt", "rsqrt"},         {"rsqrt", "sqrt"},
      {"tanh", "logistic"},        {"logistic", "tanh"},      {"sine", "cosine"},
      {"cosine", "sine"},          {"and", "or"},             {"or", "and"},
      {"not", "negate"},           {"floor", "ceil"},         {"ceil", "floor"},
      {"reshape", "bitcast"},      {"bitcast", "reshape"},    {"copy", "negate"},
      {"convert", "bitcast-convert"}, {"power", "atan2"},     {"select", "clamp"}};
  // clang-format on
  const TokenView t(m);
  return FirstReachableSite(
      m, [&](const hlo::Computation&, const hlo::Instruction& inst) -> std::optional<Edit> {
        if (inst.name.empty()) return std::nullopt;
        const uint32_t opcode = Locate(t, inst).opcode;
        auto it = kOther.find(t.Text(opcode));
        if (it == kOther.end()) return std::nullopt;
        return ReplaceToken(t, opcode, std::string(it->second));
      });
}

}  // namespace hlocache::mutation
