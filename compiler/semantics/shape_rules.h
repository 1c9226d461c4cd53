// The shape rules of every op hlocache evaluates or generates code for, written once: the
// reference interpreter checks each instruction with them before it evaluates it, and the code
// generators before they lower it, so a module is judged the same whichever reads it.
//
// The parser infers nothing, so a module may claim any shape and any operand count. These
// refuse, with kInvalidArgument naming the instruction ("FILE:LINE: 'NAME' (OPCODE): why"),
// every shape an evaluation would index out of bounds with or mix element kinds in, and, with
// kFailedPrecondition, well-formed input outside what hlocache implements.
//
// Thread safety: pure functions of their arguments; the module is only read.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/status.h"
#include "compiler/hlo/module.h"
#include "compiler/semantics/shape_context.h"

namespace hlocache::interp {

// kInvalidArgument (naming file:line) when `inst` has an operand count its op does not take.
// The interpreter and the code generators index operands by it.
Status CheckOperandCount(const hlo::Module& module, const hlo::Instruction& inst);

// kInvalidArgument (naming file:line) when `inst`'s declared shape does not follow from its
// operands' shapes (`operand_shapes`, in order) and attributes, for the ops whose evaluation
// indexes by shape (everything but parameter, tuple, get-tuple-element and call).
Status CheckShapes(const hlo::Module& module, const hlo::Instruction& inst,
                   std::span<const hlo::Shape* const> operand_shapes);

// The rules of a core op (core_ops.h) whose result is `out` rather than its declared shape: the
// interpreter checks an op of dynamic shapes at its run-time sizes. The operand count is
// checked too.
Status CheckCoreShapes(const ShapeContext& ctx, const hlo::Instruction& inst,
                       std::span<const hlo::Shape* const> operand_shapes, const hlo::Shape& out);

// dot's rules for an instruction that carries dot's dimension numbers (lhs_batch_dims, ...,
// rhs_contracting_dims) and result shape, on operands `lhs` and `rhs` that are not its own:
// scaled-dot's, once dequantized.
Status CheckDotShapes(const hlo::Module& module, const hlo::Instruction& inst,
                      const hlo::Shape& lhs, const hlo::Shape& rhs);

// slice={[start:limit:stride], ...} and padding=low_high_interior x ... as start, limit, stride
// (or low, high, interior) per dimension; kFailedPrecondition for a spelling hlocache does not
// read.
Result<std::vector<int64_t>> SliceSpec(const hlo::Module& module, const hlo::Instruction& slice);
Result<std::vector<int64_t>> PaddingSpec(const hlo::Module& module, const hlo::Instruction& pad);

}  // namespace hlocache::interp
