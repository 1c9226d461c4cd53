// The shape rules of infeed, outfeed, and send and recv to and from the host; their evaluation
// is compiler/interp/eval_host.cc.
#include <string>

#include "compiler/semantics/rules/families.h"
#include "compiler/semantics/signature.h"

namespace hlocache::interp {
namespace {

using hlo::Instruction;
using hlo::Opcode;
using hlo::PrimitiveType;
using hlo::Shape;

bool Takes(Opcode op) { return hlo::IsHostTransfer(op); }

bool IsToken(const Shape& s) { return s.IsArray() && s.type == PrimitiveType::kToken; }

Shape TokenShape() { return ArrayShape(PrimitiveType::kToken); }

// Whether `s` is (value, rest...) with `rest` the shapes after the value.
bool IsValueAnd(const Shape& s, const std::vector<Shape>& rest) {
  if (!s.IsTuple() || s.tuple_elements.size() != rest.size() + 1) return false;
  for (size_t k = 0; k < rest.size(); ++k) {
    if (!hlo::SameValues(s.tuple_elements[k + 1], rest[k])) return false;
  }
  return true;
}

Status CheckChannel(const ShapeContext& ctx, const Instruction& inst) {
  if (ctx.AttributeText(inst, "is_host_transfer") != "true") {
    return ctx.Unsupported(inst, "a send or recv between devices (is_host_transfer=false)");
  }
  HLOCACHE_ASSIGN_OR_RETURN(int64_t channel, ctx.IntOr(inst, "channel_id", -1));
  if (channel < 0) return ctx.Malformed(inst, "channel_id is not a non-negative integer");
  return Status::Ok();
}

Status Check(const ShapeContext& ctx, const Instruction& inst,
             std::span<const Shape* const> operands) {
  const Shape& r = inst.shape;
  const Shape u32 = ArrayShape(PrimitiveType::kU32);
  switch (inst.opcode.opcode) {
    case Opcode::kInfeed:
      if (operands.size() != 1 || !IsToken(*operands[0])) {
        return ctx.Malformed(inst, "takes a token");
      }
      if (!IsValueAnd(r, {TokenShape()}))
        return ctx.Malformed(inst, "the result is not (value, token)");
      return Status::Ok();
    case Opcode::kOutfeed:
      if (operands.size() != 2 || !IsToken(*operands[1])) {
        return ctx.Malformed(inst, "takes a value and a token");
      }
      if (!IsToken(r)) return ctx.Malformed(inst, "the result is not a token");
      return Status::Ok();
    case Opcode::kSend:
      HLOCACHE_RETURN_IF_ERROR(CheckChannel(ctx, inst));
      if (operands.size() != 2 || !IsToken(*operands[1])) {
        return ctx.Malformed(inst, "takes a value and a token");
      }
      if (!IsValueAnd(r, {u32, TokenShape()}) ||
          !hlo::SameValues(r.tuple_elements[0], *operands[0])) {
        return ctx.Malformed(inst, "the result is not (the value, u32[], token)");
      }
      return Status::Ok();
    case Opcode::kRecv:
      HLOCACHE_RETURN_IF_ERROR(CheckChannel(ctx, inst));
      if (operands.size() != 1 || !IsToken(*operands[0]))
        return ctx.Malformed(inst, "takes a token");
      if (!IsValueAnd(r, {u32, TokenShape()})) {
        return ctx.Malformed(inst, "the result is not (value, u32[], token)");
      }
      return Status::Ok();
    case Opcode::kSendDone:
      HLOCACHE_RETURN_IF_ERROR(CheckChannel(ctx, inst));
      if (operands.size() != 1 || !IsValueAnd(*operands[0], {u32, TokenShape()})) {
        return ctx.Malformed(inst, "takes a send's (value, u32[], token)");
      }
      if (!IsToken(r)) return ctx.Malformed(inst, "the result is not a token");
      return Status::Ok();
    default:  // recv-done.
      HLOCACHE_RETURN_IF_ERROR(CheckChannel(ctx, inst));
      if (operands.size() != 1 || !IsValueAnd(*operands[0], {u32, TokenShape()})) {
        return ctx.Malformed(inst, "takes a recv's (value, u32[], token)");
      }
      if (!IsValueAnd(r, {TokenShape()}) ||
          !hlo::SameValues(r.tuple_elements[0], operands[0]->tuple_elements[0])) {
        return ctx.Malformed(inst, "the result is not (the value received, token)");
      }
      return Status::Ok();
  }
}

}  // namespace

ShapeRules HostRules() { return {Takes, Check}; }

}  // namespace hlocache::interp
