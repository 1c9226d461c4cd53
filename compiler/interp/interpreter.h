// The reference interpreter: evaluates an HLO module on literals, one instruction at a time,
// written to be obviously right rather than fast. Tests and `hlocache run --check` compare
// compiled executables with it.
//
// Ops: the core ops (compiler/semantics/core_ops.h: parameter, constant, iota, the elementwise
// arithmetic, logical and comparison ops, select, clamp, convert, broadcast, reshape, bitcast,
// copy, transpose, slice, dynamic slices, concatenate, pad, reverse, reduce, dot, tuple,
// get-tuple-element, call, fusion), evaluated by the driver and the core_*.cc files, and the op
// families of extended_ops.h (gather, scatter, sort, top-k, while, conditional, map, scan,
// convolution, windows, batch norm, linear algebra, random numbers, collectives of one
// participant, scaled and ragged dots, host transfers, bounded dynamic shapes, ...). Element
// types: pred, the integers of 1 to 64 bits, f16, bf16, f32, f64, and the 8-, 6- and 4-bit
// floats (compiler/semantics/minifloat.h). Anything else is kFailedPrecondition, naming the op
// and its line.
//
// Thread safety: Evaluate is reentrant; the module is only read.
#pragma once

#include <span>

#include "common/status.h"
#include "compiler/hlo/module.h"
#include "compiler/semantics/constant.h"
#include "compiler/semantics/core_ops.h"
#include "compiler/semantics/host_transfers.h"
#include "compiler/semantics/literal.h"
#include "compiler/semantics/shape_rules.h"  // The rules Evaluate checks with.

namespace hlocache::interp {

// Evaluates the entry computation on `arguments` (one per parameter, of the parameter's shape).
// Errors: kInvalidArgument for arguments that do not match; kFailedPrecondition for an op or
// type the interpreter does not implement, or elided constants ("FILE:LINE: ..." names it).
Result<Literal> Evaluate(const hlo::Module& module, std::span<const Literal> arguments);
// The same with a host for infeed, outfeed and host send and recv to talk to (without one they
// fail with kFailedPrecondition); `host` is borrowed for the call.
Result<Literal> Evaluate(const hlo::Module& module, std::span<const Literal> arguments,
                         HostTransfers* host);

// Whether the interpreter evaluates `op`: a core op, or one of the op families of
// extended_ops.h (gather, scatter, sort, while, convolution, collectives, ...).
bool IsSupportedOp(hlo::Opcode op);

// dot's evaluation for an instruction that carries dot's dimension numbers (lhs_batch_dims,
// ..., rhs_contracting_dims) and result shape, on operands `lhs` and `rhs` that are not its
// own: scaled-dot's, once dequantized (CheckDotShapes, shape_rules.h, accepted them).
Result<Literal> EvaluateDot(const hlo::Module& module, const hlo::Instruction& inst,
                            const Literal& lhs, const Literal& rhs);

}  // namespace hlocache::interp
