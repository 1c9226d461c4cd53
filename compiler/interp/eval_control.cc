// Control flow: while, conditional and map, evaluated by calling their computations.
//
// while(init), condition=C, body=B: the state starts as init; while C(state) is true, state =
// B(state); the result is the last state. The state may be an array or a tuple (nested or
// empty); C returns pred[], B returns the state's shape.
//
// conditional: the predicate form (pred[] selector, true_computation=, false_computation=, one
// operand per branch) runs the true branch on operand 1 or the false branch on operand 2; the
// indexed form (s32[] selector, branch_computations={b0, ..., bN-1}, one operand per branch)
// runs branch i on operand i + 1, and an index outside [0, N) runs the last branch, as XLA
// does. Every branch returns the conditional's shape.
//
// map(x0, ..., xn-1), dimensions={0, ..., rank-1}, to_apply=f: f applied to the scalars at each
// index of its operands, which all have the result's dimensions.
#include <string>

#include "compiler/interp/eval_families.h"
#include "compiler/semantics/rules/families.h"
#include "compiler/semantics/signature.h"

namespace hlocache::interp {
namespace {

using hlo::Instruction;
using hlo::Opcode;
using hlo::PrimitiveType;
using hlo::Shape;

Result<Literal> EvalWhile(EvalContext& ctx, const Instruction& inst,
                          std::span<const Literal* const> operands) {
  HLOCACHE_ASSIGN_OR_RETURN(int32_t condition, ctx.Callee(inst, "condition"));
  HLOCACHE_ASSIGN_OR_RETURN(int32_t body, ctx.Callee(inst, "body"));
  Literal* donated = ctx.Donated(inst, 0);
  Literal state = donated != nullptr ? std::move(*donated) : *operands[0];
  for (;;) {
    HLOCACHE_ASSIGN_OR_RETURN(Literal go, ctx.Call(condition, std::span<const Literal>(&state, 1)));
    if (go.GetInt(0) == 0) return state;
    // The body takes the state: what it passes on unchanged is moved, not copied.
    HLOCACHE_ASSIGN_OR_RETURN(state, ctx.CallTaking(body, std::span<Literal>(&state, 1)));
  }
}

Result<Literal> EvalConditional(EvalContext& ctx, const Instruction& inst,
                                std::span<const Literal* const> operands) {
  HLOCACHE_ASSIGN_OR_RETURN(std::vector<int32_t> branches, ConditionalBranches(ctx, inst));
  const Literal& selector = *operands[0];
  const auto count = static_cast<int64_t>(branches.size());
  int64_t b = selector.GetInt(0);
  if (selector.type() == PrimitiveType::kPred) {
    b = b != 0 ? 0 : 1;
  } else if (b < 0 || b >= count) {
    b = count - 1;
  }
  const auto k = static_cast<size_t>(b);
  return ctx.Call(branches[k], std::span<const Literal>(operands[k + 1], 1));
}

void CopyElement(const Literal& from, size_t i, Literal& to, size_t j) {
  if (from.is_float()) {
    to.SetFloat(j, from.GetFloat(i));
  } else {
    to.SetInt(j, from.GetInt(i));
  }
}

Result<Literal> EvalMap(EvalContext& ctx, const Instruction& inst,
                        std::span<const Literal* const> operands) {
  HLOCACHE_ASSIGN_OR_RETURN(int32_t f, ctx.Callee(inst, "to_apply"));
  HLOCACHE_ASSIGN_OR_RETURN(Literal out, Literal::MakeZeros(inst.shape));
  std::vector<Literal> args;
  for (const Literal* x : operands) args.emplace_back(ArrayShape(x->type()));
  for (size_t i = 0; i < out.size(); ++i) {
    for (size_t k = 0; k < operands.size(); ++k) CopyElement(*operands[k], i, args[k], 0);
    HLOCACHE_ASSIGN_OR_RETURN(Literal y, ctx.Call(f, args));
    CopyElement(y, 0, out, i);
  }
  return out;
}

Result<Literal> Eval(EvalContext& ctx, const Instruction& inst,
                     std::span<const Literal* const> operands) {
  switch (inst.opcode.opcode) {
    case Opcode::kWhile:
      return EvalWhile(ctx, inst, operands);
    case Opcode::kConditional:
      return EvalConditional(ctx, inst, operands);
    default:
      return EvalMap(ctx, inst, operands);
  }
}

}  // namespace

OpFamily ControlOps() { return {ControlRules().takes, Eval}; }

}  // namespace hlocache::interp
