// The shape rules of scaled-dot and ragged-dot; their evaluation is
// compiler/interp/eval_dots.cc.
#include <algorithm>
#include <string>

#include "compiler/semantics/dot_dims.h"
#include "compiler/semantics/rules/families.h"
#include "compiler/semantics/shape_rules.h"
#include "compiler/semantics/signature.h"

namespace hlocache::interp {
namespace {

using hlo::Instruction;
using hlo::Opcode;
using hlo::PrimitiveType;
using hlo::Shape;

bool Takes(Opcode op) { return op == Opcode::kScaledDot || op == Opcode::kRaggedDot; }

bool IsScalar(const Shape& s) { return s.IsArray() && s.dims.empty(); }

Status CheckScale(const ShapeContext& ctx, const Instruction& inst, const char* side,
                  const Shape& operand, const Shape& scale) {
  if (!operand.IsArray() || !scale.IsArray()) return ctx.Malformed(inst, "takes arrays");
  if (IsScalar(scale)) return Status::Ok();
  if (!hlo::IsFloat(operand.type) || !hlo::IsFloat(scale.type)) {
    return ctx.Unsupported(inst, std::string("a scaled-dot of integers (") + side + ")");
  }
  if (scale.rank() != operand.rank()) {
    return ctx.Malformed(inst, std::string("the ") + side + " scale's rank is not its operand's");
  }
  for (size_t d = 0; d < operand.dims.size(); ++d) {
    const int64_t n = operand.dims[d], s = scale.dims[d];
    if (s <= 0 ? n != 0 : n % s != 0) {
      return ctx.Malformed(inst, std::string("the ") + side + " scale's dimension " +
                                     std::to_string(d) + " does not cut its operand's into blocks");
    }
  }
  return Status::Ok();
}

Status CheckKinds(const ShapeContext& ctx, const Instruction& inst, const Shape& lhs,
                  const Shape& rhs) {
  const bool float_result = hlo::IsFloat(inst.shape.type);
  if (inst.shape.type == PrimitiveType::kPred) return ctx.Unsupported(inst, "a dot into pred");
  if (!float_result && (hlo::IsFloat(lhs.type) || hlo::IsFloat(rhs.type))) {
    return ctx.Malformed(inst, "mixes integer and floating-point operands");
  }
  return Status::Ok();
}

Status Check(const ShapeContext& ctx, const Instruction& inst,
             std::span<const Shape* const> operands) {
  if (inst.opcode.opcode == Opcode::kScaledDot) {
    if (operands.size() != 4) {
      return ctx.Malformed(inst, "takes lhs, rhs, lhs_scale and rhs_scale");
    }
    HLOCACHE_RETURN_IF_ERROR(CheckScale(ctx, inst, "lhs", *operands[0], *operands[2]));
    HLOCACHE_RETURN_IF_ERROR(CheckScale(ctx, inst, "rhs", *operands[1], *operands[3]));
    const Shape lhs = DequantizedShape(*operands[0], *operands[2]);
    const Shape rhs = DequantizedShape(*operands[1], *operands[3]);
    return CheckDotShapes(ctx.module(), inst, lhs, rhs);
  }
  if (operands.size() != 3) return ctx.Malformed(inst, "takes lhs, rhs and group_sizes");
  const Shape& lhs = *operands[0];
  const Shape& rhs = *operands[1];
  if (!lhs.IsArray() || !rhs.IsArray() || !inst.shape.IsArray()) {
    return ctx.Malformed(inst, "takes and returns arrays");
  }
  HLOCACHE_RETURN_IF_ERROR(CheckKinds(ctx, inst, lhs, rhs));
  HLOCACHE_ASSIGN_OR_RETURN(RaggedDotDims g, ReadRaggedDotDims(ctx, inst, lhs, rhs, *operands[2]));
  const auto& want = g.result_dims;
  if (inst.shape.dims != want) {
    return ctx.Malformed(
        inst, "the result is not " + hlo::CanonicalShapeText(ArrayShape(inst.shape.type, want)));
  }
  return Status::Ok();
}

}  // namespace

ShapeRules DotRules() { return {Takes, Check}; }

}  // namespace hlocache::interp
