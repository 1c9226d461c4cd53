// The core elementwise ops lowered: compare and the arithmetic, computed as the interpreter
// defines them.
#include "compiler/codegen/cpu_lowering.h"

namespace hlocache::compiler::lowering_internal {

Status Lowering::Compare(int32_t index, const Instruction& inst) {
  const hlo::Attribute* a = inst.FindAttribute("direction");
  if (a == nullptr) return Malformed(inst, "no direction");
  const std::string_view dir = m_.TokenText(a->value.begin);
  const char* c = CompareOperator(dir);
  if (c == nullptr) return Unsupported(inst, "direction " + std::string(dir));
  const char* key = CompareKey(m_, inst, OperandShape(inst, 0).type);
  Elementwise(index, inst,
              std::string(key) + Read(inst, 0) + ")) " + c + " " + key + Read(inst, 1) + "))");
  return Status::Ok();
}

namespace {

// The prelude's f32 function for a unary op, computed in float and vectorized
// (compiler/codegen/prelude/hc_cpu.h); nullptr for the ops computed in double.
const char* VectorMathFunction(Opcode op) {
  switch (op) {
    case Opcode::kExp:
      return "hc_vm_exp";
    case Opcode::kExpm1:
      return "hc_vm_expm1";
    case Opcode::kLog:
      return "hc_vm_log";
    case Opcode::kLog1p:
      return "hc_vm_log1p";
    case Opcode::kTanh:
      return "hc_vm_tanh";
    case Opcode::kSin:
      return "hc_vm_sin";
    case Opcode::kCos:
      return "hc_vm_cos";
    case Opcode::kSqrt:
      return "hc_vm_sqrt";
    case Opcode::kRsqrt:
      return "hc_vm_rsqrt";
    case Opcode::kLogistic:
      return "hc_vm_logistic";
    default:
      return nullptr;
  }
}

}  // namespace

Status Lowering::ElementwiseMath(int32_t index, const Instruction& inst) {
  const Opcode op = inst.opcode.opcode;
  const std::string t = CType(inst.shape.type);
  const bool is_float = hlo::IsFloat(inst.shape.type);
  const bool logical =
      op == Opcode::kAnd || op == Opcode::kOr || op == Opcode::kXor || op == Opcode::kNot;
  // What HLO does not define does not reach the C++ compiler as code it would reject.
  if (op != Opcode::kIsFinite && inst.shape.type == PrimitiveType::kPred && !logical) {
    return Unsupported(inst, "arithmetic on pred");
  }
  if (is_float && logical) return Unsupported(inst, "bitwise ops on floats");
  auto call = [&](const std::string& f) {
    std::string e = f + "<" + t + ">(" + Read(inst, 0);
    if (inst.operands.size() == 2) e += ", " + Read(inst, 1);
    Elementwise(index, inst, e + ")");
    return Status::Ok();
  };
  auto math = [&](const std::string& f) {  // Floats only: computed in double, rounded once.
    if (!is_float) return Unsupported(inst, std::string(hlo::OpcodeName(op)) + " on integers");
    Elementwise(index, inst, "hc_store<" + t + ">(" + f + "(hc_load(" + Read(inst, 0) + ")))");
    return Status::Ok();
  };
  if (const char* helper = ElementwiseHelper(op, inst.operands.size())) return call(helper);
  if (inst.shape.type == PrimitiveType::kF32) {
    if (const char* f = VectorMathFunction(op)) {
      Elementwise(index, inst, std::string(f) + "(" + Read(inst, 0) + ")");
      return Status::Ok();
    }
  }
  // f16 and bf16 square roots in float: exact (hc_loadf in the prelude says why).
  if (op == Opcode::kSqrt &&
      (inst.shape.type == PrimitiveType::kF16 || inst.shape.type == PrimitiveType::kBF16)) {
    return call("hc_half_sqrt");
  }
  if (const char* f = inst.operands.size() == 1 ? ElementwiseMathFunction(op) : nullptr) {
    return math(std::string("std::") + f);
  }
  if (inst.operands.size() == 1) {
    switch (op) {
      case Opcode::kRsqrt:
        return math("1.0 / std::sqrt");
      case Opcode::kRoundNearestEven:
        return math("std::nearbyint");
      case Opcode::kLogistic:
        if (!is_float) return Unsupported(inst, "logistic on integers");
        Elementwise(index, inst,
                    "hc_store<" + t + ">(1.0 / (1.0 + std::exp(-hc_load(" + Read(inst, 0) + "))))");
        return Status::Ok();
      case Opcode::kIsFinite:
        Elementwise(index, inst, "std::isfinite(hc_load(" + Read(inst, 0) + "))");
        return Status::Ok();
      default:
        break;
    }
  } else {
    switch (op) {
      case Opcode::kShiftLeft:
      case Opcode::kShiftRightLogical:
      case Opcode::kShiftRightArithmetic:
        if (is_float || inst.shape.type == PrimitiveType::kPred) {
          return Unsupported(inst, "shifts of other than integers");
        }
        if (op == Opcode::kShiftLeft) return call("hc_shl");
        // The right shifts see a sub-byte value's own bits (its width as an argument).
        Elementwise(index, inst,
                    std::string(op == Opcode::kShiftRightLogical ? "hc_shrl<" : "hc_shra<") +
                        TypeAndWidth(inst.shape.type) + ">(" + Read(inst, 0) + ", " +
                        Read(inst, 1) + ")");
        return Status::Ok();
      case Opcode::kAnd:
      case Opcode::kOr:
      case Opcode::kXor: {
        const char* c = op == Opcode::kAnd ? "&" : op == Opcode::kOr ? "|" : "^";
        Elementwise(
            index, inst,
            "static_cast<" + t + ">(" + Read(inst, 0) + " " + c + " " + Read(inst, 1) + ")");
        return Status::Ok();
      }
      case Opcode::kAtan2:
        if (!is_float) return Unsupported(inst, "atan2 on integers");
        Elementwise(index, inst,
                    "hc_store<" + t + ">(std::atan2(hc_load(" + Read(inst, 0) + "), hc_load(" +
                        Read(inst, 1) + ")))");
        return Status::Ok();
      default:
        break;
    }
  }
  return Unsupported(inst, "'" + std::string(hlo::OpcodeName(op)) + "'");
}

}  // namespace hlocache::compiler::lowering_internal
