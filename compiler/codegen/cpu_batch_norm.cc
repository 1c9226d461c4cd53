// batch-norm-training, -inference and -grad (see compiler/interp/eval_batch_norm.cc for their
// meaning): one call of the prelude's hc_batch_norm or hc_batch_norm_grad, which run the
// interpreter's steps.
#include <string>

#include "compiler/codegen/cpu_families.h"
#include "compiler/codegen/cpu_source.h"
#include "compiler/semantics/rules/families.h"

namespace hlocache::compiler {
namespace {

using hlo::Instruction;
using hlo::Opcode;

bool NotElementwise(Opcode) { return false; }

Status Lower(CpuEmitter& e, int32_t index, const Instruction& inst) {
  const hlo::Module& m = e.module();
  // Checked by the interpreter's shape rules: both attributes read.
  const auto f = static_cast<size_t>(*m.Int(*inst.FindAttribute("feature_index")));
  const double eps = static_cast<float>(*m.Float(*inst.FindAttribute("epsilon")));
  const auto& dims = e.OperandShape(inst, 0).dims;
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < f; ++d) outer *= dims[d];
  for (size_t d = f + 1; d < dims.size(); ++d) inner *= dims[d];
  const std::string t = CType(e.OperandShape(inst, 0).type);
  const std::string sizes =
      Int(outer) + ", " + Int(dims[f]) + ", " + Int(inner) + ", " + DoubleLiteral(eps) + ");\n";
  auto in = [&](size_t k) { return e.Buffer(inst, k); };
  switch (inst.opcode.opcode) {
    case Opcode::kBatchNormInference: {
      const std::string y = e.Materialize(index, inst);
      e.Emit("  hc_batch_norm<" + t + ">(" + in(0) + ", " + in(1) + ", " + in(2) + ", " + in(3) +
             ", " + in(4) + ", " + y + ", nullptr, nullptr, " + sizes);
      break;
    }
    case Opcode::kBatchNormTraining: {
      const std::vector<Leaf> out = e.MaterializeLeaves(index, inst);
      e.Emit("  hc_batch_norm<" + t + ">(" + in(0) + ", " + in(1) + ", " + in(2) +
             ", nullptr, nullptr, " + out[0].ptr + ", " + out[1].ptr + ", " + out[2].ptr + ", " +
             sizes);
      break;
    }
    default: {
      const std::vector<Leaf> out = e.MaterializeLeaves(index, inst);
      e.Emit("  hc_batch_norm_grad<" + t + ">(" + in(0) + ", " + in(1) + ", " + in(2) + ", " +
             in(3) + ", " + in(4) + ", " + out[0].ptr + ", " + out[1].ptr + ", " + out[2].ptr +
             ", " + sizes);
      break;
    }
  }
  return Status::Ok();
}

}  // namespace

CpuOpFamily CpuBatchNormOps() { return {interp::BatchNormRules().takes, NotElementwise, Lower}; }

}  // namespace hlocache::compiler
