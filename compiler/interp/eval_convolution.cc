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

// Steps through the row-major indices of `dims`; false after the last (or for no elements).
bool Next(std::vector<int64_t>& index, std::span<const int64_t> dims) {
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
  HLOCACHE_ASSIGN_OR_RETURN(ConvolutionGeometry g,
                            ReadConvolutionGeometry(ctx, inst, input.shape(), kernel.shape()));
  Literal out(inst.shape);
  const ConvolutionDims& d = g.dims;
  const size_t spatial = g.window.size();
  const auto is = hlo::RowMajorStrides(input.shape().dims);
  const auto ks = hlo::RowMajorStrides(kernel.shape().dims);
  const auto os = hlo::RowMajorStrides(inst.shape.dims);
  auto at = [](std::span<const int64_t> v, int64_t k) { return v[static_cast<size_t>(k)]; };
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

OpFamily ConvolutionOps() { return {ConvolutionRules().takes, Eval}; }

}  // namespace hlocache::interp
