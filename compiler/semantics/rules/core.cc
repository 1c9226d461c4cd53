// The core ops' shape rules: every shape their evaluation would index out of bounds with, or
// mix element kinds in, is refused naming file:line.
#include <algorithm>
#include <charconv>
#include <string>

#include "compiler/semantics/core_ops.h"
#include "compiler/semantics/rules/families.h"
#include "compiler/semantics/shape_rules.h"

namespace hlocache::interp {
namespace {

using hlo::Instruction;
using hlo::Opcode;
using hlo::PrimitiveType;
using hlo::Shape;

// What shape checking needs to know of a value: its shape. Lets one checker serve the
// interpreter (on literals) and the code generator (on declared shapes).
class ShapeView {
 public:
  explicit ShapeView(const Shape& shape) : shape_(&shape) {}
  const Shape& shape() const { return *shape_; }
  PrimitiveType type() const { return shape_->type; }
  bool is_tuple() const { return shape_->IsTuple(); }
  bool is_float() const { return hlo::IsFloat(shape_->type); }
  size_t size() const {
    auto n = shape_->BoundElementCount();  // A declared dynamic shape at its bounds.
    return n ? static_cast<size_t>(*n) : 0;
  }
  std::vector<ShapeView> elements() const {
    std::vector<ShapeView> out;
    for (const Shape& e : shape_->tuple_elements) out.emplace_back(e);
    return out;
  }

 private:
  const Shape* shape_;
};

// dot's shape rules, on the operands `lhs` and `rhs` (scaled-dot's dequantized operands too).
Status CheckDot(const ShapeContext& ctx, const Instruction& inst, const ShapeView& lhs,
                const ShapeView& rhs, const ShapeView& out) {
  const hlo::Module& m = ctx.module();
  auto ints_or_empty = [&](const char* name) -> std::vector<int64_t> {
    const hlo::Attribute* a = inst.FindAttribute(name);
    if (a == nullptr) return {};
    auto v = m.IntList(*a);
    return v ? *v : std::vector<int64_t>();
  };
  const auto& od = out.shape().dims;
  const auto lb = ints_or_empty("lhs_batch_dims"), rb = ints_or_empty("rhs_batch_dims");
  const auto lc = ints_or_empty("lhs_contracting_dims");
  const auto rc = ints_or_empty("rhs_contracting_dims");
  const auto& ld = lhs.shape().dims;
  const auto& rd = rhs.shape().dims;
  std::vector<int64_t> lall = lb, rall = rb;
  lall.insert(lall.end(), lc.begin(), lc.end());
  rall.insert(rall.end(), rc.begin(), rc.end());
  if (lb.size() != rb.size() || lc.size() != rc.size() ||
      !hlo::AreDistinctDimensions(lall, ld.size()) ||
      !hlo::AreDistinctDimensions(rall, rd.size())) {
    return ctx.Malformed(inst, "batch and contracting dimensions do not pair up");
  }
  std::vector<int64_t> want;
  for (size_t k = 0; k < lb.size(); ++k) {
    if (ld[static_cast<size_t>(lb[k])] != rd[static_cast<size_t>(rb[k])]) {
      return ctx.Malformed(inst, "batch dimensions differ in size");
    }
    want.push_back(ld[static_cast<size_t>(lb[k])]);
  }
  for (size_t k = 0; k < lc.size(); ++k) {
    if (ld[static_cast<size_t>(lc[k])] != rd[static_cast<size_t>(rc[k])]) {
      return ctx.Malformed(inst, "contracting dimensions differ in size");
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
  if (want != od)
    return ctx.Malformed(inst, "the result's dimensions are not batch, lhs free, rhs free");
  // Integer (and pred) operands of a float dot are converted to its type (XLA's operand
  // upcasting, as in an int4-weight matmul); floats into an integer result are not.
  if ((lhs.is_float() && !out.is_float()) || (rhs.is_float() && !out.is_float())) {
    return ctx.Malformed(inst, "mixes integer and floating-point operands");
  }
  return Status::Ok();
}

Status CheckCore(const ShapeContext& ctx, const Instruction& inst,
                 std::span<const ShapeView> operands, const ShapeView& out) {
  const Opcode op = inst.opcode.opcode;
  auto bad = [&](const std::string& why) { return ctx.Malformed(inst, why); };
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
      HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> d, ctx.Ints(inst, "dimensions"));
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
      HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> d, ctx.Ints(inst, "dimensions"));
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
      return CheckDot(ctx, inst, arg(0), arg(1), out);
    case Opcode::kReduce: {
      HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> d, ctx.Ints(inst, "dimensions"));
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
      HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> spec, SliceSpec(ctx.module(), inst));
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
      HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> spec, PaddingSpec(ctx.module(), inst));
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
      HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> d, ctx.Ints(inst, "dimensions"));
      if (!hlo::AreDistinctDimensions(d, rank) || od != in_dims)
        return bad("dimensions={...} do not fit");
      break;
    }
    case Opcode::kConcatenate: {
      HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> d, ctx.Ints(inst, "dimensions"));
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

}  // namespace

Status CheckOperandCount(const hlo::Module& m, const hlo::Instruction& inst) {
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

Result<std::vector<int64_t>> SliceSpec(const hlo::Module& m, const hlo::Instruction& inst) {
  const ShapeContext ctx(m);
  const hlo::Attribute* a = inst.FindAttribute("slice");
  if (a == nullptr) return Error(ctx.Unsupported(inst, "slice without slice={...}"));
  std::vector<int64_t> out;
  std::vector<int64_t> dim;
  for (uint32_t t = a->value.begin; t < a->value.end; ++t) {
    const hlo::Token& tok = m.tokens[t];
    if (tok.kind == hlo::TokenKind::kInt) {
      int64_t v = 0;
      std::string_view text = m.TokenText(tok);
      std::from_chars(text.data(), text.data() + text.size(), v);
      dim.push_back(v);
    } else if (tok.kind == hlo::TokenKind::kRBracket) {
      if (dim.size() == 2) dim.push_back(1);
      if (dim.size() != 3) return Error(ctx.Unsupported(inst, "this slice={...} spelling"));
      out.insert(out.end(), dim.begin(), dim.end());
      dim.clear();
    }
  }
  return out;
}

// padding=low_high_interior per dimension, joined by 'x'.
Result<std::vector<int64_t>> PaddingSpec(const hlo::Module& m, const hlo::Instruction& inst) {
  const ShapeContext ctx(m);
  const hlo::Attribute* a = inst.FindAttribute("padding");
  if (a == nullptr) return Error(ctx.Unsupported(inst, "pad without padding="));
  std::string text;
  for (uint32_t t = a->value.begin; t < a->value.end; ++t) text += m.TokenText(t);
  std::vector<int64_t> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('x', pos);
    if (end == std::string::npos) end = text.size();
    const std::string dim = text.substr(pos, end - pos);
    std::vector<int64_t> parts;
    size_t p = 0;
    while (p <= dim.size()) {
      size_t q = dim.find('_', p);
      if (q == std::string::npos) q = dim.size();
      int64_t v = 0;
      if (std::from_chars(dim.data() + p, dim.data() + q, v).ec != std::errc()) {
        return Error(ctx.Unsupported(inst, "padding=" + text));
      }
      parts.push_back(v);
      p = q + 1;
    }
    if (parts.size() == 2) parts.push_back(0);
    if (parts.size() != 3) return Error(ctx.Unsupported(inst, "padding=" + text));
    out.insert(out.end(), parts.begin(), parts.end());
    pos = end + 1;
  }
  return out;
}

Status CheckCoreShapes(const ShapeContext& ctx, const hlo::Instruction& inst,
                       std::span<const hlo::Shape* const> operand_shapes, const hlo::Shape& out) {
  HLOCACHE_RETURN_IF_ERROR(CheckOperandCount(ctx.module(), inst));
  std::vector<ShapeView> operands;
  operands.reserve(operand_shapes.size());
  for (const hlo::Shape* s : operand_shapes) operands.emplace_back(*s);
  return CheckCore(ctx, inst, operands, ShapeView(out));
}

Status CheckShapes(const hlo::Module& module, const hlo::Instruction& inst,
                   std::span<const hlo::Shape* const> operand_shapes) {
  const ShapeContext ctx(module);
  if (IsExtendedOp(inst.opcode.opcode)) return CheckExtendedShapes(ctx, inst, operand_shapes);
  return CheckCoreShapes(ctx, inst, operand_shapes, inst.shape);
}

Status CheckDotShapes(const hlo::Module& module, const hlo::Instruction& inst,
                      const hlo::Shape& lhs, const hlo::Shape& rhs) {
  if (!lhs.IsArray() || !rhs.IsArray() || !inst.shape.IsArray()) {
    return MalformedInstruction(module, inst, "takes and returns arrays");
  }
  return CheckDot(ShapeContext(module), inst, ShapeView(lhs), ShapeView(rhs),
                  ShapeView(inst.shape));
}

}  // namespace hlocache::interp
