// The shape rules every op that calls a computation shares: the callee takes one parameter per
// value it is handed, of that value's shape, and returns the shape its caller expects. The
// parser checks none of this, and both the interpreter (which binds parameters to values) and
// the code generator (which passes one pointer per leaf) rely on it; the interpreter's op
// families (compiler/interp/eval_*.cc) check it.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "common/status.h"
#include "compiler/hlo/module.h"
#include "compiler/semantics/shape_context.h"

namespace hlocache::interp {

// kInvalidArgument, naming `inst`'s file:line and the callee's `role` ("the condition",
// "branch 2"), unless computation `callee` has a root and exactly `params.size()` parameters of
// shapes SameValues with `params`, and its root has a shape SameValues with `result`.
Status CheckSignature(const ShapeContext& ctx, const hlo::Instruction& inst, int32_t callee,
                      std::span<const hlo::Shape* const> params, const hlo::Shape& result,
                      const std::string& role);

// An array shape of `type` with dimensions `dims` (a scalar when empty).
hlo::Shape ArrayShape(hlo::PrimitiveType type, hlo::Dims dims = {});

}  // namespace hlocache::interp
