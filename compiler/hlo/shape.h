// Element types, layouts and shapes of HLO values.
//
// A Shape is an array (element type, dimensions, optional layout) or a tuple of shapes. Layouts are
// kept as written: `layout` is empty when the text printed none, which by the format's rules means
// the default (major-to-minor) layout. HasDefaultLayout() says whether a shape's layout, written or
// not, is the default one; the canonical printer relies on it to make `f32[2,3]` and
// `f32[2,3]{1,0}` the same.
//
// Thread safety: plain values.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/small_vector.h"

namespace hlocache::hlo {

#define HLOCACHE_PRIMITIVE_TYPE_LIST(X) \
  X(kPred, "pred", 1)                   \
  X(kS1, "s1", 1)                       \
  X(kS2, "s2", 2)                       \
  X(kS4, "s4", 4)                       \
  X(kS8, "s8", 8)                       \
  X(kS16, "s16", 16)                    \
  X(kS32, "s32", 32)                    \
  X(kS64, "s64", 64)                    \
  X(kU1, "u1", 1)                       \
  X(kU2, "u2", 2)                       \
  X(kU4, "u4", 4)                       \
  X(kU8, "u8", 8)                       \
  X(kU16, "u16", 16)                    \
  X(kU32, "u32", 32)                    \
  X(kU64, "u64", 64)                    \
  X(kF16, "f16", 16)                    \
  X(kBF16, "bf16", 16)                  \
  X(kF32, "f32", 32)                    \
  X(kF64, "f64", 64)                    \
  X(kC64, "c64", 64)                    \
  X(kC128, "c128", 128)                 \
  X(kF8E5M2, "f8e5m2", 8)               \
  X(kF8E4M3, "f8e4m3", 8)               \
  X(kF8E4M3FN, "f8e4m3fn", 8)           \
  X(kF8E4M3B11FNUZ, "f8e4m3b11fnuz", 8) \
  X(kF8E5M2FNUZ, "f8e5m2fnuz", 8)       \
  X(kF8E4M3FNUZ, "f8e4m3fnuz", 8)       \
  X(kF8E3M4, "f8e3m4", 8)               \
  X(kF8E8M0FNU, "f8e8m0fnu", 8)         \
  X(kF4E2M1FN, "f4e2m1fn", 4)           \
  X(kF6E3M2FN, "f6e3m2fn", 6)           \
  X(kF6E2M3FN, "f6e2m3fn", 6)           \
  X(kToken, "token", 0)                 \
  X(kOpaque, "opaque", 0)

enum class PrimitiveType : uint8_t {
#define HLOCACHE_PT_ENUM(e, s, bits) e,
  HLOCACHE_PRIMITIVE_TYPE_LIST(HLOCACHE_PT_ENUM)
#undef HLOCACHE_PT_ENUM
      kTuple,
};

std::string_view PrimitiveTypeName(PrimitiveType type);
std::optional<PrimitiveType> PrimitiveTypeFromName(std::string_view name);
int PrimitiveTypeBits(PrimitiveType type);  // 0 for token, opaque and tuple.
// Bytes one element takes in a dense buffer of executables and literals: pred and sub-byte types
// take a whole byte.
inline int64_t BufferElementBytes(PrimitiveType t) {
  const int bits = PrimitiveTypeBits(t);
  return (bits < 8 ? 8 : bits) / 8;
}

bool IsSignedInt(PrimitiveType t);
bool IsUnsignedInt(PrimitiveType t);
bool IsFloat(PrimitiveType t);  // Real floating point, f4 .. f64.
bool IsComplex(PrimitiveType t);

struct Layout {
  // Dimension numbers, each below a shape's most dimensions (64): eight kept in place, so that
  // a module's tens of thousands of written layouts need no heap block each.
  SmallVector<int8_t, 8> minor_to_major;
  // Normalized text of everything after ':' (tiles, memory space, element size, ...), without
  // spaces; null when the layout has no ':' part, as nearly every one has none: a pointer (16
  // bytes) where a string took 32 in each of a module's tens of thousands of shapes. Copies of
  // the layout share the text.
  std::shared_ptr<const std::string> details;

  // The text after ':', empty when there is none.
  std::string_view Details() const {
    return details ? std::string_view(*details) : std::string_view();
  }
};

// An array shape's dimensions: four kept in place, which nearly every shape needs no more
// than, so that the tens of thousands of shapes of a large module need no heap block each.
using Dims = SmallVector<int64_t, 4>;

struct Shape {
  // Array dimensions. For a bounded dynamic dimension (`<=N`) the bound, for an unbounded one
  // (`?`) kUnboundedDim.
  Dims dims;
  // Empty when every dimension is static; else one flag per dimension (eight kept in place).
  SmallVector<bool, 8> dynamic;
  std::optional<Layout> layout;
  std::vector<Shape> tuple_elements;  // For tuples only.
  // Last, together: one word for both, where each took one of its own.
  PrimitiveType type = PrimitiveType::kTuple;
  bool is_buffer = false;  // `b(...)`: a buffer of the one element shape.

  static constexpr int64_t kUnboundedDim = -1;

  bool IsTuple() const { return type == PrimitiveType::kTuple && !is_buffer; }
  bool IsArray() const { return type != PrimitiveType::kTuple; }
  int64_t rank() const { return static_cast<int64_t>(dims.size()); }
  bool IsDynamicDim(size_t i) const { return i < dynamic.size() && dynamic[i]; }
  // Product of dims; nullopt when dynamic or on overflow past 2^62.
  std::optional<int64_t> ElementCount() const;
  // Whether an array dimension is dynamic (bounded or not).
  bool IsDynamic() const { return !dynamic.empty(); }
  // Product of dims, a bounded dynamic dimension at its bound: the elements a buffer holding any
  // value of the shape has room for. nullopt for an unbounded dimension or past 2^62.
  std::optional<int64_t> BoundElementCount() const;
  // True when no layout was written, or the written one is {rank-1, ..., 0} with no details.
  bool HasDefaultLayout() const;
};

// Whether `shape` or one of its leaves has a dynamic dimension.
bool HasDynamicLeaf(const Shape& shape);

// Row-major element strides of `dims`: the last dimension's is 1.
std::vector<int64_t> RowMajorStrides(std::span<const int64_t> dims);

// Whether `dims` names distinct dimensions of a shape of rank `rank` (as dimensions={...},
// permutations and contracting dimensions must).
bool AreDistinctDimensions(std::span<const int64_t> dims, size_t rank);

// Whether values of the two shapes are interchangeable: layouts aside, the same tree of element
// types and dimensions.
bool SameValues(const Shape& a, const Shape& b);

// Appends pointers to the array leaves of `shape` (itself when it is an array), depth-first:
// the order in which executables take and return tuple elements.
void AppendLeafShapes(const Shape& shape, std::vector<const Shape*>& out);

// Appends the shape's canonical text: default layouts omitted, no spaces. Tuples as
// "(a, b)" with one space after commas, as XLA prints them.
void AppendCanonicalShape(const Shape& shape, std::string& out);
std::string CanonicalShapeText(const Shape& shape);

}  // namespace hlocache::hlo
