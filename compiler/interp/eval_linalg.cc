// cholesky and triangular-solve (compiler/semantics/linalg.h says what they compute): each batch
// of the operands in double, the shared arithmetic, each result rounded once.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "compiler/interp/eval_families.h"
#include "compiler/semantics/linalg.h"
#include "compiler/semantics/linalg_options.h"
#include "compiler/semantics/signature.h"

namespace hlocache::interp {
namespace linalg {
HLOCACHE_LINALG_CODE
}  // namespace linalg

Result<LinalgOptions> ReadLinalgOptions(const hlo::Module& module, const hlo::Instruction& inst) {
  const ShapeContext ctx(module);
  LinalgOptions out;
  auto flag = [&](const char* name, bool& to) -> Status {
    const std::string text = ctx.AttributeText(inst, name);
    if (text.empty() || text == "false") return Status::Ok();
    if (text != "true")
      return ctx.Malformed(inst, std::string(name) + " is neither true nor false");
    to = true;
    return Status::Ok();
  };
  HLOCACHE_RETURN_IF_ERROR(flag("lower", out.lower));
  HLOCACHE_RETURN_IF_ERROR(flag("left_side", out.left));
  HLOCACHE_RETURN_IF_ERROR(flag("unit_diagonal", out.unit));
  const std::string transpose = ctx.AttributeText(inst, "transpose_a");
  if (transpose == "TRANSPOSE" || transpose == "ADJOINT") {
    out.transpose = true;
  } else if (!transpose.empty() && transpose != "NO_TRANSPOSE") {
    return Error(ctx.Malformed(inst, "transpose_a is not NO_TRANSPOSE, TRANSPOSE or ADJOINT"));
  }
  return out;
}

namespace {

using hlo::Instruction;
using hlo::Opcode;
using hlo::Shape;

bool Takes(Opcode op) { return op == Opcode::kCholesky || op == Opcode::kTriangularSolve; }

// A batch of square matrices: [..., n, n].
bool IsSquareBatch(const Shape& s) {
  return s.IsArray() && s.rank() >= 2 && s.dims[s.dims.size() - 1] == s.dims[s.dims.size() - 2];
}

Status Check(const ShapeContext& ctx, const Instruction& inst,
             std::span<const Shape* const> operands) {
  const bool solve = inst.opcode.opcode == Opcode::kTriangularSolve;
  if (operands.size() != (solve ? 2u : 1u)) {
    return ctx.Malformed(inst, solve ? "takes two operands" : "takes one operand");
  }
  const Shape& a = *operands[0];
  if (!IsSquareBatch(a)) return ctx.Malformed(inst, "the first operand is not [..., n, n]");
  if (!hlo::IsFloat(a.type)) {
    return ctx.Unsupported(inst, std::string(hlo::OpcodeName(inst.opcode.opcode)) + " of " +
                                     std::string(hlo::PrimitiveTypeName(a.type)));
  }
  HLOCACHE_ASSIGN_OR_RETURN(LinalgOptions options, ReadLinalgOptions(ctx.module(), inst));
  const Shape& result = solve ? *operands[1] : a;
  if (solve) {
    const Shape& b = *operands[1];
    if (!b.IsArray() || b.type != a.type || b.rank() != a.rank() ||
        !std::equal(a.dims.begin(), a.dims.end() - 2, b.dims.begin())) {
      return ctx.Malformed(inst, "the operands' types or batch dimensions differ");
    }
    const int64_t m = a.dims.back();
    const int64_t side = options.left ? b.dims[b.dims.size() - 2] : b.dims.back();
    if (side != m) {
      return ctx.Malformed(
          inst, "b's " + std::string(options.left ? "rows" : "columns") + " are not a's size");
    }
  }
  if (!hlo::SameValues(inst.shape, ArrayShape(result.type, result.dims))) {
    return ctx.Malformed(inst, "the result is not " + hlo::CanonicalShapeText(result));
  }
  return Status::Ok();
}

Result<Literal> Eval(EvalContext& ctx, const Instruction& inst,
                     std::span<const Literal* const> operands) {
  HLOCACHE_ASSIGN_OR_RETURN(LinalgOptions options, ReadLinalgOptions(ctx.module(), inst));
  const Literal& a = *operands[0];
  const std::vector<int64_t>& ad = a.shape().dims;
  const auto m = static_cast<size_t>(ad.back());
  const bool solve = inst.opcode.opcode == Opcode::kTriangularSolve;
  const Literal& target = solve ? *operands[1] : a;
  const std::vector<int64_t>& bd = target.shape().dims;
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

OpFamily LinalgOps() { return {Takes, Check, Eval}; }

}  // namespace hlocache::interp
