// The shape rules of while, conditional and map; their evaluation is
// compiler/interp/eval_control.cc.
#include <string>

#include "compiler/semantics/rules/families.h"
#include "compiler/semantics/signature.h"

namespace hlocache::interp {
namespace {

using hlo::Instruction;
using hlo::Opcode;
using hlo::PrimitiveType;
using hlo::Shape;

bool Takes(Opcode op) {
  return op == Opcode::kWhile || op == Opcode::kConditional || op == Opcode::kMap;
}

Status CheckWhile(const ShapeContext& ctx, const Instruction& inst,
                  std::span<const Shape* const> operands) {
  if (operands.size() != 1) return ctx.Malformed(inst, "takes one operand, the initial state");
  const Shape& state = *operands[0];
  if (!hlo::SameValues(inst.shape, state)) {
    return ctx.Malformed(inst, "the result " + hlo::CanonicalShapeText(inst.shape) +
                                   " is not the state's shape " + hlo::CanonicalShapeText(state));
  }
  HLOCACHE_ASSIGN_OR_RETURN(int32_t condition, ctx.Callee(inst, "condition"));
  HLOCACHE_ASSIGN_OR_RETURN(int32_t body, ctx.Callee(inst, "body"));
  HLOCACHE_RETURN_IF_ERROR(CheckSignature(ctx, inst, condition, operands,
                                          ArrayShape(PrimitiveType::kPred), "the condition"));
  return CheckSignature(ctx, inst, body, operands, state, "the body");
}

Status CheckConditional(const ShapeContext& ctx, const Instruction& inst,
                        std::span<const Shape* const> operands) {
  if (operands.empty()) return ctx.Malformed(inst, "has no selector operand");
  const Shape& selector = *operands[0];
  const bool is_pred = hlo::SameValues(selector, ArrayShape(PrimitiveType::kPred));
  if (!is_pred && !hlo::SameValues(selector, ArrayShape(PrimitiveType::kS32))) {
    return ctx.Malformed(
        inst, "the selector " + hlo::CanonicalShapeText(selector) + " is neither pred[] nor s32[]");
  }
  HLOCACHE_ASSIGN_OR_RETURN(std::vector<int32_t> branches, ConditionalBranches(ctx, inst));
  if (is_pred && branches.size() != 2) {
    return ctx.Malformed(
        inst, "a pred[] selector picks one of 2 branches, not " + std::to_string(branches.size()));
  }
  if (operands.size() != branches.size() + 1) {
    return ctx.Malformed(inst, std::to_string(branches.size()) + " branches take " +
                                   std::to_string(branches.size()) +
                                   " operands after the selector, not " +
                                   std::to_string(operands.size() - 1));
  }
  for (size_t b = 0; b < branches.size(); ++b) {
    HLOCACHE_RETURN_IF_ERROR(CheckSignature(ctx, inst, branches[b], operands.subspan(b + 1, 1),
                                            inst.shape, "branch " + std::to_string(b)));
  }
  return Status::Ok();
}

Status CheckMap(const ShapeContext& ctx, const Instruction& inst,
                std::span<const Shape* const> operands) {
  if (operands.empty()) return ctx.Malformed(inst, "has no operands");
  if (!inst.shape.IsArray()) return ctx.Malformed(inst, "the result is not an array");
  std::vector<Shape> scalars;
  for (size_t k = 0; k < operands.size(); ++k) {
    if (!operands[k]->IsArray() || operands[k]->dims != inst.shape.dims) {
      return ctx.Malformed(inst, "operand " + std::to_string(k) + " " +
                                     hlo::CanonicalShapeText(*operands[k]) +
                                     " does not have the result's dimensions");
    }
    scalars.push_back(ArrayShape(operands[k]->type));
  }
  std::vector<int64_t> identity;
  for (int64_t d = 0; d < inst.shape.rank(); ++d) identity.push_back(d);
  HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> dims, ctx.IntsOr(inst, "dimensions", identity));
  if (dims != identity) {
    return ctx.Malformed(inst, "dimensions={...} must list every dimension, in order");
  }
  HLOCACHE_ASSIGN_OR_RETURN(int32_t f, ctx.Callee(inst, "to_apply"));
  std::vector<const Shape*> params;
  for (const Shape& s : scalars) params.push_back(&s);
  return CheckSignature(ctx, inst, f, params, ArrayShape(inst.shape.type),
                        "the mapped computation");
}

Status Check(const ShapeContext& ctx, const Instruction& inst,
             std::span<const Shape* const> operands) {
  switch (inst.opcode.opcode) {
    case Opcode::kWhile:
      return CheckWhile(ctx, inst, operands);
    case Opcode::kConditional:
      return CheckConditional(ctx, inst, operands);
    default:
      return CheckMap(ctx, inst, operands);
  }
}

}  // namespace

// The branches of a conditional, in the order its selector picks them: {true, false} for the
// predicate form (a pred selector picks 0 when true), branch_computations otherwise.
Result<std::vector<int32_t>> ConditionalBranches(const ShapeContext& ctx, const Instruction& inst) {
  const bool indexed = inst.FindAttribute("branch_computations") != nullptr;
  const bool predicated = inst.FindAttribute("true_computation") != nullptr ||
                          inst.FindAttribute("false_computation") != nullptr;
  if (indexed && predicated) {
    return Error(ctx.Malformed(inst, "names both branch_computations and true/false computations"));
  }
  if (indexed) {
    std::vector<int32_t> branches = ctx.module().CalleesOf(inst, "branch_computations");
    if (branches.empty()) return Error(ctx.Malformed(inst, "names no branch computation"));
    return branches;
  }
  HLOCACHE_ASSIGN_OR_RETURN(int32_t on_true, ctx.Callee(inst, "true_computation"));
  HLOCACHE_ASSIGN_OR_RETURN(int32_t on_false, ctx.Callee(inst, "false_computation"));
  return std::vector<int32_t>{on_true, on_false};
}

ShapeRules ControlRules() { return {Takes, Check}; }

}  // namespace hlocache::interp
