// Which instructions the code generators (CPU and CUDA) may fuse into their user's loop.
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

}  // namespace hlocache::compiler
