// The ops the reference interpreter evaluates outside its core (interpreter.h lists the core):
// each family lives in a file of its own (eval_*.cc) and is reached through this dispatch.
//
// A family provides three things for its opcodes: whether it takes them, their shape rules
// (the parser infers nothing, so a module may claim any shape; a family refuses, with
// kInvalidArgument naming file:line, every shape its evaluation would index out of bounds
// with), and their evaluation on literals. The code generator calls the same shape rules, so
// an op's checks are written once.
//
// Thread safety: pure functions of their arguments.
#pragma once

#include <span>

#include "common/status.h"
#include "compiler/hlo/module.h"
#include "compiler/interp/eval_context.h"
#include "compiler/semantics/literal.h"

namespace hlocache::interp {

// Whether one of the families evaluates `op`.
bool IsExtendedOp(hlo::Opcode op);

// The shape rules of an extended op. `operands` are the operands' shapes, in order (tuples
// included: several extended ops take and return tuples).
Status CheckExtendedShapes(const ShapeContext& ctx, const hlo::Instruction& inst,
                           std::span<const hlo::Shape* const> operands);

// Evaluates an extended op on its operands' values, once CheckExtendedShapes accepted it.
Result<Literal> EvalExtended(EvalContext& ctx, const hlo::Instruction& inst,
                             std::span<const Literal* const> operands);

// One family: the three functions above for the opcodes `takes` says yes to.
struct OpFamily {
  bool (*takes)(hlo::Opcode op);
  Status (*check)(const ShapeContext& ctx, const hlo::Instruction& inst,
                  std::span<const hlo::Shape* const> operands);
  Result<Literal> (*eval)(EvalContext& ctx, const hlo::Instruction& inst,
                          std::span<const Literal* const> operands);
};

// The families, in the order they are asked (each opcode belongs to one).
std::span<const OpFamily> ExtendedOpFamilies();

}  // namespace hlocache::interp
