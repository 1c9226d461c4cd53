// batch-norm-training, batch-norm-inference and batch-norm-grad, epsilon=E, feature_index=F:
// per feature c (the operand's dimension F), over the N elements of that feature.
//
//   training(x, scale, offset) = (y, mean, var): mean = sum(x) / N, var = sum((x - mean)^2) / N,
//     y = (x - mean) / sqrt(var + E) * scale + offset
//   inference(x, scale, offset, mean, var) = y, the same y from the given mean and var
//   grad(x, scale, mean, var, dy) = (dx, dscale, doffset): inv = 1 / sqrt(var + E),
//     doffset = sum(dy), dscale = sum(dy * (x - mean) * inv),
//     dx = scale * inv / N * (N * dy - doffset - (x - mean) * inv * dscale)
//
// These are XLA's formulas (its BatchNormExpander), except that the variance is the mean of the
// squared deviations rather than E[x^2] - E[x]^2, which cancels catastrophically. Everything is
// computed in double, sums in the row-major order of the operand, and each result is rounded
// once to the element type; E is the float the attribute spells. The generated code runs the
// same steps (hc_batch_norm_* in the prelude).
#include <cmath>
#include <string>

#include "compiler/interp/eval_families.h"
#include "compiler/semantics/rules/families.h"
#include "compiler/semantics/signature.h"

namespace hlocache::interp {
namespace {

using hlo::Instruction;
using hlo::Opcode;
using hlo::Shape;

Result<Literal> Eval(EvalContext& ctx, const Instruction& inst,
                     std::span<const Literal* const> operands) {
  HLOCACHE_ASSIGN_OR_RETURN(const double eps, BatchNormEpsilon(ctx, inst));
  HLOCACHE_ASSIGN_OR_RETURN(const int64_t f, ctx.IntOr(inst, "feature_index", -1));
  const Literal& x = *operands[0];
  const auto& dims = x.shape().dims;
  const int64_t features = dims[static_cast<size_t>(f)];
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < static_cast<size_t>(f); ++d) outer *= dims[d];
  for (size_t d = static_cast<size_t>(f) + 1; d < dims.size(); ++d) inner *= dims[d];
  const double n = static_cast<double>(outer * inner);
  auto at = [&](int64_t o, int64_t c, int64_t i) {
    return static_cast<size_t>((o * features + c) * inner + i);
  };
  const Opcode op = inst.opcode.opcode;
  Literal y(ArrayShape(x.type(), dims));
  const Shape vec = ArrayShape(x.type(), {features});
  Literal second(vec), third(vec);
  for (int64_t c = 0; c < features; ++c) {
    const auto cc = static_cast<size_t>(c);
    double mean = 0, var = 0;
    if (op == Opcode::kBatchNormTraining) {
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t i = 0; i < inner; ++i) mean += x.GetFloat(at(o, c, i));
      }
      mean /= n;
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t i = 0; i < inner; ++i) {
          const double d = x.GetFloat(at(o, c, i)) - mean;
          var += d * d;
        }
      }
      var /= n;
    } else {
      mean = operands[op == Opcode::kBatchNormInference ? 3 : 2]->GetFloat(cc);
      var = operands[op == Opcode::kBatchNormInference ? 4 : 3]->GetFloat(cc);
    }
    const double scale = operands[1]->GetFloat(cc);
    const double root = std::sqrt(var + eps);
    if (op != Opcode::kBatchNormGrad) {
      const double offset = operands[2]->GetFloat(cc);
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t i = 0; i < inner; ++i) {
          y.SetFloat(at(o, c, i), (x.GetFloat(at(o, c, i)) - mean) / root * scale + offset);
        }
      }
      second.SetFloat(cc, mean);
      third.SetFloat(cc, var);
      continue;
    }
    const Literal& dy = *operands[4];
    const double inv = 1 / root;
    double doffset = 0, dscale = 0;
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        const double g = dy.GetFloat(at(o, c, i));
        doffset += g;
        dscale += g * (x.GetFloat(at(o, c, i)) - mean) * inv;
      }
    }
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        const double centered = x.GetFloat(at(o, c, i)) - mean;
        y.SetFloat(
            at(o, c, i),
            scale * inv / n * (n * dy.GetFloat(at(o, c, i)) - doffset - centered * inv * dscale));
      }
    }
    second.SetFloat(cc, dscale);
    third.SetFloat(cc, doffset);
  }
  if (op == Opcode::kBatchNormInference) return y;
  Literal tuple(inst.shape);
  tuple.elements()[0] = std::move(y);
  tuple.elements()[1] = std::move(second);
  tuple.elements()[2] = std::move(third);
  return tuple;
}

}  // namespace

OpFamily BatchNormOps() { return {BatchNormRules().takes, Eval}; }

}  // namespace hlocache::interp
