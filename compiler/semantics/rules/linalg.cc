// The shape rules of cholesky and triangular-solve; their evaluation is
// compiler/interp/eval_linalg.cc.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "compiler/semantics/linalg.h"
#include "compiler/semantics/linalg_options.h"
#include "compiler/semantics/rules/families.h"
#include "compiler/semantics/signature.h"

namespace hlocache::interp {
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

}  // namespace

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

ShapeRules LinalgRules() { return {Takes, Check}; }

}  // namespace hlocache::interp
