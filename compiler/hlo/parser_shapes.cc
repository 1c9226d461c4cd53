// The HLO parser: literals (constants' values, checked against their shapes), shapes and
// layouts.
#include "compiler/hlo/parser_impl.h"

namespace hlocache::hlo::parser_internal {

bool Parser::ParseLiteral(Instruction& inst, uint32_t open_offset) {
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

bool Parser::IsScalarToken(uint32_t i) const {
  const Token& t = toks_[i];
  if (t.kind == TokenKind::kInt || t.kind == TokenKind::kFloat) return true;
  if (t.kind != TokenKind::kIdent) return false;
  std::string_view s = m_.TokenText(t);
  return s == "true" || s == "false" || s == "inf" || s == "nan";
}

// Checks that an array literal's nesting and element counts match the shape. Scalars may be
// written bare or as (re, im) for complex types; nan payloads `nan(0x..)` are accepted.
bool Parser::ValidateLiteral(const Shape& shape, TokenRange range) {
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

namespace {

// `from`, an array shape, into `to`: Shape's own assignment also copies a tuple's elements,
// which as much code again as the rest made the memo's every use pay for.
void CopyArrayShape(const Shape& from, Shape& to) {
  to.dims = from.dims;
  to.dynamic = from.dynamic;
  to.layout = from.layout;
  to.tuple_elements.clear();
  to.type = from.type;
  to.is_buffer = from.is_buffer;
}

}  // namespace

uint32_t Parser::PlainArrayShapeEnd() const {
  // The kEnd that closes every token stream stops each loop.
  uint32_t i = pos_ + 1;
  if (toks_[i].kind != TokenKind::kLBracket) return 0;
  for (++i;; ++i) {
    const TokenKind k = toks_[i].kind;
    if (k == TokenKind::kRBracket) break;
    if (k != TokenKind::kInt && k != TokenKind::kComma && k != TokenKind::kLessEq &&
        k != TokenKind::kOther) {
      return 0;
    }
  }
  ++i;
  // A layout, as ParseArrayShape takes it: `{` then a number, ':' or `}`.
  if (toks_[i].kind != TokenKind::kLBrace) return i;
  const TokenKind first = toks_[i + 1].kind;
  if (first != TokenKind::kInt && first != TokenKind::kRBrace) {
    return first == TokenKind::kColon ? 0 : i;
  }
  for (++i;; ++i) {
    const TokenKind k = toks_[i].kind;
    if (k == TokenKind::kRBrace) return i + 1;
    if (k != TokenKind::kInt && k != TokenKind::kComma) return 0;
  }
}

bool Parser::ParseShape(Shape& shape, int depth, int32_t* text_id) {
  if (depth > kMaxNesting) return FailHere("shape nested too deeply");
  if (Kind() == TokenKind::kLParen) {
    Advance();
    shape.type = PrimitiveType::kTuple;
    // Shapes are large: their elements are placed once, not moved at every doubling.
    shape.tuple_elements.reserve(CountListAhead());
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
  const uint32_t end = PlainArrayShapeEnd();
  if (end == 0) return ParseArrayShape(shape);
  const std::string_view text = m_.SourceText({pos_, end});
  const bool as_last = last_shape_id_ >= 0 && text.size() == last_shape_text_.size() &&
                       NameTable::SameBytes(text.data(), last_shape_text_.data(), text.size());
  const int32_t known = as_last ? last_shape_id_ : shape_memo_index_.Find(text);
  if (known >= 0) {
    last_shape_text_ = text;
    last_shape_id_ = known;
    CopyArrayShape(shape_memo_[static_cast<size_t>(known)], shape);
    pos_ = end;
    if (text_id != nullptr) *text_id = known;
    return true;
  }
  if (!ParseArrayShape(shape)) return false;
  if (pos_ == end) {  // As it should be; were it not, the memo would not be the parse.
    const auto id = static_cast<int32_t>(shape_memo_.size());
    shape_memo_index_.Insert(text, id);
    shape_memo_.push_back(shape);
    last_shape_text_ = text;
    last_shape_id_ = id;
    if (text_id != nullptr) *text_id = id;
  }
  return true;
}

bool Parser::ParseArrayShape(Shape& shape) {
  const std::optional<PrimitiveType> type = PrimitiveTypeFromName(Text());
  if (!type) {
    if (Kind(1) == TokenKind::kLBracket) {
      return Fail(Peek().offset, "unknown element type '" + std::string(Text()) + "'");
    }
    return FailHere("expected an element type (f32, s32, pred, ...)");
  }
  shape.type = *type;
  Advance();
  if (!Expect(TokenKind::kLBracket, "'[' after the element type")) return false;
  // Gathered here, then allocated once at their number (a pass ahead to count them cost more).
  int64_t dims[kMaxDims];
  size_t rank = 0;
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
      shape.dynamic.resize(rank + 1, false);
      shape.dynamic.back() = true;
    } else if (!shape.dynamic.empty()) {
      shape.dynamic.push_back(false);
    }
    if (rank == kMaxDims) return FailHere("too many dimensions");
    dims[rank++] = dim;
    if (Kind() == TokenKind::kComma) {
      Advance();
    } else if (Kind() != TokenKind::kRBracket) {
      return FailHere("expected ',' or ']' in dimensions");
    }
  }
  Advance();
  shape.dims.assign(dims, dims + rank);
  if (Kind() == TokenKind::kLBrace && (Kind(1) == TokenKind::kInt || Kind(1) == TokenKind::kColon ||
                                       Kind(1) == TokenKind::kRBrace)) {
    return ParseLayout(shape);
  }
  return true;
}

// Elements of the list that starts at pos_ and ends at the ')' closing it: commas at its own
// depth, plus one. A reservation hint only.
size_t Parser::CountListAhead() const {
  size_t count = 0;
  int depth = 0;
  for (size_t i = pos_; i < token_count_; ++i) {
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

bool Parser::ParseLayout(Shape& shape) {
  const uint32_t open_offset = Peek().offset;
  Advance();
  Layout layout;
  layout.minor_to_major.reserve(shape.dims.size());
  while (Kind() == TokenKind::kInt) {
    int64_t d = 0;
    if (!ParseInt(d)) return false;
    // A number past any dimension is kept as -1, which the permutation check below refuses.
    layout.minor_to_major.push_back(
        d >= 0 && d < static_cast<int64_t>(kMaxDims) ? static_cast<int8_t>(d) : int8_t{-1});
    if (Kind() == TokenKind::kComma) Advance();
  }
  if (Kind() == TokenKind::kColon) {
    Advance();
    // Tiles, memory space and the like: kept as normalized text.
    std::string details;
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
      if (!details.empty() && NeedsSpaceBetween(toks_[pos_ - 1].kind, k)) details += ' ';
      details += Text();
      Advance();
    }
    if (!details.empty()) layout.details = std::make_shared<const std::string>(std::move(details));
  }
  if (!Expect(TokenKind::kRBrace, "'}' closing the layout")) return false;
  if (layout.minor_to_major.size() != shape.dims.size()) {
    return Fail(open_offset, "layout has " + std::to_string(layout.minor_to_major.size()) +
                                 " dimensions but the shape has " +
                                 std::to_string(shape.dims.size()));
  }
  uint64_t seen = 0;  // ParseShape allows at most kMaxDims (64) dimensions.
  for (int64_t d : layout.minor_to_major) {
    if (d < 0 || d >= static_cast<int64_t>(shape.dims.size()) || (seen >> d & 1) != 0) {
      return Fail(open_offset, "layout is not a permutation of the dimensions");
    }
    seen |= uint64_t{1} << d;
  }
  shape.layout = std::move(layout);
  return true;
}

}  // namespace hlocache::hlo::parser_internal
