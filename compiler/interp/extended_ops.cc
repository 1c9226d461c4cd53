#include "compiler/interp/extended_ops.h"

#include <array>
#include <string>

#include "compiler/interp/eval_families.h"

namespace hlocache::interp {
namespace {

// The family of each opcode, looked up once: the interpreter asks for every instruction it
// evaluates, thousands of times a loop.
const OpFamily* FamilyOf(hlo::Opcode op) {
  static const auto* const table = [] {
    auto* t = new std::array<const OpFamily*, hlo::kOpcodeCount>{};
    for (int o = 0; o < hlo::kOpcodeCount; ++o) {
      for (const OpFamily& f : ExtendedOpFamilies()) {
        if (f.takes(static_cast<hlo::Opcode>(o))) {
          (*t)[static_cast<size_t>(o)] = &f;
          break;
        }
      }
    }
    return t;
  }();
  return (*table)[static_cast<size_t>(op)];
}

}  // namespace

std::span<const OpFamily> ExtendedOpFamilies() {
  static const OpFamily kFamilies[] = {
      CollectiveOps(),  GatherScatterOps(), ControlOps(), ScanOps(),        WrapperOps(),
      ElementwiseOps(), SortOps(),          WindowOps(),  ConvolutionOps(), BatchNormOps(),
      RngOps(),         LinalgOps(),        DotOps(),     HostOps(),        DynamicOps(),
  };
  return std::span<const OpFamily>(kFamilies, sizeof kFamilies / sizeof kFamilies[0]);
}

Result<Literal> EvalExtended(EvalContext& ctx, const hlo::Instruction& inst,
                             std::span<const Literal* const> operands) {
  const OpFamily* f = FamilyOf(inst.opcode.opcode);
  if (f == nullptr) {
    return Error(
        ctx.Unsupported(inst, "'" + std::string(hlo::OpcodeName(inst.opcode.opcode)) + "'"));
  }
  return f->eval(ctx, inst, operands);
}

}  // namespace hlocache::interp
