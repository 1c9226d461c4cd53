// The core ops' shape rules: every shape the evaluation would index out of bounds with, or
// mix element kinds in, is refused naming file:line.
#include "compiler/interp/evaluator.h"

namespace hlocache::interp::internal {

Status OperandCountStatus(const hlo::Module& m, const hlo::Instruction& inst) {
  if (IsExtendedOp(inst.opcode.opcode)) return Status::Ok();  // Its family checks the count.
  size_t min = 0, max = 0;
  switch (inst.opcode.opcode) {
    case Opcode::kConstant:
    case Opcode::kIota:
    case Opcode::kParameter:
      break;
    case Opcode::kTuple:
    case Opcode::kCall:
    case Opcode::kFusion:
      max = SIZE_MAX;
      break;
    case Opcode::kBroadcast:
    case Opcode::kReshape:
    case Opcode::kBitcast:
    case Opcode::kCopy:
    case Opcode::kTranspose:
    case Opcode::kConvert:
    case Opcode::kSlice:
    case Opcode::kReverse:
    case Opcode::kGetTupleElement:
      min = max = 1;
      break;
    case Opcode::kCompare:
    case Opcode::kDot:
    case Opcode::kPad:
      min = max = 2;
      break;
    case Opcode::kSelect:
    case Opcode::kClamp:
      min = max = 3;
      break;
    case Opcode::kDynamicSlice:
    case Opcode::kConcatenate:
      min = 1;
      max = SIZE_MAX;
      break;
    case Opcode::kDynamicUpdateSlice:
    case Opcode::kReduce:
      min = 2;
      max = SIZE_MAX;
      break;
    default:  // Elementwise: one or two operands.
      min = 1;
      max = 2;
      break;
  }
  if (inst.operands.size() < min || inst.operands.size() > max) {
    return InvalidArgument(InstructionLocation(m, inst) + " has " +
                           std::to_string(inst.operands.size()) + " operands");
  }
  return Status::Ok();
}

// The parser does not infer shapes, so a module may claim any shape for any instruction. The
// evaluation below indexes operands by the output's shape; this refuses every combination that
// would make it read or write out of bounds, or mix element kinds.
Status Evaluator::Bad(const Instruction& inst, const std::string& why) const {
  return Malformed(inst, why);
}

// dot's shape rules, on the operands `lhs` and `rhs` (scaled-dot's dequantized operands too).
Status Evaluator::CheckDot(const Instruction& inst, const ShapeView& lhs, const ShapeView& rhs,
                           const ShapeView& out) const {
  const auto& od = out.shape().dims;
  const auto lb = IntsOrEmpty(inst, "lhs_batch_dims"), rb = IntsOrEmpty(inst, "rhs_batch_dims");
  const auto lc = IntsOrEmpty(inst, "lhs_contracting_dims");
  const auto rc = IntsOrEmpty(inst, "rhs_contracting_dims");
  const auto& ld = lhs.shape().dims;
  const auto& rd = rhs.shape().dims;
  std::vector<int64_t> lall = lb, rall = rb;
  lall.insert(lall.end(), lc.begin(), lc.end());
  rall.insert(rall.end(), rc.begin(), rc.end());
  if (lb.size() != rb.size() || lc.size() != rc.size() ||
      !hlo::AreDistinctDimensions(lall, ld.size()) ||
      !hlo::AreDistinctDimensions(rall, rd.size())) {
    return Bad(inst, "batch and contracting dimensions do not pair up");
  }
  std::vector<int64_t> want;
  for (size_t k = 0; k < lb.size(); ++k) {
    if (ld[static_cast<size_t>(lb[k])] != rd[static_cast<size_t>(rb[k])]) {
      return Bad(inst, "batch dimensions differ in size");
    }
    want.push_back(ld[static_cast<size_t>(lb[k])]);
  }
  for (size_t k = 0; k < lc.size(); ++k) {
    if (ld[static_cast<size_t>(lc[k])] != rd[static_cast<size_t>(rc[k])]) {
      return Bad(inst, "contracting dimensions differ in size");
    }
  }
  for (size_t d = 0; d < ld.size(); ++d) {
    if (std::find(lall.begin(), lall.end(), static_cast<int64_t>(d)) == lall.end()) {
      want.push_back(ld[d]);
    }
  }
  for (size_t d = 0; d < rd.size(); ++d) {
    if (std::find(rall.begin(), rall.end(), static_cast<int64_t>(d)) == rall.end()) {
      want.push_back(rd[d]);
    }
  }
  if (want != od) return Bad(inst, "the result's dimensions are not batch, lhs free, rhs free");
  // Integer (and pred) operands of a float dot are converted to its type (XLA's operand
  // upcasting, as in an int4-weight matmul); floats into an integer result are not.
  if ((lhs.is_float() && !out.is_float()) || (rhs.is_float() && !out.is_float())) {
    return Bad(inst, "mixes integer and floating-point operands");
  }
  return Status::Ok();
}

Status Evaluator::CheckShapes(const Instruction& inst, std::span<const ShapeView> operands,
                              const ShapeView& out) const {
  const Opcode op = inst.opcode.opcode;
  auto bad = [&](const std::string& why) { return Malformed(inst, why); };
  auto arg = [&](size_t k) -> const ShapeView& { return operands[k]; };
  for (size_t k = 0; k < inst.operands.size(); ++k) {
    if (arg(k).is_tuple()) return bad("operand " + std::to_string(k) + " is a tuple");
  }
  if (out.is_tuple() && op != Opcode::kReduce) return bad("a tuple result");
  const auto& od = out.shape().dims;
  const size_t rank = inst.operands.empty() ? 0 : arg(0).shape().dims.size();
  const auto& in_dims = inst.operands.empty() ? od : arg(0).shape().dims;
  auto is_scalar_int = [&](size_t k) { return arg(k).size() == 1 && !arg(k).is_float(); };
  switch (op) {
    case Opcode::kConstant:
    case Opcode::kIota:
      return Status::Ok();
    case Opcode::kBroadcast: {
      HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> d, Ints(inst, "dimensions"));
      if (d.size() != rank) return bad("dimensions={...} does not match the operand's rank");
      for (size_t k = 0; k < d.size(); ++k) {
        if (d[k] < 0 || static_cast<size_t>(d[k]) >= od.size() ||
            od[static_cast<size_t>(d[k])] != in_dims[k]) {
          return bad("operand dimension " + std::to_string(k) + " does not map onto the result");
        }
      }
      break;
    }
    case Opcode::kTranspose: {
      HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> d, Ints(inst, "dimensions"));
      if (d.size() != rank || od.size() != rank || !hlo::AreDistinctDimensions(d, rank)) {
        return bad("dimensions={...} is not a permutation of the operand's");
      }
      for (size_t k = 0; k < rank; ++k) {
        if (od[k] != in_dims[static_cast<size_t>(d[k])]) return bad("result dimensions differ");
      }
      break;
    }
    case Opcode::kReshape:
    case Opcode::kBitcast:
    case Opcode::kCopy:
    case Opcode::kConvert:
      if (arg(0).size() != out.size()) return bad("the element count changes");
      break;
    case Opcode::kSelect:
      if (arg(0).type() != PrimitiveType::kPred ||
          (arg(0).size() != out.size() && arg(0).size() != 1)) {
        return bad("the predicate is not pred of the result's shape");
      }
      for (size_t k : {1, 2}) {
        if (arg(k).type() != out.type() || arg(k).size() != out.size()) {
          return bad("operand " + std::to_string(k) + " is not of the result's shape");
        }
      }
      break;
    case Opcode::kClamp:
      for (size_t k : {0, 1, 2}) {
        if (arg(k).type() != out.type() ||
            (arg(k).size() != out.size() && !(k != 1 && arg(k).size() == 1))) {
          return bad("operand " + std::to_string(k) + " is not of the result's shape");
        }
      }
      break;
    case Opcode::kCompare:
      if (out.type() != PrimitiveType::kPred || arg(0).type() != arg(1).type() ||
          arg(0).size() != out.size() || arg(1).size() != out.size()) {
        return bad("operands and result do not match");
      }
      break;
    case Opcode::kDot:
      return CheckDot(inst, arg(0), arg(1), out);
    case Opcode::kReduce: {
      HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> d, Ints(inst, "dimensions"));
      const size_t n = inst.operands.size() / 2;
      if (inst.operands.size() % 2 != 0 || !hlo::AreDistinctDimensions(d, rank)) {
        return bad("operands, inits or dimensions={...} do not pair up");
      }
      std::vector<int64_t> kept;
      for (size_t k = 0; k < rank; ++k) {
        if (std::find(d.begin(), d.end(), static_cast<int64_t>(k)) == d.end()) {
          kept.push_back(in_dims[k]);
        }
      }
      if (out.is_tuple() != (n > 1) || (n > 1 && out.elements().size() != n)) {
        return bad("the result does not hold one value per operand");
      }
      for (size_t k = 0; k < n; ++k) {
        const ShapeView result = n == 1 ? out : out.elements()[k];
        if (result.is_tuple() || arg(k).shape().dims != in_dims || arg(n + k).size() != 1 ||
            arg(n + k).type() != arg(k).type() || result.type() != arg(k).type() ||
            result.shape().dims != kept) {
          return bad("operand " + std::to_string(k) + ", its init and its result disagree");
        }
      }
      break;
    }
    case Opcode::kSlice: {
      HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> spec, SliceSpec(inst));
      if (spec.size() != 3 * rank || od.size() != rank) return bad("slice={...} of another rank");
      for (size_t k = 0; k < rank; ++k) {
        const int64_t start = spec[3 * k], limit = spec[3 * k + 1], stride = spec[3 * k + 2];
        if (start < 0 || limit < start || limit > in_dims[k] || stride < 1 ||
            od[k] != (limit - start + stride - 1) / stride) {
          return bad("slice bounds of dimension " + std::to_string(k) + " do not fit");
        }
      }
      break;
    }
    case Opcode::kPad: {
      HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> spec, PaddingSpec(inst));
      if (spec.size() != 3 * rank || od.size() != rank || arg(1).size() != 1 ||
          arg(1).type() != out.type()) {
        return bad("padding or the padding value does not fit the operand");
      }
      for (size_t k = 0; k < rank; ++k) {
        const int64_t low = spec[3 * k], high = spec[3 * k + 1], interior = spec[3 * k + 2];
        if (interior < 0 ||
            od[k] != low + high + in_dims[k] + std::max<int64_t>(in_dims[k] - 1, 0) * interior) {
          return bad("padded size of dimension " + std::to_string(k) + " is wrong");
        }
      }
      break;
    }
    case Opcode::kReverse: {
      HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> d, Ints(inst, "dimensions"));
      if (!hlo::AreDistinctDimensions(d, rank) || od != in_dims)
        return bad("dimensions={...} do not fit");
      break;
    }
    case Opcode::kConcatenate: {
      HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> d, Ints(inst, "dimensions"));
      if (d.size() != 1 || d[0] < 0 || static_cast<size_t>(d[0]) >= rank || od.size() != rank) {
        return bad("dimensions={...} is not one dimension of the operands");
      }
      int64_t total = 0;
      for (size_t k = 0; k < inst.operands.size(); ++k) {
        const auto& kd = arg(k).shape().dims;
        if (kd.size() != rank || arg(k).type() != out.type()) return bad("operands differ");
        for (size_t j = 0; j < rank; ++j) {
          if (j != static_cast<size_t>(d[0]) && kd[j] != od[j]) return bad("operands differ");
        }
        total += kd[static_cast<size_t>(d[0])];
      }
      if (total != od[static_cast<size_t>(d[0])]) return bad("sizes do not add up");
      break;
    }
    case Opcode::kDynamicSlice:
    case Opcode::kDynamicUpdateSlice: {
      const size_t first = op == Opcode::kDynamicSlice ? 1 : 2;
      if (inst.operands.size() != first + rank) return bad("wants one start index a dimension");
      for (size_t k = first; k < inst.operands.size(); ++k) {
        if (!is_scalar_int(k)) return bad("start indices must be integer scalars");
      }
      const auto& window = op == Opcode::kDynamicSlice ? od : arg(1).shape().dims;
      if (window.size() != rank) return bad("window of another rank");
      for (size_t k = 0; k < rank; ++k) {
        if (window[k] > in_dims[k]) return bad("window larger than the operand");
      }
      if (op == Opcode::kDynamicUpdateSlice &&
          (od != in_dims || arg(1).type() != out.type() || arg(0).type() != out.type())) {
        return bad("the result is not of the operand's shape");
      }
      break;
    }
    default: {  // Elementwise.
      for (size_t k = 0; k < inst.operands.size(); ++k) {
        if (arg(k).size() != out.size() || arg(k).type() != arg(0).type()) {
          return bad("operand " + std::to_string(k) + " is not of the result's shape");
        }
      }
      const bool to_pred = op == Opcode::kIsFinite;
      if (to_pred ? (out.type() != PrimitiveType::kPred || !arg(0).is_float())
                  : arg(0).type() != out.type()) {
        return bad("the result's element type is not the operands'");
      }
      break;
    }
  }
  return Status::Ok();
}

}  // namespace hlocache::interp::internal
