// The value of a constant instruction, read from its literal text: the interpreter evaluates it
// and the code generators embed it, from this one reading.
//
// Thread safety: pure functions of their arguments; the module is only read.
#pragma once

#include "common/status.h"
#include "compiler/hlo/module.h"
#include "compiler/semantics/literal.h"

namespace hlocache::interp {

// The value of `constant`, a constant instruction of `module`. kInvalidArgument when it is not
// a constant; kFailedPrecondition (naming file:line) for elided ({...}) and tuple constants, a
// value count that is neither one nor the shape's element count, and values hlocache does not
// read.
Result<Literal> ConstantValue(const hlo::Module& module, const hlo::Instruction& constant);

// The same into `out`, a literal of the constant's shape.
Status FillConstant(const hlo::Module& module, const hlo::Instruction& constant, Literal& out);

}  // namespace hlocache::interp
