// The shape rules of convolution; their evaluation is compiler/interp/eval_convolution.cc.
#include <string>
#include <vector>

#include "compiler/hlo/convolution_dims.h"
#include "compiler/hlo/window.h"
#include "compiler/semantics/rules/families.h"
#include "compiler/semantics/signature.h"

namespace hlocache::interp {
namespace {

using hlo::ConvolutionDims;
using hlo::Instruction;
using hlo::Opcode;
using hlo::PrimitiveType;
using hlo::Shape;
using hlo::WindowDimension;

bool Takes(Opcode op) { return op == Opcode::kConvolution; }

bool IsInteger(PrimitiveType t) { return !hlo::IsFloat(t) && t != PrimitiveType::kPred; }

Status Check(const ShapeContext& ctx, const Instruction& inst,
             std::span<const Shape* const> operands) {
  if (operands.size() != 2) return ctx.Malformed(inst, "takes an input and a kernel");
  const Shape& input = *operands[0];
  const Shape& kernel = *operands[1];
  if (!input.IsArray() || !kernel.IsArray() || !inst.shape.IsArray()) {
    return ctx.Malformed(inst, "takes and returns arrays");
  }
  if (input.rank() != kernel.rank() || input.rank() != inst.shape.rank() || input.rank() < 2) {
    return ctx.Malformed(inst, "the input, the kernel and the result differ in rank");
  }
  // pred operands count as 0 and 1 in either kind (XLA upcasts them).
  auto is = [](PrimitiveType t, bool (*kind)(PrimitiveType)) {
    return kind(t) || t == PrimitiveType::kPred;
  };
  const bool floats = is(input.type, hlo::IsFloat) && is(kernel.type, hlo::IsFloat) &&
                      hlo::IsFloat(inst.shape.type);
  const bool ints =
      is(input.type, IsInteger) && is(kernel.type, IsInteger) && IsInteger(inst.shape.type);
  const bool preds = inst.shape.type == PrimitiveType::kPred;
  if (!floats && !ints && !preds) {
    return ctx.Unsupported(inst, "a convolution of " +
                                     std::string(hlo::PrimitiveTypeName(input.type)) + " and " +
                                     std::string(hlo::PrimitiveTypeName(kernel.type)) + " into " +
                                     std::string(hlo::PrimitiveTypeName(inst.shape.type)));
  }
  HLOCACHE_ASSIGN_OR_RETURN(ConvolutionGeometry g,
                            ReadConvolutionGeometry(ctx, inst, input, kernel));
  std::vector<int64_t> want(input.dims.size());
  want[static_cast<size_t>(g.dims.output_batch)] = g.output_batch;
  want[static_cast<size_t>(g.dims.output_feature)] =
      kernel.dims[static_cast<size_t>(g.dims.kernel_output_feature)];
  for (size_t k = 0; k < g.window.size(); ++k) {
    const std::optional<int64_t> p = hlo::WindowPlacements(
        g.window[k], input.dims[static_cast<size_t>(g.dims.input_spatial[k])]);
    if (!p) return ctx.Malformed(inst, "window: too large to address");
    want[static_cast<size_t>(g.dims.output_spatial[k])] = *p;
  }
  if (inst.shape.dims != want) {
    return ctx.Malformed(inst, "the result " + hlo::CanonicalShapeText(inst.shape) +
                                   " is not the convolution's " +
                                   hlo::CanonicalShapeText(ArrayShape(inst.shape.type, want)));
  }
  return Status::Ok();
}

}  // namespace

Result<ConvolutionGeometry> ReadConvolutionGeometry(const ShapeContext& ctx,
                                                    const Instruction& inst, const Shape& input,
                                                    const Shape& kernel) {
  ConvolutionGeometry g;
  const size_t rank = input.dims.size();
  auto dims = hlo::ReadConvolutionDims(ctx.module(), inst, rank);
  if (!dims) return Error(ctx.Malformed(inst, dims.error().message()));
  g.dims = std::move(*dims);
  auto window = hlo::ReadWindow(ctx.module(), inst, rank - 2);
  if (!window) return Error(ctx.Malformed(inst, window.error().message()));
  g.window = std::move(*window);
  HLOCACHE_ASSIGN_OR_RETURN(g.feature_groups, ctx.IntOr(inst, "feature_group_count", 1));
  HLOCACHE_ASSIGN_OR_RETURN(g.batch_groups, ctx.IntOr(inst, "batch_group_count", 1));
  if (g.feature_groups < 1 || g.batch_groups < 1) {
    return Error(ctx.Malformed(inst, "group counts must be positive"));
  }
  if (g.feature_groups > 1 && g.batch_groups > 1) {
    return Error(ctx.Malformed(inst, "feature_group_count and batch_group_count are both above 1"));
  }
  const auto dim = [](const Shape& s, int64_t d) { return s.dims[static_cast<size_t>(d)]; };
  const int64_t in_features = dim(input, g.dims.input_feature);
  const int64_t in_batch = dim(input, g.dims.input_batch);
  g.kernel_in_features = dim(kernel, g.dims.kernel_input_feature);
  const int64_t out_features = dim(kernel, g.dims.kernel_output_feature);
  g.groups = std::max(g.feature_groups, g.batch_groups);
  if (in_features != g.kernel_in_features * g.feature_groups) {
    return Error(ctx.Malformed(inst, "the input has " + std::to_string(in_features) +
                                         " features, not feature_group_count (" +
                                         std::to_string(g.feature_groups) +
                                         ") times the kernel's input features (" +
                                         std::to_string(g.kernel_in_features) + ")"));
  }
  if (out_features % g.groups != 0) {
    return Error(ctx.Malformed(inst, "the kernel's " + std::to_string(out_features) +
                                         " output features do not split into " +
                                         std::to_string(g.groups) + " groups"));
  }
  if (in_batch % g.batch_groups != 0) {
    return Error(ctx.Malformed(inst, "the input batch does not split into batch_group_count (" +
                                         std::to_string(g.batch_groups) + ") groups"));
  }
  g.outputs_per_group = out_features / g.groups;
  g.output_batch = in_batch / g.batch_groups;
  for (size_t k = 0; k < g.window.size(); ++k) {
    if (g.window[k].size != dim(kernel, g.dims.kernel_spatial[k])) {
      return Error(ctx.Malformed(inst, "window size " + std::to_string(g.window[k].size) +
                                           " differs from the kernel's spatial dimension " +
                                           std::to_string(k)));
    }
  }
  return g;
}

ShapeRules ConvolutionRules() { return {Takes, Check}; }

}  // namespace hlocache::interp
