// What the code generators (CPU and CUDA) share about elementwise ops: which instructions they
// may fuse into their user's loop, and the prelude helpers and math functions that compute them.
//
// Thread safety: pure function.
#pragma once

#include "compiler/hlo/module.h"

namespace hlocache::compiler {

// Whether `inst` computes element i of its array result from element i of each operand (iota:
// from i alone), so that a generator may compute it inside its user's loop instead of storing
// it: a core op other than the ones that move data by index (broadcast, transpose, slice,
// reverse, pad, concatenate, dynamic slices), reduce, dot, calls and tuples; never an
// asynchronous op or one that calls computations. `extended`, when given, answers for the ops
// beyond the core that the generator computes elementwise.
bool IsFusibleElementwise(const hlo::Instruction& inst, bool (*extended)(hlo::Opcode) = nullptr);

// The helper of the generated code's prelude (CPU and CUDA alike) that computes core op `op` of
// `arity` operands of any element type: "hc_neg", "hc_add", ...; null for an op computed some
// other way.
const char* ElementwiseHelper(hlo::Opcode op, size_t arity);

// The C math function, unqualified, that computes unary core op `op` of a float in double:
// "exp", "sqrt", ...; null for the rest (rsqrt, logistic and round-to-nearest-even are written
// by each generator).
const char* ElementwiseMathFunction(hlo::Opcode op);

}  // namespace hlocache::compiler
