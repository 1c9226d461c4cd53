// The reference interpreter's evaluator: the driver that walks a computation and the core
// ops, evaluated on literals. Internal to compiler/interp: the driver is in evaluator.cc, each
// family of core ops in a core_*.cc (elementwise, data movement, reduce, dot; their shape rules
// are compiler/semantics/rules/core.cc); interpreter.h is the interface.
//
// Thread safety: an Evaluator evaluates one computation at a time; the module is only read.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <limits>
#include <map>
#include <span>
#include <type_traits>

#include "compiler/interp/eval_context.h"
#include "compiler/interp/extended_ops.h"
#include "compiler/interp/interpreter.h"
#include "compiler/semantics/constant.h"
#include "compiler/semantics/dynamic_shapes.h"

namespace hlocache::interp::internal {

using hlo::Computation;
using hlo::Instruction;
using hlo::Opcode;
using hlo::PrimitiveType;
using hlo::Shape;

// Steps a row-major multi-index; false after the last one.
inline bool Next(std::vector<int64_t>& index, std::span<const int64_t> dims) {
  for (size_t d = dims.size(); d-- > 0;) {
    if (++index[d] < dims[d]) return true;
    index[d] = 0;
  }
  return false;
}

// A float's place in the total order, as a signed integer: its bits, with the magnitude's
// flipped when negative. Through double, which keeps every narrower float's sign, order and
// NaNs (generated code computes the same key, hc_total_key).
inline int64_t TotalOrderKey(double v) {
  const auto bits = std::bit_cast<int64_t>(v);
  return bits < 0 ? bits ^ std::numeric_limits<int64_t>::max() : bits;
}

inline int64_t Offset(std::span<const int64_t> index, std::span<const int64_t> strides) {
  int64_t off = 0;
  for (size_t d = 0; d < index.size(); ++d) off += index[d] * strides[d];
  return off;
}

inline bool IsUnsigned(PrimitiveType t) { return hlo::IsUnsignedInt(t); }
inline int Bits(PrimitiveType t) { return hlo::PrimitiveTypeBits(t); }

// The value range of an integer type, as doubles, for saturating conversions.
inline std::pair<double, double> IntRange(PrimitiveType t) {
  const int bits = Bits(t);
  if (t == PrimitiveType::kPred) return {0, 1};
  if (IsUnsigned(t)) return {0, std::ldexp(1.0, bits) - 1};
  return {-std::ldexp(1.0, bits - 1), std::ldexp(1.0, bits - 1) - 1};
}

class Evaluator : public EvalContext {
 public:
  explicit Evaluator(const hlo::Module& m, HostTransfers* host = nullptr)
      : EvalContext(m), m_(m), host_(host) {}

  Result<Literal> Call(int32_t comp_index, std::span<const Literal> args) override {
    return CallWith(comp_index, args, {});
  }
  Result<Literal> CallTaking(int32_t comp_index, std::span<Literal> args) override {
    return CallWith(comp_index, args, args);
  }
  Literal* Donated(const Instruction& inst, size_t k) override;

  uint64_t* RngState(const Instruction& inst) override { return rng_states_[&inst].data(); }

  HostTransfers* Host() override { return host_; }

  Result<Literal> CallElementwise(int32_t comp_index, std::span<const Literal> args) override;

 private:
  static Shape ArrayOf(PrimitiveType type, hlo::Dims dims) {
    Shape s;
    s.type = type;
    s.dims = std::move(dims);
    return s;
  }

  // `s` (a scalar or a tuple of scalars) with `n` elements in each array.
  static Shape Spread(const Shape& s, int64_t n) {
    if (!s.IsTuple()) return ArrayOf(s.type, {n});
    Shape t;
    for (const Shape& e : s.tuple_elements) t.tuple_elements.push_back(Spread(e, n));
    return t;
  }

  static bool IsScalarOrScalars(const Shape& s) {
    if (!s.IsTuple()) return !s.is_buffer && s.dims.empty();
    for (const Shape& e : s.tuple_elements) {
      if (e.IsTuple() || !IsScalarOrScalars(e)) return false;
    }
    return true;
  }

  // Whether computation `c` can be evaluated once over whole arrays of its scalars (CallMapped):
  // every instruction is a scalar elementwise op, a constant, a parameter, a tuple of scalars or
  // an element of one, or a call of such a computation.
  bool Mappable(int32_t c, int depth = 0);

  static bool IsMappableOp(Opcode op) { return IsCoreElementwiseOp(op); }

  // Computation `c` of scalars evaluated once over arrays of `n` elements: each instruction on
  // whole arrays, with the same per-element semantics as Call (every core elementwise op
  // computes element i from elements i alone).
  Result<Literal> CallMapped(int32_t c, std::span<const Literal> args, int64_t n);

  std::vector<int8_t> mappable_;  // Per computation: -1 not yet known, 0 no, 1 yes.

  // What Call needs to know of a computation, worked out once per computation: where each
  // value is last used, what it need not evaluate, and which values it may take rather than
  // copy. A loop's state then passes from iteration to iteration without a copy, and an update
  // of it (scatter, dynamic-update-slice) is made in place.
  struct CallPlan {
    bool built = false;
    // The index of each instruction's last user that is evaluated.
    std::vector<size_t> last_use;
    // Get-tuple-elements nothing reads (not the root): not evaluated.
    std::vector<uint8_t> dead;
    // Tuple parameters read only by get-tuple-elements: never built; their get-tuple-elements
    // read the argument itself.
    std::vector<uint8_t> read_through;
    // A parameter whose number no other parameter has; a get-tuple-element of a read-through
    // parameter that no other live one reads at its index. When Call was given its arguments
    // to take (CallTaking), these take their value from the argument rather than copy it.
    std::vector<uint8_t> takes;
  };
  std::vector<CallPlan> plans_;
  const CallPlan& PlanOf(int32_t comp_index);

  Result<Literal> CallWith(int32_t comp_index, std::span<const Literal> args,
                           std::span<Literal> taken);

  // The position of `inst` in the computation being evaluated, or SIZE_MAX when it is not one
  // of its instructions (a computation of scalars evaluated over arrays, or a resized copy).
  size_t IndexInCurrent(const Instruction& inst) const {
    if (comp_ == nullptr || &inst < comp_->instructions.data() ||
        &inst >= comp_->instructions.data() + comp_->instructions.size()) {
      return SIZE_MAX;
    }
    return static_cast<size_t>(&inst - comp_->instructions.data());
  }

  // Whether operand `k` of `inst`, an instruction of the computation Call is evaluating, is
  // used by nothing after it (nor is its computation's root, nor another operand of `inst`): a
  // tuple or get-tuple-element then takes the operand's value rather than copying it.
  bool LastUseOf(const Instruction& inst, size_t k) const;
  std::map<const Instruction*, std::array<uint64_t, 2>> rng_states_;

  std::vector<int64_t> IntsOrEmpty(const Instruction& inst, const char* name) const {
    const hlo::Attribute* a = inst.FindAttribute(name);
    if (a == nullptr) return {};
    auto v = m_.IntList(*a);
    return v ? *v : std::vector<int64_t>();
  }

  Result<Literal> Eval(const Instruction& inst, std::vector<Literal>& values,
                       std::span<const Literal> args);

  // The declared shape of instruction `i` of the computation being evaluated.
  const Shape& DeclaredShape(int32_t i) const {
    return comp_->instructions[static_cast<size_t>(i)].shape;
  }

  // Whether `inst`, an instruction of the computation being evaluated, has a dynamic shape or
  // an operand of one (dynamic_shapes.h).
  bool TouchesDynamicShapes(const Instruction& inst) const;

  // Refuses the ops that take no dynamic shapes, and unbounded dimensions.
  Status CheckDynamicShapes(const Instruction& inst) const;

  // A core op of static shapes (or sized to its run time ones): checked, then evaluated.
  Result<Literal> EvalStatic(const Instruction& inst, std::vector<Literal>& values);

  // The core op `inst` on `values` (its operands among them), into `out`, a literal of its
  // result's shape that CheckShapes accepted.
  Result<Literal> EvalInto(const Instruction& inst, std::vector<Literal>& values, Literal out);

 public:
  // dot on operands that are not the instruction's own (scaled-dot's, dequantized).
  Status DotOf(const Instruction& inst, const Literal& lhs, const Literal& rhs,
               Literal& out) const {
    return Dot(inst, lhs, rhs, out);
  }

 private:
  template <typename Fn>
  static void ForEachIndex(const Literal& out, Fn fn) {
    const auto& dims = out.shape().dims;
    if (out.size() == 0) return;
    std::vector<int64_t> idx(dims.size(), 0);
    size_t i = 0;
    do {
      fn(i++, idx);
    } while (Next(idx, dims));
  }

  static void Store(Literal& out, size_t i, double as_float, int64_t as_int) {
    if (out.is_float()) {
      out.SetFloat(i, as_float);
    } else {
      out.SetInt(i, as_int);
    }
  }
  static void CopyElement(const Literal& in, size_t from, Literal& out, size_t to) {
    if (out.is_float()) {
      out.SetFloat(to, in.GetFloat(from));
    } else {
      out.SetInt(to, in.GetInt(from));
    }
  }

  static void Convert(const Literal& in, size_t from, Literal& out, size_t to);

  // The ops that only move elements: slice, reverse, pad, concatenate, dynamic-slice and
  // dynamic-update-slice. Each output element names its source by index arithmetic.
  Status MoveData(const Instruction& inst, const std::vector<Literal>& values, Literal& out);

  Status Compare(const Instruction& inst, const Literal& a, const Literal& b, Literal& out) const;

  Status Unary(const Instruction& inst, const Literal& a, Literal& out) const;

  Status Binary(const Instruction& inst, const Literal& a, const Literal& b, Literal& out) const;

  // reduce(operands..., inits...), dimensions={...}, to_apply=f: each output element folds, in
  // row-major order of the reduced dimensions, f over the inputs starting from the inits.
  Status Reduce(const Instruction& inst, std::vector<Literal>& values, Literal& out);

  // The root of computation `c` when it is nothing but one associative binary op on its two
  // scalar parameters of type `t` (the usual add, max, min ... reducer); null otherwise.
  // `swapped`: the op takes the second parameter (the element) first.
  const Instruction* OneBinaryOp(int32_t c, PrimitiveType t, bool& swapped) const;

  // reduce with a one-op reducer (see OneBinaryOp), over all results at once: one pass of
  // the op per step of the reduced dimensions, in their row-major order. Each result goes
  // through the same steps as under the definition, one element at a time.
  Status ReduceAllAtOnce(const Instruction& op, bool swapped, const Literal& in,
                         const Literal& init, const std::vector<bool>& reduced,
                         std::span<const int64_t> strides, Literal& out) const;

  // dot: output dims are the batch dims, then lhs's free dims, then rhs's free dims. Each
  // result element sums its products in row-major order of the contracting dimensions,
  // starting from zero. The loops run over a dense copy of one batch of rhs, with a row of
  // results accumulated at once, so that the innermost loop walks memory in order: the sums
  // and their order are those of the one-element-at-a-time definition.
  Status Dot(const Instruction& inst, const Literal& lhs, const Literal& rhs, Literal& out) const;

  // The rows of results of dot, kRows at a time (core_dot.cc).
  template <typename Acc, typename LhsAt, typename RhsAt>
  static void DotRows(const std::vector<size_t>& l_batch, const std::vector<size_t>& l_free,
                      const std::vector<size_t>& l_con, const std::vector<size_t>& r_batch,
                      const std::vector<size_t>& r_free, const std::vector<size_t>& r_con,
                      Literal& out, LhsAt lhs_at, RhsAt rhs_at);

  const hlo::Module& m_;
  HostTransfers* host_;  // Borrowed; may be null.
  // The computation Call is evaluating, its plan, its values and, when it was given its
  // arguments to take, those arguments.
  const Computation* comp_ = nullptr;
  const CallPlan* plan_ = nullptr;
  std::vector<Literal>* values_ = nullptr;
  std::span<Literal> taken_;
};

}  // namespace hlocache::interp::internal
