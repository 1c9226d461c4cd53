// The shape rules of gather and scatter; their evaluation is
// compiler/interp/eval_gather_scatter.cc.
// compiler/interp/eval_gather_scatter.cc).
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include "compiler/hlo/gather_scatter_dims.h"
#include "compiler/semantics/rules/families.h"

namespace hlocache::interp {
namespace {

using hlo::Instruction;
using hlo::Opcode;
using hlo::PrimitiveType;
using hlo::Shape;
using hlo::SliceAddressing;

bool Takes(Opcode op) { return op == Opcode::kGather || op == Opcode::kScatter; }

// The scalar shape of an element of `s`.
Shape ScalarOf(const Shape& s) {
  Shape scalar;
  scalar.type = s.type;
  return scalar;
}

Status CheckGather(const ShapeContext& ctx, const Instruction& inst,
                   std::span<const Shape* const> operands) {
  if (operands.size() != 2) return ctx.Malformed(inst, "takes an operand and start indices");
  auto a = hlo::GatherAddressing(ctx.module(), inst, *operands[0], *operands[1]);
  if (!a) return ctx.Malformed(inst, a.error().message());
  for (size_t d = 0; d < a->window_sizes.size(); ++d) {
    // A slice of no elements along a dimension the result drops names no element to read.
    if (a->window_sizes[d] == 0 &&
        std::find(a->window_operand_dims.begin(), a->window_operand_dims.end(),
                  static_cast<int64_t>(d)) == a->window_operand_dims.end()) {
      return ctx.Unsupported(inst, "a gather whose collapsed or batching slice size is 0");
    }
  }
  return Status::Ok();
}

Status CheckUpdateComputation(const ShapeContext& ctx, const Instruction& inst,
                              std::span<const Shape* const> operands, size_t n) {
  HLOCACHE_ASSIGN_OR_RETURN(int32_t callee, ctx.Callee(inst, "to_apply"));
  const hlo::Computation& f = ctx.module().computations[static_cast<size_t>(callee)];
  if (f.parameters.size() != 2 * n) {
    return ctx.Malformed(inst, "the update computation takes " +
                                   std::to_string(f.parameters.size()) + " parameters, not " +
                                   std::to_string(2 * n));
  }
  for (size_t p = 0; p < 2 * n; ++p) {
    if (f.parameters[p] < 0) return ctx.Malformed(inst, "the update computation lacks a parameter");
    const Shape& have = f.instructions[static_cast<size_t>(f.parameters[p])].shape;
    const Shape want = ScalarOf(*operands[p % n]);
    if (hlo::SameValues(have, want)) continue;
    if (have.IsArray() && have.dims.empty()) {
      return ctx.Unsupported(inst,
                             "an update computation of other element types than the "
                             "operands'");
    }
    return ctx.Malformed(
        inst, "parameter " + std::to_string(p) + " of the update computation is not a scalar");
  }
  if (f.root < 0) return ctx.Malformed(inst, "the update computation has no root");
  const Shape& root = f.instructions[static_cast<size_t>(f.root)].shape;
  Shape tuple;
  for (size_t k = 0; k < n; ++k) tuple.tuple_elements.push_back(ScalarOf(*operands[k]));
  // One operand's computation may return its scalar bare or as a one-element tuple.
  if (hlo::SameValues(root, tuple) || (n == 1 && hlo::SameValues(root, tuple.tuple_elements[0]))) {
    return Status::Ok();
  }
  return ctx.Malformed(inst, "the update computation does not return one scalar per operand");
}

Status CheckScatter(const ShapeContext& ctx, const Instruction& inst,
                    std::span<const Shape* const> operands) {
  if (operands.size() < 3 || operands.size() % 2 == 0) {
    return ctx.Malformed(inst, "takes n operands, the indices and n updates");
  }
  const size_t n = (operands.size() - 1) / 2;
  const Shape& operand = *operands[0];
  const Shape& updates = *operands[n + 1];
  auto a = hlo::ScatterAddressing(ctx.module(), inst, operand, *operands[n], updates);
  if (!a) return ctx.Malformed(inst, a.error().message());
  Shape result;
  for (size_t k = 0; k < n; ++k) {
    const Shape& o = *operands[k];
    const Shape& u = *operands[n + 1 + k];
    if (!o.IsArray() || o.dims != operand.dims) {
      return ctx.Malformed(inst, "operand " + std::to_string(k) + " differs from operand 0");
    }
    if (!u.IsArray() || u.dims != updates.dims) {
      return ctx.Malformed(inst, "updates " + std::to_string(k) + " differ from updates 0");
    }
    if (u.type != o.type) {
      return ctx.Malformed(inst, "updates " + std::to_string(k) + " are not of operand " +
                                     std::to_string(k) + "'s element type");
    }
    Shape r;
    r.type = o.type;
    r.dims = o.dims;
    result.tuple_elements.push_back(std::move(r));
  }
  if (!hlo::SameValues(inst.shape, n == 1 ? result.tuple_elements[0] : result)) {
    return ctx.Malformed(inst, "the result is not of the operands' shapes");
  }
  return CheckUpdateComputation(ctx, inst, operands, n);
}

Status Check(const ShapeContext& ctx, const Instruction& inst,
             std::span<const Shape* const> operands) {
  return inst.opcode.opcode == Opcode::kGather ? CheckGather(ctx, inst, operands)
                                               : CheckScatter(ctx, inst, operands);
}

}  // namespace

ShapeRules GatherScatterRules() { return {Takes, Check}; }

}  // namespace hlocache::interp
