// The shape rules of batch-norm-training, -inference and -grad; their evaluation is
// compiler/interp/eval_batch_norm.cc.
#include <cmath>
#include <string>

#include "compiler/semantics/rules/families.h"
#include "compiler/semantics/signature.h"

namespace hlocache::interp {
namespace {

using hlo::Instruction;
using hlo::Opcode;
using hlo::Shape;

bool Takes(Opcode op) {
  return op == Opcode::kBatchNormTraining || op == Opcode::kBatchNormInference ||
         op == Opcode::kBatchNormGrad;
}

Status Check(const ShapeContext& ctx, const Instruction& inst,
             std::span<const Shape* const> operands) {
  const Opcode op = inst.opcode.opcode;
  const size_t want = op == Opcode::kBatchNormTraining ? 3 : 5;
  if (operands.size() != want) {
    return ctx.Malformed(inst, "takes " + std::to_string(want) + " operands");
  }
  const Shape& x = *operands[0];
  if (!x.IsArray() || x.rank() < 1) return ctx.Malformed(inst, "the operand is not an array");
  if (!hlo::IsFloat(x.type)) {
    return ctx.Unsupported(inst, "batch norm of " + std::string(hlo::PrimitiveTypeName(x.type)));
  }
  HLOCACHE_ASSIGN_OR_RETURN(int64_t f, ctx.IntOr(inst, "feature_index", -1));
  if (f < 0 || f >= x.rank()) {
    return ctx.Malformed(inst, "feature_index is not a dimension of the operand");
  }
  const Shape vec = ArrayShape(x.type, {x.dims[static_cast<size_t>(f)]});
  // grad's last operand is the gradient of the output, the operand's shape.
  for (size_t k = 1; k < operands.size(); ++k) {
    const bool full = op == Opcode::kBatchNormGrad && k == 4;
    if (!hlo::SameValues(*operands[k], full ? ArrayShape(x.type, x.dims) : vec)) {
      return ctx.Malformed(inst, "operand " + std::to_string(k) + " is not " +
                                     hlo::CanonicalShapeText(full ? x : vec));
    }
  }
  Shape result = ArrayShape(x.type, x.dims);
  if (op != Opcode::kBatchNormInference) {
    Shape t;
    t.tuple_elements = {result, vec, vec};
    result = t;
  }
  if (!hlo::SameValues(inst.shape, result)) {
    return ctx.Malformed(inst, "the result is not " + hlo::CanonicalShapeText(result));
  }
  auto eps = BatchNormEpsilon(ctx, inst);
  return eps ? Status::Ok() : eps.error();
}

}  // namespace

// The epsilon attribute as the float XLA keeps it.
Result<double> BatchNormEpsilon(const ShapeContext& ctx, const Instruction& inst) {
  const hlo::Attribute* a = inst.FindAttribute("epsilon");
  if (a == nullptr) return Error(ctx.Malformed(inst, "lacks epsilon"));
  auto v = ctx.module().Float(*a);
  if (!v || !std::isfinite(*v) || *v < 0) {
    return Error(ctx.Malformed(inst, "epsilon is not a non-negative number"));
  }
  return static_cast<double>(static_cast<float>(*v));
}

ShapeRules BatchNormRules() { return {Takes, Check}; }

}  // namespace hlocache::interp
