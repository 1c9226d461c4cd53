// Canonical spelling of numbers in HLO text.
//
// Two spellings of one value print the same: `1`, `1.0` and `1e0` as an f32 element are all "1";
// a float literal is first rounded to its element type (f16, bf16, f32, f64), then printed in the
// shortest form that reads back to the same value. Integers print in decimal; pred as true/false.
// NaN keeps its sign; -0 stays distinct from 0 (both are observable).
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "compiler/hlo/shape.h"
#include "compiler/hlo/token.h"

namespace hlocache::hlo {

// Appends the canonical spelling of one literal element of `type` written as `text` (a kInt,
// kFloat or kIdent token). Text that is not a number of that type is appended unchanged.
void AppendCanonicalElement(std::string_view text, TokenKind kind, PrimitiveType type,
                            std::string& out);

// Appends the canonical spelling of a number in an attribute value, where no element type is
// known: integers in decimal, floats as the shortest double that reads back the same.
void AppendCanonicalNumber(std::string_view text, TokenKind kind, std::string& out);

}  // namespace hlocache::hlo
