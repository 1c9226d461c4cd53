// How far an executable's float results may be from the reference interpreter's: the bounds of
// schema/numerics.tsv (the one place they are written; see schema/numerics.md), and the
// measures they are stated in.
//
// The interpreter is the definition: it computes every float op in double and rounds once to
// the result type. An executable computes most ops the same way, to the same bits; the ops the
// table lists compute in their own type, faster and within a stated error in ulp (units in the
// last place of the result type).
//
// Thread safety: pure functions over constant tables.
#pragma once

#include <vector>

#include "compiler/hlo/module.h"
#include "compiler/hlo/shape.h"

namespace hlocache::interp {

// One `bound` line of schema/numerics.tsv: an op's largest error against the exact result, in
// ulp of its result type, for each float type that can be above 0.
struct StatedBound {
  const char* op;  // The HLO opcode name.
  double f64, f32, f16, bf16;
};
const std::vector<StatedBound>& StatedBounds();

// A `reassociates` line: `op`'s results of `type` may combine their elements in another order
// than the interpreter's.
struct StatedReassociation {
  const char* op;    // The HLO opcode name.
  const char* type;  // The element type's name (f32).
};
const std::vector<StatedReassociation>& StatedReassociations();

// The `module` line: each float element of a whole module's results is within `relative` of
// the interpreter's, or within `absolute` of it.
struct ModuleTolerance {
  double relative;
  double absolute;
};
ModuleTolerance StatedModuleTolerance();

// The bound of `op`'s results of `type`, in ulp of `type`: 0 (exact) for every op the table
// does not list and for every type but f64, f32, f16 and bf16.
double UlpBound(hlo::Opcode op, hlo::PrimitiveType type);

// Whether `op`'s results of `type` may be combined in another order than the interpreter's.
bool Reassociates(hlo::Opcode op, hlo::PrimitiveType type);

// Whether any instruction of `module`, in any computation, has a bound above 0 for its own
// result type, or reassociates in its first operand's type: its results may then differ from
// the interpreter's bits.
bool HasInexactOps(const hlo::Module& module);

// |got - want| in ulp of float type `type` at `want` (the spacing of `type`'s values at
// |want|, that of the smallest normal below it): 0 when both are the same value (-0 and 0
// alike) or both NaN; infinity when only one is NaN, or one is infinite and the other is not
// the same infinity. `want` need not be a value of `type` (an exact reference is not).
double UlpDistance(double got, double want, hlo::PrimitiveType type);

// Whether `got` is within the stated module tolerance of `want`: within `relative` of |want|,
// of `scale` (the magnitude the error is judged against where ops' errors compound; 0 where
// they do not), or within `absolute`. NaN only where NaN is expected, infinities exact.
bool WithinModuleTolerance(double got, double want, double scale);

}  // namespace hlocache::interp
