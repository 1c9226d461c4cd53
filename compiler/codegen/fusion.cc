#include "compiler/codegen/fusion.h"

#include "compiler/semantics/core_ops.h"

namespace hlocache::compiler {

using hlo::Opcode;

bool IsFusibleElementwise(const hlo::Instruction& inst, bool (*extended)(hlo::Opcode)) {
  switch (inst.opcode.opcode) {
    case Opcode::kParameter:
    case Opcode::kConstant:
    case Opcode::kTuple:
    case Opcode::kGetTupleElement:
    case Opcode::kCall:
    case Opcode::kFusion:
    case Opcode::kBroadcast:
    case Opcode::kTranspose:
    case Opcode::kSlice:
    case Opcode::kReverse:
    case Opcode::kPad:
    case Opcode::kConcatenate:
    case Opcode::kDynamicSlice:
    case Opcode::kDynamicUpdateSlice:
    case Opcode::kReduce:
    case Opcode::kDot:
      return false;
    default:
      if (inst.opcode.phase != hlo::AsyncPhase::kNone || !inst.callees.empty() ||
          !inst.shape.IsArray()) {
        return false;
      }
      return interp::IsCoreOp(inst.opcode.opcode) ||
             (extended != nullptr && extended(inst.opcode.opcode));
  }
}

}  // namespace hlocache::compiler
