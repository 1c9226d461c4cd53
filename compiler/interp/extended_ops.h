// The ops the reference interpreter evaluates outside its core (interpreter.h lists the core):
// each family's evaluation lives in a file of its own (eval_*.cc) and is reached through this
// dispatch. Its shape rules, which the code generators share, are in compiler/semantics/rules/.
//
// Thread safety: pure functions of their arguments.
#pragma once

#include <span>

#include "common/status.h"
#include "compiler/hlo/module.h"
#include "compiler/interp/eval_context.h"
#include "compiler/semantics/literal.h"
#include "compiler/semantics/rules/families.h"

namespace hlocache::interp {

// Evaluates an extended op on its operands' values, once CheckExtendedShapes accepted it.
Result<Literal> EvalExtended(EvalContext& ctx, const hlo::Instruction& inst,
                             std::span<const Literal* const> operands);

// One family: the opcodes its rules take (compiler/semantics/rules/families.h), and their
// evaluation.
struct OpFamily {
  bool (*takes)(hlo::Opcode op);
  Result<Literal> (*eval)(EvalContext& ctx, const hlo::Instruction& inst,
                          std::span<const Literal* const> operands);
};

// The families, in the order they are asked (each opcode belongs to one).
std::span<const OpFamily> ExtendedOpFamilies();

}  // namespace hlocache::interp
