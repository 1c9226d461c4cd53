// The attributes of cholesky (lower=) and triangular-solve (left_side=, lower=, unit_diagonal=,
// transpose_a=), read once for the interpreter and the code generator.
//
// Thread safety: pure function.
#pragma once

#include "common/status.h"
#include "compiler/hlo/module.h"

namespace hlocache::interp {

struct LinalgOptions {
  bool lower = false;      // Which triangle of A is read (and, for cholesky, written).
  bool left = false;       // triangular-solve: op(A) x = B, else x op(A) = B.
  bool unit = false;       // triangular-solve: A's diagonal taken as ones.
  bool transpose = false;  // triangular-solve: op(A) = A^T (TRANSPOSE, or ADJOINT of reals).
};

// Absent attributes take XLA's defaults (false, NO_TRANSPOSE). kInvalidArgument, naming the
// line, for any other spelling.
Result<LinalgOptions> ReadLinalgOptions(const hlo::Module& module, const hlo::Instruction& inst);

}  // namespace hlocache::interp
