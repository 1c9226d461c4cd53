// Calls of computations' functions from generated code, for the op families that call them
// (loops, branches, scans, async wrappers): argument lists, and which leaves a computation
// returns as it received them, which a caller may then leave in place (cpu_control.cc).
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/codegen/cpu_emitter.h"
#include "compiler/hlo/module.h"

namespace hlocache::compiler {

// "a, b, c": the pointer expressions of `leaves`, comma-separated.
std::string LeafList(const std::vector<Leaf>& leaves);

// For each of the `count` leaves of computation `c`'s root: whether it is the same leaf of c's
// parameter 0, handed on only by tuple, get-tuple-element, opt-barrier, domain and
// add-dependency (operand 0), which bind buffers without copying them. The function of such a
// computation, given the parameter leaf's own pointer as that result pointer, leaves it as it is
// (see LowerComputation in cpu_codegen.cc). False for every leaf when c takes no parameter 0 or
// its root does not have `count` leaves.
std::vector<bool> PassedThroughLeaves(const hlo::Module& m, int32_t c, size_t count);

}  // namespace hlocache::compiler
