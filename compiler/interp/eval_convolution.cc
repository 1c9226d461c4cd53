// convolution(input, kernel), window=..., dim_labels=..., feature_group_count=G,
// batch_group_count=B (the dimension numbers are compiler/hlo/convolution_dims.h, the window
// compiler/hlo/window.h; lhs_dilate dilates the input, rhs_dilate the kernel, rhs_reversal
// reads the kernel backwards).
//
// The output's features are split into max(G, B) groups of equal size (at most one of G and B
// is above 1, as in XLA). Output element (b, o, p) of group g = o / (features per group) sums,
// over the kernel's window positions k in row-major order and, inside, the kernel's input
// features i in order, input[b', f, q] * kernel[o, i, k'], where f = g * (kernel input
// features) + i when G > 1 (else i), b' = g * (output batch) + b when B > 1 (else b), q is the
// input position window position k reads at placement p (skipped when it lands in the padding
// or on a hole of the dilated input), and k' is k, or its mirror along reversed dimensions.
// This is StableHLO's definition of feature and batch groups (split, convolve, concatenate).
//
// Floating-point operands are multiplied and summed in double from zero and rounded once to
// the result's type; integers are multiplied and summed modulo 2^64 and wrapped to the result's
// type, as dot does. The operands may be of different types of one kind (bf16 with f32, s8 with
// s32, pred as 0 and 1 with either), the result of any type of that kind
// (preferred_element_type). A pred result takes operands of any types, each converted to pred
// first (nonzero, NaN included, is true), as XLA's evaluator converts operands to the result's
// type: an output element is true when some product of two true elements is in its sum.
#include <string>
#include <vector>

#include "compiler/hlo/convolution_dims.h"
#include "compiler/hlo/window.h"
#include "compiler/interp/eval_families.h"
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

// Everything the evaluation needs, read and checked once.
struct Geometry {
  ConvolutionDims dims;
  std::vector<WindowDimension> window;
  int64_t feature_groups = 1, batch_groups = 1;
  int64_t groups = 1;              // max(feature_groups, batch_groups)
  int64_t outputs_per_group = 0;   // Output features per group.
  int64_t kernel_in_features = 0;  // Input features each output sums over.
  int64_t output_batch = 0;
};

Result<Geometry> Read(const ShapeContext& ctx, const Instruction& inst, const Shape& input,
                      const Shape& kernel) {
  Geometry g;
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
  HLOCACHE_ASSIGN_OR_RETURN(Geometry g, Read(ctx, inst, input, kernel));
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

// Steps through the row-major indices of `dims`; false after the last (or for no elements).
bool Next(std::vector<int64_t>& index, const std::vector<int64_t>& dims) {
  for (size_t d = dims.size(); d-- > 0;) {
    if (++index[d] < dims[d]) return true;
    index[d] = 0;
  }
  return false;
}

Result<Literal> Eval(EvalContext& ctx, const Instruction& inst,
                     std::span<const Literal* const> operands) {
  const Literal& input = *operands[0];
  const Literal& kernel = *operands[1];
  HLOCACHE_ASSIGN_OR_RETURN(Geometry g, Read(ctx, inst, input.shape(), kernel.shape()));
  Literal out(inst.shape);
  const ConvolutionDims& d = g.dims;
  const size_t spatial = g.window.size();
  const auto is = hlo::RowMajorStrides(input.shape().dims);
  const auto ks = hlo::RowMajorStrides(kernel.shape().dims);
  const auto os = hlo::RowMajorStrides(inst.shape.dims);
  auto at = [](const std::vector<int64_t>& v, int64_t k) { return v[static_cast<size_t>(k)]; };
  std::vector<int64_t> in_extent(spatial), out_extent(spatial), window_extent(spatial);
  for (size_t k = 0; k < spatial; ++k) {
    in_extent[k] = at(input.shape().dims, d.input_spatial[k]);
    out_extent[k] = at(inst.shape.dims, d.output_spatial[k]);
    window_extent[k] = g.window[k].size;
  }
  if (out.size() == 0) return out;
  const bool floats = out.is_float();
  const bool preds = inst.shape.type == PrimitiveType::kPred;
  // An element as the sum's integer: as it is, or as pred for a pred result.
  auto integer = [preds](const Literal& l, size_t element) {
    return preds ? static_cast<uint64_t>(l.AsDouble(element) != 0)
                 : static_cast<uint64_t>(l.GetInt(element));
  };
  // Floating-point operands read as arrays of double (a literal of a float type already is one;
  // integer operands of a float result are converted once), so that the innermost loop, over a
  // group's output features, is a multiply-add with a stride and nothing else. The order of the
  // sums is the one stated above.
  std::vector<double> converted_input, converted_kernel;
  auto doubles = [&](const Literal& l, std::vector<double>& converted) -> const double* {
    if (l.is_float()) return l.float_data();
    converted.resize(l.size());
    for (size_t e = 0; e < converted.size(); ++e) converted[e] = l.AsDouble(e);
    return converted.data();
  };
  const double* input_values = floats ? doubles(input, converted_input) : nullptr;
  const double* kernel_values = floats ? doubles(kernel, converted_kernel) : nullptr;
  const int64_t input_batch_stride = at(is, d.input_batch);
  const int64_t input_feature_stride = at(is, d.input_feature);
  const int64_t kernel_in_stride = at(ks, d.kernel_input_feature);
  const int64_t kernel_out_stride = at(ks, d.kernel_output_feature);
  const auto outputs_per_group = static_cast<size_t>(g.outputs_per_group);
  // One group's output features for one batch element and one placement at a time.
  std::vector<double> fsum(outputs_per_group);
  std::vector<uint64_t> isum(outputs_per_group);
  std::vector<int64_t> p(spatial, 0);
  std::vector<int64_t> w(spatial, 0);
  do {
    int64_t out_offset = 0;
    for (size_t k = 0; k < spatial; ++k) out_offset += p[k] * at(os, d.output_spatial[k]);
    for (int64_t b = 0; b < g.output_batch; ++b) {
      for (int64_t group = 0; group < g.groups; ++group) {
        const int64_t in_b = g.batch_groups > 1 ? group * g.output_batch + b : b;
        const int64_t first_feature = g.feature_groups > 1 ? group * g.kernel_in_features : 0;
        const int64_t first_output = group * g.outputs_per_group * kernel_out_stride;
        std::fill(fsum.begin(), fsum.end(), 0.0);
        std::fill(isum.begin(), isum.end(), 0);
        std::fill(w.begin(), w.end(), 0);
        do {
          int64_t in_offset = in_b * input_batch_stride, k_offset = 0;
          bool reads = true;
          for (size_t k = 0; k < spatial && reads; ++k) {
            const std::optional<int64_t> q =
                hlo::WindowBaseIndex(g.window[k], in_extent[k], p[k], w[k]);
            reads = q.has_value();
            if (!reads) break;
            in_offset += *q * at(is, d.input_spatial[k]);
            const int64_t kk = g.window[k].reversal ? window_extent[k] - 1 - w[k] : w[k];
            k_offset += kk * at(ks, d.kernel_spatial[k]);
          }
          if (!reads) continue;
          for (int64_t i = 0; i < g.kernel_in_features; ++i) {
            const auto x =
                static_cast<size_t>(in_offset + (first_feature + i) * input_feature_stride);
            const int64_t y0 = k_offset + i * kernel_in_stride + first_output;
            if (floats) {
              const double xv = input_values[x];
              const double* ky = kernel_values + y0;
              for (size_t oo = 0; oo < outputs_per_group; ++oo) {
                fsum[oo] += xv * ky[static_cast<int64_t>(oo) * kernel_out_stride];
              }
            } else {
              for (size_t oo = 0; oo < outputs_per_group; ++oo) {
                const auto y =
                    static_cast<size_t>(y0 + static_cast<int64_t>(oo) * kernel_out_stride);
                isum[oo] += integer(input, x) * integer(kernel, y);
              }
            }
          }
        } while (Next(w, window_extent));
        for (size_t oo = 0; oo < outputs_per_group; ++oo) {
          const auto o = static_cast<size_t>(
              out_offset + b * at(os, d.output_batch) +
              (group * g.outputs_per_group + static_cast<int64_t>(oo)) * at(os, d.output_feature));
          if (floats) {
            out.SetFloat(o, fsum[oo]);
          } else {
            out.SetInt(o, static_cast<int64_t>(isum[oo]));
          }
        }
      }
    }
  } while (Next(p, out_extent));
  return out;
}

}  // namespace

OpFamily ConvolutionOps() { return {Takes, Check, Eval}; }

}  // namespace hlocache::interp
