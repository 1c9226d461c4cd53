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

const char* ElementwiseHelper(hlo::Opcode op, size_t arity) {
  if (arity == 1) {
    switch (op) {
      case Opcode::kNegate:
        return "hc_neg";
      case Opcode::kAbs:
        return "hc_abs";
      case Opcode::kSign:
        return "hc_sign";
      case Opcode::kNot:
        return "hc_not";
      default:
        return nullptr;
    }
  }
  if (arity == 2) {
    switch (op) {
      case Opcode::kAdd:
        return "hc_add";
      case Opcode::kSubtract:
        return "hc_sub";
      case Opcode::kMultiply:
        return "hc_mul";
      case Opcode::kDivide:
        return "hc_div";
      case Opcode::kRemainder:
        return "hc_rem";
      case Opcode::kMaximum:
        return "hc_max";
      case Opcode::kMinimum:
        return "hc_min";
      case Opcode::kPower:
        return "hc_pow";
      default:
        return nullptr;
    }
  }
  return nullptr;
}

const char* ElementwiseMathFunction(hlo::Opcode op) {
  switch (op) {
    case Opcode::kExp:
      return "exp";
    case Opcode::kExpm1:
      return "expm1";
    case Opcode::kLog:
      return "log";
    case Opcode::kLog1p:
      return "log1p";
    case Opcode::kSqrt:
      return "sqrt";
    case Opcode::kTanh:
      return "tanh";
    case Opcode::kCos:
      return "cos";
    case Opcode::kSin:
      return "sin";
    case Opcode::kFloor:
      return "floor";
    case Opcode::kCeil:
      return "ceil";
    case Opcode::kRoundNearestAfz:
      return "round";
    default:
      return nullptr;
  }
}

}  // namespace hlocache::compiler
