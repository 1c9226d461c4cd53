// Literal: an HLO value held in memory, for the reference interpreter and for checking compiled
// executables against it.
//
// Arrays are dense, in row-major (major-to-minor) order whatever layout their shape names:
// layouts change where bytes sit in a buffer, never what a program computes. Elements are kept
// by kind: floating point as double, rounded to the element type on every store (so an f32
// literal holds exactly the values an f32 buffer can), integers as int64 normalized to the
// type's width (unsigned 64-bit values as their bit pattern), pred as 0 or 1. A token (token[])
// holds no data: one integer element, always 0.
//
// Thread safety: a value type; concurrent const access is safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "compiler/hlo/shape.h"
#include "compiler/semantics/retained_memory.h"

namespace hlocache::interp {

// Whether the interpreter computes with this element type.
bool IsSupportedType(hlo::PrimitiveType type);

class Literal {
 public:
  Literal() = default;
  // Zeros of `shape` (tuples get zero elements of their element shapes). The shape must have
  // static dimensions and supported element types (see MakeZeros for a checked version).
  explicit Literal(hlo::Shape shape);
  // kInvalidArgument for dynamic dimensions, unsupported element types, or more than `limit`
  // elements in all.
  static Result<Literal> MakeZeros(const hlo::Shape& shape, uint64_t limit = uint64_t{1} << 28);

  const hlo::Shape& shape() const { return shape_; }
  hlo::PrimitiveType type() const { return shape_.type; }
  bool is_tuple() const { return shape_.IsTuple(); }
  size_t size() const { return is_float_ ? floats_.size() : ints_.size(); }

  double GetFloat(size_t i) const { return floats_[i]; }
  // The elements of a floating-point array, size() of them; valid until the literal changes.
  const double* float_data() const { return floats_.data(); }
  int64_t GetInt(size_t i) const { return ints_[i]; }
  // Stores `v` rounded (floats) or wrapped (integers) to the element type. Inline: the
  // interpreter's loops store through these.
  inline void SetFloat(size_t i, double v);
  inline void SetInt(size_t i, int64_t v);
  // Any element as a double (for conversions and comparisons of mixed kinds).
  double AsDouble(size_t i) const;
  bool is_float() const { return is_float_; }

  std::vector<Literal>& elements() { return tuple_; }
  const std::vector<Literal>& elements() const { return tuple_; }

  // Exact equality of shapes (ignoring layouts) and values; NaN equals NaN.
  bool operator==(const Literal& other) const;
  // "f32[2,3] {1, 2, 3, 4, 5, 6}": for test failure messages.
  std::string ToString() const;

 private:
  hlo::Shape shape_;
  bool is_float_ = false;
  // Large arrays' buffers are reused within an evaluation (retained_memory.h).
  std::vector<double, RetainableAllocator<double>> floats_;
  std::vector<int64_t, RetainableAllocator<int64_t>> ints_;
  std::vector<Literal> tuple_;
};

// The dense row-major bytes of an array literal as a buffer of its C type holds them (pred as one
// byte, 0 or 1; a token as one byte, 0, which reads back as 0 whatever it holds; s1, s2 and s4
// as one byte each, sign-extended, u1, u2 and u4 zero-extended, read back from the byte's low
// bits alone), and back.
// FromBytes: kInvalidArgument when `bytes` has the wrong size.
std::string ToBytes(const Literal& array);
Result<Literal> FromBytes(const hlo::Shape& shape, std::string_view bytes);

// Rounds to the value set of a floating-point type (f16, bf16, f32 or f64).
double RoundToType(double v, hlo::PrimitiveType type);
// Wraps to the value set of an integer type (two's complement), or 0/1 for pred.
int64_t WrapToType(int64_t v, hlo::PrimitiveType type);

inline void Literal::SetFloat(size_t i, double v) {
  switch (shape_.type) {
    case hlo::PrimitiveType::kF64:
      floats_[i] = v;
      return;
    case hlo::PrimitiveType::kF32:
      floats_[i] = static_cast<double>(static_cast<float>(v));
      return;
    default:
      floats_[i] = RoundToType(v, shape_.type);
  }
}

inline void Literal::SetInt(size_t i, int64_t v) {
  switch (shape_.type) {
    case hlo::PrimitiveType::kS64:
    case hlo::PrimitiveType::kU64:
      ints_[i] = v;
      return;
    case hlo::PrimitiveType::kS32:
      ints_[i] = static_cast<int32_t>(v);
      return;
    case hlo::PrimitiveType::kU32:
      ints_[i] = static_cast<uint32_t>(v);
      return;
    default:
      ints_[i] = WrapToType(v, shape_.type);
  }
}

}  // namespace hlocache::interp
