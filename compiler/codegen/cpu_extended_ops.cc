#include "compiler/codegen/cpu_extended_ops.h"

#include <string>

#include "compiler/codegen/cpu_families.h"

namespace hlocache::compiler {
namespace {

const CpuOpFamily* FamilyOf(hlo::Opcode op) {
  for (const CpuOpFamily& f : CpuOpFamilies()) {
    if (f.takes(op)) return &f;
  }
  return nullptr;
}

}  // namespace

std::span<const CpuOpFamily> CpuOpFamilies() {
  static const CpuOpFamily kFamilies[] = {
      CpuCollectiveOps(),  CpuGatherScatterOps(), CpuControlOps(), CpuScanOps(),
      CpuWrapperOps(),     CpuElementwiseOps(),   CpuSortOps(),    CpuWindowOps(),
      CpuConvolutionOps(), CpuBatchNormOps(),     CpuRngOps(),     CpuLinalgOps(),
      CpuDotOps(),         CpuHostOps(),          CpuDynamicOps(),
  };
  return std::span<const CpuOpFamily>(kFamilies, sizeof kFamilies / sizeof kFamilies[0]);
}

bool IsExtendedCpuOp(hlo::Opcode op) { return FamilyOf(op) != nullptr; }

bool IsElementwiseExtendedCpuOp(hlo::Opcode op) {
  const CpuOpFamily* f = FamilyOf(op);
  return f != nullptr && f->elementwise(op);
}

Status LowerExtendedCpuOp(CpuEmitter& emitter, int32_t index, const hlo::Instruction& inst) {
  const CpuOpFamily* f = FamilyOf(inst.opcode.opcode);
  if (f == nullptr) {
    return emitter.Unsupported(inst, "'" + std::string(hlo::OpcodeName(inst.opcode.opcode)) + "'");
  }
  return f->lower(emitter, index, inst);
}

}  // namespace hlocache::compiler
