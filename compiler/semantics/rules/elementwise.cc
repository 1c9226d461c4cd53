// The shape rules of the elementwise ops beyond the core (popcnt, clz, cbrt, tan, erf, the
// inverse and hyperbolic functions, reduce-precision, bitcast-convert, stochastic-convert);
// their evaluation is compiler/interp/eval_elementwise.cc.
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "compiler/semantics/half.h"
#include "compiler/semantics/rules/families.h"

namespace hlocache::interp {
namespace {

using hlo::Instruction;
using hlo::Opcode;
using hlo::PrimitiveType;
using hlo::Shape;

bool Takes(Opcode op) {
  switch (op) {
    case Opcode::kPopulationCount:
    case Opcode::kClz:
    case Opcode::kCbrt:
    case Opcode::kTan:
    case Opcode::kErf:
    case Opcode::kAcos:
    case Opcode::kAcosh:
    case Opcode::kAsin:
    case Opcode::kAsinh:
    case Opcode::kAtan:
    case Opcode::kAtanh:
    case Opcode::kCosh:
    case Opcode::kSinh:
    case Opcode::kReducePrecision:
    case Opcode::kBitcastConvert:
    case Opcode::kStochasticConvert:
      return true;
    default:
      return false;
  }
}

bool IsInteger(PrimitiveType t) {
  return t != PrimitiveType::kPred && !hlo::IsFloat(t) && hlo::PrimitiveTypeBits(t) > 0;
}

Status CheckBitcastConvert(const ShapeContext& ctx, const Instruction& inst, const Shape& in) {
  const Shape& out = inst.shape;
  if (in.type == PrimitiveType::kPred || out.type == PrimitiveType::kPred) {
    return ctx.Unsupported(inst, "bitcast-convert of pred");
  }
  const int from = hlo::PrimitiveTypeBits(in.type), to = hlo::PrimitiveTypeBits(out.type);
  if (from <= 0 || to <= 0) return ctx.Malformed(inst, "converts no array element type");
  if (from != to && (from < 8 || to < 8)) {
    // Their elements are a byte each here, not packed: no bytes to regroup.
    return ctx.Unsupported(inst, "bitcast-convert between a sub-byte type and another width");
  }
  std::vector<int64_t> want(in.dims.begin(), in.dims.end());
  if (from > to) {
    want.push_back(from / to);
  } else if (from < to) {
    if (want.empty() || want.back() != to / from) {
      return ctx.Malformed(inst, "the operand's last dimension is not " +
                                     std::to_string(to / from) + ", the ratio of the widths");
    }
    want.pop_back();
  }
  if (out.dims != want) {
    return ctx.Malformed(
        inst, "the result " + hlo::CanonicalShapeText(out) + " does not hold the operand's bytes");
  }
  return Status::Ok();
}

Status CheckStochasticConvert(const ShapeContext& ctx, const Instruction& inst,
                              std::span<const Shape* const> operands) {
  if (operands.size() != 2) return ctx.Malformed(inst, "takes an operand and random bits");
  const Shape& x = *operands[0];
  const Shape& r = *operands[1];
  const Shape& out = inst.shape;
  if (!x.IsArray() || !r.IsArray() || !out.IsArray()) return ctx.Malformed(inst, "takes arrays");
  if (r.dims != x.dims || out.dims != x.dims) {
    return ctx.Malformed(inst,
                         "the random bits and the result are not of the operand's dimensions");
  }
  if (!hlo::IsFloat(x.type) || !hlo::IsUnsignedInt(r.type) ||
      hlo::PrimitiveTypeBits(r.type) != hlo::PrimitiveTypeBits(x.type)) {
    return ctx.Malformed(inst, "takes a float and unsigned random bits of its width");
  }
  if (hlo::PrimitiveTypeBits(x.type) < 16) {
    return ctx.Unsupported(inst,
                           "stochastic-convert of " + std::string(hlo::PrimitiveTypeName(x.type)));
  }
  if (!hlo::IsSignedInt(out.type) || hlo::PrimitiveTypeBits(out.type) < 8) {
    return ctx.Unsupported(inst, "stochastic-convert into " +
                                     std::string(hlo::PrimitiveTypeName(out.type)) +
                                     " (XLA converts into signed integers)");
  }
  return Status::Ok();
}

Status Check(const ShapeContext& ctx, const Instruction& inst,
             std::span<const Shape* const> operands) {
  if (inst.opcode.opcode == Opcode::kStochasticConvert) {
    return CheckStochasticConvert(ctx, inst, operands);
  }
  if (operands.size() != 1) return ctx.Malformed(inst, "takes one operand");
  const Shape& in = *operands[0];
  if (!in.IsArray() || !inst.shape.IsArray()) return ctx.Malformed(inst, "takes arrays");
  const Opcode op = inst.opcode.opcode;
  if (op == Opcode::kBitcastConvert) return CheckBitcastConvert(ctx, inst, in);
  if (in.dims != inst.shape.dims || in.type != inst.shape.type) {
    return ctx.Malformed(inst, "the result is not of the operand's shape");
  }
  const bool counts = op == Opcode::kPopulationCount || op == Opcode::kClz;
  if (counts && !IsInteger(in.type)) return ctx.Malformed(inst, "counts bits of integers only");
  if (!counts && !hlo::IsFloat(in.type)) return ctx.Malformed(inst, "takes floats only");
  if (op == Opcode::kReducePrecision) {
    HLOCACHE_ASSIGN_OR_RETURN(int64_t e, ctx.IntOr(inst, "exponent_bits", -1));
    HLOCACHE_ASSIGN_OR_RETURN(int64_t m, ctx.IntOr(inst, "mantissa_bits", -1));
    if (e < 1 || e > 64 || m < 0 || m > 64) {
      return ctx.Malformed(inst, "needs exponent_bits >= 1 and mantissa_bits >= 0");
    }
  }
  return Status::Ok();
}

}  // namespace

ShapeRules ElementwiseRules() { return {Takes, Check}; }

}  // namespace hlocache::interp
