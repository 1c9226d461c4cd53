// The shape rules of sort and topk; their evaluation is compiler/interp/eval_sort.cc.
#include <algorithm>
#include <bit>
#include <limits>
#include <numeric>
#include <string>

#include "compiler/semantics/rules/families.h"
#include "compiler/semantics/signature.h"

namespace hlocache::interp {
namespace {

using hlo::Instruction;
using hlo::Opcode;
using hlo::PrimitiveType;
using hlo::Shape;

bool Takes(Opcode op) { return op == Opcode::kSort || op == Opcode::kTopK; }

Status CheckSort(const ShapeContext& ctx, const Instruction& inst,
                 std::span<const Shape* const> operands) {
  if (operands.empty()) return ctx.Malformed(inst, "has no operands");
  for (size_t k = 0; k < operands.size(); ++k) {
    if (!operands[k]->IsArray() || operands[k]->dims != operands[0]->dims) {
      return ctx.Malformed(
          inst, "operand " + std::to_string(k) + " is not an array of operand 0's dimensions");
    }
  }
  HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> dims, ctx.Ints(inst, "dimensions"));
  if (dims.size() != 1 || dims[0] < 0 || dims[0] >= operands[0]->rank()) {
    return ctx.Malformed(inst, "dimensions must name one dimension of the operands");
  }
  Shape result;
  if (operands.size() == 1) {
    result = *operands[0];
  } else {
    for (const Shape* s : operands) result.tuple_elements.push_back(*s);
  }
  if (!hlo::SameValues(result, inst.shape)) {
    return ctx.Malformed(inst, "the result " + hlo::CanonicalShapeText(inst.shape) +
                                   " is not the operands' shape " +
                                   hlo::CanonicalShapeText(result));
  }
  HLOCACHE_ASSIGN_OR_RETURN(int32_t less, ctx.Callee(inst, "to_apply"));
  std::vector<Shape> scalars;
  for (const Shape* s : operands) {
    scalars.push_back(ArrayShape(s->type));
    scalars.push_back(ArrayShape(s->type));
  }
  std::vector<const Shape*> params;
  for (const Shape& s : scalars) params.push_back(&s);
  const Shape pred = ArrayShape(PrimitiveType::kPred);
  if (CheckSignature(ctx, inst, less, params, pred, "the comparator").ok()) return Status::Ok();
  Shape one;
  one.tuple_elements.push_back(pred);
  return CheckSignature(ctx, inst, less, params, one, "the comparator");
}

// topk(x), k=K, largest=L: along the last dimension, the K largest elements (the K smallest
// when L is false) in that order, and their positions (s32), as XLA's TopkDecomposer defines
// it: a stable sort of the elements with their positions, floats in total order (-NaN < -inf
// < ... < -0 < +0 < ... < inf < NaN), then the first K.
Status CheckTopK(const ShapeContext& ctx, const Instruction& inst,
                 std::span<const Shape* const> operands) {
  if (operands.size() != 1 || !operands[0]->IsArray() || operands[0]->rank() < 1) {
    return ctx.Malformed(inst, "takes one array of rank 1 or more");
  }
  const Shape& x = *operands[0];
  if (x.type == PrimitiveType::kPred) return ctx.Unsupported(inst, "topk of pred");
  HLOCACHE_ASSIGN_OR_RETURN(int64_t k, ctx.IntOr(inst, "k", -1));
  if (k < 0 || k > x.dims.back()) {
    return ctx.Malformed(
        inst, "k is not between 0 and the last dimension's " + std::to_string(x.dims.back()));
  }
  const std::string largest = ctx.AttributeText(inst, "largest");
  if (!largest.empty() && largest != "true" && largest != "false") {
    return ctx.Malformed(inst, "largest is not true or false");
  }
  std::vector<int64_t> dims(x.dims.begin(), x.dims.end());
  dims.back() = k;
  Shape result;
  result.tuple_elements = {ArrayShape(x.type, dims), ArrayShape(PrimitiveType::kS32, dims)};
  if (!hlo::SameValues(inst.shape, result)) {
    return ctx.Malformed(inst, "the result is not " + hlo::CanonicalShapeText(result));
  }
  return Status::Ok();
}

Status Check(const ShapeContext& ctx, const Instruction& inst,
             std::span<const Shape* const> operands) {
  return inst.opcode.opcode == Opcode::kSort ? CheckSort(ctx, inst, operands)
                                             : CheckTopK(ctx, inst, operands);
}

}  // namespace

ShapeRules SortRules() { return {Takes, Check}; }

}  // namespace hlocache::interp
