// Shapes for instructions whose text leaves them out (`ROOT out = add(p0, p1)`), which XLA's
// parser infers: where an op's result shape follows from its operands' shapes alone.
//
// Inferred: the elementwise unary and binary ops (the operands' shape; compare and is-finite give
// pred of it), select and clamp (the value operands' shape), copy, tuple, get-tuple-element,
// opt-barrier, add-dependency (its first operand's), after-all (a token), and call, fusion and
// while (the called computation's root, the loop state). An operand without a shape, or operands
// of different shapes, leave an instruction without one; the interpreter and the code generator
// then refuse it by name, as before. Inferred shapes are marked (Instruction::shape_inferred):
// the canonical text keeps to what was written, so a module's key is the same before and after.
//
// Thread safety: mutates the module it is given; call it before the module is shared.
#pragma once

#include "compiler/hlo/module.h"

namespace hlocache::hlo {

// Fills in the shapes it can infer, repeating until no instruction gains one (a call's shape
// waits on its callee's root, which may itself be inferred).
void InferMissingShapes(Module& module);

}  // namespace hlocache::hlo
