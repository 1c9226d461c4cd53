// The shape rules of reduce-window and select-and-scatter; their evaluation is
// compiler/interp/eval_window.cc.
#include <string>

#include "compiler/hlo/window.h"
#include "compiler/semantics/rules/families.h"
#include "compiler/semantics/signature.h"

namespace hlocache::interp {
namespace {

using hlo::Instruction;
using hlo::Opcode;
using hlo::PrimitiveType;
using hlo::Shape;
using hlo::WindowDimension;

bool Takes(Opcode op) { return op == Opcode::kReduceWindow || op == Opcode::kSelectAndScatter; }

bool IsScalar(const Shape& s) { return s.IsArray() && s.dims.empty(); }

Status CheckReduceWindow(const ShapeContext& ctx, const Instruction& inst,
                         std::span<const Shape* const> operands) {
  if (operands.empty() || operands.size() % 2 != 0) {
    return ctx.Malformed(inst, "takes n operands and n init values");
  }
  const size_t n = operands.size() / 2;
  for (size_t k = 0; k < n; ++k) {
    if (!operands[k]->IsArray() || operands[k]->dims != operands[0]->dims) {
      return ctx.Malformed(
          inst, "operand " + std::to_string(k) + " is not an array of operand 0's dimensions");
    }
    if (!IsScalar(*operands[n + k])) {
      return ctx.Malformed(inst, "init value " + std::to_string(k) + " is not a scalar");
    }
  }
  std::vector<WindowDimension> window;
  std::vector<int64_t> placements;
  HLOCACHE_RETURN_IF_ERROR(ReadWindowPlacements(ctx, inst, operands[0]->dims, window, placements));
  Shape result;
  for (size_t k = 0; k < n; ++k) {
    result.tuple_elements.push_back(ArrayShape(operands[n + k]->type, placements));
  }
  if (n == 1) result = result.tuple_elements[0];
  if (!hlo::SameValues(inst.shape, result)) {
    return ctx.Malformed(inst, "the result " + hlo::CanonicalShapeText(inst.shape) +
                                   " is not the window's " + hlo::CanonicalShapeText(result));
  }
  HLOCACHE_ASSIGN_OR_RETURN(int32_t f, ctx.Callee(inst, "to_apply"));
  std::vector<Shape> scalars;
  for (size_t k = 0; k < n; ++k) scalars.push_back(ArrayShape(operands[n + k]->type));
  for (size_t k = 0; k < n; ++k) scalars.push_back(ArrayShape(operands[k]->type));
  std::vector<const Shape*> params;
  for (const Shape& s : scalars) params.push_back(&s);
  Shape returns;
  for (size_t k = 0; k < n; ++k) returns.tuple_elements.push_back(scalars[k]);
  if (n == 1) returns = scalars[0];
  return CheckSignature(ctx, inst, f, params, returns, "the reduction computation");
}

Status CheckSelectAndScatter(const ShapeContext& ctx, const Instruction& inst,
                             std::span<const Shape* const> operands) {
  if (operands.size() != 3) return ctx.Malformed(inst, "takes an operand, a source and an init");
  const Shape& operand = *operands[0];
  const Shape& source = *operands[1];
  if (!operand.IsArray()) return ctx.Malformed(inst, "the operand is not an array");
  if (!IsScalar(*operands[2]) || operands[2]->type != operand.type) {
    return ctx.Malformed(inst, "the init value is not a scalar of the operand's type");
  }
  std::vector<WindowDimension> window;
  std::vector<int64_t> placements;
  HLOCACHE_RETURN_IF_ERROR(ReadWindowPlacements(ctx, inst, operand.dims, window, placements));
  const Shape want_source = ArrayShape(operand.type, placements);
  if (!hlo::SameValues(source, want_source)) {
    return ctx.Malformed(inst, "the source " + hlo::CanonicalShapeText(source) +
                                   " is not one element per window placement, " +
                                   hlo::CanonicalShapeText(want_source));
  }
  if (!hlo::SameValues(inst.shape, ArrayShape(operand.type, operand.dims))) {
    return ctx.Malformed(inst, "the result is not of the operand's shape");
  }
  const Shape scalar = ArrayShape(operand.type);
  const Shape* two[] = {&scalar, &scalar};
  HLOCACHE_ASSIGN_OR_RETURN(int32_t select, ctx.Callee(inst, "select"));
  HLOCACHE_RETURN_IF_ERROR(
      CheckSignature(ctx, inst, select, two, ArrayShape(PrimitiveType::kPred), "select"));
  HLOCACHE_ASSIGN_OR_RETURN(int32_t scatter, ctx.Callee(inst, "scatter"));
  return CheckSignature(ctx, inst, scatter, two, scalar, "scatter");
}

Status Check(const ShapeContext& ctx, const Instruction& inst,
             std::span<const Shape* const> operands) {
  return inst.opcode.opcode == Opcode::kReduceWindow ? CheckReduceWindow(ctx, inst, operands)
                                                     : CheckSelectAndScatter(ctx, inst, operands);
}

}  // namespace

// The window and the number of its placements along each dimension of `base`.
Status ReadWindowPlacements(const ShapeContext& ctx, const Instruction& inst,
                            std::span<const int64_t> base, std::vector<WindowDimension>& window,
                            std::vector<int64_t>& placements) {
  auto w = hlo::ReadWindow(ctx.module(), inst, base.size());
  if (!w) return ctx.Malformed(inst, w.error().message());
  window = std::move(*w);
  placements.clear();
  for (size_t d = 0; d < base.size(); ++d) {
    const std::optional<int64_t> p = hlo::WindowPlacements(window[d], base[d]);
    if (!p) return ctx.Malformed(inst, "window: too large to address");
    placements.push_back(*p);
  }
  return Status::Ok();
}

ShapeRules WindowRules() { return {Takes, Check}; }

}  // namespace hlocache::interp
