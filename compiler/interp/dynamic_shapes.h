// Bounded dynamic shapes (f32[<=8,3]): which ops take them, and the runtime dimensions of
// their results, for the reference interpreter and the code generator alike.
//
// A value of a dynamic shape has, at run time, a size at most the bound in each dynamic
// dimension. The interpreter holds it as a literal of exactly those sizes; generated code holds
// it in a buffer laid out by the bounds (row-major, room for every element), followed by its
// sizes as int32s, one per dimension, as XLA lays out dynamic buffers (cpu_codegen.h).
//
// The ops that take or give dynamic arrays: parameter, tuple, get-tuple-element, the core
// elementwise ops (arithmetic, compare, select, clamp, convert, copy), broadcast, reshape,
// transpose, and set-dimension-size, get-dimension-size, dynamic-reshape (eval_dynamic.cc). An
// elementwise result takes each dynamic dimension's size from the first operand dynamic in it
// (operands of different sizes at run time are an error in the interpreter, whose elementwise
// ops compute on equal shapes); broadcast and transpose from the operand dimension they map
// from; reshape by compiler/codegen/dynamic_dims.h. A dimension static in the declared shape is
// its bound. Any other op with a dynamic operand or result is refused by name, as are unbounded
// dimensions (f32[?]), which XLA compiles only once refined to bounds.
//
// Thread safety: pure functions.
#pragma once

#include <span>
#include <vector>

#include "common/status.h"
#include "compiler/hlo/module.h"
#include "compiler/interp/eval_context.h"

namespace hlocache::interp {

// Whether `op` may take or give arrays of dynamic shapes.
bool TakesDynamicShapes(hlo::Opcode op);

// The sizes of an argument of `declared` shape made without real inputs: each dynamic
// dimension of bound B at B - B / 4 (the same for every argument of that bound, so that operands
// of an elementwise op agree), tuples leaf by leaf.
hlo::Shape ArgumentShape(const hlo::Shape& declared);

// Whether `runtime` (static) is a value of `declared`: same element types and tree, static
// dimensions equal, dynamic ones at most their bounds.
bool Admits(const hlo::Shape& declared, const hlo::Shape& runtime);

// The runtime dimensions of the result of `inst` (an elementwise op, broadcast, reshape or
// transpose with a dynamic result), from its operands' declared shapes and runtime dimensions.
Result<std::vector<int64_t>> RuntimeDims(const ShapeContext& ctx, const hlo::Instruction& inst,
                                         std::span<const hlo::Shape* const> declared,
                                         std::span<const std::vector<int64_t>* const> runtime);

}  // namespace hlocache::interp
