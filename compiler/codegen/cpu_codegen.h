// Lowering an HLO module to one C++ translation unit for the CPU targets.
//
// The generated code exports one function,
//   extern "C" int hlocache_entry(const void* const* params, void* const* results);
// `params[j]` points to the j-th array leaf of the parameters (parameters in order, tuples
// flattened depth-first) and `results[k]` to the k-th array leaf of the result, each dense in
// row-major order whatever layout the module names (pred as one byte, f16/bf16 as their 16
// bits, a token as one byte that holds no data). It returns 0, or 1 when it could not allocate its
// intermediate buffers (it never throws); the results are then unspecified. The results must
// not overlap the parameters or each other: values are written into them as they are computed.
//
// Each computation the entry reaches becomes one function (call, fusion and reduction
// computations included), cut into segment functions when long (cpu_units.h). Chains of elementwise
// ops whose intermediate values have one use are fused into one loop; everything else writes its
// own buffer (small ones on the stack). XLA's integer, NaN and conversion semantics are spelled out
// (wrapping arithmetic, x/0 = -1, saturating float-to-int conversion) and floating-point math runs
// in double, rounded once, so the executable computes exactly what the reference interpreter
// computes. The text depends only on the module: the same canonical module gives the same source,
// byte for byte.
//
// Ops: every op the reference interpreter evaluates (compiler/interp/interpreter.h): the core
// ops, lowered by cpu_lowering.cc and cpu_core_*.cc, and the op families behind
// cpu_extended_ops.h (one cpu_*.cc each). Element types: those of the interpreter, 8-, 6- and
// 4-bit floats and sub-byte integers included (each held in a byte).
//
// Errors: kFailedPrecondition for an op, type or form it does not lower, naming the op, its
// file:line and the instruction; kInvalidArgument for a module whose shapes do not follow from
// its ops (the rules the reference interpreter checks too, compiler/semantics/shape_rules.h).
//
// Thread safety: pure function.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "compiler/codegen/cpu_units.h"
#include "compiler/hlo/module.h"
#include "compiler/semantics/entry_leaves.h"

namespace hlocache::compiler {

inline constexpr const char* kEntrySymbol = "hlocache_entry";

// The text every translation unit of every module begins with: the prelude
// (prelude/hc_cpu.h) and the runtime functions generated programs share (PRNG, linear algebra,
// dynamic dimensions). The same for all modules, so a toolchain may compile it once
// (Toolchain::CompileSharedObject with a prelude).
const std::string& CpuUnitPrelude();

// The module as C++ translation units, to be compiled separately and linked into one shared
// object (cpu_units.h says how it is cut). The same module and options give the same units.
Result<std::vector<std::string>> LowerToCppUnits(const hlo::Module& module,
                                                 const CpuLoweringOptions& options = {});

// The units of the default options, concatenated (one unit for all but big modules): for
// reading and for tests.
Result<std::string> LowerToCpp(const hlo::Module& module);

}  // namespace hlocache::compiler
