// The shape rules of set-dimension-size, get-dimension-size and dynamic-reshape; their
// evaluation is compiler/interp/eval_dynamic.cc.
#include <algorithm>
#include <string>

#include "compiler/semantics/dynamic_shapes.h"
#include "compiler/semantics/rules/families.h"
#include "compiler/semantics/signature.h"

namespace hlocache::interp {
namespace {

using hlo::Instruction;
using hlo::Opcode;
using hlo::PrimitiveType;
using hlo::Shape;

bool Takes(Opcode op) {
  return op == Opcode::kSetDimensionSize || op == Opcode::kGetDimensionSize ||
         op == Opcode::kDynamicReshape;
}

bool IsIntegerScalar(const Shape& s) {
  return s.IsArray() && s.dims.empty() && (hlo::IsSignedInt(s.type) || hlo::IsUnsignedInt(s.type));
}

Status Check(const ShapeContext& ctx, const Instruction& inst,
             std::span<const Shape* const> operands) {
  const Shape& r = inst.shape;
  if (operands.empty() || !operands[0]->IsArray() || !r.IsArray()) {
    return ctx.Malformed(inst, "takes and returns arrays");
  }
  const Shape& x = *operands[0];
  switch (inst.opcode.opcode) {
    case Opcode::kGetDimensionSize:
      if (operands.size() != 1) return ctx.Malformed(inst, "takes one operand");
      if (auto d = DynamicOpDimension(ctx, inst, x.dims.size()); !d) return d.error();
      if (!IsIntegerScalar(r)) return ctx.Malformed(inst, "the result is not an integer scalar");
      return Status::Ok();
    case Opcode::kSetDimensionSize: {
      if (operands.size() != 2 || !IsIntegerScalar(*operands[1])) {
        return ctx.Malformed(inst, "takes an array and an integer scalar size");
      }
      if (auto d = DynamicOpDimension(ctx, inst, x.dims.size()); !d) return d.error();
      if (r.type != x.type || r.dims.size() != x.dims.size()) {
        return ctx.Malformed(inst, "the result is not of the operand's type and rank");
      }
      for (size_t k = 0; k < r.dims.size(); ++k) {
        // Each dimension holds the operand's: equal when static, within the bound when dynamic.
        const bool fits = r.IsDynamicDim(k) ? x.dims[k] <= r.dims[k] : x.dims[k] == r.dims[k];
        if (!fits || x.IsDynamicDim(k) != (r.IsDynamicDim(k) && x.IsDynamicDim(k))) {
          return ctx.Malformed(
              inst, "the result's dimension " + std::to_string(k) + " does not hold the operand's");
        }
      }
      return Status::Ok();
    }
    default: {  // dynamic-reshape.
      if (operands.size() != r.dims.size() + 1) {
        return ctx.Malformed(inst, "takes an array and one size per result dimension");
      }
      for (size_t k = 1; k < operands.size(); ++k) {
        if (!IsIntegerScalar(*operands[k]))
          return ctx.Malformed(inst, "a size is not an integer scalar");
      }
      if (r.type != x.type) return ctx.Malformed(inst, "the result is not of the operand's type");
      if (!r.BoundElementCount()) return ctx.Unsupported(inst, "unbounded dynamic dimensions");
      return Status::Ok();
    }
  }
}

}  // namespace

Result<size_t> DynamicOpDimension(const ShapeContext& ctx, const Instruction& inst, size_t rank) {
  HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> d, ctx.Ints(inst, "dimensions"));
  if (d.size() != 1 || d[0] < 0 || static_cast<size_t>(d[0]) >= rank) {
    return Error(ctx.Malformed(inst, "dimensions={...} is not one dimension of the operand"));
  }
  return static_cast<size_t>(d[0]);
}

ShapeRules DynamicRules() { return {Takes, Check}; }

}  // namespace hlocache::interp
