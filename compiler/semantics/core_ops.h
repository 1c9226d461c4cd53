// The core ops: the ones the reference interpreter evaluates in its driver and the code
// generators lower inline (compiler/interp/interpreter.h lists them); every other op belongs to
// an op family (compiler/interp/extended_ops.h).
//
// Thread safety: pure functions.
#pragma once

#include "compiler/hlo/opcode.h"

namespace hlocache::interp {

// Whether `op` is a core op (fusion is evaluated as a call of its computation).
bool IsCoreOp(hlo::Opcode op);
// Whether `op` is a core op that computes element i from elements i of its operands alone (the
// arithmetic, compare, select, clamp, convert, copy, ...): the core minus the ops that index by
// shape or call computations.
bool IsCoreElementwiseOp(hlo::Opcode op);

}  // namespace hlocache::interp
