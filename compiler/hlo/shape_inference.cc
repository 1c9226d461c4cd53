#include "compiler/hlo/shape_inference.h"

namespace hlocache::hlo {
namespace {

bool IsUnaryElementwise(Opcode op) {
  switch (op) {
    case Opcode::kAbs:
    case Opcode::kAcos:
    case Opcode::kAcosh:
    case Opcode::kAsin:
    case Opcode::kAsinh:
    case Opcode::kAtan:
    case Opcode::kAtanh:
    case Opcode::kCbrt:
    case Opcode::kCeil:
    case Opcode::kClz:
    case Opcode::kCopy:
    case Opcode::kCos:
    case Opcode::kCosh:
    case Opcode::kErf:
    case Opcode::kExp:
    case Opcode::kExpm1:
    case Opcode::kFloor:
    case Opcode::kLog:
    case Opcode::kLog1p:
    case Opcode::kLogistic:
    case Opcode::kNegate:
    case Opcode::kNot:
    case Opcode::kPopulationCount:
    case Opcode::kRoundNearestAfz:
    case Opcode::kRoundNearestEven:
    case Opcode::kRsqrt:
    case Opcode::kSign:
    case Opcode::kSin:
    case Opcode::kSinh:
    case Opcode::kSqrt:
    case Opcode::kTan:
    case Opcode::kTanh:
      return true;
    default:
      return false;
  }
}

bool IsBinaryElementwise(Opcode op) {
  switch (op) {
    case Opcode::kAdd:
    case Opcode::kAnd:
    case Opcode::kAtan2:
    case Opcode::kDivide:
    case Opcode::kMaximum:
    case Opcode::kMinimum:
    case Opcode::kMultiply:
    case Opcode::kOr:
    case Opcode::kPower:
    case Opcode::kRemainder:
    case Opcode::kShiftLeft:
    case Opcode::kShiftRightArithmetic:
    case Opcode::kShiftRightLogical:
    case Opcode::kSubtract:
    case Opcode::kXor:
      return true;
    default:
      return false;
  }
}

// The shape `inst` has from its operands and callees, or nullopt.
std::optional<Shape> Inferred(const Module& m, const Computation& c, const Instruction& inst) {
  if (inst.opcode.phase != AsyncPhase::kNone) return std::nullopt;
  std::vector<const Shape*> in;
  for (int32_t o : inst.operands) {
    if (o < 0 || static_cast<size_t>(o) >= c.instructions.size()) return std::nullopt;
    const Instruction& operand = c.instructions[static_cast<size_t>(o)];
    if (!operand.has_shape()) return std::nullopt;
    in.push_back(&operand.shape);
  }
  auto all_same = [&](size_t from) {
    for (size_t k = from + 1; k < in.size(); ++k) {
      if (!SameValues(*in[k], *in[from])) return false;
    }
    return in.size() > from;
  };
  auto root_of = [&](int32_t callee) -> std::optional<Shape> {
    if (callee < 0 || static_cast<size_t>(callee) >= m.computations.size()) return std::nullopt;
    const Computation& f = m.computations[static_cast<size_t>(callee)];
    if (f.root < 0 || !f.instructions[static_cast<size_t>(f.root)].has_shape()) return std::nullopt;
    return f.instructions[static_cast<size_t>(f.root)].shape;
  };
  const Opcode op = inst.opcode.opcode;
  if (IsUnaryElementwise(op) && in.size() == 1 && in[0]->IsArray()) return *in[0];
  if (IsBinaryElementwise(op) && in.size() == 2 && all_same(0) && in[0]->IsArray()) return *in[0];
  switch (op) {
    case Opcode::kCompare:
    case Opcode::kIsFinite: {
      if (in.empty() || !all_same(0) || !in[0]->IsArray()) return std::nullopt;
      Shape s = *in[0];
      s.type = PrimitiveType::kPred;
      return s;
    }
    case Opcode::kSelect:
    case Opcode::kClamp:
      if (in.size() != 3 || !in[1]->IsArray()) return std::nullopt;
      if (op == Opcode::kSelect ? !SameValues(*in[1], *in[2]) : !SameValues(*in[0], *in[2])) {
        return std::nullopt;
      }
      return *in[1];
    case Opcode::kTuple: {
      Shape s;
      for (const Shape* e : in) s.tuple_elements.push_back(*e);
      return s;
    }
    case Opcode::kGetTupleElement: {
      const Attribute* index = inst.FindAttribute("index");
      if (in.size() != 1 || index == nullptr || !in[0]->IsTuple()) return std::nullopt;
      auto i = m.Int(*index);
      if (!i || *i < 0 || static_cast<size_t>(*i) >= in[0]->tuple_elements.size()) {
        return std::nullopt;
      }
      return in[0]->tuple_elements[static_cast<size_t>(*i)];
    }
    case Opcode::kOptimizationBarrier:
      if (in.size() != 1) return std::nullopt;
      return *in[0];
    case Opcode::kAddDependency:
      if (in.size() != 2) return std::nullopt;
      return *in[0];
    case Opcode::kAfterAll: {
      Shape s;
      s.type = PrimitiveType::kToken;
      return s;
    }
    case Opcode::kCall:
    case Opcode::kFusion:
      if (inst.callees.size() != 1) return std::nullopt;
      return root_of(inst.callees[0]);
    case Opcode::kWhile:
      if (in.size() != 1) return std::nullopt;
      return *in[0];
    default:
      return std::nullopt;
  }
}

}  // namespace

void InferMissingShapes(Module& module) {
  for (bool changed = true; changed;) {
    changed = false;
    for (Computation& c : module.computations) {
      for (Instruction& inst : c.instructions) {
        if (inst.has_shape()) continue;
        if (std::optional<Shape> s = Inferred(module, c, inst)) {
          inst.shape = std::move(*s);
          inst.shape_inferred = true;
          changed = true;
        }
      }
    }
  }
}

}  // namespace hlocache::hlo
