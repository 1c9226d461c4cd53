// The shape rules of rng-bit-generator, rng-get-and-update-state and rng; their evaluation is
// compiler/interp/eval_rng.cc.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "compiler/semantics/prng.h"
#include "compiler/semantics/rules/families.h"
#include "compiler/semantics/signature.h"

namespace hlocache::interp {
namespace {

using hlo::Instruction;
using hlo::Opcode;
using hlo::PrimitiveType;
using hlo::Shape;

bool Takes(Opcode op) {
  return op == Opcode::kRngBitGenerator || op == Opcode::kRngGetAndUpdateState ||
         op == Opcode::kRng;
}

bool IsIntegerBits(PrimitiveType t) {
  switch (t) {
    case PrimitiveType::kS8:
    case PrimitiveType::kS16:
    case PrimitiveType::kS32:
    case PrimitiveType::kS64:
    case PrimitiveType::kU8:
    case PrimitiveType::kU16:
    case PrimitiveType::kU32:
    case PrimitiveType::kU64:
      return true;
    default:
      return false;
  }
}

Status Check(const ShapeContext& ctx, const Instruction& inst,
             std::span<const Shape* const> operands) {
  const Shape& r = inst.shape;
  switch (inst.opcode.opcode) {
    case Opcode::kRngGetAndUpdateState: {
      if (!operands.empty()) return ctx.Malformed(inst, "takes no operands");
      if (!hlo::SameValues(r, ArrayShape(PrimitiveType::kU64, {2}))) {
        return ctx.Malformed(inst, "the result is not u64[2]");
      }
      HLOCACHE_ASSIGN_OR_RETURN(int64_t delta, ctx.IntOr(inst, "delta", -1));
      if (delta < 0) return ctx.Malformed(inst, "delta is not a non-negative integer");
      return Status::Ok();
    }
    case Opcode::kRngBitGenerator: {
      if (operands.size() != 1 || !operands[0]->IsArray() ||
          operands[0]->type != PrimitiveType::kU64 || operands[0]->rank() != 1 ||
          operands[0]->dims[0] < 2) {
        return ctx.Malformed(inst, "the state is not u64[N], N >= 2");
      }
      if (!r.IsTuple() || r.tuple_elements.size() != 2 ||
          !hlo::SameValues(r.tuple_elements[0], *operands[0]) || !r.tuple_elements[1].IsArray()) {
        return ctx.Malformed(inst, "the result is not (the state's shape, an array)");
      }
      if (!IsIntegerBits(r.tuple_elements[1].type)) {
        return ctx.Unsupported(
            inst,
            "random bits of " + std::string(hlo::PrimitiveTypeName(r.tuple_elements[1].type)));
      }
      if (compiler::RngAlgorithm(ctx.AttributeText(inst, "algorithm")) == 0)
        return ctx.Unsupported(inst, "this algorithm");
      return Status::Ok();
    }
    default: {
      if (operands.size() < 2 || operands.size() > 3 || !r.IsArray()) {
        return ctx.Malformed(inst, "takes two scalars and returns an array");
      }
      if (operands.size() == 3 &&
          (!operands[2]->IsArray() || operands[2]->rank() != 1 || hlo::IsFloat(operands[2]->type) ||
           operands[2]->type == PrimitiveType::kPred ||
           hlo::PrimitiveTypeBits(operands[2]->type) == 0)) {
        return ctx.Malformed(inst, "the third operand is not a rank-1 integer array of dimensions");
      }
      for (const Shape* s : operands.first(2)) {
        if (!hlo::SameValues(*s, ArrayShape(r.type))) {
          return ctx.Malformed(inst, "the operands are not scalars of the result's type");
        }
      }
      const std::string d = ctx.AttributeText(inst, "distribution");
      int bits = 0, mantissa = 0;
      if (d != "rng_uniform" && d != "rng_normal") {
        return ctx.Malformed(inst, "distribution is not rng_uniform or rng_normal");
      }
      if (!compiler::RngWords(r.type, bits, mantissa) || (d == "rng_normal" && mantissa == 0)) {
        return ctx.Unsupported(inst, d + " of " + std::string(hlo::PrimitiveTypeName(r.type)));
      }
      return Status::Ok();
    }
  }
}

}  // namespace

ShapeRules RngRules() { return {Takes, Check}; }

}  // namespace hlocache::interp
