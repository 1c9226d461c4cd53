// The core elementwise ops as CUDA expressions of element i, computed as the interpreter defines
// them.
#include "compiler/cuda/cuda_lowering.h"

namespace hlocache::compiler::cuda_lowering_internal {

// ---- Elementwise expressions --------------------------------------------------------------

// The element expression of an elementwise op whose operands' elements are `in`.
Result<std::string> CudaLowering::ElementExpr(
    const Instruction& inst, const std::vector<std::string>& in,
    const std::vector<const Shape*>& operand_shapes) const {
  const Opcode op = inst.opcode.opcode;
  const std::string t = CType(inst.shape.type);
  const bool is_float = hlo::IsFloat(inst.shape.type);
  switch (op) {
    case Opcode::kIota: {
      const hlo::Attribute* a = inst.FindAttribute("iota_dimension");
      if (a == nullptr) return Error(Malformed(inst, "no iota_dimension"));
      HLOCACHE_ASSIGN_OR_RETURN(int64_t d, m_.Int(*a));
      const auto& dims = inst.shape.dims;
      if (d < 0 || static_cast<size_t>(d) >= dims.size()) {
        return Error(Malformed(inst, "bad dimension"));
      }
      int64_t inner = 1;
      for (size_t k = static_cast<size_t>(d) + 1; k < dims.size(); ++k) inner *= dims[k];
      return "hc_cvt<" + t + ", int64_t>((i / " + Num(inner) + ") % " +
             Num(dims[static_cast<size_t>(d)]) + ")";
    }
    case Opcode::kBroadcast:  // Of one element.
      return in[0];
    case Opcode::kBitcast:
      if (!inst.shape.HasDefaultLayout() || !operand_shapes[0]->HasDefaultLayout()) {
        return Error(Unsupported(inst, "bitcast between non-default layouts"));
      }
      [[fallthrough]];
    case Opcode::kReshape:
    case Opcode::kCopy:
      if (operand_shapes[0]->type != inst.shape.type) {
        return Error(Unsupported(inst, "a change of element type"));
      }
      return in[0];
    case Opcode::kConvert:
      return "hc_cvt<" + t + ", " + CType(operand_shapes[0]->type) + ">(" + in[0] + ")";
    case Opcode::kSelect:
      return "(" + in[0] + " ? " + in[1] + " : " + in[2] + ")";
    case Opcode::kClamp:
      return "hc_clamp<" + t + ">(" + in[0] + ", " + in[1] + ", " + in[2] + ")";
    case Opcode::kCompare: {
      const hlo::Attribute* a = inst.FindAttribute("direction");
      if (a == nullptr) return Error(Malformed(inst, "no direction"));
      const std::string_view dir = m_.TokenText(a->value.begin);
      const char* c = CompareOperator(dir);
      if (c == nullptr) return Error(Unsupported(inst, "direction " + std::string(dir)));
      const std::string key = CompareKey(m_, inst, operand_shapes[0]->type);
      return "(" + key + in[0] + ")) " + c + " " + key + in[1] + ")))";
    }
    default:
      break;
  }
  const bool logical =
      op == Opcode::kAnd || op == Opcode::kOr || op == Opcode::kXor || op == Opcode::kNot;
  if (op != Opcode::kIsFinite && inst.shape.type == PrimitiveType::kPred && !logical) {
    return Error(Unsupported(inst, "arithmetic on pred"));
  }
  if (is_float && logical) return Error(Unsupported(inst, "bitwise ops on floats"));
  auto call = [&](const char* fn) {
    std::string e = std::string(fn) + "<" + t + ">(" + in[0];
    if (in.size() == 2) e += ", " + in[1];
    return e + ")";
  };
  auto math = [&](const std::string& fn) -> Result<std::string> {
    if (!is_float) {
      return Error(Unsupported(inst, std::string(hlo::OpcodeName(op)) + " on integers"));
    }
    return "hc_store<" + t + ">(" + fn + "(hc_load(" + in[0] + ")))";
  };
  if (const char* helper = ElementwiseHelper(op, in.size())) return call(helper);
  if (const char* f = in.size() == 1 ? ElementwiseMathFunction(op) : nullptr) return math(f);
  if (in.size() == 1) {
    switch (op) {
      case Opcode::kRsqrt:
        return math("1.0 / sqrt");
      case Opcode::kRoundNearestEven:
        return math("rint");
      case Opcode::kLogistic:
        return math("hc_logistic");
      case Opcode::kIsFinite:
        if (!hlo::IsFloat(operand_shapes[0]->type)) {
          return Error(Unsupported(inst, "is-finite on integers"));
        }
        return "(bool)isfinite(hc_load(" + in[0] + "))";
      default:
        break;
    }
  } else if (in.size() == 2) {
    switch (op) {
      case Opcode::kShiftLeft:
      case Opcode::kShiftRightLogical:
      case Opcode::kShiftRightArithmetic:
        if (is_float || inst.shape.type == PrimitiveType::kPred) {
          return Error(Unsupported(inst, "shifts of other than integers"));
        }
        return call(op == Opcode::kShiftLeft           ? "hc_shl"
                    : op == Opcode::kShiftRightLogical ? "hc_shrl"
                                                       : "hc_shra");
      case Opcode::kAnd:
      case Opcode::kOr:
      case Opcode::kXor: {
        const char* c = op == Opcode::kAnd ? "&" : op == Opcode::kOr ? "|" : "^";
        return "(" + t + ")(" + in[0] + " " + c + " " + in[1] + ")";
      }
      case Opcode::kAtan2:
        if (!is_float) return Error(Unsupported(inst, "atan2 on integers"));
        return "hc_store<" + t + ">(atan2(hc_load(" + in[0] + "), hc_load(" + in[1] + ")))";
      default:
        break;
    }
  }
  return Error(Unsupported(inst, "'" + std::string(hlo::OpcodeName(op)) + "'"));
}

}  // namespace hlocache::compiler::cuda_lowering_internal
