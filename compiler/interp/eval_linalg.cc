// cholesky and triangular-solve (compiler/semantics/linalg.h says what they compute): each batch
// of the operands in double, the shared arithmetic, each result rounded once.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "compiler/interp/eval_families.h"
#include "compiler/semantics/linalg.h"
#include "compiler/semantics/linalg_options.h"
#include "compiler/semantics/rules/families.h"
#include "compiler/semantics/signature.h"

namespace hlocache::interp {
namespace linalg {
HLOCACHE_LINALG_CODE
}  // namespace linalg

namespace {

using hlo::Instruction;
using hlo::Opcode;
using hlo::Shape;

Result<Literal> Eval(EvalContext& ctx, const Instruction& inst,
                     std::span<const Literal* const> operands) {
  HLOCACHE_ASSIGN_OR_RETURN(LinalgOptions options, ReadLinalgOptions(ctx.module(), inst));
  const Literal& a = *operands[0];
  const auto& ad = a.shape().dims;
  const auto m = static_cast<size_t>(ad.back());
  const bool solve = inst.opcode.opcode == Opcode::kTriangularSolve;
  const Literal& target = solve ? *operands[1] : a;
  const auto& bd = target.shape().dims;
  const auto rows = static_cast<size_t>(bd[bd.size() - 2]), cols = static_cast<size_t>(bd.back());
  Literal out(ArrayShape(target.type(), bd));
  const size_t batches = m * m == 0 || rows * cols == 0 ? 0 : a.size() / (m * m);
  std::vector<double> am(m * m), bm(rows * cols);
  for (size_t batch = 0; batch < batches; ++batch) {
    for (size_t i = 0; i < m * m; ++i) am[i] = a.GetFloat(batch * m * m + i);
    if (!solve) {
      linalg::hc_cholesky(am.data(), static_cast<int64_t>(m), options.lower);
      for (size_t i = 0; i < m * m; ++i) out.SetFloat(batch * m * m + i, am[i]);
      continue;
    }
    for (size_t i = 0; i < rows * cols; ++i) bm[i] = target.GetFloat(batch * rows * cols + i);
    linalg::hc_triangular_solve(am.data(), bm.data(), static_cast<int64_t>(rows),
                                static_cast<int64_t>(cols), options.left, options.lower,
                                options.unit, options.transpose);
    for (size_t i = 0; i < rows * cols; ++i) out.SetFloat(batch * rows * cols + i, bm[i]);
  }
  return out;
}

}  // namespace

OpFamily LinalgOps() { return {LinalgRules().takes, Eval}; }

}  // namespace hlocache::interp
