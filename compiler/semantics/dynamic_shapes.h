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
// from; reshape by compiler/semantics/dynamic_dims.h. A dimension static in the declared shape is
// its bound. Any other op with a dynamic operand or result is refused by name, as are unbounded
// dimensions (f32[?]), which XLA compiles only once refined to bounds.
//
// Thread safety: pure functions.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "compiler/hlo/module.h"
#include "compiler/semantics/shape_context.h"

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

// Why `inst` (or its operands, of `operands` declared shapes) may not have dynamic shapes: an
// op outside the set above, a static result of dynamic operands (but for get-dimension-size and
// the tuple ops), or an unbounded dimension; empty when it may.
std::string WhyNotDynamic(const hlo::Instruction& inst,
                          std::span<const hlo::Shape* const> operands);

// Where a dimension of a dynamic elementwise, broadcast or transpose result takes its size: the
// operand's dimension it maps from, or (operand -1) its own bound. The interpreter reads the
// sizes so; the code generator emits code reading them from the operands' buffers.
struct SizeSource {
  int64_t operand = -1;
  int64_t dim = -1;
};
Result<std::vector<SizeSource>> SizeSources(const ShapeContext& ctx, const hlo::Instruction& inst,
                                            std::span<const hlo::Shape* const> declared);
// The elementwise rule alone (what SizeSources gives an elementwise op): each dynamic dimension
// from the first operand dynamic in it.
std::vector<SizeSource> ElementwiseSizeSources(const hlo::Instruction& inst,
                                               std::span<const hlo::Shape* const> declared);

// The runtime dimensions of the result of `inst` (an elementwise op, broadcast, reshape or
// transpose with a dynamic result), from its operands' declared shapes and runtime dimensions.
Result<std::vector<int64_t>> RuntimeDims(const ShapeContext& ctx, const hlo::Instruction& inst,
                                         std::span<const hlo::Shape* const> declared,
                                         std::span<const hlo::Dims* const> runtime);

// A size from outside the program within [0, bound] (dynamic_dims.h's hc_clamp_dim).
int64_t ClampedSize(int64_t size, int64_t bound);

}  // namespace hlocache::interp
