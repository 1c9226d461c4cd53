// The ops of bounded dynamic shapes (compiler/semantics/dynamic_shapes.h says how values of such
// shapes are held).
//
// set-dimension-size(x, n), dimensions={d}: x with dimension d's size set to n, clamped to
// [0, x's size there] (XLA leaves larger sizes undefined): the first n positions along d.
// get-dimension-size(x), dimensions={d}: x's size along d, as a scalar. dynamic-reshape(x,
// s_0, ..., s_{r-1}): x's elements in row-major order, laid out in the result's dimensions,
// dynamic ones of size s_k clamped to [0, bound], static ones their size; elements past x's end
// are zeros (XLA leaves sizes whose product is not x's element count undefined).
#include <algorithm>
#include <string>

#include "compiler/interp/eval_families.h"
#include "compiler/semantics/dynamic_shapes.h"
#include "compiler/semantics/rules/families.h"
#include "compiler/semantics/signature.h"

namespace hlocache::interp {
namespace {

using hlo::Instruction;
using hlo::Opcode;
using hlo::PrimitiveType;
using hlo::Shape;

Result<Literal> Eval(EvalContext& ctx, const Instruction& inst,
                     std::span<const Literal* const> operands) {
  const Literal& x = *operands[0];
  const auto& xd = x.shape().dims;
  const Shape& r = inst.shape;
  if (inst.opcode.opcode == Opcode::kGetDimensionSize) {
    HLOCACHE_ASSIGN_OR_RETURN(size_t d, DynamicOpDimension(ctx, inst, xd.size()));
    Literal out(ArrayShape(r.type, {}));
    out.SetInt(0, xd[d]);
    return out;
  }
  std::vector<int64_t> dims;
  if (inst.opcode.opcode == Opcode::kSetDimensionSize) {
    HLOCACHE_ASSIGN_OR_RETURN(size_t d, DynamicOpDimension(ctx, inst, xd.size()));
    dims.assign(xd.begin(), xd.end());
    dims[d] = ClampedSize(operands[1]->GetInt(0), xd[d]);
    // The first dims[d] positions along d: row-major over the new dimensions, each element at
    // the same index of x.
    Literal out(ArrayShape(r.type, dims));
    const auto xs = hlo::RowMajorStrides(xd);
    std::vector<int64_t> index(dims.size(), 0);
    for (size_t i = 0; i < out.size(); ++i) {
      int64_t at = 0;
      for (size_t k = 0; k < dims.size(); ++k) at += index[k] * xs[k];
      if (out.is_float()) {
        out.SetFloat(i, x.GetFloat(static_cast<size_t>(at)));
      } else {
        out.SetInt(i, x.GetInt(static_cast<size_t>(at)));
      }
      for (size_t k = dims.size(); k-- > 0;) {
        if (++index[k] < dims[k]) break;
        index[k] = 0;
      }
    }
    return out;
  }
  // dynamic-reshape.
  for (size_t k = 0; k < r.dims.size(); ++k) {
    dims.push_back(r.IsDynamicDim(k) ? ClampedSize(operands[k + 1]->GetInt(0), r.dims[k])
                                     : r.dims[k]);
  }
  Literal out(ArrayShape(r.type, dims));
  for (size_t i = 0; i < out.size() && i < x.size(); ++i) {
    if (out.is_float()) {
      out.SetFloat(i, x.GetFloat(i));
    } else {
      out.SetInt(i, x.GetInt(i));
    }
  }
  return out;
}

}  // namespace

OpFamily DynamicOps() { return {DynamicRules().takes, Eval}; }

}  // namespace hlocache::interp
