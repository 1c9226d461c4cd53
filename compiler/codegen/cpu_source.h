// Pieces of generated C++ source shared by the CPU code generator's files: C types of HLO
// element types, literals that read back exactly, and loop nests over index spaces.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "compiler/hlo/module.h"
#include "compiler/hlo/shape.h"
#include "compiler/semantics/literal.h"

namespace hlocache::compiler {

// The C++ type of one element of an array of `t` in generated code (the prelude defines hc_f16
// and hc_bf16); nullptr for the types the code generator does not handle. The sub-byte integers
// s1, s2, s4 (u1, u2, u4) are int8_t (uint8_t) holding the value sign- (zero-) extended: every
// value of such a type is wrapped to its width where it is made (SubByteWrapped).
const char* CType(hlo::PrimitiveType t);

// s1, s2, s4, u1, u2 or u4.
bool IsSubByteInteger(hlo::PrimitiveType t);

// The template arguments of the prelude's width-aware integer helpers (hc_cvt's target, hc_shrl,
// hc_shra, hc_popcnt, hc_clz): "int8_t, 4" for s4, the C type alone for every other type.
std::string TypeAndWidth(hlo::PrimitiveType t);

// `expr`, an element of type `t`, wrapped to t's width when t is a sub-byte integer; else `expr`.
std::string SubByteWrapped(hlo::PrimitiveType t, const std::string& expr);

// A statement wrapping every element of `buffer` (of array shape `s`) to its width when `s` holds
// a sub-byte integer, for results a kernel computes in the whole byte (dot, convolution); empty
// for every other type.
std::string WrapSubBytes(const std::string& buffer, const hlo::Shape& s);

// An int64_t literal: "42LL".
std::string Int(int64_t v);

// A double as C++ source that reads back to exactly that double (hex float, NaN, infinities).
std::string DoubleLiteral(double v);

// Element `e` of a literal as a constant expression of its C type.
std::string ElementLiteral(const interp::Literal& value, size_t e);

int64_t Product(std::span<const int64_t> v);

// Elements and bytes of a buffer of an array shape. A dynamic shape's buffer has room for its
// bounds (ElementCount counts them), then its sizes as int32s, one per dimension (DataBytes is
// the part before them, ByteCount the whole): the layout of compiler/semantics/dynamic_shapes.h.
int64_t ElementCount(const hlo::Shape& s);
int64_t DataBytes(const hlo::Shape& s);
int64_t ByteCount(const hlo::Shape& s);

// Statements declaring `var`, an int64_t array of the sizes of the value of shape `s` in
// `buffer` (its dimensions when static, else read from the buffer and clamped to the bounds),
// and `var`_bounds, the shape's dimensions.
std::string DeclareDims(const std::string& var, const std::string& buffer, const hlo::Shape& s);
// A statement storing the sizes `dims` into `buffer`, of shape `s`; empty when `s` is static.
std::string SetDims(const std::string& buffer, const hlo::Shape& s, const std::string& dims);
// "    static const bool NAME[] = {...};\n" ({false} when empty).
std::string BoolArray(const std::string& name, const std::vector<bool>& v);
// Per dimension of `s`, whether it is dynamic.
std::vector<bool> DynamicFlags(const hlo::Shape& s);

// "    static const int64_t NAME[] = {...};\n" ({0} when empty, which C++ does not allow).
std::string IntArray(const std::string& name, std::span<const int64_t> v);

// The prelude's helper (hc_add, hc_mul, hc_max, hc_min) for a computation that is one add,
// multiply, maximum or minimum of its two scalar parameters of `type` (the usual reducer or
// combiner), or nullptr, when the computation must be called. `swapped`: the op takes the
// second parameter first.
const char* OneOpCombiner(const hlo::Computation& f, hlo::PrimitiveType type, bool& swapped);

// compare in generated code (both code generators' preludes define hc_key and hc_total_key):
// the C++ operator of a direction ("==" for EQ, ... ">=" for GE), nullptr for others; and the
// opening of the key each operand is compared by, closed by "))": floats as doubles, or their
// total order for type=TOTALORDER.
const char* CompareOperator(std::string_view direction);
const char* CompareKey(const hlo::Module& module, const hlo::Instruction& compare,
                       hlo::PrimitiveType operand_type);

// broadcast, transpose, slice and reverse read element d of their result from the operand of
// dimensions `operand_dims` at base + sum over k of d_k * coefficients[k] (row-major offsets).
// Both code generators index this way. kInvalidArgument when an attribute cannot be read (the
// shape checks, interp::CheckShapes, have read them before); kFailedPrecondition for other ops.
struct AffineRead {
  int64_t base = 0;
  std::vector<int64_t> coefficients;  // One per result dimension.
};
Result<AffineRead> AffineReadOf(const hlo::Module& module, const hlo::Instruction& inst,
                                std::span<const int64_t> operand_dims);

// Nested loops over `extents` (variables d0, d1, ...; innermost last) around `body`, indented
// by `indent` spaces.
std::string NestedLoops(std::span<const int64_t> extents, const std::string& body, int indent = 4);

// base + sum over k of d<k> * coefficients[k], omitting zero coefficients.
std::string Affine(const std::string& base, std::span<const int64_t> coefficients);

// Statements that add to each offset variable of `offsets` (name, strides array name) the
// row-major digits of `linear` over the dimension array `dims` of `rank` entries, each times
// its stride.
std::string Digits(const std::string& linear, const std::string& dims, size_t rank,
                   const std::vector<std::pair<std::string, std::string>>& offsets);

}  // namespace hlocache::compiler
