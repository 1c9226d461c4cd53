// The shape rules of scan; their evaluation is compiler/interp/eval_scan.cc.
#include <string>

#include "compiler/semantics/rules/families.h"
#include "compiler/semantics/signature.h"

namespace hlocache::interp {
namespace {

using hlo::Instruction;
using hlo::Opcode;
using hlo::Shape;

bool Takes(Opcode op) { return op == Opcode::kScan; }

Status Check(const ShapeContext& ctx, const Instruction& inst,
             std::span<const Shape* const> operands) {
  HLOCACHE_ASSIGN_OR_RETURN(ScanForm form, ReadScanForm(ctx, inst, operands));
  std::vector<Shape> params, results;
  for (size_t k = 0; k < form.inputs; ++k)
    params.push_back(ShapeWithoutDimension(*operands[k], form.dim));
  for (size_t k = 0; k < form.carries; ++k) params.push_back(*operands[form.inputs + k]);
  for (const Shape& out : form.output_arrays)
    results.push_back(ShapeWithoutDimension(out, form.dim));
  for (size_t k = 0; k < form.carries; ++k) results.push_back(*operands[form.inputs + k]);
  Shape result;
  if (form.tuple_result) {
    result.tuple_elements = results;
  } else {
    result = results[0];
  }
  std::vector<const Shape*> param_ptrs;
  for (const Shape& s : params) param_ptrs.push_back(&s);
  HLOCACHE_ASSIGN_OR_RETURN(int32_t f, ctx.Callee(inst, "to_apply"));
  return CheckSignature(ctx, inst, f, param_ptrs, result, "the scanned computation");
}

}  // namespace

// An array shape without dimension `d`.
Shape ShapeWithoutDimension(const Shape& s, int64_t d) {
  Shape out = ArrayShape(s.type, s.dims);
  out.dims.erase(out.dims.begin() + d);
  return out;
}

Result<ScanForm> ReadScanForm(const ShapeContext& ctx, const Instruction& inst,
                              std::span<const Shape* const> operands) {
  ScanForm form;
  HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> dims, ctx.Ints(inst, "dimensions"));
  if (dims.size() != 1) return Error(ctx.Malformed(inst, "dimensions={...} names one dimension"));
  form.dim = dims[0];
  HLOCACHE_ASSIGN_OR_RETURN(int64_t carries, ctx.IntOr(inst, "num_carries", 0));
  if (carries < 0 || static_cast<size_t>(carries) >= operands.size()) {
    return Error(ctx.Malformed(inst, "num_carries=" + std::to_string(carries) +
                                         " leaves no input among " +
                                         std::to_string(operands.size()) + " operands"));
  }
  form.carries = static_cast<size_t>(carries);
  form.inputs = operands.size() - form.carries;
  const std::string reverse = ctx.AttributeText(inst, "is_reverse");
  if (!reverse.empty() && reverse != "true" && reverse != "false") {
    return Error(ctx.Malformed(inst, "is_reverse is neither true nor false"));
  }
  form.reverse = reverse == "true";
  for (size_t k = 0; k < operands.size(); ++k) {
    if (!operands[k]->IsArray()) {
      return Error(ctx.Unsupported(inst, "scan operands that are tuples"));
    }
  }
  for (size_t k = 0; k < form.inputs; ++k) {
    const Shape& in = *operands[k];
    if (form.dim < 0 || form.dim >= in.rank()) {
      return Error(ctx.Malformed(inst, "input " + std::to_string(k) + " " +
                                           hlo::CanonicalShapeText(in) + " has no dimension " +
                                           std::to_string(form.dim)));
    }
    const int64_t length = in.dims[static_cast<size_t>(form.dim)];
    if (k == 0) form.length = length;
    if (length != form.length) {
      return Error(ctx.Malformed(inst, "the inputs differ in length along the scanned dimension"));
    }
  }
  form.tuple_result = inst.shape.IsTuple();
  const size_t results = form.tuple_result ? inst.shape.tuple_elements.size() : 1;
  if (results < form.carries) {
    return Error(ctx.Malformed(inst, "the result has fewer elements than num_carries"));
  }
  form.outputs = results - form.carries;
  for (size_t k = 0; k < results; ++k) {
    const Shape& r = form.tuple_result ? inst.shape.tuple_elements[k] : inst.shape;
    if (k >= form.outputs) {
      const Shape& init = *operands[form.inputs + (k - form.outputs)];
      if (!hlo::SameValues(r, init)) {
        return Error(
            ctx.Malformed(inst, "result " + std::to_string(k) + " " + hlo::CanonicalShapeText(r) +
                                    " is not its carry's shape " + hlo::CanonicalShapeText(init)));
      }
      continue;
    }
    if (!r.IsArray() || form.dim >= r.rank() ||
        r.dims[static_cast<size_t>(form.dim)] != form.length) {
      return Error(ctx.Malformed(inst, "output " + std::to_string(k) + " " +
                                           hlo::CanonicalShapeText(r) + " is not " +
                                           std::to_string(form.length) + " long in dimension " +
                                           std::to_string(form.dim)));
    }
    form.output_arrays.push_back(r);
  }
  return form;
}

ShapeRules ScanRules() { return {Takes, Check}; }

}  // namespace hlocache::interp
