#include "compiler/semantics/core_ops.h"

namespace hlocache::interp {

using hlo::Opcode;

bool IsCoreOp(Opcode op) {
  switch (op) {
    case Opcode::kParameter:
    case Opcode::kConstant:
    case Opcode::kIota:
    case Opcode::kTuple:
    case Opcode::kGetTupleElement:
    case Opcode::kCall:
    case Opcode::kFusion:
    case Opcode::kBroadcast:
    case Opcode::kReshape:
    case Opcode::kBitcast:
    case Opcode::kCopy:
    case Opcode::kTranspose:
    case Opcode::kConvert:
    case Opcode::kSelect:
    case Opcode::kClamp:
    case Opcode::kCompare:
    case Opcode::kSlice:
    case Opcode::kReverse:
    case Opcode::kPad:
    case Opcode::kConcatenate:
    case Opcode::kDynamicSlice:
    case Opcode::kDynamicUpdateSlice:
    case Opcode::kReduce:
    case Opcode::kDot:
    case Opcode::kAbs:
    case Opcode::kNegate:
    case Opcode::kSign:
    case Opcode::kNot:
    case Opcode::kExp:
    case Opcode::kExpm1:
    case Opcode::kLog:
    case Opcode::kLog1p:
    case Opcode::kSqrt:
    case Opcode::kRsqrt:
    case Opcode::kTanh:
    case Opcode::kLogistic:
    case Opcode::kCos:
    case Opcode::kSin:
    case Opcode::kFloor:
    case Opcode::kCeil:
    case Opcode::kRoundNearestAfz:
    case Opcode::kRoundNearestEven:
    case Opcode::kIsFinite:
    case Opcode::kAdd:
    case Opcode::kSubtract:
    case Opcode::kMultiply:
    case Opcode::kDivide:
    case Opcode::kRemainder:
    case Opcode::kPower:
    case Opcode::kAtan2:
    case Opcode::kMaximum:
    case Opcode::kMinimum:
    case Opcode::kAnd:
    case Opcode::kOr:
    case Opcode::kXor:
    case Opcode::kShiftLeft:
    case Opcode::kShiftRightLogical:
    case Opcode::kShiftRightArithmetic:
      return true;
    default:
      return false;
  }
}

bool IsCoreElementwiseOp(Opcode op) {
  switch (op) {
    case Opcode::kIota:
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
    case Opcode::kBitcast:
    case Opcode::kCall:
    case Opcode::kFusion:
      return false;
    default:
      return IsCoreOp(op);
  }
}

}  // namespace hlocache::interp
