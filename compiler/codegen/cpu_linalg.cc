// cholesky and triangular-solve (see compiler/semantics/linalg.h for their meaning): one call of
// the prelude's batch loop, which runs the interpreter's arithmetic on each batch in double.
#include <string>

#include "compiler/codegen/cpu_families.h"
#include "compiler/codegen/cpu_source.h"
#include "compiler/semantics/linalg_options.h"
#include "compiler/semantics/rules/families.h"

namespace hlocache::compiler {
namespace {

using hlo::Instruction;
using hlo::Opcode;

bool NotElementwise(Opcode) { return false; }

const char* Bool(bool b) { return b ? "true" : "false"; }

Status Lower(CpuEmitter& e, int32_t index, const Instruction& inst) {
  HLOCACHE_ASSIGN_OR_RETURN(interp::LinalgOptions options,
                            interp::ReadLinalgOptions(e.module(), inst));
  const hlo::Shape& a = e.OperandShape(inst, 0);
  const int64_t m = a.dims.back();
  const std::string t = CType(a.type);
  const std::string out = e.Materialize(index, inst);
  if (inst.opcode.opcode == Opcode::kCholesky) {
    const int64_t batches = m == 0 ? 0 : ElementCount(a) / (m * m);
    e.Emit("  if (!hc_cholesky_batches<" + t + ">(" + e.Buffer(inst, 0) + ", " + out + ", " +
           Int(batches) + ", " + Int(m) + ", " + Bool(options.lower) + ")) return 1;\n");
    return Status::Ok();
  }
  const auto& bd = e.OperandShape(inst, 1).dims;
  const int64_t rows = bd[bd.size() - 2], cols = bd.back();
  const int64_t batches = rows * cols == 0 ? 0 : ElementCount(inst.shape) / (rows * cols);
  e.Emit("  if (!hc_triangular_solve_batches<" + t + ">(" + e.Buffer(inst, 0) + ", " +
         e.Buffer(inst, 1) + ", " + out + ", " + Int(batches) + ", " + Int(rows) + ", " +
         Int(cols) + ", " + Bool(options.left) + ", " + Bool(options.lower) + ", " +
         Bool(options.unit) + ", " + Bool(options.transpose) + ")) return 1;\n");
  return Status::Ok();
}

}  // namespace

CpuOpFamily CpuLinalgOps() { return {interp::LinalgRules().takes, NotElementwise, Lower}; }

}  // namespace hlocache::compiler
