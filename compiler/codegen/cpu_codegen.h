// Lowering an HLO module to one C++ translation unit for the CPU targets.
//
// The generated code exports one function,
//   extern "C" int hlocache_entry(const void* const* params, void* const* results);
// `params[i]` points to parameter i's elements and `results[k]` to the k-th leaf of the result
// (the result itself when it is not a tuple), dense in row-major order. It returns 0, or 1 when
// it could not allocate its intermediate buffers (it never throws). Each instruction becomes
// one loop over its elements, with XLA's integer, NaN and conversion semantics spelled out
// (wrapping arithmetic, x/0 = -1, saturating float-to-int conversion) so that the executable
// computes what the reference interpreter computes. The text depends only on the module: the
// same canonical module gives the same source, byte for byte.
//
// Ops so far: parameter, constant, iota, the elementwise unary and binary arithmetic, compare,
// select, convert, broadcast, reshape, copy, bitcast, transpose, dot (batch and contracting
// dimensions), reduce of one operand by add, multiply, maximum or minimum, and a tuple at the
// root.
// Element types pred, s8..s64, u8..u64, f32, f64. Anything else is kFailedPrecondition naming
// the op and its line.
//
// Thread safety: pure function.
#pragma once

#include <string>

#include "common/status.h"
#include "compiler/hlo/module.h"

namespace hlocache::compiler {

inline constexpr const char* kEntrySymbol = "hlocache_entry";

Result<std::string> LowerToCpp(const hlo::Module& module);

}  // namespace hlocache::compiler
