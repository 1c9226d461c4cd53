// The families' rules, found by opcode.
#include <array>
#include <string>

#include "compiler/semantics/rules/families.h"

namespace hlocache::interp {
namespace {

// The family of each opcode, looked up once: the interpreter checks every instruction it
// evaluates, thousands of times a loop.
const ShapeRules* RulesOf(hlo::Opcode op) {
  static const auto* const table = [] {
    static const ShapeRules kFamilies[] = {
        CollectiveRules(),  GatherScatterRules(), ControlRules(), ScanRules(),
        WrapperRules(),     ElementwiseRules(),   SortRules(),    WindowRules(),
        ConvolutionRules(), BatchNormRules(),     RngRules(),     LinalgRules(),
        DotRules(),         HostRules(),          DynamicRules(),
    };
    auto* t = new std::array<const ShapeRules*, hlo::kOpcodeCount>{};
    for (int o = 0; o < hlo::kOpcodeCount; ++o) {
      for (const ShapeRules& f : kFamilies) {
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

bool IsExtendedOp(hlo::Opcode op) { return RulesOf(op) != nullptr; }

Status CheckExtendedShapes(const ShapeContext& ctx, const hlo::Instruction& inst,
                           std::span<const hlo::Shape* const> operands) {
  const ShapeRules* f = RulesOf(inst.opcode.opcode);
  if (f == nullptr) {
    return ctx.Unsupported(inst, "'" + std::string(hlo::OpcodeName(inst.opcode.opcode)) + "'");
  }
  return f->check(ctx, inst, operands);
}

}  // namespace hlocache::interp
